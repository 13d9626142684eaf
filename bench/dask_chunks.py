"""What Dask costs numbakern on one GPU: whole-array calls against Dask arrays of CuPy
chunks of several sizes, on the synchronous and threaded schedulers.

    python bench/dask_chunks.py [GiB ...]      # on a GPU host with CuPy and Dask

For each array size (default 4 and 16 GiB of float32) and chunk size (256 MiB,
1 GiB, 4 GiB), the median wall time of 3 computes (after one warm-up compute, which
compiles and fills the caches) of ``sum``, ``argmax``, ``cumsum`` and a row
``softmax`` (rows of 4096 elements, chunked along the rows), beside one numbakern
call on the whole CuPy array where it fits. Throughput is the array's bytes over the
time; the ratio is against the whole-array call. Prints a table and, with ``--json
PATH``, writes the figures. ``--profile OP`` instead profiles three computes of one
op over the first size in the first chunk size on the synchronous scheduler (cProfile, the 25
functions of most own time and of most cumulative time): where the time goes.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time

GiB = 1 << 30
MiB = 1 << 20
ROW = 4096


def wall_ms(fn, sync, repeats: int = 3) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def show(r: dict) -> dict:
    """Print one row of the table as it is measured."""
    gbps = r["gib"] * GiB / (r["ms"] / 1e3) / 1e9
    print(f"{r['op']:14} {r['gib']:4g} {str(r['chunk_mib'] or '-'):>9} "
          f"{r['scheduler']:>9} {r['ms']:9.2f} {gbps:7.0f} {r['ratio']:11.2f}", flush=True)
    return r


class _Rows:
    """An array seen through ``__getitem__`` only: ``dask.array.from_array`` copies
    whatever has a ``copy`` method (Dask 2026.8), which doubles a 64 GiB array."""

    def __init__(self, x):
        self.x, self.shape, self.dtype, self.ndim = x, x.shape, x.dtype, x.ndim

    def __getitem__(self, key):
        return self.x[key]


def chunked(da, x, chunk_mib: int):
    """``x`` as a Dask array of row chunks of about ``chunk_mib`` MiB, views of ``x``."""
    rows = max(1, chunk_mib * MiB // 4 // ROW)
    return da.from_array(_Rows(x), chunks=(rows, ROW), asarray=False, meta=x[:0],
                         name=False)


def persist(dask, call, lazy_x, scheduler: str) -> None:
    """Build and compute the lazy call, its result left in chunks (not joined)."""
    with dask.config.set(scheduler=scheduler):
        dask.persist(call(lazy_x))


def cases(nk):
    """(name, call) over a 2-D array of rows of ROW: numbakern's whole-array call on a
    CuPy array, or the lazy one on a Dask array."""
    return [
        ("sum", lambda a: nk.sum(a)),  # axis=None: the whole array, as a user calls it
        ("argmax", lambda a: nk.argmax(a)),
        ("cumsum", lambda a: nk.cumsum(a.reshape(-1))),
        ("softmax rows", lambda a: nk.softmax(a, axis=-1)),
    ]


def profile(cp, dask, da, nk, op: str, gib: float, chunk_mib: int, sync) -> int:
    import cProfile
    import pstats

    x = cp.random.standard_normal((int(gib * GiB) // 4 // ROW, ROW), dtype=cp.float32)
    call = dict(cases(nk))[op]
    lazy_x = chunked(da, x, chunk_mib)

    def run():
        persist(dask, call, lazy_x, "sync")
        sync()

    run()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(3):
        run()
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(25)
    return 0


def main() -> int:
    import cupy as cp
    import dask
    import dask.array as da

    import numbakern as nk

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=float, default=[4, 16], help="GiB")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--profile", metavar="OP", help="profile this op instead")
    parser.add_argument("--chunks", type=int, nargs="*", default=[256, 1024, 4096],
                        help="chunk sizes, MiB")
    parser.add_argument("--ops", nargs="*", help="only these ops (default: all)")
    args = parser.parse_args()
    sync = cp.cuda.Device().synchronize
    if args.profile:
        return profile(cp, dask, da, nk, args.profile, args.sizes[0], args.chunks[0], sync)
    rows = []
    print(f"{'op':14} {'GiB':>4} {'chunk MiB':>9} {'scheduler':>9} {'ms':>9} {'GB/s':>7} "
          f"{'vs one call':>11}", flush=True)
    for gib in args.sizes:
        n = int(gib * GiB) // 4 // ROW
        x = cp.random.standard_normal((n, ROW), dtype=cp.float32)
        for name, call in cases(nk):
            if args.ops and name.split()[0] not in args.ops:
                continue
            whole = wall_ms(functools.partial(call, x), sync)
            rows.append(show(dict(op=name, gib=gib, chunk_mib=None, scheduler="one call",
                                  ms=whole, ratio=1.0)))
            for chunk_mib in args.chunks:
                lazy_x = chunked(da, x, chunk_mib)
                for scheduler in ("sync", "threads"):
                    ms = wall_ms(functools.partial(persist, dask, call, lazy_x, scheduler),
                                 sync)
                    rows.append(show(dict(op=name, gib=gib, chunk_mib=chunk_mib,
                                          scheduler=scheduler, ms=ms, ratio=whole / ms)))
        del x
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
