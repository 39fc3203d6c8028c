package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gg "github.com/gpugraph/gpugraph"
	"github.com/gpugraph/gpugraph/internal/train"
)

// backends are the backends the tests run on: host, and cuda where a GPU is.
func backends(t *testing.T) []string {
	b := []string{gg.BackendHost}
	if d, err := gg.Open(gg.BackendCUDA); err == nil {
		d.Close()
		b = append(b, gg.BackendCUDA)
	} else if !errors.Is(err, gg.ErrNoDevice) {
		t.Fatal(err)
	}
	return b
}

// start runs a server on 127.0.0.1 until the end of the test; it returns
// the server and its base URL.
func start(t *testing.T, ck train.Checkpoint, o Options) (*Server, string) {
	t.Helper()
	srv, url, _ := startStoppable(t, ck, o)
	return srv, url
}

// startStoppable is start, with the function that shuts the server down
// (gracefully, checking Serve's result) before the test ends.
func startStoppable(t *testing.T, ck train.Checkpoint, o Options) (*Server, string, func()) {
	t.Helper()
	srv, err := NewServer(ck, o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	var once sync.Once
	stop := func() { once.Do(func() { stopServer(t, srv, served) }) }
	t.Cleanup(stop)
	return srv, "http://" + l.Addr().String(), stop
}

func stopServer(t *testing.T, srv *Server, served chan error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if err := <-served; err != nil {
		t.Error(err)
	}
}

func smallCheckpoint() train.Checkpoint {
	ck := demoCheckpoint(train.Small())
	ck.Keys = []int{1, 2, 4, 8, 16}
	return ck
}

// reference computes logits op by op on backend, all rows in one batch
// (each row's logits are the same bits at any batch size).
func reference(t *testing.T, backend string, ck train.Checkpoint, x [][]float32) [][]float32 {
	t.Helper()
	e, err := newEngine(ck, Options{Backend: backend, MaxBatch: len(x)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	z, err := e.run(slices.Concat(x...), len(x), new(phases))
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(x))
	for i := range out {
		out[i] = z[i*ck.Config.Classes : (i+1)*ck.Config.Classes]
	}
	return out
}

func randomRows(r *rand.Rand, n, in int) [][]float32 {
	x := make([][]float32, n)
	for i := range x {
		x[i] = make([]float32, in)
		for j := range x[i] {
			x[i][j] = float32(r.NormFloat64())
		}
	}
	return x
}

// infer posts rows and returns the status and the decoded answer.
func infer(c *http.Client, url string, x [][]float32) (int, InferResponse, string, error) {
	body, _ := json.Marshal(InferRequest{Inputs: x})
	return postRaw(c, url+"/v1/infer", "application/json", body)
}

func postRaw(c *http.Client, url, ctype string, body []byte) (int, InferResponse, string, error) {
	var r InferResponse
	resp, err := c.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		return 0, r, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, r, "", err
	}
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(b, &r)
	}
	return resp.StatusCode, r, string(b), err
}

// Concurrent clients over real HTTP on 127.0.0.1 each get exactly their own
// rows' logits, batched with other clients' rows and padded, with graphs
// and op by op, on every backend.
func TestServerAnswersEachRequestWithItsOwnRows(t *testing.T) {
	ck := smallCheckpoint()
	const clients, perClient = 12, 8
	r := rand.New(rand.NewPCG(1, 2))
	// Each request 1 to 3 rows, every row distinct.
	reqs := make([][][]float32, clients*perClient)
	var all [][]float32
	for i := range reqs {
		reqs[i] = randomRows(r, 1+i%3, ck.Config.In)
		all = append(all, reqs[i]...)
	}
	for _, be := range backends(t) {
		want := reference(t, be, ck, all)
		for _, graphs := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/graphs=%v", be, graphs), func(t *testing.T) {
				srv, url := start(t, ck, Options{Backend: be, Graphs: graphs, MaxWait: time.Millisecond})
				client := &http.Client{Timeout: time.Minute}
				var wg sync.WaitGroup
				errs := make(chan error, len(reqs))
				for c := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := range perClient {
							i := c*perClient + j
							code, resp, body, err := infer(client, url, reqs[i])
							if err != nil || code != http.StatusOK {
								errs <- fmt.Errorf("request %d: %d %s %v", i, code, body, err)
								return
							}
							off := 0
							for k := range i {
								off += len(reqs[k])
							}
							for k, got := range resp.Outputs {
								if !slices.Equal(got, want[off+k]) || resp.Classes[k] != slices.Index(got, slices.Max(got)) {
									errs <- fmt.Errorf("request %d row %d: %v, want %v", i, k, got, want[off+k])
									return
								}
							}
							if len(resp.Outputs) != len(reqs[i]) {
								errs <- fmt.Errorf("request %d: %d rows back for %d", i, len(resp.Outputs), len(reqs[i]))
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				mi := srv.Info()
				if mi.Rows != len(all) {
					t.Errorf("%d rows served, sent %d", mi.Rows, len(all))
				}
				t.Logf("%d requests in %d batches (%.1f rows a batch, %d padding rows)", len(reqs), mi.Batches, float64(mi.Rows)/float64(mi.Batches), mi.PaddedRows)
				if graphs && (len(mi.Keys) != 5 || mi.GraphBytes == 0 || mi.GraphBytes >= mi.SumGraphBytes) {
					t.Errorf("graph set: %+v", mi)
				}
			})
		}
	}
}

// Bad requests get a 4xx that says what is wrong, and good requests sent
// at the same time are answered as usual.
func TestServerRefusesBadRequests(t *testing.T) {
	ck := smallCheckpoint()
	_, url := start(t, ck, Options{Backend: gg.BackendHost, Graphs: true, MaxWait: time.Millisecond})
	in := ck.Config.In
	row := strings.TrimSuffix(strings.Repeat("0.5,", in), ",")
	bad := []struct {
		name, ctype, body string
		code              int
		msg               string
	}{
		{"wrong content type", "text/plain", `{"inputs": [[` + row + `]]}`, 415, `content type "text/plain": send application/json`},
		{"no content type", "", `{"inputs": [[` + row + `]]}`, 415, "send application/json"},
		{"not JSON", "application/json", `inputs=1`, 400, "not a JSON request"},
		{"truncated", "application/json", `{"inputs": [[0.5, 0.5`, 400, "not a JSON request"},
		{"not numbers", "application/json", `{"inputs": [["a"]]}`, 400, "inputs must be arrays of numbers"},
		{"null row", "application/json", `{"inputs": [` + `[` + row + `], null]}`, 400, "input 1 has 0 numbers: the model takes 64"},
		{"wrong length", "application/json", `{"inputs": [[1, 2, 3]]}`, 400, "input 0 has 3 numbers: the model takes 64"},
		{"number too large", "application/json", `{"inputs": [[1e60]]}`, 400, "inputs must be arrays of numbers"},
		{"no inputs", "application/json", `{"inputs": []}`, 400, "no inputs"},
		{"unknown field", "application/json", `{"input": [[1]]}`, 400, `unknown field "input"`},
		{"two values", "application/json", `{"inputs": [[` + row + `]]} {}`, 400, "more than one JSON value"},
		{"too many rows", "application/json", `{"inputs": [` + strings.TrimSuffix(strings.Repeat("["+row+"],", 17), ",") + `]}`, 413, "17 inputs: at most 16 per request"},
		{"body too large", "application/json", `{"inputs": [[` + strings.Repeat(" ", 1<<20) + `]]}`, 413, "body over"},
	}
	client := &http.Client{Timeout: time.Minute}
	r := rand.New(rand.NewPCG(5, 6))
	good := randomRows(r, 40, in)
	want := reference(t, gg.BackendHost, ck, good)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, x := range good {
			code, resp, body, err := infer(client, url, [][]float32{x})
			if err != nil || code != 200 || !slices.Equal(resp.Outputs[0], want[i]) {
				t.Errorf("good request %d beside bad ones: %d %s %v", i, code, body, err)
				return
			}
		}
	}()
	for _, b := range bad {
		code, _, body, err := postRaw(client, url+"/v1/infer", b.ctype, []byte(b.body))
		var e ErrorResponse
		if err != nil || code != b.code || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, b.msg) {
			t.Errorf("%s: %d %s %v, want %d containing %q", b.name, code, body, err, b.code, b.msg)
		}
	}
	resp, err := client.Get(url + "/v1/infer")
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/infer: %v %v", resp.Status, err)
	}
	resp.Body.Close()
	wg.Wait()
}

// A server restarted from the checkpoint file answers the same requests
// with the same bytes; graceful shutdown answers the requests in flight.
func TestServerRestartFromFileAndShutdown(t *testing.T) {
	ck := smallCheckpoint()
	path := filepath.Join(t.TempDir(), "model.ckpt")
	if err := train.SaveCheckpoint(path, ck); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	reqs := [][][]float32{randomRows(r, 1, 64), randomRows(r, 5, 64), randomRows(r, 16, 64)}
	answers := func(o Options) []string {
		loaded, err := train.LoadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := NewServer(loaded, o)
		if err != nil {
			t.Fatal(err)
		}
		if o.Graphs && !slices.Equal(srv.Info().Keys, ck.Keys) {
			t.Errorf("keys %v, saved %v", srv.Info().Keys, ck.Keys)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		url := "http://" + l.Addr().String()
		var out []string
		for _, x := range reqs {
			code, _, body, err := infer(http.DefaultClient, url, x)
			if err != nil || code != 200 {
				t.Fatalf("%d %s %v", code, body, err)
			}
			out = append(out, body)
		}
		stopServer(t, srv, served)
		return out
	}
	o := Options{Backend: gg.BackendHost, Graphs: true, MaxWait: time.Millisecond}
	first, second := answers(o), answers(o)
	if !slices.Equal(first, second) {
		t.Errorf("the restarted server answered differently:\n%v\n%v", first, second)
	}
	o.Graphs = false
	if ops := answers(o); !slices.Equal(first, ops) {
		t.Errorf("op by op answered differently from graphs:\n%v\n%v", first, ops)
	}

	// Shutdown with requests waiting in a batch (a long MaxWait): they
	// are answered before the server stops.
	srv, url, stop := startStoppable(t, ck, Options{Backend: gg.BackendHost, Graphs: true, MaxWait: 500 * time.Millisecond})
	codes := make(chan int, 3)
	for _, x := range reqs {
		go func() {
			code, _, _, _ := infer(http.DefaultClient, url, x)
			codes <- code
		}()
	}
	for srv.queued.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	stop()
	for range reqs {
		if code := <-codes; code != 200 {
			t.Errorf("a request in flight at shutdown got %d", code)
		}
	}
}

func TestFlags(t *testing.T) {
	bad := []struct{ args, msg string }{
		{"", "give -model FILE"},
		{"-model a -demo small", "give -model FILE"},
		{"-demo big", `-demo "big": want small or reference`},
		{"-demo small -mode fast", `-mode "fast"`},
		{"-demo small -keys 1,x", `"x" is not a batch size`},
		{"-demo small -keys 0", `"0" is not a batch size`},
		{"-demo small -max-batch -1", "cannot be negative"},
		{"-demo small extra", `unexpected argument "extra"`},
		{"-demo small -nosuch", "flag provided but not defined"},
		{"-demo small -target http://127.0.0.1:1", "-target applies to -bench only"},
		{"-demo small -bench -target 127.0.0.1:1", "want http://HOST:PORT"},
		{"-demo small -gemm nosuch", `-gemm "nosuch": want cublas, cublaslt or kernel`},
		{"-demo small -gemm cublaslt", "-gemm applies to -backend cuda"},
		{"-demo small -bench -target http://127.0.0.1:1/v1/infer", "want http://HOST:PORT"},
		{"-demo small -bench -reps 0", "-reps: want at least 1"},
	}
	for _, b := range bad {
		err := run(strings.Fields(b.args), io.Discard)
		var u usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("serve %s: %v, want a usage error containing %q", b.args, err, b.msg)
		}
	}
	if err := run([]string{"-model", filepath.Join(t.TempDir(), "none")}, io.Discard); err == nil {
		t.Error("a missing checkpoint file was accepted")
	}
	var out bytes.Buffer
	if err := run([]string{"-demo", "small", "-bench", "-requests", "20", "-concurrency", "1,4", "-keys", "1,2,4,8"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"graphs       4", "ops          4", "graph set: 4 batch sizes captured"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-bench output lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}

// -bench -target loads another server with the same protocol: here one of
// ours on 127.0.0.1, as tools/serve/torch_serve.py would be on a GPU.
func TestBenchTarget(t *testing.T) {
	ck := smallCheckpoint()
	srv, url := start(t, ck, Options{Backend: gg.BackendHost, Graphs: true, MaxWait: time.Millisecond})
	var out strings.Builder
	if err := run(strings.Fields("-demo small -bench -target "+url+" -concurrency 1,4 -requests 40"), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "target") || !strings.HasPrefix(lines[2], "target") {
		t.Fatalf("want a header and a target row per level:\n%s", out.String())
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); f[len(f)-1] != "0" {
			t.Errorf("errors in %q", l)
		}
	}
	if mi := srv.Info(); mi.Rows < 40*2 {
		t.Errorf("the target served %d rows, want at least %d", mi.Rows, 40*2)
	}
}

// TestMedianLoads: level by level, the median of each measure over the
// runs, each measure on its own.
func TestMedianLoads(t *testing.T) {
	ms := time.Millisecond
	run := func(tput float64, p50, p99 time.Duration) LoadResult {
		return LoadResult{Concurrency: 4, Requests: 100, Elapsed: time.Duration(100 / tput * float64(time.Second)), P50: p50, P99: p99}
	}
	got := medianLoads([][]LoadResult{
		{run(100, 3*ms, 9*ms)}, {run(300, 1*ms, 30*ms)}, {run(200, 2*ms, 10*ms)},
	})
	if len(got) != 1 || got[0].P50 != 2*ms || got[0].P99 != 10*ms || math.Abs(got[0].Throughput()-200) > 1e-6 || got[0].Concurrency != 4 {
		t.Fatalf("medians %+v (throughput %v), want p50 2ms, p99 10ms, 200 req/s at concurrency 4", got, got[0].Throughput())
	}
}
