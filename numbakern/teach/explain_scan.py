"""Show a recorded scan (a :class:`~numbakern.teach.scan_trace.ScanTrace`).

* :func:`scan_tree`: launch, block, then step by step, which thread combined which
  element ranges and through what; the grid scan's published tile states and
  look-back reads (decoupled look-back) or chunk totals and carries
  (reduce-then-scan), in the order they happened; and the proof line;
* :func:`scan_counts_table` and :func:`work_depth_table`: the counts, and a block
  scan's work and depth measured beside the textbook formulas;
* :func:`draw_scan`: the element ranges of each step's joins, as a figure.

Steps are numbered per block as listed, in the text and the figure alike. Everything
shown is read from the recording.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .explain import VIA_COLOUR, VIA_STYLE, cover_text, value_text
from .figures import drawing_order, plain_axes
from .scan_trace import (LOCAL, NUMPY_SCANS, ROUNDING_SCALE, STATUS_NAMES,
                         BlockScanCounts, ScanTrace, textbook, trace_block_scan)
from .trace import GLOBAL, REGISTER, SHARED, SHUFFLE, Node, source_lane

SCAN_LEGEND = (
    "How to read this: ⊕ is the op, [a-b] the elements a state covers. A tile is "
    "threads × items consecutive elements, loaded coalesced and handed to the threads "
    "through shared memory, so that thread t holds items t·items, t·items + 1, ... "
    "(the first step's operands are those shared slots); each thread first scans its "
    "own items (the thread scan), then the block scan combines the thread totals, then "
    "the carry (everything before the tile) is combined in. Steps are the rounds of "
    "joins of one block, numbered as listed (the figure uses the same numbers); a join "
    "combines two states that both hold elements. In brackets: how each operand "
    "reached the thread (a shared slot and the thread that stored it, a shuffle, a "
    "register). Decoupled look-back: A = a tile's aggregate published, P = its "
    "inclusive prefix published; a look-back lane reads one earlier tile's status."
)
VIA_COLOUR = dict(VIA_COLOUR, **{LOCAL: "#8c564b"})


def _path(trace, node: Node, holder: Node) -> str:
    if node.kind == "element":
        return f"{node.detail}, global load"
    if node.kind != "move":
        return ""
    src = trace.nodes[node.args[0]]
    if node.via == SHUFFLE:
        if (src.launch, src.block, src.thread) == (holder.launch, holder.block, holder.thread):
            if node.detail == "idx":
                return f"shuffle idx {node.offset}: its own lane"
            return f"shuffle {node.detail} {node.offset}: no lane that far, its own value"
        lane = source_lane(node.detail, node.offset, holder.thread % 32)
        return f"shuffle {node.detail} {node.offset} from lane {lane}"
    if node.via in (SHARED, LOCAL):
        where = "shared" if node.via == SHARED else "local"
        return f"{where} slot {node.offset}, stored by t{src.thread}"
    return f"global slot {node.offset}, stored by block {src.block} in launch {src.launch}"


def operand_text(trace, node: Node, holder: Node) -> str:
    """An operand of the join ``holder``: its elements, then in brackets how it reached
    the join's thread (``[4] (shared slot 4, stored by t4)``); just the elements for
    the thread's own state. ``trace``: any recording whose ``nodes`` are
    :class:`~numbakern.teach.trace.Node` (a scan's, a softmax row's)."""
    path = _path(trace, node, holder)
    return cover_text(node.cover) + (f" ({path})" if path else "")


def _join_line(trace: ScanTrace, node: Node) -> Text:
    a, b = (trace.nodes[i] for i in node.args)
    who = f"t{node.thread}"
    line = (f"{who}: {operand_text(trace, a, node)} ⊕ {operand_text(trace, b, node)} → "
            f"{cover_text(node.cover)} = {value_text(node.value)}")
    text = Text(line)
    via = a.via if a.kind == "move" else b.via if b.kind == "move" else REGISTER
    text.stylize(VIA_STYLE.get(via, ""), 0, len(who))
    return text


def used_nodes(trace: ScanTrace) -> frozenset:
    """The nodes some output was built from."""
    return frozenset().union(*(trace.ancestry(r) for r in set(trace.outputs)))


def block_steps(trace: ScanTrace) -> dict:
    """``{(launch, block): {recorded step: [joins]}}``: the joins outputs were built
    from, by round; the steps numbered 1, 2, ... in this order are the listed ones."""
    used = used_nodes(trace)
    steps = defaultdict(lambda: defaultdict(list))
    for i in sorted(used):
        node = trace.nodes[i]
        if trace.is_join(node):
            steps[(node.launch, node.block)][node.step].append(node)
    return steps


def unused_steps(trace: ScanTrace) -> dict:
    """``{(launch, block): {recorded step: [joins]}}``: the joins no output was built
    from (a Blelloch up-sweep's right spine, which only the tile's total holds: a
    later tile's carry, or nothing in the last tile)."""
    used = used_nodes(trace)
    steps = defaultdict(lambda: defaultdict(list))
    for node in trace.nodes:
        if node.id not in used and trace.is_join(node):
            steps[(node.launch, node.block)][node.step].append(node)
    return steps


def _equals(trace: ScanTrace, fn: str) -> str:
    """"equals NumPy's cumsum: yes", exactly; a float sum or product to rounding, with
    the tolerance it was held to and the largest error found."""
    answer = "yes" if trace.matches_numpy else "NO"
    if trace.scale is None:
        return f"equals NumPy's {fn}: {answer}"
    scale = ROUNDING_SCALE[trace.op]
    n_eps = trace.n * float(np.finfo(trace.values.dtype).eps)
    return (f"equals NumPy's {fn} to rounding (|error| ≤ n·eps·{scale}, n·eps = "
            f"{n_eps:.2g}): {answer} (max {trace.max_error:.2g}·{scale})")


def proof_line(trace: ScanTrace) -> Text:
    """Every output covers exactly its prefix, and the outputs equal NumPy's."""
    last = "i - 1" if trace.exclusive else "i"
    ok = trace.exact_cover and trace.matches_numpy
    fn = NUMPY_SCANS[trace.op][0] if trace.op in NUMPY_SCANS else f"{trace.op} accumulate"
    kind = "exclusive" if trace.exclusive else "inclusive"
    bad = [i for i in range(trace.n) if not trace.output_exact(i)]
    line = (f"proof: every output i covers exactly elements 0..{last} ({kind}), each once: "
            + ("yes" if not bad else f"NO (output {bad[0]} covers "
               + cover_text(trace.nodes[trace.outputs[bad[0]]].cover) + ")")
            + f" · {_equals(trace, fn)}")
    shown = ", ".join(value_text((v,)) for v in trace.values[:12])
    line += f" · out = [{shown}{', …' if trace.n > 12 else ''}]"
    return Text(line, "bold green" if ok else "bold red")


def scan_tree(trace: ScanTrace, limit: int = 6) -> Tree:
    """The recording as a tree: launches, blocks, steps and their joins, the grid
    scan's published states, and the proof line. At most ``limit`` lines per step."""
    kind = "exclusive" if trace.exclusive else "inclusive"
    root = Tree(Text(f"{trace.strategy} · {kind} {trace.op} scan of {trace.n} {trace.dtype}"
                     f" · tiles of {trace.threads} threads × {trace.items} items = "
                     f"{trace.tile} elements", "bold"))
    steps, unused = block_steps(trace), unused_steps(trace)
    loads = loaded_by(trace)
    stores = defaultdict(list)
    for s in trace.stores:
        stores[(s.launch, s.block)].append(s)
    events = defaultdict(list)
    for e in trace.atomics:
        events[(e.launch, e.block)].append(e)
    clears = defaultdict(list)
    for c in trace.clears:
        clears[(c[0], c[1])].append(c)
    for number, (name, blocks, threads) in enumerate(trace.launches, 1):
        launch = root.add(Text(f"launch {number}: {name}, {blocks} block(s) × {threads} "
                               "threads", "bold magenta"))
        # the counts, not the joins: a block may combine identities and move them
        # through memory without a single join (a one-element scan)
        if not any(k[0] == number for k in trace.blocks):
            launch.add(Text("combines and moves no state (zeroes the status flags)"
                            if name == "_fill" else "combines and moves no state", "dim"))
            continue
        for block in range(blocks):
            key = (number, block)
            branch = launch.add(Text(f"block {block}", "bold"))
            items = _grid_events(trace, events.get(key, []))
            if key in trace.blocks and not steps.get(key) and not unused.get(key):
                items.append((-1, 0, _joinless_line(trace, key, loads.get(key, set())), []))
            items += _block_steps(trace, steps.get(key, {}), clears.get(key, []),
                                  trace.barrier_steps.get(key, []), limit,
                                  loads.get(key, set()), unused.get(key, {}))
            for s in stores.get(key, []):
                node = trace.nodes[s.node]
                items.append((s.step, 2, Text(
                    f"t{s.thread}: writes {cover_text(node.cover)} = {value_text(node.value)}"
                    f" to {s.array}[{s.index}] in global memory" + _store_role(s.array),
                    VIA_STYLE[GLOBAL]), []))
            for _, _, title, children in sorted(items, key=lambda it: it[:2]):
                node = branch.add(title)
                for child in children:
                    node.add(child)
    root.add(proof_line(trace))
    return root


def _joinless_line(trace: ScanTrace, key: tuple, loaded) -> Text:
    """What a block without a join did, in the counts table's numbers: every combine it
    ran had the identity as an operand (a combine of two states holding elements is a
    join), and its states still went through barriers and memory."""
    c = trace.blocks[key]
    cells = _memory_cells(trace, key)
    got = f"{len(loaded)} input element{'s' * (len(loaded) != 1)}" if loaded \
        else "no input element"
    moved = [f"{name} {cells[name]}" for name in ("shared ld/st", "local ld/st", "global ld/st")
             if name != "local ld/st" or any(trace.local.get(key, [0, 0]))]
    rounds = f"{c.barriers} barrier(s)"
    if c.shuffle_steps:
        rounds += f", shuffle steps per warp {cells['warps']}"
    return Text(f"no joins (it loaded {got}): {c.combines} combines ran, each with the "
                f"identity, {rounds} · " + " · ".join(moved), "dim")


def _memory_cells(trace: ScanTrace, key: tuple) -> dict:
    """Block ``key``'s counts table cells: ``shared ld/st``, ``local ld/st``, ``global
    ld/st`` (loads/stores) and ``warps`` (each warp's shuffle steps, or ``0``)."""
    c, local = trace.blocks[key], trace.local.get(key, [0, 0])
    return {"shared ld/st": f"{c.shared_loads - local[0]}/{c.shared_stores - local[1]}",
            "local ld/st": f"{local[0]}/{local[1]}",
            "global ld/st": f"{c.global_element_loads + c.global_state_loads}/"
                            f"{c.global_stores}",
            "warps": ", ".join(f"w{w}: {k}" for w, k in sorted(c.shuffle_steps.items()))
            or "0"}


def _store_role(array: str) -> str:
    """What reduce-then-scan's global arrays hold, from its kernels' parameter names."""
    if array.startswith("tot"):
        return " (the chunk's total)"
    if array.startswith("car"):
        return " (the chunk's carry: everything before it)"
    return ""


def loaded_by(trace: ScanTrace) -> dict:
    """``{(launch, block): elements it loaded from the input}``."""
    got = defaultdict(set)
    for node in trace.nodes:
        if node.kind == "element":
            got[(node.launch, node.block)] |= node.cover
    return got


def _reads_back(trace: ScanTrace, clear, joins) -> bool:
    """Whether ``joins`` read the shared array ``clear`` stored the identity into and
    were stored back into it."""
    return any(clear[5] in trace.stored_in.get(j.id, ()) and any(
        trace.nodes[a].detail == f"array@{clear[5]}" for a in j.args) for j in joins)


def root_clear(trace: ScanTrace, clear) -> bool:
    """Whether an identity store begins a down-sweep (Blelloch's root cleared): after
    a barrier that follows it, combines (with the identity or not) read that array and
    are stored back into it. An identity stored in the same round as the combines that
    read it is an exclusive scan's shift (the first output's prefix is the identity),
    not a sweep."""
    launch, block = clear[0], clear[1]
    barriers = [b for b in trace.barrier_steps.get((launch, block), []) if b > clear[3]]
    if not barriers:
        return False
    later = [n for n in trace.nodes if n.kind == "combine" and n.launch == launch
             and n.block == block and n.step >= barriers[0]]
    return _reads_back(trace, clear, later)


def step_phase(trace: ScanTrace, step: int, joins, clears, loaded, steps: dict) -> str:
    """A step's phase, from what its joins read and where they went: ``"carry-in"``
    (a join holds elements this block did not load), ``"down-sweep"`` (after a
    barrier that followed a root clear, joins that read that array and are stored
    back into it: :func:`root_clear`), ``"exclusive shift"`` (joins in the round an
    identity was stored as the first prefix, reading that array), or ``""``."""
    if any(not j.cover <= loaded for j in joins):
        return "carry-in"
    for c in clears:
        if c[3] <= step and _reads_back(trace, c, joins):
            return "down-sweep" if root_clear(trace, c) and c[3] < step \
                else "exclusive shift"
    return ""


def _block_steps(trace, steps, clears, barriers, limit, loaded, unused) -> list:
    """``[(step, order, title, lines)]``: the block's steps, numbered as listed, and
    the identity stores that begin a down-sweep or shift an exclusive scan; the joins
    no output was built from (``unused``, :func:`unused_steps`) dimmed in their
    rounds, which are not numbered where they hold nothing else."""
    items = []
    for c in clears:
        if root_clear(trace, c):
            what = "(clears the root): the down-sweep begins"
        else:
            what = "(the first exclusive prefix): the exclusive shift"
        items.append((c[3], 1, Text(f"t{c[2]}: stores the identity to shared slot {c[4]} "
                                    + what, "yellow"), []))
    shown = 0
    for step in sorted(set(steps) | set(unused)):
        joins, idle = steps.get(step, []), unused.get(step, [])
        covers = {j.cover for j in joins}
        repeats = sum(j.cover in covers for j in idle)  # the same ranges again
        idle = [j for j in idle if j.cover not in covers]
        sync = sum(1 for b in barriers if b <= step)
        lines = [_join_line(trace, j) for j in sorted(joins, key=lambda n: (n.thread, n.id))]
        lines += [Text.assemble(_join_line(trace, j), " · in no output", style="dim")
                  for j in sorted(idle, key=lambda n: (n.thread, n.id))]
        if len(lines) > limit:
            lines = lines[:limit] + [Text(f"… and {len(lines) - limit} more like these", "dim")]
        aside = (f" and {len(idle)} in no output" if idle else "") + \
            (f" (and {repeats} repeat(s) of these, in no output)" if repeats else "")
        if joins:
            shown += 1
            phase = step_phase(trace, step, joins, clears, loaded, steps)
            phase = f" ({phase})" if phase else ""
            title = Text(f"step {shown}{phase}: {len(joins)} join(s){aside}, after {sync} "
                         "barrier(s)")
        else:
            title = Text(f"{len(idle)} join(s) in no output (the tile's total only), after "
                         f"{sync} barrier(s)", "dim")
        items.append((step, 0, title, lines))
    return items


def _grid_events(trace: ScanTrace, events) -> list:
    """Decoupled look-back's atomics in one block, as ``[(step, order, title, lines)]``:
    what it published, what its look-back lanes read (the status, then the value's tag
    from the value arrays)."""
    items = []
    last_status = {}
    reads = []
    for e in events:
        if e.name == "exch" and e.array == "st":
            status = STATUS_NAMES.get(e.args[-1], str(e.args[-1]))
            node = trace.nodes[published(trace, status, e.index)]
            what = "aggregate" if status == "A" else "inclusive prefix"
            items.append((e.step, 1, Text(
                f"t{e.thread}: publishes tile {e.index}: status {status} ({what}) "
                f"{cover_text(node.cover)} = {value_text(node.value)}", "red"), []))
        elif e.name == "or_" and e.array == "st":
            last_status[e.thread] = (e.index, STATUS_NAMES.get(e.old, str(e.old)))
        elif e.name == "or_" and e.array in ("v1", "w1"):
            tile, status = last_status.get(e.thread, (e.index, "?"))
            node = trace.nodes[e.old] if 0 <= e.old < len(trace.nodes) else trace.nodes[0]
            reads.append((e.step, Text(f"lane {e.thread % 32} reads tile {tile}: {status} "
                                       f"{cover_text(node.cover)} = {value_text(node.value)}")))
    if reads:
        items.append((reads[0][0], 1, Text(
            f"look-back: {len(reads)} read(s) of earlier tiles' status words (atomic or_ "
            "of 0)", "red"), [r for _, r in reads]))
    return items


def published(trace: ScanTrace, status: str, tile: int) -> int:
    """The node a tile published with ``status`` (``"A"``: the aggregates' tag array
    ``v1``, ``"P"``: the inclusive prefixes' ``w1``; decoupled look-back's kernel
    parameters, never overwritten once published)."""
    table = "v1" if status == "A" else "w1"
    return int(trace.arrays[table][tile]) if table in trace.arrays else 0


def tile_states_table(trace: ScanTrace) -> Table | None:
    """Decoupled look-back's tile states over time: every publish and look-back read,
    in the order the atomics ran; ``None`` for a scan without status words."""
    rows = []
    last_status = {}
    for e in trace.atomics:
        if e.array != "st" and e.array not in ("v1", "w1"):
            continue
        if e.name == "exch":
            status = STATUS_NAMES.get(e.args[-1], str(e.args[-1]))
            node = trace.nodes[published(trace, status, e.index)]
            rows.append((str(len(rows) + 1), f"block {e.block}", f"tile {e.index} publishes",
                         status, cover_text(node.cover), value_text(node.value)))
        elif e.name == "or_" and e.array == "st":
            last_status[(e.block, e.thread)] = (e.index, STATUS_NAMES.get(e.old, str(e.old)))
        elif e.name == "or_":
            tile, status = last_status.get((e.block, e.thread), (e.index, "?"))
            node = trace.nodes[e.old] if 0 <= e.old < len(trace.nodes) else trace.nodes[0]
            rows.append((str(len(rows) + 1), f"block {e.block} lane {e.thread % 32}",
                         f"reads tile {tile}", status, cover_text(node.cover),
                         value_text(node.value)))
    if not rows:
        return None
    table = Table(title=f"tile states over time: {trace.strategy}")
    for col in ("#", "who", "what", "status", "covers", "value"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    table.caption = "A: aggregate (the tile alone), P: inclusive prefix (tiles 0..k)"
    return table


def scan_counts_table(trace: ScanTrace) -> Table:
    """Per block of each launch: steps, barriers, shuffles, joins, memory, atomics."""
    table = Table(title=f"counts: {trace.strategy}, {trace.op} scan of {trace.n} "
                        f"{trace.dtype}, {trace.threads} threads per block")
    for col in ("launch/block", "steps", "barriers", "shuffle steps per warp", "joins",
                "combines run", "shared ld/st", "local ld/st", "global ld/st", "atomics"):
        table.add_column(col, justify="right", overflow="fold")
    steps = block_steps(trace)
    for (launch, block), c in trace.blocks.items():
        joins = steps.get((launch, block), {})
        cells = _memory_cells(trace, (launch, block))
        table.add_row(
            f"{launch}/{block}", str(len(joins)), str(c.barriers), cells["warps"],
            str(sum(len(v) for v in joins.values())), str(c.combines),
            cells["shared ld/st"], cells["local ld/st"], cells["global ld/st"],
            str(c.atomics))
    moved = trace.bytes_moved()
    table.caption = (f"{len(trace.launches)} launch(es); {trace.joins()} joins; bytes: "
                     + ", ".join(f"{k} {v}" for k, v in moved.items()))
    return table


def block_of(strategy: str) -> str:
    """The block strategy's name in a ``"grid/block"`` label."""
    return strategy.split("/")[-1]


def work_depth_table(counts: BlockScanCounts) -> Table:
    """A block scan's measured work and depth beside the textbook's and the exact
    formulas (:func:`~numbakern.teach.scan_trace.textbook`)."""
    f = textbook(counts.strategy, counts.threads)
    table = Table(title=f"work and depth: {counts.strategy} block scan of p = "
                        f"{counts.threads} threads (one element each, recorded alone)")
    for col in ("", "measured", "exact for this code", "textbook"):
        table.add_column(col, overflow="fold")
    measured = getattr(counts, f.counted)
    exact = "" if f.work is None else f"{f.exact_work_text} = {f.work}"
    table.add_row(f"work ({'joins' if f.counted == 'joins' else 'combines'})", str(measured),
                  exact, f.work_text)
    exact = "" if f.depth is None else f"{f.exact_depth_text} = {f.depth}"
    table.add_row("depth (joins on the longest path)", str(counts.depth), exact, f.depth_text)
    table.add_row("barriers / shuffle steps", f"{counts.barriers} / {counts.shuffle_steps}",
                  "", "")
    table.caption = (f"{counts.combines} combines run in all (idle lanes included); every "
                     f"thread's result covers exactly 0..t: {'yes' if counts.exact else 'NO'}")
    return table


def block_counts(trace: ScanTrace) -> BlockScanCounts:
    """The work and depth recording of the trace's block strategy at its threads."""
    return trace_block_scan(block_of(trace.strategy), trace.threads)


# --- the figure ---------------------------------------------------------------------------


def _last_hop(trace: ScanTrace, node: Node) -> str:
    for i in node.args:
        a = trace.nodes[i]
        if a.kind == "move":
            return a.via
    return REGISTER


def draw_scan(trace: ScanTrace, path: str) -> None:
    """Draw each step's joins as the element ranges they produce (``.png``/``.svg``).

    One row per (launch, block, step), numbered as :func:`scan_tree` numbers them; a
    bar spans the elements a join's result covers (threads top to bottom within the
    row), coloured by how its operand arrived; the last row shows what each output
    covers (green: exactly its prefix).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    steps = block_steps(trace)
    rows = []
    for (launch, block) in sorted(steps):
        for k, step in enumerate(sorted(steps[(launch, block)]), 1):
            rows.append(((launch, block, k), steps[(launch, block)][step]))
    height = max(3.0, 1.4 + 0.22 * (len(rows) + 1))
    width = min(14.0, max(7.0, 0.09 * trace.n + 4))
    fig, ax = plt.subplots(figsize=(width, min(height, 40.0)))
    used = set()
    for y, (_, joins) in enumerate(rows):
        for j in drawing_order(joins):  # a thin bar a join, staggered by thread in the row
            lo, hi = min(j.cover), max(j.cover)
            via = _last_hop(trace, j)
            used.add(via)
            dy = (j.thread / trace.threads) * 0.8 - 0.4
            ax.plot([lo - 0.4, hi + 0.4], [y + dy] * 2, color=VIA_COLOUR.get(via, "#424242"),
                    lw=0.9, solid_capstyle="butt")
    y = len(rows)
    for i, r in enumerate(trace.outputs):
        cover = trace.nodes[r].cover
        ok = trace.output_exact(i)
        if cover:
            ax.plot([min(cover) - 0.4, max(cover) + 0.4],
                    [y - 0.4 + i / max(trace.n, 1) * 0.8] * 2,
                    color="#2ca02c" if ok else "#d62728", lw=0.8)
    labels = [f"launch {l} · block {b} · step {k}" for (l, b, k), _ in rows] + ["outputs"]
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    for t in range(0, trace.n + 1, trace.tile):
        ax.axvline(t - 0.5, color="#bbbbbb", lw=0.6, ls="--", zorder=0)
    ax.set_xlim(-1, trace.n)
    ax.set_xlabel(f"element (dashed: tiles of {trace.tile})")
    handles = [Line2D([], [], color=VIA_COLOUR[v], lw=3, label=v) for v in VIA_COLOUR
               if v in used]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)
    kind = "exclusive" if trace.exclusive else "inclusive"
    ax.set_title(f"{trace.strategy}: {kind} {trace.op} scan of {trace.n} {trace.dtype}, "
                 f"{len(trace.launches)} launch(es), {trace.threads} threads per block\n"
                 f"{trace.joins()} joins · {trace.total('barriers')} barriers · "
                 f"{sum(sum(c.shuffle_steps.values()) for c in trace.blocks.values())} warp "
                 f"shuffle steps · {len(trace.atomics)} atomics · exact: "
                 f"{'yes' if trace.exact_cover and trace.matches_numpy else 'NO'}", fontsize=9)
    plain_axes(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


__all__ = ["SCAN_LEGEND", "block_counts", "block_steps", "draw_scan", "operand_text",
           "proof_line", "scan_counts_table", "scan_tree", "tile_states_table",
           "work_depth_table"]
