"""NumPy's rules for ``axis`` and ``keepdims``, checked before any launch (``out=``:
``numbakern/core/deliver.py``).

* ``axis``: ``None`` (every axis), an int (negative counts from the end) or a tuple
  of ints; out of range raises :class:`AxisError` (NumPy's own class, a ``ValueError``
  and an ``IndexError``), a repeated axis ``ValueError``, a non-integer ``TypeError``.
  As NumPy, a 0-d array takes ``axis=0`` or ``-1`` as an int (not in a tuple).
* ``keepdims``: reduced axes stay as length-1 axes.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from numbakern.runtime.checks import check_flag, check_keepdims

try:
    from numpy.exceptions import AxisError
except ImportError:  # NumPy < 1.25
    AxisError = np.AxisError

__all__ = ["AxisError", "check_flag", "normalize_axes", "normalize_axis",
           "result_shape"]

_ANY_AXES = "axis must be None, an int or a tuple of ints"
_ONE_AXIS = "axis must be None or an int (one axis)"


class _DefaultAxis(int):
    """``axis``'s default ``-1``, told apart from an ``axis=-1`` the caller gave (so
    that torch's ``dim=`` beside an explicit ``axis=`` is refused)."""

    def __repr__(self) -> str:
        return "-1"


#: the last axis, as a default that :func:`axis_or_dim` tells from a given ``-1``
LAST = _DefaultAxis(-1)


class _Flattened:
    """``axis``'s default ``None`` (the flattened input, as ``np.cumsum``'s), told
    apart from an ``axis=None`` the caller gave (None cannot be subclassed)."""

    def __repr__(self) -> str:
        return "None"


#: the flattened input, as a default that :func:`axis_or_dim` tells from a given None
FLAT = _Flattened()


def axis_or_dim(axis: Any, dim: Any, name: str, default: Any = LAST) -> Any:
    """The axis a call asks for, by NumPy's ``axis=`` or torch's ``dim=``: ``dim`` where
    ``axis`` was left at its ``default`` (:data:`LAST`, or :data:`FLAT` for a function
    that flattens by default: None then).

    Raises:
        TypeError: both given.
    """
    if dim is None:
        return -1 if axis is LAST else None if axis is FLAT else axis
    if axis is not default:
        raise TypeError(f"{name}: give the axis as axis= or as torch's dim=, not both "
                        f"(got axis={axis!r}, dim={dim!r})")
    return dim


def keepdims_or_keepdim(keepdims: Any, keepdim: Any, name: str) -> Any:
    """Whether reduced axes are kept, by NumPy's ``keepdims=`` or torch's ``keepdim=``:
    ``keepdim`` where given (``keepdims`` left at a false bool or integer).

    Raises:
        TypeError: both given.
    """
    if keepdim is None:
        return keepdims
    if check_keepdims(keepdims):
        raise TypeError(f"{name}: give keepdims= or torch's keepdim=, not both "
                        f"(got keepdims={keepdims!r}, keepdim={keepdim!r})")
    return check_flag(keepdim, f"{name}: keepdim")


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


def flat_axis_of_0d(axis: Any, ndim: int) -> Any:
    """``axis``, or None where NumPy takes a 0-d array along it as the one element of
    the flattened array (its scans and argsort: along 0 or -1; another int is out of
    bounds for that one dimension, NumPy's ``AxisError``)."""
    if ndim != 0 or axis is None:
        return axis
    normalize_axis(axis, 1)  # (their one axis: a tuple is refused as argsort's)
    return None


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
    if len(set(axes)) != len(axes):  # NumPy's words, then which axis repeats
        twice = next(a for a in axes if axes.count(a) > 1)
        raise ValueError(f"duplicate value in 'axis': {tuple(axis)} names axis {twice} "
                         f"of {ndim} more than once")
    return tuple(sorted(axes))


def result_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    """The shape of reducing ``axes`` of ``shape``."""
    if keepdims:
        return tuple(1 if a in axes else n for a, n in enumerate(shape))
    return tuple(n for a, n in enumerate(shape) if a not in axes)
