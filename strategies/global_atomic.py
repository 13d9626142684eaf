"""Global atomics histogram: every element adds one to its bin's counter in global memory.

The lesson
----------
The simplest parallel histogram: thread ``t`` reads elements ``t, t + T, t + 2T, ...``
(a grid-stride loop, coalesced reads) and for each one issues
``atomicAdd(&counts[bin], 1)`` on the int64 counters in global memory. There is no
shared memory and no merge step, so any number of bins works (a million bins is
fine), and one launch does everything.

The trade-off is **contention**. Atomics on global memory are performed by the L2
cache; atomics to *different* addresses proceed in parallel, but atomics to the
*same* address serialise. With values spread uniformly over many bins this is
close to a plain streaming read. With every value in one bin (the worst case),
every one of the ``n`` atomics queues on the same L2 line, and throughput falls to
one update per L2 atomic cycle for the whole GPU. The privatized strategies
(``shared_privatized``, ``warp_privatized``) move that contention into each block's
shared memory and send only one atomic per bin per block to global memory.
"""

from __future__ import annotations

from numba import cuda, int64, uint32

from .protocols import HistogramStrategy


class GlobalAtomic(HistogramStrategy):
    """One ``atomicAdd`` per element on global int64 counters; any number of bins.

    Sanders and Kandrot, "CUDA by Example" (2010), chapter 9: the global-memory
    atomics histogram, the baseline its shared-memory version improves on.

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).
        blocks: blocks of the grid-stride loop (``None``: enough to fill the device).

    Raises:
        TypeError: ``threads`` or ``blocks`` not an int (a float or a bool).
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; ``blocks`` below
            1 or past ``2**31 - 1``.
    """

    name = "global_atomic"
    privatized = False

    def shared_slots(self, bins: int) -> int:
        return 0

    def build_counter(self, bins: int):
        @cuda.jit(device=True)
        def clear(sh):
            pass

        @cuda.jit(device=True)
        def count(sh, out, b):
            cuda.atomic.add(out, b, int64(1))

        @cuda.jit(device=True)
        def total(sh, b):
            return uint32(0)

        return clear, count, total
