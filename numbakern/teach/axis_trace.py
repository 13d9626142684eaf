"""Record a reduction along one axis of a 2-D input: every output's own combine tree.

``numbakern.sum(x, axis=1)`` gives each row to a run of lanes or a block (the *row*
kernel), ``numbakern.sum(x, axis=0)`` gives each column to a thread, a group of threads
walking the rows beside the others and meeting in shared memory (the *column* kernel;
``numbakern/kernels/axis_reduce.py``). :func:`trace_axis_reduce` runs those kernels
under the simulator with :mod:`numbakern.teach.trace`'s tracing kit, as
:func:`~numbakern.teach.trace.trace_reduce` runs the whole-array one, and cuts the
recording into one :class:`~numbakern.teach.trace.Trace` per output: the states that
output was built from, renumbered, so ``explain``'s tree and figure show one output's
reduction, and the proof (its elements exactly once) is made for every output.

The elements are recorded with their index along the reduced axis (the kernels
compute it for argmax: the layout is built with ``track_index``), so an output's
states cover ``0 .. n-1`` of its row or column; the element nodes are named
``x[k, i]`` or ``x[i, k]``.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from numba import cuda

from numbakern import ops as _ops
from numbakern.core.arrays import Workspace
from numbakern.core.jobs import ReduceJob
from numbakern.core.layout import reduce_layout
from numbakern.kernels.axis_reduce import AxisReduce, row_vector_width
from numbakern.ops.state import state_kit

from . import trace as _trace
from .trace import (ARG_OPS, ATOMIC, GLOBAL, IDENTITY, REGISTER, SHARED, SHUFFLE, BlockCounts,
                    Trace, TraceError)


@dataclass
class AxisTrace:
    """A reduction along ``axis`` of a 2-D input of ``shape``, recorded.

    Attributes:
        shape, axis: the input's shape and the reduced axis (0 or 1).
        layout: what the planner chose, in words: the kernel (row or column), its
            threads, blocks, pieces an output is split into, and lanes (threads a
            row, or threads a column's group), or ``"tiny rows"``.
        outputs: one :class:`~numbakern.teach.trace.Trace` per output, in C order:
            the states that output was built from (renumbered; node 0 the identity).
        launch: the whole recording as one Trace (its ancestry every output's), whose
            counts the table shows: joins total ``outputs x (n - 1)``.
        reference: NumPy's answer, one value per output.
    """

    shape: tuple
    axis: int
    layout: str
    outputs: list
    launch: Trace
    reference: np.ndarray

    @property
    def exact(self) -> bool:
        """Every output covers each of its elements once, and equals NumPy's."""
        return all(t.exact_cover for t in self.outputs) and self.agrees

    @property
    def agrees(self) -> bool:
        """Every output equals NumPy's: exactly for integers and bools; for floats
        within ``n`` ulps of the result dtype (the tree adds in another order than
        NumPy's pairwise sum)."""
        values = np.array([t.value for t in self.outputs])
        if values.dtype.kind != "f":
            return bool(np.array_equal(values, self.reference))
        n = self.shape[self.axis]
        return bool(np.allclose(values, self.reference, rtol=n * np.finfo(values.dtype).eps,
                                atol=0, equal_nan=True))

    def summary(self) -> dict:
        """The launch's counts (every output together) and each output's value beside
        NumPy's, JSON-ready."""
        return {**self.launch.summary(), "shape": list(self.shape), "axis": self.axis,
                "layout": self.layout, "exact_cover": self.exact,
                "values": [t.value.item() for t in self.outputs],
                "numpy": self.reference.tolist()}


def trace_axis_reduce(x, axis: int, op="sum", strategy="two_pass/warp_shuffle", *,
                      threads: int = 32, blocks: int | None = 2) -> AxisTrace:
    """Reduce ``axis`` of the 2-D ``x`` with the real kernels under the simulator,
    recording every combine, and cut the recording into each output's tree.

    Args:
        x: a 2-D NumPy array, small (a few thousand elements: every thread is an OS
            thread and every combine a record).
        axis: 0 (columns: the column kernel) or 1 (rows: the row kernel); -1 and -2
            count from the end.
        op: a built-in one-field op's name, a one-field :class:`numbakern.Op`, or
            ``"argmax"``/``"argmin"`` (their ``(value, index)`` pairs recorded, each
            output's value the index; two_pass strategies only).
        strategy: a ``"grid/block"`` name (``threads`` and ``blocks`` shape it).

    Returns:
        an :class:`AxisTrace`.

    Raises:
        TraceError: not under the simulator, or the recording contradicts itself.
        ValueError, TypeError: a bad ``x``, ``axis``, op, strategy or dtype.
    """
    _trace.require_simulator()
    x = np.asarray(x)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"x must be a non-empty 2-D array, got shape {x.shape}")
    if isinstance(axis, bool) or axis not in (0, 1, -1, -2):
        raise ValueError(f"axis must be 0 or 1 (or -1, -2) for a 2-D x, got {axis!r}")
    axis %= 2
    arg = ARG_OPS.get(op) if isinstance(op, str) else None
    op = arg or _ops.get(op)
    if op.fields != 1 and not arg:
        raise ValueError(f"tracing along an axis takes one-field ops (sum, max, ...) and "
                         f"{', '.join(ARG_OPS)}; {op.name} has {op.fields} fields")
    op.check_dtype(x.dtype)
    grid = _trace.resolve_grid(strategy, threads, blocks) if isinstance(strategy, str) \
        else strategy
    if grid.commutative_required and not op.commutative:
        raise ValueError(f"strategy {grid.label} needs a commutative op; {op.name} is not")
    if arg and grid.label.startswith("atomic_fold"):
        raise ValueError(f"explain records {op.name} under two_pass strategies: atomic_fold "
                         "folds its (value, index) pairs packed into one word or under a "
                         "lock, not with an atomic the recording can follow")
    result = _ops.INDEX_DTYPE if arg else op.result_dtype(x.dtype, None)
    real = state_kit(op, (_ops.accumulator_dtype(x.dtype), _ops.INDEX_DTYPE) if arg else
                     (_ops.accumulator_dtype(result),))
    kit = _trace.tracing_kit(op, real.dtypes)
    workspace = Workspace("numpy", cuda.default_stream())
    layout = reduce_layout(cuda.to_device(np.ascontiguousarray(x)), (axis,), kit,
                           not op.commutative, None, True, workspace.stream)
    rec = _trace._Recorder()
    with _trace.recording(rec):
        fields = kit.unpack(grid.reduce(ReduceJob(layout, op, kit, workspace)))
    values = fields[-1].copy_to_host().astype(result)  # an arg op's answer: its index
    roots = [_root(rec, fields[0], k) for k in range(values.size)]
    kept = [_kept(rec, r) for r in roots]
    launch = _trace._finish(rec, grid, op, x, x.shape[axis], roots[0], values[0], real,
                            op.name if arg else "", ancestry=set().union(*kept))
    launch.output = f"all {values.size} outputs"
    first = rec.launches[launch.combining_launches[0] - 1]  # not atomic_fold's fill
    launch.threads = first[2]  # the planner's block, not the strategy's
    starts = [_first_steps(rec, k) for k in kept]
    shares = _barrier_shares(launch.barrier_steps, starts)
    plan = layout.plan(grid.block, blocks)  # as the grid strategy planned the run
    vector = _vector_loads(layout, plan)
    outputs = [_output(launch, rec, k, r, v, o, axis, shares[o], starts[o], vector)
               for o, (k, r, v) in enumerate(zip(kept, roots, values))]
    words = _layout_words(layout, plan, grid, blocks, first, values.size)
    return AxisTrace(x.shape, axis, words, outputs, launch, _reference(op, x, axis, result))


def _root(rec, out, k: int) -> int:
    """The node output ``k`` of the device array ``out`` holds."""
    address, _ = _trace._address(out._ary, k)
    if address not in rec.memory:
        raise TraceError(f"output {k} holds no recorded state")
    return rec.memory[address]


def _kept(rec, root: int) -> list:
    """The ids of the nodes an output was built from, the identity first, in recording
    order (operands before what they make)."""
    return sorted(_trace._ancestry(rec.nodes, root) | {IDENTITY})


def _first_steps(rec, kept: list) -> dict:
    """``{(launch, block): step}``: the first step of each block at which it made a
    state of these nodes (``kept``, the identity first)."""
    first = {}
    for old in kept[1:]:
        node = rec.nodes[old]
        key = (node.launch, node.block)
        first[key] = min(first.get(key, node.step), node.step)
    return first


def _output(launch: Trace, rec, kept: list, root: int, value, k: int, axis: int,
            barriers: dict, first: dict, vector) -> Trace:
    """Output ``k``'s own Trace: the nodes ``kept`` renumbered, its elements named by
    their place in x and the 16-byte load that brought them (``vector``:
    :func:`_vector_loads`), ``barriers`` its share of its blocks' (:func:`_barrier_shares`).
    Steps count from the output's ``first`` in each block (:func:`_first_steps`: a
    block's later rows start where its earlier ones ended), so its thread reduce is
    step 0, as a whole array's."""
    number = {old: new for new, old in enumerate(kept)}
    nodes = [_renumbered(rec.nodes[old], number, k, axis, first, vector) for old in kept]
    stores = [(number[tag], launch_, block, thread, step - first.get((launch_, block), 0),
               slot) for tag, launch_, block, thread, step, slot in rec.stores
              if tag in number]
    trace = dataclasses.replace(
        launch, nodes=nodes, result=number[root], value=value, blocks={}, stores=stores,
        barrier_steps={key: [b - first[key] for b in steps] for key, steps in barriers.items()},
        ancestry=frozenset(number.values()),
        output=f"output {k} = x[{k}, :]" if axis == 1 else f"output {k} = x[:, {k}]")
    trace.blocks = _counts(trace)
    return trace


def _counts(trace: Trace) -> dict:
    """``{(launch, block): BlockCounts}`` of one output's own work, read off its nodes
    (the recorder counts a block's work for every output it walked)."""
    counts = defaultdict(BlockCounts)
    steps, stored = defaultdict(set), set()
    for node in trace.nodes[1:]:
        if not node.launch:  # made on the host (an output's initial value): no block's
            continue
        c = counts[(node.launch, node.block)]
        if node.kind == "element":
            c.global_element_loads += 1
        elif node.kind == "move" and node.via == SHUFFLE:
            steps[(node.launch, node.block, "shuffle", node.thread // 32)].add(node.step)
        elif node.kind == "move":
            c.shared_loads += node.via == SHARED
            c.global_state_loads += node.via == GLOBAL
            source = trace.nodes[node.args[0]]
            if node.via == SHARED and source.launch and source.id not in stored:
                stored.add(source.id)  # stored once, in its maker's block
                counts[(source.launch, source.block)].shared_stores += 1
        elif node.kind == "combine":
            c.atomics += node.via == ATOMIC
            c.combines += node.via != ATOMIC
            c.joins += trace.is_join(node)
            if node.via == REGISTER and node.step > 0:
                steps[(node.launch, node.block)].add(node.step)
    for tag, launch, block, *_ in trace.stores:
        counts[(launch, block)].global_stores += 1
    for (launch, block), c in counts.items():
        c.barriers = len(trace.barrier_steps.get((launch, block), []))
        c.steps = len(steps[(launch, block)])
        c.shuffle_steps = {key[3]: len(s) for key, s in steps.items()
                           if key[:3] == (launch, block, "shuffle")}
    return dict(sorted(counts.items()))


def _barrier_shares(barrier_steps: dict, firsts: list) -> list:
    """Each output's share of its blocks' barriers (``firsts``: each output's
    :func:`_first_steps`): a block walks its outputs one after another (the row
    kernel) or side by side (the column kernel), and its threads' steps only grow, so
    an output owns the barriers from its first step to the first step of the block's
    next outputs (the barrier after a row, before its shared memory is reused,
    included); outputs side by side share theirs."""
    starts = defaultdict(dict)  # (launch, block) -> output -> its first step there
    for o, first in enumerate(firsts):
        for key, step in first.items():
            starts[key][o] = step
    shares = [{} for _ in firsts]
    for key, first in starts.items():
        begins = sorted(set(first.values()))
        for o, start in first.items():
            end = next((b for b in begins if b > start), float("inf"))
            shares[o][key] = [b for b in barrier_steps.get(key, []) if start < b <= end]
    return shares


def _renumbered(node, number: dict, k: int, axis: int, first: dict, vector):
    detail = node.detail
    if node.kind == "element":
        i = next(iter(node.cover))
        detail = f"x[{k}, {i}]" if axis == 1 else f"x[{i}, {k}]"
        loaded = vector(k, i)
        if loaded:  # (bytes, lo, hi): x's elements lo..hi-1 along its rows, one load
            size, lo, hi = loaded
            run = f"x[{k}, {lo}:{hi}]" if axis == 1 else f"x[{i}, {lo}:{hi}]"
            detail += f" in {'an' if size == 8 else 'a'} {size}-byte load of {run}"
    step = node.step - first.get((node.launch, node.block), 0)
    return dataclasses.replace(node, id=number[node.id], step=step, detail=detail,
                               args=tuple(number[a] for a in node.args))


def _vector_loads(layout, plan):
    """``vector(k, i)``: ``(bytes, lo, hi)`` when element ``i`` of output ``k`` came in
    one vector load of x's elements ``lo .. hi - 1`` along its rows, else None (a load
    of its own), as the planner laid the kernel out: tiny rows (a row a load), the
    column kernel (a thread's ``plan.width`` adjacent outputs a load) and the row
    kernel (whole 16-byte vectors of an aligned row inside a piece,
    ``vector_row_reducer``; the elements outside them one at a time); ``plan``: the
    layout's."""
    if not isinstance(layout, AxisReduce):
        n, size = layout.count, layout.av.view.dtype.itemsize
        return lambda k, i: (n * size, 0, n)
    size = layout.dtype.itemsize
    if plan.kernel == "column":
        w = plan.width
        return lambda k, i: (w * size, k - k % w, k - k % w + w) if w > 1 else None
    w = row_vector_width(layout.av, layout.dtype, layout.ordered) \
        if layout.mask is None else 0

    def vector(k, i):
        start = i // plan.chunk * plan.chunk
        stop, lo = min(start + plan.chunk, layout.count), i - i % w if w else 0
        return (w * size, lo, lo + w) if w and start <= lo and lo + w <= stop else None

    return vector


def _layout_words(layout, plan, grid, blocks, first: tuple, outputs: int) -> str:
    """The planner's choice for this layout (its ``plan``), as ``explain`` prints it
    (``first``: the recording's first combining launch, ``(kernel, blocks,
    threads)``; ``outputs``: how many the array has)."""
    if not isinstance(layout, AxisReduce):  # TinyRows: rows of one vector each
        name, grid_blocks, threads = first
        row = layout.width * layout.av.view.dtype.itemsize
        return (f"{name}: {grid_blocks} block(s) x {threads} threads, a thread and one "
                f"{row}-byte load a row (rows of one aligned vector, back to back: no "
                f"threads combine, no block strategy)")
    if plan.kernel == "row":
        who = f"{plan.lanes} threads a row, combined by the block strategy"
    else:  # plan.lanes: the outputs side by side in a block (vectors of them, width > 1)
        groups = plan.threads // plan.lanes
        width = f" ({plan.width} adjacent outputs a thread)" if plan.width > 1 else ""
        room = plan.lanes * plan.width
        held = f"{room} outputs" if room <= outputs else \
            f"room for {room} outputs ({outputs} here)"
        who = f"{held} side by side{width}, " + (
            "one thread an output, folding its elements in turn" if groups == 1 else
            f"{groups} threads an output, its i-th taking elements i, i + {groups}, ...; "
            "their states meet in shared memory (the column kernel's own combine: no "
            "block strategy)")
    pieces = (f"; each output cut into {plan.pieces} pieces of {plan.chunk} elements, "
              f"combined by {grid.label.split('/')[0]}") if plan.pieces > 1 else ""
    asked = f" (--blocks {blocks}: more than the outputs fill)" \
        if blocks is not None and plan.blocks < blocks else ""
    return (f"{plan.kernel} kernel: {plan.blocks} block(s){asked} x {plan.threads} threads, "
            f"{who}{pieces}")


def _reference(op, x, axis: int, result) -> np.ndarray:
    """NumPy's answer for a built-in op: its function (``np.sum``, ``np.argmax``,
    ...) or, for the bitwise ops, its ufunc's ``reduce``."""
    name = op.name
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        return getattr(np, name).reduce(x, axis=axis).astype(result)
    if hasattr(np, name):
        return np.asarray(getattr(np, name)(x, axis=axis)).astype(result)
    raise ValueError(f"explain along an axis checks built-in ops against NumPy; "
                     f"{name} has no NumPy function")
