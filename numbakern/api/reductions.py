"""Reductions with NumPy's semantics: sum, prod, max, min, bitwise, reduce, and the
value-index family argmax, argmin, max_with_indices, min_with_indices.

Every function takes:

* ``x``: a NumPy array (or anything ``np.asarray`` takes), a CuPy array, or any
  object with ``__cuda_array_interface__``; any shape, any strides; dtypes bool,
  int8-int64, uint8-uint64, float16, float32, float64; bfloat16 (a torch tensor or an
  ``ml_dtypes`` array), read in place as its bits and computed as float32 input
  (``numbakern/api/_interop.py``), floating results rounded to bfloat16 once.
* ``axis``: ``None`` (every axis), an int (negative counts from the end) or a tuple
  of ints (argmax and friends: ``None`` or an int); ``keepdims`` keeps reduced axes
  as length 1; ``out`` receives the result (``numbakern/core/axes.py`` has the rules:
  NumPy's, with ``same_kind`` casting into ``out``).
* ``strategy``: how threads combine (``numbakern.strategies.resolve`` explains the
  names, ``available()`` lists them); default ``"two_pass/warp_shuffle"``,
  deterministic.
* ``stream``: a Numba stream, a CuPy stream or a raw pointer; default CuPy's current
  stream for CuPy input, else the default stream.
* ``where`` (sum, prod, max, min, mean, any, all, the nan- and bitwise forms, var,
  std, reduce): NumPy's mask, read beside ``x`` by the kernels' loads
  (``numbakern/core/layout.py``'s ``masked_axis_view``); see :func:`sum`.
* ``lanes``: for axis reductions whose reduced elements lie together in memory, the
  threads that share one output's row: ``32`` (one warp per row), the strategy's
  thread count (one block per row), or ``None`` (a warp for rows of up to 16384
  elements, else a block). ``numbakern/kernels/axis_reduce.py`` explains the kernels.

Results: NumPy in, NumPy out (a NumPy scalar for a 0-d result); CuPy in, CuPy out
(0-d arrays for scalars, never copied to the host); other device input gives Numba
device arrays. With ``out``, ``out`` itself is returned.

Errors: ``TypeError`` for a dtype the op does not take; :class:`numbakern.AxisError`
for an axis out of range; ``ValueError`` for an unknown strategy, one that needs a
commutative op, a reduction with no identity over no elements, or a bad ``out``.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, NamedTuple

import numpy as np

from numbakern.api._dispatch import dispatch

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.core.arrays import (BFloat16Bits, BFloat16Input, Workspace, as_array_like,
                                   bits_of, contiguous_copy, honours_stream, kind_of,
                                   resolve_stream)
from numbakern.core.axes import (FLAT, axis_or_dim, check_flag, keepdims_or_keepdim,
                                 normalize_axes, normalize_axis, result_shape)
from numbakern.core.deliver import (check_apart, check_out, deliver, deliver_host,
                                    written_into)
from numbakern.core.jobs import Finish, ReduceJob
from numbakern.core.layout import reduce_layout
from numbakern.kernels import bfloat16, float16
from numbakern.kernels.axis_reduce import check_lanes
from numbakern.kernels.finishes import (divide_by_count_emit, divide_emit, index_emit,
                                        log_sum_exp_emit, variance_emit)
from numbakern.kernels.elementwise import (INVALID, OVERFLOW, divide_by_into, divide_into,
                                            fold_first_into, log_sum_exp_into, nan_where,
                                            pairing_dims, squared_deviations_into,
                                            subtract_into, summed_variance_into,
                                            variance_into)
from numbakern.ops.state import state_kit
from numbakern.runtime.checks import check_keepdims
from numbakern.runtime.memo import planner
from numbakern.runtime.replay import replayable
from numbakern.runtime.stacklevel import (numpy_fp_error, numpy_fp_errors, numpys_words,
                                          quiet_numpy_errors, warn)
from numbakern.runtime.views import (c_contiguous, checked_words, device_view, flat, host_copy,
                                     host_words, refuse_replay, strided)
from numbakern.strategies.online_softmax import ONLINE_SOFTMAX


def _grid(op: _ops.Op, strategy):
    grid = _strategies.resolve("reduce", strategy)
    if grid.commutative_required and not op.commutative:
        raise ValueError(
            f"strategy {grid.label} combines out of element order and needs a commutative "
            f"op; {op.name} is not commutative: use 'two_pass/warp_shuffle'"
        )
    return grid


def _extents(shape, axes) -> tuple[int, int]:
    """``(M, N)``: outputs, and elements reduced into each."""
    kept = math.prod(n for a, n in enumerate(shape) if a not in axes)
    return kept, math.prod(shape[a] for a in axes)


class _Setup(NamedTuple):
    """What a reduction's arguments (not its data) decide."""

    result: np.dtype  # the result dtype
    axes: tuple  # the reduced axes, sorted
    shape: tuple  # the result's shape
    grid: Any  # the grid strategy
    M: int  # outputs
    N: int  # elements reduced into each
    kit: Any  # the op's state kit in the accumulator dtype


def _setup(op: _ops.Op, strategy, dtype, in_dtype: np.dtype, in_shape: tuple, axis,
           keepdims: bool, lanes, name: str | None = None) -> _Setup:
    """Check the arguments and derive what they decide; every argument error is raised
    here, naming ``name`` (the function called) where a dtype is refused."""
    keepdims = check_keepdims(keepdims)
    result = op.result_dtype_for(in_dtype, dtype, name)
    if op.fields != 1:
        raise TypeError(f"{op.name} has {op.fields} fields; reduce takes one-field ops "
                        "(argmax/argmin and max_with_indices/min_with_indices for pairs)")
    axes = normalize_axes(axis, len(in_shape))
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    kit = state_kit(op, (_ops.accumulator_dtype(result),), float16.read_for(in_dtype, result))
    return _Setup(result, axes, result_shape(in_shape, axes, keepdims), grid,
                  *_extents(in_shape, axes), kit)


# A repeated call (same op, strategy, dtypes, shape and axes) skips ~10 us of checks.
_planned = planner(_setup)


def _run(x: Any, op: _ops.Op, strategy, dtype=None, stream=None, axis=None,
         keepdims=False, out=None, lanes=None, initial=None, where=True, name=None,
         bits=True, quiet_cast=False, track_index=False):
    """Reduce ``axis`` of ``x`` with a one-field ``op``: checks, dtypes, launch, result;
    ``initial``: NumPy's, combined before each output's elements; ``where``: NumPy's
    mask (:func:`_where`); ``name``: the public function's, for messages; ``bits``:
    a bfloat16 input's float32 result may come back as bfloat16 bits
    (:func:`_as_bfloat16_bits`; False for a caller that computes on with it);
    ``quiet_cast``: the result's cast to a narrower dtype (float32 accumulator to
    float16) warns no overflow, which the caller tells in NumPy's words;
    ``track_index``: each element's map is given its C-order index among the reduced
    axes (else 0: a map that ignores it)."""
    x = as_array_like(x)
    name = name or op.name
    if dtype is None and out is not None and op in NUMPY_LOOPS:
        dtype = loop_of_out(op.result_dtype_for(np.dtype(x.dtype), caller=name), out)
    result, axes, shape, grid, M, N, kit = _planned(op, strategy, dtype, np.dtype(x.dtype),
                                               tuple(x.shape), axis, keepdims, lanes, name)
    kind = kind_of(x)
    check_out(out, shape, result, kind, name)
    first = None if initial is None else _initial(initial, kit.dtypes[0], name,
                                                  initial_loop(x, dtype, result, out))
    mask = _where(where, x.shape, name)
    if mask is not None and first is None and op.empty == "raise":
        _needs_initial(name)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    scalar = shape == () and out is None
    if N == 0:
        # no elements: the initial value, else the empty result (raising for max, ...)
        value = op.empty_result(result) if first is None else first
        if scalar:
            return workspace.scalar(workspace.from_host(np.full(1, value)), result)
        return deliver_host(workspace, np.full(shape, value, dtype=result), out)
    if M == 0:
        return deliver_host(workspace, np.empty(shape, dtype=result), out)
    fields = _reduce(x, axes, op, kit, grid, workspace, lanes, track_index, where=mask)
    if first is not None:
        held = workspace.from_host(np.full(1, first, kit.dtypes[0]))
        fold_first_into(kit, (fields[0], fields[0]), (held, held), workspace.stream)
    values = fields[0]
    if dtype is not None and out is not None and result.kind in "biuf" and \
            np.dtype(out.dtype) != result:  # NumPy computes in dtype=, then casts to out
        values = workspace.cast(values, result)
    if bits and _rounds_to_bfloat16(x, dtype, out, result, kind):
        values, result = _as_bfloat16_bits(values, workspace), np.dtype(np.uint16)
    with np.errstate(over="ignore") if quiet_cast else contextlib.nullcontext():
        if scalar:
            return workspace.scalar(values, result)
        return deliver(workspace, values, result, shape, out)


def _rounds_to_bfloat16(x, dtype, out, result: np.dtype, kind: str) -> bool:
    """Whether the interop layer will round this float32 result to bfloat16, on the
    device: that of a bfloat16 device input read in place, with no ``dtype=`` and no
    ``out`` (host input never replays; its results are rounded on the host)."""
    return isinstance(x, BFloat16Input) and dtype is None and out is None and \
        result == np.float32 and kind != "numpy"


def _as_bfloat16_bits(values, workspace: Workspace):
    """float32 results as the bits of the nearest bfloat16 (ties to even), rounded by a
    kernel into an allocation of the call, as the scans store their values: the
    interop layer reads uint16 results of a bfloat16 input as bfloat16 without a
    copy, so a tensor call's result is a view of its own memory and the whole call
    replays (``numbakern/runtime/replay.py``; torch's ``.to(torch.bfloat16)`` of a
    float32 result allocated outside it, and every tensor call was translated
    again)."""
    rounded = workspace.empty(values.shape[0], np.uint16)
    bfloat16.narrow_into(values, rounded, workspace.stream)
    return rounded


def _initial(initial, dtype: np.dtype, name: str, loop=None):
    """NumPy's ``initial``: a number the accumulator dtype holds (a float accumulator
    takes any real number, rounded, as NumPy's cast does). ``loop``: where NumPy's
    loop is narrower than the accumulator (:func:`initial_loop`), the value is first
    rounded to it, as NumPy casts ``initial`` to its loop's dtype (a float16 sum's
    ``initial=70000`` is inf there, where float32 would hold it). A finite value that
    the cast makes infinite is NumPy's "overflow encountered in cast" (under
    ``np.geterr()``), on every call: such a call is not replayed."""
    if isinstance(initial, int) and not isinstance(initial, bool):
        if np.dtype(dtype).kind in "iu" and not (np.iinfo(dtype).min <= initial
                                                 <= np.iinfo(dtype).max):
            raise ValueError(f"{name}: initial={initial!r} is not a value of the "
                             f"accumulator dtype {np.dtype(dtype)}")
    elif np.ndim(initial) != 0 or np.asarray(initial).dtype.kind not in "biuf":
        raise TypeError(f"{name}: initial must be a number, got {initial!r}")
    with np.errstate(invalid="ignore", over="ignore"):
        value = np.asarray(initial).astype(dtype)[()]
    if np.dtype(dtype).kind != "f" and not (value == initial or
                                            (value != value and initial != initial)):
        raise ValueError(f"{name}: initial={initial!r} is not a value of the "
                         f"accumulator dtype {dtype}")
    if loop == "bfloat16":  # (from the value given: one rounding, as NumPy's cast)
        value = np.asarray(bfloat16.round_on_host(initial)).astype(dtype)[()]
    elif loop is not None:
        with np.errstate(over="ignore"):
            value = np.asarray(initial).astype(loop).astype(dtype)[()]
    if value.dtype.kind == "f" and np.isfinite(initial) and not np.isfinite(value):
        refuse_replay("an initial that overflows its cast, which NumPy warns every call")
        numpy_fp_error("over", "overflow encountered in cast")
    return value


# The built-in ops that are NumPy's add and multiply, whose loop dtype decides values.
NUMPY_LOOPS = frozenset({_ops.SUM, _ops.PROD, _ops.NANSUM, _ops.NANPROD})


def loop_of_out(result: np.dtype, out):
    """The ``dtype=`` NumPy's sum or product loop takes from a float ``out`` where no
    ``dtype=`` is given: its result dtype promoted with ``out``'s, where that differs
    (float32 ``x`` into a float64 ``out`` is summed in float64: ``[3e38, 3e38]`` is
    6e38, not inf); else None (``out``'s dtype is checked later; a longdouble ``out``,
    which no kernel computes in, takes the result's float64 cast)."""
    out_dtype = getattr(out, "dtype", None)
    if out_dtype is None or np.dtype(out_dtype).kind != "f" or result.kind not in "biuf":
        return None
    loop = np.result_type(result, out_dtype)
    return loop if loop != result and loop.itemsize <= 8 else None


def initial_loop(x, dtype, result: np.dtype, out=None):
    """The dtype NumPy casts ``initial`` to where it is narrower than the kernels'
    float32 accumulator: NumPy's loop dtype (``dtype=``, else ``out``'s, else the
    result's) where it is float16; ``"bfloat16"`` for bfloat16 input with neither
    (ml_dtypes' own loop); else None."""
    loop = result if dtype is None and out is None else \
        np.dtype(dtype if dtype is not None else out.dtype)
    if loop == np.float16:
        return loop
    if isinstance(x, BFloat16Input) and dtype is None and out is None:
        return "bfloat16"
    return None


def _reduce(x, axes, op, kit, grid, workspace: Workspace, lanes, track_index: bool,
            where=None) -> tuple:
    """The field arrays of reducing ``axes`` of ``x``: the layout's job, through the grid
    strategy (one state per output, C order); ``where``: a checked mask
    (:func:`_where`), whose masked-out elements load as the op's identity. A bfloat16
    ``x`` (:class:`~numbakern.core.arrays.BFloat16Input`) is laid out as its bits,
    which the kit widens as it reads them."""
    return grid.reduce(_job(x, axes, op, kit, workspace, lanes, track_index, where))


def _job(x, axes, op, kit, workspace: Workspace, lanes, track_index: bool, where=None,
         finish=None) -> ReduceJob:
    """The reduce job of :func:`_reduce`'s arguments; ``finish``: a
    :class:`~numbakern.core.jobs.Finish` its storing pass may fold in."""
    x, widened = bits_of(x)
    if widened:
        kit = state_kit(op, kit.dtypes, read=float16.widened(kit.read))
    layout = reduce_layout(x, axes, kit, not op.commutative, lanes, track_index,
                           workspace.stream, where)
    return ReduceJob(layout, op, kit, workspace, finish)


def _reduce_finished(x, axes, op, kit, grid, workspace: Workspace, lanes, emit, dst,
                     argument, finish_apart, where=None) -> None:
    """Reduce ``axes`` of ``x`` into ``dst`` (1-D, one finished value per output):
    ``emit`` (``numbakern/kernels/finishes.py``, handed ``(dst, argument)``) finishes
    each output in the reduction's storing pass when the grid strategy stores whole
    outputs (the default's: one launch for a single-pass size); otherwise
    ``finish_apart(fields)`` finishes the states the strategy returns."""
    job = _job(x, axes, op, kit, workspace, lanes, False, where,
               Finish(emit, (dst, argument)))
    fields = grid.reduce(job)
    if not job.finished:
        finish_apart(kit.unpack(fields))


def _reduce_indices(x, axes, op, kit, grid, workspace: Workspace, lanes, where, M: int):
    """An arg op's indices alone (1-D, one per output): the storing pass writes each
    output's index (:func:`~numbakern.kernels.finishes.index_emit`) where the grid
    strategy stores whole outputs; otherwise the index field of its states."""
    indices = workspace.empty(M, _ops.INDEX_DTYPE)
    job = _job(x, axes, op, kit, workspace, lanes, True, where,
               Finish(index_emit(), (indices, 0.0)))
    fields = grid.reduce(job)
    return indices if job.finished else fields[1]


def _where(where, shape: tuple, name: str):
    """NumPy's ``where=``: ``None`` for the Python ``True`` (NumPy's default, every
    element), else the mask as an array object: bool (NumPy refuses to cast anything
    else to bool), broadcastable to ``x``'s ``shape``; it is read in place at stride 0
    along broadcast axes (a NumPy mask is uploaded at its own size).

    Raises:
        TypeError: a mask that is not bool (``None`` included).
        ValueError: a mask that does not broadcast to ``shape``.
    """
    if where is True:
        return None
    if isinstance(where, BFloat16Bits) or where is None:
        raise TypeError(f"{name}: where must be True or a bool array, got {where!r}")
    mask = as_array_like(where, "where")
    if np.dtype(mask.dtype) != np.bool_:
        raise TypeError(f"{name}: where must be a bool array (True: the element is "
                        f"reduced), got dtype {mask.dtype}; NumPy does not cast it to bool")
    try:
        fits = np.broadcast_shapes(tuple(mask.shape), tuple(shape)) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name}: where of shape {tuple(mask.shape)} does not broadcast "
                         f"to x's shape {tuple(shape)}")
    return mask


def _needs_initial(op_name: str):
    """NumPy's error for ``where=`` on a reduction without an identity."""
    raise ValueError(f"reduction operation '{_ops.ufunc_name(op_name)}' does not "
                     "have an identity, so to use a where mask one has to specify "
                     "'initial'")


@planner
def _planned_arg(name: str, direction: str, tie_break_left, in_dtype: np.dtype,
                 in_shape: tuple, axis, keepdims: bool, strategy, lanes,
                 skip_nan: bool = False, many_axes: bool = False) -> tuple:
    """argmax/argmin's argument checks and what they decide, as :func:`_setup`:
    ``(op, dtypes, axes, shape, grid, M, N, kit)``; ``name``: the function called, as
    errors name it; ``skip_nan``: the nanargmax and nanargmin ops; ``many_axes``:
    ``axis`` may be a tuple (nanmax and nanmin, whose values, unlike an index, mean
    something over several axes, as NumPy's)."""
    keepdims = check_keepdims(keepdims)
    tie_break_left = check_flag(tie_break_left, "tie_break_left")
    if skip_nan:
        op = _ops.NANARGMAX if direction == "max" else _ops.NANARGMIN
    else:
        op = _ops.arg_op(direction, tie_break_left)
    op.check_dtype(in_dtype, caller=name)
    ndim = len(in_shape)
    if many_axes:
        axes = normalize_axes(axis, ndim)
    else:
        axes = tuple(range(ndim)) if axis is None else (normalize_axis(axis, ndim),)
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    kit = state_kit(op, (_ops.accumulator_dtype(in_dtype), _ops.INDEX_DTYPE))
    return (op, (in_dtype, _ops.INDEX_DTYPE), axes, result_shape(in_shape, axes, keepdims),
            grid, *_extents(in_shape, axes), kit)


def _arg(x: Any, direction: str, axis, keepdims: bool, tie_break_left: bool, outs,
         want_values: bool, strategy, stream, lanes, skip_nan: bool = False,
         many_axes: bool = False, initial=None, where=True):
    """argmax/argmin (``want_values=False``) or max/min_with_indices: checks, launch;
    ``skip_nan``: their NaN-skipping forms (an all-NaN output keeps the identity's
    index, :func:`_all_nan`); ``many_axes``: nanmax/nanmin, taking NumPy's axis
    tuples, ``initial`` (folded into the values by max or min; the indices then mean
    nothing) and ``where`` (NumPy's mask; it needs ``initial``, as NumPy's)."""
    x = as_array_like(x)
    mask = _where(where, x.shape, f"nan{direction}")
    if mask is not None and initial is None:
        _needs_initial(f"nanarg{direction}" if np.dtype(x.dtype).kind == "f" else direction)
    if x.ndim == 0:  # NumPy's argmax sees a 0-d array as one element (axis 0 or -1)
        if many_axes:  # np.nanmax's 0-d takes axis None or () only, and stays 0-d
            normalize_axes(axis, 0)
            axis = None
        x = x.reshape(1)
        check_keepdims(keepdims)  # checked, though a 0-d result has no axis to keep
        keepdims = False
    name = f"nan{direction}" if many_axes else f"nanarg{direction}" if skip_nan else \
        f"{direction}_with_indices" if want_values else f"arg{direction}"
    op, dtypes, axes, shape, grid, M, N, kit = _planned_arg(
        name, direction, tie_break_left, np.dtype(x.dtype), tuple(x.shape), axis, keepdims,
        strategy, lanes, skip_nan, many_axes)
    kind = kind_of(x)
    for i, (o, dt) in enumerate(zip(outs, dtypes)):
        check_out(o, shape, dt, kind, name, integer=i == 1)  # outs: (values, indices)
    check_apart(outs, kind, name)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    first = None if initial is None else _initial(initial, kit.dtypes[0], f"nan{direction}")
    if N == 0 and first is None:
        if many_axes:  # NumPy's own words (Dask's meta inference matches them)
            raise ValueError(f"zero-size array to reduction operation f{direction} which "
                             "has no identity")
        # NumPy's nanargmax fails in its argmax
        raise ValueError(f"attempt to get {name.removeprefix('nan')} of an empty sequence")
    if M * N == 0:
        # an empty slice's result is the initial; its code flags it as one of nothing but
        # NaN, so that a NaN initial warns as NumPy's (nanmax's warning follows NaN results)
        fills = (0 if first is None else first, _ops.ALL_NAN if skip_nan else 0)
        results = [deliver_host(workspace, np.full(shape, v, dtype=dt), o)
                   for v, dt, o in zip(fills, dtypes, outs)]
    elif not want_values:  # the indices alone (argmax and argmin take no initial)
        indices = _reduce_indices(x, axes, op, kit, grid, workspace, lanes, mask, M)
        return deliver(workspace, indices, dtypes[1], shape, outs[1])
    else:
        fields = _reduce(x, axes, op, kit, grid, workspace, lanes, track_index=True,
                         where=mask)
        if first is not None and first == first:  # NumPy's fmax/fmin with initial:
            # folded into the values; a NaN initial is one more NaN, which they skip
            values_kit = state_kit(_ops.MAX if direction == "max" else _ops.MIN,
                                   (kit.dtypes[0],))
            held = workspace.from_host(np.full(1, first, kit.dtypes[0]))
            fold_first_into(values_kit, (fields[0], fields[0]), (held, held),
                            workspace.stream)
        results = [deliver(workspace, f, dt, shape, o) if want_values or i == 1 else None
                   for i, (f, dt, o) in enumerate(zip(fields, dtypes, outs))]
    return tuple(results) if want_values else results[1]


class MaxWithIndices(NamedTuple):
    """What :func:`max_with_indices` returns, as ``torch.return_types.max``."""

    values: Any
    indices: Any


class MinWithIndices(NamedTuple):
    """What :func:`min_with_indices` returns, as ``torch.return_types.min``."""

    values: Any
    indices: Any


# --- public functions --------------------------------------------------------------


@dispatch
@replayable
@honours_stream
def sum(x, axis=None, dtype=None, out=None, keepdims=False, initial=None,  # noqa: A001
        where=True, *, strategy=None, stream=None, lanes=None):
    """Sum along ``axis``, as ``np.sum(x, axis, dtype, out, keepdims)``.

    Result dtype: NumPy's (bool and integers narrower than 64 bits widen to int64 or
    uint64; float16 stays float16 but accumulates in float32), or ``dtype``. The sum
    of no elements is 0; of a slice holding NaN, a NaN whose sign bit and payload are
    not specified (NumPy's is the NaN its pairwise order meets first; a GPU's add
    gives its canonical NaN). Host input warns NumPy's floating-point errors under
    ``np.geterr()`` (``inf + -inf`` where a slice holds both infinities and no NaN; an
    overflow), found from the host result (``nansum``, ``mean``, ``nanmean``,
    :func:`prod`, ``nanprod`` and the scans ``cumsum``, ``cumprod`` and their nan forms
    too); device input gets the values without them.

    Args:
        x, axis, dtype, out, keepdims: as ``np.sum``.
        strategy: how threads combine: a name from
            ``numbakern.strategies.available()`` (``"atomic_fold/shared_tree"``) or a
            strategy object; default ``"two_pass/warp_shuffle"``, bitwise reproducible.
        stream: a Numba stream, a CuPy stream or a raw pointer (default: CuPy's
            current stream for CuPy input, else the default stream).
        lanes: for axis reductions, threads per row (see this module's docstring,
            which the other reductions share).
        initial: NumPy's: a number combined before each output's elements, and the
            result of reducing none (so ``max`` of nothing with ``initial`` is it).
        where: NumPy's: a bool array broadcastable to ``x`` (any kind ``x`` may be: a
            NumPy mask is uploaded at its own size, a device mask read in place, at
            stride 0 along broadcast axes); an element it masks out loads as the op's
            identity, in every kernel and under every strategy. ``max`` and ``min``
            (no identity) need ``initial`` with any ``where`` but ``True``, as
            NumPy's.

    Example::

        numbakern.sum(np.array([3, 1, 4, 1, 5]))   # 14, an int64

    Raises:
        TypeError: an input or ``dtype=`` outside bool/int/uint/float16-64 (or
            bfloat16 through a torch tensor or ``ml_dtypes`` array); ``initial`` not a
            number; ``keepdims`` neither a bool nor an integer (as NumPy's reductions
            read it); ``axis`` not None, an int or a tuple of ints; a ``stream`` that
            is none of the kinds above; ``where`` not bool
            (NumPy casts nothing else to bool); ``lanes`` not an int (a bool, a float)
            or None.
        ValueError: an unknown strategy, or one that needs a commutative op; a bad
            ``out`` (:class:`~numbakern.OutDtypeError` for its dtype); ``initial``
            out of the accumulator dtype's range; ``lanes`` other than None, 32 or the
            strategy's threads; ``where`` that does not broadcast to ``x``, or
            ``where`` on ``max``/``min`` without ``initial`` (NumPy's message);
            :class:`~numbakern.AxisError` for a bad ``axis``.
    """
    value = _run(x, _ops.SUM, strategy, dtype, stream, axis, keepdims, out, lanes,
                 initial=initial, where=where, quiet_cast=True)  # told below, as NumPy's
    _sum_special_values(x, value, axis, keepdims, where, False, initial)
    _integer_cast_errors(x, dtype, False)
    return value


@dispatch
@replayable
@honours_stream
def mean(x, axis=None, dtype=None, out=None, keepdims=False, *, strategy=None, stream=None,
         lanes=None, where=True):
    """The mean along ``axis``, as ``np.mean(x, axis, dtype, out, keepdims)``.

    NumPy's rule: the sum (``dtype``, else float64 for bool and integers, float32 for
    float16, the input's own for float32/64), divided by the number of elements in
    float64 and cast to the result dtype (``dtype``, else float64 for bool and
    integers, the input's float dtype); into an ``out`` of another dtype, the sum
    rounded to ``dtype`` (when given) is divided into ``out``'s dtype instead, as
    NumPy divides in ``out``. The mean of no elements is NaN, with NumPy's two
    warnings ("Mean of empty slice", then its division's invalid value under
    ``np.geterr()``) for any input: they follow from the shape.

    With ``where`` (NumPy's mask), each output reduces ``(sum, count)`` pairs of the
    elements it keeps (``numbakern.ops.SUM_AND_COUNT``) and divides by its own count:
    NaN, with NumPy's two warnings for NumPy input, where it keeps none.

    Args:
        x, axis, dtype, out, keepdims, where: as ``np.mean``.
        strategy, stream, lanes: as :func:`sum`, which computes the sum.

    Raises: as :func:`sum`.
    """
    return _mean(x, axis, dtype, out, keepdims, strategy, stream, lanes, where, "mean")


def _mean(x, axis, dtype, out, keepdims, strategy, stream, lanes, where, name: str):
    """:func:`mean`, its errors naming ``name`` (nanmean's of integers is this)."""
    x = as_array_like(x)
    _no_axis_of_0d(x, axis)
    in_dtype = np.dtype(x.dtype)
    _ops.SUM.check_dtype(in_dtype, caller=name)
    acc, result = _ops.numpy_mean_dtypes(in_dtype, dtype)
    mask = _where(where, x.shape, name)
    if mask is not None:
        return _masked_mean(x, mask, where, axis, dtype, out, keepdims, in_dtype, acc,
                            result, strategy, stream, lanes, name)
    planned = _planned(_ops.SUM, strategy, acc, in_dtype, tuple(x.shape), axis, keepdims,
                       lanes, name)
    kind = kind_of(x)
    out_dtype = check_out(out, planned.shape, result, kind, name)
    if kind != "numpy" and planned.M * planned.N and out_dtype == result:
        return _device_mean(x, planned, result, out, dtype, kind, stream, lanes)
    # NumPy sums in dtype= into out, then divides there: neither the fused division
    # nor the result dtype's rounding applies to an out of another dtype
    summed = dtype if dtype is not None and out_dtype != result else acc
    if acc is None:  # NumPy's own sum rule: its loop takes a wider float out's dtype
        summed = loop_of_out(in_dtype, out)
    total = _run(x, _ops.SUM, strategy, summed, stream, axis, keepdims, None, lanes,
                 bits=False, quiet_cast=True)  # an overflow is told below, as NumPy's
    count = planned.N
    if count == 0 and planned.M:
        _warn_mean_of_nothing(_scalar_division(x, axis, keepdims, out,
                                               _numpy_sum_dtype(in_dtype, dtype)))
    elif count == 0:  # no outputs: no division
        warn("Mean of empty slice")
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if kind == "numpy":
        with np.errstate(invalid="ignore"):
            value = np.asarray(np.asarray(total, np.float64) / np.float64(count))
        value = deliver_host(workspace, value.astype(out_dtype), out)
        _sum_special_values(x, value, axis, keepdims, True, False)
        _integer_cast_errors(x, dtype, False)
        return value
    src = flat(total, "the sum")
    if _into(out):  # divided straight into it: no copy of the means
        divide_into(src, flat(out), count, workspace.stream)
        return out
    dst = workspace.empty(src.shape[0], out_dtype)
    divide_into(src, dst, count, workspace.stream)
    if _rounds_to_bfloat16(x, dtype, out, result, kind):
        dst, out_dtype = _as_bfloat16_bits(dst, workspace), np.dtype(np.uint16)
    return deliver(workspace, dst, out_dtype, planned.shape, out)


def _masked_mean(x, mask, where, axis, dtype, out, keepdims, in_dtype: np.dtype, acc,
                 result: np.dtype, strategy, stream, lanes, name: str):
    """mean with ``where=``: each output's ``(sum, count)`` of the elements it keeps,
    divided, with NumPy's words in its order (the count's, the sum's, the division's).
    An integer (or bool) mean of host input is divided in float64 and cast by NumPy,
    so a slice that keeps nothing becomes what NumPy's cast makes of its NaN."""
    acc = _ops.accumulator_dtype(np.dtype(acc if acc is not None else in_dtype))
    scalar = _scalar_division(x, axis, keepdims, out, _numpy_sum_dtype(in_dtype, dtype))
    cast = kind_of(x) == "numpy" and result.kind in "iub"
    if cast:
        shape = result_shape(tuple(x.shape), normalize_axes(axis, x.ndim),
                             check_keepdims(keepdims))
        check_out(out, shape, result, "numpy", name)
    told = []

    def nothing_kept():
        warn("Mean of empty slice")
        told.append(True)

    value = _counted(name, x, _ops.SUM_AND_COUNT, (acc, _ops.INDEX_DTYPE),
                     np.dtype(np.float64) if cast else result, axis, keepdims,
                     None if cast else out, strategy, stream, lanes, divide_by_into, 0,
                     nothing_kept, mask, (divide_by_count_emit(), 0.0),
                     float16.read_for(in_dtype, result))
    _sum_special_values(x, value, axis, keepdims, where, False)
    _integer_cast_errors(x, dtype, False)
    if told:
        _division_of_nothing(scalar)
    if not cast:
        return value
    # NumPy's cast: with its warning where it casts a scalar, none where it divides
    # into an array (the cast is inside its division, which tells only "divide")
    with np.errstate(invalid="ignore") if not scalar else contextlib.nullcontext():
        value = np.asarray(value).astype(result)[()]
    if out is None:
        return value
    out[...] = value
    return out


def _warn_mean_of_nothing(scalar: bool) -> None:
    """NumPy's two words where a mean has no elements: its count's, then its division's
    ``0 / 0`` (see :func:`_scalar_division`)."""
    warn("Mean of empty slice")
    _division_of_nothing(scalar)


def _division_of_nothing(scalar: bool) -> None:
    numpy_fp_error("invalid", "invalid value encountered in "
                   + ("scalar divide" if scalar else "divide"))


def _numpy_sum_dtype(in_dtype: np.dtype, dtype) -> np.dtype:
    """The dtype np.mean sums in: ``dtype``, else float64 for bool and integers,
    float32 for float16, else the input's."""
    if dtype is not None:
        return np.dtype(dtype)
    if in_dtype.kind in "biu":
        return np.dtype(np.float64)
    return np.dtype(np.float32) if in_dtype == np.float16 else in_dtype


def _into(out) -> bool:
    """Whether a device ``out`` takes a kernel's results as its own flat memory (else
    they go to an allocation, then into ``out``'s layout by :func:`deliver`)."""
    return out is not None and c_contiguous(out)


def _no_axis_of_0d(x, axis) -> None:
    """``AxisError`` for an axis of 0-d ``x``, as ``np.mean``, ``np.var`` and
    ``np.std`` raise (where ``np.sum``, ``np.max`` and the nan-forms of float input
    take axis 0 and -1 of a 0-d array; of integer input, the nan-forms are these)."""
    if x.ndim == 0 and axis is not None and axis != ():
        normalize_axes(axis if isinstance(axis, tuple) else (axis,), 0)


def _device_mean(x, planned: _Setup, result: np.dtype, out, dtype, kind: str, stream,
                 lanes):
    """The mean of device input with elements: the sum's reduction, its storing pass
    dividing each sum by the count (``finishes.divide_emit``, one launch where the
    sum's is one), into ``out`` itself or the result's allocation."""
    workspace = Workspace(kind, resolve_stream(stream, kind))
    into = _into(out)
    dst = flat(out) if into else workspace.empty(planned.M, result)
    count = planned.N

    def apart(fields):
        divide_into(fields[0], dst, count, workspace.stream)

    _reduce_finished(x, planned.axes, _ops.SUM, planned.kit, planned.grid, workspace, lanes,
                     divide_emit(), dst, float(count), apart)
    if into:
        return out
    if _rounds_to_bfloat16(x, dtype, out, result, kind):
        dst, result = _as_bfloat16_bits(dst, workspace), np.dtype(np.uint16)
    return deliver(workspace, dst, result, planned.shape, out)


@dispatch
@replayable
@honours_stream
def prod(x, axis=None, dtype=None, out=None, keepdims=False, initial=None,
         where=True, *, strategy=None, stream=None, lanes=None):
    """Product along ``axis``, as ``np.prod`` (no elements: 1).

    Integer products wrap on overflow as NumPy's do; float products overflow to inf.
    A float product is a tree's: where a partial product overflows or rounds to 0,
    the special value can differ from NumPy's sequential one (``initial=0.0`` with
    factors whose product overflows: NumPy's 0, this ``inf * 0``, NaN;
    :func:`cumprod` settles NumPy's special values, at a cost). Result dtype: as
    :func:`sum`'s. Host input warns NumPy's floating-point errors as :func:`sum`'s
    ("overflow", or "invalid value" for ``inf * 0``, "encountered in reduce"), from
    the host result; an overflow before an infinity of the same slice is not told
    (NumPy's words there follow its order).

    Raises:
        TypeError, ValueError, AxisError: as :func:`sum`.
    """
    value = _run(x, _ops.PROD, strategy, dtype, stream, axis, keepdims, out, lanes,
                 initial=initial, where=where, quiet_cast=True)  # told below, as NumPy's
    _integer_cast_errors(x, dtype, False)
    _product_special_values(x, value, axis, keepdims, where, False, initial)
    return value


@dispatch
@replayable
@honours_stream
def max(x, axis=None, out=None, keepdims=False, initial=None,  # noqa: A001
        where=True, *, strategy=None, stream=None, lanes=None):
    """Largest element along ``axis``, as ``np.max``: NaN where any element is NaN.

    Result dtype: the input's; shape as :func:`sum`'s.

    Raises:
        ValueError: reducing no elements, as NumPy; otherwise as :func:`sum`.
        TypeError, AxisError: as :func:`sum` (complex or object input: TypeError).
    """
    return _run(x, _ops.MAX, strategy, None, stream, axis, keepdims, out, lanes,
                initial=initial, where=where)


@dispatch
@replayable
@honours_stream
def min(x, axis=None, out=None, keepdims=False, initial=None,  # noqa: A001
        where=True, *, strategy=None, stream=None, lanes=None):
    """Smallest element along ``axis``, as ``np.min``: NaN where any element is NaN.

    Result dtype: the input's; shape as :func:`sum`'s.

    Raises:
        ValueError: reducing no elements, as NumPy; otherwise as :func:`sum`.
        TypeError, AxisError: as :func:`sum` (complex or object input: TypeError).
    """
    return _run(x, _ops.MIN, strategy, None, stream, axis, keepdims, out, lanes,
                initial=initial, where=where)


@dispatch
@replayable
@honours_stream
def xor_sum(x, axis=None, out=None, keepdims=False, *, strategy=None, stream=None,
            lanes=None, initial=None, where=True):
    """Bitwise XOR along ``axis``, as ``np.bitwise_xor.reduce(x, axis)`` (no elements:
    0), with the arguments of :func:`sum` but ``dtype``: ``axis=None`` (the whole
    array) by default, as ``sum``'s, where NumPy's ``reduce`` takes axis 0.

    Result dtype: the input's.

    Raises:
        TypeError: for float input (bool and integers only); a float ``out``
            (NumPy's bitwise ops have no float loop).
        ValueError, AxisError: as :func:`sum`.
    """
    _bitwise_out(out, "xor_sum")
    return _run(x, _ops.BITWISE_XOR, strategy, None, stream, axis, keepdims, out, lanes,
                initial=initial, where=where, name="xor_sum")


@dispatch
@replayable
@honours_stream
def bitwise_and_sum(x, axis=None, out=None, keepdims=False, *, strategy=None, stream=None,
                    lanes=None, initial=None, where=True):
    """Bitwise AND along ``axis``, as ``np.bitwise_and.reduce(x, axis)`` (no elements:
    all ones), with the arguments of :func:`sum` but ``dtype``: ``axis=None`` (the whole
    array) by default, as ``sum``'s, where NumPy's ``reduce`` takes axis 0.

    Result dtype: the input's.

    Raises:
        TypeError: for float input (bool and integers only); a float ``out``
            (NumPy's bitwise ops have no float loop).
        ValueError, AxisError: as :func:`sum`.
    """
    _bitwise_out(out, "bitwise_and_sum")
    return _run(x, _ops.BITWISE_AND, strategy, None, stream, axis, keepdims, out, lanes,
                initial=initial, where=where, name="bitwise_and_sum")


@dispatch
@replayable
@honours_stream
def bitwise_or_sum(x, axis=None, out=None, keepdims=False, *, strategy=None, stream=None,
                   lanes=None, initial=None, where=True):
    """Bitwise OR along ``axis``, as ``np.bitwise_or.reduce(x, axis)`` (no elements:
    0), with the arguments of :func:`sum` but ``dtype``: ``axis=None`` (the whole
    array) by default, as ``sum``'s, where NumPy's ``reduce`` takes axis 0.

    Result dtype: the input's.

    Raises:
        TypeError: for float input (bool and integers only); a float ``out``
            (NumPy's bitwise ops have no float loop).
        ValueError, AxisError: as :func:`sum`.
    """
    _bitwise_out(out, "bitwise_or_sum")
    return _run(x, _ops.BITWISE_OR, strategy, None, stream, axis, keepdims, out, lanes,
                initial=initial, where=where, name="bitwise_or_sum")


_BITWISE = (_ops.BITWISE_AND, _ops.BITWISE_OR, _ops.BITWISE_XOR)


def _bitwise_out(out, name: str) -> None:
    """A bitwise reduction's ``out`` holds bool or integers: NumPy's bitwise ufuncs have
    no float loop, so ``np.bitwise_xor.reduce(ints, out=floats)`` is a TypeError (the
    same_kind rule alone would let the integers into floats)."""
    dtype = getattr(out, "dtype", None)  # (not an array: check_out's error says so)
    if dtype is not None and np.dtype(dtype).kind not in "biu":
        raise TypeError(f"{name}: out has dtype {np.dtype(dtype)}; a bitwise "
                        f"reduction writes bool or integers (NumPy's bitwise ops have no "
                        f"float loop)")


@dispatch
@replayable
@honours_stream
def reduce(x, op, axis=None, dtype=None, out=None, keepdims=False, *,
           strategy=None, stream=None, lanes=None, initial=None, where=True):
    """Reduce along ``axis`` with ``op``: a :class:`numbakern.Op` or a built-in's name.

    An op of ``N >= 2`` fields returns a tuple of ``N`` arrays, one per field, each
    in its field's dtype (``op.state_dtypes``, or read from the identity's values:
    :func:`numbakern.ops.field_dtypes`); ``dtype`` then sets the result dtype those
    rules start from; ``out`` and ``initial`` are not taken.

    ``dtype`` sets the accumulator and result dtype (default: the op's rule, the
    input's dtype for a user's op). The op's identity fills only lanes that hold no
    element; reducing no elements gives the op's ``empty`` result. A non-commutative
    op combines in C order of the reduced axes. A user's ``map(value, index)`` is
    given the element's C-order index among the reduced axes (its flat index for
    ``axis=None``; its position along ``axis`` for one axis), as ``np.argmax``
    counts.

    Example::

        @numbakern.op(identity=0.0, map=lambda v, i: abs(v))
        def absmax(a, b):          # the largest |x|
            return max(a, b)

        numbakern.reduce(x, absmax, axis=1)

    Raises:
        ValueError: an unknown op name (or an ``op`` that is neither an Op nor a
            name), a strategy that needs a commutative op given a non-commutative
            one; reducing no elements with an op whose ``empty`` is ``"raise"``.
        TypeError: a plain function not wrapped by :func:`numbakern.op`; a dtype the
            op does not take; ``out`` or ``initial`` with an op of two or more fields.
        AxisError: as :func:`sum`.
    """
    op = _ops.get(op)
    if op.fields > 1:
        return _run_fields(x, op, strategy, dtype, stream, axis, keepdims, out, lanes,
                           initial, where)
    if op in _BITWISE:
        _bitwise_out(out, "reduce")
    return _run(x, op, strategy, dtype, stream, axis, keepdims, out, lanes,
                initial=initial, where=where, track_index=op.reads_index)


def _run_fields(x, op, strategy, dtype, stream, axis, keepdims, out, lanes, initial, where):
    """:func:`reduce` with an op of ``N >= 2`` fields: a tuple of ``N`` results."""
    if out is not None or initial is not None:
        raise TypeError(f"reduce: {op.name} has {op.fields} fields; out= and initial= are "
                        "taken with one-field ops only")
    x = as_array_like(x)
    in_dtype = np.dtype(x.dtype)
    result = op.result_dtype_for(in_dtype, dtype)
    dtypes = op.given_state_dtypes(in_dtype, dtype) or _ops.field_dtypes(op, result)
    keepdims = check_keepdims(keepdims)
    axes = normalize_axes(axis, x.ndim)
    shape = result_shape(tuple(x.shape), axes, keepdims)
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    kit = state_kit(op, tuple(_ops.accumulator_dtype(d) for d in dtypes))
    mask = _where(where, x.shape, op.name)
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    M, N = _extents(tuple(x.shape), axes)
    if N == 0 and op.empty == "raise":
        op.empty_result(result)  # raises, as NumPy
    if M * N == 0:  # no elements: the identity in every output
        return tuple(deliver_host(workspace, np.full(shape, v, dtype=d), None)
                     for v, d in zip(kit.identity_values, dtypes))
    fields = kit.unpack(_reduce(x, axes, op, kit, grid, workspace, lanes, op.reads_index,
                                where=mask))
    if shape == ():
        return tuple(workspace.scalar(f, d) for f, d in zip(fields, dtypes))
    return tuple(deliver(workspace, f, d, shape, None) for f, d in zip(fields, dtypes))


@dispatch
@replayable
@honours_stream
def any(x, axis=None, out=None, keepdims=False, *,  # noqa: A001
        strategy=None, stream=None, lanes=None, where=True):
    """Whether any element along ``axis`` is nonzero, as ``np.any`` (NaN counts as
    nonzero; no elements: False).

    Result dtype bool; ``axis``, ``out``, ``keepdims``, ``strategy``, ``stream`` and
    ``lanes`` as :func:`sum`. Each element enters as ``x != 0`` (the op's map), on
    every path, so a bool byte other than 0 or 1 is True, as NumPy reads it.

    Raises:
        TypeError, ValueError, AxisError: as :func:`sum`.
    """
    return _run(x, _ops.ANY, strategy, None, stream, axis, keepdims, out, lanes, where=where)


@dispatch
@replayable
@honours_stream
def all(x, axis=None, out=None, keepdims=False, *,  # noqa: A001
        strategy=None, stream=None, lanes=None, where=True):
    """Whether every element along ``axis`` is nonzero, as ``np.all`` (no elements:
    True). Arguments, result and errors as :func:`any`.
    """
    return _run(x, _ops.ALL, strategy, None, stream, axis, keepdims, out, lanes, where=where)


@dispatch
@replayable
@honours_stream
def count_nonzero(x, axis=None, *, keepdims=False, strategy=None, stream=None, lanes=None):
    """The number of nonzero elements along ``axis``, as ``np.count_nonzero`` (NaN
    counts as nonzero).

    Returns:
        for ``axis=None`` without ``keepdims`` (NumPy input) the scalar type of the
        installed NumPy's ``np.count_nonzero`` (``np.intp`` since NumPy 2, a Python
        int before), else ``intp`` counts of the reduced shape.

    Raises: as :func:`sum`.
    """
    counts = _run(x, _ops.COUNT_NONZERO, strategy, None, stream, axis, keepdims, None, lanes)
    return _whole_count(counts) if isinstance(counts, np.generic) else counts


# NumPy 2's np.count_nonzero of a whole array is an np.intp, NumPy 1's a Python int
_whole_count = type(np.count_nonzero(np.zeros(1)))


@dispatch
@replayable
@honours_stream
def nansum(x, axis=None, dtype=None, out=None, keepdims=False, initial=None,
           where=True, *, strategy=None, stream=None, lanes=None):
    """Sum along ``axis`` treating NaN as zero, as ``np.nansum`` (an all-NaN slice and
    no elements: 0). Arguments, result dtype and errors as :func:`sum`.
    """
    value = _run(x, _ops.NANSUM, strategy, dtype, stream, axis, keepdims, out, lanes,
                 initial=initial, where=where, quiet_cast=True)  # as sum's
    _sum_special_values(x, value, axis, keepdims, where, True, initial)
    _integer_cast_errors(x, dtype, True)
    return value


@dispatch
@replayable
@honours_stream
def nanprod(x, axis=None, dtype=None, out=None, keepdims=False, initial=None,
            where=True, *, strategy=None, stream=None, lanes=None):
    """Product along ``axis`` treating NaN as one, as ``np.nanprod`` (an all-NaN
    slice and no elements: 1). Arguments, result dtype and errors as :func:`prod`.
    """
    value = _run(x, _ops.NANPROD, strategy, dtype, stream, axis, keepdims, out, lanes,
                 initial=initial, where=where, quiet_cast=True)  # told below, as NumPy's
    _integer_cast_errors(x, dtype, True)
    _product_special_values(x, value, axis, keepdims, where, True, initial)
    return value


@dispatch
@replayable
@honours_stream
def argmax(x, axis=None, out=None, *, keepdims=False, tie_break_left=True,
           strategy=None, stream=None, lanes=None):
    """Index of the largest element along ``axis``, as ``np.argmax``.

    ``axis=None``: the flat index in C order, whatever the memory layout. Among equal
    values the first (smallest) index wins, or with ``tie_break_left=False`` the last.
    NaN counts as larger than everything, all NaNs equal: the first NaN's index
    (NumPy's answer), the last with ``tie_break_left=False``.

    Returns:
        int64 indices of shape ``x.shape`` without ``axis`` (``keepdims``: with it as
        length 1); a scalar for ``axis=None``.

    Every strategy gives the exact same indices: the combine is a total order (value,
    then index), so the order blocks and threads combine in cannot matter.

    Raises:
        ValueError: reducing an empty axis (NumPy's "attempt to get argmax of an empty
            sequence"); a bad ``out`` (int64 result, ``same_kind`` casting); an unknown
            ``strategy``; ``lanes`` other than None, 32 or the strategy's threads.
        AxisError: ``axis`` out of range.
        TypeError: ``axis`` not an int; ``x`` complex (or any dtype but bool, integers
            and floats); ``keepdims`` neither a bool nor an integer (NumPy's argmax
            takes any truthy one); ``tie_break_left`` not True or False; a bad
            ``stream`` (as :func:`sum`).
    """
    return _arg(x, "max", axis, keepdims, tie_break_left, (None, out), False, strategy,
                stream, lanes)


@dispatch
@replayable
@honours_stream
def argmin(x, axis=None, out=None, *, keepdims=False, tie_break_left=True,
           strategy=None, stream=None, lanes=None):
    """Index of the smallest element along ``axis``, as ``np.argmin``.

    The mirror of :func:`argmax`: ties go to the first index (``tie_break_left``),
    NaN wins (the first NaN's index), int64 indices, exact for every strategy.

    Raises: as :func:`argmax`.
    """
    return _arg(x, "min", axis, keepdims, tie_break_left, (None, out), False, strategy,
                stream, lanes)


@dispatch
@replayable
@honours_stream
def max_with_indices(x, axis=FLAT, *, dim=None, keepdims=False, keepdim=None,
                     tie_break_left=True, out=None, strategy=None, stream=None,
                     lanes=None):
    """``(values, indices)``: the largest elements along ``axis`` and where they are,
    as a :class:`MaxWithIndices` named tuple (``torch.max(x, dim)``'s fields).

    ``values`` equals ``np.max(x, axis)`` (NaN where a NaN is present; the input's
    dtype) and ``indices`` equals ``np.argmax(x, axis)`` (int64), computed in one pass
    over ``x``; ``tie_break_left`` as in :func:`argmax`. ``dim`` and ``keepdim``:
    torch's names for ``axis`` and ``keepdims`` (keyword only). ``out``: ``None`` or a
    pair ``(values_out, indices_out)`` (either may be ``None``).

    Note: the ``atomic_fold`` strategy's packed words return a maximum of ``-0.0`` as
    ``0.0`` (``strategies/atomic_fold.py``); indices are exact everywhere.

    Raises:
        ValueError: reducing an empty axis; a bad ``out`` (its two arrays sharing
            memory too); an unknown ``strategy``; a bad ``lanes``. AxisError: a bad
            ``axis``.
        TypeError: ``out`` not ``None`` nor a pair; ``axis`` not an int; both
            ``axis`` and ``dim``, or ``keepdims`` and ``keepdim``, given; ``keepdim``
            not True or False, ``keepdims`` neither a bool nor an integer; ``x``
            complex; a bad ``stream``.
    """
    axis = axis_or_dim(axis, dim, "max_with_indices", FLAT)
    keepdims = keepdims_or_keepdim(keepdims, keepdim, "max_with_indices")
    return MaxWithIndices(*_arg(x, "max", axis, keepdims, tie_break_left, _out_pair(out),
                                True, strategy, stream, lanes))


@dispatch
@replayable
@honours_stream
def min_with_indices(x, axis=FLAT, *, dim=None, keepdims=False, keepdim=None,
                     tie_break_left=True, out=None, strategy=None, stream=None,
                     lanes=None):
    """``(values, indices)``: the smallest elements along ``axis`` and where they are,
    as a :class:`MinWithIndices` named tuple (the mirror of :func:`max_with_indices`).

    Raises: as :func:`max_with_indices`.
    """
    axis = axis_or_dim(axis, dim, "min_with_indices", FLAT)
    keepdims = keepdims_or_keepdim(keepdims, keepdim, "min_with_indices")
    return MinWithIndices(*_arg(x, "min", axis, keepdims, tie_break_left, _out_pair(out),
                                True, strategy, stream, lanes))


@planner
def _planned_lse(in_dtype: np.dtype, in_shape: tuple, axis, keepdims: bool, strategy,
                 lanes) -> tuple:
    """logsumexp's argument checks and what they decide: ``(result dtype, axes, shape,
    grid, M, N, kit)``."""
    keepdims = check_keepdims(keepdims)
    if in_dtype.kind not in "biuf" or in_dtype.itemsize > 8:
        raise TypeError(f"logsumexp is not defined for x of dtype {in_dtype}; it accepts "
                        "bool, integers and float16/32/64")
    result = in_dtype if in_dtype.kind == "f" else np.dtype(np.float64)  # as SciPy's
    axes = normalize_axes(axis, len(in_shape))
    grid = _grid(ONLINE_SOFTMAX, strategy)
    check_lanes(lanes, grid.block)
    acc = _ops.accumulator_dtype(result)
    kit = state_kit(ONLINE_SOFTMAX, (acc, acc))
    return (result, axes, result_shape(in_shape, axes, keepdims), grid,
            *_extents(in_shape, axes), kit)


@dispatch
@replayable
@honours_stream
def logsumexp(x, axis=None, b=None, keepdims=False, return_sign=False, *, strategy=None,
              stream=None, lanes=None):
    """``log(sum(exp(x)))`` along ``axis``, as ``scipy.special.logsumexp(x, axis,
    keepdims=keepdims)`` (SciPy's parameters in SciPy's order), in one pass and
    without overflow.

    Each output reduces the online softmax's ``(max, sum of exp(x - max))`` pairs
    (``strategies/online_softmax.py``; Milakov and Gimelshein, 2018) with any
    reduction strategy, then takes ``max + log(sum)`` (in the reduction's storing
    pass where the strategy stores whole outputs: ``kernels/finishes.py``). A slice
    holding +inf gives +inf, one holding NaN gives NaN, one of nothing but -inf (or no
    elements) gives -inf, as SciPy. Result dtype: the input's float dtype (float16 accumulates in
    float32), float64 for bool and integers.

    Args:
        x, axis, keepdims: as SciPy's (axis None, an int or a tuple).
        b, return_sign: SciPy's scale factors and signed result are not supported:
            they must be left out.
        strategy, stream, lanes: as :func:`sum`.

    Raises:
        TypeError: ``b`` or ``return_sign`` given; a dtype other than bool, integers
            and float16/32/64.
        ValueError, AxisError: as :func:`sum`.
    """
    if b is not None or return_sign:
        raise TypeError("logsumexp: b= and return_sign= (SciPy's) are not supported")
    x = as_array_like(x)
    result, axes, shape, grid, M, N, kit = _planned_lse(
        np.dtype(x.dtype), tuple(x.shape), axis, keepdims, strategy, lanes)
    workspace = Workspace(kind_of(x), resolve_stream(stream, kind_of(x)))
    if M * N == 0:
        return deliver_host(workspace, np.full(shape, -np.inf, dtype=result), None)
    dst = workspace.empty(M, kit.dtypes[0])

    def apart(fields):
        log_sum_exp_into(*fields, dst, workspace.stream)

    _reduce_finished(x, axes, ONLINE_SOFTMAX, kit, grid, workspace, lanes, log_sum_exp_emit(),
                     dst, 0.0, apart)
    return deliver(workspace, dst, result, shape, None)


PTP_OF_BOOL = ("ptp is not defined for bool x (NumPy's subtract refuses booleans): pass "
               "it as uint8 (x.astype(np.uint8); a tensor: x.to(torch.uint8))")


@dispatch
@replayable
@honours_stream
def ptp(x, axis=None, out=None, keepdims=False, *, strategy=None, stream=None, lanes=None):
    """Range (maximum minus minimum) along ``axis``, as ``np.ptp``, in one pass: each
    output reduces ``(min, max)`` pairs (``numbakern.ops.MINMAX``), then subtracts.

    Result dtype: the input's (integers wrap, as NumPy's subtract does); NaN where a
    NaN is present. With ``out=``, as NumPy's: the maximum is cast to ``out``'s dtype,
    then the minimum subtracted in that dtype promoted with ``x``'s (an int8 range of
    ``[-100, 100]`` into an int64 ``out`` is 200; bool ``x`` has a range into a numeric
    ``out``). NumPy takes that maximum over the elements cast to ``out``'s dtype: the
    same but where an integer ``out`` narrower than ``x`` wraps them (int64 ``[2**62,
    1]`` into int8: NumPy's maximum is 1, here ``int8(2**62)``, 0). Arguments as
    :func:`max`. For NumPy input the subtraction is
    NumPy's own, on the host: ``inf - inf`` and an overflow warn as ``np.ptp`` does
    (by ``np.geterr()``); device input gets the same values without the warning.

    Raises:
        ValueError: reducing no elements, as NumPy.
        TypeError: bool input without a numeric ``out`` (NumPy's subtract refuses
            booleans) or another dtype the op does not take. AxisError, ValueError: as
            :func:`sum`.
    """
    x = as_array_like(x)
    boolean = np.dtype(x.dtype).kind == "b"
    # bool is planned as uint8 so that reducing nothing raises first, as NumPy's
    # maximum does before its subtract refuses booleans
    op, dtypes, axes, shape, grid, M, N, kit = _planned_pair(
        "ptp", _ops.MINMAX, np.dtype(np.uint8 if boolean else x.dtype), tuple(x.shape),
        axis, keepdims, strategy, lanes)
    if N == 0:  # NumPy's ptp fails in its maximum
        _ops.MAX.empty_result(dtypes[0])
    if boolean and (out is None or getattr(out, "dtype", None) == np.bool_):
        raise TypeError(PTP_OF_BOOL)  # (into a numeric out, NumPy subtracts in its dtype)
    kind = kind_of(x)
    check_out(out, shape, dtypes[0], kind, "ptp")
    loop = _ptp_loop(np.dtype(x.dtype), dtypes[0], out)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if M == 0:
        return deliver_host(workspace, np.empty(shape, dtype=dtypes[0]), out)
    lo, hi = _reduce(x, axes, op, kit, grid, workspace, lanes, track_index=False)
    first = None if out is None else np.dtype(out.dtype)
    if kind == "numpy":
        return _host_ptp(workspace, lo, hi, dtypes[0], loop, first, shape, out)
    dst = workspace.empty(M, loop)
    subtract_into(hi, lo, dst, workspace.stream, first)
    return deliver(workspace, dst, loop, shape, out)


def _ptp_loop(x_dtype: np.dtype, result: np.dtype, out) -> np.dtype:
    """The dtype ``np.ptp`` subtracts in: the result's, or with an ``out`` (which takes
    the maximum first) ``out``'s promoted with ``x``'s: an int8 range of ``[-100,
    100]`` into an int64 ``out`` is 200, a bool one into a float ``out`` 1.0. A
    complex or longdouble ``out``, which no kernel computes in, takes the result's
    difference cast."""
    if out is None:
        return result
    loop = np.result_type(np.dtype(out.dtype), x_dtype)
    return loop if loop.kind in "biuf" and loop.itemsize <= 8 else result


def _host_ptp(workspace: Workspace, lo, hi, dtype: np.dtype, loop: np.dtype, first,
              shape: tuple, out):
    """Host input's range: each output's maximum and minimum (elements of ``x``, exact
    in ``dtype``) subtracted on the host in ``loop`` (the maximum cast to ``first``,
    ``out``'s dtype, before), as ``np.ptp``, with NumPy's warnings (by
    ``np.geterr()``) where that meets ``inf - inf`` or overflows."""
    lo, hi = (deliver(workspace, a, dtype, (a.shape[0],), None) for a in (lo, hi))
    with np.errstate(all="ignore"):
        value = np.subtract(hi if first is None else hi.astype(first), lo, dtype=loop)
    if loop.kind == "f":
        made = ~np.isnan(hi) & ~np.isnan(lo)
        if (made & np.isnan(value)).any():
            numpy_fp_error("invalid", "invalid value encountered in subtract")
        if (made & np.isinf(value) & np.isfinite(hi) & np.isfinite(lo)).any():
            numpy_fp_error("over", "overflow encountered in subtract")
    return deliver_host(workspace, value.reshape(shape), out)


@planner
def _planned_pair(name: str, op, in_dtype: np.dtype, in_shape: tuple, axis, keepdims: bool,
                  strategy, lanes) -> tuple:
    """A two-field op's argument checks, as :func:`_setup`: ``(op, result dtypes, axes,
    shape, grid, M, N, kit)``, both fields in the input's accumulator dtype; errors
    name ``name``, the function called."""
    keepdims = check_keepdims(keepdims)
    op.check_dtype(in_dtype, caller=name)
    axes = normalize_axes(axis, len(in_shape))
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    acc = _ops.accumulator_dtype(in_dtype)
    kit = state_kit(op, (acc, acc))
    return (op, (in_dtype, in_dtype), axes, result_shape(in_shape, axes, keepdims), grid,
            *_extents(in_shape, axes), kit)


@dispatch
@replayable
@honours_stream
def nanargmax(x, axis=None, out=None, *, keepdims=False, strategy=None, stream=None,
              lanes=None):
    """Index of the largest element along ``axis`` ignoring NaN, as ``np.nanargmax``:
    a NaN counts as -inf at its own index (so ``[nan, -inf]`` gives 0, as NumPy), the
    first of equal values wins. One pass (``numbakern.ops.NANARGMAX``: the state flags
    a slice of nothing but NaN).

    Raises:
        ValueError: a slice of nothing but NaN ("All-NaN slice encountered", NumPy's
            error: device input is read back to find it), or an empty axis. Otherwise
            as :func:`argmax`.
    """
    return _nan_arg(x, "max", axis, keepdims, out, True, strategy, stream, lanes)


@dispatch
@replayable
@honours_stream
def nanargmin(x, axis=None, out=None, *, keepdims=False, strategy=None, stream=None,
              lanes=None):
    """Index of the smallest element along ``axis`` ignoring NaN (NaN counts as +inf),
    as ``np.nanargmin``. The mirror of :func:`nanargmax`: its arguments, result and
    errors."""
    return _nan_arg(x, "min", axis, keepdims, out, True, strategy, stream, lanes)


@dispatch
@replayable
@honours_stream
def nanmax(x, axis=None, out=None, keepdims=False, initial=None, where=True, *,
           strategy=None, stream=None, lanes=None):
    """Largest element along ``axis`` ignoring NaN, as ``np.nanmax``: NaN for a slice of
    nothing but NaN, with NumPy's ``RuntimeWarning`` (device input: read back to find
    it). Result dtype: the input's.

    ``initial`` and ``where`` are NumPy's (``np.fmax.reduce``'s): ``initial`` is the
    result of a slice with nothing else (all NaN, masked out or empty), a number
    without a warning; a NaN ``initial`` is skipped as the NaN elements are, so such
    a slice is NaN with NumPy's warning (an empty one too, as ``np.nanmax``'s).
    ``where`` needs ``initial``. Raises: as :func:`max`.
    """
    return _nan_arg(x, "max", axis, keepdims, out, False, strategy, stream, lanes,
                    initial, where)


@dispatch
@replayable
@honours_stream
def nanmin(x, axis=None, out=None, keepdims=False, initial=None, where=True, *,
           strategy=None, stream=None, lanes=None):
    """Smallest element along ``axis`` ignoring NaN, as ``np.nanmin``. The mirror of
    :func:`nanmax` (``initial``, ``where`` too): its arguments, result dtype and errors."""
    return _nan_arg(x, "min", axis, keepdims, out, False, strategy, stream, lanes,
                    initial, where)


def _nan_arg(x, direction: str, axis, keepdims, out, want_indices: bool, strategy, stream,
             lanes, initial=None, where=True):
    """nanargmax/nanargmin (``want_indices``) or nanmax/nanmin through the NaN-skipping
    arg op. Where a slice held nothing but NaN its code carries ``ops.ALL_NAN``:
    indices raise NumPy's error; values warn as NumPy and are NaN there (unless an
    ``initial`` stands in for them)."""
    if want_indices and out is not None:
        # the all-NaN flag lives in the codes, and where it raises NumPy leaves out
        # as it was: the codes found apart, then cast into out
        codes = _nan_arg(x, direction, axis, keepdims, None, True, strategy, stream, lanes,
                         initial, where)
        check_out(out, tuple(np.shape(codes)), _ops.INDEX_DTYPE, kind_of(as_array_like(x)),
                  f"nanarg{direction}", integer=True)
        return written_into(out, codes, resolve_stream(stream, kind_of(codes)))
    outs = (None, out) if want_indices else (out, None)
    values, codes = _nan_launches(x, direction, axis, keepdims, outs, not want_indices,
                                  strategy, lanes, initial, where, stream=stream)
    if initial is not None and initial == initial:  # a number stands in for all-NaN
        return values
    on_host = isinstance(codes, (np.ndarray, np.generic))
    host = codes if on_host else checked_words(codes, resolve_stream(stream, kind_of(codes)),
                                               _no_all_nan)
    flags = np.asarray(host) & _ops.ALL_NAN
    if not flags.any():
        return codes if want_indices else values
    if want_indices:
        raise ValueError("All-NaN slice encountered")
    # NumPy's nanmax says "slice" for an ndarray, "axis" for what it converts first
    # (a list, a scalar, a subclass)
    converted = isinstance(x, (list, tuple, int, float, np.generic)) or (
        isinstance(x, np.ndarray) and type(x) is not np.ndarray)
    warn("All-NaN axis encountered" if converted else "All-NaN slice encountered")
    if isinstance(values, np.generic):
        return values.dtype.type(np.nan)
    if on_host:
        values[flags != 0] = np.nan
    else:
        nan_where(flat(values), flat(codes), _ops.ALL_NAN,
                  resolve_stream(stream, kind_of(values)))
    return values


def _no_all_nan(codes: np.ndarray) -> bool:
    """The check of a NaN-skipping reduction's codes: no slice held nothing but NaN."""
    return not (codes & _ops.ALL_NAN).any()


@replayable
def _nan_launches(x, direction: str, axis, keepdims, outs, many_axes: bool, strategy, lanes,
                  initial, where, *, stream=None):
    """:func:`_arg`'s launches for the NaN-skipping forms, alone: ``(values, codes)``.
    The public calls replay whole, their flags read as a check; these launches replay
    apart where a public call runs the ordinary way (a refused signature, or a
    replay whose check failed), which reads the flags after them."""
    return _arg(x, direction, axis, keepdims, True, outs, True, strategy, stream, lanes,
                skip_nan=True, many_axes=many_axes, initial=initial, where=where)


@dispatch
@replayable
@honours_stream
def nanmean(x, axis=None, dtype=None, out=None, keepdims=False, *, strategy=None,
            stream=None, lanes=None, where=True):
    """The mean along ``axis`` of the elements that are not NaN, as ``np.nanmean``, in
    one pass: each output reduces ``(sum, count)`` pairs (``numbakern.ops.SUM_COUNT``),
    then divides in float64. A slice of nothing but NaN (or no elements) gives NaN,
    with NumPy's "Mean of empty slice" ``RuntimeWarning`` for NumPy input (device input
    gets the NaN without the warning, which would need the counts on the host).

    Result dtype: as :func:`mean`'s. Arguments (``where`` too: the elements it masks
    out count as NaN do) and errors as :func:`mean`. Integer and bool input is
    :func:`mean`'s, as NumPy's ``nanmean`` is ``mean`` there (an integer ``dtype=``
    sums in that dtype, wrapping); for float input a ``dtype`` that is not a float
    dtype is a ``TypeError``, as NumPy's. float16 input sums in float32, as
    :func:`mean`'s: NumPy's ``nanmean`` sums float16 in float16 (its ``mean`` does
    not), so a slice whose sum passes 65504 is inf there, with its overflow warning,
    and the finite mean here.
    """
    x = as_array_like(x)
    in_dtype = np.dtype(x.dtype)
    if in_dtype.kind not in "biuf" or in_dtype.itemsize > 8:
        raise TypeError(f"nanmean is not defined for x of dtype {in_dtype}; it accepts "
                        "bool, integers and float16/32/64")
    if dtype is not None:  # named here, before mean takes integer input
        _ops.SUM.check_dtype(_ops._as_dtype(dtype), "dtype=", "nanmean")
    if in_dtype.kind != "f":  # no NaN to skip: NumPy's nanmean is its mean there (an
        # integer dtype= sums in that dtype, wrapping as NumPy's)
        return _mean(x, axis, dtype, out, keepdims, strategy, stream, lanes, where,
                     "nanmean")
    check_float_dtype(dtype, "nanmean")  # NumPy's "If a is inexact, then dtype must be..."
    result = np.dtype(dtype if dtype is not None else in_dtype)
    acc = _ops.accumulator_dtype(result)
    value = _counted("nanmean", x, _ops.SUM_COUNT, (acc, _ops.INDEX_DTYPE), result, axis,
                     keepdims, out, strategy, stream, lanes, divide_by_into, 0,
                     functools.partial(warn, "Mean of empty slice"),
                     _where(where, x.shape, "nanmean"),
                     (divide_by_count_emit(), 0.0), float16.read_for(in_dtype, result))
    _sum_special_values(x, value, axis, keepdims, where, True)
    return value


@dispatch
@replayable
@honours_stream
def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, strategy=None,
        stream=None, lanes=None, where=True, correction=None, mean=None):
    """Variance along ``axis``, as ``np.var(x, axis, dtype, out, ddof, keepdims)``, in one
    pass: each output reduces Welford's ``(count, mean, M2)`` states, merged by Chan,
    Golub and LeVeque's pairwise formula (1979) under every block strategy and the
    ``two_pass`` grid strategies (``numbakern.ops.MOMENTS``; ``atomic_fold`` raises
    ``ValueError``: no atomic moves a three-field state), accumulated in float64; then
    ``M2 / (count - ddof)``.
    NumPy subtracts the mean in a second pass; both are stable, and agree to a few ulps
    where NumPy's own arithmetic stays finite. Where it does not (a float16 slice whose
    sum passes 65504, which NumPy's mean of ``var`` adds in float16; squares past the
    largest float, ``|x - mean|`` above 1.3e154 in float64), NumPy gives inf or NaN
    with its overflow warning, numbakern the finite variance its float64 states hold,
    without one.

    Result dtype: NumPy's (float64 for bool and integers, the input's float dtype,
    float16 included, or ``dtype``). Where ``count - ddof <= 0``: ``M2 / 0`` as
    NumPy's (inf, or NaN for a constant slice), with NumPy's "Degrees of freedom <= 0
    for slice" ``RuntimeWarning`` (from the shape, for any input; with ``where``, from
    the counts, for NumPy input), then for NumPy input its divisions' errors ("invalid
    value" for ``0 / 0``, "divide by zero"), worded by NumPy's own ``var`` on the host
    (:func:`_numpy_variance_words`: such degenerate calls only). NaN in a slice gives
    NaN.

    ``where``: NumPy's mask (:func:`sum`); each output's count is its own number of
    elements kept, and ``ddof`` is taken from it. ``correction``: NumPy 2's (the Array
    API's) name for ``ddof``; giving both (``ddof`` other than 0) is a ``ValueError``.

    ``mean``: NumPy 2's precomputed mean, shaped as ``mean(x, axis, keepdims=True)``
    (or broadcasting to that shape; NumPy, CuPy, a tensor or a number): the variance
    is then the sum of squared deviations from it, in two passes through numbakern's
    kernels (an element-wise ``(x - mean) ** 2`` in float64 into an ``x``-sized
    buffer, then the reduction of ``(sum, count)`` pairs), as NumPy's; the one-pass
    Welford states cannot take a given mean. Result dtype: NumPy's, that of
    ``x - mean`` (a float64 ``mean`` makes float32 input's result float64; nanvar's
    stays ``x``'s, as NumPy's).

    Floating-point errors (NumPy input, whose result is on the host anyway): where
    NumPy's arithmetic meets an invalid operation (a slice holding an infinity:
    ``inf - inf``) or an overflow, a ``RuntimeWarning`` ("invalid value encountered
    in var"; NumPy's names its operation) under ``np.geterr()``, nothing under
    ``np.errstate(invalid="ignore")``, ``FloatingPointError`` under ``"raise"``.
    Device input gets the same values without the warning (it would cost a
    synchronisation).

    Raises:
        TypeError: ``x`` not bool/int/uint/float16/32/64; ``dtype`` not a float dtype;
            ``ddof`` not a real number; a bad ``out``; ``where`` not bool; ``mean`` not
            real numbers.
        ValueError: ``ddof`` and ``correction`` both given; ``mean`` that does not
            broadcast to the keepdims shape (NumPy's broadcasting error; one that
            NumPy would broadcast into another result shape is refused too).
        numpy.exceptions.AxisError: an ``axis`` out of range.
    """
    ddof = with_correction(ddof, correction)
    return _variance("var", x, axis, dtype, out, ddof, keepdims, strategy, stream, lanes,
                     skip_nan=False, root=False, where=where, mean=mean)


@dispatch
@replayable
@honours_stream
def std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, strategy=None,
        stream=None, lanes=None, where=True, correction=None, mean=None):
    """Standard deviation, as ``np.std``: the square root of :func:`var` (same pass,
    arguments, ``mean=`` included, dtypes, warnings and errors)."""
    ddof = with_correction(ddof, correction)
    return _variance("std", x, axis, dtype, out, ddof, keepdims, strategy, stream, lanes,
                     skip_nan=False, root=True, where=where, mean=mean)


@dispatch
@replayable
@honours_stream
def nanvar(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, strategy=None,
           stream=None, lanes=None, where=True, correction=None, mean=None):
    """Variance of the elements that are not NaN, as ``np.nanvar`` (the states of NaN
    elements count nothing); NaN where ``count - ddof <= 0`` (a slice of only NaN
    included), with NumPy's warning for NumPy input. Otherwise as :func:`var`
    (``mean=`` too: the NaN elements of ``x`` count nothing, a NaN ``mean`` makes its
    slices NaN, as NumPy's). Integer and bool input, which holds no NaN, is
    :func:`var`'s in every respect, as NumPy's ``nanvar`` is ``var`` there."""
    ddof = with_correction(ddof, correction)
    return _variance("nanvar", x, axis, dtype, out, ddof, keepdims, strategy, stream, lanes,
                     skip_nan=True, root=False, where=where, mean=mean)


@dispatch
@replayable
@honours_stream
def nanstd(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, strategy=None,
           stream=None, lanes=None, where=True, correction=None, mean=None):
    """Standard deviation of the elements that are not NaN, as ``np.nanstd``: the
    square root of :func:`nanvar`, whose arguments, result dtype and errors it shares."""
    ddof = with_correction(ddof, correction)
    return _variance("nanstd", x, axis, dtype, out, ddof, keepdims, strategy, stream, lanes,
                     skip_nan=True, root=True, where=where, mean=mean)


def with_correction(ddof, correction):
    """``ddof`` as NumPy 2 takes it beside ``correction`` (the Array API's name).

    Raises:
        ValueError: both given (``ddof`` other than 0), NumPy's message.
    """
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def check_ddof(ddof, name: str):
    """``ddof`` as NumPy takes it: a real number (a bool as 0 or 1; a 0-d array of
    one as that number), else TypeError naming ``name``'s ``ddof``."""
    if isinstance(ddof, np.ndarray) and ddof.ndim == 0 and ddof.dtype.kind in "biuf":
        ddof = ddof[()]
    if not isinstance(ddof, (int, float, np.integer, np.floating, np.bool_)):
        raise TypeError(f"{name}: ddof must be a real number, got {ddof!r}")
    return ddof


def check_float_dtype(dtype, name: str) -> None:
    """var and std's ``dtype=``: None or float16/32/64 (NumPy's integer ones would
    truncate the variance; no kernel holds extended precision), else TypeError naming
    ``name`` and the dtype."""
    if dtype is None:
        return
    given = _ops._as_dtype(dtype)
    if given.kind != "f" or given.itemsize > 8 or _ops.foreign_float(given):
        raise TypeError(f"{name}: dtype must be float16, float32 or float64, got {given.name}")
    _ops.check_native_dtype(given, name)


def _variance(name, x, axis, dtype, out, ddof, keepdims, strategy, stream, lanes, *,
              skip_nan: bool, root: bool, where=True, mean=None):
    x = as_array_like(x)
    in_dtype = np.dtype(x.dtype)
    # integers and bools hold no NaN: NumPy's nanvar and nanstd are its var and std
    # there (an axis of a 0-d array refused, no degrees of freedom inf, not NaN)
    skip_nan = skip_nan and in_dtype.kind == "f"
    if not skip_nan:
        _no_axis_of_0d(x, axis)
    op = _ops.NAN_MOMENTS if skip_nan else _ops.MOMENTS
    op.check_dtype(in_dtype, "x of dtype", name)
    check_float_dtype(dtype, name)
    ddof = check_ddof(ddof, name)
    result = _ops.numpy_mean_dtypes(in_dtype, dtype)[1]
    mask = _where(where, x.shape, name)
    warning = functools.partial(warn, "Degrees of freedom <= 0 for slice"
                                + ("." if skip_nan else ""))
    compute = functools.partial(_variance_value, name, x, axis, dtype, out, ddof, keepdims,
                                strategy, stream, lanes, skip_nan, root, mask, mean, result)
    if not skip_nan and kind_of(mean) == "numpy" and _no_degrees_on_host(x, axis, ddof, mask):
        with quiet_numpy_errors():  # NumPy's own words, below, say it all
            value = compute(warning)
        _numpy_variance_words(name, x, axis, dtype, out, ddof, keepdims, mask, mean)
        return value
    if not skip_nan and mask is None:  # NumPy's var warns from the shape alone, first
        # (before its out= is looked at), for any input and any number of outputs
        if _extents(tuple(x.shape), normalize_axes(axis, x.ndim))[1] <= ddof:
            warning()
        warning = None
    return compute(warning)


def _variance_value(name, x, axis, dtype, out, ddof, keepdims, strategy, stream, lanes,
                    skip_nan: bool, root: bool, mask, mean, result: np.dtype, warning):
    """A variance by the kernels, with NumPy's warnings of special values (host
    input) and ``warning()`` (or None) where an output has no degrees of freedom."""
    if mean is not None:
        return _from_mean(name, x, mean, axis, dtype is not None, result, out, ddof,
                          keepdims, strategy, stream, lanes, skip_nan, root, mask, warning)
    op = _ops.NAN_MOMENTS if skip_nan else _ops.MOMENTS

    def finish(counts, means, m2s, dst, stream):
        variance_into(counts, means, m2s, dst, ddof, root, skip_nan, stream)

    late = []  # nanvar's: NumPy says "Degrees of freedom" after its arithmetic's words
    too_few = (lambda: late.append(True)) if skip_nan and warning is not None else warning
    value = _counted(name, x, op, _ops.MOMENT_DTYPES, result, axis, keepdims, out,
                     strategy, stream, lanes, finish, ddof, too_few, mask,
                     (variance_emit(root, skip_nan), float(ddof)))
    _special_values(name, x, value, axis, keepdims, mask, ddof, skip_nan)
    if late:
        warning()
    return value


def _no_degrees_on_host(x, axis, ddof, mask) -> bool:
    """Whether host input (and a host ``where=``) has a slice of ``count - ddof <= 0``
    (counted from the shape, or from the mask on the host)."""
    if kind_of(x) != "numpy" or (mask is not None and kind_of(mask) != "numpy"):
        return False
    axes = normalize_axes(axis, x.ndim)
    if mask is None:
        return _extents(tuple(x.shape), axes)[1] <= ddof
    return bool((np.broadcast_to(mask, tuple(x.shape)).sum(axis=axes) <= ddof).any())


def _numpy_variance_words(name, x, axis, dtype, out, ddof, keepdims, mask, mean) -> None:
    """NumPy's own warnings (and errors, under ``np.geterr()``) of a variance of host
    input with a slice of no degrees of freedom, where its two passes divide by zero
    (``0 / 0``, a positive sum by 0, ``inf / 0``: each its own word or none): NumPy's
    function run on the host data for them alone (the result is the kernels'), as
    only such degenerate calls pay. bfloat16 is run as float32."""
    found = _host_floats(x, None)
    data = found[0] if found is not None else np.asarray(x)
    kwargs = {"axis": axis, "dtype": dtype, "ddof": ddof, "keepdims": keepdims}
    if mask is not None:
        kwargs["where"] = mask
    if mean is not None:  # (a host mean: a number, NumPy, a CPU tensor)
        kwargs["mean"] = np.asarray(mean.bits if isinstance(mean, BFloat16Bits) else mean)
    if out is not None:  # NumPy words a division into an array "divide", not "scalar"
        kwargs["out"] = np.empty(out.shape, out.dtype)
    with numpys_words():
        getattr(np, name)(data, **kwargs)


def _scalar_division(x, axis, keepdims, out, summed: np.dtype) -> bool:
    """Whether NumPy divides a mean's sum (in dtype ``summed``) in its scalar
    arithmetic, which words its errors "scalar divide": a 0-d result (no axis kept, no
    ``out``) of a float64 or integer sum; arrays, and float32, float16 and bool
    scalars, which it divides as arrays, say "divide"."""
    kept = check_keepdims(keepdims) or (
        axis is not None and len(normalize_axes(axis, np.ndim(x))) < np.ndim(x))
    summed = np.dtype(summed)
    return (np.ndim(x) == 0 or not kept) and out is None and (
        summed == np.float64 or summed.kind in "iu")


def _special_values(name, x, value, axis, keepdims, mask, ddof, skip_nan: bool) -> None:
    """NumPy's floating-point warnings of a variance of host input, found from the
    host result: an output that is not finite where NumPy's two passes met ``inf -
    inf`` (its slice holds an infinity, and for var no NaN: NumPy's NaN then warns
    nothing) or an overflow (a finite slice, enough degrees of freedom, an infinite
    variance). Only when a result is not finite is ``x`` looked at again, so finite
    results cost one ``isfinite`` of the outputs."""
    values = _host_result(x, value)
    if values is None or np.isfinite(values).all():
        return
    found = _host_floats(x, mask)
    if found is None:
        return
    data, kept = found
    axes = normalize_axes(axis, data.ndim)
    up = (data == np.inf).any(axis=axes, keepdims=keepdims, where=kept)
    down = (data == -np.inf).any(axis=axes, keepdims=keepdims, where=kept)
    infinite = up | down
    nan = np.isnan(data)
    has_nan = nan.any(axis=axes, keepdims=keepdims, where=kept)
    counted = (~nan if skip_nan else np.ones(data.shape, bool)) & kept
    dof = counted.sum(axis=axes, keepdims=keepdims) - ddof
    invalid = infinite if skip_nan else infinite & ~has_nan
    # (a finite slice whose Welford states overflowed is NaN here, inf in NumPy: README)
    overflow = ~np.isfinite(values) & ~infinite & ~has_nan & (dof > 0)
    both = up & down  # the mean's sum meets inf + -inf first
    _variance_fp_errors(name, (invalid & ~both).any(), overflow.any(), (invalid & both).any())


def _variance_fp_errors(name: str, invalid: bool, overflow: bool,
                        invalid_mean: bool = False) -> None:
    """NumPy's warnings (or errors, by ``np.geterr()``) of a variance, worded as its
    two passes meet them: the mean's sum gives ``inf + -inf`` (``invalid_mean``),
    ``x - mean`` gives ``inf - inf`` (``invalid``), the squares overflow (``square``
    in var and std, ``multiply`` in the nan forms)."""
    if invalid_mean:
        numpy_fp_error("invalid", "invalid value encountered in reduce")
    if invalid:
        numpy_fp_error("invalid", "invalid value encountered in subtract")
    if overflow:
        square = "multiply" if name.startswith("nan") else "square"
        numpy_fp_error("over", f"overflow encountered in {square}")


def _host_result(x, value):
    """A float result as a NumPy array when ``x`` is host input, else None: NumPy's
    warnings are looked for on the host only, and a device result is never read back
    for them (CuPy refuses the implicit copy; any other would synchronise)."""
    if kind_of(as_array_like(x)) != "numpy":
        return None
    values = np.asarray(value)
    return values if values.dtype.kind == "f" else None


def _host_floats(x, mask, data=None):
    """``(data, kept)``: host float input as a NumPy float array (bfloat16 bits as
    float32; ``data`` if given: its elements as cast) and its ``where=`` mask broadcast
    to it (``True`` for none); None for other input (integers, device arrays, a device
    mask)."""
    if kind_of(x) != "numpy" or (mask is not None and kind_of(mask) != "numpy"):
        return None
    data = host_numbers(x) if data is None else data
    if data is None or data.dtype.kind != "f":
        return None
    return data, True if mask is None else np.broadcast_to(mask, data.shape)


def _integer_cast_errors(x, dtype, skip_nan: bool) -> None:
    """NumPy's "invalid value encountered in reduce" where host float input is summed
    or multiplied in an integer ``dtype=`` and an element has no value there (NaN, an
    infinity, out of range; NaN is no element of the nan forms; masked out or not, as
    NumPy casts them all): found by NumPy's own cast of the input, which only such
    calls pay."""
    if dtype is None or _ops._as_dtype(dtype).kind not in "iu":
        return
    found = _host_floats(as_array_like(x), None)
    if found is None:
        return
    data = np.where(np.isnan(found[0]), 0, found[0]) if skip_nan else found[0]
    try:
        with np.errstate(invalid="raise"):
            data.astype(_ops._as_dtype(dtype))
    except FloatingPointError:  # told under the caller's np.geterr(), outside ours; a
        # 0-d input is cast before NumPy's reduce, not in it
        numpy_fp_error("invalid", "invalid value encountered in "
                       + ("cast" if data.ndim == 0 else "reduce"))


def _sum_special_values(x, value, axis, keepdims, where, skip_nan: bool, initial=None):
    """NumPy's floating-point warnings of a sum or mean of host input, found from the
    host result as :func:`_special_values` does: ``inf + -inf`` (a slice holding both
    infinities, and for sum no NaN) is invalid, an infinite result of a slice of no
    infinity an overflow, named as NumPy names them ("... encountered in reduce", the
    overflow first). An ``initial`` infinite in the result's dtype (given so, or
    overflowing its cast, which :func:`_initial` tells) stands for neither. A float16
    result of wider input meets the elements as NumPy's cast makes them
    (:func:`_float16_cast`)."""
    values = _host_result(x, value)
    if values is None:
        return
    x = as_array_like(x)
    data, cast_over = _float16_cast(x, values.dtype)
    if np.isfinite(values).all():
        if cast_over:  # the element masked out: NumPy casts it anyway
            numpy_fp_errors([("over", "overflow encountered in reduce")])
        return
    if _infinite_initial(initial, values.dtype):
        return
    found = _host_floats(x, None if where is True else as_array_like(where), data)
    if found is None:
        return
    data, kept = found
    axes = normalize_axes(axis, data.ndim)
    up = (data == np.inf).any(axis=axes, keepdims=keepdims, where=kept)
    down = (data == -np.inf).any(axis=axes, keepdims=keepdims, where=kept)
    clean = True if skip_nan else ~np.isnan(data).any(axis=axes, keepdims=keepdims,
                                                       where=kept)
    over = cast_over or (np.isinf(values) & ~up & ~down).any()
    numpy_fp_errors([(kind, f"{text} encountered in {where_}")  # NumPy's words and order
                     for kind, text, hit, where_ in (
                         ("over", "overflow", over, "cast" if data.ndim == 0 else "reduce"),
                         ("invalid", "invalid value", (up & down & clean).any(), "reduce"))
                     if hit])


def _product_special_values(x, value, axis, keepdims, where, skip_nan: bool,
                            initial=None) -> None:
    """NumPy's floating-point warnings of a product of host input (prod, nanprod),
    found from the host result as :func:`_sum_special_values` finds a sum's: a result
    that is not finite from a slice of finite factors overflowed (inf, or NaN where an
    overflow met a zero), and a NaN from a slice of no NaN met ``inf * 0`` ("...
    encountered in reduce", the overflow first). A factor the result's dtype cannot
    hold (integers too) counts as an overflow, as NumPy casts it in its loop. Not
    told (NumPy's words there follow its order): an overflow in a slice that also
    holds an infinity or a NaN; anything where ``initial`` is infinite."""
    values = _host_result(x, value)
    if values is None or np.isfinite(values).all() or _infinite_initial(initial,
                                                                        values.dtype):
        return
    x = as_array_like(x)
    numbers = host_numbers(x)
    if numbers is None:
        return
    found = _host_floats(x, None if where is True else as_array_like(where),
                         numbers.astype(np.float64))  # integers as numbers
    if found is None:
        return
    data, kept = found
    axes = normalize_axes(axis, data.ndim)
    nan = np.isnan(data)
    infinite = np.isinf(data).any(axis=axes, keepdims=keepdims, where=kept)
    clean = True if skip_nan else ~nan.any(axis=axes, keepdims=keepdims, where=kept)
    numpy_fp_errors([(kind, f"{text} encountered in reduce") for kind, text, hit in (
        ("over", "overflow", (~np.isfinite(values) & ~infinite & clean).any()),
        ("invalid", "invalid value", (np.isnan(values) & clean).any())) if hit])


def _infinite_initial(initial, dtype) -> bool:
    """Whether ``initial`` is infinite in the result's ``dtype`` (given so, or
    overflowing its cast, which :func:`_initial` tells): it stands for NumPy's
    floating-point errors of the slices it joins."""
    if initial is None:
        return False
    with np.errstate(over="ignore"):
        return not np.isfinite(np.asarray(initial).astype(dtype))


def host_numbers(x):
    """Host input ``x`` (a NumPy array or :class:`BFloat16Bits`) as a NumPy array of
    its values (bfloat16 as float32: its bits are float32's upper half); None for
    device input or a dtype that holds no real numbers."""
    if kind_of(x) != "numpy":
        return None
    if isinstance(x, BFloat16Bits):
        return bfloat16.widen_on_host(x.bits)
    data = np.asarray(x)
    return data if data.dtype.kind in "biuf" else None


def _float16_cast(x, result: np.dtype) -> tuple:
    """``(data, overflowed)``: host input ``x`` as NumPy's cast to a float16 result
    makes each element before it adds (``kernels/float16.py``), and whether a finite
    element became infinite there (NumPy's overflow, masked out or not: it casts every
    element); ``(None, False)`` where there is no such cast."""
    if kind_of(x) != "numpy" or isinstance(x, BFloat16Bits) or \
            float16.read_for(x.dtype, result) is None:
        return None, False
    original = np.asarray(x)
    with np.errstate(over="ignore"):
        data = original.astype(np.float16)
    finite = np.isfinite(original) if original.dtype.kind == "f" else True
    return data, bool((np.isinf(data) & finite).any())


def _counted_setup(name, x, op, strategy, lanes, out, shape, result, stream, axes,
                   warning):
    """``(grid, workspace, M, empty, finished)`` of a reduction divided by its counts:
    the checked strategy and ``out``, the call's workspace, the number of outputs,
    ``empty``, the all-NaN result (``warning()``, if given, called where an output
    counts nothing) when there is nothing to reduce, else None, and ``finished``, the
    dtype the divided values are made in: ``result``; for an ``out`` of another dtype,
    ``result``'s accumulator dtype or ``out``'s where it is a wider float (in which
    :func:`_counted` then sums too), cast once into ``out`` (NumPy sums into a wider
    ``out`` in its dtype, and divides there, not rounding to float16 first)."""
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    kind = kind_of(x)
    written = check_out(out, shape, result, kind, name)
    finished = result if written == result else _ops.accumulator_dtype(result)
    if written.kind == "f" and written.itemsize > finished.itemsize:
        finished = written
    workspace = Workspace(kind, resolve_stream(stream, kind))
    M, N = _extents(tuple(x.shape), axes)
    empty = None
    if M * N == 0:
        if M and warning is not None:
            warning()
        empty = deliver_host(workspace, np.full(shape, np.nan, dtype=result), out)
    return grid, workspace, M, empty, finished


def _from_mean(name, x, mean, axis, dtype_given: bool, result, out, ddof, keepdims,
               strategy, stream, lanes, skip_nan: bool, root: bool, mask, warning):
    """var/std/nanvar/nanstd with NumPy 2's ``mean=``: the squared deviations from it
    (one element-wise pass into an ``x``-sized float64 buffer), then each output's
    ``(sum, count)`` (:data:`numbakern.ops.SUM_AND_COUNT`; for the NaN-skipping forms
    the count of non-NaN elements, :data:`numbakern.ops.SUM_COUNT` over ``x``), then
    ``sum / (count - ddof)``."""
    keepdims = check_keepdims(keepdims)
    if x.ndim == 0:  # one element: as a 1-D array, the result still 0-d
        normalize_axes(axis, 0)
        x, axis, keepdims = _one_element(x), None, False
    axes = normalize_axes(axis, x.ndim)
    shape = result_shape(tuple(x.shape), axes, keepdims)
    given = _given_mean(mean, result_shape(tuple(x.shape), axes, True), name,
                        axis is None and not (keepdims or skip_nan))
    if not dtype_given and not skip_nan:  # var's: x - mean's (a Python number weak);
        # nanvar subtracts into x's own dtype
        result = np.result_type(result, mean if isinstance(mean, (int, float)) else
                                given.dtype)
        if result.kind != "f":
            result = np.dtype(np.float64)
    grid, workspace, M, empty, finished = _counted_setup(
        name, x, _ops.SUM_AND_COUNT, strategy, lanes, out, shape, result, stream, axes, warning)
    if empty is not None:
        return empty
    deviations, flags = _squared_deviations(x, given, workspace, skip_nan)
    kit = state_kit(_ops.SUM_AND_COUNT, (np.dtype(np.float64), _ops.INDEX_DTYPE))
    sums, counts = kit.unpack(_reduce(deviations, axes, _ops.SUM_AND_COUNT, kit, grid,
                                      workspace, lanes, track_index=False, where=mask))
    if skip_nan:  # the elements counted: x's that are not NaN
        nan_kit = state_kit(_ops.SUM_COUNT, (np.dtype(np.float64), _ops.INDEX_DTYPE))
        counts = nan_kit.unpack(_reduce(x, axes, _ops.SUM_COUNT, nan_kit, grid, workspace,
                                        lanes, track_index=False, where=mask))[1]
    values = workspace.empty(M, finished)
    summed_variance_into(sums, counts, values, ddof, root, skip_nan, workspace.stream)
    delivered = deliver(workspace, values, finished, shape, out)
    if workspace.kind == "numpy":
        too_few = warning is not None and (deliver(workspace, counts, np.int64, (M,), None)
                                           <= ddof).any()
        if too_few and not skip_nan:  # var's NumPy counts before its arithmetic
            warning()
        raised = host_copy(flags, workspace.stream)
        _variance_fp_errors(name, bool(raised[INVALID]), bool(raised[OVERFLOW]))
        if too_few and skip_nan:  # nanvar's after it
            warning()
    return delivered


def _one_element(x):
    """A 0-d array as a 1-D array of its element (a bfloat16 input's bits too)."""
    if isinstance(x, BFloat16Bits):
        return type(x)(x.bits.reshape(1))
    return x.reshape(1)


def _given_mean(mean, kept_shape: tuple, name: str, scalar: bool = False):
    """NumPy 2's ``mean=`` checked: real numbers whose shape broadcasts to the result's
    shape with ``keepdims=True``; an array object (a number as a 0-d NumPy array).
    ``scalar``: var or std with ``axis=None`` and no keepdims (a 0-d result), where
    NumPy also takes extra leading axes of length 1 (``var(x_1d, mean=[[m]])``; its
    nanvar refuses them): dropped here."""
    if isinstance(mean, BFloat16Bits):
        raise TypeError(f"{name}: mean must hold real numbers, got bfloat16 bits")
    given = as_array_like(mean, "mean")
    dtype = np.dtype(given.dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"{name}: mean must hold real numbers (bool, integers or floats), "
                        f"got dtype {dtype}")
    if scalar:
        given = drop_leading_ones(given, len(kept_shape))
    shape = tuple(given.shape)
    try:
        fits = len(shape) <= len(kept_shape) and \
            np.broadcast_shapes(shape, kept_shape) == kept_shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name}: mean of shape {shape} does not broadcast to "
                         f"{kept_shape}, the shape of x's mean with keepdims=True")
    return given


def drop_leading_ones(a, ndim: int):
    """``a`` without its leading axes of length 1 past ``ndim`` axes (a view)."""
    extra = len(a.shape) - ndim
    if extra > 0 and math.prod(a.shape[:extra]) == 1:
        return a.reshape(tuple(a.shape[extra:]))
    return a


def _squared_deviations(x, given, workspace: Workspace, skip_nan: bool) -> tuple:
    """``(deviations, flags)``: ``(x - mean) ** 2`` in float64, a C-contiguous device
    array of ``x``'s shape (0 where a NaN-skipping form skips ``x``'s NaN), and the
    kernel's invalid and overflow flags."""
    bits, widened = bits_of(x)
    shape = tuple(x.shape)
    elements = _c_order(bits, workspace)
    mean = _c_order(given, workspace)
    pad = len(shape) - given.ndim
    mean_shape = (1,) * pad + tuple(given.shape)
    mean_mults = [math.prod(mean_shape[a + 1:]) for a in range(len(shape))]
    dims = pairing_dims(shape, [0 if mean_shape[a] == 1 else mean_mults[a]
                                for a in range(len(shape))])
    deviations = workspace.empty(shape, np.float64)
    flags = workspace.from_host(np.zeros(2, np.int32))
    squared_deviations_into(elements, mean, workspace.from_host(dims),
                            flat(deviations, "deviations") if shape else deviations, flags,
                            skip_nan, widened, workspace.stream)
    return deviations, flags


def host_scalar(value, stream) -> np.generic:
    """A reduction's result (NumPy scalar, 0-d CuPy or device array) as a NumPy scalar,
    read after the work queued on the call's ``stream`` (the reduction's)."""
    if isinstance(value, np.generic):
        return value
    return host_words(device_view(value), resolve_stream(stream, kind_of(value)))[()]


def _c_order(a, workspace: Workspace):
    """``a``'s elements in C order as a 1-D device array: NumPy arrays uploaded,
    C-contiguous device arrays viewed in place, others copied."""
    n = math.prod(a.shape) or 1
    if kind_of(a) == "numpy":
        return workspace.from_host(np.ascontiguousarray(a).reshape(-1))
    view = device_view(a)
    if not c_contiguous(view):
        view = contiguous_copy(a, view, workspace.stream)
    return strided(view, [(n, np.dtype(a.dtype).itemsize)])


def _counted(name, x, op, dtypes, result, axis, keepdims, out, strategy, stream, lanes,
             finish, too_few, warning, mask=None, emit=None, read=None):
    """A reduction of ``op``'s states (field ``dtypes``, one of them the count: the
    last of a ``(sum, count)`` pair, the first of var's ``(count, mean, M2)``), each
    output then made by ``finish(*fields, dst, stream)`` in ``result`` (``fields``:
    one array per field): nanmean's and var's (and mean's with ``where=``). Outputs of
    no elements are NaN; ``warning()`` (NumPy's, or None: none) is called (for NumPy
    input: device counts stay on the device) where an output counts ``too_few`` or
    fewer elements.
    ``mask``: a checked ``where=`` mask (:func:`_where`); the elements it masks out
    count nothing. ``emit``: ``(emit, argument)``, the same finish done by the
    reduction's storing pass (``numbakern/kernels/finishes.py``), for device input,
    whose counts are never read back. ``read``: the kit's (``float16.read_for``)."""
    keepdims = check_keepdims(keepdims)
    axes = normalize_axes(axis, x.ndim)
    shape = result_shape(tuple(x.shape), axes, keepdims)
    grid, workspace, M, empty, finished = _counted_setup(name, x, op, strategy, lanes, out,
                                                         shape, result, stream, axes, warning)
    if empty is not None:
        return empty
    # a wider float out sums in its dtype, as NumPy's reduce does into out
    dtypes = tuple(finished if d.kind == "f" and d.itemsize < finished.itemsize else d
                   for d in map(np.dtype, dtypes))
    kit = state_kit(op, dtypes, read)
    values = workspace.empty(M, finished)
    if workspace.kind != "numpy" and emit is not None:  # no counts read back: folded
        _reduce_finished(x, axes, op, kit, grid, workspace, lanes, emit[0], values, emit[1],
                         lambda fields: finish(*fields, values, workspace.stream), mask)
        return deliver(workspace, values, finished, shape, out)
    fields = kit.unpack(_reduce(x, axes, op, kit, grid, workspace, lanes, track_index=False,
                                where=mask))
    counts = fields[0] if kit.fields > 2 else fields[1]
    finish(*fields, values, workspace.stream)
    delivered = deliver(workspace, values, finished, shape, out)
    if workspace.kind == "numpy" and warning is not None and (
            deliver(workspace, counts, np.int64, (M,), None) <= too_few).any():
        warning()
    return delivered


def moments(x, axis=None, *, skip_nan: bool = False, strategy=None, lanes=None) -> tuple:
    """``(count, mean, M2)`` of each slice of ``x`` along ``axis`` (kept as length 1;
    int64, float64, float64, in ``x``'s array kind), in one pass: the Welford states
    that :func:`var` finishes, for a caller that merges them further (the Dask forms
    of var/std/nanmean merge each chunk's by Chan, Golub and LeVeque's formula).
    ``skip_nan``: NaN elements count nothing (nanvar's states). A slice of no elements
    has count 0, mean 0 and M2 0."""
    x = as_array_like(x)
    op = _ops.NAN_MOMENTS if skip_nan else _ops.MOMENTS
    op.check_dtype(np.dtype(x.dtype), "x of dtype", "moments")
    axes = normalize_axes(axis, x.ndim)
    shape = result_shape(tuple(x.shape), axes, True)
    grid = _grid(op, strategy)
    check_lanes(lanes, grid.block)
    workspace = Workspace(kind_of(x), resolve_stream(None, kind_of(x)))
    M, N = _extents(tuple(x.shape), axes)
    if M * N == 0:
        zeros = deliver_host(workspace, np.zeros(shape), None)
        return deliver_host(workspace, np.zeros(shape, np.int64), None), zeros, zeros
    kit = state_kit(op, _ops.MOMENT_DTYPES)
    fields = kit.unpack(_reduce(x, axes, op, kit, grid, workspace, lanes, track_index=False))
    return tuple(deliver(workspace, f, d, shape, None) for f, d in zip(fields, kit.dtypes))


def deviation_sums(x, mean, axis=None, *, skip_nan: bool = False, strategy=None,
                   lanes=None) -> tuple:
    """``(count, sum of (x - mean) ** 2)`` of each slice of ``x`` along ``axis`` (kept
    as length 1; int64 and float64, in ``x``'s array kind): the two passes that
    :func:`var` with ``mean=`` finishes, for a caller that adds them further (the Dask
    forms add each chunk's). ``mean``: broadcasting to the keepdims shape.
    ``skip_nan``: NaN elements of ``x`` count nothing. A slice of no elements has count
    0 and sum 0."""
    x = as_array_like(x)
    _ops.NAN_MOMENTS.check_dtype(np.dtype(x.dtype), "x of dtype", "deviation_sums")
    if x.ndim == 0:
        x, axis = _one_element(x), None
    axes = normalize_axes(axis, x.ndim)
    shape = result_shape(tuple(x.shape), axes, True)
    given = _given_mean(mean, shape, "deviation_sums")
    grid = _grid(_ops.SUM_AND_COUNT, strategy)
    check_lanes(lanes, grid.block)
    workspace = Workspace(kind_of(x), resolve_stream(None, kind_of(x)))
    M, N = _extents(tuple(x.shape), axes)
    if M * N == 0:
        return (deliver_host(workspace, np.zeros(shape, np.int64), None),
                deliver_host(workspace, np.zeros(shape), None))
    deviations, _ = _squared_deviations(x, given, workspace, skip_nan)
    kit = state_kit(_ops.SUM_AND_COUNT, (np.dtype(np.float64), _ops.INDEX_DTYPE))
    sums, counts = kit.unpack(_reduce(deviations, axes, _ops.SUM_AND_COUNT, kit, grid,
                                      workspace, lanes, track_index=False))
    if skip_nan:
        nan_kit = state_kit(_ops.SUM_COUNT, (np.dtype(np.float64), _ops.INDEX_DTYPE))
        counts = nan_kit.unpack(_reduce(x, axes, _ops.SUM_COUNT, nan_kit, grid, workspace,
                                        lanes, track_index=False))[1]
    return (deliver(workspace, counts, _ops.INDEX_DTYPE, shape, None),
            deliver(workspace, sums, np.dtype(np.float64), shape, None))


def _out_pair(out) -> tuple:
    if out is None:
        return (None, None)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError("out must be None or a pair (values_out, indices_out)")
    return tuple(out)


__all__ = ["sum", "prod", "max", "min", "xor_sum", "bitwise_and_sum", "bitwise_or_sum",
           "reduce", "any", "all", "count_nonzero", "nansum", "nanprod", "logsumexp", "ptp",
           "argmax", "argmin", "nanargmax", "nanargmin", "nanmax", "nanmean", "nanmin",
           "max_with_indices", "min_with_indices", "var", "std", "nanvar", "nanstd"]
