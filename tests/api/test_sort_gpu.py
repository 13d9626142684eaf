"""Sorts and histograms at scale on a real GPU (skipped under the simulator)."""

import numpy as np
import pytest

import numbakern as nk
from numbakern.strategies import BitonicSort, RadixSort

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32",
                                   "uint32", "int64", "uint64", "float16", "float32",
                                   "float64"])
def test_every_dtype_1m(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(1 << 20) * 1000).astype(dtype)
    if x.dtype.kind == "f":
        x[::1001] = np.nan
        x[::997] = -0.0
    expected = np.argsort(x, kind="stable")
    assert np.array_equal(nk.argsort(x, strategy="radix"), expected)
    got = nk.sort(x, strategy="radix")
    assert np.array_equal(got.view(f"u{x.itemsize}"), x[expected].view(f"u{x.itemsize}"))


def test_float32_2_24_vs_cupy_sort(cp):
    x = cp.random.standard_normal(1 << 24, dtype=cp.float32)
    assert bool(cp.array_equal(nk.sort(x), cp.sort(x)))


def test_argsort_stable_2_24_duplicates(cp):
    x = cp.random.randint(0, 1000, 1 << 24).astype(cp.int32)
    idx = nk.argsort(x)
    assert bool(cp.array_equal(idx, cp.asarray(np.argsort(cp.asnumpy(x), kind="stable"))))


@pytest.mark.parametrize("dtype", ["uint32", "float32"])
def test_sort_2_28_vs_cupy(cp, dtype):
    x = cp.random.randint(0, 2**31, 1 << 28, dtype=cp.int64).astype(dtype)
    assert bool(cp.array_equal(nk.sort(x), cp.sort(x)))


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_integer_keys_in_their_own_default_tile(cp, dtype):
    """4-byte integer keys sort in 256 x 32 tiles by default (``INTEGER_TILE``): a
    partial last tile, negative keys, duplicates; rows of a partial tile each too."""
    assert RadixSort().tile_shape(4, 0, np.dtype(dtype)) == (256, 32)
    low = -5000 if dtype == "int32" else 0
    x = cp.random.randint(low, 5000, (1 << 22) + 777).astype(dtype)
    assert bool(cp.array_equal(nk.sort(x), cp.sort(x)))
    rows = x[:3 * 100_003].reshape(3, -1)
    assert bool(cp.array_equal(nk.sort(rows), cp.sort(rows, axis=-1)))


@pytest.mark.parametrize("threads,items", [(384, 21), (256, 24), (512, 16), (256, 28),
                                           (384, 16), (384, 12), (256, 20)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tiles_past_48_kib(cp, dtype, threads, items):
    """Tiles in dynamic shared memory past 48 KiB (CUB's 384 x 21 among them): sort and
    stable argsort of keys with duplicates, a partial last tile."""
    x = cp.random.randint(0, 5000, (1 << 22) + 777).astype(dtype)
    s = RadixSort(threads=threads, items=items)
    assert bool(cp.array_equal(nk.sort(x, strategy=s), cp.sort(x)))
    want = np.argsort(cp.asnumpy(x), kind="stable")
    assert np.array_equal(cp.asnumpy(nk.argsort(x, strategy=s)), want)


@pytest.mark.bigmem
def test_past_2_30_wide_look_back(cp):
    """2**30 + 1000 keys: a row long enough for 64-bit look-back words (WIDE_ROWS)."""
    n = (1 << 30) + 1000
    x = cp.random.standard_normal(n, dtype=cp.float32)
    x[::4099] = x[7]  # duplicates: the argsort must keep them in input order
    want = cp.sort(x)
    assert bool(cp.array_equal(nk.sort(x), want))
    idx = nk.argsort(x)
    assert bool(cp.array_equal(x[idx], want))
    equal = cp.nonzero(x[idx] == x[7])[0]
    assert bool((cp.diff(idx[equal]) > 0).all())  # stable: ascending positions


@pytest.mark.parametrize("shape,strategy", [((4096, 1000), None), ((1000, 2048), "bitonic"),
                                            ((64, 100_000), "radix")])
def test_rows(cp, shape, strategy):
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    assert bool(cp.array_equal(nk.sort(x, strategy=strategy), cp.sort(x, axis=-1)))
    got = nk.argsort(x, axis=0, strategy=RadixSort() if strategy == "radix" else None)
    assert bool(cp.array_equal(cp.take_along_axis(x, got, 0), cp.sort(x, axis=0)))


def test_bitonic_threads_1024(cp):
    x = cp.random.randint(0, 50, (300, 2048)).astype(cp.float32)
    got = nk.argsort(x, strategy=BitonicSort(threads=1024, max_size=2048))
    assert np.array_equal(cp.asnumpy(got), np.argsort(cp.asnumpy(x), axis=-1, kind="stable"))


@pytest.mark.parametrize("strategy", ["global_atomic", "shared_privatized", "warp_privatized"])
def test_histogram_2_28(cp, strategy):
    x = cp.random.randint(0, 256, 1 << 28, dtype=cp.int32)
    assert bool(cp.array_equal(nk.histogram_counts(x, 256, strategy=strategy),
                               cp.bincount(x, minlength=256)))
    same = cp.full(1 << 28, 3, dtype=cp.int32)
    got = nk.histogram_counts(same, 256, strategy=strategy)
    assert int(got[3]) == 1 << 28 and int(got.sum()) == 1 << 28
    assert bool(cp.array_equal(nk.bincount(x), cp.bincount(x)))


def test_histogram_float_matches_numpy_2_24(cp):
    x = cp.random.standard_normal(1 << 24, dtype=cp.float32)
    hist, edges = nk.histogram(x, 1000, range=(-3, 3))
    hist_np, edges_np = np.histogram(cp.asnumpy(x), 1000, range=(-3, 3))
    assert np.array_equal(cp.asnumpy(hist), hist_np)
    assert np.array_equal(cp.asnumpy(edges), edges_np)


@pytest.mark.parametrize("dtype, rng", [
    (np.float32, (-3e38, 3e38)), (np.float64, (-1.5, 2.25)), (np.int64, (2**60 + 7, 2**61)),
    (np.uint64, (2**53 - 70, 2**53 + 70)), (np.int32, (-3.5, 1e6)), (np.float16, (-6e4, 6e4))])
def test_histogram_ranges_match_numpy_on_the_device(cp, dtype, rng):
    """The device's binning (BinRule) against np.histogram, values near the range's
    ends and its edges included."""
    gen = np.random.default_rng(3)
    lo, hi = rng
    if np.dtype(dtype).kind in "iu":
        span = np.linspace(float(lo) - 10, float(hi) + 10, 1 << 20)
        ends = np.array([lo - 1, lo, lo + 1, hi - 1, hi, hi + 1], dtype=object)
        x = np.concatenate([np.clip(span, np.iinfo(dtype).min, np.iinfo(dtype).max)
                            .astype(dtype), ends.astype(dtype)])
    else:
        x = (gen.uniform(-0.4, 0.05, 1 << 20) * np.float64(hi)).astype(dtype)  # v - lo finite
    hist, edges = nk.histogram(cp.asarray(x), 7, range=rng)
    hist_np, edges_np = np.histogram(x, 7, range=rng)
    assert np.array_equal(cp.asnumpy(hist), hist_np)
    assert np.array_equal(cp.asnumpy(edges), edges_np)
