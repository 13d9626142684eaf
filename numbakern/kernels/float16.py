"""A wider element rounded to float16 as it is read: NumPy's cast of an input to a
float16 ``dtype=``.

NumPy sums (and scans) with ``dtype=np.float16`` cast every element to float16 before
adding: ``1e5`` becomes inf, ``1e-8`` becomes 0. numbakern accumulates float16 in
float32 (its running sum would overflow at 65504), so an element read from a wider
input is rounded to float16's nearest value first, kept as the float32 holding it:
the sum then meets the inf and the zeros that NumPy's does.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, float64, int64, uint64

from numbakern.kernels.bfloat16 import widen
from numbakern.runtime.bits import bitcast

#: the least magnitude float16 rounds to inf: halfway from its largest value, 65504,
#: to the next power of two (ties to even go up, to 2**16)
_OVERFLOW = 65520.0


@cuda.jit(device=True)
def round_to_float16(v):
    """``v`` (any real) as the float32 of the nearest float16, ties to even (inf from
    65520 up, signed zeros below its smallest subnormal), NaN as NaN.

    Rounded from float64 in one step (through float32 it would round twice): adding
    ``c``, 1.5 times a power of two whose float64 spacing is ``v``'s float16 spacing,
    rounds ``v`` to that spacing, ties to even, and subtracting ``c`` is exact."""
    d = float64(v)
    if math.isnan(d) or math.isinf(d):
        return float32(d)
    if abs(d) >= _OVERFLOW:
        return float32(math.copysign(math.inf, d))
    exponent = int64((bitcast(d, uint64) >> uint64(52)) & uint64(0x7FF)) - 1023
    exponent = max(exponent, int64(-14))  # float16's subnormals share one spacing
    c = bitcast(uint64(exponent + 42 + 1023) << uint64(52), float64) * 1.5
    r = (d + c) - c
    return float32(math.copysign(r, d) if r == 0.0 else r)


@cuda.jit(device=True)
def widen_and_round(bits):
    """bfloat16 bits rounded to float16, as the float32 holding it."""
    return round_to_float16(widen(bits))


def read_for(in_dtype, result):
    """The kit's ``read`` (``numbakern.ops.state.state_kit``) for elements of
    ``in_dtype`` reduced or scanned into ``result``: :func:`round_to_float16` where the
    result is float16 and not every element is one already, else None (read as
    stored)."""
    if np.dtype(result) == np.float16 and not np.can_cast(in_dtype, np.float16, "safe"):
        return round_to_float16
    return None


def widened(read):
    """``read`` for elements stored as bfloat16 bits: widened first."""
    return widen_and_round if read is round_to_float16 else widen
