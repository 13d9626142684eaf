"""Host time of a repeated small call, by input type: what a tiny op costs a caller.

    python bench/host_time.py            # on a GPU host with CuPy and PyTorch

For 2^10 float32 elements (and (64, 16) rows: softmax, median and quantile along the
rows, log_softmax_backward with its dy, cross_entropy with int64 labels, checked and
with ``check_target=False``; segmented_reduce over 64 device segments of 16; max with
its result read back, the floor of a call that reads a check), the mean wall time of
2000 calls (after 50 warm-up calls), synchronised once at the end: numbakern on a CuPy array,
numbakern on a torch CUDA tensor (the DLPack hand-over included), torch's own op and
CuPy's (where it has one).
Below each case: how many of numbakern's timed calls replayed (of the calls, per input
type) and what the recording of the call was: its launches' kernels and its checks
(reads of a report or flags that a replay takes again), or why the call cannot be
replayed (``numbakern.runtime.replay.latest``).
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


def _replayed(fn, sync) -> tuple[float, int, int]:
    """``(us per call, calls, calls that replayed)``."""
    from numbakern.runtime import replay

    before = replay.counts["replayed"]
    us = per_call_us(fn, sync)
    return us, 2050, replay.counts["replayed"] - before


def _recording(name: str, kind: str) -> str:
    from numbakern.runtime import replay

    program = replay.latest.get((name, kind))
    if program is None:
        return "not recorded"
    why = getattr(program, "why", None)
    if why is not None:
        return f"refused: {why}"
    return f"{len(program.steps)} step(s): {', '.join(program.names)}"


def main() -> int:
    import cupy as cp
    import torch

    import numbakern as nk

    x = cp.random.standard_normal(1 << 10, dtype=cp.float32)
    t = torch.as_tensor(x, device="cuda")
    rows_c = cp.random.standard_normal((64, 16), dtype=cp.float32)
    rows_t = torch.as_tensor(rows_c, device="cuda")
    dy_c = cp.random.standard_normal((64, 16), dtype=cp.float32)
    dy_t = torch.as_tensor(dy_c, device="cuda")
    labels_c = cp.random.randint(0, 16, 64).astype(cp.int64)
    labels_t = torch.as_tensor(labels_c, device="cuda")
    offsets_c = cp.arange(0, (1 << 10) + 1, 16, dtype=cp.int64)  # 64 segments of 16
    offsets_t = torch.as_tensor(offsets_c, device="cuda")
    aten = torch.ops.aten
    sync = torch.cuda.synchronize
    cupy_ops = {  # CuPy's own op of each case, where it has one
        "sum": lambda: x.sum(), "argmax": lambda: x.argmax(), "mean": lambda: x.mean(),
        "max": lambda: x.max(), "var": lambda: x.var(), "nansum": lambda: cp.nansum(x),
        "nanmax": lambda: cp.nanmax(x), "max, read back": lambda: x.max().get(),
        "cumsum": lambda: cp.cumsum(x), "sort": lambda: cp.sort(x),
        "median (64, 16)": lambda: cp.median(rows_c, axis=1),
        "quantile (64, 16)": lambda: cp.quantile(rows_c, 0.3, axis=1),
    }
    cases = {
        "sum": (lambda: nk.sum(x), lambda: nk.sum(t), lambda: t.sum()),
        "argmax": (lambda: nk.argmax(x), lambda: nk.argmax(t), lambda: t.argmax()),
        "mean": (lambda: nk.mean(x), lambda: nk.mean(t), lambda: t.mean()),
        "max": (lambda: nk.max(x), lambda: nk.max(t), lambda: t.max()),
        "var": (lambda: nk.var(x), lambda: nk.var(t), lambda: t.var(correction=0)),
        "nansum": (lambda: nk.nansum(x), lambda: nk.nansum(t), lambda: t.nansum()),
        "nanmax": (lambda: nk.nanmax(x), lambda: nk.nanmax(t),  # all-NaN flags read
                   lambda: t.nan_to_num(float("-inf")).max()),   # (torch reads none)
        "max, read back": (  # a launch and a read: the floor of a checked call
            lambda: nk.max(x).get(), lambda: nk.max(t).item(), lambda: t.max().item()),
        "logsumexp": (lambda: nk.logsumexp(x), lambda: nk.logsumexp(t),
                      lambda: t.logsumexp(0)),
        "vector_norm": (lambda: nk.vector_norm(x), lambda: nk.vector_norm(t),
                        lambda: torch.linalg.vector_norm(t)),
        "cumsum": (lambda: nk.cumsum(x), lambda: nk.cumsum(t), lambda: t.cumsum(0)),
        "sort": (lambda: nk.sort(x), lambda: nk.sort(t), lambda: t.sort()),
        "softmax (64, 16)": (lambda: nk.softmax(rows_c), lambda: nk.softmax(rows_t),
                             lambda: rows_t.softmax(-1)),
        "median (64, 16)": (lambda: nk.median(rows_c, axis=1),  # NaN counts and flags:
                            lambda: nk.median(rows_t, axis=1),  # checks
                            lambda: rows_t.nanmedian(1)),  # (torch's median is the lower)
        "quantile (64, 16)": (lambda: nk.quantile(rows_c, 0.3, axis=1),
                              lambda: nk.quantile(rows_t, 0.3, axis=1),
                              lambda: torch.quantile(rows_t, 0.3, dim=1)),
        "log_softmax_backward": (  # two arrays: (y, dy)
            lambda: nk.log_softmax_backward(rows_c, dy_c),
            lambda: nk.log_softmax_backward(rows_t, dy_t),
            lambda: aten._log_softmax_backward_data(dy_t, rows_t, -1, torch.float32)),
        "cross_entropy": (lambda: nk.cross_entropy(rows_c, labels_c),
                          lambda: nk.cross_entropy(rows_t, labels_t),
                          lambda: torch.nn.functional.cross_entropy(rows_t, labels_t)),
        "cross_entropy unchecked": (  # check_target=False: no report read
            lambda: nk.cross_entropy(rows_c, labels_c, check_target=False),
            lambda: nk.cross_entropy(rows_t, labels_t, check_target=False),
            lambda: torch.nn.functional.cross_entropy(rows_t, labels_t)),
        "segmented_reduce": (  # the offsets' report read: a synchronisation a call
            lambda: nk.segmented_reduce(x, offsets_c),
            lambda: nk.segmented_reduce(t, offsets_t),
            lambda: torch.segment_reduce(t, "sum", offsets=offsets_t)),
    }
    print(f"{'op':18} {'nk on CuPy':>11} {'nk on torch':>12} {'torch':>7} {'CuPy':>7}  "
          f"(us per call)")
    for name, fns in cases.items():
        on_cupy, on_torch = (_replayed(fn, sync) for fn in fns[:2])
        us = per_call_us(fns[2], sync)
        own = cupy_ops.get(name)
        cupy_us = f"{per_call_us(own, sync):7.1f}" if own else f"{'-':>7}"
        print(f"{name:18} {on_cupy[0]:11.1f} {on_torch[0]:12.1f} {us:7.1f} {cupy_us}")
        function = name.split()[0].rstrip(",")
        for kind, (_, calls, replayed) in (("cupy", on_cupy), ("torch", on_torch)):
            print(f"    {kind}: {replayed}/{calls} replayed; {_recording(function, kind)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
