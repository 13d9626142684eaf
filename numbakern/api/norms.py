"""Vector norms, as NumPy 2's ``np.linalg.vector_norm`` (and ``torch.linalg.vector_norm``
for real input): one reduction of mapped elements, its root taken by the reduction's
store (``numbakern/kernels/finishes.py``'s ``root_emit``) where the grid strategy
stores whole outputs, else by one elementwise launch after it."""

from __future__ import annotations

import math
import numbers

import numpy as np

from numbakern.api._dispatch import dispatch
from numbakern.api.reductions import (_as_bfloat16_bits, _no_axis_of_0d, _planned,
                                      _reduce_finished, _rounds_to_bfloat16, _run)
from numbakern.core.arrays import Workspace, as_array_like, honours_stream, kind_of, \
    resolve_stream
from numbakern.core.deliver import deliver, deliver_host
from numbakern.kernels.elementwise import root_into
from numbakern.kernels.finishes import root_emit
from numbakern.ops import norms as _norms
from numbakern.ops.norms import root_of
from numbakern.runtime.replay import replayable


def _norm_plan(ord) -> tuple:
    """``(op, p)`` of ``ord``: the op each output reduces, and the order whose
    reciprocal its sum is raised to (None: the reduction is the norm;
    :func:`root_exponent`)."""
    if ord is None or (isinstance(ord, numbers.Real) and not isinstance(ord, bool)
                       and ord == 2):
        return _norms.SUM_SQUARES, 2.0
    if isinstance(ord, str):
        raise ValueError(f"vector_norm: invalid norm order {ord!r} for vectors; ord is a "
                         "number: 2 (default), 1, 0, inf, -inf or any other real p")
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real) or ord != ord:
        raise TypeError(f"vector_norm: ord must be a real number (or None), got {ord!r}")
    if ord == math.inf:
        return _norms.MAX_ABS, None
    if ord == -math.inf:
        return _norms.MIN_ABS, None
    if ord == 0:
        return _norms.COUNT_NONZERO, None
    if ord == 1:
        return _norms.SUM_ABS, None
    return _norms.sum_powers(float(ord)), float(ord)


def root_exponent(p: float, result: np.dtype) -> float:
    """The power a sum of ``|x| ** p`` is raised to: 0.5 (the square root) for
    ``p = 2``, else ``1 / p`` rounded to the result dtype, as NumPy's
    ``reciprocal(ord, dtype=...)`` (so 0 where ``p`` is past float32's range for
    float32 input, and the norm is 1, as NumPy's)."""
    if p == 2.0:
        return 0.5
    with np.errstate(over="ignore", divide="ignore"):
        return float(np.reciprocal(np.asarray(p).astype(result)))


@dispatch
@replayable
@honours_stream
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2, strategy=None, stream=None,
                lanes=None):
    """The vector norm of ``x`` along ``axis``, as NumPy 2's
    ``np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)``, in one pass.

    ``ord``: 2 (default; None too) ``sqrt(sum(x * x))``; 1 ``sum(|x|)``; ``inf``
    ``max(|x|)`` (0 for no elements); ``-inf`` ``min(|x|)``; 0 the number of non-zero
    elements (as a float); any other real ``p`` ``sum(|x| ** p) ** (1 / p)``, with
    ``1 / p`` rounded to the result dtype as NumPy's (an order past float32's range
    gives float32 input the norm 1, as NumPy). Each element is mapped in float64
    (``numbakern/ops/norms.py``), summed or compared in the accumulator dtype, and
    the root taken in float64. The accumulator of float16 is float32, so a float16
    element past 256 does not make the 2-norm inf, as NumPy's float16 squares do. No
    scaling guards the squares: a sum past the accumulator's range is inf, as
    NumPy's (and torch's CUDA kernels'). NumPy's floating-point warnings of the
    elementwise steps (a zero to a negative ``ord``, a square that overflows) are not
    given; the values are NumPy's. A Dask array gives a lazy one
    (``numbakern/api/dask.py``).

    Args:
        x: an array of bool, integers or float16/32/64 (NumPy, CuPy, a torch tensor,
            Numba device arrays; bfloat16 read in place, each element widened to
            float32), any shape and strides.
        axis: None (every axis: the norm of the flattened array), an int or a tuple.
        keepdims: keep the reduced axes as length 1.
        ord: the order of the norm (above).
        strategy, stream, lanes: as :func:`numbakern.sum`.

    Returns:
        The norms, of NumPy's shape; dtype: ``x``'s float dtype, float64 for bool and
        integers (a bfloat16 input's result is rounded to bfloat16). NaN anywhere in
        a slice gives NaN, except for ``ord=0``, which counts it.

    Raises:
        TypeError: ``ord`` not a real number (a bool, a NaN); a dtype other than
            bool, integers and float16/32/64.
        OverflowError: an int ``ord`` past float64's range (``10**400``), as NumPy's.
        ValueError: ``ord`` a string (NumPy's matrix norms are not vector norms);
            ``ord=-inf`` over no elements, as NumPy; a bad strategy or ``lanes``; an
            axis repeated (NumPy's "duplicate value in 'axis'").
        AxisError: an axis out of range; an axis of a 0-d ``x`` (as NumPy's, where
            ``np.sum`` takes axis 0 of one).
    """
    op, p = _norm_plan(ord)
    x = as_array_like(x)
    _no_axis_of_0d(x, axis)  # NumPy's, where np.sum takes axis 0 of a 0-d array
    if p is None:
        return _run(x, op, strategy, None, stream, axis, keepdims, None, lanes,
                    name="vector_norm")
    planned = _planned(op, strategy, None, np.dtype(x.dtype), tuple(x.shape), axis,
                       keepdims, lanes, "vector_norm")
    result = planned.result
    exponent = root_exponent(p, result)
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if planned.M * planned.N == 0:  # the root of a sum of nothing (0)
        values = np.full(planned.shape, root_of.py_func(0.0, exponent), dtype=result)
        return deliver_host(workspace, values, None)
    dst = workspace.empty(planned.M, result)

    def apart(fields):
        root_into(fields[0], dst, exponent, workspace.stream)

    _reduce_finished(x, planned.axes, op, planned.kit, planned.grid, workspace, lanes,
                     root_emit(), dst, exponent, apart)
    if _rounds_to_bfloat16(x, None, None, result, kind):
        dst, result = _as_bfloat16_bits(dst, workspace), np.dtype(np.uint16)
    return deliver(workspace, dst, result, planned.shape, None)


__all__ = ["vector_norm"]
