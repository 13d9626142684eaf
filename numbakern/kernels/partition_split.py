"""Partition by buckets: the stable split that follows a selection of the pivots.

Given, for each row of ``n`` keys, its ``m`` pivot keys ``p_1 <= ... <= p_m`` (the
keys of the sorted, distinct ``kth`` ranks: ``RadixSelect.kth_keys`` finds them),
every element falls in one of ``B = 2m + 1`` buckets, in order::

    below p_1 | equal p_1 | between p_1 and p_2 | equal p_2 | ... | above p_m

(``bucket = 2 i + (key == p_{i+1})``, ``i`` the pivots below the key; two equal
pivots share one "equal" bucket, the one between them stays empty). Laid out bucket
after bucket, the row is a partition around every ``kth`` at once: rank ``k_j``
falls inside the run of keys equal to ``p_j`` (``p_j`` is the key of that rank),
everything before it is no larger, everything after it no smaller. The keys are
``sort_keys.to_key``'s ordered bits, so NaN (the largest key, NumPy's "NaN last")
and ``-0.0 == +0.0`` need no case of their own.

The split is a one-digit stable counting sort on the bucket id, computed from the
key on the fly (no bucket array is written):

1. :func:`count_buckets_into`: a block a chunk of a row counts its chunk's keys of
   each bucket (shared counters), ``counts[(row B + b) chunks + c]``.
2. :func:`bucket_offsets_into`: a block a row turns the row's ``B chunks`` counts,
   laid out bucket-major, into exclusive offsets by block scans: the place of the
   first key of bucket ``b`` in chunk ``c``.
3. :func:`split_into`: a block a chunk writes each key to its place, in index order
   within its bucket (stable, as the sort it replaces): a round is ``items`` slices
   of 32 keys, one a warp; a key's rank among the slice's keys of its bucket comes
   from ``log2 B`` ballots on its bucket id's bits (the lanes of equal id), each
   slice's count of each bucket goes to shared memory, and one thread a bucket
   turns the round's slice counts into places. It writes the values' bits (a
   partition) or their int64 indices within the row (an argpartition).

Traffic: two reads of the rows (the count, the split) and one write, of values or
of int64 indices.
"""

from __future__ import annotations

from numba import cuda, int32, int64, uint32, uint64

from numbakern.kernels.sort_keys import key_name
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import FULL_MASK, SIMULATOR, WARP, ceil_div, max_resident_blocks
from numbakern.runtime.launch import launch

#: the most pivots a split takes: ``2 m + 1 <= 255`` buckets (a block's pivots and
#: counters stay small in shared memory); more ``kth`` than this take the full sort
MAX_PIVOTS = 127
MAX_BUCKETS = 2 * MAX_PIVOTS + 1
#: keys a thread counts or splits at least per chunk (fewer would spend a block's time
#: starting up)
ITEMS = 16
#: the split's shared places: ``items * warps * bucket_cap`` int64 slots (16 KiB), at
#: least one slice a warp (so a split block has at most :data:`MOST_THREADS` threads)
SLOT_BUDGET = 2048
MOST_THREADS = 256
#: slices of 32 keys a warp takes per round, at most (loads in flight together)
ROUND_ITEMS = 2 if SIMULATOR else 8


def bucket_cap(buckets: int) -> int:
    """The power of two above ``buckets`` (the kernels' compiled bucket count: ids of
    ``log2`` of it bits, the top id left for keys past a chunk's end)."""
    cap = 2
    while cap <= buckets:
        cap *= 2
    return cap


def split_chunks(n: int, rows: int, threads: int) -> int:
    """Blocks per row of the count and the split: enough to fill the device, each
    with at least ``ITEMS`` keys a thread, fewer than 2**31 keys each."""
    most = max(1, ceil_div(n, threads * ITEMS))
    want = ceil_div(max_resident_blocks(threads), rows)
    return max(ceil_div(n, 2**31 - 1), min(most, want))


def count_buckets_into(xbits, pivots, counts, rows: int, n: int, m: int, chunks: int,
                       dtype, to_key, threads: int, stream) -> None:
    """Step 1: ``counts`` (int64, ``rows * (2m + 1) * chunks``) of each chunk's keys
    in each bucket. ``xbits``: the rows' bits, 1-D; ``pivots``: uint64 keys, ``m`` a
    row, ascending; ``to_key``: the ascending key rule of ``dtype``."""
    kern = _kernels(dtype, to_key, threads, bucket_cap(2 * m + 1), False)
    launch(kern.count, rows * chunks, threads, stream, xbits, pivots, counts, n, m, chunks,
           ceil_div(n, chunks))


def bucket_offsets_into(counts, rows: int, m: int, chunks: int, threads: int,
                        stream) -> None:
    """Step 2: each row's ``(2m + 1) * chunks`` counts into exclusive offsets within
    the row, in place."""
    launch(_offsets_kernel(threads), rows, threads, stream, counts, (2 * m + 1) * chunks)


def split_into(xbits, pivots, offsets, out, rows: int, n: int, m: int, chunks: int,
               dtype, to_key, indices: bool, threads: int, stream) -> None:
    """Step 3: ``out`` (``rows * n``: the bits' dtype, or int64 with ``indices``)
    gets each row's keys bucket after bucket, in index order within a bucket."""
    kern = _kernels(dtype, to_key, threads, bucket_cap(2 * m + 1), bool(indices))
    launch(kern.split, rows * chunks, threads, stream, xbits, pivots, offsets, out, n, m,
           chunks, ceil_div(n, chunks))


def _kernels(dtype, to_key, threads: int, cap: int, indices: bool):
    key = ("partition_split", key_name(dtype), threads, cap, indices, device_key())
    return cached(key, lambda: _Kernels(to_key, threads, cap, indices))


@cuda.jit(device=True)
def _load_pivots(pivots, piv, row, m, threads):
    """Row ``row``'s ``m`` pivots into the shared ``piv``, the block's threads striding
    (a barrier must follow before they are read)."""
    j = cuda.threadIdx.x
    while j < m:
        piv[j] = pivots[int64(row) * m + j]
        j += threads


@cuda.jit(device=True)
def _bucket(key, piv, m):
    """The bucket of ``key`` among the ``m`` ascending pivots ``piv``: twice the
    pivots below it, plus one where it equals the next (a binary search)."""
    lo = 0
    hi = m
    while lo < hi:
        mid = (lo + hi) // 2
        if piv[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    b = 2 * lo
    if lo < m and piv[lo] == key:
        b += 1
    return b


class _Kernels:
    """The count and split kernels of one key rule, block size, bucket capacity
    ``cap`` (a power of two above ``2m + 1``) and output (values or indices)."""

    def __init__(self, to_key, threads: int, cap: int, indices: bool):
        warps = threads // WARP
        items = max(1, min(ROUND_ITEMS, SLOT_BUDGET // (warps * cap)))
        slices = items * warps
        slot_count = slices * cap  # a constant here: shared arrays need one
        id_bits = cap.bit_length() - 1
        outside = cap - 1  # the id of a key past the chunk's end: above every bucket

        @cuda.jit
        def count(x, pivots, counts, n, m, chunks, chunk):
            piv = cuda.shared.array(MAX_PIVOTS, uint64)
            sh = cuda.shared.array(cap, int32)
            tid = cuda.threadIdx.x
            row = cuda.blockIdx.x // chunks
            c = cuda.blockIdx.x - row * chunks
            buckets = 2 * m + 1
            _load_pivots(pivots, piv, row, m, threads)
            j = tid
            while j < cap:
                sh[j] = 0
                j += threads
            cuda.syncthreads()
            lo = c * chunk
            hi = min(n, lo + chunk)
            base = int64(row) * n
            i = lo + tid
            while i < hi:
                cuda.atomic.add(sh, _bucket(uint64(to_key(x[base + i])), piv, m), 1)
                i += threads
            cuda.syncthreads()
            j = tid
            while j < buckets:
                counts[(int64(row) * buckets + j) * chunks + c] = sh[j]
                j += threads

        @cuda.jit
        def split(x, pivots, offsets, out, n, m, chunks, chunk):
            piv = cuda.shared.array(MAX_PIVOTS, uint64)
            run = cuda.shared.array(cap, int64)  # each bucket's next place in the row
            slot = cuda.shared.array(slot_count, int64)  # slice s, bucket b: s cap + b
            ids = cuda.local.array(ROUND_ITEMS, int32)
            ranks = cuda.local.array(ROUND_ITEMS, int32)
            tid = cuda.threadIdx.x
            warp = tid // WARP
            below_me = cuda.lanemask_lt()
            row = cuda.blockIdx.x // chunks
            c = cuda.blockIdx.x - row * chunks
            buckets = 2 * m + 1
            _load_pivots(pivots, piv, row, m, threads)
            j = tid
            while j < buckets:
                run[j] = offsets[(int64(row) * buckets + j) * chunks + c]
                j += threads
            lo = c * chunk
            hi = min(n, lo + chunk)
            base = int64(row) * n
            start = lo
            while start < hi:  # the same rounds for every thread (the barriers)
                j = tid
                while j < slot_count:
                    slot[j] = 0
                    j += threads
                cuda.syncthreads()  # the slots cleared (and the pivots, run loaded)
                for r in range(items):  # the loads first: in flight together
                    i = start + r * threads + tid
                    if i < hi:
                        ids[r] = _bucket(uint64(to_key(x[base + i])), piv, m)
                    else:
                        ids[r] = outside
                for r in range(items):  # slice r warps + warp: a warp's 32 keys
                    peers = uint32(FULL_MASK)  # the lanes of this lane's bucket
                    for bit in range(id_bits):
                        set_here = ((ids[r] >> bit) & 1) != 0
                        vote = uint32(cuda.ballot_sync(FULL_MASK, set_here))
                        peers &= vote if set_here else vote ^ uint32(FULL_MASK)
                    ranks[r] = cuda.popc(peers & below_me)
                    if ranks[r] == 0 and ids[r] != outside:  # the first of its peers
                        slot[(r * warps + warp) * cap + ids[r]] = cuda.popc(peers)
                cuda.syncthreads()
                b = tid  # a thread a bucket: the slices' counts into places
                while b < buckets:
                    place = run[b]
                    for s in range(slices):
                        counted = slot[s * cap + b]
                        slot[s * cap + b] = place
                        place += counted
                    run[b] = place
                    b += threads
                cuda.syncthreads()
                for r in range(items):
                    if ids[r] != outside:
                        place = slot[(r * warps + warp) * cap + ids[r]] + ranks[r]
                        i = start + r * threads + tid
                        if indices:
                            out[base + place] = int64(i)
                        else:  # the exact bits (-0.0, NaN payloads), from L1
                            out[base + place] = x[base + i]
                cuda.syncthreads()  # the places read before the next round clears them
                start += threads * items

        self.count, self.split = count, split


def _offsets_kernel(threads: int):
    return cached(("partition_offsets", threads, device_key()),
                  lambda: _build_offsets(threads))


def _build_offsets(threads: int):
    warps = threads // WARP

    @cuda.jit
    def offsets(counts, per_row):
        """A block a row: the row's ``per_row`` counts into exclusive offsets, a
        round of ``threads`` entries a block scan (Kogge-Stone in each warp, then the
        warps' totals)."""
        totals = cuda.shared.array(warps, int64)
        tid = cuda.threadIdx.x
        lane = tid % WARP
        w = tid // WARP
        first = int64(cuda.blockIdx.x) * per_row
        carry = int64(0)
        start = 0
        while start < per_row:
            e = start + tid
            v = counts[first + e] if e < per_row else int64(0)
            s = v
            d = 1
            while d < WARP:
                up = cuda.shfl_up_sync(FULL_MASK, s, d)
                if lane >= d:
                    s += up
                d *= 2
            if lane == WARP - 1:
                totals[w] = s
            cuda.syncthreads()
            earlier = int64(0)
            total = int64(0)
            for j in range(warps):
                t = totals[j]
                if j < w:
                    earlier += t
                total += t
            cuda.syncthreads()  # the totals read before the next round writes them
            if e < per_row:
                counts[first + e] = carry + earlier + s - v
            carry += total
            start += threads

    return offsets


__all__ = ["MAX_BUCKETS", "MAX_PIVOTS", "MOST_THREADS", "bucket_cap", "bucket_offsets_into",
           "count_buckets_into", "split_chunks", "split_into"]
