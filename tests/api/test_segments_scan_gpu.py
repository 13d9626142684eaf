"""Segmented scans, scans by key and sorts on a real GPU (marked ``gpu``; skipped under
the simulator).

2^26-2^28 elements in many segments of mixed lengths (empty, single elements, warp
and tile boundaries, long runs), CuPy in and out, every scan strategy. References:
integer scans exactly against CuPy's own whole-array cumsum minus each segment's
exclusive prefix (exact in int64); float32 sums against the same idiom in float64,
within ``n * eps`` of each segment's running sum of magnitudes; sorts against NumPy's
stable ``lexsort`` by (segment, key) on the host.
"""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def mixed_offsets(n: int, seed: int = 0) -> np.ndarray:
    """Offsets of ``n`` elements: runs of empty, single, boundary and long segments."""
    rng = np.random.default_rng(seed)
    kinds = [0, 1, 31, 32, 33, 127, 128, 129, 4095, 4097]
    lengths = np.concatenate([rng.choice(kinds, 20000), rng.integers(0, 3000, n // 1500),
                              rng.integers(100000, 3000000, 8)])
    rng.shuffle(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    offsets = offsets[offsets < n]
    return np.concatenate([offsets, [n]]).astype(np.int64)


def segment_of(cp, offsets, n):
    """Each element's segment index (the count of segment ends at or before it)."""
    return cp.searchsorted(offsets[1:], cp.arange(n), side="right")


def idiom(cp, x, offsets, reverse=False):
    """Each segment's inclusive sum by the whole cumsum minus its exclusive prefix (in
    x's dtype: int64 exact, float64 close)."""
    if reverse:
        x = x[::-1]
        offsets = offsets[-1] - offsets[::-1]
    total = cp.cumsum(x)
    before = cp.concatenate([cp.zeros(1, x.dtype), total])[offsets[:-1]]
    out = total - before[segment_of(cp, offsets, x.size)]
    return out[::-1] if reverse else out


@pytest.mark.parametrize("strategy", nk.strategies.available("scan"))
def test_int_scans_2_26_every_strategy(cp, strategy):
    n = 1 << 26
    offsets = cp.asarray(mixed_offsets(n))
    x = cp.random.randint(-1000, 1000, n, dtype=cp.int32)
    want = idiom(cp, x.astype(cp.int64), offsets)
    got = nk.segmented_scan(x, offsets, strategy=strategy)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.int64
    assert bool(cp.array_equal(got, want))
    got = nk.segmented_scan(x, offsets, exclusive=True, reverse=True, strategy=strategy)
    want = idiom(cp, x.astype(cp.int64), offsets, reverse=True) - x
    assert bool(cp.array_equal(got, want))


@pytest.mark.parametrize("n", [1 << 26, 1 << 28])
def test_float32_sums(cp, n):
    offsets = cp.asarray(mixed_offsets(n, 1))
    x = cp.random.standard_normal(n, dtype=cp.float32)
    got = nk.segmented_scan(x, offsets)
    want = idiom(cp, x.astype(cp.float64), offsets)
    lengths = cp.diff(offsets)
    magnitude = idiom(cp, cp.abs(x).astype(cp.float64), offsets)
    bound = lengths[segment_of(cp, offsets, n)] * np.finfo(np.float32).eps * magnitude
    assert bool((cp.abs(got - want) <= bound + 1e-30).all())


def test_max_scan_and_device_offsets_of_int32(cp):
    n = 1 << 26
    host = mixed_offsets(n, 2)
    x = cp.random.standard_normal(n, dtype=cp.float32)
    got = nk.segmented_scan(x, cp.asarray(host.astype(np.int32)), "max")
    xs = x.get()
    for a, b in zip(host[:-1][::997], host[1:][::997]):  # a sample of the segments
        np.testing.assert_array_equal(got[a:b].get(), np.maximum.accumulate(xs[a:b]))


def test_repeated_calls_replay_on_new_data_and_still_check_offsets(cp):
    """CuPy values and offsets: the second and third calls replay both launch groups
    (marking, then the scan of packed (flags, float32) states, 16 items a thread) on
    new data; the copy between them still checks every offset."""
    from numbakern.runtime import replay

    n = 1 << 24
    offsets = cp.asarray(mixed_offsets(n, 3))
    before = replay.counts["replayed"]
    for seed in range(3):
        x = cp.random.default_rng(seed).standard_normal(n, dtype=cp.float32)
        got = nk.segmented_scan(x, offsets, reverse=True)
        want = idiom(cp, x.astype(cp.float64), offsets, reverse=True)
        magnitude = idiom(cp, cp.abs(x).astype(cp.float64), offsets, reverse=True)
        bound = cp.diff(offsets)[segment_of(cp, offsets, n)] * np.finfo(np.float32).eps
        assert bool((cp.abs(got - want) <= bound * magnitude + 1e-30).all())
    assert replay.counts["replayed"] - before == 4
    bad = offsets.copy()
    bad[5] = bad[4] - 1
    with pytest.raises(ValueError, match="segment 4 runs from"):
        nk.segmented_scan(x, bad, reverse=True)


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint16"])
def test_sorts_2_26_against_lexsort(cp, dtype):
    n = 1 << 26
    host = mixed_offsets(n, 3)
    rng = np.random.default_rng(4)
    keys = (rng.standard_normal(n) * 1000).astype(dtype)
    if keys.dtype.kind == "f":
        keys[::1001] = np.nan
        keys[::997] = -0.0
    segment = np.repeat(np.arange(host.size - 1), np.diff(host))
    order = np.lexsort((keys, segment))
    got_keys, got_order = nk.segmented_sort(cp.asarray(keys), cp.asarray(host),
                                            cp.arange(n, dtype=cp.int64))
    assert bool((got_order.get() == order).all())
    bits = f"u{keys.itemsize}"
    assert bool((got_keys.get().view(bits) == keys[order].view(bits)).all())


def test_sort_2_28_float32_descending_keys_only(cp):
    n = 1 << 28
    offsets = cp.asarray(mixed_offsets(n, 5))
    keys = cp.random.standard_normal(n, dtype=cp.float32)
    got = nk.segmented_sort(keys, offsets, descending=True)
    host, o = got.get(), offsets.get()
    for a, b in zip(o[:-1][::499], o[1:][::499]):  # a sample of the segments
        np.testing.assert_array_equal(host[a:b], np.sort(keys[a:b].get())[::-1])


def test_scan_by_key_2_26_matches_the_segmented_scan_of_its_runs(cp):
    n = 1 << 26
    offsets = cp.asarray(mixed_offsets(n, 6))
    keys = (segment_of(cp, offsets, n) % 3).astype(cp.int8)  # neighbours differ unless empty
    runs = cp.concatenate([cp.zeros(1, cp.int64),
                           cp.flatnonzero(keys[1:] != keys[:-1]) + 1, cp.asarray([n])])
    x = cp.random.randint(-1000, 1000, n, dtype=cp.int32)
    for exclusive, reverse in [(False, False), (True, True)]:
        got = nk.scan_by_key(keys, x, exclusive=exclusive, reverse=reverse)
        want = nk.segmented_scan(x, runs, exclusive=exclusive, reverse=reverse)
        assert bool(cp.array_equal(got, want))
    want = idiom(cp, x.astype(cp.int64), runs)
    assert bool(cp.array_equal(nk.scan_by_key(keys, x), want))
