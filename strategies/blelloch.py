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

At most ``2(p - 1)`` combines for the exclusive scan (``p - 1`` a sweep; the left
spine's ``log2 p`` of the down-sweep are skipped, below) and ``p - 1`` more for the
inclusive one, each thread adding its own state: *work-efficient*, a constant times
the sequential scan's, against the ``p log2 p - (p - 1)`` of Hillis-Steele, at the
price of twice the steps (and barriers).

Details that make it exact and fast:

* **No identity folded in.** Nodes on the left spine of the tree (pair ``k = 0`` at
  every level) hold *nothing*, so their right child gets the left sum as it is, not
  ``identity (+) left``; tree nodes wholly past the last thread (``threads`` not a
  power of two) are skipped rather than filled with the identity.
* **Warp form** (a warp per row): the same sweeps in each run of ``group`` lanes,
  on the run's own padded tree, ``__syncwarp()`` for ``__syncthreads()``.
* **Bank conflicts.** A sweep's threads touch slots ``2 * offset`` apart: a
  ``2 * offset``-way conflict on 32 banks, every thread of a warp on one bank from
  ``offset = 16``. Slot ``i`` is stored at ``i + i // 32`` (GPU Gems 3's
  ``CONFLICT_FREE_OFFSET`` with 32 banks), which spreads them over the banks.
"""

from __future__ import annotations

from numba import cuda

from numbakern.runtime.device import WARP

from .protocols import (BlockStrategy, WarpForm, block_barrier, log2_ceil, place_in_block,
                        place_in_runs, reduce_from_scan, warp_barrier, warp_reduce_form,
                        warp_scan_form)

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
        return _tree_slots(self.threads)

    def barriers(self) -> int:
        return 2 + 2 * log2_ceil(self.leaves)

    def build_scan(self, kit):
        """Device function ``block_scan(s, t0, t1) -> (inclusive, exclusive, total)``.

        Same contract as ``WarpShuffle.build_scan``: all three valid in every thread,
        ``exclusive`` is the identity in thread 0 (never to be combined), and a
        barrier must separate two calls that share ``t0``/``t1``.
        """
        return _build_scan(kit, self.threads, block_barrier, place_in_block)

    def build_reduce(self, kit):
        """Device function ``block_reduce(s, t0, t1)``: the scan's total, in every thread."""
        return reduce_from_scan(self.build_scan(kit))

    def build_warp_scan(self, kit, group: int) -> WarpForm:
        """The same sweeps in each run of ``group`` lanes, on the run's own padded tree,
        ``__syncwarp()`` for barriers; returns the inclusive prefix, and ends with a
        ``__syncwarp()`` so that the next call may reuse the slots at once."""
        scan = _build_scan(kit, group, warp_barrier, place_in_runs(group, _tree_slots(group)))
        return warp_scan_form(scan, (WARP // group) * _tree_slots(group))

    def build_warp_reduce(self, kit) -> WarpForm:
        """The warp scan's total over the whole warp, valid in every lane."""
        scan = _build_scan(kit, WARP, warp_barrier, place_in_runs(WARP, _tree_slots(WARP)))
        return warp_reduce_form(scan, _tree_slots(WARP))


def _tree_slots(lanes: int) -> int:
    """Slots of the padded tree of ``lanes`` leaves (rounded up to a power of two),
    and one for the total."""
    p = 1 << log2_ceil(lanes)
    return p + (p - 1) // 32 + 1


def _build_scan(kit, threads: int, barrier, place):
    """Blelloch's scan over runs of ``threads`` threads (a block, or runs within a
    warp): ``scan(s, t0, t1) -> (inclusive, exclusive, total)``; ``place()`` gives the
    thread's place in its run and the run's first slot, ``barrier()`` synchronises a
    run."""
    combine, identity, store, load = kit.combine, kit.identity, kit.store, kit.load
    p = 1 << log2_ceil(threads)
    root, total_slot = _slot_host(p - 1), _tree_slots(threads) - 1

    @cuda.jit(device=True)
    def scan(s, t0, t1):
        tid, base = place()
        store(t0, t1, base + _slot(tid), s)  # 1. stage
        barrier()
        offset = 1
        pairs = p // 2
        while pairs > 0:  # 2. up-sweep
            if tid < pairs:
                ai = offset * (2 * tid + 1) - 1
                bi = ai + offset
                if ai + 1 < threads:  # the right subtree holds threads
                    store(t0, t1, base + _slot(bi),
                          combine(load(t0, t1, base + _slot(ai)), load(t0, t1, base + _slot(bi))))
                elif ai + 1 - offset < threads:  # only the left one does
                    store(t0, t1, base + _slot(bi), load(t0, t1, base + _slot(ai)))
            barrier()
            offset *= 2
            pairs //= 2
        if tid == 0:  # 3. save the total, clear the root
            store(t0, t1, base + total_slot, load(t0, t1, base + root))
            store(t0, t1, base + root, identity())
        pairs = 1
        offset = p // 2
        while pairs < p:  # 4. down-sweep
            barrier()
            if tid < pairs:
                ai = offset * (2 * tid + 1) - 1
                bi = ai + offset
                if ai + 1 - offset < threads:  # the parent holds threads
                    left = load(t0, t1, base + _slot(ai))
                    prefix = load(t0, t1, base + _slot(bi))
                    store(t0, t1, base + _slot(ai), prefix)
                    if ai + 1 < threads:  # left spine (tid 0): no prefix to add
                        store(t0, t1, base + _slot(bi),
                              left if tid == 0 else combine(prefix, left))
            pairs *= 2
            offset //= 2
        barrier()
        exc = load(t0, t1, base + _slot(tid))
        total = load(t0, t1, base + total_slot)
        inc = s if tid == 0 else combine(exc, s)
        return inc, exc, total

    return scan


def _slot_host(i: int) -> int:
    return i + (i >> LOG_BANKS)
