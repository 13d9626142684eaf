"""Segmented reduction: one output per segment ``x[offsets[i]:offsets[i + 1]]``.

The lesson
----------
Segments of a 1-D array, given by ``n + 1`` ascending offsets (CUB's
``DeviceSegmentedReduce`` convention), are rows of different lengths. The row
kernel's idea carries over with one change: a row's bounds come from ``offsets``
instead of from arithmetic. A *group* of threads owns a segment at a time,
grid-strided over segments:

* a **warp** per segment (``lanes = 32``, several segments per block, combined by the
  block strategy's warp form: no barrier), the default when the mean segment is
  short (at most :data:`WARP_SEGMENT_MAX` elements): short segments would leave
  most of a block idle;
* a **block** per segment (``lanes = threads``, combined by the block strategy's
  reduce) for long ones.

Each thread folds the elements ``start + lane, start + lane + lanes, ...`` of its
segment, ``UNROLL`` loads in flight, or for a non-commutative op a contiguous run, in
order (``axis_reduce.thread_reducer``). (Reading whole 16-byte vectors inside each
segment, its ends one by one, as the row kernel reads a row, was slower on an H200
for segments of 64 and 1024 elements and no faster at 16384: bench/NOTES.md.) An
element's state is the kit's ``to_state(value, index)`` with ``index`` its position
*within its segment* (argmax of a segment). An empty segment is the op's identity
(the caller decides whether that is allowed). Every segment is one piece: the grid
strategy only stores.

What this does not do yet: split one long segment over several blocks (CUB's
``DeviceSegmentedReduce`` does not either; a single huge segment runs on one block).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda, int64

from numbakern.kernels.axis_reduce import (UNROLL, build_scatter_kernel, group_reducer,
                                           thread_reducer)
from numbakern.kernels.elementwise import THREADS, grid_for
from numbakern.kernels.emits import Emit, emit_partial
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import WARP, ceil_div, max_resident_blocks
from numbakern.runtime.launch import launch

#: a warp per segment when the mean segment has at most this many elements
WARP_SEGMENT_MAX = 4096


def segment_loader(kit):
    """``load(a0, a1, k0, k1, row, r, N, R1, c0, c1)`` as ``thread_reducer`` calls it:
    element ``r`` of the 1-D ``a0`` as a state, indexed from its segment's start
    ``k0``."""
    to_state = kit.to_state

    @cuda.jit(device=True)
    def load(a0, a1, k0, k1, row, r, N, R1, c0, c1):
        return to_state(a0[r], r - k0)

    return load


def build_segment_kernel(block, kit, emit, lanes: int, ordered: bool, index32: bool):
    """Kernel ``(x, offsets, M, bad, o0, o1)``: segment ``i`` of ``x`` reduced by a group
    of ``lanes`` threads and emitted at ``i``; ``index32``: every element index fits in
    32 bits, so the loop's index arithmetic runs in them.

    Offsets are trusted no further than memory safety needs: a segment whose bounds
    decrease or leave ``[0, n]`` is clamped into them (never read out of bounds) and
    the first such segment is recorded in ``bad[0]`` (an atomic minimum, ``M`` when
    none), the first empty one in ``bad[1]``, for the caller to raise after.
    """
    threads = block.threads
    group_reduce, temp = group_reducer(block, kit, lanes)
    per_block = threads // lanes
    barrier = lanes == threads  # the block's temp storage is reused by the next segment
    thread_reduce = thread_reducer(kit, segment_loader(kit), ordered, index32)

    @cuda.jit
    def segment_kernel(x, offsets, M, bad, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        lane = tid % lanes
        row = int64(cuda.blockIdx.x) * per_block + tid // lanes
        step = int64(cuda.gridDim.x) * per_block
        n = int64(x.shape[0])
        while row < M:
            start, stop = int64(offsets[row]), int64(offsets[row + 1])
            if start < 0 or stop < start or stop > n:
                cuda.atomic.min(bad, 0, row)
                start = min(max(start, int64(0)), n)
                stop = min(max(stop, start), n)
            if stop == start and lane == 0:
                cuda.atomic.min(bad, 1, row)
            s = thread_reduce(x, x, start, 0, row, start, stop, lane, lanes, 0, 0, 0, 0)
            s = group_reduce(s, temp0, temp1)
            if lane == 0:
                emit(o0, o1, row, row, 0, 1, M, s)
            row += step
            if barrier:
                cuda.syncthreads()

    return segment_kernel


@dataclass(frozen=True)
class SegmentPlan:
    """The segment kernel's launch: one piece per output, always."""

    block: object
    lanes: int
    blocks: int
    pieces: int = 1


def choose_lanes(lanes, block, segments: int, elements: int) -> int:
    """Threads per segment: ``lanes`` if given, else a warp when the mean segment is
    short (and the block strategy has a warp form), a block otherwise."""
    if lanes is not None:
        return lanes
    short = elements <= WARP_SEGMENT_MAX * max(segments, 1)
    return WARP if short and block.offers_warp_reduce() else block.threads


class SegmentReduce:
    """The layout a reduce job hands the grid strategy for a segmented reduction.

    Args:
        x: the 1-D device view of the values; ``offsets``: the 1-D device view of the
            ``segments + 1`` offsets (any integer dtype); ``bad``: a device int64 pair
            holding ``segments``, where the kernel records the first segment with bad
            bounds and the first empty one (:func:`build_segment_kernel`).
        kit: the op's state kit; ``ordered``: keep element order (non-commutative op);
        lanes: threads per segment (``None``, 32 or the block's).
    """

    def __init__(self, x, offsets, bad, kit, ordered: bool, lanes):
        self.x, self.offsets, self.bad, self.kit = x, offsets, bad, kit
        self.ordered, self.lanes = ordered, lanes
        self.outputs = offsets.shape[0] - 1
        self.count = max(1, x.shape[0] // max(self.outputs, 1))  # mean elements per output

    def plan(self, block, blocks) -> SegmentPlan:
        lanes = choose_lanes(self.lanes, block, self.outputs, self.x.shape[0])
        groups = ceil_div(self.outputs, block.threads // lanes)
        target = blocks or 32 * max_resident_blocks(block.threads)
        return SegmentPlan(block, lanes, max(1, min(groups, target)))

    def run(self, plan: SegmentPlan, emit: Emit, out, stream) -> None:
        kit, block, x = self.kit, plan.block, self.x
        index32 = x.shape[0] + UNROLL * block.threads < 2**31
        key = ("segment_reduce", block.key, plan.lanes, self.ordered, index32, emit.name,
               kit, device_key())
        kernel = cached(key, lambda: build_segment_kernel(
            block, kit, emit.build(), plan.lanes, self.ordered, index32))
        launch(kernel, plan.blocks, block.threads, stream, x, self.offsets, self.outputs,
               self.bad, *out)

    def emit_partial(self, plan: SegmentPlan) -> Emit:
        """Partial ``row`` (each segment is its output's one piece)."""
        return emit_partial(self.kit, False)

    def reduce_partials(self, plan: SegmentPlan, partials, out, stream) -> None:
        """Each segment's one partial to its place in the result."""
        kit = self.kit
        kernel = cached(("axis_reduce", "scatter", kit, device_key()),
                        lambda: build_scatter_kernel(kit))
        launch(kernel, grid_for(self.outputs), THREADS, stream, *partials, self.outputs, 1,
               *out)


def offsets_ok(offsets: np.ndarray, size: int) -> str | None:
    """Why host ``offsets`` cannot delimit segments of ``size`` elements, or None."""
    if offsets.ndim != 1 or offsets.shape[0] < 1:
        return f"must be 1-D with at least one entry, got shape {offsets.shape}"
    if offsets.dtype.kind not in "iu":
        return f"must hold integers, got dtype {offsets.dtype}"
    if offsets[0] < 0 or offsets[-1] > size:
        return (f"must lie in [0, {size}] (the length of x), got {int(offsets[0])} .. "
                f"{int(offsets[-1])}")
    falls = offsets[1:] < offsets[:-1]  # not np.diff: it wraps for unsigned offsets
    if falls.any():
        where = int(np.argmax(falls))
        return (f"must not decrease, but offsets[{where + 1}] = {int(offsets[where + 1])} "
                f"< offsets[{where}] = {int(offsets[where])}")
    return None
