"""Record a sort by running the real sort kernels under the simulator.

:func:`trace_sort` runs a sort strategy's ``sort(job)`` on a
:class:`~numbakern.core.jobs.SortJob`, as ``numbakern.sort`` does, and watches
memory rather than states: while it runs, the simulator's device arrays and its
``cuda.shared.array`` are wrapped so that every read and write of global memory
(named by the kernel's parameter, as in :mod:`numbakern.teach.scan_trace`) and of
shared memory (named by the variable the kernel assigns it to) is recorded with the
thread, block, launch and the thread's count of barriers so far. Barriers, atomics
and launches are counted as in :mod:`numbakern.teach.trace`.

From the recording:

* **bitonic**: each thread's reads of the shared ``keys`` between two barriers come
  in pairs ``(i, i ^ j)``: a compare-exchange, a *swap* when the thread wrote the
  pair back. The stages are the rounds between barriers; the final ``idx`` array
  (which element sits at each place) is the permutation the proof checks.
* **radix**: the digit histogram is the ``digit_histogram`` launch's ``counts``, the
  offsets the scan's output that the passes read (``offsets``); in each
  ``onesweep_pass``, the keys read from ``src_k`` and written to ``dst_k`` are the
  moves (equal keys matched in order, which a stable pass keeps), and the words
  written to ``words`` are the tiles' published counts.

The proof composes the moves (or reads the network's ``idx``): every element lands
in exactly one place, and the output equals ``np.sort(x, kind="stable")``.
"""

from __future__ import annotations

import inspect
import math
import sys
import threading
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from numbakern import strategies as _strategies
from numbakern.core.arrays import Workspace
from numbakern.core.jobs import SortJob
from numbakern.kernels.sort_keys import bits_dtype
from numbakern.runtime.simulator import shared_site, simulators_own
from numbakern.strategies.radix_sort import DIGIT_BITS, RADIX

from . import trace as _trace
from .trace import _Recorder

#: the shared arrays whose every access is kept (the others are counted)
KEPT_SHARED = ("keys", "idx")
#: the global arrays whose every access is kept
KEPT_GLOBAL = ("src_k", "dst_k", "words")


@dataclass
class Access:
    """One read or write of a kept array: ``array[index]`` held ``value``."""

    launch: int
    block: int
    thread: int
    step: int
    array: str
    index: int
    value: object
    write: bool


@dataclass
class CompareExchange:
    """One compare-exchange of the network: ``thread`` compared places ``i`` and
    ``partner`` in stage ``stage`` (numbered from 1) and ``swapped`` them or not."""

    stage: int
    thread: int
    i: int
    partner: int
    swapped: bool = False


@dataclass
class RadixPass:
    """One digit pass: its digit's bit ``shift``, the pass's digit ``counts`` and
    exclusive ``offsets`` (256 each, from the histogram and the scan), ``moves``
    ``[(source place, destination place, tile)]``, and per tile the look-back words
    it read and the counts it published."""

    number: int
    shift: int
    counts: np.ndarray
    offsets: np.ndarray
    moves: list
    tiles: int
    look_back_reads: Counter = field(default_factory=Counter)
    published: Counter = field(default_factory=Counter)

    def digit_of(self, dst: int) -> int:
        """The digit of the key written to ``dst``: the bin whose range holds it."""
        return int(np.searchsorted(self.offsets, dst, side="right") - 1)


@dataclass
class SortTrace:
    """A recorded sort.

    Attributes:
        strategy: ``"bitonic"`` or ``"radix"``.
        n, dtype, threads: the row length, the input dtype, threads per block.
        launches: ``[(kernel name, blocks, threads)]``.
        out, expected: the result and ``np.sort(x, kind="stable")``.
        counts: ``{name: total}``: barriers, atomics, global and shared loads and
            stores, their bytes.
        size: the network's padded size (bitonic), else ``n``.
        exchanges: the network's :class:`CompareExchange` list, stage by stage.
        stages: ``[(k, j)]`` per stage: the run length being built and the pairs'
            distance, read from the pairs compared.
        placed: ``placed[p]`` the input element that ended at place ``p``.
        passes: the radix sort's :class:`RadixPass` list.
        items: the radix sort's keys per thread in a tile (0: bitonic).
    """

    strategy: str
    n: int
    dtype: np.dtype
    threads: int
    launches: list
    out: np.ndarray
    expected: np.ndarray
    counts: dict
    size: int = 0
    exchanges: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    placed: list = field(default_factory=list)
    passes: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    items: int = 0

    @property
    def exact_once(self) -> bool:
        """Every element ended in exactly one place (the places are a permutation)."""
        return not self.problems and sorted(self.placed) == list(range(self.n))

    @property
    def matches_numpy(self) -> bool:
        """The output's bits are NumPy's stable sort's (``-0.0`` before ``0.0`` where
        the input had it first, NaN payloads kept)."""
        bits = bits_dtype(self.dtype)
        return np.array_equal(self.out.view(bits), self.expected.view(bits))

    @property
    def exact(self) -> bool:
        return self.exact_once and self.matches_numpy

    def summary(self) -> dict:
        """The counts, as plain numbers (JSON-ready)."""
        return {"strategy": self.strategy, "family": "sort", "n": self.n,
                "dtype": str(self.dtype), "threads": self.threads,
                "launches": len(self.launches), **self.counts,
                "compare_exchanges": len(self.exchanges),
                "swaps": sum(c.swapped for c in self.exchanges),
                "stages": len(self.stages), "passes": len(self.passes), "items": self.items,
                "moves": sum(len(p.moves) for p in self.passes),
                "exact_once": self.exact_once, "matches_numpy": self.matches_numpy}


def bitonic_formula(size: int) -> tuple[int, int]:
    """``(compare-exchanges, stages)`` of Batcher's network on ``size`` (a power of
    two) keys: ``size/2 · log2 size · (log2 size + 1)/2`` and
    ``log2 size · (log2 size + 1)/2``."""
    lg = int(math.log2(size))
    stages = lg * (lg + 1) // 2
    return size // 2 * stages, stages


# --- the recorder -------------------------------------------------------------------


class _Watched(np.ndarray):
    """A shared array of the simulator that reports its reads and writes."""

    name = "shared"

    def __array_finalize__(self, obj):
        self.name = getattr(obj, "name", "shared")

    def __getitem__(self, i):
        v = super().__getitem__(i)
        rec = _trace._ACTIVE
        if isinstance(rec, _SortRecorder):
            rec.access(self.name, True, i, v, False, self.itemsize)
        return v

    def __setitem__(self, i, v):
        super().__setitem__(i, v)
        rec = _trace._ACTIVE
        if isinstance(rec, _SortRecorder):
            rec.access(self.name, True, i, v, True, self.itemsize)


class _SortRecorder(_Recorder):
    atomics = ("add", "max", "min", "and_", "or_", "xor", "cas", "exch", "inc")

    def __init__(self):
        super().__init__()
        self.kept: list[Access] = []
        self.tally: Counter = Counter()
        self.shared_arrays: dict = defaultdict(list)  # name -> arrays made
        self.args: list = []  # per launch: {parameter name: device array}

    def on_launch(self, kernel, args) -> None:
        super().on_launch(kernel, args)
        names = list(inspect.signature(kernel.fn).parameters)
        self.args.append({n: a for n, a in zip(names, args) if hasattr(a, "_ary")})

    def _array_name(self, ary) -> str:
        """The launch's first parameter that is ``ary`` (a pass gets the input as both
        ``src_k`` and an unused ``src_i``)."""
        for name, dev in self.args[-1].items():
            if dev._ary is ary:
                return name
        return "?"

    def access(self, name, shared, index, value, write, itemsize) -> None:
        t = threading.current_thread()
        # not in a kernel, or the simulator's own reads and writes inside an atomic
        # (counted as the atomic)
        if not hasattr(t, "threadIdx") or simulators_own(sys._getframe(2).f_code):
            return
        launch, block, thread = len(self.launches), t.blockIdx.x, t.threadIdx.x
        kind = ("shared " if shared else "global ") + ("stores" if write else "loads")
        with self.lock:
            self.tally[kind] += 1
            self.tally[kind + " bytes"] += itemsize
            if name in (KEPT_SHARED if shared else KEPT_GLOBAL) and np.ndim(index) == 0:
                self.kept.append(Access(launch, block, thread,
                                        self.sync[(launch, block, thread)], name,
                                        int(index), value, write))

    def on_atomic(self, name, arr, index, args, old) -> None:
        with self.lock:
            self.tally["shared atomics" if isinstance(arr, np.ndarray)
                       else "global atomics"] += 1

    def barrier(self) -> None:
        super().barrier()
        if threading.current_thread().threadIdx.x == 0:
            with self.lock:
                self.tally["barriers"] += 1


def _watch_memory(rec: _SortRecorder):
    """Patches: ``[(class, attribute, replacement)]`` that report the kernels' global
    array accesses and make their shared arrays :class:`_Watched`."""
    from numba.cuda.simulator import kernelapi
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray
    from numba.np import numpy_support
    from numba.core import types

    get, put = FakeWithinKernelCUDAArray.__getitem__, FakeWithinKernelCUDAArray.__setitem__

    def getitem(self, idx):
        v = get(self, idx)
        ary = self._item._ary
        rec.access(rec._array_name(ary), False, idx, v, False, ary.itemsize)
        return v

    def setitem(self, idx, val):
        put(self, idx, val)
        ary = self._item._ary
        rec.access(rec._array_name(ary), False, idx, val, True, ary.itemsize)

    def shared_array(self, shape, dtype, alignment=None):
        # The simulator tells one shared array from another by the call that makes
        # it; this stands in for its lookup, so the call is the kernel's, not ours.
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        key = shared_site(caller)
        res = self._allocations.get(key)
        if res is None:
            if shape == 0:  # dynamic shared memory: every such array views one buffer
                new = np.frombuffer(self._dynshared.data, dtype=dtype,
                                    count=self._dynshared_size // dtype.itemsize)
                new = new.view(_Watched)
            else:
                new = np.empty(shape, dtype).view(_Watched)
            line = traceback.extract_stack(caller, limit=1)[0].line
            new.name = line.split("=")[0].strip() if "=" in line else "shared"
            # one step (numbakern/runtime/simulator.py): two threads that both found
            # none get the same array
            res = self._allocations.setdefault(key, new)
            if res is new:
                with rec.lock:
                    rec.shared_arrays[res.name].append(res)
        return res

    return [(FakeWithinKernelCUDAArray, "__getitem__", getitem),
            (FakeWithinKernelCUDAArray, "__setitem__", setitem),
            (kernelapi.FakeCUDAShared, "array", shared_array)]


# --- the entry point ----------------------------------------------------------------


#: the sorts whose steps a recording reads: bitonic's network, radix's passes
RECORDED = ("bitonic", "radix")


def make_sorter(strategy: str, n: int, threads: int = 32, items: int | None = None):
    """The sort strategy ``strategy`` for rows of ``n``: bitonic sized to the row's
    next power of two; radix with ``items`` keys a thread (``None``: as many as
    ``numbakern.sort`` takes under the simulator; ``1`` makes two tiles of 32 threads
    for 64 keys, so the look-back has a tile to read)."""
    cls = _strategies.REGISTRY["sort"].get(strategy)
    if strategy not in RECORDED:  # a sort of one's own has no network or passes to read
        raise ValueError(f"strategy: explain records the sorts {list(RECORDED)}, got "
                         f"{strategy!r}"
                         + (" (a sort strategy of your own: run it through "
                            "numbakern.sort)" if cls is not None else ""))
    if strategy == "bitonic":
        return cls(threads, max_size=max(2, 1 << max(0, (n - 1).bit_length())))
    return cls(threads, items=items)


def trace_sort(x, strategy: str = "bitonic", *, threads: int = 32,
               items: int | None = None) -> SortTrace:
    """Sort ``x`` with the real kernels of ``strategy`` under the simulator, recording
    every memory access.

    Args:
        x: a non-empty 1-D array or list of a dtype ``numbakern.sort`` takes (bool,
            ints, floats of at most 8 bytes); keep it small (up to a few hundred).
        strategy: ``"bitonic"`` or ``"radix"`` (``available("sort")``).
        threads: threads per block, a multiple of 32.
        items: radix: keys per thread in a tile (``None``: as many as
            ``numbakern.sort`` takes under the simulator).

    Returns:
        a :class:`SortTrace`.

    Raises:
        TraceError: not under the simulator.
        ValueError: ``x`` not 1-D or empty, an unknown strategy, bad ``threads``.
        TypeError: a dtype the sorts do not take.
    """
    _trace.require_simulator()
    x = np.asarray(x)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if x.dtype.kind not in "biuf" or x.dtype.itemsize > 8:
        raise TypeError(f"x must have a bool, integer or float dtype, got {x.dtype}")
    sorter = make_sorter(strategy, x.size, threads, items)
    n, kd = x.size, bits_dtype(x.dtype)
    workspace = Workspace("numpy", cuda.default_stream())
    xbits = cuda.to_device(np.ascontiguousarray(x).view(kd))
    out = cuda.device_array(n, kd)
    job = SortJob(xbits, out, 1, n, x.dtype, False, False, workspace)
    rec = _SortRecorder()
    with _trace.recording(rec, _watch_memory(rec)):
        sorter.sort(job)
    trace = SortTrace(strategy, n, np.dtype(x.dtype), sorter.threads, rec.launches,
                      out.copy_to_host().view(x.dtype), np.sort(x, kind="stable"),
                      _counts(rec))
    if strategy == "bitonic":
        _read_network(trace, rec)
    else:
        trace.items = sorter.tile_shape(np.dtype(kd).itemsize, 0, x.dtype, n)[1]
        _read_passes(trace, rec, kd)
    return trace


def _counts(rec: _SortRecorder) -> dict:
    t = rec.tally
    return {"barriers": t["barriers"], "atomics": t["shared atomics"] + t["global atomics"],
            "global loads": t["global loads"], "global stores": t["global stores"],
            "shared loads": t["shared loads"], "shared stores": t["shared stores"],
            "bytes": {"global read": t["global loads bytes"],
                      "global written": t["global stores bytes"],
                      "shared read": t["shared loads bytes"],
                      "shared written": t["shared stores bytes"]}}


def _read_network(trace: SortTrace, rec: _SortRecorder) -> None:
    """The compare-exchanges from the reads and writes of ``keys``; the placement from
    the final ``idx``."""
    trace.size = len(rec.shared_arrays["keys"][0])
    pending, last = {}, {}
    stage_of = {}
    for a in rec.kept:
        if a.array != "keys" or a.step == 0:  # step 0: the row loaded into keys
            continue
        stage = stage_of.setdefault(a.step, len(stage_of) + 1)
        who = (a.thread, a.step)
        if a.write:
            if who in last:
                last[who].swapped = True
        elif who in pending:
            ce = CompareExchange(stage, a.thread, pending.pop(who), a.index)
            trace.exchanges.append(ce)
            last[who] = ce
        else:
            pending[who] = a.index
    if pending:
        trace.problems.append(f"{len(pending)} read(s) of keys with no partner")
    k = 0
    for stage in range(1, len(stage_of) + 1):
        j = next((c.partner - c.i for c in trace.exchanges if c.stage == stage), 0)
        k = 2 * j if not trace.stages or j > trace.stages[-1][1] else k
        trace.stages.append((k, j))
    trace.placed = [int(i) for i in rec.shared_arrays["idx"][0][:trace.n]]


def _read_passes(trace: SortTrace, rec: _SortRecorder, kd) -> None:
    """Each pass's histogram, offsets and moves; the placement composed from them."""
    numbers = [i for i, (name, _, _) in enumerate(rec.launches) if name == "onesweep_pass"]
    hist = next(i for i, (name, _, _) in enumerate(rec.launches) if name == "digit_histogram")
    counts = np.array(rec.args[hist]["counts"]._ary).reshape(len(numbers), RADIX)
    place = list(range(trace.n))  # place[p]: the element now at place p
    for p, launch in enumerate(numbers, 0):
        args = rec.args[launch]
        offsets = np.array(args["offsets"]._ary).reshape(-1, RADIX)[p] - p * trace.n
        step = RadixPass(p + 1, p * DIGIT_BITS, counts[p], offsets, [],
                         rec.launches[launch][1])
        reads = defaultdict(list)
        writes = defaultdict(list)
        for a in rec.kept:
            if a.launch != launch + 1:
                continue
            if a.array == "src_k" and not a.write:
                reads[int(a.value)].append((a.index, a.block))
            elif a.array == "dst_k" and a.write:
                writes[int(a.value)].append(a.index)
            elif a.array == "words":
                (step.published if a.write else step.look_back_reads)[a.block] += 1
        _check_pass(trace, p, reads, writes)
        moved = [None] * trace.n
        for value, srcs in reads.items():
            for (src, block), dst in zip(sorted(srcs), sorted(writes.get(value, []))):
                step.moves.append((src, dst, block))
                moved[dst] = place[src]
        trace.passes.append(step)
        place = moved
    trace.placed = [-1 if p is None else p for p in place]


def _check_pass(trace: SortTrace, p: int, reads: dict, writes: dict) -> None:
    """Each place read once, each written once, the same keys written as read."""
    read = Counter(i for srcs in reads.values() for i, _ in srcs)
    wrote = Counter(i for dsts in writes.values() for i in dsts)
    if read != Counter(range(trace.n)):
        trace.problems.append(f"pass {p + 1} read some places other than once")
    if wrote != Counter(range(trace.n)):
        trace.problems.append(f"pass {p + 1} wrote some places other than once")
    if {v: len(s) for v, s in reads.items()} != {v: len(d) for v, d in writes.items()}:
        trace.problems.append(f"pass {p + 1} wrote other keys than it read")
