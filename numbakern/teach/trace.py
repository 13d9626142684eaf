"""Record how a strategy combines, by running the real reduction under the simulator.

``numbakern explain`` answers "which thread combined which elements, through what?"
from a recording, never from a description of the algorithm: :func:`trace_reduce`
runs the very kernels ``numbakern.sum`` runs (the grid strategy's ``reduce``, the
kernel builder, the block strategy's device functions) with two things swapped:

* the op's :class:`~numbakern.ops.state.StateKit` is wrapped by a *tracing kit*. A
  state travels as the real fields plus one more, a **tag**: the id of a
  :class:`Node` in the recording. ``combine`` calls the real combine and records
  which nodes it joined; ``shfl_*`` call the real shuffles and shuffle the tag
  beside the value (with the real shuffle, so it arrives from the lane the value
  came from); ``store``/``load`` call the real ones and keep the tag of each
  memory slot in a side table keyed by the slot's address;
* the element loader is wrapped the same way: element ``i`` becomes a node
  covering ``{i}``.

Each node knows the set of elements it covers, so the recording proves, rather than
assumes, that the result covers every element exactly once. Barriers, atomics and
launches are counted by wrapping the simulator's ``syncthreads``, atomic functions
and kernel launch for the duration of the run (and only then), so the strategy's
code is not touched.

Only Numba's CUDA simulator runs kernels as Python, so only it can be watched:
:func:`trace_reduce` raises :class:`TraceError` on a GPU backend.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.core.arrays import Workspace, as_array_like
from numbakern.core.jobs import ReduceJob
from numbakern.core.layout import flat_view
from numbakern.kernels.flat_reduce import FlatReduce
from numbakern.ops.state import StateKit, state_kit
from numbakern.runtime.cache import cached
from numbakern.runtime.device import SIMULATOR
from numbakern.strategies.online_softmax import ONLINE_SOFTMAX

IDENTITY = 0  # node id of "the op's identity": covers no element

# How an operand reached the thread that combined it.
ELEMENT = "global load"  # an input element, read by the thread that folds it
REGISTER = "register"  # the thread's own running state
SHUFFLE = "shuffle"  # a lane's register, through shfl_*_sync
SHARED = "shared memory"
GLOBAL = "global memory"  # a state written to device memory (a partial)
ATOMIC = "global atomic"


def source_lane(kind: str, delta: int, lane: int) -> int:
    """The lane whose register ``shfl_<kind>_sync`` by ``delta`` reads into ``lane``
    (``kind``: ``"down"``, ``"up"`` or ``"idx"``), CUDA's rule for a full warp: the
    lane itself where none lies that far. Told from the shuffle, not from the node
    received: a value a lane loaded was made by whichever thread stored it."""
    if kind == "idx":
        return delta % 32
    other = lane + delta if kind == "down" else lane - delta
    return other if 0 <= other < 32 else lane


class TraceError(RuntimeError):
    """The trace cannot be taken (no simulator), or the recording is inconsistent."""


@dataclass
class Node:
    """One state that existed during the run.

    Attributes:
        id: index in :attr:`Trace.nodes`.
        kind: ``"identity"``, ``"element"``, ``"combine"``, ``"move"`` (a state that
            reached a thread through a shuffle or memory) or ``"initial"`` (an
            output's starting value, written by the host).
        cover: the input elements the state combines.
        value: the real state's fields.
        launch, block, thread: where it was created (launch counts from 1).
        step: the creating thread's count of synchronising operations (barriers and
            shuffles) so far: states with equal steps were made in the same round.
        via: for ``"move"``, the path (:data:`SHUFFLE`, :data:`SHARED`,
            :data:`GLOBAL`); for ``"combine"``, :data:`REGISTER` or :data:`ATOMIC`.
        args: operand node ids (combine: ``(a, b)``; move: ``(source,)``).
        detail: the element (``"x[3]"``), the shuffle (``"down"``, ``"up"``, ``"idx"``)
            or the atomic (``"cuda.atomic.add"``).
        offset: a shuffle's ``delta`` (``idx``: source lane), or the slot a load read.
        overlap: a combine whose operands share an element (counted twice).
    """

    id: int
    kind: str
    cover: frozenset
    value: tuple
    launch: int = 0
    block: int = -1
    thread: int = -1
    step: int = 0
    via: str = ""
    args: tuple = ()
    detail: str = ""
    offset: int = -1
    overlap: bool = False

    @property
    def empty(self) -> bool:
        return not self.cover


@dataclass
class BlockCounts:
    """What one block of one launch did (all threads together)."""

    barriers: int = 0
    shuffle_steps: dict = field(default_factory=dict)  # warp -> shuffles lane-wise
    combines: int = 0  # every combine the kit ran, idle ones too
    joins: int = 0  # combines of the result's tree that joined two non-empty states
    steps: int = 0  # rounds of the block reduce (steps > 0 holding the result's combines)
    shared_loads: int = 0
    shared_stores: int = 0
    global_element_loads: int = 0
    global_state_loads: int = 0
    global_stores: int = 0
    atomics: int = 0
    cas_retries: int = 0


@dataclass
class Trace:
    """A recorded reduction: the nodes, the result, and the counts.

    Attributes:
        strategy: the strategy's label (``"two_pass/warp_shuffle"``).
        op: the op's name.
        n, dtype: the input's size and dtype.
        threads: threads per block.
        launches: ``[(kernel name, blocks, threads)]`` in launch order.
        nodes: every state (``nodes[0]`` is the identity).
        result: id of the node the output holds.
        value: the result as the public functions return it.
        blocks: ``{(launch, block): BlockCounts}``.
        state_bytes, element_bytes: bytes of one state and of one input element.
        ancestry: ids of the nodes the result was built from.
        barrier_steps: ``{(launch, block): [step after each barrier]}``.
        stores: ``[(node id, launch, block, thread, step, slot)]``: states written to
            global memory (partials and outputs).
    """

    strategy: str
    op: str
    n: int
    dtype: np.dtype
    threads: int
    launches: list
    nodes: list
    result: int
    value: object
    blocks: dict
    state_bytes: int
    element_bytes: int
    ancestry: frozenset = frozenset()
    barrier_steps: dict = field(default_factory=dict)
    stores: list = field(default_factory=list)
    function: str = ""  # the public function a state op's value is (STATE_OPS), else ""
    output: str = ""  # which output of a reduction along an axis (axis_trace), else ""

    @property
    def exact_cover(self) -> bool:
        """The result covers every element once: all of them, none counted twice."""
        overlap = any(self.nodes[i].overlap for i in self.ancestry)
        return not overlap and self.nodes[self.result].cover == frozenset(range(self.n))

    def is_join(self, node: Node) -> bool:
        """A combine of the result's tree that joined two non-empty states.

        A reduction of n elements has exactly n - 1 of them, whatever the strategy;
        every other combine works on the identity.
        """
        return (node.kind == "combine" and node.id in self.ancestry
                and not any(self.nodes[a].empty for a in node.args))

    @property
    def combining_launches(self) -> list[int]:
        """The launches (numbered from 1) in which states were combined."""
        return sorted({key[0] for key, c in self.blocks.items() if c.combines or c.atomics})

    def total(self, name: str) -> int:
        """A :class:`BlockCounts` field summed over every block of every launch."""
        return sum(getattr(c, name) for c in self.blocks.values())

    def bytes_moved(self) -> dict:
        """Bytes through each level of the memory hierarchy, all blocks together."""
        sb = self.state_bytes
        return {
            "global read": self.total("global_element_loads") * self.element_bytes
            + self.total("global_state_loads") * sb,
            "global written": (self.total("global_stores") + self.total("atomics")) * sb,
            "shared read": self.total("shared_loads") * sb,
            "shared written": self.total("shared_stores") * sb,
            "shuffled": sum(sum(c.shuffle_steps.values()) for c in self.blocks.values())
            * 32 * sb,
        }

    def summary(self) -> dict:
        """The counts a teacher asks for, as plain numbers (JSON-ready)."""
        return {
            "strategy": self.strategy,
            "op": self.op,
            **({"function": self.function} if self.function else {}),
            "n": self.n,
            "dtype": str(self.dtype),
            "threads": self.threads,
            "launches": len(self.launches),
            "combining_launches": len(self.combining_launches),
            "blocks": [blocks for _, blocks, _ in self.launches],
            "steps": {f"{k[0]}/{k[1]}": c.steps for k, c in self.blocks.items()},
            "barriers": {f"{k[0]}/{k[1]}": c.barriers for k, c in self.blocks.items()},
            "shuffle_steps": {f"{k[0]}/{k[1]}": dict(c.shuffle_steps)
                              for k, c in self.blocks.items()},
            "atomics": self.total("atomics"),
            "combines": self.total("combines") + self.total("atomics"),
            "joins": self.total("joins"),
            "bytes": self.bytes_moved(),
            "exact_cover": self.exact_cover,
        }


# --- the recorder -------------------------------------------------------------------


class _Recorder:
    """Collects nodes and counts while one traced reduction runs.

    Called from simulated CUDA threads (one OS thread each); every mutation holds
    ``lock``.
    """

    def __init__(self):
        self.lock = threading.RLock()
        self.nodes = [Node(IDENTITY, "identity", frozenset(), ())]
        self.ids = itertools.count(1)
        self.memory: dict[int, int] = {}  # address -> node id stored there
        self.current: dict[tuple, int] = {}  # thread -> node id of its latest state
        self.sync: Counter = Counter()  # thread -> barriers + shuffles passed
        self.launches: list = []
        self.counts: dict = defaultdict(BlockCounts)
        self.barrier_steps: dict = defaultdict(set)  # (launch, block) -> steps after one
        self.stores: list = []  # global stores: (tag, launch, block, thread, step, slot)

    # where the calling simulated thread is
    def _where(self):
        t = threading.current_thread()
        return len(self.launches), t.blockIdx.x, t.threadIdx.x

    def _new(self, kind, cover, value, hold=True, **kw) -> int:
        """A new node made by the calling thread; ``hold``: it is the thread's state."""
        launch, block, thread = self._where()
        with self.lock:
            node = Node(next(self.ids), kind, cover, tuple(value), launch, block, thread,
                        self.sync[(launch, block, thread)], **kw)
            self.nodes.append(node)
            if hold:
                self.current[(launch, block, thread)] = node.id
            return node.id

    def _block(self) -> BlockCounts:
        launch, block, _ = self._where()
        return self.counts[(launch, block)]

    # called by the tracing kit and loader
    def identity(self) -> int:
        """The identity state; the thread's own state if it holds none yet (an identity
        made later, such as a block scan's exclusive prefix of thread 0, is not the
        state it goes on with)."""
        launch, block, thread = self._where()
        self.current.setdefault((launch, block, thread), IDENTITY)
        return IDENTITY

    def element(self, i, value) -> int:
        with self.lock:
            self._block().global_element_loads += 1
        return self._new("element", frozenset((int(i),)), value, via=ELEMENT,
                         detail=f"x[{int(i)}]")

    def combine(self, a, b, value, op: str = "") -> int:
        """A new node combining nodes ``a`` and ``b`` into ``value`` (``op``: the op's
        name, which a recorder of several ops may keep)."""
        a, b = self.nodes[int(a)], self.nodes[int(b)]
        with self.lock:
            self._block().combines += 1
        return self._new("combine", a.cover | b.cover, value, via=REGISTER,
                         args=(a.id, b.id), overlap=bool(a.cover & b.cover))

    def shuffle(self, kind, delta, got) -> int:
        """The calling lane received node ``got`` through ``shfl_<kind>`` by ``delta``."""
        launch, block, thread = self._where()
        key = (launch, block, thread)
        with self.lock:
            self.sync[key] += 1
            steps = self._block().shuffle_steps
            warp = thread // 32
            if thread % 32 == 0:
                steps[warp] = steps.get(warp, 0) + 1
        src = self.nodes[int(got)]
        return self._new("move", src.cover, src.value, via=SHUFFLE, args=(src.id,),
                         detail=kind, offset=int(delta))

    def store(self, arr, i, tag, op: str = "") -> None:
        address, shared = _address(arr, i)
        launch, block, thread = self._where()
        with self.lock:
            self.memory[address] = int(tag)
            self.current[(launch, block, thread)] = int(tag)
            c = self._block()
            if shared:
                c.shared_stores += 1
            else:
                c.global_stores += 1
                self.stores.append((int(tag), launch, block, thread,
                                    self.sync[(launch, block, thread)], int(i)))

    def load(self, arr, i, value) -> int:
        address, shared = _address(arr, i)
        with self.lock:
            src = self.memory.get(address)
            c = self._block()
            if shared:
                c.shared_loads += 1
            else:
                c.global_state_loads += 1
        if src is None:
            raise TraceError(f"a thread read {'shared' if shared else 'global'} slot {i} "
                             "that nothing in this run wrote")
        return self._new("move", self.nodes[src].cover, value,
                         via=SHARED if shared else GLOBAL, args=(src,), offset=int(i))

    # called by the wrapped simulator functions
    atomics = ("add", "max", "min", "and_", "or_", "xor", "cas")  # the ones watched

    def on_launch(self, kernel, args) -> None:
        """A kernel (a simulator ``FakeCUDAKernel``) is launched with ``args``."""
        self.launches.append((kernel.fn.__name__, kernel.grid_dim[0], kernel.block_dim[0]))

    def on_atomic(self, name, arr, index, args, old) -> None:
        """An atomic ran: ``cuda.atomic.<name>(arr, index, *args)`` returned ``old``."""
        self.atomic(name, arr, index, args[-1], name != "cas" or old == args[0])

    def barrier(self) -> None:
        launch, block, thread = self._where()
        with self.lock:
            key = (launch, block, thread)
            self.sync[key] += 1
            if thread == 0:
                self.counts[(launch, block)].barriers += 1
                self.barrier_steps[(launch, block)].add(self.sync[key])

    def atomic(self, name, arr, index, val, success: bool) -> None:
        """An atomic on ``arr[index]`` folded ``val``: the state its thread holds.

        ``success`` is false for a compare-and-swap that lost a race (a retry).
        """
        launch, block, thread = self._where()
        address, _ = _address(arr, index)
        with self.lock:
            c = self.counts[(launch, block)]
            if not success:
                c.cas_retries += 1
                return
            c.atomics += 1
            mine = self.nodes[self.current[(launch, block, thread)]]
            if name != "cas":
                _check_atomic_value(name, val, mine)
            prev = self.memory.get(address)
            if prev is None:
                prev = self._new("initial", frozenset(), (), hold=False,
                                 detail="the output's starting value, the identity")
            before = self.nodes[prev]
            content = arr[index] if name != "cas" else None  # CAS swaps bits, not values
            node = self._new("combine", before.cover | mine.cover,
                             () if content is None else (content,), via=ATOMIC,
                             args=(prev, mine.id), overlap=bool(before.cover & mine.cover),
                             detail=f"cuda.atomic.{name}")
            self.memory[address] = node


def _check_atomic_value(name, val, mine: Node) -> None:
    """The value an atomic folds must be the state its thread last held."""
    if mine.kind == "identity" or not mine.value:
        return
    want = np.asarray(mine.value[0]).astype(np.asarray(val).dtype)
    if not (want == val or (want != want and val != val)):
        raise TraceError(f"cuda.atomic.{name} folded {val!r}, but its thread's last state "
                         f"holds {mine.value[0]!r}")


def _address(arr, i) -> tuple[int, bool]:
    """``(address of arr[i], is it shared memory)``.

    Inside a simulated kernel, device arrays passed as arguments are Numba's
    ``FakeWithinKernelCUDAArray`` wrappers (those inside a tuple argument, an N-field
    state's, stay ``FakeCUDAArray``); shared arrays are plain ndarrays.
    """
    shared = isinstance(arr, np.ndarray)
    base = arr if shared else arr._ary if hasattr(type(arr), "copy_to_host") else arr._item._ary
    return base.__array_interface__["data"][0] + int(i) * base.strides[0], shared


_ACTIVE: _Recorder | None = None
_RUN_LOCK = threading.Lock()


def _rec() -> _Recorder:
    if _ACTIVE is None:
        raise TraceError("a tracing kernel ran outside trace_reduce")
    return _ACTIVE


# --- the tracing kit and loader --------------------------------------------------------


def tracing_kit(op, dtypes) -> StateKit:
    """The op's real :class:`StateKit`, with every state carrying a node tag.

    States are the real fields plus the tag, so the strategies' code, which only
    handles states through the kit, runs unchanged.
    """
    key = ("trace-kit", op, tuple(np.dtype(d).str for d in dtypes))
    return cached(key, lambda: build_tracing_kit(op, dtypes, _rec))


def build_tracing_kit(op, dtypes, rec) -> StateKit:
    """:func:`tracing_kit` reporting to ``rec()``, the active recorder; a state handed
    in without its tag (a kernel's own, as softmax rows hand theirs to the block
    reduce) is the calling thread's own, as ``rec().own_state(op name, fields)`` says."""
    real = state_kit(op, dtypes)
    # Tags travel through the same shuffles as values, as int64 one-field states.
    tags = state_kit(_ops.SUM, (np.dtype(np.int64),))
    f, name = real.fields, op.name

    def tag(s):
        return s[f] if len(s) > f else rec().own_state(name, s[:f])

    @cuda.jit(device=True)
    def identity():
        return real.identity() + (rec().identity(),)

    @cuda.jit(device=True)
    def combine(a, b):
        c = real.combine(a[:f], b[:f])
        return c + (rec().combine(tag(a), tag(b), c, name),)

    def shuffle(real_shfl, tag_shfl, kind):
        @cuda.jit(device=True)
        def shfl(s, delta):
            v = real_shfl(s[:f], delta)
            got = tag_shfl((tag(s),), delta)[0]
            return v + (rec().shuffle(kind, delta, got),)

        return shfl

    def first(a0):  # a state array's first field (N >= 3: a0 is the tuple of fields)
        return a0[0] if isinstance(a0, tuple) else a0

    @cuda.jit(device=True)
    def store(a0, a1, i, s):
        real.store(a0, a1, i, s[:f])
        rec().store(first(a0), i, tag(s), name)

    @cuda.jit(device=True)
    def load(a0, a1, i):
        s = real.load(a0, a1, i)
        return s + (rec().load(first(a0), i, s),)

    @cuda.jit(device=True)
    def to_state(v, i):  # an element read from the input
        s = real.to_state(v, i)
        return s + (rec().element(i, s),)

    return StateKit(
        real.dtypes,
        identity,
        combine,
        shuffle(real.shfl_down, tags.shfl_down, "down"),
        shuffle(real.shfl_up, tags.shfl_up, "up"),
        shuffle(real.shfl_idx, tags.shfl_idx, "idx"),
        store,
        load,
        to_state,
        real.identity_values,
    )


# --- watching the simulator --------------------------------------------------------------

_UNSET = object()


@contextlib.contextmanager
def recording(rec, patches=()):
    """Record into ``rec`` while the body runs: the tracing kits report to it, the
    simulator's barriers, atomics and launches are watched (:func:`_watching`), and
    each ``(class, name, value)`` of ``patches`` is set on its class, restored after
    (a family's own watch on the simulator: array reads, local arrays). One recording
    at a time in a process."""
    global _ACTIVE
    with _RUN_LOCK:
        saved = [(cls, name, cls.__dict__.get(name, _UNSET)) for cls, name, _ in patches]
        _ACTIVE = rec
        try:
            for cls, name, value in patches:
                setattr(cls, name, value)
            with _watching(rec):
                yield rec
        finally:
            for cls, name, value in saved:
                if value is _UNSET:
                    delattr(cls, name)
                else:
                    setattr(cls, name, value)
            _ACTIVE = None


@contextlib.contextmanager
def _watching(rec: _Recorder):
    """Wrap the simulator's barrier, atomics and launch to report to ``rec``."""
    from numba.cuda.simulator import kernel, kernelapi

    saved = []

    def patch(cls, name, make):
        original = getattr(cls, name)
        saved.append((cls, name, original))
        setattr(cls, name, make(original))

    def barrier(original):
        def syncthreads(self):
            rec.barrier()
            return original(self)

        return syncthreads

    def atomic(name):
        def make(original):
            def fold(self, array, index, *args):
                with rec.lock:  # the fold and its record as one step
                    old = original(self, array, index, *args)
                    rec.on_atomic(name, array, index, args, old)
                return old

            return fold

        return make

    def launch(original):
        def call(self, *args):
            if not self._device:
                rec.on_launch(self, args)
            return original(self, *args)

        return call

    try:
        patch(kernelapi.FakeCUDAModule, "syncthreads", barrier)
        for name in rec.atomics:
            patch(kernelapi.FakeCUDAAtomic, name, atomic(name))
        patch(kernel.FakeCUDAKernel, "__call__", launch)
        yield
    finally:
        for cls, name, original in reversed(saved):
            setattr(cls, name, original)


# --- reductions whose state has two fields -------------------------------------------------


@dataclass(frozen=True)
class StateOp:
    """A public reduction ``explain`` traces whose state is not its answer: the op its
    kernels reduce, the state's field dtypes for an input dtype, the answer made from
    the result's state, and how a state reads (for the tree and the figure).

    Attributes:
        function: the public function's name (``"var"``).
        op: the op the function reduces (``numbakern.ops.MOMENTS``).
        kinds: the input dtype kinds it takes.
        dtypes: ``dtypes(in_dtype) -> field dtypes``.
        result: ``result(in_dtype) -> the function's result dtype``.
        finish: ``finish(fields) -> the function's value`` from the result's state.
        reads: ``reads(fields) -> text``: a state, field by field, as a reader names them.
        lesson: what a state is and how two merge, for the top of the tree.
    """

    function: str
    op: _ops.Op
    kinds: str
    dtypes: object
    result: object
    finish: object
    reads: object
    lesson: str = ""


def _float_result(in_dtype) -> np.dtype:
    in_dtype = np.dtype(in_dtype)
    return in_dtype if in_dtype.kind == "f" else np.dtype(np.float64)


def _variance(fields):
    count, _, m2 = fields
    return m2 / count if count else np.nan


def _moments_reads(fields) -> str:
    count, mean, m2 = fields
    return f"(count {int(count)}, mean {mean:.6g}, M2 {m2:.6g})"


def _lse(fields):
    """``max + log(sum)`` as numbakern.logsumexp's finishing pass: +inf where the maximum
    is (its sum is inf - inf, NaN), NaN where the maximum is NaN, -inf where every
    element is -inf (or none is: log(0))."""
    m, s = (float(v) for v in fields)
    if m == np.inf:
        return m
    with np.errstate(divide="ignore"):
        return m + np.log(s)


def _lse_reads(fields) -> str:
    m, s = (float(v) for v in fields)
    return f"(max {m:.6g}, sum of exp(x - max) {s:.6g})"


#: ``--op`` names beyond the one-field built-ins: var's Welford state of three fields
#: ``(count, mean, M2)`` (int64, float64, float64, merged by Chan, Golub and LeVeque's
#: formula) and logsumexp's online ``(max, sum of exp(x - max))``
STATE_OPS = {
    "var": StateOp(
        "var", _ops.MOMENTS, "biuf", lambda d: _ops.MOMENT_DTYPES, _float_result, _variance,
        _moments_reads,
        "A state is (count, mean, M2) of the elements it covers (M2: the sum of squared "
        "deviations from its mean); an element x is (1, x, 0). Two states a, b merge by "
        "Chan, Golub and LeVeque's formula: n = na + nb, d = mean_b - mean_a, mean = "
        "mean_a + d nb / n, M2 = M2a + M2b + d^2 na nb / n. var = M2 / (count - ddof). "
        "The three fields (int64 count, float64 mean, float64 M2) move together through "
        "every shuffle, shared-memory slot and partial."),
    "logsumexp": StateOp(
        "logsumexp", ONLINE_SOFTMAX, "biuf",
        lambda d: (_ops.accumulator_dtype(_float_result(d)),) * 2, _float_result, _lse,
        _lse_reads,
        "A state is (m, s): the largest element it covers and the sum of exp(x - m) over "
        "them; an element x is (x, 1). Two merge by rescaling to the larger maximum: m = "
        "max(ma, mb), s = sa exp(ma - m) + sb exp(mb - m) (Milakov and Gimelshein's online "
        "softmax). logsumexp = m + log(s): no exp ever overflows."),
}


def _arg_reads(word: str):
    def reads(fields) -> str:
        value, index = fields
        shown = f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)
        return f"({word} {shown}, at {int(index)})"

    return reads


_ARG_LESSON = ("A state is (value, index): the {0} element it covers and where it lies; "
               "an element x at i is (x, i). Two merge by keeping the {0} value, and on a "
               "tie the smaller index (NumPy's first occurrence); a NaN counts as the {0} "
               "(NumPy's rule). arg{1} is the result's index.")

#: the two-field ops ``axis_trace`` records besides the one-field ones, by ``--op``
#: name: NumPy's argmax and argmin (the first index among equals)
ARG_OPS = {"argmax": _ops.ARGMAX, "argmin": _ops.ARGMIN}
#: how a state of each traced op reads, by the op's name (argmax and argmin: their
#: (value, index) pairs)
STATE_READS = {s.op.name: s.reads for s in STATE_OPS.values()} | {
    op.name: _arg_reads(name[3:]) for name, op in ARG_OPS.items()}
#: what a state of each traced op is, by the op's name
STATE_LESSONS = {s.op.name: s.lesson for s in STATE_OPS.values()} | {
    op.name: _ARG_LESSON.format("largest" if name == "argmax" else "smallest", name[3:])
    for name, op in ARG_OPS.items()}


# --- the entry point ----------------------------------------------------------------------


def require_simulator() -> None:
    """Raise :class:`TraceError` unless the kernels run under Numba's CUDA simulator:
    only there are CUDA threads Python threads that can be watched."""
    if not SIMULATOR:
        raise TraceError("tracing needs Numba's CUDA simulator; this process runs on a GPU. "
                         "Run it with NUMBAKERN_SIMULATOR=1")


def resolve_grid(strategy: str, threads: int = 32, blocks: int | None = 2):
    """A grid strategy from its ``"grid/block"`` name with the given grid shape."""
    base = _strategies.resolve("reduce", strategy, threads=threads)
    return type(base)(block=type(base.block)(threads), blocks=blocks)


def trace_reduce(x, op="sum", strategy="two_pass/warp_shuffle", *, threads: int = 32,
                 blocks: int | None = 2) -> Trace:
    """Reduce ``x`` with the real kernels under the simulator, recording every combine.

    Args:
        x: a 1-D or 2-D NumPy array (or list); keep it small (up to a few thousand
            elements): every thread is an OS thread and every combine a record.
        op: a built-in one-field op's name, a :class:`numbakern.Op` of one field, or
            the name of a :data:`STATE_OPS` function (``"var"``, ``"logsumexp"``):
            its two-field states are recorded, and the trace's value is the
            function's (``numbakern.var(x)``, ``numbakern.logsumexp(x)``).
        strategy: a ``"grid/block"`` name or a :class:`GridStrategy` (then
            ``threads`` and ``blocks`` are ignored).
        threads: threads per block, a multiple of 32.
        blocks: blocks of the first launch (``None``: the strategy's choice).

    Returns:
        a :class:`Trace`.

    Raises:
        TraceError: not under the simulator (kernels on a GPU cannot be watched), or
            the recording contradicts itself.
        ValueError, TypeError: as ``numbakern.reduce`` for a bad op, strategy or
            dtype.
    """
    require_simulator()
    state = STATE_OPS.get(op) if isinstance(op, str) else None
    op = state.op if state else _ops.get(op)
    grid = strategy if not isinstance(strategy, str) else resolve_grid(strategy, threads, blocks)
    x = np.asarray(as_array_like(x))
    if x.size == 0:
        raise ValueError("x must hold at least one element to trace")
    if not state:
        op.check_dtype(x.dtype)
    elif x.dtype.kind not in state.kinds or x.dtype.itemsize > 8:
        raise TypeError(f"{state.function} is not defined for x of dtype {x.dtype}; it "
                        "takes bool, integers and float16/32/64")
    if grid.commutative_required and not op.commutative:
        raise ValueError(f"strategy {grid.label} needs a commutative op; {op.name} is not")
    if state and grid.label.startswith("atomic_fold"):
        # its two-field fold takes a lock (strategies/atomic_fold.py): atomics on a lock
        # word, not folds of states, which the recording could not follow
        raise ValueError(f"explain records {state.function} under two_pass strategies: "
                         f"atomic_fold folds its two-field state under a lock (or not at "
                         f"all: var's three fields), not with an atomic the recording "
                         f"can follow")
    if op.fields != 1 and not state:
        raise ValueError(f"tracing takes one-field ops (sum, max, ...) and "
                         f"{', '.join(STATE_OPS)}; {op.name} has {op.fields} fields")
    result = state.result(x.dtype) if state else op.result_dtype(x.dtype, None)
    real = state_kit(op, state.dtypes(x.dtype) if state else
                     (_ops.accumulator_dtype(result),))
    kit = tracing_kit(op, real.dtypes)
    workspace = Workspace("numpy", cuda.default_stream())
    view, n = flat_view(x, any_order=op.commutative, stream=workspace.stream)
    # Scalar loads: every element's load is recorded (the tracing kit's to_state).
    layout = FlatReduce(view, n, kit, ordered=not op.commutative, vectors=False)
    job = ReduceJob(layout, op, kit, workspace)
    rec = _Recorder()
    with recording(rec):
        out = grid.reduce(job)
    out = kit.unpack(out)  # one array per field
    address, _ = _address(out[0]._ary, 0)
    if address not in rec.memory:
        raise TraceError("the output holds no recorded state")
    if state:  # the function's answer from the result's state, as its finishing pass
        fields = tuple(f.copy_to_host()[0] for f in out)
        value = result.type(state.finish(fields))
    else:
        value = workspace.scalar(out[0], result)
    return _finish(rec, grid, op, x, n, rec.memory[address], value, real,
                   state.function if state else "")


def _finish(rec: _Recorder, grid, op, x, n, result: int, value, real,
            function: str = "", ancestry: set | None = None) -> Trace:
    """The :class:`Trace` of ``rec``, its joins and steps counted over ``ancestry``
    (default: the nodes ``result`` was built from)."""
    trace = Trace(
        strategy=grid.label, op=op.name, n=n, dtype=np.dtype(x.dtype),
        threads=grid.block.threads, launches=rec.launches, nodes=rec.nodes, result=result,
        value=value, blocks=dict(sorted(rec.counts.items())),
        state_bytes=sum(d.itemsize for d in real.dtypes),
        element_bytes=np.dtype(x.dtype).itemsize,
        ancestry=frozenset(_ancestry(rec.nodes, result) if ancestry is None else ancestry),
        barrier_steps={k: sorted(v) for k, v in rec.barrier_steps.items()},
        stores=rec.stores, function=function,
    )
    rounds = defaultdict(set)
    for i in trace.ancestry:
        node = rec.nodes[i]
        if node.kind == "combine":
            if trace.is_join(node):
                trace.blocks[(node.launch, node.block)].joins += 1
            if node.via == REGISTER and node.step > 0:
                rounds[(node.launch, node.block)].add(node.step)
    for key, c in trace.blocks.items():
        c.steps = len(rounds[key])
    return trace


def _ancestry(nodes, root: int) -> set:
    """Every node the result was built from (the states that mattered)."""
    seen, todo = set(), [root]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        todo.extend(nodes[i].args)
    return seen
