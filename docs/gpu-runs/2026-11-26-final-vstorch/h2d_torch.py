import time, torch
s = torch.cuda.Stream()
for size in (512 << 10, 8 << 20):
    n = size // 4
    dst = torch.empty(n, device="cuda")
    for name, src in (("pageable", torch.randn(n)), ("pinned", torch.randn(n).pin_memory())):
        with torch.cuda.stream(s):
            for _ in range(20):
                dst.copy_(src, non_blocking=True)
            s.synchronize()
            reps = 2000 if size < 1 << 20 else 300
            t = time.perf_counter()
            for _ in range(reps):
                dst.copy_(src, non_blocking=True)
                s.synchronize()
            dt = (time.perf_counter() - t) / reps
        print(f"torch {name}/{size >> 10}KiB: {dt * 1e6:.1f} us per copy, {size / dt / 1e9:.2f} GB/s")
