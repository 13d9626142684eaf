"""Sorting with NumPy's order: ``sort`` and ``argsort`` along an axis, stable.

Both take:

* ``x``: a NumPy array (or anything ``np.asarray`` takes), a CuPy array, or any
  object with ``__cuda_array_interface__``; any shape; dtypes bool, int8-int64,
  uint8-uint64, float16, float32, float64.
* ``axis``: an int (default ``-1``, the last axis) or ``None`` (sort the flattened
  array, in C order, as NumPy).
* ``descending``: largest first. NaN, last in an ascending sort, then comes first
  (the reversed order, as ``torch.sort(descending=True)``); equal values still
  keep their input order.
* ``strategy``: ``None`` (one block per row with the bitonic sort when rows fit in
  one block, else the radix sort), ``"bitonic"``, ``"radix"``, or a strategy
  object (``numbakern.strategies.BitonicSort(...)``, ``RadixSort(...)``).
* ``stream``: as the scans (a Numba or CuPy stream, or a raw pointer).

The order is NumPy's: ``-inf < ... < -0.0 == +0.0 < ... < +inf < NaN``, all NaNs
equal; both sorts are **stable**: equal values (``-0.0`` and ``+0.0`` among them)
keep their input order, as ``np.sort(x, kind="stable")`` and
``np.argsort(x, kind="stable")``. Results are NumPy arrays for NumPy input and
CuPy arrays for CuPy input (sorted on the device, no host round trip).
"""

from __future__ import annotations

import math

import numpy as np

from numbakern.api._dispatch import dispatch

from numbakern import strategies as _strategies
from numbakern.core.arrays import (BFloat16Bits, Workspace, as_array_like, as_layout_array,
                                   flat_device, flattened, honours_stream, kind_of, resolve_stream,
                                   to_user)
from numbakern.core.axes import LAST, axis_or_dim, check_flag, flat_axis_of_0d, optional_axis
from numbakern.core.jobs import SortJob
from numbakern.kernels.sort_keys import BFLOAT16, bits_dtype
from numbakern.runtime.replay import replayable

INDEX_DTYPE = np.dtype(np.int64)


@dispatch
@replayable
@honours_stream
def sort(x, axis=LAST, descending=False, *, dim=None, kind=None, stable=None,
         order=None, strategy=None, stream=None):
    """A sorted copy of ``x`` along ``axis``, as ``np.sort(x, axis, kind="stable")``.

    Returns an array of ``x``'s dtype and shape (``(x.size,)`` for ``axis=None``); the
    values' exact bits are kept (``-0.0``, NaN payloads). The values only, as NumPy's
    sort, for torch tensors too: ``torch.sort``'s ``(values, indices)`` pair is
    ``argsort`` (the order), then the values gathered by it, or
    ``topk(x, n, largest=False)`` (``n`` the axis length).

    ``axis``: the axis to sort along (default the last; None: the flattened array);
    ``dim``: torch's name for it (keyword only).

    ``descending=True``: largest first, NaN first, equal values still in input order
    (as ``torch.sort(x, descending=True, stable=True)``; not ``np.sort(x)[::-1]``,
    which reverses the order of equal values). ``kind`` (any of NumPy's) and
    ``stable`` (None, True or False) are taken for code written against NumPy: the
    sort is always stable, an order every kind allows. ``order``: NumPy's, for
    structured dtypes, which numbakern does not take: None only.

    Raises:
        TypeError: a dtype outside bool/int/uint/float; a non-bool flag; a strategy
            that is neither a name nor a ``BitonicSort`` or ``RadixSort``; both
            ``axis`` and ``dim`` given; ``axis`` not an int or None; a bad ``stream``.
        ValueError: an unknown strategy; ``"bitonic"`` with rows longer than it takes;
            a ``kind`` NumPy does not have; ``kind`` and ``stable`` both given (as NumPy);
            an ``order`` other than None.
        numpy.exceptions.AxisError: ``axis`` out of range (a 0-d input with an int axis).

    Algorithms: Batcher's bitonic network (1968) on (key, index) pairs in one block
    per row (``strategies/bitonic_sort.py``); an LSD radix sort on 8-bit digits
    after Onesweep (Adinets and Merrill, 2022), whose digit counts are numbakern
    histograms and whose offsets a numbakern exclusive scan
    (``strategies/radix_sort.py``).
    """
    _check_kind(kind, stable, order)
    axis = axis_or_dim(axis, dim, "sort")
    return _sort(x, axis, descending, False, strategy, stream)


@dispatch
@replayable
@honours_stream
def argsort(x, axis=LAST, descending=False, *, dim=None, kind=None, stable=None,
            order=None, strategy=None, stream=None):
    """Indices that sort ``x`` along ``axis``, as ``np.argsort(x, axis, stable=True)``.

    Returns int64 indices of ``x``'s shape (``(x.size,)`` for ``axis=None``): along
    ``axis``, positions within that axis; equal values in input order. ``stable``
    and ``kind`` (any of NumPy's) are accepted for NumPy's signature; both strategies
    are always stable. ``descending``: as :func:`sort`'s, equal values in input order;
    the third positional argument, as :func:`sort`'s and ``torch.argsort``'s.

    Raises: as :func:`sort`.
    """
    _check_kind(kind, stable, order)
    axis = axis_or_dim(axis, dim, "argsort")
    ndim = np.ndim(x.bits if isinstance(x, BFloat16Bits) else x)
    # as NumPy: a 0-d array's argsort along 0 or -1 is array([0])
    return _sort(x, flat_axis_of_0d(axis, ndim), descending, True, strategy, stream)


def check_dtype(dtype: np.dtype, name: str = "x") -> np.dtype:
    """``dtype`` if the sorts take it (keys are at most 64 bits), else TypeError."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(f"{name} must have a bool, integer or float dtype of at most 8 "
                        f"bytes, got {dtype}")
    return dtype


def _check_kind(kind, stable, order=None) -> None:
    """NumPy's rules: a kind is read by its first letter (quick, merge, heap, stable);
    ``kind`` and ``stable`` are not given together; no ``order`` (structured fields)."""
    if order is not None:
        raise ValueError("order is not supported: numbakern takes no structured dtypes")
    if stable is not None:
        check_flag(stable, "stable")
        if kind is not None:
            raise ValueError("`kind` and keyword parameters can't be provided at the same "
                             "time. Use only one of them.")
    if kind is None:
        return
    if not isinstance(kind, str):
        raise TypeError(f"kind must be None or a str, got {type(kind).__name__}")
    if not kind or kind[0].lower() not in "qmhs":
        raise ValueError(f"kind must be None, 'quicksort', 'mergesort', 'heapsort' or "
                         f"'stable', got {kind!r}")


def _sort(x, axis, descending, indices: bool, strategy, stream):
    descending = check_flag(descending, "descending")

    def plan(n: int, dtype):
        sorter = _strategies.resolve("sort", strategy, n=n)
        return lambda rows, workspace: sort_rows(rows, dtype, descending, indices, sorter,
                                                 workspace)

    return along_rows(x, axis, indices, stream, plan)


def along_rows(x, axis, indices: bool, stream, plan):
    """A sort-shaped call: ``x`` (any input the sorts take, bfloat16 bits included)
    laid out as rows along ``axis`` (``None``: one flattened row), each row replaced
    by one of ``n`` outputs: the values' bits, or int64 ``indices``. ``plan(n,
    dtype)`` is called first, for every input (where it checks its strategy), and
    returns ``run(rows, workspace)``, called for a non-empty input with the rows (a
    NumPy or CuPy array, its last axis the row) and returning a 1-D device array of
    the outputs, row after row. Returns the caller's array type and ``x``'s shape
    (``(x.size,)`` for ``axis=None``), the axis back in its place."""
    asked = x.dtype if isinstance(x, np.ndarray) else None  # a byte order to give back
    if isinstance(x, BFloat16Bits):  # sorted as bfloat16 keys, returned as their bits
        x, dtype = as_array_like(x.bits), BFLOAT16
    else:
        x = as_array_like(x)
        dtype = check_dtype(x.dtype)
    kind = kind_of(x)
    shape = tuple(x.shape)
    axis = optional_axis(axis, len(shape))
    size = math.prod(shape)
    arr, wrap = as_layout_array(x, kind)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    keep_order = asked is not None and not asked.isnative and not indices
    out_dtype = INDEX_DTYPE if indices else asked if keep_order else x.dtype
    if axis is None:
        moved = flattened(arr)
    else:
        moved = _moveaxis(arr, axis, -1)
    n = moved.shape[-1] if moved.ndim else 1
    run = plan(n, dtype)
    if size == 0:
        return wrap(_restore(_xp(arr).empty(moved.shape, out_dtype), axis))
    out = run(moved, workspace)
    result = to_user(out, workspace, moved.shape, None if indices else x.dtype)
    if keep_order:
        result = result.astype(asked)  # NumPy keeps a big-endian input's byte order
    return wrap(_restore(result, axis))


def sort_rows(rows, dtype: np.dtype, descending: bool, indices: bool, sorter,
              workspace: Workspace):
    """Sort every row of ``rows`` (a NumPy or CuPy array of ``dtype``, or of bfloat16
    bits for ``sort_keys.BFLOAT16``, at least one
    element, the rows along its last axis) on the device with the sort strategy
    ``sorter``: a 1-D C-contiguous device array of the sorted rows one after another,
    as int64 indices within the row (``indices``) or as the values' bits (an unsigned
    dtype of ``dtype``'s width: read it with ``runtime.views.view_as``)."""
    size = math.prod(rows.shape)
    n = rows.shape[-1] if rows.ndim else 1
    xbits = flat_device(rows, workspace, bits_dtype(dtype))
    out = workspace.empty(size, INDEX_DTYPE if indices else bits_dtype(dtype))
    SortJob(xbits, out, size // n, n, dtype, descending, indices, workspace).sorted_by(sorter)
    return out


def _xp(arr):
    if isinstance(arr, np.ndarray):
        return np
    import cupy

    return cupy


def _moveaxis(arr, source: int, dest: int):
    return _xp(arr).moveaxis(arr, source, dest)


def _restore(result, axis):
    """The sorted axis back in its place, C-contiguous, as NumPy returns it."""
    if axis is None:
        return result
    return _xp(result).ascontiguousarray(_moveaxis(result, -1, axis))


__all__ = ["argsort", "sort"]
