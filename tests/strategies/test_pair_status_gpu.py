"""Decoupled look-back's 16-byte status words on a real GPU (marked ``gpu``; skipped
under the simulator): the default look-back (256 threads, 16 items for int32 -> int64,
8 for float64) over 2^20+5 elements, inclusive, exclusive and reverse, against NumPy
(int32 summed in int64 exactly; float64 within ``n * eps`` of the sum of magnitudes).
Each launch's status array is caught to check that the (status, value) pairs were
taken: 2 uint64 words a tile, 16-byte aligned, every tile's status P after the scan."""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.strategies import decoupled_lookback
from numbakern.strategies.decoupled_lookback import STATUS_P, DecoupledLookback

pytestmark = pytest.mark.gpu

N = (1 << 20) + 5


@pytest.fixture
def launched(monkeypatch):
    seen = []
    real = decoupled_lookback.launch

    def spy(kernel, grid, threads, stream, *args):
        seen.append((grid, args[6]))  # 2 sources, 2 outputs, n, tiles, then the status
        return real(kernel, grid, threads, stream, *args)

    monkeypatch.setattr(decoupled_lookback, "launch", spy)
    return seen


def reference(x, exclusive=False, reverse=False):
    x = x.astype(np.float64 if x.dtype.kind == "f" else np.int64)
    y = np.flip(np.cumsum(np.flip(x)), 0) if reverse else np.cumsum(x)
    return y - x if exclusive else y


def check_pairs(launched):
    (total, status), = launched
    assert total > 32  # look-backs past one window's worth of tiles
    assert status.dtype == np.uint64 and status.shape == (2 * total,)
    assert status.__cuda_array_interface__["data"][0] % 16 == 0
    words = cuda.as_cuda_array(status).copy_to_host()
    np.testing.assert_array_equal(words[0:2 * total:2], STATUS_P)
    launched.clear()


KINDS = [{}, {"exclusive": True}, {"reverse": True}]


@pytest.mark.parametrize("kw", KINDS)
def test_int32_summed_in_int64_2_20_plus_5(kw, launched):
    x = np.random.default_rng(11).integers(-2**31, 2**31, N).astype(np.int32)
    got = nk.cumsum(x, strategy=DecoupledLookback(), layout="tiles", **kw)
    np.testing.assert_array_equal(got, reference(x, **kw))
    check_pairs(launched)


@pytest.mark.parametrize("kw", KINDS)
def test_float64_2_20_plus_5(kw, launched):
    x = np.random.default_rng(12).standard_normal(N)
    got = nk.cumsum(x, strategy=DecoupledLookback(), layout="tiles", **kw)
    bound = np.abs(x).sum() * N * np.finfo(np.float64).eps
    assert np.all(np.abs(got - reference(x, **kw)) <= bound)
    check_pairs(launched)
