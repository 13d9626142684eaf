"""``where=`` on a real GPU (marked `gpu`; skipped under the simulator): CuPy input and
masks (broadcast ones at stride 0, never copied), torch CUDA tensors, every reduce
strategy, default grids and realistic sizes, against CuPy's own reductions on the
masked-out-as-identity input in float64 (integers exactly).
"""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _ref_sum(cp, x, where, axis):
    return cp.where(where, x.astype(cp.float64), 0).sum(axis=axis)


@pytest.mark.parametrize("strategy", nk.strategies.available())
@pytest.mark.parametrize("shape,axis", [(((1 << 24) + 3,), None), ((4096, 4097), 1),
                                        ((4097, 4096), 0), ((1_000_000, 2), 1),
                                        ((64, 1 << 18), None)])
def test_sum_max_mean_with_where(cp, strategy, shape, axis):
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    where = cp.random.random(shape) < 0.7
    got = nk.sum(x, axis=axis, where=where, strategy=strategy)
    ref = _ref_sum(cp, x, where, axis)
    bound = 4 * np.finfo(np.float32).eps * cp.abs(x.astype(cp.float64)).sum(axis=axis) + 1e-30
    assert bool(cp.all(cp.abs(got.astype(cp.float64) - ref) <= bound))
    got = nk.max(x, axis=axis, where=where, initial=-cp.inf, strategy=strategy)
    assert bool(cp.all(got == cp.where(where, x, -cp.inf).max(axis=axis)))
    xi = cp.random.randint(-1000, 1000, shape, dtype=cp.int32)
    got = nk.sum(xi, axis=axis, where=where, strategy=strategy)
    assert bool(cp.all(got == cp.where(where, xi, 0).sum(axis=axis, dtype=cp.int64)))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_broadcast_masks_stay_stride_zero_views(cp, axis):
    x = cp.random.standard_normal((8192, 4096), dtype=cp.float32)
    for where in (cp.random.random((8192, 1)) < 0.5, cp.random.random(4096) < 0.5,
                  cp.broadcast_to(cp.random.random((1, 4096)) < 0.5, (8192, 4096))):
        before = cp.get_default_memory_pool().used_bytes()
        got = nk.mean(x, axis=axis, where=where)
        grown = cp.get_default_memory_pool().used_bytes() - before
        assert grown < x.nbytes // 8  # no x-sized mask or copy of x was made
        full = cp.broadcast_to(where, x.shape)
        with np.errstate(invalid="ignore"):  # a slice masked out whole: NaN, as NumPy
            ref = _ref_sum(cp, x, full, axis) / full.sum(axis=axis)
        assert bool(cp.allclose(got.astype(cp.float64), ref, rtol=1e-5, atol=1e-6,
                                equal_nan=True))


def test_var_and_nanmax_with_where(cp):
    x = cp.random.standard_normal((2048, 8192), dtype=cp.float64) * 3 + 100
    where = cp.random.random((2048, 8192)) < 0.5
    got = nk.var(x, axis=1, where=where, ddof=1)
    ref = np.var(cp.asnumpy(x), axis=1, where=cp.asnumpy(where), ddof=1)
    assert np.allclose(cp.asnumpy(got), ref, rtol=1e-10)
    x[::3, ::5] = cp.nan
    got = nk.nanmax(x, axis=0, where=where, initial=-1.0)
    ref = np.nanmax(cp.asnumpy(x), axis=0, where=cp.asnumpy(where), initial=-1.0)
    assert np.array_equal(cp.asnumpy(got), ref)


def test_torch_cuda_tensors(cp):
    torch = pytest.importorskip("torch")
    x = torch.randn(4096, 4096, device="cuda")
    keep = torch.rand(4096, 1, device="cuda") > 0.3
    got = nk.sum(x, axis=0, where=keep)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    ref = torch.where(keep, x.double(), 0).sum(0)
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-3)
