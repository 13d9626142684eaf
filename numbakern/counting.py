"""Counting into bins: the protocol of the histogram strategies, and the kernel they share.

A histogram is a reduction whose state is a whole array of counters: every element
adds one to the counter of its bin. Where those counters live while a block counts
is the strategy (``strategies/global_atomic.py``, ``strategies/shared_privatized.py``,
``strategies/warp_privatized.py``): each gives three device functions,

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

from typing import ClassVar

from numba import cuda, int64, uint32

from . import kernels
from .arrays import SIMULATOR, Workspace
from .job import max_resident_blocks
from .launch import launch
from .strategy import Immutable, _check_threads, ceil_div, check_optional_count

#: static shared memory a block may use (48 KiB without opting in to more)
SHARED_LIMIT = 48 * 1024
#: bytes of one private counter (uint32: `grid` keeps every block under 2**31 elements)
COUNTER_BYTES = 4


class HistogramStrategy(Immutable):
    """Where a block's counts accumulate before they reach the global counters.

    Args:
        threads: threads per block (a multiple of 32, 32 to 1024).
        blocks: blocks of the grid-stride loop (``None``: enough to fill the device,
            at most one per ``threads`` elements).

    Subclasses set ``name`` and ``privatized`` and implement :meth:`shared_slots`
    and :meth:`build_counter`.
    """

    name: ClassVar[str]
    #: whether counts gather in shared memory first (then folded with atomics)
    privatized: ClassVar[bool]
    DEFAULT_THREADS: ClassVar[int] = 64 if SIMULATOR else 256

    def __init__(self, threads: int | None = None, blocks: int | None = None):
        self.threads = _check_threads(self.DEFAULT_THREADS if threads is None else threads)
        self.blocks = check_optional_count(blocks, "blocks")

    @property
    def warps(self) -> int:
        return self.threads // 32

    @property
    def key(self) -> tuple:
        return (self.name, self.threads, self.blocks)

    def __repr__(self) -> str:
        blocks = "" if self.blocks is None else f", blocks={self.blocks}"
        return f"{type(self).__name__}(threads={self.threads}{blocks})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def shared_slots(self, bins: int) -> int:
        """uint32 counters this strategy keeps in shared memory for ``bins`` bins."""
        raise NotImplementedError

    def fits(self, bins: int) -> bool:
        return self.shared_slots(bins) * COUNTER_BYTES <= SHARED_LIMIT

    def check(self, bins: int) -> None:
        """Raise ``ValueError`` if ``bins`` private counters overflow shared memory."""
        if not self.fits(bins):
            need = self.shared_slots(bins) * COUNTER_BYTES
            raise ValueError(
                f"{self.name} with {self.threads} threads needs {need} bytes of shared "
                f"memory for {bins} bins, more than the {SHARED_LIMIT} a block has: use "
                "fewer bins, fewer threads (warp_privatized), shared_privatized or "
                "global_atomic")

    def build_counter(self, bins: int):
        """``(clear, count, total)`` device functions for ``bins`` bins (module doc)."""
        raise NotImplementedError

    def grid(self, n: int) -> int:
        """Blocks for ``n`` elements: ``blocks`` if given, else enough to fill the
        device; never so few that one block counts 2**31 elements (its private uint32
        counters would overflow)."""
        fewest = ceil_div(n, 2**31)
        if self.blocks is not None:  # at most one a element: more would count nothing
            return max(min(self.blocks, max(1, n)), fewest)
        return max(1, fewest, min(ceil_div(n, self.threads), max_resident_blocks(self.threads)))

    def histogram(self, job: "HistogramJob") -> None:
        """Add the counts of ``job.x`` to ``job.out`` (zeroed by the caller)."""
        self.check(job.bins)
        key = ("histogram", self.key, job.bins, job.bin_key, kernels.device_key())
        kernel = kernels.cached(key, lambda: build_histogram_kernel(self, job.bins,
                                                                    job.bin_of))
        launch(kernel, self.grid(job.n), self.threads, job.stream, job.x, job.n, job.aux,
               job.out)


class HistogramJob:
    """One histogram in flight.

    Attributes:
        x: the input, a 1-D device view; ``n`` its length.
        bins: number of counters; ``out`` a zeroed 1-D int64 device array of them.
        bin_of: device function ``bin_of(x, i, aux) -> int64``: element ``i``'s bin,
            or ``-1`` to leave it out; ``aux`` a device array it may read (bin edges,
            a lookup table); ``bin_key`` names ``bin_of`` in kernel cache keys.
    """

    def __init__(self, x, n: int, bins: int, bin_of, bin_key: tuple, aux, out,
                 workspace: Workspace):
        self.x, self.n, self.bins = x, int(n), int(bins)
        self.bin_of, self.bin_key, self.aux, self.out = bin_of, bin_key, aux, out
        self.workspace = workspace
        self.stream = workspace.stream


def build_histogram_kernel(strategy: HistogramStrategy, bins: int, bin_of):
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
