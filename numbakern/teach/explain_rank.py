"""Show a median or a partition by radix select: which bucket each pass keeps for each
rank, then (a partition) the split into buckets.

:func:`trace_rank` runs the real path of ``numbakern.median`` (``api/selection.py``'s
``_by_rank``) or of ``numbakern.partition`` (``_split_rows``) on one row under the
simulator, with a ``record`` list that ``RadixSelect.kth_keys`` fills as
``numbakern.topk``'s select does: for each rank asked, each digit pass's counts of
the candidates' digits, the bucket kept, the keys below it and in it. A partition's
split adds its count of each bucket. The tree shows those records, the answer and
the proof (the median equals ``np.median``; the partition holds, at each ``kth``,
``np.sort``'s element, none larger before it and none smaller after it, and is a
permutation of the row).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import cuda
from rich.text import Text
from rich.tree import Tree

from numbakern import strategies as _strategies
from numbakern.api import selection
from numbakern.core.arrays import Workspace
from numbakern.kernels.order_stats import MEDIAN
from numbakern.kernels.partition_split import MAX_PIVOTS
from numbakern.runtime.views import host_copy

from .explain_select import digit_counts
from .trace import require_simulator

#: what :func:`trace_rank` follows
KINDS = ("median", "partition")

RANK_LEGEND = (
    "How to read this: keys are the values as unsigned integers in NumPy's ascending "
    "order (NaN above everything, -0.0 equal to +0.0). A median needs the one or two "
    "middle ranks of the row (1-based: (n+1)/2 for odd n; n/2 and n/2+1 for even): radix "
    "select finds the lower one's key digit by digit from the top, each pass counting "
    "the candidates' next digit and keeping the bucket that holds the rank (the "
    "buckets below it hold smaller keys: the rank drops by their count); every digit "
    "runs (the key itself is wanted, not just the winners). The upper rank is the same "
    "key when it has more equal keys than the rank used, else the smallest key above "
    "it (one read of the row), never a second selection. A partition finds the key of "
    "each distinct kth the same way (one selection each, the passes of all of them in "
    "the same launches), then splits the row stably into the 2m+1 buckets those m "
    "pivots make: below the first, equal to it, between it and the next, ..., above "
    "the last (kernels/partition_split.py). Rank kth falls among the keys equal to its "
    "pivot, so every kth is in its sorted place at once."
)


@dataclass
class RankTrace:
    """One recorded median or partition of the row ``x``."""

    kind: str
    x: np.ndarray
    kth: list  # the 0-based ranks selected (a median: the lower middle one)
    threads: int
    passes: list = field(default_factory=list)
    buckets: list | None = None  # a partition's count of each bucket
    result: np.ndarray | None = None

    @property
    def exact(self) -> bool:
        """The median is ``np.median``'s (float16: within one float16 ulp, computed in
        float32); the partition meets NumPy's contract."""
        if self.kind == "median":
            want = np.median(self.x)
            if self.x.dtype == np.float16:
                return bool(np.isclose(self.result, want, rtol=2.0 ** -10, atol=0,
                                       equal_nan=True))
            return bool(np.array_equal(self.result, want, equal_nan=True))
        return _is_partition(self.x, self.result, self.kth)

    def summary(self) -> dict:
        out = {"kind": self.kind, "strategy": "radix_select", "n": int(self.x.size),
               "dtype": self.x.dtype.name, "ranks": self.kth, "passes": self.passes,
               "exact": self.exact}
        if self.kind == "partition":
            out["buckets"] = self.buckets
            out["result"] = self.result.tolist()
        else:
            out["median"] = float(self.result)
        return out


def _is_partition(x: np.ndarray, part: np.ndarray, kth) -> bool:
    ordered = np.sort(x)
    if not np.array_equal(np.sort(part), ordered, equal_nan=True):
        return False
    for k in kth:
        if not np.array_equal(part[k], ordered[k], equal_nan=True):
            return False
        if np.isnan(part[k]) if part.dtype.kind == "f" else False:
            continue  # NaN is the largest: everything before it is no larger
        with np.errstate(invalid="ignore"):
            before, after = part[:k], part[k + 1:]
            nan_after = np.isnan(after) if part.dtype.kind == "f" else False
            if not (np.all(before <= part[k]) and np.all((after >= part[k]) | nan_after)):
                return False
    return True


def trace_rank(x, kind: str = "median", kth=None, *, threads: int = 32) -> RankTrace:
    """Run ``numbakern.median`` (``kind="median"``) or ``numbakern.partition`` of the
    1-D ``x`` around ``kth`` (an int or ints; default the middle) by radix select, the
    real kernels under the simulator, keeping the passes they record.

    Raises:
        TraceError: not under the simulator.
        ValueError: ``x`` not 1-D and non-empty; an unknown ``kind``; ``kth`` out of
            ``[-n, n)`` or more than ``MAX_PIVOTS`` distinct ones.
        TypeError: a dtype the sorts do not take.
    """
    require_simulator()
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    x = np.ascontiguousarray(x)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if x.dtype.kind not in "biuf" or x.dtype.itemsize > 8:
        raise TypeError(f"x must have a bool, integer or float dtype, got {x.dtype}")
    finder = _strategies.resolve("select", "radix_select", threads=threads)
    workspace = Workspace("numpy", cuda.default_stream())
    n = x.size
    if kind == "median":
        trace = RankTrace(kind, x, [(n - 1) // 2], threads)
        result = selection._result_dtype("median", x.dtype, "linear", None)
        dst, _, _ = selection._by_rank(x, "numpy", (0,), 1, n, x.dtype, None, MEDIAN, False,
                                       result, workspace, finder, trace.passes)
        trace.result = host_copy(dst)[0].astype(result)
        return trace
    ks = [n // 2] if kth is None else [int(k) for k in np.atleast_1d(kth)]
    for k in ks:
        if not -n <= k < n:
            raise ValueError(f"kth(={k}) out of bounds for {n} values: kth must be in "
                             f"[{-n}, {n - 1}]")
    ranks = sorted({k % n for k in ks})
    if len(ranks) > MAX_PIVOTS:
        raise ValueError(f"at most {MAX_PIVOTS} distinct kth split (more take the sort), "
                         f"got {len(ranks)}")
    trace = RankTrace(kind, x, ranks, threads)
    out = selection._split_rows(x.reshape(1, n), x.dtype, ranks, False, finder, workspace,
                                trace.passes)
    trace.buckets = trace.passes.pop()["split"][0]
    trace.result = host_copy(out).view(x.dtype)
    return trace


def _rank_passes(root: Tree, trace: RankTrace, limit: int) -> None:
    """Each selected rank's passes: the bucket kept, the keys below and in it."""
    per_rank = len(trace.passes[0]["rows"]) if trace.passes else 0
    width = 8 * trace.x.dtype.itemsize
    # a median's selections come in pairs (lower, upper): the upper is never selected
    step = 2 if trace.kind == "median" else 1
    for j, k in enumerate(trace.kth):
        s = j * step
        if s >= per_rank:
            break
        node = root.add(Text(f"rank {k + 1} (kth {k}): its key, {width} bits, digit by "
                             "digit from the top", "bold"))
        need, candidates = k + 1, trace.x.size
        for p in trace.passes:
            row = p["rows"][s]
            hi, lo = p["bits"]
            if row is None:
                node.add(Text(f"pass {p['pass'] + 1}: bits {hi}-{lo} · not run", "dim"))
                continue
            step_node = node.add(Text(
                f"pass {p['pass'] + 1}: bits {hi}-{lo} · {candidates} candidate(s) · keeps "
                f"bucket {row['bucket']:#04x}: {row['below']} below it, {row['in_bucket']} "
                f"in it · rank {need} → {need - row['below']} among them", "magenta"))
            digit_counts(step_node, row, limit, ("smaller", "larger"))
            need -= row["below"]
            candidates = row["in_bucket"]
        node.add(Text(f"found: {candidates} key(s) equal to rank {k + 1}'s, np.sort's "
                      f"element {k} = {np.sort(trace.x)[k]}"))


def rank_tree(trace: RankTrace, limit: int = 6) -> Tree:
    """The passes of each rank, then the median or the split, and the proof line."""
    x = trace.x
    root = Tree(Text(f"radix_select · the {trace.kind} of {x.size} {x.dtype} · "
                     f"{trace.threads} threads per block", "bold"))
    _rank_passes(root, trace, limit)
    if trace.kind == "median":
        n = x.size
        upper = "the same rank" if n % 2 else (
            f"rank {n // 2 + 1}: the same key if more keys equal it, else the smallest "
            "key above it (one read)")
        root.add(Text(f"upper middle: {upper}; median = {trace.result}", "bold"))
        ok = trace.exact
        root.add(Text(f"proof: equals np.median: {'yes' if ok else 'NO'}",
                      "bold green" if ok else "bold red"))
        return root
    names = []
    for j in range(len(trace.kth)):
        names += [f"below pivot {j + 1}" if j == 0 else f"between pivots {j} and {j + 1}",
                  f"equal to pivot {j + 1} (kth {trace.kth[j]})"]
    names.append(f"above pivot {len(trace.kth)}")
    split = root.add(Text(f"the split: {len(names)} buckets, each in input order", "bold"))
    start = 0
    for name, count in zip(names, trace.buckets):
        shown = trace.result[start:start + count]
        values = ", ".join(str(v) for v in shown[:limit]) + (" …" if count > limit else "")
        split.add(Text(f"{name}: {count} at [{start}, {start + count}) {values}"))
        start += count
    ok = trace.exact
    root.add(Text(f"proof: at each kth np.sort's element, none larger before it, none "
                  f"smaller after, a permutation of x: {'yes' if ok else 'NO'}",
                  "bold green" if ok else "bold red"))
    return root
