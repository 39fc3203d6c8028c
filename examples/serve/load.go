package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LoadResult is what one load run measured.
type LoadResult struct {
	Concurrency int
	Requests    int // answered with 200
	Errors      int
	Elapsed     time.Duration
	P50, P99    time.Duration
}

// Throughput is answered requests per second.
func (r LoadResult) Throughput() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// Load sends requests POST /v1/infer requests of rows random inputs of in
// numbers each to url from concurrency clients at once, each sending its
// next request when the last is answered, and measures each request's
// latency. It stops early when ctx is done.
func Load(ctx context.Context, url string, in, rows, concurrency, requests int, seed uint64) (LoadResult, error) {
	if concurrency < 1 || requests < 1 || rows < 1 {
		return LoadResult{}, fmt.Errorf("load: concurrency %d, requests %d, rows %d: want at least 1 each", concurrency, requests, rows)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	// Bodies made beforehand, so the clients measure the server.
	r := rand.New(rand.NewPCG(seed, 7))
	bodies := make([][]byte, min(requests, 64))
	for i := range bodies {
		x := make([][]float32, rows)
		for j := range x {
			x[j] = make([]float32, in)
			for k := range x[j] {
				x[j][k] = float32(r.NormFloat64())
			}
		}
		bodies[i], _ = json.Marshal(InferRequest{Inputs: x})
	}
	var next, errs atomic.Int64
	lat := make([]time.Duration, requests)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= requests {
					return
				}
				t0 := time.Now()
				err := post(ctx, client, url, bodies[i%len(bodies)])
				lat[i] = time.Since(t0)
				if err != nil {
					errs.Add(1)
					lat[i] = -1
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res := LoadResult{Concurrency: concurrency, Elapsed: time.Since(start), Errors: int(errs.Load())}
	done := slices.DeleteFunc(lat[:min(requests, int(next.Load()))], func(d time.Duration) bool { return d <= 0 })
	slices.Sort(done)
	res.Requests = len(done)
	if len(done) > 0 {
		res.P50 = done[len(done)/2]
		res.P99 = done[min(len(done)-1, len(done)*99/100)]
	}
	return res, firstErr
}

func post(ctx context.Context, c *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return nil
}
