"""Segmented reductions on a real GPU (marked ``gpu``; skipped under the simulator).

Mixtures of empty, single-element, warp- and tile-boundary and long segments (the
long ones split over many blocks), one segment of 2^28 elements, every reduce
strategy, CuPy in and out. References: integer sums exactly from CuPy's int64
cumsum at the offsets; maxima and argmax from NumPy per segment on the host (a few
segments' worth) or CuPy's own reductions of the one huge segment.
"""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def mixed_offsets(n: int, seed: int = 0) -> np.ndarray:
    """Offsets of ``n`` elements: empty, single, boundary (a 4096-element tile for 256
    threads) and long segments, shuffled, with one of a quarter of the array."""
    rng = np.random.default_rng(seed)
    kinds = [0, 1, 31, 32, 33, 4095, 4096, 4097, 8193]
    lengths = np.concatenate([rng.choice(kinds, 20000), rng.integers(0, 3000, n // 3000),
                              rng.integers(100000, 3000000, 8), [n // 4]])
    rng.shuffle(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    offsets = offsets[offsets < n]
    return np.concatenate([offsets, [n]]).astype(np.int64)


def exact_sums(cp, x, offsets):
    total = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(x.astype(cp.int64))])
    return total[offsets[1:]] - total[offsets[:-1]]


@pytest.mark.parametrize("strategy", nk.strategies.available("reduce"))
def test_int_sums_of_mixed_lengths_every_strategy(cp, strategy):
    n = 1 << 26
    offsets = cp.asarray(mixed_offsets(n))
    x = cp.random.randint(-1000, 1000, n, dtype=cp.int32)
    got = nk.segmented_reduce(x, offsets, strategy=strategy)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.int64
    assert bool(cp.array_equal(got, exact_sums(cp, x, offsets)))


@pytest.mark.parametrize("strategy", ["two_pass/warp_shuffle", "atomic_fold/shared_tree"])
def test_max_and_argmax_of_mixed_lengths_with_ties(cp, strategy):
    n = 1 << 26
    host = mixed_offsets(n, seed=1)
    host_nonempty = np.unique(host)  # argmax of an empty segment raises
    x = cp.random.randint(-50, 50, n).astype(cp.float32)  # many ties
    got = nk.segmented_reduce(x, cp.asarray(host), "max", initial=-np.inf,
                              strategy=strategy).get()
    arg = nk.segmented_argmax(x, cp.asarray(host_nonempty), strategy=strategy).get()
    xs = x.get()
    pick = np.random.default_rng(2).choice(len(host) - 1, 300, replace=False)
    for i in pick:
        seg = xs[host[i]:host[i + 1]]
        assert got[i] == (seg.max() if seg.size else -np.inf)
    pick = np.random.default_rng(3).choice(len(host_nonempty) - 1, 300, replace=False)
    for i in pick:
        assert arg[i] == np.argmax(xs[host_nonempty[i]:host_nonempty[i + 1]])


def test_one_segment_of_2_28(cp):
    n = 1 << 28
    x = cp.random.randint(-1000, 1000, n, dtype=cp.int32)
    offsets = cp.asarray(np.array([0, n], np.int64))
    assert int(nk.segmented_reduce(x, offsets)[0]) == int(x.sum(dtype=cp.int64))
    y = x.astype(cp.float32)
    y[n - 5] = 5000.0
    y[n - 3] = 5000.0
    assert int(nk.segmented_argmax(y, offsets)[0]) == n - 5
    y[7] = np.nan
    assert int(nk.segmented_argmax(y, offsets)[0]) == 7


@pytest.mark.parametrize("mean", [1024, 16384, 1 << 20])
def test_float_sums_finished_in_the_tile_kernel_are_repeatable(cp, mean):
    """two_pass: each long segment's runs meet in the block that closes the last one,
    in one tree whichever block that is: replayed calls give the same bits, within a
    tree's rounding of the float64 sums."""
    n = 1 << 26
    rng = np.random.default_rng(mean)
    lengths = rng.integers(0, 2 * mean + 1, n // mean + 1)
    host = np.concatenate([[0], np.cumsum(lengths)])
    host = host[host <= n].astype(np.int64)
    offsets = cp.asarray(host)
    x = cp.random.standard_normal(n, dtype=cp.float32)
    first = nk.segmented_reduce(x, offsets)
    for _ in range(3):
        assert bool(cp.array_equal(nk.segmented_reduce(x, offsets), first))
    total = cp.concatenate([cp.zeros(1), cp.cumsum(x.astype(cp.float64))])
    want = total[offsets[1:]] - total[offsets[:-1]]
    magnitude = cp.concatenate([cp.zeros(1), cp.cumsum(cp.abs(x).astype(cp.float64))])
    bound = (magnitude[offsets[1:]] - magnitude[offsets[:-1]]) * 1e-5 + 1e-6
    assert bool((cp.abs(first - want) <= bound).all())


def test_replayed_calls_check_offsets_written_just_before_them(cp, side_stream):
    """The report on device offsets is a check that replays: repeated calls replay with
    the right sums, and a decreasing offset written by a CuPy op queued on the call's
    (non-blocking) stream right before the next call is read after that op and named
    (segmented_argmax's empty segment too)."""
    from numbakern.runtime import replay

    stream, delay = side_stream("cupy")
    with stream:
        x = cp.arange(1000, dtype=cp.int32)
        offsets = cp.asarray(np.array([0, 10, 500, 500, 1000], np.int64))
        before = replay.counts["replayed"]
        for _ in range(3):
            got = nk.segmented_reduce(x, offsets)
            assert cp.asnumpy(got).tolist() == [45, sum(range(10, 500)), 0,
                                                sum(range(500, 1000))]
        assert replay.counts["replayed"] - before >= 2
        delay()
        offsets[2] = 5
        with pytest.raises(ValueError, match="segment 1 runs from 10 to 5"):
            nk.segmented_reduce(x, offsets)
        ends = cp.asarray(np.array([0, 10, 1000], np.int64))
        for _ in range(3):
            assert cp.asnumpy(nk.segmented_argmax(x, ends)).tolist() == [9, 989]
        delay()
        ends[1] = 0
        with pytest.raises(ValueError, match=r"argmax of an empty segment \(segment 0"):
            nk.segmented_argmax(x, ends)
