"""A float product with NumPy's sequential special values, computed by a tree.

NumPy's ``cumprod`` multiplies in order, rounding to the result dtype at every step,
so once the running product leaves the finite non-zero range it is stuck there: 0
stays 0 and +-inf stays +-inf (only their signs change), until a NaN or an
``inf * 0`` makes it NaN. A tree multiplies later factors first: ``[1e30, 1e30, 0]``
in float32 is ``inf * 0 = NaN`` for NumPy (the running product overflowed before the
0 came) but ``1e30 * 0 = 0`` for a tree; ``[1e-30, 1e-30, 1e30]`` is 0 for NumPy and
``1e-30`` for a tree that multiplies the last two first (pytorch/pytorch#88556).

Two scans give NumPy's values under any scan strategy:

1. :data:`SCALED_PROD`: each element as ``(mantissa, exponent)`` (``math.frexp``),
   products renormalised at every combine, so no partial product of any subtree
   overflows or underflows; :func:`scaled_value` rounds the prefix to the result
   dtype once. Where it is finite and non-zero, NumPy's running product has not left
   the range either, and the value is NumPy's up to rounding.
2. :data:`FIRST_EXIT`: a scan of one small code per element (:func:`element_code`)
   that finds the first place the rounded prefix left the finite non-zero range, the
   class of the value there (+-0, +-inf, NaN), and the classes of the factors after
   it (a negative one, a zero, an inf, a NaN: order does not matter to them).
   :func:`settle` turns that into NumPy's value.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float64, int32, int64

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


def _split(value, i):
    m, e = math.frexp(float64(value))
    if m == 0 or m != m or math.isinf(m):
        return m, int64(0)
    return m, int64(e)


def _split_nan_as_one(value, i):
    if value != value:
        return float64(0.5), int64(1)
    m, e = math.frexp(float64(value))
    if m == 0 or math.isinf(m):
        return m, int64(0)
    return m, int64(e)


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
SCALED_PROD = _scaled("prod", _split)
#: the same, NaN read as 1 (``nancumprod``)
SCALED_NANPROD = _scaled("nanprod", _split_nan_as_one)

# --- pass 2: where the running product first left the range --------------------------
# One int32 code per element and per segment of elements:
#   EXIT                        the rounded running product left the finite non-zero
#                               range in this segment; then V_* give its value there
#   V_NEG, V_ZERO, V_INF, V_NAN that value's sign and class
#   T_NEG, T_ZERO, T_INF, T_NAN the factors after it: an odd count of sign bits, a
#                               zero, an inf, a NaN among them
#   A_NEG, A_ZERO, A_INF, A_NAN the same for every factor of the segment
# A's bits sit 4 places above T's, so a segment's A becomes T when it follows an exit.

EXIT = 1
V_NEG, V_ZERO, V_INF, V_NAN = 2, 4, 8, 16
T_NEG, T_ZERO, T_INF, T_NAN = 32, 64, 128, 256
A_NEG, A_ZERO, A_INF, A_NAN = 512, 1024, 2048, 4096
_HEAD = EXIT | V_NEG | V_ZERO | V_INF | V_NAN
_TAIL = T_NEG | T_ZERO | T_INF | T_NAN
_ALL = A_NEG | A_ZERO | A_INF | A_NAN


def _first_exit(a, b):
    every = (a | b) & _ALL & ~(A_NEG)
    every |= (a ^ b) & A_NEG  # the sign count's parity
    if a & EXIT:
        tail = (a & _TAIL & ~T_NEG) | ((b & _ALL & ~A_NEG) >> 4)
        tail |= (a & T_NEG) ^ ((b & A_NEG) >> 4)
        return (a & _HEAD) | tail | every
    return (b & (_HEAD | _TAIL)) | every


def _code_identity(dtype):
    return np.dtype(dtype).type(0)


#: the first exit from the finite range, and the factors after it (codes above)
FIRST_EXIT = Op("first_exit", _first_exit, _code_identity, commutative=False,
                kinds="i")


@cuda.jit(device=True)
def _classes(value, shift):
    """Sign, zero, inf and NaN bits of ``value``, at V's places shifted by ``shift``."""
    if value != value:
        return V_NAN << shift
    sign = V_NEG << shift if math.copysign(1.0, value) < 0 else 0
    if value == 0:
        return sign | (V_ZERO << shift)
    if math.isinf(value):
        return sign | (V_INF << shift)
    return sign


@cuda.jit(device=True)
def element_code(y, x, nan_as_one):
    """The pass-2 code of one element: ``y`` the rounded prefix product at it (pass
    1), ``x`` its factor (NaN read as 1 when ``nan_as_one``)."""
    x = float64(x)
    y = float64(y)
    code = 0 if (nan_as_one and x != x) else _classes(x, 8)
    if y != y or y == 0 or math.isinf(y):
        code |= EXIT | _classes(y, 0)
    return int32(code)


@cuda.jit(device=True)
def settle(y, code):
    """NumPy's running product where pass 1 gave ``y`` and pass 2 ``code``."""
    if not code & EXIT:
        return float64(y)
    if code & (V_NAN | T_NAN):
        return math.nan
    negative = ((code & V_NEG) != 0) != ((code & T_NEG) != 0)
    if code & V_ZERO:
        if code & T_INF:
            return math.nan
        return -0.0 if negative else 0.0
    if code & T_ZERO:
        return math.nan
    return -math.inf if negative else math.inf
