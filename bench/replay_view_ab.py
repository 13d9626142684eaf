"""A/B in one process: a replayed call's CuPy result as a view with strides and an
offset pointer (``replay.Program._view``, current) against a plain C-contiguous
array at the allocation's start, for results laid out that way.

    python bench/replay_view_ab.py       # on a GPU host with CuPy

Per case: the median over 7 alternating rounds of the host time a call (2000 calls
each, synchronised at the end), and whether both views give the same result. The
prediction is in bench/NOTES.md (2026-12-05).
"""

import statistics
import time

import cupy as cp

import numbakern as nk
from numbakern.runtime import replay

CURRENT = replay.Program._view


def plain(self, spec, block, address, objects=()):
    if self.kind == "cupy" and type(spec) is replay._ArraySpec and spec.offset == 0 and \
            spec.strides == replay._c_strides(spec.shape, spec.dtype.itemsize):
        return cp.ndarray(spec.shape, spec.dtype, memptr=block)
    return CURRENT(self, spec, block, address, objects)


def per_call_us(fn, calls=2000) -> float:
    for _ in range(50):
        fn()
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    cp.cuda.Device().synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    x = cp.random.standard_normal(1 << 10, dtype=cp.float32)
    rows = cp.random.standard_normal((64, 16), dtype=cp.float32)
    cases = {"sum": lambda: nk.sum(x), "argmax": lambda: nk.argmax(x),
             "cumsum": lambda: nk.cumsum(x), "softmax (64, 16)": lambda: nk.softmax(rows)}
    for name, fn in cases.items():
        times = {CURRENT: [], plain: []}
        for _ in range(7):
            for view in times:
                replay.Program._view = view
                times[view].append(per_call_us(fn))
        replay.Program._view = plain
        again = fn()
        replay.Program._view = CURRENT
        same = bool(cp.all(fn() == again))
        print(f"{name:18s} current {statistics.median(times[CURRENT]):6.2f} us   "
              f"plain {statistics.median(times[plain]):6.2f} us   same results: {same}")


if __name__ == "__main__":
    main()
