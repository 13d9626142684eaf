"""Host time of a repeated small call, by input type: what a tiny op costs a caller.

    python bench/host_time.py            # on a GPU host with CuPy and PyTorch

For 2^10 float32 elements (and a (64, 16) softmax), the mean wall time of 2000 calls
(after 50 warm-up calls), synchronised once at the end: numbakern on a CuPy array,
numbakern on a torch CUDA tensor (the DLPack hand-over included), and torch's own op.
"""

from __future__ import annotations

import time


def per_call_us(fn, sync, calls: int = 2000) -> float:
    for _ in range(50):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> int:
    import cupy as cp
    import torch

    import numbakern as nk

    x = cp.random.standard_normal(1 << 10, dtype=cp.float32)
    t = torch.as_tensor(x, device="cuda")
    rows_c = cp.random.standard_normal((64, 16), dtype=cp.float32)
    rows_t = torch.as_tensor(rows_c, device="cuda")
    sync = torch.cuda.synchronize
    cases = {
        "sum": (lambda: nk.sum(x), lambda: nk.sum(t), lambda: t.sum()),
        "argmax": (lambda: nk.argmax(x), lambda: nk.argmax(t), lambda: t.argmax()),
        "mean": (lambda: nk.mean(x), lambda: nk.mean(t), lambda: t.mean()),
        "max": (lambda: nk.max(x), lambda: nk.max(t), lambda: t.max()),
        "var": (lambda: nk.var(x), lambda: nk.var(t), lambda: t.var(correction=0)),
        "nansum": (lambda: nk.nansum(x), lambda: nk.nansum(t), lambda: t.nansum()),
        "logsumexp": (lambda: nk.logsumexp(x), lambda: nk.logsumexp(t),
                      lambda: t.logsumexp(0)),
        "cumsum": (lambda: nk.cumsum(x), lambda: nk.cumsum(t), lambda: t.cumsum(0)),
        "sort": (lambda: nk.sort(x), lambda: nk.sort(t), lambda: t.sort()),
        "softmax (64, 16)": (lambda: nk.softmax(rows_c), lambda: nk.softmax(rows_t),
                             lambda: rows_t.softmax(-1)),
    }
    print(f"{'op':18} {'nk on CuPy':>11} {'nk on torch':>12} {'torch':>7}  (us per call)")
    for name, fns in cases.items():
        us = [per_call_us(fn, sync) for fn in fns]
        print(f"{name:18} {us[0]:11.1f} {us[1]:12.1f} {us[2]:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
