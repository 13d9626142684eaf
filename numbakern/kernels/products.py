"""The element-wise passes around a float product scan (``numbakern/ops/products.py``
says why there are two scans): the codes its second scan reads, and NumPy's value from
each element's settled code.

Both walk the ``(A, B, n)`` views a scan job holds, in scan order (a reverse scan's
views run backwards), one element per thread, grid-strided.
"""

from __future__ import annotations

import functools
import math

from numba import cuda, int64

from numbakern.kernels.elementwise import THREADS, grid_for
from numbakern.ops.products import element_code, settle
from numbakern.runtime.launch import launch


@functools.lru_cache(maxsize=None)
def _coder(exclusive: bool, nan_as_one: bool):
    @cuda.jit
    def codes(y, x, out):
        a_count, b_count, n = y.shape
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < a_count * b_count * n:
            j = i % n
            r = i // n
            a, b = r // b_count, r % b_count
            if not exclusive:
                out[a, b, j] = element_code(y[a, b, j], x[a, b, j], nan_as_one)
            elif j == 0:
                out[a, b, j] = 0  # nothing multiplied yet
            else:  # y[j] is the product of x[:j]: its last factor is x[j - 1]
                out[a, b, j] = element_code(y[a, b, j], x[a, b, j - 1], nan_as_one)
            i += step

    return codes


@cuda.jit
def _settle(y, codes):
    a_count, b_count, n = y.shape
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < a_count * b_count * n:
        j = i % n
        r = i // n
        a, b = r // b_count, r % b_count
        y[a, b, j] = settle(y[a, b, j], codes[a, b, j])
        i += step


def exit_codes_into(y, x, codes, exclusive: bool, nan_as_one: bool, stream) -> None:
    """``codes[a, b, j]``: the code of element ``j`` (``ops.products.element_code``) from
    the first pass's rounded products ``y`` and the factors ``x`` (3-D views of one
    shape; for an exclusive scan ``y[j]`` multiplies ``x[:j]``)."""
    launch(_coder(bool(exclusive), bool(nan_as_one)), grid_for(math.prod(y.shape)), THREADS, stream,
           y, x, codes)


def settle_into(y, codes, stream) -> None:
    """``y[a, b, j] = settle(y[a, b, j], codes[a, b, j])``: NumPy's running product
    where the second scan's settled ``codes`` say it left the finite range."""
    launch(_settle, grid_for(math.prod(y.shape)), THREADS, stream, y, codes)
