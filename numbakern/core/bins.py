"""Bins: how a value finds its histogram bin, by NumPy's rules, on the host and the device.

Each binner is ``(bin_of, bin_key, read_dtype)``: a device function ``bin_of(x, i,
aux) -> int64`` (element ``i``'s bin, or ``-1`` to leave it out; ``aux`` a device array
it may read), the key naming it in kernel caches, and the dtype the input is read as.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float64, from_dtype, int32, int64, uint64

from numbakern.kernels.sort_keys import bits_dtype
from numbakern.runtime.bits import bitcast
from numbakern.runtime.cache import cached

#: inputs of at most this many bytes an element are binned through a lookup table of
#: all their 2**(8 * itemsize) values, computed on the host by NumPy's own rule
TABLE_ITEMSIZE = 2


def int_binner(dtype: np.dtype, bins: int):
    """``bin_of`` for integer values: the value itself when in ``[0, bins)``."""
    key = ("int_bins", dtype.str, bins)
    return cached(key, lambda: (_build_int_bin_of(dtype, bins), key, dtype))


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

    def device(self, dtype: np.dtype):
        """``((bin_of, key, read_dtype), aux)`` for input of ``dtype`` (4 or 8 bytes):
        the multiplying binner (:meth:`scaled_binner`) where :meth:`scale_error`
        proves it gives NumPy's bin, else the one that repeats NumPy's arithmetic
        (:meth:`binner`, :meth:`aux`)."""
        error = self.scale_error(dtype)
        if error is not None:
            return self.scaled_binner(dtype), self.scaled_aux(error)
        return self.binner(dtype), self.aux()

    def scale_error(self, dtype: np.dtype):
        """A bound, in bins, on how far the multiplying binner's estimate
        ``(v - first) * (bins / (last - first))`` (both operations in ``dtype``) and
        NumPy's own estimate can lie from the position of ``v`` among the exact
        edges ``first + k * (last - first) / bins``, counting the rounding of the
        edges NumPy computes; ``None`` where that bound is not below 1/4 (then an
        estimate can miss NumPy's bin by more than the one step its fix-up
        corrects), or where ``dtype`` is not the dtype NumPy bins float input in.

        Why the bound suffices: let ``T`` be the bin whose edges hold ``v``
        (``edges[T] <= v < edges[T+1]``; the last bin also ``v == edges[-1]``).
        Every estimate within ``E < 1`` of ``v``'s exact position truncates to
        ``T - 1``, ``T`` or ``T + 1``, and NumPy's one-step fix-up against the two
        neighbouring edges turns each of them into ``T``: NumPy's answer is ``T``,
        and so is the device's (which checks the edges only where its estimate
        lies within ``E`` of a whole number, and truncates otherwise).
        """
        t = np.dtype(dtype)
        if not (t.kind == "f" and t.itemsize in (4, 8) and t == self.value_dtype
                and self.edges.dtype == t == self.sub_dtype == self._bound_dtype()
                and self.div_dtype.kind == "f" and self.nbins < 2**22):
            return None
        if not all(_exact_float(v) for v in (self.first, self.last)):
            return None
        # NumPy's linspace computes the edges in the range's own dtype (a float32 or
        # float16 range of float64 input: edges off by that dtype's rounding, which the
        # bound below does not count): the edge-reading binner serves those
        lin = np.result_type(self.first, self.last, 1.0)
        if np.finfo(lin).eps > np.finfo(t).eps:
            return None
        first, last = float(self.first), float(self.last)  # exact
        size = max(abs(first), abs(last))
        unit, tiny, largest = _float_constants(t)  # unit roundoff, least subnormal, max
        if not (math.isfinite(size) and 4 * size < largest and last > first):
            return None
        # (last - first in float64 is within 2**-53 of the exact width)
        rate = self.nbins / (last - first) * (1 + 2**-50)
        # |edges[k] - exact edge|: rounding to t, and linspace's float64 arithmetic
        edge = unit * size + 2**-46 * size + tiny
        # |fl(v - t(first)) - (v - first)|: first rounded to t, then the subtraction
        offset = 3.01 * unit * size + 2 * tiny
        # NumPy's estimate: its width rounded in its own dtype (or exact, for ints),
        # then a division and a product rounded in the division's dtype
        den = np.asarray(self.denominator).dtype
        den_unit = _float_constants(den)[0] if den.kind == "f" else 2**-53
        q = _float_constants(self.div_dtype)[0]
        # ours: rate rounded twice (float64, then t), the product once
        relative = max(3.01 * unit, 2.01 * q + 1.01 * den_unit)
        bound = rate * (edge + 1.01 * offset) + self.nbins * relative + 1e-30
        return bound if bound < 0.25 else None

    def scaled_aux(self, error: float) -> np.ndarray:
        """The multiplying binner's constants, in the input's dtype: the ``bins + 1``
        edges, the kept range's bounds, ``t(first)``, ``t(bins / (last - first))``
        and the error bound of :meth:`scale_error`."""
        t = self.edges.dtype
        rate = self.nbins / (float(self.last) - float(self.first))
        lo, hi = self._bounds()
        tail = [lo, hi, t.type(self.first), t.type(rate), t.type(error)]
        return np.concatenate([self.edges, np.array(tail, dtype=t)])

    def scaled_binner(self, dtype: np.dtype):
        """``(bin_of, key, read_dtype)`` multiplying by ``bins / (last - first)`` in
        the input's own dtype (float32 or float64), reading :meth:`scaled_aux`.

        Per element: the range check, ``y = (v - first) * rate``, and ``y``'s
        truncation by the magic-number addition ``y + 2**23`` (``2**52`` for
        float64; no float-to-integer conversion: ``F2I`` runs at a sixteenth of the
        float rate on sm_90), which also gives ``d``, ``y``'s distance to its
        nearest whole number. Only where ``|d|`` is within the error bound (``v``
        within rounding of an edge) are the two neighbouring edges read and NumPy's
        fix-up applied; elsewhere the truncation is NumPy's bin (:meth:`scale_error`).
        """
        t = np.dtype(dtype)
        nb = self.nbins
        key = ("scaled_bins", t.str, nb)

        def build():
            f = from_dtype(t)
            i = int64 if t.itemsize == 8 else int32
            magic = f(2.0 ** (t.itemsize * 8 - 1 - np.finfo(t).nexp))  # 2**23, 2**52
            magic_bits = i(np.array(magic, t).view(i.name).item())

            @cuda.jit(device=True)
            def bin_of(x, k, aux):
                # every constant read first, unconditionally: one read of each serves
                # all the elements of a trip of the counting loop
                lo, hi, first, rate, error = (aux[nb + 1], aux[nb + 2], aux[nb + 3],
                                              aux[nb + 4], aux[nb + 5])
                v = x[k]
                keep = (v >= lo) & (v <= hi)  # False for NaN; no branch
                y = (v - first) * rate
                z = y + magic  # y rounded to a whole number, in z's low mantissa bits
                d = y - (z - magic)
                b = int32(bitcast(z, i) - magic_bits)  # bins < 2**22: 32 bits
                if d < f(0):
                    b -= int32(1)
                if keep & (abs(d) <= error):  # v within rounding of an edge: NumPy's fix-up
                    b = min(max(b, int32(0)), int32(nb - 1))
                    if v < aux[b] and b > int32(0):
                        b -= int32(1)
                    elif v >= aux[b + int32(1)] and b != int32(nb - 1):
                        b += int32(1)
                return int64(b) if keep else int64(-1)

            return bin_of, key, t

        return cached(key, build)

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

        return cached(key, build)

    def _bound_dtype(self) -> np.dtype:
        """What the kept range is compared in on the device: the input's own integer
        dtype (bounds found with NumPy's comparisons), or the wider of NumPy's two
        comparison dtypes (:meth:`_bounds` rounds each end to its own first)."""
        if self.value_dtype.kind in "iu":
            return self.value_dtype
        return np.result_type(*self._comparison_dtypes())

    def _comparison_dtypes(self) -> tuple:
        """The dtypes NumPy compares float ``x`` with ``first`` and with ``last`` in,
        each its own (a Python number is weak: x's dtype; a float64 end, float64)."""
        values = np.empty(0, self.value_dtype)
        return np.result_type(values, self.first), np.result_type(values, self.last)

    def _bound_storage(self) -> np.dtype:
        """The 8-byte dtype the bounds travel in: float64, int64 or uint64."""
        kind = self.value_dtype.kind
        return np.dtype({"u": np.uint64, "i": np.int64}.get(kind, np.float64))

    def _bounds(self) -> tuple:
        """The kept range: for integers the least and greatest values NumPy keeps
        (``(1, 0)`` for none), found by bisection with NumPy's own comparisons, which
        are monotone whatever they promote to; for floats ``first`` and ``last`` each
        rounded to the dtype NumPy compares it in, held in :meth:`_bound_dtype`."""
        if self.value_dtype.kind not in "iu":  # each end as NumPy compares with it
            bt, (ft, lt) = self._bound_dtype(), self._comparison_dtypes()
            return bt.type(ft.type(self.first)), bt.type(lt.type(self.last))
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


class EdgeRule:
    """``np.histogram``'s rule for ``bins`` given as an array of edges, for one input
    dtype: bin ``i`` holds ``edges[i] <= v < edges[i+1]``, the last bin also ``v ==
    edges[-1]``; values outside ``[edges[0], edges[-1]]``, and NaN, are not counted.
    Repeated edges make empty bins, as NumPy's.

    NumPy (``numpy/lib/_histograms_impl.py``, the non-uniform path) sorts the values
    and finds each edge among them with ``searchsorted``, comparing in the values'
    and the edges' common dtype: here each value finds its bin among the edges
    instead (a binary search, ``searchsorted(edges[:-1], v, side="right") - 1``), in
    the same common dtype, which gives the same counts.

    Args:
        value_dtype: the dtype NumPy bins the input as (uint8 for bool).
        edges: the 1-D, non-decreasing edges, with no NaN (:func:`edges_of` checks).
    """

    def __init__(self, value_dtype: np.dtype, edges: np.ndarray):
        self.value_dtype = np.dtype(value_dtype)
        self.edges = edges
        self.nbins = edges.shape[0] - 1
        self.compare_dtype = np.result_type(np.empty(0, self.value_dtype), edges)

    def bins_of(self, values: np.ndarray) -> np.ndarray:
        """The bin of each of ``values`` (of ``value_dtype``), ``-1`` where not counted."""
        with np.errstate(invalid="ignore"):  # ml_dtypes warns casting bfloat16's NaNs
            v = values.astype(self.compare_dtype)
        edges = self.edges.astype(self.compare_dtype)
        bins = np.searchsorted(edges[:-1], v, side="right") - 1
        keep = (v >= edges[0]) & (v <= edges[-1])  # False for NaN
        return np.where(keep, bins, -1).astype(np.int64)

    def device(self, dtype: np.dtype):
        """``((bin_of, key, read_dtype), aux)`` for input of ``dtype`` (4 or 8 bytes):
        ``aux`` the edges as 8-byte words of the dtype compared in (float64 for a
        float common dtype, which holds float16's and float32's exactly; int64 or
        uint64 for integers), each value cast to the common dtype first, as NumPy
        casts it."""
        ct = self.compare_dtype
        wide = np.dtype(np.float64 if ct.kind == "f" else
                        np.uint64 if ct == np.uint64 else np.int64)
        aux = self.edges.astype(ct).astype(wide).view(np.int64)
        nb = self.nbins
        key = ("array_bins", np.dtype(dtype).str, ct.str, nb)

        def build():
            c, w = from_dtype(ct), from_dtype(wide)

            @cuda.jit(device=True)
            def bin_of(x, i, aux):
                v = w(c(x[i]))
                if not (v >= bitcast(aux[0], w) and v <= bitcast(aux[nb], w)):
                    return int64(-1)  # out of range, or NaN
                lo, hi = int64(0), int64(nb)  # edges[lo] <= v; v < edges[hi] or hi == nb
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if bitcast(aux[mid], w) <= v:
                        lo = mid
                    else:
                        hi = mid
                return lo

            return bin_of, key, np.dtype(dtype)

        return cached(key, build), aux


def edges_of(bins) -> np.ndarray:
    """``bins`` given as an array (on the host): its edges, checked as NumPy checks
    them (1-D, non-decreasing), and refused where NumPy's counts would be meaningless
    or no kernel holds them.

    Raises:
        ValueError: not 1-D, decreasing, or holding NaN (NumPy's counts between such
            edges are meaningless: some come out negative).
        TypeError: edges that are not bool, integers or floats of at most 8 bytes.
    """
    edges = np.ascontiguousarray(bins)  # (a strided view travels to the device whole)
    if edges.ndim != 1:
        raise ValueError("`bins` must be 1d, when an array")
    if edges.dtype.kind not in "biuf" or edges.dtype.itemsize > 8:
        raise TypeError("histogram: bins as an array must hold real numbers (bool, "
                        f"integers or floats of at most 8 bytes), got dtype {edges.dtype}")
    if edges.dtype.kind == "f" and np.isnan(edges).any():
        raise ValueError("histogram: bins must not hold NaN (NumPy's counts of such "
                         "edges are not counts)")
    if np.any(edges[:-1] > edges[1:]):
        raise ValueError("`bins` must increase monotonically, when an array")
    return edges


def _exact_float(value) -> bool:
    """Whether a range end is exactly a float64 (every float is; ints up to 2**53)."""
    return not isinstance(value, (int, np.integer)) or abs(int(value)) <= 2**53


@functools.cache
def _float_constants(dtype: np.dtype) -> tuple[float, float, float]:
    """``(unit roundoff, least subnormal, largest)`` of a float dtype."""
    info = np.finfo(dtype)
    return float(info.eps) / 2, float(info.smallest_subnormal), float(info.max)


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


def table_binner(dtype: np.dtype, rule: BinRule):
    """``bin_of`` for 1- and 2-byte values (float16 among them): a table of the bin
    of every possible bit pattern, computed by :class:`BinRule` on the host; the
    input is read as unsigned bits that index it (a bool's non-zero bytes all bin as
    True)."""
    every = np.arange(2 ** (8 * dtype.itemsize), dtype=np.uint64)
    if dtype.kind == "b":  # every non-zero byte is True, as NumPy reads it
        values = (every != 0).astype(rule.value_dtype)
    else:
        values = every.astype(bits_dtype(dtype)).view(rule.value_dtype)
    table = rule.bins_of(values)
    key = ("table_bins", bits_dtype(dtype).str)

    def build():
        @cuda.jit(device=True)
        def bin_of(x, i, aux):
            return aux[x[i]]

        return bin_of, key, bits_dtype(dtype)

    return cached(key, build), table
