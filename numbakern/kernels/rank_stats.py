"""Order statistics found by rank: medians and quantiles without sorting the rows.

NumPy's quantile of a row of ``count`` elements needs at most two order statistics,
the ranks ``lo`` and ``hi`` its method names (``kernels/order_stats.py``'s
``locate``: ``floor`` and ``ceil`` of ``(count - 1) q`` for ``linear``). A radix
select (``strategies/radix_select.py``, ``RadixSelect.kth_keys``) finds the key of
a given rank in a few digit passes; these kernels put the ranks before it and read
its keys after it:

1. :func:`row_facts_into`: one read of the rows (floats only), each row's count of
   NaN (the NaN-skipping forms' ``count`` is ``n`` less it; a row holding one gives
   NaN otherwise) and of ``-0.0`` and ``+0.0`` (a zero's key holds no sign: the
   sign comes from the row, below).
2. :func:`ranks_into`: selection ``2 (r nq + j) + h`` is rank ``lo`` (``h = 0``)
   or ``hi`` (``h = 1``) of row ``r`` for quantile ``j``, 1-based in ``need``; a
   ``hi`` equal to its ``lo`` (the median of an odd count, a whole virtual index) is
   marked :data:`DUPLICATE`, one next to it (``lo + 1``) :data:`NEXT`, a row of no
   counted element :data:`EMPTY`: the select skips them all, so a slice's digit
   passes run for one rank a quantile, not two.
3. The select: each ``lo``'s key, and how many keys equal it and its rank among
   them. :func:`next_keys_into`: a ``NEXT`` whose ``lo`` is the last of its equal
   keys takes the smallest key above it (one read of the row, an atomic minimum);
   otherwise the rank after ``lo`` holds ``lo``'s key.
4. :func:`picks_into`: each key back to its value's bits (``sort_keys.from_key``),
   a duplicate (or a ``NEXT`` within ``lo``'s equal keys) from its ``lo``; a zero is
   ``-0.0`` where its row holds ``-0.0`` and no ``+0.0`` (where it holds both, which
   zero sits at a rank is the partition's choice in NumPy too: ``+0.0``); the last
   element is a NaN for the rows that give NaN.
5. :func:`picked_stats_into`: ``order_stats``' interpolation, warnings and NaN rules
   on the picked values.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int32, int64, uint64

from numbakern.kernels.elementwise import THREADS, grid_for
from numbakern.kernels.order_stats import LINEAR, MEDIAN, MIDPOINT, arithmetic, locator
from numbakern.kernels.sort_keys import bits_dtype, build_from_key, build_to_key, max_key
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import ceil_div, max_resident_blocks
from numbakern.runtime.launch import launch

#: ``done`` marks of a selection the select skips (0: a rank to find)
DUPLICATE, EMPTY, NEXT = 2, 3, 4
#: the slots of a row's facts: NaN, ``-0.0`` and ``+0.0`` counts
NAN, NEGATIVE_ZERO, POSITIVE_ZERO = range(3)
FACTS = 3


def row_facts_into(xbits, facts, rows: int, n: int, dtype, stream) -> None:
    """``facts[FACTS r + NAN]`` etc. += row ``r``'s counts of NaN, ``-0.0`` and
    ``+0.0`` (``xbits``: ``rows * n`` float elements' bits, 1-D; ``facts``: zeroed
    int64 of ``FACTS * rows``). Integers have none: do not call it for them."""
    dtype = np.dtype(dtype)
    kernel = cached(("row_facts", dtype.str, device_key()), lambda: _build_facts(dtype))
    chunks = max(1, min(ceil_div(n, THREADS * 16),
                        ceil_div(max_resident_blocks(THREADS), rows)))
    launch(kernel, rows * chunks, THREADS, stream, xbits, facts, n, chunks,
           ceil_div(n, chunks))


def _build_facts(dtype: np.dtype):
    finfo = np.finfo(dtype)
    width = 8 * dtype.itemsize
    sign = uint64(1 << (width - 1))
    magnitude = uint64((1 << (width - 1)) - 1)
    inf = uint64(((1 << finfo.nexp) - 1) << finfo.nmant)

    @cuda.jit
    def row_facts(x, facts, n, chunks, chunk):
        sh = cuda.shared.array(FACTS, int32)
        tid = cuda.threadIdx.x
        if tid < FACTS:
            sh[tid] = 0
        cuda.syncthreads()
        row = cuda.blockIdx.x // chunks
        lo = (cuda.blockIdx.x - row * chunks) * chunk
        hi = min(n, lo + chunk)
        base = int64(row) * n
        nans = 0
        negative = 0
        positive = 0
        i = lo + tid
        while i < hi:
            u = uint64(x[base + i])
            if (u & magnitude) > inf:
                nans += 1
            elif u == sign:
                negative += 1
            elif u == uint64(0):
                positive += 1
            i += cuda.blockDim.x
        if nans != 0:
            cuda.atomic.add(sh, NAN, int32(nans))
        if negative != 0:
            cuda.atomic.add(sh, NEGATIVE_ZERO, int32(negative))
        if positive != 0:
            cuda.atomic.add(sh, POSITIVE_ZERO, int32(positive))
        cuda.syncthreads()
        if tid < FACTS and sh[tid] != 0:
            cuda.atomic.add(facts, row * FACTS + tid, int64(sh[tid]))

    return row_facts


def ranks_into(facts, qs, need, done, rows: int, n: int, method: int, skip_nan: bool,
               q_dtype: str, stream) -> None:
    """Step 2: ``need`` (int64) and ``done`` (int32), ``2 * qs.size * rows`` each, of
    the selections the module doc lays out."""
    key = ("quantile_ranks", int(method), bool(skip_nan), str(q_dtype), device_key())
    kernel = cached(key, lambda: _build_ranks(int(method), bool(skip_nan), str(q_dtype)))
    total = int(qs.shape[0]) * rows
    launch(kernel, grid_for(total), THREADS, stream, facts, qs, need, done, rows, n)


def _build_ranks(method: int, skip_nan: bool, q_dtype: str):
    locate = locator(method, q_dtype)

    @cuda.jit
    def ranks(facts, qs, need, done, rows, n):
        nq = qs.shape[0]
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < int64(nq) * rows:  # i = r nq + j: the selections 2 i and 2 i + 1
            r = i // nq
            j = i - r * nq
            count = n - facts[r * FACTS + NAN] if skip_nan else n
            s = 2 * i
            if count > 0:
                lo, hi, _ = locate(qs[j], count)
                need[s] = lo + 1
                need[s + 1] = hi + 1
                done[s] = 0
                done[s + 1] = DUPLICATE if hi == lo else NEXT  # hi is lo + 1
            else:
                need[s] = 1
                need[s + 1] = 1
                done[s] = EMPTY
                done[s + 1] = EMPTY
            i += step

    return ranks


def next_keys_into(x, keys, done, rank, equal, rows: int, n: int, nq: int, dtype,
                   stream) -> None:
    """Step 3's second half: ``keys[s]`` of each :data:`NEXT` selection ``s`` whose
    ``lo`` (``s - 1``) is the last of its equal keys (``rank[s - 1] ==
    equal[s - 1]``): the smallest key of its row above ``lo``'s (``x``: the rows'
    bits)."""
    dtype = np.dtype(dtype)
    init, smallest = cached(("next_keys", dtype.str, device_key()),
                            lambda: _build_next(dtype))
    selections = 2 * nq * rows
    launch(init, grid_for(selections), THREADS, stream, keys, done, rank, equal,
           selections)
    chunks = max(1, min(ceil_div(n, THREADS * 16),
                        ceil_div(max_resident_blocks(THREADS), selections // 2)))
    launch(smallest, selections // 2 * chunks, THREADS, stream, x, keys, done, rank, equal,
           n, nq, chunks, ceil_div(n, chunks))


def _build_next(dtype: np.dtype):
    to_key = build_to_key(dtype, False)
    top = uint64(max_key(dtype))

    @cuda.jit(device=True)
    def wanted(done, rank, equal, s):
        return done[s] == NEXT and rank[s - 1] >= equal[s - 1]

    @cuda.jit
    def init(keys, done, rank, equal, selections):
        s = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while s < selections:
            if s % 2 == 1 and wanted(done, rank, equal, s):
                keys[s] = top  # the minimum's start: no key is above the largest
            s += step

    @cuda.jit
    def smallest(x, keys, done, rank, equal, n, nq, chunks, chunk):
        sh = cuda.shared.array(1, uint64)
        pair = cuda.blockIdx.x // chunks
        s = 2 * pair + 1
        if not wanted(done, rank, equal, s):  # the whole block leaves
            return
        if cuda.threadIdx.x == 0:
            sh[0] = top
        cuda.syncthreads()
        after = uint64(keys[s - 1])
        best = top
        lo = (cuda.blockIdx.x - pair * chunks) * chunk
        hi = min(n, lo + chunk)
        base = int64(pair // nq) * n
        i = lo + cuda.threadIdx.x
        while i < hi:
            k = uint64(to_key(x[base + i]))
            if k > after and k < best:
                best = k
            i += cuda.blockDim.x
        if best < top:
            cuda.atomic.min(sh, 0, best)
        cuda.syncthreads()
        if cuda.threadIdx.x == 0 and sh[0] < top:
            cuda.atomic.min(keys, s, sh[0])

    return init, smallest


def picks_into(keys, done, rank, equal, facts, picks, rows: int, nq: int, dtype,
               stream) -> None:
    """Step 4: ``picks`` (the unsigned dtype of ``dtype``'s width, ``2 nq rows + 1``):
    the selections' values' bits, then a NaN's (floats; 0 for integers)."""
    dtype = np.dtype(dtype)
    kernel = cached(("quantile_picks", dtype.str, int(nq), device_key()),
                    lambda: _build_picks(dtype, int(nq)))
    total = 2 * nq * rows
    launch(kernel, grid_for(total), THREADS, stream, keys, done, rank, equal, facts, picks,
           total)


def _build_picks(dtype: np.dtype, nq: int):
    from_key = build_from_key(dtype)
    is_float = dtype.kind == "f"
    sign = uint64(1 << (8 * dtype.itemsize - 1))
    nan_key = uint64(max_key(dtype))
    bt = from_dtype(bits_dtype(dtype))

    @cuda.jit
    def picks(keys, done, rank, equal, facts, out, total):
        s = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        if s == 0:
            out[total] = bt(from_key(nan_key) if is_float else uint64(0))
        while s < total:
            same = done[s] == DUPLICATE or (done[s] == NEXT and rank[s - 1] < equal[s - 1])
            key = keys[s - 1] if same else keys[s]
            bits = from_key(key)
            if is_float and bits == uint64(0):
                r = s // (2 * nq)
                if facts[r * FACTS + NEGATIVE_ZERO] > 0 and \
                        facts[r * FACTS + POSITIVE_ZERO] == 0:
                    bits = sign
            out[s] = bt(bits)
            s += step

    return picks


def picked_stats_into(values, facts, qs, out, counts, flags, rows: int, n: int,
                      method: int, skip_nan: bool, compute, stream,
                      q_dtype: str = "float64") -> None:
    """Step 5: ``out[j * rows + r]``, quantile ``qs[j]`` of row ``r``, from
    ``values`` (the picks of :func:`picks_into` read as the rows' dtype) and the
    rows' ``facts``; ``out``, ``counts``, ``flags``, ``method``, ``compute`` and
    ``q_dtype`` as ``order_stats.order_stats_into``'s."""
    dtype = np.dtype(values.dtype)
    key = ("picked_stats", dtype.str, np.dtype(out.dtype).str, int(method), bool(skip_nan),
           np.dtype(compute).str, str(q_dtype), device_key())
    kernel = cached(key, lambda: _build_stats(dtype, int(method), bool(skip_nan),
                                              np.dtype(compute), str(q_dtype)))
    total = int(qs.shape[0]) * int(rows)
    launch(kernel, grid_for(total), THREADS, stream, values, facts, qs, out, counts, flags,
           int(rows), int(n))


def _build_stats(dtype: np.dtype, method: int, skip_nan: bool, compute: np.dtype,
                 q_dtype: str):
    _, lerp, middle = arithmetic(dtype, compute)
    locate = locator(method, q_dtype)
    nan_check = dtype.kind == "f"

    @cuda.jit
    def picked_stats(values, facts, qs, out, counts, flags, rows, n):
        nq = qs.shape[0]
        nan_at = 2 * int64(nq) * rows  # the NaN after the picks
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < int64(nq) * rows:
            j = i // rows
            r = i - j * rows
            nans = facts[r * FACTS + NAN]
            count = n - nans if skip_nan else n
            if skip_nan and j == 0:
                counts[r] = count
            if count > 0:
                lo, hi, t = locate(qs[j], count)
                p = 2 * (r * nq + j)
                if method == MEDIAN:
                    out[i] = middle(values[p], values[p + 1], lo, hi, flags)
                elif method == LINEAR or method == MIDPOINT:
                    out[i] = lerp(values[p], values[p + 1], t, flags)
                else:
                    out[i] = values[p]
            # as order_stats: interpolated first (NumPy's warnings), then NaN
            if count == 0 or (nan_check and not skip_nan and nans > 0):
                out[i] = values[nan_at]
            i += step

    return picked_stats
