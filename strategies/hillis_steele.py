"""Hillis-Steele block scan: every thread combines with the one 2**k below it, in shared memory.

The lesson
----------
W. Daniel Hillis and Guy L. Steele, "Data Parallel Algorithms" (CACM, 1986), scan
``n`` values in log2(n) steps by letting *every* element work at every step:

1. **Stage.** Thread ``t`` writes its state to slot ``t`` of buffer 0; barrier.
2. **Steps** ``d = 1, 2, 4, ...`` while ``d < threads``: thread ``t`` reads slot
   ``t - d`` of the current buffer (if ``t >= d``) and combines
   ``slot[t - d] (+) mine``, then writes the result to the *other* buffer; barrier.
   After the step for ``d``, thread ``t`` holds threads ``t - 2d + 1 .. t`` combined.
   Two buffers (*double buffering*) let a step read the old values while it writes
   the new ones with a single barrier per step.
3. **Results.** Thread ``t`` holds its inclusive prefix; its exclusive prefix is slot
   ``t - 1`` of the final buffer, the block total slot ``threads - 1``.

Threads below ``d`` skip the combine: no identity is ever folded in, and ranges are
combined in element order, so any associative op works.

Cost: ``log2(p)`` steps of one shared-memory read, one write and one barrier for
``p`` threads; ``p log2(p) - (p - 1)`` combines in all (thread ``t`` combines at every
step whose ``d <= t``: 129 for a warp), against about ``3(p - 1)`` for the inclusive
scan of the work-efficient Blelloch scan (``strategies/blelloch.py``: 88 for a warp):
more work, fewer steps.
With a thread per element that is the right trade on a GPU, where idle threads cost
as much as busy ones; the warp-shuffle scan (``strategies/warp_shuffle.py``) runs the
same algorithm inside each warp in registers, with no barriers.

**Warp form** (a warp per row): the same steps in each run of ``group`` lanes on the
run's own slots, ``__syncwarp()`` for ``__syncthreads()``: what ``warp_shuffle`` does
with shuffles, done through shared memory.
"""

from __future__ import annotations

from numba import cuda

from numbakern.runtime.device import WARP

from .protocols import (BlockStrategy, WarpForm, block_barrier, log2_ceil, place_in_block,
                        place_in_runs, reduce_from_scan, warp_barrier, warp_reduce_form,
                        warp_scan_form)


class HillisSteele(BlockStrategy):
    """Block scan (and reduce) by Hillis-Steele steps on double-buffered shared memory.

    Hillis and Steele, "Data Parallel Algorithms" (CACM, 1986).

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).

    Order-preserving (any associative op). ``build_scan`` results are valid in every
    thread; ``build_reduce`` returns the block total, valid in every thread.

    Raises:
        TypeError: ``threads`` not an int.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024.
    """

    name = "hillis_steele"
    needs_commutative = False

    def temp_slots(self) -> int:
        return 2 * self.threads

    def barriers(self) -> int:
        return 1 + log2_ceil(self.threads)

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
        """The same steps in each run of ``group`` lanes, on the run's own
        ``2 * group`` slots (64 a warp), ``__syncwarp()`` for barriers;
        returns the inclusive prefix, and ends with a ``__syncwarp()`` so that the next
        call may reuse the slots at once."""
        scan = _build_scan(kit, group, warp_barrier, place_in_runs(group, 2 * group))
        return warp_scan_form(scan, 2 * WARP)

    def build_warp_reduce(self, kit) -> WarpForm:
        """The warp scan's total over the whole warp, valid in every lane."""
        scan = _build_scan(kit, WARP, warp_barrier, place_in_runs(WARP, 2 * WARP))
        return warp_reduce_form(scan, 2 * WARP)


def _build_scan(kit, lanes: int, barrier, place):
    """Hillis-Steele over runs of ``lanes`` threads (a block, or runs within a warp):
    ``scan(s, t0, t1) -> (inclusive, exclusive, total)``; ``place()`` gives the thread's
    place in its run and the run's first slot, ``barrier()`` synchronises a run."""
    combine, identity, store, load = kit.combine, kit.identity, kit.store, kit.load

    @cuda.jit(device=True)
    def scan(s, t0, t1):
        i, base = place()
        store(t0, t1, base + i, s)  # 1. stage in buffer 0
        barrier()
        src = 0
        d = 1
        while d < lanes:  # 2. one step per power of two
            if i >= d:
                s = combine(load(t0, t1, base + src + i - d), s)
            src = lanes - src  # the other buffer
            store(t0, t1, base + src + i, s)
            barrier()
            d *= 2
        total = load(t0, t1, base + src + lanes - 1)  # 3. results
        exc = load(t0, t1, base + src + i - 1) if i > 0 else identity()
        return s, exc, total

    return scan
