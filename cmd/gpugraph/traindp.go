package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/coll"
	"github.com/gpugraph/gpugraph/internal/train"
)

// Data-parallel training. Each rank holds a replica of the model and
// trains on its 1/N of every global batch; each layer's gradient is
// all-reduced (averaged) across the ranks as soon as the backward pass has
// it, and every replica applies the same update. The whole step,
// all-reduces included, is captured once per rank and replayed. The ranks
// are either N devices of one process (train --devices N) or one device in
// each process of a job (gpugraph launch --nproc N train, or torchrun).
// Global rank 0 also trains a single-device model on the same global
// batches, and the two are compared, as strictly as the arithmetic allows:
//
//   - After the first step every parameter of every local replica equals
//     the single device's within fp32 rounding: the gradients are the same
//     sums taken in another order (a shard's GEMM, then the all-reduce),
//     so each parameter may differ by a rounding of its update and of
//     itself: |p - p1| <= 2^-12 * max|p1 - p0| + 2 ulp(p1), where p0 and
//     p1 are the single device's parameters before and after the step.
//     In TF32 and BF16 a shard's loss gradient is scaled by another batch
//     size before the GEMMs round it, so an update may differ by a
//     rounding of the GEMMs' inputs: 2^-12 becomes four of their unit
//     roundoffs, 2^-9 (TF32) and 2^-6 (BF16).
//   - Over the run the loss drifts, as every fp32 training whose sums are
//     reordered does (PyTorch DDP against its own single device on the
//     same two GPUs: 2.1e-3 relative after 300 steps, docs/distributed.md),
//     and is checked against the drift tolerance of driftTolerance. In
//     TF32 and BF16 it drifts more: a last-bit difference in an
//     activation can round the next GEMM's input to a neighbouring value.
//   - Where the arithmetic is exact, one rank on the host backend (the
//     all-reduce of one rank is the identity and the kernels are the same),
//     the losses must be equal.

// driftTolerance bounds the relative difference of the data-parallel
// loss from the single device's at every report.
func driftTolerance(backend string, world int, precision string) float64 {
	switch {
	case backend == gg.BackendHost && world == 1:
		return 0 // exact, in every precision
	case backend == gg.BackendHost && precision == train.TF32:
		return 4e-3 // the small model, batch 96, 2 to 4 ranks: up to 8.4e-4 over 300 steps
	case backend == gg.BackendHost && precision == train.BF16:
		return 1e-2 // likewise: up to 2.6e-3
	case backend == gg.BackendHost:
		return 1e-4 // the host's reordered sums drift by 1e-7 over 300 steps
	case precision == train.TF32 || precision == train.BF16:
		// Not measured on GPUs yet: four times FP32's.
		return 2e-2
	}
	// GPUs: 1.3e-3 over 300 steps of the reference model on two H200s,
	// PyTorch DDP 2.1e-3 on the same GPUs (docs/distributed.md).
	return 5e-3
}

// updateShare is the share of the largest update by which a parameter may
// differ after the first step in a precision (see above), and its name.
func updateShare(precision string) (float64, string) {
	switch precision {
	case train.TF32:
		return 1.0 / 512, "2^-9"
	case train.BF16:
		return 1.0 / 64, "2^-6"
	}
	return 1.0 / 4096, "2^-12"
}

// firstStepBound is the bound on a parameter's difference after the first
// step (see above).
func firstStepBound(p1 float32, maxUpdate float64, precision string) float64 {
	a := float32(math.Abs(float64(p1)))
	share, _ := updateShare(precision)
	return maxUpdate*share + 2*float64(math.Nextafter32(a, math.MaxFloat32)-a)
}

// checkFirstStep compares a replica's parameters after the first step with
// the single device's: p0 before, p1 after it. It returns the largest
// difference and the largest update.
func checkFirstStep(rank int, p0, p1, got []float32, precision string) (worst, maxUpdate float64, err error) {
	if len(got) != len(p1) || len(p0) != len(p1) {
		return 0, 0, fmt.Errorf("rank %d has %d parameters, one device %d", rank, len(got), len(p1))
	}
	for i := range p1 {
		maxUpdate = max(maxUpdate, math.Abs(float64(p1[i]-p0[i])))
	}
	for i := range p1 {
		d := math.Abs(float64(got[i] - p1[i]))
		worst = max(worst, d)
		if bound := firstStepBound(p1[i], maxUpdate, precision); d > bound || math.IsNaN(float64(got[i])) {
			return worst, maxUpdate, fmt.Errorf("after the first step, rank %d's parameter %d is %g, one device's %g (before the step %g): "+
				"differs by %.3g, more than rounding allows (%.3g)", rank, i, got[i], p1[i], p0[i], d, bound)
		}
	}
	return worst, maxUpdate, nil
}

// syncWords says what each mode does, for the report.
var syncWords = map[train.SyncMode]string{
	train.SyncInline:  "each layer's as the backward pass produces it, on the step's stream",
	train.SyncOverlap: "each layer's on a second stream, overlapping the rest of the backward pass (DDP's buckets)",
	train.SyncAfter:   "all in one call after the backward pass",
}

// parseSync reads --sync: a comma-separated list of modes.
func parseSync(list string) ([]train.SyncMode, error) {
	names, err := oneOfList("sync", list, "overlap", "inline", "after")
	if err != nil {
		return nil, err
	}
	var modes []train.SyncMode
	for _, name := range names {
		modes = append(modes, map[string]train.SyncMode{"inline": train.SyncInline, "overlap": train.SyncOverlap, "after": train.SyncAfter}[name])
	}
	return modes, nil
}

// trainModes trains the job once per --sync mode, side by side in one run,
// and compares their step times.
func (j *job) trainModes(w io.Writer, cfg trainConfig) error {
	modes, err := parseSync(cfg.Sync)
	if err != nil {
		return err
	}
	j.prog = startProgress(cfg.Progress, cfg.Progress != nil, "train", "steps", cfg.Steps*len(modes))
	defer j.prog.Stop()
	w = j.prog.Out(w)
	times := make([]time.Duration, len(modes))
	for i, m := range modes {
		j.prog.SetLabel(fmt.Sprintf("train, --sync %v", m))
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := j.train(w, cfg, m); err != nil {
			return fmt.Errorf("--sync %v: %w", m, err)
		}
		times[i] = j.stepTime
	}
	if len(modes) > 1 {
		fmt.Fprintf(w, "\ngradient all-reduce, step time side by side:\n")
		for i, m := range modes {
			fmt.Fprintf(w, "  %-8v %10s  %.2f× %v\n", m, fmtDur(times[i]), float64(times[i])/float64(times[0]), modes[0])
		}
	}
	return nil
}

// replica is one rank's model, buffers and captured step.
type replica struct {
	rank   int // global rank: its shard of every batch
	dev    *gg.Device
	s      *gg.Stream
	comm   *coll.Comm
	model  *train.Model
	static *train.Static
	exec   *gg.Exec
	avg    gg.DevicePtr // the loss averaged over the ranks
	side   *gg.Stream   // SyncOverlap: where the gradients are all-reduced
}

// captureStep captures one training step of r (its kernels and, with
// several ranks, its all-reduces) and instantiates it.
func (r *replica) captureStep() (*gg.Exec, error) {
	if err := r.s.BeginCapture(gg.CaptureModeRelaxed); err != nil {
		return nil, err
	}
	serr := r.model.Step(r.s, r.static.X, r.static.Y, r.static.Loss)
	g, err := r.s.EndCapture()
	if err = errors.Join(serr, err); err != nil {
		return nil, err
	}
	defer g.Destroy()
	return g.Instantiate(gg.InstantiateAutoFreeOnLaunch)
}

// job is the ranks this process drives.
type job struct {
	world int
	reps  []*replica
	dist  bool // one rank of a job of several processes
	// stepTime is the median step time train measured.
	stepTime time.Duration
	prog     *progress // the progress line, or nil
}

// each runs f for every local replica, one goroutine each: NCCL wants a
// thread per GPU (or one group) when one process drives several.
func (j *job) each(f func(r *replica) error) error {
	if len(j.reps) == 1 {
		return f(j.reps[0])
	}
	errs := make([]error, len(j.reps))
	var wg sync.WaitGroup
	for i, r := range j.reps {
		wg.Go(func() { errs[i] = f(r) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func runDataParallel(w io.Writer, cfg trainConfig, n int) (err error) {
	cfg.Devices = n
	if err := checkTrain(cfg, nil, nil); err != nil {
		return err
	}
	if cfg.Backend == gg.BackendHost {
		if err := gg.SetHostDeviceCount(n); err != nil {
			return err
		}
	}
	if err := haveDevices(cfg.Backend, n); err != nil {
		return err
	}
	j := &job{world: n}
	devs := make([]*gg.Device, n)
	for i := range devs {
		if devs[i], err = gg.Open(cfg.Backend, gg.WithOrdinal(i)); err != nil {
			return fmt.Errorf("open device %d: %w", i, err)
		}
		d := devs[i]
		defer func() { err = errors.Join(err, d.Close()) }()
		j.reps = append(j.reps, &replica{rank: i, dev: d})
	}
	comms, err := coll.InitAll(devs, collTimeout(cfg))
	if err != nil {
		return err
	}
	for i, c := range comms {
		j.reps[i].comm = c
	}
	defer func() {
		for _, c := range comms {
			err = errors.Join(err, c.Destroy())
		}
	}()
	return j.trainModes(w, cfg)
}

// haveDevices checks that backend has n devices, saying why not: the
// error of opening it when it has none (no driver, no GPU).
func haveDevices(backend string, n int) error {
	have, err := gg.DeviceCount(backend)
	if err == nil && have == 0 {
		// Opening the first device says why there is none.
		d, oerr := gg.Open(backend)
		if oerr == nil {
			d.Close()
		}
		err = oerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("--devices %d: the %s backend cannot start: %w", n, backend, err)
	case have < n:
		return fmt.Errorf("--devices %d: the %s backend has %s", n, backend, plural(have, "device"))
	}
	return nil
}

// runDistributed trains as one rank of a job of several processes, on the
// device numbered by the rank's local rank.
func runDistributed(w io.Writer, cfg trainConfig, env coll.Env) (err error) {
	if err := checkTrain(cfg, nil, &env); err != nil {
		return err
	}
	// The local rank picks the GPU; host devices belong to their process,
	// so each process's is its device 0.
	ord := env.LocalRank
	if cfg.Backend != gg.BackendCUDA {
		ord = 0
	}
	d, err := gg.Open(cfg.Backend, gg.WithOrdinal(ord))
	if err != nil {
		return fmt.Errorf("rank %d: open device %d: %w", env.Rank, ord, err)
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	// A job of one process has nobody to talk to: no communicator (its
	// start-up, its threads, its watch on the device's waits), as its step
	// has no all-reduce.
	var c *coll.Comm
	if env.World > 1 {
		if c, err = coll.InitFromEnv(d, env, collTimeout(cfg)); err != nil {
			return fmt.Errorf("rank %d of %d: %w", env.Rank, env.World, err)
		}
		defer func() { err = errors.Join(err, c.Destroy()) }()
	}
	j := &job{world: env.World, dist: true, reps: []*replica{{rank: env.Rank, dev: d, comm: c}}}
	out := w
	if env.Rank != 0 {
		out = io.Discard // rank 0 reports for the job
	}
	err = j.trainModes(out, cfg)
	if env.Rank != 0 && err == nil {
		st, _ := d.MemoryStats()
		fmt.Fprintf(w, "rank %d, device %d: %s\n", env.Rank, ord, memLine(st))
	}
	return err
}

// collTimeout is the ranks' timeout: --timeout, or coll's default for a
// configuration made without flags.
func collTimeout(cfg trainConfig) coll.Option {
	if cfg.Timeout == 0 {
		return coll.WithTimeout(coll.DefaultTimeout)
	}
	return coll.WithTimeout(cfg.Timeout)
}

// train trains the job's replicas; the process holding global rank 0 also
// trains the single-device reference and checks the replicas against it.
func (j *job) train(w io.Writer, cfg trainConfig, mode train.SyncMode) (err error) {
	tc, err := trainPreset(cfg)
	if err != nil {
		return err
	}
	n := j.world
	if tc.Batch%n != 0 {
		return usagef("--batch %d: %d ranks do not divide it (each rank trains on an equal share)", tc.Batch, n)
	}
	local := tc
	local.Batch = tc.Batch / n
	ds, err := train.NewDataset(tc, cfg.Batches)
	if err != nil {
		return err
	}
	how := fmt.Sprintf("--devices %d", n)
	if j.dist {
		how = "in a job of " + plural(n, "process")
	}
	fmt.Fprintf(w, "gpugraph train %s: %v\n  backend %s, %s of %d samples each per global batch of %d, %s\n",
		how, tc, cfg.Backend, plural(n, "replica"), local.Batch, tc.Batch, plural(cfg.Steps, "step"))
	fmt.Fprintf(w, "  precision: %s\n", precisionWords(tc.Precision))
	if n == 1 {
		fmt.Fprintf(w, "  --sync %v: one rank needs no gradient all-reduce (the average of one gradient is itself); the step is captured\n", mode)
	} else {
		fmt.Fprintf(w, "  --sync %v: gradients all-reduced (average), %s; the step is captured per rank\n", mode, syncWords[mode])
	}

	for _, r := range j.reps {
		// The pool keeps what a step frees for the next one.
		if err := r.dev.DefaultMemPool().SetReleaseThreshold(math.MaxUint64); err != nil {
			return err
		}
		if r.s, err = r.dev.NewStream(); err != nil {
			return err
		}
		if r.model, err = train.NewModel(r.s, local); err != nil {
			return err
		}
		gemm, desc, closeGEMM, err := pickGEMM(r.dev, cfg.GEMM, tc.Precision)
		if err != nil {
			return err
		}
		defer closeGEMM()
		r.model.GEMM = gemm
		if r.rank == j.reps[0].rank {
			fmt.Fprintf(w, "  GEMM: %s\n", desc)
		}
		m, c := r.model, r.comm
		defer func() { err = errors.Join(err, m.Destroy()) }()
		// The average of one rank's gradient is that gradient: the step of
		// one rank is the plain step, with no all-reduce in it.
		if n > 1 {
			m.GradSync = func(s *gg.Stream, g gg.DevicePtr, floats int) error {
				return c.AllReduce(s, g, g, floats, coll.Float32, coll.Avg)
			}
			m.SyncMode = mode
		}
		if n > 1 && mode == train.SyncOverlap {
			if r.side, err = r.dev.NewStream(); err != nil {
				return err
			}
			side := r.side
			defer func() { err = errors.Join(err, side.Destroy()) }()
			m.SyncStream = r.side
		}
		if r.static, err = train.NewStatic(r.s, local); err != nil {
			return err
		}
		st, s := r.static, r.s
		defer func() { err = errors.Join(err, st.Free(s)) }()
		if r.avg, err = r.dev.Malloc(4); err != nil {
			return err
		}
		d, p := r.dev, r.avg
		defer func() { err = errors.Join(err, d.Free(p)) }()
	}

	// The single-device reference, beside global rank 0.
	var ref *train.Model
	var refStatic *train.Static
	var refStream *gg.Stream
	if r0 := j.reps[0]; r0.rank == 0 {
		if refStream, err = r0.dev.NewStream(); err != nil {
			return err
		}
		if ref, err = train.NewModel(refStream, tc); err != nil {
			return err
		}
		gemm, _, closeGEMM, err := pickGEMM(r0.dev, cfg.GEMM, tc.Precision)
		if err != nil {
			return err
		}
		defer closeGEMM()
		ref.GEMM = gemm
		// A world of one, whose all-reduce is the identity: the reference
		// holds and applies its gradients with the update kernel, as the
		// replicas do, rather than updating in its dW GEMMs (plain SGD on
		// one device), so the two differ only by the order of the sums.
		ref.SyncMode, ref.GradSync = train.SyncAfter, func(*gg.Stream, gg.DevicePtr, int) error { return nil }
		defer func() { err = errors.Join(err, ref.Destroy()) }()
		if refStatic, err = train.NewStatic(refStream, tc); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, refStatic.Free(refStream)) }()
	}
	refStep := func(batch int) error {
		if ref == nil {
			return nil
		}
		if err := refStatic.Load(refStream, ds, batch); err != nil {
			return err
		}
		return ref.Step(refStream, refStatic.X, refStatic.Y, refStatic.Loss)
	}

	// The parameters before the first step, to check the replicas after it.
	var before []float32
	if ref != nil {
		if before, err = ref.ReadParams(refStream); err != nil {
			return err
		}
	}
	firstStep := func() error {
		if ref == nil {
			return nil
		}
		after, err := ref.ReadParams(refStream)
		if err != nil {
			return err
		}
		worst, upd := 0.0, 0.0
		for _, r := range j.reps {
			got, err := r.model.ReadParams(r.s)
			if err != nil {
				return err
			}
			w, u, err := checkFirstStep(r.rank, before, after, got, tc.Precision)
			if err != nil {
				return err
			}
			worst, upd = max(worst, w), u
		}
		_, share := updateShare(tc.Precision)
		fmt.Fprintf(w, "  after the first step: every parameter of %s within %.2g of one device's (largest update %.2g; bound %s of it + 2 ulp)\n",
			plural(len(j.reps), "local replica"), worst, upd, share)
		return nil
	}

	step := 0
	for ; step < cfg.Warmup; step++ {
		batch := step % ds.Batches()
		if err := j.each(func(r *replica) error {
			if err := r.static.LoadShard(r.s, ds, batch, r.rank, n); err != nil {
				return err
			}
			return r.model.Step(r.s, r.static.X, r.static.Y, r.static.Loss)
		}); err != nil {
			return err
		}
		if err := refStep(batch); err != nil {
			return err
		}
		j.prog.Add(1)
		if step == 0 {
			if err := firstStep(); err != nil {
				return err
			}
		}
	}
	// Capture the step on every rank: each capture holds its replica's
	// kernels and its all-reduces, in the same order on every rank. The
	// warm-up's step-local buffers cached in the pool are given back
	// first, as the one-device graph mode does: the graph has its own.
	if err := j.each(func(r *replica) error {
		if err := r.s.Synchronize(); err != nil {
			return err
		}
		if err := r.dev.DefaultMemPool().TrimTo(0); err != nil {
			return err
		}
		var err error
		r.exec, err = r.captureStep()
		return err
	}); err != nil {
		return err
	}
	defer func() {
		for _, r := range j.reps {
			if r.exec != nil {
				err = errors.Join(err, r.exec.Destroy())
			}
		}
	}()
	fmt.Fprintf(w, "  warm-up: %s op by op; then the captured step per rank, replayed\n\n", plural(cfg.Warmup, "step"))
	fmt.Fprintf(w, "%6s  %14s  %14s  %10s\n", "step", "data-parallel", "one device", "rel. diff")

	var perStep, devStep []float64
	// Device time of rank j.reps[0]'s chunks: events on its stream around
	// them (best effort, as in one-device training).
	evStart, evEnd, timed := timingEvents(j.reps[0].dev)
	defer func() {
		if timed {
			evStart.Destroy()
			evEnd.Destroy()
		}
	}()
	worst := 0.0
	for step < cfg.Steps {
		chunk := min(cfg.Every-step%cfg.Every, cfg.Steps-step)
		if step == 0 {
			chunk = 1 // no warm-up: the first step alone, to check it
		}
		start := time.Now()
		first := step
		recorded := false
		if err := j.each(func(r *replica) error {
			r0 := r == j.reps[0] && timed
			if r0 {
				recorded = r.s.Record(evStart) == nil
			}
			for k := range chunk {
				if err := r.static.LoadShard(r.s, ds, (first+k)%ds.Batches(), r.rank, n); err != nil {
					return err
				}
				if err := r.exec.Launch(r.s); err != nil {
					return err
				}
				if r == j.reps[0] {
					if err := countStep(j.prog, r.s, r.dev); err != nil {
						return err
					}
				}
			}
			if r0 {
				recorded = recorded && r.s.Record(evEnd) == nil
			}
			return r.s.Synchronize()
		}); err != nil {
			return err
		}
		if !hostStepCount(j.reps[0].dev) {
			j.prog.Add(chunk)
		}
		perStep = append(perStep, float64(time.Since(start))/float64(chunk))
		if recorded {
			if gt, err := gg.ElapsedTime(evStart, evEnd); err == nil {
				devStep = append(devStep, float64(gt)/float64(chunk))
			}
		}
		for k := range chunk {
			if err := refStep((first + k) % ds.Batches()); err != nil {
				return err
			}
		}
		step += chunk
		if first == 0 {
			if err := firstStep(); err != nil {
				return err
			}
			if step%cfg.Every != 0 && step < cfg.Steps {
				continue
			}
		}
		if refStream != nil {
			if err := refStream.Synchronize(); err != nil {
				return err
			}
		}
		// The data-parallel loss is the replicas' losses averaged, by an
		// all-reduce: every rank takes part, rank 0 reads it.
		var dp float32
		if err := j.each(func(r *replica) error {
			avg := r.static.Loss // one rank's average
			if n > 1 {
				if err := r.comm.AllReduce(r.s, r.static.Loss, r.avg, 1, coll.Float32, coll.Avg); err != nil {
					return err
				}
				avg = r.avg
			}
			var v [1]float32
			if err := r.s.Memcpy(gg.DtoH(gg.Bytes(v[:]), avg)); err != nil {
				return err
			}
			if err := r.s.Synchronize(); err != nil {
				return err
			}
			if r.rank == 0 {
				dp = v[0]
			}
			return nil
		}); err != nil {
			return err
		}
		if ref == nil {
			continue
		}
		one, err := refStatic.ReadLoss(refStream)
		if err != nil {
			return err
		}
		diff := math.Abs(float64(dp)-float64(one)) / math.Max(math.Abs(float64(one)), 1e-12)
		worst = max(worst, diff)
		fmt.Fprintf(w, "%6d  %14.6f  %14.6f  %10.2e\n", step, dp, one, diff)
	}
	slices.Sort(perStep)
	j.stepTime = time.Duration(perStep[len(perStep)/2])
	fmt.Fprintf(w, "\ndata-parallel step time (median over chunks, load and launch to synchronize): %s\n", fmtDur(j.stepTime))
	if len(devStep) == len(perStep) {
		slices.Sort(devStep)
		fmt.Fprintf(w, "device time of rank %d's step: %s (events on its stream around each chunk, median)\n",
			j.reps[0].rank, fmtDur(time.Duration(devStep[len(devStep)/2])))
	}
	for _, r := range j.reps {
		st, _ := r.dev.MemoryStats()
		fmt.Fprintf(w, "device %d (rank %d): %s\n", r.dev.Properties().Ordinal, r.rank, memLine(st))
	}
	if ref == nil {
		return j.profile(w, cfg, ds)
	}
	r0 := j.reps[0]
	p0, err := r0.model.ReadParams(r0.s)
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
	tol := driftTolerance(cfg.Backend, n, tc.Precision)
	if worst > tol {
		return fmt.Errorf("data-parallel loss differs from one device's by %.2e (tolerance %.0e)", worst, tol)
	}
	fmt.Fprintf(w, "verdict: %s as one device on the same global batches: losses within %.1e (drift tolerance %.0e), parameters within %.1e at the end\n",
		plural(n, "rank")+map[bool]string{true: " trains", false: " train"}[n == 1], worst, tol, maxDiff)
	return j.profile(w, cfg, ds)
}

// profile times the pieces of the step on every local rank (--profile N
// replays), after the training and its checks: the replays train on.
func (j *job) profile(w io.Writer, cfg trainConfig, ds *train.Dataset) (err error) {
	if cfg.Profile <= 0 {
		return nil
	}
	profs := make([]*stepProfile, len(j.reps))
	execs := make([]*gg.Exec, len(j.reps))
	defer func() {
		for i := range j.reps {
			if execs[i] != nil {
				err = errors.Join(err, execs[i].Destroy())
			}
			if profs[i] != nil {
				err = errors.Join(err, profs[i].destroy())
			}
		}
	}()
	for i := range j.reps {
		profs[i] = &stepProfile{}
	}
	if err := j.each(func(r *replica) error {
		i := slices.Index(j.reps, r)
		r.model.Mark = profs[i].Mark
		defer func() { r.model.Mark = nil }()
		var err error
		execs[i], err = r.captureStep()
		return err
	}); err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	for k := range cfg.Profile + 1 {
		if err := j.each(func(r *replica) error {
			i := slices.Index(j.reps, r)
			if err := r.static.LoadShard(r.s, ds, k%ds.Batches(), r.rank, j.world); err != nil {
				return err
			}
			if err := execs[i].Launch(r.s); err != nil {
				return err
			}
			if err := r.s.Synchronize(); err != nil {
				return err
			}
			if k == 0 {
				return nil // the first replay warms up
			}
			return profs[i].sample()
		}); err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
	}
	for i, r := range j.reps {
		profs[i].report(w, fmt.Sprintf("step profile, rank %d (device %d)", r.rank, r.dev.Properties().Ordinal), j.stepTime)
	}
	return nil
}
