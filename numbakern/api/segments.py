"""Reductions over segments of a 1-D array delimited by offsets.

Segment ``i`` is ``x[offsets[i]:offsets[i + 1]]``: ``offsets`` holds ``n + 1``
ascending indices for ``n`` segments (CUB's ``DeviceSegmentedReduce`` convention;
``np.add.reduceat``'s indices with the end appended, but an empty segment is empty
here, where ``reduceat`` would take one element). Begin/end pairs are not taken:
segments lie back to back, possibly empty, covering ``x[offsets[0]:offsets[-1]]``.

* ``x``: a 1-D array (NumPy, CuPy, a torch tensor, any ``__cuda_array_interface__``
  array; any stride), of a dtype the op takes.
* ``offsets``: a 1-D integer array (host or device). It is checked before any launch
  (read on the host: for device offsets a copy of ``n + 1`` integers and a
  synchronisation): ``ValueError`` naming ``offsets`` when it decreases or leaves
  ``[0, len(x)]``, never a read out of bounds.
* ``strategy``, ``lanes``, ``stream``: as the reductions'; ``lanes`` is the threads per
  segment (``numbakern/kernels/segment_reduce.py``: a warp for short segments, a
  block for long ones).

Results are 1-D of ``n`` in the caller's array type, as the reductions'.
"""

from __future__ import annotations

import numpy as np

from numbakern import ops as _ops
from numbakern.api._dispatch import dispatch
from numbakern.api.reductions import _grid, _initial
from numbakern.core.arrays import Workspace, as_array_like, honours_stream, kind_of, resolve_stream
from numbakern.core.deliver import deliver, deliver_host
from numbakern.core.jobs import ReduceJob
from numbakern.kernels.axis_reduce import check_lanes
from numbakern.kernels.elementwise import fold_first_into
from numbakern.kernels.segment_reduce import SegmentReduce, offsets_ok
from numbakern.ops.state import state_kit
from numbakern.runtime.views import device_view, host_copy, to_device


@dispatch
@honours_stream
def segmented_reduce(x, offsets, op="sum", *, dtype=None, initial=None, strategy=None,
                     lanes=None, stream=None):
    """Reduce each segment ``x[offsets[i]:offsets[i + 1]]`` with ``op``.

    Args:
        x: 1-D array (see the module docstring).
        offsets: ``n + 1`` ascending integers in ``[0, len(x)]``.
        op: a one-field :class:`numbakern.Op` or a built-in's name (``"sum"``,
            ``"prod"``, ``"max"``, ``"min"``, ``"xor"``, ...).
        dtype: the accumulator and result dtype (default: the op's rule, as
            :func:`numbakern.reduce`: a sum of int32 is int64, as ``np.sum``).
        initial: a number combined before each segment's elements; the result of an
            empty segment.
        strategy, lanes, stream: see the module docstring.

    Returns:
        a 1-D array of ``n`` results. An empty segment gives ``initial``, else the
        op's identity (0 for a sum, 1 for a product, ``reduce``'s ``empty`` rule for
        a user's op).

    Example::

        numbakern.segmented_reduce(np.arange(6), np.array([0, 2, 2, 6]))
        # array([ 1,  0, 14])

    Raises:
        ValueError: bad ``offsets`` (named); an empty segment for an op with no
            identity (max, min) and no ``initial``; ``x`` not 1-D; as
            :func:`numbakern.reduce` for the strategy.
        TypeError: a dtype the op does not take; a two-field op (use
            :func:`segmented_argmax`).

    Source: CUB's ``DeviceSegmentedReduce`` (a block per segment, offsets as here); a
    warp per short segment as CUB's ``DeviceSegmentedSort`` treats small segments.
    """
    op = _ops.get(op)
    if op.fields != 1:
        raise TypeError(f"{op.name} has {op.fields} fields; segmented_reduce takes "
                        "one-field ops (segmented_argmax/segmented_argmin for pairs)")
    x = _one_d(x)
    result = op.result_dtype_for(np.dtype(x.dtype), dtype)
    kit = state_kit(op, (_ops.accumulator_dtype(result),))
    first = None if initial is None else _initial(initial, kit.dtypes[0], op.name)
    bounds = _offsets(offsets, x.shape[0])
    if first is None and isinstance(op.empty, str) and op.empty == "raise":
        _no_empty_segment(bounds, f"zero-size segment to reduction operation {op.name} "
                                  "which has no identity; pass initial=")
    fields, workspace = _reduce(x, offsets, bounds, op, kit, strategy, lanes, stream)
    if fields is None:  # no segments, or only empty ones over an empty x
        value = first if first is not None else op.empty_result(result)
        return deliver_host(workspace, np.full(len(bounds) - 1, value, dtype=result), None)
    if first is not None:
        held = workspace.from_host(np.full(1, first, kit.dtypes[0]))
        fold_first_into(kit, (fields[0], fields[0]), (held, held), workspace.stream)
    return deliver(workspace, fields[0], result, (len(bounds) - 1,), None)


@dispatch
@honours_stream
def segmented_argmax(x, offsets, *, strategy=None, lanes=None, stream=None):
    """The index of each segment's maximum, counted from the segment's start (the
    first of equal maxima; NaN counts as the maximum, its first occurrence: as
    :func:`numbakern.argmax`). int64 results; arguments as :func:`segmented_reduce`.

    Raises:
        ValueError: bad ``offsets``; an empty segment (NumPy's argmax of an empty
            sequence raises).
    """
    return _arg(x, offsets, "max", strategy, lanes, stream)


@dispatch
@honours_stream
def segmented_argmin(x, offsets, *, strategy=None, lanes=None, stream=None):
    """The index of each segment's minimum, counted from the segment's start; as
    :func:`segmented_argmax`."""
    return _arg(x, offsets, "min", strategy, lanes, stream)


def _arg(x, offsets, direction: str, strategy, lanes, stream):
    op = _ops.arg_op(direction, True)
    x = _one_d(x)
    in_dtype = np.dtype(x.dtype)
    op.check_dtype(in_dtype)
    kit = state_kit(op, (_ops.accumulator_dtype(in_dtype), _ops.INDEX_DTYPE))
    bounds = _offsets(offsets, x.shape[0])
    _no_empty_segment(bounds, f"attempt to get arg{direction} of an empty segment")
    fields, workspace = _reduce(x, offsets, bounds, op, kit, strategy, lanes, stream)
    if fields is None:
        return deliver_host(workspace, np.empty(0, dtype=_ops.INDEX_DTYPE), None)
    return deliver(workspace, fields[1], _ops.INDEX_DTYPE, (len(bounds) - 1,), None)


def _one_d(x):
    x = as_array_like(x)
    if len(x.shape) != 1:
        raise ValueError(f"x must be 1-D (segments of one array), got shape {tuple(x.shape)}")
    return x


def _offsets(offsets, size: int) -> np.ndarray:
    """The offsets on the host, checked (``ValueError`` naming them)."""
    host = offsets if isinstance(offsets, np.ndarray) else _to_host(offsets)
    why = offsets_ok(host, size)
    if why is not None:
        raise ValueError(f"offsets {why}")
    return host


def _to_host(offsets) -> np.ndarray:
    if kind_of(offsets) == "numpy":
        return np.asarray(offsets)
    return host_copy(device_view(offsets))


def _no_empty_segment(bounds: np.ndarray, message: str) -> None:
    empty = np.flatnonzero(np.diff(bounds) == 0)
    if empty.size:
        raise ValueError(f"{message} (segment {int(empty[0])} is empty)")


def _reduce(x, offsets, bounds, op, kit, strategy, lanes, stream):
    """``(fields, workspace)``: the segments reduced by the grid strategy; ``fields``
    None when there is nothing to launch."""
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if len(bounds) == 1 or bounds[-1] == bounds[0]:
        return None, workspace
    if kind == "numpy":
        xv = to_device(np.ascontiguousarray(x), workspace.stream)
        ov = to_device(bounds.astype(np.int64), workspace.stream)
    else:
        xv = device_view(x)
        ov = device_view(offsets) if kind_of(offsets) != "numpy" else \
            workspace.from_host(bounds.astype(np.int64))
    layout = SegmentReduce(xv, ov, kit, not op.commutative, lanes)
    return grid.reduce(ReduceJob(layout, op, kit, workspace)), workspace


__all__ = ["segmented_reduce", "segmented_argmax", "segmented_argmin"]
