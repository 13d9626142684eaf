"""Radix block select: one block per row finds the k-th key digit by digit in shared memory.

The lesson
----------
``radix_select`` spreads each digit pass over many blocks and the whole grid, so each
pass is two launches and a full read of the input; ``bitonic_select`` gives a row one
block but pays two barriers for every ``threads * items`` elements. When there are
many rows (a language model's sampler: 8192 rows of 50 257 logits, ``k = 50``) one
block can do the *whole* radix select of its row with no launch and almost no barrier
between elements, as ``torch.topk``'s per-slice ``gatherTopK`` does (the digit scheme
is Alabi et al., "Fast k-selection algorithms for graphics processing units", 2012).
The candidates kept in a buffer once they are few follow RAFT's
``radix_topk_one_block_kernel`` (AIR Top-K: Zhang et al., "Parallel Top-K Algorithms
on GPU: A Comprehensive Study and New Methods", SC 2023); 11-bit digits for 32-bit
keys (11 + 11 + 10) are also what TensorRT-LLM's indexer top-k uses.

Keys (``numbakern/kernels/sort_keys.py``) are unsigned integers whose ascending order is
the wanted order (for the largest the key is complemented, so NaN, larger than every
number as in ``torch.topk``, has the smallest key): the answer is the ``k`` smallest
keys, ties going to the lower index.

1. **Histogram the top digit** (11 bits: sign, exponent and two mantissa bits of a
   float32, 2048 counters in shared memory). Each thread reads ``items`` keys a round
   (loaded first, so they are in flight together), and adds one to its key's counter
   with a shared-memory atomic (the lanes of a warp that hit one counter are merged
   by the hardware): no barrier inside the pass.
2. **Find the bucket** of the ``k``-th key: each thread sums its run of counters, a
   block scan (warp shuffles, then the warps' totals) gives every run's start, and the
   one thread whose run crosses ``k`` walks it to the bucket ``d``. Keys of smaller
   digits all win (``below`` of them), keys of larger digits all lose, ``cnt`` keys of
   digit ``d`` are still open, of which ``need = k - below`` win.
3. **Refine** while ``below + cnt`` exceeds the candidate buffer (``capacity`` pairs):
   another pass over the row histograms the next 11 bits of the keys whose decided
   digits equal the prefix. On random data one pass is enough: 50 257 normal logits
   leave a few hundred candidates for ``k = 50``.
4. **Gather**: one more pass over the row copies every key at or below the prefix, as a
   ``(key, index)`` pair, to shared memory (a shared atomic gives each its slot: about
   ``k + cnt`` of the row's keys do so, the rest only compare). The row was read a
   moment ago, so much of it is still in the L2 cache.
5. **Sort** the pairs by ``(key, index)`` with a bitonic network (Batcher, 1968;
   ``strategies/bitonic_sort.py``), padded to a power of two, and write the first
   ``k``: the values read back from the input by index (their exact bits), in torch's
   order, ties by the lower index. Pairs are distinct, so the order is one order.

One case is left: when every bit is decided and the candidates (all of one key) still
overflow the buffer, a row of many equal values. Then the ``need`` of lowest index
win, so the gather walks the row in index order, a round of ``threads`` keys at a time,
ranking the equal keys with a block scan (two barriers a round) and keeping the first
``need``: slow for such rows only, and exact.

Cost: two reads of the row (one histogram pass and the gather) for most data, one more
per refinement; no global memory besides the input and the ``k`` outputs; one launch.
A row is one block, so a single long row (``2**28`` keys) is ``radix_select``'s case.
"""

from __future__ import annotations

from numba import cuda, from_dtype, int32, int64, uint32, uint64

from numbakern.kernels.sort_keys import max_key
from numbakern.runtime.cache import cached
from numbakern.runtime.device import FULL_MASK, SHARED_LIMIT, SIMULATOR, WARP, ceil_div
from numbakern.runtime.launch import launch

from .protocols import (SelectStrategy, block_exclusive_scan, check_count, check_flag,
                        check_optional_count, check_threads, pair_sorter)

#: bits of a digit (at most; an 8-bit key is one digit of 8)
DIGIT = 11
#: the index of the padding: after every real index within a row
PAD_INDEX = (1 << 31) - 1
#: the longest row it takes: indices are int32 in shared memory, below the padding's
MAX_ROW = PAD_INDEX - 1


class RadixBlockSelect(SelectStrategy):
    """One block per row: an 11-bit radix select of the row with shared-memory
    counters, the candidates gathered into shared memory, then a bitonic sort of
    them by ``(key, index)``.

    RAFT's one-block radix top-k (AIR Top-K, Zhang et al., SC 2023) and
    ``torch.topk``'s per-slice radix select (Alabi et al., 2012), the winners sorted
    by Batcher's bitonic network.

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default: 512,
            32 under the simulator, and for rows shorter than ``512 * items`` a warp
            per ``32 * items`` keys, at least two warps: short rows leave no thread
            idle).
        items: keys each thread loads together in a round, 1 to 64 (default 8; 2
            under the simulator).
        capacity: the candidate buffer, in ``(key, int32 index)`` pairs, a power of two
            from 2 to 8192 (default 2048): refinement passes run until the keys at
            or below the threshold's bucket fit. ``k`` may be up to ``capacity``.
        aggregate: count a warp's keys of one bin with one atomic (``match_any_sync``
            finds the lanes of each bin; its lowest lane adds their number). Default
            False: one atomic add of 1 a key, which the hardware already merges
            across the lanes of a warp that hit one counter (``ATOMS.POPC.INC``,
            ``strategies/shared_privatized.py``), so this is an A/B switch for the
            benchmark more than an expected gain.

    Output rows are sorted whatever ``job.sorted`` asks. One launch, one block per
    row; reads each row twice on random data (the histogram and the gather).
    Rows of up to ``2**31 - 2`` keys.

    Raises:
        TypeError: ``threads``, ``items`` or ``capacity`` not an int; ``aggregate`` not
            a bool.
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; ``items`` not
            from 1 to 64; ``capacity`` not a power of two from 2 to 8192. At select
            time, ``k`` above ``capacity``, a row over ``2**31 - 2`` keys; counters
            and buffer over the shared memory a block has.
    """

    name = "radix_block_select"
    DEFAULT_THREADS = 32 if SIMULATOR else 512
    DEFAULT_ITEMS = 2 if SIMULATOR else 4  # H200, (8192, 50257): 2.35 ms, 3.17 at 8
    DEFAULT_CAPACITY = 2048

    def __init__(self, threads: int | None = None, items: int | None = None,
                 capacity: int | None = None, aggregate: bool = False):
        self.threads = check_threads(self.DEFAULT_THREADS if threads is None else threads)
        self.fixed = threads is not None
        self.items = check_optional_count(items, "items", 64) or self.DEFAULT_ITEMS
        capacity = self.DEFAULT_CAPACITY if capacity is None else check_count(capacity,
                                                                                "capacity")
        if capacity < 2 or capacity > 8192 or capacity & (capacity - 1):
            raise ValueError(f"capacity must be a power of two from 2 to 8192, "
                             f"got {capacity!r}")
        self.capacity = capacity
        self.max_k = capacity
        self.aggregate = check_flag(aggregate, "aggregate")

    @property
    def key(self) -> tuple:
        return (type(self), self.threads, self.fixed, self.items, self.capacity,
                self.aggregate)

    def __repr__(self) -> str:
        aggregate = ", aggregate=True" if self.aggregate else ""
        return (f"RadixBlockSelect(threads={self.threads}, items={self.items}, "
                f"capacity={self.capacity}{aggregate})")

    def fits(self, n: int, k: int) -> bool:
        return k <= self.capacity and n <= MAX_ROW

    def check(self, n: int, k: int) -> None:
        if n > MAX_ROW:
            raise ValueError(f"radix_block_select takes rows of at most {MAX_ROW} "
                             f"elements, got {n}; use strategy='radix_select'")
        super().check(n, k)

    def threads_for(self, n: int) -> int:
        """The threads a block of rows of ``n`` gets (see ``threads``)."""
        if self.fixed:
            return self.threads
        return min(self.threads, max(2 * WARP, WARP * ceil_div(n, WARP * self.items)))

    def select(self, job) -> None:
        self.check(job.n, job.k)
        threads = self.threads_for(job.n)
        width = 8 * job.key_dtype.itemsize
        digit = min(DIGIT, width)
        shared = (4 << digit) + self.capacity * (job.key_dtype.itemsize + 4) + \
            4 * (threads // WARP) + 32
        if shared > SHARED_LIMIT:
            raise ValueError(f"radix_block_select with capacity={self.capacity} needs "
                             f"{shared} bytes of shared memory for {job.dtype}, more than "
                             f"the {SHARED_LIMIT} a block has: use a smaller capacity")
        key = ("radix_block_select", threads, self.items, self.capacity, self.aggregate,
               job.key)
        kernel = cached(key, lambda: _build(threads, self.items, self.capacity, digit,
                                            width, self.aggregate, job.to_key(),
                                            job.key_dtype))
        launch(kernel, job.rows, threads, job.stream, job.x, job.n, job.k, job.values,
               job.indices)


def _build(threads: int, items: int, capacity: int, digit: int, width: int, aggregate: bool,
           to_key, key_dtype):
    """The kernel of the module doc, for one (threads, items, capacity, key rule)."""
    kt = from_dtype(key_dtype)
    pad = kt(max_key(key_dtype))
    pad_index = int32(PAD_INDEX)
    bins = 1 << digit
    per = -(-bins // threads)  # counters a thread sums in step 2
    warps = threads // WARP
    per_round = threads * items
    sort = pair_sorter(threads)

    if aggregate:
        @cuda.jit(device=True)
        def count(hist, bin_):
            """One shared atomic for each distinct bin of the warp, by its lowest lane
            (every lane of the warp calls this together)."""
            peers = uint32(cuda.match_any_sync(FULL_MASK, bin_))
            if bin_ >= 0 and (peers & uint32(cuda.lanemask_lt())) == uint32(0):
                cuda.atomic.add(hist, bin_, int32(cuda.popc(peers)))
    else:
        @cuda.jit(device=True)
        def count(hist, bin_):
            """One shared atomic a key."""
            if bin_ >= 0:
                cuda.atomic.add(hist, bin_, int32(1))

    exclusive_scan = block_exclusive_scan(threads, int32)

    @cuda.jit(device=True)
    def histogram(x, base, n, hist, keys, prefix, top, shift, tid):
        """Step 1 (and 3): count in ``hist`` the digit at ``shift`` of every key whose
        bits from ``top`` up equal ``prefix``'s (all keys while none are decided)."""
        mask = (uint64(1) << uint64(top - shift)) - uint64(1)
        c = tid
        while c < bins:
            hist[c] = 0
            c += threads
        cuda.syncthreads()
        start = 0
        while start < n:
            for r in range(items):  # the loads first, so they are in flight together
                i = start + r * threads + tid
                keys[r] = to_key(x[base + i]) if i < n else pad
            for r in range(items):
                i = start + r * threads + tid
                key = uint64(keys[r])
                bin_ = int32(-1)  # -1: not counted (past the row, or not a candidate)
                if i < n:
                    if top >= width or (key >> uint64(top)) == (prefix >> uint64(top)):
                        bin_ = int32((key >> uint64(shift)) & mask)
                count(hist, bin_)
            start += per_round
        cuda.syncthreads()

    @cuda.jit(device=True)
    def find_bucket(hist, totals, found, need, tid):
        """Step 2: the bin holding the ``need``-th counted key, into ``found`` (its
        digit, the keys of smaller digits, the keys in it): each thread sums its run
        of counters, a block scan places the runs, the one run that crosses ``need``
        is walked."""
        lo = tid * per
        hi = min(bins, lo + per)
        mine = int32(0)
        for j in range(lo, hi):
            mine += hist[j]
        earlier, _ = exclusive_scan(mine, totals, tid)
        if earlier < need and need <= earlier + mine:
            acc = int64(earlier)
            j = lo
            while acc + hist[j] < need:
                acc += hist[j]
                j += 1
            found[0] = j
            found[1] = acc
            found[2] = hist[j]
        cuda.syncthreads()

    @cuda.jit(device=True)
    def gather(x, base, n, keys, t, top, slot, ck, ci, tid):
        """Step 4: every pair whose key's bits from ``top`` up are at most ``t``, to
        the candidate buffer (a shared atomic gives each its slot)."""
        start = 0
        while start < n:
            for r in range(items):
                i = start + r * threads + tid
                keys[r] = to_key(x[base + i]) if i < n else pad
            for r in range(items):
                i = start + r * threads + tid
                if i < n and (uint64(keys[r]) >> uint64(top)) <= t:
                    at = cuda.atomic.add(slot, 0, int32(1))
                    ck[at] = keys[r]
                    ci[at] = i
            start += per_round

    @cuda.jit(device=True)
    def gather_ties(x, base, n, t, below, need, slot, ck, ci, totals, tid):
        """Step 4 where every bit is decided and the keys equal to ``t`` overflow the
        buffer: the keys below ``t``, then the first ``need`` equal ones by index
        (ranked by a block scan, a round of ``threads`` keys at a time)."""
        taken = int64(0)
        start = 0
        while start < n:  # the same rounds for every thread (the scan's barriers)
            i = start + tid
            one = to_key(x[base + i]) if i < n else pad
            equal = i < n and uint64(one) == t
            if i < n and uint64(one) < t:
                at = cuda.atomic.add(slot, 0, int32(1))
                ck[at] = one
                ci[at] = i
            rank, total = exclusive_scan(int32(1 if equal else 0), totals, tid)
            if equal and taken + rank < need:
                place = below + taken + rank
                ck[place] = one
                ci[place] = i
            taken += total
            start += threads

    @cuda.jit(device=True)
    def sort_and_store(x, base, k, m, ck, ci, values, indices, tid):
        """Step 5: the ``m`` pairs padded to a power of two, sorted by (key, index),
        and the first ``k`` written (values read back from the row by index)."""
        size = 1
        while size < m:
            size *= 2
        j = m + tid
        while j < size:
            ck[j] = pad
            ci[j] = pad_index
            j += threads
        cuda.syncthreads()
        sort(ck, ci, size, tid)
        out = int64(cuda.blockIdx.x) * k
        j = tid
        while j < k:
            src = int64(ci[j])
            values[out + j] = x[base + src]
            indices[out + j] = src
            j += threads

    @cuda.jit
    def radix_block_select(x, n, k, values, indices):
        hist = cuda.shared.array(bins, int32)
        ck = cuda.shared.array(capacity, kt)  # the candidates: keys and row indices
        ci = cuda.shared.array(capacity, int32)
        totals = cuda.shared.array(warps, int32)
        found = cuda.shared.array(3, int64)  # the bucket: digit, keys below it, keys in it
        slot = cuda.shared.array(1, int32)
        keys = cuda.local.array(items, kt)
        tid = cuda.threadIdx.x
        base = int64(cuda.blockIdx.x) * n
        prefix = uint64(0)  # the threshold's decided bits (those from bit `top` up)
        top = width
        need = int64(k)  # winners still wanted among the keys matching the prefix
        below = int64(0)  # winners already decided: keys below the prefix
        cnt = int64(n)  # keys matching the prefix
        while True:  # steps 1-3: one digit a pass
            shift = top - digit if top > digit else 0
            histogram(x, base, n, hist, keys, prefix, top, shift, tid)
            find_bucket(hist, totals, found, need, tid)
            prefix |= uint64(found[0]) << uint64(shift)
            need -= found[1]
            below += found[1]
            cnt = found[2]
            top = shift
            if below + cnt <= capacity or top == 0:
                break
            cuda.syncthreads()  # found is read before the next pass writes it
        if tid == 0:
            slot[0] = 0
        cuda.syncthreads()
        t = prefix >> uint64(top)
        if below + cnt <= capacity:
            m = below + cnt
            gather(x, base, n, keys, t, top, slot, ck, ci, tid)
        else:
            m = int64(k)
            gather_ties(x, base, n, t, below, need, slot, ck, ci, totals, tid)
        cuda.syncthreads()
        sort_and_store(x, base, k, m, ck, ci, values, indices, tid)

    return radix_block_select
