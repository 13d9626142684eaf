"""ptp (max - min in one pass over (min, max) pairs) against NumPy: every reduction
strategy, integers that wrap, NaN, float16, and what it refuses."""

import warnings

import numpy as np
import pytest

import numbakern as nk

RNG = np.random.default_rng(29)


@pytest.mark.parametrize("strategy", nk.strategies.every("reduce", threads=32, blocks=2),
                         ids=lambda s: s.label)
def test_every_strategy(strategy):
    x = RNG.integers(-128, 128, (9, 70)).astype(np.int8)  # ranges past 127 wrap
    np.testing.assert_array_equal(nk.ptp(x, axis=1, strategy=strategy), np.ptp(x, axis=1))
    assert nk.ptp(x, strategy=strategy) == np.ptp(x)


def test_dtypes_nan_and_errors():
    f = RNG.standard_normal((6, 33)).astype(np.float32)
    f[2, 5] = np.nan
    for axis in (None, 0, 1, (0, 1)):
        got, want = nk.ptp(f, axis=axis), np.ptp(f, axis=axis)
        np.testing.assert_array_equal(got, want)
        assert np.asarray(got).dtype == want.dtype
    h = np.array([1, 65000, -3], np.float16)
    assert nk.ptp(h) == np.ptp(h) and nk.ptp(h).dtype == np.float16
    np.testing.assert_array_equal(nk.ptp(f[:, :2], axis=1, keepdims=True),
                                  np.ptp(f[:, :2], axis=1, keepdims=True))
    # NumPy's ptp fails in its maximum: reducing nothing is found before a bool dtype
    for dtype in (np.float64, np.bool_):
        with pytest.raises(ValueError, match="operation maximum which has no identity"):
            nk.ptp(np.zeros((0, 3), dtype), axis=0)
    with pytest.raises(TypeError, match="bool"):
        nk.ptp(np.array([True, False]))
    with pytest.raises(TypeError, match="bool"):
        nk.ptp(np.zeros((3, 0), np.bool_), axis=0)
    for fn in (nk.nanargmax, nk.nanargmin):  # NumPy's nanargmax fails in its argmax
        with pytest.raises(ValueError, match=f"attempt to get {fn.__name__[3:]} of an empty"):
            fn(np.zeros(0))


@pytest.mark.parametrize("x", [
    np.array([np.inf, np.inf]), np.array([-np.inf, -np.inf]),  # inf - inf: invalid
    np.array([-3e38, 3e38], np.float32), np.array([6e4, -6e4], np.float16),  # overflow
    np.array([[1.0, np.inf], [np.inf, np.inf]]),  # one row of each: inf, then invalid
    np.array([np.nan, 1.0]), np.array([np.inf, np.nan]),  # NaN in: no warning
    np.array([-128, 127], np.int8), np.array([1.0, 5.0])], ids=repr)
def test_floating_point_warnings_as_numpy(x):
    for axis in (None, -1):
        seen = []
        for ptp in (np.ptp, nk.ptp):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = ptp(x, axis=axis)
            seen.append((value, sorted(str(w.message) for w in caught)))
        (want, told), (got, said) = seen
        np.testing.assert_array_equal(got, want)
        assert np.asarray(got).dtype == np.asarray(want).dtype and said == told
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="subtract"):
        nk.ptp(np.array([-3e38, 3e38], np.float32))


@pytest.mark.parametrize("x", [
    np.array([[-100, 100, 5], [7, -3, 2]], np.int8),  # 200 in int16 and wider
    np.array([[0, 255, 3], [9, 9, 9]], np.uint8),
    np.array([[False, True, True], [False, False, False]]),  # into a numeric out: 1, 0
    np.array([[60000, -60000, 1], [1, 2, 3]], np.float16),  # 120000 in float32
    np.array([[3e38, -3e38, 1], [1, 2, np.nan]], np.float32),
    np.array([[30000, -30000, 1], [3, 4, 5]], np.int64)],  # 60000 wraps into int16
    ids=lambda x: str(x.dtype))
@pytest.mark.parametrize("out_dtype", [np.int16, np.int64, np.uint64, np.float16,
                                       np.float32, np.float64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("device", [False, True], ids=["host", "device"])
def test_an_out_of_another_dtype_subtracts_as_numpy(x, out_dtype, device):
    """NumPy's ptp stores the maximum in ``out``, then subtracts the minimum in
    ``out``'s dtype promoted with ``x``'s: exact values (integers, and floats whose
    differences are exact or inf), or the same error (``same_kind`` casting, bool
    subtraction)."""
    from numba import cuda

    want_out, got_out = np.zeros(2, out_dtype), np.zeros(2, out_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow: the value is the test
        try:
            want = np.ptp(x, axis=1, out=want_out)
        except TypeError:
            with pytest.raises(TypeError):
                nk.ptp(x, axis=1, out=got_out)
            return
        if device:
            got = nk.ptp(cuda.to_device(x), axis=1, out=cuda.to_device(got_out))
            got = got.copy_to_host()
        else:
            got = nk.ptp(x, axis=1, out=got_out)
            assert got is got_out
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
