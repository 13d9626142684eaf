"""vector_norm on a real GPU (marked `gpu`; skipped under the simulator): CuPy arrays
and CUDA tensors at sizes past one wave of blocks, every strategy, the result in the
caller's array type, and a repeated call replayed. Tolerances as tests/api/test_norms.py:
float32 rtol 2e-6 against float64 NumPy (1e-5 for 2^26 elements: the tree's rounding
grows with the log of the length); max, min and counts exactly."""

import numpy as np
import pytest

import numbakern as nk
from numbakern.runtime import replay

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("strategy", nk.strategies.available("reduce"))
def test_every_order_on_cupy_arrays(cp, strategy):
    h = np.random.default_rng(3).standard_normal((1024, 4099)).astype(np.float32)
    x = cp.asarray(h)
    for ord in (2, 1, np.inf, -np.inf, 0, 3):
        for axis in (None, 0, 1):
            got = nk.vector_norm(x, axis=axis, ord=ord, strategy=strategy)
            assert isinstance(got, cp.ndarray) and got.dtype == cp.float32
            want = np.linalg.vector_norm(h.astype(np.float64), axis=axis, ord=ord)
            np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-5)


def test_a_long_vector_and_a_replayed_call(cp):
    x = cp.random.standard_normal(1 << 26, dtype=cp.float32)
    want = float(cp.linalg.norm(x.astype(cp.float64)))
    assert float(nk.vector_norm(x)) == pytest.approx(want, rel=1e-5)
    before = replay.counts["replayed"]
    for _ in range(3):
        assert float(nk.vector_norm(x)) == pytest.approx(want, rel=1e-5)
    assert replay.counts["replayed"] - before >= 2


def test_cuda_tensors_agree_with_torch():
    torch = pytest.importorskip("torch")
    t = torch.randn(512, 3000, device="cuda")
    for ord in (2, 1, float("inf"), float("-inf"), 0, 3.0):
        got = nk.vector_norm(t, axis=1, ord=ord)
        assert isinstance(got, torch.Tensor) and got.device == t.device
        torch.testing.assert_close(got, torch.linalg.vector_norm(t, ord=ord, dim=1))
