"""LSD radix sort across the device: a histogram, a scan and a stable scatter per digit.

The lesson
----------
A least-significant-digit radix sort orders ``w``-bit keys (``numbakern/sort_keys.py``
turns any dtype into unsigned keys in NumPy's order) by sorting them ``w / 8``
times, on 8-bit digits from the lowest to the highest, each pass **stable**: after
the pass on digit ``p``, keys are ordered by digits ``p..0``, equal ones still in
input order. 32-bit keys take 4 passes, 64-bit keys 8, bool and int8 one.

Each row of ``n`` keys is cut into tiles of ``threads * items`` consecutive
elements, one block per tile (``row = block // tiles``). A pass is three steps:

1. **Count** (``count_kernel``). Each block counts the 256 digits of its tile with
   a histogram strategy's block counters (``strategies/warp_privatized.py`` by
   default, or ``shared_privatized.py``; ``numbakern/counting.py``), and writes them
   to ``counts[row][digit][tile]``: laid out digit-major, tile-minor.
2. **Scan** (numbakern's own ``cumsum(exclusive=True)``, any scan strategy). The
   exclusive prefix of ``counts`` in that layout is, for each (row, digit, tile),
   the number of keys that go before that tile's keys of that digit: every key of
   earlier rows, of smaller digits in this row, and of this digit in earlier tiles.
   So ``offsets[row][digit][tile]`` is where the tile's first key of the digit goes.
3. **Scatter** (``scatter_kernel``). Each block walks its tile in rounds of
   ``threads`` consecutive keys, in order. In a round, a key's destination is its
   digit's running offset in the tile, plus the keys of the same digit in earlier
   warps of the round, plus those in earlier lanes of its own warp. The last comes
   from one ``match_any_sync`` (the lanes holding the same digit) and
   ``popc(peers & lanemask_lt())``; the lowest such lane writes the warp's count of
   the digit to shared memory, from which later warps add theirs. After the round,
   every digit's running offset grows by the round's count. Keys and their row
   indices move together to the other buffer (ping-pong).

Every step keeps input order among equal digits, so the sort is stable, and the
indices carried along are the argsort; a sort gathers the input's values through them.
Traffic per pass: the keys read twice, keys and indices written once; three launches
plus the scan's.

What this leaves out of CUB's ``DeviceRadixSort`` (Merrill and Grimshaw, "High
Performance and Scalable Radix Sorting", 2011; Adinets and Merrill's Onesweep, 2022):
ranking a tile in shared memory first so the scatter writes whole runs (here the
writes of one digit within a round are consecutive, but a round spreads over up to
256 places), skipping passes whose digit is the same for every key, and the single
upfront histogram of all digits.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int32, int64, uint32, uint64

from numbakern import kernels
from numbakern.counting import HistogramStrategy
from numbakern.elementwise import zeros
from numbakern.launch import SIMULATOR, launch
from numbakern.strategy import Immutable, _check_threads, ceil_div

from .shared_privatized import SharedPrivatized
from .warp_privatized import WarpPrivatized

#: bits per digit, and digits per pass
DIGIT_BITS = 8
RADIX = 1 << DIGIT_BITS
WARP = 32
FULL_MASK = 0xFFFFFFFF


class RadixSort(Immutable):
    """Stable LSD radix sort on 8-bit digits, any row length, rows of a batch together.

    Args:
        threads: threads per block.
        items: keys per thread in a tile (default 8 on a GPU, 2 under the simulator).
        histogram: how a block counts its digits: ``"warp_privatized"`` (default) or
            ``"shared_privatized"``, or such a strategy object.
        scan: the scan strategy of the offsets (any name ``cumsum`` takes).
    """

    name = "radix"
    DEFAULT_THREADS = 64 if SIMULATOR else 256
    DEFAULT_ITEMS = 2 if SIMULATOR else 8

    def __init__(self, threads: int | None = None, items: int | None = None,
                 histogram="warp_privatized", scan=None):
        self.threads = _check_threads(self.DEFAULT_THREADS if threads is None else threads)
        items = self.DEFAULT_ITEMS if items is None else items
        if not isinstance(items, int) or isinstance(items, bool) or items < 1:
            raise ValueError(f"items must be a positive int, got {items!r}")
        self.items = items
        self.counter = _counter(histogram, self.threads)
        self.scan = scan

    @property
    def key(self) -> tuple:
        return (self.name, self.threads, self.items, self.counter.key, repr(self.scan))

    def __repr__(self) -> str:
        return (f"RadixSort(threads={self.threads}, items={self.items}, "
                f"histogram={self.counter.name!r}, scan={self.scan!r})")

    def fits(self, n: int) -> bool:
        return True

    def sort(self, job) -> None:
        from numbakern.scans import cumsum  # scans import the strategies package

        ws, stream = job.workspace, job.stream
        tile = self.threads * self.items
        tiles = ceil_div(job.n, tile)
        blocks = job.rows * tiles
        total = job.rows * job.n
        index_dtype = np.dtype(np.int32 if job.n < 2**31 else np.int64)
        keys = [ws.empty(total, job.key_dtype), ws.empty(total, job.key_dtype)]
        idx = [ws.empty(total, index_dtype), ws.empty(total, index_dtype)]
        counts = zeros(ws, job.rows * RADIX * tiles, np.int32)
        offsets = ws.empty(job.rows * RADIX * tiles, np.int64)
        k = self._kernels(job, index_dtype)
        launch(k["init"], blocks, self.threads, stream, job.x, keys[0], idx[0], job.n)
        passes = 8 * job.key_dtype.itemsize // DIGIT_BITS
        for p in range(passes):
            src, dst = p % 2, 1 - p % 2
            shift = p * DIGIT_BITS
            launch(k["count"], blocks, self.threads, stream, keys[src], job.n, tiles, shift,
                   counts)
            cumsum(counts, exclusive=True, out=offsets, strategy=self.scan, stream=stream)
            launch(k["scatter"], blocks, self.threads, stream, keys[src], idx[src], keys[dst],
                   idx[dst], job.n, tiles, shift, offsets)
        launch(k["emit"], blocks, self.threads, stream, job.x, idx[passes % 2], job.out, job.n)

    def _kernels(self, job, index_dtype: np.dtype) -> dict:
        key = ("radix_sort", self.key, index_dtype.str, job.key)
        return kernels.cached(key, lambda: _build(self.threads, self.items, self.counter,
                                                  job.to_key(), index_dtype, job.emitter()))


def _counter(histogram, threads: int) -> HistogramStrategy:
    """The block digit counter: a privatized histogram strategy (global atomics would
    merge the blocks' counts, which the scan needs apart)."""
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


def _build(threads: int, items: int, counter: HistogramStrategy, to_key,
           index_dtype: np.dtype, emit) -> dict:
    tile = threads * items
    warps = threads // WARP
    it = from_dtype(index_dtype)
    clear, count, total = counter.build_counter(RADIX)
    count_slots = counter.shared_slots(RADIX)
    digit_mask = uint64(RADIX - 1)

    @cuda.jit(device=True)
    def digit(key, shift):
        return int32((uint64(key) >> uint64(shift)) & digit_mask)

    @cuda.jit
    def init_kernel(x, keys, idx, n):
        """Keys from the input's bits; each key's index within its row."""
        i = cuda.grid(1)
        while i < keys.size:
            keys[i] = to_key(x[i])
            idx[i] = it(i % n)
            i += cuda.gridsize(1)

    @cuda.jit
    def count_kernel(keys, n, tiles, shift, counts):
        """counts[row][digit][tile]: the digits of one tile."""
        sh = cuda.shared.array(count_slots, uint32)
        clear(sh)
        row, t = cuda.blockIdx.x // tiles, cuda.blockIdx.x % tiles
        base, start = row * n, t * tile
        for k in range(items):
            j = start + k * threads + cuda.threadIdx.x
            if j < n:
                count(sh, counts, digit(keys[base + j], shift))
        cuda.syncthreads()
        d = cuda.threadIdx.x
        while d < RADIX:
            counts[(row * RADIX + d) * tiles + t] = int32(total(sh, d))
            d += threads

    @cuda.jit
    def scatter_kernel(keys, idx, keys_out, idx_out, n, tiles, shift, offsets):
        """Each key of the tile to its place, in input order within its digit."""
        running = cuda.shared.array(RADIX, int64)  # where the digit's next key goes
        in_warp = cuda.shared.array((warps, RADIX), int32)  # this round's counts
        tid = cuda.threadIdx.x
        warp = tid // WARP
        row, t = cuda.blockIdx.x // tiles, cuda.blockIdx.x % tiles
        base, start = row * n, t * tile
        d = tid
        while d < RADIX:
            running[d] = offsets[(row * RADIX + d) * tiles + t]
            for w in range(warps):
                in_warp[w, d] = 0
            d += threads
        cuda.syncthreads()
        below = cuda.lanemask_lt()
        for k in range(items):
            j = start + k * threads + tid
            valid = j < n
            key = keys[base + j] if valid else keys[base]
            dig = digit(key, shift) if valid else int32(RADIX)  # RADIX: no digit
            peers = uint32(cuda.match_any_sync(FULL_MASK, dig))  # popc of a uint32
            rank = cuda.popc(peers & below)
            if valid and rank == 0:  # the lowest lane of each digit in the warp
                in_warp[warp, dig] = cuda.popc(peers)
            cuda.syncthreads()
            if valid:
                pos = running[dig] + rank
                for w in range(warp):
                    pos += in_warp[w, dig]
                keys_out[pos] = key
                idx_out[pos] = idx[base + j]
            cuda.syncthreads()
            d = tid
            while d < RADIX:  # advance each digit past this round's keys
                s = 0
                for w in range(warps):
                    s += in_warp[w, d]
                    in_warp[w, d] = 0
                running[d] += s
                d += threads
            cuda.syncthreads()

    @cuda.jit
    def emit_kernel(x, idx, out, n):
        i = cuda.grid(1)
        while i < idx.size:
            row = i // n
            emit(x, out, row * n, i - row * n, idx[i])
            i += cuda.gridsize(1)

    return {"init": init_kernel, "count": count_kernel, "scatter": scatter_kernel,
            "emit": emit_kernel}
