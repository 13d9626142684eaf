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

Cost: ``log2(threads)`` steps of one shared-memory read, one write and one barrier;
``threads * log2(threads)`` combines in all, against ``2 * threads`` for the
work-efficient Blelloch scan (``strategies/blelloch.py``): more work, fewer steps.
With a thread per element that is the right trade on a GPU, where idle threads cost
as much as busy ones; the warp-shuffle scan (``strategies/warp_shuffle.py``) runs the
same algorithm inside each warp in registers, with no barriers.
"""

from __future__ import annotations

from numba import cuda

from numbakern.strategy import BlockStrategy, reduce_from_scan, log2_ceil


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
        combine, identity, store, load = kit.combine, kit.identity, kit.store, kit.load
        threads = self.threads

        @cuda.jit(device=True)
        def block_scan(s, t0, t1):
            tid = cuda.threadIdx.x
            store(t0, t1, tid, s)  # 1. stage in buffer 0
            cuda.syncthreads()
            src = 0
            d = 1
            while d < threads:  # 2. one step per power of two
                if tid >= d:
                    s = combine(load(t0, t1, src + tid - d), s)
                src = threads - src  # the other buffer
                store(t0, t1, src + tid, s)
                cuda.syncthreads()
                d *= 2
            total = load(t0, t1, src + threads - 1)  # 3. results
            exc = load(t0, t1, src + tid - 1) if tid > 0 else identity()
            return s, exc, total

        return block_scan

    def build_reduce(self, kit):
        """Device function ``block_reduce(s, t0, t1)``: the scan's total, in every thread."""
        return reduce_from_scan(self.build_scan(kit))
