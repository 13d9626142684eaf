"""Kernel time against whole-call time, per operation, on a GPU (CUPTI via torch.profiler).

    python bench/kernel_time.py [NAME ...]   # on a GPU host with CuPy and PyTorch

Names (substrings of the case names below) pick cases; none runs them all.

For each call: the median CUDA-event time of the whole Python call (as the
benchmarks measure it), the GPU time of every kernel it launched (CUPTI, through
``torch.profiler``, which sees Numba's kernels too), and the difference: host work
before and between launches that left the GPU idle; and how many of 10 calls
replayed their recorded launches (``numbakern/runtime/replay.py``). bench/NOTES.md's
table of 2026-11-30 came from this script. Not a test; skips nothing: it needs a GPU.
``python bench/kernel_time.py half`` splits bench_half.py's reductions of
(16384, 8192) float16 and bfloat16 tensors, numbakern's and torch's.
"""
import sys
import numpy as np, cupy as cp, torch
import numbakern as nk
from numbakern.runtime import replay
from torch.profiler import profile, ProfilerActivity
def ev(f, reps=20):
    f(); cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event(); ts = []
    for _ in range(reps):
        s.record(); f(); e.record(); e.synchronize(); ts.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(ts)) * 1e3
x28 = cp.random.standard_normal(1 << 28, dtype=cp.float32)
r2 = cp.random.standard_normal((1_000_000, 2), dtype=cp.float32)
m = cp.random.standard_normal((32768, 4096), dtype=cp.float32)
# Odd columns: not whole 16-byte vectors, so the scalar column kernel reads them
odd = cp.random.standard_normal((32768, 4095), dtype=cp.float32)
odd64 = cp.random.standard_normal((16384, 4095), dtype=cp.float64)
# Short rows (issue 23's launch-bound softmax shapes), CuPy and the same memory as torch
short = {s: cp.random.standard_normal(s, dtype=cp.float32) for s in ((65536, 128), (1823, 781))}
x20 = cp.random.standard_normal(1 << 20, dtype=cp.float32)
u28 = cp.random.randint(0, 2**31, 1 << 28, dtype=cp.int64).astype(cp.uint32)
x24, u24 = x28[: 1 << 24].copy(), u28[: 1 << 24].copy()
def segments(mean):
    """2^26 float32 in segments uniform in [0, 2 mean], device int64 offsets (as
    bench_segments.py); "mixed": half the array in one segment among short ones."""
    rng = np.random.default_rng(mean if mean != "mixed" else 7)
    if mean == "mixed":
        short = rng.integers(0, 129, (1 << 26) // 128 + 1)
        lengths = np.concatenate([short[: short.size // 2], [1 << 25], short[short.size // 2:]])
    else:
        lengths = rng.integers(0, 2 * mean + 1, (1 << 26) // mean + 1)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    offsets = offsets[offsets <= 1 << 26]
    return x28[: int(offsets[-1])], cp.asarray(offsets.astype(np.int64))


seg = {m: segments(m) for m in (64, 1024, 16384, 1 << 20, "mixed")}
# bench_half.py's reductions: (16384, 8192) tensors of each half dtype, read in place
halves = {d: torch.randn(16384, 8192, device="cuda").to(getattr(torch, d))
          for d in ("float16", "bfloat16")}
half_cases = {
    "sum": (lambda x: nk.sum(x), lambda x: x.sum()),
    "sum/rows": (lambda x: nk.sum(x, axis=1), lambda x: x.sum(1)),
    "mean/rows": (lambda x: nk.mean(x, axis=1), lambda x: x.mean(1)),
    "max/rows": (lambda x: nk.max(x, axis=1), lambda x: x.amax(1)),
}
cases = {
    "sum 2^28": lambda: nk.sum(x28),
    "sum 2^20": lambda: nk.sum(x20),
    "sum 2^24": lambda: nk.sum(x24),
    "argmax 2^20": lambda: nk.argmax(x20),
    "argmax 2^24": lambda: nk.argmax(x24),
    "argmax 2^28": lambda: nk.argmax(x28),
    **{f"torch {name}": (lambda t=torch.as_tensor(a, device="cuda"), f=f: f(t))
       for name, a, f in (("sum 2^20", x20, torch.sum), ("sum 2^24", x24, torch.sum),
                          ("argmax 2^20", x20, torch.argmax), ("argmax 2^24", x24, torch.argmax),
                          ("argmax 2^28", x28, torch.argmax))},
    "rowsum 1Mx2": lambda: nk.sum(r2, axis=1),
    "rowargmax 1Mx2": lambda: nk.argmax(r2, axis=1),
    "rowsum 32768x4096": lambda: nk.sum(m, axis=1),
    "rowargmax 32768x4096": lambda: nk.argmax(m, axis=1),
    "colsum 4096x32768": lambda: nk.sum(m.reshape(4096, 32768), axis=0),
    "colsum 32768x4096": lambda: nk.sum(m, axis=0),
    "colmean 32768x4096": lambda: nk.mean(m, axis=0),
    "colargmax 4096x32768": lambda: nk.argmax(m.reshape(4096, 32768), axis=0),
    "colsum 32768x4095": lambda: nk.sum(odd, axis=0),
    "colargmax 32768x4095": lambda: nk.argmax(odd, axis=0),
    "colargmax float64 16384x4095": lambda: nk.argmax(odd64, axis=0),
    "colvar 32768x4096": lambda: nk.var(m, axis=0),
    "midsum 256x1024x1024": lambda: nk.sum(x28.reshape(256, 1024, 1024), axis=1),
    **{f"torch {name}": (lambda t=torch.as_tensor(a, device="cuda"), d=d: t.sum(d))
       for name, a, d in (("colsum 4096x32768", m.reshape(4096, 32768), 0),
                          ("colsum 32768x4096", m, 0),
                          ("colsum 32768x4095", odd, 0),
                          ("midsum 256x1024x1024", x28.reshape(256, 1024, 1024), 1))},
    "softmax 32768x4096": lambda: nk.softmax(m),
    "log_softmax 32768x4096": lambda: nk.log_softmax(m),
    **{f"softmax {r}x{c}": (lambda x=x: nk.softmax(x)) for (r, c), x in short.items()},
    **{f"torch softmax {r}x{c}": (lambda t=torch.as_tensor(x, device="cuda"): t.softmax(-1))
       for (r, c), x in short.items()},
    "cumsum 2^28": lambda: nk.cumsum(x28),
    "cumsum 2^20": lambda: nk.cumsum(x20),
    "sort float32 2^28": lambda: nk.sort(x28),
    "sort uint32 2^28": lambda: nk.sort(u28),
    "argsort float32 2^28": lambda: nk.argsort(x28),
    "sort float32 2^24": lambda: nk.sort(x24),
    "sort uint32 2^24": lambda: nk.sort(u24),
    "cupy sort float32 2^24": lambda: cp.sort(x24),
    "cupy sort float32 2^28": lambda: cp.sort(x28),
    "cupy argsort float32 2^28": lambda: cp.argsort(x28),
    "torch sort float32 2^28": lambda: torch.sort(torch.as_tensor(x28, device="cuda")),
    **{f"segsum mean{m}": (lambda m=m: nk.segmented_reduce(*seg[m])) for m in seg},
    **{f"segsum unchecked mean{m}": (lambda m=m: nk.segmented_reduce(*seg[m], check_offsets=False))
       for m in seg},
    **{f"torch segsum mean{m}": (lambda m=m: torch.segment_reduce(
        torch.as_tensor(seg[m][0], device="cuda"), "sum",
        offsets=torch.as_tensor(seg[m][1], device="cuda"))) for m in seg},
    **{f"segscan mean{m}": (lambda m=m: nk.segmented_scan(*seg[m])) for m in seg},
    "topk float32 2^28 k1024": lambda: nk.topk(x28, 1024),
    "torch topk float32 2^28 k1024": lambda: torch.topk(torch.as_tensor(x28, device="cuda"),
                                                        1024),
    **{f"half {op} {d}": (lambda f=f, x=x: f(x)) for op, (f, _) in half_cases.items()
       for d, x in halves.items()},
    **{f"torch half {op} {d}": (lambda f=f, x=x: f(x)) for op, (_, f) in half_cases.items()
       for d, x in halves.items()},
}
wanted = sys.argv[1:]
for name, f in cases.items():
    if wanted and not any(w in name for w in wanted):
        continue
    whole = ev(f)
    f(); torch.cuda.synchronize()
    replayed = replay.counts["replayed"]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            f()
        torch.cuda.synchronize()
    ks = [(e.key, e.device_time_total / e.count, e.count) for e in prof.key_averages()
          if e.device_time_total > 0]
    gpu = sum(t * c for _, t, c in ks) / 10
    replayed = replay.counts["replayed"] - replayed
    print(f"{name:24s} whole {whole:8.1f} us | kernels {gpu:8.1f} us"
          f" | host+gaps {whole-gpu:7.1f} us | replayed {replayed}/10")
    for k, t, c in sorted(ks, key=lambda z: -z[1] * z[2])[:8]:
        print(f"     {t:8.1f} us x{c // 10:<2d} {k[:90]}")
