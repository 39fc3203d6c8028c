package backendtest

import (
	"fmt"
	"slices"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// AccumFrom adds in[i] + 1 to out[i] over n uint32s.
var AccumFrom = &gg.Kernel{
	Name:   "accum_from",
	Params: []gg.ParamType{gg.Pointer, gg.Pointer, gg.Int32},
	Go: func(b gg.Block, a gg.Args) {
		n := a.Int(2)
		in, out := gg.Slice[uint32](a.Ptr(0), n), gg.Slice[uint32](a.Ptr(1), n)
		for t := 0; t < b.Dim.X; t++ {
			if i := b.Idx.X*b.Dim.X + t; i < n {
				out[i] += in[i] + 1
			}
		}
	},
	CUDA: `extern "C" __global__ void accum_from(const unsigned* in, unsigned* out, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] += in[i] + 1;
}`,
}

// execSetParamsReenabledAcrossDevices is the two-GPU differential input
// that found the cuda backend's results wrong (FuzzDifferential 2977):
// kernel k2 of a graph is launched as built, then its launch is widened
// (more blocks, more threads or only a larger n) with Exec.SetParams and
// disabled for one launch (updated then disabled, or disabled then
// updated), or widened by a whole-graph update and disabled; enabled
// again, it must run the parameters last set. The graph spans devices 0
// and 1, its memory device 1's, or is all device 0's; built by capture (a
// stream of device 0 forking onto one of the other device, dependencies
// set with UpdateCaptureDependencies as the differential test does) and
// with the explicit API; the launches alternate between two streams of
// device 0. Through gpugraph on the GPU an update made before the disable
// was lost when the node was enabled again (docs/reliability.md): the cuda
// backend gives the node its parameters again, those of a per-node update
// and, pairing the nodes as the driver does, those of a whole-graph one.
func execSetParamsReenabledAcrossDevices(t *testing.T, backend string, count int, open OpenOrdinal) {
	d0, d1 := open(t, 0), open(t, 1)
	EnablePeers(t, d0, d1)
	const n = 16
	kp := func(dst, src gg.DevicePtr, grid, block, m int) gg.KernelParams {
		return gg.KernelParams{Kernel: AccumFrom, Grid: gg.Dim1(grid), Block: gg.Dim1(block), Args: []any{src, dst, m}}
	}
	for _, two := range []bool{true, false} {
		// With two, k1 and the memory are device 1's; else all is device 0's.
		other := d0
		if two {
			other = d1
		}
		a := Must[gg.DevicePtr](t)(other.Malloc(4 * n))
		b := Must[gg.DevicePtr](t)(other.Malloc(4 * n))
		c := Must[gg.DevicePtr](t)(other.Malloc(4 * n))
		s0, t0, s1 := NewStream(t, d0), NewStream(t, d0), NewStream(t, other)
		fork := Must[*gg.Event](t)(d0.NewEvent(0))
		join := Must[*gg.Event](t)(other.NewEvent(0))
		widen := []struct {
			what     string
			from, to gg.KernelParams
		}{
			{"more blocks", kp(b, a, 1, 4, 4), kp(b, a, 4, 4, n)},
			{"more threads", kp(b, a, 1, 4, 4), kp(b, a, 1, n, n)},
			{"a larger n", kp(b, a, 4, 4, 4), kp(b, a, 4, 4, n)},
		}
		for _, capture := range []bool{false, true} {
			for _, w := range widen {
				for _, order := range []string{"updated", "updated, disabled", "disabled, updated", "whole-graph update, disabled"} {
					name := fmt.Sprintf("two devices %v, captured %v, %s: %s, enabled", two, capture, w.what, order)
					disable := order != "updated"
					for _, p := range []gg.DevicePtr{a, b, c} {
						OK(t, other.Memset(gg.Memset32(p, 0, n)))
					}
					build := func(p gg.KernelParams) (g *gg.Graph, k2 *gg.Node) {
						if capture {
							OK(t, s0.BeginCapture(gg.CaptureModeGlobal))
							OK(t, s0.LaunchKernel(kp(a, b, 1, n, n))) // k0: a += b + 1
							k0 := Must[gg.CaptureInfo](t)(s0.CaptureInfo()).Dependencies
							OK(t, s0.Record(fork))
							OK(t, s1.Wait(fork))
							OK(t, s1.UpdateCaptureDependencies(k0, gg.SetCaptureDependencies))
							OK(t, s1.LaunchKernel(kp(c, a, 1, n, n))) // k1: c += a + 1
							OK(t, s1.Record(join))
							OK(t, s0.UpdateCaptureDependencies(k0, gg.SetCaptureDependencies))
							OK(t, s0.LaunchKernel(p)) // k2: b += a + 1
							k2 = Must[gg.CaptureInfo](t)(s0.CaptureInfo()).Dependencies[0]
							OK(t, s0.Wait(join))
							return EndOK(t, s0), k2
						}
						g = NewGraph(t, d0)
						k0 := Must[*gg.Node](t)(g.AddKernelNode(kp(a, b, 1, n, n)))
						Must[*gg.Node](t)(g.AddNodeOn(other, kp(c, a, 1, n, n), k0))
						return g, Must[*gg.Node](t)(g.AddKernelNode(p, k0))
					}
					g, k2 := build(w.from)
					e := Must[*gg.Exec](t)(g.Instantiate(0))
					var ra, rb, rc [n]uint32
					for l := range 3 {
						if l == 1 {
							if order == "disabled, updated" {
								OK(t, e.SetEnabled(k2, false))
							}
							if order == "whole-graph update, disabled" {
								g2, _ := build(w.to)
								Must[gg.UpdateResultInfo](t)(e.Update(g2))
								OK(t, g2.Destroy())
							} else {
								OK(t, e.SetParams(k2, w.to))
							}
							if order != "disabled, updated" && order != "updated" {
								OK(t, e.SetEnabled(k2, false))
							}
						}
						if l == 2 && disable {
							OK(t, e.SetEnabled(k2, true))
						}
						s := s0
						if l == 1 {
							s = t0
						}
						launchSync(t, e, s)
						set := w.from
						if l > 0 {
							set = w.to
						}
						m := set.Args[2].(int)
						for i := range n {
							ra[i] += rb[i] + 1
							rc[i] += ra[i] + 1
							if ran := !(disable && l == 1); ran && i < m && i < set.Grid.X*set.Block.X {
								rb[i] += ra[i] + 1
							}
						}
						for _, r := range []struct {
							name string
							p    gg.DevicePtr
							want []uint32
						}{{"a", a, ra[:]}, {"b", b, rb[:]}, {"c", c, rc[:]}} {
							if got := readU32s(t, other, r.p, n); !slices.Equal(got, r.want) {
								t.Errorf("%s: launch %d: %s = %v, want %v", name, l, r.name, got, r.want)
							}
						}
					}
					OK(t, e.Destroy())
					OK(t, g.Destroy())
				}
			}
		}
	}
}

// execSetParamsReenabledChildGraph: a kernel node of a child graph, widened
// with Exec.SetParams, then given a new child graph (Exec.SetParams with
// ChildGraphParams) whose kernel covers another range, then disabled for
// one launch and enabled again, runs the new child graph's kernel: what
// SetParams gave the node before is gone with its graph (the cuda
// backend's re-enable must not bring it back).
func execSetParamsReenabledChildGraph(t *testing.T, backend string, count int, open OpenOrdinal) {
	d := open(t, 0)
	const n = 16
	a := Must[gg.DevicePtr](t)(d.Malloc(4 * n))
	b := Must[gg.DevicePtr](t)(d.Malloc(4 * n))
	OK(t, d.Memset(gg.Memset32(a, 1, n)))
	OK(t, d.Memset(gg.Memset32(b, 0, n)))
	kp := func(grid, m int) gg.KernelParams {
		return gg.KernelParams{Kernel: AccumFrom, Grid: gg.Dim1(grid), Block: gg.Dim1(4), Args: []any{a, b, m}}
	}
	child := func(p gg.KernelParams) *gg.Graph {
		cg := NewGraph(t, d)
		Must[*gg.Node](t)(cg.AddKernelNode(p))
		Must[*gg.Node](t)(cg.AddEmptyNode()) // so that the kernel may be disabled
		return cg
	}
	g := NewGraph(t, d)
	ch := Must[*gg.Node](t)(g.AddChildGraphNode(child(kp(1, 4))))
	e := Must[*gg.Exec](t)(g.Instantiate(0))
	k := Must[[]*gg.Node](t)(Must[*gg.Graph](t)(ch.ChildGraph()).Nodes())[0]
	s := NewStream(t, d)
	var rb [n]uint32
	for l, step := range []struct {
		what string
		m    int // elements the kernel covers at this launch
	}{
		{"as built", 4},
		{"widened to 16, then a new child graph covering 8", 8},
		{"disabled", 0},
		{"enabled again", 8},
	} {
		switch l {
		case 1:
			OK(t, e.SetParams(k, kp(4, 16)))
			OK(t, e.SetParams(ch, gg.ChildGraphParams{Graph: child(kp(2, 8))}))
		case 2:
			OK(t, e.SetEnabled(k, false))
		case 3:
			OK(t, e.SetEnabled(k, true))
		}
		launchSync(t, e, s)
		for i := range step.m {
			rb[i] += 2
		}
		if got := readU32s(t, d, b, n); !slices.Equal(got, rb[:]) {
			t.Fatalf("launch %d (%s): b = %v, want %v", l, step.what, got, rb)
		}
	}
	OK(t, e.Destroy())
}
