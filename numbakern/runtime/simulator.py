"""Warp intrinsics, and a faster block engine, for Numba's CUDA simulator.

Numba's simulator has no warp-level intrinsics. :func:`install` adds them to the
simulator's ``cuda`` module with the semantics of the CUDA C++ Programming Guide
(sections "Warp Vote Functions", "Warp Match Functions", "Warp Shuffle Functions"
and ``__syncwarp``) and of the PTX ISA (``shfl.sync``, ``vote.sync``,
``match.sync``), with the signatures Numba gives them on a GPU:

==========================================  =========================================
``shfl_sync(mask, value, src_lane)``        value of lane ``src_lane % 32``
``shfl_up_sync(mask, value, delta)``        value of lane ``lane - delta``
``shfl_down_sync(mask, value, delta)``      value of lane ``lane + delta``
``shfl_xor_sync(mask, value, lane_mask)``   value of lane ``lane ^ lane_mask``
``syncwarp(mask=0xFFFFFFFF)``               wait for the lanes of ``mask``
``ballot_sync(mask, pred)``                 int32 bit mask of lanes whose pred is true
``all_sync`` / ``any_sync`` / ``eq_sync``   bool: all, any, all-equal predicates
``match_any_sync(mask, value)``             int32 mask of lanes holding equal bits
``match_all_sync(mask, value)``             ``(mask or 0, pred)``: do all hold equal bits
``activemask()``                            uint32 mask of the converged lanes
``lanemask_lt()``                           uint32 mask of the lanes below this one
==========================================  =========================================

Semantics chosen where CUDA leaves room:

* Lanes are numbered by linear thread id ``x + y*bx + z*bx*by``; warp ``w`` holds
  threads ``32w .. 32w+31``.
* Every warp-synchronous call is a rendezvous of the lanes in ``mask``: no lane
  returns before all live lanes of the mask have arrived, so shared memory written
  before the call is seen after it. Lanes past the end of a partial last warp and
  lanes that have exited count as outside the mask (CUDA: "all non-exited threads
  named in mask must execute the same intrinsic").
* ``delta``, ``src_lane`` and ``lane_mask`` are taken modulo 32, as the hardware
  uses only bits 4:0 (PTX ``shfl.sync``). ``shfl_up``/``shfl_down`` past the warp
  edge return the caller's own value (PTX: ``pval`` false).
* Reading from a lane that is not taking part (outside the mask, exited, or past
  the end of the block) returns the caller's own value; CUDA leaves it undefined.
* Values pass through as the very objects the source lane gave, so NumPy scalar
  types and bit patterns survive (int32/int64/float32/float64, and also bool and
  float16, which Numba rejects on a GPU).
* ``activemask()`` waits until every other live lane of the warp is either at the
  same call site or waiting elsewhere (a barrier, a rendezvous) or has exited, and
  returns the lanes at the call site: lanes that diverged into another branch are
  inactive, as on a GPU where the branch has not reconverged. It is exact for
  code where divergent branches meet at a synchronising call; a lane spinning
  without ever waiting holds the others up.
* A value stored into an integer device array (by a kernel, or by the host, which a
  real device array does by a kernel), and every ``cuda.atomic`` operand, is
  converted as a GPU's ``cvt`` does (:mod:`numbakern.runtime.simvalues`): a float
  saturates, NaN as the float's width decides; an integer wraps. NumPy's casts wrap
  floats on x86 and raise for NaN or an integer out of range.
* ``cuda.fp16.hfloor`` rounds down (Numba's simulator rounds up), ``hmax``/``hmin``
  give the number where one argument is NaN, and ``cuda.shared.array(0, np.float32)``
  (dynamic shared memory of a NumPy scalar type) works.
* ``popc``, ``clz``, ``ffs`` and ``brev`` take their argument as Numba types it: a
  NumPy integer as itself, a bool as int8, a Python int as int64, wrapped where it
  has grown past 64 bits (as Numba types integer literals and the arithmetic on them;
  a bare ``threadIdx.x``, int32 on a GPU, is a Python int here: ``np.int32(...)``
  gives 32 bits), read in its own width, two's complement. They return Numba's types:
  ``popc`` and ``clz`` the argument's, ``ffs`` uint32, ``brev`` uint64 for a uint64
  and uint32 for anything else, converted first. ``ffs`` of an 8- or 16-bit int
  (Numba does not compile it) and a float (Numba converts it silently) are a
  ``TypeError``.
* ``syncthreads_count``, ``_and`` and ``_or`` (:mod:`numbakern.runtime.simblock`)
  count the predicates of the threads at the call, not of exited threads.
* A caller missing from its own ``mask`` raises ``ValueError``; lanes of one mask
  calling different intrinsics raise ``RuntimeError``; a block in which every
  live thread waits with no barrier able to complete raises ``RuntimeError``
  (all three undefined behaviour or a hang on a GPU).

:func:`install` also replaces the simulator's polling ``BlockManager`` with the
event-driven one of :mod:`numbakern.runtime.simblock`, and the per-call stack walk that
keys ``cuda.shared.array`` with a frame lookup (bench/NOTES.md has the figures).

Launches from several Python threads at once: Numba's simulator swaps a kernel
module's ``cuda`` global for the launch's ``FakeCUDAModule`` while the launch runs
and keeps the launch in one global, so a second thread launching, or merely running
host code of that module (``cuda.jit``), meets the other launch's module and fails.
:func:`install` replaces the swap with a router (:class:`CudaRouter`), put in place
of the module's ``cuda`` once: read from a simulated thread it is that thread's own
launch's ``FakeCUDAModule`` (and raises once that thread's block is aborted), read
from any other thread it is ``numba.cuda`` itself. Launches then run side by side,
each with its own grid and shared memory; the simulated threads of all take turns
holding the GIL, so N concurrent launches take about as long as N in a row.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import sys
import threading
import weakref

import numpy as np

from . import simvalues
from .device import FULL_MASK, SHARED_LIMIT, WARP

_installed = False
_SimThread = None  # numbakern.runtime.simblock.SimThread, once installed


def install() -> bool:
    """Attach numbakern's warp intrinsics and block engine to Numba's simulator.

    Called by ``import numbakern`` when the simulator is selected. Idempotent.
    Adds the names Numba's ``FakeCUDAModule`` lacks, and replaces only what it
    simulates wrongly: the bit intrinsics (``popc``, ``clz``, ``ffs``, ``brev``), a
    grid's ``sync()``, the atomics, stores into integer arrays, three fp16 functions
    and dynamic shared arrays of NumPy scalar types. Does nothing when the simulator
    is off.

    Returns:
        True if the simulator now has the intrinsics, False if it is off.
    """
    global _installed, _SimThread
    from numba.cuda.core import config

    if not config.ENABLE_CUDASIM:
        return False
    if _installed:
        return True
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    from . import simblock as _simblock

    for name, fn in _INTRINSICS.items():
        if not hasattr(kernelapi.FakeCUDAModule, name):
            setattr(kernelapi.FakeCUDAModule, name, fn)
    for name, fn in _BIT_INTRINSICS.items():
        setattr(kernelapi.FakeCUDAModule, name, fn)
    kernelapi.GridGroup.sync = _grid_sync
    _SimThread = _simblock.SimThread
    kernel.BlockManager = _simblock.BlockManager
    kernel._push_kernel_context = _simblock.kernel_context
    kernel._get_kernel_context = _simblock.current_module
    kernel.swapped_cuda_module = _routed
    kernelapi.FakeCUDAShared = _shared_class(kernelapi.FakeCUDAShared)
    kernelapi.FakeCUDAAtomic = type("FakeCUDAAtomic",
                                    (simvalues.Atomic, kernelapi.FakeCUDAAtomic), {})
    kernelapi.FakeCUDAFp16 = _fp16_class(kernelapi.FakeCUDAFp16)
    devicearray.FakeCUDAArray.__setitem__ = _wrapping_store(
        devicearray.FakeCUDAArray.__setitem__)
    _installed = True
    return True


def _wrapping_store(store):
    """``FakeCUDAArray.__setitem__`` whose integer stores convert as a GPU's do
    (:func:`numbakern.runtime.simvalues.gpu_cast`): a float saturates (NumPy's cast
    is C's, which wraps on x86, and raises for NaN), from a kernel and from the host
    alike (a real device array's ``__setitem__`` copies the value to the device and
    stores it by a kernel), and an integer out of the array's range wraps (NumPy 2
    raises ``OverflowError``, so a kernel that narrows int64 sums into an int8 ``out``
    failed only under the simulator). A store of an integer in range pays one type
    test; only a failed one is retried."""
    gpu_cast = simvalues.gpu_cast

    def __setitem__(self, idx, val):
        dtype = self._ary.dtype
        if dtype.kind in "iu" and isinstance(val, (float, np.floating)):
            return store(self, idx, gpu_cast(val, dtype))
        try:
            return store(self, idx, val)
        except OverflowError:
            if dtype.kind not in "iu" or np.ndim(val):
                raise
            return store(self, idx, gpu_cast(val, dtype))

    return __setitem__


def _fp16_class(base):
    """``FakeCUDAFp16`` with ``hfloor`` (Numba's rounds up) and ``hmax``/``hmin`` as
    PTX ``max.f16``/``min.f16``: a NaN argument gives the other one (Python's
    ``max`` depends on the order), ``+0.0`` above ``-0.0``."""

    def pick(a, b, larger: bool):
        a, b = np.float16(a), np.float16(b)
        if a != a or b != b:
            return b if a != a else a
        if a == b:  # equal, or zeros of two signs
            return a if np.signbit(a) != larger else b
        return a if (a > b) == larger else b

    class FakeCUDAFp16(base):
        def hfloor(self, x):
            return np.floor(x, dtype=np.float16)

        def hmax(self, a, b):
            return pick(a, b, True)

        def hmin(self, a, b):
            return pick(a, b, False)

    return FakeCUDAFp16


def _new_shared(shape, dtype) -> np.ndarray:
    """The memory of a new static shared array (uninitialised, as on a GPU)."""
    return np.empty(shape, dtype)


def _within_limit(allocations: dict) -> None:
    """Refuse a block's static shared arrays past ``SHARED_LIMIT`` in all, as ptxas
    refuses such a kernel ("uses too much shared data"): NumPy would hold them, and a
    kernel that only ran here would fail to compile on every GPU. Only the arrays
    this launch reaches are counted (ptxas counts every one the kernel holds), so a
    kernel may still pass here and fail there, never the other way."""
    nbytes = sum(a.nbytes for a in allocations.values())
    if nbytes > SHARED_LIMIT:
        raise RuntimeError(f"the kernel uses too much shared data: {nbytes} bytes of "
                           f"static shared memory a block, {SHARED_LIMIT} max (ptxas "
                           "refuses it on a GPU)")


def vector_aligned(a, what: str) -> None:
    """Refuse a 16-byte vector access (``what``) to an array whose data is not 16-byte
    aligned, where a GPU faults ("misaligned address", which ends the CUDA context):
    the kernels' callers check alignment on the host, and a slip there would pass here
    unseen. Every vector ``j`` of an aligned array is aligned (``16 j`` bytes in)."""
    ary = getattr(a, "_ary", a)
    if ary.__array_interface__["data"][0] % 16:
        raise RuntimeError(f"a 16-byte vector {what} from an array that is not 16-byte "
                           "aligned (a GPU faults: misaligned address)")


def simulators_own(code) -> bool:
    """Whether ``code`` is the simulator's own (:func:`own_files`): an array access
    made there is part of an intrinsic or an atomic, not an access of the kernel's."""
    return code.co_filename.startswith(own_files())


@functools.cache
def own_files() -> tuple:
    """The simulator's own files: Numba's, and numbakern's block engine, intrinsics
    and atomics. A barrier's call passes through them (``syncthreads_count`` and a
    grid's ``sync`` call ``syncthreads`` themselves), and so do an atomic's reads and
    writes."""
    import numba.cuda.simulator

    here = os.path.dirname(os.path.abspath(__file__))
    return (os.path.dirname(numba.cuda.simulator.__file__),
            *(os.path.join(here, name) for name in ("simblock.py", "simulator.py",
                                                    "simvalues.py")))


def shared_site(caller) -> tuple:
    """The key of the static shared array made by frame ``caller``: its file, line and
    instruction (two arrays made on one line are two)."""
    return (caller.f_code.co_filename, caller.f_lineno, caller.f_lasti)


def _shared_class(base):
    """``FakeCUDAShared`` whose ``array`` finds its caller without a stack walk, and
    gives every thread of the block one array per site.

    Numba keys each static shared array by the caller's (file, line), found with
    ``traceback.extract_stack``, which reads every frame's source line: about
    100 us per call, once per thread. One frame lookup gives the key, with the
    call's instruction offset added (two arrays made on one line are two arrays,
    where Numba's key made them one).

    The first threads of a block to reach a site find no array there and make one.
    Numba looks the key up and stores the new array in two steps; a thread switch
    between them (a GIL hand-over, likelier the busier the CPU) lets a second thread
    store its own over the first, and the first thread then works alone in memory
    no other thread reads (a radix sort pass's tile slots read uninitialised:
    garbage indices). ``dict.setdefault`` stores and reads in one step, so every
    thread gets the array stored first.
    """

    from numba.cuda import types
    from numba.cuda.np import numpy_support

    class FakeCUDAShared(base):
        def array(self, shape, dtype, alignment=None):
            if shape == 0 or alignment is not None:  # dynamic, or Numba's error
                if not isinstance(dtype, types.Type):  # np.float32 has no itemsize
                    dtype = np.dtype(dtype)
                return super().array(shape, dtype, alignment)
            key = shared_site(sys._getframe(1))
            res = self._allocations.get(key)
            if res is None:
                if isinstance(dtype, types.Type):
                    dtype = numpy_support.as_dtype(dtype)
                res = self._allocations.setdefault(key, _new_shared(shape, dtype))
                _within_limit(self._allocations)
            return res

    return FakeCUDAShared


# -- one `cuda` per thread ---------------------------------------------------------


class CudaRouter:
    """Stands for ``numba.cuda`` in the globals of kernel modules under the simulator.

    Attribute reads from a simulated thread go to the ``FakeCUDAModule`` of that
    thread's launch (``Aborted`` once its block is aborted); from any other thread,
    to ``numba.cuda``. Writes and deletions go to ``numba.cuda``.
    """

    __slots__ = ()

    def __getattr__(self, name):
        t = threading.current_thread()
        module = getattr(t, "cuda_module", None)
        if module is None:
            return getattr(_real_cuda(), name)
        if t._manager.aborted:
            from .simblock import Aborted

            raise Aborted("abort flag set on cuda.%s" % name)
        return getattr(module, name)

    def __setattr__(self, name, value):
        setattr(_real_cuda(), name, value)

    def __delattr__(self, name):
        delattr(_real_cuda(), name)

    def __dir__(self):
        return dir(_real_cuda())

    def __repr__(self):
        return "<numbakern CudaRouter for %r>" % (_real_cuda(),)


_router = CudaRouter()
_routed_lock = threading.Lock()
_no_swap = contextlib.nullcontext()
# Launches so far, and the count at which each device function's globals were last
# routed: a device function is called by every thread of every block, and scanning its
# module's globals each time took a sixth of a simulated launch (bench/NOTES.md)
_launches = 0
_routed_at: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _real_cuda():
    from numba import cuda

    return cuda


def _routed(fn, fake_cuda_module):
    """Numba's ``swapped_cuda_module``, done for good: every global of ``fn``'s module
    that is ``numba.cuda`` becomes the router (it reads as ``numba.cuda`` outside
    simulated threads). The globals are read again at every launch, not once per
    module: a notebook (or one ``exec`` namespace) may import ``numba.cuda`` after its
    first launch. A device function's (called from a simulated thread) are read once
    a launch, by its first call."""
    global _launches
    if not isinstance(threading.current_thread(), _SimThread):  # a launch, or a host call
        with _routed_lock:
            _launches += 1
            launch = _launches
    else:
        # the count before the scan: one stored after it could be a later launch's,
        # which would then skip a module rebound in between
        launch = _launches
        if _routed_at.get(fn) == launch:
            return _no_swap
    globs = fn.__globals__
    cuda = _real_cuda()
    if any(v is cuda for v in list(globs.values())):
        with _routed_lock:
            for k, v in list(globs.items()):
                if v is cuda:
                    globs[k] = _router
    _routed_at[fn] = launch
    return _no_swap


# -- helpers -------------------------------------------------------------------


def _thread():
    t = threading.current_thread()
    if not isinstance(t, _SimThread):
        raise RuntimeError("warp intrinsics can only be called inside a simulated kernel")
    return t


def _mask(mask) -> int:
    return operator.index(mask) & FULL_MASK


def _int32(bits: int) -> np.int32:
    """A 32-bit lane mask as Numba types it on a GPU: int32, so bit 31 is the sign."""
    return np.int32(bits - (1 << 32) if bits >> 31 else bits)


def _lanes(bits: int):
    return (j for j in range(WARP) if bits >> j & 1)


def _check_value(op: str, value) -> None:
    if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        raise TypeError("%s: cannot shuffle a %s" % (op, type(value).__name__))


def _bits(value):
    """The bits ``match.sync`` compares: +0.0 and -0.0 differ; equal NaNs match."""
    if isinstance(value, float):
        value = np.float64(value)
    if isinstance(value, np.floating):
        return (value.dtype.itemsize, int(value.view(f"u{value.dtype.itemsize}")))
    return int(value)


# -- shuffles (PTX shfl.sync with Numba's clamp values) ---------------------------


def _shuffle(op: str, mask, value, b, source):
    """Meet, then read lane ``source(lane, b & 31)`` (None: out of range)."""
    _check_value(op, value)
    t = _thread()
    meeting = t._manager.meet(t, op, _mask(mask), value)
    j = source(t.lane, operator.index(b) & (WARP - 1))
    if j is None or not meeting.arrived >> j & 1:
        return value
    return meeting.values[j]


def shfl_sync(self, mask, value, src_lane):
    """Value of lane ``src_lane % 32``; own value if that lane is not taking part."""
    return _shuffle("shfl_sync", mask, value, src_lane, lambda lane, b: b)


def shfl_up_sync(self, mask, value, delta):
    """Value of lane ``lane - delta``; own value below lane 0 (``delta % 32``)."""
    return _shuffle(
        "shfl_up_sync", mask, value, delta, lambda lane, b: lane - b if lane >= b else None
    )


def shfl_down_sync(self, mask, value, delta):
    """Value of lane ``lane + delta``; own value past lane 31 (``delta % 32``)."""
    return _shuffle(
        "shfl_down_sync",
        mask,
        value,
        delta,
        lambda lane, b: lane + b if lane + b < WARP else None,
    )


def shfl_xor_sync(self, mask, value, lane_mask):
    """Value of lane ``lane ^ (lane_mask % 32)``."""
    return _shuffle("shfl_xor_sync", mask, value, lane_mask, lambda lane, b: lane ^ b)


# -- barrier, votes, matches --------------------------------------------------------


def syncwarp(self, mask=FULL_MASK):
    """Wait until every live lane of ``mask`` has called ``syncwarp`` with ``mask``."""
    t = _thread()
    t._manager.meet(t, "syncwarp", _mask(mask), None)


def _vote(op: str, mask, predicate) -> dict:
    """Meet, then {lane: predicate as bool} for the lanes that took part."""
    if isinstance(predicate, (float, np.floating)):  # a TypingError on a GPU
        raise TypeError("%s: the predicate must be an integer or a bool" % op)
    t = _thread()
    meeting = t._manager.meet(t, op, _mask(mask), bool(predicate))
    return {j: meeting.values[j] for j in _lanes(meeting.arrived)}


def ballot_sync(self, mask, predicate):
    """Bit ``j`` set iff lane ``j`` takes part and its predicate is non-zero."""
    votes = _vote("ballot_sync", mask, predicate)
    return _int32(sum(1 << j for j, p in votes.items() if p))


def all_sync(self, mask, predicate):
    """True iff the predicate is non-zero on every lane taking part."""
    return all(_vote("all_sync", mask, predicate).values())


def any_sync(self, mask, predicate):
    """True iff the predicate is non-zero on some lane taking part."""
    return any(_vote("any_sync", mask, predicate).values())


def eq_sync(self, mask, predicate):
    """True iff the predicate is zero on all lanes taking part, or non-zero on all."""
    return len(set(_vote("eq_sync", mask, predicate).values())) == 1


def _match(op: str, mask, value):
    """Meet, then (own bits, {lane: bits}) of the lanes that took part."""
    _check_value(op, value)
    t = _thread()
    meeting = t._manager.meet(t, op, _mask(mask), _bits(value))
    return meeting.values[t.lane], {j: meeting.values[j] for j in _lanes(meeting.arrived)}


def match_any_sync(self, mask, value):
    """Mask of the lanes taking part whose ``value`` has the caller's bit pattern."""
    own, lanes = _match("match_any_sync", mask, value)
    return _int32(sum(1 << j for j, bits in lanes.items() if bits == own))


def match_all_sync(self, mask, value):
    """``(mask of lanes taking part, True)`` if all hold equal bits, else ``(0, False)``."""
    own, lanes = _match("match_all_sync", mask, value)
    if all(bits == own for bits in lanes.values()):
        return _int32(sum(1 << j for j in lanes)), True
    return _int32(0), False


def _grid_sync(self):
    """``cuda.cg.this_grid().sync()``: a barrier of the block where the grid is one
    block. The simulator runs blocks one after another, so those of a larger grid
    can never meet: refused there (Numba's simulator passed a barrier of each block
    alone, and the kernel read what the other blocks had not yet written)."""
    t = _thread()
    grid = t.cuda_module.gridDim
    if grid.x * grid.y * grid.z > 1:
        raise RuntimeError(
            "this_grid().sync() under the simulator: its blocks run one after another "
            "and cannot meet, so a grid of %d blocks cannot sync; launch one block, or "
            "run on a GPU" % (grid.x * grid.y * grid.z))
    t.syncthreads()


# -- bit intrinsics (Numba's simulator reads every int as 32 bits of a Python int) -----


def _typed(op: str, val) -> np.integer:
    """``val`` as Numba types it in a kernel: a NumPy integer as itself, a bool as
    int8, a Python int as int64 (literals and their arithmetic, which wraps on a GPU
    where Python's grows; uint64 from 2**63 to 2**64). A float, which Numba would
    convert without a word, is a TypeError here."""
    if isinstance(val, np.integer):
        return val
    if isinstance(val, (bool, np.bool_)):
        return np.int8(val)
    if isinstance(val, int):
        if 1 << 63 <= val < 1 << 64:
            return np.uint64(val)
        return np.int64((val + (1 << 63)) % (1 << 64) - (1 << 63))
    why = (" (on a GPU Numba would convert it to one silently)"
           if isinstance(val, (float, np.floating)) else "")
    raise TypeError("%s: takes an integer%s, got %s" % (op, why, type(val).__name__))


def _register(v: np.integer) -> int:
    """The bits of ``v`` in its own width, two's complement."""
    return int(v) & ((1 << 8 * v.dtype.itemsize) - 1)


def popc(self, val):
    """Set bits of ``val`` in its own width (a ballot's int32 -1 has 32), in its type."""
    v = _typed("popc", val)
    return v.dtype.type(_register(v).bit_count())


def clz(self, val):
    """Leading zero bits of ``val`` in its own width (``clz(int64(1))`` is 63), in its
    type."""
    v = _typed("clz", val)
    return v.dtype.type(8 * v.dtype.itemsize - _register(v).bit_length())


def ffs(self, val):
    """1-based position of the lowest set bit of ``val``, 0 for none, as uint32.
    Numba compiles it for 32- and 64-bit integers only."""
    v = _typed("ffs", val)
    if v.dtype.itemsize < 4:
        raise TypeError("ffs: Numba compiles ffs for 32- and 64-bit integers only, got "
                        "%s" % v.dtype)
    bits = _register(v)
    return np.uint32((bits & -bits).bit_length())


def brev(self, val):
    """``val``'s bits reversed. Numba's brev takes uint32 and uint64: a uint64 (or an
    int from 2**63) is reversed in 64 bits, anything else converted to uint32 first
    (narrower integers sign-extended, wider ones cut to their low 32 bits), so
    ``brev(1)`` is ``uint32(2**31)``."""
    v = _typed("brev", val)
    if v.dtype == np.uint64:
        return np.uint64(int(format(int(v), "064b")[::-1], 2))
    return np.uint32(int(format(int(v) & 0xFFFFFFFF, "032b")[::-1], 2))


def activemask(self):
    """Lanes converged at this call site (see the module docstring), as uint32."""
    t = _thread()
    caller = sys._getframe(1)
    return np.uint32(t._manager.converge(t, (caller.f_code, caller.f_lasti)))


def lanemask_lt(self):
    """Lanes numbered below the caller's, active or not, as uint32."""
    return np.uint32((1 << _thread().lane) - 1)


_INTRINSICS = {
    fn.__name__: fn
    for fn in (
        shfl_sync,
        shfl_up_sync,
        shfl_down_sync,
        shfl_xor_sync,
        syncwarp,
        ballot_sync,
        all_sync,
        any_sync,
        eq_sync,
        match_any_sync,
        match_all_sync,
        activemask,
        lanemask_lt,
    )
}
# Numba's simulator has these, reading a negative int (a ballot of a full warp is
# int32 -1) or a 64-bit one wrongly: replaced
_BIT_INTRINSICS = {fn.__name__: fn for fn in (popc, clz, ffs, brev)}
