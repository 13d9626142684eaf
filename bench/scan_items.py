"""Items per thread of the decoupled look-back scan, swept in one process.

    python bench/scan_items.py                 # on a GPU host with CuPy

For each case (float32 2^28, float64 2^27, int32 -> int64 2^28, float32 -> float64
2^28), a whole ``nk.cumsum`` call on a CuPy array with ``DecoupledLookback(items=k)``
for the automatic ``k`` (``None``: ``scan_tiles.auto_items``) and the others listed,
timed by CUDA events (3 warm-up calls, the median of 30), beside a copy of 2 x 1 GiB
in the same process; two rounds, to let drift show. Each line gives the time and the
scan's rate as a share of the copy's (bytes read and written: 12 an element for
int32 -> int64). Integer results are checked against ``cupy.cumsum``.

What it answers: whether a tile of fewer items (fewer registers and less shared
memory a block, so more blocks a multiprocessor, but twice the tiles to look back
over) or more items moves the 8-byte scans, which run at 75% of the copy rate where
float32 runs at 92% (bench/NOTES.md, 2026-12-04). ``bench/scan_sass.py --items k``
gives each variant's registers without a GPU.
"""

from __future__ import annotations

import statistics


def median_ms(cp, fn, reps: int = 30) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def main() -> int:
    import cupy as cp

    import numbakern as nk
    from numbakern.strategies.decoupled_lookback import DecoupledLookback

    rng = cp.random.default_rng(0)
    f32 = rng.standard_normal(1 << 28, dtype=cp.float32)
    f64 = rng.standard_normal(1 << 27, dtype=cp.float64)
    i32 = rng.integers(0, 1 << 20, 1 << 28, dtype=cp.int32)
    copy_to = cp.empty_like(f32)
    cases = [("float32 2^28", f32, None, (None, 8)),
             ("float64 2^27", f64, None, (None, 16, 4)),
             ("int32->int64 2^28", i32, "int64", (None, 8, 12)),
             ("float32->float64 2^28", f32, "float64", (None, 8))]
    exact = cp.cumsum(i32, dtype=cp.int64)
    for round_ in range(2):
        copy = median_ms(cp, lambda: cp.copyto(copy_to, f32))
        print(f"round {round_ + 1}: copy of 2 x 1 GiB {copy:.4f} ms", flush=True)
        for name, x, dtype, items in cases:
            for k in items:
                strategy = DecoupledLookback(items=k)
                y = nk.cumsum(x, dtype=dtype, strategy=strategy)
                check = f" exact: {bool((y == exact).all())}" if x is i32 else ""
                ms = median_ms(cp, lambda x=x, d=dtype, s=strategy: nk.cumsum(x, dtype=d,
                                                                               strategy=s))
                share = (x.nbytes + y.nbytes) / 2**31 * copy / ms
                print(f"  {name:22} items={k!s:5} {ms:.4f} ms  {share:6.1%} of the "
                      f"copy rate{check}", flush=True)
                del y
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
