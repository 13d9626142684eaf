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

from numba import cuda, int64, uint32, uint64

from numbakern.runtime.device import blocks_per_multiprocessor
from numbakern.runtime.device import resident_blocks as device_resident_blocks
from numbakern.runtime.launch import bounded_jit

#: bytes of one private counter (uint32: a strategy's grid keeps every block under
#: 2**31 elements)
COUNTER_BYTES = 4

#: elements a thread bins per trip of the counting loop (written out four times)
UNROLL = 4


#: registers a counting thread may use (ptxas's launch bounds): at 40 a trip's four
#: loads are all in flight (at 32, sm_90 SASS issued two, then one at a time)
REGISTERS = 40


def launch_bounds(threads: int) -> tuple[int, int]:
    """``(threads, blocks a multiprocessor)`` for ptxas, so that every block of
    :func:`resident_blocks`'s grid is resident at once: no part of it is left to a
    second wave (37 registers and a grid of 8 blocks of 256 a multiprocessor ran
    6, then 2)."""
    return threads, blocks_per_multiprocessor(threads, REGISTERS)


def resident_blocks(threads: int) -> int:
    """Blocks of ``threads`` that fill the device once at the counting kernel's
    launch bounds (the simulator's few blocks there)."""
    return device_resident_blocks(threads, REGISTERS)


def build_histogram_kernel(strategy, bins: int, bin_of):
    """Kernel ``(x, n, aux, out)``: count the ``n`` elements of ``x`` into ``out``
    (int64, zeroed), element ``i`` in bin ``bin_of(x, i, aux)`` (``-1``: not counted),
    through ``strategy``'s counters."""
    clear, count, total = strategy.build_counter(bins)
    slots = max(1, strategy.shared_slots(bins))
    threads, privatized = strategy.threads, strategy.privatized

    @bounded_jit(launch_bounds(threads))
    def histogram_kernel(x, n, aux, out):
        sh = cuda.shared.array(slots, uint32)
        clear(sh)
        # unsigned indices: no negative-index wraparound arithmetic on each load
        i = uint64(cuda.grid(1))
        stride = uint64(cuda.gridsize(1))
        end = uint64(n)
        stride2, stride3 = stride + stride, stride + stride + stride
        trip = stride3 + stride  # UNROLL strides (uint64 arithmetic throughout)
        # UNROLL elements a trip, all binned before any is counted: their loads are
        # independent, so a thread has UNROLL of them in flight, not one
        while i + stride3 < end:
            # the trip's elements read first: each ``bin_of`` reads its element again,
            # which the compiler folds into these loads, so the four can be in flight
            # before the first is binned (not held back behind its branches)
            x[i], x[i + stride], x[i + stride2], x[i + stride3]
            b0 = bin_of(x, i, aux)
            b1 = bin_of(x, i + stride, aux)
            b2 = bin_of(x, i + stride2, aux)
            b3 = bin_of(x, i + stride3, aux)
            if b0 >= 0:
                count(sh, out, b0)
            if b1 >= 0:
                count(sh, out, b1)
            if b2 >= 0:
                count(sh, out, b2)
            if b3 >= 0:
                count(sh, out, b3)
            i += trip
        while i < end:
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


def build_bin_index_kernel(bin_of):
    """Kernel ``(x, n, aux, out, missing)``: ``out[i] = bin_of(x, i, aux)``, or
    ``missing`` for an element ``bin_of`` leaves out: each element's bin, for the
    passes that need more than its count (a histogram's weighted sums)."""

    @cuda.jit
    def bin_index_kernel(x, n, aux, out, missing):
        i = uint64(cuda.grid(1))
        stride = uint64(cuda.gridsize(1))
        end = uint64(n)
        while i < end:
            b = bin_of(x, i, aux)
            out[i] = b if b >= 0 else missing
            i += stride

    return bin_index_kernel
