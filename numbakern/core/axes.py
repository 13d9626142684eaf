"""NumPy's rules for ``axis``, ``keepdims`` and ``out=``, checked before any launch.

* ``axis``: ``None`` (every axis), an int (negative counts from the end) or a tuple
  of ints; out of range raises :class:`AxisError` (NumPy's own class, a ``ValueError``
  and an ``IndexError``), a repeated axis ``ValueError``, a non-integer ``TypeError``.
  As NumPy, a 0-d array takes ``axis=0`` or ``-1`` as an int (not in a tuple).
* ``keepdims``: reduced axes stay as length-1 axes.
* ``out``: must be an array of the input's library (NumPy for NumPy input, CuPy for
  CuPy, any ``__cuda_array_interface__`` array for other device input) with exactly
  the result's shape (``ValueError`` otherwise). The result is cast into it with
  ``same_kind`` casting: float results go to float arrays, integers to integers or
  floats, bool anywhere. That is stricter than NumPy's reductions, which cast
  ``unsafe``ly (a float sum into an int array): such an ``out`` raises
  :class:`OutDtypeError`, a ``ValueError`` that is also a ``TypeError``, the class
  NumPy raises for a forbidden cast. Indices (argmax and friends) need an integer
  ``out``, as NumPy's argmax (int64 results; a narrower integer ``out`` wraps).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from numbakern.runtime.checks import check_flag

try:
    from numpy.exceptions import AxisError
except ImportError:  # NumPy < 1.25
    AxisError = np.AxisError

__all__ = ["AxisError", "OutDtypeError", "check_out", "normalize_axes", "normalize_axis",
           "result_shape"]

OUT_CASTING = "same_kind"


class OutDtypeError(ValueError, TypeError):
    """``out``'s dtype cannot take the result under ``same_kind`` casting."""


_ANY_AXES = "axis must be None, an int or a tuple of ints"
_ONE_AXIS = "axis must be None or an int (one axis)"


def axis_index(axis: Any, allowed: str = _ANY_AXES) -> int:
    """``axis`` as an int (any object with ``__index__`` but a bool), or a TypeError
    saying what is ``allowed``."""
    if isinstance(axis, (bool, np.bool_)):  # operator.index(True) is 1: NumPy refuses it
        raise TypeError(f"{allowed}, got {axis!r}")
    try:
        return operator.index(axis)
    except TypeError:
        raise TypeError(
            f"{allowed}; '{type(axis).__name__}' object cannot be interpreted as an integer"
        ) from None


def normalize_axis(axis: Any, ndim: int, allowed: str = _ONE_AXIS) -> int:
    """One axis as a non-negative int (argmax's ``axis``; a tuple raises TypeError
    whose message says what is ``allowed``)."""
    a = axis_index(axis, allowed)
    if not -ndim <= a < ndim:
        raise AxisError(a, ndim)
    return a % ndim


def optional_axis(axis: Any, ndim: int) -> int | None:
    """``None`` (the flattened input, as NumPy's cumsum and sort), or one axis."""
    return None if axis is None else normalize_axis(axis, ndim)


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` as a sorted tuple of distinct non-negative axes (``None``: all)."""
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, tuple):  # a list too, as NumPy: not an int
        if ndim == 0 and axis_index(axis) in (0, -1):
            return ()  # NumPy's 0-d reductions take axis=0 and axis=-1
        return (normalize_axis(axis, ndim, _ANY_AXES),)
    axes = tuple(normalize_axis(a, ndim, _ANY_AXES) for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(axes))


def result_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    """The shape of reducing ``axes`` of ``shape``."""
    if keepdims:
        return tuple(1 if a in axes else n for a, n in enumerate(shape))
    return tuple(n for a, n in enumerate(shape) if a not in axes)


def check_out(out: Any, shape: tuple, dtype: np.dtype, kind: str, name: str,
              integer: bool = False) -> None:
    """Raise unless ``out`` (or ``None``) can receive a ``dtype`` result of ``shape``.

    Args:
        out: the user's ``out``.
        shape, dtype: the result's.
        kind: the input's array library, ``"numpy"``, ``"cupy"`` or ``"device"``.
        name: the function, for messages.
        integer: ``out`` must have an integer dtype (indices, as NumPy's argmax).

    Raises:
        TypeError: ``out`` is not an array of the input's library.
        ValueError: a wrong shape, a read-only NumPy ``out``; :class:`OutDtypeError`
            for a wrong dtype.
    """
    if out is None:
        return
    if kind == "numpy" and not isinstance(out, np.ndarray):
        raise TypeError(f"{name}: out must be a numpy.ndarray for NumPy input, got "
                        f"{type(out).__name__}")
    if kind == "cupy" and type(out).__module__.split(".")[0] != "cupy":
        raise TypeError(f"{name}: out must be a cupy.ndarray for CuPy input, got "
                        f"{type(out).__name__}")
    if kind == "device" and not (hasattr(out, "__cuda_array_interface__")
                                 or getattr(out, "__cuda_ndarray__", False)):
        raise TypeError(f"{name}: out must be a device array (with "
                        f"__cuda_array_interface__) for device input, got "
                        f"{type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: out has shape {tuple(out.shape)}, the result has shape "
                         f"{tuple(shape)}")
    if kind == "numpy" and not out.flags.writeable:
        raise ValueError(f"{name}: out must be a writeable NumPy array")
    if integer and np.dtype(out.dtype).kind not in "iu":
        raise OutDtypeError(f"{name}: indices need an integer out, got dtype "
                            f"{np.dtype(out.dtype)}")
    if not np.can_cast(dtype, out.dtype, casting=OUT_CASTING):
        raise OutDtypeError(f"{name}: cannot cast the {np.dtype(dtype)} result to out's "
                            f"dtype {np.dtype(out.dtype)} with casting rule '{OUT_CASTING}'")
