"""median, quantile, percentile and the NaN-skipping forms warn as NumPy does where
their interpolation meets infinities (``inf - inf``, ``inf * 0``) or overflows:
results and the kinds of ``RuntimeWarning`` compared with NumPy's own on the same data,
under the simulator (tiny sizes).
"""

import warnings

import numpy as np
import pytest

import numbakern as nk

INF = np.inf
DATA = [
    [-INF, INF],            # the median of the two: NaN, "invalid value"
    [INF, -INF],
    [INF, -INF, 1.0, 2.0],  # finite middle: no warning for the median
    [INF, INF],             # quantiles: inf - inf is NaN; the median is inf
    [-INF, -INF, 3.0],
    [-INF, 1.0, INF],       # odd count: the median reads one element
    [1.0, 2.0, 3.0, 4.0],
    [-INF, INF, np.nan],    # NumPy interpolates before putting the NaN: it warns
    [np.nan, np.nan],
    [0.0, -0.0, INF],
]
CALLS = {
    "median": lambda m, x, **kw: m.median(x, **kw),
    "nanmedian": lambda m, x, **kw: m.nanmedian(x, **kw),
    "quantile": lambda m, x, **kw: m.quantile(x, [0.0, 0.25, 0.5, 0.75, 1.0], **kw),
    "quantile_scalar": lambda m, x, **kw: m.quantile(x, 0.5, **kw),
    "percentile": lambda m, x, **kw: m.percentile(x, 30, **kw),
    "nanquantile": lambda m, x, **kw: m.nanquantile(x, [0.0, 0.5, 1.0], **kw),
    "nanpercentile": lambda m, x, **kw: m.nanpercentile(x, 50.0, **kw),
    "midpoint": lambda m, x, **kw: m.quantile(x, [0.1, 0.5], method="midpoint", **kw),
    "lower": lambda m, x, **kw: m.quantile(x, 0.3, method="lower", **kw),
    "nearest": lambda m, x, **kw: m.quantile(x, 0.5, method="nearest", **kw),
}


def kinds(caught) -> set[str]:
    """The RuntimeWarnings caught, by kind: NumPy's messages name the operation
    ("invalid value encountered in subtract"), numbakern's the function."""
    out = set()
    for w in caught:
        assert issubclass(w.category, RuntimeWarning), w
        text = str(w.message)
        out.add("invalid" if text.startswith("invalid value") else
                "overflow" if text.startswith("overflow") else text)
    return out


def run(module, call, x, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CALLS[call](module, x, **kw)
    return result, kinds(caught)


def check(call, x, **kw):
    expected, expected_kinds = run(np, call, x, **kw)
    got, got_kinds = run(nk, call, x, **kw)
    if not np.isnan(x).any():  # NumPy's NaN path may change its dtype (README)
        assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, expected)
    assert got_kinds == expected_kinds


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("data", DATA, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_infinities_warn_as_numpy(call, data, dtype):
    check(call, np.array(data, dtype))


def test_median_of_minus_and_plus_inf():
    with pytest.warns(RuntimeWarning, match="invalid value encountered in median"):
        assert np.isnan(nk.median(np.array([-INF, INF])))


@pytest.mark.parametrize("call", ["median", "quantile", "midpoint", "nanmedian"])
def test_rows_along_an_axis(call):
    # only one row of several meets inf - inf: the call warns once, as NumPy's
    x = np.array([[1.0, 2.0, 3.0, 4.0], [-INF, 5.0, 6.0, INF], [INF, INF, 0.0, 1.0]])
    for axis in (0, 1):
        check(call, x, axis=axis)
        check(call, x[:, :2].copy(), axis=axis)


def test_float32_overflow_warns():
    big = np.float32(3e38)
    check("median", np.array([big, big], np.float32))        # mean: 6e38 in float32
    check("quantile_scalar", np.array([-big, big], np.float32))  # b - a overflows


def test_errstate_is_honoured():
    x = np.array([-INF, INF])
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(nk.median(x))
        assert np.isnan(nk.quantile(x, 0.5))
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError, match="median"):
        nk.median(x)


def test_integers_and_finite_floats_stay_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nk.median(np.array([-5, 7], np.int64)) == 1.0
        assert nk.quantile(np.array([1.0, 2.0, 3.0]), 0.25) == 1.5


def test_warning_points_at_the_caller():
    with pytest.warns(RuntimeWarning) as caught:
        nk.quantile(np.array([-INF, INF]), 0.5)
    assert caught[0].filename == __file__
