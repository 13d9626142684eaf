"""Histograms: ``histogram`` (NumPy's), ``bincount`` (NumPy's) and ``histogram_counts``.

All three count the elements of the flattened input (any shape, any order: counting
does not depend on it) into int64 counters on the device (``histogram``'s and
``bincount``'s ``weights=`` sum instead, through a sort; ``density=`` divides the
counts), with a histogram strategy
(``strategy=``: ``"global_atomic"``, ``"shared_privatized"``, ``"warp_privatized"`` or
a strategy object; default: ``shared_privatized`` when its counters fit in shared
memory, see ``numbakern.strategies.resolve_histogram``). Inputs: NumPy arrays (or
anything ``np.asarray`` takes), CuPy arrays, or any ``__cuda_array_interface__``
object; results NumPy for NumPy input, CuPy for CuPy input, a Numba device array for
other device input.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from numbakern.api._dispatch import dispatch
from numbakern.api._interop import numpy_bfloat16

from numbakern import strategies as _strategies
from numbakern.core.arrays import (BFloat16Input, CopyWarning, Workspace, as_array_like,
                                   as_layout_array, flat_device, honours_stream, host_array,
                                   kind_of, resolve_stream, to_user, user_array)
from numbakern.core.bins import (TABLE_ITEMSIZE, BinRule, EdgeRule, edges_of, int_binner,
                                 table_binner)
from numbakern.core.deliver import deliver_host
from numbakern.core.jobs import HistogramJob
from numbakern.kernels.counting import build_bin_index_kernel
from numbakern.kernels.elementwise import THREADS, gather_into, grid_for, zeros
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.launch import launch
from numbakern.runtime.stacklevel import numpys_words, warn
from numbakern.runtime.views import device_view, host_copy, host_words


@dispatch
@honours_stream
def histogram_counts(x, num_bins, *, strategy=None, stream=None):
    """Count the integer values of ``x`` in ``[0, num_bins)``: bin ``v`` counts the
    elements equal to ``v``.

    Args:
        x: bool or integer values, any shape (flattened).
        num_bins: a positive int.

    Returns:
        int64 counts of shape ``(num_bins,)``. Values outside ``[0, num_bins)`` are
        not counted (unlike :func:`bincount`, which raises on negatives).

    Raises:
        TypeError: a float (or other non-integer) dtype; a non-int ``num_bins``; a
            ``strategy`` that is neither a name nor a histogram strategy object.
        ValueError: ``num_bins < 1``; more ``num_bins`` int64 counts than an array
            holds (2**60 - 1); an unknown ``strategy`` name; a strategy whose counters do
            not fit in shared memory for ``num_bins`` bins.
    """
    x = _empty_list_as_int(x)
    _check_int_dtype(x.dtype, "histogram_counts")
    bins = _check_allocatable(_positive_int(num_bins, "histogram_counts: num_bins"), "num_bins")
    return _count(x, bins, int_binner(np.dtype(x.dtype), bins), None, strategy, stream)


#: The most int64 counts an array can hold (NumPy's limit: bytes within an intp).
_MOST_COUNTS = np.iinfo(np.intp).max // 8


@dispatch
@honours_stream
def bincount(x, weights=None, minlength=0, *, strategy=None, stream=None):
    """Occurrences of each value of a 1-D array of non-negative ints, as
    ``np.bincount(x, weights, minlength)``; with ``weights``, each bin's sum of the
    weights of its values.

    Weighted sums are deterministic, built from three of numbakern's own passes: the
    values sorted stably with their positions (``argsort``), the weights gathered into
    that order as float64, then one segmented sum a bin (``segmented_reduce``) over
    the offsets the counts give (the counting by ``strategy``). Within a bin the
    weights add in a tree, not in NumPy's order one after another: float results
    differ from NumPy's in the last bits, and by more where large values cancel
    (``[1e16, 1, -1e16, 1]`` sums to 0 here, 1 in NumPy), as numbakern's ``sum``'s.
    An empty ``x`` ignores ``weights``, as NumPy's.

    Args:
        x: 1-D bool or integer array, values >= 0.
        weights: None, or real numbers (bool, integers, floats) of ``x``'s shape, on
            the host or on ``x``'s device.
        minlength: the least number of bins.
        strategy, stream: the counting's histogram strategy; the stream.

    Returns:
        int64 counts (float64 sums with ``weights``) of length ``max(x.max() + 1,
        minlength)`` (``minlength`` int64 zeros for an empty ``x``, with weights too,
        as NumPy's), in ``x``'s array type.

    Raises:
        TypeError: a non-integer dtype (bool is taken, as NumPy takes it; an empty
            list is taken as int64, as NumPy takes it); ``weights`` that are not real
            numbers; a ``minlength`` that is not an int (a bool included); a
            ``strategy`` that is neither a name nor a histogram strategy object.
        ValueError: ``x`` not 1-D, a negative value, a value of 2**60 - 1 or more
            (more counts than an array holds), ``weights`` not of ``x``'s shape, a
            negative ``minlength``, a ``minlength`` of 2**60 or more, an unknown
            ``strategy`` name (checked even when ``x`` is empty); a strategy whose
            counters do not fit in shared memory for that many bins.
    """
    from numbakern.api.reductions import host_scalar, max as _max, min as _min

    x = _empty_list_as_int(x)
    if x.ndim != 1:  # before the dtype, as NumPy's ("object too deep" for any 2-D x)
        raise ValueError(f"bincount: x must be 1-D, got shape {tuple(x.shape)}")
    _check_int_dtype(x.dtype, "bincount")
    minlength = _int(minlength, "bincount: minlength")
    if minlength < 0:
        raise ValueError("'minlength' must not be negative")
    _check_allocatable(minlength, "minlength")
    _strategies.resolve("histogram", strategy, bins=max(minlength, 1))  # refused for no x too
    w = None if weights is None or not x.size else _weights_of(weights, x, "bincount")
    bins = minlength
    if x.size:
        if np.dtype(x.dtype).kind == "i" and host_scalar(_min(x, stream=stream), stream) < 0:
            raise ValueError("'x' argument must have no negative elements")
        bins = bincount_length(int(host_scalar(_max(x, stream=stream), stream)), bins)
    if not x.size:  # int64 zeros, weights or not, as NumPy's
        return _as_kind(np.zeros(bins, np.int64), kind_of(x))
    counts = _count(x, bins, int_binner(np.dtype(x.dtype), bins), None, strategy, stream)
    return counts if w is None else _weighted_sums(x, w, counts, stream)


#: NumPy's words for weights of another shape than x's
_NUMPYS_SHAPE_WORDS = {"bincount": "The weights and list don't have the same length.",
                       "histogram": "weights should have the same shape as a."}


def bincount_length(largest: int, minlength: int) -> int:
    """bincount's result length for ``x`` whose largest value is ``largest``; a
    ValueError where it is past the largest array there can be."""
    if largest >= _MOST_COUNTS:
        raise ValueError(f"x holds {largest}: bincount would need {largest + 1} int64 "
                         f"counts, past the largest array there can be ({_MOST_COUNTS})")
    return max(minlength, largest + 1)


def _weights_of(weights, x, name: str):
    """``weights`` checked as NumPy's ``bincount`` and ``histogram`` (``name``) take
    them: real numbers of ``x``'s shape."""
    w = as_array_like(weights, "weights")
    if np.dtype(w.dtype).kind not in "biuf" or np.dtype(w.dtype).itemsize > 8:
        raise TypeError(f"{name}: weights must hold real numbers (bool, integers or "
                        f"floats up to float64), got dtype {np.dtype(w.dtype)}")
    if tuple(w.shape) != tuple(x.shape):
        raise ValueError(f"{name}: weights of shape {tuple(w.shape)} must have x's shape "
                         f"{tuple(x.shape)} (NumPy: {_NUMPYS_SHAPE_WORDS[name]})")
    return w


def weights_accumulator(dtype) -> np.dtype:
    """The dtype a histogram sums each bin's weights of ``dtype`` in: int64 or uint64
    for integers (exact, wrapping as NumPy's running sums of them do), float64 for
    floats and bools."""
    kind = np.dtype(dtype).kind
    return np.dtype(np.int64 if kind == "i" else np.uint64 if kind == "u" else np.float64)


def _weighted_sums(x, w, counts, stream, acc=np.float64):
    """Each bin's sum of the weights of its values, in ``acc``: the positions of ``x``
    sorted stably, the weights gathered into that order, then a segmented sum over
    the offsets that the ``counts`` (``x``'s kind) give."""
    from numbakern.api.reductions import _c_order
    from numbakern.api.scans import cumulative_sum
    from numbakern.api.segments import segmented_reduce
    from numbakern.api.sort import argsort

    kind = kind_of(x)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    order = _c_order(as_array_like(argsort(x, stream=stream)), workspace)
    gathered = workspace.empty(x.shape[0], acc)
    gather_into(_c_order(w, workspace), order, gathered, workspace.stream)
    offsets = cumulative_sum(counts, include_initial=True, stream=stream)
    sums = segmented_reduce(user_array(gathered), offsets, stream=workspace.stream)
    return sums.copy_to_host(stream=workspace.stream) if kind == "numpy" else sums


@dispatch
@honours_stream
def histogram(x, bins=10, range=None, density=None, weights=None, *, strategy=None,
              stream=None):
    """``bins`` equal-width bins over ``range``, or the bins between given edges, as
    ``np.histogram(x, bins, range, density=density, weights=weights)``.

    Args:
        x: bool, integer or float values (bfloat16 too: each bit pattern binned as
            NumPy's bfloat16 arithmetic bins it, by a table made with ``ml_dtypes``),
            any shape (flattened).
        bins: a positive int (the number of equal-width bins), or a 1-D array of
            non-decreasing edges (a sequence, NumPy array, tensor or device array):
            bin ``i`` holds ``edges[i] <= v < edges[i+1]``, the last bin also ``v ==
            edges[-1]``, each value compared with the edges in their common dtype as
            NumPy compares them (:class:`numbakern.core.bins.EdgeRule`: a binary
            search per value); ``range`` is then ignored, as NumPy ignores it.
        range: ``(lo, hi)``, or ``None`` for ``(x.min(), x.max())``; a zero-width
            range is widened by 0.5 either side, as NumPy does.
        density: if true, each bin's count (or weights' sum) divided by its width and
            by the total, as NumPy's (``n / np.diff(edges) / n.sum()``, on the host
            from the ``bins`` counts copied back: NaN where the total is 0, with
            NumPy's warning).
        weights: None, or real numbers (bool, integers, floats) of ``x``'s shape, on
            the host or on ``x``'s device: each bin sums its values' weights instead
            of counting them. As :func:`bincount`'s weights: every element's bin
            written, then a stable sort of those bins, the weights gathered into its
            order and one sum a bin, in a tree: float64 for float and bool weights
            (NumPy adds in another order: float results differ in the last bits,
            more where large weights cancel; between given edges NumPy subtracts
            running sums in the weights' own dtype, which can lose a small bin's
            weight next to large ones), int64 or uint64 for integer weights (exact,
            wrapping as NumPy's running sums); then cast to the weights' dtype as
            NumPy's (a weighted histogram costs about an ``argsort`` of ``x``; for
            NumPy input the bins make a round trip to the host as well). Bool
            weights with edges are refused, as NumPy refuses them.

    Returns:
        ``(hist, edges)``: ``hist`` of shape ``(bins,)`` (``(len(edges) - 1,)``
        for edges given): int64 counts; with
        ``weights``, their sums in the weights' dtype (NumPy's rule: float16 weights
        give float16 sums); with ``density``, float64 densities. ``edges``: the
        ``bins + 1`` edges NumPy computes (its dtype: the input's float type, float64
        for integers), or the edges given, as an array of the input's kind. Bin ``i``
        holds ``edges[i] <= v < edges[i+1]``, the last bin also ``v == edges[-1]``;
        values outside the range, and NaN, are not counted.
        Each value lands in NumPy's bin exactly (:class:`BinRule`): kept when
        ``lo <= v <= hi`` compared as NumPy compares (an int range against integers
        exactly), the bin NumPy's estimate ``int((v - lo) / (hi - lo) * bins)`` with
        its operands' dtypes (the width from the range as given), corrected against
        the edges as NumPy corrects it. For float32 and float64 input whose bins are
        wide enough for ``BinRule.scale_error`` to prove it the same bin, the device
        multiplies by ``bins / (hi - lo)`` in the input's dtype instead, and reads
        the edges only for values within rounding of one. Inputs of one or two bytes
        use a table of every value's bin made by that rule on the host. Where
        NumPy's own arithmetic overflows and it raises IndexError (``v - lo`` past
        float16's or float32's largest value), the estimate is taken in float64
        instead.

    Raises:
        TypeError: ``bins`` a string (NumPy's estimators by name are not supported)
            or an array of other than real numbers of at most 8 bytes; uint16 edges
            or weights of bfloat16 ``x``; bool weights with edges (an empty ``x``
            gives bool zeros); a bad dtype of ``x`` or ``weights`` (complex weights
            included); a ``range`` end that is not a real number NumPy holds
            (``None``, a string, an int past 64 bits: NumPy raises ``TypeError`` for
            them too; a 0-d array or tensor is its value), or a lone number as
            ``range``; a ``strategy`` that is neither a name nor a histogram
            strategy object.
        ValueError: ``weights`` not of ``x``'s shape; ``bins < 1``; edges not 1-D,
            decreasing, or holding NaN (NumPy's counts between them are meaningless,
            some negative); more ``bins`` int64 counts than an array holds (2**60 -
            1); ``range`` an iterable of other
            than two (a string too), with ``lo > hi`` or not finite (NumPy's
            messages); an automatic range that is not finite (NaN or inf in ``x``); an
            unknown ``strategy`` name, or one whose counters do not fit in shared
            memory.
    """
    x = as_array_like(x)
    # bfloat16 (its bits, from numbakern/api/_interop.py): binned by a table of every
    # bit pattern's bin in NumPy's bfloat16 arithmetic, the edges bfloat16's
    bits = x.bits if isinstance(x, BFloat16Input) else None
    dtype = np.dtype(x.dtype)
    if dtype.kind not in "biuf" or dtype.itemsize > 8:  # float128: no kernel holds it
        raise TypeError(f"histogram: x must have a bool, integer or float dtype of at most "
                        f"8 bytes, got {dtype}")
    if dtype.kind == "b":  # NumPy's words
        warn("Converting input from bool to <class 'numpy.uint8'> for compatibility.")
    w = None if weights is None else _weights_of(weights, x, "histogram")
    if bits is not None and w is not None and np.dtype(w.dtype) == np.uint16:
        raise TypeError(_UINT16_OF_BFLOAT16.format("weights"))
    if isinstance(bins, str):
        raise TypeError("histogram: bins must be an int or an array of edges (NumPy's "
                        f"estimators by name are not supported), got {bins!r}")
    check_not_ragged(bins)
    value_dtype = values_dtype(dtype) if bits is None else \
        numpy_bfloat16("histogram of bfloat16")
    kind = kind_of(x)
    if np.ndim(bins) != 0:  # NumPy ignores range= then
        rule = EdgeRule(value_dtype, given_edges(bins, w, stream))
        if bits is not None and rule.edges.dtype == np.uint16:
            raise TypeError(_UINT16_OF_BFLOAT16.format("bins"))
        _strategies.resolve("histogram", strategy, bins=max(rule.nbins, 1))
        if rule.nbins < 1:  # one edge or none: no bins, NumPy's empty result
            hist = np.histogram(np.empty(0), rule.edges, density=density, weights=None
                                if w is None else np.empty(0, w.dtype))[0]
            return _as_kind(hist, kind), _as_kind(rule.edges, kind)
    else:
        if type(bins) is bool:  # NumPy's operator.index reads True as 1 bin (np.True_: no)
            bins = int(bins)
        nbins = _check_allocatable(_positive_int(bins, "histogram: bins"), "bins")
        if range is not None:
            range = _range_pair(range)
        _strategies.resolve("histogram", strategy, bins=nbins)  # refused for an empty x too
        if range is None and x.size:
            range = _automatic_range(x, value_dtype, stream)
        if range is None:  # an empty x: NumPy's range (0, 1)
            range = (0, 1)
        rule = BinRule(value_dtype, nbins, range)
    hist = _binned(x if bits is None else bits, rule, w, None if w is None else w.dtype,
                   strategy, stream)
    if density:
        hist = _density(hist, rule.edges, kind, stream)
    elif np.ndim(bins) == 0 and isinstance(weights, np.ndarray) and isinstance(hist, np.ndarray):
        # NumPy sums equal bins' weights in their own dtype, byte order and all
        hist = hist.astype(weights.dtype, copy=False)
    # NumPy's edges of bfloat16 x are bfloat16 (a range of floats makes them wider):
    # those go back as their bits, which the interop reads as bfloat16
    edges = rule.edges.view(np.uint16) if rule.edges.dtype.name == "bfloat16" else rule.edges
    return hist, _as_kind(edges, kind)


# a uint16 result of a call on bfloat16 x goes back as bfloat16 bits (the interop's)
_UINT16_OF_BFLOAT16 = ("histogram: uint16 {} of bfloat16 x are not supported (the result "
                       "would read as bfloat16); pass another dtype")
# NumPy sums the weights between given edges as running sums in their own dtype: for
# bools it cannot ("Cannot cast ufunc 'add' output from dtype('int64') to dtype('bool')")
_BOOL_WEIGHTS_BETWEEN_EDGES = ("histogram: bool weights with bins as an array of edges "
                               "(NumPy cannot add them there); pass them as integers")


def check_not_ragged(bins) -> None:
    """``ValueError`` naming ``bins`` for a ragged list (NumPy's own words after it)."""
    if isinstance(bins, (list, tuple)):
        host_array(bins, "histogram: bins")


def host_edges(bins, stream):
    """``bins`` given as an array, on the host: a device array's (or tensor's) few
    edges read back in C order, whatever its strides; ``ml_dtypes`` bfloat16 edges
    (which the NumPy form's interop has already widened) as float32, told by a
    ``CopyWarning`` as the interop tells it."""
    if not hasattr(bins, "__cuda_array_interface__"):
        edges = np.asarray(bins)
        if edges.dtype.name != "bfloat16":
            return edges
        warn("histogram: bins is bfloat16, which the kernels read through a float32 copy "
             "(twice its size)", CopyWarning)
        return edges.astype(np.float32)
    from numbakern.api.reductions import _c_order

    edges = as_array_like(bins, "bins")
    kind = kind_of(edges)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    return host_copy(_c_order(edges, workspace), workspace.stream).reshape(
        tuple(edges.shape))


def given_edges(bins, w, stream) -> np.ndarray:
    """``bins`` given as an array: its edges on the host, checked
    (:func:`~numbakern.core.bins.edges_of`), and the weights ``w`` (or None) they
    take: bool ones refused where there are any, as NumPy refuses them (``TypeError``;
    it returns bool zeros for none)."""
    edges = edges_of(host_edges(bins, stream))
    if w is not None and w.size and np.dtype(w.dtype).kind == "b":
        raise TypeError(_BOOL_WEIGHTS_BETWEEN_EDGES)
    return edges


def _automatic_range(x, value_dtype: np.dtype, stream) -> tuple:
    """NumPy's range of a non-empty ``x`` whose ``range`` is None: its least and
    greatest values in ``value_dtype``, refused where either is not finite."""
    from numbakern.api.reductions import host_scalar, max as _max, min as _min

    def extreme(f):
        value = host_scalar(f(x, stream=stream), stream)
        # a device bfloat16 input's extremes come back as their bits (the interop
        # layer's bfloat16 result), a host one's as the float32 they stand for
        if isinstance(x, BFloat16Input) and value.dtype == np.uint16:
            return value.view(value_dtype)[()]
        return value.astype(value_dtype)[()]

    return finite_range(extreme(_min), extreme(_max))


def finite_range(lo, hi) -> tuple:
    """An automatic range's ends ``(lo, hi)``, refused (NumPy's ``ValueError``) where
    either is not finite (NaN or inf in ``x``)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"autodetected range of [{lo}, {hi}] is not finite")
    return lo, hi


def weighted_bins(x, weights, bins, range_, strategy=None, stream=None):
    """Each bin's sum of the ``weights`` (checked, of ``x``'s shape) of its values, in
    :func:`weights_accumulator`'s dtype: ``bins`` equal-width bins over ``range_`` (a
    pair, not None), or ``bins`` the checked array of edges (``range_`` unread). A
    Dask chunk's part of a weighted histogram, before the cast to the weights' dtype.
    A bfloat16 (``ml_dtypes``) ``x`` is binned by its bits, as :func:`histogram` bins
    it."""
    dtype = values_dtype(x.dtype)
    if dtype.name == "bfloat16":
        x = x.view(np.uint16)
    rule = BinRule(dtype, bins, range_) if np.ndim(bins) == 0 else EdgeRule(dtype, bins)
    return _binned(x, rule, weights, weights_accumulator(weights.dtype), strategy, stream)


def values_dtype(dtype) -> np.dtype:
    """The dtype NumPy's histogram bins ``x`` of ``dtype`` as: uint8 for bool (NumPy
    converts it, with its warning), else ``dtype``."""
    dtype = np.dtype(dtype)
    return np.dtype(np.uint8) if dtype.kind == "b" else dtype


def _binned(x, rule: BinRule | EdgeRule, w, sums_dtype, strategy, stream):
    """The ``(rule.nbins,)`` histogram of ``x`` by ``rule``: int64 counts, or with
    weights ``w`` their sums in ``sums_dtype``."""
    dtype = np.dtype(x.dtype)
    if x.size == 0 or rule.nbins < 1:  # (one edge or none: no bins)
        return _as_kind(np.zeros(max(rule.nbins, 0), np.int64 if w is None else sums_dtype),
                        kind_of(x))
    binner, aux_host = table_binner(dtype, rule) if dtype.itemsize <= TABLE_ITEMSIZE \
        else rule.device(dtype)
    if w is None:
        return _count(x, rule.nbins, binner, aux_host, strategy, stream)
    return _weighted_bins(x, w, rule.nbins, binner, aux_host, sums_dtype, strategy, stream)


def _weighted_bins(x, w, nbins: int, binner, aux_host, sums_dtype, strategy, stream):
    """Each bin's sum of the weights ``w`` of its values, in ``sums_dtype``: every
    element's bin written (``nbins`` for one not counted, which the counts leave out
    and the stable sort puts last, past every bin's segment), then bincount's sums,
    in :func:`weights_accumulator`'s dtype, cast."""
    kind = kind_of(x)
    bin_of, bin_key, read_dtype = binner
    arr, wrap = as_layout_array(x, kind)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    n = math.prod(arr.shape)
    index_dtype = np.dtype(np.int32 if nbins < np.iinfo(np.int32).max else np.int64)
    index = workspace.empty(n, index_dtype)
    kernel = cached(("bin_index", bin_key, device_key()),
                    lambda: build_bin_index_kernel(bin_of))
    aux = workspace.from_host(np.zeros(1, np.int64) if aux_host is None else aux_host)
    launch(kernel, grid_for(n), THREADS, workspace.stream,
           flat_device(arr, workspace, read_dtype), n, aux, index, nbins)
    index = wrap(to_user(index, workspace, (n,)))
    counts = _count(index, nbins, int_binner(index_dtype, nbins), None, strategy, stream)
    acc = weights_accumulator(w.dtype)
    sums = _weighted_sums(index, w, counts, stream, acc)
    if np.dtype(sums_dtype) == acc:
        return sums
    if kind == "numpy":
        with numpys_words():  # a cast out of range, as NumPy's histogram warns
            return sums.astype(sums_dtype)
    return wrap(to_user(workspace.cast(sums, sums_dtype), workspace, (nbins,)))


def _density(hist, edges: np.ndarray, kind: str, stream):
    """NumPy's density of a histogram's ``(bins,)`` counts or sums: computed by NumPy
    on the host from ``hist`` copied back (its words, NaN for a zero total, told at
    the user's call), delivered in ``kind``."""
    if kind != "numpy":
        hist = host_words(device_view(hist), resolve_stream(stream, kind))
    with numpys_words():
        density = hist / np.diff(edges).astype(float) / hist.sum()
    return _as_kind(density, kind)


# --- the common path ---------------------------------------------------------------------


def _count(x, bins: int, binner, aux_host, strategy, stream):
    """Count ``x`` into ``bins`` counters; ``binner`` = (bin_of, bin_key, read_dtype)."""
    kind = kind_of(x)
    bin_of, bin_key, read_dtype = binner
    arr, wrap = as_layout_array(x, kind)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    chosen = _strategies.resolve("histogram", strategy, bins=bins)
    chosen.check(bins)
    out = zeros(workspace, bins, np.int64)
    n = math.prod(arr.shape)
    if n:
        xv = flat_device(arr, workspace, read_dtype)
        aux_host = np.zeros(1, np.int64) if aux_host is None else aux_host
        aux = workspace.from_host(aux_host)
        chosen.histogram(HistogramJob(xv, n, bins, bin_of, bin_key, aux, out, workspace))
    return wrap(to_user(out, workspace, (bins,)))


def _empty_list_as_int(x):
    """``as_array_like(x)``, an empty list or tuple as int64 (NumPy makes it float64,
    and ``np.bincount([])`` takes it)."""
    if isinstance(x, (list, tuple)) and np.size(x) == 0:
        return np.zeros(np.shape(x), np.int64)
    return as_array_like(x)


def _check_int_dtype(dtype, name: str) -> None:
    if np.dtype(dtype).kind not in "biu":
        raise TypeError(f"{name}: x must have a bool or integer dtype, got {np.dtype(dtype)}"
                        + (" (use numbakern.histogram for floats)"
                           if np.dtype(dtype).kind == "f" else ""))


def _int(value, name: str) -> int:
    """``value`` as an int (anything with ``__index__`` but a bool), else TypeError."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r}") from None


def _positive_int(value, name: str) -> int:
    value = _int(value, name)
    if value < 1:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _range_pair(range_) -> tuple:
    """``range=`` checked: a pair of real numbers, a 0-d array or tensor among them
    taken as the NumPy scalar it holds (NumPy's own edges cannot read a tensor).
    Raises TypeError for a lone number (NumPy cannot unpack one) or an end that is not
    a real number, ValueError for an iterable of another length (a string too, as
    NumPy's unpacking)."""
    message = f"histogram: range must be None or a (lo, hi) pair, got {range_!r}"
    try:
        ends = tuple(range_)  # NumPy unpacks it: any iterable of two
    except TypeError:
        raise TypeError(message) from None
    if len(ends) != 2:
        raise ValueError(message)
    ends = tuple(_real(end) for end in ends)
    if None in ends:
        raise TypeError("histogram: range must be a (lo, hi) pair of real numbers (ints "
                        f"and floats of at most 64 bits), got {range_!r}")
    return ends


def _real(value):
    """``value`` where it is a number NumPy holds as bool, integer or float (bfloat16
    too): Python and NumPy numbers as they are (their types decide the edges' dtype), a
    0-d array's or tensor's as its NumPy scalar; None where it is not one (None, a
    string, an int past 64 bits, which NumPy holds as an object, a float128, which no
    kernel holds)."""
    try:
        held = np.asarray(value)
    except (TypeError, ValueError):  # a device scalar that refuses the host
        return None
    if held.ndim != 0 or held.dtype.itemsize > 8 or not (
            held.dtype.kind in "biuf" or held.dtype.name == "bfloat16"):
        return None
    return value if isinstance(value, (int, float, np.generic)) else held[()]


def _check_allocatable(count: int, name: str) -> int:
    """``count``, checked before anything is allocated: NumPy's "array is too big"
    would name no argument. (A count within NumPy's limit but past the device's
    memory fails at the allocation, as CuPy's and torch's do.)"""
    if count > _MOST_COUNTS:
        raise ValueError(f"{name}={count} asks for {count} int64 counts, past the largest "
                         f"array there can be ({_MOST_COUNTS})")
    return count


def _as_kind(host: np.ndarray, kind: str):
    """A small host array as the caller's kind."""
    return deliver_host(Workspace(kind, None), host, None)


__all__ = ["bincount", "histogram", "histogram_counts"]
