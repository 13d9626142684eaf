"""Onesweep LSD radix sort: one histogram of every digit, then one pass per digit.

The lesson
----------
A least-significant-digit radix sort orders ``w``-bit keys (``numbakern/sort_keys.py``
turns any dtype into unsigned keys in NumPy's order) by sorting them ``w / 8``
times, on 8-bit digits from the lowest to the highest, each pass **stable**: after
the pass on digit ``p``, keys are ordered by digits ``p..0``, equal ones still in
input order. 32-bit keys take 4 passes, 64-bit keys 8, bool and int8 one.

This is the structure of Onesweep (Andy Adinets and Duane Merrill, "Onesweep: A
Faster Least Significant Digit Radix Sort for GPUs", 2022), the algorithm of CUB's
``DeviceRadixSort``:

1. **Histogram every digit at once** (``digit_histogram``). One read of the keys
   counts, for every pass ``p`` and every row, how many keys have each value of
   digit ``p``: ``passes * 256`` bins per row, counted by a histogram strategy's
   block-private counters (``strategies/warp_privatized.py`` by default;
   ``numbakern/counting.py``) and folded into global counts with atomics.
2. **Scan them** (numbakern's own ``cumsum(exclusive=True)``, any scan strategy):
   the exclusive prefix of the counts, laid out ``[pass][row][digit]``, is where the
   first key of each (row, digit) goes in pass ``p``'s output (plus ``p * size``,
   the keys of the earlier passes' blocks of counts, which the pass subtracts).
3. **One pass per digit** (``onesweep_pass``), over tiles of ``threads * items``
   consecutive keys of a row, one block a tile, taken in launch order from an
   atomic counter (``decoupled_lookback.py`` says why that order matters):

   a. *Rank* the tile: each warp walks its keys in input order; one
      ``match_any_sync`` finds the lanes holding the same digit, the lowest of
      them adds their number to the warp's private count of the digit in shared
      memory, and each key's rank among equal digits of its warp is that count
      before the add plus the peers in lower lanes.
   b. *Publish* the tile's count of each digit (status **A**), sum the warps'
      counts into an exclusive prefix over digits, and move every key to its
      sorted place within the tile, in shared memory.
   c. *Look back*, one thread per digit: sum the counts that earlier tiles of the
      row published for the digit, back to the first inclusive prefix (status
      **P**), and publish this tile's own inclusive prefix. This is decoupled
      look-back (Merrill and Garland, 2016) with 256 counters instead of one.
   d. *Scatter*: the tile's keys, now sorted, are written in order; key ``i`` of
      the tile with digit ``d`` goes to ``start(d) + looked-back(d) + i - first(d)``,
      so keys of one digit are written as consecutive runs.

Every step keeps input order among equal digits, so the sort is stable. A ``sort``
moves the input's own bits (the digit is taken from their key each time it is
needed), so the values come out exact (``-0.0`` and NaN payloads where a stable
sort puts them) and nothing else is carried: per pass the keys are read once and
written once. An ``argsort`` carries each key's index in the row beside it and
writes only the indices in its last pass.

Where the time goes, and what this leaves out of CUB (bench/NOTES.md, H200, 2^28
uint32 keys, 256 threads x 16 keys): a pass took about 4.6 ms where CUB's takes 0.66.
Loading and storing a tile through shared memory alone takes 1.0 ms (half the copy
bandwidth), ranking adds 1.9 ms, and the look-back with the scattered writes 2 ms:
no single step, but every step, is several times CUB's. Launch bounds that cap a
pass's registers so that 3 blocks share a multiprocessor (:func:`_pass_jit`) took the
2^28 float32 sort from 18.0 to 16.3 ms. Tried and no faster: every key's peers first,
then the counts folded with shared atomics (16.5 ms under the same bounds; 29.5
without, at 135 registers and one block a multiprocessor). Nsight Compute then found
a pass issuing about 270 warp instructions a 32 keys on 62% of its cycles: most of
its time is the count of instructions. Selects instead of branches in the float key, the digit kept beside
the rank, and the nearest tile read alone in the look-back cut 12% of them (16.3 ->
15.6 ms; passes of 3.5 ms). Next steps, after CUB's onesweep kernel: count a tile's
digits and publish them before ranking (CUB's "early counts"), so later tiles rarely
find a predecessor unpublished; fewer instructions a key in the ranking. Not done
either: skipping passes whose digit is the same for every key, and a
one-block-per-row kernel for medium rows.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int32, int64, uint32, uint64

from numbakern import kernels
from numbakern.counting import SHARED_LIMIT, HistogramStrategy
from numbakern.elementwise import zeros
from numbakern.job import max_resident_blocks
from numbakern.launch import SIMULATOR, launch
from numbakern.strategy import Immutable, _check_threads, ceil_div, check_optional_count

from .shared_privatized import SharedPrivatized
from .warp_privatized import WarpPrivatized

#: bits per digit, and digits per pass
DIGIT_BITS = 8
RADIX = 1 << DIGIT_BITS
WARP = 32
FULL_MASK = 0xFFFFFFFF
#: tile status in the top two bits of a look-back word: aggregate, inclusive prefix
STATUS_A, STATUS_P = 1, 2
#: rows this long or longer count in 64-bit look-back words (30 bits hold less)
WIDE_ROWS = 1 << 30
#: keys a block of the histogram counts at least
HISTOGRAM_ITEMS = 16
#: earlier tiles' look-back words read at once past the nearest
WINDOW = 16


class RadixSort(Immutable):
    """Stable Onesweep LSD radix sort on 8-bit digits, any row length, rows together.

    Args:
        threads: threads per block.
        items: keys per thread in a tile (``None``: 16 for a sort, 12 for an argsort,
            then 8, 4, 2, 1 until the tile fits in shared memory; 2 under the simulator).
        histogram: how a block counts digits: ``"warp_privatized"`` (default) or
            ``"shared_privatized"``, or such a strategy object. When its counters
            for every pass's digits do not fit in shared memory (64-bit keys with
            per-warp counters), one shared copy per block counts them instead.
        scan: the scan strategy of the digit offsets (any name ``cumsum`` takes).

    Launches: a histogram, a scan and one pass per 8-bit digit, after zeroing the
    counts and look-back words. Traffic per pass: the keys (and an argsort's
    indices) read once and written once, plus ``256`` look-back words a tile.

    Raises:
        TypeError: ``threads`` or ``items`` not an int; a ``scan`` of the wrong type
            (see ``resolve_scan``).
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; ``items < 1``;
            a ``histogram`` that is not a privatized strategy, has other ``threads``
            or whose counters do not fit; an unknown ``scan`` name. At sort time, an
            ``items`` whose tile overflows shared memory.
    """

    name = "radix"
    DEFAULT_THREADS = 64 if SIMULATOR else 256

    def __init__(self, threads: int | None = None, items: int | None = None,
                 histogram="warp_privatized", scan=None):
        self.threads = _check_threads(self.DEFAULT_THREADS if threads is None else threads)
        self.items = check_optional_count(items, "items")
        self.counter = _counter(histogram, self.threads)
        from . import resolve_scan  # the package imports this module

        resolve_scan(scan)  # an unknown scan is refused here, not at the first sort
        self.scan = scan

    @property
    def key(self) -> tuple:
        return (self.name, self.threads, self.items, self.counter.key, repr(self.scan))

    def __repr__(self) -> str:
        return (f"RadixSort(threads={self.threads}, items={self.items}, "
                f"histogram={self.counter.name!r}, scan={self.scan!r})")

    def fits(self, n: int) -> bool:
        return True

    def tile_items(self, key_bytes: int, index_bytes: int) -> int:
        """Keys per thread: ``items``, or the most whose tile fits in shared memory."""
        if self.items is not None:
            if _pass_shared(self.threads, self.items, key_bytes, index_bytes) > SHARED_LIMIT:
                raise ValueError(f"items={self.items} with {self.threads} threads needs "
                                 f"more than {SHARED_LIMIT} bytes of shared memory for "
                                 f"{key_bytes}-byte keys; use fewer")
            return self.items
        if SIMULATOR:
            return 2
        # measured (bench/NOTES.md): 16 keys a thread for a sort, 12 for an argsort
        start = (12, 8, 4, 2, 1) if index_bytes else (16, 8, 4, 2, 1)
        return next(k for k in start
                    if _pass_shared(self.threads, k, key_bytes, index_bytes) <= SHARED_LIMIT)

    def sort(self, job) -> None:
        from numbakern.scans import cumsum  # scans import the strategies package

        ws, stream, rows, n = job.workspace, job.stream, job.rows, job.n
        index_dtype = np.dtype(np.int32 if n < 2**31 else np.int64)
        index_bytes = index_dtype.itemsize if job.indices else 0
        items = self.tile_items(job.key_dtype.itemsize, index_bytes)
        tiles = ceil_div(n, self.threads * items)
        passes = 8 * job.key_dtype.itemsize // DIGIT_BITS
        size = rows * n
        word = np.dtype(np.uint64 if n >= WIDE_ROWS else np.uint32)
        histogram, k = self._kernels(job, items, passes, index_dtype, word)

        counts = zeros(ws, passes * rows * RADIX, np.int64)
        chunks = _histogram_chunks(n, rows, self.threads)
        launch(histogram, rows * chunks, self.threads, stream, job.x, n, chunks,
               ceil_div(n, chunks), counts)
        offsets = ws.empty(passes * rows * RADIX, np.int64)
        cumsum(counts, exclusive=True, out=offsets, strategy=self.scan, stream=stream)
        # per pass: each tile's 256 look-back words, then the pass's tile counter
        stride = rows * tiles * RADIX + 1
        words = zeros(ws, passes * stride, word)

        src_k, src_i = job.x, job.x  # the first pass makes indices, reads none
        spare = min(2, passes - 1)
        key_bufs = [ws.empty(size, job.key_dtype) for _ in range(spare)]
        index_bufs = [ws.empty(size, index_dtype) for _ in range(spare if job.indices else 0)]
        for p in range(passes):
            first, last = p == 0, p == passes - 1
            if not last:
                dst_k = key_bufs[p % 2]
                dst_i = index_bufs[p % 2] if job.indices else job.x
            elif job.indices:  # an argsort's last pass writes indices only
                dst_k, dst_i = job.x, job.out
            else:
                dst_k, dst_i = job.out, job.x
            launch(k(first, last), rows * tiles, self.threads, stream, src_k, src_i, dst_k,
                   dst_i, n, tiles, p * DIGIT_BITS, offsets, p * rows * RADIX, p * size,
                   words, p * stride)
            src_k, src_i = dst_k, dst_i

    def _kernels(self, job, items: int, passes: int, index_dtype, word):
        key = ("radix_sort", self.key, items, index_dtype.str, word.str, job.key)
        return kernels.cached(key, lambda: _build(self.threads, items, passes,
                                                  self.counter, job, index_dtype, word))


def _pass_shared(threads: int, items: int, key_bytes: int, index_bytes: int) -> int:
    """Shared bytes of a pass: the tile's keys and indices, per-warp digit counts, and
    per-digit counts, starts and global bases."""
    tile = threads * items
    return tile * (key_bytes + index_bytes) + (threads // WARP) * RADIX * 4 + RADIX * 16 + 8


def _histogram_chunks(n: int, rows: int, threads: int) -> int:
    """Blocks per row of the histogram: enough to fill the device, each counting at
    least ``HISTOGRAM_ITEMS`` keys a thread and at most 2**31 (its uint32 counters)."""
    most = max(1, ceil_div(n, threads * HISTOGRAM_ITEMS))
    want = ceil_div(max_resident_blocks(threads), rows)
    return max(ceil_div(n, 2**31), min(most, want))


def _counter(histogram, threads: int) -> HistogramStrategy:
    """The block digit counter: a privatized histogram strategy (global atomics would
    fold every key into global memory, where the counts gather anyway)."""
    if isinstance(histogram, (SharedPrivatized, WarpPrivatized)):
        counter = histogram
    elif histogram in ("warp_privatized", "shared_privatized"):
        cls = WarpPrivatized if histogram == "warp_privatized" else SharedPrivatized
        counter = cls(threads)
    else:
        raise ValueError(f"histogram must be 'warp_privatized' or 'shared_privatized' (a "
                         f"block-private counter), got {histogram!r}")
    if counter.threads != threads:
        raise ValueError(f"the histogram strategy has {counter.threads} threads, the sort "
                         f"{threads}")
    counter.check(RADIX)
    return counter


def _build(threads, items, passes, counter, job, index_dtype, word):
    """``(histogram_kernel, pass_kernel)``; ``pass_kernel(first, last)`` the digit pass
    for a pass's place (an argsort's first makes indices, its last writes only them)."""
    to_key = job.to_key()
    if not counter.fits(passes * RADIX):  # 64-bit keys' 2048 bins per warp: per block
        counter = SharedPrivatized(threads)
    digit = _digit(to_key)
    built = {}

    def pass_kernel(first: bool, last: bool):
        place = (first, last) if job.indices else (False, False)
        if place not in built:
            built[place] = _build_pass(threads, items, digit, job.key_dtype, index_dtype,
                                       word, first=place[0], carry=job.indices,
                                       write_keys=not (job.indices and place[1]))
        return built[place]

    return _build_histogram(threads, counter, passes, to_key), pass_kernel


def _digit(to_key):
    """Device function ``digit(bits, shift)``: 8 bits of the key of an input's bits."""
    mask = uint64(RADIX - 1)

    @cuda.jit(device=True)
    def digit(bits, shift):
        return int32((uint64(to_key(bits)) >> uint64(shift)) & mask)

    return digit


def _build_histogram(threads: int, counter: HistogramStrategy, passes: int, to_key):
    bins = passes * RADIX
    clear, count, total = counter.build_counter(bins)
    slots = counter.shared_slots(bins)
    mask = uint64(RADIX - 1)

    @cuda.jit
    def digit_histogram(x, n, chunks, chunk, counts):
        """counts[pass][row][digit] += the block's keys' digits (chunk of one row)."""
        sh = cuda.shared.array(slots, uint32)
        clear(sh)
        row = cuda.blockIdx.x // chunks
        rows = cuda.gridDim.x // chunks
        j = (cuda.blockIdx.x - row * chunks) * int64(chunk) + cuda.threadIdx.x
        end = min(n, (cuda.blockIdx.x - row * chunks + 1) * int64(chunk))
        base = row * int64(n)
        while j < end:
            key = uint64(to_key(x[base + j]))
            for p in range(passes):
                count(sh, counts, p * RADIX + int32((key >> uint64(p * DIGIT_BITS)) & mask))
            j += threads
        cuda.syncthreads()
        b = cuda.threadIdx.x
        while b < bins:  # one atomic per non-empty bin
            c = total(sh, b)
            if c != 0:
                p = b // RADIX
                cuda.atomic.add(counts, (p * rows + row) * RADIX + b - p * RADIX, int64(c))
            b += threads

    return digit_histogram


def _build_pass(threads, items, digit, key_dtype, index_dtype, word, first: bool,
                carry: bool, write_keys: bool):
    """The kernel of one digit pass (module doc, step 3).

    ``first``: indices are the keys' positions (read none); ``carry``: move indices
    beside the keys (argsort); ``write_keys``: write the keys (not an argsort's last
    pass, which writes only indices).
    """
    tile, warps = threads * items, threads // WARP
    kt, it, wt = from_dtype(key_dtype), from_dtype(index_dtype), from_dtype(word)
    index_tile = tile if carry else 1
    shift = 62 if word.itemsize == 8 else 30
    value = wt((1 << shift) - 1)
    aggregate, prefix = wt(STATUS_A << shift), wt(STATUS_P << shift)
    per_lane = RADIX // WARP

    look_back = _look_back(wt, shift, value)

    @_pass_jit(threads, key_dtype.itemsize, carry)
    def onesweep_pass(src_k, src_i, dst_k, dst_i, n, tiles, shift_bits, offsets, at_offsets,
                      pass_base, words, at):
        sorted_k = cuda.shared.array(tile, kt)
        sorted_i = cuda.shared.array(index_tile, it)
        in_warp = cuda.shared.array((warps, RADIX), int32)  # then the warps' prefixes
        counts = cuda.shared.array(RADIX, int32)
        firsts = cuda.shared.array(RADIX, int32)  # the tile's first key of each digit
        bases = cuda.shared.array(RADIX, int64)
        tile_id = cuda.shared.array(1, int32)
        tid = cuda.threadIdx.x
        lane, warp = tid % WARP, tid // WARP
        if tid == 0:  # tiles in the order blocks start: every tile waited for is running
            tile_id[0] = int32(cuda.atomic.add(words, at + cuda.gridDim.x * RADIX, wt(1)))
        for d in range(tid, RADIX, threads):
            for w in range(warps):
                in_warp[w, d] = 0
        cuda.syncthreads()
        g = int64(tile_id[0])
        row = g // tiles
        t = g - row * tiles
        base = row * n
        keys = cuda.local.array(items, kt)
        ranks = cuda.local.array(items, int32)
        idx = cuda.local.array(items, it)
        below = cuda.lanemask_lt()
        seg = t * tile + warp * (WARP * items) + lane  # warp-striped: coalesced loads
        for k in range(items):  # every load in flight before the first barrier below
            j = seg + k * WARP
            keys[k] = src_k[base + j] if j < n else kt(0)
            if carry:
                idx[k] = it(j) if first else (src_i[base + j] if j < n else it(0))
        for k in range(items):  # (a) rank among equal digits of the warp, in input order
            valid = seg + k * WARP < n
            dig = digit(keys[k], shift_bits) if valid else int32(RADIX)
            peers = uint32(cuda.match_any_sync(FULL_MASK, dig))  # popc of a uint32
            rank = cuda.popc(peers & below)
            before = int32(0)
            if valid and rank == 0:
                before = in_warp[warp, dig]
                in_warp[warp, dig] = before + cuda.popc(peers)
            cuda.syncwarp()  # the count is seen by the next round's lowest lane
            # the digit rides above the rank (below 2**16), not recomputed in (b)
            ranks[k] = (cuda.shfl_sync(FULL_MASK, before, cuda.ffs(peers) - 1) + rank
                        | dig << 16)
        cuda.syncthreads()
        for d in range(tid, RADIX, threads):  # (b) counts, published; warps' prefixes
            run = int32(0)
            for w in range(warps):
                c = in_warp[w, d]
                in_warp[w, d] = run
                run += c
            counts[d] = run
            words[at + g * RADIX + d] = (prefix if t == 0 else aggregate) | wt(run)
        cuda.syncthreads()
        if warp == 0:  # exclusive scan of the 256 counts: 8 a lane, then the warp
            own = int32(0)
            for q in range(per_lane):
                own += counts[lane * per_lane + q]
            inclusive = own
            off = 1
            while off < WARP:
                v = cuda.shfl_up_sync(FULL_MASK, inclusive, off)
                if lane >= off:
                    inclusive += v
                off *= 2
            run = inclusive - own
            for q in range(per_lane):
                firsts[lane * per_lane + q] = run
                run += counts[lane * per_lane + q]
        cuda.syncthreads()
        for k in range(items):  # each key to its sorted place in the tile
            if seg + k * WARP < n:
                dig = ranks[k] >> 16
                pos = firsts[dig] + in_warp[warp, dig] + (ranks[k] & 0xFFFF)
                sorted_k[pos] = keys[k]
                if carry:
                    sorted_i[pos] = idx[k]
        for d in range(tid, RADIX, threads):  # (c) look back, publish the prefix
            excl = int64(0)
            if t > 0:
                excl = look_back(words, at, g, g - t, d)
                words[at + g * RADIX + d] = prefix | wt(excl + counts[d])
            bases[d] = offsets[at_offsets + row * RADIX + d] - pass_base + excl - firsts[d]
        cuda.syncthreads()
        i = tid
        held = min(int64(tile), n - t * tile)
        while i < held:  # (d) runs of equal digits, written in order
            key = sorted_k[i]
            dst = bases[digit(key, shift_bits)] + i
            if write_keys:
                dst_k[dst] = key
            if carry:
                dst_i[dst] = sorted_i[i]
            i += threads

    return onesweep_pass


def _pass_jit(threads: int, key_bytes: int, carry: bool):
    """``cuda.jit`` for a pass with launch bounds asking ptxas for 3 blocks a
    multiprocessor (80 registers at 256 threads) for keys of 4 bytes or fewer, else 2.

    Left alone, ptxas gives a pass 113-150 registers, so 1 or 2 blocks of 256 threads
    share a multiprocessor, too few to hide the ranking's and the look-back's
    latencies. H200, 2^28 float32 sort: 18.0 -> 16.3 ms with 3; 2^26 float64 sort
    15.7 -> 9.7 ms with 2 (10.3 with 3); 2^28 argsort 22.0 -> 21.5 ms with 2
    (bench/NOTES.md, 2026-12-01).
    """
    if SIMULATOR:
        return cuda.jit
    want = 3 if key_bytes <= 4 and not carry else 2
    # never below 64 registers a thread (larger blocks than 256 threads)
    return cuda.jit(launch_bounds=(threads, max(1, min(want, 65536 // (threads * 64)))))


def _look_back(wt, shift: int, value):
    """Device function ``look_back(words, at, g, first, d)``: the keys of digit ``d`` in
    the row's tiles ``first .. g-1`` (module doc, 3c).

    Reads are atomics (from L2, never a stale L1 line; status and count together).
    The nearest tile is read alone (usually already a prefix); past it, ``WINDOW``
    earlier tiles are read at once, so a walk over many aggregates costs one memory
    latency per window, not per tile: with a thousand tiles in flight, walks of tens
    of tiles are common, and a serial walk made each pass several times slower.
    """
    done = wt(STATUS_P)
    simulated = SIMULATOR

    @cuda.jit(device=True)
    def look_back(words, at, g, first, d):
        window = cuda.local.array(WINDOW, wt)
        w = cuda.atomic.or_(words, at + (g - 1) * RADIX + d, wt(0))  # the nearest alone
        status = w >> wt(shift)
        if status == done:  # the common case: no window, no loop
            return int64(w & value)
        excl = int64(0)
        end = g  # tiles first .. end-1 are still to be summed
        span = 1  # unpublished: read it again alone
        if status != wt(0):
            excl = int64(w & value)
            end = g - 1
            span = WINDOW
        while True:
            lo = max(first, end - span)
            for q in range(WINDOW):  # independent reads: in flight together
                if end - 1 - q >= lo:
                    window[q] = cuda.atomic.or_(words, at + (end - 1 - q) * RADIX + d, wt(0))
            span = WINDOW
            for q in range(WINDOW):
                if end - 1 - q < lo:
                    break
                w = window[q]
                status = w >> wt(shift)
                if status == wt(0):  # tile end-1 is running and will publish: read it again
                    if simulated:  # blocks run one at a time there: it never will
                        raise RuntimeError("radix sort: a tile looks back at one not yet run")
                    span = 1
                    break
                excl += int64(w & value)
                if status == done:
                    return excl
                end -= 1

    return look_back
