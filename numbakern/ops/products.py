"""A float product with NumPy's sequential special values, computed by a tree.

NumPy's ``cumprod`` multiplies in order, rounding to the result dtype at every step,
so once the running product leaves the finite non-zero range it is stuck there: 0
stays 0 and +-inf stays +-inf (only their signs change), until a NaN or an
``inf * 0`` makes it NaN. A tree multiplies later factors first: ``[1e30, 1e30, 0]``
in float32 is ``inf * 0 = NaN`` for NumPy (the running product overflowed before the
0 came) but ``1e30 * 0 = 0`` for a tree; ``[1e-30, 1e-30, 1e30]`` is 0 for NumPy and
``1e-30`` for a tree that multiplies the last two first (pytorch/pytorch#88556).

The tree is right until the rounded running product first leaves the finite non-zero
range (it overflows or rounds to 0, or meets a 0, an inf or a NaN); after that NumPy's
value depends only on the value there and on the classes of the factors (a zero, an
inf, a NaN, the parity of their sign bits), which a scan carries exactly. So:

1. A scan gives each element its rounded prefix product: for float16 and float32
   results the plain product in float64 (before the exit every prefix is in the result
   dtype's range, so the product of any run of consecutive factors is within its
   square, which float64 holds); for float64 results :data:`SCALED_PROD`, products of
   ``(mantissa, exponent)`` renormalised at every combine, which nothing overflows.
   A second scan gives the class bits of the factors so far (:func:`rounded_ops`).
2. ``numbakern/kernels/products.py`` finds each row's first element whose rounded
   product :func:`left_range`, and :func:`settle` s every element after it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float64, from_dtype, int8, int64

from numbakern.ops import Op, numpy_sum_dtype

# --- pass 1: (mantissa, exponent) products ----------------------------------------------

#: an exponent above this overflows float64 for every mantissa in [0.5, 1); below
#: -_EXPONENT_CLAMP every one rounds to 0 (kept in int32, which ldexp takes)
_MAX_EXPONENT = 1024
_EXPONENT_CLAMP = 4000


def _scaled_mul(a0, a1, b0, b1):
    m, d = math.frexp(a0 * b0)
    if m == 0 or m != m or math.isinf(m):  # 0, NaN, inf: no exponent to carry
        return m, int64(0)
    return m, a1 + b1 + int64(d)


def _splitter(nan_as_one: bool):
    """``map(value, i) -> (mantissa, exponent)`` of one factor (``math.frexp``; NaN read
    as 1 when ``nan_as_one``)."""

    def split(value, i):
        if nan_as_one and value != value:
            return float64(0.5), int64(1)
        m, e = math.frexp(float64(value))
        if m == 0 or m != m or math.isinf(m):
            return m, int64(0)
        return m, int64(e)

    return split


def scaled_value(m, e):
    """The float64 value of a ``(mantissa, exponent)`` state (0 or inf past the
    range; the caller's cast rounds it to the result dtype)."""
    if e > _MAX_EXPONENT:  # past float64's range (Python's ldexp raises there)
        return m * math.inf
    return math.ldexp(m, int(max(e, -_EXPONENT_CLAMP)))  # int32 on the device


def _scaled_identity(dtypes):
    return np.float64(1.0), np.int64(0)


def _scaled_dtypes(in_dtype, dtype=None):
    return np.dtype(np.float64), np.dtype(np.int64)


def _scaled(name: str, split) -> Op:
    return Op(name, _scaled_mul, _scaled_identity, fields=2, map=split,
              state_dtypes=_scaled_dtypes, result_dtype=numpy_sum_dtype, finish=scaled_value)


#: the product as (float64 mantissa in [0.5, 1), int64 exponent): no overflow
SCALED_PROD = _scaled("prod", _splitter(False))
#: the same, NaN read as 1 (``nancumprod``)
SCALED_NANPROD = _scaled("nanprod", _splitter(True))

# --- the classes of the factors so far -------------------------------------------------
# One int8 of bits per prefix: a zero, an inf, a NaN among its factors, and the parity
# of their sign bits. Combined by OR (the parity by XOR): associative and commutative.

ZERO, INF, NAN, NEG = 1, 2, 4, 8


def _merge_classes(a, b):
    return ((a | b) & (ZERO | INF | NAN)) | ((a ^ b) & NEG)


def _classifier(nan_as_one: bool, factor):
    """``map(value, i) -> class bits`` of one factor, the element rounded by ``factor``
    (a Numba type: the result dtype, to which NumPy casts each factor) first; NaN read
    as 1, no bits, when ``nan_as_one``."""

    def class_of(value, i):
        v = float64(factor(value))
        if v != v:
            return int8(0 if nan_as_one else NAN)
        bits = NEG if math.copysign(1.0, v) < 0 else 0
        if v == 0:
            bits |= ZERO
        elif math.isinf(v):
            bits |= INF
        return int8(bits)

    return class_of


def _rounder(nan_as_one: bool, factor):
    """``map(value, i) -> float64``: the element rounded by ``factor`` first (NaN read
    as 1 when ``nan_as_one``)."""

    def rounded(value, i):
        v = float64(factor(value))
        if nan_as_one and v != v:
            return float64(1.0)
        return v

    return rounded


def _int8(in_dtype, dtype=None):
    return np.dtype(np.int8)


def _mul(a, b):
    return a * b


@functools.lru_cache(maxsize=None)
def rounded_ops(result: str, nan_as_one: bool) -> tuple[Op, Op]:
    """``(product, classes)`` ops for a float ``result`` dtype (its name): the product
    of the factors rounded to ``result`` (float16 and float32 results: held in a float64
    state, ``_scan``'s ``states=``; float64: :data:`SCALED_PROD`'s own map already
    rounds to float64) and their class bits (:data:`ZERO` ... :data:`NEG`)."""
    factor = from_dtype(np.dtype(result))
    name = "nanprod" if nan_as_one else "prod"
    if np.dtype(result) == np.float64:
        product = SCALED_NANPROD if nan_as_one else SCALED_PROD
    else:
        product = Op(name, _mul, 1, map=_rounder(nan_as_one, factor),
                     result_dtype=numpy_sum_dtype)
    classes = Op(f"{name}_classes", _merge_classes, 0, map=_classifier(nan_as_one, factor),
                 result_dtype=_int8)
    return product, classes


# --- the settling: NumPy's value after the first exit -----------------------------------


@cuda.jit(device=True)
def left_range(y):
    """Whether the rounded running product ``y`` is no longer finite and non-zero."""
    return y != y or y == 0 or math.isinf(y)


@cuda.jit(device=True)
def settle(exit_value, classes):
    """NumPy's running product at an element after the first exit from the finite
    range: ``exit_value`` the rounded product there (+-0, +-inf or NaN), ``classes``
    the class bits of every factor up to the element.

    Before the exit every factor was finite and non-zero, so the factors after it have
    the classes of all of them; NumPy's loop then gives NaN after a NaN, after a zero
    once at inf and after an inf once at 0, and otherwise the exit's class with the
    sign of every factor's sign bit.
    """
    v = float64(exit_value)
    if v != v or classes & NAN:
        return math.nan
    negative = (classes & NEG) != 0
    if v == 0:
        if classes & INF:
            return math.nan
        return -0.0 if negative else 0.0
    if classes & ZERO:
        return math.nan
    return -math.inf if negative else math.inf
