"""A sum or product into a float ``out`` without ``dtype=`` computes in NumPy's loop
dtype, its result dtype promoted with ``out``'s: float32 input into a float64 ``out``
is summed in float64 (no overflow at 3e38 + 3e38, float64's rounding), under the
simulator, against NumPy's own call with the same ``out``."""

import numpy as np
import pytest

import numbakern as nk

REDUCTIONS = ["sum", "prod", "nansum", "nanprod", "mean", "nanmean"]
SCANS = ["cumsum", "cumprod", "nancumsum", "nancumprod"]


def _both(name, x, out_dtype, shape, **kw):
    got_out, want_out = np.zeros(shape, out_dtype), np.zeros(shape, out_dtype)
    with np.errstate(all="ignore"):
        got = getattr(nk, name)(x, out=got_out, **kw)
        want = getattr(np, name)(x, out=want_out, **kw)
    assert got is got_out
    return got, want


@pytest.mark.parametrize("name", REDUCTIONS + SCANS)
def test_float32_into_float64_does_not_overflow_where_numpys_does_not(name):
    x = np.array([3e38, 3e38, 1.0], np.float32)
    got, want = _both(name, x, np.float64, () if name in REDUCTIONS else (3,))
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129])
@pytest.mark.parametrize("name", ["sum", "nansum", "mean", "cumsum", "nancumsum"])
def test_a_wider_out_gets_the_wider_loops_rounding(name, n):
    """float32 elements summed in float64: within float64's rounding of NumPy's (a
    float32 sum would be ~1e-7 off), around warp and block sizes."""
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * 1e3 + 1e4
    shape = () if name in REDUCTIONS else (n,)
    got, want = _both(name, x, np.float64, shape)
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("x_dtype, out_dtype, values", [
    (np.float16, np.float32, [60000, 60000]),      # float16 loop: inf
    (np.int32, np.float32, [16777217, 1]),         # float64 loop: 16777218
    (np.int8, np.float32, [100, 100]),             # not int8's wrap
    (np.float64, np.float32, [16777217, 1])])      # float64 loop, then the cast
def test_other_inputs_take_the_promoted_loop(x_dtype, out_dtype, values):
    x = np.array(values, x_dtype)
    for name in ("sum", "cumsum", "mean"):
        got, want = _both(name, x, out_dtype, () if name != "cumsum" else (2,))
        np.testing.assert_array_equal(got, want)


def test_axes_initial_and_associative_scan_too():
    x = np.array([[3e38, 3e38], [1.0, 2.0]], np.float32)
    for axis in (0, 1):
        got, want = _both("sum", x, np.float64, (2,), axis=axis)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        got, want = _both("cumsum", x, np.float64, (2, 2), axis=axis)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    got, want = _both("sum", np.array([1.0, 2.0], np.float32), np.float64, (), initial=0.1)
    assert got == want == 3.1  # 0.1 held in float64, as NumPy's loop holds it
    out = np.zeros(2)
    nk.associative_scan(np.array([3e38, 3e38], np.float32), "sum", out=out)
    np.testing.assert_allclose(out, [3e38, 6e38], rtol=1e-7)


def test_max_and_min_cast_their_exact_result():
    x = np.array([3e38, -1.0, 2.5], np.float32)
    for name in ("max", "min"):
        got, want = _both(name, x, np.float64, ())
        assert got == want
