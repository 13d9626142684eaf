"""Onesweep tile shapes beside CCCL's ``cuda.compute.radix_sort`` and ``cupy.sort``.

    python bench/sort_tiles.py [--quick] [--case "u32"]...

Whole calls on CuPy arrays, CUDA-event medians (``bench/ab.py``'s ``event_ms``), each
numbakern result checked bit for bit against ``cupy.sort`` (or ``cupy.argsort``
values) first. For each case: ``RadixSort(threads, items)`` over the tile shapes
listed, the default strategy, and the peers. ``cuda.compute`` needs the ``cuda-cccl``
wheel (``../shared/gpu/fetch-wheels.sh``); without it that row is left out.
GPU only; not a test.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ab import event_ms  # noqa: E402

#: (threads, items) tried for each case
SHAPES = {
    "sort f32 2^28": [(256, 16), (256, 24), (256, 28), (256, 32), (384, 24)],
    "sort u32 2^28": [(256, 24), (256, 28), (256, 32)],
    "sort i32 2^28": [(256, 28), (256, 32)],
    "sort f64 2^26": [(384, 16), (384, 20), (256, 20), (512, 16)],
    "argsort f32 2^28": [(384, 12), (384, 16), (256, 20), (512, 12)],
}


def inputs(cp):
    rng = cp.random.default_rng(0)
    f32 = rng.standard_normal(1 << 28, dtype=cp.float32)
    return {
        "sort f32 2^28": (f32, False),
        "sort u32 2^28": (rng.integers(0, 2**32, 1 << 28, dtype=cp.uint32), False),
        "sort i32 2^28": (rng.integers(-2**31, 2**31, 1 << 28, dtype=cp.int32), False),
        "sort f64 2^26": (rng.standard_normal(1 << 26, dtype=cp.float64), False),
        "argsort f32 2^28": (f32, True),
    }


def _cuda_compute(x):
    """``cuda.compute.radix_sort`` of ``x`` (``numbakern.teach.peers.cccl_sort``, as
    ``numbakern compare`` and ``bench/peers.py`` call it), or None without it."""
    try:
        from cuda import compute
    except ImportError:
        return None
    from numbakern.teach.peers import cccl_sort

    return lambda: cccl_sort(compute, x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first shape of each only")
    parser.add_argument("--case", action="append", default=[],
                        help="only the cases whose name holds this text (repeatable)")
    args = parser.parse_args()
    import cupy as cp

    import numbakern as nk
    from numbakern.strategies import RadixSort

    for case, (x, indices) in inputs(cp).items():
        if args.case and not any(text in case for text in args.case):
            continue
        want = cp.sort(x)
        fn = nk.argsort if indices else nk.sort
        runs = [("default", lambda: fn(x))]
        for threads, items in SHAPES[case][:1] if args.quick else SHAPES[case]:
            s = RadixSort(threads=threads, items=items)
            runs.append((f"{threads} x {items}", lambda s=s: fn(x, strategy=s)))
        for name, run in runs:
            got = run()
            got = x[got] if indices else got
            if not bool((got.view(cp.uint8) == want.view(cp.uint8)).all()):
                print(f"{case:<18} {name:<10} WRONG RESULT", flush=True)
                continue
            print(f"{case:<18} {name:<10} {event_ms(cp, run):8.3f} ms", flush=True)
        peers = [("cupy", (lambda: cp.argsort(x)) if indices else (lambda: cp.sort(x)))]
        compute = None if indices else _cuda_compute(x)
        if compute is not None:
            peers.append(("cuda.compute", compute))
        for name, run in peers:
            print(f"{case:<18} {name:<10} {event_ms(cp, run):8.3f} ms", flush=True)


if __name__ == "__main__":
    main()
