"""Show a recorded sort (a :class:`~numbakern.teach.sort_trace.SortTrace`).

* :func:`sort_tree`: the bitonic network stage by stage (which thread compared which
  places, which pairs it swapped), or each radix pass's digit histogram, offsets,
  tiles and moves; and the proof line;
* :func:`sort_counts_table` and :func:`sort_work_table`: the counts, and the
  network's compare-exchanges and stages beside Batcher's formulas (the radix sort's
  moves beside ``n`` per pass);
* :func:`draw_sort`: the network (wires and compare-exchanges) or the passes' moves.

Everything shown is read from the recording.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .figures import plain_axes
from .sort_trace import DIGIT_BITS, SortTrace, bitonic_formula

#: how to read each sort's recording, by strategy
SORT_LEGENDS = {
    "bitonic": "bitonic: stage s compares the pairs (i, i xor j) of places, every thread "
               "its own pairs, then a barrier; k is the length of the sorted runs being "
               "built (ascending where i & k is 0, descending elsewhere), so after the "
               "stages of k = n the row is sorted.",
    "radix": "radix: each pass orders the keys by one 8-bit digit, from the lowest, "
             "keeping equal digits in input order (stable); a key of digit d goes to "
             "offset(d) + its rank among the keys of digit d. A tile holds threads × (keys "
             "per thread) keys. A move is one key read from its place and written to its "
             "new one.",
}


def sort_legend(names: list[str]) -> str:
    """How to read the recordings of the sorts ``names``, in their order: only the
    strategies shown are explained (a sort of one's own has no recording, which
    ``trace_sort`` refuses, naming the two it records)."""
    return "How to read this: " + " ".join(SORT_LEGENDS[name] for name in names
                                           if name in SORT_LEGENDS)


def _values(trace: SortTrace, values) -> str:
    shown = ", ".join(str(v) for v in list(values)[:12])
    return f"[{shown}{', …' if len(values) > 12 else ''}]"


def proof_line(trace: SortTrace) -> Text:
    """Every element ended in exactly one place, and the output is NumPy's sort."""
    once = ("yes" if trace.exact_once
            else f"NO ({'; '.join(trace.problems) or 'not a permutation'})")
    line = (f"proof: every element ends in exactly one place: {once} · equals NumPy's "
            f"sort (stable): {'yes' if trace.matches_numpy else 'NO'} · out = "
            f"{_values(trace, trace.out)}")
    return Text(line, "bold green" if trace.exact else "bold red")


def sort_tree(trace: SortTrace, limit: int = 6) -> Tree:
    """The recording as a tree, and the proof line. At most ``limit`` lines a step."""
    per_thread = f" · {trace.items} keys per thread" if trace.items else ""
    root = Tree(Text(f"{trace.strategy} · sort of {trace.n} {trace.dtype} · "
                     f"{trace.threads} threads per block{per_thread}", "bold"))
    for number, (name, blocks, threads) in enumerate(trace.launches, 1):
        root.add(Text(f"launch {number}: {name}, {blocks} block(s) × {threads} threads",
                      "bold magenta"))
    if trace.strategy == "bitonic":
        _network(trace, root, limit)
    else:
        _passes(trace, root, limit)
    root.add(proof_line(trace))
    return root


def _network(trace: SortTrace, root: Tree, limit: int) -> None:
    padding = (f", padded with {trace.size - trace.n} of the largest key"
               if trace.size > trace.n else "")
    branch = root.add(Text(f"the network on {trace.size} places ({trace.n} keys{padding}), "
                           "one barrier after each stage", "bold"))
    by_stage = defaultdict(list)
    for ce in trace.exchanges:
        by_stage[ce.stage].append(ce)
    for stage, (k, j) in enumerate(trace.stages, 1):
        ces = sorted(by_stage[stage], key=lambda c: (c.thread, c.i))
        swaps = sum(c.swapped for c in ces)
        node = branch.add(Text(f"stage {stage} (runs of {k}, pairs at distance {j}): "
                               f"{len(ces)} compare-exchanges, {swaps} swapped"))
        for c in ces[:limit]:
            up = "ascending" if c.i & k == 0 else "descending"
            node.add(Text(f"t{c.thread}: places {c.i} and {c.partner} ({up}): "
                          + ("swapped" if c.swapped else "kept"),
                          "red" if c.swapped else ""))
        if len(ces) > limit:
            node.add(Text(f"… and {len(ces) - limit} more like these", "dim"))


def _passes(trace: SortTrace, root: Tree, limit: int) -> None:
    for p in trace.passes:
        digits = np.flatnonzero(p.counts)
        node = root.add(Text(f"pass {p.number}: digit bits {p.shift}-{p.shift + 7}, "
                             f"{len(digits)} digit value(s) present, {p.tiles} tile(s)",
                             "bold"))
        node.add(Text("histogram (launch digit_histogram) and offsets (the scan): "
                             + ", ".join(f"digit {d}: {p.counts[d]} key(s) from {p.offsets[d]}"
                                         for d in digits[:limit])
                             + (", …" if len(digits) > limit else "")))
        for tile in range(p.tiles):
            moves = sorted((m for m in p.moves if m[2] == tile), key=lambda m: m[0])
            t = node.add(Text(f"tile {tile}: {len(moves)} key(s) ranked in shared memory; "
                              f"publishes {p.published[tile]} count word(s); its look-back "
                              f"reads {p.look_back_reads[tile]} word(s) of earlier tiles"))
            for src, dst, _ in moves[:limit]:
                t.add(Text(f"key at {src} (digit {p.digit_of(dst)}) → place {dst}"))
            if len(moves) > limit:
                t.add(Text(f"… and {len(moves) - limit} more moves", "dim"))


def sort_counts_table(trace: SortTrace) -> Table:
    """The totals: launches, barriers, atomics, loads and stores, bytes, and the work
    of the sort's kind: a network's compare-exchanges, a radix sort's key moves."""
    table = Table(title=f"counts: {trace.strategy}, sort of {trace.n} {trace.dtype}, "
                        f"{trace.threads} threads per block")
    work = ("compare-exchanges", str(len(trace.exchanges))) if trace.strategy == "bitonic" \
        else ("moves", str(sum(len(p.moves) for p in trace.passes)))
    for col in ("launches", "barriers", "atomics", "global ld/st", "shared ld/st", work[0]):
        table.add_column(col, justify="right", overflow="fold")
    c = trace.counts
    table.add_row(str(len(trace.launches)), str(c["barriers"]), str(c["atomics"]),
                  f"{c['global loads']}/{c['global stores']}",
                  f"{c['shared loads']}/{c['shared stores']}", work[1])
    table.caption = "bytes: " + ", ".join(f"{k} {v}" for k, v in c["bytes"].items())
    return table


def sort_work_table(trace: SortTrace) -> Table:
    """Work and depth measured beside the formulas: Batcher's network
    (``S/2 · log2 S (log2 S + 1)/2`` compare-exchanges in ``log2 S (log2 S + 1)/2``
    stages, ``S`` the padded size), or the radix sort's ``n`` moves in each of
    ``key bits / 8`` passes."""
    table = Table(title=f"work and depth: {trace.strategy}, n = {trace.n}")
    for col in ("", "measured", "formula"):
        table.add_column(col, overflow="fold")
    if trace.strategy == "bitonic":
        work, depth = bitonic_formula(trace.size)
        lg = int(np.log2(trace.size))
        table.add_row("work (compare-exchanges)", str(len(trace.exchanges)),
                      f"S/2 · log2 S · (log2 S + 1)/2 = {trace.size // 2} · {lg} · {lg + 1}/2"
                      f" = {work} (S = {trace.size})")
        table.add_row("depth (stages)", str(len(trace.stages)),
                      f"log2 S · (log2 S + 1)/2 = {depth}")
        table.caption = "O(n log² n) work, more than a radix sort's, in one launch"
    else:
        passes = 8 * trace.dtype.itemsize // DIGIT_BITS
        table.add_row("work (keys moved)", str(sum(len(p.moves) for p in trace.passes)),
                      f"n · passes = {trace.n} · {passes} = {trace.n * passes}")
        table.add_row("depth (passes)", str(len(trace.passes)),
                      f"key bits / 8 = {passes}")
        table.caption = "O(n · key bits) work, each pass stable"
    return table


# --- the figure ---------------------------------------------------------------------------


def draw_sort(trace: SortTrace, path: str) -> None:
    """Draw the recording to ``path`` (``.png``, ``.svg``, ``.pdf``): the bitonic
    network (a wire per place, a vertical bar per compare-exchange, red where it
    swapped, stage by stage left to right), or the radix passes (each key's move from
    its place to its new one, a row per pass, coloured by digit)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if trace.strategy == "bitonic":
        fig = _draw_network(plt, trace)
    else:
        fig = _draw_passes(plt, trace)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _draw_network(plt, trace: SortTrace):
    S, stages = trace.size, len(trace.stages)
    fig, ax = plt.subplots(figsize=(min(14.0, 2.5 + 0.55 * stages),
                                    min(12.0, 2.0 + 0.14 * S)))
    for w in range(S):
        ax.plot([0.5, stages + 0.5], [w, w], color="#bdbdbd", lw=0.6, zorder=0)
    for c in trace.exchanges:
        k, j = trace.stages[c.stage - 1]
        x = c.stage - 0.35 + 0.7 * ((c.i % j) / j if j > 1 else 0.5)
        colour = "#d62728" if c.swapped else "#1f77b4"
        ax.plot([x, x], [c.i, c.partner], color=colour, lw=1.0)
        low, high = (c.i, c.partner) if c.i & k == 0 else (c.partner, c.i)
        ax.plot(x, low, "o", color=colour, ms=2.5)  # the smaller key goes here
        ax.plot(x, high, "s", mfc="white", color=colour, ms=2.5)
    ax.set_xticks(range(1, stages + 1), [f"{k}/{j}" for k, j in trace.stages], fontsize=7,
                  rotation=90)
    ax.set_xlabel("stage: run length k / pair distance j (a barrier after each)")
    ax.set_ylabel("place")
    ax.set_ylim(S - 0.5, -0.5)
    work, depth = bitonic_formula(S)
    swaps = sum(c.swapped for c in trace.exchanges)
    ax.set_title(f"bitonic: sort of {trace.n} {trace.dtype} on {S} places · exact: "
                 f"{'yes' if trace.exact else 'NO'}\n{len(trace.exchanges)} "
                 f"compare-exchanges (formula {work}), {swaps} swapped (red) · "
                 f"{len(trace.stages)} stages (formula {depth})\n● the smaller key ends "
                 "here, □ the larger", fontsize=9)
    plain_axes(ax)
    return fig


def _draw_passes(plt, trace: SortTrace):
    passes = trace.passes
    fig, ax = plt.subplots(figsize=(min(14.0, max(7.0, 0.12 * trace.n + 4)),
                                    1.6 + 1.1 * len(passes)))
    cmap = plt.get_cmap("tab10")
    for p in passes:
        y0, y1 = p.number - 1, p.number
        digits = {d: k for k, d in enumerate(np.flatnonzero(p.counts))}
        for src, dst, _ in sorted(p.moves):  # in the record's order, crossings would be
            ax.plot([src, dst], [y0 + 0.05, y1 - 0.05],  # drawn as the threads ran
                    color=cmap(digits.get(p.digit_of(dst), 0) % 10), lw=0.7)
        for t in range(1, p.tiles):
            bound = t * trace.n / p.tiles - 0.5
            ax.plot([bound, bound], [y0, y0 + 0.15], color="black", lw=1.2)
    ax.set_yticks(range(len(passes) + 1),
                  ["input"] + [f"after pass {p.number} (bits {p.shift}-{p.shift + 7}, "
                               f"{np.count_nonzero(p.counts)} digit value(s))" for p in passes],
                  fontsize=7)
    ax.set_ylim(len(passes) + 0.2, -0.2)
    ax.set_xlim(-1, trace.n)
    ax.set_xlabel("place in the row (black ticks: tile bounds); colour: the key's digit")
    ax.set_title(f"radix: sort of {trace.n} {trace.dtype}, {len(passes)} pass(es), "
                 f"{len(trace.launches)} launches · {sum(len(p.moves) for p in passes)} "
                 f"moves · exact: {'yes' if trace.exact else 'NO'}", fontsize=9)
    plain_axes(ax)
    return fig


__all__ = ["SORT_LEGENDS", "draw_sort", "proof_line", "sort_counts_table", "sort_legend",
           "sort_tree", "sort_work_table"]
