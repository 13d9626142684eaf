"""Record a softmax row by running the real row kernel under the simulator.

:func:`trace_softmax` builds the forward kernel of ``numbakern/kernels/softmax_rows.py``
for one row (one block, ``layout="block"``, scalar loads) with the normalizer and
block strategy named (``"online/warp_shuffle"``, ``"max_then_sum/shared_tree"``), as
``numbakern.softmax`` builds it, with one thing swapped while it is built: the state
kit of its block reduces is a *tracing kit* (as :mod:`numbakern.teach.trace`'s),
whose states carry a node tag beside the real fields. The kernel hands the block
reduce each thread's own state untagged (its fold of its elements, in registers);
the kit names that state by a node covering the elements the thread read, which are
recorded by watching the simulator's reads of the input row. So the recording holds:

* each thread's own state: ``(max, sum)`` for the online normalizer, its maximum
  and then its sum for max-then-sum, and the elements it read;
* every combine of the block reduces, through registers, shuffles or shared memory,
  with the op it ran (``max``, ``sum`` or ``online_softmax``); for the online pair,
  a *rescale* is a combine of two states whose maxima differ (the smaller one's sum
  is multiplied by ``exp(m_small - m)``);
* barriers, shuffles, launches; and the result: the state thread 0 broadcast.

The proof: each reduce's result covers every element of the row exactly once, and
the output equals NumPy's softmax to rounding.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from numbakern import strategies as _strategies
from numbakern.kernels import softmax_rows
from numbakern.ops.state import StateKit
from numbakern.strategies.online_softmax import ONLINE_SOFTMAX

from . import trace as _trace
from .trace import TraceError, _Recorder

#: the fused kernels' elements per thread (``numbakern/api/softmax.py``)
PER_THREAD = (1, 2, 4, 8, 12, 16, 24, 32)
#: relative error of the output against NumPy's that is rounding, by dtype (float16
#: computes in float32, then rounds the output: up to eps/2 = 4.9e-4, twice that allowed)
TOLERANCE = {"float16": 1e-3, "float32": 1e-5, "float64": 1e-12}


def softmax_strategies() -> list[str]:
    """Every ``"normalizer/block"`` a softmax takes: ``max_then_sum`` and ``online``,
    each with every registered block strategy."""
    return [f"{norm}/{block}" for norm in softmax_rows.NORMALIZERS
            for block in _strategies.available("block")]


@dataclass
class SoftmaxTrace:
    """A recorded softmax of one row.

    Attributes:
        strategy: ``"normalizer/block"``; normalizer, block its parts.
        n, dtype, threads: the row's length and dtype, threads of the block.
        per_thread: elements each thread holds (fused), or 0 (tiled passes).
        launches: ``[(kernel name, blocks, threads)]``.
        nodes: the recorded states (``nodes[0]`` the identity).
        own: ``{(op name, thread): node id}``: each thread's own state.
        results: ``{op name: node id}``: each reduce's result (thread 0's broadcast).
        loaded: ``{thread: elements it read}`` (every pass over the row).
        barriers: the block's barriers; shuffles: shuffle steps, lane 0's count.
        y, expected: the output and NumPy's softmax.
    """

    strategy: str
    normalizer: str
    block: str
    n: int
    dtype: np.dtype
    threads: int
    per_thread: int
    launches: list
    nodes: list
    own: dict
    results: dict
    loaded: dict
    barriers: int
    shuffles: int
    shared: tuple
    y: np.ndarray
    expected: np.ndarray
    _anc: dict = field(default_factory=dict, repr=False)

    def ancestry(self, root: int) -> frozenset:
        if root not in self._anc:
            self._anc[root] = frozenset(_trace._ancestry(self.nodes, root))
        return self._anc[root]

    def result_exact(self, op: str) -> bool:
        """The reduce ``op``'s result covers every element once."""
        root = self.results.get(op)
        if root is None:
            return False
        return (self.nodes[root].cover == frozenset(range(self.n))
                and not any(self.nodes[i].overlap for i in self.ancestry(root)))

    @property
    def exact_cover(self) -> bool:
        return bool(self.results) and all(self.result_exact(op) for op in self.results)

    @property
    def max_error(self) -> float:
        """The largest relative error of the output against NumPy's; NaN where only one
        of them is NaN (a row holding NaN or +inf is NaN throughout in both)."""
        y = self.y.astype(np.float64)
        both = np.isnan(y) & np.isnan(self.expected)
        scale = np.maximum(np.abs(self.expected), np.finfo(self.dtype).tiny)
        error = np.where(both, 0.0, np.abs(y - self.expected) / scale)
        return float(np.max(error))

    @property
    def matches_numpy(self) -> bool:
        return self.max_error <= TOLERANCE[self.dtype.name]

    @property
    def exact(self) -> bool:
        return self.exact_cover and self.matches_numpy

    def joins(self, op: str) -> list:
        """The combines of two non-empty states the result of ``op`` was built from."""
        root = self.results.get(op)
        if root is None:
            return []
        return sorted((self.nodes[i] for i in self.ancestry(root)
                       if self.nodes[i].kind == "combine" and self.nodes[i].detail == op
                       and not any(self.nodes[a].empty for a in self.nodes[i].args)),
                      key=lambda node: node.id)

    def rescales(self) -> list:
        """The online pair's joins whose maxima differed: one sum was rescaled."""
        return [j for j in self.joins(ONLINE_SOFTMAX.name)
                if len({_max_of(self, a) for a in j.args}) > 1]

    def summary(self) -> dict:
        """The counts, as plain numbers (JSON-ready)."""
        return {"strategy": self.strategy, "family": "softmax", "n": self.n,
                "dtype": str(self.dtype), "threads": self.threads,
                "per_thread": self.per_thread, "launches": len(self.launches),
                "reduces": list(self.results), "barriers": self.barriers,
                "shuffle_steps": self.shuffles,
                "joins": {op: len(self.joins(op)) for op in self.results},
                "rescales": len(self.rescales()),
                "shared_loads": self.shared[0], "shared_stores": self.shared[1],
                "exact_cover": self.exact_cover, "max_error": self.max_error,
                "matches_numpy": self.matches_numpy}


def _max_of(trace: SoftmaxTrace, i: int):
    """The maximum a state operand holds (its first field)."""
    return float(trace.nodes[i].value[0])


# --- the recorder -------------------------------------------------------------------


class _SoftmaxRecorder(_Recorder):
    """Records states as :class:`~numbakern.teach.trace._Recorder` does, the reads of
    the input row, and each thread's own (untagged) states."""

    def __init__(self, row_start: int, row_end: int, itemsize: int):
        super().__init__()
        self.row = (row_start, row_end, itemsize)
        self.loaded: dict = defaultdict(set)
        self.own: dict = {}
        self.own_by_value: dict = {}
        self.stored: dict = {}  # op name -> the last state thread 0 stored

    def read(self, address: int) -> None:
        start, end, size = self.row
        if start <= address < end:
            t = threading.current_thread()
            with self.lock:
                self.loaded[t.threadIdx.x].add((address - start) // size)

    def own_state(self, op: str, value) -> int:
        """The node of the calling thread's own state ``value`` of ``op`` (one node
        per thread, op and value: the kernel hands the same state to several kit
        calls)."""
        _, block, thread = self._where()
        key = (op, thread, tuple(float(v) for v in value))
        with self.lock:
            if key not in self.own_by_value:
                cover = frozenset(self.loaded[thread])
                node = self._new("own", cover, value, detail=op)
                self.own_by_value[key] = node
                self.own[(op, thread)] = node
            return self.own_by_value[key]

    def combine(self, a, b, value, op: str = "") -> int:
        a, b = self.nodes[int(a)], self.nodes[int(b)]
        with self.lock:
            self._block().combines += 1
        return self._new("combine", a.cover | b.cover, value, via=_trace.REGISTER,
                         args=(a.id, b.id), overlap=bool(a.cover & b.cover), detail=op)

    def store(self, arr, i, tag, op: str = "") -> None:
        super().store(arr, i, tag)
        if self._where()[2] == 0:
            with self.lock:
                self.stored[op] = int(tag)


def _rec() -> _SoftmaxRecorder:
    rec = _trace._ACTIVE
    if not isinstance(rec, _SoftmaxRecorder):
        raise TraceError("a softmax tracing kernel ran outside trace_softmax")
    return rec


def _softmax_kit(op, dtypes) -> StateKit:
    """The op's tracing kit reporting to the softmax recorder (its own, untagged states
    are :meth:`_SoftmaxRecorder.own_state`)."""
    return _trace.build_tracing_kit(op, dtypes, _rec)


def _kernel(plan):
    """The real forward kernel for ``plan``, its block reduces built on tracing kits
    (built here, not cached: the tracing kernels never serve a real call).

    The kit is swapped by replacing ``softmax_rows._kit`` while the kernel is built,
    under the tracing lock; a softmax another thread builds in that moment would get
    tracing kits too, so trace in a process of its own (as ``numbakern explain``)."""
    real_kit = softmax_rows._kit
    with _trace._RUN_LOCK:
        softmax_rows._kit = lambda plan, op: _softmax_kit(
            op, (np.dtype(plan.compute),) * op.fields)
        try:
            return softmax_rows._forward_kernel(plan)
        finally:
            softmax_rows._kit = real_kit


def _watch_reads(rec: _SoftmaxRecorder):
    """``(class, name, replacement)``: the simulator's in-kernel array reads, reported
    to ``rec`` by address."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray

    get = FakeWithinKernelCUDAArray.__getitem__

    def getitem(self, idx):
        v = get(self, idx)
        ary = self._item._ary
        if np.ndim(idx) == 0 and ary.ndim == 1:
            rec.read(ary.__array_interface__["data"][0] + int(idx) * ary.strides[0])
        return v

    return FakeWithinKernelCUDAArray, "__getitem__", getitem


# --- the entry point ----------------------------------------------------------------


def plan_for(strategy: str, n: int, dtype, threads: int = 32):
    """The :class:`~numbakern.kernels.softmax_rows.RowPlan` of one row of ``n`` under
    ``strategy`` (``"normalizer/block"``): one block, fused when a compiled number of
    elements per thread holds the row, else tiled; scalar loads."""
    if strategy not in softmax_strategies():
        raise ValueError(f"strategy must be one of {softmax_strategies()}, got {strategy!r}")
    normalizer, block = strategy.split("/")
    dtype = np.dtype(dtype).name
    per_thread = next((k for k in PER_THREAD if k * threads >= n and softmax_rows.RowPlan(
        "softmax", None, "block", threads, k, None, None, dtype).fits), 0)
    made = _strategies.resolve("block", block, threads=threads)
    online = normalizer == "online"
    return softmax_rows.RowPlan("softmax", normalizer, "block", threads, per_thread,
                                None if online else made, made, dtype,
                                pair_op=ONLINE_SOFTMAX if online else None)


def numpy_softmax(x) -> np.ndarray:
    """NumPy's softmax of a row, in float64: ``exp(x - max) / sum(exp(x - max))``
    (NaN throughout for a row holding NaN or +inf, or nothing but -inf)."""
    with np.errstate(invalid="ignore"):
        e = np.exp(x.astype(np.float64) - np.max(x))
        return e / e.sum()


def trace_softmax(x, strategy: str = "online/warp_shuffle", *,
                  threads: int = 32) -> SoftmaxTrace:
    """Softmax of the row ``x`` with the real kernel under the simulator, recording
    each thread's state and every combine of the block reduces.

    Args:
        x: a non-empty 1-D float16, float32 or float64 array (one row); keep it
            small.
        strategy: ``"normalizer/block"`` (:func:`softmax_strategies`).
        threads: threads of the block, a multiple of 32.

    Returns:
        a :class:`SoftmaxTrace`.

    Raises:
        TraceError: not under the simulator.
        ValueError: ``x`` not 1-D or empty, an unknown strategy, bad ``threads``.
        TypeError: ``x`` not float16, float32 or float64.
    """
    _trace.require_simulator()
    x = np.asarray(x)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if x.dtype.name not in TOLERANCE:
        raise TypeError(f"x must be float16, float32 or float64, got {x.dtype}")
    plan = plan_for(strategy, x.size, x.dtype, threads)
    kernel = _kernel(plan)
    xd = cuda.to_device(np.ascontiguousarray(x).reshape(1, 1, -1))
    yd = cuda.device_array((1, 1, x.size), x.dtype)
    start = xd._ary.__array_interface__["data"][0]
    rec = _SoftmaxRecorder(start, start + x.nbytes, x.itemsize)
    with _trace.recording(rec, [_watch_reads(rec)]):
        kernel[1, plan.threads](xd, yd)
    counts = rec.counts[(1, 0)]
    normalizer, block = strategy.split("/")
    results = dict(rec.stored)
    return SoftmaxTrace(
        strategy, normalizer, block, x.size, x.dtype, plan.threads, plan.per_thread,
        rec.launches, rec.nodes, rec.own, results,
        {t: frozenset(v) for t, v in rec.loaded.items()}, counts.barriers,
        sum(counts.shuffle_steps.values()), (counts.shared_loads, counts.shared_stores),
        yd.copy_to_host().reshape(-1), numpy_softmax(x))


__all__ = ["SoftmaxTrace", "numpy_softmax", "plan_for", "softmax_strategies",
           "trace_softmax"]
