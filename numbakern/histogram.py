"""Histograms: ``histogram`` (NumPy's), ``bincount`` (NumPy's) and ``histogram_counts``.

All three count the elements of the flattened input (any shape, any order: counting
does not depend on it) into int64 counters on the device, with a histogram strategy
(``strategy=``: ``"global_atomic"``, ``"shared_privatized"``, ``"warp_privatized"`` or
a strategy object; default: ``shared_privatized`` when its counters fit in shared
memory, see ``numbakern.strategies.resolve_histogram``). Inputs: NumPy arrays (or
anything ``np.asarray`` takes), CuPy arrays, or any ``__cuda_array_interface__``
object; results NumPy for NumPy input, CuPy for CuPy input.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numba import cuda, from_dtype, int64, uint64

from . import kernels
from . import strategies as _strategies
from .arrays import SIMULATOR, Workspace, as_array_like, kind_of, honours_stream, resolve_stream
from .counting import HistogramJob
from .elementwise import zeros
from .sort_keys import as_layout_array, bits_dtype, flat_device, to_user

#: inputs of at most this many bytes an element are binned through a lookup table of
#: all their 2**(8 * itemsize) values, computed on the host by NumPy's own rule
TABLE_ITEMSIZE = 2


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
        ValueError: ``num_bins < 1``; an unknown ``strategy`` name; a strategy whose
            counters do not fit in shared memory for ``num_bins`` bins.
    """
    x = as_array_like(x)
    _check_int_dtype(x.dtype, "histogram_counts")
    bins = _positive_int(num_bins, "num_bins")
    return _count(x, bins, _int_binner(np.dtype(x.dtype), bins), None, strategy, stream)


@honours_stream
def bincount(x, minlength=0, *, strategy=None, stream=None):
    """Occurrences of each value of a 1-D array of non-negative ints, as
    ``np.bincount(x, minlength=minlength)`` (no ``weights``).

    Returns:
        int64 counts of length ``max(x.max() + 1, minlength)`` (``minlength`` for an
        empty ``x``).

    Raises:
        TypeError: a non-integer dtype (bool is taken, as NumPy takes it); a
            ``minlength`` that is not an int (a bool included); a ``strategy`` that
            is neither a name nor a histogram strategy object.
        ValueError: ``x`` not 1-D, a negative value, a negative ``minlength``, an
            unknown ``strategy`` name (checked even when ``x`` is empty); a strategy
            whose counters do not fit in shared memory for that many bins.
    """
    from .reductions import max as _max, min as _min

    x = as_array_like(x)
    _check_int_dtype(x.dtype, "bincount")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {tuple(x.shape)}")
    minlength = _int(minlength, "minlength")
    if minlength < 0:
        raise ValueError("'minlength' must not be negative")
    _strategies.resolve_histogram(strategy, max(minlength, 1))  # refused even for no x
    bins = minlength
    if x.size:
        if np.dtype(x.dtype).kind == "i" and _scalar(_min(x, stream=stream)) < 0:
            raise ValueError("'x' argument must have no negative elements")
        bins = max(bins, int(_scalar(_max(x, stream=stream))) + 1)
    if bins == 0:
        return _empty_counts(x, kind_of(x))
    return _count(x, bins, _int_binner(np.dtype(x.dtype), bins), None, strategy, stream)


@honours_stream
def histogram(x, bins=10, range=None, *, strategy=None, stream=None):
    """``bins`` equal-width bins over ``range``, as ``np.histogram(x, bins, range)``.

    Args:
        x: bool, integer or float values, any shape (flattened).
        bins: a positive int (the number of equal-width bins).
        range: ``(lo, hi)``, or ``None`` for ``(x.min(), x.max())``; a zero-width
            range is widened by 0.5 either side, as NumPy does.

    Returns:
        ``(hist, edges)``: int64 counts of shape ``(bins,)`` and the ``bins + 1``
        edges NumPy computes (its dtype: the input's float type, float64 for
        integers). Bin ``i`` holds ``edges[i] <= v < edges[i+1]``, the last bin also
        ``v == edges[-1]``; values outside the range, and NaN, are not counted.
        Each value lands in NumPy's bin exactly: the bin index is NumPy's estimate
        ``int((v - lo) / (hi - lo) * bins)`` in the edges' precision, corrected
        against the edges as NumPy corrects it; inputs of one or two bytes use a
        table of every value's bin made by that rule on the host.

    Raises:
        TypeError: a non-int ``bins`` (edge arrays are not supported), a bad dtype;
            a ``strategy`` that is neither a name nor a histogram strategy object.
        ValueError: ``bins < 1``; ``range`` with ``lo > hi`` or not finite; an
            automatic range that is not finite (NaN or inf in ``x``); an unknown
            ``strategy`` name, or one whose counters do not fit in shared memory.
    """
    from .reductions import max as _max, min as _min

    x = as_array_like(x)
    dtype = np.dtype(x.dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"histogram: x must have a bool, integer or float dtype, got {dtype}")
    if np.ndim(bins) != 0:
        raise TypeError("histogram: bins must be an int (numbakern computes equal-width "
                        f"bins only), got {bins!r}")
    nbins = _positive_int(bins, "bins")
    _strategies.resolve_histogram(strategy, nbins)  # refused even for an empty x
    value_dtype = np.dtype(np.uint8) if dtype.kind == "b" else dtype  # as NumPy
    if range is None and x.size:
        lo, hi = (_scalar(f(x, stream=stream)).astype(value_dtype)[()] for f in (_min, _max))
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"autodetected range of [{lo}, {hi}] is not finite")
        range = (lo, hi)
    edges = np.histogram_bin_edges(np.empty(0, value_dtype), nbins, range=range)
    kind = kind_of(x)
    if x.size == 0:
        return _empty_counts(x, kind, nbins), _edges_out(edges, kind)
    if dtype.itemsize <= TABLE_ITEMSIZE:
        binner = _table_binner(dtype, value_dtype, edges)
    else:
        binner = _edge_binner(dtype, edges)
    return _count(x, nbins, binner[0], binner[1], strategy, stream), _edges_out(edges, kind)


# --- the common path ---------------------------------------------------------------------


def _count(x, bins: int, binner, aux_host, strategy, stream):
    """Count ``x`` into ``bins`` counters; ``binner`` = (bin_of, bin_key, read_dtype)."""
    kind = kind_of(x)
    bin_of, bin_key, read_dtype = binner
    arr, wrap = as_layout_array(x, kind)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    chosen = _strategies.resolve_histogram(strategy, bins)
    chosen.check(bins)
    out = zeros(workspace, bins, np.int64)
    n = math.prod(arr.shape)
    if n:
        xv = flat_device(arr, workspace, read_dtype)
        aux_host = np.zeros(1, np.int64) if aux_host is None else aux_host
        aux = workspace.from_host(aux_host)
        chosen.histogram(HistogramJob(xv, n, bins, bin_of, bin_key, aux, out, workspace))
    return wrap(to_user(out, workspace, (bins,)))


def _int_binner(dtype: np.dtype, bins: int):
    """``bin_of`` for integer values: the value itself when in ``[0, bins)``."""
    key = ("int_bins", dtype.str, bins)
    return kernels.cached(key, lambda: (_build_int_bin_of(dtype, bins), key, dtype))


def _build_int_bin_of(dtype: np.dtype, bins: int):
    if dtype.kind == "u":
        limit = uint64(bins)

        @cuda.jit(device=True)
        def bin_of(x, i, aux):
            v = uint64(x[i])
            return int64(v) if v < limit else int64(-1)

        return bin_of

    @cuda.jit(device=True)
    def bin_of(x, i, aux):
        v = int64(x[i])
        return v if v >= 0 and v < bins else int64(-1)

    return bin_of


def _edge_binner(dtype: np.dtype, edges: np.ndarray):
    """``bin_of`` for 4- and 8-byte values, NumPy's rule (``np.histogram``'s equal-bin
    path): keep ``lo <= v <= hi`` (compared in the common type of ``v`` and the
    edges); in the edges' type ``t``, ``b = int((t(v) - lo) / (hi - lo) * bins)``;
    ``b == bins`` -> ``bins - 1``; then one step down if ``t(v) < edges[b]``, one up
    if ``t(v) >= edges[b+1]`` (not past the last bin). ``aux`` holds the edges."""
    et = np.dtype(edges.dtype)
    ct = np.result_type(dtype, et)
    key = ("edge_bins", dtype.str, et.str, ct.str, len(edges) - 1)

    def build():
        nb = len(edges) - 1
        t, c = from_dtype(et), from_dtype(ct)

        @cuda.jit(device=True)
        def bin_of(x, i, aux):
            v = x[i]
            lo, hi = aux[0], aux[nb]
            if not (c(v) >= c(lo) and c(v) <= c(hi)):  # out of range, or NaN
                return int64(-1)
            tv = t(v)
            b = int64(((tv - lo) / (hi - lo)) * t(nb))
            if b == nb:
                b -= 1
            if tv < aux[b]:
                b -= 1
            if tv >= aux[b + 1] and b != nb - 1:
                b += 1
            return b

        return bin_of, key, dtype

    return kernels.cached(key, build), edges


def _table_binner(dtype: np.dtype, value_dtype: np.dtype, edges: np.ndarray):
    """``bin_of`` for 1- and 2-byte values (float16 among them): a table of the bin
    of every possible bit pattern, computed with NumPy's rule on the host; the
    input is read as unsigned bits that index it."""
    every = np.arange(2 ** (8 * dtype.itemsize), dtype=np.uint64)
    values = every.astype(bits_dtype(dtype)).view(value_dtype)
    table = numpy_bins(values, edges)
    key = ("table_bins", bits_dtype(dtype).str)

    def build():
        @cuda.jit(device=True)
        def bin_of(x, i, aux):
            return aux[x[i]]

        return bin_of, key, bits_dtype(dtype)

    return kernels.cached(key, build), table


def numpy_bins(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The bin ``np.histogram`` puts each of ``values`` in (``-1``: not counted),
    computed with the same operations in the same dtypes as NumPy's equal-bin path.

    Args:
        values: a NumPy array of integer or float values, any shape.
        edges: the ``bins + 1`` increasing, equally spaced edges
            (``np.histogram_bin_edges``), as a NumPy float array.

    Returns:
        int64 bin indices of ``values``'s shape, in ``[-1, bins)``.
    """
    nb = len(edges) - 1
    first, last = edges[0], edges[-1]
    keep = (values >= first) & (values <= last)
    v = values[keep].astype(edges.dtype, copy=False)
    with np.errstate(all="ignore"):
        b = (np.subtract(v, first) / np.subtract(last, first) * nb).astype(np.intp)
    b[b == nb] -= 1
    b[v < edges[b]] -= 1
    b[(v >= edges[b + 1]) & (b != nb - 1)] += 1
    out = np.full(values.shape, -1, np.int64)
    out[keep] = b
    return out


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


def _scalar(value) -> np.generic:
    """A reduction's result (NumPy scalar, 0-d CuPy or device array) as a NumPy scalar."""
    if isinstance(value, np.generic):
        return value
    if hasattr(value, "get"):
        return value.get()[()]
    return value.copy_to_host()[()]


def _empty_counts(x, kind: str, bins: int = 0):
    counts = np.zeros(bins, np.int64)
    return _edges_out(counts, kind)


def _edges_out(host: np.ndarray, kind: str):
    """A small host array as the caller's kind."""
    if kind == "numpy":
        return host
    if kind == "cupy" and not SIMULATOR:
        import cupy

        return cupy.asarray(host)
    return cuda.to_device(host)


__all__ = ["bincount", "histogram", "histogram_counts"]
