"""Show a top-k selection: radix select's passes, which bucket each pass keeps.

:func:`trace_select` runs a select strategy's real kernels on one row, as
``numbakern.topk`` does, with the job's ``record`` list: ``radix_select`` appends
what its kernels computed in each pass (the candidates' count of every digit, the
bucket its scan kept, how many candidates lay below that bucket and in it). Nothing
here recomputes the algorithm: the tree shows those records, then the winners and
the proof (the answer equals the first ``k`` of NumPy's stable argsort in the
wanted order). The other strategies record no passes; their tree shows the answer
and the proof.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import cuda
from rich.text import Text
from rich.tree import Tree

from numbakern import strategies as _strategies
from numbakern.core.arrays import Workspace
from numbakern.core.jobs import SelectJob
from numbakern.kernels.sort_keys import bits_dtype
from numbakern.runtime.views import host_copy

from .figures import plain_axes
from .trace import require_simulator

SELECT_LEGEND = (
    "How to read this: keys are the values as unsigned integers in the wanted order "
    "(for the largest, complemented: the largest value, NaN above all, has the "
    "smallest key), so the winners are the k smallest keys. Each pass counts the "
    "candidates' next digit, from the top (11 bits, 2048 counts, and 10 for the last "
    "digit of a 32-bit key; 8 or 12 with RadixSelect(digit_bits=...)); the scan of the "
    "counts keeps the bucket holding the need-th candidate: the buckets below it all "
    "win (need drops by their count), those above lose. A row is decided once its "
    "bucket holds exactly the keys still needed. Then every key below the threshold "
    "wins, and of the keys "
    "equal to it the need of lowest index. (Only radix_select's passes are drawn: "
    "radix_block_select does the same in one block per row with 11-bit digits, then "
    "sorts the keys at or below the threshold's bucket, strategies/radix_block_select.py; "
    "bitonic_select keeps the row's best k so far in shared memory and merges each "
    "round's better candidates into them with bitonic steps, strategies/bitonic_select.py; "
    "sort_slice is a stable argsort cut to k. For them this shows the answer and its "
    "proof.)"
)


@dataclass
class SelectTrace:
    """One recorded selection of ``k`` of a row ``x``."""

    strategy: str
    x: np.ndarray
    k: int
    largest: bool
    threads: int
    passes: list = field(default_factory=list)
    values: np.ndarray | None = None
    indices: np.ndarray | None = None
    want: np.ndarray | None = None

    @property
    def exact(self) -> bool:
        """The answer is the first ``k`` of a stable argsort in the wanted order."""
        return bool(np.array_equal(self.indices, self.want)) and bool(np.array_equal(
            self.values.view(bits_dtype(self.x.dtype)),
            self.x[self.want].view(bits_dtype(self.x.dtype))))

    def summary(self) -> dict:
        return {"strategy": self.strategy, "n": int(self.x.size), "k": self.k,
                "largest": self.largest, "dtype": self.x.dtype.name,
                "passes": self.passes, "indices": self.indices.tolist(),
                "exact": self.exact}


def stable_order(x: np.ndarray, largest: bool) -> np.ndarray:
    """NumPy's stable argsort, descending (NaN first, ties in index order) for the
    largest."""
    if not largest:
        return np.argsort(x, kind="stable")
    return x.size - 1 - np.argsort(x[::-1], kind="stable")[::-1]


def trace_select(x, k: int, strategy: str = "radix_select", *, largest: bool = True,
                 threads: int = 32) -> SelectTrace:
    """Select the ``k`` first of the 1-D ``x`` with ``strategy``'s real kernels under
    the simulator, keeping the passes the strategy records.

    Raises:
        TraceError: not under the simulator.
        ValueError: ``x`` not 1-D and non-empty; ``k`` not from 0 to ``x.size``; an
            unknown strategy; ``k`` beyond what the strategy takes.

    ``k=0`` selects nothing, as ``numbakern.topk`` and ``torch.topk`` (empty values
    and indices): no kernel runs, and the trace holds no pass.
        TypeError: a dtype ``numbakern.topk`` does not take.
    """
    require_simulator()
    x = np.ascontiguousarray(x)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if x.dtype.kind not in "biuf" or x.dtype.itemsize > 8:
        raise TypeError(f"x must have a bool, integer or float dtype, got {x.dtype}")
    if not 0 <= k <= x.size:
        raise ValueError(f"k must be from 0 to the number of values ({x.size}), got {k}")
    selector = _strategies.resolve("select", strategy, threads=threads)
    selector.check(x.size, k)
    kd = bits_dtype(x.dtype)
    workspace = Workspace("numpy", cuda.default_stream())
    values, indices = workspace.empty(k, kd), workspace.empty(k, np.int64)
    trace = SelectTrace(selector.name, x, k, largest, threads)
    job = SelectJob(cuda.to_device(x.view(kd)), values, indices, 1, x.size, k, x.dtype,
                    largest, True, workspace, record=trace.passes)
    if k:  # as topk: k=0 launches nothing
        selector.select(job)
    trace.values = host_copy(values).view(x.dtype)
    trace.indices = host_copy(indices)
    trace.want = stable_order(x, largest)[:k]
    return trace


def _value(trace: SelectTrace, i: int) -> str:
    return f"x[{i}] = {trace.x[i]}"


def select_tree(trace: SelectTrace, limit: int = 6) -> Tree:
    """The passes (radix_select), the winners and the proof line."""
    x = trace.x
    which = "largest" if trace.largest else "smallest"
    root = Tree(Text(f"{trace.strategy} · the {trace.k} {which} of {x.size} {x.dtype} · "
                     f"{trace.threads} threads per block", "bold"))
    width = 8 * x.dtype.itemsize
    need = trace.k
    candidates = x.size
    for p in trace.passes:
        row = p["rows"][0]
        hi, lo = p["bits"]
        if row is None:
            root.add(Text(f"pass {p['pass'] + 1}: bits {hi}-{lo} · not run: the row was "
                          "decided (its bucket held exactly the keys still needed)", "dim"))
            continue
        node = root.add(Text(
            f"pass {p['pass'] + 1}: bits {hi}-{lo} · {candidates} candidate(s) · keeps bucket "
            f"{row['bucket']:#04x}: {row['below']} below it win, {row['in_bucket']} in it "
            f"· need {need} → {need - row['below']}", "bold magenta"))
        digit_counts(node, row, limit, ("win", "lose"))
        need -= row["below"]
        candidates = row["in_bucket"]
    if trace.passes:
        decided = sum(p["bits"][0] - p["bits"][1] + 1 for p in trace.passes
                      if p["rows"][0] is not None)
        root.add(Text(f"threshold: the top {decided} of {width} key bits decided; keys "
                      f"below it in those bits win, and of the {candidates} equal to it "
                      f"there, the {need} of lowest index"))
    answer = ("empty (k=0: nothing to select, as torch.topk; no kernel runs)"
              if trace.k == 0 else "sorted" if trace.k > 1 else "one element")
    winners = root.add(Text(f"the answer, {answer}", "bold"))
    for j, i in enumerate(trace.indices[:limit]):
        winners.add(Text(f"{j}: {_value(trace, int(i))}"))
    if trace.k > limit:
        winners.add(Text(f"… {trace.k - limit} more", "dim"))
    ok = trace.exact
    root.add(Text(f"proof: equals the first {trace.k} of NumPy's stable argsort "
                  f"({'descending, NaN first' if trace.largest else 'ascending'}): "
                  f"{'yes' if ok else 'NO'}", "bold green" if ok else "bold red"))
    return root


def digit_counts(node: Tree, row: dict, limit: int, sides: tuple[str, str]) -> None:
    """Under ``node``, a pass's digit histogram: each digit's count (at most
    ``limit`` of them), the kept bucket marked, the others by ``sides`` (what the
    digits below and above the kept one mean)."""
    shown = sorted(row["counts"].items())
    for digit, count in shown[:limit]:
        mark = " ← kept" if digit == row["bucket"] else (
            f" ({sides[0]})" if digit < row["bucket"] else f" ({sides[1]})")
        node.add(Text(f"digit {digit:#04x}: {count} key(s){mark}",
                      "green" if digit == row["bucket"] else ""))
    if len(shown) > limit:
        node.add(Text(f"… {len(shown) - limit} more digit(s)", "dim"))


#: the figure's colours: the winners, the kept bucket, the buckets below it (they win),
#: the rest (they lose)
_WIN, _KEPT, _BELOW, _LOSE = "#2ca02c", "#ff7f0e", "#1f77b4", "#bdbdbd"


def draw_select(trace: SelectTrace, path: str) -> None:
    """Draw the recording to ``path`` (``.png``, ``.svg``, ``.pdf``): the row, its
    winners marked with their place in the answer; under it, for radix_select, each
    pass's digit counts (the kept bucket, the buckets below it that win, the rest that
    lose), the text's numbers in each title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    passes = [p for p in trace.passes if p["rows"][0] is not None]
    fig, axes = plt.subplots(1 + len(passes), 1, squeeze=False,
                             figsize=(min(14.0, max(7.0, 0.16 * trace.x.size + 3)),
                                      2.6 + 1.9 * len(passes)))
    _draw_row(axes[0][0], trace)
    need = trace.k
    for ax, p in zip(axes[1:], passes):
        need = _draw_pass(ax[0], p, need)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _draw_row(ax, trace: SelectTrace) -> None:
    x = trace.x.astype(np.float64)
    heights = np.where(np.isfinite(x), x, 0.0)  # NaN and ±inf: no bar, named instead
    rank = {int(i): j for j, i in enumerate(trace.indices)}
    colours = [_WIN if i in rank else _LOSE for i in range(x.size)]
    ax.bar(range(x.size), heights, color=colours, width=0.8)
    for i in range(x.size):
        label = " ".join(([str(rank[i])] if i in rank else []) +
                         ([str(x[i])] if not np.isfinite(x[i]) else []))
        if label:
            ax.annotate(label, (i, heights[i]), ha="center", va="bottom", fontsize=7)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # indices
    which = "largest" if trace.largest else "smallest"
    note = "" if trace.passes else " · no passes recorded: the answer and its proof"
    ax.set_title(f"{trace.strategy}: the {trace.k} {which} of {x.size} {trace.x.dtype} · "
                 f"equals NumPy's stable argsort: {'yes' if trace.exact else 'NO'}\n"
                 f"green: the answer, numbered by place{note}", fontsize=9)
    ax.set_xlabel("index")
    ax.set_ylabel("x")
    plain_axes(ax)


def _draw_pass(ax, p: dict, need: int) -> int:
    """One pass's digit counts as bars, its title the tree's line; the need after it."""
    row = p["rows"][0]
    digits = sorted(row["counts"])
    counts = [row["counts"][d] for d in digits]
    colours = [_KEPT if d == row["bucket"] else _BELOW if d < row["bucket"] else _LOSE
               for d in digits]
    ax.bar(range(len(digits)), counts, color=colours, width=0.8)
    if len(digits) <= 32:
        ax.set_xticks(range(len(digits)), [f"{d:#05x}" for d in digits], fontsize=7,
                      rotation=90)
    hi, lo = p["bits"]
    ax.set_title(f"pass {p['pass'] + 1}: bits {hi}-{lo} · keeps bucket {row['bucket']:#04x} "
                 f"(orange): {row['below']} below it win (blue), {row['in_bucket']} in it "
                 f"· need {need} → {need - row['below']}", fontsize=9)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of keys
    ax.set_xlabel("digit (these bits of a key)")
    ax.set_ylabel("keys")
    plain_axes(ax)
    return need - row["below"]


