"""Record a scan by running the real scan kernels under the simulator.

:func:`trace_scan` runs a grid scan strategy (``decoupled_lookback/*``,
``reduce_then_scan/*``) on a :class:`~numbakern.core.jobs.ScanJob`, as
``numbakern.cumsum(x, strategy=..., layout="tiles")`` does, with the op's state kit
swapped for a *tracing kit*, as :func:`~numbakern.teach.trace.trace_reduce` does. The
difference: here the node tag is a **second field of the state** (int64), so it
travels wherever the kernels move a state, through the paths that bypass the kit too:
the output storer writes it to a second output array (so each output names the node
it holds), and decoupled look-back's status words carry it beside the value (so each
look-back read names the node it found). The kernels therefore run the path of
two-field states: for decoupled look-back, a status array beside value arrays (the
path of multi-field states; ``cumsum``'s one-field states travel with their status in
one 64-bit word, 4-byte states, or a 16-byte pair of words, 8-byte states, which have
no room for a tag).

Combines, shuffles, shared/local/global loads and stores, barriers, atomics and
launches are recorded as in :mod:`numbakern.teach.trace`; atomics are kept as events
(which array, which slot, what they returned), named by the kernel's own parameter
names, and global stores by the array they went to.

:func:`trace_block_scan` runs one block strategy's ``build_scan`` alone (one element
per thread) to measure its work and depth.
"""

from __future__ import annotations

import inspect
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.core.arrays import Workspace, as_array_like
from numbakern.core.jobs import ScanJob
from numbakern.ops.state import StateKit, state_kit
from numbakern.runtime.cache import cached

from . import trace as _trace
from .trace import GLOBAL, IDENTITY, SHARED, Node, TraceError, _Recorder

LOCAL = "local memory"

#: decoupled look-back's tile statuses, as its status words hold them
STATUS_NAMES = {0: "X", 1: "A", 2: "P"}
#: the float scans that round, by op: what an output's error grows with (the tree adds
#: in another order than NumPy's running scan), as the proof line names it
ROUNDING_SCALE = {"sum": "Σ|x| so far", "nansum": "Σ|x| so far", "prod": "|NumPy's|",
                  "nanprod": "|NumPy's|"}


@dataclass
class AtomicEvent:
    """One atomic, in the order they ran: ``cuda.atomic.<name>(array[index], *args)``
    returned ``old``; ``array`` is the kernel's parameter name (``"st"``)."""

    seq: int
    launch: int
    block: int
    thread: int
    name: str
    array: str
    index: int
    args: tuple
    old: int
    step: int = 0  # the thread's barriers and shuffles before it


@dataclass
class GlobalStore:
    """A state a thread wrote through the kit to a global array (``array``: the
    kernel's parameter name, ``index``: the flat slot)."""

    node: int
    launch: int
    block: int
    thread: int
    step: int
    array: str
    index: int


@dataclass
class ScanTrace:
    """A recorded scan.

    Attributes:
        strategy: the grid strategy's label (``"decoupled_lookback/blelloch"``).
        op, n, dtype, threads, items: the scan's op, size, input dtype, threads per
            block and items per thread (a tile is ``threads * items`` elements).
        exclusive: an exclusive scan.
        launches: ``[(kernel name, blocks, threads)]``.
        nodes: every state (``nodes[0]`` is the identity).
        outputs: the node each output element holds.
        values: the outputs, as NumPy values.
        blocks: ``{(launch, block): BlockCounts}`` (``shared_*`` include local memory;
            ``local_loads``/``local_stores`` in :attr:`local`; ``global_stores``
            counts the outputs a block wrote as well as the states in :attr:`stores`).
        local: ``{(launch, block): [loads, stores]}`` of local memory.
        barrier_steps: ``{(launch, block): [step after each barrier]}``.
        atomics: :class:`AtomicEvent` list, in order.
        stores: :class:`GlobalStore` list, in order.
        clears: ``[(launch, block, thread, step, slot, array address)]``: the identity
            stored to a shared slot (Blelloch's root, cleared between the sweeps).
        stored_in: ``{node id: {addresses of the shared arrays it was stored to}}``.
        arrays: ``{parameter name: final NumPy contents}`` of the launches' arrays.
        state_bytes, element_bytes, output_bytes: of one real state, one input
            element and one output (the result dtype's: a float16 scan's 2, its
            float32 state's 4).
        expected: NumPy's scan (None for an op NumPy has no scan of).
        scale: for a float scan that rounds (:data:`ROUNDING_SCALE`), what each
            output's error grows with; None where outputs must equal NumPy's exactly.
    """

    strategy: str
    op: str
    n: int
    dtype: np.dtype
    threads: int
    items: int
    exclusive: bool
    launches: list
    nodes: list
    outputs: list
    values: np.ndarray
    blocks: dict
    local: dict
    barrier_steps: dict
    atomics: list
    stores: list
    clears: list
    stored_in: dict
    arrays: dict
    state_bytes: int
    element_bytes: int
    expected: np.ndarray = None
    scale: np.ndarray = None
    output_bytes: int = 0
    _anc: dict = field(default_factory=dict, repr=False)

    @property
    def tile(self) -> int:
        return self.threads * self.items

    def ancestry(self, root: int) -> frozenset:
        """Every node output state ``root`` was built from."""
        if root not in self._anc:
            self._anc[root] = frozenset(_trace._ancestry(self.nodes, root))
        return self._anc[root]

    def wanted(self, i: int) -> frozenset:
        """The elements output ``i`` must cover: ``0..i`` (exclusive: ``0..i-1``)."""
        return frozenset(range(i if self.exclusive else i + 1))

    def output_exact(self, i: int) -> bool:
        """Output ``i`` covers exactly the elements it must, none of them twice."""
        root = self.outputs[i]
        if self.nodes[root].cover != self.wanted(i):
            return False
        return not any(self.nodes[a].overlap for a in self.ancestry(root))

    @property
    def exact_cover(self) -> bool:
        """Every output covers exactly its prefix, each element once."""
        return all(self.output_exact(i) for i in range(self.n))

    @property
    def tolerance(self) -> np.ndarray | None:
        """The allowed ``|out - NumPy's|`` of each output: ``n·eps·scale`` (either order
        of ``n`` adds or multiplies is within ``(n - 1)·eps/2`` of the exact value, a
        first-order bound), 0 where the scale is not finite; None: exactly equal."""
        if self.scale is None:
            return None
        eps = float(np.finfo(self.values.dtype).eps)
        return self.n * eps * np.where(np.isfinite(self.scale), self.scale, 0.0)

    def _errors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(same, |out - NumPy's|)``: outputs equal to NumPy's (NaN to NaN), and the
        differences in float64."""
        got, want = self.values.astype(np.float64), self.expected.astype(np.float64)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, an unequal output
            return same, np.abs(got - want)

    @property
    def max_error(self) -> float:
        """The largest ``|out - NumPy's|`` as a multiple of the output's scale (0 for a
        scan compared exactly that equals NumPy's)."""
        if self.scale is None or self.expected is None:
            return 0.0
        same, err = self._errors()
        tiny = float(np.finfo(self.values.dtype).tiny)
        with np.errstate(invalid="ignore"):  # inf / inf: NaN, an unequal output
            return float(np.max(np.where(same, 0.0, err / np.maximum(self.scale, tiny))))

    @property
    def matches_numpy(self) -> bool:
        """The outputs equal NumPy's: within :attr:`tolerance` for a float scan that
        rounds, else exactly (NaN equal to NaN)."""
        if self.expected is None:
            return False
        if self.scale is None:
            return np.array_equal(self.values, self.expected,
                                  equal_nan=self.values.dtype.kind == "f")
        same, err = self._errors()
        return bool(np.all(same | (err <= self.tolerance)))

    def total(self, name: str) -> int:
        return sum(getattr(c, name) for c in self.blocks.values())

    def is_join(self, node: Node) -> bool:
        """A combine of two states that both hold elements."""
        return node.kind == "combine" and not any(self.nodes[a].empty for a in node.args)

    def joins(self) -> int:
        """Joins some output was built from."""
        used = set().union(*(self.ancestry(r) for r in set(self.outputs)))
        return sum(self.is_join(self.nodes[i]) for i in used)

    def bytes_moved(self) -> dict:
        """Bytes through each level of the memory hierarchy (real state sizes: the tag
        field is not counted)."""
        sb = self.state_bytes
        local = [sum(v[k] for v in self.local.values()) for k in (0, 1)]
        return {
            "global read": self.total("global_element_loads") * self.element_bytes
            + self.total("global_state_loads") * sb,
            "global written": len(self.stores) * sb
            + (self.total("global_stores") - len(self.stores)) * self.output_bytes,
            "shared read": (self.total("shared_loads") - local[0]) * sb,
            "shared written": (self.total("shared_stores") - local[1]) * sb,
            "shuffled": sum(sum(c.shuffle_steps.values()) for c in self.blocks.values())
            * 32 * sb,
        }

    def summary(self) -> dict:
        """The counts, as plain numbers (JSON-ready)."""
        return {
            "strategy": self.strategy, "family": "scan", "op": self.op, "n": self.n,
            "dtype": str(self.dtype), "threads": self.threads, "items": self.items,
            "exclusive": self.exclusive, "launches": len(self.launches),
            "blocks": [b for _, b, _ in self.launches],
            "barriers": self.total("barriers"),
            "shuffle_steps": sum(sum(c.shuffle_steps.values()) for c in self.blocks.values()),
            "combines": self.total("combines"), "joins": self.joins(),
            "atomics": len(self.atomics), "bytes": self.bytes_moved(),
            "exact_cover": self.exact_cover, "matches_numpy": self.matches_numpy,
        }


class _ScanRecorder(_Recorder):
    """A :class:`~numbakern.teach.trace._Recorder` whose states carry their tag, and
    which keeps atomics and global stores as events."""

    atomics = ("add", "max", "min", "and_", "or_", "xor", "cas", "exch")

    def __init__(self):
        super().__init__()
        self.events: list[AtomicEvent] = []
        self.global_stores: list[GlobalStore] = []
        self.regions: list = []  # (start, end, name, device array)
        self.local_ids: set = set()
        self.local_keep: list = []
        self.local_counts: dict = defaultdict(lambda: [0, 0])
        self.stored_in: dict = {}  # node id -> addresses of the shared arrays it went to
        self.clears: list = []  # identity stored to shared: (launch, block, thread, step, slot)

    def on_launch(self, kernel, args) -> None:
        super().on_launch(kernel, args)
        names = list(inspect.signature(kernel.fn).parameters)
        for name, arg in zip(names, args):
            ary = getattr(arg, "_ary", None)
            if isinstance(ary, np.ndarray):
                start = ary.__array_interface__["data"][0]
                self.regions.append((start, start + max(ary.nbytes, 1), name, arg))

    def name_of(self, arr, i) -> tuple[str, int]:
        """A global array's parameter name and the slot's flat index in it."""
        address, _ = _trace._address(arr, i)
        for start, end, name, dev in reversed(self.regions):
            if start <= address < end:
                return name, (address - start) // dev._ary.itemsize
        return "?", int(i)

    def where(self):
        return self._where()

    def node_tag(self, tag) -> int:
        tag = int(tag)
        if not 0 <= tag < len(self.nodes):
            raise TraceError(f"a state carries tag {tag}, which no recorded node has: the "
                             "kernel read memory nothing in this run wrote")
        return tag

    def store_tagged(self, arr, i, tag) -> None:
        tag = self.node_tag(tag)
        address, shared = _trace._address(arr, i)
        launch, block, thread = self._where()
        with self.lock:
            self.current[(launch, block, thread)] = tag
            c = self._block()
            if shared:
                c.shared_stores += 1
                if id(arr) in self.local_ids:
                    self.local_counts[(launch, block)][1] += 1
                else:
                    base = address - int(i) * arr.strides[0]
                    self.stored_in.setdefault(tag, set()).add(base)
                    if tag == IDENTITY:
                        self.clears.append((launch, block, thread,
                                            self.sync[(launch, block, thread)], int(i), base))
            else:
                c.global_stores += 1
                name, index = self.name_of(arr, i)
                self.global_stores.append(GlobalStore(
                    tag, launch, block, thread, self.sync[(launch, block, thread)], name,
                    index))

    def store_output(self) -> None:
        """The calling thread wrote one output: a global store of its block (the
        kernels write outputs with plain stores, which the kit never sees)."""
        with self.lock:
            self._block().global_stores += 1

    def load_tagged(self, arr, i, tag, value) -> int:
        tag = self.node_tag(tag)
        address, shared = _trace._address(arr, i)
        local = shared and id(arr) in self.local_ids
        with self.lock:
            c = self._block()
            if shared:
                c.shared_loads += 1
                if local:
                    self.local_counts[(self._where()[0], self._where()[1])][0] += 1
            else:
                c.global_state_loads += 1
        via = LOCAL if local else SHARED if shared else GLOBAL
        base = address - int(i) * (arr.strides[0] if shared else 0)
        return self._new("move", self.nodes[tag].cover, value, via=via, args=(tag,),
                         offset=int(i), detail=f"array@{base}" if shared else "")

    def on_atomic(self, name, arr, index, args, old) -> None:
        launch, block, thread = self._where()
        what, slot = self.name_of(arr, index)
        with self.lock:
            self.counts[(launch, block)].atomics += 1
            self.events.append(AtomicEvent(len(self.events), launch, block, thread, name,
                                           what, slot, tuple(int(a) for a in args),
                                           int(old), self.sync[(launch, block, thread)]))


def _rec() -> _ScanRecorder:
    rec = _trace._ACTIVE
    if not isinstance(rec, _ScanRecorder):
        raise TraceError("a scan tracing kernel ran outside trace_scan")
    return rec


def scan_tracing_kit(op, dtypes) -> StateKit:
    """The op's real one-field :class:`StateKit` with an int64 node tag as a second
    field: states are ``(value, tag)``, and memory holds the tag beside the value."""
    key = ("scan-trace-kit", op, tuple(np.dtype(d).str for d in dtypes))
    return cached(key, lambda: _build_scan_tracing_kit(op, dtypes))


def _build_scan_tracing_kit(op, dtypes) -> StateKit:
    real = state_kit(op, dtypes)
    tags = state_kit(_ops.SUM, (np.dtype(np.int64),))

    @cuda.jit(device=True)
    def identity():
        return real.identity() + (_rec().identity(),)

    @cuda.jit(device=True)
    def combine(a, b):
        c = real.combine(a[:1], b[:1])
        return c + (_rec().combine(a[1], b[1], c),)

    def shuffle(real_shfl, tag_shfl, kind):
        @cuda.jit(device=True)
        def shfl(s, delta):
            v = real_shfl(s[:1], delta)
            got = tag_shfl((s[1],), delta)[0]
            return v + (_rec().shuffle(kind, delta, got),)

        return shfl

    @cuda.jit(device=True)
    def store(a0, a1, i, s):
        real.store(a0, a0, i, s[:1])
        a1[i] = s[1]
        _rec().store_tagged(a0, i, s[1])

    @cuda.jit(device=True)
    def load(a0, a1, i):
        s = real.load(a0, a0, i)
        return s + (_rec().load_tagged(a0, i, a1[i], s),)

    @cuda.jit(device=True)
    def to_state(v, i):
        s = real.to_state(v, i)
        return s + (_rec().element(i, s),)

    return StateKit(
        (real.dtypes[0], np.dtype(np.int64)), identity, combine,
        shuffle(real.shfl_down, tags.shfl_down, "down"),
        shuffle(real.shfl_up, tags.shfl_up, "up"),
        shuffle(real.shfl_idx, tags.shfl_idx, "idx"),
        store, load, to_state, real.identity_values + (np.int64(IDENTITY),),
    )


class _TracedScanJob(ScanJob):
    """A :class:`ScanJob` whose output storer also reports each output written to the
    recorder, so that the blocks' global stores count the outputs."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        # a kernel cached for an unreported storer must not be reused
        self.key = self.key + ("outputs reported",)

    def output_storer(self):
        real = super().output_storer()

        @cuda.jit(device=True)
        def store(row0, row1, j, s):
            real(row0, row1, j, s)
            _rec().store_output()

        return store


def _watch_local(rec: _ScanRecorder):
    """``(class, name, replacement)``: ``cuda.local.array`` wrapped so that loads and
    stores to local arrays are told apart from shared ones (both are NumPy arrays
    under the simulator)."""
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDALocal.array

    def array(self, shape, dtype):
        a = original(self, shape, dtype)
        with rec.lock:  # kept alive for the run, so that no other array reuses its id
            rec.local_keep.append(a)
            rec.local_ids.add(id(a))
        return a

    return kernelapi.FakeCUDALocal, "array", array


def resolve_scan(strategy: str, threads: int = 32, blocks: int | None = None,
                 items: int | None = None):
    """A grid scan strategy from its ``"grid/block"`` name, with the given shape
    (``blocks``: reduce-then-scan's chunk target; decoupled look-back takes none)."""
    base = _strategies.resolve("scan", strategy, threads=threads)
    block = type(base.block)(threads)
    if base.name == "reduce_then_scan":
        return type(base)(block=block, blocks=blocks, items=items)
    return type(base)(block=block, items=items)


def trace_scan(x, strategy="decoupled_lookback/warp_shuffle", *, op="sum",
               threads: int = 32, blocks: int | None = 2, items: int | None = None,
               exclusive: bool = False) -> ScanTrace:
    """Scan ``x`` with the real tile kernels under the simulator, recording every state.

    Args:
        x: a 1-D NumPy array or list (scanned flat); keep it small (up to a few
            thousand elements).
        strategy: a ``"grid/block"`` scan name (``numbakern.strategies.available("scan")``)
            or a :class:`GridScan` (then ``threads``, ``blocks``, ``items`` are ignored).
        op: a one-field op (``"sum"``, ``"max"``, ...).
        threads: threads per block, a multiple of 32.
        blocks: reduce-then-scan's chunk target (blocks of passes 1 and 3).
        items: items per thread (``None``: the simulator's 2).
        exclusive: an exclusive scan.

    Returns:
        a :class:`ScanTrace`; its ``expected`` is NumPy's (``np.cumsum`` for sum,
        ``np.nancumsum``/``nancumprod`` for nansum/nanprod, the accumulated ``x != 0``
        for any, all and count_nonzero, else ``np.<ufunc>.accumulate``).

    Raises:
        TraceError: not under the simulator, or the recording contradicts itself.
        ValueError, TypeError: a bad strategy, op, dtype or shape.
    """
    _trace.require_simulator()
    op = _ops.get(op)
    if op.fields != 1:
        raise ValueError(f"op: tracing takes one-field ops (sum, max, ...); {op.name} has two")
    grid = strategy if not isinstance(strategy, str) else resolve_scan(
        strategy, threads, blocks, items)
    if getattr(grid, "family", None) != "scan":
        raise TypeError(f"strategy must be a scan strategy, got {strategy!r}")
    x = np.asarray(as_array_like(x))
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    if x.size == 0:
        raise ValueError("x must hold at least one element to trace")
    op.check_dtype(x.dtype)
    result = np.dtype(op.result_dtype(x.dtype, None))
    acc = _ops.accumulator_dtype(result)
    kit = scan_tracing_kit(op, (acc,))
    workspace = Workspace("numpy", cuda.default_stream())
    n = x.size
    xv = cuda.to_device(np.ascontiguousarray(x).reshape(1, 1, n))
    outs = (cuda.device_array((1, 1, n), result), cuda.device_array((1, 1, n), np.int64))
    empty = np.asarray(op.empty if not isinstance(op.empty, str) else
                       kit.identity_values[0]).astype(acc)[()]
    job = _TracedScanJob(xv, outs, op, kit, bool(exclusive), False,
                         (empty, np.int64(IDENTITY)), workspace)
    rec = _ScanRecorder()
    with _trace.recording(rec, [_watch_local(rec)]):
        grid.scan(job)
    values = outs[0].copy_to_host().reshape(n)
    tags = [rec.node_tag(t) for t in outs[1].copy_to_host().reshape(n)]
    arrays = {}
    for _, _, name, dev in rec.regions:
        arrays.setdefault(name, np.array(dev._ary))
    real = state_kit(op, (acc,))
    expected = _numpy_scan(op, x, result, bool(exclusive))
    return ScanTrace(
        strategy=grid.label, op=op.name, n=n, dtype=np.dtype(x.dtype),
        threads=grid.block.threads, items=grid.tile_items(job),
        exclusive=bool(exclusive), launches=rec.launches, nodes=rec.nodes, outputs=tags,
        values=values, blocks=dict(sorted(rec.counts.items())),
        local={k: list(v) for k, v in rec.local_counts.items()},
        barrier_steps={k: sorted(v) for k, v in rec.barrier_steps.items()},
        atomics=rec.events, stores=rec.global_stores, clears=rec.clears, stored_in=rec.stored_in,
        arrays=arrays,
        state_bytes=sum(d.itemsize for d in real.dtypes),
        element_bytes=np.dtype(x.dtype).itemsize,
        output_bytes=result.itemsize,
        expected=expected,
        scale=_rounding_scale(op.name, x, expected, result, bool(exclusive)),
    )


def _rounding_scale(op: str, x, expected, result, exclusive: bool):
    """What each output's rounding error grows with (:data:`ROUNDING_SCALE`): the
    running sum of ``|x|`` (a sum), ``|NumPy's|`` (a product); None for integer and
    bool results and the ops that do not round (max, min, bitwise, counts)."""
    if op not in ROUNDING_SCALE or expected is None or np.dtype(result).kind != "f":
        return None
    if op in ("prod", "nanprod"):
        return np.abs(expected.astype(np.float64))
    magnitudes = np.abs(x.astype(np.float64))
    running = np.cumsum(np.where(np.isnan(magnitudes), 0.0, magnitudes))
    return np.concatenate([[0.0], running[:-1]]) if exclusive else running


def _accumulate(ufunc):
    return lambda x, result: ufunc.accumulate(x.astype(result))


#: NumPy's inclusive scan of each op: the name the proof line gives it, and the scan
#: of ``x`` in the result dtype
NUMPY_SCANS = {
    "sum": ("cumsum", lambda x, result: np.cumsum(x, dtype=result)),
    "prod": ("cumprod", lambda x, result: np.cumprod(x, dtype=result)),
    "nansum": ("nancumsum", lambda x, result: np.nancumsum(x, dtype=result)),
    "nanprod": ("nancumprod", lambda x, result: np.nancumprod(x, dtype=result)),
    "max": ("maximum.accumulate", _accumulate(np.maximum)),
    "min": ("minimum.accumulate", _accumulate(np.minimum)),
    "any": ("logical_or.accumulate of x != 0",
            lambda x, result: np.logical_or.accumulate(x != 0)),
    "all": ("logical_and.accumulate of x != 0",
            lambda x, result: np.logical_and.accumulate(x != 0)),
    "count_nonzero": ("cumsum of x != 0", lambda x, result: np.cumsum(x != 0, dtype=result)),
    "bitwise_and": ("bitwise_and.accumulate", _accumulate(np.bitwise_and)),
    "bitwise_or": ("bitwise_or.accumulate", _accumulate(np.bitwise_or)),
    "bitwise_xor": ("bitwise_xor.accumulate", _accumulate(np.bitwise_xor)),
}


def _numpy_scan(op, x, result, exclusive):
    """NumPy's scan of ``x`` (inclusive, or shifted with the op's empty value), or
    ``None`` for an op NumPy has no scan of (a user's op)."""
    if op.name not in NUMPY_SCANS:
        return None
    inc = NUMPY_SCANS[op.name][1](x, result).astype(result)
    if not exclusive:
        return inc
    first = op.empty if not isinstance(op.empty, str) else op.identity(result)
    return np.concatenate([np.asarray([first], result), inc[:-1]]).astype(result)


# --- one block scan alone: work and depth ------------------------------------------------


@dataclass
class BlockScanCounts:
    """Work and depth of one block strategy's ``build_scan`` on ``threads`` states.

    Attributes:
        strategy, threads: the block strategy's name, ``p``.
        work: combines of two non-empty states with no element in common, used or
            not (what the textbooks count as the work).
        joins: those some thread's inclusive result was built from.
        combines: every combine run, the identity's and idle lanes' included.
        depth: rounds of joins on the longest path to a result (the depth).
        steps: distinct rounds (barrier and shuffle counts) that hold joins.
        barriers, shuffle_steps: of the block.
        exact: every thread's inclusive result covers exactly ``0..t``.
    """

    strategy: str
    threads: int
    work: int
    joins: int
    combines: int
    depth: int
    steps: int
    barriers: int
    shuffle_steps: int
    exact: bool


@dataclass(frozen=True)
class Formula:
    """A block scan's work and depth as the textbooks state them, and the exact counts
    the code must make for ``p`` threads (``None`` where no closed form is exact)."""

    work_text: str  # the textbook's work
    depth_text: str  # the textbook's depth
    exact_work_text: str  # what the code's combines must come to
    work: int | None
    exact_depth_text: str
    depth: int | None
    counted: str = "work"  # the BlockScanCounts field ``work`` is compared with


def textbook(strategy: str, p: int) -> Formula:
    """Work (combines run) and depth (joins on the longest path to a result) of a
    block scan of ``p`` threads, ``p`` a power of two:

    * Hillis-Steele (Hillis and Steele, CACM 1986): step ``d = 1, 2, 4, ...`` has the
      threads ``t >= d`` combine: ``p log2 p - (p - 1)`` combines (O(p log p) work),
      depth ``log2 p``;
    * Blelloch (Blelloch, "Prefix sums and their applications", 1990): up-sweep
      ``p - 1`` combines, down-sweep ``p - 1`` less the left spine's ``log2 p`` (it
      adds nothing), one more per thread ``t > 0`` for the inclusive result:
      ``3(p - 1) - log2 p`` (the textbook's ``2(p - 1)`` is the two sweeps); depth
      ``2 log2 p - 1`` (the sweeps' ``2 log2 p`` rounds, less the root's up-sweep
      combine and the down-sweep's first round, which no result uses, plus the
      inclusive combine);
    * warp_shuffle (Kogge-Stone in each warp, Kogge and Stone 1973): joins
      ``(p/32)(32·5 - 31)`` within the warps and ``p - 32`` carry-ins from warp 0 for
      ``p = 64`` (exact for ``p`` 32 and 64), depth ``5`` in a warp, ``+1`` with the
      carry-in.

    Any other strategy (a user's): empty columns, no formula claimed.
    """
    lg = int(math.log2(p))
    if p & (p - 1) or strategy not in ("hillis_steele", "blelloch", "warp_shuffle"):
        return Formula("", "", "", None, "", None)  # no closed form known to be exact
    if strategy == "hillis_steele":
        v = p * lg - (p - 1)
        return Formula("p·log2 p", "log2 p", "p·log2 p − (p − 1)", v, "log2 p", lg)
    if strategy == "blelloch":
        return Formula("2(p − 1)", "2·log2 p", "3(p − 1) − log2 p", 3 * (p - 1) - lg,
                       "2·log2 p − 1", 2 * lg - 1)
    exact = p in (32, 64)
    return Formula("p·log2 32 per warp", "log2 32 = 5 per warp",
                   "(p/32)(32·5 − 31) + (p − 32) joins",
                   (p // 32) * 129 + (p - 32) if exact else None,
                   "5, +1 across warps where p > 32", 5 + (p > 32) if exact else None,
                   "joins")


def trace_block_scan(block: str, threads: int = 32) -> BlockScanCounts:
    """Run ``block``'s ``build_scan`` alone on ``threads`` one-element states
    (element ``t`` in thread ``t``, value 1) and count its work and depth.

    Raises:
        ValueError: ``block`` has no block scan (or is unknown), ``threads`` bad.
        TraceError: not under the simulator.
    """
    _trace.require_simulator()
    strat = _strategies.resolve("block", block, threads=threads, argument="block")
    if not strat.has_scan:
        raise ValueError(f"block: {block!r} has no block scan")
    op = _ops.SUM
    kit = scan_tracing_kit(op, (np.dtype(np.int64),))
    scan = strat.build_scan(kit)
    slots = max(1, strat.temp_slots())
    from numba import int64

    @cuda.jit
    def block_scan_kernel(x, out0, out1):
        t0 = cuda.shared.array(slots, int64)
        t1 = cuda.shared.array(slots, int64)
        t = cuda.threadIdx.x
        s = kit.to_state(x[t], t)
        inc, exc, total = scan(s, t0, t1)
        out0[t] = inc[0]
        out1[t] = inc[1]

    rec = _ScanRecorder()
    x = cuda.to_device(np.ones(threads, np.int64))
    out0, out1 = cuda.device_array(threads, np.int64), cuda.device_array(threads, np.int64)
    with _trace.recording(rec):
        block_scan_kernel[1, threads](x, out0, out1)
    roots = [rec.node_tag(t) for t in out1.copy_to_host()]
    nodes = rec.nodes
    used = set().union(*(_trace._ancestry(nodes, r) for r in roots))
    joins = [nodes[i] for i in used if nodes[i].kind == "combine"
             and not any(nodes[a].empty for a in nodes[i].args)]
    depth = _depth(nodes, roots)
    exact = all(nodes[r].cover == frozenset(range(t + 1)) for t, r in enumerate(roots)) \
        and not any(nodes[i].overlap for i in used)
    c = rec.counts[(1, 0)]
    work = sum(1 for n in nodes if n.kind == "combine" and not n.overlap
               and not any(nodes[a].empty for a in n.args))
    return BlockScanCounts(strat.name, threads, work, len(joins), c.combines, depth,
                           len({n.step for n in joins}), c.barriers,
                           sum(c.shuffle_steps.values()), exact)


def _depth(nodes, roots) -> int:
    """Joins on the longest path from an element to a result (operands are always
    older nodes, so one pass in id order suffices)."""
    used = sorted(set().union(*(_trace._ancestry(nodes, r) for r in roots)))
    depth = {}
    for j in used:
        n = nodes[j]
        below = max((depth[a] for a in n.args), default=0)
        depth[j] = below + (n.kind == "combine" and not any(nodes[a].empty for a in n.args))
    return max(depth[r] for r in roots)
