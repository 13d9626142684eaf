"""Fused cross-entropy over rows of logits: each row's loss and, optionally, its
gradient in one kernel, without ever storing the probabilities.

The lesson
----------
For a row of logits ``x`` over ``C`` classes with target class ``t`` and label
smoothing ``eps`` (PyTorch's ``cross_entropy``):

    lse      = log sum_c exp(x_c)
    loss     = (1 - eps) (lse - x_t) + eps (lse - mean_c x_c)
    dloss/dx_c = exp(x_c - lse) - (1 - eps) [c == t] - eps / C

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

A row whose target is ``ignore`` counts nothing (loss 0, gradient 0). A target
outside ``[0, C)`` is never read through: the first such row is recorded in
``bad[0]`` (an atomic minimum, ``N`` when none) and the row treated as ignored, for
the caller to raise after.

Source: Liger-Kernel's and QuACK's fused cross-entropy (loss and gradient in one
kernel over the logits, in place); PyTorch's ``cross_entropy`` for the semantics.
"""

from __future__ import annotations

import math

from numba import cuda, from_dtype, int64

from numbakern.kernels.softmax_rows import (block_allreduce, compute_dtype, element_converters,
                                            online_folder)
from numbakern.ops import SUM
from numbakern.ops.state import state_kit
from numbakern.runtime.cache import cached, device_key

TILE = 8  # elements per thread per step of pass 1: loads in flight, one rescale each


def build_kernel(block, pair_op, dtype, smoothing: bool, gradient: bool):
    """Kernel ``(x, target, g, loss, scale, bad, ignore, eps)`` over ``x`` (rows of
    logits, 2-D, any strides): ``loss[i]`` each row's loss times ``scale[0]`` in the
    compute dtype (``1 / rows counted`` makes their sum a mean) and, with
    ``gradient``, ``g`` (``x``'s shape and dtype, ``x`` itself allowed) its gradient
    times ``scale[0]`` (0 for an ignored row). ``smoothing``: the kernel reads ``eps``
    (else label smoothing is 0 and the row's sum is not taken)."""
    tc = compute_dtype(dtype)
    tc_t, ZERO, ONE = from_dtype(tc), tc.type(0), tc.type(1)
    widen, narrow = element_converters(dtype)
    pair = state_kit(pair_op, (tc, tc))
    total = state_kit(SUM, (tc,))
    reduce_pair = block_allreduce(block, pair)
    reduce_sum = block_allreduce(block, total)
    slots = max(1, block.temp_slots())
    fold = online_folder(tc, TILE)
    threads, NEG = block.threads, tc.type(-math.inf)

    @cuda.jit
    def cross_entropy(x, target, g, loss, scale, bad, ignore, eps):
        t0 = cuda.shared.array(slots, tc_t)
        t1 = cuda.shared.array(slots, tc_t)
        b0 = cuda.shared.array(1, tc_t)
        b1 = cuda.shared.array(1, tc_t)
        tile = cuda.local.array(TILE, tc_t)
        tid = cuda.threadIdx.x
        N, C = x.shape[0], x.shape[1]
        row = int64(cuda.blockIdx.x)
        while row < N:
            t = int64(target[row])
            valid = t != ignore
            if valid and (t < 0 or t >= C):
                if tid == 0:
                    cuda.atomic.min(bad, 0, row)
                valid = False
            # The target's logit, read before the barrier of the reduce below: after it
            # threads write the gradient, perhaps over the logits.
            xt = widen(x[row, t]) if valid and tid == 0 else ZERO
            m, z, sx = NEG, ZERO, ZERO
            c = tid
            while c < C:  # a tile of TILE elements per thread, all loads first
                valid_here = 0
                for u in range(TILE):
                    k = c + u * threads
                    if k < C:
                        tile[u] = widen(x[row, k])
                        valid_here += 1
                        if smoothing:
                            sx += tile[u]
                    else:
                        tile[u] = NEG
                m, z = fold(m, z, tile, valid_here)
                c += TILE * threads
            m, z = reduce_pair((m, z), t0, t1, b0, b1)
            if smoothing:
                cuda.syncthreads()  # every thread has read b0, b1 before they are reused
                sx = reduce_sum((sx,), t0, t1, b0, b1)[0]
            lse = m + tc_t(math.log(z))
            if tid == 0:  # scaled as the gradient; 0 * NaN for a mean of no rows
                nll = ZERO
                if valid:
                    nll = lse - xt
                    if smoothing:
                        nll = (ONE - eps) * nll + eps * (lse - sx / C)
                loss[row] = nll * scale[0]
            if gradient:
                factor = scale[0] if valid else ZERO
                hit = (ONE - eps) if smoothing else ONE
                floor = eps / C if smoothing else ZERO
                c = tid
                while c < C:
                    p = tc_t(math.exp(widen(x[row, c]) - lse))
                    d = p - floor - (hit if c == t else ZERO)
                    g[row, c] = narrow(d * factor)
                    c += threads
            cuda.syncthreads()  # the row's shared slots are free for the next row
            row += cuda.gridDim.x

    return cross_entropy


def kernel_for(block, pair_op, dtype, smoothing: bool, gradient: bool):
    """The compiled kernel (built once per block strategy, dtype, flags and device);
    ``pair_op``: the online ``(max, sum)`` op (``strategies/online_softmax.py``'s,
    which the caller passes: kernels sit below the strategies)."""
    key = ("cross_entropy", block.key, pair_op.name, str(dtype), smoothing, gradient,
           device_key())
    return cached(key, lambda: build_kernel(block, pair_op, dtype, smoothing, gradient))


def count_kernel():
    """Kernel ``(target, ignore, count)``: ``count[0]`` += the targets other than
    ``ignore`` (atomically, grid-strided): the rows a mean divides by."""

    @cuda.jit
    def count_rows(target, ignore, count):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        mine = int64(0)
        while i < target.shape[0]:
            if int64(target[i]) != ignore:
                mine += 1
            i += step
        cuda.atomic.add(count, 0, mine)

    return cached(("cross_entropy", "count", device_key()), lambda: count_rows)


def scale_kernel():
    """Kernel ``(count, scale)``: ``scale[0] = 1 / count[0]`` (NaN when no row counts,
    as PyTorch's mean of nothing)."""

    @cuda.jit
    def reciprocal(count, scale):
        if cuda.threadIdx.x == 0:
            scale[0] = 1.0 / count[0] if count[0] > 0 else math.nan

    return cached(("cross_entropy", "reciprocal", device_key()), lambda: reciprocal)

