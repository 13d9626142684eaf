"""Reductions along axes: row kernels, coalesced column kernels and tiny-row kernels.

The lesson
----------
Reducing axes of an N-D array is many reductions at once, one per *output*. Look
at the array as a 2-D ``(M outputs, N reduced elements)`` problem, without moving a
byte:

1. **Logical transpose.** Kept axes go first, reduced axes last. Each group is
   *collapsed*: axes are sorted by stride and merged where the memory allows
   (``stride_outer == extent * stride_inner``), so a C-ordered ``sum(axis=(1, 2))``
   of a 3-D array is one run of ``N`` contiguous elements per output. At most two
   dimensions per group remain (more would need a copy, announced with
   :class:`~numbakern.core.arrays.CopyWarning`; ``numbakern/core/layout.py``); the
   kernels see a 4-D strided view
   ``[K0, K1, R0, R1]`` of the original memory. Each output remembers where it goes
   in the C-ordered result (``out_mult``) and, for argmax, each reduced element its
   C-order index (``index_mult``), so the traversal order never shows in the answer.
2. **Pick the kernel that keeps loads coalesced** (adjacent threads, adjacent
   addresses):

   * **row kernel** when the reduced elements are the closer-packed ones (the
     innermost reduced stride is at most the innermost kept stride): a *group* of
     threads owns a row and reads it strided by the group size. The group is one
     **block** (``lanes = threads``; the block strategy's ``build_reduce`` combines
     it) or one **warp** (``lanes = 32``, ``threads / 32`` rows per block, the block
     strategy's warp form combines it; chosen by default for rows of at most
     :data:`WARP_ROW_MAX` elements when the strategy has a warp form: a short row
     would leave most of a block idle and pay a barrier per row). Rows are
     grid-strided.
     Rows that all start 16-byte aligned are read in 16-byte vectors
     (:func:`vector_row_reducer`).
   * **tiny-row kernel** for rows of one aligned vector each (4 to 16 bytes) lying
     back to back: a thread per row, one load, folded onto the op's identity as
     every other path folds (:func:`build_tiny_row_kernel`).
   * **column kernel** otherwise: each thread owns an output *column* and walks the
     reduced axis, so a warp reads ``C`` adjacent columns of one row. When there are
     fewer than ``threads`` columns, ``G = threads / C`` thread groups split the
     reduced axis and are combined per column in shared memory (a tree with growing
     offsets: element order is kept). Other short rows (at most
     :data:`THREAD_ROW_BYTES`) also go here, one thread per row: a warp then reads
     32 short rows that lie side by side.
3. **Split long rows over blocks.** When there are too few rows (or column tiles)
   to fill the GPU, each row is cut into ``S`` pieces, one block each, and the
   **grid strategy** decides how the pieces meet (``strategies/protocols.py``,
   ``GridReduce``): ``two_pass`` writes ``S`` partial states per output and a second
   launch reduces them (deterministic): the row kernel's partials lie
   ``[output][piece]`` and a warp (or block) per output reduces them; the column
   kernel's lie ``[piece][output]`` and the column kernel reduces them, a thread per
   output, reads coalesced. ``atomic_fold`` folds each piece into the output with an
   atomic (one launch). With ``S = 1`` both store the result directly.

Every kernel loads ``UNROLL`` elements before combining them (bytes in flight), does
its in-row index arithmetic in int32 when the row allows, and works for any op the
strategies take: one-field ops, and value-index pairs (argmax), whose element state
is the kit's ``to_state(value, index)``. The layouts at the end of this module
(:class:`AxisReduce`, :class:`TinyRows`) are what a reduce job hands the grid
strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import cuda, int32, int64, uint32, uint64

from numbakern.kernels.elementwise import THREADS, grid_for
from numbakern.kernels.emits import Emit, emit_partial, emit_store
from numbakern.kernels.vector import (VECTOR_BYTES, lane_folder, lane_states, rows_aligned,
                                      vector_lanes, vector_loader)
from numbakern.runtime.checks import check_count
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import (SIMULATOR, WARP, blocks_per_multiprocessor, ceil_div,
                                      max_resident_blocks, resident_blocks)
from numbakern.runtime.launch import bounded_jit, launch
from numbakern.runtime.views import address, span_view

UNROLL = 8
#: rows of at most this many elements get one warp each, unless ``lanes`` says otherwise
#: (H200, float32 rows read in vectors: a warp per row of 4096 took 124 us against a
#: block's 168; at 32768 the block won the sum, 121 against 137 us; bench/NOTES.md)
WARP_ROW_MAX = 16384
#: rows of at most this many bytes get one thread each (the column kernel)
THREAD_ROW_BYTES = 32
#: fewest elements per thread in one piece of a split row
PIECE_MIN_PER_THREAD = 4 if SIMULATOR else 4 * UNROLL
MAX_PIECES = 65535
#: an output of at most this many partials gets a warp in the partials' pass (each lane
#: loads at most UNROLL of them in flight); more get a block. One warp took 5.2 us over
#: the 1056 partials of a flat argmax of 2^24 float32 (H100, bench/NOTES.md)
PARTIALS_WARP_MAX = UNROLL * WARP


# --- device functions -------------------------------------------------------------------


def view_loader(kit, reduced_dims: int, index32: bool, masked: bool = False):
    """``load(a0, a1, k0, k1, row, r, N, R1, c0, c1)``: element ``r`` of output
    ``(k0, k1)`` of the 4-D view ``a0``, as a state (its index ``r0*c0 + r1*c1``).

    Two reduced dimensions cost a division per element: 32-bit with ``index32``
    (unsigned: LLVM narrows a udiv of zero-extended int32s), else 64-bit.
    ``masked``: ``a1`` is NumPy's ``where=`` mask, a bool view indexed as ``a0``; an
    element it masks out is the op's identity (its value is not read).
    """
    to_state, identity = kit.to_state, kit.identity
    # Unsigned indices: Numba adds no negative-index wraparound test to the load.
    u = uint32 if index32 else uint64
    if masked and reduced_dims == 1:

        @cuda.jit(device=True)
        def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
            if not a1[k0, k1, 0, u(r)]:
                return identity()
            return to_state(a0[k0, k1, 0, u(r)], r * c1)

    elif masked:

        @cuda.jit(device=True)
        def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
            r0 = u(r) // u(R1)
            r1 = u(r) - r0 * u(R1)
            if not a1[k0, k1, r0, r1]:
                return identity()
            return to_state(a0[k0, k1, r0, r1], int64(r0) * c0 + int64(r1) * c1)

    elif reduced_dims == 1:

        @cuda.jit(device=True)
        def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
            return to_state(a0[k0, k1, 0, u(r)], r * c1)

    else:

        @cuda.jit(device=True)
        def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
            r0 = u(r) // u(R1)
            r1 = u(r) - r0 * u(R1)
            return to_state(a0[k0, k1, r0, r1], int64(r0) * c0 + int64(r1) * c1)

    return load


def partial_loader(kit, by_piece: bool):
    """``load(...)``: partial state ``r`` of output ``row``: stored ``row * N + r``
    (``N`` partials per output), or ``by_piece``, ``r * R1 + row`` (``R1`` outputs per
    piece: the caller passes the output count there)."""
    load_state = kit.load

    if by_piece:

        @cuda.jit(device=True)
        def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
            return load_state(a0, a1, r * R1 + row)

    else:

        @cuda.jit(device=True)
        def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
            return load_state(a0, a1, row * N + r)

    return load


def thread_reducer(kit, load, ordered: bool, index32: bool):
    """``thread_reduce(a0, a1, k0, k1, row, start, stop, first, step, N, R1, c0, c1)``.

    Folds elements ``first, first + step, ...`` of ``[start, stop)`` with ``UNROLL``
    loads in flight (commutative ops), or, ``ordered``, the ``first``-th of ``step``
    contiguous runs of ``[start, stop)``, in order.
    """
    combine, identity = kit.combine, kit.identity
    index = int32 if index32 else int64

    if ordered:

        @cuda.jit(device=True)
        def thread_reduce(a0, a1, k0, k1, row, start, stop, first, step, N, R1, c0, c1):
            per = (stop - start + step - 1) // step
            r = start + first * per
            end = min(r + per, stop)
            s = identity()
            while r < end:
                s = combine(s, load(a0, a1, k0, k1, row, r, N, R1, c0, c1))
                r += 1
            return s

        return thread_reduce

    @cuda.jit(device=True)
    def thread_reduce(a0, a1, k0, k1, row, start, stop, first, step, N, R1, c0, c1):
        # Numba widens int32 + int32 to int64: narrowing every sum back keeps the loop
        # in 32-bit instructions (LLVM folds trunc(add(sext, sext)) to a 32-bit add).
        r = index(start + first)
        d = index(step)
        end = index(stop)
        s = identity()
        while r < index(end - 7 * d):
            r1 = index(r + d)
            r2 = index(r1 + d)
            r3 = index(r2 + d)
            r4 = index(r3 + d)
            r5 = index(r4 + d)
            r6 = index(r5 + d)
            r7 = index(r6 + d)
            v0 = load(a0, a1, k0, k1, row, r, N, R1, c0, c1)
            v1 = load(a0, a1, k0, k1, row, r1, N, R1, c0, c1)
            v2 = load(a0, a1, k0, k1, row, r2, N, R1, c0, c1)
            v3 = load(a0, a1, k0, k1, row, r3, N, R1, c0, c1)
            v4 = load(a0, a1, k0, k1, row, r4, N, R1, c0, c1)
            v5 = load(a0, a1, k0, k1, row, r5, N, R1, c0, c1)
            v6 = load(a0, a1, k0, k1, row, r6, N, R1, c0, c1)
            v7 = load(a0, a1, k0, k1, row, r7, N, R1, c0, c1)
            low = combine(combine(v0, v1), combine(v2, v3))
            high = combine(combine(v4, v5), combine(v6, v7))
            s = combine(s, combine(low, high))
            r = index(r7 + d)
        while r < end:
            s = combine(s, load(a0, a1, k0, k1, row, r, N, R1, c0, c1))
            r = index(r + d)
        return s

    return thread_reduce


def vector_row_reducer(kit, load, to_state, width: int):
    """``thread_reduce`` (as :func:`thread_reducer`'s) for a contiguous row, reading
    whole ``width``-element vectors, four 16-byte loads in flight, from ``a1``: a 1-D
    view of the rows' memory starting at ``a0``'s first element (16-byte aligned, as
    every row: :func:`row_vector_width` checks). The elements of ``[start, stop)``
    outside whole vectors go through ``load``. Elements reach the combine in a
    different order than the scalar loop's, so commutative ops only.
    """
    combine, identity = kit.combine, kit.identity
    vload = vector_loader(width)
    fold = lane_folder(combine, to_state, 0, width)
    W, itemsize = int64(width), 16 // width

    @cuda.jit(device=True)
    def thread_reduce(a0, a1, k0, k1, row, start, stop, first, step, N, R1, c0, c1):
        origin = (k0 * a0.strides[0] + k1 * a0.strides[1]) // itemsize // W
        vfirst = (int64(start) + W - 1) // W
        vstop = int64(stop) // W
        s = identity()
        j = vfirst + first
        while j + 3 * step < vstop:
            x0 = vload(a1, origin + j)
            x1 = vload(a1, origin + j + step)
            x2 = vload(a1, origin + j + 2 * step)
            x3 = vload(a1, origin + j + 3 * step)
            low = combine(fold(x0, j * W), fold(x1, (j + step) * W))
            high = combine(fold(x2, (j + 2 * step) * W), fold(x3, (j + 3 * step) * W))
            s = combine(s, combine(low, high))
            j += 4 * step
        while j < vstop:
            s = combine(s, fold(vload(a1, origin + j), j * W))
            j += step
        head = min(vfirst * W, stop)  # elements before the first whole vector
        r = start + first
        while r < head:
            s = combine(s, load(a0, a1, k0, k1, row, r, N, R1, c0, c1))
            r += step
        r = max(vstop * W, head) + first  # and after the last
        while r < stop:
            s = combine(s, load(a0, a1, k0, k1, row, r, N, R1, c0, c1))
            r += step
        return s

    return thread_reduce


def row_vector_width(av, dtype: np.dtype, ordered: bool) -> int:
    """Elements per 16-byte vector load for the row kernel over ``av``, or 0: a
    commutative op over one contiguous reduced dimension of numeric elements whose
    rows all start 16-byte aligned (CUB's ``LOAD_VECTORIZE`` condition, per row)."""
    width = vector_lanes(dtype)
    if ordered or av.reduced_dims != 1 or not width:
        return 0
    if av.view.strides[3] != dtype.itemsize or av.N < width or av.index_mult[1] > 1:
        return 0
    return width if rows_aligned(av.view, 2) else 0


def warp_reducer(block, kit):
    """``(warp_reduce(s, t0, t1), temp_slots)``: the block strategy's warp form (valid
    in lane 0), for one warp per row, and the shared-memory states all the block's
    warps need."""
    form = block.build_warp_reduce(kit)
    return form.function, form.slots * block.warps


# --- kernels ---------------------------------------------------------------------------


# A 64-bit integer division costs ~70 instructions on a GPU, a 32-bit one ~20: the row
# kernel's grid and output arithmetic divides in 32 bits where the operands allow.
# The column kernel keeps 64 bits: 32 made a (4096, 32768) column sum 164 us for 131
# (H200, bench/NOTES.md), and the tiny rows it would have served have their own kernel.


@cuda.jit(device=True)
def _pieces_of_grid(S):
    """``(piece, group, groups)``: this block's piece of its rows (``blockIdx % S``),
    its group of rows and the number of groups (``S <= MAX_PIECES``: 32 bits)."""
    s = uint32(S)
    return (int64(uint32(cuda.blockIdx.x) % s), int64(uint32(cuda.blockIdx.x) // s),
            int64(uint32(cuda.gridDim.x) // s))


def _split(outputs32: bool):
    """Device function ``split(i, K1) -> (i // K1, i % K1)``: output ``i``'s two kept
    coordinates, in 32 bits when every output index fits (``outputs32``)."""
    if outputs32:

        @cuda.jit(device=True)
        def split(i, K1):
            k0 = uint32(i) // uint32(K1)
            return int64(k0), int64(uint32(i) - k0 * uint32(K1))

        return split

    @cuda.jit(device=True)
    def split(i, K1):
        k0 = i // K1
        return k0, i - k0 * K1

    return split


def group_reducer(block, kit, lanes: int):
    """``(group_reduce, temp)``: the reduce of a group of ``lanes`` threads (the block
    strategy's reduce for the whole block, its warp form for one warp) and the device
    function allocating its shared-memory temp storage (``kit.shared_temp``)."""
    if lanes == block.threads:
        group_reduce, slots = block.build_reduce(kit), block.temp_slots()
    else:
        group_reduce, slots = warp_reducer(block, kit)
    return group_reduce, kit.shared_temp(max(1, slots))


def build_row_kernel(block, kit, load, emit, lanes: int, ordered: bool, index32: bool,
                     outputs32: bool, vector=None):
    """Row kernel ``(a0, a1, M, N, K1, R1, c0, c1, m0, m1, chunk, S, o0, o1)``.

    A group of ``lanes`` threads (the block, or one warp) owns a row at a time; block
    ``b`` takes piece ``b % S`` (elements ``[piece * chunk, piece * chunk + chunk)``)
    of rows ``b // S``, grid-strided. ``vector``: ``(width, to_state)`` to read rows
    in vectors from ``a1`` (:func:`vector_row_reducer`). ``outputs32``: ``M < 2**31``,
    so the row's division by ``K1`` runs in 32 bits (see :func:`_split`).
    """
    threads = block.threads
    group_reduce, temp = group_reducer(block, kit, lanes)
    per_block = threads // lanes
    barrier = lanes == threads  # the block's temp storage is reused by the next row
    if vector:
        thread_reduce = vector_row_reducer(kit, load, vector[1], vector[0])
    else:
        thread_reduce = thread_reducer(kit, load, ordered, index32)
    split = _split(outputs32)

    @cuda.jit
    def row_kernel(a0, a1, M, N, K1, R1, c0, c1, m0, m1, chunk, S, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        lane = tid % lanes
        piece, group, groups = _pieces_of_grid(S)
        start = piece * chunk
        stop = min(start + chunk, N)
        row = group * per_block + tid // lanes
        step = groups * per_block
        while row < M:
            k0, k1 = split(row, K1)
            s = thread_reduce(a0, a1, k0, k1, row, start, stop, lane, lanes, N, R1, c0, c1)
            s = group_reduce(s, temp0, temp1)
            if lane == 0:
                emit(o0, o1, row, k0 * m0 + k1 * m1, piece, S, M, s)
            row += step
            if barrier:
                cuda.syncthreads()

    return row_kernel


def group_combiner(store, load, merge, slots: int):
    """Device function ``combine_groups(h0, h1, s, tid, g, G, C) -> s``: the states of
    a column kernel's ``G`` thread groups combined per column through shared temp
    storage (``slots`` states a thread, at ``tid * slots``), group 0 left holding the
    result; a tree with growing offsets, so element order is kept. ``store``,
    ``load``, ``merge``: a kit's, or a :class:`~numbakern.kernels.vector.LaneStates`'."""

    @cuda.jit(device=True)
    def combine_groups(h0, h1, s, tid, g, G, C):
        store(h0, h1, tid * slots, s)
        cuda.syncthreads()
        offset = 1
        while offset < G:
            if g % (2 * offset) == 0 and g + offset < G:
                s = merge(s, load(h0, h1, (tid + offset * C) * slots))
                store(h0, h1, tid * slots, s)
            cuda.syncthreads()
            offset *= 2
        return s

    return combine_groups


def index32_fits(n: int, threads: int) -> bool:
    """Whether a row's loop indices stay in int32: no index of it reaches ``2**31``
    (``n`` elements, ``threads`` threads each ``UNROLL`` ahead)."""
    return n + UNROLL * threads < 2**31


def column_registers(fields: int, itemsize: int, plain: bool, masked: bool) -> int:
    """Registers a thread of the scalar column kernel may take (its launch bounds),
    by its state's fields and the ``itemsize`` of the first (the value). ``plain``:
    one reduced dimension, int32 indices and no ``where=`` mask; otherwise a load
    adds a division, 64-bit indices or a mask's load, and 8-byte values need more.

    ptxas for sm_90, 256 threads, no bounds (bench/column_sass.py --scalar; plain /
    other): float32 or float16 sum or max 44-48 / 42-56; float64 sum or max, int32
    sum 46-48 / 48-64; float32 argmax 62-64 / 64-72; float64 argmax 72 / 72-80; var's
    (count, mean, M2) 58-64 / 62-64, 100 with a mask. Each figure below is the
    least of 48, 64, 80, 128 (5, 4, 3, 2 blocks of 256) at whose bounds ptxas spills
    nothing in any of those cases; fewer (5 blocks for argmax, 6 for a sum) spill.
    More than three fields are not measured: 128.
    """
    if fields > 2:
        return 64 if fields == 3 and not masked else 128
    wide = itemsize > 4 and not plain
    return (48 if fields == 1 else 64) + (16 if wide else 0)


def column_kernel_registers(av, threads: int, fields: int, width: int, itemsize: int,
                            masked: bool) -> int:
    """Registers a thread of the column kernel over ``av`` launched with ``threads``
    (the vector kernel where ``width > 1``) takes: what the planner counts resident
    blocks by and the kernel's launch bounds (``itemsize``: the state's value's)."""
    if width > 1:
        return vector_column_registers(fields, width)
    plain = av.reduced_dims == 1 and not masked and index32_fits(av.N, threads)
    return column_registers(fields, itemsize, plain, masked)


def build_column_kernel(threads: int, kit, load, emit, ordered: bool, index32: bool,
                        registers: int | None = None):
    """Column kernel ``(a0, a1, M, N, K1, R1, c0, c1, m0, m1, chunk, S, C, o0, o1)``.

    Thread ``(c, g) = (tid % C, tid // C)`` owns output ``tile * C + c`` and walks
    the reduced elements ``g, g + G, ...`` of its block's piece (``G = blockDim / C``
    groups); the groups are then combined per column in shared memory. Its index
    arithmetic stays 64-bit: the row kernel's 32-bit divisions made it slower on an
    H200 ((4096, 32768) column sum 131 -> 164 us, bench/NOTES.md). ``registers``: a
    thread's launch bounds (:func:`column_registers`), which fix the blocks a
    multiprocessor holds for the planner's wave count; ``None`` (the partials'
    pass, whose grid is its tiles, not a wave): none.
    """
    identity = kit.identity
    temp = kit.shared_temp(threads)
    thread_reduce = thread_reducer(kit, load, ordered, index32)
    combine_groups = group_combiner(kit.store, kit.load, kit.combine, 1)
    jit = bounded_jit(None if registers is None else
                      (threads, blocks_per_multiprocessor(threads, registers)))

    @jit
    def column_kernel(a0, a1, M, N, K1, R1, c0, c1, m0, m1, chunk, S, C, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        G = cuda.blockDim.x // C
        c = tid % C
        g = tid // C
        piece = cuda.blockIdx.x % S
        start = piece * chunk
        stop = min(start + chunk, N)
        tile = cuda.blockIdx.x // S
        tiles = cuda.gridDim.x // S
        while tile * C < M:
            col = tile * C + c
            k0 = col // K1
            k1 = col - k0 * K1
            s = identity()
            if col < M:
                s = thread_reduce(a0, a1, k0, k1, col, start, stop, g, G, N, R1, c0, c1)
            if G > 1:
                s = combine_groups(temp0, temp1, s, tid, g, G, C)
            if g == 0 and col < M:
                emit(o0, o1, col, k0 * m0 + k1 * m1, piece, S, M, s)
            tile += tiles

    return column_kernel


def column_vector_width(av, dtype: np.dtype, masked: bool, fields: int = 1) -> int:
    """Adjacent columns a thread of the column kernel reads in one vector load (2 to 8
    elements of 2, 4 or 8 bytes: 16 bytes), or 1 for scalar loads. Vectors need one
    reduced dimension, the kept one contiguous in whole vectors (``K1`` a multiple of
    the width) and every vector aligned: the view's address and its outer kept and
    reduced strides multiples of 16 bytes. PyTorch's reduce kernel does the same for
    reductions that are not along the innermost dimension (``output_vec_size``).
    States of three fields or more (``var``'s count, mean and M2) stay scalar: four
    lanes of them take ptxas for sm_90 to 113 registers."""
    width = vector_lanes(dtype)
    if masked or fields > 2 or av.reduced_dims != 1 or width not in (2, 4, 8):
        return 1
    if av.K1 % width:
        return 1
    view = av.view
    if view.strides[1] != dtype.itemsize or address(view) % VECTOR_BYTES:
        return 1
    outer = [(view.shape[0], view.strides[0]), (av.N, view.strides[3])]
    if any(e > 1 and (s < 0 or s % VECTOR_BYTES) for e, s in outer):
        return 1
    return width


def vector_column_registers(fields: int, width: int) -> int:
    """Registers a thread of the vector column kernel may take (its launch bounds):
    ptxas for sm_90 gives it 60 for a float32 or float64 sum or max with four vectors
    in flight, 70 with float16's eight lanes, 77 for argmax's (value, index) pairs: 4
    blocks of 256 a multiprocessor, or 3."""
    return 64 if fields == 1 and width <= 4 else 80


def build_vector_column_kernel(threads: int, kit, emit, ordered: bool, width: int,
                               outputs32: bool):
    """Column kernel ``(a0, a1, M, N, K1, R1, c0, c1, m0, m1, chunk, S, C, o0, o1)``
    whose threads own ``width`` adjacent outputs each (:func:`column_vector_width`):
    thread ``(c, g)`` loads vector column ``tile * C + c`` of the reduced elements
    ``g, g + G, ...`` of its piece (``ordered``: the ``g``-th of ``G`` contiguous runs),
    one 16-byte load per element row, four in flight, from ``a1``: a 1-D
    view of ``a0``'s memory from its first element. Each lane folds its column's
    elements in order, as the scalar kernel's thread does, so every op (ordered ones
    and argmax's pairs included) meets the same contract; the groups are combined in
    shared memory as there. Launch bounds (:func:`vector_column_registers`) fix the
    blocks a multiprocessor holds, which the planner's wave counts
    (:func:`plan_launch`). ``outputs32``: vector columns are counted in 32 bits."""
    lanes = lane_states(kit, emit, width)
    identity, fold, emit_lanes = lanes.identity, lanes.fold, lanes.emit
    combine_groups = group_combiner(lanes.store, lanes.load, lanes.merge, width)
    temp = kit.shared_temp(threads * width)
    vload = vector_loader(width)
    split = _split(outputs32)
    W = int64(width)
    registers = vector_column_registers(kit.fields, width)
    jit = bounded_jit((threads, blocks_per_multiprocessor(threads, registers)))

    @cuda.jit(device=True)
    def run(a1, j, pitch, r, end, step, c1, s):
        # j: the vector of element row r; four in flight, each lane folding in order
        d = step * pitch
        while r + 3 * step < end:
            v0 = vload(a1, j)
            v1 = vload(a1, j + d)
            v2 = vload(a1, j + 2 * d)
            v3 = vload(a1, j + 3 * d)
            s = fold(fold(s, v0, r * c1), v1, (r + step) * c1)
            s = fold(fold(s, v2, (r + 2 * step) * c1), v3, (r + 3 * step) * c1)
            j += 4 * d
            r += 4 * step
        while r < end:
            s = fold(s, vload(a1, j), r * c1)
            j += d
            r += step
        return s

    @jit
    def vector_column_kernel(a0, a1, M, N, K1, R1, c0, c1, m0, m1, chunk, S, C, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        G = cuda.blockDim.x // C
        c = tid % C
        g = tid // C
        piece, tile, tiles = _pieces_of_grid(S)
        start = piece * chunk
        stop = min(start + chunk, N)
        if ordered:
            per = (stop - start + G - 1) // G
            first, end, step = start + g * per, min(start + (g + 1) * per, stop), 1
        else:
            first, end, step = start + g, stop, G
        size = a0.strides[1] * W  # bytes of a vector
        pitch = a0.strides[3] // size  # vectors from one element row to the next
        columns = M // W
        while tile * C < columns:
            column = tile * C + c
            k0, k1 = split(column, K1 // W)
            s = identity()
            if column < columns:
                s = run(a1, k0 * (a0.strides[0] // size) + k1 + first * pitch, pitch, first,
                        end, step, c1, s)
            if G > 1:
                s = combine_groups(temp0, temp1, s, tid, g, G, C)
            if g == 0 and column < columns:
                emit_lanes(o0, o1, column * W, k0 * m0 + k1 * W * m1, m1, piece, S, M, s)
            tile += tiles

    return vector_column_kernel


# --- planning a launch ------------------------------------------------------------------


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


@dataclass(frozen=True)
class Launch:
    """One first-pass launch: which kernel, its shape, and how rows are split."""

    kernel: str  # "row" or "column"
    block: object  # the block strategy
    threads: int
    blocks: int  # blocks of the launch (tiles or row groups times pieces)
    pieces: int  # S
    chunk: int  # reduced elements per piece
    lanes: int  # row kernel: threads per row; column kernel: columns per block (C)
    cap: int  # the most blocks a launch of this plan takes (rows are grid-strided)
    width: int = 1  # column kernel: adjacent outputs a thread owns (its vector's lanes)


def _pieces(groups: int, n: int, lanes: int, target: int) -> tuple[int, int]:
    """``(S, chunk)``: split rows into pieces when ``groups`` blocks cannot fill
    ``target``; every piece keeps at least PIECE_MIN_PER_THREAD elements per thread.
    The grid stays within one wave of ``target`` blocks: 9 pieces of 128 groups where
    1056 blocks fit would leave 96 blocks to a second wave, which these memory-bound
    kernels take about as long over as over the first 1056."""
    if groups >= target:
        return 1, max(n, 1)
    pieces = max(1, min(target // groups, n // (lanes * PIECE_MIN_PER_THREAD), MAX_PIECES))
    chunk = ceil_div(n, pieces)
    return ceil_div(n, chunk), chunk  # no empty piece


def plan_launch(av, block, blocks: int | None, lanes: int | None, itemsize: int,
                width: int = 1, fields: int = 1, value_itemsize: int = 0,
                masked: bool = False) -> Launch:
    """Choose the kernel and grid for a reduction described by ``av``.

    ``blocks`` (the grid strategy's) is the number of blocks a launch aims at;
    ``None``: enough to fill the device (rows are grid-strided beyond that).
    ``width``: outputs a thread of the column kernel owns
    (:func:`column_vector_width`); ``fields``, ``value_itemsize`` (the state's value,
    default ``itemsize``) and ``masked`` (``where=``): what sets the column kernels'
    registers (:func:`column_kernel_registers`), so their blocks that fit at once.
    """
    threads = block.threads
    target = blocks or max_resident_blocks(threads)
    cap = target if (blocks or SIMULATOR) else 32 * target
    M, N = av.M, av.N
    row = lanes is not None or M == 1 or (
        N * itemsize > THREAD_ROW_BYTES and av.reduced_stride <= av.kept_stride)
    if row:
        if lanes is None:
            lanes = WARP if N <= WARP_ROW_MAX else threads
        if lanes == WARP and not block.offers_warp_reduce():
            lanes = threads  # no warp form: a block per row
        groups = ceil_div(M, threads // lanes)
        pieces, chunk = _pieces(groups, N, lanes, target)
        return Launch("row", block, threads, min(groups, cap) * pieces, pieces, chunk, lanes,
                      cap)
    units = M // width  # what a thread owns: a column, or a vector of them
    columns = min(_pow2_floor(threads), _pow2_ceil(units))
    groups_wanted = _pow2_ceil(ceil_div(N, PIECE_MIN_PER_THREAD))
    col_threads = columns * max(1, min(threads // columns, groups_wanted))
    tiles = ceil_div(units, columns)
    if not blocks:
        target = resident_blocks(col_threads, column_kernel_registers(
            av, col_threads, fields, width, value_itemsize or itemsize, masked))
        cap = target if SIMULATOR else 32 * target
    pieces, chunk = _pieces(tiles, N, col_threads // columns, target)
    return Launch("column", block, col_threads, min(tiles, cap) * pieces, pieces, chunk,
                  columns, cap, width)


def partial_columns(outputs: int, pieces: int, threads: int) -> int:
    """Outputs a block of the column partials' pass owns (``C``, a power of two); its
    other threads split the pieces (``threads / C`` groups), as many groups as leave
    each thread one round of :data:`UNROLL` loads, and a warp's columns where there are
    that many outputs. 4096 outputs of 132 pieces each in 16 blocks of 256 columns had
    each thread read its 132 partials in 17 rounds (H200: the pass took 17 us of a
    mean's 160); in blocks of 32 columns and 8 groups, 3 rounds (4.5 us). Groups past
    that cost blocks: 32768 outputs of 16 pieces in 1024 blocks of 32 took 8 us."""
    most = _pow2_floor(max(1, threads // min(WARP, _pow2_ceil(outputs))))
    groups = min(most, _pow2_ceil(ceil_div(pieces, UNROLL)))
    return min(_pow2_ceil(outputs), _pow2_floor(threads) // groups)


def partials_lanes(pieces: int, block) -> int:
    """Threads a partials' pass gives each output of ``pieces`` partials: a warp where
    the block strategy has a warp form and there are at most :data:`PARTIALS_WARP_MAX`,
    else the block."""
    return WARP if pieces <= PARTIALS_WARP_MAX and block.offers_warp_reduce() \
        else block.threads


def check_lanes(lanes, block) -> None:
    """``lanes`` must be None, 32 or the block's thread count: TypeError for a non-int
    (a float or a bool), ValueError for another int."""
    if lanes is None:
        return
    if check_count(lanes, "lanes") not in (WARP, block.threads):
        raise ValueError(
            f"lanes must be None (automatic), {WARP} (one warp per row) or "
            f"{block.threads} (one block per row, the strategy's threads), got {lanes!r}"
        )


# --- the layouts a reduce job hands the grid strategy -------------------------------------


class AxisReduce:
    """Reduce each of ``av.M`` outputs over its ``av.N`` elements with the row or the
    column kernel (the module docstring).

    Args:
        av: the layout (``numbakern.core.layout.AxisView``).
        kit: the op's state kit.
        ordered: keep element order (a non-commutative op).
        lanes: threads per row for the row kernel (``None``, 32 or the block's).
        dtype: the input's dtype.
    """

    finishes = True  # its storing passes take any emit (core.jobs.Finish)

    def __init__(self, av, kit, ordered: bool, lanes, dtype, mask=None):
        self.av, self.kit, self.ordered, self.lanes = av, kit, ordered, lanes
        self.dtype = np.dtype(dtype)
        self.outputs, self.count = av.M, av.N
        self.mask = mask  # where=: a bool view indexed as av.view, read by the loads

    def plan(self, block, blocks) -> Launch:
        width = column_vector_width(self.av, self.dtype, self.mask is not None,
                                    self.kit.fields)
        return plan_launch(self.av, block, blocks, self.lanes, self.dtype.itemsize, width,
                           self.kit.fields, self.kit.dtypes[0].itemsize, self.mask is not None)

    def run(self, plan: Launch, emit: Emit, out, stream) -> None:
        """The first pass, each piece's state to ``emit`` into ``out``."""
        av = self.av
        vector = row_vector_width(av, self.dtype, self.ordered) \
            if plan.kernel == "row" and self.mask is None else 0
        kernel = self._kernel(plan, emit, vector)
        rows = span_view(av.view) if vector or plan.width > 1 else \
            av.view if self.mask is None else self.mask
        args = (av.view, rows, av.M, av.N, av.K1, av.R1, *av.index_mult, *av.out_mult,
                plan.chunk, plan.pieces) + ((plan.lanes,) if plan.kernel == "column" else ())
        launch(kernel, plan.blocks, plan.threads, stream, *args, *out)

    def emit_partial(self, plan: Launch) -> Emit:
        """Partials ``[output][piece]`` (row kernel) or ``[piece][output]`` (column)."""
        return emit_partial(self.kit, plan.kernel == "column")

    def reduce_partials(self, plan: Launch, partials, out, stream, emit=None) -> None:
        """Reduce each output's ``plan.pieces`` partial states into ``out``: a row
        kernel (a warp or a block per output) for the row kernel's partials, the
        column kernel (a thread per output, reading ``[piece][output]`` coalesced) for
        the column's; the same block strategy as the first pass. ``emit``: how an
        output is written (default the state's store; a finish,
        ``numbakern/kernels/finishes.py``)."""
        av, kit, block, pieces = self.av, self.kit, plan.block, plan.pieces
        store = emit_store(kit) if emit is None else emit
        if plan.kernel == "column":
            columns = partial_columns(av.M, pieces, block.threads)
            key = ("axis_reduce", "column", "partials", store.name, self.ordered,
                   block.threads, kit, device_key())
            kernel = cached(key, lambda: build_column_kernel(
                block.threads, kit, partial_loader(kit, True), store.build(), self.ordered,
                True))
            launch(kernel, min(ceil_div(av.M, columns), plan.cap),
                   columns * (block.threads // columns), stream, *partials, av.M, pieces,
                   av.K1, av.M, 0, 0, *av.out_mult, pieces, 1, columns, *out)
            return
        lanes = partials_lanes(pieces, block)
        outputs32 = av.M < 2**31
        key = ("axis_reduce", "row", "partials", store.name, lanes, self.ordered, outputs32,
               block.key, kit, device_key())
        kernel = cached(key, lambda: build_row_kernel(
            block, kit, partial_loader(kit, False), store.build(), lanes, self.ordered, True,
            outputs32))
        groups = ceil_div(av.M, block.threads // lanes)
        launch(kernel, min(groups, plan.cap), block.threads, stream, *partials, av.M, pieces,
               av.K1, 1, 0, 0, *av.out_mult, pieces, 1, *out)

    def _kernel(self, plan: Launch, emit: Emit, vector: int):
        av, kit, block, ordered = self.av, self.kit, plan.block, self.ordered
        # int32 in-row arithmetic when no index of the loop can reach 2**31
        index32 = index32_fits(av.N, plan.threads)
        outputs32 = av.M < 2**31
        masked = self.mask is not None
        load = lambda: view_loader(kit, av.reduced_dims, index32, masked)  # noqa: E731
        if plan.kernel == "row":
            key = ("axis_reduce", "row", av.reduced_dims, plan.lanes, ordered, emit.name,
                   index32, outputs32, vector, masked, block.key, kit, device_key())
            return cached(key, lambda: build_row_kernel(
                block, kit, load(), emit.build(), plan.lanes, ordered, index32, outputs32,
                (vector, kit.to_state) if vector else None))
        if plan.width > 1:
            key = ("axis_reduce", "vector column", plan.width, ordered, emit.name,
                   outputs32, plan.threads, kit, device_key())
            return cached(key, lambda: build_vector_column_kernel(
                plan.threads, kit, emit.build(), ordered, plan.width, outputs32))
        key = ("axis_reduce", "column", av.reduced_dims, ordered, emit.name, index32,
               masked, block.threads, kit, device_key())
        registers = column_kernel_registers(av, plan.threads, kit.fields, 1,
                                            kit.dtypes[0].itemsize, masked)
        return cached(key, lambda: build_column_kernel(
            block.threads, kit, load(), emit.build(), ordered, index32, registers))


# --- tiny rows: a thread and one load per row ----------------------------------------


def tiny_row_width(av, dtype: np.dtype) -> int:
    """Elements per row when every row is one aligned vector of 2 to 16 elements (4 to
    16 bytes, a power of two) and the rows lie back to back, else 0.

    Then each thread reduces a whole row from one load (:class:`TinyRows`); no
    threads combine, so no block strategy takes part. (H200, (1_000_000, 2) float32:
    this kernel 4.9 us, the column kernel's thread per row 17.9 us, cupy.sum's kernel
    4.7 us; bench/NOTES.md.)
    """
    n, itemsize = av.N, dtype.itemsize
    row_bytes = n * itemsize
    if av.reduced_dims != 1 or av.M != av.K1 or dtype.kind not in "iuf" or n < 2:
        return 0
    # a vector load is of 4 bytes at least (kernels/vector.py: 32-bit words)
    if not 4 <= row_bytes <= 16 or row_bytes & (row_bytes - 1) or av.index_mult[1] > 1:
        return 0
    strides = av.view.strides
    if strides[3] != itemsize or (av.M > 1 and strides[1] != row_bytes):
        return 0
    return n if address(av.view) % row_bytes == 0 else 0


def build_tiny_row_kernel(kit, emit, width: int):
    """Kernel ``(a, M, m1, o0, o1)``: thread ``i`` (grid-strided) folds row ``i``, the
    ``i``-th ``width``-element vector of the 1-D ``a``, in element order onto the op's
    identity (as every path folds: a sum of ``-0.0`` is ``+0.0``, NumPy's), and emits
    it at ``i * m1``."""
    vload = vector_loader(width)
    fold = lane_folder(kit.combine, kit.to_state, 0, width)
    combine, identity = kit.combine, kit.identity

    @cuda.jit
    def tiny_rows(a, M, m1, o0, o1):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < M:
            emit(o0, o1, i, i * m1, 0, 1, M, combine(identity(), fold(vload(a, i), 0)))
            i += step

    return tiny_rows


def build_scatter_kernel(kit, emit):
    """Kernel ``(p0, p1, M, m1, o0, o1)``: state ``i`` of ``p`` (traversal order) to
    ``emit`` at ``i * m1`` (its place in the result), grid-strided."""
    load = kit.load

    @cuda.jit
    def scatter(p0, p1, M, m1, o0, o1):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < M:
            emit(o0, o1, i, i * m1, 0, 1, M, load(p0, p1, i))
            i += step

    return scatter


@dataclass(frozen=True)
class TinyPlan:
    """The tiny-row kernel's launch: one piece per output, always."""

    pieces: int = 1


class TinyRows:
    """Reduce rows of one aligned vector each, a thread per row (:func:`tiny_row_width`
    says when); every output is one piece, so a grid strategy only ever stores."""

    finishes = True  # its storing passes take any emit (core.jobs.Finish)

    def __init__(self, av, kit, width: int):
        self.av, self.kit, self.width = av, kit, width
        self.outputs, self.count = av.M, av.N

    def plan(self, block, blocks) -> TinyPlan:
        return TinyPlan()

    def run(self, plan: TinyPlan, emit: Emit, out, stream) -> None:
        av, kit, width = self.av, self.kit, self.width
        key = ("axis_reduce", "tiny", width, emit.name, kit, device_key())
        kernel = cached(key, lambda: build_tiny_row_kernel(kit, emit.build(), width))
        launch(kernel, grid_for(av.M), THREADS, stream, span_view(av.view), av.M,
               av.out_mult[1], *out)

    def emit_partial(self, plan: TinyPlan) -> Emit:
        """Partial ``row`` (each row is its output's one piece)."""
        return emit_partial(self.kit, False)

    def reduce_partials(self, plan: TinyPlan, partials, out, stream, emit=None) -> None:
        """Each row's one partial to its place in the result (through ``emit``: by
        default the state's store)."""
        kit = self.kit
        store = emit_store(kit) if emit is None else emit
        kernel = cached(("axis_reduce", "scatter", store.name, kit, device_key()),
                        lambda: build_scatter_kernel(kit, store.build()))
        launch(kernel, grid_for(self.av.M), THREADS, stream, *partials, self.av.M,
               self.av.out_mult[1], *out)
