"""Float histograms bin as NumPy does at and around every edge, on both device binners:
the one multiplying by ``bins / (last - first)`` (where ``BinRule.scale_error`` proves
it exact) and the one repeating NumPy's arithmetic (simulator)."""

import numpy as np
import pytest

import numbakern as nk
from numbakern.core.bins import BinRule

STRATEGY = nk.strategies.SharedPrivatized(threads=64, blocks=2)  # 4-element trips and the tail


def near_edges(dtype, bins, rng, ulps=2):
    """Every edge of ``np.histogram(…, bins, rng)`` and the ``ulps`` values of ``dtype``
    either side of each, the range's ends, NaN and both infinities."""
    edges = np.histogram_bin_edges(np.empty(0, dtype), bins, range=rng).astype(dtype)
    around = [edges]
    below = above = edges
    for _ in range(ulps):
        below = np.nextafter(below, dtype(-np.inf))
        above = np.nextafter(above, dtype(np.inf))
        around += [below, above]
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype)
    return np.concatenate(around + [special])


def check(x, bins, rng):
    hist, edges = nk.histogram(x, bins, range=rng, strategy=STRATEGY)
    want, want_edges = np.histogram(x, bins, range=rng)
    assert np.array_equal(hist, want), np.nonzero(hist != want)
    assert edges.dtype == want_edges.dtype and np.array_equal(edges, want_edges)


def scaled(dtype, bins, rng) -> bool:
    """Whether the multiplying binner counts ``dtype`` input for this rule."""
    dtype = np.dtype(dtype)
    return dtype.itemsize > 2 and BinRule(dtype, bins, rng).scale_error(dtype) is not None


@pytest.mark.parametrize("dtype, bins, rng, multiplies", [
    (np.float32, 100, (0, 1), True),  # 1/100 not a float: edges rounded
    (np.float32, 7, (-3.3, 1e6), True),  # first not a float32; 7 does not divide the range
    (np.float64, 100, (0.0, 1.0), True),
    (np.float64, 7, (-3.3, 1e6), True),
    (np.float32, 9, (np.float32(-1.5), np.float32(2.25)), True),  # float32 arithmetic
    (np.float32, 3, (4, 4), True),  # a zero-width range, widened
    (np.float32, 10, (0.1, 0.7), True),
    (np.float32, 1, (-1e-30, 1e-30), True),  # one bin; subnormal-sized range ends
    (np.float32, 12288, (0, 1), True),  # the most bins shared memory holds
    (np.float32, 10, (-1e38, 1e38), False),  # v - first near float32's largest value
    (np.float32, 100, (1.0, 1.0001), True),  # bins 8 floats wide: error bound 0.24
    (np.float32, 100, (1.0, 1.00005), False),  # bins 4 floats wide
    (np.float16, 100, (0, 1), False),  # two bytes: a table of every value's bin
    # a range narrower than x: NumPy's linspace makes the edges in the range's dtype
    (np.float64, 3, (np.float32(-38.403183), np.float32(-38.186325)), False),
    (np.float64, 50, (np.float32(0.1), np.float32(7.3)), False),
    (np.float32, 13, (np.float16(0.972), np.float16(20.34)), False),
    # ends compared in different dtypes: x <= a float64 last is a float64 comparison
    (np.float32, 1, (np.float32(0.1957839), np.float64(0.3146667980261139)), False),
    (np.float32, 7, (-3.3, np.float64(1.3)), False),
])
def test_values_on_and_around_every_edge(dtype, bins, rng, multiplies):
    assert scaled(dtype, bins, rng) == multiplies
    x = near_edges(dtype, bins, rng)
    if bins > 1000:
        x = x[np.random.default_rng(1).choice(x.size, 3000, replace=False)]
    check(x, bins, rng)


def test_every_float32_of_a_narrow_range():
    """All 8193 float32 values of [1, 1 + 2**-10] and a few outside, into 900 bins of
    about 9 values each: an error bound near the largest the multiplying binner takes
    (``scale_error`` just under 1/4), every value one ulp from another's edge."""
    rng, bins = (1.0, 1.0 + 2**-10), 900
    error = BinRule(np.dtype(np.float32), bins, rng).scale_error(np.dtype(np.float32))
    assert error is not None and error > 0.2
    start = np.float32(1.0).view(np.int32)
    x = np.arange(start - 3, start + 2**13 + 4, dtype=np.int32).view(np.float32)
    check(x, bins, rng)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_ranges(seed, dtype):
    """Ranges of random ends and widths, bins not dividing them: values around every
    edge and uniform ones, whichever binner the rule picks."""
    gen = np.random.default_rng(seed)
    lo = float(gen.uniform(-1e3, 1e3)) * 10.0 ** int(gen.integers(-6, 4))
    hi = lo + abs(lo) * float(gen.uniform(1e-4, 3)) + 1e-9
    bins = int(gen.integers(1, 400))
    x = np.concatenate([near_edges(dtype, bins, (lo, hi), ulps=1),
                        gen.uniform(lo, hi, 500).astype(dtype)])
    check(x, bins, (lo, hi))


def test_scale_error_refuses_what_it_cannot_prove():
    f32 = np.dtype(np.float32)
    assert BinRule(f32, 100, (0.0, 1.0)).scale_error(np.dtype(np.float64)) is None  # not x's dtype
    assert BinRule(
        f32, 100, (np.float64(0), np.float64(1))).scale_error(f32) is None  # float64 edges
    assert BinRule(np.dtype(np.int32), 10, (0, 10)).scale_error(np.dtype(np.int32)) is None
    assert BinRule(
        f32, 2**22, (0.0, 1.0)).scale_error(f32) is None  # past the magic number's reach
    f64 = np.dtype(np.float64)
    assert BinRule(f64, 10, (2**60, 2**60 + 2**50)).scale_error(f64) is None  # ends not floats
    assert 0 < BinRule(f32, 100, (0, 1)).scale_error(f32) < 1e-4
