package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/train"
)

// Options configure a server.
type Options struct {
	Backend  string        // "host" or "cuda"
	Graphs   bool          // replay a graph set (false: run op by op)
	Keys     []int         // batch sizes to capture; nil: the checkpoint's, else vLLM's up to MaxBatch
	MaxBatch int           // rows per batch; 0: the largest key
	MaxWait  time.Duration // how long a batch waits for more requests once it has taken those queued (0: none)
	Budget   uint64        // memory budget of the graph set in bytes; 0: none
	// GEMM is the forward pass's matrix product on cuda: "cublas",
	// "cublaslt" (bias and ReLU in cuBLASLt's epilogue, one call a layer)
	// or "kernel" (the train package's tiled kernel, what the host backend
	// always runs). "" picks the faster for the mode: cuBLASLt for a graph
	// set, cuBLAS op by op.
	GEMM string
}

// engine runs the model on batches of rows: one at a time.
type engine struct {
	dev       *gg.Device
	s         *gg.Stream
	model     *train.Model
	cfg       train.Config
	in        gg.DevicePtr // static input: MaxBatch rows
	set       *gg.GraphSet[int]
	keys      []int
	maxBatch  int
	gemm      string // the GEMM the forward pass uses, for Info
	closeGEMM func()
}

func newEngine(ck train.Checkpoint, o Options) (e *engine, err error) {
	keys := o.Keys
	if keys == nil {
		keys = ck.Keys
	}
	if keys == nil {
		keys = train.ServeKeys(512)
		if o.MaxBatch > 0 {
			keys = train.ServeKeys(o.MaxBatch)
		}
	}
	keys = slices.Clone(keys)
	slices.Sort(keys)
	if len(keys) == 0 || keys[0] < 1 || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		return nil, fmt.Errorf("batch sizes %v: want distinct sizes of at least 1", keys)
	}
	maxBatch := o.MaxBatch
	if maxBatch == 0 {
		maxBatch = keys[len(keys)-1]
	}
	if maxBatch < 1 {
		return nil, fmt.Errorf("max batch %d: want at least 1", maxBatch)
	}
	// Every batch pads up to a captured size: the largest is MaxBatch.
	keys = slices.DeleteFunc(keys, func(k int) bool { return k > maxBatch })
	if len(keys) == 0 || keys[len(keys)-1] != maxBatch {
		keys = append(keys, maxBatch)
	}
	e = &engine{cfg: ck.Config, keys: keys, maxBatch: maxBatch}
	if e.dev, err = gg.Open(o.Backend); err != nil {
		return nil, fmt.Errorf("the %s backend cannot start: %w", o.Backend, err)
	}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	// Op by op, the pool keeps what a batch frees for the next one, as
	// PyTorch's caching allocator does.
	if err := e.dev.DefaultMemPool().SetReleaseThreshold(^uint64(0)); err != nil {
		return nil, err
	}
	if e.s, err = e.dev.NewStream(); err != nil {
		return nil, err
	}
	if e.model, err = train.NewModel(e.s, ck.Config); err != nil {
		return nil, err
	}
	// On a GPU the forward pass multiplies with cuBLAS by default, as
	// PyTorch does: the package's tiled kernel uses a handful of blocks at
	// small batches (measured on an H100: 0.5 ms for a batch of 1, against
	// 42 µs for PyTorch's replay). A graph set replays faster with
	// cuBLASLt, one call a layer with bias and ReLU in its epilogue, and
	// captures faster (H100, 2026-11-26: replay 34/57/81/115/158 µs at
	// batch 1/8/64/256/512 against cuBLAS's 38/65/93/127/166; the 51-graph
	// set in 16.4 ms against 20.1, medians of 5 alternated) and serves
	// level with it (5 alternated runs each, docs/serving.md); op by op
	// cuBLAS is faster at small batches (174 µs against 216 at batch 1).
	// Without the library asked for it keeps the kernel, unless a GEMM
	// was asked for by name.
	e.gemm = "tiled kernel (internal/train)"
	if e.dev.Properties().Backend == gg.BackendCUDA {
		var err error
		var desc string
		gemm := o.GEMM
		if gemm == "" && o.Graphs {
			gemm = "cublaslt"
		}
		useCuBLAS := func() {
			var g train.GEMM
			if g, desc, e.closeGEMM, err = train.CuBLAS(e.dev, train.FP32); err == nil {
				e.model.GEMM = g
			}
		}
		switch gemm {
		case "", "cublas":
			useCuBLAS()
		case "cublaslt":
			var g train.EpilogueGEMM
			if g, desc, e.closeGEMM, err = train.CuBLASLt(e.dev); err == nil {
				e.model.ForwardGEMM = g
			}
		case "kernel":
		default:
			return nil, fmt.Errorf("GEMM %q: want cublas, cublaslt or kernel", o.GEMM)
		}
		if err != nil && o.GEMM == "" && gemm == "cublaslt" { // cuBLASLt not there: cuBLAS, then the kernel
			useCuBLAS()
		}
		switch {
		case err != nil && o.GEMM != "":
			return nil, fmt.Errorf("GEMM %s: %w", o.GEMM, err)
		case err != nil:
			e.gemm += fmt.Sprintf("; cuBLAS not used: %v", err)
		case desc != "":
			e.gemm = desc
		}
	}
	if err := e.model.WriteParams(e.s, ck.Params); err != nil {
		return nil, err
	}
	if e.in, err = e.dev.Malloc(4 * maxBatch * ck.Config.In); err != nil {
		return nil, err
	}
	if err := e.s.Synchronize(); err != nil {
		return nil, err
	}
	if o.Graphs {
		e.set, err = gg.NewGraphSet(e.s, func(s *gg.Stream, rows int) ([]gg.DevicePtr, error) {
			z, err := e.model.Forward(s, e.in, rows)
			return []gg.DevicePtr{z}, err
		}, gg.GraphSetConfig[int]{Keys: keys, Compare: cmpInt, OnMissing: gg.MissingPad, MaxGraphs: len(keys), MemoryBudget: o.Budget})
		if err != nil {
			return nil, err
		}
		// Each graph runs once before the first request, as vLLM warms its
		// graphs up: a graph's first launch on the driver uploads it and
		// may load the kernels it names, and a request should not wait for
		// that. (On an H100 the graph-set server's p99 at 64 clients was
		// 17-37 ms against 5.4 ms op by op before this; whether first
		// launches were the cause is not yet measured.)
		for _, k := range e.set.Keys() {
			if _, err := e.set.Replay(k); err != nil {
				return nil, err
			}
		}
		if err := e.s.Synchronize(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func cmpInt(a, b int) int { return a - b }

// run computes the logits of rows rows of x (rows×In): replaying the graph
// of the next captured size, or op by op.
func (e *engine) run(x []float32, rows int, ph *phases) ([]float32, error) {
	t0 := time.Now()
	if err := e.s.Memcpy(gg.HtoD(e.in, gg.Bytes(x[:rows*e.cfg.In]))); err != nil {
		return nil, err
	}
	z := make([]float32, rows*e.cfg.Classes)
	t1 := time.Now()
	ph.in = t1.Sub(t0)
	if e.set != nil {
		outs, err := e.set.Replay(rows)
		if err != nil {
			return nil, err
		}
		t2 := time.Now()
		ph.run = t2.Sub(t1)
		err = outs[0].Read(gg.Bytes(z))
		ph.out = time.Since(t2)
		return z, err
	}
	p, err := e.model.Forward(e.s, e.in, rows)
	if err != nil {
		return nil, err
	}
	t2 := time.Now()
	ph.run = t2.Sub(t1)
	err = e.s.Memcpy(gg.DtoH(gg.Bytes(z), p))
	err = errors.Join(err, e.s.FreeAsync(p), e.s.Synchronize())
	ph.out = time.Since(t2)
	return z, err
}

// phases are where one batch's time went: copying its inputs in, the
// replay (or the forward pass issued op by op), reading its outputs back
// (for ops, the wait for the forward pass too).
type phases struct{ in, run, out time.Duration }

func (p phases) total() time.Duration { return p.in + p.run + p.out }

// maxTimings bounds the batch timings a server keeps (the first ones).
const maxTimings = 1 << 16

func (e *engine) close() error {
	var errs []error
	if e.set != nil {
		errs = append(errs, e.set.Close())
	}
	if e.in != 0 {
		errs = append(errs, e.dev.Free(e.in))
	}
	if e.model != nil {
		errs = append(errs, e.model.Destroy())
	}
	if e.closeGEMM != nil {
		e.closeGEMM()
	}
	if e.dev != nil {
		errs = append(errs, e.dev.Close())
	}
	return errors.Join(errs...)
}

var errShutdown = errors.New("the server is shutting down")

// request is one HTTP request's rows, waiting for a batch.
type request struct {
	x    []float32 // rows×In
	rows int
	done chan result // buffered: the batcher never waits for the handler
	// When it was queued, when its batch started, when its batch sent the
	// result: the request's own phases (waits), around its batch's.
	queued, started, answered time.Time
}

type result struct {
	logits []float32
	err    error
}

// Server answers inference requests over HTTP, batching concurrent ones.
type Server struct {
	eng     *engine
	opts    Options
	queue   chan *request
	stop    chan struct{}
	stopped sync.WaitGroup
	http    *http.Server
	queued  atomic.Int64 // requests handed to the batcher
	batches struct {
		sync.Mutex
		n, rows, padded int
		timings         []phases // of each batch, up to maxTimings
		waits           []waits  // of each request answered, up to maxTimings
	}
}

// waits are a request's time outside its batch's phases: queued until its
// batch started, and from the batch's result to the response written.
type waits struct{ queued, answer time.Duration }

// NewServer loads the model and, with Graphs, captures its graph set.
func NewServer(ck train.Checkpoint, o Options) (*Server, error) {
	if o.MaxWait < 0 {
		return nil, fmt.Errorf("max wait %v: want 0 or more", o.MaxWait)
	}
	eng, err := newEngine(ck, o)
	if err != nil {
		return nil, err
	}
	srv := &Server{eng: eng, opts: o, queue: make(chan *request, 1024), stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/infer", srv.infer)
	mux.HandleFunc("/v1/model", srv.info)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	srv.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srv.stopped.Add(1)
	go srv.batch()
	return srv, nil
}

// Serve answers requests on l until Shutdown.
func (srv *Server) Serve(l net.Listener) error {
	err := srv.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops taking requests, waits for those in flight (until ctx is
// done), stops the batcher and frees the model.
func (srv *Server) Shutdown(ctx context.Context) error {
	err := srv.http.Shutdown(ctx)
	close(srv.stop)
	srv.stopped.Wait()
	return errors.Join(err, srv.eng.close())
}

// batch collects requests into batches of at most MaxBatch rows and runs
// them one after another: a batch takes the requests that queued while the
// last one ran and, with MaxWait, waits up to MaxWait after its first for
// more. Without a wait a lone request runs at once, and under load batches
// still fill, from the queue that builds while a batch runs (what Triton's
// dynamic batcher does by default).
func (srv *Server) batch() {
	defer srv.stopped.Done()
	var next *request // a request that did not fit the last batch
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-srv.queue:
			case <-srv.stop:
				// Requests still queued (Shutdown gave up waiting for
				// them) are answered, not left hanging.
				for {
					select {
					case r := <-srv.queue:
						r.done <- result{err: errShutdown}
					default:
						return
					}
				}
			}
		}
		batch, rows := []*request{first}, first.rows
		// What queued while the last batch ran joins this one at once;
		// then, with MaxWait, the batch waits for more until it is full.
		add := func(r *request) bool {
			if rows+r.rows > srv.eng.maxBatch {
				next = r
				return false
			}
			batch, rows = append(batch, r), rows+r.rows
			return true
		}
	drain:
		for rows < srv.eng.maxBatch {
			select {
			case r := <-srv.queue:
				if !add(r) {
					break drain
				}
			default:
				break drain
			}
		}
		if next == nil && rows < srv.eng.maxBatch && srv.opts.MaxWait > 0 {
			timer := time.NewTimer(srv.opts.MaxWait)
		fill:
			for rows < srv.eng.maxBatch {
				select {
				case r := <-srv.queue:
					if !add(r) {
						break fill
					}
				case <-timer.C:
					break fill
				}
			}
			timer.Stop()
		}
		srv.runBatch(batch, rows)
	}
}

func (srv *Server) runBatch(batch []*request, rows int) {
	in := srv.eng.cfg.In
	x := make([]float32, 0, rows*in)
	for _, r := range batch {
		x = append(x, r.x...)
	}
	var ph phases
	start := time.Now()
	for _, r := range batch {
		r.started = start
	}
	z, err := srv.eng.run(x, rows, &ph)
	srv.batches.Lock()
	if len(srv.batches.timings) < maxTimings {
		srv.batches.timings = append(srv.batches.timings, ph)
	}
	srv.batches.n++
	srv.batches.rows += rows
	if k, ok := srv.padTo(rows); ok {
		srv.batches.padded += k - rows
	}
	srv.batches.Unlock()
	c, off := srv.eng.cfg.Classes, 0
	now := time.Now()
	for _, r := range batch {
		r.answered = now
		if err != nil {
			r.done <- result{err: err}
			continue
		}
		r.done <- result{logits: z[off*c : (off+r.rows)*c]}
		off += r.rows
	}
}

func (srv *Server) padTo(rows int) (int, bool) {
	if srv.eng.set == nil {
		return rows, true
	}
	return srv.eng.set.Lookup(rows)
}

// InferRequest is the body of POST /v1/infer: rows of In numbers each.
type InferRequest struct {
	Inputs [][]float32 `json:"inputs"`
}

// InferResponse answers it: each row's logits and most likely class.
type InferResponse struct {
	Outputs [][]float32 `json:"outputs"`
	Classes []int       `json:"classes"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, ErrorResponse{Error: fmt.Sprintf(format, args...)})
}

// maxBody is the largest request body taken: MaxBatch rows of In numbers
// of up to 24 characters each, and room for the rest.
func (srv *Server) maxBody() int64 {
	return int64(srv.eng.maxBatch)*int64(srv.eng.cfg.In)*24 + 4096
}

func (srv *Server) infer(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, http.StatusMethodNotAllowed, "use POST with a JSON body {\"inputs\": [[...], ...]}")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		fail(w, http.StatusUnsupportedMediaType, "content type %q: send application/json", r.Header.Get("Content-Type"))
		return
	}
	in, maxRows := srv.eng.cfg.In, srv.eng.maxBatch
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, srv.maxBody()))
	dec.DisallowUnknownFields()
	var req InferRequest
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			fail(w, http.StatusRequestEntityTooLarge, "body over %d bytes: send at most %d inputs per request", tooBig.Limit, maxRows)
		case errors.As(err, &typ):
			fail(w, http.StatusBadRequest, "inputs must be arrays of numbers (float32): %s at %q is not", typ.Value, typ.Field)
		default:
			fail(w, http.StatusBadRequest, "not a JSON request {\"inputs\": [[...], ...]}: %v", err)
		}
		return
	}
	if dec.More() {
		fail(w, http.StatusBadRequest, "more than one JSON value in the body")
		return
	}
	rows := len(req.Inputs)
	switch {
	case rows == 0:
		fail(w, http.StatusBadRequest, "no inputs: send {\"inputs\": [[%d numbers], ...]}", in)
		return
	case rows > maxRows:
		fail(w, http.StatusRequestEntityTooLarge, "%d inputs: at most %d per request", rows, maxRows)
		return
	}
	q := &request{x: make([]float32, 0, rows*in), rows: rows, done: make(chan result, 1)}
	for i, row := range req.Inputs {
		if len(row) != in {
			fail(w, http.StatusBadRequest, "input %d has %d numbers: the model takes %d", i, len(row), in)
			return
		}
		q.x = append(q.x, row...)
	}
	q.queued = time.Now()
	select {
	case srv.queue <- q:
		srv.queued.Add(1)
	case <-r.Context().Done():
		return
	}
	var res result
	select {
	case res = <-q.done:
	case <-r.Context().Done():
		return // the client is gone; the batcher's answer is dropped
	}
	if res.err != nil {
		fail(w, http.StatusInternalServerError, "inference failed: %v", res.err)
		return
	}
	c := srv.eng.cfg.Classes
	resp := InferResponse{Outputs: make([][]float32, rows), Classes: make([]int, rows)}
	for i := range rows {
		z := res.logits[i*c : (i+1)*c]
		resp.Outputs[i] = z
		for j, v := range z {
			if v > z[resp.Classes[i]] {
				resp.Classes[i] = j
			}
		}
	}
	writeJSON(w, http.StatusOK, resp)
	srv.batches.Lock()
	if len(srv.batches.waits) < maxTimings {
		srv.batches.waits = append(srv.batches.waits, waits{q.started.Sub(q.queued), time.Since(q.answered)})
	}
	srv.batches.Unlock()
}

// ModelInfo is the answer of GET /v1/model.
type ModelInfo struct {
	Model    string `json:"model"`
	In       int    `json:"in"`
	Classes  int    `json:"classes"`
	Backend  string `json:"backend"`
	Mode     string `json:"mode"` // "graphs" or "ops"
	GEMM     string `json:"gemm"` // the forward pass's matrix product
	MaxBatch int    `json:"max_batch"`
	Keys     []int  `json:"keys,omitempty"`
	// Graph memory of the set (its largest graph's), the sum of its
	// graphs', its output buffer, and the time its capture took.
	GraphBytes    uint64  `json:"graph_bytes,omitempty"`
	SumGraphBytes uint64  `json:"sum_graph_bytes,omitempty"`
	OutputBytes   uint64  `json:"output_bytes,omitempty"`
	CaptureMS     float64 `json:"capture_ms,omitempty"`
	Batches       int     `json:"batches"`
	Rows          int     `json:"rows"`
	PaddedRows    int     `json:"padded_rows"`
	// Where the batches' time went, in µs: the median and 99th
	// percentile of each phase over the batches run so far, and the
	// phases of the slowest batch.
	Phases *PhaseStats `json:"phases,omitempty"`
	// A request's time outside its batch, in µs: queued until its batch
	// started, and from its batch's result to its response written.
	Waits *WaitStats `json:"waits,omitempty"`
}

// WaitStats summarize the requests' waits (µs).
type WaitStats struct {
	QueuedP50, QueuedP99, AnswerP50, AnswerP99 float64
}

// PhaseStats summarize the batches' phases (µs): copying inputs in, the
// replay or the op-by-op forward pass, reading outputs back.
type PhaseStats struct {
	InP50, InP99, RunP50, RunP99, OutP50, OutP99 float64
	Slowest                                      [3]float64 // in, run, out of the slowest batch
}

// quantiles returns the median and the 99th percentile, in µs, of f over
// ts.
func quantiles[T any](ts []T, f func(T) time.Duration) (p50, p99 float64) {
	v := make([]time.Duration, len(ts))
	for i, t := range ts {
		v[i] = f(t)
	}
	slices.Sort(v)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	return us(v[len(v)/2]), us(v[min(len(v)-1, len(v)*99/100)])
}

// waitStats summarizes ws (nil for none).
func waitStats(ws []waits) *WaitStats {
	if len(ws) == 0 {
		return nil
	}
	var st WaitStats
	st.QueuedP50, st.QueuedP99 = quantiles(ws, func(w waits) time.Duration { return w.queued })
	st.AnswerP50, st.AnswerP99 = quantiles(ws, func(w waits) time.Duration { return w.answer })
	return &st
}

// phaseStats summarizes ts (nil for none).
func phaseStats(ts []phases) *PhaseStats {
	if len(ts) == 0 {
		return nil
	}
	q := func(f func(phases) time.Duration) (p50, p99 float64) { return quantiles(ts, f) }
	var st PhaseStats
	st.InP50, st.InP99 = q(func(p phases) time.Duration { return p.in })
	st.RunP50, st.RunP99 = q(func(p phases) time.Duration { return p.run })
	st.OutP50, st.OutP99 = q(func(p phases) time.Duration { return p.out })
	slow := slices.MaxFunc(ts, func(a, b phases) int { return cmp.Compare(a.total(), b.total()) })
	st.Slowest = [3]float64{float64(slow.in) / 1e3, float64(slow.run) / 1e3, float64(slow.out) / 1e3}
	return &st
}

func (srv *Server) Info() ModelInfo {
	e := srv.eng
	mi := ModelInfo{Model: e.cfg.String(), In: e.cfg.In, Classes: e.cfg.Classes, Backend: srv.opts.Backend, Mode: "ops", GEMM: e.gemm, MaxBatch: e.maxBatch}
	if e.set != nil {
		st := e.set.Stats()
		mi.Mode, mi.Keys = "graphs", e.set.Keys()
		mi.GraphBytes, mi.SumGraphBytes, mi.OutputBytes = st.GraphBytes, st.SumGraphBytes, st.OutputBytes
		mi.CaptureMS = float64(st.Capture) / 1e6
	}
	srv.batches.Lock()
	mi.Batches, mi.Rows, mi.PaddedRows = srv.batches.n, srv.batches.rows, srv.batches.padded
	mi.Phases = phaseStats(srv.batches.timings)
	mi.Waits = waitStats(srv.batches.waits)
	srv.batches.Unlock()
	return mi
}

func (srv *Server) info(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		fail(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	writeJSON(w, http.StatusOK, srv.Info())
}
