"""Warp-shuffle block reduce: a register tree inside each warp, then one warp more.

The lesson
----------
The 32 threads of a warp can read each other's registers with a *shuffle*
(``shfl_down_sync``): no shared memory, no barrier. A block reduce built on it
(CUB's ``BLOCK_REDUCE_WARP_REDUCTIONS``) runs in three phases:

1. **Warp reduce.** Each warp folds its 32 states in log2(32) = 5 shuffle steps.
   At step k every lane reads the lane ``2**k`` above it and combines
   ``mine (+) theirs``. Offsets *grow* (1, 2, 4, 8, 16), so lane 0 always combines
   a range with the range just after it: the result is in element order, and an op
   need not be commutative. (The textbook's shrinking offsets, 16 down to 1, would
   interleave ranges.) Lanes whose partner lies past lane 31 read their own value
   back and compute garbage, but lane 0 never reads from them.
2. **Exchange.** Lane 0 of each warp writes its warp's total to shared memory
   (one slot per warp); one ``__syncthreads()``.
3. **Final warp.** Warp 0 loads the warp totals (the identity where there are fewer
   warps than lanes) and reduces them with the same 5 shuffle steps.

Result: valid in thread 0 only. Cost per block: 10 shuffle steps, one barrier,
``threads / 32`` shared-memory slots; every thread count that is a multiple of 32
works, powers of two or not.

**Warp form** (a warp per row): phase 1 alone, valid in lane 0; the scan's phase 1
alone likewise (Kogge-Stone, below).

Trade-off: shuffles move data through registers at the speed of an ALU op, so this
is the fastest block reduce on every GPU since Kepler; it needs warp intrinsics,
which numbakern supplies to Numba's simulator.
"""

from __future__ import annotations

from numba import cuda

from numbakern.runtime.device import WARP

from .protocols import BlockStrategy, WarpForm


class WarpShuffle(BlockStrategy):
    """Block reduce by warp shuffles (CUB's ``BlockReduceWarpReductions``).

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).

    Order-preserving (any associative op); result valid in thread 0.

    Raises:
        TypeError: ``threads`` not an int.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024.
    """

    name = "warp_shuffle"
    needs_commutative = False

    def temp_slots(self) -> int:
        return self.warps

    def barriers(self) -> int:
        return 1

    def build_reduce(self, kit):
        warp_reduce = build_warp_reduce(kit)
        identity, store, load = kit.identity, kit.store, kit.load
        warps = self.warps

        @cuda.jit(device=True)
        def block_reduce(s, t0, t1):
            lane = cuda.threadIdx.x % WARP
            warp = cuda.threadIdx.x // WARP
            s = warp_reduce(s)  # phase 1
            if lane == 0:  # phase 2
                store(t0, t1, warp, s)
            cuda.syncthreads()
            if warp == 0:  # phase 3
                s = load(t0, t1, lane) if lane < warps else identity()
                s = warp_reduce(s)
            return s

        return block_reduce

    def build_warp_reduce(self, kit) -> WarpForm:
        """Phase 1 alone: the 5-step shuffle tree, valid in lane 0; no shared memory."""
        tree = build_warp_reduce(kit)

        @cuda.jit(device=True)
        def warp_reduce(s, t0, t1):
            return tree(s)

        return WarpForm(warp_reduce, 0)

    # --- block scan ----------------------------------------------------------------
    # The same warp-first shape serves a *scan* (CUB's ``BLOCK_SCAN_WARP_SCANS``):
    #
    # 1. **Warp scan.** Kogge-Stone inside each warp: at step k every lane reads the lane
    #    ``2**k`` *below* it (``shfl_up_sync``) and, if that lane exists, combines
    #    ``theirs (+) mine``. After 5 steps lane ``l`` holds lanes ``0..l`` combined, in
    #    order. Lanes below the offset combine nothing: no identity is folded in.
    # 2. **Exchange.** The last lane of each warp writes its warp's total to shared memory;
    #    one ``__syncthreads()``.
    # 3. **Scan of the warp totals.** Every warp reads all the totals and scans them with
    #    the same 5 steps (redundantly, which saves a second barrier); warp ``w`` then
    #    takes the prefix of warps ``0..w-1`` from lane ``w-1`` and puts it in front of
    #    its own lanes' prefixes.
    #
    # Cost: 5 + 5 shuffle steps and 2 broadcasts per thread, one barrier, ``threads / 32``
    # slots. The temp storage is reused by the next call: callers put a barrier between
    # two calls (CUB's rule for TempStorage).
    def build_scan(self, kit):
        """Device function ``block_scan(s, t0, t1) -> (inclusive, exclusive, total)``.

        ``inclusive``: this thread's state combined after those of threads ``0..tid-1``;
        ``exclusive``: those of threads ``0..tid-1`` only (the identity in thread 0, which
        callers must not combine); ``total``: the whole block's. All three are valid in
        every thread, in thread order (any associative op). Every thread must call it;
        a barrier must separate two calls that share ``t0``/``t1``.
        """
        warp_scan = build_warp_scan(kit)
        combine, identity = kit.combine, kit.identity
        shfl_up, shfl_idx, store, load = kit.shfl_up, kit.shfl_idx, kit.store, kit.load
        warps = self.warps

        @cuda.jit(device=True)
        def block_scan(s, t0, t1):
            tid = cuda.threadIdx.x
            lane = tid % WARP
            warp = tid // WARP
            inc = warp_scan(s)  # phase 1
            exc = shfl_up(inc, 1)  # lane l-1's prefix (lane 0: its own, replaced below)
            if lane == WARP - 1:  # phase 2
                store(t0, t1, warp, inc)
            cuda.syncthreads()
            w = load(t0, t1, lane) if lane < warps else identity()  # phase 3
            w = warp_scan(w)
            total = shfl_idx(w, warps - 1)
            before = shfl_idx(w, warp - 1)  # warps 0..warp-1; meaningless in warp 0
            if warp > 0:
                exc = before if lane == 0 else combine(before, exc)
                inc = combine(before, inc)
            elif lane == 0:
                exc = identity()
            return inc, exc, total

        return block_scan

    def build_warp_scan(self, kit, group: int) -> WarpForm:
        """Phase 1 alone: Kogge-Stone in runs of ``group`` lanes (:func:`build_warp_scan`);
        no shared memory."""
        scan = build_warp_scan(kit, group)

        @cuda.jit(device=True)
        def warp_scan(s, t0, t1):
            return scan(s)

        return WarpForm(warp_scan, 0)


def build_warp_reduce(kit):
    """Device function ``warp_reduce(s) -> state``: the 5-step shuffle tree.

    Every lane of the warp must call it; the result is valid in lane 0, in element
    order (offsets grow 1, 2, 4, 8, 16).
    """
    combine, shfl_down = kit.combine, kit.shfl_down

    @cuda.jit(device=True)
    def warp_reduce(s):
        offset = 1
        while offset < WARP:
            s = combine(s, shfl_down(s, offset))
            offset *= 2
        return s

    return warp_reduce


def build_warp_scan(kit, group: int = WARP):
    """Device function ``warp_scan(s) -> state``: Kogge-Stone inclusive warp scan.

    Every lane of the warp must call it; lane ``l`` gets lanes ``0..l`` combined in
    lane order (5 ``shfl_up_sync`` steps; lanes below the offset skip the combine, so
    the identity is never folded in). With ``group`` (a power of two below 32) each
    run of ``group`` lanes scans on its own in ``log2(group)`` steps: lane ``l``
    combines lane ``l - offset`` only when ``l % group >= offset``.
    """
    combine, shfl_up = kit.combine, kit.shfl_up

    @cuda.jit(device=True)
    def warp_scan(s):
        pos = cuda.threadIdx.x % group
        offset = 1
        while offset < group:
            other = shfl_up(s, offset)
            if pos >= offset:
                s = combine(other, s)
            offset *= 2
        return s

    return warp_scan
