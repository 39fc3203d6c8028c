package gpugraph_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	gg "github.com/gpugraph/gpugraph"
)

// onBackends runs f on a fresh host device and, where there is a GPU, on a
// fresh cuda device.
func onBackends(t *testing.T, f func(t *testing.T, d *gg.Device)) {
	t.Run("host", func(t *testing.T) { f(t, open(t)) })
	t.Run("cuda", func(t *testing.T) { f(t, openCUDA(t)) })
}

// setScenario is a function to capture per key k: a temporary of k×tmpMiB
// MiB (graph memory the graph frees), out[i] = in[i] + 2 for i < k, out
// allocated by the function (the output). calls counts its runs.
type setScenario struct {
	in     gg.DevicePtr // static input: maxKey uint32s
	maxKey int
	tmpMiB int
	calls  int
}

func newSetScenario(t *testing.T, d *gg.Device, s *gg.Stream, maxKey, tmpMiB int) *setScenario {
	t.Helper()
	in := must[gg.DevicePtr](t)(d.Malloc(4 * maxKey))
	t.Cleanup(func() { d.Free(in) })
	x := make([]uint32, maxKey)
	for i := range x {
		x[i] = uint32(100 * i)
	}
	ok(t, s.Memcpy(gg.HtoD(in, gg.Bytes(x))))
	ok(t, s.Synchronize())
	return &setScenario{in: in, maxKey: maxKey, tmpMiB: tmpMiB}
}

func (sc *setScenario) fn(s *gg.Stream, k int) ([]gg.DevicePtr, error) {
	sc.calls++
	if k < 1 || k > sc.maxKey {
		return nil, fmt.Errorf("key %d outside 1..%d", k, sc.maxKey)
	}
	tmp, err := s.MallocAsync(k * sc.tmpMiB << 20)
	if err != nil {
		return nil, err
	}
	out, err := s.MallocAsync(4 * k)
	if err != nil {
		return nil, err
	}
	grid := gg.Dim1((k + 127) / 128)
	if err := s.Launch(addOne, grid, gg.Dim1(128), sc.in, tmp, k); err != nil {
		return nil, err
	}
	if err := s.Launch(addOne, grid, gg.Dim1(128), tmp, out, k); err != nil {
		return nil, err
	}
	return []gg.DevicePtr{out}, s.FreeAsync(tmp)
}

// checkOut reads the first k values of o and checks them.
func checkOut(t *testing.T, o *gg.Output, k int) {
	t.Helper()
	got := make([]uint32, k)
	ok(t, o.Read(gg.Bytes(got)))
	for i, v := range got {
		if v != uint32(100*i+2) {
			t.Fatalf("%v: element %d = %d, want %d", o, i, v, 100*i+2)
		}
	}
}

func TestGraphSetSharesMemoryAndBudgetIsKnownBeforeLaunch(t *testing.T) {
	onBackends(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		sc := newSetScenario(t, d, s, 8, 2)
		set, err := gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{2, 8, 1, 4}, Compare: cmp.Compare[int]})
		ok(t, err)
		defer set.Close()

		st := set.Stats()
		var order []int
		var largest, sum uint64
		for _, m := range st.Members {
			order = append(order, m.Key)
			largest = max(largest, m.GraphBytes)
			sum += m.GraphBytes
			if m.GraphBytes < m.AllocBytes || m.Allocs != 2 || !slices.Equal(m.Outputs, []int{4 * m.Key}) {
				t.Errorf("member %d: %+v", m.Key, m)
			}
		}
		if !slices.Equal(order, []int{8, 4, 2, 1}) {
			t.Errorf("capture order %v, want largest first", order)
		}
		if st.GraphBytes != largest || st.SumGraphBytes != sum || st.GraphBytes >= st.SumGraphBytes {
			t.Fatalf("set graph memory %d, largest member %d, sum %d: want the largest, below the sum", st.GraphBytes, largest, sum)
		}
		if st.OutputBytes < 4*8 || st.Bytes() != st.GraphBytes+st.OutputBytes {
			t.Errorf("output bytes %d, bytes %d", st.OutputBytes, st.Bytes())
		}
		before := must[gg.GraphMemStats](t)(d.GraphMemStats())
		for round := 0; round < 2; round++ {
			for _, k := range []int{1, 8, 2, 4, 8, 1} {
				outs := must[[]*gg.Output](t)(set.Replay(k))
				if len(outs) != 1 || outs[0].Size() != 4*k {
					t.Fatalf("replay of %d: %d outputs", k, len(outs))
				}
				checkOut(t, outs[0], k)
			}
		}
		after := must[gg.GraphMemStats](t)(d.GraphMemStats())
		t.Logf("%s: set graph memory %d MiB (members %v MiB, sum %d MiB); reserved before launch %d, after %d MiB (high %d)",
			d.Properties().Backend, st.GraphBytes>>20, mibs(st), st.SumGraphBytes>>20, before.ReservedCurrent>>20,
			after.ReservedCurrent>>20, after.ReservedHigh>>20)
		if d.Properties().Backend == gg.BackendHost {
			// Exact on the host backend: what Stats said before the first
			// launch is what the replays reserve.
			if before.ReservedHigh != 0 || after.ReservedHigh != st.GraphBytes {
				t.Errorf("reserved %d before, high %d after; Stats said %d", before.ReservedHigh, after.ReservedHigh, st.GraphBytes)
			}
		} else if after.ReservedHigh >= st.SumGraphBytes {
			t.Errorf("the driver reserved %d for graphs whose sum is %d: no sharing", after.ReservedHigh, st.SumGraphBytes)
		}
		if sc.calls != 4 {
			t.Errorf("the function ran %d times for 4 keys, replayed 12 times", sc.calls)
		}
	})
}

func mibs[K comparable](st gg.GraphSetStats[K]) []uint64 {
	var v []uint64
	for _, m := range st.Members {
		v = append(v, m.GraphBytes>>20)
	}
	return v
}

func TestGraphSetMemoryBudget(t *testing.T) {
	onBackends(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		sc := newSetScenario(t, d, s, 16, 2)
		probe := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{4, 8}, Compare: cmp.Compare[int]}))
		need := probe.Stats().Bytes()
		ok(t, probe.Close())
		memBefore := must[gg.MemoryStats](t)(d.MemoryStats())

		// A set that does not fit is refused before anything runs, and
		// leaves nothing behind.
		_, err := gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{4, 8}, Compare: cmp.Compare[int], MemoryBudget: need - 1})
		var be *gg.MemoryBudgetError
		if !errors.As(err, &be) || !errors.Is(err, gg.ErrMemoryAllocation) || be.Key != 8 || be.Need != need || be.Budget != need-1 {
			t.Fatalf("set over budget: %v (%+v)", err, be)
		}
		t.Log(err)
		memAfter := must[gg.MemoryStats](t)(d.MemoryStats())
		if memAfter.Malloc != memBefore.Malloc || memAfter.GraphReserved != memBefore.GraphReserved {
			t.Errorf("a refused set left memory: %+v, before %+v", memAfter, memBefore)
		}

		// Exactly the budget fits; a key captured on use past it is
		// refused and the set keeps working.
		set := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{4, 8}, Compare: cmp.Compare[int], MemoryBudget: need}))
		defer set.Close()
		outs := must[[]*gg.Output](t)(set.Replay(4))
		if _, err := set.Replay(16); !errors.As(err, &be) || be.Key != 16 {
			t.Fatalf("capture on use past the budget: %v", err)
		}
		checkOut(t, outs[0], 4) // the failed replay overwrote nothing
		if k := set.Keys(); !slices.Equal(k, []int{4, 8}) {
			t.Errorf("keys %v after the refused capture", k)
		}
		// A smaller key fits (graph memory is the largest graph's).
		checkOut(t, must[[]*gg.Output](t)(set.Replay(2))[0], 2)
		if st := set.Stats(); st.Bytes() != need || len(st.Members) != 3 {
			t.Errorf("after capturing key 2: %d bytes, %d members", st.Bytes(), len(st.Members))
		}
	})
}

func TestGraphSetStaleOutputs(t *testing.T) {
	onBackends(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		sc := newSetScenario(t, d, s, 8, 1)
		set := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{8, 4}, Compare: cmp.Compare[int], OnMissing: gg.MissingPad}))
		defer set.Close()

		first := must[[]*gg.Output](t)(set.Replay(3))[0]
		if got := first.String(); got != "output 0 of replay 1 (key 3, padded to 4)" {
			t.Errorf("String %q", got)
		}
		kept := must[gg.DevicePtr](t)(first.Keep())
		defer d.Free(kept)
		second := must[[]*gg.Output](t)(set.Replay(8))[0]
		checkOut(t, second, 8)

		var se *gg.StaleOutputError
		buf := make([]byte, 4)
		for _, use := range []func() error{
			func() error { return first.Read(buf) },
			func() error { _, err := first.Ptr(); return err },
			func() error { _, err := first.Keep(); return err },
			first.Release,
		} {
			err := use()
			if !errors.As(err, &se) || !errors.Is(err, gg.ErrInvalidValue) || se.OverwrittenBy != 2 || se.OverwrittenKey != "8" ||
				se.Output != "output 0 of replay 1 (key 3, padded to 4)" || !strings.Contains(err.Error(), "overwritten by replay 2 (key 8)") {
				t.Fatalf("use of an overwritten output: %v (%+v)", err, se)
			}
		}
		t.Log(se)
		// The kept copy was not overwritten.
		got := make([]uint32, 3)
		ok(t, s.Memcpy(gg.DtoH(gg.Bytes(got), kept)))
		ok(t, s.Synchronize())
		if !slices.Equal(got, []uint32{2, 102, 202}) {
			t.Errorf("kept output %v", got)
		}
		// Released outputs, and those of a closed set, are refused too.
		ok(t, second.Release())
		if _, err := second.Ptr(); !errors.As(err, &se) || !se.Released || !strings.Contains(err.Error(), "released") {
			t.Errorf("use after Release: %v", err)
		}
		third := must[[]*gg.Output](t)(set.Replay(4))[0]
		if err := third.Read(make([]byte, 17)); !hasCode(err, gg.ErrInvalidValue) {
			t.Errorf("read past the output: %v", err)
		}
		ok(t, set.Close())
		if err := third.Read(buf); !errors.As(err, &se) || !se.Closed {
			t.Errorf("use after Close: %v", err)
		}
		if _, err := set.Replay(4); !hasCode(err, gg.ErrInvalidResourceHandle) {
			t.Errorf("replay of a closed set: %v", err)
		}
		if err := set.Close(); !hasCode(err, gg.ErrInvalidResourceHandle) {
			t.Errorf("second Close: %v", err)
		}
	})
}

func TestGraphSetLimitAndMissingKeys(t *testing.T) {
	onBackends(t, func(t *testing.T, d *gg.Device) {
		s := stream(t, d)
		sc := newSetScenario(t, d, s, 16, 1)
		set := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{MaxGraphs: 2}))
		defer set.Close()
		for i := 0; i < 3; i++ {
			for _, k := range []int{5, 3} {
				checkOut(t, must[[]*gg.Output](t)(set.Replay(k))[0], k)
			}
		}
		var le *gg.GraphLimitError
		for i := 0; i < 3; i++ {
			if _, err := set.Replay(7); !errors.As(err, &le) || !errors.Is(err, gg.ErrNotPermitted) || le.Key != 7 || le.Limit != 2 {
				t.Fatalf("capture past the limit: %v", err)
			}
		}
		t.Log(le)
		if sc.calls != 2 || !slices.Equal(set.Keys(), []int{5, 3}) {
			t.Errorf("%d captures, keys %v: want 2 and [5 3]", sc.calls, set.Keys())
		}
		if err := set.Capture(7); !errors.As(err, &le) {
			t.Errorf("Capture past the limit: %v", err)
		}
		// A function error during a capture on use leaves the set as it was.
		lazy := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{}))
		defer lazy.Close()
		if _, err := lazy.Replay(99); err == nil || !strings.Contains(err.Error(), "capture of key 99: key 99 outside 1..16") {
			t.Errorf("failing function: %v", err)
		}
		if len(lazy.Keys()) != 0 {
			t.Errorf("keys %v after a failed capture", lazy.Keys())
		}
		sc.calls--

		// Padding and refusing.
		pad := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{4, 8}, Compare: cmp.Compare[int], OnMissing: gg.MissingPad}))
		defer pad.Close()
		if k, found := pad.Lookup(5); !found || k != 8 {
			t.Errorf("Lookup(5) = %d, %v", k, found)
		}
		outs := must[[]*gg.Output](t)(pad.Replay(5))
		if outs[0].Size() != 32 {
			t.Errorf("padded output of %d bytes", outs[0].Size())
		}
		checkOut(t, outs[0], 5)
		var ke *gg.KeyNotCapturedError
		if _, err := pad.Replay(9); !errors.As(err, &ke) || !errors.Is(err, gg.ErrInvalidValue) || ke.Key != 9 {
			t.Errorf("key past the largest: %v", err)
		}
		t.Log(ke)
		refuse := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{4}, OnMissing: gg.MissingRefuse}))
		defer refuse.Close()
		if _, err := refuse.Replay(3); !errors.As(err, &ke) || ke.Key != 3 {
			t.Errorf("refused key: %v", err)
		}
		if _, found := refuse.Lookup(3); found {
			t.Error("Lookup found a refused key")
		}
		if sc.calls != 2+2+1 {
			t.Errorf("%d captures in all, want 5", sc.calls)
		}
	})
}

func TestGraphSetInvalid(t *testing.T) {
	d := open(t)
	s := stream(t, d)
	sc := newSetScenario(t, d, s, 8, 1)
	cases := []struct {
		name string
		fn   func(*gg.Stream, int) ([]gg.DevicePtr, error)
		cfg  gg.GraphSetConfig[int]
		code *gg.Code
		msg  string
	}{
		{"nil function", nil, gg.GraphSetConfig[int]{}, gg.ErrInvalidValue, "nil function"},
		{"negative warm-up", sc.fn, gg.GraphSetConfig[int]{Warmup: -1}, gg.ErrInvalidValue, "warm-up"},
		{"negative limit", sc.fn, gg.GraphSetConfig[int]{MaxGraphs: -1}, gg.ErrInvalidValue, "MaxGraphs"},
		{"pad without order", sc.fn, gg.GraphSetConfig[int]{OnMissing: gg.MissingPad}, gg.ErrInvalidValue, "needs Compare"},
		{"unknown policy", sc.fn, gg.GraphSetConfig[int]{OnMissing: 7}, gg.ErrInvalidValue, "MissingKey(7)"},
		{"key twice", sc.fn, gg.GraphSetConfig[int]{Keys: []int{1, 2, 1}}, gg.ErrInvalidValue, "key 1 is in Keys twice"},
		{"more keys than graphs", sc.fn, gg.GraphSetConfig[int]{Keys: []int{1, 2, 3}, MaxGraphs: 2}, gg.ErrNotPermitted, "3 keys for a limit of 2"},
		{"output not allocated", func(s *gg.Stream, k int) ([]gg.DevicePtr, error) { return []gg.DevicePtr{sc.in}, nil },
			gg.GraphSetConfig[int]{Keys: []int{1}}, gg.ErrInvalidValue, "is not an allocation the function made"},
		{"output twice", func(s *gg.Stream, k int) ([]gg.DevicePtr, error) {
			p, err := s.MallocAsync(4)
			return []gg.DevicePtr{p, p}, err
		}, gg.GraphSetConfig[int]{Keys: []int{1}}, gg.ErrInvalidValue, "output 1 (0x"},
		{"allocation left live", func(s *gg.Stream, k int) ([]gg.DevicePtr, error) {
			_, err := s.MallocAsync(64)
			return nil, err
		}, gg.GraphSetConfig[int]{Keys: []int{1}}, gg.ErrInvalidValue, "leaves the 64-byte allocation"},
	}
	before := must[gg.MemoryStats](t)(d.MemoryStats())
	for _, c := range cases {
		set, err := gg.NewGraphSet(s, c.fn, c.cfg)
		if set != nil || !hasCode(err, c.code) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.code, c.msg)
		}
	}
	if after := must[gg.MemoryStats](t)(d.MemoryStats()); after.Malloc != before.Malloc || after.GraphReserved != 0 {
		t.Errorf("refused sets left memory: %+v", after)
	}
	if _, err := gg.NewGraphSet[int](nil, sc.fn, gg.GraphSetConfig[int]{}); !hasCode(err, gg.ErrInvalidResourceHandle) && !hasCode(err, gg.ErrInvalidValue) {
		t.Errorf("nil stream: %v", err)
	}
	var o *gg.Output
	if _, err := o.Ptr(); !hasCode(err, gg.ErrInvalidValue) {
		t.Errorf("nil output: %v", err)
	}
}

// hasCode reports whether err wraps code.
func hasCode(err error, code *gg.Code) bool { return err != nil && errors.Is(err, code) }

// Under the host backend's memory checker (graph memory inaccessible outside
// its allocations' lifetimes) the set's graphs, their output copies and
// frees run clean.
func TestGraphSetUnderMemCheck(t *testing.T) {
	d, err := gg.Open("host", gg.WithMemCheck())
	ok(t, err)
	defer d.Close()
	s := stream(t, d)
	sc := newSetScenario(t, d, s, 8, 1)
	set := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{8, 2}, Compare: cmp.Compare[int], OnMissing: gg.MissingPad}))
	defer set.Close()
	for _, k := range []int{2, 8, 1, 5} {
		checkOut(t, must[[]*gg.Output](t)(set.Replay(k))[0], k)
	}
}

// TestGraphSetReadIntoPinned: Output.Read into page-locked memory, whose
// copy is asynchronous, still returns with the values there (it waits);
// into Go memory the copy itself waits.
func TestGraphSetReadIntoPinned(t *testing.T) {
	onBackends(t, func(t *testing.T, d *gg.Device) {
		s := must[*gg.Stream](t)(d.NewStream())
		sc := newSetScenario(t, d, s, 64, 1)
		set := must[*gg.GraphSet[int]](t)(gg.NewGraphSet(s, sc.fn, gg.GraphSetConfig[int]{Keys: []int{64}}))
		defer set.Close()
		pinned := must[[]byte](t)(d.MallocHost(4 * 64))
		defer d.FreeHost(pinned)
		for range 3 {
			outs := must[[]*gg.Output](t)(set.Replay(64))
			clear(pinned)
			ok(t, outs[0].Read(pinned))
			for i := range 64 {
				if v := uint32(pinned[4*i]) | uint32(pinned[4*i+1])<<8 | uint32(pinned[4*i+2])<<16 | uint32(pinned[4*i+3])<<24; v != uint32(100*i+2) {
					t.Fatalf("pinned: element %d = %d, want %d", i, v, 100*i+2)
				}
			}
			checkOut(t, outs[0], 64)
		}
	})
}
