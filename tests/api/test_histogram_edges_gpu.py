"""Float histograms against np.histogram on a real GPU, at and around every edge
(skipped under the simulator): the device's own float arithmetic (fused multiply-adds
included) must give NumPy's bins on both binners."""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu


def near_edges(dtype, bins, rng, ulps):
    """Every edge and the ``ulps`` values of ``dtype`` either side of each, NaN, +-inf."""
    edges = np.histogram_bin_edges(np.empty(0, dtype), bins, range=rng).astype(dtype)
    around, below, above = [edges], edges, edges
    for _ in range(ulps):
        below, above = np.nextafter(below, dtype(-np.inf)), np.nextafter(above, dtype(np.inf))
        around += [below, above]
    return np.concatenate(around + [np.array([np.nan, np.inf, -np.inf], dtype)])


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("dtype, bins, rng", [
    (np.float32, 100, (0, 1)), (np.float32, 7, (-3.3, 1e6)), (np.float64, 100, (0.0, 1.0)),
    (np.float64, 7, (-3.3, 1e6)), (np.float32, 12288, (-2.5, 7.0)),
    (np.float32, 100, (1.0, 1.0001)), (np.float32, 100, (1.0, 1.00005)),
    (np.float32, 10, (-1e38, 1e38))])
def test_edges_and_uniform_values_match_numpy(cp, dtype, bins, rng):
    gen = np.random.default_rng(5)
    lo, hi = (float(v) for v in rng)
    x = np.concatenate([np.tile(near_edges(dtype, bins, rng, ulps=3), 8),
                        gen.uniform(lo - (hi - lo) / 10, hi + (hi - lo) / 10, 1 << 20)
                        .astype(dtype)])
    gen.shuffle(x)
    hist, edges = nk.histogram(cp.asarray(x), bins, range=rng)
    want, want_edges = np.histogram(x, bins, range=rng)
    assert np.array_equal(cp.asnumpy(hist), want)
    assert np.array_equal(cp.asnumpy(edges), want_edges)


def test_every_float32_of_a_narrow_range(cp):
    start = np.float32(1.0).view(np.int32)
    x = np.arange(start - 3, start + 2**13 + 4, dtype=np.int32).view(np.float32)
    hist, _ = nk.histogram(cp.asarray(np.tile(x, 64)), 900, range=(1.0, 1.0 + 2**-10))
    want, _ = np.histogram(np.tile(x, 64), 900, range=(1.0, 1.0 + 2**-10))
    assert np.array_equal(cp.asnumpy(hist), want)


@pytest.mark.parametrize("wdtype", [np.float32, np.float64, np.int16])
def test_weighted_and_density_histograms_on_cupy(cp, wdtype):
    """Weights' sums a bin in the weights' dtype and NumPy's density, CuPy in and out,
    at 2**20 values around the edges (the bins written, sorted and summed on the GPU)."""
    gen = np.random.default_rng(6)
    x = np.concatenate([np.tile(near_edges(np.float32, 50, (0, 1), ulps=2), 4),
                        gen.uniform(-0.1, 1.1, 1 << 20).astype(np.float32)])
    w = (gen.standard_normal(x.size) * 4).astype(wdtype)
    hist = nk.histogram(cp.asarray(x), 50, range=(0, 1), weights=cp.asarray(w))[0]
    want = np.histogram(x, 50, range=(0, 1), weights=w)[0]
    assert isinstance(hist, cp.ndarray) and hist.dtype == want.dtype
    rtol = {np.float32: 1e-4, np.float64: 1e-12}.get(wdtype, 0)  # a tree against order
    np.testing.assert_allclose(cp.asnumpy(hist).astype(float), want.astype(float),
                               rtol=rtol, atol=rtol * 100)
    dens = nk.histogram(cp.asarray(x), 50, range=(0, 1), density=True)[0]
    assert isinstance(dens, cp.ndarray) and dens.dtype == np.float64
    np.testing.assert_allclose(cp.asnumpy(dens),
                               np.histogram(x, 50, range=(0, 1), density=True)[0],
                               rtol=1e-12)


@pytest.mark.parametrize("bins, rng", [(10, None), (37, (-1.5, 2.0)), (100, (-4, 4))])
def test_bfloat16_cuda_tensors_bin_as_numpys_bfloat16(bins, rng):
    """A CUDA tensor's bfloat16 bits read in place, each bit pattern binned by the
    host's table of NumPy's bfloat16 arithmetic; edges (bfloat16, or float32 for a
    range of Python floats: NumPy's result_type) and counts as NumPy's."""
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = (torch.randn(1 << 20, generator=torch.Generator().manual_seed(3)) * 2).bfloat16()
    x[::97] = float("nan") if rng is not None else 0.5  # an automatic range: finite
    host = x.float().numpy().astype(ml_dtypes.bfloat16)
    hist, edges = nk.histogram(x.cuda(), bins, range=rng)
    want, want_edges = np.histogram(host, bins, range=rng)
    assert hist.is_cuda and edges.is_cuda
    assert str(edges.dtype) == f"torch.{want_edges.dtype}"
    assert hist.cpu().numpy().tolist() == want.tolist()
    assert edges.cpu().double().numpy().tolist() == want_edges.astype(np.float64).tolist()
