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
from numba import cuda, float64, from_dtype, int64, uint64

from . import kernels
from . import strategies as _strategies
from .bits import bitcast
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
    x = _empty_list_as_int(x)
    _check_int_dtype(x.dtype, "histogram_counts")
    bins = _positive_int(num_bins, "num_bins")
    return _count(x, bins, _int_binner(np.dtype(x.dtype), bins), None, strategy, stream)


@honours_stream
def bincount(x, weights=None, minlength=0, *, strategy=None, stream=None):
    """Occurrences of each value of a 1-D array of non-negative ints, as
    ``np.bincount(x, minlength=minlength)``. ``weights`` is in NumPy's place for
    code written against NumPy, and must be None: numbakern counts.

    Returns:
        int64 counts of length ``max(x.max() + 1, minlength)`` (``minlength`` for an
        empty ``x``).

    Raises:
        TypeError: ``weights`` given; a non-integer dtype (bool is taken, as NumPy
            takes it; an empty list is taken as int64, as NumPy takes it); a
            ``minlength`` that is not an int (a bool included); a ``strategy`` that
            is neither a name nor a histogram strategy object.
        ValueError: ``x`` not 1-D, a negative value, a negative ``minlength``, an
            unknown ``strategy`` name (checked even when ``x`` is empty); a strategy
            whose counters do not fit in shared memory for that many bins.
    """
    from .reductions import max as _max, min as _min

    if weights is not None:
        raise TypeError("bincount: weights are not supported (numbakern counts); use "
                        "np.bincount for weighted sums")
    x = _empty_list_as_int(x)
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
def histogram(x, bins=10, range=None, density=None, weights=None, *, strategy=None,
              stream=None):
    """``bins`` equal-width bins over ``range``, as ``np.histogram(x, bins, range)``.

    Args:
        x: bool, integer or float values, any shape (flattened).
        bins: a positive int (the number of equal-width bins).
        range: ``(lo, hi)``, or ``None`` for ``(x.min(), x.max())``; a zero-width
            range is widened by 0.5 either side, as NumPy does.
        density, weights: in NumPy's places for code written against NumPy; must be
            None (or ``density=False``): numbakern counts.

    Returns:
        ``(hist, edges)``: int64 counts of shape ``(bins,)`` and the ``bins + 1``
        edges NumPy computes (its dtype: the input's float type, float64 for
        integers). Bin ``i`` holds ``edges[i] <= v < edges[i+1]``, the last bin also
        ``v == edges[-1]``; values outside the range, and NaN, are not counted.
        Each value lands in NumPy's bin exactly (:class:`BinRule`): kept when
        ``lo <= v <= hi`` compared as NumPy compares (an int range against integers
        exactly), the bin NumPy's estimate ``int((v - lo) / (hi - lo) * bins)`` with
        its operands' dtypes (the width from the range as given), corrected against
        the edges as NumPy corrects it; inputs of one or two bytes use a table of
        every value's bin made by that rule on the host. Where NumPy's own arithmetic
        overflows and it raises IndexError (``v - lo`` past float16's or float32's
        largest value), the estimate is taken in float64 instead.

    Raises:
        TypeError: ``weights`` or ``density=True`` given; a non-int ``bins`` (edge
            arrays are not supported), a bad dtype;
            a ``strategy`` that is neither a name nor a histogram strategy object.
        ValueError: ``bins < 1``; ``range`` with ``lo > hi`` or not finite; an
            automatic range that is not finite (NaN or inf in ``x``); an unknown
            ``strategy`` name, or one whose counters do not fit in shared memory.
    """
    from .reductions import max as _max, min as _min

    if weights is not None or density not in (None, False):
        raise TypeError("histogram: weights and density are not supported (numbakern "
                        "counts); use np.histogram for them")
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
    kind = kind_of(x)
    if range is None:  # an empty x: NumPy's range (0, 1)
        range = (0, 1)
    rule = BinRule(value_dtype, nbins, range)
    edges = rule.edges
    if x.size == 0:
        return _empty_counts(x, kind, nbins), _edges_out(edges, kind)
    if dtype.itemsize <= TABLE_ITEMSIZE:
        binner = _table_binner(dtype, rule)
    else:
        binner = (rule.binner(dtype), rule.aux())
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


class BinRule:
    """``np.histogram``'s equal-width rule for one input dtype, range and bin count,
    held so that the host (:meth:`bins_of`) and a device kernel (:meth:`binner`)
    apply it with NumPy's own operands and dtypes.

    NumPy (``numpy/lib/_histograms_impl.py``, the equal-bin path) keeps a value ``v``
    when ``v >= first`` and ``v <= last``, compared with the range as the caller gave
    it (an int range against integers exactly); computes ``(t(v) - first) / (last -
    first) * bins`` with ``t`` the edges' dtype and the width ``last - first`` taken
    from the range itself (wrapping unsigned for integers: exact), truncates it to a
    bin, and moves the bin one step down or up where ``t(v)`` falls outside its
    edges. ``first``/``last`` are the range after NumPy widens a zero-width one by
    0.5 either side.

    Where NumPy's own arithmetic overflows (its estimate is inf or NaN, and NumPy
    raises IndexError: ``v - first`` past float16's or float32's largest value), the
    estimate is taken again in float64, so the value still lands in its bin.
    """

    def __init__(self, value_dtype: np.dtype, nbins: int, range_):
        self.value_dtype = np.dtype(value_dtype)
        self.nbins = nbins
        self.edges = np.histogram_bin_edges(np.empty(0, value_dtype), nbins, range=range_)
        first, last = range_
        if first == last:  # NumPy's widening of a zero-width range (_get_outer_edges)
            first, last = first - 0.5, last + 0.5
        self.first, self.last = first, last
        self.denominator = _unsigned_subtract(last, first)
        et = self.edges.dtype
        self.sub_dtype = np.result_type(np.empty(0, et), first)
        self.div_dtype = np.result_type(np.empty(0, self.sub_dtype), self.denominator)

    def bins_of(self, values: np.ndarray) -> np.ndarray:
        """The bin of each of ``values`` (of ``value_dtype``), ``-1`` where not counted."""
        keep = (values >= self.first) & (values <= self.last)
        v = values[keep].astype(self.edges.dtype, copy=False)
        nb, edges = self.nbins, self.edges
        with np.errstate(all="ignore"):
            f = _unsigned_subtract(v, self.first) / self.denominator * nb
            wide = (v.astype(np.float64) - np.float64(self.first)) / np.float64(
                self.denominator) * nb  # where NumPy's arithmetic overflowed
            f = np.where(np.isfinite(f), f, wide)
            f = np.where(np.isnan(f), nb, f)
        b = np.clip(f, 0, nb - 1).astype(np.intp)  # nb: the last edge, NumPy's last bin
        b[(v < edges[b]) & (b > 0)] -= 1
        b[(v >= edges[b + 1]) & (b != nb - 1)] += 1
        out = np.full(values.shape, -1, np.int64)
        out[keep] = b
        return out

    def aux(self) -> np.ndarray:
        """The device kernel's constants as int64 bit patterns: the edges and the width
        as float64, then the kept range's bounds (see :meth:`binner`)."""
        words = np.concatenate([self.edges.astype(np.float64),
                                [np.float64(self.denominator)]]).view(np.int64)
        bounds = np.array(self._bounds(), dtype=self._bound_storage())
        return np.concatenate([words, bounds.view(np.int64)])

    def binner(self, dtype: np.dtype):
        """``(bin_of, key, read_dtype)`` for input of ``dtype`` (4 or 8 bytes; its values
        are ``value_dtype``'s), reading :meth:`aux`."""
        et, st, qt, bt = (self.edges.dtype, self.sub_dtype, self.div_dtype,
                          self._bound_dtype())
        nb = self.nbins
        float_bounds = bt.kind == "f"
        if not float_bounds:  # integers compare in 64 bits, as the bounds are stored
            bt = self._bound_storage()
        key = ("edge_bins", dtype.str, et.str, st.str, qt.str, bt.str, nb)

        def build():
            t, s, q, c = (from_dtype(d) for d in (et, st, qt, bt))

            @cuda.jit(device=True)
            def edge(aux, k):
                return t(bitcast(aux[k], float64))

            @cuda.jit(device=True)
            def bin_of(x, i, aux):
                v = c(x[i])
                if float_bounds:
                    lo, hi = c(bitcast(aux[nb + 2], float64)), c(bitcast(aux[nb + 3], float64))
                else:
                    lo, hi = bitcast(aux[nb + 2], c), bitcast(aux[nb + 3], c)
                if not (v >= lo and v <= hi):  # out of range, or NaN
                    return int64(-1)
                tv = t(x[i])
                width = bitcast(aux[nb + 1], float64)
                f = float64(q(s(tv) - s(edge(aux, 0))) / q(width) * q(nb))
                if not math.isfinite(f):  # NumPy's arithmetic overflowed: in float64
                    f = (float64(tv) - float64(edge(aux, 0))) / width * float64(nb)
                b = int64(nb - 1)
                if f < float64(nb):  # (NaN: the last bin)
                    b = max(int64(0), int64(f))
                if tv < edge(aux, b) and b > 0:
                    b -= 1
                if tv >= edge(aux, b + 1) and b != nb - 1:
                    b += 1
                return b

            return bin_of, key, dtype

        return kernels.cached(key, build)

    def _bound_dtype(self) -> np.dtype:
        """What the kept range is compared in on the device: the input's own integer
        dtype (bounds found with NumPy's comparisons), or NumPy's comparison dtype."""
        if self.value_dtype.kind in "iu":
            return self.value_dtype
        return np.result_type(np.empty(0, self.value_dtype), self.first)

    def _bound_storage(self) -> np.dtype:
        """The 8-byte dtype the bounds travel in: float64, int64 or uint64."""
        kind = self.value_dtype.kind
        return np.dtype({"u": np.uint64, "i": np.int64}.get(kind, np.float64))

    def _bounds(self) -> tuple:
        """The kept range: for integers the least and greatest values NumPy keeps
        (``(1, 0)`` for none), found by bisection with NumPy's own comparisons, which
        are monotone whatever they promote to; for floats ``first`` and ``last`` in
        the comparison dtype."""
        if self.value_dtype.kind not in "iu":
            bt = self._bound_dtype()
            return bt.type(self.first), bt.type(self.last)
        info = np.iinfo(self.value_dtype)

        def at_least(v):
            return bool((np.array([v], self.value_dtype) >= self.first)[0])

        def at_most(v):
            return bool((np.array([v], self.value_dtype) <= self.last)[0])

        if not (at_least(info.max) and at_most(info.min)):
            return 1, 0
        lo, hi = _first_true(at_least, info.min, info.max), _last_true(at_most, info.min,
                                                                       info.max)
        return (lo, hi) if lo <= hi else (1, 0)


def _first_true(pred, lo: int, hi: int) -> int:
    """The least ``v`` in ``[lo, hi]`` with ``pred(v)`` (``pred`` monotone, ``pred(hi)``)."""
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if pred(mid) else (mid + 1, hi)
    return lo


def _last_true(pred, lo: int, hi: int) -> int:
    """The greatest ``v`` in ``[lo, hi]`` with ``pred(v)`` (``pred`` antitone, ``pred(lo)``)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if pred(mid) else (lo, mid - 1)
    return lo


def _unsigned_subtract(a, b):
    """``a - b`` as NumPy's histogram takes it: in the operands' common dtype, and for
    signed integers as the unsigned difference (exact however far apart they are)."""
    dt = np.result_type(a, b)
    if dt.kind == "i":
        unsigned = np.dtype(f"u{dt.itemsize}")
        return np.subtract(np.asarray(a, dtype=dt), np.asarray(b, dtype=dt),
                           casting="unsafe", dtype=unsigned)
    return np.subtract(a, b, dtype=dt)


def _table_binner(dtype: np.dtype, rule: BinRule):
    """``bin_of`` for 1- and 2-byte values (float16 among them): a table of the bin
    of every possible bit pattern, computed by :class:`BinRule` on the host; the
    input is read as unsigned bits that index it."""
    every = np.arange(2 ** (8 * dtype.itemsize), dtype=np.uint64)
    values = every.astype(bits_dtype(dtype)).view(rule.value_dtype)
    table = rule.bins_of(values)
    key = ("table_bins", bits_dtype(dtype).str)

    def build():
        @cuda.jit(device=True)
        def bin_of(x, i, aux):
            return aux[x[i]]

        return bin_of, key, bits_dtype(dtype)

    return kernels.cached(key, build), table


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
