"""Selection with NumPy's contracts: ``partition``, ``argpartition``, ``median``,
``quantile``, ``percentile`` and their NaN-skipping forms ``nanmedian``,
``nanquantile``, ``nanpercentile``.

All take NumPy arrays (or anything ``np.asarray`` takes), CuPy arrays, other
``__cuda_array_interface__`` arrays and torch tensors (through ``@dispatch``), of the
dtypes the sorts take (bool, int8-int64, uint8-uint64, float16, float32, float64), and
give results in the caller's array type. ``stream`` as the sorts'.

**Partition is a selection, not a sort** (:func:`_select`; cupy/cupy#7060 found
CuPy's argpartition sorting in full). For the distinct ``kth`` ranks ``k_1 < ... <
k_m`` of a slice, radix select (``RadixSelect.kth_keys``: digit histograms over
shrinking candidates, Alabi et al., "Fast k-selection algorithms for graphics
processing units", 2012) finds the pivots ``p_j``, the keys of those ranks, as the
sort's ordered bits (``kernels/sort_keys.py``: NaN last, ``-0.0 == +0.0``, so no case
of their own). Each element then falls in one of ``2m + 1`` buckets (below ``p_1``,
equal to ``p_1``, between ``p_1`` and ``p_2``, ..., above ``p_m``), and a one-digit
stable counting sort on the bucket id, computed from the key on the fly, lays the
slice out bucket after bucket (``kernels/partition_split.py``: a count, offsets, a
split): rank ``k_j`` lands among the keys equal to ``p_j``, nothing larger before it,
nothing smaller after it, for every ``kth`` at once. A float32 slice is read 5 times
(3 digit passes, the count, the split) and written once, where the radix sort reads
it for its histogram, then reads and writes it in each of 4 passes that rank every
key; an argpartition writes its int64 indices once instead of carrying them through
every sort pass.

Why a split kernel rather than an argsort of a ``uint8`` bucket array by the radix
sort, then a gather: after the digit passes that costs about 31 bytes an element of
float32 (read the keys, write the ids; the sort's histogram and pass read them and
write an int64 order; the gather reads the order and the keys and writes), the split
12 (two reads, one write), and its ballots on the ids' ``log2(2m + 2)`` bits rank a
warp's keys without the sort's shared-memory ranking.

The default (``strategy=None``) keeps the full sort (:func:`numbakern.sort`'s path:
the stable sort along the axis, a valid partition for every ``kth``) for rows that fit
a block's bitonic sort, for keys of 8 bits (one radix pass), for 16-bit values (two),
and for more than :data:`SELECT_MOST` distinct ``kth`` (each rank's digit passes read
the slice again, where the sort's passes serve every rank: :func:`_partition_path`;
``strategy="radix_select"`` selects up to
:data:`~numbakern.kernels.partition_split.MAX_PIVOTS`). Either way NumPy's
introselect order of the other elements is not reproduced, only its contract; the
split keeps each bucket's elements in input order. ``strategy``: ``None``, a sort
strategy (the sort), ``"radix_select"`` or a ``RadixSelect`` (the selection),
``"sort_slice"`` or a ``SortSlice`` (its sort), as the medians take them.

**Medians and quantiles find their order statistics by radix select** by default
(:func:`_order_path`; rows longer than a block's bitonic sort, at most
:data:`SELECT_MOST` of ``q``): the one or two ranks NumPy's method names a
slice are found by ``RadixSelect.kth_keys`` (digit histograms over shrinking
candidates, Alabi et al. 2012, as ``torch.topk``), then read and interpolated as
NumPy's ``_lerp`` (``kernels/rank_stats.py``). ``strategy`` there: ``None``, a sort
strategy (each slice sorted, then ``kernels/order_stats.py`` reads the sorted rows),
``"radix_select"`` or a ``RadixSelect``, ``"sort_slice"`` or a ``SortSlice`` (its
sort).
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from numbakern import strategies as _strategies
from numbakern.api._dispatch import dispatch
from numbakern.api.sort import along_rows, check_dtype, sort_rows
from numbakern.core.arrays import (
    BFloat16Bits,
    Workspace,
    as_array_like,
    as_layout_array,
    flat_device,
    honours_stream,
    kind_of,
    resolve_stream,
)
from numbakern.core.axes import normalize_axes, normalize_axis, result_shape
from numbakern.core.deliver import check_out, deliver, deliver_host
from numbakern.core.jobs import SelectJob
from numbakern.kernels import partition_split as split
from numbakern.kernels.elementwise import cast_into, zeros
from numbakern.kernels.order_stats import (
    INTERPOLATING,
    INVALID,
    MEDIAN,
    OVERFLOW,
    METHODS,
    TAKE,
    order_stats_into,
)
from numbakern.kernels.rank_stats import (FACTS, next_keys_into, picked_stats_into,
                                          picks_into, ranks_into, row_facts_into)
from numbakern.kernels.partition_split import MAX_BUCKETS
from numbakern.kernels.sort_keys import bits_dtype
from numbakern.runtime.checks import check_keepdims
from numbakern.runtime.replay import replayable
from numbakern.runtime.stacklevel import numpy_fp_error, numpys_words, warn
from numbakern.runtime.views import checked_words, device_view, host_copy, host_words, view_as

_METHOD_NAMES = tuple(METHODS)


#: the most order statistics a call finds by radix select when no strategy is named
#: (a partition's distinct ``kth``, a quantile call's ``q``): each costs a selection,
#: a read of its row a digit pass (3 for float32), where a sort's passes serve any
#: number of them. At 2^28 float32 (H200, bench/NOTES.md) a partition around one
#: rank took 7.3 ms by selection and split against the sort's 7.7, the digit passes
#: ~4.2 ms of it: a second rank would cost more than the sort.
SELECT_MOST = 1


# --- partition -----------------------------------------------------------------------

@dispatch
@replayable
@honours_stream
def partition(x, kth, axis=-1, kind="introselect", order=None, *, strategy=None,
              stream=None):
    """A copy of ``x`` partitioned along ``axis``, as ``np.partition(x, kth, axis)``.

    Contract (NumPy's): for every ``k`` in ``kth`` the element at ``k`` along the axis
    is the one a sort puts there; no element before it is larger, none after it
    smaller (NaN sorts last). Returns ``x``'s dtype, its byte order included (a
    big-endian NumPy input comes back big-endian, as NumPy's), and shape (``(x.size,)``
    for ``axis=None``, the flattened input). An empty integer ``kth``
    (``np.array([], int)``) places nothing: a copy of ``x``, as NumPy's (``kth=[]``
    is a float array to NumPy: ``TypeError``).

    Algorithm (the module doc): the keys of the distinct ``kth`` ranks by radix
    select (Alabi et al., 2012), then a stable split of each slice into the ``2m +
    1`` buckets those pivots make (below, equal to, between them), elements of a
    bucket in input order; or, where :func:`_partition_path` finds it cheaper (rows
    that fit a block, 8- and 16-bit values, more than one distinct ``kth``), the stable
    sort along the axis. The order NumPy's introselect leaves the other elements in is
    not reproduced.

    Args:
        kth: an int or a sequence of ints (negative counts from the end).
        axis: an int or ``None``.
        kind: ``"introselect"`` (NumPy's only one). order: ``None`` (no structured
            dtypes).
        strategy: ``None`` (the rule above), a sort strategy (name or object: the
            full sort), ``"radix_select"`` or a ``RadixSelect`` (the selection; the
            sort past 127 distinct ``kth``), ``"sort_slice"`` or a ``SortSlice`` (its
            sort).
        stream: as :func:`numbakern.sort`.

    Raises:
        ValueError: ``kth`` out of ``[-n, n)``; a bool ``kth``; ``kind`` other than
            ``"introselect"``; ``order`` given; a select strategy other than
            ``radix_select`` and ``sort_slice`` (name or object), an unknown name.
        TypeError: a non-integer ``kth``; a dtype the sorts refuse (checked first,
            ``None`` included); a ``strategy`` that is neither a name nor a sort or
            select strategy object (a strategy of another family); ``axis`` not an
            int or None; a bad ``stream``.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    return _partition(x, kth, axis, kind, order, False, strategy, stream)


@dispatch
@replayable
@honours_stream
def argpartition(x, kth, axis=-1, kind="introselect", order=None, *, strategy=None,
                 stream=None):
    """Indices that partition ``x`` along ``axis``, as ``np.argpartition(x, kth, axis)``:
    int64, ``x``'s shape (``(x.size,)`` for ``axis=None``); ``x`` taken at them along
    the axis is a partition by :func:`partition`'s contract. By the selection, the
    indices of each bucket (the elements below, equal to or between the ``kth``
    pivots) are in input order; by the sort, the stable argsort; for an empty
    integer ``kth``, ``0 .. n-1`` along the axis, as NumPy's. Arguments, algorithm
    and errors as :func:`partition`'s."""
    if np.ndim(x) == 0 and axis is not None and normalize_axis(axis, 1) == 0:
        axis = None  # as NumPy: a 0-d array's argpartition along -1 is array([0])
    return _partition(x, kth, axis, kind, order, True, strategy, stream)


def _partition(x, kth, axis, kind, order, indices: bool, strategy, stream):
    if kind != "introselect":
        raise ValueError(f"kind must be 'introselect', got {kind!r}")
    if order is not None:
        raise ValueError("order is not supported: numbakern takes no structured dtypes")
    given = x
    x = as_array_like(x)
    if isinstance(given, np.ndarray) and not given.dtype.isnative:
        x = given  # along_rows gives the values back in its byte order, as NumPy
    if not isinstance(x, BFloat16Bits):  # before the axis: None is a 0-d object array
        check_dtype(x.dtype)
    ks = _check_kth(kth)
    shape = tuple(x.shape)
    if axis is not None:
        axis = normalize_axis(axis, len(shape))
    n = math.prod(shape) if axis is None else shape[axis]
    if math.prod(shape):  # as NumPy: an empty array takes any kth
        for k in ks:
            if not -n <= k < n:
                raise ValueError(f"kth(={k}) out of bounds for an axis of length {n}: "
                                 f"kth must be in [{-n}, {n - 1}]")
    return _select(x, axis, ks, indices, strategy, stream)


def _check_kth(kth) -> tuple[int, ...]:
    """``kth`` as a tuple of ints, with NumPy's errors."""
    arr = np.asarray(kth)
    if arr.dtype == np.bool_:  # operator.index(True) is 1: NumPy refuses it
        raise ValueError("kth must be an int or a sequence of ints; booleans are "
                         "unacceptable as partition index")
    if arr.ndim > 1:
        raise ValueError(f"kth must be an int or a 1-d sequence of ints, got shape "
                         f"{arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"kth must be an int or a sequence of ints (partition index), "
                        f"got {kth!r}")
    return tuple(operator.index(k) for k in arr.reshape(-1))


def _select(x, axis, kth: tuple[int, ...], indices: bool, strategy, stream):
    """The selection step: ``x`` partitioned along ``axis`` (``None``: flattened)
    around every index in ``kth``, values or int64 ``indices``, in the caller's array
    type: by pivots and buckets (:func:`_split_rows`) or by a full sort, as
    :func:`_partition_path` decides."""
    def plan(n: int, dtype):
        ranks = sorted({k % n for k in kth}) if n else []
        path, how = _partition_path(strategy, n, len(ranks), dtype, indices)  # checks it
        if not kth:  # as NumPy: nothing to place, the input order kept
            return lambda rows, workspace: _unmoved(rows, dtype, indices, workspace)
        if path == "sort":
            sorter = _strategies.resolve("sort", how, n=n)
            return lambda rows, workspace: sort_rows(rows, dtype, False, indices, sorter,
                                                     workspace)
        return lambda rows, workspace: _split_rows(rows, dtype, ranks, indices, how,
                                                   workspace)

    return along_rows(x, axis, indices, stream, plan)


def _unmoved(rows, dtype, indices: bool, workspace):
    """A partition around no ``kth`` (an empty int array), as NumPy's: every row as
    it is (a copy), or each row's indices ``0 .. n-1``; one copy, no kernel of the
    selection."""
    n = rows.shape[-1] if rows.ndim else 1
    size = math.prod(rows.shape)
    if indices:
        return workspace.from_host(np.tile(np.arange(n, dtype=np.int64), size // n))
    xbits = flat_device(rows, workspace, bits_dtype(dtype))
    if isinstance(rows, np.ndarray):  # already a copy: the upload
        return xbits
    out = workspace.empty(size, bits_dtype(dtype))
    cast_into(xbits, out, workspace.stream)  # a device row's view is not a copy
    return out


def _partition_path(strategy, n: int, m: int, dtype, indices: bool):
    """``("select", RadixSelect)`` or ``("sort", sort spec)`` for a partition of rows
    of ``n`` around ``m`` distinct ranks. ``None``: the selection where a row is
    longer than a block's bitonic sort (which reads a row that fits a block once),
    for at most :data:`SELECT_MOST` ranks (each rank's digit passes read the row again)
    and keys wide enough to make the sort's passes cost more: 32 and 64 bits
    (the radix sort's 4 or 8 passes against radix select's 3 or 6 and the split's
    two reads), or 16 bits for indices (the sort carries int64 indices through its 2
    passes); 8-bit keys sort in one pass. A sort strategy (name or object): the sort.
    ``"radix_select"`` or a ``RadixSelect``: the selection, the full sort where the
    buckets (:data:`~numbakern.kernels.partition_split.MAX_BUCKETS`) do not fit.
    ``"sort_slice"`` or a ``SortSlice``: the sort (its own ``sort`` if it has one)."""
    path, how = _strategy_path(strategy)
    if path is None:
        bits = 8 * bits_dtype(dtype).itemsize
        wide = bits >= 32 or (bits == 16 and indices)
        if m <= SELECT_MOST and wide and \
                _strategies.resolve("sort", None, n=n).name != "bitonic":
            return "select", _strategies.resolve("select", "radix_select")
        return "sort", None
    if path == "select" and 2 * m + 1 > MAX_BUCKETS:
        return "sort", None
    return path, how


def _split_rows(rows, dtype, ranks: list[int], indices: bool, finder, workspace,
                record=None):
    """Partition every row of ``rows`` (a NumPy or CuPy array, the rows along its last
    axis) around the 0-based ``ranks`` (ascending, distinct, at most
    ``MAX_PIVOTS``): each rank's key by ``finder.kth_keys`` (radix select), then
    ``kernels/partition_split.py``'s count, offsets and split. A 1-D device array of
    the rows one after another: the values' bits (``bits_dtype``), or int64 indices
    within the row. ``record`` (``numbakern explain``): a list that gets the digit
    passes' facts, then ``{"split": counts}``, each row's count of each bucket."""
    n = rows.shape[-1] if rows.ndim else 1
    m = len(ranks)
    count = math.prod(rows.shape) // n
    stream = workspace.stream
    xbits = flat_device(rows, workspace, bits_dtype(dtype))
    job = SelectJob(xbits, None, None, count * m, n, 1, dtype, False, False, workspace,
                    record)
    need = workspace.from_host(np.asarray(ranks, np.int64) + 1, times=count)
    done = zeros(workspace, count * m, np.int32)
    pivots, _ = finder.kth_keys(job, m, need, done)
    threads = min(finder.threads, split.MOST_THREADS)
    chunks = split.split_chunks(n, count, threads)
    offsets = workspace.empty(count * (2 * m + 1) * chunks, np.int64)
    split.count_buckets_into(xbits, pivots, offsets, count, n, m, chunks, dtype,
                             job.to_key(), threads, stream)
    if record is not None:
        counted = host_copy(offsets, stream).reshape(count, 2 * m + 1, chunks).sum(-1)
        record.append({"split": counted.tolist()})
    split.bucket_offsets_into(offsets, count, m, chunks, threads, stream)
    out = workspace.empty(count * n, np.int64 if indices else bits_dtype(dtype))
    split.split_into(xbits, pivots, offsets, out, count, n, m, chunks, dtype, job.to_key(),
                     indices, threads, stream)
    return out


# --- medians and quantiles -----------------------------------------------------------

@dispatch
@replayable
@honours_stream
def median(x, axis=None, out=None, overwrite_input=False, keepdims=False, *,
           strategy=None, stream=None):
    """The median along ``axis``, as ``np.median(x, axis, out, overwrite_input,
    keepdims)``.

    Result dtype NumPy's: float64 for bool and integers, the input's float dtype
    otherwise. Even counts give NumPy's ``mean`` of the middle two (summed in float32
    for float16 and float32, so two float32 values near the largest give inf, as
    NumPy). A slice holding a NaN gives NaN. No elements: ``np.mean``'s answer, as
    NumPy's: NaN with its "Mean of empty slice" and "invalid value" ``RuntimeWarning``s
    for each empty slice. Where NumPy's arithmetic meets an invalid
    operation or an overflow (the median of ``[-inf, inf]`` is NaN from ``-inf + inf``)
    it warns as NumPy does, under ``np.geterr()``: a ``RuntimeWarning``
    ("invalid value encountered in median", or "overflow ..."; NumPy's names the
    operation), nothing under ``np.errstate(invalid="ignore")``,
    ``FloatingPointError`` under ``"raise"``.

    Args:
        axis: ``None`` (every axis), an int, or a tuple of ints.
        out: an array of the result's shape (``same_kind`` casting, as numbakern's
            reductions).
        overwrite_input: accepted for NumPy's signature; ``x`` is never changed.
        keepdims: reduced axes kept with length 1.
        strategy: ``None`` (radix select for rows longer than a block's sort), a sort
            strategy (name or object: the sort path), ``"radix_select"`` or a
            ``RadixSelect``, ``"sort_slice"`` or a ``SortSlice``.
        stream: as the sorts'.

    Raises:
        TypeError: a dtype the sorts refuse; ``out`` of another library; a
            ``strategy`` that is neither a name nor a sort or select strategy object
            (a strategy of another family); ``axis`` not an int or tuple of ints;
            ``keepdims`` neither a bool nor an integer (NumPy takes any truthy
            value); a bad ``stream``.
        ValueError: a select strategy other than ``radix_select`` and
            ``sort_slice`` (name or object), an unknown name.
        numpy.exceptions.AxisError: ``axis`` out of range; ValueError: a repeated axis.

    Algorithm: the middle ranks found by radix select (``RadixSelect.kth_keys``:
    Alabi et al., "Fast k-selection algorithms for graphics processing units", 2012),
    or with a sort strategy a full sort of each slice (bitonic or Onesweep radix
    sort); then the middle elements read and averaged on the device.
    """
    return _order_stats("median", x, None, axis, out, keepdims, "linear", False,
                        strategy, stream)


@dispatch
@replayable
@honours_stream
def nanmedian(x, axis=None, out=None, overwrite_input=False, keepdims=False, *,
              strategy=None, stream=None):
    """The median of the elements that are not NaN, as ``np.nanmedian``. A slice of
    only NaN gives NaN with NumPy's "All-NaN slice encountered" ``RuntimeWarning``,
    one a slice as NumPy's; input of no elements, ``np.nanmean``'s answer, as NumPy's
    (NaN with "Mean of empty slice" for each empty slice). Integers and bool have no
    NaN: as :func:`median`. Arguments and errors as :func:`median`'s."""
    return _order_stats("nanmedian", x, None, axis, out, keepdims, "linear", True,
                        strategy, stream)


@dispatch
@replayable
@honours_stream
def quantile(x, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, strategy=None, stream=None):
    """Quantiles ``q`` along ``axis``, as ``np.quantile(x, q, axis, out,
    overwrite_input, method, keepdims)``.

    Args:
        q: a number or an array of numbers (at most 2-d) in [0, 1]. The result's shape
            is ``q``'s shape followed by the reduced shape.
        method: ``"linear"`` (NumPy's default, Hyndman and Fan's 7th), ``"lower"``,
            ``"higher"``, ``"nearest"``, ``"midpoint"``.
        axis, out, overwrite_input, keepdims, strategy, stream: as :func:`median`.

    Result dtype: NumPy's (NumPy's own rule is asked, on a two-element array of
    ``x``'s dtype): for ``linear``, float64 for integers, the input's float dtype with
    a Python float ``q`` and its promotion with an array ``q`` (float32 data with
    ``q=[0.5]`` gives float64); ``x``'s own dtype for the methods that read one
    element (and for an integer ``q``), big-endian for a big-endian NumPy ``x`` where
    NumPy keeps its byte order (array results of those methods). A slice holding a
    NaN gives NaN. Infinities
    interpolate as NumPy's ``_lerp`` (``quantile([inf, inf], 0.5)`` is NaN, from
    ``inf - inf``), with NumPy's floating-point warnings, as :func:`median`'s.

    Raises:
        ValueError: ``q`` outside [0, 1] (NaN included) or of more than 2 dims; an
            unknown ``method`` (the message lists the taken ones).
        IndexError: a reduced axis of length 0 (NumPy's error).
        TypeError: bool ``x`` with an interpolating method (NumPy's, which cannot
            subtract bools); ``q`` not a number; a dtype the sorts refuse.
        numpy.exceptions.AxisError: ``axis`` out of range.
        TypeError, ValueError: a bad ``strategy``, ``axis``, ``keepdims`` or
            ``stream``, as :func:`median`.

    Differences: integers are interpolated in float64 (NumPy subtracts them in their
    own width first, where int8's 100 - (-100) wraps); float16 is interpolated in
    float32 and rounded once (NumPy: in float16).
    """
    weak = type(q) in (int, float)
    qs = _quantiles(q, 1.0, "Quantiles must be in the range [0, 1]", stream)
    return _order_stats("quantile", x, (qs, weak), axis, out, keepdims, method, False,
                        strategy, stream)


@dispatch
@replayable
@honours_stream
def percentile(x, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, strategy=None, stream=None):
    """Percentiles ``q`` (in [0, 100]) along ``axis``, as ``np.percentile``: the
    :func:`quantile` of ``q / 100``. Arguments, dtypes and errors as
    :func:`quantile`'s ("Percentiles must be in the range [0, 100]")."""
    weak = type(q) in (int, float)
    qs = _quantiles(q, 100.0, "Percentiles must be in the range [0, 100]", stream)
    return _order_stats("percentile", x, (qs, weak), axis, out, keepdims, method, False,
                        strategy, stream)


@dispatch
@replayable
@honours_stream
def nanquantile(x, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, strategy=None, stream=None):
    """Quantiles of the elements that are not NaN, as ``np.nanquantile``; slices of
    only NaN, and input of no elements (``np.nanmean``'s answer, without ``q``'s
    dimensions, not :func:`quantile`'s IndexError), as :func:`nanmedian`'s. Arguments
    and other errors as :func:`quantile`'s."""
    weak = type(q) in (int, float)
    qs = _quantiles(q, 1.0, "Quantiles must be in the range [0, 1]", stream)
    return _order_stats("nanquantile", x, (qs, weak), axis, out, keepdims, method, True,
                        strategy, stream)


@dispatch
@replayable
@honours_stream
def nanpercentile(x, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, strategy=None, stream=None):
    """Percentiles of the elements that are not NaN, as ``np.nanpercentile``: the
    :func:`nanquantile` of ``q / 100``: its arguments and errors (``q`` in [0, 100])."""
    weak = type(q) in (int, float)
    qs = _quantiles(q, 100.0, "Percentiles must be in the range [0, 100]", stream)
    return _order_stats("nanpercentile", x, (qs, weak), axis, out, keepdims, method, True,
                        strategy, stream)


def _quantiles(q, scale: float, message: str, stream) -> np.ndarray:
    """``q`` on the host as NumPy reads it (``/ scale`` as ``np.true_divide`` does for
    percentiles), checked; a device ``q`` read after the work queued on the call's
    stream (which may be what wrote it)."""
    kind = kind_of(q)
    if kind != "numpy":
        q = host_words(device_view(q), resolve_stream(stream, kind))
    qs = np.asarray(q)
    if qs.dtype.kind not in "biuf" or qs.dtype.itemsize > 8:  # no kernel holds float128
        raise TypeError(f"q must be a number or an array of numbers, at most float64, got "
                        f"dtype {qs.dtype}")
    if scale != 1.0:
        qs = np.true_divide(qs, scale)
    if qs.ndim > 2:
        raise ValueError(f"q must be a scalar or 1d (at most 2-d), got {qs.ndim} dims")
    if qs.size and not (np.all(qs >= 0) and np.all(qs <= 1)):  # NaN fails both
        raise ValueError(message)
    return qs


def _order_stats(name, x, quantiles, axis, out, keepdims, method, skip_nan: bool,
                 strategy, stream):
    """Medians (``quantiles`` None) or the quantiles ``(qs, weak)`` of ``x`` along
    ``axis``: checks, the empty cases, then :func:`_sorted_slices` and the
    order-statistics kernel."""
    given = x.dtype if isinstance(x, np.ndarray) else None
    x = as_array_like(x)
    dtype = check_dtype(x.dtype)
    keepdims = check_keepdims(keepdims)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, _METHOD_NAMES))} "
                         f"(NumPy's other methods are not implemented), got {method!r}")
    shape = tuple(x.shape)
    axes = _axes(axis, len(shape))
    qs, weak = quantiles if quantiles is not None else (None, False)
    code = MEDIAN if qs is None else METHODS[method]
    if code == METHODS["linear"] and qs.dtype.kind in "biu":
        code = TAKE  # NumPy reads the element at an integer virtual index as it is
    n = math.prod(shape[a] for a in axes)
    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    if name in ("quantile", "percentile"):
        if n == 0:
            raise IndexError(f"{name}: the reduced axes hold no elements (NumPy: index -1 "
                             f"is out of bounds for axis 0 with size 0)")
    elif not math.prod(shape):
        return _mean_of_nothing(name, dtype, shape, axes, keepdims, workspace, out)
    result = _result_dtype(name, dtype, method, None if qs is None else (qs.dtype, weak))
    kept = result_shape(shape, axes, keepdims)
    full = kept if qs is None else tuple(qs.shape) + kept
    check_out(out, full, result, kind, name)
    m = math.prod(shape) // n
    nq = 1 if qs is None else qs.size
    skipping = skip_nan and dtype.kind == "f"
    if m * nq == 0:
        if m and skipping:  # no quantile to give, yet NumPy warns of all-NaN slices
            _order_stats(name, x, (np.zeros(1, qs.dtype), weak), axis, None, keepdims,
                         method, True, strategy, stream)
        return _in_given_order(deliver_host(workspace, np.empty(full, result), out),
                               name, given, shape, axes, keepdims, qs, weak, method, out)
    path, how = _order_path(strategy, n, nq)
    if path == "select":
        dst, counts, flags = _by_rank(x, kind, axes, m, n, dtype, qs, code, skipping, result,
                                      workspace, how)
    else:
        values = _sorted_slices(x, kind, axes, m, n, dtype, workspace, how)
        dst, counts, flags = _read(values, qs, code, m, n, skipping, result, workspace)
    delivered = deliver(workspace, dst, result, full, out)
    if keepdims and not shape and isinstance(delivered, np.generic):
        delivered = np.asarray(delivered)  # NumPy's: keepdims of a 0-d input is 0-d
    delivered = _in_given_order(delivered, name, given, shape, axes, keepdims, qs, weak,
                                method, out)
    if code in INTERPOLATING and dtype.kind == "f":  # checks: a replay reads them too
        _floating_point_errors(checked_words(flags, workspace.stream, _none_set), name)
    if skipping:  # as NumPy, once for each slice of nothing but NaN
        words = checked_words(counts, workspace.stream, _all_set)
        for _ in range(words.size - np.count_nonzero(words)):
            warn("All-NaN slice encountered", RuntimeWarning)
    return delivered


def _none_set(flags: np.ndarray) -> bool:
    return not flags.any()


def _all_set(counts: np.ndarray) -> bool:
    return bool(counts.all())


def _floating_point_errors(flags, name: str) -> None:
    """NumPy's floating-point error for the interpolation's ``flags`` (the kernel's
    invalid operation, ``inf - inf`` or ``inf * 0``, and overflow), handled as
    ``np.geterr()`` says, as NumPy's own arithmetic would: ``RuntimeWarning``
    (``"invalid value encountered in median"``) under the default ``"warn"``, nothing
    under ``"ignore"``, ``FloatingPointError`` under ``"raise"``."""
    for slot, kind, message in ((INVALID, "invalid", "invalid value"),
                                (OVERFLOW, "over", "overflow")):
        if flags[slot]:
            numpy_fp_error(kind, f"{message} encountered in {name}")


def _read(values, qs, code: int, m: int, n: int, skipping: bool, result, workspace):
    """``(results, counts, flags)``: the order-statistics kernel on ``m`` sorted
    slices of ``n`` (1-D device arrays: the results, in ``result``'s dtype or the
    arithmetic's, quantiles first; each slice's count of non-NaN elements when
    ``skipping``; the kernel's invalid and overflow flags)."""
    compute = np.dtype(np.float32) if result == np.float16 else result
    nq = 1 if qs is None else qs.size
    dst = workspace.empty(nq * m, result if code not in INTERPOLATING else compute)
    counts = workspace.empty(m if skipping else 1, np.int64)
    flags = workspace.from_host(np.zeros(2, np.int32))
    qd = workspace.from_host(np.zeros(1) if qs is None else
                             np.ascontiguousarray(qs, np.float64).reshape(-1))
    q_dtype = _index_dtype(qs)
    order_stats_into(values, qd, dst, counts, flags, m, n, code, skipping, compute,
                     workspace.stream, q_dtype)
    return dst, counts, flags


def _index_dtype(qs) -> str:
    """The float type NumPy computes the virtual indices of quantiles ``qs`` in: their
    own for float16 and float32, else float64 (integers of 0 or 1 are exact there)."""
    return qs.dtype.name if qs is not None and qs.dtype in (np.float16, np.float32) \
        else "float64"


def _axes(axis, ndim: int) -> tuple[int, ...]:
    """NumPy's reading of a median's ``axis``: None, an int or a sequence of ints; a
    0-d array takes only None."""
    if isinstance(axis, list):
        axis = tuple(axis)
    if ndim == 0 and axis is not None and not isinstance(axis, tuple):
        normalize_axis(axis, 0)  # raises NumPy's AxisError
    return normalize_axes(axis, ndim)


def _order_path(strategy, n: int, nq: int):
    """``("select", RadixSelect)`` or ``("sort", sort spec)``: how the order
    statistics are found. ``None``: radix select where a row is longer than a block's
    bitonic sort (a sort of a row that fits a block reads it once; radix select
    reads it a pass per digit) and for at most :data:`SELECT_MOST` of
    ``q``; otherwise as :func:`_strategy_path`."""
    path, how = _strategy_path(strategy)
    if path is None:
        if nq <= SELECT_MOST and \
                _strategies.resolve("sort", None, n=n).name != "bitonic":
            return "select", _strategies.resolve("select", "radix_select")
        return "sort", None
    return path, how


def _strategy_path(strategy):
    """A selection's ``strategy=`` read: ``(None, None)`` for ``None`` (the caller's
    default); ``("sort", spec)`` for a sort strategy (name or object); ``("select",
    RadixSelect)`` for ``"radix_select"`` or a ``RadixSelect``; ``("sort", its
    sort)`` for ``"sort_slice"`` or a ``SortSlice`` (``None`` if it names none).

    Raises:
        TypeError: neither a name nor a sort or select strategy object (as
            :func:`numbakern.strategies.resolve` refuses another family).
        ValueError: another select strategy (name or object), an unknown name.
    """
    if strategy is None:
        return None, None
    given, family = strategy, getattr(strategy, "family", None)
    if not isinstance(strategy, str) and family not in ("sort", "select"):
        other = f", a {family} strategy" if isinstance(family, str) else ""
        raise TypeError(f"strategy must be None, {_strategy_choices()}, got {given!r}{other}")
    if isinstance(strategy, str):
        if strategy in _strategies.available("sort"):
            family = "sort"
        elif strategy in _strategies.available("select"):
            strategy, family = _strategies.resolve("select", strategy), "select"
    if family == "sort":
        return "sort", strategy
    if family == "select" and strategy.name == "radix_select":
        return "select", strategy
    if family == "select" and strategy.name == "sort_slice":
        return "sort", getattr(strategy, "sorter", None)
    raise ValueError(f"strategy must be None, {_strategy_choices()}, got {given!r}")


def _strategy_choices() -> str:
    """The strategies a selection takes, for its error messages."""
    sorts = ", ".join(map(repr, _strategies.available("sort")))
    return (f"a sort strategy ({sorts} or an object) or the select strategies "
            "'radix_select' or 'sort_slice' (or such an object)")


def _slices(x, kind: str, axes, m: int, n: int):
    """The ``m`` slices of ``n`` elements along ``axes`` of ``x`` as the rows of a
    NumPy or CuPy array (the reduced axes moved last)."""
    arr, _ = as_layout_array(x, kind)
    ndim = arr.ndim
    if axes:
        arr = _xp(arr).moveaxis(arr, axes, tuple(range(ndim - len(axes), ndim)))
    return arr.reshape(m, n)


def _by_rank(x, kind: str, axes, m: int, n: int, dtype, qs, code: int, skipping: bool,
             result, workspace, finder, record=None):
    """``(results, counts, flags)`` as :func:`_read`'s, the order statistics found by
    radix select instead of a sort (``kernels/rank_stats.py``'s steps: the rows'
    NaN and zero counts, the ranks, ``finder.kth_keys`` of the lower ranks, the
    upper ranks next to them, the keys' values, the interpolation). ``record``: a list
    that gets the digit passes' facts (``numbakern explain``)."""
    bits = bits_dtype(dtype)
    stream = workspace.stream
    xbits = flat_device(_slices(x, kind, axes, m, n), workspace, bits)
    nq = 1 if qs is None else qs.size
    facts = zeros(workspace, FACTS * m, np.int64)
    if dtype.kind == "f":
        row_facts_into(xbits, facts, m, n, dtype, stream)
    qd = workspace.from_host(np.zeros(1) if qs is None else
                             np.ascontiguousarray(qs, np.float64).reshape(-1))
    q_dtype = _index_dtype(qs)
    selections = 2 * nq * m
    need = workspace.empty(selections, np.int64)
    done = workspace.empty(selections, np.int32)
    ranks_into(facts, qd, need, done, m, n, code, skipping, q_dtype, stream)
    keys, equal = finder.kth_keys(SelectJob(xbits, None, None, selections, n, 1, dtype,
                                            False, False, workspace, record), 2 * nq, need,
                                  done)
    next_keys_into(xbits, keys, done, need, equal, m, n, nq, dtype, stream)
    picks = workspace.empty(selections + 1, bits)
    picks_into(keys, done, need, equal, facts, picks, m, nq, dtype, stream)
    compute = np.dtype(np.float32) if result == np.float16 else result
    dst = workspace.empty(nq * m, result if code not in INTERPOLATING else compute)
    counts = workspace.empty(m if skipping else 1, np.int64)
    flags = workspace.from_host(np.zeros(2, np.int32))
    picked_stats_into(view_as(picks, dtype), facts, qd, dst, counts, flags, m, n, code,
                      skipping, compute, stream, q_dtype)
    return dst, counts, flags


def _sorted_slices(x, kind: str, axes, m: int, n: int, dtype, workspace, strategy):
    """The ``m`` slices of ``n`` elements along ``axes`` of ``x``, each sorted (NaN
    last), one after another in a 1-D device array of ``dtype``: the order
    statistics' sort path."""
    rows = _slices(x, kind, axes, m, n)
    sorter = _strategies.resolve("sort", strategy, n=n)
    return view_as(sort_rows(rows, dtype, False, False, sorter, workspace), dtype)


def _xp(arr):
    if isinstance(arr, np.ndarray):
        return np
    import cupy

    return cupy


def _mean_of_nothing(name, dtype: np.dtype, shape: tuple, axes: tuple, keepdims: bool,
                     workspace, out):
    """NumPy's answer for input of no elements, which it takes from ``np.mean``
    (``median``) or ``np.nanmean`` (the NaN-skipping forms, without ``q``'s
    dimensions): NaN of the mean's dtype where a slice is empty, with its warnings
    ("Mean of empty slice", then the division's "invalid value"); computed by NumPy
    on an empty array of ``x``'s shape and dtype, as there is nothing to read."""
    with numpys_words():
        if name == "median":  # np.median's keepdims: the axes put back afterwards
            value = np.asarray(np.mean(np.empty(shape, dtype), axis=axes))
            if keepdims:
                value = value.reshape(result_shape(shape, axes, True))
        else:
            value = np.asarray(np.nanmean(np.empty(shape, dtype), axis=axes,
                                          keepdims=keepdims))
    check_out(out, value.shape, value.dtype, workspace.kind, name)
    return deliver_host(workspace, value, out)


def _in_given_order(delivered, name: str, given, shape: tuple, axes: tuple,
                    keepdims: bool, qs, weak: bool, method: str, out):
    """A NumPy result of a NumPy ``x`` of non-native byte order (``given``) in the
    byte order NumPy's own would have (:func:`_numpy_order`); any other as it is."""
    full = isinstance(delivered, np.ndarray) and delivered.ndim
    if given is None or given.isnative or out is not None or not full:
        return delivered
    return delivered.astype(_numpy_order(name, given, len(shape), axes, keepdims, qs, weak,
                                         method), copy=False)


def _numpy_order(name: str, given: np.dtype, ndim: int, axes: tuple, keepdims: bool,
                 qs, weak: bool, method: str) -> np.dtype:
    """The result dtype NumPy gives an array of non-native byte order ``given``,
    asked of NumPy on two elements along each of its ``ndim`` axes: the byte order
    survives where NumPy takes elements as they are (the methods that read one, an
    integer ``q``), except where its NaN-skipping forms build the result afresh."""
    sample = np.zeros((2,) * ndim, given)
    args = ()
    kwargs = {"axis": axes, "keepdims": keepdims}
    if qs is not None:
        args = (qs.dtype.type(0).item() if weak else np.zeros(qs.shape, qs.dtype),)
        kwargs["method"] = method
    with np.errstate(all="ignore"):  # thread-safe, unlike warnings.catch_warnings
        return np.asarray(getattr(np, name)(sample, *args, **kwargs)).dtype


@functools.lru_cache(maxsize=256)
def _result_dtype(name: str, dtype: np.dtype, method: str, q) -> np.dtype:
    """NumPy's result dtype for function ``name``, asked of NumPy on two elements of
    ``dtype`` (its rules
    depend on ``q``'s dtype, on whether ``q`` was a Python number, and on the method's
    path: an integer index reads the element as it is)."""
    sample = np.zeros(2, dtype)
    with np.errstate(all="ignore"):  # thread-safe, unlike warnings.catch_warnings
        if q is None:
            return np.dtype(np.median(sample).dtype)
        qdtype, weak = q
        qsample = qdtype.type(0).item() if weak else np.zeros(1, qdtype)
        # nanquantile's rule differs: float32 data with q=[0.5] stays float32 there
        fn = np.nanquantile if name.startswith("nan") else np.quantile
        try:
            return np.dtype(fn(sample, qsample, method=method).dtype)
        except TypeError:
            raise TypeError(f"{name}: x of dtype {dtype} cannot be interpolated by method "
                            f"{method!r} (NumPy cannot subtract bools); use method "
                            f"'lower', 'higher' or 'nearest', or x as floats "
                            f"(x.astype(float); a tensor: x.double())") from None


__all__ = ["argpartition", "median", "nanmedian", "nanpercentile", "nanquantile",
           "partition", "percentile", "quantile"]
