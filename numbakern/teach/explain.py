"""Show a recorded reduction (a :class:`~numbakern.teach.trace.Trace`): a tree and a figure.

* :func:`tree`: launch, block, then step by step, which thread combined which
  elements and through what (register, shuffle, shared memory, a partial in global
  memory, a global atomic), as a ``rich.tree.Tree``;
* :func:`counts_table`: per block, the counts a teacher asks for;
* :func:`draw`: the result's combine tree as a figure (PNG or SVG), one column per
  thread, one row per step, edges coloured by the path a state took.

Everything shown is read from the recording: nothing here knows how a strategy works.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .figures import drawing_order, plain_axes
from .trace import (ATOMIC, ELEMENT, GLOBAL, REGISTER, SHARED, SHUFFLE, STATE_LESSONS,
                    STATE_READS, Node, Trace, source_lane)

LEGEND = (
    "How to read this: ⊕ is the op, [a-b] the elements a state covers. Steps are the "
    "rounds of combines, numbered as listed (the table counts them too): the combines of "
    "one step come after the same shuffles and barriers (side by side in different "
    "threads, or one after another where a thread loops). A join "
    "combines two states that both hold elements: a reduction of n elements makes "
    "exactly n - 1 joins, whatever the strategy; the other combines run "
    "on idle lanes, with the identity, or make states nobody reads. In brackets after an "
    "operand: how it reached the thread (a shuffle from another lane's register, a "
    "shared-memory slot, a partial in global memory written by an earlier launch)."
)

VIA_STYLE = {
    ELEMENT: "grey50",
    REGISTER: "white",
    SHUFFLE: "cyan",
    SHARED: "green",
    GLOBAL: "dark_orange",
    ATOMIC: "red",
}
VIA_COLOUR = {  # the figure's
    ELEMENT: "#9e9e9e",
    REGISTER: "#424242",
    SHUFFLE: "#1f77b4",
    SHARED: "#2ca02c",
    GLOBAL: "#ff7f0e",
    ATOMIC: "#d62728",
}


def cover_text(cover) -> str:
    """Elements as ranges: ``[0-3, 32-35]``, ``[0, 8, …, 56] (8 elements, stride 8)``;
    ``identity`` for a state that covers nothing."""
    if not cover:
        return "identity"
    items = sorted(cover)
    runs, start = [], items[0]
    for a, b in zip(items, items[1:] + [None]):
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    if len(runs) <= 4:
        return "[" + ", ".join(runs) + "]"
    gaps = {b - a for a, b in zip(items, items[1:])}
    if len(gaps) == 1:
        return f"[{items[0]}, {items[1]}, …, {items[-1]}] ({len(items)} elements, stride " \
               f"{gaps.pop()})"
    return f"[{runs[0]}, {runs[1]}, …, {runs[-1]}] ({len(items)} elements)"


def value_text(value, op: str = "") -> str:
    """A state's value: its one field, or, for an op of :data:`~numbakern.teach.trace.
    STATE_READS` (``op``: its name), each field as a reader names it (var's
    ``(count, mean, M2)``)."""
    if not value:
        return ""
    reads = STATE_READS.get(op)
    if reads is not None and len(value) > 1:
        return reads(tuple(value))
    v = value[0]
    return f"{v:.6g}" if isinstance(v, (float, np.floating)) else str(v)


def _operand(trace: Trace, node: Node, holder: Node) -> str:
    """An operand's elements and how it reached the thread of ``holder``:
    ``[4] (shuffle from lane 4)``; just the elements for the thread's own state."""
    path = _path(trace, node, holder)
    return cover_text(node.cover) + (f" ({path})" if path else "")


def _path(trace: Trace, node: Node, holder: Node) -> str:
    if node.kind == "element":
        return f"{node.detail}, global load"
    if node.kind != "move":
        return ""
    src = trace.nodes[node.args[0]]
    if node.via == SHUFFLE:
        if (src.launch, src.block, src.thread) == (holder.launch, holder.block, holder.thread):
            return "its own value back: no lane that far"
        return f"shuffle from lane {source_lane(node.detail, node.offset, holder.thread % 32)}"
    if node.via == SHARED:
        return f"shared slot {node.offset}, stored by t{src.thread}"
    return (f"partials[{node.offset}] in global memory, stored by block {src.block} "
            f"t{src.thread} in launch {src.launch}")


def _combine_line(trace: Trace, node: Node) -> Text:
    a, b = (trace.nodes[i] for i in node.args)
    who = f"t{node.thread}"
    if node.via == ATOMIC:
        line = (f"{who}: out ⊕= {cover_text(b.cover)} with {node.detail} → out holds "
                f"{cover_text(node.cover)}")
    elif a.empty:  # a thread picks up a state, in the combine's own operand order
        line = f"{who}: identity ⊕ {_operand(trace, b, node)}"
    elif b.empty:
        line = f"{who}: {_operand(trace, a, node)} ⊕ identity"
    else:
        line = (f"{who}: {_operand(trace, a, node)} ⊕ {_operand(trace, b, node)}"
                f" → {cover_text(node.cover)}")
    value = value_text(node.value, trace.op)
    text = Text(line + (f" = {value}" if value else ""))
    via = b.via if b.kind == "move" else node.via
    text.stylize(VIA_STYLE.get(via, ""), 0, len(who))
    return text


def _arrival(trace: Trace, node: Node) -> bool:
    """A combine of the result's tree where a thread takes up a loaded state."""
    if node.id not in trace.ancestry or node.via == ATOMIC:
        return False
    a, b = (trace.nodes[i] for i in node.args)
    got = b if a.empty else a if b.empty else None
    return got is not None and not got.empty and (
        got.kind == "element" or (got.kind == "move" and got.via in (GLOBAL, SHARED)))


def _step_title(trace: Trace, joins: list[Node], idle: int) -> str:
    """What moved operands in this step: 'shuffle offset 4', 'shared memory'."""
    paths = []
    for node in joins:
        for arg in node.args:
            m = trace.nodes[arg]
            if node.via == ATOMIC:
                what = "global atomic"
            elif m.kind == "move":
                what = f"shuffle {m.detail} {m.offset}" if m.via == SHUFFLE else m.via
            elif m.kind == "element":
                what = "elements loaded from global memory, folded in registers"
            else:
                continue
            if what not in paths:
                paths.append(what)
    joined = sum(trace.is_join(n) for n in joins)
    count = f"{joined} join{'s' if joined != 1 else ''}"
    return f"{'; '.join(paths)} · {count}" + (f", {idle} idle combines" if idle else "")


def _what(trace: Trace) -> str:
    """What was reduced: the op, or a function and the op whose states it reduces."""
    if trace.function and trace.function != trace.op:
        return f"{trace.function} ({trace.op} states)"
    return trace.op


def tree(trace: Trace, limit: int = 6) -> Tree:
    """The recording as a tree: launches, blocks, steps, and each step's joins.

    A *join* combines two non-empty states of the result's tree (there are n - 1);
    *idle* combines work on the identity or make states the result never used. At
    most ``limit`` lines are listed per step.
    """
    what = _what(trace)
    output = f" · {trace.output}" if trace.output else ""
    root = Tree(Text(f"{trace.strategy} · {what} of {trace.n} {trace.dtype}{output}", "bold"))
    if trace.function and trace.op in STATE_LESSONS:
        root.add(Text(STATE_LESSONS[trace.op], "italic"))
    by_step = defaultdict(lambda: defaultdict(list))  # (launch, block) -> step -> nodes
    for node in trace.nodes:
        if node.kind == "combine":
            by_step[(node.launch, node.block)][node.step].append(node)
    stores = defaultdict(list)
    for tag, launch, block, thread, step, slot in trace.stores:
        stores[(launch, block)].append((step, tag, thread, slot))
    titles = step_titles(trace)
    for number, (name, blocks, threads) in enumerate(trace.launches, 1):
        launch = root.add(Text(f"launch {number}: {name}, {blocks} block(s) × {threads} "
                               "threads", "bold magenta"))
        if not any(l == number for l, _ in by_step) and not any(
                s[1] == number for s in trace.stores):
            launch.add(Text("combines and moves no state", "dim"))
            continue
        for block in range(blocks):
            if trace.output and (number, block) not in by_step and (number, block) \
                    not in stores:
                continue  # a block that did nothing for this output
            branch = launch.add(Text(f"block {block}", "bold"))
            _add_block(trace, branch, by_step.get((number, block), {}),
                       stores.get((number, block), []),
                       trace.barrier_steps.get((number, block), []), threads, limit,
                       titles, (number, block))
    result = trace.nodes[trace.result]
    answer = (f"{value_text(result.value, trace.op)} → {trace.function} {trace.value}"
              if trace.function else f"{trace.value}")
    root.add(Text(f"result {cover_text(result.cover)} = {answer}"
                  f" · every element exactly once: {'yes' if trace.exact_cover else 'NO'}",
                  "bold green" if trace.exact_cover else "bold red"))
    note = rounding_note(trace)
    if note:
        root.add(Text(note, "dim"))
    return root


#: whole-array functions whose float combines round, so their value depends on the
#: order: var and logsumexp always (float states), the others on float input
_ROUNDING = {"var": "biuf", "logsumexp": "biuf", "sum": "f", "prod": "f", "nansum": "f",
             "nanprod": "f"}


def _exact_in_any_order(trace: Trace, function: str) -> bool:
    """A sum or product of integers whose magnitudes' total (product, of each at least
    1) fits the mantissa: every partial result is exact, whatever the order."""
    if function not in ("sum", "nansum", "prod", "nanprod"):
        return False
    xs = [float(n.value[0]) for n in trace.nodes if n.kind == "element"]
    if not all(math.isfinite(v) and v.is_integer() for v in xs):
        return False
    magnitudes = [abs(v) for v in xs]
    total = math.prod(max(v, 1.0) for v in magnitudes) if "prod" in function else \
        sum(magnitudes)
    return total <= 2.0 ** (np.finfo(trace.dtype).nmant + 1)


def rounding_note(trace: Trace) -> str:
    """For a whole-array float result that rounds: the recording's order of combines is
    its own grid's, which the library call does not share, so the values may differ
    in the last bits ("" where the result is exact, or is one output of an axis)."""
    function = trace.function or trace.op
    if trace.output or trace.dtype.kind not in _ROUNDING.get(function, "") or \
            _exact_in_any_order(trace, function):
        return ""
    _, blocks, threads = trace.launches[trace.combining_launches[0] - 1]
    return (f"float rounding: the combines run in the order of the grid recorded here "
            f"({blocks} block(s) × {threads} threads, one element a load); "
            f'numbakern.{function}(x, strategy="{trace.strategy}") runs its own grid, '
            f"more elements a thread, in another order, so its result can round "
            f"differently")


def step_titles(trace: Trace) -> dict:
    """``{(launch, block, recorded step): title}``, the names the text and the figure
    both give a block's rounds: ``"thread reduce"``, ``"step k"`` (numbered as listed,
    counting only rounds whose combines the result was built from), ``"not in the
    result"``, ``"atomic fold"`` or ``"write-out"``."""
    by_step = defaultdict(lambda: defaultdict(list))
    for node in trace.nodes:
        if node.kind == "combine":
            by_step[(node.launch, node.block)][node.step].append(node)
    for tag, launch, block, thread, step, slot in trace.stores:
        by_step[(launch, block)].setdefault(step, [])
    titles = {}
    for (launch, block), steps in by_step.items():
        shown = 0  # the recording counts barriers and shuffles as steps too
        for step in sorted(steps):
            nodes = steps[step]
            shown += step != 0 and _counted(trace, nodes)
            if step == 0:
                title = "thread reduce"
            elif _counted(trace, nodes):
                title = f"step {shown}"
            elif _combining(nodes) and not _folding(nodes):
                title = "not in the result"
            else:  # the table counts these apart: atomics, and stores
                title = "atomic fold" if nodes else "write-out"
            titles[(launch, block, step)] = title
    return titles


def _add_block(trace, branch, steps, stores, barriers, threads, limit, titles=None,
               key=None) -> None:
    barriers = list(barriers)
    for step in sorted(set(steps) | {s for s, *_ in stores}):
        passed = sum(b <= step for b in barriers)
        _add_barriers(branch, passed, threads)
        barriers = barriers[passed:]
        nodes, title = steps.get(step, []), titles[(*key, step)]
        if title == "atomic fold" and _combining(nodes):  # idle combines of the round
            # before the fold, in its step (no barrier between): listed apart
            _add_step(trace, branch, step, "not in the result",
                      [n for n in nodes if n.via != ATOMIC], [], limit)
            nodes = [n for n in nodes if n.via == ATOMIC]
        _add_step(trace, branch, step, title, nodes, [s[1:] for s in stores if s[0] == step],
                  limit)
    _add_barriers(branch, len(barriers), threads)


def _add_barriers(branch, count: int, threads: int) -> None:
    """One line for ``count`` barriers in a row (rounds with nothing of the result
    between them: a scan's down-sweep, a reduce's idle levels)."""
    if count:
        times = f" × {count}" if count > 1 else ""
        branch.add(Text(f"barrier: __syncthreads(){times}, all {threads} threads wait",
                        "yellow"))


def _combining(nodes) -> bool:
    """Whether a step has combines of its own (not only atomics into the output)."""
    return any(n.via != ATOMIC for n in nodes)


def _folding(nodes) -> bool:
    """Whether a step folds into the output by atomics."""
    return any(n.via == ATOMIC for n in nodes)


def _counted(trace: Trace, nodes) -> bool:
    """Whether a round of combines is a step the table counts: one whose combines the
    result was built from (a scan's down-sweep, run by a reduce made of a scan, makes
    states the total never reads)."""
    return any(n.via != ATOMIC and n.id in trace.ancestry for n in nodes)


def _add_step(trace, branch, step, title, nodes, stores, limit) -> None:
    joins = [n for n in nodes if trace.is_join(n) or (n.via == ATOMIC and n.id in trace.ancestry)]
    arrivals = [n for n in nodes if _arrival(trace, n)]
    idle = len(nodes) - len(joins) - len(arrivals)
    if joins:
        node = branch.add(Text(f"{title}: {_step_title(trace, joins, idle)}"))
    elif arrivals:
        node = branch.add(Text(f"{title}: {len(arrivals)} thread(s) combine a loaded "
                               "state with the identity"
                               + (f", {idle} idle combines" if idle else "")))
    elif idle:
        node = branch.add(Text(f"{title}: {idle} idle combines (with the identity, or "
                               "never used)", "dim"))
    else:
        node = branch.add(Text(title))
    lines = sorted(arrivals + joins, key=lambda n: (n.thread, n.id))
    for line in lines[:limit]:
        node.add(_combine_line(trace, line))
    if len(lines) > limit:
        node.add(Text(f"… and {len(lines) - limit} more like these", "dim"))
    written = [(tag, thread, slot) for tag, thread, slot in stores if tag in trace.ancestry]
    if written and title != "write-out":
        node = branch.add(Text("write-out"))  # its own line, not under the step's combines
    for tag, thread, slot in written:
        s = trace.nodes[tag]
        where = f"out[{slot}]" if tag == trace.result else f"partials[{slot}]"
        node.add(Text(f"t{thread}: writes {cover_text(s.cover)} = "
                      f"{value_text(s.value, trace.op)} to {where} in global memory",
                      VIA_STYLE[GLOBAL]))


def counts_table(trace: Trace) -> Table:
    """Per block of each launch: steps, barriers, shuffles, memory traffic, atomics."""
    what = _what(trace)
    output = f" · {trace.output}'s tree" if trace.output else ""
    table = Table(title=f"counts: {trace.strategy}, {what} of {trace.n} {trace.dtype}, "
                        f"{trace.threads} threads per block{output}")
    for col in ("launch/block", "steps", "barriers", "shuffle steps per warp", "joins",
                "combines run", "shared ld/st", "global ld/st", "atomics"):
        table.add_column(col, justify="right", overflow="fold")
    for (launch, block), c in trace.blocks.items():
        warps = ", ".join(f"w{w}: {k}" for w, k in sorted(c.shuffle_steps.items())) or "0"
        table.add_row(
            f"{launch}/{block}", str(c.steps), str(c.barriers), warps, str(c.joins),
            str(c.combines + c.atomics), f"{c.shared_loads}/{c.shared_stores}",
            f"{c.global_element_loads + c.global_state_loads}/{c.global_stores}",
            str(c.atomics) + (f" (+{c.cas_retries} CAS retries)" if c.cas_retries else ""),
        )
    moved = trace.bytes_moved()
    table.caption = (
        f"{len(trace.launches)} launch(es); joins total {_joins(trace)}; combines run: "
        "every combine, the joins and those with the identity (each element a thread "
        "loads is folded onto it: that is a combine too) or on idle lanes; "
        f"bytes: " + ", ".join(f"{k} {v}" for k, v in moved.items())
    )
    return table


def _joins(trace) -> str:
    """The joins a trace made, against the ``n - 1`` that every correct tree of ``n``
    elements has: ``"4 = n - 1"``, or ``"6 ≠ n - 1 = 4"`` for a broken strategy."""
    joins, want = trace.total("joins"), max(trace.n - 1, 0)
    return f"{joins} = n - 1" if joins == want else f"{joins} ≠ n - 1 = {want}"


def outputs_table(trace, limit: int = 6, shown: int = 0) -> Table:
    """A reduction along an axis (an :class:`~numbakern.teach.axis_trace.AxisTrace`):
    each output's elements, whether it covers them exactly once, its value and
    NumPy's; the first ``limit`` rows and output ``shown`` (the tree's), then one
    line for the rest."""
    table = Table(title=f"every output of {trace.launch.op} along axis {trace.axis} of "
                        f"{trace.shape[0]} x {trace.shape[1]} {trace.launch.dtype}")
    for col in ("output", "elements", "each exactly once", "value", "NumPy"):
        table.add_column(col, justify="right")
    rows = sorted(set(range(min(limit, len(trace.outputs)))) | {shown})
    for k in rows:
        output = trace.outputs[k]
        where = f"x[{k}, :]" if trace.axis == 1 else f"x[:, {k}]"
        table.add_row(where, cover_text(output.nodes[output.result].cover),
                      "yes" if output.exact_cover else "NO", str(output.value),
                      str(trace.reference[k]))
    rest = [o for k, o in enumerate(trace.outputs) if k not in rows]
    if rest:
        exact = sum(o.exact_cover for o in rest)
        table.caption = (f"… and {len(rest)} more outputs: {exact} of them each exactly once; "
                         f"all {len(trace.outputs)} agree with NumPy: "
                         f"{'yes' if trace.agrees else 'NO'}")
    else:
        table.caption = f"all agree with NumPy: {'yes' if trace.agrees else 'NO'}"
    return table


# --- the figure ---------------------------------------------------------------------------


def _drawn(trace: Trace, node: Node) -> bool:
    return node.id in trace.ancestry and not node.empty and node.kind in ("element",
                                                                            "combine")


def _source(trace: Trace, i: int) -> tuple[int, str]:
    """The drawn node an operand comes from, and the path of its last hop."""
    node, via = trace.nodes[i], None
    while node.kind == "move":
        via = via or node.via
        node = trace.nodes[node.args[0]]
    return node.id, via or (ELEMENT if node.kind == "element" else REGISTER)


def draw(trace: Trace, path: str) -> None:
    """Draw the result's combine tree to ``path`` (``.png`` or ``.svg``).

    Columns are threads (blocks side by side, those whose threads made the drawn
    states: one output of a reduction along an axis shows its own blocks, not the
    launch's; a last column for the output when atomics fold into it), rows are
    steps, launch after launch. Large circles are joins, small dots combines with the
    identity (a state passing through).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    nodes = [n for n in trace.nodes if _drawn(trace, n)]
    combines = [n for n in nodes if n.kind == "combine"]
    shown = drawn_blocks(trace)
    place = {b: i for i, b in enumerate(shown)}  # a block's column group
    cols = len(shown) * trace.threads
    out_col = cols + 1
    atomics = [n.id for n in combines if n.via == ATOMIC]

    def key(n: Node):  # a row per (launch, step); atomics, one after another, below
        return n.launch, n.step, atomics.index(n.id) + 1 if n.via == ATOMIC else 0

    keys = sorted({key(n) for n in combines})
    row = {k: i + 1 for i, k in enumerate(keys)}  # row 0: the elements

    def xy(n: Node):
        if n.kind == "element":
            (i,) = n.cover
            return (i + 0.5) * cols / trace.n - 0.5, 0
        x = out_col if n.via == ATOMIC else place[n.block] * trace.threads + n.thread
        return x, row[key(n)]

    # at most 14 inches (1120 px at 80 dpi) wide, whatever the threads and blocks
    fig, ax = plt.subplots(figsize=(min(14.0, max(8.0, 0.16 * cols + 3)),
                                    max(4.0, 1.6 + 0.28 * (len(keys) + 1))))
    mark = min(1.0, 120 / max(cols, 1))  # markers shrink as the columns grow
    used = set()
    for n in drawing_order(combines):
        for arg in n.args:
            if trace.nodes[arg].empty:
                continue
            src, via = _source(trace, arg)
            via = ATOMIC if n.via == ATOMIC else via
            (x0, y0), (x1, y1) = xy(trace.nodes[src]), xy(n)
            ax.plot([x0, x1], [y0, y1], color=VIA_COLOUR[via], lw=1.1, alpha=0.85, zorder=1)
            used.add(via)
    for n in nodes:
        x, y = xy(n)
        if n.kind == "element":
            ax.plot(x, y, "s", color="#616161", ms=4 * mark, zorder=2)
        elif trace.is_join(n):
            ax.plot(x, y, "o", color=VIA_COLOUR[ATOMIC if n.via == ATOMIC else REGISTER],
                    ms=5 * mark, zorder=3)
        else:
            ax.plot(x, y, ".", color="#9e9e9e", ms=3 * mark, zorder=2)
    _mark_result(ax, trace, xy, cols)
    _mark_barriers(ax, trace, keys, row, cols)
    _frame(ax, trace, keys, row, shown, out_col)
    handles = [Line2D([], [], color=VIA_COLOUR[v], label=v) for v in VIA_COLOUR if v in used]
    handles += [Line2D([], [], marker="o", ls="", color=VIA_COLOUR[REGISTER], label="join"),
                Line2D([], [], marker=".", ls="", color="#9e9e9e",
                       label="combine with identity")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def drawn_blocks(trace: Trace) -> list[int]:
    """The blocks :func:`draw` gives columns to: those whose threads made a drawn
    state (not an atomic into the output), in order."""
    return sorted({n.block for n in trace.nodes if _drawn(trace, n)
                   and n.kind == "combine" and n.via != ATOMIC}) or [0]


def _mark_result(ax, trace, xy, cols) -> None:
    # where the result was made: it may have reached the output as a move (a total
    # read back from shared memory, as a scan-based block reduce hands it over)
    x, y = xy(trace.nodes[_source(trace, trace.result)[0]])
    ax.plot(x, y, "*", color="gold", ms=14, mec="black", zorder=4)
    left = x > cols / 2  # keep the label inside the axes
    function = f"{trace.function} " if trace.function else ""
    ax.annotate(f"result {cover_text(trace.nodes[trace.result].cover)} = {function}"
                f"{trace.value}",
                (x, y), xytext=(-8 if left else 8, -12), textcoords="offset points",
                fontsize=8, ha="right" if left else "left")


def _mark_barriers(ax, trace, keys, row, cols) -> None:
    """A dashed line where the threads of a block waited at __syncthreads()."""
    seen = set()
    for (launch, _), steps in trace.barrier_steps.items():
        for step in steps:
            after = [row[k] for k in keys if k[0] == launch and k[1] >= step]
            if after and (launch, after[0]) not in seen:
                seen.add((launch, after[0]))
                ax.axhline(after[0] - 0.5, color="#fbc02d", ls="--", lw=0.8, zorder=0)
                ax.text(cols - 0.5, after[0] - 0.5, "__syncthreads()", fontsize=6,
                        color="#f57f17", va="bottom", ha="right")


def row_labels(trace: Trace) -> list[str]:
    """The figure's row labels, top to bottom: ``"elements"``, then ``"launch L ·
    <title>"`` with the titles the text gives (:func:`step_titles`) and ``"atomic k"``
    for the atomics into the output."""
    titles = step_titles(trace)
    drawn = [n for n in trace.nodes if _drawn(trace, n) and n.kind == "combine"]
    atomics = [n.id for n in drawn if n.via == ATOMIC]
    first = {}
    for n in drawn:
        key = (n.launch, n.step, atomics.index(n.id) + 1 if n.via == ATOMIC else 0)
        first.setdefault(key, n)
    return ["elements"] + [
        f"launch {k[0]} · " + (f"atomic {k[2]}" if k[2] else
                               titles.get((k[0], first[k].block, k[1]), f"round {k[1]}"))
        for k in sorted(first)]


def _frame(ax, trace, keys, row, shown, out_col) -> None:
    """Row labels, a column group a block of ``shown`` (their numbers), warp lines."""
    labels = row_labels(trace)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    cols = len(shown) * trace.threads
    ticks = [i * trace.threads + trace.threads / 2 - 0.5 for i in range(len(shown))]
    names = [f"block {b}" for b in shown]
    for b in range(1, len(ticks)):
        ax.axvline(b * trace.threads - 0.5, color="#9e9e9e", lw=0.9, zorder=0)
    if any(k[2] for k in keys):
        ticks, names = ticks + [out_col], names + ["out"]
    ax.set_xticks(ticks, names, fontsize=7)
    for w in range(0, cols + 1, 32):
        ax.axvline(w - 0.5, color="#eeeeee", lw=0.6, zorder=0)
    ax.set_xlim(-1, (out_col if any(k[2] for k in keys) else cols) + 1)
    ax.set_xlabel("thread (columns); a grey line every warp of 32")
    c = trace
    per_block = "/".join(str(v) for v in sorted({b.barriers for b in c.blocks.values()
                                                 if b.combines}))
    combining = ", ".join(str(k) for k in c.combining_launches)
    output = f" · {c.output}" if c.output else ""
    ax.set_title(
        f"{c.strategy}: {_what(c)} of {c.n} {c.dtype}{output}, {len(c.launches)} launch(es), "
        f"combines in launch {combining}, {c.threads} threads per block\n{_joins(c)} joins of "
        f"{c.total('combines') + c.total('atomics')} combines run · {per_block} barrier(s) "
        f"per block · {sum(sum(b.shuffle_steps.values()) for b in c.blocks.values())} warp "
        f"shuffle steps · {c.total('atomics')} atomics", fontsize=9)
    plain_axes(ax)
