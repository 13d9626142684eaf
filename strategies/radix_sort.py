"""Onesweep LSD radix sort: one histogram of every digit, then one pass per digit.

The lesson
----------
A least-significant-digit radix sort orders ``w``-bit keys (``numbakern/kernels/sort_keys.py``
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
   block-private counters (``strategies/shared_privatized.py`` by default;
   ``numbakern/kernels/counting.py``) and folded into global counts with atomics.
2. **Scan them** (the job's ``exclusive_sum``, by any scan strategy): the
   exclusive prefix of the counts, laid out ``[pass][row][digit]``, is where the
   first key of each (row, digit) goes in pass ``p``'s output (plus ``p * size``,
   the keys of the earlier passes' blocks of counts, which the pass subtracts).
3. **One pass per digit** (``onesweep_pass``), over tiles of ``threads * items``
   consecutive keys of a row, one block a tile, taken in launch order from an
   atomic counter (``decoupled_lookback.py`` says why that order matters):

   a. *Count and publish early*: each warp counts its keys' digits with shared
      atomics; the block sums the warps' counts and publishes the tile's count of
      each digit (status **A**) at once, before any ranking, so that later tiles
      rarely wait for it (CUB's "early counts"). An exclusive scan over the 256
      counts, plus the counts of earlier warps, gives where each warp's first key
      of each digit goes in the tile.
   b. *Rank*: each warp walks its keys in input order. A key's lanes of equal digit
      are found by every lane setting its bit in the digit's mask in shared memory
      (CUB's ``WARP_MATCH_ATOMIC_OR``); the lowest of them claims the places of
      all with one atomic add to its warp's next place for the digit, and each key
      goes at once to its sorted place in the tile, in shared memory.
   c. *Look back*, one thread per digit: sum the counts that earlier tiles of the
      row published for the digit, back to the first inclusive prefix (status
      **P**), and publish this tile's own inclusive prefix. This is decoupled
      look-back (Merrill and Garland, 2016) with 256 counters instead of one; the
      words are read four tiles at a time (:func:`_look_back`).
   d. *Scatter*: the tile's keys, now sorted, are written in order; key ``i`` of
      the tile with digit ``d`` goes to ``start(d) + looked-back(d) + i - first(d)``,
      so keys of one digit are written as consecutive runs.

Every step keeps input order among equal digits, so the sort is stable. A ``sort``
moves the input's own bits (each digit is computed from their key when needed and
kept beside the sorted key in shared memory), so the values come out exact
(``-0.0`` and NaN payloads where a stable sort puts them) and nothing else is
carried: per pass the keys are read once and written once. An ``argsort`` carries
each key's index in the row beside it and writes only the indices in its last pass.
Keys past a row's end, in its last tile, take the last digit: they rank after every
key of the row and are neither counted nor written.

Why a pass is built this way (bench/NOTES.md has the measurements: H200, Nsight
Compute on a 2^26 float32 pass, the 2^28 float32 sort):

* A tile publishes its digit counts before it ranks its keys, so its successors'
  look-back finds them early; the look-back reads relaxed loads
  (``numbakern/runtime/relaxed.py``) with 32-bit index arithmetic, and each key's
  place comes straight from the ranking. A look-back that found its predecessor
  unpublished and walked unrolled windows of 64-bit reads spent 40% of a pass's
  instructions (the pass ran 287 M warp instructions with these, 563 M without).
* The ranking finds the keys of a warp sharing a digit with shared atomics, not
  ``match_any_sync``, whose cost grows with the distinct digits in a warp (about 30
  for random keys): 7.8 ms against 10.9 for the sort; eight ballots a key (CUB's
  ``MatchAny``) gave 10.4.
* Launch bounds cap a pass's registers so that 3 blocks share a multiprocessor
  (:func:`_pass_jit`).
* A tile lives in dynamic shared memory, so it may pass the 48 KiB of static shared
  memory: larger tiles publish fewer look-back words, walk fewer look-backs and pay
  a tile's per-digit work (256 counts, their scan, look-back and bases) for more
  keys; at 28 keys a thread (7168 a tile) 2^28 float32 keys sort in 6.1 ms, in 7.5
  at a smaller tile. The best shape depends on the keys' width and on whether
  indices ride along, so a pass's threads come from the same table as its keys a
  thread (:data:`TILE_SHAPES`; CUB's sm_80 tile is 384 x 21).
* The digit histogram keeps the strategy's threads (nothing in it depends on a
  pass's) and reads 16-byte vectors where the rows are aligned.

Not done: skipping passes whose digit is the same for every key, and a
one-block-per-row kernel for medium rows.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int32, int64, uint8, uint32, uint64

from numbakern.kernels.elementwise import zeros
from numbakern.kernels.vector import VECTOR_BYTES, vector_lanes, vector_loader
from numbakern.runtime.cache import cached
from numbakern.runtime.device import (FULL_MASK, SIMULATOR, WARP, ceil_div,
                                      max_resident_blocks, shared_capacity, simulator_items)
from numbakern.runtime.launch import launch
from numbakern.runtime.relaxed import load_relaxed
from numbakern.runtime.views import address

from .protocols import (DIGIT_BITS, RADIX, HistogramStrategy, SortStrategy,
                        check_optional_count, check_threads, counter_threads,
                        digit_counter)
from .registry import resolve

#: tile status in the top two bits of a look-back word: aggregate, inclusive prefix
STATUS_A, STATUS_P = 1, 2
#: rows this long or longer count in 64-bit look-back words (30 bits hold less)
WIDE_ROWS = 1 << 30
#: keys a block of the histogram counts at least
HISTOGRAM_ITEMS = 16
#: keys a thread of the histogram loads at once (in flight together)
HISTOGRAM_LOADS = 8
#: earlier tiles' look-back words read at once
WINDOW = 4
#: a pass's tile by default, ``(threads, keys a thread)`` by (8-byte keys, argsort),
#: fewer keys where the tile does not fit: the best of the sweeps on an H200
#: (bench/NOTES.md, "Onesweep tiles past 48 KiB"; ms, two runs). 4-byte sorts are
#: best at 256 threads: float32 2^28 7.51 at 256 x 16, 6.25 at 256 x 24, 6.10 at
#: 256 x 28, 6.24 at 256 x 32, 6.33 at 384 x 24 (cuda.compute 5.88); uint32 6.19 /
#: 5.87 / 5.70 at 256 x 24 / 28 / 32 (32 spills for float32). 8-byte sorts and 4-byte
#: argsorts at 384: float64 2^26 sort 4.71 at 256 x 20, 4.53 at 384 x 16, 4.55 at
#: 384 x 20, 4.57 at 512 x 16 (cuda.compute 4.29); float32 2^28 argsort 9.33 at
#: 256 x 20, 8.99 at 384 x 16, 10.26 at 384 x 12, 9.17 at 512 x 12. Not swept: 8-byte
#: argsorts, left at 256 x 12.
TILE_SHAPES = {(False, False): (256, 28), (True, False): (384, 16), (False, True): (384, 16),
               (True, True): (256, 12)}
#: a sort's tile of 4-byte integer keys, whose key rule costs no registers (float32's
#: spills at 32 keys a thread): uint32 2^28 5.87 ms at 256 x 28, 5.70 at 256 x 32 on
#: an H200; on an H100 (2026-12-06, two runs) uint32 5.94 / 5.74-5.76, int32 5.91 /
#: 5.75-5.80 (cuda.compute 5.53-5.74 and 5.61-5.63 in the same runs)
INTEGER_TILE = (256, 32)


class RadixSort(SortStrategy):
    """Stable Onesweep LSD radix sort on 8-bit digits, any row length, rows together.

    Args:
        threads: threads per block of every kernel. ``None`` (default): a pass's
            come with its keys a thread from :data:`TILE_SHAPES`, by the keys' width
            and whether indices ride along (on an H200, 384 for 8-byte sorts and
            4-byte argsorts, 256 for the rest), and the digit histogram's are 256
            (a ``histogram`` object's own, where given); under the simulator every
            kernel's are 64 (the histogram object's).
        items: keys per thread in a tile (``None``: :data:`TILE_SHAPES`' or fewer,
            12, 8, 4, 2, 1 until the tile fits in shared memory; 2 under the
            simulator). The tile lives in dynamic shared memory, so a given ``items``
            may take up to the device's opt-in maximum a block (227 KiB on an H200;
            CUB's sm_80 tile is 384 x 21).
        histogram: how a block counts digits: ``"shared_privatized"`` (default:
            2% faster on an H200) or ``"warp_privatized"``, or such a strategy
            object (whose threads the histogram kernel takes where ``threads`` is
            None; given both, they must agree). When its counters for every pass's
            digits do not fit in shared memory (64-bit keys with per-warp counters),
            one shared copy per block counts them instead.
        scan: the scan strategy of the digit offsets (any name or object ``cumsum``
            takes; default ``decoupled_lookback/warp_shuffle``).

    Launches: a zeroing of the counts, a histogram (which also zeroes the look-back
    words), a scan and one pass per 8-bit digit. Traffic per pass: the keys (and an argsort's
    indices) read once and written once, plus ``256`` look-back words a tile.

    Raises:
        TypeError: ``threads`` or ``items`` not an int; a ``scan`` or ``histogram`` of
            the wrong type (see ``numbakern.strategies.resolve``).
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; ``items < 1``;
            a ``histogram`` that is not a privatized strategy, has other threads than
            a given ``threads``, or whose counters do not fit; an unknown ``scan``
            name. At sort time, an ``items`` whose tile overflows the shared memory a
            block may have.
    """

    name = "radix"

    def __init__(self, threads: int | None = None, items: int | None = None,
                 histogram="shared_privatized", scan=None):
        #: the digit histogram's threads (and its counter's): a histogram object's own
        #: where the sort's are not given
        self.threads = check_threads(counter_threads(threads, histogram))
        #: a pass's threads as given; None: by the keys, :meth:`tile_shape`
        self.pass_threads = None if threads is None else self.threads
        self.items = check_optional_count(items, "items")
        self.counter = digit_counter(histogram, self.threads)
        self.scan = resolve("scan", scan, argument="scan")  # refused here, not at sort time

    @property
    def key(self) -> tuple:
        return (type(self), self.threads, self.pass_threads, self.items, self.counter.key,
                self.scan.key)

    def __repr__(self) -> str:
        return (f"RadixSort(threads={self.pass_threads}, items={self.items}, "
                f"histogram={self.counter!r}, scan={self.scan!r})")

    def fits(self, n: int) -> bool:
        return True

    def tile_shape(self, key_bytes: int, index_bytes: int, dtype=None,
                   n: int = 0) -> tuple[int, int]:
        """``(threads, keys a thread)`` of a pass over rows of ``n`` ``key_bytes``-byte
        keys carrying ``index_bytes``-byte indices (0: none), the keys of ``dtype``
        (None: floats' rule): each as given, else from :data:`TILE_SHAPES` or, for
        4-byte integer keys sorted, :data:`INTEGER_TILE` (the simulator's: the
        strategy's threads, ``runtime.device.simulator_items(n)`` keys), keys fewer
        where the tile does not fit in shared memory."""
        if SIMULATOR:
            threads, most = self.threads, simulator_items(n)
        elif key_bytes == 4 and not index_bytes and dtype is not None and \
                np.dtype(dtype).kind in "iu":
            threads, most = INTEGER_TILE
        else:
            threads, most = TILE_SHAPES[(key_bytes > 4, index_bytes > 0)]
        threads = self.pass_threads or threads
        if self.items is not None:
            self._check_fits(threads, key_bytes, index_bytes)
            return threads, self.items
        return threads, next(k for k in (most, 12, 8, 4, 2, 1) if k <= most and
                             _pass_shared(threads, k, key_bytes, index_bytes)
                             <= shared_capacity()[0])

    def _check_fits(self, threads: int, key_bytes: int, index_bytes: int) -> None:
        """Raise ValueError where a tile of the given ``items`` overflows shared memory."""
        need = _pass_shared(threads, self.items, key_bytes, index_bytes)
        if need > shared_capacity()[0]:
            carried = f" and {index_bytes}-byte indices" if index_bytes else ""
            raise ValueError(f"items={self.items} with {threads} threads needs "
                             f"{need} bytes of shared memory for {key_bytes}-byte "
                             f"keys{carried}, more than the {shared_capacity()[0]} "
                             f"a block may have; use fewer")

    def sort(self, job) -> None:
        ws, stream, rows, n = job.workspace, job.stream, job.rows, job.n
        index_dtype = np.dtype(np.int32 if n < 2**31 else np.int64)
        index_bytes = index_dtype.itemsize if job.indices else 0
        threads, items = self.tile_shape(job.key_dtype.itemsize, index_bytes, job.dtype,
                                         n)
        tiles = ceil_div(n, threads * items)
        passes = 8 * job.key_dtype.itemsize // DIGIT_BITS
        size = rows * n
        word = np.dtype(np.uint64 if n >= WIDE_ROWS else np.uint32)
        histogram, k = self._kernels(job, (threads, items), passes, index_dtype, word)
        tile_bytes = _tile_shared(threads, items, job.key_dtype.itemsize, index_bytes)

        counts = zeros(ws, passes * rows * RADIX, np.int64)
        # per pass: each tile's 256 look-back words, then the pass's tile counter;
        # the histogram zeroes them (one launch fewer: host time of a 2^24 sort)
        stride = rows * tiles * RADIX + 1
        words = ws.empty(passes * stride, word)
        chunks = _histogram_chunks(n, rows, self.threads)
        lanes = _histogram_lanes(job.x, rows, n)
        launch(histogram(lanes), rows * chunks, self.threads, stream, job.x, n, chunks,
               ceil_div(ceil_div(n, chunks), lanes) * lanes, counts, words)
        offsets = ws.empty(passes * rows * RADIX, np.int64)
        job.exclusive_sum(counts, offsets, self.scan)

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
            launch(k(first, last), rows * tiles, threads, stream, src_k, src_i, dst_k,
                   dst_i, n, tiles, p * DIGIT_BITS, offsets, p * rows * RADIX, p * size,
                   words, p * stride, shared=tile_bytes)
            src_k, src_i = dst_k, dst_i

    def _kernels(self, job, tile: tuple[int, int], passes: int, index_dtype, word):
        key = ("radix_sort", self.key, tile, index_dtype.str, word.str, job.key)
        return cached(key, lambda: _build(self.threads, tile, passes, self.counter, job,
                                          index_dtype, word))


def _tile_shared(threads: int, items: int, key_bytes: int, index_bytes: int) -> int:
    """Dynamic shared bytes of a pass: the tile's sorted keys, then their indices
    (``index_bytes`` 0 for none), then their digits."""
    return threads * items * (key_bytes + index_bytes + 1)


def _pass_shared(threads: int, items: int, key_bytes: int, index_bytes: int) -> int:
    """Shared bytes of a pass: the tile (:func:`_tile_shared`), per-warp digit counts
    and lane masks, and per-digit counts, starts and global bases."""
    return (_tile_shared(threads, items, key_bytes, index_bytes)
            + (threads // WARP) * RADIX * 8 + RADIX * 16 + 8)


def _histogram_chunks(n: int, rows: int, threads: int) -> int:
    """Blocks per row of the histogram: enough to fill the device, each counting at
    least ``HISTOGRAM_ITEMS`` keys a thread and at most 2**31 (its uint32 counters)."""
    most = max(1, ceil_div(n, threads * HISTOGRAM_ITEMS))
    want = ceil_div(max_resident_blocks(threads), rows)
    return max(ceil_div(n, 2**31), min(most, want))


def _histogram_lanes(x, rows: int, n: int) -> int:
    """Keys a load of the histogram reads: a 16-byte vector's where every row of the
    1-D ``x`` (``rows`` of ``n``) starts 16-byte aligned, else 1."""
    lanes = vector_lanes(x.dtype) or 1
    aligned = address(x) % VECTOR_BYTES == 0 and (rows == 1 or n % lanes == 0)
    return lanes if aligned else 1


def _build(threads, tile, passes, counter, job, index_dtype, word):
    """``(histogram_kernel, pass_kernel)``; ``histogram_kernel(lanes)`` the digit
    histogram of ``threads`` loading ``lanes`` keys at once, ``pass_kernel(first,
    last)`` the digit pass over tiles of ``tile = (threads, items)`` for a pass's place
    (an argsort's first makes indices, its last writes only them)."""
    to_key = job.to_key()
    if not counter.fits(passes * RADIX):  # 64-bit keys' 2048 bins per warp: per block
        counter = resolve("histogram", "shared_privatized", threads=threads)
    digit = _digit(to_key)
    built, histograms = {}, {}

    def histogram_kernel(lanes: int):
        if lanes not in histograms:
            histograms[lanes] = _build_histogram(threads, counter, passes, to_key,
                                                 job.key_dtype, lanes)
        return histograms[lanes]

    def pass_kernel(first: bool, last: bool):
        place = (first, last) if job.indices else (False, False)
        if place not in built:
            built[place] = _build_pass(*tile, digit, job.key_dtype, index_dtype,
                                       word, first=place[0], carry=job.indices,
                                       write_keys=not (job.indices and place[1]))
        return built[place]

    return histogram_kernel, pass_kernel


def _digit(to_key):
    """Device function ``digit(bits, shift)``: 8 bits of the key of an input's bits."""
    mask = uint64(RADIX - 1)

    @cuda.jit(device=True)
    def digit(bits, shift):
        return int32((uint64(to_key(bits)) >> uint64(shift)) & mask)

    return digit


def _build_histogram(threads: int, counter: HistogramStrategy, passes: int, to_key,
                     key_dtype, lanes: int):
    """The kernel of step 1 (module doc): ``lanes`` keys a load (a 16-byte vector, its
    rows aligned: :func:`_histogram_lanes`), or one."""
    bins = passes * RADIX
    kt = from_dtype(key_dtype)
    clear, count, total = counter.build_counter(bins)
    slots = counter.shared_slots(bins)
    mask = uint64(RADIX - 1)

    @cuda.jit(device=True)
    def count_key(sh, counts, bits):  # every pass's digit of one key
        key = uint64(to_key(bits))
        for p in range(passes):
            count(sh, counts, p * RADIX + int32((key >> uint64(p * DIGIT_BITS)) & mask))

    count_keys = _key_counter(count_key, kt, threads, lanes)

    @cuda.jit
    def digit_histogram(x, n, chunks, chunk, counts, words):
        """counts[pass][row][digit] += the block's keys' digits (chunk of one row, a
        multiple of ``lanes``); the grid also zeroes the passes' look-back words."""
        sh = cuda.shared.array(slots, uint32)
        clear(sh)
        w = uint64(cuda.grid(1))
        while w < words.shape[0]:
            words[w] = 0
            w += uint64(cuda.gridsize(1))
        row = cuda.blockIdx.x // chunks
        rows = cuda.gridDim.x // chunks
        lo = (cuda.blockIdx.x - row * chunks) * int64(chunk)
        end = min(n, lo + chunk)
        base = row * int64(n)
        count_keys(sh, counts, x, base, lo, end)
        cuda.syncthreads()
        b = cuda.threadIdx.x
        while b < bins:  # one atomic per non-empty bin
            c = total(sh, b)
            if c != 0:
                p = b // RADIX
                cuda.atomic.add(counts, (p * rows + row) * RADIX + b - p * RADIX, int64(c))
            b += threads

    return digit_histogram


def _key_counter(count_key, kt, threads: int, lanes: int):
    """Device function ``count_keys(sh, counts, x, base, lo, end)``: ``count_key`` of
    keys ``lo .. end-1`` of the row at ``base`` in ``x`` (of Numba type ``kt``), the
    block's ``threads`` striding over them with several loads in flight: by 16-byte
    vectors of ``lanes`` keys when ``lanes > 1`` (``base + lo`` a multiple of it), four
    a thread in whole rounds unchecked, then the last vectors and the keys past them;
    else ``HISTOGRAM_LOADS`` single keys, each checked."""
    if lanes == 1:
        loads = HISTOGRAM_LOADS

        @cuda.jit(device=True)
        def count_keys(sh, counts, x, base, lo, end):
            held = cuda.local.array(loads, kt)
            j = lo + cuda.threadIdx.x
            while j < end:
                for u in range(loads):
                    if j + u * threads < end:
                        held[u] = x[uint64(base + j + u * threads)]
                for u in range(loads):
                    if j + u * threads < end:
                        count_key(sh, counts, held[u])
                j += loads * threads

        return count_keys
    vload = vector_loader(lanes)
    count_lanes = _lane_counter(count_key, 0, lanes)

    @cuda.jit(device=True)
    def count_keys(sh, counts, x, base, lo, end):
        first = (base + lo) // lanes  # vector index of key lo
        whole = max(end - lo, 0) // lanes  # (a last block may start past the row's end)
        v = int64(cuda.threadIdx.x)
        while v + 3 * threads < whole:  # four vectors in flight, no checks
            e0 = vload(x, first + v)
            e1 = vload(x, first + v + threads)
            e2 = vload(x, first + v + 2 * threads)
            e3 = vload(x, first + v + 3 * threads)
            count_lanes(sh, counts, e0)
            count_lanes(sh, counts, e1)
            count_lanes(sh, counts, e2)
            count_lanes(sh, counts, e3)
            v += 4 * threads
        while v < whole:
            count_lanes(sh, counts, vload(x, first + v))
            v += threads
        j = lo + whole * lanes + cuda.threadIdx.x  # fewer than lanes keys left
        if j < end:
            count_key(sh, counts, x[uint64(base + j)])

    return count_keys


def _lane_counter(count_key, first: int, count: int):
    """Device function ``count_lanes(sh, counts, v)``: ``count_key`` of lanes ``first ..
    first+count-1`` of the vector ``v``, each index a compile-time constant (the tuple
    stays in registers; ``vector.lane_folder`` does the same)."""
    if count == 1:

        @cuda.jit(device=True)
        def count_lanes(sh, counts, v):
            count_key(sh, counts, v[first])

        return count_lanes
    low = _lane_counter(count_key, first, count // 2)
    high = _lane_counter(count_key, first + count // 2, count - count // 2)

    @cuda.jit(device=True)
    def count_lanes(sh, counts, v):
        low(sh, counts, v)
        high(sh, counts, v)

    return count_lanes


def _build_pass(threads, items, digit, key_dtype, index_dtype, word, first: bool,
                carry: bool, write_keys: bool):
    """The kernel of one digit pass (module doc, step 3).

    ``first``: indices are the keys' positions (read none); ``carry``: move indices
    beside the keys (argsort); ``write_keys``: write the keys (not an argsort's last
    pass, which writes only indices).
    """
    tile, warps = threads * items, threads // WARP
    kt, it, wt = from_dtype(key_dtype), from_dtype(index_dtype), from_dtype(word)
    # the tile in dynamic shared memory (past 48 KiB for large tiles): keys, then
    # indices, then digits; each part starts at a multiple of its element size
    index_bytes = index_dtype.itemsize if carry else 0
    index_at = uint32(tile * key_dtype.itemsize // index_dtype.itemsize)
    digit_at = uint32(tile * (key_dtype.itemsize + index_bytes))
    shift = 62 if word.itemsize == 8 else 30
    value = wt((1 << shift) - 1)
    aggregate, prefix = wt(STATUS_A << shift), wt(STATUS_P << shift)
    per_lane = RADIX // WARP
    last_digit = int32(RADIX - 1)
    look_back = _look_back(wt, shift, value)

    @_pass_jit(threads, _pass_shared(threads, items, key_dtype.itemsize, index_bytes),
               key_dtype.itemsize, carry)
    def onesweep_pass(src_k, src_i, dst_k, dst_i, n, tiles, shift_bits, offsets, at_offsets,
                      pass_base, words, at):
        # one buffer, three views; an offset added at each access (not a slice) folds
        # into the shared-memory address
        sorted_k = cuda.shared.array(0, kt)
        sorted_i = cuda.shared.array(0, it)  # from index_at
        sorted_d = cuda.shared.array(0, uint8)  # from digit_at: each sorted key's digit
        # each warp's count of each digit, then where its first key of the digit goes
        in_warp = cuda.shared.array((warps, RADIX), int32)
        counts = cuda.shared.array(RADIX, int32)
        firsts = cuda.shared.array(RADIX, int32)  # the tile's first key of each digit
        bases = cuda.shared.array(RADIX, int64)
        tile_id = cuda.shared.array(1, int32)
        # each warp's lanes holding each digit, while the warp ranks one key a lane
        masks = cuda.shared.array((warps, RADIX), uint32)
        tid = cuda.threadIdx.x
        lane, warp = tid % WARP, tid // WARP
        if tid == 0:  # tiles in the order blocks start: every tile waited for is running
            tile_id[0] = int32(cuda.atomic.add(words, at + cuda.gridDim.x * RADIX, wt(1)))
        for d in range(tid, RADIX, threads):
            for w in range(warps):
                in_warp[w, d] = 0
            for w in range(warps):
                masks[w, d] = uint32(0)
        cuda.syncthreads()
        g = int64(tile_id[0])
        row = g // tiles
        t = g - row * tiles
        base = row * n
        held = min(int64(tile), n - t * tile)  # keys of the row in this tile
        keys = cuda.local.array(items, kt)
        idx = cuda.local.array(items, it)
        seg = t * tile + warp * (WARP * items) + lane  # warp-striped: coalesced loads
        ahead = n - seg  # keys k with k * WARP < ahead are in the row
        for k in range(items):  # every load in flight before the first barrier below
            j = seg + k * WARP
            keys[k] = src_k[uint64(base + j)] if k * WARP < ahead else kt(0)
            if carry:
                idx[k] = it(j) if first else (src_i[uint64(base + j)] if k * WARP < ahead
                                              else it(0))
        for k in range(items):  # (a) count the tile's digits, each warp its own
            dig = digit(keys[k], shift_bits)
            if k * WARP >= ahead:  # past the row's end: the last digit, ranked last
                dig = last_digit
            cuda.atomic.add(in_warp, (warp, dig), 1)
        cuda.syncthreads()
        for d in range(tid, RADIX, threads):  # publish the counts now, before ranking
            run = int32(0)
            for w in range(warps):
                c = in_warp[w, d]
                in_warp[w, d] = run
                run += c
            if d == RADIX - 1:
                run -= int32(tile - held)  # keys past the row's end are not counted
            counts[d] = run
            words[uint64(at + g * RADIX + d)] = (prefix if t == 0 else aggregate) | wt(run)
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
        for d in range(tid, RADIX, threads):  # where each warp's first key of d goes
            for w in range(warps):
                in_warp[w, d] += firsts[d]
        cuda.syncthreads()
        below = cuda.lanemask_lt()
        bit = uint32(1) << uint32(lane)
        for k in range(items):  # (b) rank: each key straight to its place in the tile
            dig = digit(keys[k], shift_bits)
            if k * WARP >= ahead:
                dig = last_digit
            # the warp's lanes holding dig: each sets its bit in the digit's mask
            cuda.atomic.or_(masks, (warp, dig), bit)
            cuda.syncwarp()
            peers = masks[warp, dig]
            rank = cuda.popc(peers & below)
            claimed = int32(0)
            if rank == 0:  # the lowest lane of the digit claims its peers' places
                claimed = cuda.atomic.add(in_warp, (warp, dig), cuda.popc(peers))
            pos = uint32(cuda.shfl_sync(FULL_MASK, claimed, cuda.ffs(peers) - 1) + rank)
            if rank == 0:  # every lane has read its mask (the shuffle): clear it
                masks[warp, dig] = uint32(0)
            cuda.syncwarp()
            sorted_k[pos] = keys[k]
            sorted_d[digit_at + pos] = uint8(dig)
            if carry:
                sorted_i[index_at + pos] = idx[k]
        for d in range(tid, RADIX, threads):  # (c) look back, publish the prefix
            excl = int64(0)
            if t > 0:
                excl = look_back(words, at, g, g - t, d)
                words[uint64(at + g * RADIX + d)] = prefix | wt(excl + counts[d])
            bases[d] = offsets[at_offsets + row * RADIX + d] - pass_base + excl - firsts[d]
        cuda.syncthreads()
        i = tid
        while i < held:  # (d) runs of equal digits, written in order
            dst = uint64(bases[sorted_d[digit_at + i]] + i)
            if write_keys:
                dst_k[dst] = sorted_k[i]
            if carry:
                dst_i[dst] = sorted_i[index_at + i]
            i += threads

    return onesweep_pass


def _pass_jit(threads: int, shared: int, key_bytes: int, carry: bool):
    """``cuda.jit`` for a pass with launch bounds asking ptxas for 3 blocks a
    multiprocessor (80 registers at 256 threads) for keys of 4 bytes or fewer, else 2;
    fewer where ``shared`` bytes a block leave room for fewer.

    Left alone, ptxas gives a pass 113-150 registers, so 1 or 2 blocks of 256 threads
    share a multiprocessor, too few to hide the ranking's and the look-back's
    latencies (bench/NOTES.md, H200: the 2^26 float64 sort takes 9.7 ms with 2 blocks
    a multiprocessor, 10.3 with 3, 15.7 unbounded).
    """
    if SIMULATOR:
        return cuda.jit
    want = 3 if key_bytes <= 4 and not carry else 2
    fit = shared_capacity()[1] // (shared + 1024)  # the driver keeps 1 KiB a block
    # never below 64 registers a thread (larger blocks than 256 threads)
    return cuda.jit(launch_bounds=(threads, max(1, min(want, fit,
                                                       65536 // (threads * 64)))))


def _look_back(wt, shift: int, value):
    """Device function ``look_back(words, at, g, first, d)``: the keys of digit ``d`` in
    the row's tiles ``first .. g-1`` (module doc, 3c).

    ``WINDOW`` earlier tiles' words are read at once (relaxed loads from L2,
    ``numbakern/runtime/relaxed.py``), then summed nearest first down to the first inclusive
    prefix; at a word not yet published, the next window starts from it. Tile ``first``
    starts its row and publishes a prefix at once, so the walk ends there at the
    latest (reads past it are clamped to it).
    """
    done = wt(STATUS_P)
    simulated = SIMULATOR
    window = WINDOW

    @cuda.jit(device=True)
    def look_back(words, at, g, first, d):
        got = cuda.local.array(window, wt)
        excl = int64(0)
        top = g  # tiles first .. top-1 are still to be summed
        while True:
            for q in range(window):  # independent reads: in flight together
                j = max(top - 1 - q, first)
                got[q] = load_relaxed(words, uint64(at + j * RADIX + d))
            for q in range(window):
                w = got[q]
                if w >> wt(shift) == wt(0):  # not yet published: read again from here
                    if simulated:  # blocks run one at a time there: it never will be
                        raise RuntimeError("radix sort: a tile looks back at one not yet run")
                    break
                excl += int64(w & value)
                if w >> wt(shift) == done:
                    return excl
                top -= 1

    return look_back
