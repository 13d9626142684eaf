"""Atomic-fold grid reduce: one launch, each block folds its result with an atomic.

The lesson
----------
Instead of a second launch, thread 0 of every block folds its block's state
straight into the output with an atomic read-modify-write:

1. The output starts as the op's identity (a tiny fill before the launch).
2. ``G`` blocks reduce their share of the input with the block strategy.
3. Thread 0 of each block folds its state into the output:

   * a **native atomic** where the hardware has one for the op and type
     (``atomicAdd`` on int32/uint32/int64/uint64/float32/float64; ``atomicMax``,
     ``atomicMin``, ``atomicAnd``/``Or``/``Xor`` on integers). Narrow types
     (bool, 8- and 16-bit) fold in a 32-bit word.
   * otherwise a **compare-and-swap loop**: read the word, combine, try to swap
     the new bits in, retry if another block got there first. This serves float
     max/min (NumPy propagates NaN, which Numba's float ``atomic.max`` does not
     promise), products, and a user's own ops.

One reduce launch (after a fill of the output with the identity) and no partials,
but blocks arrive in an order the scheduler picks: a
float sum may differ in the last bits **run to run** (float addition is not
associative), and the op must be **commutative**. Contention is low (one atomic per
block, not per element), so speed matches the two-pass reduce.

Two-field states (argmax and friends)
-------------------------------------
No GPU has an atomic on a (value, index) pair: the hardware swaps at most 64 bits.
Two methods, chosen per call:

* **packed** (argmax/argmin when the value has at most 32 bits and every index fits
  in 32 bits, i.e. at most 2**32 elements per output): one 64-bit word per output,
  ``key(value) << 32 | tie(index)``, folded with the native unsigned 64-bit
  ``atomicMax``. ``key`` maps values to uint32 so that unsigned order is the op's
  order (floats: the IEEE sign-magnitude trick, both zeros on one key so that
  ``-0.0`` and ``0.0`` tie as they compare equal; NaN on the top key; argmin
  reverses the keys) and ``tie`` makes the winning index the larger word
  (``2**32 - 1 - index`` for ``tie_break_left``, the index itself otherwise). The
  word order *is* the pair order, so one ``atomicMax`` is the whole combine. A small
  kernel unpacks the words into values and indices afterwards. A value read back
  from its key loses only the sign of a zero (``-0.0`` comes back as ``0.0``) and a
  NaN's payload.
* **lock** (every other two-field state: 64-bit values, more than 2**32 elements
  per output, a user's two-field op): a spin lock per output. The folding thread
  takes the lock with ``atomicCAS(lock, 0, 1)``, fences, reads both fields with
  atomics (they bypass the non-coherent L1, so the previous holder's writes are
  seen), combines, writes both fields with ``atomicExch``, fences and releases the
  lock with ``atomicExch(lock, 0)``. Only one thread per block (per output) takes a
  lock and it holds no other, so the lock cannot deadlock: the holder always makes
  progress (independent thread scheduling, sm_70+, also makes divergent lanes of one
  warp safe).

Determinism: argmax/argmin combine under a total order (value, then index), so every
strategy, this one included, returns the exact same index and value on every run.
Float sums and products through atomics may differ in the last bits run to run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda, from_dtype, int64, uint32, uint64

from numbakern.kernels.elementwise import THREADS, fill, grid_for
from numbakern.kernels.emits import emit_fold
from numbakern.ops import ArgOp
from numbakern.runtime.bits import bitcast
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.launch import launch
from numbakern.runtime.views import head, view_as

from .protocols import Cost, GridReduce

# Numba's native atomics, by op, and the dtypes they take (numba.cuda.atomic docs).
_NATIVE = {
    "add": ("i4", "u4", "i8", "u8", "f4", "f8"),
    "max": ("i4", "u4", "i8", "u8"),
    "min": ("i4", "u4", "i8", "u8"),
    "and_": ("i4", "u4", "i8", "u8"),
    "or_": ("i4", "u4", "i8", "u8"),
    "xor": ("i4", "u4", "i8", "u8"),
}

MASK32 = 0xFFFFFFFF
SIGN32 = 0x80000000
#: the most elements per output the packed argmax word can index
PACKED_MAX_COUNT = 1 << 32


def fold_dtype(dtype: np.dtype) -> np.dtype:
    """The 32/64-bit word a state field of ``dtype`` is folded in."""
    dtype = np.dtype(dtype)
    if dtype.itemsize >= 4:
        return dtype
    return np.dtype(np.uint32 if dtype.kind == "u" else np.int32)


def native_atomic(op, dtype: np.dtype) -> str | None:
    """The ``numba.cuda.atomic`` function that folds ``op`` on ``dtype``, if any."""
    dtype = fold_dtype(dtype)
    if op.atomic is None or (op.nan_propagating and dtype.kind == "f"):
        return None
    code = dtype.kind + str(dtype.itemsize)
    return op.atomic if code in _NATIVE.get(op.atomic, ()) else None


@dataclass(frozen=True)
class Folder:
    """How atomic_fold folds one op's states into an array of ``m`` output slots.

    Attributes:
        method: ``"native:<atomic>"``, ``"cas"``, ``"packed"`` or ``"lock"``.
        fold: device function ``fold(w0, w1, i, s)``: fold state ``s`` into slot ``i``;
            called by one thread per block and slot.
        alloc: ``alloc(workspace, m) -> (w0, w1)``: the word arrays, set to the
            identity.
        finish: ``finish(workspace, w0, w1, m) -> fields``: the result, one array per
            field (in a dtype the field's values convert to exactly).
    """

    method: str
    fold: Callable
    alloc: Callable
    finish: Callable

    @property
    def key(self) -> tuple:
        return ("folder", self.method)


def _check_fields(op, kit) -> None:
    if kit.fields > 2:
        used = " (var and std reduce these states)" if "moments" in op.name else ""
        raise ValueError(f"strategy: atomic_fold cannot fold {op.name}'s state of "
                         f"{kit.fields} fields{used}: it folds one field by an atomic and "
                         "two by a packed word or a lock; use a two_pass strategy")


def folder_for(op, kit, count: int) -> Folder:
    """The :class:`Folder` for ``op``'s states (``kit``), ``count`` elements per output.

    One-field ops fold natively or by CAS; argmax/argmin pack when the value has at
    most 32 bits and ``count <= 2**32``; every other two-field state takes the lock.

    Raises:
        ValueError: a state of more than two fields (var's ``(count, mean, M2)``), or
            a field wider than the 8 bytes an atomic moves: two_pass reduces those.
    """
    _check_fields(op, kit)
    wide = [str(d) for d in kit.dtypes if d.itemsize > 8]
    if wide:
        raise ValueError(f"atomic_fold cannot fold {op.name}'s state: its {wide[0]} field "
                         "is wider than the 8 bytes an atomic moves; use a two_pass "
                         "strategy")
    if kit.fields == 1:
        build, method = _one_field, "one"
    elif isinstance(op, ArgOp) and kit.dtypes[0].itemsize <= 4 and count <= PACKED_MAX_COUNT:
        build, method = _packed, "packed"
    else:
        build, method = _locked, "lock"
    key = ("folder", method, op, kit.dtypes, device_key())
    return cached(key, lambda: build(op, kit))


class AtomicFold(GridReduce):
    """Grid reduce in one launch: each block folds its state into the output atomically.

    Luitjens, "Faster Parallel Reductions on Kepler" (NVIDIA blog, 2014): a block
    reduce, then one ``atomicAdd`` a block; the compare-and-swap loop for ops with no
    native atomic is the CUDA C++ Programming Guide's (Atomic Functions, ``atomicCAS``).

    Args:
        block: the block strategy (default ``WarpShuffle()``).
        blocks: blocks in the launch; ``None`` chooses from the input size and device.

    Not deterministic for float sums and products (block order varies); exact for
    max, min, bitwise ops and argmax/argmin. Needs a commutative op. Two-field states
    fold through a packed 64-bit word or a per-output lock (module docstring).

    Raises:
        TypeError: ``block`` not a :class:`~numbakern.strategies.BlockStrategy`;
            ``blocks`` not an int (a float or a bool) or ``None``.
        ValueError: ``blocks`` an int below 1 or past ``2**31 - 1`` (a grid's most
            blocks).
    """

    name = "atomic_fold"
    deterministic = False
    needs_commutative = True

    def reduce(self, job) -> tuple:
        """Reduce every output of ``job`` (``strategies/protocols.py``, ``GridReduce``);
        returns the field arrays (each in a dtype its values convert to exactly)."""
        _check_fields(job.op, job.kit)  # at every size, not only when pieces meet
        plan = job.plan(self)
        if plan.pieces == 1:  # one block per output: nothing to fold
            return job.store(plan)
        folder = folder_for(job.op, job.kit, job.count)
        words = folder.alloc(job.workspace, job.outputs)
        job.run(plan, emit_fold(folder.key, folder.fold), words)
        return folder.finish(job.workspace, *words, job.outputs)

    def cost(self, n: int, itemsize: int, state_bytes: int, blocks: int) -> Cost:
        return Cost(1, n * itemsize + state_bytes, state_bytes, blocks)


# --- one field: a native atomic or a CAS loop ----------------------------------------


def _one_field(op, kit) -> Folder:
    field = kit.dtypes[0]
    word = fold_dtype(field)
    native = native_atomic(op, field)
    init = np.asarray(kit.identity_values[0]).astype(word)
    if native is None:  # the CAS loop swaps the word's bits as an integer
        bits = np.dtype(f"i{word.itemsize}")
        fold = _cas_fold(op, word, bits)
        init, store = init.view(bits), bits
    else:
        fold = _native_fold(native, word)
        store = word

    def alloc(workspace, m):
        w = workspace.empty(m, store)
        fill(w, init[()], workspace.stream)
        return w, w

    def finish(workspace, w0, w1, m):
        return (w0 if native else view_as(w0, word),)

    return Folder(f"native:{native}" if native else "cas", fold, alloc, finish)


def _native_fold(native: str, word: np.dtype):
    atomic = _NATIVE_FOLD[native]
    t = from_dtype(word)

    @cuda.jit(device=True)
    def fold(w0, w1, i, s):
        atomic(w0, i, t(s[0]))

    return fold


def _cas_fold(op, word: np.dtype, bits: np.dtype):
    f = op.device_combine()
    t, b = from_dtype(word), from_dtype(bits)

    @cuda.jit(device=True)
    def fold(w0, w1, i, s):
        mine = t(s[0])
        old = w0[i]
        while True:
            new = bitcast(t(f(bitcast(old, t), mine)), b)
            seen = cuda.atomic.cas(w0, i, old, new)
            if seen == old:
                break
            old = seen

    return fold


# One device function per native atomic: `cuda.atomic.<name>` must be spelled out in
# device code (the simulator swaps the `cuda` module inside kernels only).
@cuda.jit(device=True)
def _atomic_add(o, i, v):
    cuda.atomic.add(o, i, v)


@cuda.jit(device=True)
def _atomic_max(o, i, v):
    cuda.atomic.max(o, i, v)


@cuda.jit(device=True)
def _atomic_min(o, i, v):
    cuda.atomic.min(o, i, v)


@cuda.jit(device=True)
def _atomic_and(o, i, v):
    cuda.atomic.and_(o, i, v)


@cuda.jit(device=True)
def _atomic_or(o, i, v):
    cuda.atomic.or_(o, i, v)


@cuda.jit(device=True)
def _atomic_xor(o, i, v):
    cuda.atomic.xor(o, i, v)


_NATIVE_FOLD = {"add": _atomic_add, "max": _atomic_max, "min": _atomic_min,
                "and_": _atomic_and, "or_": _atomic_or, "xor": _atomic_xor}


# --- two fields, packed: key(value) << 32 | tie(index), one atomicMax -----------------


def _rank(dtype: np.dtype):
    """Device functions ``rank(v) -> uint32`` (monotone in ``v``; zeros tie) and its
    inverse ``unrank(k) -> value``, for values of at most 32 bits."""
    vt = from_dtype(dtype)
    if dtype.kind == "f":
        f32 = from_dtype(np.dtype(np.float32))

        @cuda.jit(device=True)
        def rank(v):
            b = bitcast(f32(v) + f32(0.0), uint32)  # -0.0 + 0.0 == +0.0: zeros tie
            if b < uint32(SIGN32):
                return uint32(b | uint32(SIGN32))  # positive: above every negative
            return uint32(b ^ uint32(MASK32))  # negative: larger magnitude, lower key

        @cuda.jit(device=True)
        def unrank(k):
            if k >= uint32(SIGN32):
                return vt(bitcast(uint32(k & uint32(SIGN32 - 1)), f32))
            return vt(bitcast(uint32(k ^ uint32(MASK32)), f32))

    elif dtype.kind == "i":

        @cuda.jit(device=True)
        def rank(v):
            return uint32(int64(v) + int64(SIGN32))

        @cuda.jit(device=True)
        def unrank(k):
            return vt(int64(k) - int64(SIGN32))

    else:  # unsigned and bool

        @cuda.jit(device=True)
        def rank(v):
            return uint32(v)

        @cuda.jit(device=True)
        def unrank(k):
            return vt(k)

    return rank, unrank


def _packed(op: ArgOp, kit) -> Folder:
    value = kit.dtypes[0]
    rank, unrank = _rank(value)
    is_float = value.kind == "f"
    is_max = op.direction == "max"
    left = op.tie_break_left
    identity_index = op.identity_index
    vt = from_dtype(value)
    nan = math.nan

    @cuda.jit(device=True)
    def key(v):  # NaN on top; argmin reverses the order of the numbers
        if is_float and v != v:
            return uint32(MASK32)
        if is_max:
            return rank(v)
        return uint32(uint32(MASK32) - rank(v))

    @cuda.jit(device=True)
    def fold(w0, w1, i, s):
        if s[1] != identity_index:  # a block that saw no element folds nothing
            tie = uint64(int64(MASK32) - s[1]) if left else uint64(s[1])
            word = (uint64(key(s[0])) << uint64(32)) | tie
            cuda.atomic.max(w0, i, word)

    @cuda.jit
    def unpack(w, values, indices):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < w.shape[0]:
            word = w[i]
            hi = uint32(word >> uint64(32))
            lo = int64(word & uint64(MASK32))
            indices[i] = int64(MASK32) - lo if left else lo
            if is_float and hi == uint32(MASK32):
                values[i] = vt(nan)
            elif is_max:
                values[i] = unrank(hi)
            else:
                values[i] = unrank(uint32(uint32(MASK32) - hi))
            i += step

    def alloc(workspace, m):
        w = workspace.empty(m, np.uint64)
        fill(w, 0, workspace.stream)  # below every real word; each slot gets one
        return w, w

    def finish(workspace, w0, w1, m):
        values = workspace.empty(m, value)
        indices = workspace.empty(m, np.int64)
        launch(unpack, grid_for(m), THREADS, workspace.stream, w0, values, indices)
        return values, indices

    return Folder("packed", fold, alloc, finish)


# --- two fields, locked: a spin lock per output --------------------------------------


def _word(dtype: np.dtype) -> np.dtype:
    """The 32/64-bit dtype a field is held in under the lock (values convert exactly)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize <= 4 else dtype
    return fold_dtype(dtype)


def _codec(dtype: np.dtype):
    """``to_bits(v)`` and ``from_bits(b)`` between a field and its integer word."""
    word = _word(dtype)
    bits = np.dtype(f"i{word.itemsize}")
    tw, tb, tf = from_dtype(word), from_dtype(bits), from_dtype(np.dtype(dtype))
    same = word == bits

    @cuda.jit(device=True)
    def to_bits(v):
        if same:
            return tb(v)
        return bitcast(tw(v), tb)

    @cuda.jit(device=True)
    def from_bits(b):
        if same:
            return tf(b)
        return tf(bitcast(b, tw))

    return to_bits, from_bits, word, bits


def _locked(op, kit) -> Folder:
    to0, from0, word0, bits0 = _codec(kit.dtypes[0])
    to1, from1, word1, bits1 = _codec(kit.dtypes[1])
    combine = kit.combine
    zero0, zero1, one1 = bits0.type(0), bits1.type(0), bits1.type(1)
    init0 = np.asarray(kit.identity_values[0]).astype(word0).view(bits0)[()]
    init1 = np.asarray(kit.identity_values[1]).astype(word1).view(bits1)[()]

    @cuda.jit(device=True)
    def fold(w0, w1, i, s):
        lock = w0.shape[0] + i  # w1 holds field 1, then one lock per slot
        while cuda.atomic.cas(w1, lock, zero1, one1) != zero1:
            pass
        cuda.threadfence()
        # Atomic reads: a plain load could hit a stale line in this SM's L1.
        cur = (from0(cuda.atomic.add(w0, i, zero0)), from1(cuda.atomic.add(w1, i, zero1)))
        new = combine(cur, s)
        cuda.atomic.exch(w0, i, to0(new[0]))
        cuda.atomic.exch(w1, i, to1(new[1]))
        cuda.threadfence()
        cuda.atomic.exch(w1, lock, zero1)

    def alloc(workspace, m):
        w0 = workspace.empty(m, bits0)
        w1 = workspace.empty(2 * m, bits1)
        fill(w0, init0, workspace.stream)
        fill(w1, init1, workspace.stream, m=m, rest=0)
        return w0, w1

    def finish(workspace, w0, w1, m):
        return view_as(w0, word0), view_as(head(w1, m), word1)

    return Folder("lock", fold, alloc, finish)
