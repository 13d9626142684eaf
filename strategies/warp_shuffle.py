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

Trade-off: shuffles move data through registers at the speed of an ALU op, so this
is the fastest block reduce on every GPU since Kepler; it needs warp intrinsics,
which numbakern supplies to Numba's simulator.
"""

from __future__ import annotations

from numba import cuda

from numbakern.strategy import BlockStrategy

WARP = 32


class WarpShuffle(BlockStrategy):
    """Block reduce by warp shuffles (CUB's ``BlockReduceWarpReductions``).

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256).

    Order-preserving (any associative op); result valid in thread 0.
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
