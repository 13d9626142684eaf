"""Order statistics of sorted rows: medians and quantiles read from rows already in
order, one thread per output.

The input is ``rows`` sorted rows of ``n`` elements one after another (NaN last, as
the sorts put it); output ``j * rows + r`` is quantile ``qs[j]`` of row ``r`` (the
quantiles' axis first, as NumPy's result). Each thread finds its row's count (``n``,
or for the NaN-skipping forms the place of the first NaN, by a binary search), the
two neighbouring order statistics NumPy's method names, and interpolates between them
as ``numpy.lib._function_base_impl._lerp`` does:

* ``d = b - a``, then ``a + d * t`` for ``t < 0.5`` and ``b - d * (1 - t)`` otherwise
  (exact at both ends; ``d`` is NaN where ``a`` and ``b`` are the same infinity, as
  NumPy's; each product rounded before the add, as NumPy's, never fused:
  :func:`rounded_product`);
* a virtual index at or past the last element reads it twice with NumPy's weight
  there (``_get_indexes`` puts index -1: weight ``v + 1``), so even the sign of a zero
  is NumPy's (the 0.5 quantile of ``[-0.0]`` is -0.0);
* the median is NumPy's ``mean`` of the middle one or two: ``(0.0 + a + b) / 2`` in
  the mean's accumulator (float32 for float16 and float32, float64 otherwise); the sum
  starts from +0.0 as ``np.add.reduce``'s, so the median of ``[-0.0]`` is +0.0.

NumPy warns (``RuntimeWarning``) when that arithmetic meets an IEEE invalid operation
(``inf - inf``, ``inf * 0``: the median of ``[-inf, inf]``) or an overflow; the kernel
tests every operation NumPy's formulas perform (``_lerp`` computes ``a + d * t`` for
every element and ``b - d * (1 - t)`` where ``t >= 0.5``), on every row NumPy
interpolates (a row holding a NaN too: NumPy computes it before putting the NaN), and
sets ``flags[INVALID]`` or ``flags[OVERFLOW]`` for the caller to warn once.

Methods (Hyndman and Fan, 1996, as NumPy names them): ``linear`` (their 7th: the
virtual index ``(count - 1) q``), ``lower``, ``higher``, ``nearest`` (its index
rounded half to even), ``midpoint``; ``take`` reads the element at an integer
virtual index (NumPy's path for integer ``q``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, float64, from_dtype, int64

from numbakern.kernels.elementwise import THREADS, grid_for
from numbakern.kernels.float16 import round_to_float16
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import SIMULATOR
from numbakern.runtime.launch import launch

MEDIAN, LINEAR, MIDPOINT, TAKE, LOWER, HIGHER, NEAREST = range(7)
METHODS = {"linear": LINEAR, "lower": LOWER, "higher": HIGHER, "nearest": NEAREST,
           "midpoint": MIDPOINT}
INTERPOLATING = (MEDIAN, LINEAR, MIDPOINT)  # the others read one element as it is
INVALID, OVERFLOW = range(2)  # the slots of ``flags``: NumPy's two floating-point warnings


def order_stats_into(values, qs, out, counts, flags, rows: int, n: int, method: int,
                     skip_nan: bool, compute, stream, q_dtype: str = "float64") -> None:
    """``out[j * rows + r]``: quantile ``qs[j]`` of sorted row ``r`` of ``values``.

    Args:
        values: 1-D device array of ``rows * n`` sorted elements (any dtype the sorts
            take), ``n >= 1``.
        qs: 1-D float64 device array of the quantiles in [0, 1] (one unused element
            for :data:`MEDIAN`).
        out: 1-D device array of ``qs.size * rows`` results: NumPy's result dtype
            for the methods that read one element (``values``' own), ``compute`` for
            the others; each result is assigned into it (the store casts).
        counts: 1-D int64 device array of ``rows`` (``skip_nan``: each row's number of
            non-NaN elements is written there), else of one unused element.
        flags: 1-D int32 device array of 2 zeros: ``flags[INVALID]`` is set to 1 where
            the interpolation meets an invalid operation, ``flags[OVERFLOW]`` where it
            overflows (NumPy's ``RuntimeWarning`` cases; integers never set them).
        method: one of :data:`MEDIAN`, :data:`LINEAR`, ... .
        skip_nan: count only the non-NaN elements (NaN sorts last); otherwise a row
            whose last element is NaN gives NaN. A row of no counted elements gives NaN.
        compute: the dtype of the arithmetic (float32 or float64): NumPy's result
            dtype, float32 for float16 results (rounded once, when delivered).
        q_dtype: the float type of the ``q`` array (``"float16"``, ``"float32"`` or
            ``"float64"``), in which NumPy computes the virtual index ``(count - 1) q``
            (:func:`locator`).
    """
    dtype = np.dtype(values.dtype)
    key = ("order_stats", dtype.str, np.dtype(out.dtype).str, int(method), bool(skip_nan),
           np.dtype(compute).str, str(q_dtype), device_key())
    kernel = cached(key, lambda: _build(dtype, int(method), bool(skip_nan),
                                        np.dtype(compute), str(q_dtype)))
    total = int(qs.shape[0]) * int(rows)
    launch(kernel, grid_for(total), THREADS, stream, values, qs, out, counts, flags,
           int(rows), int(n))


def _difference_dtype(dtype: np.dtype) -> np.dtype:
    """Where ``b - a`` is taken: the input's own float (NumPy's), float32 for float16
    (Numba's float16 arithmetic is not portable), float64 for integers and bool (NumPy
    subtracts integers in their own width, where int8's -100 and 100 wrap)."""
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize == 2 else dtype
    return np.dtype(np.float64)


def rounded_product(compute: np.dtype):
    """``mul(x, y)``: ``x * y`` in ``compute`` (float32 or float64), rounded on its own.

    NVVM contracts a product and the add after it into one ``fma``, which rounds once
    where NumPy's ``a + d * t`` rounds twice: quantiles one unit in the last place off
    NumPy's. ``mul.rn`` (libdevice's ``dmul_rn``/``fmul_rn``) is never contracted (PTX
    ISA, "mul": an explicit rounding modifier). The simulator's arithmetic is NumPy's."""
    if SIMULATOR:

        @cuda.jit(device=True)
        def mul(x, y):
            return x * y

        return mul
    from numba.cuda import libdevice

    product = libdevice.dmul_rn if np.dtype(compute) == np.float64 else libdevice.fmul_rn

    @cuda.jit(device=True)
    def mul(x, y):
        return product(x, y)

    return mul


def arithmetic(dtype: np.dtype, compute: np.dtype):
    """Device functions ``(widen, lerp, middle)`` for elements of ``dtype`` computed
    in ``compute``: ``widen`` an element to the number subtracted
    (:func:`_difference_dtype`), ``lerp(a, b, t, flags)`` NumPy's ``_lerp``,
    ``middle(a, b, lo, hi, flags)`` NumPy's mean of the middle one (``lo == hi``) or
    two; both flag invalid operations and overflows as the module doc says."""
    is_float = dtype.kind == "f"
    widen = from_dtype(_difference_dtype(dtype))  # an element as a number to test, subtract
    ct = from_dtype(compute)
    mul = rounded_product(compute)

    @cuda.jit(device=True)
    def check(flags, r, x, y):
        """Flag ``r = x op y`` as IEEE does: invalid, a NaN from operands that are
        not; overflow, an infinity from finite operands. Only stores of 1, so threads
        racing on a slot agree."""
        if not is_float:
            return
        if math.isnan(r):
            if not (math.isnan(x) or math.isnan(y)):
                flags[INVALID] = 1
        elif math.isinf(r) and not (math.isinf(x) or math.isinf(y)):
            flags[OVERFLOW] = 1

    @cuda.jit(device=True)
    def lerp(a_, b_, t, flags):
        wa = widen(a_)
        wb = widen(b_)
        dw = wb - wa
        check(flags, dw, wa, wb)
        d = ct(dw)
        a = ct(wa)
        b = ct(wb)
        # NumPy computes a + d * t everywhere, then b - d * (1 - t) where t >= 0.5
        p = mul(d, ct(t))
        check(flags, p, d, ct(t))
        low = a + p
        check(flags, low, a, p)
        if t >= 0.5:
            u = mul(d, ct(1.0 - t))
            check(flags, u, d, ct(1.0 - t))
            high = b - u
            check(flags, high, b, u)
            return high
        return low

    @cuda.jit(device=True)
    def middle(a_, b_, lo, hi, flags):
        # NumPy's mean sums from +0.0 (np.add.reduce's identity), so the median of
        # -0.0s is +0.0, as np.median's
        a = ct(0.0) + ct(widen(a_))
        if lo == hi:
            return a
        b = ct(widen(b_))
        s = a + b
        check(flags, s, a, b)
        return s / ct(2.0)

    return widen, lerp, middle


def _build(dtype: np.dtype, method: int, skip_nan: bool, compute: np.dtype,
           q_dtype: str):
    """The kernel; every store is an assignment into ``out``, whose dtype casts (a
    method that reads one element stores it unchanged)."""
    is_float = dtype.kind == "f"
    widen, lerp, middle = arithmetic(dtype, compute)
    nan_check = is_float
    locate = locator(method, q_dtype)

    @cuda.jit(device=True)
    def count_of(values, base, n):
        if not (skip_nan and is_float):
            return n
        lo = int64(0)
        hi = n
        while lo < hi:  # the first NaN: every NaN sorts after every number
            mid = (lo + hi) // 2
            if math.isnan(widen(values[base + mid])):
                hi = mid
            else:
                lo = mid + 1
        return lo

    @cuda.jit
    def order_stats(values, qs, out, counts, flags, rows, n):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        total = int64(qs.shape[0]) * rows
        while i < total:
            j = i // rows
            r = i - j * rows
            base = r * n
            count = count_of(values, base, n)
            if skip_nan and j == 0:
                counts[r] = count
            if count > 0:
                lo, hi, t = locate(qs[j], count)
                if method == MEDIAN:
                    out[i] = middle(values[base + lo], values[base + hi], lo, hi, flags)
                elif method == LINEAR or method == MIDPOINT:
                    out[i] = lerp(values[base + lo], values[base + hi], t, flags)
                else:
                    out[i] = values[base + lo]
            # The last element is NaN in both cases: a NaN-skipping form's row of only
            # NaN, or (NumPy's rule) a row holding one, interpolated above as NumPy
            # does (for its warnings) and then NaN
            if count == 0 or (nan_check and not skip_nan and
                              math.isnan(widen(values[base + n - 1]))):
                out[i] = values[base + n - 1]
            i += step

    return order_stats


def locator(method: int, q_dtype: str = "float64"):
    """Device function ``locate(q, count) -> (lo, hi, t)``: the neighbouring order
    statistics and the weight of the upper one, by NumPy's rules for ``method``, the
    virtual index computed in ``q_dtype``, the quantiles' float type, as NumPy computes
    it (:func:`virtual_index`; ``_get_indexes``: a virtual index at or past the last
    element reads the last one twice)."""
    index = virtual_index(q_dtype)
    if method == MEDIAN:
        @cuda.jit(device=True)
        def locate(q, count):
            return (count - 1) // 2, count // 2, float64(0.0)
    elif method in (LINEAR, MIDPOINT):
        midpoint = method == MIDPOINT

        @cuda.jit(device=True)
        def locate(q, count):
            v, last = index(q, count)
            if midpoint:
                v = 0.5 * (float64(math.floor(v)) + float64(math.ceil(v)))
            if v >= last:
                # NumPy reads the last element as index -1 with weight v - (-1) (0 for
                # midpoint's whole index): its lerp then takes b - d * (1 - t), where d
                # is 0 or NaN; only a zero's sign tells it apart from a + d * 0
                return count - 1, count - 1, float64(0.0) if midpoint else v + 1.0
            lo = int64(math.floor(v))
            t = v - float64(lo)
            if midpoint:
                t = 0.0 if t == 0.0 else 0.5
            return lo, lo + 1, t
    else:
        rounding = method

        @cuda.jit(device=True)
        def locate(q, count):
            v = index(q, count)[0]
            f = float64(math.floor(v))
            if rounding == HIGHER:
                f = float64(math.ceil(v))
            elif rounding == NEAREST:  # np.around: half to even
                d = v - f
                if d > 0.5 or (d == 0.5 and f % 2.0 == 1.0):
                    f += 1.0
            # count - 1 rounded up to q's type (float16 from 2052 elements, float32
            # past 2**24) puts q = 1 one past the end, where NumPy's partition fails
            k = min(int64(f), count - 1)
            return k, k, float64(0.0)

    return locate


def virtual_index(q_dtype: str):
    """Device function ``index(q, count) -> (v, last)``: NumPy's virtual index
    ``(count - 1) q`` and ``count - 1``, both as NumPy holds them for a ``q`` array of
    ``q_dtype`` (the Python int ``count - 1`` taking the array's type: NEP 50), as
    float64. A float16 product is rounded once from float64 (exact for two float16
    values), as float16's own multiply rounds it; where ``count - 1`` rounds to inf
    (from 65520) NumPy's index overflows (its quantile then fails), and float32
    stands in."""
    if q_dtype == "float16":

        @cuda.jit(device=True)
        def index(q, count):
            n1 = float64(count - 1)
            last = float64(round_to_float16(n1))
            if math.isinf(last):
                return float64(float32(n1) * float32(q)), float64(float32(n1))
            return float64(round_to_float16(last * q)), last

        return index
    vt = from_dtype(np.dtype(q_dtype))

    @cuda.jit(device=True)
    def index(q, count):
        return float64(vt(count - 1) * vt(q)), float64(vt(count - 1))

    return index
