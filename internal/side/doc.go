// Package side holds gpugraph's side-by-side harnesses: each measures
// gpugraph against a reference implementation of the same work, on the same
// machine, and returns a report whose Write method prints the table that
// gpugraph bench --vs prints.
//
//   - Taskflow: the host backend against Taskflow (tf::Executor, C++) on the
//     same DAG shapes and worker counts. The C++ harness is compiled here;
//     each side runs in a process of its own (the host backend sizes its
//     worker pool once per process), the gpugraph side as the command
//     "gpugraph tfside" (TFSide). Every repetition runs each worker count
//     and configuration on both sides, alternating which goes first; the
//     table gives medians over the repetitions of ns per run and per node,
//     and their ratio.
//   - Native (Linux): the cuda backend's launch, instantiate and update
//     against the same driver calls made from C (tools/bench/native,
//     compiled with the C compiler against the CUDA headers) in the same
//     process, on the same handles and OS thread, and against the bare
//     foreign call from Go. Variants are interleaved in rounds, the order
//     reversed every other round; the table gives each variant's median, the
//     ratio of medians to the C loop's, and the median of the rounds' ratios.
//   - Torch: the cuda backend's captured training step (gpugraph train,
//     mode graph) against the same model, batch, optimizer and precision in
//     PyTorch (tools/bench/torch_step.py), both PyTorch's step captured in a
//     CUDA graph and PyTorch at its best (torch.compile, the fused
//     optimizer, the whole step in one CUDA graph), for each model and
//     precision asked for. Every run is a process of its own; each
//     repetition runs the three sides of every case in an order that
//     rotates by repetition. The tables give medians over the runs of each
//     run's median step time (wall and GPU), the ratios of those medians,
//     the memory each side reserved and its kernels per step.
//
// The package measures and reports; the gpugraph command parses flags and
// prints. A configuration the harnesses refuse is an error that
// errors.Is(err, ErrConfig); the command reports it as a usage error.
package side
