"""Bitonic select: one block per row keeps its running top-k sorted in shared memory.

The lesson
----------
A language model's next-token sampler asks for the ``k`` largest logits (``k``
around 50) of each of thousands of rows of 50 000: many rows, small ``k``. One
block per row, and in shared memory the row's best ``k`` so far, kept sorted. The
block streams the row once, ``threads * items`` elements a round (each thread
``items`` elements ``threads`` apart, so the reads are coalesced and several are in
flight at once), and most of the row should never reach the sorted list: after
the first few rounds the ``k``-th best seen so far is a high bar.
This is the structure of WarpSelect and BlockSelect in FAISS (Johnson, Douze and
Jégou, "Billion-scale similarity search with GPUs", 2017), with the per-thread
queues left out and bitonic merges (Batcher, AFIPS 1968) doing the sorting:

1. **Filter.** A thread whose element beats the bar (the ``k``-th entry of the
   sorted list) appends it to a shared *buffer*, its slot taken with one shared
   atomic add. Elements compare as ``(key, index)`` pairs (keys from
   ``numbakern/kernels/sort_keys.py``), which are all distinct, so the top ``k``
   is one set, ties going to the lower index, whatever order the atomics append in.
2. **Merge**, when the buffer could overflow in the next round (and once at the
   end): the buffer, padded with the largest pair, is sorted by a bitonic network
   (``strategies/bitonic_sort.py`` explains the network). With the list ``A`` and
   the buffer's ``K`` smallest ``B``, both ascending, ``C[j] = min(A[j], B[K-1-j])``
   holds the ``K`` smallest of both as a *bitonic* sequence (rising, then
   falling), which ``log2(K)`` half-cleaner steps sort: the new list.
3. **Write** the list's first ``k`` (values read back by index, so their exact
   bits come out) in order.

Sizes: the list holds ``K``, the power of two at least ``k``; a round brings at
most ``R = threads * items`` candidates; the buffer ``S``, the power of two at
least ``2 max(K, R)`` (the network sorts powers of two), merged once it holds more
than ``S - R``. Shared memory: ``(K + S) * (key bytes + 8)`` and a count,
27 KiB for ``k = 256``, 256 threads and 4 items of 4-byte keys. The work a row
costs is one read of the row, two barriers a round, plus a merge for each ``S - R``
elements that beat the bar: on random data, about ``k ln(n/k)``
of them in all (few merges), on data sorted the wrong way every element (a merge
a round: ``O(n log^2 S)``, still one read of the row). Rows much longer than a
few hundred thousand keep one block busy for long: ``radix_select`` spreads
those over many blocks.
"""

from __future__ import annotations

from numba import cuda, from_dtype, int32, int64

from numbakern.kernels.sort_keys import max_key
from numbakern.runtime.cache import cached
from numbakern.runtime.device import SHARED_LIMIT, SIMULATOR
from numbakern.runtime.launch import launch

from .protocols import (SelectStrategy, check_count, check_optional_count, check_threads,
                        pair_before, pair_sorter)

#: the index of the padding: after every real index
PAD_INDEX = (1 << 63) - 1


class BitonicSelect(SelectStrategy):
    """One block per row: a filter against the ``k``-th best so far, and bitonic merges
    of what passes into a sorted list in shared memory.

    FAISS's BlockSelect (Johnson, Douze and Jégou, 2017) on Batcher's bitonic network.

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256;
            64 under the simulator).
        max_k: the largest ``k`` it takes, a power of two from 1 to 1024 (default
            256): the list's shared memory is sized from ``k``.
        items: elements each thread reads a round (default 4; 2 under the
            simulator): fewer rounds, so fewer barriers, and loads in flight together.

    Output rows are sorted whatever ``job.sorted`` asks (the list is kept sorted).
    One launch, one block per row; reads each row once; two barriers a round.
    (Not measured on a GPU yet: ``items`` and ``threads`` are first guesses.)

    Raises:
        TypeError: ``threads``, ``max_k`` or ``items`` not an int.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; ``max_k`` not a
            power of two from 1 to 1024; ``items`` below 1. At select time, ``k > max_k``
            (naming ``k``); a list and buffer that overflow shared memory.
    """

    name = "bitonic_select"
    DEFAULT_MAX_K = 256
    DEFAULT_ITEMS = 2 if SIMULATOR else 4

    def __init__(self, threads: int | None = None, max_k: int | None = None,
                 items: int | None = None):
        self.threads = check_threads(threads)
        self.items = check_optional_count(items, "items") or self.DEFAULT_ITEMS
        max_k = self.DEFAULT_MAX_K if max_k is None else check_count(max_k, "max_k")
        if max_k < 1 or max_k > 1024 or max_k & (max_k - 1):
            raise ValueError(f"max_k must be a power of two from 1 to 1024, got {max_k!r}")
        self.max_k = max_k

    @property
    def key(self) -> tuple:
        return (type(self), self.threads, self.max_k, self.items)

    def __repr__(self) -> str:
        return f"BitonicSelect(threads={self.threads}, max_k={self.max_k}, items={self.items})"

    def select(self, job) -> None:
        self.check(job.n, job.k)
        size = _power_of_two(job.k)  # K
        need = (size + _buffer(size, self.threads * self.items)) * (
            job.key_dtype.itemsize + 8) + 4  # and the buffer's count
        if need > SHARED_LIMIT:
            raise ValueError(f"bitonic_select with {self.threads} threads and {self.items} "
                             f"items needs {need} bytes of shared memory for k={job.k} of "
                             f"{job.dtype}, more than the {SHARED_LIMIT} a block has: use "
                             f"fewer threads or items, or a smaller k")
        key = ("bitonic_select", self.threads, self.items, size, job.k, job.key)
        kernel = cached(key, lambda: _build(self.threads, self.items, size, job.k,
                                            job.to_key(), job.key_dtype))
        launch(kernel, job.rows, self.threads, job.stream, job.x, job.n, job.values,
               job.indices)


def _power_of_two(n: int) -> int:
    """The least power of two at least ``n`` (1 for ``n`` of 0 or 1)."""
    return 1 << max(0, (n - 1).bit_length())


def _buffer(size: int, per_round: int) -> int:
    """S: room for the list's ``size`` and a round's ``per_round`` twice over, a power
    of two as the bitonic network sorts (``threads * items`` need not be one)."""
    return _power_of_two(2 * max(size, per_round))


def _build(threads: int, items: int, size: int, k: int, to_key, key_dtype):
    """The kernel: list of ``size`` (K) pairs, buffer of ``buf`` (S) pairs."""
    kt = from_dtype(key_dtype)
    pad = kt(max_key(key_dtype))
    pad_index = int64(PAD_INDEX)
    per_round = threads * items
    buf = _buffer(size, per_round)
    room = buf - per_round  # merge once the buffer holds more: the next round could overflow

    before = pair_before
    sort = pair_sorter(threads)

    @cuda.jit(device=True)
    def merge(tk, ti, bk, bi, count, tid):
        """Step 2 of the lesson: the buffer sorted, its K smallest merged into the list."""
        c = count[0]
        j = tid
        while j < buf:  # pad the buffer past its c entries
            if j >= c:
                bk[j] = pad
                bi[j] = pad_index
            j += threads
        cuda.syncthreads()
        sort(bk, bi, buf, tid)  # the buffer, ascending
        j = tid
        while j < size:  # C[j] = min(A[j], B[K-1-j]): the K smallest, bitonic
            b, ib = bk[size - 1 - j], bi[size - 1 - j]
            if before(b, ib, tk[j], ti[j]):
                tk[j] = b
                ti[j] = ib
            j += threads
        cuda.syncthreads()
        dist = size // 2
        while dist > 0:  # half-cleaners: the bitonic list sorted ascending
            j = tid
            while j < size:
                partner = j ^ dist
                if partner > j:
                    a, b = tk[j], tk[partner]
                    ia, ib = ti[j], ti[partner]
                    if before(b, ib, a, ia):
                        tk[j], tk[partner] = b, a
                        ti[j], ti[partner] = ib, ia
                j += threads
            cuda.syncthreads()
            dist //= 2
        if tid == 0:
            count[0] = 0
        cuda.syncthreads()

    @cuda.jit
    def bitonic_select(x, n, values, indices):
        tk = cuda.shared.array(size, kt)  # the list: the best K so far, ascending
        ti = cuda.shared.array(size, int64)
        bk = cuda.shared.array(buf, kt)  # the buffer of candidates
        bi = cuda.shared.array(buf, int64)
        count = cuda.shared.array(1, int32)
        tid = cuda.threadIdx.x
        row = cuda.blockIdx.x
        base = int64(row) * n
        j = tid
        while j < size:
            tk[j] = pad
            ti[j] = pad_index
            j += threads
        if tid == 0:
            count[0] = 0
        cuda.syncthreads()
        start = int64(0)
        while start < n:  # one round: each thread items elements (step 1)
            bar_key, bar_index = tk[k - 1], ti[k - 1]
            for r in range(items):
                i = start + r * threads + tid
                if i < n:
                    key = to_key(x[base + i])
                    if before(key, i, bar_key, bar_index):  # beats the bar
                        slot = cuda.atomic.add(count, 0, int32(1))
                        bk[slot] = key
                        bi[slot] = i
            cuda.syncthreads()
            c = count[0]
            cuda.syncthreads()  # every thread has read the count before the next appends
            start += per_round
            if c > room or (start >= n and c > 0):
                merge(tk, ti, bk, bi, count, tid)  # ends with a barrier
        out = int64(row) * k
        j = tid
        while j < k:  # step 3
            i = ti[j]
            values[out + j] = x[base + i]
            indices[out + j] = i
            j += threads

    return bitonic_select
