"""Atomic-fold grid reduce: one launch, each block folds its result with an atomic.

The lesson
----------
Instead of a second launch, thread 0 of every block folds its block's state
straight into the output with an atomic read-modify-write:

1. The output starts as the op's identity (a tiny copy before the launch).
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

One launch and no partials, but blocks arrive in an order the scheduler picks: a
float sum may differ in the last bits **run to run** (float addition is not
associative), and the op must be **commutative**. Contention is low (one atomic per
block, not per element), so speed matches the two-pass reduce.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype

from numbakern import kernels
from numbakern.bits import bitcast
from numbakern.launch import launch
from numbakern.strategy import Cost, GridStrategy

# Numba's native atomics, by op, and the dtypes they take (numba.cuda.atomic docs).
_NATIVE = {
    "add": ("i4", "u4", "i8", "u8", "f4", "f8"),
    "max": ("i4", "u4", "i8", "u8"),
    "min": ("i4", "u4", "i8", "u8"),
    "and_": ("i4", "u4", "i8", "u8"),
    "or_": ("i4", "u4", "i8", "u8"),
    "xor": ("i4", "u4", "i8", "u8"),
}


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


class AtomicFold(GridStrategy):
    """Grid reduce in one launch: each block folds its state into the output atomically.

    Args:
        block: the block strategy (default ``WarpShuffle()``).
        blocks: blocks in the launch; ``None`` chooses from the input size and device.

    Not deterministic for floats (block order varies); needs a commutative op; serves
    one-field ops.

    Raises:
        TypeError: for a two-field op (argmax and friends), which has no atomic here.
    """

    name = "atomic_fold"
    deterministic = False
    needs_commutative = True

    def reduce(self, job):
        """Reduce ``job.x`` to one state; returns the field arrays (length 1)."""
        if job.kit.fields != 1:
            raise TypeError(
                f"atomic_fold folds one-field ops only; {job.op.name} has two fields: "
                "use two_pass"
            )
        threads = self.block.threads
        blocks = job.grid_blocks(self.blocks, threads)
        field = job.kit.dtypes[0]
        word = fold_dtype(field)
        native = native_atomic(job.op, field)
        init = np.asarray(job.kit.identity_values[0]).astype(word)
        if native is None:  # the CAS loop swaps the word's bits as an integer
            word = np.dtype(f"i{word.itemsize}")
            init = init.view(word)
        out = job.alloc_full(init, word)
        key = ("atomic_fold", native, word.str, self.block.key, job.key)
        kernel = kernels.cached(
            key,
            lambda: kernels.build_reduce_kernel(
                self.block, job.kit, job.element_loader(), _fold(job, native, field), False
            ),
        )
        launch(kernel, blocks, threads, job.stream, job.x, out, job.n, out, out)
        if native is None:
            out = job.view_as(out, fold_dtype(field))
        return (out,)

    def cost(self, n: int, itemsize: int, state_bytes: int, blocks: int) -> Cost:
        return Cost(1, n * itemsize + state_bytes, state_bytes, blocks)


def _fold(job, native: str | None, field: np.dtype):
    word = from_dtype(fold_dtype(field))
    if native is not None:
        atomic = _NATIVE_FOLD[native]

        @cuda.jit(device=True)
        def emit(o0, o1, s):
            if cuda.threadIdx.x == 0:
                atomic(o0, word(s[0]))

        return emit

    f = job.op.device_combine()
    bits = from_dtype(np.dtype(f"i{fold_dtype(field).itemsize}"))

    @cuda.jit(device=True)
    def emit(o0, o1, s):
        if cuda.threadIdx.x == 0:
            mine = word(s[0])
            old = o0[0]
            while True:
                new = bitcast(word(f(bitcast(old, word), mine)), bits)
                seen = cuda.atomic.cas(o0, 0, old, new)
                if seen == old:
                    break
                old = seen

    return emit


# One device function per native atomic: `cuda.atomic.<name>` must be spelled out in
# device code (the simulator swaps the `cuda` module inside kernels only).
@cuda.jit(device=True)
def _atomic_add(o, v):
    cuda.atomic.add(o, 0, v)


@cuda.jit(device=True)
def _atomic_max(o, v):
    cuda.atomic.max(o, 0, v)


@cuda.jit(device=True)
def _atomic_min(o, v):
    cuda.atomic.min(o, 0, v)


@cuda.jit(device=True)
def _atomic_and(o, v):
    cuda.atomic.and_(o, 0, v)


@cuda.jit(device=True)
def _atomic_or(o, v):
    cuda.atomic.or_(o, 0, v)


@cuda.jit(device=True)
def _atomic_xor(o, v):
    cuda.atomic.xor(o, 0, v)


_NATIVE_FOLD = {"add": _atomic_add, "max": _atomic_max, "min": _atomic_min,
                "and_": _atomic_and, "or_": _atomic_or, "xor": _atomic_xor}
