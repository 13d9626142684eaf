"""Segmented reduction: one output per segment ``x[offsets[i]:offsets[i + 1]]``.

The lesson
----------
Segments of a 1-D array, given by ``n + 1`` ascending offsets (CUB's
``DeviceSegmentedReduce`` convention), are rows of different lengths, and in one
call they may be anything from empty to the whole array. No one group size serves
them all: a block on a ten-element segment idles, a warp on a million-element one
takes the whole kernel's time while the rest of the GPU waits. So each segment is
served by the group its length asks for, decided on the device as the offsets are
read (the host never reads them):

* **short** segments (at most a *tile*, ``T = threads * TILE_ITEMS`` elements where a
  warp takes each, ``threads * BLOCK_TILE_ITEMS`` where a block does) are
  reduced whole by a *group* of threads, grid-strided over segments
  (:func:`build_segment_kernel`): a **warp** per segment (``lanes = 32``, several
  per block, combined by the block strategy's warp form: no barrier), the default
  when the mean segment is short (at most :data:`WARP_SEGMENT_MAX` elements), or a
  **block** per segment (``lanes = threads``, the block strategy's reduce).
  Each thread folds ``start + lane, start + lane + lanes, ...``, ``UNROLL`` loads
  in flight, or for a non-commutative op a contiguous run, in order
  (``axis_reduce.thread_reducer``).
* **long** segments (more than ``T`` elements) are left by that group, which only
  marks the tiles they cover in a *tile map*: the array cut into tiles of ``T``
  elements, ``cover[k]`` the long segment holding tile ``k``'s first element,
  ``begin[k]`` the one starting inside it (a long segment is longer than a tile, so
  no tile meets more than these two). A second kernel
  (:func:`build_tile_kernel`) then gives each block a run of ``R`` consecutive
  tiles, the same share of the array for every block whatever the lengths (the
  load balance of Merrill and Garland's merge-path SpMV, kept to long segments):
  a long segment's part of a block's tiles is contiguous, so the block reduces it
  as one run (one loop of 16-byte vector loads where the array allows,
  ``kernels/vector.py``, and one block reduce, however many tiles it spans) and
  emits one state per (block, segment) run. One huge segment is thus spread over
  the whole GPU, and each segment has at most ``blocks + 1`` runs.

How the runs meet is the grid strategy's (``strategies/protocols.py``,
``GridReduce``): ``atomic_fold`` folds every run (and every short segment) into
its output; ``two_pass`` writes them as partials, slot ``i`` for short segment
``i`` and slot ``M + 2k + h`` for the run that starts at tile ``k`` (``h``: 0 for
``cover``, 1 for ``begin``), and the tile kernel finishes each long segment
itself: the block closing its last run (an atomic count per segment, after a
release fence: the "last block done" pattern of the CUDA samples and CUB)
reduces its runs in tile order into slot ``i``, the same tree whichever block is
last, element order kept for a non-commutative op. Slots ``0 .. M - 1`` are then
the results: no second launch. When ``x`` is no longer than one tile no segment
can be long: the first kernel alone stores every result.

An element's state is the kit's ``to_state(value, index)`` with ``index`` its
position *within its segment* (argmax of a segment). An empty segment is the op's
identity (the caller decides whether that is allowed). Offsets are trusted no
further than memory safety needs: every kernel clamps a segment's bounds into
``[0, len(x)]`` the same way, and the first kernel records the first bad and the
first empty segment for the caller to raise after.

(Reading 16-byte vectors inside each *short* segment, as the row kernel reads a
row, was slower on an H200 for segments of 64 and 1024 elements and no faster at
16384: bench/NOTES.md; the tiles of long segments read whole aligned vectors.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda, int64

from numbakern.kernels.axis_reduce import UNROLL, group_reducer, thread_reducer
from numbakern.kernels.elementwise import fill
from numbakern.kernels.emits import Emit, emit_partial
from numbakern.kernels.vector import lane_folder, rows_aligned, vector_lanes, vector_loader
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import (
    SIMULATOR,
    WARP,
    blocks_per_multiprocessor,
    ceil_div,
    max_resident_blocks,
    resident_blocks,
)
from numbakern.runtime.launch import bounded_jit, launch
from numbakern.runtime.relaxed import fence_acq_rel
from numbakern.runtime.views import sliced

#: a warp per short segment when the mean segment has at most this many elements
WARP_SEGMENT_MAX = 4096
#: elements per thread in a tile where a warp takes each short segment (a long segment
#: is longer than ``threads`` times this): four 16-byte float32 vectors per thread on a
#: GPU, 128 a lane of a warp; small under the simulator so that tests reach long
#: segments with small arrays
TILE_ITEMS = 4 if SIMULATOR else 16
#: the same where a block takes each short segment (mean segments over
#: WARP_SEGMENT_MAX): a block reads a segment of up to 128 elements a thread whole, as
#: CUB's DeviceSegmentedReduce does any segment (H200, 2^26 float32, mean 16384:
#: 0.144 ms against 0.199 with the warp's tile; bench/NOTES.md)
BLOCK_TILE_ITEMS = 4 if SIMULATOR else 128
#: the most registers a thread of the tile kernel may hold (0: no cap): 64 keeps 4
#: blocks of 256 on a multiprocessor (65536 registers), a third more blocks' loads in
#: flight than the 3 that ptxas's 74-80 registers uncapped allowed; the spills it
#: costs lie outside the vector loop (bench/segsum_sass.py). Passed to ptxas as
#: launch bounds (:func:`tile_jit`).
TILE_REGISTERS = 64
#: The tile kernel's grid is one wave: the blocks resident at once at
#: ``TILE_REGISTERS`` (:func:`tile_blocks`; 528 of 256 on an H200), each taking an equal
#: run of ``R`` tiles. Blocks whose tiles hold no long segment leave at once, but their
#: launches are not free, and each block pays its map reads, bounds loads and block
#: reduces once for its ``R`` tiles: 2^26 float32 in 2048 tiles took 11 us where no
#: segment is long and 98 us at mean 2^20 in 2048 blocks of one tile, 4 and 79 us in
#: 512 blocks of four (bench/NOTES.md, "tile grid").


# --- device functions -------------------------------------------------------------------


def segment_loader(kit):
    """``load(a0, a1, k0, k1, row, r, N, R1, c0, c1)`` as ``thread_reducer`` calls it:
    element ``r`` of the 1-D ``a0`` as a state, indexed from its segment's start
    ``k0``."""
    to_state = kit.to_state

    @cuda.jit(device=True)
    def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
        return to_state(a0[r], r - k0)

    return load


@cuda.jit(device=True)
def misplaced(start, stop, n):
    """Whether a segment's bounds decrease or leave ``[0, n]``: the one test by which
    every segmented kernel (reductions, scans, sorts) reports bad offsets."""
    return start < 0 or stop < start or stop > n


@cuda.jit(device=True)
def clamped(start, stop, n):
    """``(start, stop, bad)``: a segment's bounds clamped into ``[0, n]``, and whether
    they needed it (:func:`misplaced`; every kernel here clamps the same way)."""
    bad = misplaced(start, stop, n)
    start = min(max(start, int64(0)), n)
    stop = min(max(stop, start), n)
    return start, stop, bad


@cuda.jit(device=True)
def bounds(offsets, i, n):
    """Segment ``i``'s bounds, :func:`clamped`."""
    return clamped(int64(offsets[i]), int64(offsets[i + 1]), n)


@cuda.jit(device=True)
def mark_tiles(cover, begin, i, start, stop, T, lane, lanes):
    """Long segment ``i`` (``[start, stop)``, longer than ``T``) into the tile map, by
    the ``lanes`` threads of its group: ``begin`` of the tile it starts inside (if it
    starts inside one), ``cover`` of every tile whose first element it holds."""
    k0 = start // T
    inside = start != k0 * T
    if inside and lane == 0:
        begin[k0] = i
    k = k0 + lane + (1 if inside else 0)
    last = (stop - 1) // T
    while k <= last:
        cover[k] = i
        k += lanes


def part_reducer(kit, ordered: bool, index32: bool, width: int):
    """``part_reduce(x, base, a, b, tid, threads)``: this thread's fold of elements
    ``[a, b)`` of ``x`` (indexed from ``base``, the segment's start), ``threads``
    threads sharing them. ``width``: read whole ``width``-element vectors (``x``
    contiguous and 16-byte aligned, a commutative op), the part's ends one by one;
    0: ``thread_reducer``'s loop."""
    load = segment_loader(kit)
    scalar = thread_reducer(kit, load, ordered, index32)
    if not width:

        @cuda.jit(device=True)
        def part_reduce(x, base, a, b, tid, threads):
            return scalar(x, x, base, 0, 0, a, b, tid, threads, 0, 0, 0, 0)

        return part_reduce

    combine, identity = kit.combine, kit.identity
    vload = vector_loader(width)
    fold = lane_folder(combine, kit.to_state, 0, width)
    W = int64(width)

    @cuda.jit(device=True)
    def part_reduce(x, base, a, b, tid, threads):
        vfirst = (a + W - 1) // W
        vstop = b // W
        d = int64(threads)
        s = identity()
        j = vfirst + tid
        while j + 3 * d < vstop:  # four 16-byte loads in flight
            v0 = vload(x, j)
            v1 = vload(x, j + d)
            v2 = vload(x, j + 2 * d)
            v3 = vload(x, j + 3 * d)
            low = combine(fold(v0, j * W - base), fold(v1, (j + d) * W - base))
            high = combine(fold(v2, (j + 2 * d) * W - base), fold(v3, (j + 3 * d) * W - base))
            s = combine(s, combine(low, high))
            j += 4 * d
        while j < vstop:
            s = combine(s, fold(vload(x, j), j * W - base))
            j += d
        head = min(vfirst * W, b)  # elements before the first whole vector
        r = a + tid
        while r < head:
            s = combine(s, load(x, x, base, 0, 0, r, 0, 0, 0, 0))
            r += d
        r = max(vstop * W, head) + tid  # and after the last
        while r < b:
            s = combine(s, load(x, x, base, 0, 0, r, 0, 0, 0, 0))
            r += d
        return s

    return part_reduce


def run_loader(kit):
    """``load(...)`` as ``thread_reducer`` calls it: run ``r`` of a long segment among
    the partials ``a0, a1``: ``r = 0`` at its head slot ``k0``, ``r >= 1`` the run of
    the block whose tiles start at tile ``(k1 + r) * R1`` (slot ``N + 2 * tile``)."""
    load_state = kit.load

    @cuda.jit(device=True)
    def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
        if r == 0:
            return load_state(a0, a1, k0)
        return load_state(a0, a1, N + 2 * (k1 + r) * R1)

    return load


def tile_jit(threads: int):
    """``cuda.jit`` for the tile kernel: launch bounds of ``threads`` a block and as
    many blocks a multiprocessor as :data:`TILE_REGISTERS` allows, so that ptxas keeps
    to those registers (spilling if it must); plain under the simulator or with no
    cap."""
    return bounded_jit((threads, blocks_per_multiprocessor(threads, TILE_REGISTERS))
                       if TILE_REGISTERS else None)


def tile_blocks(threads: int) -> int:
    """The tile kernel's grid: blocks of ``threads`` resident at once under its
    register cap (without one, as many as threads allow)."""
    if not TILE_REGISTERS:
        return max_resident_blocks(threads)
    return resident_blocks(threads, TILE_REGISTERS)


def _temp(block, kit):
    """Device function allocating the block reduce's shared-memory temp storage."""
    return kit.shared_temp(max(1, block.temp_slots()))


# --- kernels ---------------------------------------------------------------------------


def build_segment_kernel(block, kit, emit, lanes: int, ordered: bool, index32: bool):
    """Kernel ``(x, offsets, M, bad, T, cover, begin, o0, o1)``: short segment ``i`` of
    ``x`` reduced by a group of ``lanes`` threads and emitted at ``i``; a segment
    longer than ``T`` (``T > 0``) marked in the tile map ``cover``/``begin`` instead.
    ``index32``: every element index fits in 32 bits, so the loop's index arithmetic
    runs in them.

    The first segment whose bounds decrease or leave ``[0, n]`` is recorded in
    ``bad[0]`` (an atomic minimum, ``M`` when none), the first empty one in
    ``bad[1]``, for the caller to raise after; both are clamped (:func:`bounds`).
    """
    threads = block.threads
    group_reduce, temp = group_reducer(block, kit, lanes)
    per_block = threads // lanes
    barrier = lanes == threads  # the block's temp storage is reused by the next segment
    thread_reduce = thread_reducer(kit, segment_loader(kit), ordered, index32)

    @cuda.jit
    def segment_kernel(x, offsets, M, bad, T, cover, begin, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        lane = tid % lanes
        row = int64(cuda.blockIdx.x) * per_block + tid // lanes
        step = int64(cuda.gridDim.x) * per_block
        n = int64(x.shape[0])
        a = int64(0)
        b = int64(0)
        if row < M:
            a, b = int64(offsets[row]), int64(offsets[row + 1])
        while row < M:
            start, stop, wrong = clamped(a, b, n)
            # The group's next segment's bounds are loaded now, so that their latency
            # passes under this segment's loads instead of before the next one's.
            ahead = row + step
            if ahead < M:
                a, b = int64(offsets[ahead]), int64(offsets[ahead + 1])
            if wrong:
                cuda.atomic.min(bad, 0, row)
            if stop == start and lane == 0:
                cuda.atomic.min(bad, 1, row)
            if T > 0 and stop - start > T:  # long: the tile kernel's (uniform per group)
                mark_tiles(cover, begin, row, start, stop, T, lane, lanes)
            else:
                s = thread_reduce(x, x, start, 0, row, start, stop, lane, lanes, 0, 0, 0, 0)
                s = group_reduce(s, temp0, temp1)
                if lane == 0:
                    emit(o0, o1, row, row, 0, 1, M, s)
            row = ahead
            if barrier:
                cuda.syncthreads()

    return segment_kernel


def build_tile_kernel(block, kit, emit, ordered: bool, part_reduce, finish: bool):
    """Kernel ``(x, offsets, M, T, R, K, cover, begin, counts, o0, o1)``: block ``b``
    (grid-strided) reduces the long segments' parts of tiles ``[b R, b R + R)`` of the
    ``K`` tiles, in element order: each segment's part of them is one contiguous run,
    reduced as one (a single ``part_reduce`` and block reduce per run, however many
    tiles it spans), its state emitted at slot ``M + 2k + h`` of the tile map entry
    where the run starts (and output ``i``, for an emit that folds).

    ``finish`` (``emit`` writes partials, ``two_pass``): the results are written here,
    with no second launch. A segment whose runs all lie in one block is stored at
    slot ``i``; otherwise each block closing one of its runs counts it in
    ``counts[2k + h]`` (the segment's head entry, -1 before the first), and the block
    that closes the last run reduces all the runs in tile order into slot ``i``
    (CUB's and the CUDA samples' "last block done" pattern: a release fence between
    the partial's store and the count, an acquire fence after the last count; PTX's
    ``fence.acq_rel.gpu``, not ``threadfence``'s sequentially consistent
    ``fence.sc.gpu``, which every run would pay for an order nothing here needs). The
    tree over the runs is the same whichever block is last: deterministic.
    """
    threads = block.threads
    block_reduce = block.build_reduce(kit)
    temp = _temp(block, kit)
    store = kit.store
    runs_reduce = thread_reducer(kit, run_loader(kit), ordered, False)

    @cuda.jit(device=True)
    def finish_run(acc, temp0, temp1, o0, o1, slot, i, M, start, stop, T, R, counts):
        tid = cuda.threadIdx.x
        head = start // T
        first = head // R
        runs = 1 + (stop - 1) // T // R - first
        if runs == 1:  # every part of the segment was this block's
            if tid == 0:
                store(o0, o1, i, acc)
            return
        last = 0
        if tid == 0:
            store(o0, o1, slot, acc)
            fence_acq_rel()  # release: the run's state visible before it is counted
            h = 0 if start == head * T else 1
            if cuda.atomic.add(counts, 2 * head + h, 1) == runs - 2:
                fence_acq_rel()  # acquire: every counted run's state visible after
                last = 1
        if cuda.syncthreads_or(last):
            fence_acq_rel()  # and to every thread of the block (no stale L1 line)
            h = 0 if start == head * T else 1
            s = runs_reduce(o0, o1, M + 2 * head + h, first, i, 0, runs, tid, threads, M,
                            R, 0, 0)
            s = block_reduce(s, temp0, temp1)
            if tid == 0:
                store(o0, o1, i, s)

    @cuda.jit(device=True)
    def close(x, temp0, temp1, o0, o1, slot, i, M, start, stop, a, e, T, R, counts):
        s = part_reduce(x, start, a, e, cuda.threadIdx.x, threads)
        acc = block_reduce(s, temp0, temp1)  # thread 0's
        if finish:
            finish_run(acc, temp0, temp1, o0, o1, slot, i, M, start, stop, T, R, counts)
        elif cuda.threadIdx.x == 0:
            emit(o0, o1, slot, i, 0, 1, M, acc)
        cuda.syncthreads()  # temp storage reused by the next run

    @tile_jit(threads)
    def tile_kernel(x, offsets, M, T, R, K, cover, begin, counts, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        n = int64(x.shape[0])
        b = int64(cuda.blockIdx.x)
        while b * R < K:
            k = b * R
            last = min(k + R, K)
            # Most tiles of an array of short segments hold no long one: read the
            # block's map entries at once and leave if they are all empty.
            hit = 0
            t = int64(tid)
            while t < 2 * (last - k):
                e = int64(cover[k + t]) if t < last - k else int64(begin[k + t - (last - k)])
                if e >= 0:
                    hit = 1
                t += threads
            if cuda.syncthreads_or(hit) == 0:
                b += cuda.gridDim.x
                continue
            end = last * T  # the block's elements end here
            cur = int64(-1)
            slot = int64(0)
            start = int64(0)
            stop = int64(0)
            a = int64(0)
            while k < last:
                for h in range(2):  # the tile's parts in element order
                    i = int64(cover[k]) if h == 0 else int64(begin[k])
                    if i >= 0 and i != cur:
                        if cur >= 0:
                            close(x, temp0, temp1, o0, o1, slot, cur, M, start, stop, a,
                                  min(stop, end), T, R, counts)
                        cur = i
                        slot = M + 2 * k + h
                        start, stop, wrong = bounds(offsets, i, n)
                        a = max(start, k * T)
                k += 1
            if cur >= 0:
                close(x, temp0, temp1, o0, o1, slot, cur, M, start, stop, a, min(stop, end),
                      T, R, counts)
            b += cuda.gridDim.x

    return tile_kernel


# --- the layout a reduce job hands the grid strategy -------------------------------------


@dataclass(frozen=True)
class SegmentPlan:
    """The launches of one segmented reduction.

    ``lanes``, ``blocks``: the short segments' kernel's group size and grid.
    ``tile``: ``T``, the tile (and long segment) length, 0 when no segment can be long
    (then ``pieces`` is 1: every segment is its output's one piece); ``per_block``
    (``R``) tiles per block of the ``tile_blocks`` of the tile kernel, ``tiles``
    (``K``) in all; ``pieces``: partial states per output, on average, that a
    two-pass strategy allocates (``M * pieces >= M + 2K``: a slot per short segment
    and two per tile).
    """

    block: object
    lanes: int
    blocks: int
    pieces: int = 1
    tile: int = 0
    per_block: int = 1
    tile_blocks: int = 0
    tiles: int = 0


def choose_lanes(lanes, block, segments: int, elements: int) -> int:
    """Threads per short segment: ``lanes`` if given, else a warp when the mean segment
    is short (and the block strategy has a warp form), a block otherwise."""
    if lanes is not None:
        return lanes
    short = elements <= WARP_SEGMENT_MAX * max(segments, 1)
    return WARP if short and block.offers_warp_reduce() else block.threads


def tile_vector_width(x, ordered: bool) -> int:
    """Elements per 16-byte vector for the tile kernel's loads, or 0: a commutative op
    over a contiguous, 16-byte aligned 1-D numeric ``x`` (CUB's ``LOAD_VECTORIZE``
    condition)."""
    dtype = np.dtype(x.dtype)
    width = vector_lanes(dtype)
    if ordered or not width or (x.shape[0] > 1 and x.strides[0] != dtype.itemsize):
        return 0
    return width if rows_aligned(x, 0) else 0


class SegmentReduce:
    """The layout a reduce job hands the grid strategy for a segmented reduction.

    Args:
        x: the 1-D device view of the values; ``offsets``: the 1-D device view of the
            ``segments + 1`` offsets (any integer dtype).
        kit: the op's state kit; ``ordered``: keep element order (non-commutative op);
        lanes: threads per short segment (``None``, 32 or the block's);
        workspace: where the tile map is allocated.

    After :meth:`run`, ``bad`` is a device int64 pair: the first segment with bad
    bounds and the first empty one, ``segments`` where none
    (:func:`build_segment_kernel`).
    """

    def __init__(self, x, offsets, kit, ordered: bool, lanes, workspace):
        self.x, self.offsets, self.kit = x, offsets, kit
        self.ordered, self.lanes, self.workspace = ordered, lanes, workspace
        self.outputs = offsets.shape[0] - 1
        self.n = int(x.shape[0])
        # the most elements one output may combine (atomic_fold's packed argmax asks)
        self.count = max(1, self.n)
        self.bad = self.counts = None
        self._partial = emit_partial(kit, False)

    def plan(self, block, blocks) -> SegmentPlan:
        M, n = self.outputs, self.n
        lanes = choose_lanes(self.lanes, block, M, n)
        groups = ceil_div(M, block.threads // lanes)
        target = blocks or 32 * max_resident_blocks(block.threads)
        first = max(1, min(groups, target))
        T = block.threads * (BLOCK_TILE_ITEMS if lanes == block.threads else TILE_ITEMS)
        if n <= T:  # no segment can outgrow a tile
            return SegmentPlan(block, lanes, first)
        K = ceil_div(n, T)
        R = ceil_div(K, blocks or tile_blocks(block.threads))
        return SegmentPlan(block, lanes, first, ceil_div(M + 2 * K, M), T, R,
                           ceil_div(K, R), K)

    def run(self, plan: SegmentPlan, emit: Emit, out, stream) -> None:
        kit, block, x = self.kit, plan.block, self.x
        index32 = self.n + UNROLL * block.threads < 2**31
        built = emit.build
        key = ("segment_reduce", block.key, plan.lanes, self.ordered, index32, emit.name,
               kit, device_key())
        kernel = cached(key, lambda: build_segment_kernel(
            block, kit, built(), plan.lanes, self.ordered, index32))
        cover, begin = self._tile_map(plan, stream)
        launch(kernel, plan.blocks, block.threads, stream, x, self.offsets, self.outputs,
               self.bad, np.int64(plan.tile), cover, begin, *out)
        if not plan.tile:
            return
        width = tile_vector_width(x, self.ordered)
        finish = emit.name == self._partial.name
        key = ("segment_reduce", "tiles", block.key, self.ordered, index32, width, finish,
               emit.name, kit, device_key())
        kernel = cached(key, lambda: build_tile_kernel(
            block, kit, built(), self.ordered,
            part_reducer(kit, self.ordered, index32, width), finish))
        launch(kernel, plan.tile_blocks, block.threads, stream, x, self.offsets,
               self.outputs, np.int64(plan.tile), np.int64(plan.per_block),
               np.int64(plan.tiles), cover, begin, self.counts, *out)

    def _tile_map(self, plan: SegmentPlan, stream):
        """``(cover, begin)``: the tile map, every entry -1 (one-entry stand-ins when no
        segment can be long), allocated and set in one launch with ``bad`` (two
        entries holding the segment count) ahead of it and the tile kernel's run
        counts (``2K`` entries, -1) after it."""
        k = max(1, plan.tiles)
        words = self.workspace.empty(2 + 4 * k, np.int64)
        fill(words, self.outputs, stream, m=2, rest=-1)
        self.bad = sliced(words, 0, 2)
        self.counts = sliced(words, 2 + 2 * k, 2 + 4 * k)
        return sliced(words, 2, 2 + k), sliced(words, 2 + k, 2 + 2 * k)

    def emit_partial(self, plan: SegmentPlan) -> Emit:
        """Partial ``i`` for short segment ``i``; ``M + 2k + h`` for a long segment's
        run (module docstring), whose last block then writes the segment's result at
        ``i``."""
        return self._partial

    def results_among_partials(self, plan: SegmentPlan, partials) -> tuple:
        """The results, partials ``0 .. M - 1``: the first kernel wrote each short
        segment's there and the tile kernel each long one's (no second pass)."""
        return tuple(sliced(p, 0, self.outputs) for p in partials)


def offsets_ok(offsets: np.ndarray, size: int, of: str = "x") -> str | None:
    """Why host ``offsets`` (of an integer dtype) cannot delimit segments of ``size``
    elements (the length of the argument named ``of``), or None."""
    if offsets.ndim != 1 or offsets.shape[0] < 1:
        return f"must be 1-D with at least one entry, got shape {offsets.shape}"
    if offsets[0] < 0 or offsets[-1] > size:
        return (f"must lie in [0, {size}] (the length of {of}), got {int(offsets[0])} .. "
                f"{int(offsets[-1])}")
    falls = offsets[1:] < offsets[:-1]  # not np.diff: it wraps for unsigned offsets
    if falls.any():
        where = int(np.argmax(falls))
        return (f"must not decrease, but offsets[{where + 1}] = {int(offsets[where + 1])} "
                f"< offsets[{where}] = {int(offsets[where])}")
    return None
