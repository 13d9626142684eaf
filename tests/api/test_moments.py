"""var, std, nanvar and nanstd against NumPy: one pass of Welford states merged by Chan
et al.'s formula (numbakern.ops.MOMENTS) under every grid and block strategy.

Tolerances: float64 results rtol 1e-12 of NumPy's two-pass values; float32 input rtol
1e-5 (numbakern accumulates in float64, NumPy in float32); float16 rtol 1e-2. Data are
offset from zero (mean 100, spread 3) so that a naive sum of squares would lose digits.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk

REDUCE = nk.strategies.every("reduce", threads=32, blocks=2)
FOLDING = [s for s in REDUCE if not isinstance(s, nk.AtomicFold)]  # three fields fold
FUNCTIONS = {"var": np.var, "std": np.std, "nanvar": np.nanvar, "nanstd": np.nanstd}
RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def _data(shape, dtype=np.float64, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * 3 + 100
    return x.astype(dtype)


def _check(name, x, strategy=None, lanes=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = FUNCTIONS[name](x, **kw)
        got = getattr(nk, name)(x, strategy=strategy, lanes=lanes, **kw)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    rtol = RTOL.get(np.asarray(want).dtype, 1e-12)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("strategy", REDUCE, ids=repr)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_strategy_whole_array_and_axes(name, strategy):
    x = _data((3, 70))
    if isinstance(strategy, nk.AtomicFold):  # no atomic moves a three-field (count, mean, M2)
        with pytest.raises(ValueError, match="atomic_fold cannot fold"):
            getattr(nk, name)(x, strategy=strategy)
        return
    for axis in (None, 0, 1):
        _check(name, x, axis=axis, ddof=1, strategy=strategy)


SIZES = [1, 31, 32, 33, 127, 128, 129, 300]


# var and nanstd at every other length, std and nanvar at the others: the plain and
# the NaN-skipping loads each at every length (std is var's finish and a square root)
@pytest.mark.parametrize("n", SIZES)
def test_sizes_around_warp_and_block_boundaries(n):
    x = _data(n, seed=n)
    for name in (("var", "nanstd"), ("std", "nanvar"))[SIZES.index(n) % 2]:
        _check(name, x)
        _check(name, x.reshape(1, n), axis=1, ddof=1, keepdims=True)


def test_rows_columns_and_tuples_of_axes():
    x = _data((4, 5, 33), seed=2)
    for axis in (0, 2, (0, 2), (1, 2), None):
        _check("var", x, axis=axis)
        _check("std", x, axis=axis, keepdims=True)


@pytest.mark.parametrize("lanes", [32, 64])
def test_lanes_a_warp_or_a_block_per_row(lanes):
    x = _data((4, 5, 33), seed=2)
    blocks_of_64 = nk.strategies.resolve("reduce", "two_pass/warp_shuffle", threads=64)
    for axis in (2, (1, 2)):  # the reduced elements together in memory: rows
        _check("var", x, axis=axis, lanes=lanes, strategy=blocks_of_64)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16,
                                   np.float32])
def test_dtypes_as_numpy(dtype):
    x = np.random.default_rng(3).integers(0, 50, (6, 40)).astype(dtype)
    for name in ("var", "std"):
        _check(name, x, axis=1)
        _check(name, x, dtype=np.float64)


def test_nan_and_all_nan_slices_warn_as_numpy():
    x = _data((4, 40))
    x[1, 5] = np.nan
    x[2] = np.nan
    for name in FUNCTIONS:
        _check(name, x, axis=1)
    with pytest.warns(RuntimeWarning, match=r"Degrees of freedom <= 0 for slice\."):
        nk.nanvar(x, axis=1)


# var and nanvar under every strategy that folds (count, mean, M2); std and nanstd,
# their square roots, under two (every value in both dtypes)
@pytest.mark.parametrize("name, strategy",
                         [(n, s) for n in ("var", "nanvar") for s in FOLDING] +
                         [(n, s) for n in ("std", "nanstd") for s in FOLDING[:2]],
                         ids=lambda v: v if isinstance(v, str) else repr(v))
def test_inf_and_lone_nan_make_the_variance_nan_as_numpy(name, strategy):
    """NumPy's deviations ``x - mean`` meet inf - inf or NaN; Welford's M2 never forms
    them (a lone element's M2 is 0), so a slice with inf, or a lone NaN, must still give
    NaN, not 0 or inf."""
    # float32 and float64 take turns over the values, the other way round under every
    # other strategy: each meets every value under two strategies
    turn = FOLDING.index(strategy) % 2
    for i, values in enumerate(([np.nan], [np.inf], [np.inf, 1.0], [np.inf, -np.inf],
                                [-np.inf] * 3, [np.inf] + [1.0] * 40, [np.nan, 2.0, 3.0])):
        dtype = (np.float32, np.float64)[(i + turn) % 2]
        _check(name, np.array(values, dtype=dtype), strategy=strategy)
    rows = np.array([[np.inf, 1.0, 2.0], [2.0, 3.0, 5.0], [np.nan, 1.0, 1.0]])
    _check(name, rows, strategy=strategy, axis=1)
    _check(name, rows, strategy=strategy, axis=0)


def test_too_few_degrees_of_freedom_as_numpy():
    with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0 for slice"):
        got = nk.var(np.array([1.0, 2.0]), ddof=3)  # M2 / 0
    assert got == np.inf
    with pytest.warns(RuntimeWarning):
        assert np.isnan(nk.var(np.array([1.0, 1.0]), ddof=2))  # 0 / 0
    with pytest.warns(RuntimeWarning):
        assert np.isnan(nk.nanvar(np.array([1.0, 2.0]), ddof=3))  # nanvar: NaN
    for name in ("nanvar", "nanstd"):  # of integers, NumPy's nanvar is its var: M2 / 0
        with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0 for slice$"):
            assert getattr(nk, name)(np.array([1, 2], np.uint64), ddof=2) == np.inf
    with pytest.warns(RuntimeWarning):
        got = nk.std(np.zeros((0, 3)), axis=0)
    assert got.shape == (3,) and np.isnan(got).all()
    assert nk.var(np.zeros((3, 0)), axis=0).shape == (0,)
    _check("std", _data(10), ddof=0.5)
    _check("var", _data((3, 10)), axis=1, ddof=np.array(2))  # a 0-d array, as NumPy's
    _check("nanstd", _data(10), ddof=np.array(1.5))


def test_device_input_and_out():
    x = _data((3, 50), np.float32)
    d = cuda.to_device(x)
    out = cuda.device_array(3, np.float32)
    assert nk.std(d, axis=1, out=out) is out
    np.testing.assert_allclose(out.copy_to_host(), np.std(x, axis=1), rtol=1e-5)
    host_out = np.empty(50)
    assert nk.var(x.astype(np.float64), axis=0, out=host_out) is host_out


def test_bad_arguments():
    with pytest.raises(TypeError, match="var"):
        nk.var(np.ones(3, np.complex64))
    for x in (np.ones(3, np.complex64), np.array(["a", "b"])):  # mean names itself
        with pytest.raises(TypeError, match="^mean is not defined for x of dtype"):
            nk.mean(x)
    with pytest.raises(TypeError, match="dtype must be float16, float32 or float64, got int32$"):
        nk.var(np.ones(3), dtype=np.int32)
    for f in (nk.var, nk.std, nk.nanvar, nk.nanstd):  # no kernel holds np.longdouble
        with pytest.raises(TypeError, match=f"^{f.__name__}: dtype must be float16, float32 "
                                            "or float64, got (longdouble|float128)$"):
            f(np.arange(4.0), dtype=np.longdouble)
    for f in (nk.var, nk.std, nk.nanvar, nk.nanstd, nk.nanmean):  # NumPy refuses it too
        with pytest.raises(TypeError, match=f"^{f.__name__}: dtype must be of native "
                                            "byte order .* got >f8$"):
            f(np.ones((2, 5)), axis=1, dtype=">f8")
        with pytest.raises(TypeError, match="byte order"):  # nanmean's: mean's, NumPy's
            f(np.ones((2, 5), np.int64), axis=1, dtype=">f8")
    with pytest.raises(ValueError, match="^strategy: atomic_fold cannot fold moments's .*"
                                         "var and std"):
        nk.var(np.ones(3), strategy="atomic_fold")
    with pytest.raises(TypeError, match="ddof must be a real number"):
        nk.std(np.ones(3), ddof="1")
    with pytest.raises(TypeError, match="ddof must be a real number"):
        nk.std(np.ones(3), ddof=np.array("1"))
    with pytest.raises(np.exceptions.AxisError):
        nk.nanvar(np.ones((2, 3)), axis=2)


@pytest.mark.parametrize("strategy", FOLDING, ids=repr)
def test_a_large_mean_loses_nothing(strategy):
    """1e8 plus noise of spread 1: the naive one-pass mean(x**2) - mean(x)**2 is off
    by 130% here; Welford's merge agrees with NumPy's two-pass float64 value to 1e-7
    (the data themselves hold the noise to about 1e-8: 1e8 times float64's epsilon)."""
    x = 1e8 + np.random.default_rng(7).standard_normal(700)
    want = np.var(x)
    naive = np.mean(x * x) - np.mean(x) ** 2
    assert abs(naive - want) / want > 0.5  # the trap is real
    np.testing.assert_allclose(nk.var(x, strategy=strategy), want, rtol=1e-7)


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
def test_correction_is_numpys_name_for_ddof(name):
    x = np.random.default_rng(5).standard_normal((4, 33))
    x[1, 3] = np.nan
    fn, ref = getattr(nk, name), getattr(np, name)
    for kw in ({"correction": 1}, {"correction": 1.5}, {"ddof": 0.0, "correction": 1}):
        np.testing.assert_allclose(fn(x, axis=1, **kw), ref(x, axis=1, **kw), rtol=1e-12)
    with pytest.raises(ValueError, match="ddof and correction can't be provided"):
        fn(x, ddof=1, correction=1)


def _runtime_warnings(fn, *args, **kw):
    """``(result, the messages of the RuntimeWarnings fn gave)``."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = fn(*args, **kw)
    return got, {str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_mean_keyword_as_numpys(name):
    fn, ref = getattr(nk, name), FUNCTIONS[name]
    x = _data((3, 2, 33), seed=7)
    x[0, 1, 2] = np.nan
    x[2, 0] = np.nan  # an all-NaN slice along axis 2
    mask = np.random.default_rng(8).random((2, 33)) > 0.3
    # std and nanstd finish var's and nanvar's sums with a square root: the mean's
    # shapes, masks, lengths and dtypes run under var and nanvar, two axes under these
    full = not name.endswith("std")
    axes = ((None, {}), (0, {"ddof": 1}), (2, {"keepdims": True}), ((0, 2), {}))
    for axis, kw in axes if full else axes[::3]:
        _check(name, x, axis=axis, mean=np.nanmean(x, axis=axis, keepdims=True), **kw)
    if full:
        _check(name, x, axis=2, mean=np.nanmean(x, axis=2, keepdims=True), where=mask)
        for m in (np.float64(100.0), 100, np.full((1, 1, 33), 99.0), np.full(33, 101.0),
                  np.where(np.arange(3) == 2, np.nan, 100.0)[:, None, None]):  # NaN mean
            _check(name, x, axis=1, mean=m)
        for n in (1, 32, 33, 129):  # around warp and block sizes
            y = _data((2, n), seed=n)
            _check(name, y, axis=1, mean=y.mean(axis=1, keepdims=True) + 0.5)
        x32 = x.astype(np.float32)  # var's dtype is x - mean's: float64 here
        _check(name, x32, axis=2, mean=np.nanmean(x, axis=2, keepdims=True))
        _check(name, x32, axis=2, mean=100.0)
        xi = np.arange(24).reshape(4, 6) % 5
        _check(name, xi, axis=1, mean=xi.mean(axis=1, keepdims=True))
    _check(name, np.float64(3.0), mean=2.5)  # 0-d
    with pytest.raises(ValueError, match=r"mean of shape \(4,\) does not broadcast to "
                                         r"\(3, 2, 1\)"):
        fn(x, axis=2, mean=np.ones(4))  # NumPy: ValueError too (its broadcasting)
    with pytest.raises(ValueError):
        ref(x, axis=2, mean=np.ones(4))
    with pytest.raises(ValueError, match="does not broadcast"):
        fn(x, axis=2, mean=np.ones((1, 1, 3, 5, 1)))
    extra = np.full((1, 1, 1, 1), 100.0)  # axes of length 1 before the keepdims shape
    if name in ("var", "std"):  # NumPy's var takes them where the result is 0-d
        _check(name, x, mean=extra)
    for kw in ({"axis": (0, 1, 2)}, {"keepdims": True}) if name in ("var", "std") else ({},):
        with pytest.raises(ValueError, match=r"mean of shape \(1, 1, 1, 1\)"):
            fn(x, mean=extra, **kw)  # NumPy: another result shape, or (nanvar) an error
    with pytest.raises(TypeError, match="mean must hold real numbers"):
        fn(x, axis=2, mean="a")
    with pytest.raises(TypeError, match="mean must hold real numbers"):
        fn(x, axis=2, mean=np.ones((3, 2, 1), np.complex128))


def test_mean_keyword_on_device_arrays_and_tensors():
    torch = pytest.importorskip("torch")
    x = _data((4, 37), np.float32, seed=11)
    m = x.mean(axis=1, keepdims=True)
    want = np.std(x, axis=1, mean=m)
    got = nk.std(cuda.to_device(x), axis=1, mean=cuda.to_device(m))
    np.testing.assert_allclose(got.copy_to_host(), want, rtol=1e-5)
    strided = cuda.to_device(np.asfortranarray(x))  # not C-contiguous: copied first
    got = nk.nanvar(strided, axis=0, mean=cuda.to_device(x.mean(axis=0, keepdims=True)))
    np.testing.assert_allclose(got.copy_to_host(),
                               np.nanvar(x, axis=0, mean=x.mean(axis=0, keepdims=True)),
                               rtol=1e-5)
    t = torch.from_numpy(x)
    got = nk.var(t, 1, mean=torch.from_numpy(m))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), np.var(x, axis=1, mean=m), rtol=1e-5)
    b = t.to(torch.bfloat16)  # read as float32; x - mean's dtype, as NumPy's
    wide = b.float().numpy()
    want = np.var(wide, axis=1, mean=wide.mean(axis=1, keepdims=True))
    for mean, dtype in ((b.float().mean(dim=1, keepdim=True), torch.float32),
                        (b.float().mean(dim=1, keepdim=True).bfloat16(), torch.bfloat16)):
        got = nk.var(b, axis=1, mean=mean)
        assert got.dtype == dtype
        np.testing.assert_allclose(got.float().numpy(), want, rtol=2 ** -6)


INFINITE = [([1.0, np.inf], {}), ([np.inf, -np.inf], {}), ([np.inf], {}),
            ([np.inf, np.nan], {}), ([1.0, np.inf, np.nan], {}), ([1.0, 2.0], {}),
            ([[1.0, np.inf], [1.0, 2.0]], {"axis": 1}), ([[1.0, np.inf], [1.0, 2.0]], {"axis": 0}),
            ([1.0, np.inf], {"where": np.array([True, False])}),
            ([3e38, -3e38], {"dtype": np.float32}), ([1e300, -1e300], {"mean": 0.0}),
            ([1.0, np.inf], {"mean": np.array([1.0])}),
            ([1.0, np.inf], {"mean": np.array([np.inf])})]


SPECIAL_NAMES = ["var", "nanvar", "nanstd"]


@pytest.mark.parametrize("name", SPECIAL_NAMES)
@pytest.mark.parametrize("values, kw, errstate_name",
                         [(v, k, SPECIAL_NAMES[i % 3]) for i, (v, k) in enumerate(INFINITE)])
def test_special_values_warn_as_numpy(name, values, kw, errstate_name):
    kw = dict(kw)
    x = np.array(values, kw.pop("dtype", np.float64))
    if name == "nanstd" and x.dtype == np.float32:
        pytest.skip("float64 accumulation: the root of 9e76 is float32's 3e38, where "
                    "NumPy's float32 square overflows (README)")
    want, numpy_warns = _runtime_warnings(FUNCTIONS[name], x, **kw)
    got, warns = _runtime_warnings(getattr(nk, name), x, **kw)
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    assert warns == numpy_warns, (name, values, kw)  # NumPy's words: "... in subtract"
    if name != errstate_name:  # np.errstate: each case under one of the names, in turn
        return
    with np.errstate(invalid="ignore", over="ignore"):
        assert not _runtime_warnings(getattr(nk, name), x, **kw)[1]
    if numpy_warns:
        with np.errstate(all="raise"), pytest.raises(FloatingPointError):
            getattr(nk, name)(x, **kw)


def test_device_input_gets_the_values_without_the_warning():
    x = np.array([[1.0, np.inf, 2.0], [1.0, 2.0, 4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no synchronisation to find them
        got = nk.var(cuda.to_device(x), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(got.copy_to_host(), np.var(x, axis=1))


@pytest.mark.parametrize("name", ["mean", "var", "std", "nanmean", "nanvar", "nanstd"])
@pytest.mark.parametrize("axis", [0, -1, 1, (0,), ()])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_an_axis_of_a_0d_input_as_numpy(name, axis, dtype):
    # np.mean, np.var and np.std refuse any axis of a 0-d array; the nan-forms of float
    # input, like np.sum, take 0 and -1; of integer input they are the plain forms
    x = np.array(2.5).astype(dtype)
    try:
        want = getattr(np, name)(x, axis=axis)
    except np.exceptions.AxisError:
        with pytest.raises(np.exceptions.AxisError):
            getattr(nk, name)(x, axis=axis)
        return
    assert getattr(nk, name)(x, axis=axis) == want


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd"])
@pytest.mark.parametrize("ddof", [np.nan, True, np.True_, np.inf, 2.5])
def test_ddof_of_nan_bool_inf_or_fraction_as_numpy(name, ddof):
    """NumPy divides by ``max(count - ddof, 0)``: a NaN ddof gives NaN (no warning), a
    bool counts as 0 or 1, an infinite one is no degrees of freedom left."""
    x = np.arange(12.0).reshape(3, 4)
    for axis in (None, 0, 1):
        with warnings.catch_warnings(record=True) as numpys:
            warnings.simplefilter("always")
            want = getattr(np, name)(x, axis=axis, ddof=ddof)
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            got = getattr(nk, name)(x, axis=axis, ddof=ddof)
            given = getattr(nk, name)(x, axis=axis, ddof=ddof,
                                      mean=np.mean(x, axis=axis, keepdims=True))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(given, want, rtol=1e-12)
        assert {str(w.message) for w in ours} == {str(w.message) for w in numpys}


@pytest.mark.parametrize("name", ["nanvar", "nanstd", "var", "std"])
@pytest.mark.parametrize("kwargs", [dict(axis=0, where=np.array([True, False, True, True])),
                                    dict(axis=1, ddof=4)], ids=["where", "ddof"])
@pytest.mark.parametrize("given_mean", [False, True])
def test_an_infinity_and_no_degrees_of_freedom_warn_in_numpys_order(name, kwargs,
                                                                   given_mean):
    """NumPy's nanvar meets ``inf - inf`` in its arithmetic, then finds a slice with no
    degrees of freedom left; its var counts first. The same words, in the same order."""
    x = np.array([[1.0, np.nan, 3.0, -2.0], [2.0, 5.0, np.inf, 0.5],
                  [7.0, 1.0, 2.0, 9.0]])
    if given_mean:
        kwargs = {**kwargs, "mean": np.nanmean(x, axis=kwargs["axis"], keepdims=True)}
    results, said = [], []
    for lib in (np, nk):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append(getattr(lib, name)(x, **kwargs))
        said.append([str(w.message) for w in caught if w.category is RuntimeWarning])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)
    assert said[1] == said[0] and any("Degrees of freedom" in w for w in said[0])


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_float16_dtype_is_the_variance_of_the_stored_elements_rounded_once(name):
    """``dtype=float16`` of wider input: the variance of the elements as stored (NumPy
    takes the deviations from them too, not from their float16 casts), rounded to
    float16 once. ``[2049, 2050, 2051]`` cast to float16 would be ``[2048, 2050,
    2052]``, whose variance is 2.67: NumPy's and this one are 0.667."""
    for x in (np.float32([2049, 2050, 2051]), np.int64([2049, 2050, 2051]),
              _data((3, 40), np.float32)):
        got = getattr(nk, name)(x, axis=-1, dtype=np.float16)
        assert got.dtype == np.float16
        want = FUNCTIONS[name](x.astype(np.float64), axis=-1)
        np.testing.assert_array_equal(got, np.asarray(want).astype(np.float16))
        np.testing.assert_allclose(got, FUNCTIONS[name](x, axis=-1, dtype=np.float16),
                                   rtol=2e-3)


@pytest.mark.parametrize("name", ["var", "std", "nanvar", "nanstd", "nanmean", "mean"])
def test_a_float16_result_into_a_wider_out_is_not_rounded_to_float16(name):
    """float16 input with a float32 or float64 ``out=``: summed and divided in
    ``out``'s dtype, as NumPy's reduce into ``out``, not rounded to float16 first
    (~1e-3 off): within float32's rounding, or float64's, of the float64 value of the
    same elements."""
    x = np.array([[1, 2, 4, 0.1], [3.3, -7, 0.2, 65]], np.float16)
    where = np.array([[1, 1, 1, 0], [1, 0, 1, 1]], bool)
    fn = getattr(nk, name)
    ref = getattr(np, name)
    for kwargs in ({}, {"where": where}):
        want = ref(x.astype(np.float64), axis=1, **kwargs)
        for dtype, rtol in ((np.float32, 3e-7), (np.float64, 1e-14)):
            out = np.empty(2, dtype)
            assert fn(x, axis=1, out=out, **kwargs) is out
            np.testing.assert_allclose(out, want, rtol=rtol)
    want = ref(x.astype(np.float64), axis=1)
    out = cuda.device_array(2, np.float64)
    fn(cuda.to_device(x), axis=1, out=out)
    np.testing.assert_allclose(out.copy_to_host(), want, rtol=1e-14)
    torch = pytest.importorskip("torch")
    out = torch.empty(2, dtype=torch.float32)
    fn(torch.from_numpy(x), axis=1, out=out)
    np.testing.assert_allclose(out.numpy(), want, rtol=3e-7)
