"""Scans with NumPy's semantics: cumsum, cumprod and associative_scan.

Every function takes:

* ``x``: a NumPy array (or anything ``np.asarray`` takes), a CuPy array, or any
  object with ``__cuda_array_interface__``; any shape, any strides; dtypes bool,
  int8-int64, uint8-uint64, float16, float32, float64; bfloat16 (a torch tensor or an
  ``ml_dtypes`` array), read in place as its bits and computed as float32 input
  (``numbakern/api/_interop.py``), floating results rounded to bfloat16 once.
* ``axis``: ``None`` (scan the flattened array, in C order, as NumPy) or an int.
* ``exclusive``: element ``i`` combines elements ``0..i-1`` (the first is the op's
  empty result: 0 for a sum, 1 for a product, the identity otherwise); default
  inclusive, elements ``0..i``.
* ``reverse``: scan from the end: element ``i`` combines elements ``i..n-1``
  (``n-1`` first), computed as a scan of the reversed sequence.
* ``strategy``: how threads and blocks combine (``numbakern.strategies.resolve_scan``
  explains the names); default ``"decoupled_lookback/warp_shuffle"``: one pass over
  the data; float results may differ in the last bits run to run. Pass
  ``"reduce_then_scan"`` for bitwise-reproducible results.
* ``layout``: who scans a row: ``"tiles"`` (the strategy's blocks, one per tile of
  ``threads * items`` elements), ``"warp"`` (one warp per row, rows grid-strided:
  ``numbakern/kernels/scan_rows.py``) or ``"auto"`` (the default: ``"warp"`` for two or more
  rows of at most ``scan_rows.WARP_ROW_MAX`` elements, else ``"tiles"``). Under
  ``"warp"`` no block waits for another, so the grid strategy is not used and the
  result is bitwise reproducible whichever was asked for; the warp scan is
  ``warp_shuffle``'s whatever the block strategy.
* ``stream``: a Numba stream, a CuPy stream or a raw pointer; default CuPy's current
  stream for CuPy input, else the default stream.
* ``out``: an array of the result's shape, of the caller's kind (NumPy for NumPy
  input, a device array otherwise), whose dtype the result casts to (``same_kind``).

and returns an array of the input's kind: NumPy for NumPy input, CuPy (computed
without a host round trip) for CuPy input, a Numba device array for other device
input. The result has ``x``'s shape, or ``(x.size,)`` for ``axis=None`` and for a 0-d
``x`` (NumPy's rule: a 0-d array scans as one element along axis 0 or -1; torch's
cummax, cummin and logcumsumexp keep it 0-d, these do not).
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, NamedTuple

import numpy as np

from numbakern.api._dispatch import dispatch
from numbakern.api.reductions import NUMPY_LOOPS, host_numbers, loop_of_out

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.core.arrays import (CopyWarning, Workspace, as_array_like, bits_of,
                                   contiguous_copy, honours_stream, kind_of, native_order,
                                   resolve_stream, user_array)
from numbakern.core.axes import (FLAT, axis_or_dim, check_flag, flat_axis_of_0d, normalize_axis,
                                  optional_axis)
from numbakern.core.deliver import (OutDtypeError, check_apart, check_disjoint, check_out,
                                    written_into)
from numbakern.core.jobs import ScanJob
from numbakern.core.layout import scan_views
from numbakern.kernels import bfloat16, float16
from numbakern.kernels.scan_rows import check_layout, scan_rows, use_warp_rows
from numbakern.kernels.elementwise import log_sum_exp_into
from numbakern.kernels.products import settle_products
from numbakern.ops import products as _products
from numbakern.ops.state import state_kit
from numbakern.runtime.launch import DeviceBuffer, to_device_array
from numbakern.runtime.memo import planner
from numbakern.runtime.replay import replayable
from numbakern.runtime.stacklevel import numpy_fp_error, numpy_fp_errors, warn
from numbakern.runtime.views import (c_contiguous, device_view, flat, host_copy,
                                     reversed_last, to_device)
from numbakern.strategies.online_softmax import ONLINE_SOFTMAX


@functools.lru_cache(maxsize=None)
def cumsum_dtype(in_dtype: np.dtype, dtype: Any = None) -> np.dtype:
    """NumPy's result dtype for ``np.cumsum(x, dtype=dtype)``."""
    return np.cumsum(np.zeros(1, dtype=in_dtype), dtype=dtype).dtype


@functools.lru_cache(maxsize=None)
def cumprod_dtype(in_dtype: np.dtype, dtype: Any = None) -> np.dtype:
    """NumPy's result dtype for ``np.cumprod(x, dtype=dtype)``."""
    return np.cumprod(np.zeros(1, dtype=in_dtype), dtype=dtype).dtype


@dispatch
@replayable
@honours_stream
def cumsum(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
           strategy=None, layout="auto", stream=None):
    """Cumulative sum along ``axis``, as ``np.cumsum(x, axis, dtype, out)``.

    Result dtype: NumPy's (bool and integers narrower than 64 bits widen to int64 or
    uint64; float16 stays float16 but accumulates in float32). Integer sums wrap on
    overflow, as NumPy's do. Float results are accurate to a few ulps of the
    running sum of magnitudes (a tree, not NumPy's sequential loop: usually closer
    to the exact sum on long inputs).

    Args:
        x, dtype, out: as ``np.cumsum`` (``out`` takes the result by ``same_kind``
            casting, as the reductions' ``out``: a float scan into an integer ``out``
            is an :class:`~numbakern.OutDtypeError`, where NumPy's casts unsafely);
            ``axis=None`` scans the flattened input.
        exclusive: element ``i`` holds the sum of the elements before it (0 first).
        reverse: scan from the end (each element: the sum of it and those after it),
            computed as a scan over the reversed order, never as total minus prefix.
        strategy: ``"grid/block"`` from ``numbakern.strategies.available_scans()``, a
            scan strategy object, or a block strategy object (``WarpShuffle()``: run
            under the default grid, decoupled look-back); default
            ``"decoupled_lookback/warp_shuffle"``: one pass, but which earlier
            tiles a float carry sums depends on timing, so float results may differ
            in the last bits run to run; ``"reduce_then_scan/..."`` is reproducible.
            Used by ``layout="tiles"`` only.
        layout: ``"auto"`` (default), ``"warp"`` or ``"tiles"``: one warp per row
            (rows grid-strided; for many short rows; reproducible; no grid strategy
            needed) or the strategy's tiles. ``"auto"`` picks ``"warp"`` for two or
            more rows of at most 1024 elements (``scan_rows.WARP_ROW_MAX``).
        stream: a Numba stream, a CuPy stream or a raw pointer.

    Example::

        numbakern.cumsum(np.array([3, 1, 4, 1, 5]))   # array([ 3,  4,  8,  9, 14])

    Host input warns NumPy's floating-point errors under ``np.geterr()``, found from
    the host result: an element a float ``dtype`` cannot hold ("overflow encountered
    in cast"), a running value that overflows, ``inf - inf`` ("... encountered in
    accumulate"; :func:`cumprod` and the nan forms too, ``inf * 0`` for products).
    Into an ``out`` of another dtype than NumPy's loop (a float ``dtype=``, else the
    promotion of the result dtype and ``out``'s), NumPy's cast of the running values
    into ``out`` clears its loop's flags: that cast's overflow warns "in cast" and "in
    accumulate", and the loop's own overflow or ``inf - inf`` nothing.
    A sum's running values are the tree's: where they overflow and NumPy's loop does
    not (or the other way), the values and the words differ. Device input, a complex
    ``out`` and an integer ``dtype=`` of float input get the values without them.

    Raises:
        TypeError: a dtype outside bool/int/uint/float; a bad ``out`` or flag.
        ValueError: an unknown strategy or layout; ``out`` of the wrong shape.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    result = _scan(x, _ops.SUM, axis, dtype, out, exclusive, reverse, strategy, layout,
                   stream, cumsum_dtype, "cumsum")
    return _accumulated(x, result, axis, exclusive, reverse, np.add, None, dtype)


@dispatch
@replayable
@honours_stream
def cumprod(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
            strategy=None, layout="auto", stream=None):
    """Cumulative product along ``axis``, as ``np.cumprod(x, axis, dtype, out)``.

    Result dtype as :func:`cumsum`. Integer products wrap on overflow. Float products
    take NumPy's special values, those of its sequential loop: once the running product
    has rounded to 0 or overflowed to +-inf it stays there (its sign still changes),
    until a NaN or an ``inf * 0`` makes it NaN, whatever order the tree multiplies in
    (``numbakern/ops/products.py``: a scan of products that no partial product
    overflows, a scan of the factors' classes, then each element after the first that
    left the finite range settled). Finite results are the tree's, a few ulps from
    NumPy's while the running product stays normal; where NumPy's sequential product
    passes through the subnormal range, it loses bits that every later element
    inherits, and the tree, multiplying in another order, may not (``[1e-30, 1e-15,
    1e30]`` in float32: NumPy's last element 1.4e-15, this one's 1e-15). That costs
    a float cumprod about 5.5x a cumsum's time on an H200 (float32, 2**28: 3.6 ms
    against 0.66; bench/NOTES.md); integer products are one scan.

    A complex ``out`` takes the real products, cast (NumPy multiplies in complex
    there, so its infinities carry NaN imaginary parts).

    Raises: as :func:`cumsum`.
    """
    result = _product(x, False, axis, dtype, out, exclusive, reverse, strategy, layout,
                      stream, "cumprod")
    return _accumulated(x, result, axis, exclusive, reverse, np.multiply, None, dtype)


@dispatch
def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False,
                   strategy=None, layout="auto", stream=None):
    """Cumulative sum as NumPy 2's ``np.cumulative_sum(x, axis=, dtype=, out=,
    include_initial=)`` (the array API's): :func:`cumsum`, except that ``axis`` is
    required for more than one dimension, a 0-d input is scanned as one element, and
    ``include_initial=True`` puts the sum of nothing (0) first, so the result is one
    longer along ``axis``.

    Returns: as :func:`cumsum` (result dtype NumPy's), of ``x``'s shape with one more
    element along ``axis`` if ``include_initial``.

    Raises: as :func:`cumsum`; ``ValueError`` for ``axis=None`` on more than one
    dimension.
    """
    return _cumulative("cumulative_sum", cumsum, _ops.SUM, cumsum_dtype, x, axis, dtype,
                       out, include_initial, strategy, layout, stream)


@dispatch
def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False,
                    strategy=None, layout="auto", stream=None):
    """Cumulative product as NumPy 2's ``np.cumulative_prod`` (:func:`cumprod`'s
    values and special values; ``include_initial=True`` puts 1 first). Arguments and
    errors as :func:`cumulative_sum`.
    """
    return _cumulative("cumulative_prod", cumprod, _ops.PROD, cumprod_dtype, x, axis, dtype,
                       out, include_initial, strategy, layout, stream)


def cumulative_axis(x, axis, name: str):
    """``(x, axis)`` as the array API's cumulative functions read them: ``axis=None``
    only for at most one dimension (``ValueError`` naming ``name`` otherwise), a tuple
    of one axis as that axis (``ValueError`` for another tuple, as NumPy's accumulate),
    a 0-d ``x`` scanned as one element (along axis 0 or -1: ``AxisError`` for
    another)."""
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise ValueError(f"{name}: axis must be one axis (NumPy's accumulate does "
                             f"not allow multiple axes), got {axis!r}")
        axis = axis[0]
    if x.ndim == 0:  # one element along axis 0 (or -1), as NumPy's
        flat_axis_of_0d(axis, 0)
        return x.reshape(1), 0
    if axis is not None:
        return x, axis
    if x.ndim > 1:
        raise ValueError(f"{name}: axis is required for arrays of more than one "
                         f"dimension (got shape {tuple(x.shape)})")
    return x, 0


def _cumulative(name, scan, op, rule, x, axis, dtype, out, include_initial, strategy, layout,
                stream):
    """The array API's cumulative functions through ``scan`` (cumsum or cumprod, of ``op``,
    whose result dtype ``rule`` gives; the dtypes and ``out`` checked first, so that
    their errors name ``name``): with ``include_initial``, an inclusive scan fills
    all but the first slot of each row and then an exclusive scan of the first
    element writes the empty product or sum into it, both straight into views of one
    result (no copy). In that order a host ``out`` overlapping ``x`` (as NumPy
    allows) is written only after ``x`` is read, and a device one may hold ``x`` as
    its first slot's or as the rest (in place); a device ``x`` overlapping the rest
    in part is refused before anything is written."""
    x = as_array_like(x)
    include_initial = check_flag(include_initial, "include_initial")
    op.check_dtype(np.dtype(x.dtype), caller=name)
    if dtype is not None:  # NumPy 2 refuses a byte order here, as its ufuncs do
        accumulator = _ops._as_dtype(dtype)
        _ops.check_native_dtype(accumulator, name)
        op.check_dtype(accumulator, "dtype=", name)
    x, axis = cumulative_axis(x, axis, name)
    options = dict(dtype=dtype, strategy=strategy, layout=layout, stream=stream)
    axis = normalize_axis(axis, x.ndim)
    shape = tuple(n + (a == axis and include_initial) for a, n in enumerate(x.shape))
    result = rule(np.dtype(x.dtype), dtype)
    check_out(out, shape, result, kind_of(x), name)
    if not include_initial:
        check_disjoint(out, {"x": x}, kind_of(x), name)  # here, to name the function
        return scan(x, axis=axis, out=out, **options)
    if out is None:
        out = _result_like(x, shape, result, stream)
    first, rest = _along(axis, 0, 1, x.ndim), _along(axis, 1, None, x.ndim)
    xs, target = _sliceable(x), _sliceable(out)
    check_disjoint(target[rest], {"x": x}, kind_of(x), name, "out past its first slot")
    if x.shape[axis]:
        scan(xs, axis=axis, out=target[rest], **options)
    # an exclusive scan of one element writes only the empty sum or product, whatever
    # the element (so x[first] may have been overwritten by now): an uninitialised one
    # does where the axis is empty
    one = xs[first] if x.shape[axis] else _result_like(x, target[first].shape, x.dtype,
                                                      stream)
    scan(one, axis=axis, exclusive=True, out=target[first], **options)
    return out


def _sliceable(a):
    """``a``, or a Numba view of it where it is a bare device buffer (a CUDA tensor's,
    without CuPy), which has no slicing of its own."""
    return to_device_array(a) if isinstance(a, DeviceBuffer) else a


def _along(axis: int, start, stop, ndim: int) -> tuple:
    """The index ``[start:stop]`` along ``axis`` of an ``ndim``-d array."""
    return (slice(None),) * axis + (slice(start, stop),) + (slice(None),) * (ndim - axis - 1)


def _result_like(x, shape: tuple, dtype, stream):
    """An uninitialised array of ``x``'s kind (NumPy, CuPy, Numba device)."""
    kind = kind_of(x)
    if kind == "numpy":
        return np.empty(shape, dtype)
    return user_array(Workspace(kind, resolve_stream(stream, kind)).empty(shape, dtype))


_ARG_NAMES = ("argmax", "argmin")  # associative_scan's value-index ops, by name


@dispatch
@replayable
@honours_stream
def associative_scan(x, op, axis=None, *, reverse=False, exclusive=False, dtype=None,
                     out=None, strategy=None, layout="auto", stream=None):
    """Scan along ``axis`` with any associative ``op``: a :class:`numbakern.Op` or a
    built-in's name (``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"bitwise_and"``,
    ``"bitwise_or"``, ``"bitwise_xor"``, and ``"argmax"``/``"argmin"``: the running
    maximum or minimum *with its index*, the first occurrence winning ties, NaN
    propagating, as ``np.argmax``; an exclusive one starts from the identity: value
    -inf (argmax) or +inf (argmin), or the dtype's extreme for integers, with index
    ``2**63 - 1``, which loses every tie).

    Element ``i`` of the result is ``x[0] (+) x[1] (+) ... (+) x[i]`` in that order, so
    a non-commutative op gets the ordered result. ``dtype`` sets the accumulator and
    result dtype (default: the op's rule; the input's dtype for a user's op).
    ``strategy`` and ``layout`` as :func:`cumsum`'s.

    An op of ``N >= 2`` fields (a value-index pair, a (min, max, sum) triple) maps
    each element with ``op.map(value, index)``, ``index`` its position along the
    axis, and returns a tuple of ``N`` arrays, one per field; ``out`` is then a tuple
    of ``N`` arrays. Their dtypes are those ``state_dtypes`` gives where the op has
    it, else read from the identity's values as :func:`reduce` reads them
    (:func:`numbakern.ops.field_dtypes`); numbakern's argmax-style ops give the
    result dtype and int64. An op with ``finish`` returns one array of the result
    dtype instead.

    Example::

        @numbakern.op(identity=0.0, commutative=False)
        def last_nonzero(a, b):
            return b if b != 0 else a

        numbakern.associative_scan(x, last_nonzero)   # forward fill of zeros

    Raises: as :func:`cumsum`; ``ValueError`` for an unknown op name (or an ``op``
    that is neither an Op nor a name); ``TypeError`` for a plain function not
    wrapped by :func:`numbakern.op`, or an ``out`` that is not a tuple of one array a
    field for an op of several fields.

    Host input scanned with ``"sum"``, ``"prod"``, ``"nansum"`` or ``"nanprod"`` warns
    as :func:`cumsum`, :func:`cumprod` and their nan forms do.
    """
    if isinstance(op, str) and op in _ARG_NAMES:
        op = _ops.arg_op(op[3:])
    op = _ops.get(op, also=_ARG_NAMES)
    if isinstance(op, _ops.ArgOp):
        _check_scan_indices(out, "associative_scan")
    if op is _ops.PROD or op is _ops.NANPROD:  # cumprod's NumPy special values, as cumprod
        result = _product(x, op is _ops.NANPROD, axis, dtype, out, exclusive, reverse,
                          strategy, layout, stream, None)
    else:
        result = _scan(x, op, axis, dtype, out, exclusive, reverse, strategy, layout,
                       stream, None, None)
    for numpys, step, nan_as in _NUMPY_ACCUMULATES:  # their words, as cumsum's and cumprod's
        if op is numpys:
            return _accumulated(x, result, axis, exclusive, reverse, step, nan_as, dtype)
    return result


# the built-in ops that are NumPy's cumulative functions, their ufunc, and the value a
# NaN element enters as (None: as itself)
_NUMPY_ACCUMULATES = ((_ops.SUM, np.add, None), (_ops.PROD, np.multiply, None),
                      (_ops.NANSUM, np.add, 0), (_ops.NANPROD, np.multiply, 1))


@dispatch
@replayable
@honours_stream
def nancumsum(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
              strategy=None, layout="auto", stream=None):
    """Cumulative sum treating NaN as zero, as ``np.nancumsum(x, axis, dtype, out)``:
    each element enters as ``0`` if it is NaN (the op's map, on every path). Arguments,
    result dtype and errors as :func:`cumsum`.
    """
    result = _scan(x, _ops.NANSUM, axis, dtype, out, exclusive, reverse, strategy, layout,
                   stream, cumsum_dtype, "nancumsum")
    return _accumulated(x, result, axis, exclusive, reverse, np.add, 0, dtype)


@dispatch
@replayable
@honours_stream
def nancumprod(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
               strategy=None, layout="auto", stream=None):
    """Cumulative product treating NaN as one, as ``np.nancumprod``. Arguments, result
    dtype and errors as :func:`cumprod`.
    """
    result = _product(x, True, axis, dtype, out, exclusive, reverse, strategy, layout,
                      stream, "nancumprod")
    return _accumulated(x, result, axis, exclusive, reverse, np.multiply, 1, dtype)


def _accumulated(x, result, axis, exclusive: bool, reverse: bool, step, nan_as, dtype=None):
    """``result``, after NumPy's floating-point warnings of a cumulative sum or product
    of host input, found from the result's running values (device input gets none,
    which would cost a read). NumPy's loop runs in its dtype (a float ``dtype=``, else
    the promotion of its result dtype and ``out``'s) and casts the elements to it: an
    element that cast makes infinite overflows "in cast". Where ``out`` has the loop's
    dtype, along each row a running value that first leaves the finite range at a
    finite element overflowed, one that first becomes NaN at an element that is not
    NaN met ``inf - inf`` or ``inf * 0`` ("... encountered in accumulate"). Into an
    ``out`` of another dtype, the cast of the running values clears the loop's flags:
    a running value the cast makes infinite warns "in cast" and, its flag still set,
    "in accumulate", and the loop's own errors nothing. The products' running values
    are NumPy's sequential ones; a sum's are its tree's, whose overflow can differ
    from NumPy's loop (its value too).
    ``step``: the op's ufunc (``np.add``, ``np.multiply``); ``nan_as``: the value a NaN
    element enters as (the nan forms), else None. Finite results cost one ``isfinite``
    of them."""
    if kind_of(result) != "numpy" or result.dtype.kind != "f" or np.isfinite(result).all():
        return result
    data = host_numbers(as_array_like(x))
    if data is None:
        return result
    loop = _loop_dtype(data.dtype, step, dtype, result.dtype)
    with np.errstate(all="ignore"):
        cast = data.astype(loop)
    if (np.isfinite(data) & ~np.isfinite(cast)).any():
        numpy_fp_error("over", "overflow encountered in cast")
    if nan_as is not None:
        cast = np.where(np.isnan(cast), loop.type(nan_as), cast)
    flat = axis is None or cast.ndim == 0
    rows = cast.reshape(-1) if flat else np.moveaxis(cast, axis, -1)
    runs = result.reshape(-1) if flat else np.moveaxis(result, axis, -1)
    if reverse:
        rows, runs = rows[..., ::-1], runs[..., ::-1]
    if exclusive:  # the running value at i holds the elements before it
        rows, runs = rows[..., :-1], runs[..., 1:]
    if loop != result.dtype:
        with np.errstate(all="ignore"):  # NumPy's running values, in its loop's dtype
            running = step.accumulate(rows, axis=-1, dtype=loop)
        if (np.isfinite(running) & ~np.isfinite(runs)).any():
            numpy_fp_error("over", "overflow encountered in cast")
            numpy_fp_error("over", "overflow encountered in accumulate")
        return result
    numpy_fp_errors([(kind, f"{text} encountered in accumulate") for kind, text, hit in (
        ("over", "overflow", _first_met(~np.isfinite(runs), rows, np.isfinite)),
        ("invalid", "invalid value", _first_met(np.isnan(runs), rows,
                                                lambda v: ~np.isnan(v)))) if hit])
    return result


def _loop_dtype(x_dtype: np.dtype, step, dtype, out_dtype: np.dtype) -> np.dtype:
    """The dtype NumPy's cumulative loop runs in: a float ``dtype=``; else the
    promotion of its result dtype for ``x`` and ``out``'s (an integer ``dtype=``:
    ``out``'s, whose words numbakern does not give)."""
    if dtype is not None:
        given = np.dtype(dtype)
        return given if given.kind == "f" else out_dtype
    rule = cumsum_dtype if step is np.add else cumprod_dtype
    return np.result_type(rule(x_dtype), out_dtype)


def _first_met(where, rows, test) -> bool:
    """Whether, in a row where ``where`` holds, the element at its first True passes
    ``test``."""
    if rows.shape[-1] == 0:
        return False
    first = np.take_along_axis(rows, where.argmax(axis=-1)[..., None], -1)[..., 0]
    return bool((where.any(axis=-1) & test(first)).any())


class CumMax(NamedTuple):
    """What :func:`cummax` returns, as ``torch.return_types.cummax``."""

    values: Any
    indices: Any


class CumMin(NamedTuple):
    """What :func:`cummin` returns, as ``torch.return_types.cummin``."""

    values: Any
    indices: Any


@dispatch
@replayable
@honours_stream
def cummax(x, axis=FLAT, *, dim=None, reverse=False, out=None, strategy=None, layout="auto",
           stream=None):
    """``CumMax(values, indices)``: the running maximum along ``axis`` and where it was,
    as ``torch.cummax(x, dim)`` (a named tuple, as ``torch.return_types.cummax``; it
    unpacks as a pair).

    torch's rule, followed here: among equal values the *latest* index wins (ties
    move the index forward), and NaN beats every number: once a NaN is seen the values
    are NaN, with the index of the latest NaN so far. ``axis=None`` scans the
    flattened input (NumPy's habit; torch needs a dim, and ``dim=`` is taken as
    ``axis=``: giving both is a ``TypeError``). It is the ``argmax`` pair
    scan with ties going right (``numbakern.ops.arg_op("max", False)``). With
    ``reverse=True`` element ``i`` holds the maximum of the elements from ``i`` on,
    its index still the largest among equal values: the pair compares indices, not
    the order of the scan (flipping, scanning with torch and flipping back gives the
    smallest instead: ``[1, 3, 2, 3, 0]`` has indices ``[3, 3, 3, 3, 4]`` here,
    ``[1, 1, 3, 3, 4]`` that way).

    Returns:
        :class:`CumMax`: ``values`` of ``x``'s dtype and int64 ``indices`` along
        ``axis``, each of ``x``'s shape (``(x.size,)`` for ``axis=None``, the
        module's rule; a 0-d ``x`` along axis 0 or -1 gives 0-d ones, as torch's);
        ``out``: a pair of arrays, returned as the named tuple's fields.

    Raises: as :func:`cumsum`; ``ValueError`` for the two arrays of ``out`` sharing
    memory.
    """
    axis = axis_or_dim(axis, dim, "cummax", default=FLAT)
    return CumMax(*_torch_pair_scan(x, _ops.arg_op("max", False), axis, out, reverse,
                                    strategy, layout, stream, "cummax"))


@dispatch
@replayable
@honours_stream
def cummin(x, axis=FLAT, *, dim=None, reverse=False, out=None, strategy=None, layout="auto",
           stream=None):
    """``CumMin(values, indices)``: the running minimum along ``axis`` and where it was,
    as ``torch.cummin`` (ties: the latest index; NaN wins; a named tuple, as
    ``torch.return_types.cummin``). The mirror of :func:`cummax`: its arguments, shapes
    and errors.
    """
    axis = axis_or_dim(axis, dim, "cummin", default=FLAT)
    return CumMin(*_torch_pair_scan(x, _ops.arg_op("min", False), axis, out, reverse,
                                    strategy, layout, stream, "cummin"))


@dispatch
@replayable
@honours_stream
def logcumsumexp(x, axis=FLAT, *, dim=None, reverse=False, out=None, strategy=None,
                 layout="auto", stream=None):
    """``log(cumsum(exp(x)))`` along ``axis`` without overflow, as
    ``torch.logcumsumexp(x, dim)``: a scan of the online softmax's ``(max, sum of
    exp(x - max))`` pairs (``strategies/online_softmax.py``) by any scan strategy, then
    ``max + log(sum)`` per element (+inf where the running maximum is +inf; NaN from
    a NaN on). ``axis=None`` scans the flattened input, as :func:`cumsum`; torch's
    ``dim=`` is taken as ``axis=`` (giving both is a ``TypeError``).

    Returns:
        an array of ``x``'s float dtype (float16 computes in float32) and shape
        (``(x.size,)`` for ``axis=None``, the module's rule; 0-d for a 0-d ``x``
        along axis 0 or -1, as torch's).

    Raises:
        TypeError: ``x`` not float16/32/64 (torch's logcumsumexp takes floats only).
        Otherwise as :func:`cumsum`.
    """
    axis = axis_or_dim(axis, dim, "logcumsumexp", default=FLAT)
    x = as_array_like(x)
    # float16's states in float32: a sum of exp(x - max) held in float16 would lose
    # the digits that m + log(s) keeps near 0 (tens of float16 ulps)
    half = np.dtype(x.dtype) == np.float16
    m, s = _scan(x, ONLINE_SOFTMAX, axis, np.float32 if half else None, None, False,
                 reverse, strategy, layout, stream, None, "logcumsumexp")
    dtype = np.dtype(np.float16 if half else m.dtype)
    stream_ = None  # a host result is written into out without one
    if isinstance(m, np.ndarray):
        with np.errstate(divide="ignore", invalid="ignore"):
            result = np.where(m == np.inf, m, m + np.log(s)).astype(dtype)
    else:
        # written over m in place (m[i] + log(s[i])), or into float16 for float16 x
        result = m if not half else _result_like(m, m.shape, dtype, stream)
        stream_ = resolve_stream(stream, kind_of(m))
        log_sum_exp_into(flat(m), flat(s), flat(result), stream_)
    if _torch_0d(x, axis):
        result = result.reshape(())
    if out is not None:
        check_out(out, tuple(np.shape(result)), np.dtype(result.dtype), kind_of(x),
                  "logcumsumexp")
        return written_into(out, result, stream_)
    return result


def _torch_0d(x, axis) -> bool:
    """Whether torch's scans (cummax, cummin, logcumsumexp) give this call a 0-d
    result: a 0-d ``x`` along axis 0 or -1, which the scan takes as one element
    (:func:`flat_axis_of_0d`; NumPy's scans, and ``axis=None``, give ``(1,)``)."""
    return axis is not None and flat_axis_of_0d(axis, np.ndim(x)) is None


def _check_scan_indices(out, caller: str) -> None:
    """An ``out`` pair's indices: a signed integer array (torch's cummax wants int64; a
    narrower one wraps, as argmax's), which the scan's int64 indices reach under
    ``same_kind``: an ``OutDtypeError`` for any other, named here."""
    if isinstance(out, (tuple, list)) and len(out) == 2 and hasattr(out[1], "dtype") and \
            np.dtype(out[1].dtype).kind != "i":
        raise OutDtypeError(f"{caller}: indices need a signed integer out (torch's want "
                            f"int64), got dtype {np.dtype(out[1].dtype)}")


def _torch_pair_scan(x, op, axis, out, reverse, strategy, layout, stream, caller) -> tuple:
    """cummax's and cummin's ``(values, indices)``, 0-d for a 0-d ``x`` along its axis
    (:func:`_torch_0d`), whose ``out`` pair is then of 0-d arrays, written as the
    one-element rows the scan writes."""
    zero_d = _torch_0d(x, axis)
    _check_scan_indices(out, caller)
    rows = out
    if zero_d and isinstance(out, (tuple, list)):
        for o in out:
            if tuple(getattr(o, "shape", ())) != ():
                raise ValueError(f"{caller}: out has an array of shape {tuple(o.shape)}; "
                                 "the results of a 0-d x along its axis are 0-d")
        rows = type(out)(o.reshape(1) if hasattr(o, "reshape") else o for o in out)
    pair = _scan(x, op, axis, None, rows, False, reverse, strategy, layout, stream, None,
                 caller)
    if not zero_d:
        return pair
    return tuple(out) if out is not None else tuple(r.reshape(()) for r in pair)


def _product(x, nan_as_one: bool, axis, dtype, out, exclusive, reverse, strategy, layout,
             stream, caller):
    """cumprod and nancumprod: integer products as they come (they wrap, as NumPy's);
    float products by the scans of ``numbakern/ops/products.py``, then settled."""
    x = as_array_like(x)
    plain = _ops.NANPROD if nan_as_one else _ops.PROD
    dtype = _numpy_loop(x, plain, dtype, out, cumprod_dtype)
    try:
        result = cumprod_dtype(np.dtype(x.dtype), dtype)
    except TypeError:  # a dtype= NumPy cannot take: _scan's checks name it
        result = None
    if result is None or result.kind != "f" or result.itemsize > 8:
        # integers; or dtypes the kernels do not hold (float128), which _scan names
        return _scan(x, plain, axis, dtype, out, exclusive, reverse, strategy, layout,
                     stream, cumprod_dtype, caller)
    op, classes = _products.rounded_ops(result.name, nan_as_one)

    read = bfloat16.widen if bits_of(x)[1] else None  # job.x: bfloat16's bits

    def settle(job, run):
        bits = job.workspace.empty(job.x.shape, _BITS)
        run(ScanJob(job.x, (bits,), classes, state_kit(classes, (_BITS,), read=read),
                    job.exclusive, job.reverse, (_BITS.type(0),), job.workspace))
        settle_products(job.outs[0], bits, job.workspace)

    # float16/float32: the product in float64; float64: (mantissa, exponent), as float64
    # products of a run of factors can overflow where no prefix does
    states = None if result == np.float64 else (np.dtype(np.float64),)
    return _scan(x, op, axis, dtype, out, exclusive, reverse, strategy, layout, stream,
                 cumprod_dtype, caller, after=settle, states=states)


_BITS = np.dtype(np.int8)


# --- the common path ---------------------------------------------------------------------


def _setup(op, in_dtype: np.dtype, shape: tuple, axis, dtype, exclusive, reverse, strategy,
           layout, rule, caller, states=None) -> tuple:
    """Check the arguments and derive what they decide (every argument error is raised
    here): ``(exclusive, reverse, results, grid, layout, axis, out_shape, kit, size)``.
    ``caller``: the function that dtype errors name (``cumsum``), or None for the op's
    own name (``associative_scan``)."""
    op.check_dtype(in_dtype, caller=caller)
    exclusive, reverse = check_flag(exclusive, "exclusive"), check_flag(reverse, "reverse")
    if dtype is not None:
        op.check_dtype(_ops._as_dtype(dtype), "dtype=", caller)
    own, results = _dtypes(op, in_dtype, dtype, rule)
    states = own if states is None else states
    grid = _strategies.resolve("scan", strategy)
    layout = check_layout(layout)
    axis = optional_axis(flat_axis_of_0d(axis, len(shape)), len(shape))
    size = math.prod(shape)
    out_shape = (size,) if axis is None else shape
    kit = state_kit(op, states, float16.read_for(in_dtype, results[0]) if op.fields == 1
                    else None)
    return exclusive, reverse, results, grid, layout, axis, out_shape, kit, size


_planned = planner(_setup)  # a repeated call skips the checks


def _scan(x, op, axis, dtype, out, exclusive, reverse, strategy, layout, stream, rule,
          caller, after=None, states=None, carry=None):
    """Validate, lay out, scan; returns the result in the input's kind. ``caller``, as
    :func:`_setup`'s. ``after(job, run)``, if given, runs once the scan has written its
    outputs, before they are delivered; ``run(job)`` scans another job the same way.
    ``states``: the state's field dtypes, where they are not the op's own (a float32
    product held in float64). ``carry``: an initial carry (:func:`scan_with_carry`)."""
    x = as_array_like(x)
    kind = kind_of(x)
    dtype = _numpy_loop(x, op, dtype, out, rule)
    exclusive, reverse, results, grid, layout, axis, out_shape, kit, size = _planned(
        op, np.dtype(x.dtype), tuple(x.shape), axis, dtype, exclusive, reverse, strategy,
        layout, rule, caller, states)
    outs = _check_outs(out, kind, out_shape, results, caller or "associative_scan")
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if _beyond_kernels(outs, caller or "associative_scan") or \
            _rounds_before_out(dtype, outs, results, kit) or \
            _settled_before_out(after, outs, results):
        # NumPy computes in dtype= and casts into out: the state, wider than dtype
        # (float16's float32, a float32 product's float64), is rounded to it first;
        # a complex out takes the real products once they are settled; a host out of
        # a dtype no kernel stores (float128) takes the result by NumPy's cast
        rounded = _scan(x, op, axis, dtype, None, exclusive, reverse, strategy, layout,
                        stream, rule, caller, after, states, carry)
        # a float out's overflow is _accumulated's to tell, in NumPy's words
        quiet = np.errstate(over="ignore") if np.dtype(outs[0].dtype).kind == "f" else \
            contextlib.nullcontext()
        with quiet:
            return written_into(outs[0], rounded, workspace.stream)
    if carry is not None:
        _check_carry(carry, op, kit, grid, layout, after, kind, tuple(x.shape), axis,
                     results[0])
    x, widened = bits_of(x)  # bfloat16: laid out as its bits, widened by the kit
    check_disjoint(outs, {"x": x}, kind, caller or "associative_scan")
    narrow = None
    if widened:
        kit = state_kit(op, kit.dtypes, read=float16.widened(kit.read))
        if _writes_bits(op, results, dtype, outs, after):
            results, narrow = (_BFLOAT16_BITS, *results[1:]), bfloat16.narrower()
    if size == 0:
        return _empty(workspace, out_shape, results, outs)
    if kind == "numpy":
        xv, views, finish = _host_layout(x, axis, results, outs, workspace)
    else:
        xv, views, finish = _device_layout(x, axis, out_shape, results, outs, workspace)
    if reverse:
        xv, views = reversed_last(xv), [reversed_last(v) for v in views]
    cv = None if carry is None else _carry_view(carry, kind, workspace)
    job = ScanJob(xv, tuple(views), op, kit, exclusive, reverse, _empty_state(op, kit),
                  workspace, narrow=narrow, carry=cv)
    def run(job):
        if use_warp_rows(layout, job.n, job.segments, grid.block):
            scan_rows(job, grid.block)
        else:
            grid.scan(job)

    run(job)
    if after is not None:
        after(job, run)
    result = finish()
    return tuple(result) if len(results) >= 2 else result[0]


_BFLOAT16_BITS = np.dtype(np.uint16)


# --- an initial carry ---------------------------------------------------------------------


def scan_with_carry(x, op, carry, axis=None, *, exclusive=False, reverse=False, dtype=None,
                    strategy=None, layout="auto", stream=None):
    """:func:`associative_scan` of ``x`` started from ``carry``: element ``i`` of a row
    is ``carry (+) x[0] (+) ... (+) x[i]`` (exclusive: ``carry (+) x[0] (+) ... (+)
    x[i-1]``, the first element ``carry`` itself), the carry on the left, as if the
    row had been preceded by elements whose combine is ``carry``. A reverse scan puts
    it before ``x[n-1]``: ``carry (+) x[n-1] (+) ... (+) x[i]`` (the elements after the
    row). Internal: what a chunked scan (``numbakern/api/dask.py``) gives each chunk,
    the previous chunk's last result, so the carry costs no separate pass.

    The kernels read the carry on the device (decoupled look-back: the first tile's
    prefix; reduce-then-scan: on the left of every chunk's carry; the warp rows: the
    first chunk's carry), so a device carry needs no host synchronisation. The carry
    is read as a state, cast to the accumulator, without the op's element map (a
    ``nansum`` carry of NaN stays NaN). Combines follow the strategy's order with the
    carry leftmost. A row cut in two and scanned as first part, then second part from
    the first part's last result, has the whole row's float bits where the whole
    row's scan combines in that same order: the warp rows, cut at a multiple of 32,
    with a result dtype that is its accumulator's (tested). Elsewhere the last bits
    may differ: a tile strategy carries a tile's block total where the last result
    was combined thread by thread, and a float16 carry has been rounded to float16
    (as NumPy rounds each element).

    Args:
        x: as :func:`associative_scan` (NumPy or device input).
        op: a one-field :class:`numbakern.Op` or a built-in op's name.
        carry: one value per scanned row, of the result's dtype and ``x``'s kind
            (NumPy for NumPy input, a device array otherwise): shape ``x.shape`` with
            ``axis``'s length 1 (``(1,)`` for ``axis=None``).
        axis, exclusive, reverse, dtype, strategy, layout, stream: as
            :func:`associative_scan`.

    Returns: as :func:`associative_scan`.

    Raises:
        ValueError: a ``carry`` of the wrong shape; an op, dtype or strategy that takes
            no carry (:func:`takes_carry` says which do); the errors of
            :func:`associative_scan`.
        TypeError: a ``carry`` of another dtype or kind than the result's.
    """
    x, op = as_array_like(x), _ops.get(op)
    if _settled_apart(op, _product_dtype(x.dtype, dtype)):
        raise ValueError(f"carry: {op.name} {_NO_CARRY}")
    return _scan(x, op, axis, dtype, None, exclusive, reverse, strategy, layout, stream,
                 None, None, carry=carry)


_NO_CARRY = ("takes no initial carry (a scan of one-field states only; a float product "
             "settles NumPy's special values in a second scan)")


def _product_dtype(in_dtype, dtype):
    """cumprod's result dtype, or None for a ``dtype=`` NumPy cannot take (``_scan``'s
    checks name it)."""
    try:
        return cumprod_dtype(np.dtype(in_dtype), dtype)
    except TypeError:
        return None


def _settled_apart(op, result) -> bool:
    """Whether the scan settles NumPy's special values in a second scan
    (``numbakern/ops/products.py``: float products), where no carry can enter."""
    return op in (_ops.PROD, _ops.NANPROD) and result is not None and np.dtype(result).kind == "f"


def takes_carry(op, result: np.dtype, strategy=None, layout="auto") -> bool:
    """Whether :func:`scan_with_carry` takes ``op`` with this result dtype and
    strategy: a one-field op without a ``finish`` (float products settle NumPy's
    special values in a second scan: ``numbakern/ops/products.py``; their carry stays
    a separate pass), and a grid strategy whose kernels read a carry
    (``GridScan.takes_carry``) unless ``layout="warp"`` (the warp rows always do)."""
    op = _ops.get(op)
    if op.fields != 1 or op.finish is not None:
        return False
    if _settled_apart(op, result):
        return False
    grid = _strategies.resolve("scan", strategy)
    return layout == "warp" or getattr(grid, "takes_carry", False)


def _check_carry(carry, op, kit, grid, layout, after, kind, shape, axis, result) -> None:
    """Raise if ``carry`` cannot start this scan (:func:`scan_with_carry`)."""
    if kit.fields != 1 or op.finish is not None or after is not None:
        raise ValueError(f"carry: {op.name} {_NO_CARRY}")
    if layout != "warp" and not getattr(grid, "takes_carry", False):
        raise ValueError(f"carry: the scan strategy {grid!r} takes no initial carry "
                         "(GridScan.takes_carry)")
    if not hasattr(carry, "dtype") or (kind == "numpy") != (kind_of(carry) == "numpy"):
        raise TypeError(f"carry must be an array of the input's kind ({kind}), got "
                        f"{type(carry).__name__}")
    if np.dtype(carry.dtype) != result:
        raise TypeError(f"carry must be of the result's dtype {result}, got {carry.dtype}")
    want = (1,) if axis is None else tuple(1 if a == axis else n for a, n in enumerate(shape))
    if tuple(carry.shape) != want:
        raise ValueError(f"carry must have shape {want} (one value per scanned row), got "
                         f"{tuple(carry.shape)}")


def _carry_view(carry, kind: str, workspace: Workspace):
    """The carry as the kernels read it: a 1-D C-contiguous device view, row ``r``'s
    value at ``r`` (rows in the C order of the other axes, the order of the layouts'
    segments). A NumPy carry travels with the input; a strided device carry is made
    contiguous on the device (CuPy) without a synchronisation."""
    if kind == "numpy":
        return to_device(native_order(np.ascontiguousarray(carry).reshape(-1)),
                         workspace.stream)
    view = device_view(carry)
    if not c_contiguous(view):
        view = contiguous_copy(carry, view, workspace.stream)
    return flat(view, "carry")


def _writes_bits(op, results: tuple, dtype, outs, after) -> bool:
    """Whether a scan of bfloat16 input writes its values as bfloat16 bits, rounded
    once in the kernel (the caller's layer reads the uint16 result as bfloat16): a
    float32 values field that no ``dtype=`` asked for, no ``out=`` receives and no
    later step reads (cumprod's settling, logcumsumexp's finish read float32)."""
    return (dtype is None and outs is None and after is None and results[0] == np.float32
            and (op.fields == 1 or isinstance(op, _ops.ArgOp)))


def _numpy_loop(x, op, dtype, out, rule):
    """``dtype``, else for a sum or product into a float ``out`` the dtype NumPy's loop
    takes from it (:func:`~numbakern.api.reductions.loop_of_out`: float32 ``x`` into
    a float64 ``out`` is summed in float64)."""
    if dtype is not None or out is None or op not in NUMPY_LOOPS:
        return dtype
    try:
        result = np.dtype((rule or op.result_dtype)(np.dtype(x.dtype), None))
    except TypeError:  # a dtype the checks name
        return None
    return loop_of_out(result, out)


def _dtypes(op, in_dtype: np.dtype, dtype, rule) -> tuple[tuple, tuple]:
    """``(state dtypes, result dtypes)``, one of each per field; float16 fields are
    held as float32 in the state."""
    result = np.dtype((rule or op.result_dtype)(in_dtype, dtype))
    if op.finish is not None:  # one output, whatever the state
        states = op.given_state_dtypes(in_dtype, dtype) or _ops.field_dtypes(op, result)
        return states, (result,)
    if op.fields == 1:
        results = (result,)
    elif op.state_dtypes is not None:
        results = op.given_state_dtypes(in_dtype, dtype)
    elif isinstance(op, _ops.ArgOp):
        results = (result, _ops.INDEX_DTYPE)
    else:
        results = _ops.field_dtypes(op, result)
    return tuple(_ops.accumulator_dtype(d) for d in results), results


def _empty_state(op, kit) -> tuple:
    """What an exclusive scan writes first: the op's empty result (sum 0, prod 1), or
    its identity for ops whose empty reduction raises (max, min)."""
    if kit.fields >= 2 or isinstance(op.empty, str):
        return kit.identity_values
    return (np.asarray(op.empty).astype(kit.dtypes[0])[()],)


def _described(out) -> str:
    """``out`` in a message: an array's shape (not its type, which may be the
    translation of the caller's tensor), each member's in a tuple (never the
    elements: an array may be huge)."""
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of ({', '.join(map(_described, out))})"
    return f"an array of shape {tuple(out.shape)}" if hasattr(out, "shape") else repr(out)


def _check_outs(out, kind: str, shape: tuple, dtypes: tuple, name: str):
    """The caller's output arrays as a list (one per field), or ``None``, each checked
    by :func:`~numbakern.core.deliver.check_out`; ``name``, the function's, begins
    the messages."""
    if out is None:
        return None
    many = isinstance(out, (tuple, list))
    arrays = list(out) if many else [out]
    if len(arrays) != len(dtypes) or many != (len(dtypes) > 1) or \
            any(a is None for a in arrays):
        # (NumPy takes no (out,), and a state's fields are written together)
        what = "an array" if len(dtypes) == 1 else f"a tuple of {len(dtypes)} arrays"
        raise TypeError(f"{name}: out must be {what} for this op, got {_described(out)}")
    for arr, dtype in zip(arrays, dtypes):
        check_out(arr, shape, dtype, kind, name)
    check_apart(arrays, kind, name)
    return arrays


def _empty(workspace: Workspace, shape: tuple, dtypes: tuple, outs):
    if outs is not None:
        arrays = outs
    elif workspace.kind == "numpy":
        arrays = [np.empty(shape, d) for d in dtypes]
    else:
        arrays = [user_array(workspace.empty(shape, d)) for d in dtypes]
    return tuple(arrays) if len(dtypes) >= 2 else arrays[0]


# --- layouts: every scan is (A, B, n) to the kernels ------------------------------------


def _rounds_before_out(dtype, outs, results: tuple, kit) -> bool:
    """Whether a one-result scan given ``dtype=`` and an ``out`` of another dtype holds
    states wider than ``dtype``, which must be rounded to it before ``out`` takes them."""
    return (dtype is not None and outs is not None and len(results) == 1
            and results[0].kind in "biuf" and kit.dtypes[0] != results[0]
            and np.dtype(outs[0].dtype) != results[0])


def _beyond_kernels(outs, name: str) -> bool:
    """Whether the one ``out`` has a dtype that no kernel stores: NumPy's extended
    precision (float128, complex256 on x86), wider than a GPU's float64 and
    complex128; it takes the result by NumPy's cast.

    Raises:
        TypeError: such a dtype among the outs of a scan of two results (cummax's)."""
    wide = outs is not None and any(
        np.dtype(o.dtype).itemsize > {"f": 8, "c": 16}.get(np.dtype(o.dtype).kind, 8)
        for o in outs)
    if wide and len(outs) > 1:
        raise TypeError(f"{name}: out's arrays must have dtypes of at most 8-byte floats "
                        f"(the kernels' widest), got "
                        f"{', '.join(str(np.dtype(o.dtype)) for o in outs)}")
    return wide


def _settled_before_out(after, outs, results: tuple) -> bool:
    """Whether a scan settled after it (float products) would read back a complex
    ``out``: the settling reads and writes real values, which ``out`` then takes by a
    cast."""
    return after is not None and outs is not None and np.dtype(outs[0].dtype).kind == "c"


def _host_layout(x: np.ndarray, axis, results: tuple, outs, workspace: Workspace):
    """NumPy input: moved and made contiguous on the host, transferred once."""
    moved = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    rows = moved.size // n
    xv = to_device(native_order(np.ascontiguousarray(moved).reshape(1, rows, n)),
                   workspace.stream)
    # in the outs' dtypes, as the device layout writes its outs: the state cast once
    # (in native byte order: `target[...] =` below swaps into a big-endian out)
    dtypes = results if outs is None else [o.dtype.newbyteorder("=") for o in outs]
    views = [workspace.empty((1, rows, n), d) for d in dtypes]

    def finish():
        copies = [host_copy(view, workspace.stream) for view in views]
        workspace.stream.synchronize()  # the copies may be asynchronous
        arrays = []
        for host_out, target in zip(copies, outs or [None] * len(views)):
            host_out = host_out.reshape(moved.shape)
            if axis is not None:
                host_out = np.moveaxis(host_out, -1, axis)
            if target is not None:
                target[...] = host_out
                arrays.append(target)
            else:
                arrays.append(np.ascontiguousarray(host_out))
        return arrays

    return xv, views, finish


def _device_layout(x, axis, out_shape: tuple, results: tuple, outs,
                   workspace: Workspace):
    """Device input: strided views in place (a copy, announced, only when the input
    needs three or more strided outer dimensions)."""
    targets = outs if outs is not None else [workspace.empty(out_shape, d) for d in results]
    tviews = [device_view(t) for t in targets]
    xv = device_view(x)
    views = scan_views(xv, tviews, axis)
    if views is None:
        need = ("a flattened scan (axis=None) reads its input in C order as one strided "
                "run" if axis is None else
                "its strides need more than two strided outer dimensions")
        warn(f"numbakern copied a {tuple(x.shape)} input: {need}; pass a "
             "contiguous array to avoid the copy", CopyWarning)
        xv = contiguous_copy(x, xv, workspace.stream)
        views = scan_views(xv, tviews, axis)
        if views is None:
            raise ValueError("out is strided in three or more outer dimensions; pass a "
                             "contiguous out")

    def finish():
        if outs is not None:
            return outs
        return [user_array(t) for t in targets]

    return views[0], views[1:], finish


__all__ = ["cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "associative_scan",
           "nancumsum", "nancumprod", "cummax",
           "cummin", "logcumsumexp", "CumMax", "CumMin"]
