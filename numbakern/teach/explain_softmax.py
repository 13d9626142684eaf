"""Show a recorded softmax row (a :class:`~numbakern.teach.softmax_trace.SoftmaxTrace`).

* :func:`softmax_tree`: each thread's own state (the elements it read and its
  ``(max, sum)``, or its maximum then its sum), the block reduces round by round
  with every rescale marked, and the proof line;
* :func:`softmax_counts_table`: the counts of each normalizer;
* :func:`draw_softmax`: the threads' states and the reduce's combine tree.

Everything shown is read from the recording.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .explain import VIA_COLOUR, cover_text
from .explain_scan import operand_text
from .figures import drawing_order, plain_axes
from .softmax_trace import SoftmaxTrace
from .trace import REGISTER, SHARED, SHUFFLE

SOFTMAX_LEGEND = (
    "How to read this: a softmax divides exp(x - max) by the row's sum of them. "
    "max_then_sum reduces the threads' maxima, then (every thread knowing the max) "
    "their sums: two block reduces, a barrier apart. online reduces (max, sum) pairs "
    "once: (m_a, s_a) ⊕ (m_b, s_b) = (m, s_a·exp(m_a - m) + s_b·exp(m_b - m)); where "
    "the maxima differ, one sum is rescaled (marked). [a-b] are the elements a state "
    "covers; in brackets after an operand, how it reached the thread (a shuffle from "
    "another lane's register, a shared-memory slot and the thread that stored it); none "
    "after the thread's own register."
)


def _state(trace: SoftmaxTrace, i: int) -> str:
    value = trace.nodes[i].value
    if len(value) == 2:
        return f"(max {float(value[0]):.4g}, sum {float(value[1]):.4g})"
    return f"{float(value[0]):.4g}"


def proof_line(trace: SoftmaxTrace) -> Text:
    """Each reduce covers every element once; the output is NumPy's to rounding."""
    parts = [f"{op} covers every element exactly once: "
             f"{'yes' if trace.result_exact(op) else 'NO'}" for op in trace.results]
    line = (f"proof: {' · '.join(parts) or 'no reduce recorded: NO'} · equals NumPy's "
            f"softmax to rounding: {'yes' if trace.matches_numpy else 'NO'} (max relative "
            f"error {trace.max_error:.2g}) · row sum {float(trace.y.sum(dtype='f8')):.6g}")
    return Text(line, "bold green" if trace.exact else "bold red")


def _rounds(trace: SoftmaxTrace, op: str) -> dict:
    """``{recorded step: joins}`` of one reduce: every round its result was built in,
    those whose combines all had the identity (idle lanes) with no joins, as the
    reduction view counts them."""
    root = trace.results.get(op)
    ancestry = trace.ancestry(root) if root is not None else ()
    rounds = {trace.nodes[i].step: [] for i in ancestry
              if trace.nodes[i].kind == "combine" and trace.nodes[i].detail == op
              and trace.nodes[i].step > 0}
    for j in trace.joins(op):
        rounds.setdefault(j.step, []).append(j)
    return dict(sorted(rounds.items()))


def _join_line(trace: SoftmaxTrace, j, rescaled: bool) -> Text:
    """``t0: [0] (shared slot 0, stored by t0) ⊕ [1] (...) → state``: each operand with,
    after it, how it reached the thread (none: its own register), as the scan view
    writes them; a rescale marked."""
    a, b = (trace.nodes[x] for x in j.args)
    text = Text(f"t{j.thread}: {operand_text(trace, a, j)} ⊕ {operand_text(trace, b, j)}"
                f" → {_state(trace, j.id)}")
    if rescaled:
        lo = min(float(a.value[0]), float(b.value[0]))
        hi = max(float(a.value[0]), float(b.value[0]))
        text.append(f" · rescale: a sum × exp({lo:.4g} − {hi:.4g})", "red")
    return text


def softmax_tree(trace: SoftmaxTrace, limit: int = 6) -> Tree:
    """The recording as a tree, and the proof line. At most ``limit`` lines a step."""
    layout = (f"fused: {trace.per_thread} element(s) a thread in registers"
              if trace.per_thread else "tiled: each pass loops over the row")
    root = Tree(Text(f"softmax {trace.strategy} · one row of {trace.n} {trace.dtype} · "
                     f"{trace.threads} threads · {layout}", "bold"))
    for number, (name, blocks, threads) in enumerate(trace.launches, 1):
        root.add(Text(f"launch {number}: {name}, {blocks} block(s) × {threads} threads",
                      "bold magenta"))
    rescaled = {j.id for j in trace.rescales()}
    for op in trace.results:
        own = sorted((t, i) for (o, t), i in trace.own.items() if o == op)
        branch = root.add(Text(f"reduce of {op}: {len(own)} thread states, "
                               f"{len(trace.joins(op))} joins (one fewer than the states "
                               f"holding elements)", "bold"))
        tiles = (" (tile by tile: its rescales within the thread are not combines of the "
                 "kit, so not listed)") if op == "online_softmax" and not trace.per_thread else ""
        node = branch.add(Text("each thread's own state, folded in registers" + tiles))
        for t, i in own[:limit]:
            cover = trace.nodes[i].cover
            read = f"x{cover_text(cover)}" if cover else "no element (past the row's end)"
            node.add(Text(f"t{t}: {read} → {_state(trace, i)}"))
        if len(own) > limit:
            node.add(Text(f"… and {len(own) - limit} more threads", "dim"))
        rounds = list(_rounds(trace, op).values())
        for k, joins in enumerate(rounds, 1):
            if not joins:  # a run of idle rounds in one line
                if k == 1 or rounds[k - 2]:
                    last = next((i for i in range(k, len(rounds)) if rounds[i]), len(rounds))
                    steps = f"step {k}" if last == k else f"steps {k}-{last}"
                    branch.add(Text(f"{steps}: idle combines only (with the identity)",
                                    "dim"))
                continue
            marks = sum(j.id in rescaled for j in joins)
            node = branch.add(Text(f"step {k}: {len(joins)} join(s)"
                                   + (f", {marks} rescale(s)" if marks else "")))
            for j in joins[:limit]:
                node.add(_join_line(trace, j, j.id in rescaled))
            if len(joins) > limit:
                node.add(Text(f"… and {len(joins) - limit} more like these", "dim"))
        r = trace.results[op]
        branch.add(Text(f"t0 broadcasts {cover_text(trace.nodes[r].cover)} = "
                        f"{_state(trace, r)} through shared memory (a barrier)"))
    root.add(proof_line(trace))
    return root


def softmax_counts_table(trace: SoftmaxTrace) -> Table:
    """The block's counts: reduces, joins, rescales, barriers, shuffles, memory."""
    table = Table(title=f"counts: softmax {trace.strategy}, row of {trace.n} "
                        f"{trace.dtype}, {trace.threads} threads")
    for col in ("reduces", "steps", "joins", "rescales", "barriers", "shuffle steps",
                "shared ld/st", "global ld/st"):
        table.add_column(col, justify="right", overflow="fold")
    steps = sum(len(_rounds(trace, op)) for op in trace.results)
    joins = sum(len(trace.joins(op)) for op in trace.results)
    reads = sum(len(v) for v in trace.loaded.values())
    table.add_row(str(len(trace.results)), str(steps), str(joins),
                  str(len(trace.rescales())), str(trace.barriers), str(trace.shuffles),
                  f"{trace.shared[0]}/{trace.shared[1]}", f"{reads}/{trace.n}")
    size = trace.dtype.itemsize
    table.caption = (f"bytes: global read {reads * size} (distinct elements read; a tiled "
                     f"max-then-sum reads the row once more), global written "
                     f"{trace.n * size}")
    return table


def draw_softmax(trace: SoftmaxTrace, path: str) -> None:
    """Draw each reduce's combine tree (``.png``, ``.svg``, ``.pdf``): columns are
    threads, rows the reduce's steps; the threads' own states on top (for the online
    pair, a bar of each thread's sum, its maximum written above), rescales in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(trace.results)
    fig, axes = plt.subplots(1, len(ops), figsize=(min(14.0, 4.5 + 4.5 * len(ops)), 4.6),
                             squeeze=False)
    rescaled = {j.id for j in trace.rescales()}
    for ax, op in zip(axes[0], ops):
        rounds = list(_rounds(trace, op).items())
        row = {step: k + 1 for k, (step, _) in enumerate(rounds)}
        own = {t: i for (o, t), i in trace.own.items() if o == op}
        where = {i: (t, 0) for t, i in own.items()}
        for step, joins in rounds:
            for j in joins:
                where[j.id] = (j.thread, row[step])
        for step, joins in rounds:
            for j in drawing_order(joins):
                for a in j.args:
                    src = _drawn_source(trace, a, where)
                    if src is None:
                        continue
                    (x0, y0), (x1, y1) = where[src], where[j.id]
                    hop = trace.nodes[a].via if trace.nodes[a].kind == "move" else REGISTER
                    colour = "#d62728" if j.id in rescaled else VIA_COLOUR.get(hop, "#424242")
                    ax.plot([x0, x1], [y0, y1], color=colour, lw=1.0)
        ax.plot([t for t, _ in own.items()], [0] * len(own), "s", color="#616161", ms=3)
        for i, (x, y) in where.items():
            if y:
                ax.plot(x, y, "o", color="#424242", ms=3)
        ax.set_yticks(range(len(rounds) + 1), ["thread states"]
                      + [f"step {k}" for k in range(1, len(rounds) + 1)], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("thread")
        marks = sum(j.id in rescaled for _, js in rounds for j in js)
        ax.set_title(f"{op}: {len(trace.joins(op))} joins in {len(rounds)} steps"
                     + (f", {marks} rescales (red)" if op == "online_softmax" else ""),
                     fontsize=9)
        plain_axes(ax)
    handles = [plt.Line2D([], [], color=VIA_COLOUR[v], label=v) for v in (SHUFFLE, SHARED,
                                                                            REGISTER)]
    handles.append(plt.Line2D([], [], color="#d62728", label="rescale"))
    axes[0][-1].legend(handles=handles, fontsize=7, frameon=False, loc="lower right")
    fig.suptitle(f"softmax {trace.strategy}: row of {trace.n} {trace.dtype}, "
                 f"{trace.threads} threads · {trace.barriers} barriers · "
                 f"{trace.shuffles} shuffle steps · exact: {'yes' if trace.exact else 'NO'}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _drawn_source(trace: SoftmaxTrace, i: int, where: dict):
    """The drawn node an operand came from (through its moves), or None."""
    node = trace.nodes[i]
    while node.kind == "move":
        node = trace.nodes[node.args[0]]
    return node.id if node.id in where else None


__all__ = ["SOFTMAX_LEGEND", "draw_softmax", "proof_line", "softmax_counts_table",
           "softmax_tree"]
