"""Differential harness: every public function against NumPy, on every forced path.

Each test is one *path*: a function with its path forced (a strategy from
``numbakern.strategies.every(...)``, ``lanes=``, or ``layout=``), so every path sees
every kind of draw, not only the shapes that select it. Hypothesis draws:

* dtypes: bool made of the bytes 0, 1, 2 and 255 (NumPy reads every non-zero byte
  as True), every int, float16/32/64, as each function takes them;
* shapes: 0-d, empty, rows of 1-4, 5-31, 32, warp multiples and longer rows, one
  column, many columns;
* layouts: C, F, transposed, reversed (negative strides), offset views,
  unaligned starts (one byte into the buffer);
* values: signed zeros, +-inf, NaN, subnormals, integer extremes.

Tolerances (stated per comparison): integers, indices, sorts, counts and max/min
exact (NaN equal to NaN; the sign of zero compared for prod and sorts, not for
max/min, where it follows the order of combining: README, "Where it differs"); sums and
means ``rtol`` of the dtype (float16 1e-2, float32 1e-5, float64 1e-12) plus an
``atol`` of ``n * eps * max|x|`` for the order of additions; softmax the same
``rtol`` with ``atol`` 1e-6 (float16 1e-3). Floats for sums are drawn up to 1e4 so
that no order overflows where another does not; products are drawn from values whose
products are exact in any order (+-1, +-0, +-inf, NaN). cumprod draws those and powers
of two whose running products overflow and underflow (exact until they do, so NumPy's
sequential loop and any tree agree bit for bit, special values included: a product
that overflowed and then meets a 0 is NaN, one that underflowed stays 0).

Profiles: ``ci`` (the default: a few examples per path, no deadline, all paths in
about a minute under the simulator) and ``nightly`` (``NUMBAKERN_HYPOTHESIS=nightly``:
many more examples per path).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numbakern as nk
from numbakern.strategies import every

settings.register_profile(
    "nk-ci", max_examples=3, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "nk-nightly", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile(
    "nk-nightly" if os.environ.get("NUMBAKERN_HYPOTHESIS") == "nightly" else "nk-ci")

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]
RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}

SHAPES = st.one_of(
    st.just(()),  # 0-d
    st.sampled_from([(0,), (0, 3), (3, 0)]),  # empty
    st.integers(1, 4).map(lambda n: (n,)),
    st.integers(5, 31).map(lambda n: (n,)),
    st.sampled_from([(32,), (64,), (96,), (200,)]),
    st.tuples(st.integers(1, 40), st.just(1)),  # one column
    st.tuples(st.integers(1, 4), st.integers(1, 70)),  # short rows, many columns
    st.tuples(st.integers(1, 3), st.integers(30, 130)),  # longer rows
)


def _values(dtype, n, draw, kind):
    """``n`` values of ``dtype`` with the special ones mixed in."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array(draw(st.lists(st.sampled_from([0, 1, 2, 255]), min_size=n,
                                      max_size=n)), np.uint8).view(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (0, 20) if kind == "count" else (int(info.min), int(info.max))
        special = st.sampled_from([lo, hi, 0, 1]) if kind != "count" else st.just(0)
        small = st.integers(max(lo, -3), min(hi, 3))
        if kind == "prod":
            return np.array(draw(st.lists(small, min_size=n, max_size=n)), dtype)
        return np.array(draw(st.lists(st.one_of(st.integers(lo, hi), special, small),
                                      min_size=n, max_size=n)), dtype)
    finfo = np.finfo(dtype)
    tiny = float(finfo.smallest_subnormal)
    if kind == "prod":
        elems = st.sampled_from([1.0, -1.0, 0.0, -0.0, np.nan, np.inf])
    elif kind == "cumprod":  # two huge factors overflow, two tiny ones round to 0
        huge, small = 2.0 ** (finfo.maxexp // 2 + 1), 2.0 ** ((finfo.minexp - finfo.nmant) // 2 - 1)
        elems = st.sampled_from([1.0, -1.0, 2.0, 0.5, 0.0, -0.0, np.inf, -np.inf, np.nan,
                                 huge, -huge, small, -small])
    else:
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny] if kind != "finite" \
            else [0.0, -0.0, tiny, -tiny]
        elems = st.one_of(st.floats(-1e4, 1e4, width=16 if dtype == np.float16 else 64),
                          st.sampled_from(special))
    return np.array(draw(st.lists(elems, min_size=n, max_size=n)), np.float64).astype(dtype)


@st.composite
def arrays(draw, dtypes, kind="any", shapes=SHAPES):
    """An array of one of ``dtypes`` in one of the layouts."""
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(shapes)
    n = int(np.prod(shape))
    base = _values(dtype, n + 1, draw, kind)
    layout = draw(st.sampled_from(["C", "F", "T", "reversed", "offset", "unaligned"]))
    if layout == "offset":  # a view starting one element in
        return base[1:].reshape(shape)
    if layout == "unaligned":  # starting one byte into its buffer (NumPy allows it)
        raw = np.zeros(n * dtype.itemsize + 1, np.uint8)
        x = np.ndarray(shape, dtype, buffer=raw, offset=1)
        x[...] = base[:n].reshape(shape)
        return x
    x = base[:n].reshape(shape)
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "T" and x.ndim == 2:
        return np.ascontiguousarray(x.T).T
    if layout == "reversed" and x.ndim:
        return x[::-1] if x.ndim == 1 else x[::-1, ::-1]
    return x


def _axis(draw_axis, x):
    return None if x.ndim == 0 else draw_axis(st.sampled_from([None, *range(x.ndim)]))


def _same_exact(got, want, zero_sign=True):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.dtype.kind == "f":
        assert np.array_equal(got, want, equal_nan=True), (got, want)
        both = ~np.isnan(want) if zero_sign else np.zeros(want.shape, bool)
        assert np.array_equal(np.signbit(got[both]), np.signbit(want[both])), (got, want)
    else:
        assert np.array_equal(got, want), (got, want)


def _close(got, want, x, axis_len):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.dtype.kind != "f":
        assert np.array_equal(got, want), (got, want)
        return
    finite = np.abs(x[np.isfinite(x)]).astype(np.float64) if x.dtype.kind == "f" else \
        np.abs(x.astype(np.float64))
    scale = finite.max() if finite.size else 0.0
    atol = max(axis_len, 1) * np.finfo(want.dtype).eps * scale * 4
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=RTOL[want.dtype], atol=atol, equal_nan=True)


def _reject_or_raise(fn, *args, **kwargs):
    """NumPy's answer, or None when NumPy itself refuses (numbakern must then too)."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError):
        return None


# --- reductions, one path per grid strategy, and the axis kernels by lanes -------------

REDUCTIONS = {
    "sum": (nk.sum, np.sum, "any"), "prod": (nk.prod, np.prod, "prod"),
    "max": (nk.max, np.max, "any"), "min": (nk.min, np.min, "any"),
    "argmax": (nk.argmax, np.argmax, "any"), "argmin": (nk.argmin, np.argmin, "any"),
    "mean": (nk.mean, np.mean, "any"),
}
REDUCE_DTYPES = [np.bool_, *INTS, *FLOATS]


def _check_reduction(name, x, axis, **path):
    ours, numpys, _ = REDUCTIONS[name]
    if name.startswith("arg") and isinstance(axis, int) is False and axis is not None:
        axis = None
    with np.errstate(all="ignore"):
        want = _reject_or_raise(numpys, x, axis=axis)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            ours(x, axis=axis, **path)
        return
    got = ours(x, axis=axis, **path)
    if name in ("max", "min"):  # a zero's sign among +-0 follows the tree (README)
        _same_exact(got, want, zero_sign=False)
    elif name in ("argmax", "argmin", "prod"):
        _same_exact(got, want)
    else:
        n = x.size if axis is None else x.shape[axis]
        _close(got, want, x, n)


def _reduction_draw(data, dtypes=REDUCE_DTYPES):
    name = data.draw(st.sampled_from(sorted(REDUCTIONS)))
    x = data.draw(arrays(dtypes, REDUCTIONS[name][2]))
    axis = _axis(data.draw, x)
    if name == "mean" and x.dtype == np.bool_:
        pass
    return name, x, axis


@pytest.mark.parametrize("strategy", every("reduce", threads=32, blocks=2), ids=repr)
@PROFILE
@given(data=st.data())
def test_reductions_on_each_grid_strategy_agree_with_numpy(strategy, data):
    name, x, axis = _reduction_draw(data)
    _check_reduction(name, x, axis, strategy=strategy)


@pytest.mark.parametrize("lanes", [None, 32, 64])
@PROFILE
@given(data=st.data())
def test_axis_reductions_on_each_row_kernel_agree_with_numpy(lanes, data):
    name = data.draw(st.sampled_from(["sum", "max", "argmin", "mean"]))
    x = data.draw(arrays(REDUCE_DTYPES, REDUCTIONS[name][2],
                         shapes=st.tuples(st.integers(1, 4), st.integers(1, 70))))
    axis = data.draw(st.sampled_from([0, 1]))
    strategy = nk.TwoPass(block=nk.WarpShuffle(threads=64))
    _check_reduction(name, x, axis, strategy=strategy, lanes=lanes)


# --- scans -------------------------------------------------------------------------------

SCAN_DTYPES = [np.bool_, *INTS, *FLOATS]


@pytest.mark.parametrize("layout", ["warp", "tiles"])
@pytest.mark.parametrize("strategy", every("scan", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_scans_on_each_strategy_and_layout_agree_with_numpy(strategy, layout, data):
    name = data.draw(st.sampled_from(["cumsum", "cumprod"]))
    x = data.draw(arrays(SCAN_DTYPES, "finite" if name == "cumsum" else "cumprod"))
    if name == "cumsum" and x.dtype == np.float16:
        # running sums stay under 65504: past it NumPy's float16 sum stays inf and
        # numbakern's (accumulated in float32) does not (README, "Where it differs")
        x = x / np.float16(256)
    axis = _axis(data.draw, x)
    ours, numpys = (nk.cumsum, np.cumsum) if name == "cumsum" else (nk.cumprod, np.cumprod)
    with np.errstate(all="ignore"):
        want = _reject_or_raise(numpys, x, axis=axis)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            ours(x, axis=axis, strategy=strategy, layout=layout)
        return
    got = ours(x, axis=axis, strategy=strategy, layout=layout)
    if name == "cumprod":
        _same_exact(got, want)
    else:
        _close(got, want, x, x.size)


# --- softmax -----------------------------------------------------------------------------


def _softmax64(x, axis, log):
    x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    with np.errstate(all="ignore"):
        z = x - m
        s = np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
        return z - s if log else np.exp(z - s)


@pytest.mark.parametrize("layout", ["warp", "block"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@PROFILE
@given(data=st.data())
def test_softmax_on_each_layout_agrees_with_float64(log, layout, data):
    x = data.draw(arrays(FLOATS, "finite",
                         shapes=st.tuples(st.integers(1, 4), st.integers(1, 70))))
    axis = data.draw(st.sampled_from([-1, 0]))
    fn = nk.log_softmax if log else nk.softmax
    got = np.asarray(fn(x, axis=axis, layout=layout))
    want = _softmax64(x, axis, log).astype(x.dtype)
    assert got.dtype == x.dtype and got.shape == x.shape
    atol = 1e-3 if x.dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=RTOL[x.dtype], atol=atol, equal_nan=True)


# --- sorts -------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", every("sort", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_sorts_on_each_strategy_agree_with_numpys_stable_sort(strategy, data):
    x = data.draw(arrays([np.bool_, *INTS, *FLOATS], "any"))
    if x.ndim == 0:
        x = x.reshape(1)
    idx = nk.argsort(x, axis=-1, strategy=strategy)
    _same_exact(idx, np.argsort(x, axis=-1, kind="stable"))
    _same_exact(nk.sort(x, axis=-1, strategy=strategy), np.sort(x, axis=-1, kind="stable"))


# --- histograms --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", every("histogram", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_counts_on_each_histogram_strategy_agree_with_numpy(strategy, data):
    x = data.draw(arrays([np.bool_, *INTS], "count",
                         shapes=st.integers(0, 150).map(lambda n: (n,))))
    minlength = data.draw(st.integers(0, 30))
    _same_exact(nk.bincount(x, minlength=minlength, strategy=strategy),
                np.bincount(x, minlength=minlength))
    y = data.draw(arrays([np.bool_, *FLOATS], "any"))
    bins = data.draw(st.integers(1, 40))
    hist, edges = nk.histogram(y, bins=bins, range=(-50.0, 50.0), strategy=strategy)
    finite = y[np.isfinite(y)] if y.dtype.kind == "f" else y.ravel()
    want_hist, want_edges = np.histogram(finite, bins=bins, range=(-50.0, 50.0))
    _same_exact(hist, want_hist)
    _same_exact(edges, want_edges)
