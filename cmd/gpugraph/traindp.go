package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/coll"
	"github.com/gpugraph/gpugraph/internal/train"
)

// train --devices N: data-parallel training in one process. Each of N
// devices holds a replica of the model and trains on its 1/N of every
// global batch; each layer's gradient is all-reduced (averaged) across the
// devices as soon as the backward pass has it, and every replica applies
// the same update. The whole step, all-reduces included, is captured once
// per device and replayed. A single-device model trains on the same global
// batches beside it, and the losses and final parameters are compared:
// they agree within float rounding (the reduction order differs), checked.

// dpTolerance bounds the relative difference of the data-parallel loss
// from the single-device one at every report.
const dpTolerance = 1e-4

func runDataParallel(w io.Writer, cfg trainConfig, n int) (err error) {
	tc, err := trainPreset(cfg)
	if err != nil {
		return err
	}
	if cfg.Steps < 1 || cfg.Every < 1 || cfg.Warmup < 0 || cfg.Warmup >= cfg.Steps || cfg.Batches < 1 {
		return fmt.Errorf("%w: need steps >= 1, every >= 1, 0 <= warmup < steps, batches >= 1", errUsage)
	}
	if n < 1 || tc.Batch%n != 0 {
		return fmt.Errorf("%w: %d devices do not divide the global batch of %d", errUsage, n, tc.Batch)
	}
	if cfg.Backend == gg.BackendHost {
		if err := gg.SetHostDeviceCount(n); err != nil {
			return err
		}
	}
	if have, err := gg.DeviceCount(cfg.Backend); err != nil || have < n {
		return fmt.Errorf("the %s backend has %d devices, --devices asks for %d (%v)", cfg.Backend, have, n, err)
	}
	local := tc
	local.Batch = tc.Batch / n
	ds, err := train.NewDataset(tc, cfg.Batches)
	if err != nil {
		return err
	}
	devs := make([]*gg.Device, n)
	streams := make([]*gg.Stream, n)
	for i := range devs {
		if devs[i], err = gg.Open(cfg.Backend, gg.WithOrdinal(i)); err != nil {
			return fmt.Errorf("open device %d: %w", i, err)
		}
		d := devs[i]
		defer func() { err = errors.Join(err, d.Close()) }()
		if err := d.DefaultMemPool().SetReleaseThreshold(math.MaxUint64); err != nil {
			return err
		}
		if streams[i], err = d.NewStream(); err != nil {
			return err
		}
	}
	comms, err := coll.InitAll(devs)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range comms {
			err = errors.Join(err, c.Destroy())
		}
	}()
	fmt.Fprintf(w, "gpugraph train --devices %d: %v\n  backend %s, %d replicas of %d samples each per global batch of %d, %d steps\n",
		n, tc, cfg.Backend, n, local.Batch, tc.Batch, cfg.Steps)
	fmt.Fprintf(w, "  each layer's gradient is all-reduced (average) as the backward pass produces it; the step is captured per device\n")

	// The replicas, and the single-device reference on device 0.
	models := make([]*train.Model, n)
	statics := make([]*train.Static, n)
	for r := range n {
		if models[r], err = train.NewModel(streams[r], local); err != nil {
			return err
		}
		m, c := models[r], comms[r]
		defer func() { err = errors.Join(err, m.Destroy()) }()
		m.GradSync = func(s *gg.Stream, g gg.DevicePtr, floats int) error {
			return c.AllReduce(s, g, g, floats, coll.Float32, coll.Avg)
		}
		if statics[r], err = train.NewStatic(streams[r], local); err != nil {
			return err
		}
		st, s := statics[r], streams[r]
		defer func() { err = errors.Join(err, st.Free(s)) }()
	}
	refStream, err := devs[0].NewStream()
	if err != nil {
		return err
	}
	ref, err := train.NewModel(refStream, tc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ref.Destroy()) }()
	refStatic, err := train.NewStatic(refStream, tc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, refStatic.Free(refStream)) }()

	step := 0
	load := func() error {
		for r := range n {
			if err := statics[r].LoadShard(streams[r], ds, step%ds.Batches(), r, n); err != nil {
				return err
			}
		}
		return refStatic.Load(refStream, ds, step%ds.Batches())
	}
	eager := func() error {
		if err := load(); err != nil {
			return err
		}
		step++
		for r := range n {
			if err := models[r].Step(streams[r], statics[r].X, statics[r].Y, statics[r].Loss); err != nil {
				return err
			}
		}
		return ref.Step(refStream, refStatic.X, refStatic.Y, refStatic.Loss)
	}
	for step < cfg.Warmup {
		if err := eager(); err != nil {
			return err
		}
	}
	// Capture the step on every device: each capture holds its replica's
	// kernels and its all-reduces, in the same order on every device.
	execs := make([]*gg.Exec, n)
	for r := range n {
		if err := streams[r].BeginCapture(gg.CaptureModeRelaxed); err != nil {
			return err
		}
	}
	for r := range n {
		if err := models[r].Step(streams[r], statics[r].X, statics[r].Y, statics[r].Loss); err != nil {
			return err
		}
	}
	for r := range n {
		g, err := streams[r].EndCapture()
		if err != nil {
			return err
		}
		defer g.Destroy()
		if execs[r], err = g.Instantiate(gg.InstantiateAutoFreeOnLaunch); err != nil {
			return err
		}
		e := execs[r]
		defer func() { err = errors.Join(err, e.Destroy()) }()
	}
	fmt.Fprintf(w, "  warm-up: %d steps op by op; then the captured step per device, replayed\n\n", cfg.Warmup)
	fmt.Fprintf(w, "%6s  %14s  %14s  %10s\n", "step", "data-parallel", "one device", "rel. diff")

	var perStep []float64
	worst := 0.0
	for step < cfg.Steps {
		chunk := min(cfg.Every-step%cfg.Every, cfg.Steps-step)
		start := time.Now()
		for range chunk {
			if err := load(); err != nil {
				return err
			}
			step++
			for r := range n {
				if err := execs[r].Launch(streams[r]); err != nil {
					return err
				}
			}
			if err := ref.Step(refStream, refStatic.X, refStatic.Y, refStatic.Loss); err != nil {
				return err
			}
			for r := range n {
				if err := streams[r].Synchronize(); err != nil {
					return err
				}
			}
		}
		perStep = append(perStep, float64(time.Since(start))/float64(chunk))
		var dp float64
		for r := range n {
			l, err := statics[r].ReadLoss(streams[r])
			if err != nil {
				return err
			}
			dp += float64(l) / float64(n)
		}
		one, err := refStatic.ReadLoss(refStream)
		if err != nil {
			return err
		}
		diff := math.Abs(dp-float64(one)) / math.Max(math.Abs(float64(one)), 1e-12)
		worst = max(worst, diff)
		fmt.Fprintf(w, "%6d  %14.6f  %14.6f  %10.2e\n", step, dp, one, diff)
	}
	p0, err := models[0].ReadParams(streams[0])
	if err != nil {
		return err
	}
	pr, err := ref.ReadParams(refStream)
	if err != nil {
		return err
	}
	maxDiff := 0.0
	for i := range p0 {
		maxDiff = max(maxDiff, math.Abs(float64(p0[i]-pr[i])))
	}
	slices.Sort(perStep)
	fmt.Fprintf(w, "\nstep time (median over chunks, all devices and the single-device step): %s\n",
		fmtDur(time.Duration(perStep[len(perStep)/2])))
	for r, d := range devs {
		st, _ := d.MemoryStats()
		fmt.Fprintf(w, "device %d: %s\n", r, memLine(st))
	}
	if worst > dpTolerance {
		return fmt.Errorf("data-parallel loss differs from one device's by %.2e (tolerance %.0e)", worst, dpTolerance)
	}
	fmt.Fprintf(w, "verdict: %d devices train as one on the same global batches: losses within %.1e (tolerance %.0e), parameters within %.1e\n",
		n, worst, dpTolerance, maxDiff)
	return nil
}
