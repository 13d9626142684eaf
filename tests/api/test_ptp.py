"""ptp (max - min in one pass over (min, max) pairs) against NumPy: every reduction
strategy, integers that wrap, NaN, float16, and what it refuses."""

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
    with pytest.raises(ValueError, match="zero-size"):
        nk.ptp(np.zeros((0, 3)), axis=0)
    with pytest.raises(TypeError, match="bool"):
        nk.ptp(np.array([True, False]))
