"""Vector tiles of the decoupled look-back scan on a real GPU (marked ``gpu``; skipped
under the simulator): the default strategy's tiles (256 threads, 16 items) over 2^20+3
elements and over rows, against NumPy (float32 within ``n * eps`` of the running sum
of magnitudes, int32 summed in int64 exactly), with the path each call took checked
(the ``Vectors`` in the look-back kernel's key) and compared with scalar tiles."""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.kernels.scan_tiles import Vectors
from numbakern.strategies.decoupled_lookback import DecoupledLookback

pytestmark = pytest.mark.gpu

N = (1 << 20) + 3


def close(got, x):
    x64 = x.astype(np.float64)
    bound = np.cumsum(np.abs(x64), -1) * x.shape[-1] * np.finfo(np.float32).eps
    assert np.all(np.abs(got.astype(np.float64) - np.cumsum(x64, -1)) <= bound)


def test_float32_2_20_plus_3(chosen):
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    got = nk.cumsum(x, layout="tiles")
    assert chosen[-1] == Vectors(4, 4, "<f4")
    close(got, x)
    exclusive = nk.cumsum(x, exclusive=True, layout="tiles")
    assert exclusive[0] == 0
    np.testing.assert_allclose(exclusive[1:], got[:-1], rtol=1e-5, atol=1e-3)


def test_int32_in_int64_2_20_plus_3_matches_scalar_tiles(chosen):
    x = np.random.default_rng(1).integers(-2**31, 2**31, N).astype(np.int32)
    got = nk.cumsum(x, layout="tiles")
    assert chosen[-1] == Vectors(4, 2, "<i8", "<i4")
    np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int64))
    scalar = nk.cumsum(x, layout="tiles", strategy=DecoupledLookback(vectors=False))
    assert chosen[-1] is None
    np.testing.assert_array_equal(scalar, got)


def test_misaligned_device_input_2_20_plus_3(chosen):
    host = np.random.default_rng(2).integers(-1000, 1000, N + 1).astype(np.int32)
    got = nk.cumsum(cuda.to_device(host)[1:], layout="tiles").copy_to_host()
    assert chosen[-1] is None
    np.testing.assert_array_equal(got, np.cumsum(host[1:], dtype=np.int64))


@pytest.mark.parametrize("length, vector", [(4100, True), (4099, False), (40000, True)])
def test_rows(length, vector, chosen):
    x = np.random.default_rng(length).standard_normal((37, length)).astype(np.float32)
    got = nk.cumsum(x, axis=-1, layout="tiles")
    assert (chosen[-1] == Vectors(4, 4, "<f4")) if vector else chosen[-1] is None
    close(got, x)
    i = (x * 1000).astype(np.int32)
    got = nk.cumsum(cuda.to_device(i), axis=1, layout="tiles").copy_to_host()
    assert (chosen[-1] == Vectors(4, 2, "<i8", "<i4")) if vector else chosen[-1] is None
    np.testing.assert_array_equal(got, np.cumsum(i, axis=1, dtype=np.int64))


@pytest.mark.parametrize("op", ["max", "min", "prod"])
def test_narrow_tiles_2_20_plus_3_match_scalar_tiles(op, chosen):
    """Narrow tiles (4-byte inputs in 8-byte states) of the default 256 x 16 shape: the
    places past the end hold zeros, which a max of negatives, a min of positives or a
    product of signs would show if any reached an output."""
    rng = np.random.default_rng(3)
    x = {"max": rng.integers(-2**31, 0, N), "min": rng.integers(1, 2**31, N),
         "prod": rng.choice([-1, 1], N)}[op].astype(np.int32)
    got = nk.associative_scan(x, op, dtype=np.int64, layout="tiles")
    assert chosen[-1] == Vectors(4, 2, "<i8", "<i4")
    ufunc = {"max": np.maximum, "min": np.minimum, "prod": np.multiply}[op]
    np.testing.assert_array_equal(got, ufunc.accumulate(x.astype(np.int64)))
    scalar = nk.associative_scan(x, op, dtype=np.int64, layout="tiles",
                                 strategy=DecoupledLookback(vectors=False))
    np.testing.assert_array_equal(scalar, got)


def test_float32_in_float64_2_20_plus_3(chosen):
    x = np.random.default_rng(4).standard_normal(N).astype(np.float32)
    got = nk.cumsum(x, dtype=np.float64, layout="tiles")
    assert chosen[-1] == Vectors(4, 2, "<f8", "<f4")
    np.testing.assert_allclose(got, np.cumsum(x, dtype=np.float64), rtol=1e-9, atol=1e-9)
