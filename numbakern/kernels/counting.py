"""Counting into bins: the kernel every histogram strategy runs.

A histogram is a reduction whose state is a whole array of counters: every element
adds one to the counter of its bin. Where those counters live while a block counts
is the strategy (``strategies/protocols.py``'s ``HistogramStrategy``: global
atomics, shared-memory or per-warp copies): each gives three device functions,

* ``clear(sh)``: every thread of the block calls it; zeroes the block's private
  counters in shared memory and ends with a barrier;
* ``count(sh, out, b)``: one element falls in bin ``b`` (``0 <= b < bins``);
* ``total(sh, b) -> uint32``: after a barrier, the block's count of bin ``b``;

and the kernel here runs them: a grid-stride loop over the elements, each mapped to
its bin (or ``-1``: not counted) by a ``bin_of(x, i, aux)`` device function, then the
block's private counts folded into the global int64 counts with one atomic per
non-empty bin. The radix sort (``strategies/radix_sort.py``) uses the same three
functions to count the digits of one tile.
"""

from __future__ import annotations

from numba import cuda, int64, uint32

#: bytes of one private counter (uint32: a strategy's grid keeps every block under
#: 2**31 elements)
COUNTER_BYTES = 4


def build_histogram_kernel(strategy, bins: int, bin_of):
    """Kernel ``(x, n, aux, out)``: count the ``n`` elements of ``x`` into ``out``
    (int64, zeroed), element ``i`` in bin ``bin_of(x, i, aux)`` (``-1``: not counted),
    through ``strategy``'s counters."""
    clear, count, total = strategy.build_counter(bins)
    slots = max(1, strategy.shared_slots(bins))
    threads, privatized = strategy.threads, strategy.privatized

    @cuda.jit
    def histogram_kernel(x, n, aux, out):
        sh = cuda.shared.array(slots, uint32)
        clear(sh)
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < n:
            b = bin_of(x, i, aux)
            if b >= 0:
                count(sh, out, b)
            i += stride
        if privatized:  # fold the block's counts: one atomic per non-empty bin
            cuda.syncthreads()
            b = cuda.threadIdx.x
            while b < bins:
                c = total(sh, b)
                if c != 0:
                    cuda.atomic.add(out, b, int64(c))
                b += threads

    return histogram_kernel
