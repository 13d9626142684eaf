"""numbakern on Dask arrays (numbakern/api/dask.py): lazy results equal to NumPy's, with
the dtype and ``_meta`` of ``dask.array`` on NumPy, on the synchronous scheduler (and
the threaded one), plus one small
``LocalCluster`` of two worker processes.

Kept cheap: small arrays, a few chunks (the simulator runs one OS thread per CUDA
thread).
"""

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import numbakern as nk

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="sync"):
        yield


def _check(lazy, expected, *, exact=False, rtol=1e-5, like=None):
    """``lazy`` is a Dask array of ``expected``'s dtype and shape, NumPy ``_meta``,
    and computes to it; returns what it computed to."""
    assert isinstance(lazy, da.Array)
    assert isinstance(lazy._meta, np.ndarray)
    expected = np.asarray(expected)
    assert lazy.dtype == expected.dtype, (lazy.dtype, expected.dtype)
    assert lazy.shape == expected.shape
    if like is not None:  # dask.array's own on NumPy: the same dtype and meta's ndim
        assert like.dtype == lazy.dtype and like._meta.ndim == lazy._meta.ndim
    got = np.asarray(lazy.compute())
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-6)
    return got


# --- reductions --------------------------------------------------------------------

# uneven chunks, a zero-size chunk, chunk edges at 32 (a warp) along axis 1; few rows,
# as each chunk is a launch whose simulated threads grow with its elements
SHAPE = (13, 70)
CHUNKS = ((5, 0, 6, 2), (32, 32, 6))
A = np.random.default_rng(0).standard_normal(SHAPE)


@pytest.mark.parametrize("axis,keepdims,split_every", [
    (None, False, 2), (None, True, None), (0, False, 4), (1, True, 2), (-1, False, None),
    ((0, 1), True, 4), ((1,), False, 2)])
def test_sum_every_axis_form(axis, keepdims, split_every):
    x = da.from_array(A.astype(np.float32), chunks=CHUNKS)
    lazy = nk.sum(x, axis=axis, keepdims=keepdims, split_every=split_every)
    ref = A.astype(np.float32).astype(np.float64).sum(axis=axis, keepdims=keepdims)
    _check(lazy, ref.astype(np.float32), like=da.sum(x, axis=axis, keepdims=keepdims))


NAN_AND_LOGIC = [(nk.nansum, np.nansum, False), (nk.nanprod, np.nanprod, False),
                 (nk.any, np.any, True), (nk.all, np.all, True),
                 (nk.count_nonzero, np.count_nonzero, True)]


# two axis forms a function, in turn: each form meets three or four of the five
@pytest.mark.parametrize("fn,ref,exact,axis", [
    (*f, axis) for k, f in enumerate(NAN_AND_LOGIC)
    for axis in ((None, 0, 1)[k % 3], (None, 0, 1)[(k + 1) % 3])])
def test_nan_and_logic_reductions(fn, ref, exact, axis):
    """Each chunk's op maps its elements (NaN skipped, x != 0); the partials then meet
    without the map (counts are summed, never counted again)."""
    a = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    a[a > 1.2] = np.nan
    a[:, 5] = 0.0
    a[3] = np.nan  # an all-NaN row
    x = da.from_array(a, chunks=CHUNKS)
    expected = np.asarray(ref(a.astype(np.float64) if not exact else a, axis=axis))
    expected = expected.astype(np.asarray(ref(a, axis=axis)).dtype)
    _check(fn(x, axis=axis, split_every=2), expected, exact=exact, rtol=1e-4)


def test_a_nan_sum_is_nan_on_every_chunking():
    """A slice holding NaN sums to NaN however it is chunked; which NaN (sign bit,
    payload) is left unspecified (numbakern/api/dask.py, "Determinism"): NumPy's own
    np.sum returns the sign of the NaN its pairwise order meets first."""
    a = np.arange(40, dtype=np.float32).reshape(2, 20)
    a[0, 7], a[0, 15] = -np.nan, np.nan  # row 0: both signs; row 1: none
    for chunks in ((2, 20), (1, 10), ((1, 1), (7, 1, 12))):
        got = nk.sum(da.from_array(a, chunks=chunks), axis=1, split_every=2).compute()
        assert got.dtype == np.float32 and np.isnan(got[0]) and got[1] == a[1].sum()


INTEGER_REDUCTIONS = [(nk.sum, np.sum), (nk.prod, np.prod), (nk.max, np.max),
                      (nk.min, np.min), (nk.xor_sum, np.bitwise_xor.reduce),
                      (nk.bitwise_and_sum, np.bitwise_and.reduce),
                      (nk.bitwise_or_sum, np.bitwise_or.reduce)]


@pytest.mark.parametrize("k", range(len(INTEGER_REDUCTIONS)),
                         ids=[fn.__name__ for fn, _ in INTEGER_REDUCTIONS])
def test_integer_reductions_are_exact(k):
    """Two of the three axis forms a function, in turn (each form meets four or five
    of the seven functions): the chunks' partials meet exactly whatever the axes."""
    fn, ref = INTEGER_REDUCTIONS[k]
    a = np.random.default_rng(1).integers(-50, 50, size=(9, 65)).astype(np.int16)
    x = da.from_array(a, chunks=(4, 33))
    axes = (None, 0, 1)
    for axis in (axes[k % 3], axes[(k + 1) % 3]):
        _check(fn(x, axis=axis, split_every=2), ref(a, axis=axis), exact=True)


def test_dtype_and_float16_accumulate_as_numpy():
    a = np.random.default_rng(2).integers(0, 100, size=200).astype(np.int8)
    x = da.from_array(a, chunks=64)
    _check(nk.sum(x), np.sum(a), exact=True, like=da.sum(x))  # int8 -> int64
    _check(nk.sum(x, dtype=np.float32), np.sum(a, dtype=np.float32), exact=True)
    h = (np.random.default_rng(3).random(300) * 4).astype(np.float16)
    lazy = nk.sum(da.from_array(h, chunks=100))
    assert lazy.dtype == np.float16
    np.testing.assert_allclose(float(lazy.compute()), h.astype(np.float64).sum(), rtol=1e-3)


@pytest.mark.parametrize("split_every", [None, 2])
@pytest.mark.parametrize("fn", ["sum", "nansum", "reduce"])
def test_float16_partials_stay_float32_until_the_aggregate(fn, split_every):
    """One call adds float16 in float32 and rounds once; so do the chunks' partials,
    to the aggregate (rounded each, 1024 + 0.5 - 1024 + 0.5 lost both halves)."""
    a = np.array([1024, 0.5, -1024, 0.5], np.float16)
    call = (lambda v, **kw: nk.reduce(v, "sum", **kw)) if fn == "reduce" else getattr(nk, fn)
    _check(call(da.from_array(a, chunks=2), split_every=split_every), np.float16(1.0),
           exact=True)
    rows = np.stack([a, a], axis=1)
    _check(call(da.from_array(rows, chunks=(2, 1)), axis=0, split_every=split_every),
           call(rows, axis=0), exact=True)
    b = np.array([[2049, 1, -2049, 1]], np.int32)  # each element cast first, then added
    _check(call(da.from_array(b, chunks=(1, 2)), axis=1, dtype=np.float16,
                split_every=split_every), np.sum(b, axis=1, dtype=np.float16), exact=True)


def test_a_float16_aggregate_overflows_as_numpy():
    """A float16 sum or product past 65504: inf with NumPy's "overflow encountered in
    reduce" (not the cast's words), and a product of chunks' inf and 0 is not NaN."""
    h = np.full(12, 60000, np.float16)
    with pytest.warns(RuntimeWarning, match="overflow encountered in reduce"):
        assert np.isposinf(nk.sum(da.from_array(h, chunks=4)).compute())
    with pytest.warns(RuntimeWarning, match="overflow encountered in reduce"):
        assert np.isposinf(nk.prod(da.from_array(h, chunks=6)).compute())  # float32's too
    with warnings.catch_warnings():  # an infinite element or initial is no overflow
        warnings.simplefilter("error")
        assert np.isposinf(nk.sum(da.from_array(np.append(h, np.inf), chunks=4)).compute())
        assert np.isposinf(nk.sum(da.from_array(h[:2], chunks=1), initial=np.inf).compute())
    f = np.linspace(-3, 3, 100).astype(np.float32)
    with np.errstate(over="ignore"):
        want = np.prod(f, dtype=np.float16)
    with pytest.warns(RuntimeWarning, match="overflow encountered in reduce"):
        got = nk.prod(da.from_array(f, chunks=31), dtype=np.float16).compute()
    assert got.dtype == np.float16 and np.isposinf(want) and np.isposinf(got)


def test_mean_matches_numpy():
    x = da.from_array(A, chunks=CHUNKS)
    for axis in (None, 0, (0, 1)):
        _check(nk.mean(x, axis=axis), np.mean(A, axis=axis), rtol=1e-12)
    i = da.from_array(np.arange(10, dtype=np.int32), chunks=3)
    _check(nk.mean(i), np.mean(np.arange(10, dtype=np.int32)), exact=True)


# (data with a large mean: the one-pass naive formula would lose the variance)
MOMENT_DATA = 1e4 + np.random.default_rng(5).standard_normal(SHAPE)


MOMENT_FNS = [(nk.var, np.var, {}), (nk.var, np.var, dict(ddof=1)),
              (nk.std, np.std, dict(ddof=2))]
MOMENT_FORMS = [(None, False, 2, np.float32), (0, True, None, np.float64),
                ((0, 1), False, 4, np.float32)]


# two forms a function, in turn: each form meets two of the three
@pytest.mark.parametrize("fn,ref,kw,axis,keepdims,split_every,dtype", [
    (*f, *MOMENT_FORMS[(k + j) % 3]) for k, f in enumerate(MOMENT_FNS) for j in (0, 1)])
def test_var_std_merge_chunk_moments(fn, ref, kw, axis, keepdims, split_every, dtype):
    """Each chunk's (count, mean, M2) in one pass, merged across uneven and empty
    chunks by Chan et al.'s formula: NumPy's two-pass answer, float32 input included."""
    a = MOMENT_DATA.astype(dtype)
    x = da.from_array(a, chunks=CHUNKS)
    lazy = fn(x, axis=axis, keepdims=keepdims, split_every=split_every, **kw)
    expected = ref(a.astype(np.float64), axis=axis, keepdims=keepdims, **kw)
    _check(lazy, expected.astype(dtype), rtol=1e-5 if dtype == np.float32 else 1e-9,
           like=ref(x, axis=axis, keepdims=keepdims, **kw))


@pytest.mark.parametrize("values, chunks", [
    ([np.inf, 1.0], 2), ([1.0, np.inf, 2.0], 3), ([-np.inf, 1.0, np.nan], 2),
    ([np.inf, -np.inf, 1.0], 1), ([np.nan, 5.0, np.inf], 3)])
def test_nanmean_keeps_infinities_within_a_chunk(values, chunks):
    """Each chunk's sum and count, not Welford's running mean, which met inf - inf
    where an infinity came before a finite value in one chunk (NaN for NumPy's inf);
    NumPy's warnings (the merge of the means' spread warned "invalid value" wherever
    a slice held an infinity)."""
    a = np.array(values)
    words = []
    for mean in (lambda: nk.nanmean(da.from_array(a, chunks=chunks)).compute(),
                 lambda: np.nanmean(a)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            words.append((mean(), [str(w.message) for w in caught]))
    np.testing.assert_array_equal(words[0][0], words[1][0])
    assert words[0][1] == words[1][1]


@pytest.mark.parametrize("fn,ref,axis", [
    (nk.nanvar, np.nanvar, None), (nk.nanvar, np.nanvar, 1), (nk.nanmean, np.nanmean, None),
    (nk.nanmean, np.nanmean, 1), (nk.nanstd, np.nanstd, 1)])  # nanstd: nanvar's sqrt
def test_nan_moments_skip_nan_and_warn_for_all_nan_slices(fn, ref, axis):
    a = MOMENT_DATA.copy()
    a[a > 1e4 + 1.0] = np.nan
    a[3] = np.nan  # an all-NaN row
    a[:, 40] = np.nan  # and column
    x = da.from_array(a, chunks=CHUNKS)
    with np.errstate(all="ignore"), warnings.catch_warnings(record=True) as numpy_warned:
        warnings.simplefilter("always")
        expected = ref(a, axis=axis)
    lazy = fn(x, axis=axis)
    assert lazy.dtype == expected.dtype and lazy.shape == expected.shape
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        got = lazy.compute()
    assert bool(warned) == bool(numpy_warned) == (axis is not None)
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def test_integer_var_is_float64_and_ddof_past_the_count_warns():
    a = np.arange(-40, 30).reshape(7, 10)
    x = da.from_array(a, chunks=(3, 4))
    _check(nk.var(x, axis=0), np.var(a, axis=0), rtol=1e-12)
    got, said = _with_words(lambda: nk.var(x, axis=0, ddof=7).compute())
    want, words = _with_words(lambda: np.var(a, axis=0, ddof=7))
    np.testing.assert_array_equal(got, want)
    assert said == words == {"Degrees of freedom <= 0 for slice",
                             "divide by zero encountered in divide"}
    with pytest.raises(TypeError, match="ddof"):
        nk.std(x, ddof="1")


@pytest.mark.parametrize("fn,ref", [(nk.nanmax, np.nanmax), (nk.nanmin, np.nanmin)])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nanmax_nanmin_warn_once_for_a_whole_all_nan_slice(fn, ref, axis):
    """A chunk of nothing but NaN is no all-NaN slice: no warning unless the whole
    slice is NaN."""
    a = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    a[:5, :32] = np.nan  # a whole chunk of NaN, but no whole row or column
    x = da.from_array(a, chunks=CHUNKS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(fn(x, axis=axis), ref(a, axis=axis), exact=True)


@pytest.mark.parametrize("fn,ref", [(nk.nanmax, np.nanmax), (nk.nanmin, np.nanmin)])
def test_nanmax_nanmin_all_nan_columns_empty_arrays_and_integers(fn, ref):
    """A whole column of NaN warns as NumPy's; no elements raise at compute time;
    integers (no NaN) go through the same partials."""
    a = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    a[:5, :32] = np.nan
    a[:, 7] = np.nan
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        got = fn(da.from_array(a, chunks=CHUNKS), axis=0).compute()
    with pytest.warns(RuntimeWarning):
        np.testing.assert_array_equal(got, ref(a, axis=0))
    empty = da.from_array(np.zeros((0, 4), np.int16), chunks=(1, 2))
    with pytest.raises(ValueError, match=f"operation f{fn.__name__[3:]} "):  # NumPy's word
        fn(empty, axis=0).compute()
    ints = np.arange(-20, 50, dtype=np.int16).reshape(7, 10)
    _check(fn(da.from_array(ints, chunks=((3, 0, 4), (4, 6))), axis=1), ref(ints, axis=1),
           exact=True)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, True), (1, False)])
def test_logsumexp_of_chunk_logsumexps(axis, keepdims):
    scipy = pytest.importorskip("scipy.special")
    a = 50 * np.random.default_rng(4).standard_normal(SHAPE)
    a[2, :] = -np.inf
    for dtype in (np.float32, np.float64):
        x = da.from_array(a.astype(dtype), chunks=CHUNKS)
        expected = scipy.logsumexp(a.astype(dtype).astype(np.float64), axis=axis,
                                   keepdims=keepdims)
        _check(nk.logsumexp(x, axis=axis, keepdims=keepdims), expected.astype(dtype),
               rtol=1e-5 if dtype == np.float32 else 1e-12)
    with pytest.raises(TypeError, match="b="):
        nk.logsumexp(x, b=x)


@pytest.mark.parametrize("split_every", [2, None])
def test_average_of_chunk_sums(split_every):
    """Weights along an axis (NumPy's order for several), of x's shape, as a Dask
    array of other chunks, and none; zero-sum weights raise at compute."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal(SHAPE)
    x = da.from_array(a, chunks=CHUNKS)
    w1, wfull = rng.random(SHAPE[1]) + 0.1, rng.random(SHAPE) + 0.1
    kw = {"split_every": split_every}
    for lazy, want in (
            (nk.average(x, axis=1, weights=w1, returned=True, **kw),
             np.average(a, axis=1, weights=w1, returned=True)),
            (nk.average(x, weights=da.from_array(wfull, chunks=(4, 9)), returned=True, **kw),
             np.average(a, weights=wfull, returned=True)),
            (nk.average(x, axis=(1, 0), weights=wfull.T, keepdims=True, returned=True, **kw),
             np.average(a, axis=(1, 0), weights=wfull.T, keepdims=True, returned=True)),
            (nk.average(x, axis=0, returned=True, **kw),
             np.average(a, axis=0, returned=True))):
        _check(lazy[0], want[0], rtol=1e-12)
        _check(lazy[1], want[1], rtol=1e-12)
    ints = da.from_array(a.astype(np.int16) * 7, chunks=CHUNKS)
    _check(nk.average(ints, axis=1, weights=w1.astype(np.float32)),
           np.average(a.astype(np.int16) * 7, axis=1, weights=w1.astype(np.float32)),
           rtol=1e-12)
    lazy = nk.average(x, axis=1, weights=np.zeros(SHAPE[1]))  # built, then raises
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        lazy.compute()
    with pytest.raises(TypeError, match="Axis must be specified"):
        nk.average(x, weights=w1)
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):  # no outputs, yet
        nk.average(da.from_array(np.ones((0, 3))), axis=1, weights=np.zeros(3))  # NumPy's
    got = tuple(v.compute() for v in nk.average(x, returned=True))
    assert all(type(v) is np.float64 for v in got)  # scalars, as NumPy's
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert type(nk.average(da.from_array(np.zeros((0, 3)))).compute()) is np.float64


def test_weighted_bincount_of_chunk_sums():
    rng = np.random.default_rng(9)
    x = rng.integers(0, 40, 100)
    w = rng.standard_normal(100)
    dx = da.from_array(x, chunks=((30, 0, 33, 37),))  # a zero-size chunk
    for weights in (w, da.from_array(w, chunks=25)):  # taken in x's chunks
        _check(nk.bincount(dx, weights, minlength=45), np.bincount(x, w, minlength=45),
               rtol=1e-12)
    _check(nk.bincount(dx[:0], w[:0], minlength=3), np.bincount(x[:0], w[:0], minlength=3),
           exact=True)
    with pytest.raises(ValueError, match="weights of shape"):
        nk.bincount(dx, w[:5])
    with pytest.raises(TypeError, match="weights must hold real numbers"):  # at the call
        nk.bincount(dx, w.astype(np.complex64))
    unknown = da.from_array(w, chunks=25)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        nk.bincount(dx, unknown[unknown > -10])


def test_ptp_wraps_integers_as_numpy():
    a = np.array([[-128, 127, 5], [3, 3, -1]], dtype=np.int8)
    x = da.from_array(a, chunks=(1, 2))
    _check(nk.ptp(x, axis=1), np.ptp(a, axis=1), exact=True)
    _check(nk.ptp(x), np.ptp(a), exact=True)
    for dtype in (np.float32, np.bool_):  # nothing: NumPy's ptp fails in its maximum
        lazy = nk.ptp(da.from_array(np.zeros((0, 3), dtype)), axis=0)
        with pytest.raises(ValueError, match="operation maximum which has no identity"):
            lazy.compute()
    with pytest.raises(TypeError, match="ptp is not defined for bool"):
        nk.ptp(da.from_array(np.ones((2, 3), bool)), axis=0)


def test_max_of_no_elements_raises_at_compute_and_empty_chunks_are_skipped():
    x = da.from_array(np.array([3.0, 1.0, 4.0]), chunks=((0, 2, 0, 1),))
    _check(nk.max(x), np.float64(4.0), exact=True)
    empty = da.from_array(np.zeros((0, 3)), chunks=((0,), (2, 1)))
    lazy = nk.max(empty, axis=0)  # building the graph does not raise (dask/dask#6736)
    with pytest.raises(ValueError, match="zero-size"):
        lazy.compute()
    _check(nk.sum(empty, axis=0), np.zeros(3), exact=True)


# (name, NumPy's form, input, initial): floats with NaN and an all-NaN row, integers
_INITIAL_CASES = [
    ("sum", np.sum, "f", 2.5), ("prod", np.prod, "i", 3), ("max", np.max, "f", 1.25),
    ("min", np.min, "i", -7), ("nansum", np.nansum, "f", 1.0),
    ("nanprod", np.nanprod, "f", 2.0), ("nanmax", np.nanmax, "f", 0.5),
    ("nanmin", np.nanmin, "i", -60), ("xor_sum", np.bitwise_xor.reduce, "i", 5),
    ("bitwise_or_sum", np.bitwise_or.reduce, "i", 64),
    ("bitwise_and_sum", np.bitwise_and.reduce, "i", 7)]


@pytest.mark.parametrize("name,ref,kind,initial", _INITIAL_CASES,
                         ids=[c[0] for c in _INITIAL_CASES])
def test_initial_joins_each_slice_once(name, ref, kind, initial):
    rng = np.random.default_rng(12)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    a[1], a[2, 3] = np.nan, np.nan
    if kind == "i":
        a = rng.integers(-50, 50, (5, 7)).astype(np.int16)
    x = da.from_array(a, chunks=(2, 3))
    fn = getattr(nk, name)
    for axis, split_every in ((None, None), (0, 2), (1, None), ((0, 1), 2)):
        expected = ref(a, axis=axis, initial=initial)
        _check(fn(x, axis=axis, initial=initial, split_every=split_every), expected,
               exact=kind == "i")


def test_initial_stands_in_for_an_empty_slice_and_is_checked_at_once():
    empty = np.zeros((0, 4), np.float32)
    x = da.from_array(empty, chunks=(1, 2))
    _check(nk.max(x, axis=0, initial=-1.0), np.max(empty, axis=0, initial=-1.0), exact=True)
    _check(nk.nanmax(x, axis=0, initial=-1.0), np.full(4, -1.0, np.float32), exact=True)
    ints = da.from_array(np.arange(6, dtype=np.int8), chunks=4)
    _check(nk.sum(ints, None, None, None, False, 2),  # initial by position, as NumPy's
           np.sum(np.arange(6, dtype=np.int8), initial=2), exact=True)
    h = np.full((2, 4), -10000, np.float16)  # float16's loop: initial=70000 is inf there
    _check(nk.sum(da.from_array(h, chunks=(1, 2)), axis=1, initial=70000),
           np.sum(h, axis=1, initial=70000), exact=True)
    with pytest.raises(TypeError, match="sum: initial must be a number"):
        nk.sum(ints, initial="a")
    with pytest.raises(ValueError, match="max: initial=300 is not a value"):
        nk.max(ints, initial=300)
    with pytest.raises(TypeError, match="nanmin: initial must be a number"):
        nk.nanmin(x, initial=[1.0])


def test_stream_is_refused_naming_it():
    x = da.from_array(A, chunks=CHUNKS)
    for fn in (nk.sum, nk.cumsum, nk.softmax, nk.argmax):
        with pytest.raises(TypeError, match="stream= is not taken for Dask arrays"):
            fn(x, stream=0)


def test_nanmean_of_integers_is_their_mean_with_an_integer_dtype_too():
    a = np.array([[1, -8, 3], [2, 4, 7]], dtype=np.int16)
    x = da.from_array(a, chunks=(1, 2))
    for dtype in (None, np.int32, np.float32):
        for axis in (None, 1):
            _check(nk.nanmean(x, axis=axis, dtype=dtype),
                   np.nanmean(a, axis=axis, dtype=dtype), exact=True)
    with pytest.raises(TypeError, match="nanmean: dtype must be float16, float32 or float64"):
        nk.nanmean(da.from_array(A, chunks=CHUNKS), dtype=np.int64)


@pytest.mark.parametrize("ord", [2, 1, 0, np.inf, -np.inf, 3, -1.5])
def test_vector_norm_takes_the_root_once_after_the_partials(ord):
    a = np.random.default_rng(14).standard_normal(SHAPE).astype(np.float32)
    a[2, 5] = np.nan if ord == 1 else a[2, 5]
    x = da.from_array(a, chunks=CHUNKS)
    for axis, keepdims, split_every in ((None, False, 2), (0, True, None), (1, False, 4),
                                        ((0, 1), True, None), ((), False, None)):
        with np.errstate(all="ignore"):
            want = np.linalg.vector_norm(a.astype(np.float64), axis=axis, ord=ord,
                                         keepdims=keepdims).astype(np.float32)
        _check(nk.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord,
                              split_every=split_every), want, rtol=2e-6)


def test_vector_norm_of_float16_sums_in_float32_and_empty_slices_as_numpy():
    h = (np.random.default_rng(15).standard_normal(300) * 400).astype(np.float16)
    lazy = nk.vector_norm(da.from_array(h, chunks=64))  # squares past 65504
    _check(lazy, np.float16(np.linalg.vector_norm(h.astype(np.float64))), rtol=2e-3)
    empty = da.from_array(np.zeros((0, 4), np.float32), chunks=(1, 2))
    _check(nk.vector_norm(empty, axis=0, ord=np.inf), np.zeros(4, np.float32), exact=True)
    _check(nk.vector_norm(empty, axis=0), np.zeros(4, np.float32), exact=True)
    lazy = nk.vector_norm(empty, axis=0, ord=-np.inf)
    with pytest.raises(ValueError, match="zero-size"):
        lazy.compute()
    with pytest.raises(ValueError, match="invalid norm order"):
        nk.vector_norm(empty, ord="fro")


@nk.op(identity=0.0, commutative=False)
def last_nonzero(a, b):
    return b if b != 0 else a


def _last_nonzero(v):
    nz = v[v != 0]
    return nz[-1] if nz.size else 0.0


def test_non_commutative_op_keeps_order_across_chunks():
    a = np.zeros((6, 50))
    a[np.random.default_rng(4).random(a.shape) < 0.3] = 1.0
    a *= np.arange(a.size).reshape(a.shape)
    x = da.from_array(a, chunks=(4, 17))
    for axis in (None, 1, (0, 1)):
        flat = a.reshape(-1) if axis in (None, (0, 1)) else None
        ref = _last_nonzero(flat) if flat is not None else \
            np.array([_last_nonzero(r) for r in a])
        _check(nk.reduce(x, last_nonzero, axis=axis, split_every=2), ref, exact=True)
    ref0 = np.array([_last_nonzero(c) for c in a.T])
    _check(nk.reduce(x, last_nonzero, axis=0, split_every=2), ref0, exact=True)


def _logsumexp(a, axis=None, keepdims=False):
    m = np.max(a, axis=axis, keepdims=True)
    r = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def _folded(ufunc):
    def ref(a, axis=None, keepdims=False):
        return ufunc.reduce(a, axis=tuple(range(a.ndim)) if axis is None else axis,
                            keepdims=keepdims)
    return ref


# every reduction numbakern.api.dask takes, and NumPy's (float64) answer
EVERY_REDUCTION = {
    "sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min,
    "ptp": np.ptp, "var": np.var, "std": np.std, "nansum": np.nansum,
    "nanprod": np.nanprod, "nanmax": np.nanmax, "nanmin": np.nanmin,
    "nanmean": np.nanmean, "nanvar": np.nanvar, "nanstd": np.nanstd, "any": np.any,
    "all": np.all, "count_nonzero": np.count_nonzero, "logsumexp": _logsumexp,
    "xor_sum": _folded(np.bitwise_xor), "bitwise_and_sum": _folded(np.bitwise_and),
    "bitwise_or_sum": _folded(np.bitwise_or), "reduce": np.max,
    "argmax": np.argmax, "argmin": np.argmin, "nanargmax": np.nanargmax,
    "nanargmin": np.nanargmin, "max_with_indices": np.max, "min_with_indices": np.min}
IDENTITY_REDUCTIONS = {"sum", "prod", "nansum", "nanprod", "any", "all", "count_nonzero",
                       "xor_sum", "bitwise_and_sum", "bitwise_or_sum"}
# zero-size chunks along the last axis, along both, and along two of three
EMPTY_CHUNK_LAYOUTS = [((7, 13), ((3, 4), (5, 0, 8))),
                       ((7, 13), ((0, 3, 0, 4), (0, 5, 8, 0))),
                       ((4, 5, 6), ((2, 0, 2), (5,), (3, 0, 3)))]


def _data(name: str, shape: tuple, rng):
    if name.startswith(("xor", "bitwise")):
        return rng.integers(0, 1 << 20, shape).astype(np.int32)
    a = rng.standard_normal(shape).astype(np.float32)
    if name.startswith("nan"):
        a[rng.random(shape) < 0.2] = np.nan
    if name.endswith("prod"):
        a = (1 + a / 8).astype(np.float32)
    if name in ("any", "all", "count_nonzero"):
        a[rng.random(shape) < 0.5] = 0
    return a


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EVERY_REDUCTION))
def test_every_reduction_of_every_axis_form_with_empty_chunks(name):
    """Zero-size chunks along any axis, reduced over the whole array, a tuple of axes or
    one axis, by one aggregate or Dask's tree: NumPy's answer (an empty chunk of an
    op without an identity, max, once broke the partials' concatenation)."""
    ref, rng = EVERY_REDUCTION[name], np.random.default_rng(8)
    one_axis = name.endswith(("argmax", "argmin", "_indices"))  # an int axis or None
    # the ops without an identity (whose partials an empty chunk leaves out) take every
    # layout; the others one each, in turn (simulator time)
    layouts = EMPTY_CHUNK_LAYOUTS
    if name in IDENTITY_REDUCTIONS:
        layouts = [layouts[sorted(IDENTITY_REDUCTIONS).index(name) % len(layouts)]]
    for shape, chunks in layouts:
        a = _data(name, shape, rng)
        x = da.from_array(a, chunks=chunks)
        last = len(shape) - 1
        forms = [(None, False, None), (None, True, 2), (last, False, 2)]
        forms += [(0, True, None)] if one_axis else \
            [((0, last), False, None), (tuple(range(1, len(shape))), True, 2)]
        for axis, keepdims, split_every in forms:
            args = ("max",) if name == "reduce" else ()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
                got = getattr(nk, name)(x, *args, axis=axis, keepdims=keepdims,
                                        split_every=split_every)
                got = dask.compute(got)[0]
                wide = a.astype(np.float64) if a.dtype.kind == "f" else a
                want = ref(wide, axis=axis, keepdims=keepdims)
            if name.endswith("_indices"):
                arg = np.argmax if name.startswith("max") else np.argmin
                want = (want, arg(wide, axis=axis, keepdims=keepdims))
            for g, w in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                g, w = np.asarray(g), np.asarray(w)
                assert g.shape == w.shape, (name, chunks, axis, keepdims)
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5,
                                           err_msg=f"{name} {chunks} {axis} {keepdims}")


def test_strategy_reaches_the_chunks_and_errors_are_raised_at_once():
    x = da.from_array(A, chunks=CHUNKS)
    ref = A.sum(axis=1)
    _check(nk.sum(x, axis=1, strategy="atomic_fold/shared_tree"), ref, rtol=1e-12)
    with pytest.raises(ValueError, match="strategy"):
        nk.sum(x, strategy="no_such_strategy")
    with pytest.raises(ValueError, match="commutative"):
        nk.reduce(x, last_nonzero, strategy="atomic_fold/shared_tree")
    with pytest.raises(TypeError, match="out="):
        nk.sum(x, out=np.empty(()))
    with pytest.raises(TypeError, match="Dask"):
        nk.sort(x)


def test_same_bits_run_to_run():
    x = da.from_array(np.random.default_rng(5).standard_normal(2000).astype(np.float32),
                      chunks=280)
    first = nk.sum(x, split_every=3).compute()
    assert nk.sum(x, split_every=3).compute().tobytes() == first.tobytes()


@pytest.mark.parametrize("shape,chunks,keepdims", [
    ((1000,), 260, False),                 # 4 blocks: one aggregate at the default 4
    ((20, 70), (10, 35), True),            # 2 x 2 blocks, a 2-D aggregate
    ((20, 70), (20, (0, 70)), False),      # a zero-size block
])
def test_whole_array_graph_is_two_plain_layers_with_the_trees_bits(monkeypatch, shape,
                                                                  chunks, keepdims):
    """A reduction of every axis whose blocks fit one aggregate is two layers of
    plain tasks, and gives the bits of dask.array.reduction's graph of the same
    chunks (the same calls on the same values in the same order)."""
    from numbakern.api import dask as nk_dask

    a = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    x = da.from_array(a, chunks=chunks)
    lean = nk.sum(x, keepdims=keepdims)
    assert len(lean.__dask_graph__().layers) == len(x.__dask_graph__().layers) + 2
    assert lean.shape == np.sum(a, keepdims=keepdims).shape
    lean_arg = nk.argmax(x)
    got = _check(lean, np.sum(a.astype(np.float64), keepdims=keepdims).astype(np.float32),
                 rtol=1e-5, like=da.sum(x, keepdims=keepdims))
    with monkeypatch.context() as m:
        m.setattr(nk_dask, "_one_aggregate", lambda *args: False)
        tree = nk.sum(x, keepdims=keepdims)
        assert tree.name != lean.name  # dask.array.reduction's own graph
        tree_arg = nk.argmax(x)
        assert tree.compute().tobytes() == got.tobytes()
        assert tree_arg.compute() == lean_arg.compute() == np.argmax(a)


def test_whole_array_graph_keeps_the_tree_past_one_aggregate():
    """More blocks than one aggregate takes (``split_every``): Dask's tree, as before."""
    a = np.arange(64.0, dtype=np.float32)
    x = da.from_array(a, chunks=8)
    assert len(nk.sum(x, split_every=2).__dask_graph__().layers) == \
        len(x.__dask_graph__().layers) + 4  # the chunks, two partial layers, the aggregate
    _check(nk.sum(x, split_every=2), np.sum(a), exact=True)
    _check(nk.sum(x, split_every={0: 8}), np.sum(a), exact=True)


@pytest.mark.parametrize("split_every", [1, 0, -1, {0: 1}, {1: 1}, {0: 4, 1: 0}, {1: -1}])
@pytest.mark.parametrize("name", ["sum", "max", "nanmax", "var", "argmax", "ptp"])
def test_split_every_below_two_is_refused_at_once(name, split_every):
    """A tree that combines fewer than 2 blocks at a time gives wrong sums (Dask's
    own reduction too, with 1 in a dict): refused when the graph is built."""
    x = da.from_array(np.arange(7 * 13, dtype=np.float32).reshape(7, 13),
                      chunks=((3, 4), (5, 3, 5)))
    for axis in (None, 0, 1):
        with pytest.raises(ValueError, match=r"split_every .*int >= 2"):
            getattr(nk, name)(x, axis=axis, split_every=split_every)


def test_split_every_of_another_type_is_refused_and_two_is_taken():
    x = da.from_array(np.arange(7 * 13, dtype=np.float32).reshape(7, 13),
                      chunks=((3, 4), (5, 3, 5)))
    for bad in (2.5, "4", {0: 2.0}):
        with pytest.raises(TypeError, match="split_every"):
            nk.sum(x, split_every=bad)
    with dask.config.set(split_every={0: 1}):  # Dask's config, used where none is given
        with pytest.raises(ValueError, match="split_every"):
            nk.sum(x)
    a = np.arange(7 * 13, dtype=np.float32).reshape(7, 13)
    for split_every in (2, {0: 2}, {1: 2}, {0: 2, 1: 3}, np.int64(3)):
        for axis in (None, 0, 1):
            _check(nk.sum(x, axis=axis, split_every=split_every), a.sum(axis=axis),
                   exact=True)


def test_whole_array_sum_of_up_to_32_blocks_is_one_aggregate():
    """With no ``split_every`` (argument or Dask config), a whole-array reduction of
    up to 32 blocks is the chunk layer and one aggregate; past 32 blocks, or with a
    ``split_every`` set in Dask's config, Dask's tree."""
    a = np.arange(2 * 33, dtype=np.int64)
    for blocks, extra in ((16, 2), (32, 2), (33, 4)):  # 33: 33 -> 9 -> 3 -> 1 at 4
        x = da.from_array(a[:2 * blocks], chunks=2)
        base = len(x.__dask_graph__().layers)
        assert len(nk.sum(x).__dask_graph__().layers) == base + extra, blocks
        if blocks > 16:  # computed on either side of the edge (16 is 32's graph)
            _check(nk.sum(x), a[:2 * blocks].sum(), exact=True)
    x = da.from_array(np.arange(64.0).reshape(8, 8), chunks=2)  # 4 x 4 blocks: one
    # aggregate (a 2-D one computes in test_whole_array_graph_is_two_plain_layers...)
    assert len(nk.max(x).__dask_graph__().layers) == len(x.__dask_graph__().layers) + 2
    with dask.config.set(split_every=4):  # (Dask's tree computes in the tests above)
        x = da.from_array(a[:32], chunks=2)
        assert len(nk.sum(x).__dask_graph__().layers) == \
            len(x.__dask_graph__().layers) + 3  # 16 -> 4 -> 1


def test_layer_names_are_the_calls_own():
    """Layer names are deterministic and tell calls apart: the same call, the same
    name; another op, strategy, dtype, keepdims, input or user's op, another name."""
    a = np.arange(40.0)
    x = da.from_array(a, chunks=10)
    y = da.from_array(a + 1, chunks=10)
    assert nk.sum(x).name == nk.sum(x).name
    assert nk.argmax(x).name == nk.argmax(x).name
    names = {nk.sum(x).name, nk.sum(y).name, nk.prod(x).name, nk.max(x).name,
             nk.sum(x, dtype=np.float32).name, nk.sum(x, keepdims=True).name,
             nk.sum(x, strategy="two_pass/shared_tree").name,
             nk.sum(x, strategy="atomic_fold/shared_tree").name,
             nk.argmax(x).name, nk.argmin(x).name, nk.argmax(x, tie_break_left=False).name}

    @nk.op(identity=0.0)
    def plus(p, q):
        return p + q

    @nk.op(identity=0.0)
    def plus_again(p, q):
        return p + q

    names |= {nk.reduce(x, plus).name, nk.reduce(x, plus_again).name}
    assert len(names) == 13
    assert nk.reduce(x, plus).name == nk.reduce(x, plus).name
    _check(nk.reduce(x, plus), a.sum(), exact=True)


def test_results_carry_numbakerns_optimiser_which_culls_without_linear_fusion():
    """Every lazy result (a pair's two halves too) computes with
    ``numbakern.api.dask.optimize``: the same values as with dask.array's optimiser,
    blockwise layers fused, the chunks a slice does not need culled, no task fused
    into a subgraph; with ``optimization.fuse.active`` set to True, Dask's own
    optimiser."""
    from dask.array.optimization import optimize as dask_optimize

    from numbakern.api.dask import optimize

    x = da.from_array(A, chunks=CHUNKS)
    pair = nk.max_with_indices(x, axis=1)
    results = [nk.sum(x * 2 + 1), nk.argmax(x, axis=0), nk.cumsum(x, axis=1), *pair]
    for lazy in results:
        assert lazy.__dask_optimize__ is optimize
        ours = lazy.compute()
        lazy.__dask_optimize__ = dask_optimize
        np.testing.assert_array_equal(ours, lazy.compute())
    chain = results[0]  # x * 2 + 1: two blockwise layers fused into one task a block
    fused = dict(optimize(chain.__dask_graph__(), chain.__dask_keys__()))
    assert len(fused) == len(dict(chain.__dask_graph__())) - x.npartitions
    head = nk.cumsum(x, axis=0)[:5]  # the first row of blocks: 3 blocks scanned, not 12
    graph, keys = head.__dask_graph__(), head.__dask_keys__()
    culled = dict(optimize(graph, keys))
    scans = [k for k in culled if isinstance(k, tuple) and "cumsum" in k[0]]
    assert 0 < len(scans) < len([k for k in dict(graph) if isinstance(k, tuple)
                                 and "cumsum" in k[0]])
    assert not any(str(k[0]).startswith(("array-cumsum", "cumsum-array"))
                   for k in culled if isinstance(k, tuple))  # nothing renamed by fusion
    np.testing.assert_allclose(head.compute(), np.cumsum(A, axis=0)[:5], rtol=1e-12)
    with dask.config.set({"optimization.fuse.active": True}):
        assert dict(optimize(graph, keys)).keys() == dict(dask_optimize(graph, keys)).keys()


# --- argmax and friends ------------------------------------------------------------


def _ties_and_nans():
    a = np.random.default_rng(6).integers(0, 5, size=(9, 70)).astype(np.float32)
    a[:, 31] = 9.0  # a tie across the chunk edge at 32: the first must win
    a[:, 32] = 9.0
    a[2, 40] = np.nan  # NaN wins
    a[2, 60] = np.nan
    a[5, 2] = np.nan
    return a


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, True), (-1, True)])
def test_argmax_argmin_global_indices_ties_and_nan(axis, keepdims):
    a = _ties_and_nans()
    x = da.from_array(a, chunks=((4, 0, 5), (32, 32, 6)))
    _check(nk.argmax(x, axis=axis, keepdims=keepdims, split_every=2),
           np.argmax(a, axis=axis, keepdims=keepdims), exact=True)
    _check(nk.argmin(x, axis=axis, keepdims=keepdims),
           np.argmin(a, axis=axis, keepdims=keepdims), exact=True)
    values, indices = nk.max_with_indices(x, axis=axis, keepdims=keepdims)
    v, i = dask.compute(values, indices)
    np.testing.assert_array_equal(v, np.max(a, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(i, np.argmax(a, axis=axis, keepdims=keepdims))
    assert values.dtype == a.dtype and indices.dtype == np.int64


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, True), (1, False)])
def test_nanargmax_nanargmin_count_nan_as_infinities_across_chunks(axis, keepdims):
    """A NaN counts as -inf (+inf) at its own index, also where a chunk's slice holds
    nothing but NaN ([nan | -inf] gives 0, as NumPy); a whole slice of NaN raises
    NumPy's error at compute time."""
    a = np.random.default_rng(9).integers(0, 5, size=(6, 40)).astype(np.float32)
    a[:4, :3] = np.nan  # chunks of nothing but NaN, then ties with -inf
    a[:, 3] = -np.inf
    a[:, 4] = np.inf
    a[1, 5:] = np.nan  # a row of NaN but for -inf and inf
    a[4, 33:] = np.nan  # a later chunk of nothing but NaN
    x = da.from_array(a, chunks=((4, 0, 2), (3, 30, 7)))
    for name in ("nanargmax", "nanargmin"):
        _check(getattr(nk, name)(x, axis=axis, keepdims=keepdims, split_every=2),
               getattr(np, name)(a, axis=axis, keepdims=keepdims), exact=True)
    minus = da.from_array(np.array([np.nan, -np.inf, np.nan]), chunks=1)
    assert nk.nanargmax(minus).compute() == np.nanargmax([np.nan, -np.inf, np.nan]) == 0
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        nk.nanargmin(da.from_array(a[:4, :3], chunks=(2, 1)), axis=1).compute()
    ints = da.from_array(np.array([3, 9, 9, 1], np.int16), chunks=3)
    assert nk.nanargmax(ints).compute() == 1 and nk.nanargmin(ints).compute() == 3


def test_argmax_last_index_with_tie_break_right():
    a = np.array([1, 7, 3, 7, 7, 2], dtype=np.int32)
    x = da.from_array(a, chunks=2)
    assert nk.argmax(x, tie_break_left=False).compute() == 4
    assert nk.argmax(x).compute() == 1
    with pytest.raises(ValueError, match="empty"):
        nk.argmax(da.zeros(0, chunks=1)).compute()


def _last(arg, a, axis=None, keepdims=False):
    """NumPy's arg function with the last index winning ties (and the last NaN)."""
    if axis is None:
        flat = a.ravel()[::-1]
        i = flat.size - 1 - arg(flat)
        return np.reshape(i, (1,) * a.ndim) if keepdims else i
    i = a.shape[axis] - 1 - arg(np.flip(a, axis), axis=axis, keepdims=keepdims)
    return i


# (max's tie_break_left, min's): each form takes both directions and both tie breaks,
# and each (direction, tie break) pair meets a whole-array and a one-axis form
@pytest.mark.parametrize("axis,keepdims,split_every,lefts", [
    (None, False, 2, (True, False)), (None, True, None, (False, True)),
    (0, False, 2, (False, True)), (1, True, None, (True, False))])
def test_arg_forms_tie_break_right_nan_and_a_chunk_grid(axis, keepdims, split_every, lefts):
    """Ties and NaNs across a 2-D grid of chunks, in which the chunks' order is not
    their indices' order (a later chunk of the first row of chunks holds smaller flat
    indices than the first chunk's later rows): the first (last) index wins, NaN
    first."""
    a = _ties_and_nans()
    x = da.from_array(a, chunks=((4, 0, 5), (32, 32, 6)))
    for direction, arg, left in (("max", np.argmax, lefts[0]), ("min", np.argmin, lefts[1])):
        fn = nk.max_with_indices if direction == "max" else nk.min_with_indices
        pick = np.max if direction == "max" else np.min
        want = arg(a, axis=axis, keepdims=keepdims) if left else _last(
            arg, a, axis, keepdims)
        kw = dict(axis=axis, keepdims=keepdims, tie_break_left=left,
                  split_every=split_every)
        lazy = (nk.argmax if direction == "max" else nk.argmin)(x, **kw)
        values, indices = fn(x, **kw)
        got = dask.compute(lazy, values, indices)  # the chunks' tasks shared
        for lazy_one, one, expected in zip((lazy, values, indices), got, (
                want, pick(a, axis=axis, keepdims=keepdims), want)):
            assert isinstance(lazy_one._meta, np.ndarray)
            assert lazy_one.dtype == one.dtype == np.asarray(expected).dtype
            assert lazy_one.shape == np.shape(one) == np.shape(expected)
            np.testing.assert_array_equal(one, expected)
    b = np.zeros((9, 70), dtype=np.float32)
    b[[0, 3, 6], [40, 5, 2]] = 5.0  # flat 40 (chunk (0, 1)) before 215 (chunk (0, 0))
    y = da.from_array(b, chunks=((4, 0, 5), (32, 32, 6)))
    assert nk.argmax(y, split_every=split_every).compute() == 40
    assert nk.argmax(y, tie_break_left=False, split_every=split_every).compute() == 422


def test_arg_forms_over_three_axes_and_chunks_of_one():
    """Flat indices from chunks of every layout: whole rows, extent-1 axes, a zero-size
    chunk, axes cut in several places."""
    a = np.random.default_rng(8).permutation(4 * 5 * 6).reshape(4, 5, 6).astype(np.int32)
    ks = (a.argmax(), a.argmin(), 0, a.size - 1)  # where the maximum is put
    for c, chunks in enumerate((((1, 3), (2, 0, 3), (6,)), ((4,), (1, 4), (1, 1, 4)),
                                ((2, 2), (5,), (3, 3)))):
        x = da.from_array(a, chunks=chunks)
        for k in (ks[2 * c % 4], ks[(2 * c + 1) % 4]):  # two a chunking, each at least once
            b = a.copy()
            b.flat[k] = a.size  # the maximum here
            _check(nk.argmax(da.from_array(b, chunks=chunks)), np.argmax(b), exact=True)
        _check(nk.argmin(x, keepdims=True), np.argmin(a, keepdims=True), exact=True)
        _check(nk.argmax(x, axis=2), np.argmax(a, axis=2), exact=True)


def test_flat_indices_of_every_chunk_layout():
    """A chunk's flat index as the array's (numbakern/api/dask.py's ``_global_flat``,
    NumPy arithmetic only): every element of every chunk of several chunkings."""
    from numbakern.api.dask import _global_flat

    for shape, chunks in (((4, 5, 6), ((1, 3), (2, 3), (6,))),
                          ((4, 5, 6), ((4,), (1, 4), (1, 1, 4))),
                          ((3, 1, 7), ((1, 2), (1,), (3, 4))),
                          ((2, 3, 4, 5), ((1, 1), (3,), (2, 2), (5,))),
                          ((7,), ((3, 4),))):
        starts = [np.concatenate([[0], np.cumsum(c)[:-1]]) for c in chunks]
        for block in np.ndindex(*(len(c) for c in chunks)):
            chunk = tuple(c[b] for c, b in zip(chunks, block))
            offsets = tuple(int(s[b]) for s, b in zip(starts, block))
            local = np.arange(int(np.prod(chunk)), dtype=np.int64)
            coords = np.unravel_index(local, chunk)
            want = np.ravel_multi_index(tuple(c + o for c, o in zip(coords, offsets)),
                                        shape)
            np.testing.assert_array_equal(_global_flat(local, chunk, offsets, shape), want)


def test_arg_forms_with_empty_chunks_and_empty_arrays():
    a = np.array([3, 9, 1, 9, 2], dtype=np.float64)
    x = da.from_array(a, chunks=((0, 0, 2, 3, 0, 0),))  # a group of empty chunks only
    for split_every in (2, None):
        _check(nk.argmax(x, split_every=split_every), np.argmax(a), exact=True)
        _check(nk.argmin(x, split_every=split_every, tie_break_left=False), 2, exact=True)
    m = np.arange(24.0).reshape(4, 6)[:, ::-1].copy()
    y = da.from_array(m, chunks=((4,), (0, 0, 2, 4)))
    _check(nk.argmax(y, axis=1, split_every=2), np.argmax(m, axis=1), exact=True)
    values, indices = nk.min_with_indices(y, axis=1, keepdims=True, split_every=2)
    _check(values, m.min(axis=1, keepdims=True), exact=True)
    _check(indices, np.argmin(m, axis=1, keepdims=True), exact=True)
    for shape, axis in (((3, 0), 0), ((0, 3), 1)):  # nothing to reduce but no slice
        e = da.from_array(np.zeros(shape), chunks=(1, 1))
        _check(nk.argmax(e, axis=axis), np.argmax(np.zeros(shape), axis=axis), exact=True)
        values, indices = nk.max_with_indices(e, axis=axis)
        assert dask.compute(values, indices)[0].shape == (0,)
    for shape, axis in (((0, 0), 0), ((0, 3), 0), ((0, 3), None), ((3, 0), 1)):
        e = da.from_array(np.zeros(shape), chunks=(1, 1))
        with pytest.raises(ValueError, match="empty sequence"):
            nk.argmax(e, axis=axis).compute()


def test_arg_forms_on_integers_bools_and_0d():
    i = np.array([[5, -3, 5], [7, 7, -9]], dtype=np.int64)
    x = da.from_array(i, chunks=(1, 2))
    _check(nk.argmax(x), np.argmax(i), exact=True)
    _check(nk.argmax(x, tie_break_left=False), 4, exact=True)
    _check(nk.argmin(x, axis=0), np.argmin(i, axis=0), exact=True)
    b = np.array([False, False, True, False, True])
    _check(nk.argmax(da.from_array(b, chunks=2)), 2, exact=True)
    _check(nk.argmin(da.from_array(b, chunks=2), tie_break_left=False), 3, exact=True)
    z = da.from_array(np.array(2.5, dtype=np.float32))
    _check(nk.argmax(z), np.argmax(np.float32(2.5)), exact=True)
    values, indices = nk.max_with_indices(z)
    assert dask.compute(values, indices) == (np.float32(2.5), 0)


def test_arg_graph_is_the_chunks_then_the_tree():
    """The whole-array argmax of up to 32 chunks is two layers (the chunks, one
    aggregate returning the indices); max_with_indices adds one layer per field and
    shares argmax's chunk layer."""
    x = da.from_array(np.arange(64.0), chunks=8)
    base = len(x.__dask_graph__().layers)
    assert len(nk.argmax(x).__dask_graph__().layers) == base + 2
    values, indices = nk.max_with_indices(x)
    assert len(values.__dask_graph__().layers) == base + 3
    # one chunk layer for both: computed together, each chunk is reduced once
    assert len({*nk.argmax(x).__dask_graph__().layers, *values.__dask_graph__().layers,
                *indices.__dask_graph__().layers}) == base + 5
    assert len(nk.argmax(x, split_every=2).__dask_graph__().layers) == base + 4


def test_too_few_degrees_of_freedom_as_numpy():
    """Where count - ddof <= 0: nanvar of floats NaN, var (and nanvar of integers,
    which NumPy computes as var) M2 / 0."""
    a = np.array([1.0, 3.0, np.nan, 4.0])
    i = np.array([1, 3, 4])
    for values, name, ddof in ((a, "nanvar", 3), (a, "nanstd", 4), (i, "nanvar", 3),
                               (i, "nanstd", 3), (i, "var", 3), (a[:2], "var", 2),
                               (a, "std", 5)):
        x = da.from_array(values, chunks=2)
        want, words = _with_words(lambda: getattr(np, name)(values, ddof=ddof))
        for mean in (None, np.nanmean(values)):
            got, said = _with_words(
                lambda: getattr(nk, name)(x, ddof=ddof, mean=mean).compute())
            np.testing.assert_array_equal(got, want)
            assert said == words, (name, ddof)


def _with_words(call):
    """``call()``'s result and the set of its RuntimeWarnings' messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, {str(w.message) for w in caught if w.category is RuntimeWarning}


@pytest.mark.parametrize("name", ["argmax", "nanargmin", "var", "nanstd", "sum", "mean"])
def test_a_whole_array_result_computes_to_numpys_scalar(name):
    """As NumPy's reductions and dask.array's compute give: a NumPy scalar, not a 0-d
    array (the pair reductions' fields too)."""
    a = np.random.default_rng(3).standard_normal(70)
    x = da.from_array(a, chunks=((30, 0, 40),))
    got = getattr(nk, name)(x).compute()
    assert type(got) is type(getattr(np, name)(a)), type(got)
    assert [type(v.compute()) for v in nk.max_with_indices(x)] == [np.float64, np.int64]
    assert type(nk.argmax(x, keepdims=True).compute()) is np.ndarray


# --- scans ---------------------------------------------------------------------------

S = np.random.default_rng(7).integers(-5, 5, size=(7, 70)).astype(np.int16)
S_CHUNKS = ((3, 0, 4), (32, 0, 6, 32))  # a zero-size chunk, edges at a warp


@pytest.mark.parametrize("method,axis", [
    ("sequential", None), ("sequential", 0), ("sequential", 1), ("sequential", -1),
    ("blelloch", None), ("blelloch", 0), ("blelloch", -1)])  # -1: 1, once a method
def test_cumsum_both_methods_every_axis(method, axis):
    x = da.from_array(S, chunks=S_CHUNKS)
    lazy = nk.cumsum(x, axis=axis, method=method)
    _check(lazy, np.cumsum(S, axis=axis), exact=True, like=da.cumsum(x, axis=axis))


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_scans_over_zero_size_chunks_reversed_and_flattened(method):
    """Dask's reversing slice emptied a (1, 0, 1) axis, and its reshape(-1) of an N-d
    array with zero-size chunks failed at compute: the zero-size chunks are dropped
    first."""
    b = np.array([0.5, 1.5, 2.0])
    x = da.from_array(b, chunks=((1, 0, 2),))
    _check(nk.cumsum(x, reverse=True, method=method), np.cumsum(b[::-1])[::-1],
           exact=True)
    _check(nk.cumprod(x, reverse=True, exclusive=True, method=method),
           np.array([3.0, 2.0, 1.0]), exact=True)
    y = np.arange(6.0).reshape(2, 3)
    _check(nk.cumsum(da.from_array(y, chunks=((0, 2), (1, 0, 2))), method=method),
           np.cumsum(y), exact=True)
    empty = da.from_array(np.zeros((0, 3)), chunks=((0,), (1, 2)))
    _check(nk.cumsum(empty, method=method), np.zeros(0), exact=True)


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_scan_reverse_exclusive_and_dtype_kept(method):
    x = da.from_array(S, chunks=S_CHUNKS)
    rev = np.flip(np.cumsum(np.flip(S, 1), axis=1), 1)
    _check(nk.cumsum(x, axis=1, reverse=True, method=method), rev, exact=True)
    _check(nk.cumsum(x, axis=1, reverse=True, exclusive=True, method=method), rev - S,
           exact=True)
    _check(nk.cumsum(x, axis=0, exclusive=True, method=method), np.cumsum(S, 0) - S,
           exact=True)
    # dtype= kept by both methods (dask/dask#12097: Dask's blelloch loses it)
    f = da.from_array(np.full(40, 1.01), chunks=9)
    _check(nk.cumprod(f, dtype=np.float32, method=method),
           np.cumprod(np.full(40, 1.01), dtype=np.float32), rtol=1e-5)
    _check(nk.cumsum(x.astype(np.int8), method=method), np.cumsum(S.astype(np.int8)),
           exact=True)


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_carries_keep_numpys_special_values_across_chunks(method):
    """A built-in op's carry is applied by NumPy's ufunc: -0.0 stays -0.0, NaN and inf
    cross chunk edges as in NumPy's scans (max's NaN first, then inf)."""
    a = np.array([-0.0, -0.0, -0.0, 1.0, np.nan, 2.0, np.inf, -np.inf, 3.0],
                 dtype=np.float32)
    x = da.from_array(a, chunks=((1, 2, 0, 2, 4),))
    got = nk.cumsum(x, method=method).compute()
    np.testing.assert_array_equal(got, np.cumsum(a))
    assert np.signbit(got[:3]).all()
    for chunks in (((1, 0, 3),), ((0, 1, 0, 0, 3, 0),)):  # empty blocks carry nothing
        z = da.from_array(np.full(4, -0.0), chunks=chunks)
        assert np.signbit(nk.cumsum(z, method=method).compute()).all()
        assert np.signbit(nk.associative_scan(z, "sum", method=method).compute()).all()
    b = np.array([-np.inf, 1.0, np.inf, 2.0, np.nan, 5.0], dtype=np.float32)
    y = da.from_array(b, chunks=2)
    np.testing.assert_array_equal(nk.associative_scan(y, "max", method=method).compute(),
                                  np.maximum.accumulate(b))
    np.testing.assert_array_equal(nk.associative_scan(y[:4], "min", method=method).compute(),
                                  np.minimum.accumulate(b[:4]))
    i = da.from_array(np.array([0b1010, 0b0110, 0b0011, 0b1000], np.int32), chunks=1)
    np.testing.assert_array_equal(nk.associative_scan(i, "bitwise_xor").compute(),
                                  np.bitwise_xor.accumulate(i.compute()))


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_non_commutative_scan_keeps_order_across_chunks(method):
    a = np.zeros(90)
    a[[3, 40, 41, 77]] = [5.0, 2.0, 7.0, 1.0]
    x = da.from_array(a, chunks=((10, 25, 0, 30, 25),))
    ref = np.array([_last_nonzero(a[:i + 1]) for i in range(a.size)])
    _check(nk.associative_scan(x, last_nonzero, method=method), ref, exact=True)
    rev = np.array([_last_nonzero(a[i:][::-1]) for i in range(a.size)])
    _check(nk.associative_scan(x, last_nonzero, reverse=True, method=method), rev,
           exact=True)


def _tasks(lazy, part: str) -> list:
    """The keys of ``lazy``'s own layer whose name has ``part`` (``"-total-"``...)."""
    layer = lazy.__dask_graph__().layers[lazy.name]
    return [k for k in layer if part in k[0]]


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_each_block_is_scanned_once_from_its_carry(method):
    """The carry enters each block's scan kernel: no block is scanned and then carried
    in a second pass (no ``-local-`` scans). Along axis 1 of S: two rows of blocks
    (the zero-size chunks are dropped first), three blocks in each, so two totals a
    row (sequential: read off the block before; blelloch: a reduce of each block but
    the last) and, for the tree, one combine a row. A float cumprod keeps the
    separate pass."""
    x = da.from_array(S, chunks=S_CHUNKS)
    lazy = nk.cumsum(x, axis=1, method=method)
    assert not _tasks(lazy, "-local-")
    assert len(_tasks(lazy, "-total-")) == 4
    assert len(_tasks(lazy, "-carry-")) == (0 if method == "sequential" else 2)
    f = da.from_array(np.full(40, 1.01), chunks=9)
    assert _tasks(nk.cumprod(f, method=method), "-local-")
    i = np.array([3, -2, 1, 5, -1, 2, 7, 0, 4], np.int8)  # an integer product: carried
    lazy = nk.cumprod(da.from_array(i, chunks=((2, 0, 4, 3),)), exclusive=True, method=method)
    assert not _tasks(lazy, "-local-")
    _check(lazy, np.concatenate([[1], np.cumprod(i)[:-1]]), exact=True)


def test_sequential_chain_gives_the_whole_calls_bits_on_warp_rows():
    """Rows scanned a warp each, chunk edges at multiples of 32: each chunk starts from
    the last result before it, as the whole row's scan does, so the float bits are
    the whole-array call's."""
    a = np.random.default_rng(4).standard_normal((9, 70)).astype(np.float32)
    x = da.from_array(a, chunks=((4, 5), (32, 32, 6)))
    np.testing.assert_array_equal(nk.cumsum(x, axis=1).compute(), nk.cumsum(a, axis=1))


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_mapped_ops_carry_states_not_elements(method):
    """nansum and count_nonzero map elements (NaN to 0, non-zero to 1) but carries are
    results: a NaN total stays NaN (NumPy's nancumsum after inf and -inf), a count
    adds up, and an exclusive scan's total maps the chunk's last element."""
    a = np.array([np.inf, -np.inf, 1.0, np.nan, 2.0, 0.0])
    x = da.from_array(a, chunks=((1, 2, 0, 3),))
    np.testing.assert_array_equal(nk.associative_scan(x, "nansum", method=method).compute(),
                                  np.nancumsum(a))
    b = np.array([1.0, np.nan, 0.0, 2.0, np.nan, 3.0, 0.0])
    y = da.from_array(b, chunks=((2, 3, 2),))
    _check(nk.associative_scan(y, "nansum", exclusive=True, method=method),
           np.nancumsum(b) - np.nan_to_num(b), exact=True)
    _check(nk.associative_scan(y, "count_nonzero", exclusive=True, method=method),
           np.cumsum(b != 0) - (b != 0), exact=True)
    _check(nk.associative_scan(y, "count_nonzero", method=method), np.cumsum(b != 0),
           exact=True)


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_nan_scans_as_numpys_across_chunks(method):
    """nancumsum and nancumprod of Dask arrays: NaN enters as 0 or 1 in every chunk,
    while a carried inf or NaN total (inf - inf) crosses chunk edges as NumPy's; the
    dtype is NumPy's (int8 widens), exclusive and reverse as the single call's."""
    a = np.array([np.nan, 2.0, np.inf, np.nan, -np.inf, 0.5, np.nan, 3.0, 4.0])
    x = da.from_array(a, chunks=((2, 0, 3, 4),))
    with np.errstate(invalid="ignore"):  # inf - inf, as NumPy's nancumsum says
        sums = np.nancumsum(a)
    _check(nk.nancumsum(x, method=method), sums, exact=True, like=da.nancumsum(x, axis=0))
    _check(nk.nancumprod(x, method=method), np.nancumprod(a), exact=True,
           like=da.nancumprod(x, axis=0))
    b = np.array([np.nan, 2.0, -1.5, np.nan, 0.5, 3.0, np.nan])
    y = da.from_array(b, chunks=((3, 4),))
    _check(nk.nancumsum(y, exclusive=True, method=method),
           np.nancumsum(b) - np.nan_to_num(b), exact=True)
    _check(nk.nancumprod(y, reverse=True, method=method),
           np.flip(np.nancumprod(np.flip(b))), exact=True)
    i = da.from_array(S.astype(np.int8), chunks=S_CHUNKS)
    _check(nk.nancumsum(i, axis=1, method=method), np.nancumsum(S.astype(np.int8), axis=1),
           exact=True)


@pytest.mark.parametrize("axis", [0, -1])
def test_array_api_cumulative_functions(axis):
    """NumPy 2's cumulative_sum / cumulative_prod (which dask.array lacks): axis
    required past one dimension, include_initial a block of the empty sum or product
    first, NumPy's dtypes."""
    x = da.from_array(S, chunks=S_CHUNKS)
    for fn, ref in ((nk.cumulative_sum, np.cumulative_sum),
                    (nk.cumulative_prod, np.cumulative_prod)):
        for initial in (False, True):
            _check(fn(x, axis=axis, include_initial=initial),
                   ref(S, axis=axis, include_initial=initial), exact=True)
    _check(nk.cumulative_sum(x, axis=(1,)), np.cumulative_sum(S, axis=(1,)), exact=True)
    _check(nk.cumulative_sum(x, axis=1, dtype=np.float32),
           np.cumulative_sum(S, axis=1, dtype=np.float32), exact=True)
    scalar = da.from_array(np.array(3.0), chunks=())
    _check(nk.cumulative_prod(scalar, include_initial=True),
           np.cumulative_prod(np.array(3.0), include_initial=True), exact=True)
    with pytest.raises(ValueError, match="cumulative_sum: axis is required"):
        nk.cumulative_sum(x)


def test_a_strategy_without_a_carry_takes_the_separate_pass():
    class NoCarry(nk.strategies.DecoupledLookback):
        takes_carry = False

    x = da.from_array(S, chunks=S_CHUNKS)
    lazy = nk.cumsum(x, axis=1, exclusive=True, strategy=NoCarry(), layout="tiles")
    assert _tasks(lazy, "-local-")
    _check(lazy, np.cumsum(S, 1) - S, exact=True)


def test_scan_argument_errors():
    x = da.from_array(S, chunks=S_CHUNKS)
    with pytest.raises(ValueError, match="method"):
        nk.cumsum(x, method="parallel")
    with pytest.raises(TypeError, match="fields"):
        nk.associative_scan(x, "argmax")


# --- softmax -------------------------------------------------------------------------


def _softmax_ref(a, axis, log=False):
    a = a.astype(np.float64)
    m = np.max(a, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        shifted = a - m
        s = np.exp(shifted).sum(axis=axis, keepdims=True)
        return shifted - np.log(s) if log else np.exp(shifted) / s


@pytest.mark.parametrize("chunks", [((5,), (70,)), ((2, 3), (32, 0, 38))])
def test_softmax_along_a_chunked_axis(chunks):
    a = np.random.default_rng(8).standard_normal((5, 70)).astype(np.float32) * 3
    a[1, :40] = -np.inf  # a chunk of nothing but -inf in a finite row
    a[2, 10] = np.nan
    a[3, :] = -np.inf
    x = da.from_array(a, chunks=chunks)
    for axis in (-1, 0):
        for log in (False, True):
            fn = nk.log_softmax if log else nk.softmax
            lazy = fn(x, axis=axis)
            assert lazy.dtype == np.float32 and isinstance(lazy._meta, np.ndarray)
            np.testing.assert_allclose(lazy.compute(), _softmax_ref(a, axis, log),
                                       rtol=1e-5, atol=1e-5, equal_nan=True)


def test_softmax_of_whole_rows_is_one_plain_layer():
    """Rows held in one chunk: one task a chunk (no blockwise layer), named by the
    call (softmax and log_softmax, and their keywords, apart)."""
    a = np.random.default_rng(12).standard_normal((6, 40)).astype(np.float32)
    x = da.from_array(a, chunks=(2, 40))
    lazy = nk.softmax(x)
    assert len(lazy.__dask_graph__().layers) == len(x.__dask_graph__().layers) + 1
    assert lazy.chunks == x.chunks and lazy.name == nk.softmax(x).name
    assert len({lazy.name, nk.log_softmax(x).name, nk.softmax(x, layout="warp").name}) == 3
    np.testing.assert_allclose(lazy.compute(), _softmax_ref(a, -1), rtol=1e-5, atol=1e-6)


def test_softmax_float16_and_errors():
    h = np.random.default_rng(9).standard_normal((3, 40)).astype(np.float16)
    lazy = nk.softmax(da.from_array(h, chunks=(3, 15)))
    assert lazy.dtype == np.float16
    np.testing.assert_allclose(lazy.compute(), _softmax_ref(h, -1), rtol=2e-3, atol=1e-3)
    with pytest.raises(TypeError, match="x must be float16"):  # as the NumPy form
        nk.softmax(da.zeros(4, dtype=np.int32, chunks=2))
    for source in (np.int32, np.bool_):  # with dtype=: cast first, as the NumPy form
        ints = np.arange(5).astype(source)
        for fn in (nk.softmax, nk.log_softmax):
            lazy = fn(da.from_array(ints, chunks=2), dtype=np.float32)
            assert lazy.dtype == np.float32
            np.testing.assert_allclose(lazy.compute(), fn(ints, dtype=np.float32),
                                       rtol=1e-6)  # rows split: the elementwise map's


def test_softmax_of_a_0d_array_is_its_one_element_row_as_the_numpy_form():
    for value in (3.0, np.nan):
        a = np.array(value, np.float32)
        for fn in (nk.softmax, nk.log_softmax):
            lazy = fn(da.from_array(a), axis=-1)
            assert lazy.shape == () and lazy.dtype == np.float32
            got = lazy.compute()
            assert got.shape == ()
            np.testing.assert_array_equal(got, fn(a))
    with pytest.raises(np.exceptions.AxisError, match="0-d input"):
        nk.softmax(da.from_array(np.array(1.0)), axis=1)


@pytest.mark.parametrize("chunks", [(2, 64), (2, 32)], ids=["rows whole", "rows split"])
def test_softmax_keywords_are_checked_when_the_graph_is_built(chunks):
    x = da.from_array(np.ones((4, 64), np.float32), chunks=chunks)
    with pytest.raises(ValueError, match="layout must be"):
        nk.softmax(x, layout="bogus")
    with pytest.raises(TypeError, match="fused must be"):
        nk.log_softmax(x, fused="yes")
    with pytest.raises(ValueError, match="max_strategy must be one of"):
        nk.softmax(x, max_strategy="nope")


# --- histogram and bincount ---------------------------------------------------------------


def test_histogram_and_bincount_sum_chunk_counts():
    f = np.random.default_rng(10).standard_normal((6, 50))
    x = da.from_array(f, chunks=(4, 20))
    for rng in (None, (-1.0, 1.0)):
        hist, edges = nk.histogram(x, bins=7, range=rng)
        ref_hist, ref_edges = np.histogram(f, bins=7, range=rng)
        _check(hist, ref_hist, exact=True)
        np.testing.assert_array_equal(edges, ref_edges)
    i = np.random.default_rng(11).integers(0, 20, size=300)
    xi = da.from_array(i, chunks=((70, 0, 130, 100),))
    _check(nk.bincount(xi, minlength=25), np.bincount(i, minlength=25), exact=True)
    _check(nk.bincount(xi), np.bincount(i), exact=True)
    with pytest.raises(ValueError, match="negative"):
        nk.bincount(da.from_array(np.array([1, -2, 3]), chunks=2))


@pytest.mark.parametrize("edges", [[-1, 0, 0, 2], np.array([-3, -0.5, 0.25, 3], np.float32),
                                   [1.0], []], ids=["ints", "float32", "one", "none"])
def test_histograms_of_given_edges_sum_chunk_counts(edges):
    """Each chunk binned between the edges (range= ignored, as NumPy's), summed; weights
    and density as the equal-width form's; uneven and empty chunks."""
    f = np.random.default_rng(14).standard_normal(157)
    f[::13] = np.nan
    w = np.random.default_rng(15).uniform(0, 2, 157)
    x = da.from_array(f, chunks=((40, 0, 50, 67),))
    hist, got_edges = nk.histogram(x, bins=edges, range=(5, 1))
    want, want_edges = np.histogram(f, bins=edges)
    _check(hist, want, exact=True)
    assert got_edges.dtype == want_edges.dtype
    np.testing.assert_array_equal(got_edges, want_edges)
    weighted = nk.histogram(x, bins=edges, weights=da.from_array(w, chunks=60))[0]
    _check(weighted, np.histogram(f, bins=edges, weights=w)[0], rtol=1e-12)
    with np.errstate(invalid="ignore"):  # the repeated edge's zero-width bin: 0 / 0
        want = np.histogram(f, bins=edges, density=True)[0]
        got = nk.histogram(x, bins=edges, density=True)[0].compute()
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_ragged_bins_of_a_dask_histogram_are_named_as_the_eager_calls():
    with pytest.raises(ValueError, match="^histogram: bins cannot be read as an array"):
        nk.histogram(da.from_array(np.arange(4.0), chunks=2), bins=[[1], [2, 3]])


def test_bfloat16_edges_of_a_dask_histogram_are_read_as_float32_as_the_eager_calls():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f = np.array([0.5, 1.5, 2.5], np.float32)
    edges = np.array([0, 1, 2, 3], ml_dtypes.bfloat16)
    with pytest.warns(nk.CopyWarning, match="bins is bfloat16"):
        hist, got_edges = nk.histogram(da.from_array(f, chunks=2), edges)
    _check(hist, np.histogram(f, edges)[0], exact=True)
    assert got_edges.dtype == np.float32


@pytest.mark.parametrize("fn", ["sum", "nansum", "mean", "nanmean", "prod"])
def test_a_float16_dtype_casts_each_element_of_every_chunk(fn):
    """NumPy casts each element to a float16 dtype= before it adds: 1e5 is inf, so the
    chunks' inf and -inf make NaN, as the eager call's (not a finite float32 sum)."""
    a = np.array([1e5, -1e5, 2049.0, 2051.0, 1.0, 3.0, 1e-8, 7.0])
    with np.errstate(all="ignore"):
        want = getattr(np, fn)(a, dtype=np.float16)
    got = getattr(nk, fn)(da.from_array(a, chunks=3), dtype=np.float16).compute()
    assert got.dtype == np.float16 and np.isnan(want) and np.isnan(got)


@pytest.mark.parametrize("weights_as", ["numpy", "dask"])
def test_weighted_and_density_histograms_over_chunks(weights_as):
    """Each chunk's float64 sums, summed and cast to the weights' dtype; density
    divided lazily; weights of another chunking taken in x's chunks."""
    f = np.random.default_rng(12).standard_normal((6, 50))
    w = np.random.default_rng(13).standard_normal((6, 50)).astype(np.float32)
    x = da.from_array(f, chunks=(4, 20))
    weights = w if weights_as == "numpy" else da.from_array(w, chunks=(3, 50))
    for density in (False, True):
        hist, edges = nk.histogram(x, bins=7, range=(-1.0, 1.0), weights=weights,
                                   density=density)
        ref, ref_edges = np.histogram(f, bins=7, range=(-1.0, 1.0), weights=w,
                                      density=density)
        assert isinstance(hist, da.Array)
        _check(hist, ref, rtol=1e-5)
    counts = nk.histogram(x, bins=5, weights=(w > 0).astype(np.int16))[0]
    _check(counts, np.histogram(f, bins=5, weights=(w > 0).astype(np.int16))[0], exact=True)
    _check(nk.histogram(x, bins=5, density=True)[0], np.histogram(f, 5, density=True)[0],
           rtol=1e-12)
    with pytest.raises(ValueError, match="weights should have the same shape as a"):
        nk.histogram(x, bins=5, weights=w[:3])


# --- schedulers --------------------------------------------------------------------------


def test_threaded_scheduler_runs_chunks_side_by_side():
    a = np.arange(80, dtype=np.float64)
    x = da.from_array(a, chunks=10)
    b = np.random.default_rng(3).standard_normal((8, 40)).astype(np.float32)
    # eight chunks, four at a time: the first chunks build each kernel side by side,
    # the later ones take it from the cache (and replay its recorded launches)
    with dask.config.set(scheduler="threads", num_workers=4):
        assert nk.sum(x).compute() == a.sum()
        np.testing.assert_array_equal(nk.cumsum(x).compute(), np.cumsum(a))
        assert nk.argmax(x).compute() == 79
        got = nk.softmax(da.from_array(b, chunks=(1, 40)), axis=1).compute()
        e = np.exp(b.astype(np.float64) - b.max(axis=1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5,
                                   atol=1e-7)


CLUSTER = """
import numpy as np, dask, dask.array as da, numbakern as nk
from distributed import Client, LocalCluster

@nk.op(identity=0.0, commutative=False)
def last_nonzero(a, b):
    return b if b != 0 else a

if __name__ == "__main__":
    a = np.zeros(40); a[[5, 18, 30]] = [1.0, 2.0, 3.0]
    x = da.from_array(a, chunks=12)  # four chunks, the last short
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        r, s, i = dask.compute(nk.reduce(x, last_nonzero),
                               nk.associative_scan(x, last_nonzero, method="blelloch"),
                               nk.argmax(x))
    ref = np.maximum.accumulate(np.where(a != 0, np.arange(40), -1))
    assert r == 3.0, r
    assert (s == np.where(ref >= 0, a[np.maximum(ref, 0)], 0.0)).all()
    assert i == 30, i
    print("ok")
"""


@pytest.mark.slow
def test_local_cluster_of_two_processes_with_a_users_op(tmp_path):
    script = tmp_path / "cluster.py"
    script.write_text(textwrap.dedent(CLUSTER))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_bincount_refuses_two_dimensions_naming_the_shape():
    with pytest.raises(ValueError, match=r"1-D, got shape \(2, 3\)"):
        nk.bincount(da.zeros((2, 3), dtype=np.int64, chunks=1))


def test_bincount_past_the_largest_array_says_so_as_the_eager_form():
    """The Dask form named a ``num_bins`` argument bincount does not have."""
    x = np.array([2**62, 1])
    for given in (x, da.from_array(x, chunks=1)):
        with pytest.raises(ValueError, match=r"x holds 4611686018427387904: bincount would "
                                             r"need 4611686018427387905 int64 counts"):
            nk.bincount(given)


def test_dask_is_imported_only_when_a_dask_array_is_passed():
    code = ("import sys, numpy as np, numbakern as nk; nk.sum(np.ones(3)); "
            "nk.cumsum(np.ones(3)); assert 'dask' not in sys.modules, 'dask imported'; "
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("chunks", [((5,), (70,)), ((5,), (32, 38))], ids=["rows", "split"])
def test_softmax_dtype_casts_first_as_torch(chunks):
    a = np.random.default_rng(4).standard_normal((5, 70)).astype(np.float16)
    x = da.from_array(a, chunks=chunks)
    for fn, log in ((nk.softmax, False), (nk.log_softmax, True)):
        expected = _softmax_ref(a.astype(np.float64), 1, log=log)
        _check(fn(x, axis=1, dtype=np.float64), expected, rtol=1e-12)
    with pytest.raises(TypeError,
                       match="dtype must be float16, float32, float64 or ml_dtypes.bfloat16"):
        nk.softmax(x, dtype=np.int8)


def test_a_dask_array_in_a_later_argument_is_refused():
    """Only the first argument routes to the Dask forms; a Dask array elsewhere would
    be computed whole on the host by NumPy's conversion."""
    offsets = da.from_array(np.array([0, 2, 4]), chunks=2)
    with pytest.raises(TypeError, match="segmented_reduce: a Dask array is taken as the "
                                        "first argument only"):
        nk.segmented_reduce(np.arange(4.0), offsets)
    with pytest.raises(TypeError, match="softmax_backward: a Dask array"):
        nk.softmax_backward(np.ones((2, 3)), dy=da.ones((2, 3), chunks=1))


@pytest.mark.parametrize("name", ["segmented_reduce", "segmented_argmax",
                                  "segmented_argmin"])
def test_a_function_without_a_dask_form_is_refused_under_its_own_name(name):
    x = da.from_array(np.arange(4.0), chunks=2)
    with pytest.raises(TypeError, match=f"numbakern.{name} does not take Dask arrays"):
        getattr(nk, name)(x, np.array([0, 2, 4]))


def test_variance_takes_numpys_correction():
    x = np.random.default_rng(9).standard_normal((6, 40))
    lazy = da.from_array(x, chunks=(3, 17))
    _check(nk.std(lazy, axis=1, correction=1), np.std(x, axis=1, correction=1), rtol=1e-12)
    with pytest.raises(ValueError, match="ddof and correction"):
        nk.var(lazy, ddof=1, correction=1)


def test_bfloat16_chunks_compute_as_the_numpy_forms():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = np.random.default_rng(4).standard_normal((3, 10)).astype(bf16)
    x[1, 3] = np.nan
    lazy = da.from_array(x, chunks=(2, 4))
    assert nk.sum(da.from_array(np.ones(8, bf16), chunks=4)).compute() == 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, kw in (("sum", {"axis": 1}), ("mean", {}), ("nanvar", {"axis": 1}),
                         ("std", {"axis": 0, "ddof": 1}), ("argmax", {"axis": 1}),
                         ("max_with_indices", {"axis": 1}), ("cumsum", {"axis": 1}),
                         ("log_softmax", {"axis": 1}), ("nanmax", {"axis": 0}),
                         ("count_nonzero", {"axis": 1}), ("sum", {"dtype": np.float64}),
                         ("mean", {"axis": 1, "dtype": bf16})):
            got = getattr(nk, name)(lazy, **kw)
            want = getattr(nk, name)(x, **kw)
            for g, w in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                assert g.dtype == np.asarray(w).dtype, (name, kw, g.dtype)
                np.testing.assert_allclose(np.asarray(g.compute(), np.float64),
                                           np.asarray(w, np.float64), rtol=2 ** -7,
                                           atol=1e-6, err_msg=f"{name} {kw}")
    for x_ in (x, lazy):  # a refused dtype is named as the caller gave it
        with pytest.raises(TypeError, match="xor_sum: x has dtype bfloat16"):
            nk.xor_sum(x_)


def test_a_bfloat16_dtype_of_other_chunks_rounds_as_the_numpy_forms():
    """``dtype=bfloat16`` of float32, integer or bool chunks: computed in float32 and
    rounded once, as the NumPy forms (the Dask softmax refused it, saying it takes
    ml_dtypes.bfloat16)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    a = np.random.default_rng(2).integers(-4, 9, (3, 10))
    for x in (a, a.astype(np.float32), a > 2):
        lazy = da.from_array(x, chunks=(2, 4))
        for name, kw in (("softmax", {"axis": 1}), ("log_softmax", {"axis": 0}),
                         ("sum", {"axis": 1}), ("mean", {})):
            if name in ("sum", "mean") and x.dtype == bool:
                continue
            got, want = getattr(nk, name)(lazy, dtype=bf16, **kw), \
                getattr(nk, name)(x, dtype=bf16, **kw)
            assert got.dtype == want.dtype == bf16, (name, x.dtype)
            np.testing.assert_array_equal(np.asarray(got.compute(), np.float32),
                                          np.asarray(want, np.float32))
    assert nk.sum(da.from_array(a, chunks=4), None, bf16).dtype == bf16  # positional
    # the sums and scans round each element to bfloat16 first, as the NumPy forms: 3e38
    # is inf there, so the sum is NaN, and the others' bits are the eager call's
    f = np.float32([3.4e38, -3.4e38, 1.0, 0.1, 1 / 3, 2 / 3, 0.7])
    for name in ("sum", "mean", "cumsum", "var"):
        got = getattr(nk, name)(da.from_array(f[2:], chunks=2), dtype=bf16).compute()
        np.testing.assert_array_equal(np.asarray(got, np.float32),
                                      np.asarray(getattr(nk, name)(f[2:], dtype=bf16),
                                                 np.float32))
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.float32(nk.sum(da.from_array(f, chunks=3), dtype=bf16)
                                   .compute()))
    c = np.complex64([1 + 2j, 3 + 4j])  # refused, as the eager call refuses it
    for given in (c, da.from_array(c, chunks=1)):
        with pytest.raises(TypeError):
            nk.sum(given, dtype=bf16)


def test_bfloat16_chunks_bin_as_numpys_bfloat16_histogram():
    """Each bfloat16 chunk binned as NumPy bins bfloat16 (its own arithmetic, bfloat16
    edges), not as a float32 copy: 6 random arrays, automatic and given ranges,
    weights (bfloat16 ones too, as the NumPy form's) and density."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = np.dtype(ml_dtypes.bfloat16)
    apart = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal(90) * 3).astype(bf16)
        lazy = da.from_array(x, chunks=40)
        bins = int(rng.integers(3, 40))
        for kw in ({}, {"range": (bf16.type(-1), bf16.type(1.5))}, {"range": (-1.5, 2.25)},
                   {"density": True}, {"weights": rng.random(90).astype(np.float32)}):
            hist, edges = nk.histogram(lazy, bins, **kw)
            want, want_edges = np.histogram(x, bins, **kw)
            assert edges.dtype == want_edges.dtype, kw
            np.testing.assert_array_equal(edges, want_edges)
            assert hist.dtype == want.dtype, kw
            np.testing.assert_allclose(hist.compute(), want, rtol=1e-6)
        bf16_weights = (rng.random(90) * 3).astype(bf16)  # read through float32
        hist = nk.histogram(lazy, bins, weights=da.from_array(bf16_weights, chunks=40))[0]
        want = nk.histogram(x, bins, weights=bf16_weights)[0]
        assert hist.dtype == want.dtype == bf16
        np.testing.assert_array_equal(hist.compute(), want)
        float32_edges = np.histogram_bin_edges(x.astype(np.float32), bins)
        apart += not np.array_equal(np.histogram(x.astype(np.float32), float32_edges)[0],
                                    np.histogram(x, bins)[0])
    assert apart  # the float32 copy's bins differ from NumPy's for some of them


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
def test_variance_takes_numpys_mean(name):
    x = np.random.default_rng(10).standard_normal((6, 25)) * 3 + 50
    x[1, 4] = np.nan
    lazy = da.from_array(x, chunks=(4, 15))  # 2 x 2 uneven chunks
    fn, ref = getattr(nk, name), getattr(np, name)
    dask_first = name in ("var", "nanvar")  # each axis takes a NumPy and a Dask mean
    for axis, as_dask in ((None, dask_first), (1, not dask_first)):  # over the names
        m = np.nanmean(x, axis=axis, keepdims=True)
        given = da.from_array(m) if as_dask else m
        _check(fn(lazy, axis=axis, mean=given, ddof=1), ref(x, axis=axis, mean=m, ddof=1),
               rtol=1e-12)
    _check(fn(lazy, axis=0, mean=50.0, keepdims=True),
           ref(x, axis=0, mean=50.0, keepdims=True), rtol=1e-12)
    if name in ("var", "std"):  # NumPy's takes axes of length 1 before a 0-d result's
        _check(fn(lazy, mean=np.full((1, 1, 1), 50.0)), ref(x, mean=np.full((1, 1, 1), 50.0)),
               rtol=1e-12)
    with pytest.raises(ValueError, match=r"mean of shape \(6,\) does not broadcast"):
        fn(lazy, axis=1, mean=np.ones(6))


@pytest.mark.parametrize("chunks", [2, (2, 2)])
def test_reduce_of_a_mapped_op_combines_states_not_elements(chunks):
    """The partials of an op with an element map (count_nonzero, nansum, nanprod, a
    user's map=) are states: they combine by the op without its map."""
    @nk.op(identity=0.0, map=lambda v, i: v * v)
    def sum_of_squares(a, b):
        return a + b

    m = np.arange(-6.0, 6.0).reshape(3, 4)
    x = da.from_array(m, chunks=chunks)
    for axis in (None, 0, 1):
        _check(nk.reduce(x, sum_of_squares, axis=axis, split_every=2),
               (m * m).sum(axis=axis), rtol=1e-12)
    _check(nk.reduce(x, "count_nonzero"), np.count_nonzero(m), exact=True)
    flat = da.from_array(np.array([np.inf, -np.inf, 1.0, 2.0]), chunks=2)
    with np.errstate(invalid="ignore"):
        assert np.isnan(nk.reduce(flat, "nansum").compute())
        assert np.isnan(nk.reduce(da.from_array(np.array([np.inf, 0.0, 2.0, 3.0]), chunks=2),
                                  "nanprod").compute())


def test_a_map_that_reads_its_index_needs_the_reduced_axes_in_one_chunk():
    """A chunk's kernel counts its elements from the chunk's start: an op whose map
    reads the index is refused where the reduced (or scanned) axes span several
    chunks, and runs where they lie in one."""
    @nk.op(identity=0, map=lambda v, i: i * i)
    def index_squares(a, b):
        return a + b

    m = np.zeros((4, 6), np.int64)
    x = da.from_array(m, chunks=(2, 3))
    for axis, whole in ((None, "0: -1, 1: -1"), (1, "1: -1")):
        with pytest.raises(TypeError, match=r"numbakern.reduce: index_squares's map reads "
                                            rf"its element's index.*x.rechunk\(\{{{whole}\}}\)"):
            nk.reduce(x, index_squares, axis=axis)
    with pytest.raises(TypeError, match=r"associative_scan: index_squares's map.*rechunk "
                                        r"the scanned axes into one chunk \(x.rechunk\("
                                        r"\{0: -1, 1: -1\}\)\)"):
        nk.associative_scan(x, index_squares)  # the flattened array
    with pytest.raises(TypeError, match="associative_scan: index_squares's map.*reverse"):
        nk.associative_scan(x.rechunk({1: -1}), index_squares, axis=1, reverse=True)
    whole = x.rechunk({1: -1})
    _check(nk.reduce(whole, index_squares, axis=1), nk.reduce(m, index_squares, axis=1),
           exact=True)
    _check(nk.associative_scan(whole, index_squares, axis=1),
           nk.associative_scan(m, index_squares, axis=1), exact=True)


def test_threaded_chunks_leave_the_warning_filters_as_they_were():
    """A partial's quiet is the chunk's thread's own: no filter left behind, and the
    all-NaN slice's warning is never lost to another thread's quiet."""
    a = np.ones((4, 20))  # 16 chunks of partials for 4 threads to interleave
    a[3] = np.nan
    x = da.from_array(a, chunks=(1, 5))
    before = list(warnings.filters)
    for fn in (nk.nanmax, nk.nanmin, nk.logsumexp):
        for _ in range(3):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                fn(x, axis=1).compute(scheduler="threads", num_workers=4)
            if fn is not nk.logsumexp:
                assert [str(w.message) for w in seen] == ["All-NaN slice encountered"]
    assert warnings.filters == before


def test_0d_arrays_take_the_axes_numpy_takes():
    """A 0-d array's scans take axis 0 or -1 (one element), refusing others; mean, var
    and std refuse every axis, as NumPy's."""
    s = np.array(2.5)
    x = da.from_array(s)
    for axis in (0, -1):
        _check(nk.cumsum(x, axis=axis), np.cumsum(s, axis=axis), exact=True)
    for axis, error in ((1, np.exceptions.AxisError), ((), TypeError)):
        with pytest.raises(error):
            nk.cumsum(x, axis=axis)
    ints = da.from_array(np.array(3))  # nanmean and nanvar of integers: mean and var
    for fn, given in ((nk.mean, x), (nk.var, x), (nk.std, x), (nk.nanmean, ints),
                      (nk.nanvar, ints)):
        for axis in (0, -1, 1):
            with pytest.raises(np.exceptions.AxisError):
                fn(given, axis=axis)


def test_mean_of_nothing_warns_as_the_numpy_form():
    """Once, however many blocks the result has."""
    x = da.from_array(np.ones((8, 0)), chunks=(2, 2))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = nk.mean(x, axis=1).compute()
    np.testing.assert_array_equal(got, np.full(8, np.nan))
    assert [str(w.message) for w in seen] == ["Mean of empty slice",
                                              "invalid value encountered in divide"]


def test_errors_name_the_function_called():
    with pytest.raises(TypeError, match="^xor_sum is not defined for x of dtype float64"):
        nk.xor_sum(da.from_array(np.ones(4), chunks=2))


@pytest.mark.parametrize("name, kwargs", [("sum", {}), ("min", {}), ("mean", {"axis": 0}),
                                          ("var", {}), ("argmax", {}), ("cumsum", {}),
                                          ("softmax", {"axis": 1})])
def test_big_endian_chunks_are_read_as_their_values(name, kwargs):
    """A big-endian Dask array (chunks of ``>f8``) gives NumPy's answer of its values:
    each chunk converted to native order, as the NumPy forms convert host arrays (the
    kernels read little-endian words)."""
    x = np.random.default_rng(8).standard_normal((6, 5)).astype(">f8")
    got = getattr(nk, name)(da.from_array(x, chunks=(4, 5)), **kwargs).compute()
    want = getattr(nk, name)(x.astype(np.float64), **kwargs)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_big_endian_histograms_and_bincounts_of_chunks():
    """Big-endian values and weights (NumPy's or Dask's) bin as NumPy bins them:
    the automatic range found over the chunks, the weights summed."""
    y = np.linspace(-1, 1, 50)
    lazy_be = da.from_array(y.astype(">f8"), chunks=20)
    hist, edges = nk.histogram(lazy_be, 5)
    want, want_edges = np.histogram(y, 5)
    np.testing.assert_array_equal(hist.compute(), want)
    np.testing.assert_array_equal(edges, want_edges)
    lazy = da.from_array(y, chunks=20)
    for weights in (y.astype(">f8"), da.from_array(np.arange(50).astype(">i8"), chunks=25)):
        got = nk.histogram(lazy, 5, range=(-1, 1), weights=weights)[0].compute()
        want = np.histogram(y, 5, range=(-1, 1), weights=np.asarray(weights))[0]
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert got.dtype.str == want.dtype.str  # equal bins: the weights' byte order
        got = nk.histogram(lazy, [-1, 0, 1], weights=weights)[0].compute()
        want = np.histogram(y, [-1, 0, 1], weights=np.asarray(weights))[0]
        assert got.dtype.str == want.dtype.str  # given edges: native
    counts = nk.bincount(da.from_array(np.arange(5).astype(">i8"), chunks=2)).compute()
    np.testing.assert_array_equal(counts, np.ones(5, np.int64))


def test_object_weights_of_a_dask_histogram_are_refused_naming_them():
    """As the NumPy form refuses them, before Dask's own error about object chunks."""
    lazy = da.from_array(np.linspace(-1, 1, 30), chunks=10)
    with pytest.raises(TypeError, match="histogram: weights must hold real numbers"):
        nk.histogram(lazy, 4, weights=np.arange(30).astype(object))
