"""Radix select: find the k-th key one 8-bit digit at a time, then gather the winners.

The lesson
----------
A sort orders every key; a top-k only needs to know the **threshold**, the ``k``-th
key, and then which keys beat it. Keys (``numbakern/kernels/sort_keys.py``) are
unsigned integers whose order is the wanted one (for the largest, the key is
complemented, so the largest value has the smallest key and NaN, larger than
every number as in ``torch.topk``, the smallest of all): the ``k`` wanted
elements are those of the ``k`` smallest keys, ties going to the lower index.
Radix select finds the threshold's digits from the most significant down, each
with a histogram, as ``torch.topk`` and CUB's ``DeviceTopK`` do (Alabi et al.,
"Fast k-selection algorithms for graphics processing units", 2012):

1. **Histogram** the candidates' current digit (8 bits: 256 bins). At first every
   key of the row is a candidate. The counting is a histogram strategy's
   block-private counters (``strategies/shared_privatized.py`` by default;
   ``numbakern/kernels/counting.py`` explains them), many blocks a row.
2. **Scan the 256 counts** for the bucket holding the ``k``-th candidate: the
   first digit ``d`` whose running count reaches ``need`` (at first ``k``). Keys
   of the smaller digits are all winners (``need`` drops by their number); keys
   of the larger digits all lose; only bucket ``d`` is still undecided. Its digit
   is the threshold's: the *prefix* grows by one digit.
3. **Repeat** on the next digit, counting only the keys whose higher digits equal
   the prefix: the candidates shrink to one bucket a pass (about ``n / 256``,
   ``n / 65536``, ... on random data). A row stops early when the kept bucket holds
   exactly ``need`` keys: all of them win. 32-bit keys take 1-4 passes, 64-bit
   keys up to 8; each pass is one histogram launch and one scan launch, and a
   finished row's blocks return at once.
4. **Gather**: every key below the threshold wins, and of the keys equal to it the
   ``need`` of lowest index (``-0.0`` and ``+0.0`` are one key: equal). One launch
   counts each chunk's keys below and equal, one sums them into each chunk's
   starting offsets, and one writes: each warp ballots its below and equal flags
   (``popc`` of the ballot under the lane's mask is the rank within the warp,
   earlier warps' totals the rest), so a winner's place is ``below before it +
   min(equal before it, need)``, in index order, deterministic, with no atomics.
   A round in which no key is below or equal (most rounds, when ``k`` is small)
   skips the walk over the warps' counts: it writes nothing and moves no offset.
5. **Sort** the ``k`` winners when a sorted answer is asked (the job's argsort, a
   bitonic sort for ``k`` that fits a block): stable, so equal values keep index
   order.

6. **Compact** (when asked, ``compact=``) a single long row (the flat case,
   ``axis=None``) after the first pass: the keys at or below the kept bucket (those below win, those in it are the
   candidates) are copied out, with their indices, in index order (step 4's write,
   taking the whole bucket; its per-chunk offsets come from each chunk's own counts,
   which the first pass keeps, instead of step 4's count), and steps 1-5 run again
   on that short row; its winners' indices are mapped back through the copied ones.
   On random data the first 8-bit digit leaves ``n / 256`` or fewer candidates, so the later passes read
   next to nothing (2^28 normal float32 keys, ``k = 1024``: about 8 500 keys).

Cost: without the compaction every pass reads the whole row again (the candidates
are found by their prefix, not copied out), so 32-bit random keys read the rows 6
times (4 passes, the count and the write, if no row stops early). A compacted row
is read twice (the first pass and the copy) and the candidates a few
more: 2 GiB for 2^28 float32 keys. Rows are compacted only when asked (``compact=``:
a single row of at least that many keys, the first pass leaving at most half of it).
On the H200 it lost: 2^28 float32 keys, ``k = 1024``, 7.33 ms compacted against 5.91
not (bench/NOTES.md): the host read of the candidates' count, which also keeps the
call from replaying, and the extra launches cost more than the passes' reads saved;
many rows would need a copy of varying length each (``radix_block_select`` is the
many-rows case). Both write ``k`` values and indices a row.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, int32, int64, uint32, uint64

from numbakern.kernels.elementwise import zeros
from numbakern.kernels.take_rows import take_rows
from numbakern.runtime.cache import cached
from numbakern.runtime.device import (FULL_MASK, SIMULATOR, WARP, ceil_div,
                                      max_resident_blocks)
from numbakern.runtime.launch import launch
from numbakern.runtime.views import host_copy

from .protocols import (DIGIT_BITS, RADIX, HistogramStrategy, SelectStrategy, check_count,
                        check_threads, digit_counter)
from .registry import resolve

#: keys a thread counts at least, in a histogram or gather block (fewer blocks than that
#: would spend their time starting up)
ITEMS = 16
#: keys a thread of the gather votes on between two barriers (loads in flight together)
GATHER_ITEMS = 2 if SIMULATOR else 8
#: keys a thread of a histogram or count loads before using them (in flight together)
LOADS = 2 if SIMULATOR else 4


class RadixSelect(SelectStrategy):
    """Most-significant-digit-first radix select on 8-bit digits, any row length and
    any ``k``, then a gather of the winners in index order (sorted when asked).

    Alabi, Blanchard, Gordon and Steinbach, "Fast k-selection algorithms for graphics
    processing units" (ACM JEA, 2012); the digit passes of ``torch.topk``.

    Args:
        threads: threads per block.
        histogram: how a block counts digits: ``"shared_privatized"`` (default) or
            ``"warp_privatized"``, or such a strategy object.
        sort: the sort of the ``k`` winners when ``job.sorted``: ``None`` (bitonic
            when ``k`` fits a block, else radix), a name or a sort strategy object.

        compact: a single row of at least this many keys is compacted after the first
            digit pass (step 6 of the module doc; 0: always, when the first pass
            leaves at most half of the row); ``None`` (the default): never, as measured
            faster (the module doc's cost).

    ``sorted=False`` output: the winners in **index order** (ascending index within
    the row). Launches: 2 per digit (histogram, bucket scan), then 3 for the gather,
    plus the sort's and one take when sorted; a compacted row adds one copy of two
    counts to the host (the candidates' number sizes their buffer: such a call is
    never replayed, ``numbakern/runtime/replay.py``) and one take.

    Raises:
        TypeError: ``threads`` not an int; a ``histogram`` or ``sort`` of the wrong
            family.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; a ``histogram``
            that is not privatized or has other ``threads``.
    """

    name = "radix_select"

    def __init__(self, threads: int | None = None, histogram="shared_privatized", sort=None,
                 compact: int | None = None):
        self.threads = check_threads(threads)
        self.compact = None if compact is None else check_count(compact, "compact")
        if self.compact is not None and self.compact < 0:
            raise ValueError(f"compact must be an int of at least 0, got {compact!r}")
        self.counter = digit_counter(histogram, self.threads, "select")
        self.sorter = None if sort is None else resolve("sort", sort, threads=threads)

    @property
    def key(self) -> tuple:
        sort = None if self.sorter is None else self.sorter.key
        return (type(self), self.threads, self.counter.key, sort, self.compact)

    def __repr__(self) -> str:
        sort = "" if self.sorter is None else f", sort={self.sorter!r}"
        compact = "" if self.compact is None else f", compact={self.compact}"
        return (f"RadixSelect(threads={self.threads}, histogram={self.counter.name!r}"
                f"{sort}{compact})")

    def select(self, job) -> None:
        ws, stream, rows, n, k = job.workspace, job.stream, job.rows, job.n, job.k
        threads = self.threads
        width = 8 * job.key_dtype.itemsize
        passes = width // DIGIT_BITS
        kern = self._kernels(job, width)
        chunks = _chunks(n, rows, threads)
        chunk = ceil_div(n, chunks)
        row_blocks = ceil_div(rows, threads)

        # per row: the threshold's digits so far, the winners still needed among the
        # keys equal to it, whether it is decided, the lowest bit decided
        prefix = zeros(ws, rows, np.uint64)
        need = ws.empty(rows, np.int64)
        launch(kern.fill, row_blocks, threads, stream, need, rows, k)
        done = zeros(ws, rows, np.int32)
        low = zeros(ws, rows, np.int32)
        counts = zeros(ws, rows * RADIX, np.int64)
        kept = ws.empty(passes * rows, np.int64)  # per pass and row: digit, below, bucket
        below = ws.empty(passes * rows, np.int64)
        bucket = ws.empty(passes * rows, np.int64)
        histograms = []  # recorded for explain only (a copy to the host per pass)
        compacts = self.compact is not None and rows == 1 and n >= self.compact and \
            job.record is None
        # step 6 keeps the first pass's counts of each chunk (a dummy otherwise)
        per_chunk = ws.empty(chunks * RADIX if compacts else 1, np.uint32)
        for p in range(passes):  # steps 1-3
            shift = width - DIGIT_BITS * (p + 1)
            keep = 1 if compacts and p == 0 else 0
            launch(kern.histogram, rows * chunks, threads, stream, job.x, n, chunks, chunk,
                   shift, prefix, done, counts, keep, per_chunk)
            if job.record is not None:
                histograms.append(host_copy(counts, stream).reshape(rows, RADIX))
            launch(kern.find, row_blocks, threads, stream, counts, rows, shift, prefix, need,
                   done, low, kept, below, bucket, p)
            if keep:
                winners = int(host_copy(below, stream)[0])  # step 6
                m = winners + int(host_copy(bucket, stream)[0])
                if 2 * m <= n:
                    self._compacted(job, kern, chunks, chunk, prefix, low, per_chunk,
                                    m - winners, m)
                    return
        if job.record is not None:
            job.record.extend(_passes(kept, below, bucket, histograms, width, stream))

        offsets = zeros(ws, rows * chunks * 2, np.int64)  # step 4
        launch(kern.count, rows * chunks, threads, stream, job.x, n, chunks, chunk, prefix,
               low, offsets)
        launch(kern.scan_chunks, row_blocks, threads, stream, offsets, rows, chunks)
        if job.sorted:
            wk, wi = ws.empty(rows * k, job.key_dtype), ws.empty(rows * k, np.int64)
        else:
            wk, wi = job.values, job.indices
        launch(kern.gather, rows * chunks, threads, stream, job.x, n, chunks, chunk, prefix,
               low, need, offsets, k, wk, wi)
        if job.sorted:  # step 5
            order = ws.empty(rows * k, np.int64)
            sorter = self.sorter or resolve("sort", None, threads=threads, n=k)
            job.argsort(wk, order, rows, k, sorter)
            total = rows * k
            launch(take_rows, max(1, min(ceil_div(total, threads), 4 * max_resident_blocks(
                threads))), threads, stream, wk, k, order, k, wi, 1, k, total, job.values,
                job.indices)

    def _compacted(self, job, kern, chunks: int, chunk: int, prefix, low, per_chunk,
                   bucket: int, m: int) -> None:
        """Step 6: the row's ``m`` keys at or below the first pass's bucket (``bucket``
        of them in it) copied out in index order, selected from, indices mapped back;
        the chunks' offsets come from their first-pass counts (``per_chunk``)."""
        ws, stream, threads, k = job.workspace, job.stream, self.threads, job.k
        take_all = ws.empty(1, np.int64)  # the gather's need: the whole bucket
        launch(kern.fill, 1, threads, stream, take_all, 1, bucket)
        offsets = zeros(ws, chunks * 2, np.int64)
        launch(kern.chunk_offsets, ceil_div(chunks, threads), threads, stream, per_chunk,
               chunks, prefix, low, offsets)
        launch(kern.scan_chunks, 1, threads, stream, offsets, 1, chunks)
        bits, where = ws.empty(m, job.key_dtype), ws.empty(m, np.int64)
        launch(kern.gather, chunks, threads, stream, job.x, job.n, chunks, chunk, prefix,
               low, take_all, offsets, m, bits, where)
        got_bits, got = ws.empty(k, job.key_dtype), ws.empty(k, np.int64)
        self.select(job.on_row(bits, m, got_bits, got))
        launch(take_rows, max(1, min(ceil_div(k, threads), 4 * max_resident_blocks(threads))),
               threads, stream, bits, m, got, k, where, 1, k, k, job.values, job.indices)

    def _kernels(self, job, width: int):
        key = ("radix_select", self.threads, self.counter.key, width, job.key)
        return cached(key, lambda: _Kernels(self.threads, self.counter, job.to_key(), width))


def _chunks(n: int, rows: int, threads: int) -> int:
    """Blocks per row: enough to fill the device, each at least ``ITEMS`` keys a thread
    and fewer than 2**31 keys (its uint32 counters)."""
    most = max(1, ceil_div(n, threads * ITEMS))
    want = ceil_div(max_resident_blocks(threads), rows)
    return max(ceil_div(n, 2**31 - 1), min(most, want))


def _passes(kept, below, bucket, histograms: list, width: int, stream) -> list:
    """The passes as dicts (what ``numbakern explain`` shows): per pass, the digit's
    bits, and per row the candidates' counts of each digit, the kept bucket, the
    candidates below it and in it (``None`` once the row was decided)."""
    passes, rows = len(histograms), histograms[0].shape[0]
    host = [host_copy(a, stream).reshape(passes, rows) for a in (kept, below, bucket)]
    return [{"pass": p, "bits": (width - DIGIT_BITS * p - 1, width - DIGIT_BITS * (p + 1)),
             "rows": [None if host[0][p, r] < 0 else
                      {"bucket": int(host[0][p, r]), "below": int(host[1][p, r]),
                       "in_bucket": int(host[2][p, r]),
                       "counts": {int(d): int(c) for d, c in enumerate(histograms[p][r])
                                  if c}} for r in range(rows)]}
            for p in range(passes)]


class _Kernels:
    """The kernels of one (threads, counter, key rule): the module doc's steps."""

    def __init__(self, threads: int, counter: HistogramStrategy, to_key, width: int):
        clear_bins, count_bin, bin_total = counter.build_counter(RADIX)
        slots = max(1, counter.shared_slots(RADIX))
        warps = threads // WARP
        gather_slots = GATHER_ITEMS * warps
        digit_mask = uint64(RADIX - 1)

        @cuda.jit(device=True)
        def candidate(key, prefix, top):
            """Whether ``key``'s digits above bit ``top`` are the prefix's."""
            return top >= width or (key >> uint64(top)) == (prefix >> uint64(top))

        @cuda.jit
        def fill(need, rows, k):
            r = cuda.grid(1)
            if r < rows:
                need[r] = k

        @cuda.jit
        def histogram(x, n, chunks, chunk, shift, prefix, done, counts, keep, per_chunk):
            """Step 1: counts[row][digit] += the chunk's candidates of each digit; with
            ``keep``, each block's own counts also to ``per_chunk`` (step 6 sums them
            into the chunks' offsets instead of counting the row again)."""
            sh = cuda.shared.array(slots, uint32)
            keys = cuda.local.array(LOADS, uint64)
            row = cuda.blockIdx.x // chunks
            if done[row] != 0:  # the whole block leaves: the row is decided
                return
            clear_bins(sh)
            p = uint64(prefix[row])
            lo = (cuda.blockIdx.x - row * chunks) * chunk
            hi = min(n, lo + chunk)
            base = int64(row) * n
            i = lo + cuda.threadIdx.x
            while i < hi:
                for r in range(LOADS):  # the loads first: in flight together
                    j = i + r * threads
                    keys[r] = uint64(to_key(x[base + j])) if j < hi else uint64(0)
                for r in range(LOADS):
                    if i + r * threads < hi and candidate(keys[r], p, shift + DIGIT_BITS):
                        count_bin(sh, counts, int32((keys[r] >> uint64(shift)) & digit_mask))
                i += threads * LOADS
            cuda.syncthreads()
            b = cuda.threadIdx.x
            while b < RADIX:
                c = bin_total(sh, b)
                if c != 0:
                    cuda.atomic.add(counts, row * RADIX + b, int64(c))
                if keep != 0:
                    per_chunk[cuda.blockIdx.x * RADIX + b] = c
                b += threads

        @cuda.jit
        def chunk_offsets(per_chunk, chunks, prefix, low, offsets):
            """Step 6, a thread a chunk of the one row: its keys below and in the first
            pass's bucket, from its kept counts (what ``count`` would count)."""
            c = cuda.grid(1)
            if c >= chunks:
                return
            d = int64((uint64(prefix[0]) >> uint64(low[0])) & digit_mask)
            less = int64(0)
            for b in range(d):
                less += per_chunk[c * RADIX + b]
            offsets[c * 2] = less
            offsets[c * 2 + 1] = per_chunk[c * RADIX + d]

        @cuda.jit
        def find(counts, rows, shift, prefix, need, done, low, kept, below, bucket, p):
            """Step 2, a thread a row: the bucket of the need-th candidate; counts zeroed
            for the next pass."""
            r = cuda.grid(1)
            if r >= rows:
                return
            slot = p * rows + r
            if done[r] != 0:
                kept[slot] = -1
                below[slot] = 0
                bucket[slot] = 0
                return
            want = need[r]
            acc = int64(0)
            d = 0
            c = counts[r * RADIX]
            while acc + c < want:  # the candidates reach want: d stays below 256
                acc += c
                d += 1
                c = counts[r * RADIX + d]
            for e in range(RADIX):
                counts[r * RADIX + e] = 0
            prefix[r] = uint64(prefix[r]) | (uint64(d) << uint64(shift))
            need[r] = want - acc
            low[r] = shift
            if c == want - acc:  # the whole bucket wins: the lower digits do not matter
                done[r] = 1
            kept[slot] = d
            below[slot] = acc
            bucket[slot] = c

        @cuda.jit
        def count(x, n, chunks, chunk, prefix, low, offsets):
            """Step 4a: each chunk's keys below and equal to the threshold."""
            sh = cuda.shared.array(2, int32)
            tid = cuda.threadIdx.x
            if tid < 2:
                sh[tid] = 0
            cuda.syncthreads()
            row = cuda.blockIdx.x // chunks
            c = cuda.blockIdx.x - row * chunks
            lo = c * chunk
            hi = min(n, lo + chunk)
            base = int64(row) * n
            shift = uint64(low[row])
            t = uint64(prefix[row]) >> shift
            keys = cuda.local.array(LOADS, uint64)
            less = 0
            equal = 0
            i = lo + tid
            while i < hi:
                for r in range(LOADS):  # the loads first: in flight together
                    j = i + r * threads
                    keys[r] = uint64(to_key(x[base + j])) >> shift if j < hi else uint64(0)
                for r in range(LOADS):
                    if i + r * threads < hi:
                        if keys[r] < t:
                            less += 1
                        elif keys[r] == t:
                            equal += 1
                i += threads * LOADS
            cuda.atomic.add(sh, 0, int32(less))
            cuda.atomic.add(sh, 1, int32(equal))
            cuda.syncthreads()
            if tid < 2:
                offsets[(row * chunks + c) * 2 + tid] = sh[tid]

        @cuda.jit
        def scan_chunks(offsets, rows, chunks):
            """Step 4b, a thread a row: the chunks' counts into exclusive offsets."""
            r = cuda.grid(1)
            if r >= rows:
                return
            less = int64(0)
            equal = int64(0)
            for c in range(chunks):
                s = (r * chunks + c) * 2
                a, b = offsets[s], offsets[s + 1]
                offsets[s] = less
                offsets[s + 1] = equal
                less += a
                equal += b

        @cuda.jit
        def gather(x, n, chunks, chunk, prefix, low, need, offsets, k, out_bits, out_idx):
            """Step 4c: the winners written in index order. A round is ``GATHER_ITEMS``
            slices of ``threads`` keys; slot ``r * warps + w`` counts warp ``w``'s keys
            below and equal to the threshold in slice ``r``, so the slots in order are
            the round's keys in index order."""
            slot_less = cuda.shared.array(gather_slots, int32)
            slot_equal = cuda.shared.array(gather_slots, int32)
            busy = cuda.shared.array(2, int32)  # a round's flag: any key below or equal
            votes_less = cuda.local.array(GATHER_ITEMS, uint32)
            votes_equal = cuda.local.array(GATHER_ITEMS, uint32)
            keys = cuda.local.array(GATHER_ITEMS, uint64)
            tid = cuda.threadIdx.x
            warp = tid // WARP
            lane = cuda.laneid
            row = cuda.blockIdx.x // chunks
            c = cuda.blockIdx.x - row * chunks
            lo = c * chunk
            hi = min(n, lo + chunk)
            base = int64(row) * n
            shift = uint64(low[row])
            t = uint64(prefix[row]) >> shift
            want = need[row]
            less_before = offsets[(row * chunks + c) * 2]
            equal_before = offsets[(row * chunks + c) * 2 + 1]
            below_me = cuda.lanemask_lt()
            if tid < 2:
                busy[tid] = 0
            cuda.syncthreads()
            parity = 0
            start = lo
            while start < hi:  # the same number of rounds for every thread
                if tid == 0:  # the next round's flag: nobody reads it now (two flags)
                    busy[1 - parity] = 0
                for r in range(GATHER_ITEMS):  # the loads first: in flight together
                    i = start + r * threads + tid
                    keys[r] = uint64(to_key(x[base + i])) >> shift if i < hi else uint64(0)
                for r in range(GATHER_ITEMS):  # vote: one ballot pair a slice
                    i = start + r * threads + tid
                    less = i < hi and keys[r] < t
                    equal = i < hi and keys[r] == t
                    votes_less[r] = uint32(cuda.ballot_sync(FULL_MASK, less))
                    votes_equal[r] = uint32(cuda.ballot_sync(FULL_MASK, equal))
                    if lane == 0:
                        slot_less[r * warps + warp] = cuda.popc(votes_less[r])
                        slot_equal[r * warps + warp] = cuda.popc(votes_equal[r])
                        if (votes_less[r] | votes_equal[r]) != uint32(0):
                            busy[parity] = 1
                cuda.syncthreads()
                # a round with no key below or equal (most rounds when k is small)
                # writes nothing and moves no offset: the slots are skipped
                for s in range(gather_slots if busy[parity] != 0 else 0):
                    if s % warps == warp:  # this thread's key of slice s // warps
                        r = s // warps
                        my_less = less_before + cuda.popc(votes_less[r] & below_me)
                        my_equal = equal_before + cuda.popc(votes_equal[r] & below_me)
                        is_less = (votes_less[r] >> uint32(lane)) & uint32(1)
                        is_equal = (votes_equal[r] >> uint32(lane)) & uint32(1)
                        if is_less != 0 or (is_equal != 0 and my_equal < want):
                            i = start + r * threads + tid
                            place = int64(row) * k + my_less + min(my_equal, want)
                            out_bits[place] = x[base + i]
                            out_idx[place] = i
                    less_before += slot_less[s]
                    equal_before += slot_equal[s]
                cuda.syncthreads()  # the slots are read before the next round
                start += threads * GATHER_ITEMS
                parity = 1 - parity

        self.fill, self.histogram, self.find = fill, histogram, find
        self.count, self.scan_chunks, self.gather = count, scan_chunks, gather
        self.chunk_offsets = chunk_offsets
