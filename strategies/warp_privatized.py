"""Warp-privatized histogram: each warp of a block counts into its own sub-histogram.

The lesson
----------
``shared_privatized`` gives each *block* a private copy of the bins; here each
*warp* gets one: a block of ``W`` warps keeps ``W * bins`` uint32 counters in shared
memory, warp ``w``'s at ``sh[w * bins : (w + 1) * bins]``.

1. **Clear** all ``W * bins`` counters, barrier.
2. **Count**: a grid-stride loop; each element does ``atomicAdd(&sh[w*bins + bin], 1)``
   in its own warp's copy.
3. **Merge**: after a barrier, thread ``t`` sums bin ``b``'s ``W`` copies
   (``b = t, t + threads, ...``) and folds the sum into the global int64 counters
   with one ``atomicAdd``, as ``shared_privatized`` does.

Why: with one copy per block, the warps of a block that hit the same bin contend
with each other on one shared address. With one per warp, only lanes of the *same*
warp can collide, and different warps never wait for each other. Measured on an
H200, that buys nothing: 611 us for 2^28 uniform values into 256 bins and 613 us all
in one bin, against 595 and 597 for ``shared_privatized`` (bench/NOTES.md,
2026-12-01). The lanes of a warp on one address were never the cost (an
``atomicAdd`` of one compiles to ``ATOMS.POPC.INC``, one operation for all of
them), and the warps' turns cost less than this strategy's merge of ``W`` copies.

The price: ``W`` times the shared memory of ``shared_privatized`` (``4 * W * bins``
bytes: 8 warps and 256 bins take 8 KiB; 1536 bins is the most 8 warps can hold in
48 KiB, and more raise ``ValueError``), and a merge that reads ``W`` counters a bin.
"""

from __future__ import annotations

from numba import cuda, uint32

from numbakern.runtime.device import WARP

from .protocols import HistogramStrategy


class WarpPrivatized(HistogramStrategy):
    """One private copy of the bins per warp, in shared memory, summed and merged.

    Podlozhnyuk, "Histogram calculation in CUDA" (NVIDIA, 2007): per-warp
    sub-histograms; Gómez-Luna et al., "An optimized approach to histogram computation
    on GPU" (Machine Vision and Applications, 2013): replicated sub-histograms.

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).
        blocks: blocks of the grid-stride loop (``None``: enough to fill the device).

    Uses ``4 * (threads // 32) * bins`` bytes of shared memory a block: at most 1536
    bins with 256 threads.

    Raises:
        TypeError: ``threads`` or ``blocks`` not an int (a float or a bool).
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; ``blocks`` below
            1 or past ``2**31 - 1``; when counting, more bins than fit in shared memory.
    """

    name = "warp_privatized"
    privatized = True

    def shared_slots(self, bins: int) -> int:
        return self.warps * bins

    def build_counter(self, bins: int):
        threads, warps = self.threads, self.warps
        slots = warps * bins

        @cuda.jit(device=True)
        def clear(sh):
            s = cuda.threadIdx.x
            while s < slots:
                sh[s] = uint32(0)
                s += threads
            cuda.syncthreads()

        @cuda.jit(device=True)
        def count(sh, out, b):
            cuda.atomic.add(sh, (cuda.threadIdx.x // WARP) * bins + b, uint32(1))

        @cuda.jit(device=True)
        def total(sh, b):
            c = uint32(0)
            for w in range(warps):
                c += sh[w * bins + b]
            return c

        return clear, count, total
