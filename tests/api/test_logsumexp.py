"""logsumexp against a float64 NumPy reference (SciPy's semantics), every reduction
strategy of the registry, special values and the arguments it refuses."""

import numpy as np
import pytest

import numbakern as nk

RNG = np.random.default_rng(23)


def ref(x, axis=None, keepdims=False):
    """log(sum(exp(x))) in float64 with the maximum taken out first."""
    x = np.asarray(x, np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


@pytest.mark.parametrize("strategy", nk.strategies.every("reduce", threads=32, blocks=2),
                         ids=lambda s: s.label)
def test_every_strategy(strategy):
    x = (RNG.standard_normal((9, 70)) * 30).astype(np.float32)
    np.testing.assert_allclose(nk.logsumexp(x, axis=1, strategy=strategy), ref(x, 1),
                               rtol=2e-6)
    np.testing.assert_allclose(nk.logsumexp(x, strategy=strategy), ref(x), rtol=2e-6)


def test_axes_dtypes_and_special_values():
    x = RNG.standard_normal((5, 6, 33)) * 10
    for axis in (0, 2, (0, 2)):
        got = nk.logsumexp(x, axis=axis, keepdims=True)
        np.testing.assert_allclose(got, ref(x, axis, keepdims=True), rtol=1e-12)
    assert nk.logsumexp(x.astype(np.float16)).dtype == np.float16
    assert nk.logsumexp(np.arange(5)).dtype == np.float64
    np.testing.assert_allclose(nk.logsumexp(np.arange(5)), ref(np.arange(5)), rtol=1e-12)
    rows = np.array([[np.inf, 1.0, -np.inf], [-np.inf, -np.inf, -np.inf],
                     [np.nan, 1.0, 2.0], [1e30, 1e30, 0.0]])
    np.testing.assert_array_equal(nk.logsumexp(rows, axis=1)[:3], [np.inf, -np.inf, np.nan])
    np.testing.assert_allclose(nk.logsumexp(rows, axis=1)[3], 1e30 + np.log(2), rtol=1e-15)
    assert nk.logsumexp(np.zeros((0, 3)), axis=0).tolist() == [-np.inf] * 3


def test_takes_scipys_arguments_in_scipys_order():
    """SciPy's order is (a, axis, b, keepdims, return_sign): a third positional is b,
    which numbakern refuses, not keepdims."""
    x = np.arange(12.0).reshape(3, 4)
    kept = nk.logsumexp(x, 1, None, True)
    assert kept.shape == (3, 1)
    np.testing.assert_allclose(kept[:, 0], nk.logsumexp(x, axis=1), rtol=1e-15)
    with pytest.raises(TypeError, match="b= and return_sign="):
        nk.logsumexp(x, 1, np.full(4, 2.0))
    with pytest.raises(TypeError, match="b= and return_sign="):
        nk.logsumexp(x, 1, None, False, True)


def test_refuses_what_it_does_not_take():
    with pytest.raises(TypeError, match="b= and return_sign="):
        nk.logsumexp(np.ones(3), b=np.ones(3))
    with pytest.raises(TypeError, match="logsumexp is not defined"):
        nk.logsumexp(np.ones(3, np.complex64))
    with pytest.raises(nk.AxisError):
        nk.logsumexp(np.ones(3), axis=1)


@pytest.mark.parametrize("strategy", nk.strategies.every("scan", threads=32),
                         ids=lambda s: s.label)
def test_logcumsumexp_every_scan_strategy(strategy):
    x = (RNG.standard_normal((3, 70)) * 20).astype(np.float32)
    want = np.logaddexp.accumulate(x.astype(np.float64), axis=1)
    got = nk.logcumsumexp(x, axis=1, strategy=strategy, layout="tiles")
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-5)
    assert got.dtype == np.float32


@pytest.mark.parametrize("strategy", nk.strategies.every("scan", threads=32),
                         ids=lambda s: s.label)
def test_logcumsumexp_of_float16_computes_in_float32(strategy):
    """float16 input's (max, sum) states are float32's: results near 0, where m +
    log(s) cancels, are the float64 reference rounded once ([-0.6396, -0.7236] ends at
    0.01239; a float16 sum gave 0.0127, 40 ulps off), host and device alike."""
    from numba import cuda

    x = np.vstack([np.float16([-0.6396, -0.7236] * 35),
                   (RNG.standard_normal((2, 70)) * 3).astype(np.float16)])
    want = np.logaddexp.accumulate(x.astype(np.float64), axis=1)
    for given in (x, cuda.to_device(x)):
        got = nk.logcumsumexp(given, axis=1, strategy=strategy, layout="tiles")
        got = got if isinstance(got, np.ndarray) else got.copy_to_host()
        assert got.dtype == np.float16
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    assert nk.logcumsumexp(x[0, :2])[1] == np.float16(0.01239)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_logcumsumexp_into_a_device_out_of_any_layout():
    from numba import cuda

    h = RNG.standard_normal((4, 40)).astype(np.float32)
    want = np.logaddexp.accumulate(h.astype(np.float64), axis=1)
    base = cuda.to_device(np.zeros((4, 80), np.float64))  # a wider out dtype, cast into
    out = base[::-1, ::2]
    assert nk.logcumsumexp(cuda.to_device(h), axis=1, out=out) is out
    np.testing.assert_allclose(base.copy_to_host()[::-1, ::2], want, rtol=1e-5)


def test_logcumsumexp_special_values_and_errors():
    x = np.array([-np.inf, 1.0, np.inf, 2.0, np.nan, 3.0])
    np.testing.assert_array_equal(nk.logcumsumexp(x), np.logaddexp.accumulate(x))
    y = RNG.standard_normal(50)
    np.testing.assert_allclose(nk.logcumsumexp(y, reverse=True),
                               np.logaddexp.accumulate(y[::-1])[::-1], rtol=1e-12)
    with pytest.raises(TypeError, match="logcumsumexp is not defined"):
        nk.logcumsumexp(np.arange(4))
