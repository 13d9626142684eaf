"""Record a histogram by running the real counting kernel under the simulator.

:func:`trace_histogram` runs a histogram strategy's ``histogram(job)`` (the kernel of
``numbakern/kernels/counting.py`` with the strategy's counters), as
``numbakern.histogram_counts`` runs it, with one thing swapped: the job's
``bin_of(x, i, aux)``, the device function that maps element ``i`` to its bin, is
wrapped to record which thread read which element and the bin it found (as
:mod:`numbakern.teach.trace` wraps the element loader). Atomics are recorded by
wrapping the simulator's, as for reductions: each one's memory (shared or global),
slot, value and thread. A thread counts the elements it read in the order it read
them, so each counted element is tied to the next counting atomic its thread runs; the
privatized strategies' fold is then one global atomic per block and non-empty bin.

:func:`histogram_tree` and :func:`contention_table` show the recording; the proof
checks that every counted element reached ``out[bin]`` exactly once (directly, or
through its block's fold, whose value must equal the elements the block counted in
that bin) and that ``out`` equals NumPy's ``bincount``.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from numba import cuda
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from numbakern import strategies as _strategies
from numbakern.core.arrays import Workspace
from numbakern.core.bins import int_binner
from numbakern.core.jobs import HistogramJob

from . import trace as _trace
from .figures import plain_axes
from .trace import TraceError, _Recorder


@dataclass
class HistAtomic:
    """One atomic: ``where`` ``"shared"`` or ``"global"``, its slot and value; the
    element it counted (``-1``: a fold of a block's counter)."""

    seq: int
    launch: int
    block: int
    thread: int
    where: str
    slot: int
    value: int
    element: int = -1
    nbytes: int = 0  # the counter's size: what the atomic reads and writes


@dataclass
class HistogramTrace:
    """A recorded histogram: the elements' bins, every atomic, the counts."""

    strategy: str
    n: int
    bins: int
    threads: int
    launches: list
    bin_of: dict  # element -> (launch, block, thread, bin)
    atomics: list
    barriers: int
    out: np.ndarray
    expected: np.ndarray
    element_bytes: int = 0
    problems: list = field(default_factory=list)

    def bytes_moved(self) -> dict:
        """Bytes through each level: the elements read, and each atomic's counter
        read and written once (its read-modify-write)."""
        moved = {"global read": len(self.bin_of) * self.element_bytes,
                 "global atomics": 0, "shared atomics": 0}
        for a in self.atomics:
            moved[f"{a.where} atomics"] += 2 * a.nbytes
        return moved

    @property
    def exact(self) -> bool:
        return not self.problems and np.array_equal(self.out, self.expected)

    def summary(self) -> dict:
        """The counts, as plain numbers (JSON-ready)."""
        shared = sum(a.where == "shared" for a in self.atomics)
        hits = self.contention()
        return {"strategy": self.strategy, "family": "histogram", "n": self.n,
                "bins": self.bins, "threads": self.threads,
                "launches": len(self.launches), "barriers": self.barriers,
                "atomics": len(self.atomics), "shared_atomics": shared,
                "global_atomics": len(self.atomics) - shared,
                "busiest_address": max(hits.values(), default=0),
                "bytes": self.bytes_moved(), "out": self.out.tolist(),
                "exact": self.exact}

    def contention(self) -> dict:
        """``{(where, block or None, slot): atomics}``: how many atomics hit each
        address (shared slots are per block)."""
        hits = Counter()
        for a in self.atomics:
            hits[(a.where, a.block if a.where == "shared" else None, a.slot)] += 1
        return dict(hits)


class _HistRecorder(_Recorder):
    atomics = ("add", "inc")

    def __init__(self):
        super().__init__()
        self.events: list[HistAtomic] = []
        self.pending: dict = {}  # thread -> elements read, not yet counted, in order
        self.bins: dict = {}
        self.barrier_count = 0

    def read(self, i, b) -> None:
        launch, block, thread = self._where()
        with self.lock:
            self.bins[int(i)] = (launch, block, thread, int(b))
            if b >= 0:  # a trip of the counting loop reads several before it counts
                self.pending.setdefault((launch, block, thread), []).append(int(i))

    def barrier(self) -> None:
        with self.lock:
            if threading.current_thread().threadIdx.x == 0:
                self.barrier_count += 1

    def on_atomic(self, name, arr, index, args, old) -> None:
        launch, block, thread = self._where()
        _, shared = _trace._address(arr, index)
        size = arr.itemsize if shared else arr._item._ary.itemsize
        with self.lock:
            read = self.pending.get((launch, block, thread))
            element = read.pop(0) if read else -1
            self.events.append(HistAtomic(len(self.events), launch, block, thread,
                                          "shared" if shared else "global", int(index),
                                          int(args[-1]), element, size))


def _rec() -> _HistRecorder:
    rec = _trace._ACTIVE
    if not isinstance(rec, _HistRecorder):
        raise TraceError("a histogram tracing kernel ran outside trace_histogram")
    return rec


def _traced_binner(real):
    @cuda.jit(device=True)
    def bin_of(x, i, aux):
        b = real(x, i, aux)
        _rec().read(i, b)
        return b

    return bin_of


def trace_histogram(x, bins: int, strategy: str = "shared_privatized", *, threads: int = 32,
                    blocks: int = 2) -> HistogramTrace:
    """Count the integers of ``x`` into ``bins`` bins with the real kernel under the
    simulator, recording every element's bin and every atomic.

    Args:
        x: a 1-D array or list of integers (values outside ``[0, bins)`` are left out,
            as ``histogram_counts`` leaves them).
        bins: a positive int.
        strategy: a histogram strategy's name (``available("histogram")``).
        threads, blocks: the grid (threads a multiple of 32).

    Raises:
        TraceError: not under the simulator.
        ValueError: a bad ``bins``, ``threads``, ``blocks`` or strategy name; ``x`` not
            1-D. TypeError: ``x`` not integers.
    """
    _trace.require_simulator()
    x = np.asarray(x)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if x.dtype.kind not in "iu":
        raise TypeError(f"x must hold integers, got {x.dtype}")
    if not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive int, got {bins!r}")
    base = _strategies.resolve("histogram", strategy, bins=int(bins))
    strat = type(base)(threads=threads, blocks=blocks)
    strat.check(int(bins))
    real, key, read_dtype = int_binner(np.dtype(x.dtype), int(bins))
    traced = _traced_binner(real)
    xv = cuda.to_device(x.astype(read_dtype))
    out = cuda.to_device(np.zeros(int(bins), np.int64))
    aux = cuda.to_device(np.zeros(1, np.int64))
    job = HistogramJob(xv, x.size, int(bins), traced, ("traced", id(traced)) + tuple(key),
                       aux, out, Workspace("numpy", cuda.default_stream()))
    rec = _HistRecorder()
    with _trace.recording(rec):
        strat.histogram(job)
    inside = x[(x >= 0) & (x < bins)].astype(np.int64)
    trace = HistogramTrace(strat.name, x.size, int(bins), strat.threads, rec.launches,
                           rec.bins, rec.events, rec.barrier_count, out.copy_to_host(),
                           np.bincount(inside, minlength=int(bins)), x.dtype.itemsize)
    trace.problems = _check(trace, strat.privatized)
    return trace


def _check(trace: HistogramTrace, privatized: bool) -> list[str]:
    """What contradicts "every counted element reached out[bin] exactly once"."""
    problems = []
    counted = Counter(a.element for a in trace.atomics if a.element >= 0)
    for i, (_, block, _, b) in trace.bin_of.items():
        if b >= 0 and counted[i] != 1:
            problems.append(f"element {i} (bin {b}) counted {counted[i]} times")
    per_block = Counter((trace.bin_of[a.element][1], trace.bin_of[a.element][3])
                        for a in trace.atomics if a.element >= 0)
    if privatized:
        folds = Counter()
        for a in trace.atomics:
            if a.element < 0 and a.where == "global":
                folds[(a.block, a.slot)] += a.value
        if folds != per_block:
            problems.append("a block's fold differs from the elements it counted")
    else:
        for a in trace.atomics:
            if a.element >= 0 and (a.where != "global" or a.slot != trace.bin_of[a.element][3]):
                problems.append(f"element {a.element} counted at {a.where} slot {a.slot}")
    return problems


def histogram_tree(trace: HistogramTrace, limit: int = 6) -> Tree:
    """Per block: the elements each thread read and where its atomic counted them; the
    folds into the global counters; the proof line."""
    root = Tree(Text(f"{trace.strategy} · histogram of {trace.n} elements into "
                     f"{trace.bins} bins · {trace.threads} threads per block", "bold"))
    by_block = defaultdict(list)
    for a in trace.atomics:
        by_block[(a.launch, a.block)].append(a)
    for number, (name, blocks, threads) in enumerate(trace.launches, 1):
        launch = root.add(Text(f"launch {number}: {name}, {blocks} block(s) × {threads} "
                               "threads", "bold magenta"))
        for block in range(blocks):
            events = by_block.get((number, block), [])
            branch = launch.add(Text(f"block {block}", "bold"))
            counts = [a for a in events if a.element >= 0]
            folds = [a for a in events if a.element < 0]
            node = branch.add(Text(f"count: {len(counts)} atomic(s), one per element"))
            for a in counts[:limit]:
                b = trace.bin_of[a.element][3]
                node.add(Text(f"t{a.thread}: x[{a.element}] → bin {b}: atomic add "
                              f"{a.value} on {a.where} slot {a.slot}"))
            if len(counts) > limit:
                node.add(Text(f"… and {len(counts) - limit} more", "dim"))
            if folds:
                node = branch.add(Text(f"fold: {len(folds)} global atomic(s), one per "
                                       "non-empty bin (after a barrier)", "red"))
                for a in folds[:limit]:
                    node.add(Text(f"t{a.thread}: out[{a.slot}] += {a.value}"))
                if len(folds) > limit:
                    node.add(Text(f"… and {len(folds) - limit} more", "dim"))
    left_out = sorted(i for i, (*_, b) in trace.bin_of.items() if b < 0)
    if left_out:
        shown = ", ".join(f"x[{i}]" for i in left_out[:limit])
        root.add(Text(f"left out: {len(left_out)} element(s) outside [0, {trace.bins}), "
                      f"as histogram_counts leaves them: {shown}"
                      + (", …" if len(left_out) > limit else ""), "yellow"))
    ok = trace.exact
    root.add(Text(
        f"proof: every counted element reached out[bin] exactly once: "
        f"{'yes' if not trace.problems else 'NO (' + trace.problems[0] + ')'} · equals "
        f"NumPy's bincount{' of the elements in range' if left_out else ''}: "
        f"{'yes' if np.array_equal(trace.out, trace.expected) else 'NO'}"
        f" · out = {_head(trace.out.tolist(), 16)}", "bold green" if ok else "bold red"))
    return root


def contention_table(trace: HistogramTrace, top: int = 8) -> Table:
    """Atomics per address, most contended first, and the totals."""
    table = Table(title=f"atomics per address: {trace.strategy}")
    for col in ("memory", "block", "slot", "atomics"):
        table.add_column(col, justify="right", overflow="fold")
    hits = sorted(trace.contention().items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][2]))
    for (where, block, slot), k in hits[:top]:
        table.add_row(where, "" if block is None else str(block), str(slot), str(k))
    if len(hits) > top:
        table.add_row("…", "", "", "")
    shared = sum(a.where == "shared" for a in trace.atomics)
    shown = f" ({top} shown)" if len(hits) > top else ""
    busiest = hits[0][1] if hits else 0
    # a line a fact, the table no narrower than the lines: four narrow columns would
    # otherwise wrap the caption mid-phrase
    lines = [f"{len(trace.atomics)} atomics: {shared} shared, "
             f"{len(trace.atomics) - shared} global; {trace.barriers} barriers",
             f"{len(hits)} address{'es' * (len(hits) != 1)}{shown}; the busiest took {busiest} "
             f"atomic{'s' * (busiest != 1)}",
             "bytes: " + ", ".join(f"{k} {v}" for k, v in trace.bytes_moved().items())]
    table.caption = "\n".join(lines)
    table.min_width = max(map(len, lines[:2]))
    return table


def _head(values: list, most: int) -> str:
    """``values`` as a list literal of at most ``most`` items, ``…`` where cut."""
    if len(values) <= most:
        return str(values)
    return f"[{', '.join(map(str, values[:most]))}, …]"


def draw_histogram(trace: HistogramTrace, path: str) -> None:
    """Atomics per bin, by where they landed (each block's shared counters, the global
    counters), beside the counts: the contention a strategy puts on each address."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = defaultdict(lambda: np.zeros(trace.bins))
    for a in trace.atomics:
        if a.where == "global":
            per["global"][a.slot] += 1
        else:  # a shared slot: bin = slot modulo bins (per-warp copies follow each other)
            per[f"block {a.block} shared"][a.slot % trace.bins] += 1
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.5 * trace.bins + 3)), 4))
    width = 0.8 / max(1, len(per))
    xs = np.arange(trace.bins)
    for k, (label, hits) in enumerate(sorted(per.items())):
        ax.bar(xs + k * width - 0.4 + width / 2, hits, width, label=label)
    ax.plot(xs, trace.out, "k_", ms=14, mew=2, label="out (the count)")
    ax.set_xticks(xs)
    ax.set_xlabel("bin")
    ax.set_ylabel("atomics on the bin's counter")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"{trace.strategy}: {trace.n} elements into {trace.bins} bins, "
                 f"{len(trace.atomics)} atomics · exact: {'yes' if trace.exact else 'NO'}",
                 fontsize=9)
    plain_axes(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
