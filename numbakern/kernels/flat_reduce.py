"""The whole-array reduce kernel: compose a load, a thread reduce, a block strategy and an emit.

Every reduce kernel has the signature ``kernel(a0, a1, n, o0, o1)`` and the same three
steps per thread:

1. **Thread reduce.** Fold this thread's elements, read straight from device memory.
   Commutative ops read grid-strided (thread ``g`` takes ``g, g + G, g + 2G, ...``:
   every warp load is coalesced) with eight loads in flight per trip, or, for an
   aligned contiguous 1-D input, four 16-byte vector loads (``numbakern/kernels/vector.py``);
   non-commutative ops take one contiguous run of elements each, so that thread
   order is element order.
2. **Block reduce.** The block strategy's device function; valid in thread 0.
3. **Emit.** The grid strategy's device function (``numbakern/kernels/emits.py``):
   store the result, write a partial, or fold it into the output with an atomic.

``a0``/``a1`` are the input: the array and an unused placeholder for the first pass,
or the handles of an array of partial states for a second pass (``kit.pack``,
``numbakern/ops/state.py``); ``o0``/``o1`` the handles of the output states. ``n`` is an int64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda, int64, uint64

from numbakern.kernels.emits import Emit, emit_partial, emit_store
from numbakern.kernels.vector import lane_folder, rows_aligned, vector_lanes, vector_loader
from numbakern.ops.state import StateKit
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import ceil_div, max_resident_blocks
from numbakern.runtime.launch import launch

UNROLL = 8


# --- loads: element i of the input as a state ------------------------------------


def element_loader(kit: StateKit, ndim: int):
    """Device function ``load(a0, a1, i) -> state`` reading element ``i`` (C order).

    1-D inputs may have any stride; 2-D inputs are unravelled (row ``i // cols``),
    which keeps a strided view such as ``x[:, ::2]`` copy-free.
    """
    to_state = kit.to_state
    if ndim == 1:

        @cuda.jit(device=True)
        def load(a0, a1, i):
            return to_state(a0[i], int64(i))

    elif ndim == 2:

        @cuda.jit(device=True)
        def load(a0, a1, i):
            j = int64(i)  # signed: a uint64 mixed with the int64 shape would be a float
            cols = a0.shape[1]
            return to_state(a0[j // cols, j % cols], j)

    else:
        raise ValueError(f"reduce kernels take 1-D or 2-D inputs, got {ndim}-D")
    return load


# --- thread reduce ----------------------------------------------------------------


def strided_thread_reduce(kit: StateKit, load, threads: int):
    """Grid-stride fold with UNROLL independent loads in flight (commutative ops).

    The index is unsigned: Numba then skips the negative-index wrap-around it adds
    to every signed subscript (five integer instructions per load, measurable at
    memory speed: bench/NOTES.md). Every constant is typed uint64 too, since Numba
    turns uint64 mixed with int64 into float64.
    """
    combine, identity = kit.combine, kit.identity
    block = uint64(threads)
    k2, k3, k4, k5, k6, k7, k8 = (uint64(k) for k in range(2, 9))

    @cuda.jit(device=True)
    def thread_reduce(a0, a1, n64):
        n = uint64(n64)
        stride = uint64(cuda.gridDim.x) * block
        i = uint64(cuda.blockIdx.x) * block + uint64(cuda.threadIdx.x)
        s = identity()
        # Eight loads issued before any combine: more bytes in flight per thread.
        while i + k7 * stride < n:
            v0 = load(a0, a1, i)
            v1 = load(a0, a1, i + stride)
            v2 = load(a0, a1, i + k2 * stride)
            v3 = load(a0, a1, i + k3 * stride)
            v4 = load(a0, a1, i + k4 * stride)
            v5 = load(a0, a1, i + k5 * stride)
            v6 = load(a0, a1, i + k6 * stride)
            v7 = load(a0, a1, i + k7 * stride)
            low = combine(combine(v0, v1), combine(v2, v3))
            high = combine(combine(v4, v5), combine(v6, v7))
            s = combine(s, combine(low, high))
            i += k8 * stride
        while i < n:
            s = combine(s, load(a0, a1, i))
            i += stride
        return s

    return thread_reduce


def vector_thread_reduce(kit: StateKit, load, to_state, threads: int, width: int):
    """Grid-stride fold over ``width``-element vectors, four 16-byte loads in flight
    (commutative ops, aligned contiguous 1-D input).

    Vector ``j`` holds elements ``j*W .. j*W + W-1``; the ``n % W`` elements past the
    last whole vector are read by the first threads with ``load``. Measured on an
    H200 (bench/NOTES.md): a 2^28 float32 sum's kernel 270 -> 254 us against eight
    scalar loads in flight. ``to_state(value, index)``: an element as a state.
    """
    combine, identity = kit.combine, kit.identity
    vload = vector_loader(width)
    block, W = uint64(threads), uint64(width)
    k2, k3, k4 = uint64(2), uint64(3), uint64(4)
    fold = lane_folder(combine, to_state, 0, width)

    @cuda.jit(device=True)
    def thread_reduce(a0, a1, n64):
        n = uint64(n64)
        vectors = n // W
        stride = uint64(cuda.gridDim.x) * block
        g = uint64(cuda.blockIdx.x) * block + uint64(cuda.threadIdx.x)
        s = identity()
        j = g
        while j + k3 * stride < vectors:
            v0 = vload(a0, j)
            v1 = vload(a0, j + stride)
            v2 = vload(a0, j + k2 * stride)
            v3 = vload(a0, j + k3 * stride)
            low = combine(fold(v0, j * W), fold(v1, (j + stride) * W))
            high = combine(fold(v2, (j + k2 * stride) * W), fold(v3, (j + k3 * stride) * W))
            s = combine(s, combine(low, high))
            j += k4 * stride
        while j < vectors:
            s = combine(s, fold(vload(a0, j), j * W))
            j += stride
        tail = vectors * W + g
        if tail < n:
            s = combine(s, load(a0, a1, tail))
        return s

    return thread_reduce


def vector_width(x, ordered: bool) -> int:
    """Elements per 16-byte vector load for a first pass over ``x``, or 0 for scalar
    loads: only a C-contiguous 1-D numeric input whose data is 16-byte aligned (as
    CUB's ``LOAD_VECTORIZE``), read grid-strided (``ordered`` False)."""
    dtype = np.dtype(x.dtype)
    width = vector_lanes(dtype)
    if ordered or x.ndim != 1 or not width:
        return 0
    if x.strides[0] != dtype.itemsize and x.shape[0] > 1:
        return 0
    return width if rows_aligned(x, 0) else 0


def contiguous_thread_reduce(kit: StateKit, load, threads: int):
    """Each thread folds one contiguous run, in order (non-commutative ops)."""
    combine, identity = kit.combine, kit.identity

    @cuda.jit(device=True)
    def thread_reduce(a0, a1, n):
        total = int64(cuda.gridDim.x) * threads
        g = int64(cuda.blockIdx.x) * threads + cuda.threadIdx.x
        per = (n + total - 1) // total
        start = g * per
        stop = min(start + per, n)
        s = identity()
        i = start
        while i < stop:
            s = combine(s, load(a0, a1, i))
            i += 1
        return s

    return thread_reduce


# --- the kernel -------------------------------------------------------------------


def build_reduce_kernel(block, kit: StateKit, load, emit, ordered: bool, vector: int = 0):
    """A ``@cuda.jit`` kernel ``(a0, a1, n, o0, o1)``: thread, block, then emit.

    Args:
        block: the block strategy (``strategies/protocols.py``).
        kit: the op's state device functions.
        load: ``load(a0, a1, i) -> state``.
        emit: ``emit(o0, o1, row, pos, piece, S, M, s)`` (``numbakern/kernels/
            emits.py``), called by thread 0 with the block's state: piece
            ``blockIdx.x`` of ``gridDim.x`` of the one output.
        ordered: keep element order (contiguous runs per thread) for
            non-commutative ops.
        vector: read ``a0`` in vectors of ``vector`` elements (see
            :func:`vector_width`), or 0.
    """
    threads = block.threads
    temp = kit.shared_temp(block.temp_slots())
    if ordered:
        thread_reduce = contiguous_thread_reduce(kit, load, threads)
    elif vector:
        thread_reduce = vector_thread_reduce(kit, load, kit.to_state, threads, vector)
    else:
        thread_reduce = strided_thread_reduce(kit, load, threads)
    block_reduce = block.build_reduce(kit)

    @cuda.jit
    def reduce_kernel(a0, a1, n, o0, o1):
        temp0, temp1 = temp()
        s = thread_reduce(a0, a1, n)
        s = block_reduce(s, temp0, temp1)
        if cuda.threadIdx.x == 0:
            emit(o0, o1, 0, 0, cuda.blockIdx.x, cuda.gridDim.x, 1, s)

    return reduce_kernel


# --- the layout a reduce job hands the grid strategy ------------------------------------


@dataclass(frozen=True)
class FlatPlan:
    """A whole-array first pass: ``blocks`` blocks of ``block.threads`` threads, each
    block one piece of the one output."""

    block: object
    blocks: int

    @property
    def pieces(self) -> int:
        return self.blocks


class FlatReduce:
    """Reduce the whole of ``x`` (a 1-D or 2-D strided device view of ``n`` elements)
    to one output: each block folds a share (grid-strided, or contiguous runs for an
    ordered op) and is one piece of it.

    Args:
        x, n: the input view and its element count.
        kit: the op's state kit.
        ordered: keep element order (a non-commutative op).
        vectors: read an aligned contiguous input in 16-byte vectors where it allows
            (``False``: scalar loads, so that every element's load can be watched).
    """

    outputs = 1
    finishes = True  # its storing passes take any emit (core.jobs.Finish)

    def __init__(self, x, n: int, kit: StateKit, ordered: bool, vectors: bool = True):
        self.x, self.n, self.kit, self.ordered = x, np.int64(n), kit, ordered
        self.count = int(n)
        self.vector = vector_width(x, ordered) if vectors else 0

    def plan(self, block, blocks: int | None) -> FlatPlan:
        """``blocks`` (at most one an element: more would have nothing to read), or
        enough blocks to fill the device once (fewer for small inputs)."""
        if blocks is not None:
            return FlatPlan(block, max(1, min(blocks, self.count)))
        want = ceil_div(self.count, block.threads * UNROLL)
        return FlatPlan(block, max(1, min(want, max_resident_blocks(block.threads))))

    def run(self, plan: FlatPlan, emit: Emit, out, stream) -> None:
        """The first pass, each block's state to ``emit`` into ``out``."""
        kit, block = self.kit, plan.block
        key = ("flat_reduce", "x", emit.name, block.key, kit, self.x.ndim,
               np.dtype(self.x.dtype).str, self.ordered, self.vector, device_key())
        kernel = cached(key, lambda: build_reduce_kernel(
            block, kit, element_loader(kit, self.x.ndim), emit.build(), self.ordered,
            self.vector))
        launch(kernel, plan.blocks, block.threads, stream, self.x, out[1], self.n, *out)

    def emit_partial(self, plan: FlatPlan) -> Emit:
        """Partial ``piece`` (block ``piece``'s state)."""
        return emit_partial(self.kit, False)

    def reduce_partials(self, plan: FlatPlan, partials, out, stream, emit=None) -> None:
        """One block reduces the ``plan.blocks`` partials, in block order, with the same
        block strategy, into ``out`` (through ``emit``: by default the state's store;
        a finish, ``numbakern/kernels/finishes.py``)."""
        kit, block = self.kit, plan.block
        store = emit_store(kit) if emit is None else emit
        key = ("flat_reduce", "partials", store.name, block.key, kit, self.ordered,
               device_key())
        kernel = cached(key, lambda: build_reduce_kernel(
            block, kit, kit.load, store.build(), self.ordered))
        launch(kernel, 1, block.threads, stream, *partials, plan.blocks, *out)
