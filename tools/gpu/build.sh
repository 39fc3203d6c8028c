#!/bin/bash
# Builds, here (no CUDA needed), what tools/gpu/run.sh runs on the GPU
# machine, into .gpu/ (git-ignored). BASE=<commit> also builds that
# commit's test binary and command into .gpu/base/ for side-by-side timing.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu
export CGO_ENABLED=0
go test -c -o .gpu/gpugraph.test .
go test -c -o .gpu/cuda.test ./internal/cuda
go test -c -o .gpu/driver.test ./internal/cuda/driver
go test -c -o .gpu/cublas.test ./internal/cublas
go test -c -o .gpu/train.test ./internal/train
go test -c -o .gpu/coll.test ./coll
go test -c -o .gpu/nccl.test ./internal/nccl
go build -o .gpu/gpugraph ./cmd/gpugraph
if [ -n "${BASE:-}" ]; then
  wt=$(mktemp -d)
  git worktree add --detach "$wt" "$BASE" >/dev/null
  (cd "$wt" && go test -c -o "$OLDPWD/.gpu/base/gpugraph.test" . && go build -o "$OLDPWD/.gpu/base/gpugraph" ./cmd/gpugraph)
  git worktree remove --force "$wt"
fi
du -sh .gpu
# issue 15, tools/gpu/two.sh: the graph spanning two GPUs
go build -o .gpu/peer-pipeline ./examples/peer-pipeline
