"""numbakern on Dask arrays of CuPy chunks, on a real GPU (marked `gpu`; skipped under
the simulator): results equal to NumPy's, ``_meta`` still CuPy, the threaded scheduler
(numbakern's launch and replay caches used from several threads at once), and a
``dask_cuda.LocalCUDACluster`` of one worker (skipped without dask-cuda).

Run on the GPU machine: ``pytest -n 0 -m gpu tests/api/test_dask_gpu.py``.
"""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _cupy_result(cp, lazy):
    assert isinstance(lazy._meta, cp.ndarray), type(lazy._meta)
    got = lazy.compute()
    assert isinstance(got, cp.ndarray), type(got)
    return cp.asnumpy(got)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_cupy_chunks_every_family(cp, scheduler):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 5000)).astype(np.float32)
    a[7, 4321] = a.max() + 1
    x = da.from_array(cp.asarray(a), chunks=(128, 2048))
    assert isinstance(x._meta, cp.ndarray)
    with dask.config.set(scheduler=scheduler, num_workers=8):
        np.testing.assert_allclose(_cupy_result(cp, nk.sum(x, axis=1)),
                                   a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(_cupy_result(cp, nk.max(x, axis=0)), a.max(0))
        np.testing.assert_array_equal(_cupy_result(cp, nk.argmax(x)), np.argmax(a))
        np.testing.assert_array_equal(_cupy_result(cp, nk.argmax(x, axis=1)),
                                      np.argmax(a, axis=1))
        for method in ("sequential", "blelloch"):
            lazy = nk.cumsum(x, axis=1, method=method, dtype=np.float64)
            assert lazy.dtype == np.float64
            np.testing.assert_allclose(_cupy_result(cp, lazy),
                                       np.cumsum(a.astype(np.float64), 1), rtol=1e-9,
                                       atol=1e-9)
        ref = np.exp(a - a.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        np.testing.assert_allclose(_cupy_result(cp, nk.softmax(x, axis=1)), ref, rtol=1e-5,
                                   atol=1e-7)
        w = np.linspace(0.5, 1.5, 5000)  # host weights along axis 1: made CuPy chunks
        np.testing.assert_allclose(_cupy_result(cp, nk.average(x, axis=1, weights=w)),
                                   np.average(a.astype(np.float64), axis=1, weights=w),
                                   rtol=1e-4, atol=1e-5)
        hist, _ = nk.histogram(x, bins=16, range=(-3, 3))
        np.testing.assert_array_equal(_cupy_result(cp, hist),
                                      np.histogram(a, bins=16, range=(-3, 3))[0])
        hist, _ = nk.histogram(x, bins=16, range=(-3, 3), weights=a, density=True)
        np.testing.assert_allclose(_cupy_result(cp, hist), np.histogram(
            a, bins=16, range=(-3, 3), weights=a, density=True)[0], rtol=1e-4)


@pytest.mark.parametrize("split_every", [None, 2])
def test_cupy_chunks_arg_forms_nan_ties_and_empty_chunks(cp, split_every):
    """argmax and friends on CuPy chunks: the combine relies on CuPy's max and min
    returning NaN wherever a NaN is; ties and NaNs across chunk edges, the last index
    with tie_break_left=False, a chunk grid out of index order, an empty chunk."""
    a = np.random.default_rng(1).integers(0, 5, size=(9, 70)).astype(np.float32)
    a[:, 31] = a[:, 32] = 9.0
    a[2, 40] = a[2, 60] = a[5, 2] = np.nan
    x = da.from_array(cp.asarray(a), chunks=((4, 0, 5), (32, 32, 6)))
    rev = a[:, ::-1]
    for axis in (None, 0, 1):
        for left in (True, False):
            if left:
                want = np.argmax(a, axis=axis)
            elif axis is None:
                want = a.size - 1 - np.argmax(a.ravel()[::-1])
            else:
                want = a.shape[axis] - 1 - np.argmax(np.flip(a, axis), axis=axis)
            kw = dict(axis=axis, tie_break_left=left, split_every=split_every)
            np.testing.assert_array_equal(_cupy_result(cp, nk.argmax(x, **kw)), want)
            values, indices = nk.max_with_indices(x, **kw)
            np.testing.assert_array_equal(_cupy_result(cp, values), np.max(a, axis=axis))
            np.testing.assert_array_equal(_cupy_result(cp, indices), want)
    np.testing.assert_array_equal(_cupy_result(cp, nk.argmin(x, axis=1)),
                                  np.argmin(a, axis=1))
    assert int(nk.argmax(x[:, 2:][:, ::-1]).compute()) == np.argmax(rev[:, :-2])
    with pytest.raises(ValueError, match="empty sequence"):
        nk.argmax(x[:0]).compute()


@pytest.mark.parametrize("method", ["sequential", "blelloch"])
def test_cupy_chunks_scan_from_device_carries(cp, method):
    """Each chunk's scan kernel starts from its carry, a CuPy slice of the chunk before
    (no second pass, no host round trip): a flat array of uneven chunks several tiles
    long, every mode, int32 into int64 exactly; float32 within the error bound of a
    scan (4 eps x depth x the running sum of magnitudes)."""
    rng = np.random.default_rng(2)
    a = rng.integers(-1000, 1000, 3_000_017).astype(np.int32)
    x = da.from_array(cp.asarray(a), chunks=((1_000_000, 7, 0, 2_000_010),))
    w = a.astype(np.int64)
    for exclusive in (False, True):
        for reverse in (False, True):
            inc = np.cumsum(w[::-1])[::-1] if reverse else np.cumsum(w)
            want = inc - w if exclusive else inc
            got = nk.cumsum(x, exclusive=exclusive, reverse=reverse, method=method)
            np.testing.assert_array_equal(_cupy_result(cp, got), want,
                                          err_msg=f"{exclusive} {reverse}")
    f = rng.uniform(-1, 1, a.size).astype(np.float32)
    y = da.from_array(cp.asarray(f), chunks=((1_000_000, 7, 0, 2_000_010),))
    got = _cupy_result(cp, nk.cumsum(y, method=method))
    scale = np.cumsum(np.abs(f.astype(np.float64)))
    err = np.abs(got.astype(np.float64) - np.cumsum(f.astype(np.float64)))
    assert (err <= 4 * np.finfo(np.float32).eps * 64 * scale).all()


def test_local_cuda_cluster_of_one_worker(cp):
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    a = np.arange(1 << 20, dtype=np.int64)
    with dask_cuda.LocalCUDACluster(n_workers=1) as cluster, distributed.Client(cluster):
        x = da.from_array(cp.asarray(a), chunks=1 << 18)
        assert int(nk.sum(x).compute()) == int(a.sum())
        assert int(nk.cumsum(x)[-1].compute()) == int(a.sum())
        assert int(nk.argmax(x).compute()) == a.size - 1
