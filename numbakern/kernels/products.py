"""The element-wise passes after a float product scan (``numbakern/ops/products.py``
says why): each row's first element whose running product left the finite range, and
NumPy's value for every element after it.

Both walk the ``(A, B, n)`` views a scan job holds, in scan order (a reverse scan's
views run backwards): a block takes a chunk of ``CHUNK`` consecutive elements of one
row at a time, so the row and chunk come from one division a chunk, not one an element.
"""

from __future__ import annotations


import numpy as np
from numba import cuda, int64

from numbakern.kernels.elementwise import MAX_BLOCKS, THREADS, fill
from numbakern.ops.products import left_range, settle
from numbakern.runtime.device import ceil_div
from numbakern.runtime.launch import launch

CHUNK = THREADS * 4


@cuda.jit(device=True)
def _chunk(block, chunks, b_count):
    """``(row, a, b, start)`` of chunk ``block``: its row, the row's place in the
    ``(A, B)`` outer dimensions, and its first element."""
    row = block // chunks
    return row, row // b_count, row % b_count, (block - row * chunks) * CHUNK


@cuda.jit
def _first_exits(y, first):
    b_count, n = y.shape[1], y.shape[2]
    chunks = (n + CHUNK - 1) // CHUNK
    block = int64(cuda.blockIdx.x)
    while block < y.shape[0] * b_count * chunks:
        row, a, b, start = _chunk(block, chunks, b_count)
        j = start + cuda.threadIdx.x
        # A thread stops at its first exit, and a chunk wholly past a known exit is
        # skipped: once a row overflows, every later element would otherwise contend
        # for one atomic (200 ms for 2**28 float32 on an H200).
        while j < min(start + CHUNK, n, first[row]):
            if left_range(y[a, b, j]):
                cuda.atomic.min(first, row, j)
                break
            j += cuda.blockDim.x
        block += cuda.gridDim.x


@cuda.jit
def _settle_after(y, classes, first):
    b_count, n = y.shape[1], y.shape[2]
    chunks = (n + CHUNK - 1) // CHUNK
    block = int64(cuda.blockIdx.x)
    while block < y.shape[0] * b_count * chunks:
        row, a, b, start = _chunk(block, chunks, b_count)
        at = first[row]  # n where the row never left the range
        j = max(start, at + 1) + cuda.threadIdx.x  # the exit itself is already right
        while j < min(start + CHUNK, n):
            y[a, b, j] = settle(y[a, b, at], classes[a, b, j])
            j += cuda.blockDim.x
        block += cuda.gridDim.x


def settle_products(y, classes, workspace) -> None:
    """Give every element of the ``(A, B, n)`` view ``y`` (rounded running products,
    in scan order) after its row's first exit from the finite range NumPy's value,
    from ``classes`` (the class bits of the factors so far, laid out as ``y``)."""
    a_count, b_count, n = (int(e) for e in y.shape)
    rows = a_count * b_count
    first = workspace.empty(rows, np.int64)
    fill(first, n, workspace.stream)
    blocks = max(1, min(rows * ceil_div(n, CHUNK), MAX_BLOCKS))
    launch(_first_exits, blocks, THREADS, workspace.stream, y, first)
    launch(_settle_after, blocks, THREADS, workspace.stream, y, classes, first)
