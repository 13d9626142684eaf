"""Shared-memory tree block reduce, sequential addressing, one barrier per level.

The lesson
----------
Before warp shuffles existed, threads of a block could only talk through shared
memory. Mark Harris's "Optimizing Parallel Reduction in CUDA" (NVIDIA, 2007)
walks through seven versions; this is his *sequential addressing* one (version 3),
the first free of bank conflicts and divergent warps:

1. **Stage.** Every thread writes its state to slot ``tid``; ``__syncthreads()``.
2. **Fold to a power of two.** With ``threads = p + r`` (``p`` the largest power of
   two not above ``threads``), threads ``tid < r`` fold slot ``tid + p`` into their
   own; barrier. (Skipped when ``threads`` is a power of two.)
3. **Halve.** For ``stride = p/2, p/4, ..., 1``: threads ``tid < stride`` combine
   ``slot[tid] (+) slot[tid + stride]`` and write it back; barrier after each level.

Result: valid in thread 0. Cost: log2(threads) levels, one barrier each, and
``threads`` shared-memory slots.

**Warp form** (a warp per row): the same halving on each warp's own 32 slots, with
``__syncwarp()`` for ``__syncthreads()``: 5 levels, valid in lane 0.

Trade-off: simple and portable, but a barrier per level and a shared-memory round
trip per step cost more than shuffles. And slot ``tid`` is combined with slot
``tid + stride``, far from it in element order: the op must be **commutative**
(sum, max, ...; not, say, a matrix product).
"""

from __future__ import annotations

from numba import cuda

from numbakern.runtime.device import FULL_MASK, WARP

from .protocols import BlockStrategy, WarpForm, log2_ceil


class SharedTree(BlockStrategy):
    """Block reduce by a shared-memory tree with sequential addressing (Harris 2007, #3).

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).

    Needs a commutative op; result valid in thread 0.

    Raises:
        TypeError: ``threads`` not an int.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024.
    """

    name = "shared_tree"
    needs_commutative = True

    @property
    def power_of_two(self) -> int:
        return 1 << (self.threads.bit_length() - 1)

    def temp_slots(self) -> int:
        return self.threads

    def barriers(self) -> int:
        fold = 0 if self.power_of_two == self.threads else 1
        return 1 + fold + log2_ceil(self.power_of_two)

    def build_reduce(self, kit):
        combine, store, load = kit.combine, kit.store, kit.load
        threads, p = self.threads, self.power_of_two

        @cuda.jit(device=True)
        def block_reduce(s, t0, t1):
            tid = cuda.threadIdx.x
            store(t0, t1, tid, s)  # 1. stage
            cuda.syncthreads()
            if threads > p:  # 2. fold the r = threads - p extra slots
                if tid < threads - p:
                    s = combine(s, load(t0, t1, tid + p))
                    store(t0, t1, tid, s)
                cuda.syncthreads()
            stride = p // 2
            while stride > 0:  # 3. halve
                if tid < stride:
                    s = combine(s, load(t0, t1, tid + stride))
                    store(t0, t1, tid, s)
                cuda.syncthreads()
                stride //= 2
            return s

        return block_reduce

    def build_warp_reduce(self, kit) -> WarpForm:
        """The same tree on each warp's own 32 slots, with
        ``__syncwarp()`` for the barriers: 5 halvings, valid in lane 0."""
        combine, store, load = kit.combine, kit.store, kit.load

        @cuda.jit(device=True)
        def warp_reduce(s, t0, t1):
            tid = cuda.threadIdx.x
            lane = tid % WARP
            store(t0, t1, tid, s)
            cuda.syncwarp(FULL_MASK)
            stride = WARP // 2
            while stride > 0:
                if lane < stride:
                    s = combine(s, load(t0, t1, tid + stride))
                    store(t0, t1, tid, s)
                cuda.syncwarp(FULL_MASK)
                stride //= 2
            return s

        return WarpForm(warp_reduce, WARP)
