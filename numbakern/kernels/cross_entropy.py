"""Fused cross-entropy over rows of logits: each row's loss and, optionally, its
gradient in one kernel, without ever storing the probabilities.

The lesson
----------
For a row of logits ``x`` over ``C`` classes with target class ``t`` and label
smoothing ``eps`` (PyTorch's ``cross_entropy``):

    lse      = log sum_c exp(x_c) = m + log sum_c exp(x_c - m),  m = max_c x_c
    loss     = (1 - eps) (lse - x_t) + eps (lse - mean_c x_c)
    dloss/dx_c = exp(x_c - lse) - (1 - eps) [c == t] - eps / C

``m`` and ``log sum_c exp(x_c - m)`` stay apart, as PyTorch's log-softmax keeps them:
``(m - x_t) + log(...)`` and ``exp((x_c - m) - log(...))``, never ``lse`` itself,
which rounds the log away once ``m`` is large (two logits of 1e8 in float32: ``lse``
is 1e8, the loss 0 and the gradient 0 and 1, where they are log 2 and -1/2, 1/2).

``lse`` is the online softmax normalizer (``strategies/online_softmax.py``): a
``(max, scaled sum)`` pair per thread, reduced by the caller's block strategy, so
pass 1 reads the row once (and, with smoothing, sums it with the same strategy).
Each thread folds its elements a tile of :data:`TILE` at a time: the tile's loads
all issued first, then one rescale and one ``exp`` per element
(``softmax_rows.online_folder``), where the pair's own combine would take two.
Pass 2, only when the gradient is wanted, reads the row again and writes the
gradient straight from the logits, scaled by the reduction's factor (``1 / rows
counted`` for a mean, read from device memory: the host never waits for the count).
The gradient may be written over the logits: each element is read by the thread
that then writes it, and nothing else reads it afterwards. A block owns a row at a
time, grid-strided over rows.

With per-class weights ``w`` (PyTorch's ``weight``, read from a ``C + 1`` array whose
last element is ``W = sum_c w_c``) the row's loss is
``(1 - eps) w_t (lse - x_t) + eps / C sum_c w_c (lse - x_c)`` and its gradient
``p_c ((1 - eps) w_t + eps W / C) - (1 - eps) w_t [c == t] - eps w_c / C``; a mean
divides by ``sum w_t`` over the rows that count (:func:`weighted_count_kernel`).

A row whose target is ``ignore`` counts nothing (loss 0, gradient 0). A target
outside ``[0, C)`` is never read through: the first such row is recorded in
``bad[0]`` (an atomic minimum, ``N`` when none) and the row treated as ignored, for
the caller to raise after.

A ``"mean"`` or ``"sum"`` over at most :data:`FINISH_ROWS` rows is finished by the
same launch (:func:`_finisher`): the grid's last block to arrive sums the rows'
losses, in a fixed order whichever block that is, and for a mean without a gradient
divides by the rows it counts there, so a small call is one fill and one row kernel.

Source: Liger-Kernel's and QuACK's fused cross-entropy (loss and gradient in one
kernel over the logits, in place); PyTorch's ``cross_entropy`` for the semantics.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, from_dtype, int32, int64, uint64

from numbakern.kernels.softmax_rows import (RowPlan, block_allreduce, compute_dtype,
                                            edge_loader, element_converters, online_folder,
                                            packer, row_exp, row_span, storage_dtype,
                                            temp_storage, tile_loader, tile_vectors)
from numbakern.kernels.vector import vector_lanes, vector_storer
from numbakern.ops import SUM
from numbakern.ops.state import state_kit
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.launch import bounded_jit
from numbakern.runtime.relaxed import fence_acq_rel, load_relaxed

TILE = 8  # elements per thread per step of pass 1: loads in flight, one rescale each
# Row losses that the row kernel's last block sums itself (a mean or a sum): past this
# many, one block's loads would cost more than a separate reduction's launch.
FINISH_ROWS = 8192
_UNROLL = 8  # the finishing block's loads in flight per thread


@cuda.jit(device=True)
def row_target(target, row, ignore, C, bad):
    """``(t, counts)``: row ``row``'s target class, and whether the row counts. A target
    outside ``[0, C)`` that is not ``ignore`` is never read through: the row counts
    nothing, and thread 0 records it in ``bad[0]`` (an atomic minimum)."""
    t = int64(target[row])
    valid = t != ignore
    if valid and (t < 0 or t >= C):
        if cuda.threadIdx.x == 0:
            cuda.atomic.min(bad, 0, row)
        valid = False
    return t, valid


def _row_loss(tc, smoothing: bool, weighted: bool):
    """Device function ``loss(valid, m, lz, xt, sx, eps, C, wt, wsum)``: a row's loss
    from its ``lse = m + lz`` (max and log of the scaled sum, kept apart: module
    docstring), its target's logit ``xt`` and (with ``smoothing``) ``sx = sum_c w_c
    (m - x_c)`` (``w_c`` 1 unless ``weighted``; :func:`_spread`), the target's weight
    ``wt`` and the weights' sum ``wsum``; 0 for a row that does not count."""
    tc_t, ZERO, ONE = from_dtype(tc), tc.type(0), tc.type(1)

    @cuda.jit(device=True)
    def loss(valid, m, lz, xt, sx, eps, C, wt, wsum):
        if not valid:
            return ZERO
        nll = (m - xt) + lz
        if weighted:
            if smoothing:
                # sum_c w_c (lse - x_c) / C
                return (ONE - eps) * wt * nll + eps * ((sx + wsum * lz) / tc_t(C))
            return wt * nll
        if smoothing:
            nll = (ONE - eps) * nll + eps * (sx / tc_t(C) + lz)
        return nll

    return loss


def _spread(tc):
    """Device functions ``add(s, seen, w, m, v) -> (s, seen)`` (the element ``v`` of
    weight ``w``) and ``rebase(s, seen, m_old, m)`` for label smoothing's ``sum_c w_c
    (m - x_c)`` about the row's max ``m``, taken online as the normalizer is: each
    thread sums ``w (m - v)`` about its own running max, moves the sum to a larger max
    by ``seen (m - m_old)`` (``seen`` the weights summed so far), and to the row's max
    before the block's sum. Every term is ``>= 0`` (for weights
    ``>= 0``), so nothing cancels: a plain ``sum w_c x_c`` loses the log to rounding
    for large logits near each other, a sum about any one logit loses small losses to
    cancellation against far-off masks. A -inf logit's term is ``w inf`` (inf, or NaN
    for a weight of 0, as torch's ``0 * -inf``), never ``-inf - -inf``."""
    ZERO, INF, NEG = tc.type(0), tc.type(math.inf), tc.type(-math.inf)

    @cuda.jit(device=True)
    def add(s, seen, w, m, v):
        return s + w * (INF if v == NEG else m - v), seen + w

    @cuda.jit(device=True)
    def rebase(s, seen, m_old, m):
        return s + seen * (m - m_old) if seen != ZERO and m > m_old else s

    return add, rebase


def _gradient(tc, smoothing: bool, exp, weighted: bool):
    """Device functions ``prepare(valid, eps, C, scale, wt, wsum) -> (factor, hit,
    floor, a)`` once a row and ``grad(v, c, t, m, lz, factor, hit, floor, a, weight)``
    per element: ``(exp((v - m) - lz) - floor - hit [c == t]) * factor``, the gradient
    of the element ``v`` of column ``c`` (``weighted``: ``(a exp((v - m) - lz) - floor w_c -
    hit [c == t]) * factor``, ``a = (1 - eps) w_t + eps W / C``, ``hit = (1 - eps)
    w_t``); ``exp``: ``softmax_rows.row_exp``'s for the gradient's dtype."""
    tc_t, ZERO, ONE = from_dtype(tc), tc.type(0), tc.type(1)

    @cuda.jit(device=True)
    def prepare(valid, eps, C, scale, wt, wsum):
        factor = scale if valid else ZERO
        hit = (ONE - eps) if smoothing else ONE
        floor = eps / tc_t(C) if smoothing else ZERO
        a = ONE
        if weighted:
            hit = hit * wt
            a = hit + floor * wsum
        return factor, hit, floor, a

    @cuda.jit(device=True)
    def grad(v, c, t, m, lz, factor, hit, floor, a, weight):
        p = tc_t(exp((v - m) - lz))
        if weighted:
            return (p * a - floor * weight[c] - (hit if c == t else ZERO)) * factor
        return (p - floor - (hit if c == t else ZERO)) * factor

    return prepare, grad


def _finisher(block, dtype, finish, weighted: bool):
    """Device function ``finish(loss, result, ticket, start, target, ignore, C, weight,
    t0, t1)`` that every thread of every block calls after its rows: the grid's last
    block to arrive (``ticket[0]``, ``start`` before the launch, counts the blocks)
    writes ``result[0]`` (the logits' dtype) = the sum of the ``loss`` rows, for
    ``finish == "mean"`` times ``1 / rows counted`` (weighted: ``1 / sum of
    weight[t]``, summed in the compute dtype as torch's; NaN for 0, as
    :func:`_reciprocal_when_last`). The sums are the block strategy's over each
    thread's rows ``tid, tid + threads, ...``: the same order whichever block is last.
    ``t0``, ``t1``: the row kernel's temp storage for the strategy (compute dtype, free
    after its rows), reused. ``finish`` None: nothing. The last block is
    :func:`_last_block`'s; it reads the rows at L2 (``runtime/relaxed.py``)."""
    if finish is None:

        @cuda.jit(device=True)
        def nothing(loss, result, ticket, start, target, ignore, C, weight, t0, t1):
            pass

        return nothing
    tc = compute_dtype(dtype)
    tc_t, ZERO, ONE = from_dtype(tc), tc.type(0), tc.type(1)
    narrow = element_converters(dtype)[1]
    reduce_sum = block.build_reduce(state_kit(SUM, (tc,)))
    threads, mean = block.threads, finish == "mean"

    @cuda.jit(device=True)
    def finish_rows(loss, result, ticket, start, target, ignore, C, weight, t0, t1):
        if not _last_block(ticket, start):
            return
        v = cuda.local.array(_UNROLL, tc_t)
        N = uint64(loss.shape[0])
        s, n = ZERO, ZERO
        i = uint64(cuda.threadIdx.x)
        while i < N:  # _UNROLL loads issued before their sum
            for u in range(_UNROLL):
                k = i + uint64(u * threads)
                v[u] = load_relaxed(loss, k) if k < N else ZERO
                if mean and k < N:
                    t = int64(target[k])
                    if _counts(t, ignore, C):
                        n += tc_t(weight[t]) if weighted else ONE
            for u in range(_UNROLL):
                s += v[u]
            i += uint64(_UNROLL * threads)
        s = reduce_sum((s,), t0, t1)[0]
        if mean:
            cuda.syncthreads()  # every thread is done with t0, t1 before they are reused
            n = reduce_sum((n,), t0, t1)[0]
        if cuda.threadIdx.x == 0:
            if mean:
                s *= ONE / n if n != 0 else tc_t(math.nan)
            result[0] = narrow(s)

    return finish_rows


def build_kernel(block, pair_op, dtype, smoothing: bool, gradient: bool,
                 weighted: bool = False, finish=None):
    """Kernel ``(x, target, g, loss, scale, bad, ignore, eps, weight, result, ticket,
    start)`` over ``x`` (rows of logits, 2-D, any strides): ``loss[i]`` each row's
    loss times ``scale[0]`` in the compute dtype (``1 / rows counted`` makes their sum
    a mean) and, with ``gradient``, ``g`` (``x``'s shape and dtype, ``x`` itself
    allowed) its gradient times ``scale[0]`` (0 for an ignored row). ``smoothing``:
    the kernel reads ``eps`` (else label smoothing is 0 and the row's sum is not
    taken). ``weighted``: the classes' weights are read from ``weight`` (``C + 1``
    elements of the compute dtype, their sum last); else ``weight`` is not read.
    ``finish``: ``"sum"`` or ``"mean"`` writes the reduced loss to ``result``
    (:func:`_finisher`, its ticket ``ticket[0]`` holding ``start``); None leaves
    ``result`` and ``ticket`` alone."""
    tc = compute_dtype(dtype)
    tc_t, ZERO = from_dtype(tc), tc.type(0)
    widen, narrow = element_converters(dtype)
    pair = state_kit(pair_op, (tc, tc))
    total = state_kit(SUM, (tc,))
    reduce_pair = block_allreduce(block, pair)
    reduce_sum = block_allreduce(block, total)
    slots = max(1, block.temp_slots())
    name = dtype if dtype == "bfloat16" else np.dtype(dtype).name
    exp = row_exp(name)
    fold = online_folder(tc, TILE, exp)
    row_loss = _row_loss(tc, smoothing, weighted)
    spread_add, rebase = _spread(tc)
    prepare, grad = _gradient(tc, smoothing, exp, weighted)
    ONE = tc.type(1)
    threads, NEG = block.threads, tc.type(-math.inf)
    finish_rows = _finisher(block, dtype, finish, weighted)

    @bounded_jit(threads)
    def cross_entropy(x, target, g, loss, scale, bad, ignore, eps, weight, result, ticket,
                      start):
        t0 = cuda.shared.array(slots, tc_t)
        t1 = cuda.shared.array(slots, tc_t)
        b0 = cuda.shared.array(1, tc_t)
        b1 = cuda.shared.array(1, tc_t)
        tile = cuda.local.array(TILE, tc_t)
        tid = cuda.threadIdx.x
        N, C = x.shape[0], x.shape[1]
        row = int64(cuda.blockIdx.x)
        while row < N:
            t, valid = row_target(target, row, ignore, C, bad)
            wt = weight[t] if weighted and valid else ONE
            wsum = weight[C] if weighted else ONE
            # The target's logit, read before the barrier of the reduce below: after it
            # threads write the gradient, perhaps over the logits.
            xt = widen(x[row, t]) if valid and tid == 0 else ZERO
            m, z, sx, seen = NEG, ZERO, ZERO, ZERO
            c = tid
            while c < C:  # a tile of TILE elements per thread, all loads first
                valid_here = 0
                for u in range(TILE):
                    k = c + u * threads
                    if k < C:
                        tile[u] = widen(x[row, k])
                        valid_here += 1
                    else:
                        tile[u] = NEG
                m_old = m
                m, z = fold(m, z, tile, valid_here)
                if smoothing:
                    sx = rebase(sx, seen, m_old, m)
                    for u in range(valid_here):
                        w = weight[c + u * threads] if weighted else ONE
                        sx, seen = spread_add(sx, seen, w, m, tile[u])
                c += TILE * threads
            m_own = m
            m, z = reduce_pair((m, z), t0, t1, b0, b1)
            if smoothing:
                sx = rebase(sx, seen, m_own, m)
                cuda.syncthreads()  # every thread has read b0, b1 before they are reused
                sx = reduce_sum((sx,), t0, t1, b0, b1)[0]
            lz = tc_t(math.log(z))
            if tid == 0:  # scaled as the gradient; 0 * NaN for a mean of no rows
                loss[row] = row_loss(valid, m, lz, xt, sx, eps, C, wt, wsum) * scale[0]
            if gradient:
                factor, hit, floor, a = prepare(valid, eps, C, scale[0], wt, wsum)
                c = tid
                while c < C:
                    g[row, c] = narrow(grad(widen(x[row, c]), c, t, m, lz, factor, hit,
                                            floor, a, weight))
                    c += threads
            cuda.syncthreads()  # the row's shared slots are free for the next row
            row += cuda.gridDim.x
        finish_rows(loss, result, ticket, start, target, ignore, C, weight, t0, t1)

    return cross_entropy


def vector_plan(block, pair_op, dtype) -> RowPlan:
    """The row plan whose vector machinery (``softmax_rows``: a row as a head of
    scalars, whole 16-byte vectors, a tail) the vector kernel uses: a tiled online
    softmax over a block per row."""
    name = dtype if dtype == "bfloat16" else np.dtype(dtype).name
    return RowPlan("softmax", "online", "block", block.threads, 0, None, block, name,
                   vector=vector_lanes(storage_dtype(name)), pair_op=pair_op)


def build_vector_kernel(plan: RowPlan, smoothing: bool, gradient: bool,
                        weighted: bool = False, finish=None):
    """Kernel ``(x, target, g, loss, scale, bad, ignore, eps, weight, result, ticket,
    start, xf, gf, head0)``:
    :func:`build_kernel`'s over ``x`` and ``g`` as 3-D views ``(1, N, C)``, each row's
    whole 16-byte vectors read from ``xf`` and written to ``gf`` and its head and tail
    through ``x`` and ``g`` (``softmax_rows.vector_views``; ``vector_width`` has
    checked that rows of ``x`` and ``g`` lie equally far from a 16-byte boundary). A
    quarter (float32) or an eighth (halves) of the load and store instructions."""
    tc = np.dtype(plan.compute)
    tc_t, ZERO, NEG = from_dtype(tc), tc.type(0), tc.type(-math.inf)
    G, W, V = plan.group, plan.vector, tile_vectors(plan)
    L = V * W  # a tile's elements per thread
    widen, narrow = element_converters(plan.dtype)
    reduce_pair = block_allreduce(plan.sum_block, state_kit(plan.pair_op, (tc, tc)))
    reduce_sum = block_allreduce(plan.sum_block, state_kit(SUM, (tc,)))
    # The smoothing sum reuses the pair's storage (a barrier apart): two sets of
    # Hillis-Steele's 2 x 1024 float64 slots would pass 48 KiB of static shared memory.
    storage = temp_storage(plan, (plan.sum_block, plan.pair_op))
    exp = row_exp(plan.result)
    fold_edges, fold = online_folder(tc, 2, exp), online_folder(tc, L, exp)
    tile, edges, span = tile_loader(plan, V, NEG), edge_loader(plan, NEG), row_span(plan)
    vstore, pack = vector_storer(W), packer(plan)
    row_loss = _row_loss(tc, smoothing, weighted)
    spread_add, rebase = _spread(tc)
    prepare, grad = _gradient(tc, smoothing, exp, weighted)
    ONE = tc.type(1)
    finish_rows = _finisher(plan.sum_block, plan.dtype, finish, weighted)

    @bounded_jit(plan.threads)
    def vector_cross_entropy(x, target, g, loss, scale, bad, ignore, eps, weight, result,
                             ticket, start, xf, gf, head0):
        sh = storage()
        v = cuda.local.array(L, tc_t)
        lane = cuda.threadIdx.x
        N, C = x.shape[1], x.shape[2]
        row = int64(cuda.blockIdx.x)
        while row < N:
            t, valid = row_target(target, row, ignore, C, bad)
            wt = weight[t] if weighted and valid else ONE
            wsum = weight[C] if weighted else ONE
            xr, gr = x[0, row], g[0, row]
            xt = widen(xr[t]) if valid and lane == 0 else ZERO  # before any write to g
            xv, head, count = span(x, 0, row, head0, C)
            h, e = edges(xr, lane, head, count, C)  # kept for the gradient's pass
            ends = (lane < head) + (head + count * W + lane < C)  # elements in h, e
            v[0] = h
            v[1] = e
            m, z = fold_edges(NEG, ZERO, v, ends)
            sx, seen = ZERO, ZERO
            if smoothing:
                ce = head + count * W + lane  # the tail element's column
                if lane < head:
                    w = weight[lane] if weighted else ONE
                    sx, seen = spread_add(sx, seen, w, m, h)
                if ce < C:
                    w = weight[ce] if weighted else ONE
                    sx, seen = spread_add(sx, seen, w, m, e)
            j = lane
            while j < count:
                loaded = tile(v, xf, xv, j, count)
                m_old = m
                m, z = fold(m, z, v, loaded)
                if smoothing:
                    sx = rebase(sx, seen, m_old, m)
                    for k in range(L):
                        if k < loaded:  # the loaded vectors come first
                            # v[u W + q] is column head + (j + u G) W + q
                            w = weight[head + (j + (k // W) * G) * W + k % W] if weighted \
                                else ONE
                            sx, seen = spread_add(sx, seen, w, m, v[k])
                j += V * G
            m_own = m
            m, z = reduce_pair((m, z), sh[0], sh[1], sh[2], sh[3])
            if smoothing:
                sx = rebase(sx, seen, m_own, m)
                cuda.syncthreads()  # every thread has read the pair before it is reused
                sx = reduce_sum((sx,), sh[0], sh[1], sh[2], sh[3])[0]
            lz = tc_t(math.log(z))
            if lane == 0:
                loss[row] = row_loss(valid, m, lz, xt, sx, eps, C, wt, wsum) * scale[0]
            if gradient:
                factor, hit, floor, a = prepare(valid, eps, C, scale[0], wt, wsum)
                gv = span(g, 0, row, head0, C)[0]
                j = lane
                while j < count:  # all loads of a tile before its stores: g may be x
                    tile(v, xf, xv, j, count)
                    for u in range(V):
                        if j + u * G < count:
                            c0 = head + (j + u * G) * W
                            for q in range(W):
                                v[u * W + q] = grad(v[u * W + q], c0 + q, t, m, lz,
                                                    factor, hit, floor, a, weight)
                            vstore(gf, gv + j + u * G, pack(v, u * W))
                    j += V * G
                if lane < head:
                    gr[lane] = narrow(grad(h, lane, t, m, lz, factor, hit, floor, a, weight))
                c = head + count * W + lane
                if c < C:
                    gr[c] = narrow(grad(e, c, t, m, lz, factor, hit, floor, a, weight))
            cuda.syncthreads()  # the row's shared slots are free for the next row
            row += cuda.gridDim.x
        finish_rows(loss, result, ticket, start, target, ignore, C, weight, sh[0], sh[1])

    return vector_cross_entropy


def kernel_for(block, pair_op, dtype, smoothing: bool, gradient: bool,
               weighted: bool = False, finish=None):
    """The compiled kernel (built once per block strategy, dtype, flags, finish and
    device); ``pair_op``: the online ``(max, sum)`` op
    (``strategies/online_softmax.py``'s, which the caller passes: kernels sit below the
    strategies)."""
    key = ("cross_entropy", block.key, pair_op.name, str(dtype), smoothing, gradient,
           weighted, finish, device_key())
    return cached(key, lambda: build_kernel(block, pair_op, dtype, smoothing, gradient,
                                            weighted, finish))


def vector_kernel_for(plan: RowPlan, smoothing: bool, gradient: bool,
                      weighted: bool = False, finish=None):
    """The compiled :func:`build_vector_kernel` (built once per plan, flags, finish and
    device)."""
    key = ("cross_entropy", plan.key, smoothing, gradient, weighted, finish, device_key())
    return cached(key, lambda: build_vector_kernel(plan, smoothing, gradient, weighted,
                                                   finish))


def count_kernel():
    """Kernel ``(target, ignore, C, count, ticket, scale)``: ``count[0]`` += the targets
    other than ``ignore`` (atomically, grid-strided), then ``scale[0] = 1 / count[0]``
    (:func:`_reciprocal_when_last`): what a mean multiplies by. A target outside
    ``[0, C)`` counts nothing (the loss kernel reports it, and treats its row as
    ignored). ``count[0]`` and ``ticket[0]`` start at 0."""
    return cached(("cross_entropy", "count", device_key()), _build_count)


def _build_count():
    @cuda.jit
    def count_rows(target, ignore, C, count, ticket, scale):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        mine = int64(0)
        while i < target.shape[0]:
            if _counts(int64(target[i]), ignore, C):
                mine += 1
            i += step
        cuda.atomic.add(count, 0, mine)
        _reciprocal_when_last(count, ticket, scale)

    return count_rows


def weighted_count_kernel():
    """Kernel ``(target, ignore, weight, total, ticket, scale)``: ``total[0]`` (float64)
    += the weights ``weight[t]`` of the targets other than ``ignore`` (atomically,
    grid-strided), then ``scale[0] = 1 / total[0]`` (:func:`_reciprocal_when_last`):
    what a weighted mean multiplies by, as PyTorch's. A target outside ``[0, C)`` adds
    nothing (the loss kernel reports it). ``total[0]`` and ``ticket[0]`` start at 0."""
    return cached(("cross_entropy", "weighted_count", device_key()), _build_weighted_count)


def _build_weighted_count():
    @cuda.jit
    def weigh_rows(target, ignore, weight, total, ticket, scale):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        C = weight.shape[0] - 1  # the weights' sum sits last
        mine = 0.0
        while i < target.shape[0]:
            t = int64(target[i])
            if _counts(t, ignore, C):
                mine += float(weight[t])
            i += step
        cuda.atomic.add(total, 0, mine)
        _reciprocal_when_last(total, ticket, scale)

    return weigh_rows


@cuda.jit(device=True)
def _counts(t, ignore, C):
    """Whether a row of target ``t`` counts in a mean: neither ``ignore`` nor out of
    ``[0, C)`` (the loss kernel reports those, and treats their rows as ignored)."""
    return t != ignore and 0 <= t < C


@cuda.jit(device=True)
def _last_block(ticket, start):
    """Whether this block is the grid's last to arrive, in every thread (all of the
    block's threads call it): each block adds 1 to ``ticket[0]``, which held ``start``
    before the launch. The CUDA samples' "last block done" pattern: a release fence
    before the ticket, an acquire by the thread that read it, then the barrier, so
    that the last block's threads see every other block's stores."""
    last = cuda.shared.array(1, int32)
    fence_acq_rel()  # release: this thread's stores before the block's ticket
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        last[0] = cuda.atomic.add(ticket, 0, 1) == start + cuda.gridDim.x - 1
        fence_acq_rel()  # acquire, by the thread that read the ticket
    cuda.syncthreads()  # ... and through the barrier, for the block's threads
    return last[0] != 0


@cuda.jit(device=True)
def _reciprocal_when_last(count, ticket, scale):
    """After every thread of the block has added to ``count[0]``: the grid's last block
    to arrive (``ticket[0]`` counts them) sets ``scale[0] = 1 / count[0]``, NaN when it
    is 0 (no row counts, or their weights sum to 0: PyTorch's mean of nothing). One
    launch where a count and a reciprocal were two (:func:`_last_block`, the ticket
    from 0)."""
    if _last_block(ticket, 0) and cuda.threadIdx.x == 0:
        total = cuda.atomic.add(count, 0, 0)  # read at L2, never a stale L1 line
        scale[0] = 1.0 / total if total != 0 else math.nan
