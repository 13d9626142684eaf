"""Scans restarted at every segment of a 1-D array: ``segmented_scan``, and
``scan_by_key``, whose segments are the runs of equal keys.

Segments are given by offsets as for :func:`numbakern.segmented_reduce` (``n + 1``
non-decreasing indices, CUB's convention). The scan runs over the *span* they cover,
``x[offsets[0]:offsets[-1]]``, restarting at each segment's first element, so the
result has ``offsets[-1] - offsets[0]`` elements (``len(x)`` when the segments cover
``x``, as they usually do); elements outside the span are not read.

Scan by key is the same thing with the keys' runs as segments: ``scan_by_key`` marks
where a key differs from the one before, no offsets needed.
"""

from __future__ import annotations

import numpy as np

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.api._dispatch import dispatch
from numbakern.api.scans import cumprod_dtype, cumsum_dtype
from numbakern.api.segments import Span, _bad_segment, _check_span, _device_offsets, _one_d
from numbakern.core.arrays import (Workspace, as_array_like, honours_stream, kind_of,
                                   resolve_stream)
from numbakern.core.axes import check_flag
from numbakern.core.deliver import deliver, deliver_host
from numbakern.core.jobs import SegmentedScanJob
from numbakern.kernels import float16
from numbakern.kernels.segment_scan import mark_key_heads, mark_span
from numbakern.ops.segmented import FLAG_DTYPE, segmented
from numbakern.ops.state import state_kit
from numbakern.runtime.memo import planner
from numbakern.runtime.replay import replayable
from numbakern.runtime.views import (device_view, host_words, reversed_last, sliced, strided,
                                     to_device)

_HEADS = np.dtype(np.uint8)


@dispatch
@honours_stream
def segmented_scan(x, offsets, op="sum", *, exclusive=False, reverse=False, dtype=None,
                   strategy=None, stream=None):
    """Scan each segment ``x[offsets[i]:offsets[i + 1]]`` with ``op``, restarting at
    every segment: ``np.concatenate([np.cumsum(s) for s in segments])`` for a sum.

    Args:
        x: a 1-D array (NumPy, CuPy, a torch tensor, any ``__cuda_array_interface__``
            array; any stride) of a dtype the op takes.
        offsets: ``n + 1`` non-decreasing integers in ``[0, len(x)]`` (CUB's
            convention), host or device, checked as :func:`segmented_reduce`'s
            (device offsets by the kernel that reads them, then one synchronisation,
            which also reads their first and last entries, to size the result).
        op: a one-field :class:`numbakern.Op` or a built-in's name (``"sum"``,
            ``"prod"``, ``"max"``, ``"min"``, the bitwise ops, ``"nansum"``, ...).
        exclusive: element ``k`` combines the segment's elements before it; each
            segment starts from the op's identity (0 for a sum, 1 for a product, -inf
            or the dtype's minimum for max).
        reverse: scan each segment from its end.
        dtype: the accumulator and result dtype; default NumPy's rule, as
            :func:`numbakern.cumsum` (a sum or product of int32 or bool is int64;
            float16 accumulates in float32), the op's own otherwise.
        strategy: a scan strategy, as :func:`numbakern.cumsum`'s (every one serves).
        stream: as :func:`numbakern.cumsum`'s.

    Returns:
        a 1-D array of ``offsets[-1] - offsets[0]`` elements in the caller's array type,
        element ``k`` the scan at ``x[offsets[0] + k]``.

    A float sum matches ``np.cumsum`` per segment to a few ulps of its running sum of
    magnitudes (a tree, as ``cumsum``). A float ``"prod"`` is the tree's product of the
    elements: unlike :func:`numbakern.cumprod` it does not reproduce NumPy's sequential
    special values where a running product overflows or rounds to 0 (integer
    products wrap exactly as NumPy's).

    Example::

        numbakern.segmented_scan(np.array([1, 2, 3, 4, 5]), np.array([0, 2, 2, 5]))
        # array([ 1,  3,  3,  7, 12])

    Raises:
        ValueError: bad ``offsets`` (named: not 1-D, decreasing, or outside
            ``[0, len(x)]``); ``x`` not 1-D; an unknown op or strategy.
        TypeError: a dtype the op does not take; a two-field op; a non-bool flag;
            ``offsets`` not an array (None, a string) or not of integers.

    Algorithm: a scan of ``(flags, value)`` pairs under the segmented combine
    (Schwartz 1980; Sengupta et al., "Scan primitives for GPU computing", 2007):
    ``numbakern/ops/segmented.py``. The head flags are one byte per element, set
    from the offsets in one launch (``numbakern/kernels/segment_scan.py``); the scan
    is any strategy's, as ``cumsum``'s. Cost: a cumsum over 1-byte-wider elements
    and twice the combines, plus a zero fill of the flags.
    """
    op, x, exclusive, reverse, result, grid = _setup(op, x, exclusive, reverse, dtype,
                                                      strategy)
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if kind_of(offsets) != "numpy":
        return _device_offsets_scan(x, offsets, op, exclusive, reverse, dtype, strategy,
                                    result, workspace, stream)
    span = Span(offsets, x.shape[0], workspace)
    heads = span.marks(_HEADS, ends=reverse)
    if span.n == 0:
        return deliver_host(workspace, np.empty(0, result), None)
    return _run(op, _span_view(x, span.lo, span.hi, workspace), heads, span.n, exclusive,
                reverse, result, grid, workspace)


@dispatch
@replayable  # no synchronisation: device keys and values replay whole
@honours_stream
def scan_by_key(keys, x, op="sum", *, exclusive=False, reverse=False, dtype=None,
                strategy=None, stream=None):
    """Scan ``x`` restarting wherever ``keys`` changes: each run of equal consecutive
    keys is a segment (CUB's ``DeviceScan::InclusiveScanByKey``, Thrust's
    ``inclusive_scan_by_key``/``exclusive_scan_by_key``).

    Args:
        keys: a 1-D array of ``len(x)`` keys (bool, integers, float16/32/64), compared
            with ``!=`` as CUB's and Thrust's default equality: ``-0.0`` and ``+0.0``
            continue one run, and every NaN starts a run of its own. Keys equal again
            after a different one start a new run (runs, not groups).
        x, op, exclusive, reverse, dtype, strategy, stream: as :func:`segmented_scan`'s.

    Returns:
        a 1-D array of ``len(x)`` results, of :func:`segmented_scan`'s dtype.

    Example::

        numbakern.scan_by_key(np.array([7, 7, 2, 2, 2, 7]), np.array([1, 2, 3, 4, 5, 6]))
        # array([ 1,  3,  3,  7, 12,  6])

    Raises:
        ValueError: ``keys`` or ``x`` not 1-D, or of different lengths; as
            :func:`segmented_scan` otherwise.
        TypeError: ``keys`` of a dtype other than bool, integer or float; as
            :func:`segmented_scan` otherwise.

    Algorithm: :func:`segmented_scan`'s, its head flags set where a key differs from
    the one before (``numbakern/kernels/segment_scan.py``).
    """
    op, x, exclusive, reverse, result, grid = _setup(op, x, exclusive, reverse, dtype,
                                                      strategy, "scan_by_key")
    keys = as_array_like(keys, "keys")
    key_dtype = np.dtype(keys.dtype)
    if key_dtype.kind not in "biuf" or key_dtype.itemsize > 8:
        raise TypeError(f"keys must have a bool, integer or float dtype of at most 8 "
                        f"bytes, got {key_dtype}")
    if len(keys.shape) != 1 or keys.shape[0] != x.shape[0]:
        raise ValueError(f"keys must be 1-D of x's length {x.shape[0]}, got shape "
                         f"{tuple(keys.shape)}")
    kind = kind_of(keys)  # the result's kind is the first argument's, as everywhere
    workspace = Workspace(kind, resolve_stream(stream, kind))
    n = x.shape[0]
    if n == 0:
        return deliver_host(workspace, np.empty(0, result), None)
    heads = workspace.empty(n, _HEADS)
    mark_key_heads(_span_view(keys, 0, n, workspace), heads, workspace.stream, ends=reverse)
    return _run(op, _span_view(x, 0, n, workspace), heads, n, exclusive, reverse, result,
                grid, workspace)


def _setup(op, x, exclusive, reverse, dtype, strategy, name="segmented_scan") -> tuple:
    """The checked arguments: ``(op, x, exclusive, reverse, result dtype, grid)``;
    ``name``: the function called, as errors name it."""
    x = _one_d(x)
    op, exclusive, reverse, result, grid = _planned(op, np.dtype(x.dtype), exclusive,
                                                    reverse, dtype, strategy, name)
    return op, x, exclusive, reverse, result, grid


@planner  # a repeated call skips the checks and the strategy's resolution
def _planned(op, in_dtype: np.dtype, exclusive, reverse, dtype, strategy, name) -> tuple:
    """``(op, exclusive, reverse, result dtype, grid)``, checked (every argument error
    but ``x``'s and the offsets' is raised here)."""
    op = _ops.get(op)
    if op.fields != 1:
        raise TypeError(f"{op.name} has {op.fields} fields; segmented scans take "
                        "one-field ops")
    exclusive, reverse = check_flag(exclusive, "exclusive"), check_flag(reverse, "reverse")
    result = _result_dtype(op, in_dtype, dtype, name)
    return op, exclusive, reverse, result, _strategies.resolve("scan", strategy)


def _device_offsets_scan(x, offsets, op, exclusive, reverse, dtype, strategy, result,
                         workspace: Workspace, stream):
    """:func:`segmented_scan` of device offsets with one synchronisation: the heads are
    marked from offsets the host has not read (the flags sized for any span in
    ``x``), then one copy brings back their ends and the kernel's check of every
    segment. Both launch groups replay on a repeated signature
    (``numbakern/runtime/replay.py``); the copy between them cannot, as the result's
    length is read there."""
    heads, info = _marked(x, offsets, reverse, stream=stream)
    lo, hi = _span_of(info, offsets, x.shape[0], workspace)
    if hi == lo:
        return deliver_host(workspace, np.empty(0, result), None)
    return _scanned(x, heads, lo, hi, op, exclusive, reverse, dtype, strategy,
                    stream=stream)


@replayable
def _marked(x, offsets, reverse: bool, *, stream=None):
    """``(heads, info)`` of :func:`mark_span` for ``x``'s length, ``heads`` in ``x``'s
    array kind (so that :func:`_scanned` is keyed on arrays of one kind)."""
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    heads, info = mark_span(_device_offsets(offsets), x.shape[0], workspace, ends=reverse)
    if kind != "numpy":
        heads = deliver(workspace, heads, _HEADS, (heads.shape[0],), None)
    return heads, info


def _span_of(info, offsets, size: int, workspace: Workspace) -> tuple[int, int]:
    """``(lo, hi)``: the offsets' ends, read with the kernel's check in one copy (the
    call's synchronisation); ``ValueError`` naming the offsets if either is bad."""
    lo, hi, bad = (int(v) for v in host_words(info, workspace.stream))
    if np.dtype(offsets.dtype) == np.uint64:  # the kernel's int64 words, as the user's
        lo, hi = lo % 2**64, hi % 2**64
    _check_span(lo, hi, size, "x")
    if bad:
        _bad_segment(offsets, offsets.shape[0] - 1 - bad, size, "x")
    return lo, hi


@replayable
def _scanned(x, heads, lo: int, hi: int, op, exclusive, reverse, dtype, strategy, *,
             stream=None):
    """The scan of ``x[lo:hi]`` restarting at ``heads`` (device flags from
    :func:`_marked`), delivered."""
    op, x, exclusive, reverse, result, grid = _setup(op, x, exclusive, reverse, dtype,
                                                      strategy)
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    return _run(op, _span_view(x, lo, hi, workspace), sliced(device_view(heads), 0, hi - lo),
                hi - lo, exclusive, reverse, result, grid, workspace)


def _run(op, values, heads, n: int, exclusive: bool, reverse: bool, result, grid,
         workspace: Workspace):
    """Scan the ``n`` elements of the 1-D device view ``values`` restarting at ``heads``
    (uint8 flags, at each segment's end for ``reverse``) with the lifted ``op``."""
    accumulator = _ops.accumulator_dtype(result)
    lifted = segmented(op, accumulator.str)
    kit = state_kit(lifted, (FLAG_DTYPE, accumulator))
    out = workspace.empty(n, result)
    views = [_row(v, n) for v in (values, heads, out)]
    if reverse:
        views = [reversed_last(v) for v in views]
    inner = state_kit(op, (accumulator,), float16.read_for(values.dtype, result))
    grid.scan(SegmentedScanJob(views[0], views[1], (views[2],), lifted, kit, inner,
                               exclusive, reverse, workspace))
    return deliver(workspace, out, result, (n,), None)


def _result_dtype(op, in_dtype: np.dtype, dtype, name: str) -> np.dtype:
    """NumPy's cumsum/cumprod rule for the sums and products, the op's own otherwise;
    ``TypeError`` naming ``name`` (the function called) for a dtype the op does not
    take."""
    op.check_dtype(in_dtype, caller=name)
    if dtype is not None:
        op.check_dtype(_ops._as_dtype(dtype), "dtype=", name)
    if op in (_ops.SUM, _ops.NANSUM):
        return cumsum_dtype(in_dtype, dtype)
    if op in (_ops.PROD, _ops.NANPROD):
        return cumprod_dtype(in_dtype, dtype)
    return np.dtype(op.result_dtype(in_dtype, dtype))


def _span_view(x, lo: int, hi: int, workspace: Workspace):
    """``x[lo:hi]`` as a 1-D device view (NumPy input: copied there)."""
    if kind_of(x) == "numpy":
        return to_device(np.ascontiguousarray(x[lo:hi]), workspace.stream)
    return sliced(device_view(x), lo, hi)


def _row(view, n: int):
    """A 1-D device view's first ``n`` elements as the ``(1, 1, n)`` view scans take."""
    stride = view.strides[0] if n > 1 else np.dtype(view.dtype).itemsize
    return strided(view, [(1, 0), (1, 0), (n, stride)])


__all__ = ["scan_by_key", "segmented_scan"]
