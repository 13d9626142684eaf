"""Bitonic sort in one block: each row that fits in shared memory sorted by one block.

The lesson
----------
Batcher's bitonic sorting network (K. E. Batcher, "Sorting networks and their
applications", AFIPS 1968) sorts ``S = 2**m`` keys with a fixed sequence of
compare-exchange steps that does not depend on the data, which is what a block of
threads does well: every step, each thread compares disjoint pairs, then a barrier.

One block per row. The row's keys (``numbakern/kernels/sort_keys.py``) are loaded into shared
memory beside their indices, padded to ``S`` with the largest key. Then, for
``k = 2, 4, ..., S`` (the length of the sorted runs being built) and
``j = k/2, k/4, ..., 1`` (the distance of the pairs compared)::

    for every i with l = i ^ j > i:           # each pair once
        up = (i & k) == 0                       # this run sorts ascending?
        if (key[i], idx[i]) > (key[l], idx[l]) is up:  swap i and l
    barrier

(``protocols.pair_sorter``, which the block-per-row selects share, deals the ``S/2``
pairs of a step to the threads directly rather than letting half of them idle.)

After the steps for ``k``, runs of length ``k`` alternate ascending and descending, so
each pair of neighbours is a *bitonic* sequence, which the steps for ``2k`` merge.
``S/2 * log2(S) * (log2(S)+1) / 2`` compare-exchanges in all: ``O(n log^2 n)`` work,
more than a radix sort, but no global memory traffic beyond one read and one write,
and one launch for every row.

**Stability.** A sorting network is not stable by itself: it moves equal keys past
each other. Comparing ``(key, index)`` pairs instead of keys makes all the compared
values distinct, so the network's (unique) sorted order is the stable one: equal
keys in index order. The padding has the largest key and indices past the row, so
it sorts after everything, NaN (the largest real key) included.

Shared memory: ``S * (key bytes + 4)``; the default ``max_size`` (2048 on a GPU) keeps
8-byte keys within 24 KiB. Longer rows take the radix sort (``radix_sort.py``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int32

from numbakern.kernels.sort_keys import max_key
from numbakern.runtime.cache import cached
from numbakern.runtime.device import SHARED_LIMIT, SIMULATOR
from numbakern.runtime.launch import launch

from .protocols import SortStrategy, check_count, check_threads, pair_sorter


class BitonicSort(SortStrategy):
    """Sort each row in one block with a bitonic network on ``(key, index)`` pairs.

    Batcher, "Sorting networks and their applications" (AFIPS, 1968).

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).
        max_size: the longest row it takes (a power of two from 2 to 4096; rows are
            padded to the next power of two). Default 2048 on a GPU, 256 under the
            simulator.

    Stable; one launch; rows longer than ``max_size`` raise ``ValueError``.

    Raises:
        TypeError: ``threads`` or ``max_size`` not an int (a bool or float included).
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; ``max_size`` not
            a power of two from 2 to 4096.
    """

    name = "bitonic"
    DEFAULT_MAX_SIZE = 256 if SIMULATOR else 2048

    def __init__(self, threads: int | None = None, max_size: int | None = None):
        self.threads = check_threads(threads)
        max_size = self.DEFAULT_MAX_SIZE if max_size is None else check_count(max_size,
                                                                              "max_size")
        if max_size < 2 or max_size & (max_size - 1) or max_size * 12 > SHARED_LIMIT:
            raise ValueError(f"max_size must be a power of two from 2 to 4096, got {max_size!r}")
        self.max_size = max_size

    @property
    def key(self) -> tuple:
        return (type(self), self.threads, self.max_size)

    def __repr__(self) -> str:
        return f"BitonicSort(threads={self.threads}, max_size={self.max_size})"

    def fits(self, n: int) -> bool:
        """Whether rows of ``n`` elements fit (``n <= max_size``)."""
        return n <= self.max_size

    def check(self, n: int) -> None:
        """Raise ``ValueError`` for rows longer than ``max_size``."""
        if not self.fits(n):
            raise ValueError(f"bitonic sorts rows of at most {self.max_size} elements in "
                             f"one block, got rows of {n}: use the radix sort")

    def sort(self, job) -> None:
        """Sort ``job``'s rows into ``job.out`` in one launch, one block per row.

        Raises:
            ValueError: rows longer than ``max_size``.
        """
        self.check(job.n)
        size = 1 << max(1, (job.n - 1).bit_length())  # the next power of two
        key = ("bitonic_sort", self.threads, size, job.key)
        kernel = cached(key, lambda: _build(self.threads, size, job.to_key(),
                                                    job.key_dtype, job.emitter()))
        launch(kernel, job.rows, self.threads, job.stream, job.x, job.out, job.n)


def _build(threads: int, size: int, to_key, key_dtype: np.dtype, emit):
    kt = from_dtype(key_dtype)
    pad = kt(max_key(key_dtype))
    sort = pair_sorter(threads)

    @cuda.jit
    def bitonic_kernel(x, out, n):
        keys = cuda.shared.array(size, kt)
        idx = cuda.shared.array(size, int32)
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * n
        i = tid
        while i < size:  # load the row's keys, padded with the largest key
            keys[i] = to_key(x[base + i]) if i < n else pad
            idx[i] = i
            i += threads
        cuda.syncthreads()
        sort(keys, idx, size, tid)  # ascending keys, ties by index: stable
        j = tid
        while j < n:
            emit(x, out, base, j, idx[j])
            j += threads

    return bitonic_kernel
