"""Weighted means, as ``np.average``: NumPy's two sums (of ``x * w`` and of ``w``, each
over the same slices), then their quotient. The products and the broadcast weights
are written once into ``x``-sized buffers (NumPy's own ``average`` makes the same
temporary for the products), which two ordinary sums then reduce with the caller's
strategy."""

from __future__ import annotations

import math

import numpy as np

from numbakern.api._dispatch import dispatch
from numbakern.api.reductions import _c_order, host_scalar, mean, sum as _sum
from numbakern.core.arrays import Workspace, as_array_like, honours_stream, \
    kind_of, resolve_stream, user_array
from numbakern.core.axes import normalize_axes, normalize_axis, result_shape
from numbakern.core.deliver import deliver, deliver_host
from numbakern.kernels.elementwise import (INVALID, OVERFLOW, PRODUCT_INF, PRODUCT_NAN,
                                          WEIGHT_INF, WEIGHT_NAN, divide_by_into,
                                          pairing_dims, weighted_into)
from numbakern.runtime.checks import check_flag, check_keepdims
from numbakern.runtime.stacklevel import numpy_fp_error, quiet_numpy_errors
from numbakern.runtime.views import flat, host_copy


WEIGHTS_SUM_TO_ZERO = "Weights sum to zero, can't be normalized"  # NumPy's words


@dispatch
@honours_stream
def average(x, axis=None, weights=None, returned=False, *, keepdims=False, strategy=None,
            stream=None):
    """The weighted mean along ``axis``, as ``np.average(x, axis, weights, returned,
    keepdims=)``: ``sum(x * w) / sum(w)`` over each slice; without ``weights``, the
    :func:`mean`.

    Args:
        x: array of bool, integers or floats, any shape and layout.
        axis: None (every axis), an int or a tuple of ints.
        weights: None, or real numbers (bool, integers, floats) of ``x``'s shape, or,
            where ``axis`` is given, of the shape of ``x`` along ``axis`` in the order
            ``axis`` names them (NumPy's rule); on the host or on ``x``'s device.
        returned: also return the sum of the weights (without ``weights``: the count
            of each slice), of the result's shape and dtype.
        keepdims: keep the reduced axes as length 1.
        strategy, stream: as :func:`sum`, which computes both sums.

    Returns: the averages (dtype: ``mean``'s without ``weights``; with them
    ``np.result_type(x, w)``, at least float64 for bool and integer ``x``), a scalar
    for a 0-d result of NumPy input; with ``returned``, ``(averages, sums of
    weights)``. Results are in ``x``'s array type.

    Raises:
        TypeError: ``weights`` of another shape than ``x`` without ``axis`` (NumPy's
            words), or of a dtype that is not real; ``keepdims`` neither a bool nor an
            integer (as NumPy's); ``returned`` not True or False (NumPy takes any
            truthy value); a bad ``stream``.
        ValueError: ``weights`` not of ``x``'s shape along ``axis``; an axis repeated;
            an unknown ``strategy``.
        ZeroDivisionError: weights of a slice summing to zero (NumPy's), or, without
            ``weights``, a result of no elements (NumPy's ``a.size / avg.size``).
        AxisError: an axis out of range.

    A float16 product is rounded to float16, as NumPy's multiply rounds it; the sums
    accumulate float16 in float32, rounded once (as NumPy's float16 sums do, in
    another order). For NumPy input, NumPy's floating-point words, in its order, under
    ``np.geterr()``: the sum of the weights ("reduce"), the products ("multiply"),
    their sum, the division ("divide"); a sum's words are decided by whether any term
    of the call (not of that slice) was NaN or infinite. Device input gets the same
    values without the warnings.
    """
    x = as_array_like(x)
    keepdims = check_keepdims(keepdims)
    returned = check_flag(returned, "returned")
    shape = tuple(x.shape)
    given = given_axes(axis, len(shape))
    axes = None if given is None else normalize_axes(given, len(shape))
    if weights is None:
        real_dtype(x.dtype, "x")
        avg = mean(x, axis=axes, keepdims=keepdims, strategy=strategy, stream=stream)
        counts = counts_like(avg, x)  # raises, as NumPy's, for no averages
        return (avg, counts) if returned else avg
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    w = as_array_like(weights, "weights")
    result = result_dtype(np.dtype(x.dtype), w)
    along = weights_along(shape, tuple(w.shape), given)
    kept = result_shape(shape, range(len(shape)) if axes is None else axes, keepdims)
    if along is not None and not math.prod(kept):
        _no_zero_total(w, result, stream)  # NumPy sums the weights before broadcasting
    products, summed, found = _weighted(x, w, _weight_dims(shape, tuple(w.shape), along),
                                        result, workspace)
    reduce = dict(axis=axes, keepdims=keepdims, strategy=strategy, stream=workspace.stream)
    with quiet_numpy_errors():  # the sums' words are NumPy's, told by _quotient
        sums, scale = _sum(products, **reduce), _sum(summed, **reduce)
    return _quotient(sums, scale, result, kept, returned, workspace, found)


def given_axes(axis, ndim: int):
    """``axis`` as NumPy's ``average`` reads it: None, or a tuple of non-negative axes
    in the order given (the weights' axes follow it)."""
    if axis is None:
        return None
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    normalize_axes(tuple(axes), ndim)  # range and repeats, NumPy's errors
    return tuple(normalize_axis(a, ndim) for a in axes)


def result_dtype(x_dtype: np.dtype, w) -> np.dtype:
    """NumPy's: ``result_type(x, w)``, and at least float64 for bool and integer x."""
    w_dtype = real_dtype(w.dtype, "weights")
    if real_dtype(x_dtype, "x").kind in "biu":
        return np.result_type(x_dtype, w_dtype, np.float64)
    return np.result_type(x_dtype, w_dtype)


def real_dtype(dtype, arg: str) -> np.dtype:
    """``dtype`` where it holds real numbers (bool, integers, floats up to float64);
    TypeError naming ``arg`` otherwise."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(f"average: {arg} must hold real numbers (bool, integers or "
                        f"floats up to float64), got dtype {dtype}")
    return dtype


def weights_along(shape: tuple, w_shape: tuple, given) -> tuple | None:
    """The axes of ``x`` that the weights' axes stand for, in their order (None: the
    weights have ``x``'s own shape), by NumPy's rule; its errors otherwise."""
    if w_shape == shape:
        return None
    if given is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    if w_shape != tuple(shape[a] for a in given):
        raise ValueError(f"average: weights of shape {w_shape} must be x's shape along "
                         f"axis {given}, {tuple(shape[a] for a in given)} (NumPy: Shape "
                         f"of weights must be consistent with shape of a along specified "
                         f"axis.)")
    return given


def _weight_dims(shape: tuple, w_shape: tuple, along) -> np.ndarray:
    """:func:`weighted_into`'s pairing of ``x``'s elements with the weights': their
    own strides where they have ``x``'s shape (``along`` None), else along each axis
    of ``x`` the stride of the weights' axis ``along`` pairs with it, 0 elsewhere."""
    if along is None:
        return pairing_dims(shape, [math.prod(shape[a + 1:]) for a in range(len(shape))])
    w_mults = [math.prod(w_shape[k + 1:]) for k in range(len(w_shape))]
    return pairing_dims(shape, [w_mults[along.index(a)] if a in along else 0
                                for a in range(len(shape))])


def _no_zero_total(w, result: np.dtype, stream) -> None:
    """NumPy's zero check where the weights lie along ``axis`` and the result has no
    elements: its sum of the weights is one total, made before broadcasting."""
    if host_scalar(_sum(w, dtype=result, stream=stream), stream) == 0:
        raise ZeroDivisionError(WEIGHTS_SUM_TO_ZERO)


def _weighted(x, w, dims: np.ndarray, dtype: np.dtype, workspace: Workspace) -> tuple:
    """``(x * w, w, found)``: the products and the weights broadcast to ``x``'s shape,
    in ``dtype`` (device arrays of ``x``'s shape, empty where ``x`` is), and the
    kernel's flags read to the host for NumPy input (else None)."""
    shape = tuple(x.shape)
    products, summed = (user_array(workspace.empty(shape, dtype)) for _ in range(2))
    if not math.prod(shape):
        return products, summed, np.zeros(6, np.int32) if workspace.kind == "numpy" else None
    flags = workspace.from_host(np.zeros(6, np.int32))
    weighted_into(_c_order(x, workspace), _c_order(w, workspace), workspace.from_host(dims),
                  flat(products, "products"), flat(summed, "weights"), flags,
                  workspace.stream)
    found = host_copy(flags, workspace.stream) if workspace.kind == "numpy" else None
    return products, summed, found


def _quotient(sums, scale, result: np.dtype, kept: tuple, returned: bool,
              workspace: Workspace, found):
    """``sums / scale`` in ``result`` as the user's array (with ``scale`` where
    ``returned``), after NumPy's check that no weights sum to zero (device arrays of
    the ``kept`` shape in, one read of ``scale`` to the host). For NumPy input
    (``found``: the products kernel's flags), NumPy's floating-point words in its
    order: the weights' sum, the products, their sum, the division."""
    sums, scale = flat(sums, "sums"), flat(scale, "scale")
    host_scale = host_copy(scale, workspace.stream)
    workspace.stream.synchronize()
    if found is not None:
        _reduce_errors(host_scale, found[WEIGHT_NAN], found[WEIGHT_INF])
    if (host_scale == 0).any():
        raise ZeroDivisionError(WEIGHTS_SUM_TO_ZERO)
    if found is not None:
        host_sums = host_copy(sums, workspace.stream)
        if found[OVERFLOW]:
            numpy_fp_error("over", "overflow encountered in multiply")
        if found[INVALID]:
            numpy_fp_error("invalid", "invalid value encountered in multiply")
        _reduce_errors(host_sums, found[PRODUCT_NAN], found[PRODUCT_INF])
        return _host_quotient(host_sums, host_scale, result, kept, returned)
    dst = workspace.empty(sums.shape[0], result)
    divide_by_into(sums, scale, dst, workspace.stream)
    avg = deliver(workspace, dst, result, kept, None)
    return (avg, deliver(workspace, scale, result, kept, None)) if returned else avg


def _reduce_errors(sums: np.ndarray, nan_in, inf_in) -> None:
    """NumPy's words for a sum (its ``add.reduce``: "overflow", then "invalid"): an
    infinite sum of terms none of which is infinite overflowed; a NaN sum of terms
    none of which is NaN met ``inf - inf``. (Which terms each sum held is not read
    back: only whether any term of the call was NaN or infinite.)"""
    if not inf_in and np.isinf(sums).any():
        numpy_fp_error("over", "overflow encountered in reduce")
    if not nan_in and np.isnan(sums).any():
        numpy_fp_error("invalid", "invalid value encountered in reduce")


def _host_quotient(sums, scale, result: np.dtype, kept: tuple, returned: bool):
    """NumPy input's division, in ``result`` on the host as NumPy's, with its warnings
    under ``np.geterr()`` ("divide", or "scalar divide" for a 0-d result, whose
    operands NumPy's sums give as scalars), found from the values rather than by
    catching NumPy's (a warnings filter is no thread's own)."""
    sums, scale = sums.astype(result).reshape(kept), scale.astype(result).reshape(kept)
    with np.errstate(all="ignore"):
        avg = sums / scale
    made = ~np.isnan(sums) & ~np.isnan(scale)
    step = "divide" if kept else "scalar divide"
    if (made & np.isnan(avg)).any():
        numpy_fp_error("invalid", f"invalid value encountered in {step}")
    if (np.isinf(avg) & np.isfinite(sums) & np.isfinite(scale)).any():
        numpy_fp_error("over", f"overflow encountered in {step}")
    if not kept:
        avg, scale = avg[()], scale[()]
    return (avg, scale) if returned else avg


def counts_like(avg, x):
    """NumPy's ``returned`` scale without weights: each slice's element count, in the
    average's dtype and shape (``ZeroDivisionError`` for an empty result, NumPy's
    ``a.size / avg.size``)."""
    shape = tuple(getattr(avg, "shape", ()))
    count = math.prod(x.shape) / math.prod(shape)
    return deliver_host(Workspace(kind_of(x), None), np.full(shape, count, avg.dtype), None)


__all__ = ["average"]
