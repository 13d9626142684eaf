"""Values as a GPU converts and atomically updates them, for Numba's CUDA simulator.

Numba compiles a store ``a[i] = v`` and every ``cuda.atomic`` operand as a cast to the
array's type (an atomic's signature is ``(ary.dtype, ary, index, ary.dtype)``), which
NVPTX lowers to PTX ``cvt``. Numba's simulator instead hands the value to NumPy,
whose casts are C's (float to integer out of range: undefined; x86 wraps) or raise
(NumPy 2: a Python int out of range), and folds the atomics in Python, uncast. Here:

* **float to integer** (:func:`gpu_cast`): rounded toward zero and saturated to the
  destination's range (``cvt.rzi``, which clamps by default). A float32 or float64
  going to 8 bits is converted at 16 (``cvt.rzi.s16``: PTX has no 8-bit registers) and
  its low byte kept (uint8 of 300.0 is 44, of 1e10 is 255); a float16 is converted
  at 8 bits (300 is 255). NaN becomes the sign bit alone of the width converted at
  (int32 ``-2**31``, uint32 ``2**31``) from a float64, and into 64 bits from any
  float; else 0. Measured on an H100 with numba-cuda 0.30.4 (bench/NOTES.md), and
  held to the GPU by ``tests/runtime/test_simvalues.py``.
* **integer to integer**: wrapped to the destination's width (two's complement).
* **to float**: rounded to nearest (NumPy's cast).
* **atomics** (:class:`Atomic`): the operand cast first, then ``old op operand``
  computed in the array's dtype (integers wrap, floats overflow to inf silently) and
  stored, ``old`` returned. ``max``/``min`` keep ``old`` unless the operand compares
  greater/smaller (a NaN operand is dropped, a NaN ``old`` stays); ``nanmax``/
  ``nanmin`` take the operand where ``old`` is NaN, so only two NaN give NaN, and
  ``-0.0`` stays against ``0.0``. One lock serves every atomic, so an ``add`` and a
  ``sub`` on one element are atomic against each other (Numba's simulator has a lock
  per operation). An atomic Numba does not compile (``numba.cuda.cudadecl``: arrays
  of at least one dimension, of int32, uint32, int64, uint64, float32 or float64;
  the bitwise ones, ``exch`` and ``cas`` of the integers, ``inc`` and ``dec`` of the
  unsigned, ``compare_and_swap`` of 1-D integer arrays) is a ``TypeError``, where a
  GPU refuses the kernel.
"""

from __future__ import annotations

import functools
import math
import operator
import threading

import numpy as np

_lock = threading.Lock()

_NUMBERS = frozenset(map(np.dtype, ("i4", "u4", "i8", "u8", "f4", "f8")))
_INTEGERS = frozenset(map(np.dtype, ("i4", "u4", "i8", "u8")))
_UNSIGNED = frozenset(map(np.dtype, ("u4", "u8")))
_NAMES = {_NUMBERS: "int32, uint32, int64, uint64, float32 or float64",
          _INTEGERS: "int32, uint32, int64 or uint64", _UNSIGNED: "uint32 or uint64"}


def _compiled(name: str, array, dtypes: frozenset) -> np.dtype:
    """``array``'s dtype, where Numba compiles atomic ``name`` on it; else TypeError."""
    dtype = array.dtype
    if dtype not in dtypes or not array.ndim:
        raise TypeError(f"cuda.atomic.{name} on a {array.ndim}-d {dtype} array, which "
                        f"Numba does not compile (a GPU refuses the kernel): it takes "
                        f"arrays of {_NAMES[dtypes]}, of one dimension or more")
    return dtype


#: each float type's greatest finite value, by type code (a dict lookup: atomics are hot)
_LARGEST = {t.char: float(np.finfo(t).max) for t in map(np.dtype, "efdg")}


def gpu_cast(val, dtype: np.dtype):
    """Scalar ``val`` converted into ``dtype`` (an integer or float ``np.dtype``) as a
    GPU's ``cvt`` does (the module)."""
    if type(val) is dtype.type:
        return val
    if dtype.kind in "iu":
        if isinstance(val, (float, np.floating)):
            source = np.dtype(type(val)).itemsize * 8 if isinstance(val, np.floating) else 64
            return wrapped(_saturated(float(val), source, dtype), dtype)
        return _integer(int(val), dtype)
    return _rounded(float(val), dtype)


def _integer(n: int, dtype: np.dtype):
    """Python int ``n`` in integer ``dtype``, wrapped where it is out of range."""
    try:
        return dtype.type(n)
    except OverflowError:  # (NumPy 2's, for a Python int out of range)
        return wrapped(n, dtype)


def _rounded(v: float, dtype: np.dtype):
    """Python float ``v`` rounded to float ``dtype``, inf past its range, unwarned (the
    sum or product of two ``dtype`` values made in float64 and rounded once is the
    one ``dtype``'s arithmetic makes: 53 bits hold twice float32's 24, and 2)."""
    if abs(v) <= _LARGEST[dtype.char] or v != v:
        return dtype.type(v)
    with np.errstate(over="ignore"):
        return dtype.type(v)


def wrapped(n: int, dtype: np.dtype):
    """Python int ``n`` in integer ``dtype``, its bits past the width dropped."""
    bits = dtype.itemsize * 8
    n &= (1 << bits) - 1
    if dtype.kind == "i" and n >> (bits - 1):
        n -= 1 << bits
    return dtype.type(n)


def _saturated(v: float, source: int, dtype: np.dtype) -> int:
    """``v``, a float of ``source`` bits, rounded toward zero and clamped to
    ``dtype``'s range at the width PTX converts it in; NaN as the module says."""
    bits = dtype.itemsize * 8
    bits = bits if source == 16 else max(16, bits)
    if math.isnan(v):
        return 1 << (bits - 1) if source == 64 or bits == 64 else 0
    low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if dtype.kind == "i" else \
        (0, (1 << bits) - 1)
    return high if v >= high else low if v <= low else int(v)


def _fold(op, old, v, dtype: np.dtype):
    """``op(old, v)`` in ``dtype``: integers wrapped, floats silently inf."""
    if dtype.kind in "iu":
        return _integer(op(int(old), int(v)), dtype)
    return _rounded(op(float(old), float(v)), dtype)


def _update(name, dtypes, array, index, val, new):
    """Atomic ``name`` (on arrays of ``dtypes``): ``array[index] = new(old, val cast,
    dtype)`` under the lock; ``old`` returned."""
    dtype = _compiled(name, array, dtypes)
    v = gpu_cast(val, dtype)
    with _lock:
        old = array[index]
        array[index] = new(old, v, dtype)
    return old


_add = functools.partial(_fold, operator.add)
_sub = functools.partial(_fold, operator.sub)
_and = functools.partial(_fold, operator.and_)
_or = functools.partial(_fold, operator.or_)
_xor = functools.partial(_fold, operator.xor)


def _exchanged(old, v, dtype):
    return v


def _larger(old, v, dtype):
    return v if v > old else old


def _smaller(old, v, dtype):
    return v if v < old else old


def _nan_larger(old, v, dtype):
    return v if old != old or v > old else old


def _nan_smaller(old, v, dtype):
    return v if old != old or v < old else old


def _wrapping_inc(old, v, dtype):
    return dtype.type(0) if old >= v else _add(old, 1, dtype)


def _wrapping_dec(old, v, dtype):
    return v if old == 0 or old > v else _sub(old, 1, dtype)


class Atomic:
    """``cuda.atomic`` under the simulator, as Numba compiles it for a GPU (the
    module): each returns the element's value before the update. (Installed as a
    subclass of Numba's ``FakeCUDAAtomic``, which keeps any atomic not named here.)"""

    def add(self, array, index, val):
        return _update("add", _NUMBERS, array, index, val, _add)

    def sub(self, array, index, val):
        return _update("sub", _NUMBERS, array, index, val, _sub)

    def and_(self, array, index, val):
        return _update("and_", _INTEGERS, array, index, val, _and)

    def or_(self, array, index, val):
        return _update("or_", _INTEGERS, array, index, val, _or)

    def xor(self, array, index, val):
        return _update("xor", _INTEGERS, array, index, val, _xor)

    def inc(self, array, index, val):
        return _update("inc", _UNSIGNED, array, index, val, _wrapping_inc)

    def dec(self, array, index, val):
        return _update("dec", _UNSIGNED, array, index, val, _wrapping_dec)

    def exch(self, array, index, val):
        return _update("exch", _INTEGERS, array, index, val, _exchanged)

    def max(self, array, index, val):
        return _update("max", _NUMBERS, array, index, val, _larger)

    def min(self, array, index, val):
        return _update("min", _NUMBERS, array, index, val, _smaller)

    def nanmax(self, array, index, val):
        return _update("nanmax", _NUMBERS, array, index, val, _nan_larger)

    def nanmin(self, array, index, val):
        return _update("nanmin", _NUMBERS, array, index, val, _nan_smaller)

    def cas(self, array, index, old, val):
        return _update("cas", _INTEGERS, array, index, val,
                       lambda o, v, d: v if o == gpu_cast(old, d) else o)

    def compare_and_swap(self, array, old, val):
        if array.ndim != 1:
            raise TypeError(f"cuda.atomic.compare_and_swap on a {array.ndim}-d array, "
                            "which Numba does not compile: it takes 1-D arrays")
        return self.cas(array, 0, old, val)
