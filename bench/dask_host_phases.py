"""Where a Dask compute's host time goes before its first chunk kernel, without a GPU.

    python bench/dask_host_phases.py [--tree PATH] [--ops sum argmax softmax sum2d]
                                     [--chunks 2 4 16] [--reps 150]

On a GPU the chunk kernels run behind the host, so what a compute costs beyond the
kernels is the host time before the first launch: everything after it overlaps the
first chunk's kernel (milliseconds at 4-8 GiB chunks) unless something waits for the
device. This script splits that time into the steps ``dask.persist`` takes on the
synchronous scheduler (as ``bench/dask_chunks.py`` times a compute), with each chunk's
numbakern call replaced by NumPy (no simulator): ``reshape`` (``dask_chunks.py``'s
``a.reshape(-1)``; none for ``sum2d`` and ``softmax``), ``build`` (numbakern's lazy
call), ``to_expr`` and ``expr.opt`` (Dask wrapping the graph as an expression and
simplifying it), ``lowlevel`` (``dask.array.optimize``: blockwise fusion, culling,
linear fusion), ``first`` (all of it up to the first chunk call, the scheduler's
ordering and the chunk's getters included) and ``all`` (to ``persist``'s return).
Thread CPU time in us, medians over ``--reps`` (the host may be shared).

``--tree PATH`` imports numbakern from another checkout (``git archive REV numbakern |
tar -x -C PATH`` gives a revision's) to compare before and after in the same way.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

ROW = 4096
STEPS = ["reshape", "build", "to_expr", "expr.opt", "lowlevel"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--ops", nargs="*", default=["sum", "argmax", "softmax"])
    parser.add_argument("--chunks", type=int, nargs="*", default=[2, 4, 16])
    parser.add_argument("--reps", type=int, default=150)
    args = parser.parse_args()
    sys.path.insert(0, args.tree)
    import dask
    import dask.array as da
    import numpy as np
    from dask.base import collections_to_expr
    from dask.core import flatten
    from dask.local import get_sync

    import numbakern.api.dask as m

    clock, marks = time.thread_time, []

    def reduce(x, op, axis=None, dtype=None, keepdims=False, **_):
        marks.append(clock())
        return np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)

    def with_indices(x, axis=None, keepdims=False, **_):
        marks.append(clock())
        return (np.max(x, axis=axis, keepdims=keepdims),
                np.argmax(x, axis=axis, keepdims=keepdims).astype(np.int64))

    def softmax(x, axis=-1, **_):
        marks.append(clock())
        return x

    m._nk = lambda: types.SimpleNamespace(reduce=reduce, max_with_indices=with_indices,
                                         softmax=softmax)
    print(f"numbakern from {m.__file__}; dask {dask.__version__}")
    calls = {"sum": m.sum, "sum2d": m.sum, "argmax": m.argmax,
             "softmax": lambda x: m.softmax(x, axis=-1)}
    for op in args.ops:
        for n in args.chunks:
            a = np.random.default_rng(0).standard_normal((2 * n, ROW)).astype(np.float32)
            x = da.from_array(a, chunks=(2, ROW))
            rows = []
            for _ in range(args.reps + 10):
                marks.clear()
                t = [clock()]
                lazy = x.reshape(-1) if op in ("sum", "argmax") else x
                t.append(clock())
                y = calls[op](lazy)
                t.append(clock())
                expr = collections_to_expr([y], True)
                t.append(clock())
                expr = expr.optimize()
                t.append(clock())
                graph = expr.__dask_graph__()
                keys = list(flatten(expr.__dask_keys__()))
                t.append(clock())
                get_sync(graph, keys)
                end = clock()
                steps = [(t[k + 1] - t[k]) * 1e6 for k in range(len(t) - 1)]
                rows.append(steps + [(marks[0] - t[0]) * 1e6, (end - t[0]) * 1e6])
            med = [statistics.median(c) for c in zip(*rows[10:])]
            cells = " ".join(f"{s}={v:5.0f}" for s, v in zip(STEPS + ["first", "all"], med))
            print(f"{op:8} {n:3} chunks  {cells}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
