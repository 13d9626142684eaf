"""Blelloch block scan: a work-efficient up-sweep and down-sweep over a tree in shared memory.

The lesson
----------
Guy E. Blelloch, "Prefix Sums and Their Applications" (CMU-CS-90-190, 1990); on GPUs
Harris, Sengupta and Owens, "Parallel Prefix Sum (Scan) with CUDA" (GPU Gems 3,
chapter 39). The states of the block's threads are the leaves of a balanced binary
tree of ``p`` leaves (``threads`` rounded up to a power of two), stored in place:

1. **Stage.** Thread ``t`` writes its state to leaf ``t``; barrier.
2. **Up-sweep (reduce).** For ``offset = 1, 2, 4, ..., p/2``: ``p / (2*offset)``
   threads each combine a left subtree root ``ai = offset*(2k+1) - 1`` into the right
   one ``bi = ai + offset``: ``slot[bi] = slot[ai] (+) slot[bi]``; barrier per level.
   The root, slot ``p - 1``, ends up holding the block total.
3. **Clear the root.** Thread 0 saves the total and puts the identity at the root: the
   prefix of the whole tree is *nothing*.
4. **Down-sweep.** For ``offset = p/2, ..., 1``, each parent ``bi`` with left child
   root ``ai`` hands its prefix to the left child, and ``prefix (+) left sum`` to the
   right child; barrier per level. Each leaf ends up holding its exclusive prefix.

``2(p - 1)`` combines in all: *work-efficient*, like the sequential scan, against the
``p log2 p`` of Hillis-Steele, at the price of twice the steps (and barriers).

Details that make it exact and fast:

* **No identity folded in.** Nodes on the left spine of the tree (pair ``k = 0`` at
  every level) hold *nothing*, so their right child gets the left sum as it is, not
  ``identity (+) left``; tree nodes wholly past the last thread (``threads`` not a
  power of two) are skipped rather than filled with the identity.
* **Bank conflicts.** At ``offset = 32`` every active thread of a warp would hit the
  same shared-memory bank. Slot ``i`` is stored at ``i + i // 32`` (GPU Gems 3's
  ``CONFLICT_FREE_OFFSET`` with 32 banks), which spreads them over the banks.
"""

from __future__ import annotations

from numba import cuda

from numbakern.strategy import BlockStrategy, reduce_from_scan, log2_ceil

LOG_BANKS = 5


@cuda.jit(device=True)
def _slot(i):
    return i + (i >> LOG_BANKS)


class Blelloch(BlockStrategy):
    """Block scan (and reduce) by Blelloch's up-sweep and down-sweep, bank-conflict padded.

    Blelloch, "Prefix Sums and Their Applications" (CMU-CS-90-190, 1990).

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).

    Order-preserving (any associative op). ``build_scan`` results are valid in every
    thread; ``build_reduce`` returns the block total, valid in every thread.

    Raises:
        TypeError: ``threads`` not an int.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024.
    """

    name = "blelloch"
    needs_commutative = False

    @property
    def leaves(self) -> int:
        """``threads`` rounded up to a power of two."""
        return 1 << log2_ceil(self.threads)

    def temp_slots(self) -> int:
        p = self.leaves
        return p + (p - 1) // 32 + 1  # the padded tree, and one slot for the total

    def barriers(self) -> int:
        return 2 + 2 * log2_ceil(self.leaves)

    def build_scan(self, kit):
        """Device function ``block_scan(s, t0, t1) -> (inclusive, exclusive, total)``.

        Same contract as ``WarpShuffle.build_scan``: all three valid in every thread,
        ``exclusive`` is the identity in thread 0 (never to be combined), and a
        barrier must separate two calls that share ``t0``/``t1``.
        """
        combine, identity, store, load = kit.combine, kit.identity, kit.store, kit.load
        threads, p = self.threads, self.leaves
        root, total_slot = _slot_host(p - 1), self.temp_slots() - 1

        @cuda.jit(device=True)
        def block_scan(s, t0, t1):
            tid = cuda.threadIdx.x
            store(t0, t1, _slot(tid), s)  # 1. stage
            cuda.syncthreads()
            offset = 1
            pairs = p // 2
            while pairs > 0:  # 2. up-sweep
                if tid < pairs:
                    ai = offset * (2 * tid + 1) - 1
                    bi = ai + offset
                    if ai + 1 < threads:  # the right subtree holds threads
                        store(t0, t1, _slot(bi),
                              combine(load(t0, t1, _slot(ai)), load(t0, t1, _slot(bi))))
                    elif ai + 1 - offset < threads:  # only the left one does
                        store(t0, t1, _slot(bi), load(t0, t1, _slot(ai)))
                cuda.syncthreads()
                offset *= 2
                pairs //= 2
            if tid == 0:  # 3. save the total, clear the root
                store(t0, t1, total_slot, load(t0, t1, root))
                store(t0, t1, root, identity())
            pairs = 1
            offset = p // 2
            while pairs < p:  # 4. down-sweep
                cuda.syncthreads()
                if tid < pairs:
                    ai = offset * (2 * tid + 1) - 1
                    bi = ai + offset
                    if ai + 1 - offset < threads:  # the parent holds threads
                        left = load(t0, t1, _slot(ai))
                        prefix = load(t0, t1, _slot(bi))
                        store(t0, t1, _slot(ai), prefix)
                        if ai + 1 < threads:  # left spine (tid 0): no prefix to add
                            store(t0, t1, _slot(bi), left if tid == 0 else combine(prefix, left))
                pairs *= 2
                offset //= 2
            cuda.syncthreads()
            exc = load(t0, t1, _slot(tid))
            total = load(t0, t1, total_slot)
            inc = s if tid == 0 else combine(exc, s)
            return inc, exc, total

        return block_scan

    def build_reduce(self, kit):
        """Device function ``block_reduce(s, t0, t1)``: the scan's total, in every thread."""
        return reduce_from_scan(self.build_scan(kit))


def _slot_host(i: int) -> int:
    return i + (i >> LOG_BANKS)
