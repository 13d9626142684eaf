"""Whole-array reductions with NumPy's semantics: sum, prod, max, min, bitwise, reduce.

Every function takes:

* ``x``: a NumPy array (or anything ``np.asarray`` takes), a CuPy array, or any
  object with ``__cuda_array_interface__``; any shape, any strides; dtypes bool,
  int8-int64, uint8-uint64, float16, float32, float64.
* ``strategy``: how threads combine (``numbakern.strategies.resolve`` explains the
  names); default ``"two_pass/warp_shuffle"``, deterministic.
* ``stream``: a Numba stream, a CuPy stream or a raw pointer; default CuPy's current
  stream for CuPy input, else the default stream.

and returns a NumPy scalar for NumPy input, a 0-d CuPy array (never copied to the
host) for CuPy input, and a 0-d Numba device array for other device input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import kernels
from . import ops as _ops
from . import strategies as _strategies
from .arrays import Workspace, as_array_like, flat_view, kind_of, resolve_stream
from .job import ReduceJob

_AXIS_NOT_YET = "axis reductions are not implemented yet; pass axis=None"


def _run(x: Any, op: _ops.Op, strategy, dtype=None, stream=None, axis=None):
    """Reduce the whole of ``x`` with ``op``: validation, dtypes, launch, result."""
    if axis is not None:
        raise NotImplementedError(_AXIS_NOT_YET)
    x = as_array_like(x)
    in_dtype = np.dtype(x.dtype)
    op.check_dtype(in_dtype)
    result = op.result_dtype(in_dtype, dtype)
    grid = _strategies.resolve(strategy)
    if grid.commutative_required and not op.commutative:
        raise ValueError(
            f"strategy {grid.label} combines out of element order and needs a commutative "
            f"op; {op.name} is not commutative: use 'two_pass/warp_shuffle'"
        )
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if x.size == 0:
        value = op.empty_result(result)
        return workspace.scalar(workspace.from_host(np.full(1, value)), result)
    view, n = flat_view(x, any_order=op.commutative, stream=workspace.stream)
    kit = kernels.state_kit(op, (_ops.accumulator_dtype(result),))
    job = ReduceJob(view, n, op, kit, ordered=not op.commutative, workspace=workspace)
    out = grid.reduce(job)
    return workspace.scalar(out[0], result)


def sum(x, axis=None, dtype=None, *, strategy=None, stream=None):  # noqa: A001
    """Sum of all elements, as ``np.sum(x, dtype=dtype)``.

    Result dtype: NumPy's (bool and integers narrower than 64 bits widen to int64 or
    uint64; float16 stays float16 but accumulates in float32). The sum of an empty
    array is 0.

    Raises:
        TypeError: a dtype outside bool/int/uint/float.
        ValueError: an unknown strategy, or one that needs a commutative op.
    """
    return _run(x, _ops.SUM, strategy, dtype, stream, axis)


def prod(x, axis=None, dtype=None, *, strategy=None, stream=None):
    """Product of all elements, as ``np.prod(x, dtype=dtype)`` (empty: 1).

    Integer products wrap on overflow as NumPy's do; float products overflow to inf.
    """
    return _run(x, _ops.PROD, strategy, dtype, stream, axis)


def max(x, axis=None, *, strategy=None, stream=None):  # noqa: A001
    """Largest element, as ``np.max(x)``: NaN if any element is NaN.

    Raises:
        ValueError: for an empty array, as NumPy.
    """
    return _run(x, _ops.MAX, strategy, None, stream, axis)


def min(x, axis=None, *, strategy=None, stream=None):  # noqa: A001
    """Smallest element, as ``np.min(x)``: NaN if any element is NaN.

    Raises:
        ValueError: for an empty array, as NumPy.
    """
    return _run(x, _ops.MIN, strategy, None, stream, axis)


def xor_sum(x, axis=None, *, strategy=None, stream=None):
    """Bitwise XOR of all elements, as ``np.bitwise_xor.reduce(x)`` (empty: 0).

    Raises:
        TypeError: for float input (bool and integers only).
    """
    return _run(x, _ops.BITWISE_XOR, strategy, None, stream, axis)


def bitwise_and_sum(x, axis=None, *, strategy=None, stream=None):
    """Bitwise AND of all elements, as ``np.bitwise_and.reduce(x)`` (empty: all ones).

    Raises:
        TypeError: for float input (bool and integers only).
    """
    return _run(x, _ops.BITWISE_AND, strategy, None, stream, axis)


def bitwise_or_sum(x, axis=None, *, strategy=None, stream=None):
    """Bitwise OR of all elements, as ``np.bitwise_or.reduce(x)`` (empty: 0).

    Raises:
        TypeError: for float input (bool and integers only).
    """
    return _run(x, _ops.BITWISE_OR, strategy, None, stream, axis)


def reduce(x, op, axis=None, dtype=None, *, strategy=None, stream=None):
    """Reduce all elements with ``op``: a :class:`numbakern.Op` or a built-in's name.

    ``dtype`` sets the accumulator and result dtype (default: the op's rule, the
    input's dtype for a user's op). The op's identity fills only lanes that hold no
    element; an empty input gives the op's ``empty`` result.

    Example::

        @numbakern.op(identity=0.0)
        def absmax(a, b):
            return max(abs(a), abs(b))

        numbakern.reduce(x, absmax)

    Raises:
        ValueError: an unknown op name, or a strategy that needs a commutative op
            given a non-commutative one.
    """
    return _run(x, _ops.get(op), strategy, dtype, stream, axis)


__all__ = ["sum", "prod", "max", "min", "xor_sum", "bitwise_and_sum", "bitwise_or_sum",
           "reduce"]
