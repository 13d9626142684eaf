"""Argument checks every layer shares: counts and flags, with messages that name the
argument and say what is allowed."""

from __future__ import annotations

import numbers

import numpy as np

from .device import MAX_GRID


def check_count(value, name: str) -> int:
    """``value`` as an int: a Python or NumPy integer, or a 0-d NumPy integer array (a
    0-d torch tensor arrives as one), not a bool; else TypeError."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        value = value[()]
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return int(value)


def check_optional_count(value, name: str, most: int = MAX_GRID) -> int | None:
    """``None`` (automatic), or ``value`` as an int from 1 to ``most``: TypeError for
    a non-int (a bool or float included), ValueError out of range."""
    if value is None:
        return None
    value = check_count(value, name)
    if not 1 <= value <= most:
        raise ValueError(f"{name} must be a positive int up to {most} or None (automatic), "
                         f"got {value}")
    return value


def check_flag(value, name: str) -> bool:
    """A keyword that must be True or False (``exclusive``, ``descending``, ...)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_keepdims(value) -> bool:
    """``keepdims`` as NumPy's reductions take it: True or False, or an integer (their
    ufuncs read it as one: ``keepdims=1`` keeps the axes; a 0-d integer array too, as
    a 0-d CPU tensor arrives); else TypeError."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biu":
        value = value[()]
    if not isinstance(value, (bool, np.bool_, int, np.integer)):
        raise TypeError(f"keepdims must be True or False (or an integer, as NumPy's), "
                        f"got {value!r}")
    return bool(value)


def check_real(value, name: str):
    """A real number, not a bool: ``value`` itself, or the number in a 0-d NumPy
    array (a 0-d CPU or CUDA tensor arrives as its value); else TypeError."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return value
