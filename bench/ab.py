"""A/B timing: one numbakern tree against another, on the cases every family runs.

Run on a GPU host, once per tree (each in its own process: two numbakern trees cannot
share one), alternating to let drift show:

    PYTHONPATH=old-tree python bench/ab.py --label before --json before-1.json
    PYTHONPATH=.        python bench/ab.py --label after  --json after-1.json
    python bench/ab.py --table before-1.json after-1.json before-2.json after-2.json

The table's last column is the second label's best time over the first's.

Each case is a whole call on CuPy input (host time included, as a user waits),
timed by CUDA events: 3 warm-up calls, then the median of 30. Nothing here imports
numbakern's internals, so the script runs against any tree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def cases(cp, nk):
    """``(name, callable)`` pairs: whole arrays, rows, columns, tiny rows, scans, the
    softmax family, sorts and histograms, at sizes from launch-bound to copy-bound."""
    f32 = cp.float32
    rng = cp.random.default_rng(0)
    x10, x20, x24, x28 = (rng.standard_normal(1 << k, dtype=f32) for k in (10, 20, 24, 28))
    rows = rng.standard_normal((32768, 4096), dtype=f32)
    wide = rng.standard_normal((4096, 32768), dtype=f32)
    wider = rng.standard_normal((4096, 65536), dtype=f32)
    vocab = rng.standard_normal((8192, 50257), dtype=f32)
    tut = rng.standard_normal((1823, 781), dtype=f32)
    short = rng.standard_normal((65536, 128), dtype=f32)
    pairs = rng.standard_normal((1_000_000, 2), dtype=f32)
    cube = rng.standard_normal((256, 1024, 1024), dtype=f32)
    ints = rng.integers(0, 1 << 20, 1 << 28, dtype=cp.int32)
    small_ints = rng.integers(0, 256, 1 << 26, dtype=cp.int32)
    uniform = rng.random(1 << 26, dtype=f32)
    y = nk.softmax(rows)
    half = rows.astype(cp.float16)
    wide_half, vocab_half = wide.astype(cp.float16), vocab.astype(cp.float16)
    wider_half = wider.astype(cp.float16)
    tall_half = rng.standard_normal((16384, 32768), dtype=f32).astype(cp.float16)
    squat = rng.standard_normal((16384, 16384), dtype=f32)
    wy, wy_half = nk.log_softmax(wide), nk.log_softmax(wide_half)
    ty_half, sy = nk.log_softmax(tall_half), nk.log_softmax(squat)
    # whole waves of three staged half rows a multiprocessor on an H200 (132 x 3): 10,
    # then 11; 4096 rows sit between them (bench/NOTES.md, "the last wave")
    waves = {rows: wide_half[:1].repeat(rows, axis=0) for rows in (3960, 4356)}
    waves_y = {rows: nk.log_softmax(w) for rows, w in waves.items()}
    keys24 = x24.view(cp.uint32)
    segmented = {mean: segments(cp, mean) for mean in MEANS}
    return [
        ("sum f32 2^10", lambda: nk.sum(x10)),
        ("sum f32 2^20", lambda: nk.sum(x20)),
        ("sum f32 2^24", lambda: nk.sum(x24)),
        ("sum f32 2^28", lambda: nk.sum(x28)),
        ("sum f32 2^28 atomic_fold", lambda: nk.sum(x28, strategy="atomic_fold")),
        ("mean f32 2^24", lambda: nk.mean(x24)),
        ("argmax f32 2^28", lambda: nk.argmax(x28)),
        ("logsumexp f32 2^10", lambda: nk.logsumexp(x10)),
        ("logsumexp f32 2^28", lambda: nk.logsumexp(x28)),
        ("logsumexp rows (32768, 4096)", lambda: nk.logsumexp(rows, axis=1)),
        ("row sum (32768, 4096)", lambda: nk.sum(rows, axis=1)),
        ("row sum (4096, 32768)", lambda: nk.sum(wide, axis=1)),
        ("row sum (1e6, 2)", lambda: nk.sum(pairs, axis=1)),
        ("row argmax (32768, 4096)", lambda: nk.argmax(rows, axis=1)),
        ("var f32 2^28", lambda: nk.var(x28)),
        ("row var (32768, 4096)", lambda: nk.var(rows, axis=1)),
        ("row cumsum (65536, 128) exclusive", lambda: nk.cumsum(short, axis=1, exclusive=True)),
        ("col sum (4096, 32768) axis 0", lambda: nk.sum(wide, axis=0)),
        ("sum (256, 1024, 1024) axis 1", lambda: nk.sum(cube, axis=1)),
        ("cumsum f32 2^28", lambda: nk.cumsum(x28)),
        ("cumsum int32 2^28", lambda: nk.cumsum(ints)),
        ("row cumsum (32768, 4096)", lambda: nk.cumsum(rows, axis=1)),
        ("row cumsum (65536, 128)", lambda: nk.cumsum(short, axis=1)),
        ("softmax (32768, 4096)", lambda: nk.softmax(rows)),
        ("softmax (4096, 32768)", lambda: nk.softmax(wide)),
        ("softmax (4096, 65536)", lambda: nk.softmax(wider)),
        ("softmax (8192, 50257)", lambda: nk.softmax(vocab)),
        ("softmax (1823, 781)", lambda: nk.softmax(tut)),
        ("softmax (65536, 128)", lambda: nk.softmax(short)),
        ("softmax f16 (32768, 4096)", lambda: nk.softmax(half)),
        ("log_softmax (4096, 32768)", lambda: nk.log_softmax(wide)),
        ("log_softmax (8192, 50257)", lambda: nk.log_softmax(vocab)),
        ("log_softmax_backward (4096, 32768)", lambda: nk.log_softmax_backward(wy, wide)),
        ("softmax f16 (4096, 32768)", lambda: nk.softmax(wide_half)),
        ("log_softmax f16 (4096, 32768)", lambda: nk.log_softmax(wide_half)),
        ("log_softmax f16 (8192, 50257)", lambda: nk.log_softmax(vocab_half)),
        ("log_softmax_backward f16 (4096, 32768)",
         lambda: nk.log_softmax_backward(wy_half, wide_half)),
        ("log_softmax_backward f16 (16384, 32768)",
         lambda: nk.log_softmax_backward(ty_half, tall_half)),
        ("log_softmax_backward (16384, 16384)", lambda: nk.log_softmax_backward(sy, squat)),
        ("softmax f16 (4096, 65536)", lambda: nk.softmax(wider_half)),
        ("log_softmax f16 (4096, 65536)", lambda: nk.log_softmax(wider_half)),
        *[(f"log_softmax f16 ({rows}, 32768)", lambda w=w: nk.log_softmax(w))
          for rows, w in waves.items()],
        *[(f"log_softmax_backward f16 ({rows}, 32768)",
           lambda w=w, y=waves_y[rows]: nk.log_softmax_backward(y, w))
          for rows, w in waves.items()],
        ("log_softmax (32768, 4096)", lambda: nk.log_softmax(rows)),
        ("softmax_backward (32768, 4096)", lambda: nk.softmax_backward(y, rows)),
        ("sort f32 2^24", lambda: nk.sort(x24)),
        ("sort u32 2^24", lambda: nk.sort(keys24)),
        ("argsort f32 2^24", lambda: nk.argsort(x24)),
        ("sort f32 2^28", lambda: nk.sort(x28)),
        ("bincount int32 2^26 into 256", lambda: nk.bincount(small_ints, minlength=256)),
        ("histogram f32 2^26, 100 bins", lambda: nk.histogram(uniform, 100, range=(0, 1))),
        *[(f"segmented sum 2^26 mean {mean}", lambda s=s: nk.segmented_reduce(*s))
          for mean, s in segmented.items()],
    ]


MEANS = [64, 1024, 16384, 1 << 20, "mixed"]  # segment lengths of the segmented cases


def segments(cp, mean):
    """``(x, offsets)`` as bench/bench_segments.py makes them: 2^26 float32 in segments
    uniform in [0, 2 mean] ("mixed": half the array in one segment among segments of
    up to 128), device int64 offsets."""
    import numpy as np

    n, rng = 1 << 26, np.random.default_rng(7 if mean == "mixed" else mean)
    if mean == "mixed":
        short = rng.integers(0, 129, n // 128 + 1)
        lengths = np.concatenate([short[: short.size // 2], [n // 2], short[short.size // 2:]])
    else:
        lengths = rng.integers(0, 2 * mean + 1, n // mean + 1)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    offsets = offsets[offsets <= n]
    x = cp.random.default_rng(0).random(int(offsets[-1]), dtype=cp.float32)
    return x, cp.asarray(offsets.astype(np.int64))


def event_ms(cp, fn, warmup: int = 3, repeat: int = 30) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def run(label: str, path: str, only: tuple = ("",)) -> None:
    import cupy as cp

    import numbakern as nk

    out = {"label": label, "numbakern": nk.__file__, "ms": {}}
    for name, fn in cases(cp, nk):
        if not any(k in name for k in only):
            continue
        out["ms"][name] = event_ms(cp, fn)
        print(f"{label:>8}  {name:<34} {out['ms'][name]:9.4f} ms", flush=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


def table(paths: list[str]) -> None:
    """Each case's times, one column a file, and the best time of the second label
    over the first's (the labels in the order the files give them)."""
    runs = [json.load(open(p)) for p in paths]
    labels = list(dict.fromkeys(r["label"] for r in runs))
    first, second = (labels + labels)[:2]
    print(f"{'case':<34}" + "".join(f"{r['label'] + ' ' + str(i):>14}"
                                     for i, r in enumerate(runs, 1)) +
          f"   {second}/{first}")
    for name in runs[0]["ms"]:
        best = {lab: min(r["ms"][name] for r in runs if r["label"] == lab) for lab in labels}
        print(f"{name:<34}" + "".join(f"{r['ms'][name]:14.4f}" for r in runs) +
              f"   {best[second] / best[first]:12.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label")
    parser.add_argument("--json")
    parser.add_argument("--table", nargs="+")
    parser.add_argument("-k", nargs="+", default=[""],
                        help="only the cases whose name holds one of these")
    args = parser.parse_args()
    if args.table:
        table(args.table)
    elif args.label and args.json:
        run(args.label, args.json, args.k)
    else:
        parser.error("give --label and --json, or --table")
        sys.exit(2)
