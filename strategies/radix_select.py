"""Radix select: find the k-th key one 11-bit digit at a time, then gather the winners.

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

1. **Histogram** the candidates' current digit (up to 11 bits: 2048 bins; the
   digit layout below). At first every key of the row is a candidate. The counting
   is a histogram strategy's block-private counters
   (``strategies/shared_privatized.py`` by default; ``numbakern/kernels/counting.py``
   explains them), many blocks a row.
2. **Scan the counts** for the bucket holding the ``k``-th candidate: the
   first digit ``d`` whose running count reaches ``need`` (at first ``k``); a block a
   row, each thread summing a run of the counts and a block scan giving the runs'
   starts (a thread walking 2048 counts alone would take longer than a pass). Keys
   of the smaller digits are all winners (``need`` drops by their number); keys
   of the larger digits all lose; only bucket ``d`` is still undecided. Its digit
   is the threshold's: the *prefix* grows by one digit.
3. **Repeat** on the next digit, counting only the keys whose higher digits equal
   the prefix: the candidates shrink to one bucket a pass (about ``n / 2048``,
   ``n / 2**22``, ... on random data). A row stops early when the kept bucket holds
   exactly ``need`` keys: all of them win. Each pass is one histogram launch and one
   scan launch, and a finished row's blocks return at once.

   **Digit layout** (``digit_bits``, 11 by default): digits of ``digit_bits`` from
   the top, the rest of the key in the last one (the most bits decided in the
   fewest passes, so a row stops early as soon as it can): 32-bit keys in 3 passes
   (11, 11, 10 bits, as RAFT's AIR Top-K and ``radix_block_select``), 16-bit in 2
   (11, 5), 8-bit in 1, 64-bit in 6 (11, 11, 11, 11, 11, 9: 12-bit digits also take
   6, with twice the counters; 13-bit ones 5, with 8192 counters, 32 KiB of shared
   memory a block, fewer blocks a multiprocessor and a 4x longer scan).
   ``digit_bits=12``: 32-bit keys in 12, 12, 8 bits, 4096 counters (16 KiB a block):
   24 bits decided after two passes, where the third of 11-bit digits often still
   runs (the cost paragraph). ``digit_bits=8``: 4 passes of a 32-bit key, 8 of a
   64-bit one, 256 counters (the one width ``warp_privatized``'s per-warp counters
   hold at 256 threads).
4. **Gather**: every key below the threshold wins, and of the keys equal to it the
   ``need`` of lowest index (``-0.0`` and ``+0.0`` are one key: equal). Each
   chunk's keys below and equal are counted (**fused** into the passes when chunks
   are long, ``fuse_count``: each pass keeps every block's own digit counts and its
   keys below the prefix above the digit; the pass that decides a row, the last
   one its blocks ran, then holds the chunk's keys below the threshold, those
   ahead plus those of the smaller digits, and equal to it, those of the kept
   digit, and a small launch sums them instead of a read of the row), one sums them
   into each chunk's starting offsets, and one writes: each warp ballots its below and equal flags
   (``popc`` of the ballot under the lane's mask is the rank within the warp,
   earlier warps' totals the rest), so a winner's place is ``below before it +
   min(equal before it, need)``, in index order, deterministic, with no atomics.
   A round in which no key is below or equal (most rounds, when ``k`` is small)
   skips the walk over the warps' counts: it writes nothing and moves no offset.
5. **Sort** the ``k`` winners when a sorted answer is asked (the job's argsort, a
   bitonic sort for ``k`` that fits a block): stable, so equal values keep index
   order.

6. **Compact** (when asked, ``compact=``) a single long row (the flat case,
   ``axis=None``) after the first pass: the keys at or below the kept bucket (those
   below win, those in it are the candidates) are copied out, with their indices, in
   index order (step 4's write, taking the whole bucket; its per-chunk offsets come
   from each chunk's own counts, which the first pass keeps, instead of step 4's
   count), and steps 1-5 run again on that short row; its winners' indices are mapped
   back through the copied ones. On random data the first digit leaves few
   candidates (``n / 2048`` or so), so the later passes read next to nothing (2^28
   normal float32 keys, ``k = 1024``: about 8 500 keys).

Cost: without the compaction every pass reads the whole row again (the candidates
are found by their prefix, not copied out), so 32-bit random keys read the rows 4
times with 11-bit digits and the fused count (3 passes and the write, if no row
stops early) where 8-bit digits and a count of its own read them 6 times (4 passes,
the count and the write). 2^28 normal float32, ``k = 1024``: 8-bit digits decide
the row in the third pass (5 reads with the count); in 11-bit digits the second
pass's bucket of the 1024th key holds about 2 keys, so the third pass runs on most
such data (4 reads; 3 when that key is its bucket's last). A compacted row
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

from .protocols import (HistogramStrategy, SelectStrategy, block_exclusive_scan, check_count,
                        check_flag, check_threads, counter_threads, digit_counter)
from .registry import resolve

#: keys a thread counts at least, in a histogram or gather block (fewer blocks than that
#: would spend their time starting up)
ITEMS = 16
#: keys a thread of the gather votes on between two barriers (loads in flight together)
GATHER_ITEMS = 2 if SIMULATOR else 8
#: keys a thread of a histogram or count loads before using them (in flight together)
LOADS = 2 if SIMULATOR else 4
#: the digit widths a radix select takes (``digit_bits``), and the default: fewer
#: passes where the histogram's counters hold 2048 bins
DIGIT_CHOICES = (8, 11, 12)
DEFAULT_DIGIT_BITS = 11
#: shared bytes the histogram kernel keeps beside its counters (``total_ahead``)
BESIDE_COUNTERS = 4
#: the count is fused into the digit passes (``fuse_count=None``) when a chunk holds at
#: least this many keys a bin: each pass then writes its chunks' counts, 4 bytes a bin,
#: at most a sixteenth of the bytes it reads of 4-byte keys, and saves a read of the rows
FUSE_KEYS_PER_BIN = 16


def digit_layout(width: int, digit_bits: int) -> list[tuple[int, int]]:
    """The passes of ``width``-bit keys, most significant first, as ``(shift, bits)``:
    digits of ``digit_bits`` from the top, the rest in the last (32 bits in 11-bit
    digits: 11, 11, 10; in 12-bit: 12, 12, 8; 64 in 11-bit: 11, 11, 11, 11, 11, 9; 16:
    11, 5; keys no wider than a digit: one pass of their width)."""
    layout, top = [], width
    while top > 0:
        bits = min(digit_bits, top)
        top -= bits
        layout.append((top, bits))
    return layout


class RadixSelect(SelectStrategy):
    """Most-significant-digit-first radix select on 11-bit digits (or 8- or 12-bit),
    any row length and any ``k``, then a gather of the winners in index order (sorted
    when asked).

    Alabi, Blanchard, Gordon and Steinbach, "Fast k-selection algorithms for graphics
    processing units" (ACM JEA, 2012); the digit passes of ``torch.topk``; 11-bit digits
    as RAFT's AIR Top-K (Zhang et al., SC 2023).

    Args:
        threads: threads per block (a multiple of 32 from 32 to 1024); ``None`` (the
            default): the histogram's, else its default (256 on a GPU, 64 under the
            simulator).
        histogram: how a block counts digits: ``"shared_privatized"`` (default) or
            ``"warp_privatized"``, or such a strategy object (whose threads the
            kernels take where ``threads`` is None; given both, they must agree).
        sort: the sort of the ``k`` winners when ``job.sorted``: ``None`` (bitonic
            when ``k`` fits a block, else radix), a name or a sort strategy object.
        compact: a single row of at least this many keys is compacted after the first
            digit pass (step 6 of the module doc; 0: always, when the first pass
            leaves at most half of the row); ``None`` (the default): never, as measured
            faster (the module doc's cost).
        digit_bits: the widest digit, 8, 11 or 12 (the module doc's digit layout:
            32-bit keys in 3 passes of 11, 11 and 10 bits, of 12, 12 and 8, or 4 of
            8; 64-bit keys in 6, 6 or 8); ``None`` (the default): 11 when the
            histogram's counters hold 2048 bins in a block's shared memory
            (``warp_privatized`` with more than 192 threads does not), else 8.
        fuse_count: count each chunk's keys below and equal to the threshold in the
            digit passes (step 4's count: no read of the rows of its own); ``None``
            (the default): when a chunk holds at least ``FUSE_KEYS_PER_BIN`` keys a bin.

    ``sorted=False`` output: the winners in **index order** (ascending index within
    the row). Launches: 2 per digit (histogram, bucket scan), then 3 for the gather
    (the count, or with ``fuse_count`` the chunks' offsets from the last pass's counts;
    the offsets' scan; the write), plus the sort's and one take when sorted; a
    compacted row adds one copy of two counts to the host (the candidates' number
    sizes their buffer: such a call is never replayed, ``numbakern/runtime/replay.py``)
    and one take.

    Raises:
        TypeError: ``threads``, ``digit_bits`` or ``compact`` not an int (or None);
            ``fuse_count`` not a bool or None; a ``histogram`` or ``sort`` of the wrong
            family.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; a ``histogram``
            that is not privatized or has other threads than a given ``threads``;
            ``digit_bits`` not 8, 11 or 12, or one whose bins the histogram's counters
            do not hold; ``compact`` below 0.
    """

    name = "radix_select"

    def __init__(self, threads: int | None = None, histogram="shared_privatized", sort=None,
                 compact: int | None = None, digit_bits: int | None = None,
                 fuse_count: bool | None = None):
        threads = counter_threads(threads, histogram)  # (the sort of the winners too)
        self.threads = check_threads(threads)
        self.compact = None if compact is None else check_count(compact, "compact")
        if self.compact is not None and self.compact < 0:
            raise ValueError(f"compact must be an int of at least 0, got {compact!r}")
        self.counter = digit_counter(histogram, self.threads, "select")
        self.sorter = None if sort is None else resolve("sort", sort, threads=threads,
                                                        argument="sort")
        if digit_bits is None:
            digit_bits = DEFAULT_DIGIT_BITS if self.counter.fits(
                1 << DEFAULT_DIGIT_BITS, BESIDE_COUNTERS) else 8
        elif check_count(digit_bits, "digit_bits") not in DIGIT_CHOICES:
            raise ValueError(f"digit_bits must be 8, 11 or 12 (or None: 11 where the "
                             f"histogram's counters hold 2048 bins), got {digit_bits!r}")
        # the counters of the widest digit fit, beside the histogram kernel's own word
        narrower = " or ".join(str(b) for b in DIGIT_CHOICES if b < digit_bits)
        self.counter.check(1 << digit_bits, BESIDE_COUNTERS,
                           f"a smaller digit_bits ({narrower})" if narrower else "fewer bins")
        self.digit_bits = int(digit_bits)
        self.fuse_count = None if fuse_count is None else check_flag(fuse_count,
                                                                     "fuse_count")

    @property
    def key(self) -> tuple:
        sort = None if self.sorter is None else self.sorter.key
        return (type(self), self.threads, self.counter.key, sort, self.compact,
                self.digit_bits, self.fuse_count)

    def __repr__(self) -> str:
        sort = "" if self.sorter is None else f", sort={self.sorter!r}"
        compact = "" if self.compact is None else f", compact={self.compact}"
        fuse = "" if self.fuse_count is None else f", fuse_count={self.fuse_count}"
        return (f"RadixSelect(threads={self.threads}, histogram={self.counter.name!r}"
                f"{sort}{compact}, digit_bits={self.digit_bits}{fuse})")

    def select(self, job) -> None:
        ws, stream, rows, n, k = job.workspace, job.stream, job.rows, job.n, job.k
        threads = self.threads
        width = 8 * job.key_dtype.itemsize
        layout = digit_layout(width, self.digit_bits)
        passes = len(layout)
        bins = 1 << layout[0][1]  # the widest digit's
        kern = self._kernels(job, width, bins)
        chunks = _chunks(n, rows, threads)
        chunk = ceil_div(n, chunks)
        fused = chunk >= FUSE_KEYS_PER_BIN * bins if self.fuse_count is None \
            else self.fuse_count

        # per row: the threshold's digits so far, the winners still needed among the
        # keys equal to it, whether it is decided, the lowest bit decided, the digit
        # of the last pass run
        prefix = zeros(ws, rows, np.uint64)
        need = ws.empty(rows, np.int64)
        launch(kern.fill, ceil_div(rows, threads), threads, stream, need, rows, k)
        done = zeros(ws, rows, np.int32)
        low = zeros(ws, rows, np.int32)
        last = zeros(ws, rows, np.int64)
        counts = zeros(ws, rows * bins, np.int64)
        kept = ws.empty(passes * rows, np.int64)  # per pass and row: digit, below, bucket
        below = ws.empty(passes * rows, np.int64)
        bucket = ws.empty(passes * rows, np.int64)
        histograms = []  # recorded for explain only (a copy to the host per pass)
        compacts = self.compact is not None and rows == 1 and n >= self.compact and \
            job.record is None
        # each chunk's counts of the last pass run on its row, and its keys below the
        # prefix in the bits above that pass's digit (step 4's count, fused; step 6's
        # offsets): dummies when neither is wanted
        keeps = fused or compacts
        per_chunk = ws.empty(rows * chunks * bins if keeps else 1, np.uint32)
        ahead = ws.empty(rows * chunks if keeps else 1, np.int64)
        for p, (shift, bits) in enumerate(layout):  # steps 1-3
            keep = 1 if fused or (compacts and p == 0) else 0
            launch(kern.histogram, rows * chunks, threads, stream, job.x, n, chunks, chunk,
                   shift, bits, prefix, done, counts, keep, per_chunk, ahead, 1)
            if job.record is not None:
                histograms.append(host_copy(counts, stream).reshape(rows, bins)
                                  [:, :1 << bits])
            launch(kern.find, rows, threads, stream, counts, shift, bits, prefix, need,
                   done, low, last, kept, below, bucket, p, 1)
            if compacts and p == 0:
                winners = int(host_copy(below, stream)[0])  # step 6
                m = winners + int(host_copy(bucket, stream)[0])
                if 2 * m <= n:
                    self._compacted(job, kern, chunks, chunk, prefix, low, last,
                                    per_chunk, ahead, m - winners, m)
                    return
        if job.record is not None:
            job.record.extend(_passes(kept, below, bucket, histograms, layout, stream))

        offsets = zeros(ws, rows * chunks * 2, np.int64)  # step 4
        if fused:
            launch(kern.chunk_offsets, rows * chunks, threads, stream, per_chunk, ahead,
                   chunks, last, offsets)
        else:
            launch(kern.count, rows * chunks, threads, stream, job.x, n, chunks, chunk,
                   prefix, low, offsets)
        launch(kern.scan_chunks, rows, threads, stream, offsets, chunks)
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

    def kth_keys(self, job, per_row: int, need, done):
        """The order statistics themselves: steps 1-3 on every digit, no gather.

        ``job``: a select job (``largest=False``) of ``job.rows`` *selections*;
        selection ``s`` finds the ``need[s]``-th smallest key (1-based; the sort's
        ascending order, ``numbakern/kernels/sort_keys.py``: NaN last) of row
        ``s // per_row`` of ``job.x`` (``job.rows // per_row`` rows of ``job.n``
        elements' bits), so one row's several ranks (a median's two middle ones) are
        found in the same launches (``job.k``, the outputs unused). ``need``: int64
        device array of ``selections``; ``done``: int32 device array, a selection
        whose entry is not 0 is skipped (its key left 0). Returns ``(keys, equal)``:
        the keys, uint64, and the selections' keys equal to theirs (int64), each a
        device array of ``selections``; ``need`` is left holding each one's rank among
        those equal keys (1-based: the rank after it has the same key when
        ``need < equal``). No row stops early: a bucket that wins whole still leaves
        its lower digits to find. Launches: 2 a digit. A job with a ``record``
        list gets each pass's facts appended, one entry of ``rows`` a selection, as
        :meth:`select` records them (``numbakern explain``).
        """
        x, selections, n, workspace = job.x, job.rows, job.n, job.workspace
        stream, threads = workspace.stream, self.threads
        width = 8 * job.key_dtype.itemsize
        layout = digit_layout(width, self.digit_bits)
        bins = 1 << layout[0][1]
        kern = self._kernels(job, width, bins)
        chunks = _chunks(n, selections, threads)
        chunk = ceil_div(n, chunks)
        prefix = zeros(workspace, selections, np.uint64)
        low = zeros(workspace, selections, np.int32)
        last = zeros(workspace, selections, np.int64)
        counts = zeros(workspace, selections * bins, np.int64)
        # per selection, the pass's kept digit, keys below and in its bucket: each
        # pass writes them over the last's (slot 0), so the last pass's bucket count,
        # the keys equal to the one found, is what is left; a recorded job (explain)
        # keeps every pass's (slot p) and the counts
        slots = len(layout) if job.record is not None else 1
        kept = workspace.empty(slots * selections, np.int64)
        below = workspace.empty(slots * selections, np.int64)
        bucket = workspace.empty(slots * selections, np.int64)
        unused = workspace.empty(1, np.uint32), workspace.empty(1, np.int64)
        histograms = []
        for p, (shift, bits) in enumerate(layout):
            launch(kern.histogram, selections * chunks, threads, stream, x, n, chunks,
                   chunk, shift, bits, prefix, done, counts, 0, *unused, per_row)
            if job.record is not None:
                histograms.append(host_copy(counts, stream).reshape(selections, bins)
                                  [:, :1 << bits])
            launch(kern.find, selections, threads, stream, counts, shift, bits, prefix,
                   need, done, low, last, kept, below, bucket, p if slots > 1 else 0, 0)
        if job.record is None:
            return prefix, bucket
        job.record.extend(_passes(kept, below, bucket, histograms, layout, stream))
        return prefix, bucket[(slots - 1) * selections:]  # the last pass's bucket counts

    def _compacted(self, job, kern, chunks: int, chunk: int, prefix, low, last, per_chunk,
                   ahead, bucket: int, m: int) -> None:
        """Step 6: the row's ``m`` keys at or below the first pass's bucket (``bucket``
        of them in it) copied out in index order, selected from, indices mapped back;
        the chunks' offsets come from their first-pass counts (``per_chunk``)."""
        ws, stream, threads, k = job.workspace, job.stream, self.threads, job.k
        take_all = ws.empty(1, np.int64)  # the gather's need: the whole bucket
        launch(kern.fill, 1, threads, stream, take_all, 1, bucket)
        offsets = zeros(ws, chunks * 2, np.int64)
        launch(kern.chunk_offsets, chunks, threads, stream, per_chunk, ahead, chunks, last,
               offsets)
        launch(kern.scan_chunks, 1, threads, stream, offsets, chunks)
        bits, where = ws.empty(m, job.key_dtype), ws.empty(m, np.int64)
        launch(kern.gather, chunks, threads, stream, job.x, job.n, chunks, chunk, prefix,
               low, take_all, offsets, m, bits, where)
        got_bits, got = ws.empty(k, job.key_dtype), ws.empty(k, np.int64)
        self.select(job.on_row(bits, m, got_bits, got))
        launch(take_rows, max(1, min(ceil_div(k, threads), 4 * max_resident_blocks(threads))),
               threads, stream, bits, m, got, k, where, 1, k, k, job.values, job.indices)

    def _kernels(self, job, width: int, bins: int):
        key = ("radix_select", self.threads, self.counter.key, width, bins, job.key)
        return cached(key, lambda: _Kernels(self.threads, self.counter, job.to_key(), width,
                                            bins))


def _chunks(n: int, rows: int, threads: int) -> int:
    """Blocks per row: enough to fill the device, each at least ``ITEMS`` keys a thread
    and fewer than 2**31 keys (its uint32 counters)."""
    most = max(1, ceil_div(n, threads * ITEMS))
    want = ceil_div(max_resident_blocks(threads), rows)
    return max(ceil_div(n, 2**31 - 1), min(most, want))


def _passes(kept, below, bucket, histograms: list, layout: list, stream) -> list:
    """The passes as dicts (what ``numbakern explain`` shows): per pass, the digit's
    bits (highest, lowest), and per row the candidates' counts of each digit, the kept
    bucket, the candidates below it and in it (``None`` once the row was decided)."""
    passes, rows = len(histograms), histograms[0].shape[0]
    host = [host_copy(a, stream).reshape(passes, rows) for a in (kept, below, bucket)]
    return [{"pass": p, "bits": (shift + bits - 1, shift),
             "rows": [None if host[0][p, r] < 0 else
                      {"bucket": int(host[0][p, r]), "below": int(host[1][p, r]),
                       "in_bucket": int(host[2][p, r]),
                       "counts": {int(d): int(c) for d, c in enumerate(histograms[p][r])
                                  if c}} for r in range(rows)]}
            for p, (shift, bits) in enumerate(layout)]


class _Kernels:
    """The kernels of one (threads, counter, key rule, widest digit's ``bins``): the
    module doc's steps. A pass's digit is ``bits`` wide from bit ``shift`` (kernel
    arguments: the passes' widths differ)."""

    def __init__(self, threads: int, counter: HistogramStrategy, to_key, width: int,
                 bins: int):
        self.fill = _fill
        self.histogram = _histogram_kernel(threads, counter, to_key, width, bins)
        exclusive_scan = block_exclusive_scan(threads, int64)  # one, for both kernels
        self.find = _find_kernel(threads, bins, exclusive_scan)
        self.chunk_offsets = _chunk_offsets_kernel(threads, bins)
        self.count = _count_kernel(threads, to_key)
        self.scan_chunks = _scan_chunks_kernel(threads, exclusive_scan)
        self.gather = _gather_kernel(threads, to_key)


@cuda.jit
def _fill(need, rows, k):
    r = cuda.grid(1)
    if r < rows:
        need[r] = k


def _prefix_tests(width: int) -> tuple:
    """``(candidate, ahead_of)``: device functions comparing a key's digits above bit
    ``top`` with the prefix's (keys ``width`` bits wide)."""

    @cuda.jit(device=True)
    def candidate(key, prefix, top):
        """Whether ``key``'s digits above bit ``top`` are the prefix's."""
        return top >= width or (key >> uint64(top)) == (prefix >> uint64(top))

    @cuda.jit(device=True)
    def ahead_of(key, prefix, top):
        """Whether ``key``'s digits above bit ``top`` are below the prefix's (it
        wins whatever its lower digits)."""
        return top < width and (key >> uint64(top)) < (prefix >> uint64(top))

    return candidate, ahead_of


def _histogram_kernel(threads: int, counter: HistogramStrategy, to_key, width: int,
                      bins: int):
    """Step 1 (and step 4a's counts, fused): the candidates' digits counted by the
    histogram strategy's block-private counters."""
    clear_bins, count_bin, bin_total = counter.build_counter(bins)
    slots = max(1, counter.shared_slots(bins))
    candidate, ahead_of = _prefix_tests(width)

    @cuda.jit
    def histogram(x, n, chunks, chunk, shift, bits, prefix, done, counts, keep,
                  per_chunk, ahead, per_row):
        """Step 1: counts[row][digit] += the chunk's candidates of each digit; with
        ``keep``, each block's own counts also to ``per_chunk`` and its keys ahead
        of the candidates (below the prefix above the digit) to ``ahead``: the
        chunk's keys below and equal to the threshold, if this pass decides its
        row (step 4's count, fused; step 6's offsets). Selection ``row`` reads
        the input's row ``row // per_row`` (several ranks of one row: ``kth_keys``)."""
        sh = cuda.shared.array(slots, uint32)
        total_ahead = cuda.shared.array(1, int32)
        keys = cuda.local.array(LOADS, uint64)
        row = cuda.blockIdx.x // chunks
        if done[row] != 0:  # the whole block leaves: the row is decided
            return
        if cuda.threadIdx.x == 0:
            total_ahead[0] = 0
        clear_bins(sh)  # a barrier: total_ahead is cleared too
        p = uint64(prefix[row])
        top = shift + bits
        digit_mask = uint64((1 << bits) - 1)
        lo = (cuda.blockIdx.x - row * chunks) * chunk
        hi = min(n, lo + chunk)
        base = int64(row // per_row) * n
        mine = 0
        i = lo + cuda.threadIdx.x
        while i < hi:
            for r in range(LOADS):  # the loads first: in flight together
                j = i + r * threads
                keys[r] = uint64(to_key(x[base + j])) if j < hi else uint64(0)
            for r in range(LOADS):
                if i + r * threads < hi:
                    if candidate(keys[r], p, top):
                        count_bin(sh, counts,
                                  int32((keys[r] >> uint64(shift)) & digit_mask))
                    elif ahead_of(keys[r], p, top):
                        mine += 1
            i += threads * LOADS
        if keep != 0 and mine != 0:
            cuda.atomic.add(total_ahead, 0, int32(mine))
        cuda.syncthreads()
        b = cuda.threadIdx.x
        while b < (1 << bits):
            c = bin_total(sh, b)
            if c != 0:
                cuda.atomic.add(counts, row * bins + b, int64(c))
            if keep != 0:
                per_chunk[cuda.blockIdx.x * bins + b] = c
            b += threads
        if keep != 0 and cuda.threadIdx.x == 0:
            ahead[cuda.blockIdx.x] = total_ahead[0]

    return histogram


def _chunk_offsets_kernel(threads: int, bins: int):
    @cuda.jit
    def chunk_offsets(per_chunk, ahead, chunks, last, offsets):
        """Step 4a fused (or step 6's offsets), a block a chunk: its keys below and
        equal to the threshold, from the counts its last pass kept (its keys ahead,
        plus those of the digits below the kept one; those of the kept one)."""
        sh = cuda.shared.array(1, int32)
        tid = cuda.threadIdx.x
        if tid == 0:
            sh[0] = 0
        cuda.syncthreads()
        row = cuda.blockIdx.x // chunks
        d = last[row]
        base = cuda.blockIdx.x * bins
        less = 0
        b = tid
        while b < d:
            less += per_chunk[base + b]
            b += threads
        if less != 0:
            cuda.atomic.add(sh, 0, int32(less))
        cuda.syncthreads()
        if tid == 0:
            offsets[cuda.blockIdx.x * 2] = ahead[cuda.blockIdx.x] + sh[0]
            offsets[cuda.blockIdx.x * 2 + 1] = per_chunk[base + d]

    return chunk_offsets


def _find_kernel(threads: int, bins: int, exclusive_scan):
    warps = threads // WARP

    @cuda.jit
    def find(counts, shift, bits, prefix, need, done, low, last, kept, below, bucket,
             p, stop):
        """Step 2, a block a row: each thread sums a run of the counts, a block scan
        gives the runs' starts, and the thread whose run holds the need-th
        candidate walks it to the bucket; each thread zeroes its run for the next
        pass. ``stop``: a row whose kept bucket wins whole is done (a top-k's
        early stop; ``kth_keys`` runs every digit, the key itself wanted)."""
        totals = cuda.shared.array(warps, int64)
        r = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        slot = p * cuda.gridDim.x + r
        if done[r] != 0:  # the whole block leaves: the row is decided
            if tid == 0:
                kept[slot] = -1
                below[slot] = 0
                bucket[slot] = 0
            return
        want = need[r]  # read by every thread before the barriers of the scan
        per = ((1 << bits) + threads - 1) // threads
        lo = r * bins + tid * per
        hi = min(r * bins + (1 << bits), lo + per)
        mine = int64(0)
        for j in range(lo, hi):
            mine += counts[j]
        earlier, _ = exclusive_scan(mine, totals, tid)
        if earlier < want and want <= earlier + mine:  # the candidates reach want
            acc = earlier
            j = lo
            c = counts[j]
            while acc + c < want:
                acc += c
                j += 1
                c = counts[j]
            d = j - r * bins
            prefix[r] = uint64(prefix[r]) | (uint64(d) << uint64(shift))
            need[r] = want - acc
            low[r] = shift
            last[r] = d
            # the whole bucket wins: the lower digits do not matter
            if stop != 0 and c == want - acc:
                done[r] = 1
            kept[slot] = d
            below[slot] = acc
            bucket[slot] = c
        for j in range(lo, hi):  # this thread's run only: read by it alone
            counts[j] = 0

    return find


@cuda.jit(device=True)
def _chunk_threshold(n, chunks, chunk, prefix, low):
    """Step 4's view of a block: its row, its chunk ``c`` of the row, the chunk's
    bounds ``lo, hi``, the row's start ``base``, and the threshold's digits above bit
    ``shift``, ``t`` (a key ``k`` is below it where ``k >> shift < t``)."""
    row = cuda.blockIdx.x // chunks
    c = cuda.blockIdx.x - row * chunks
    lo = c * chunk
    shift = uint64(low[row])
    return (row, c, lo, min(n, lo + chunk), int64(row) * n, shift,
            uint64(prefix[row]) >> shift)


def _count_kernel(threads: int, to_key):
    @cuda.jit
    def count(x, n, chunks, chunk, prefix, low, offsets):
        """Step 4a: each chunk's keys below and equal to the threshold."""
        sh = cuda.shared.array(2, int32)
        tid = cuda.threadIdx.x
        if tid < 2:
            sh[tid] = 0
        cuda.syncthreads()
        row, c, lo, hi, base, shift, t = _chunk_threshold(n, chunks, chunk, prefix, low)
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

    return count


def _scan_chunks_kernel(threads: int, exclusive_scan):
    warps = threads // WARP

    @cuda.jit
    def scan_chunks(offsets, chunks):
        """Step 4b, a block a row: the chunks' counts into exclusive offsets, a
        round of ``threads`` chunks a block scan (one thread walking a thousand
        chunks would wait on each load in turn)."""
        totals = cuda.shared.array(warps, int64)
        tid = cuda.threadIdx.x
        first = int64(cuda.blockIdx.x) * chunks
        less = int64(0)  # the earlier rounds' totals
        equal = int64(0)
        start = 0
        while start < chunks:  # the same rounds for every thread (the scans' barriers)
            c = start + tid
            s = (first + c) * 2
            a = offsets[s] if c < chunks else int64(0)
            b = offsets[s + 1] if c < chunks else int64(0)
            a_before, a_total = exclusive_scan(a, totals, tid)
            b_before, b_total = exclusive_scan(b, totals, tid)
            if c < chunks:
                offsets[s] = less + a_before
                offsets[s + 1] = equal + b_before
            less += a_total
            equal += b_total
            start += threads

    return scan_chunks


def _gather_kernel(threads: int, to_key):
    warps = threads // WARP
    gather_slots = GATHER_ITEMS * warps

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
        row, c, lo, hi, base, shift, t = _chunk_threshold(n, chunks, chunk, prefix, low)
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

    return gather
