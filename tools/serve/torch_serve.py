#!/usr/bin/env python3
"""PyTorch serving the reference MLP with one CUDA graph per batch size, for
side by side comparison with examples/serve: the same HTTP protocol, the
same dynamic batching (at most --max-batch rows, waiting at most --max-wait
for more), each batch padded up to the next captured size and replayed.

The model is internal/train's reference MLP (256 -> 1024 x4 -> 10, fp32,
TF32 off) with weights drawn as torch_graphset.py draws them: serving speed
does not depend on their values, so the two servers answer with other
logits but do the same work. Graphs are captured as vLLM captures them:
vLLM's batch sizes up to --max-batch, largest first, one warm-up each, into
one shared memory pool.

  POST /v1/infer   {"inputs": [[256 numbers], ...]}
                   -> {"outputs": [[10 logits], ...], "classes": [argmax, ...]}
  GET  /v1/model   the batch sizes, capture time and reserved memory

A bad request gets a 4xx and {"error": "..."}, as examples/serve answers.
Run it, then load it with the Go load generator:

  /opt/torch/.venv/bin/python tools/serve/torch_serve.py --port 8090 &
  .gpu/serve -demo reference -bench -target http://127.0.0.1:8090 -concurrency 1,4,16,64
  kill %1

--mode eager serves op by op (no graphs) for the same comparison.
"""

import argparse
import faulthandler
import json
import queue
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_graphset import make_model, serve_keys  # noqa: E402

IN, HIDDEN, LAYERS, CLASSES = 256, 1024, 4, 10


class Batcher:
    """Collects requests into batches on one thread that owns the GPU work."""

    def __init__(self, model, keys, max_batch, max_wait, graphs):
        self.model, self.keys, self.max_batch, self.max_wait = model, sorted(keys), max_batch, max_wait
        self.q = queue.Queue()
        self.static_in = torch.zeros(max(keys), IN, device="cuda")
        self.graphs, self.outs = {}, {}
        self.capture_ms, self.reserved = 0.0, 0
        self.batches = self.rows = self.padded = 0
        if graphs:
            self.capture()
        threading.Thread(target=self.loop, daemon=True).start()

    def capture(self):
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        total = 0.0
        for n in sorted(self.keys, reverse=True):
            x = self.static_in[:n]
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side), torch.no_grad():
                self.model(x)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            t0 = time.perf_counter()
            with torch.cuda.graph(g, pool=pool), torch.no_grad():
                self.outs[n] = self.model(x)
            torch.cuda.synchronize()
            total += time.perf_counter() - t0
            self.graphs[n] = g
        self.capture_ms = total * 1e3
        self.reserved = torch.cuda.memory_reserved()

    def key_for(self, rows):
        for k in self.keys:
            if k >= rows:
                return k
        return None

    def run(self, x):
        """Logits of the rows of x (a CPU tensor), as a list of lists."""
        n = x.shape[0]
        if not self.graphs:
            with torch.no_grad():
                return self.model(x.to("cuda", non_blocking=False)).cpu()
        k = self.key_for(n)
        self.static_in[:n].copy_(x)
        self.graphs[k].replay()
        self.padded += k - n
        return self.outs[k][:n].cpu()

    def loop(self):
        # As the Go server batches: what queued while the last batch ran
        # joins the next at once; then, with --max-wait, the batch waits
        # for more until it is full. A request that does not fit starts the
        # batch after.
        nxt = None
        while True:
            first = nxt if nxt is not None else self.q.get()
            nxt = None
            batch, rows = [first], first[0].shape[0]
            deadline = time.perf_counter() + self.max_wait
            while rows < self.max_batch:
                try:
                    item = self.q.get_nowait()
                except queue.Empty:
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        break
                    try:
                        item = self.q.get(timeout=left)
                    except queue.Empty:
                        break
                if rows + item[0].shape[0] > self.max_batch:
                    nxt = item
                    break
                batch.append(item)
                rows += item[0].shape[0]
            try:
                logits = self.run(torch.cat([b[0] for b in batch]))
                self.batches += 1
                self.rows += rows
                at = 0
                for x, done in batch:
                    done(logits[at:at + x.shape[0]], None)
                    at += x.shape[0]
            except Exception as e:  # answered, never lost
                for _, done in batch:
                    done(None, e)


def handler(batcher):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            # Headers and body go out in two writes; with Nagle's algorithm on,
            # the second waits for the client's delayed ACK (40 ms a request,
            # measured: 44 ms p50 at concurrency 1). Go's net/http sets
            # TCP_NODELAY on its sockets; so does this server.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def answer(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path != "/v1/model":
                return self.answer(404, {"error": "not found: GET /v1/model or POST /v1/infer"})
            self.answer(200, {"backend": "torch " + torch.__version__, "mode": "graphs" if batcher.graphs else "eager",
                              "keys": batcher.keys, "capture_ms": batcher.capture_ms,
                              "reserved_bytes": batcher.reserved, "batches": batcher.batches,
                              "rows": batcher.rows, "padded_rows": batcher.padded})

        def do_POST(self):
            if self.path != "/v1/infer":
                return self.answer(404, {"error": "not found: POST /v1/infer"})
            if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
                return self.answer(415, {"error": "want Content-Type: application/json"})
            try:
                n = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(n))
                rows = req["inputs"]
                if not rows or any(len(r) != IN for r in rows):
                    raise ValueError(f"want inputs of {IN} numbers each")
                if len(rows) > batcher.max_batch:
                    raise ValueError(f"at most {batcher.max_batch} rows a request")
                x = torch.tensor(rows, dtype=torch.float32)
            except Exception as e:
                return self.answer(400, {"error": f"bad request: {e}"})
            got = threading.Event()
            res = {}

            def done(logits, err):
                res["logits"], res["err"] = logits, err
                got.set()

            batcher.q.put((x, done))
            got.wait()
            if res["err"] is not None:
                return self.answer(500, {"error": str(res["err"])})
            logits = res["logits"]
            self.answer(200, {"outputs": logits.tolist(), "classes": logits.argmax(dim=1).tolist()})

    return H


def main():
    # kill -USR1 PID prints every thread's stack to stderr: where a request waits.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8090)
    ap.add_argument("--max-batch", type=int, default=512)
    ap.add_argument("--max-wait", type=float, default=0.0, help="seconds a batch waits for more requests once the queue is drained (0: none)")
    ap.add_argument("--mode", choices=["graphs", "eager"], default="graphs")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    model = make_model(IN, HIDDEN, LAYERS, CLASSES, "cuda")
    keys = serve_keys(a.max_batch)
    b = Batcher(model, keys, a.max_batch, a.max_wait, a.mode == "graphs")
    print(f"torch {torch.__version__}, {a.mode}: {len(keys)} batch sizes up to {a.max_batch}, "
          f"captured in {b.capture_ms:.1f} ms, reserved {b.reserved / 2**20:.1f} MiB; "
          f"serving on http://127.0.0.1:{a.port}/v1/infer", flush=True)
    ThreadingHTTPServer(("127.0.0.1", a.port), handler(b)).serve_forever()


if __name__ == "__main__":
    main()
