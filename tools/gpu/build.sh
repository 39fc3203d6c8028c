#!/bin/bash
# Builds, here (no CUDA needed), what tools/gpu/run.sh runs on the GPU
# machine, into .gpu/ (git-ignored). BASE=<commit> also builds that
# commit's test binary and command into .gpu/base/ for side-by-side timing.
# PERF=1 also prepares the taskflow section of tools/gpu/perf.sh: the
# Taskflow headers into .gpu/taskflow/taskflow/, the C++ side's source into
# .gpu/tfside.cpp, and the Go side, tfside.go built as a command of a
# temporary copy of this module, into .gpu/tfside-go; TFSIDE names the
# directory holding taskflow/ and side/ (default shared/bench/taskflow
# beside the repository).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu
export CGO_ENABLED=0
# Without symbol tables and DWARF: everything carried to the GPU machine
# must fit in 64 MiB (tracebacks still name every function).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-ldflags=-s" # -s implies -w
# VERIFY=1 builds only what tools/gpu/verify.sh runs (with BASE, the base
# command only), so that it fits the 64 MiB a device call carries.
go test -c -o .gpu/gpugraph.test .
go test -c -o .gpu/cublas.test ./internal/cublas
go test -c -o .gpu/train.test ./internal/train
go build -o .gpu/gpugraph ./cmd/gpugraph
# graph sets and the inference server (docs/serving.md)
go build -o .gpu/serve ./examples/serve
if [ -z "${VERIFY:-}" ]; then
  go test -c -o .gpu/cuda.test ./internal/cuda
  go test -c -o .gpu/driver.test ./internal/cuda/driver
  go test -c -o .gpu/coll.test ./coll
  go test -c -o .gpu/nccl.test ./internal/nccl
  go test -c -o .gpu/main.test ./cmd/gpugraph
  go test -c -o .gpu/serve.test ./examples/serve
  # the scheduler alone: WORK_NS=5000 GOMAXPROCS=16 .gpu/sched.test -test.run XXX -test.bench RunnerWork
  # (speedup and the helpers' comings and goings per run)
  go test -c -o .gpu/sched.test ./internal/sched
  # tools/gpu/two.sh: the graph spanning two GPUs
  go build -o .gpu/peer-pipeline ./examples/peer-pipeline
fi
if [ -n "${BASE:-}" ]; then
  wt=$(mktemp -d)
  git worktree add --detach "$wt" "$BASE" >/dev/null
  (cd "$wt" && { [ -n "${VERIFY:-}" ] || go test -c -o "$OLDPWD/.gpu/base/gpugraph.test" .; } && go build -o "$OLDPWD/.gpu/base/gpugraph" ./cmd/gpugraph)
  git worktree remove --force "$wt"
fi
du -sh .gpu
# PERF=1: tools/gpu/perf.sh's taskflow section (about 3 MB more to carry)
if [ -n "${PERF:-}" ]; then
  tf=${TFSIDE:-$PWD/../shared/bench/taskflow}
  [ -f "$tf/taskflow/taskflow.hpp" ] && [ -f "$tf/side/tfside.go" ] && [ -f "$tf/side/tfside.cpp" ] ||
    { echo "PERF=1: no Taskflow side-by-side sources in $tf (set TFSIDE)" >&2; exit 1; }
  rm -rf .gpu/taskflow && mkdir -p .gpu/taskflow
  cp -r "$tf/taskflow" .gpu/taskflow/
  chmod -R u+w .gpu/taskflow
  cp "$tf/side/tfside.cpp" .gpu/tfside.cpp
  chmod u+w .gpu/tfside.cpp
  mod=$(mktemp -d)
  tar -C . --exclude=./.git --exclude=./.gpu -cf - . | tar -C "$mod" -xf -
  mkdir -p "$mod/tfside"
  cp "$tf/side/tfside.go" "$mod/tfside/main.go"
  (cd "$mod" && go build -ldflags='-s -w' -o "$OLDPWD/.gpu/tfside-go" ./tfside)
  rm -rf "$mod"
  du -sh .gpu
fi
