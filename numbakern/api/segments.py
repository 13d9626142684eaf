"""Reductions over segments of a 1-D array delimited by offsets.

Segment ``i`` is ``x[offsets[i]:offsets[i + 1]]``: ``offsets`` holds ``n + 1``
ascending indices for ``n`` segments (CUB's ``DeviceSegmentedReduce`` convention;
``np.add.reduceat``'s indices with the end appended, but an empty segment is empty
here, where ``reduceat`` would take one element). Begin/end pairs are not taken:
segments lie back to back, possibly empty, covering ``x[offsets[0]:offsets[-1]]``.

* ``x``: a 1-D array (NumPy, CuPy, a torch tensor, any ``__cuda_array_interface__``
  array; any stride), of a dtype the op takes.
* ``offsets``: a 1-D integer array (host or device). Host offsets are checked before
  the launch; device offsets are checked by the kernel as it reads them (a segment
  whose bounds decrease or leave ``[0, len(x)]`` is clamped, never read out of
  bounds) and reported after it, which costs one synchronisation: ``ValueError``
  naming ``offsets`` either way.
* ``strategy``, ``lanes``, ``stream``: as the reductions'; ``lanes`` is the threads per
  short segment (``numbakern/kernels/segment_reduce.py``: a warp or a block per
  segment of up to a tile; longer ones are split into tiles over many blocks, whose
  runs the grid strategy combines).

Results are 1-D of ``n`` in the caller's array type, as the reductions'.

:class:`Span` checks offsets for the functions that work per element instead
(``segment_scans.py``, ``segment_sort.py``): the span they cover and each segment's
head, marked on the device.
"""

from __future__ import annotations

import functools

import numpy as np

from numbakern import ops as _ops
from numbakern.api._dispatch import dispatch
from numbakern.api.reductions import _grid, _initial, initial_loop
from numbakern.core.arrays import (Workspace, as_array_like, honours_stream, kind_of,
                                   resolve_stream)
from numbakern.core.axes import check_flag
from numbakern.core.deliver import deliver, deliver_host
from numbakern.core.jobs import ReduceJob
from numbakern.kernels import float16
from numbakern.kernels.axis_reduce import check_lanes
from numbakern.kernels.elementwise import fold_first_into, zeros
from numbakern.kernels.segment_reduce import SegmentReduce, offsets_ok
from numbakern.kernels.segment_scan import mark_heads
from numbakern.ops.state import state_kit
from numbakern.runtime.memo import planner
from numbakern.runtime.replay import replayable
from numbakern.runtime.views import checked_words, device_view, host_words, sliced, to_device


def segmented_reduce(x, offsets, op="sum", *, dtype=None, initial=None, strategy=None,
                     lanes=None, stream=None, check_offsets=True):
    """Reduce each segment ``x[offsets[i]:offsets[i + 1]]`` with ``op``.

    Args:
        x: a 1-D array (NumPy, CuPy, a torch tensor, any ``__cuda_array_interface__``
            array; any stride) of a dtype the op takes.
        offsets: ``n + 1`` non-decreasing integers in ``[0, len(x)]``, segment ``i``
            being ``x[offsets[i]:offsets[i + 1]]`` (CUB's convention). Host offsets
            are checked before the launch; device offsets by the kernel as it reads
            them (a bad segment is clamped, never read out of bounds) and reported
            after it, at the cost of one synchronisation.
        op: a one-field :class:`numbakern.Op` or a built-in's name (``"sum"``,
            ``"prod"``, ``"max"``, ``"min"``, ``"bitwise_xor"``, ...).
        dtype: the accumulator and result dtype (default: the op's rule, as
            :func:`numbakern.reduce`: a sum of int32 is int64, as ``np.sum``).
        initial: a number combined before each segment's elements; the result of an
            empty segment.
        strategy: how threads combine, as :func:`numbakern.sum`'s (a reduce
            strategy: its block strategy reduces each segment or tile, its grid
            strategy combines the tiles of a long segment: ``two_pass``
            deterministic, ``atomic_fold`` by atomics).
        lanes: threads per short segment (up to a tile: ``threads * 16`` elements
            for a warp a segment, ``threads * 128`` for a block):
            32 (a warp), the strategy's thread count (a block), or None: a warp when
            the mean segment has at most 4096 elements. Longer segments are split
            into tiles over many blocks whatever ``lanes`` says.
        stream: as :func:`numbakern.sum`'s.
        check_offsets: ``False`` skips the report on device offsets, and with it the
            call's synchronisation: the call returns as soon as its kernels are
            queued (as ``torch.segment_reduce`` and CUB's ``DeviceSegmentedReduce``,
            which check no offsets). Bad device offsets then give unspecified
            results and no error (still never a read or write out of bounds: every
            kernel clamps each segment into ``[0, len(x)]``). Host offsets are checked
            either way (on the host, no synchronisation). Only for an op with an
            identity, or with ``initial``: an empty segment of max or min must raise,
            which only the report sees.

    Returns:
        a 1-D array of ``n`` results. An empty segment gives ``initial``, else the
        op's identity (0 for a sum, 1 for a product, ``reduce``'s ``empty`` rule for
        a user's op).

    Example::

        numbakern.segmented_reduce(np.arange(6), np.array([0, 2, 2, 6]))
        # array([ 1,  0, 14])

    Raises:
        ValueError: bad ``offsets`` (named); an empty segment for an op with no
            identity (max, min) and no ``initial``; ``check_offsets=False`` for such
            an op; ``x`` not 1-D; as :func:`numbakern.reduce` for the strategy.
        TypeError: a dtype the op does not take; a two-field op (use
            :func:`segmented_argmax`); ``offsets`` not an array (None, a string) or
            not of integers.

    Source: CUB's ``DeviceSegmentedReduce`` (a block per segment, offsets as here); a
    warp per short segment as CUB's ``DeviceSegmentedSort`` treats small segments;
    long segments cut into equal runs of tiles per block after Merrill and Garland's
    merge-based SpMV (SC 2016).
    """
    check_offsets = check_flag(check_offsets, "check_offsets")
    return _reduced(x, offsets, op, dtype=dtype, initial=initial, strategy=strategy,
                    lanes=lanes, stream=stream, check_offsets=check_offsets)


def _reduced(x, offsets, op, *, dtype, initial, strategy, lanes, stream, check_offsets):
    """:func:`segmented_reduce`'s work, ``check_offsets`` checked: its launches, then
    the read of the kernel's report on device offsets (a check, which a replay takes
    again: ``views.checked_words``)."""
    x = _one_d(x)
    op, result, kit = _planned(op, np.dtype(x.dtype), dtype)
    first = None if initial is None else _initial(initial, kit.dtypes[0], op.name,
                                                  initial_loop(x, dtype, result))
    empty = _empty_rule(op, first)
    if not check_offsets and empty is not None:
        raise ValueError(f"check_offsets=False needs an op with an identity or initial=: "
                         f"an empty segment of {op.name} must raise, which only the "
                         "offsets' check sees")
    fields, workspace, segments, bad = _launch(x, offsets, op, kit, strategy, lanes, stream,
                                               empty)
    if fields is None:  # no segments
        return deliver_host(workspace, np.empty(0, dtype=result), None)
    if first is not None:
        held = workspace.from_host(np.full(1, first, kit.dtypes[0]))
        fold_first_into(kit, (fields[0], fields[0]), (held, held), workspace.stream)
    reduced = deliver(workspace, fields[0], result, (segments,), None)
    if bad is not None and check_offsets:
        _report(bad, offsets, segments, x.shape[0], empty, workspace.stream)
    return reduced


def _empty_rule(op, initial) -> str | None:
    """The message for an empty segment of ``op`` where none may be (an op with no
    identity and no ``initial``), else None."""
    if initial is None and isinstance(op.empty, str) and op.empty == "raise":
        return f"zero-size segment to reduction operation {op.name} which has no " \
               "identity; pass initial="
    return None


def segmented_argmax(x, offsets, *, strategy=None, lanes=None, stream=None):
    """The index of each segment's maximum, counted from the segment's start (the
    first of equal maxima; NaN counts as the maximum, its first occurrence: as
    :func:`numbakern.argmax`). int64 results; arguments as :func:`segmented_reduce`.

    Raises:
        ValueError: bad ``offsets``; an empty segment (NumPy's argmax of an empty
            sequence raises).
        TypeError: a dtype argmax does not take; ``offsets`` not an array of
            integers (None, a string).
    """
    return _arg(x, offsets, "max", strategy, lanes, stream)


def segmented_argmin(x, offsets, *, strategy=None, lanes=None, stream=None):
    """The index of each segment's minimum, counted from the segment's start; as
    :func:`segmented_argmax` (its arguments, result and errors)."""
    return _arg(x, offsets, "min", strategy, lanes, stream)


def _arg(x, offsets, direction: str, strategy, lanes, stream):
    return _ARG_REDUCED[direction](x, offsets, strategy=strategy, lanes=lanes, stream=stream)


def _arg_reduced(direction: str):
    """:func:`_arg`'s work for ``"max"`` or ``"min"``, as :func:`_reduced`'s."""

    def launched(x, offsets, *, strategy, lanes, stream):
        x = _one_d(x)
        op, kit = _arg_planned(direction, np.dtype(x.dtype))
        empty = _arg_empty(direction)
        fields, workspace, segments, bad = _launch(x, offsets, op, kit, strategy, lanes,
                                                   stream, empty)
        if fields is None:
            return deliver_host(workspace, np.empty(0, dtype=_ops.INDEX_DTYPE), None)
        found = deliver(workspace, fields[1], _ops.INDEX_DTYPE, (segments,), None)
        if bad is not None:
            _report(bad, offsets, segments, x.shape[0], empty, workspace.stream)
        return found

    return _dispatched(launched, f"segmented_arg{direction}")


def _arg_empty(direction: str) -> str:
    return f"attempt to get arg{direction} of an empty segment"


@planner  # a repeated call skips the op's lookup, the dtype rule and the kit
def _planned(op, in_dtype: np.dtype, dtype) -> tuple:
    """``(op, result dtype, kit)`` of :func:`segmented_reduce`, checked."""
    op = _ops.get(op)
    if op.fields != 1:
        raise TypeError(f"{op.name} has {op.fields} fields; segmented_reduce takes "
                        "one-field ops (segmented_argmax/segmented_argmin for pairs)")
    result = op.result_dtype_for(in_dtype, dtype)
    return op, result, state_kit(op, (_ops.accumulator_dtype(result),),
                                 float16.read_for(in_dtype, result))


@planner
def _arg_planned(direction: str, in_dtype: np.dtype) -> tuple:
    """``(op, kit)`` of :func:`segmented_argmax`/``argmin``, the dtype checked."""
    op = _ops.arg_op(direction, True)
    op.check_dtype(in_dtype)
    return op, state_kit(op, (_ops.accumulator_dtype(in_dtype), _ops.INDEX_DTYPE))


def _one_d(x, name: str = "x"):
    """``x`` as an array, 1-D (``ValueError`` naming ``name`` otherwise; ``TypeError``
    for None, a string or another object that is no array)."""
    given, x = x, as_array_like(x, name)
    if not x.shape and np.dtype(x.dtype).kind not in "biufc":
        raise TypeError(f"{name} must be a 1-D array, got {type(given).__name__}")
    if len(x.shape) != 1:
        raise ValueError(f"{name} must be 1-D (segments of one array), got shape "
                         f"{tuple(x.shape)}")
    return x


def _host_offsets(offsets, size: int, empty: str | None, of: str = "x") -> np.ndarray:
    """Host offsets, checked whole (``ValueError`` naming them; ``TypeError`` for a
    dtype that is not an integer one); ``empty``: the message for an empty segment
    where none may be; ``of``: the argument whose length is ``size``."""
    host = np.asarray(offsets)
    if host.ndim == 0 and host.dtype.kind not in "iu":  # None, a string, an object
        raise TypeError(f"offsets must be a 1-D array of integers, got "
                        f"{type(offsets).__name__}")
    if host.ndim == 1 and host.size:  # a shape offsets_ok refuses is said first
        if host.dtype.kind not in "iu" and _python_ints(offsets):
            raise TypeError(f"offsets must hold integers all in int64's range or all in "
                            f"uint64's (NumPy reads these Python ints as {host.dtype})")
        _check_integers(host.dtype)
    why = offsets_ok(host, size, of)
    if why is not None:
        raise ValueError(f"offsets {why}")
    if empty is not None:
        gaps = np.flatnonzero(host[1:] == host[:-1])
        if gaps.size:
            raise ValueError(f"{empty} (segment {int(gaps[0])} is empty)")
    return host


def _device_offsets(offsets):
    """Device offsets, checked as far as the host can without reading them (their
    order and range are the kernel's to check)."""
    view = device_view(offsets)
    dtype = np.dtype(view.dtype)
    if len(view.shape) != 1 or view.shape[0] < 1:
        raise ValueError(f"offsets must be 1-D with at least one entry, got shape "
                         f"{tuple(view.shape)}")
    _check_integers(dtype)
    return view


def _python_ints(offsets) -> bool:
    """Whether ``offsets`` is a list or tuple of Python ints (bools aside)."""
    return isinstance(offsets, (list, tuple)) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in offsets)


def _check_integers(dtype: np.dtype) -> None:
    """``TypeError`` for offsets of another dtype than an integer one (NumPy's
    ``reduceat`` raises it for float indices)."""
    if dtype.kind not in "iu":
        raise TypeError(f"offsets must hold integers, got dtype {dtype}")


def _check_span(lo: int, hi: int, size: int, of: str) -> None:
    """ValueError naming the offsets when their ends ``lo``, ``hi`` leave ``[0, size]``
    (``size``: the length of the argument named ``of``) or decrease."""
    if lo < 0 or hi > size or hi < lo:
        raise ValueError(f"offsets must not decrease and must lie in [0, {size}] (the "
                         f"length of {of}), got {lo} .. {hi}")


def _bad_segment(offsets, first: int, size: int, of: str):
    """Raise the ValueError naming segment ``first`` of device ``offsets``, the first
    a kernel found bad (``size``: the length of the argument named ``of``)."""
    pair = host_words(sliced(device_view(offsets), first, first + 2))
    raise ValueError(f"offsets must not decrease and must lie in [0, {size}] (the "
                     f"length of {of}), but segment {first} runs from {int(pair[0])} "
                     f"to {int(pair[1])}")


def _report(bad, offsets, segments: int, size: int, empty, stream, of: str = "x") -> None:
    """Raise what the kernel recorded about device offsets: the two ``bad`` words (the
    first bad segment, the first empty one; ``segments`` where none) read after the
    launches on ``stream`` (the call's one synchronisation, a check:
    ``views.checked_words``). ``empty``: the message for an empty segment where none
    may be, or None; ``of``: the argument whose length is ``size``."""
    words = checked_words(bad, stream,
                          functools.partial(_offsets_pass, segments, empty is not None))
    first_bad, first_empty = (int(v) for v in words)
    if first_bad < segments:
        _bad_segment(offsets, first_bad, size, of)
    if first_empty < segments and empty is not None:
        raise ValueError(f"{empty} (segment {first_empty} is empty)")


def _offsets_pass(segments: int, empty_raises: bool, words: np.ndarray) -> bool:
    """The report's check: no bad segment, and no empty one where that raises."""
    return words[0] >= segments and (not empty_raises or words[1] >= segments)


class Span:
    """Checked offsets for a call that works per element (scans, sorts): ``segments``,
    the span ``[lo, hi)`` they cover, ``device``: the offsets as a device array
    (``None`` when there are no segments). ``of``: the argument whose length is
    ``size``, for the errors."""

    def __init__(self, offsets, size: int, workspace: Workspace, of: str = "x"):
        self.offsets, self.size, self.workspace, self.of = offsets, size, workspace, of
        self.on_host = kind_of(offsets) == "numpy"
        if self.on_host:
            host = _host_offsets(offsets, size, None, of)
            self.segments = host.shape[0] - 1
            self.lo, self.hi = int(host[0]), int(host[-1])
            self.device = workspace.from_host(host.astype(np.int64)) if self.segments else None
            return
        self.device = _device_offsets(offsets)
        self.segments = self.device.shape[0] - 1
        self.lo, self.hi = (int(v) for v in _ends(self.device, workspace.stream))
        _check_span(self.lo, self.hi, size, of)
        if not self.segments:
            self.device = None

    @property
    def n(self) -> int:
        return self.hi - self.lo

    def marks(self, dtype, *, ids: bool = False, ends: bool = False):
        """A device array of ``n`` marks, each non-empty segment's head set
        (``numbakern/kernels/segment_scan.py``); device offsets are checked as they are
        read and reported here (one synchronisation): ``ValueError`` naming them."""
        marks = zeros(self.workspace, max(self.n, 1), dtype)
        if self.device is None:
            return marks
        bad = self.workspace.from_host(np.full(2, self.segments, np.int64))
        mark_heads(self.device, self.segments, self.lo, self.hi, self.size, marks, bad,
                   self.workspace.stream, ids=ids, ends=ends)
        if not self.on_host:
            _report(bad, self.offsets, self.segments, self.size, None, self.workspace.stream,
                    self.of)
        return marks


def _ends(view, stream) -> np.ndarray:
    """``offsets[0]`` and ``offsets[-1]`` of device offsets, read to the host."""
    last = view.shape[0] - 1
    return np.concatenate([host_words(sliced(view, i, i + 1), stream) for i in (0, last)])


def _launch(x, offsets, op, kit, strategy, lanes, stream, empty):
    """A segmented reduction's launches: ``(fields, workspace, segments, bad)``:
    ``fields`` None when there are no segments; ``bad`` the device flags still to
    report for device offsets (else None; host offsets are checked here, before the
    launch: ``empty``, the message for an empty segment where none may be)."""
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    on_host = kind_of(offsets) == "numpy"
    if on_host:
        host = _host_offsets(offsets, x.shape[0], empty)
        segments = host.shape[0] - 1
    else:
        ov = _device_offsets(offsets)
        segments = ov.shape[0] - 1
    if segments == 0:
        return None, workspace, 0, None
    if kind == "numpy":
        xv = to_device(np.ascontiguousarray(x), workspace.stream)
    else:
        xv = device_view(x)
    if on_host:
        ov = workspace.from_host(host.astype(np.int64))
    layout = SegmentReduce(xv, ov, kit, not op.commutative, lanes, workspace)
    fields = grid.reduce(ReduceJob(layout, op, kit, workspace))
    return fields, workspace, segments, None if on_host else layout.bad


def _dispatched(launched, name: str):
    """``launched`` as the public function ``name`` would be dispatched (Dask arrays
    refused under that name): a call on CUDA tensors replays keyed by the tensors
    themselves, before their translation fills in a ``stream=`` (which a replay never
    takes), whether or not CuPy is installed."""
    launched.__name__ = launched.__qualname__ = name  # replay.latest's name too
    return dispatch(replayable(honours_stream(launched)))


_reduced = _dispatched(_reduced, "segmented_reduce")
_ARG_REDUCED = {d: _arg_reduced(d) for d in ("max", "min")}


__all__ = ["segmented_reduce", "segmented_argmax", "segmented_argmin"]
