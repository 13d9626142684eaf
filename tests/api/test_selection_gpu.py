"""Medians, quantiles and partitions at scale on a real GPU (skipped under the
simulator), against NumPy on the host: float32 at 2^24, 2^26 and 2^28, and along the
last axis of many rows (partitions by np.sort's values at each kth)."""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _data(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


@pytest.mark.parametrize("log2", [26, 28])
def test_median_and_quantile_flat_float32(log2):
    x = _data(1 << log2)
    assert nk.median(x) == np.median(x)  # the mean of the middle two, in float32
    q = [0.0, 0.001, 0.25, 0.5, 0.9, 1.0]
    # rtol: the device may fuse the interpolation's multiply-add (one rounding less)
    np.testing.assert_allclose(nk.quantile(x, q), np.quantile(x, q), rtol=1e-6, atol=0)
    assert nk.quantile(x, q).dtype == np.quantile(x, q).dtype


def test_cupy_in_cupy_out_2_28(cp):
    host = _data(1 << 28, seed=1)
    host[::4097] = np.nan
    x = cp.asarray(host)
    got = nk.nanmedian(x)
    assert isinstance(got, cp.ndarray) and float(got) == np.nanmedian(host)
    assert bool(cp.isnan(nk.median(x)))
    got = nk.nanquantile(x, cp.asarray([0.1, 0.5]))
    np.testing.assert_allclose(cp.asnumpy(got), np.nanquantile(host, [0.1, 0.5]), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "float64"])
def test_rows_along_the_last_axis(dtype):
    x = (_data(4096 * 4096, seed=2).reshape(4096, 4096) * 100).astype(dtype)
    np.testing.assert_array_equal(nk.median(x, axis=-1), np.median(x, axis=-1))
    ref = np.quantile(x.astype(np.float32) if dtype == "float16" else x, 0.3, axis=-1)
    got = nk.quantile(x, 0.3, axis=-1)
    assert got.dtype == np.quantile(x[:1], 0.3, axis=-1).dtype
    rtol = 2e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                               atol=rtol)


def test_partition_contract_2_26():
    x = _data(1 << 26, seed=3)
    kth = [0, 12345, (1 << 25), -1]
    part = nk.partition(x, kth)
    ordered = np.sort(x)
    for k in kth:
        assert part[k] == ordered[k]
        assert (part[:k % x.size] <= part[k]).all() and (part[k % x.size:] >= part[k]).all()


@pytest.mark.parametrize("shape", [(1 << 28,), (8192, 50257)], ids=["2^28", "8192x50257"])
def test_radix_select_path_is_the_sort_path(cp, shape):
    # the default (radix select of the middle ranks) and the sort path agree exactly,
    # ties, NaN and infinities included
    host = (_data(int(np.prod(shape)), seed=4) * 8).round().reshape(shape)
    host.reshape(-1)[::65537] = np.nan
    host.reshape(-1)[1::65537] = np.inf
    x = cp.asarray(host)
    axis = -1 if len(shape) > 1 else None
    for fn in (nk.median, nk.nanmedian):
        got, sorted_ = fn(x, axis=axis), fn(x, axis=axis, strategy="radix")
        np.testing.assert_array_equal(cp.asnumpy(got), cp.asnumpy(sorted_))
    np.testing.assert_array_equal(cp.asnumpy(nk.nanmedian(x, axis=axis)),
                                  np.nanmedian(host, axis=axis))
    got = nk.nanquantile(x, [0.1, 0.5], axis=axis)
    want = nk.nanquantile(x, [0.1, 0.5], axis=axis, strategy="radix")
    np.testing.assert_array_equal(cp.asnumpy(got), cp.asnumpy(want))


def _check_partition_rows(x, part, kth, ordered):
    """The partition contract along the last axis against np.sort's ``ordered``."""
    for k in kth:
        np.testing.assert_array_equal(part[..., k], ordered[..., k])
        pivot = part[..., k:k + 1]
        after = part[..., k + 1:]
        assert (part[..., :k] <= pivot).all() and ((after >= pivot) | np.isnan(after)).all()
    np.testing.assert_array_equal(np.sort(part, axis=-1), ordered)  # a permutation


@pytest.mark.parametrize("kth", [1, 8, 50, 256, [1, 8, 50, 256]])
def test_partition_by_radix_select_flat_2_24(kth):
    x = (_data(1 << 24, seed=5) * 16).round()  # ties
    ordered = np.sort(x)
    for strategy in (None, "radix_select"):
        part = nk.partition(x, kth, strategy=strategy)
        _check_partition_rows(x, part, np.atleast_1d(kth), ordered)
        idx = nk.argpartition(x, kth, strategy=strategy)
        assert idx.dtype == np.int64
        _check_partition_rows(x, x[idx], np.atleast_1d(kth), ordered)


def test_partition_by_radix_select_rows_8192x50257(cp):
    host = (_data(8192 * 50257, seed=6) * 16).round().reshape(8192, 50257)
    host[::7, ::4099] = np.nan
    ordered = np.sort(host, axis=-1)
    x = cp.asarray(host)
    for kth in (1, 8, 50, 256):
        part = cp.asnumpy(nk.partition(x, kth, axis=-1))
        _check_partition_rows(host, part, [kth], ordered)
    idx = cp.asnumpy(nk.argpartition(x, [1, 50, 256], axis=-1))
    _check_partition_rows(host, np.take_along_axis(host, idx, -1), [1, 50, 256], ordered)


@pytest.mark.parametrize("shape", [(64, 1000), (2, 30000), (64, 30000)])  # sort, select
def test_order_statistics_replay_and_their_checks_still_warn(cp, shape, side_stream):
    """A repeated median, quantile or partition of one CuPy layout replays (its reads of
    the kernel's NaN counts and floating-point flags are checks; the select path's
    ranks for each row are put by a launch); an all-NaN row or an inf beside a -inf in
    the middle, written on the call's (non-blocking) stream right before a replayed
    call, still warns as NumPy does."""
    from numbakern.runtime import replay

    host = _data(shape, seed=5)
    stream, delay = side_stream("cupy")
    with stream:
        x = cp.asarray(host)
        cases = [(lambda a: nk.median(a, axis=1), lambda h: np.median(h, axis=1)),
                 (lambda a: nk.nanmedian(a, axis=1), lambda h: np.nanmedian(h, axis=1)),
                 (lambda a: nk.quantile(a, 0.3, axis=1),
                  lambda h: np.quantile(h, 0.3, axis=1)),
                 (lambda a: nk.partition(a, 7, axis=1)[:, 7],
                  lambda h: np.sort(h, axis=1)[:, 7])]
        for call, reference in cases:
            before = replay.counts["replayed"]
            for _ in range(3):
                np.testing.assert_allclose(cp.asnumpy(call(x)), reference(host), rtol=1e-6)
            assert replay.counts["replayed"] - before >= 2
        delay()
        x[1] = cp.nan
        with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
            got = cp.asnumpy(nk.nanmedian(x, axis=1))
        assert np.isnan(got[1]) and not np.isnan(got[0])
        row = np.sort(host[0])
        middle = shape[1] // 2
        row[:middle], row[middle:] = -np.inf, np.inf  # the middle two: -inf and inf
        delay()
        x[0] = cp.asarray(row)
        with pytest.warns(RuntimeWarning, match="invalid value encountered in median"):
            got = cp.asnumpy(nk.median(x, axis=1))
    assert np.isnan(got[0])
