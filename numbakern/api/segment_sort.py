"""A stable sort of every segment of a 1-D array: ``segmented_sort``.

Segments are given by offsets as for :func:`numbakern.segmented_reduce`; the sort
covers the span ``keys[offsets[0]:offsets[-1]]``, each segment sorted in its place.

The design: two stable sorts, least significant first (an LSD radix sort's own
argument, one level up). A stable sort by key, then a stable sort of that order by
segment index, leaves every segment's keys together, in its place, in key order,
equal keys in input order: the order of the pairs ``(segment, key)``. Both sorts
are numbakern's own (``strategies/radix_sort.py`` or the bitonic sort, argsort
form); the segment indices come from the offsets (each segment's index at its first
element, ``numbakern/kernels/segment_scan.py``, then a running maximum), held in the
narrowest unsigned dtype that counts the segments, so the second radix sort takes
one 8-bit pass per byte of it: 1 pass up to 256 segments, 2 up to 65536, 4 beyond.
"""

from __future__ import annotations

import numpy as np

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.api._dispatch import dispatch
from numbakern.api.segments import Span, _one_d
from numbakern.api.sort import INDEX_DTYPE, check_dtype
from numbakern.core.arrays import (Workspace, as_layout_array, flat_device,
                                   honours_stream, kind_of, resolve_stream, to_user)
from numbakern.core.axes import check_flag
from numbakern.core.jobs import ScanJob, SortJob
from numbakern.kernels.elementwise import gather_into
from numbakern.kernels.sort_keys import bits_dtype
from numbakern.ops.state import state_kit
from numbakern.runtime.views import strided


@dispatch
@honours_stream
def segmented_sort(keys, offsets, values=None, *, descending=False, strategy=None,
                   stream=None):
    """Sort each segment ``keys[offsets[i]:offsets[i + 1]]``, stably, and ``values``
    alongside.

    Args:
        keys: a 1-D array (NumPy, CuPy, a torch tensor, any ``__cuda_array_interface__``
            array) of a dtype :func:`numbakern.sort` takes (bool, integers, float16/32/64).
        offsets: ``n + 1`` non-decreasing integers in ``[0, len(keys)]`` (CUB's
            convention), host or device, checked as :func:`segmented_reduce`'s.
        values: ``None``, or a 1-D array of ``len(keys)`` elements (bool, integer,
            float or complex64: at most 8 bytes; complex tensors are refused, as
            every torch complex input is), permuted as the keys are.
        descending: largest first, NaN first (as :func:`numbakern.sort`'s); equal keys
            keep their input order either way.
        strategy: the sort strategy of both sorts (``"bitonic"``, ``"radix"`` or an
            object; default: bitonic when the span fits one block, else radix).
        stream: as :func:`numbakern.sort`'s.

    Returns:
        the sorted keys of the span ``keys[offsets[0]:offsets[-1]]`` (``len(keys)``
        elements when the segments cover ``keys``), of ``keys``' dtype, each segment in
        its place in NumPy's order (``-inf < ... < -0.0 == +0.0 < ... < inf < NaN``,
        stable, as ``np.sort(segment, kind="stable")``); with ``values``, the pair
        ``(keys, values)``. The caller's array type.

    Example::

        numbakern.segmented_sort(np.array([3, 1, 2, 9, 7]), np.array([0, 3, 5]))
        # array([1, 2, 3, 7, 9])

    Raises:
        ValueError: bad ``offsets`` (named); ``keys`` or ``values`` not 1-D, or of
            different lengths; an unknown strategy, or ``"bitonic"`` for a span longer
            than it takes.
        TypeError: a dtype the sort does not take; a non-bool flag; ``offsets`` not an
            array (None, a string) or not of integers.

    Algorithm and cost: two stable argsorts over the whole span (by key, then by
    segment index: the order of ``(segment, key)`` pairs, as an LSD radix sort
    composes its digits; ``numbakern/api/segment_sort.py``), a running maximum for
    the segment indices and gathers: about the cost of one argsort of the span
    plus a radix sort of 1-4 passes, whatever the segments' lengths. One segment
    skips the second sort.
    """
    given = [a.dtype if isinstance(a, np.ndarray) and not a.dtype.isnative else None
             for a in (keys, values)]  # NumPy's sort keeps a big-endian array's order
    result = _sorted(keys, offsets, values, descending, strategy, stream)
    if values is None:
        return _in_order(result, given[0])
    return tuple(_in_order(r, g) for r, g in zip(result, given))


def _in_order(result, given):
    """A NumPy result in the byte order ``given`` (None: as it is)."""
    return result.astype(given) if given is not None and isinstance(result, np.ndarray) \
        else result


def _sorted(keys, offsets, values, descending, strategy, stream):
    """:func:`segmented_sort`'s work."""
    keys = _one_d(keys, "keys")
    dtype = check_dtype(keys.dtype, "keys")
    descending = check_flag(descending, "descending")
    if values is not None:
        values = _values(values, keys.shape[0])
    kind = kind_of(keys)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    span = Span(offsets, keys.shape[0], workspace, "keys")
    sorter = _strategies.resolve("sort", strategy, n=span.n)
    if not sorter.fits(span.n):  # both sorts run over the whole span, not a segment
        raise ValueError(f"segmented_sort: the {sorter.name} sort strategy does not take "
                         f"rows of {span.n} keys, and it sorts the span of all the "
                         f"segments as one row (not segment by segment); use "
                         f"strategy='radix' or None")
    owners = _owner_dtype(span.segments)
    marks = span.marks(owners, ids=True)
    arr, wrap = as_layout_array(keys, kind)
    if span.n == 0:
        return _finish(arr[:0], values, wrap)
    bits = flat_device(arr[span.lo:span.hi], workspace, bits_dtype(dtype))
    order = _argsort(bits, dtype, descending, sorter, workspace)
    if span.segments > 1:
        order = _by_segment(order, marks, owners, sorter, workspace)
    result = wrap(to_user(_gathered(bits, order, workspace), workspace, (span.n,), dtype))
    if values is None:
        return result
    varr, _ = as_layout_array(values, kind_of(values))  # results follow keys
    vdtype = np.dtype(varr.dtype)
    vbits = flat_device(varr[span.lo:span.hi], workspace, _unsigned(vdtype))
    return result, wrap(to_user(_gathered(vbits, order, workspace), workspace, (span.n,),
                                vdtype))


def _values(values, size: int):
    values = _one_d(values, "values")
    vdtype = np.dtype(values.dtype)
    if vdtype.kind not in "biufc" or vdtype.itemsize > 8:
        raise TypeError(f"values must have a bool, integer, float or complex64 dtype of at "
                        f"most 8 bytes, got {vdtype}")
    if values.shape[0] != size:
        raise ValueError(f"values must have the keys' length {size}, got {values.shape[0]}")
    return values


def _finish(empty_keys, values, wrap):
    """The results of an empty span."""
    if values is None:
        return wrap(empty_keys.copy())
    varr, _ = as_layout_array(values, kind_of(values))  # results follow keys
    return wrap(empty_keys.copy()), wrap(varr[:0].copy())


def _owner_dtype(segments: int) -> np.dtype:
    """The narrowest unsigned dtype that holds every segment index."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if segments <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _argsort(bits, dtype: np.dtype, descending: bool, sorter, workspace: Workspace):
    """The stable order of a 1-D device array of keys' bits (int64 indices)."""
    order = workspace.empty(bits.shape[0], INDEX_DTYPE)
    SortJob(bits, order, 1, bits.shape[0], dtype, descending, True, workspace).sorted_by(sorter)
    return order


def _by_segment(order, marks, owners: np.dtype, sorter, workspace: Workspace):
    """``order`` stably re-sorted by the segment of each element it lists: ``marks``
    holds each non-empty segment's index at its head (zeros elsewhere), and a running
    maximum spreads it over the segment."""
    n = order.shape[0]
    segment = workspace.empty(n, owners)
    kit = state_kit(_ops.MAX, (owners,))
    rows = [strided(a, [(1, 0), (1, 0), (n, owners.itemsize)]) for a in (marks, segment)]
    _strategies.resolve("scan", None).scan(
        ScanJob(rows[0], (rows[1],), _ops.MAX, kit, False, False, kit.identity_values,
                workspace))
    by_segment = _argsort(_gathered(segment, order, workspace), owners, False, sorter,
                          workspace)
    return _gathered(order, by_segment, workspace)


def _gathered(src, index, workspace: Workspace):
    """``src[index]`` as a new 1-D device array."""
    dst = workspace.empty(index.shape[0], src.dtype)
    gather_into(src, index, dst, workspace.stream)
    return dst


__all__ = ["segmented_sort"]
