// Command serve is an inference server for the MLP that `gpugraph train
// --save FILE` trains: it loads the checkpoint, captures one graph of the
// forward pass per batch size into a gpugraph.GraphSet (one memory budget:
// the largest graph's), batches concurrent requests dynamically (a batch
// takes the requests that queued while the last one ran, at most -max-batch
// rows, and waits -max-wait for more, none by default), pads each batch up
// to the next captured size, replays, and answers each request with its own
// rows.
//
//	go run ./cmd/gpugraph train --save model.ckpt
//	go run ./examples/serve -model model.ckpt -addr 127.0.0.1:8080
//	curl -s -H 'Content-Type: application/json' \
//	     -d '{"inputs": [[0.1, 0.2, ...64 numbers...]]}' 127.0.0.1:8080/v1/infer
//
// POST /v1/infer takes {"inputs": [[In numbers], ...]} and answers
// {"outputs": [[Classes logits], ...], "classes": [argmax, ...]}; a bad
// request gets a 4xx and {"error": "..."}. GET /v1/model describes the
// model, the set's batch sizes and memory, and the batches served. SIGINT
// or SIGTERM stops it after the requests in flight.
//
// -bench starts a server replaying graphs and one running op by op, both
// on 127.0.0.1, and loads each at several concurrency levels, printing
// throughput and latency percentiles. -bench -target URL loads another
// server that speaks the same protocol instead (tools/serve/torch_serve.py:
// PyTorch with a CUDA graph per batch size), with the same load.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpugraph/gpugraph/internal/train"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

type config struct {
	model, demo, addr, mode, keys, conc string
	target                              string // -bench: load this server's /v1/infer instead
	opts                                Options
	budgetMiB                           float64
	bench                               bool
	requests, rows, reps                int
	seconds                             time.Duration
}

func parse(args []string, out io.Writer) (config, error) {
	c := config{opts: Options{Backend: "host"}}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.model, "model", "", "checkpoint FILE written by gpugraph train --save")
	fs.StringVar(&c.demo, "demo", "", "serve an untrained model instead: small or reference")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.opts.Backend, "backend", c.opts.Backend, "host or cuda")
	fs.StringVar(&c.opts.GEMM, "gemm", "", "cuda: the forward pass's GEMM, cublas, cublaslt (bias and ReLU in its epilogue) or kernel (default: cublaslt for graphs, cublas op by op)")
	fs.StringVar(&c.mode, "mode", "graphs", "graphs (replay a graph set) or ops (op by op)")
	fs.StringVar(&c.keys, "keys", "", "batch sizes to capture, comma-separated (default: the checkpoint's, else vLLM's 51 up to 512)")
	fs.IntVar(&c.opts.MaxBatch, "max-batch", 0, "most rows in a batch (default: the largest batch size)")
	fs.DurationVar(&c.opts.MaxWait, "max-wait", c.opts.MaxWait, "how long a batch waits for more requests once it has taken those queued (0: it runs at once)")
	fs.Float64Var(&c.budgetMiB, "budget", 0, "refuse to start if the graph set needs more than this many MiB (0: no budget)")
	fs.BoolVar(&c.bench, "bench", false, "load a graphs server and an ops server on 127.0.0.1 and print throughput and latency")
	fs.StringVar(&c.conc, "concurrency", "1,4,16,64", "-bench: concurrency levels")
	fs.IntVar(&c.requests, "requests", 2000, "-bench: requests per level")
	fs.IntVar(&c.rows, "rows", 1, "-bench: inputs per request")
	fs.IntVar(&c.reps, "reps", 1, "-bench: runs of each mode, alternated (ops first every other run), with the medians after")
	fs.StringVar(&c.target, "target", "", "-bench: load this server (http://HOST:PORT, same protocol) instead of starting ours")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return c, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	case (c.model == "") == (c.demo == ""):
		return c, usageError{errors.New("give -model FILE (from gpugraph train --save FILE) or -demo small|reference")}
	case c.demo != "" && c.demo != "small" && c.demo != "reference":
		return c, usageError{fmt.Errorf("-demo %q: want small or reference", c.demo)}
	case c.opts.GEMM != "" && c.opts.GEMM != "cublas" && c.opts.GEMM != "cublaslt" && c.opts.GEMM != "kernel":
		return c, usageError{fmt.Errorf("-gemm %q: want cublas, cublaslt or kernel", c.opts.GEMM)}
	case c.opts.GEMM != "" && c.opts.Backend != "cuda":
		return c, usageError{fmt.Errorf("-gemm applies to -backend cuda (the host backend runs the package's kernel)")}
	case c.mode != "graphs" && c.mode != "ops":
		return c, usageError{fmt.Errorf("-mode %q: want graphs or ops", c.mode)}
	case c.opts.MaxBatch < 0 || c.opts.MaxWait < 0 || c.budgetMiB < 0:
		return c, usageError{errors.New("-max-batch, -max-wait and -budget cannot be negative")}
	case c.requests < 1 || c.rows < 1 || c.reps < 1:
		return c, usageError{errors.New("-requests, -rows and -reps: want at least 1")}
	case c.target != "" && !c.bench:
		return c, usageError{errors.New("-target applies to -bench only")}
	}
	if c.target != "" {
		u, err := url.Parse(c.target)
		if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return c, usageError{fmt.Errorf("-target %q: want http://HOST:PORT", c.target)}
		}
	}
	if c.keys != "" {
		for _, f := range strings.Split(c.keys, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 1 {
				return c, usageError{fmt.Errorf("-keys %q: %q is not a batch size", c.keys, f)}
			}
			c.opts.Keys = append(c.opts.Keys, k)
		}
	}
	c.opts.Graphs = c.mode == "graphs"
	c.opts.Budget = uint64(c.budgetMiB * (1 << 20))
	return c, nil
}

func checkpoint(c config) (train.Checkpoint, error) {
	if c.model != "" {
		return train.LoadCheckpoint(c.model)
	}
	cfg := train.Small()
	if c.demo == "reference" {
		cfg = train.Reference()
	}
	return demoCheckpoint(cfg), nil
}

// demoCheckpoint is an untrained model: NewModel's initialization, made on
// the host.
func demoCheckpoint(cfg train.Config) train.Checkpoint {
	p := make([]float32, cfg.NumParams())
	x := cfg.Seed*2654435761 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = (float32(x%2001) - 1000) / 20000
	}
	return train.Checkpoint{Config: cfg, Params: p}
}

func run(args []string, out io.Writer) error {
	c, err := parse(args, out)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ck, err := checkpoint(c)
	if err != nil {
		return err
	}
	if c.bench {
		return bench(out, ck, c)
	}
	srv, err := NewServer(ck, c.opts)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", c.addr)
	if err != nil {
		return errors.Join(err, srv.Shutdown(context.Background()))
	}
	describe(out, srv.Info())
	fmt.Fprintf(out, "serving on http://%s/v1/infer (Ctrl-C stops after the requests in flight)\n", l.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(sctx))
	mi := srv.Info()
	fmt.Fprintf(out, "stopped: %d batches, %d rows (%d padding rows)\n", mi.Batches, mi.Rows, mi.PaddedRows)
	return err
}

func describe(out io.Writer, mi ModelInfo) {
	fmt.Fprintf(out, "model %s on %s, %s, batches of at most %d rows; GEMM %s\n", mi.Model, mi.Backend, mi.Mode, mi.MaxBatch, mi.GEMM)
	if mi.Mode == "graphs" {
		fmt.Fprintf(out, "graph set: %d batch sizes captured in %.1f ms; graph memory %s (the largest graph's; %s if each had its own), output buffer %s\n",
			len(mi.Keys), mi.CaptureMS, mib(mi.GraphBytes), mib(mi.SumGraphBytes), mib(mi.OutputBytes))
	}
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// bench loads a graphs server and an ops server, one after the other.
func bench(out io.Writer, ck train.Checkpoint, c config) error {
	var levels []int
	for _, f := range strings.Split(c.conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return usageError{fmt.Errorf("-concurrency %q: %q is not a number of clients", c.conc, f)}
		}
		levels = append(levels, n)
	}
	fmt.Fprintf(out, "%-7s %6s %9s %10s %10s %7s\n", "mode", "conc", "req/s", "p50", "p99", "errors")
	if c.target != "" {
		res, err := loadLevels(strings.TrimSuffix(c.target, "/")+"/v1/infer", ck.Config.In, levels, c.requests, c.rows)
		printLoad(out, "target", res)
		return err
	}
	// Modes alternate, ops first every other run, so that neither always
	// has the warmer process; with several runs, the medians follow.
	all := map[bool][][]LoadResult{}
	for rep := range c.reps {
		for _, graphs := range []bool{rep%2 == 0, rep%2 != 0} {
			o := c.opts
			o.Graphs = graphs
			res, mi, err := benchOne(ck, o, levels, c.requests, c.rows)
			mode := modeName(graphs)
			printLoad(out, mode, res)
			if mi != nil {
				describe(out, *mi)
				fmt.Fprintf(out, "  %d batches, %.1f rows a batch, %d padding rows\n", mi.Batches, float64(mi.Rows)/float64(max(1, mi.Batches)), mi.PaddedRows)
				if p := mi.Phases; p != nil {
					fmt.Fprintf(out, "  a batch, µs p50/p99: inputs in %.0f/%.0f, %s %.0f/%.0f, outputs back %.0f/%.0f; the slowest %.0f + %.0f + %.0f\n",
						p.InP50, p.InP99, map[bool]string{true: "replay", false: "forward issued"}[graphs], p.RunP50, p.RunP99, p.OutP50, p.OutP99,
						p.Slowest[0], p.Slowest[1], p.Slowest[2])
				}
				if w := mi.Waits; w != nil {
					fmt.Fprintf(out, "  a request, µs p50/p99: queued until its batch ran %.0f/%.0f, from its batch's result to its response %.0f/%.0f\n",
						w.QueuedP50, w.QueuedP99, w.AnswerP50, w.AnswerP99)
				}
			}
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			all[graphs] = append(all[graphs], res)
		}
	}
	if c.reps > 1 {
		fmt.Fprintf(out, "medians of %d runs:\n", c.reps)
		for _, graphs := range []bool{true, false} {
			printLoad(out, modeName(graphs), medianLoads(all[graphs]))
		}
	}
	return nil
}

// modeName is -mode's name of a server that replays a graph set (graphs)
// or runs op by op.
func modeName(graphs bool) string {
	if graphs {
		return "graphs"
	}
	return "ops"
}

// medianLoads is, level by level, the median throughput, p50 and p99 of
// runs (each the same levels).
func medianLoads(runs [][]LoadResult) []LoadResult {
	var out []LoadResult
	for i := range runs[0] {
		var tput []float64
		var p50, p99 []time.Duration
		r := runs[0][i]
		for _, run := range runs {
			tput = append(tput, run[i].Throughput())
			p50, p99 = append(p50, run[i].P50), append(p99, run[i].P99)
		}
		slices.Sort(tput)
		slices.Sort(p50)
		slices.Sort(p99)
		m := len(runs) / 2
		// A result whose Throughput is the median: Requests over Elapsed.
		r.Elapsed = time.Duration(float64(r.Requests) / tput[m] * float64(time.Second))
		r.P50, r.P99 = p50[m], p99[m]
		out = append(out, r)
	}
	return out
}

func benchOne(ck train.Checkpoint, o Options, levels []int, requests, rows int) (res []LoadResult, mi *ModelInfo, err error) {
	srv, err := NewServer(ck, o)
	if err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, errors.Join(err, srv.Shutdown(context.Background()))
	}
	go srv.Serve(l)
	defer func() {
		info := srv.Info()
		mi = &info
		err = errors.Join(err, srv.Shutdown(context.Background()))
	}()
	res, err = loadLevels("http://"+l.Addr().String()+"/v1/infer", ck.Config.In, levels, requests, rows)
	return res, nil, err
}

// loadLevels warms the server at url up, then loads it at each concurrency
// level in turn. The warm-up runs at the highest level, 4 requests a
// client: the first run of a process at 16 and 64 clients had a p99 of
// 28-37 ms where the later ones had 2-5 ms (H100, 2026-11-26), which a
// warm-up of 50 requests from 4 clients left in.
func loadLevels(url string, in int, levels []int, requests, rows int) (res []LoadResult, err error) {
	ctx := context.Background()
	top := 4
	for _, n := range levels {
		top = max(top, n)
	}
	if _, err := Load(ctx, url, in, rows, top, max(50, 4*top), 1); err != nil { // warm-up
		return nil, err
	}
	for i, n := range levels {
		r, err := Load(ctx, url, in, rows, n, requests, uint64(i+2))
		res = append(res, r)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// printLoad prints one row per load level.
func printLoad(out io.Writer, mode string, res []LoadResult) {
	for _, r := range res {
		fmt.Fprintf(out, "%-7s %6d %9.0f %10v %10v %7d\n", mode, r.Concurrency, r.Throughput(),
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Errors)
	}
}
