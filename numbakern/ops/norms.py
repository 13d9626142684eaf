"""The ops of vector norms: each element mapped to ``|x|``, ``x * x``, ``x != 0`` or
``|x| ** p``, then summed, or the largest or smallest ``|x|`` kept.

NumPy's ``linalg.vector_norm`` casts integer and bool input to float64 first, then
works in the float dtype; each map here widens its element to float64 before it
takes ``abs``, a square or a power, so no integer wraps (``abs`` of int8's -128) and
a float32 or float16 square or absolute value is the one NumPy computes (the product
of two float32 values is exact in float64 and rounds once into the accumulator).
The finishing root (``sqrt``, ``** (1 / p)``) is :func:`root_of`, which the reduction's
store (``numbakern/kernels/finishes.py``) or a separate kernel applies.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from numbakern.ops import Op, _add, _constant_identity, _float_identity, _max, _min


#: the natural log of float64's largest value: a power whose log passes it overflows
LOG_MAX = math.log(np.finfo(np.float64).max)


@cuda.jit(device=True)
def root_of(s, exponent):
    """A vector norm's last step on a sum ``s`` (float64): ``sqrt(s)`` for an
    ``exponent`` of 0.5 (IEEE's correctly rounded root, as NumPy's ``sqrt``), else
    ``s ** exponent``; a sum of 0 under a negative exponent, and a power past
    float64's range, give ``inf``, as NumPy's power does (Python's floats, which the
    simulator runs, would raise)."""
    if exponent == 0.5:
        return math.sqrt(s)
    if exponent == 0.0:  # an order past the result dtype's range: NumPy's s ** 0
        return 1.0
    if s == 0.0:
        return math.inf if exponent < 0 else 0.0
    if s == s and s != math.inf and exponent * math.log(s) > LOG_MAX:
        return math.inf  # (an overflow, for 0 < p < 1)
    return s ** exponent


def norm_dtype(in_dtype: np.dtype, dtype=None) -> np.dtype:
    """NumPy's result dtype of ``vector_norm``: a float input's own, else float64; or
    ``dtype`` (the Dask form's partials, kept in the accumulator dtype)."""
    if dtype is not None:
        return np.dtype(dtype)
    in_dtype = np.dtype(in_dtype)
    return in_dtype if in_dtype.kind == "f" else np.dtype(np.float64)


def _abs(v, i):
    return abs(float(v))


def _square(v, i):
    w = float(v)
    return w * w


def _nonzero(v, i):
    return 1.0 if v != 0 else 0.0


def _op(name: str, combine, identity, map_, **kwargs) -> Op:
    return Op(name, combine, identity, map=map_, result_dtype=norm_dtype, kinds="biuf",
              **kwargs)


#: ord=1: the sum of ``|x|``
SUM_ABS = _op("sum_abs", _add, _constant_identity(0), _abs, atomic="add")
#: ord=2: the sum of ``x * x`` (the norm is its square root)
SUM_SQUARES = _op("sum_squares", _add, _constant_identity(0), _square, atomic="add")
#: ord=0: the count of non-zero elements, as a float (NaN counts)
COUNT_NONZERO = _op("count_nonzero_norm", _add, _constant_identity(0), _nonzero,
                    atomic="add")
#: ord=inf: the largest ``|x|`` (NaN propagates; no elements: 0, NumPy's ``initial=0``)
MAX_ABS = _op("max_abs", _max, _constant_identity(0), _abs, atomic="max",
              nan_propagating=True)
#: ord=-inf: the smallest ``|x|`` (NaN propagates; no elements: NumPy's ValueError)
MIN_ABS = _op("min_abs", _min, _float_identity(np.inf), _abs, atomic="min",
              nan_propagating=True, empty="raise")

@functools.lru_cache(maxsize=None)
def sum_powers(p: float) -> Op:
    """Any other ord ``p`` (a non-zero float, not +-1, 2 or +-inf): the sum of
    ``|x| ** p`` (a zero element gives ``inf`` for ``p < 0``, as NumPy's power); the
    norm is its ``1 / p``-th power."""
    p = float(p)
    negative = p < 0

    def power(v, i):
        a = abs(float(v))
        if a == 0.0:
            return math.inf if negative else 0.0
        if a != a:
            return a
        if a == math.inf:
            return 0.0 if negative else a
        if p * math.log(a) > LOG_MAX:  # the simulator's Python floats would raise
            return math.inf
        return a ** p

    return _op(f"sum_powers_{p!r}", _add, _constant_identity(0), power, atomic="add")
