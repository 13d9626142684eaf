"""Medians and quantiles by radix select (``strategy="radix_select"``, the default for
rows longer than a block's sort) against NumPy, under the simulator: the order
statistics found rank by rank (kernels/rank_stats.py) must give exactly what the sort
path gives, NumPy's answer (float16 within an ulp, as tests/api/test_selection.py)."""

import warnings

import numpy as np
import pytest

import numbakern as nk
from numbakern.api.selection import _order_path
from numbakern.strategies import RadixSelect, RadixSort

from .test_selection import reference, same, tolerance, values

RNG = np.random.default_rng(1919)
# 8-bit digits: 256 bins a pass (the default's 2048 take the simulator seconds a pass)
FAST = RadixSelect(threads=32, digit_bits=8)
SIZES = [1, 31, 32, 33, 127, 128, 129]
Q = [0.0, 0.3, 0.5, 0.75, 1.0]


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


# each size: its rows (axis 1) by a median and a quantile, one of them NaN-skipping,
# swapped from size to size; the flattened input by one of the four in turn
@pytest.mark.parametrize("i, n", list(enumerate(SIZES)), ids=[str(n) for n in SIZES])
def test_rows_and_flat_around_warp_and_block_sizes(i, n):
    x = values(np.float32, (3, n), rng=RNG)
    x[1, RNG.integers(n)] = np.nan  # one row holding NaN
    rows = (("median", "nanquantile"), ("nanmedian", "quantile"))[i % 2]
    flat = ("nanmedian", "quantile", "median", "nanquantile")[i % 4]
    for axis, fn in ((1, rows[0]), (1, rows[1]), (None, flat)):
        args = ([0.3, 1.0],) if fn.endswith("quantile") else ()
        same(quiet(getattr(nk, fn), x, *args, axis=axis, strategy=FAST),
             reference(getattr(np, fn), x, *args, axis=axis))


KEY_DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.uint64, np.float16,
              np.float64]


@pytest.mark.parametrize("dtype", KEY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype(dtype):
    x = values(dtype, (2, 45), rng=RNG)
    if np.dtype(dtype) == np.uint64:
        x[0, :3] = np.iinfo(np.uint64).max  # keys of every bit
    if np.dtype(dtype).kind != "b":
        same(nk.quantile(x, [0.1, 0.5, 0.93], axis=1, strategy=FAST),
             reference(np.quantile, x, [0.1, 0.5, 0.93], axis=1), atol=tolerance(x))
    # one element as it is: exact (the two methods that take one, in turn)
    method = ("lower", "nearest")[KEY_DTYPES.index(dtype) % 2]
    same(nk.quantile(x, 0.37, axis=1, method=method, strategy=FAST),
         np.quantile(x, 0.37, axis=1, method=method))


def test_ties_infinities_and_methods():
    x = np.array([[3.0, 3.0, 3.0, 1.0, 3.0, -np.inf, np.inf, np.inf],
                  [-np.inf, np.inf, -np.inf, np.inf, 2.0, 2.0, 2.0, 2.0],
                  [np.nan, np.nan, np.nan, np.nan, 1.0, 1.0, 5.0, np.nan]], np.float32)
    # nanquantile's lerp beside infinities by midpoint here (its linear:
    # test_rows_and_flat_around_warp_and_block_sizes)
    for fn, method in (("quantile", "linear"), ("quantile", "higher"),
                       ("nanquantile", "midpoint")):
        same(quiet(getattr(nk, fn), x, Q, axis=1, method=method, strategy=FAST),
             quiet(getattr(np, fn), x, Q, axis=1, method=method))
    same(quiet(nk.median, x, axis=1, strategy=FAST), quiet(np.median, x, axis=1))
    same(quiet(nk.nanmedian, x, axis=1, strategy=FAST), quiet(np.nanmedian, x, axis=1))
    with pytest.warns(RuntimeWarning, match="invalid value"):  # -inf + inf, as NumPy
        nk.median(np.array([-np.inf, np.inf]), strategy=FAST)
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        nk.nanmedian(np.full((2, 3), np.nan), axis=1, strategy=FAST)


def test_signed_zeros_as_numpy():
    # a zero's key has no sign: it comes from the row (no row holds both zeros)
    x = np.array([[-0.0, -0.0, 1.5], [-0.0, np.nan, -np.inf], [-0.0, 2.0, -0.0],
                  [0.0, 0.0, 1.5], [0.0, np.nan, -np.inf], [0.0, 2.0, 0.0]], np.float32)
    if True:
        for fn in ("median", "nanmedian"):
            got, want = quiet(getattr(nk, fn), x, axis=1, strategy=FAST), \
                quiet(getattr(np, fn), x, axis=1)
            same(got, want)
            assert (np.signbit(got) == np.signbit(want)).all(), (fn, got, want)
        for method in ("linear", "lower"):
            got = quiet(nk.quantile, x, Q, axis=1, method=method, strategy=FAST)
            want = quiet(np.quantile, x, Q, axis=1, method=method)
            same(got, want)
            assert (np.signbit(got) == np.signbit(want)).all(), (method, got, want)


# RadixSelect objects: FAST in every test here; a SortSlice object:
# test_selection.py::test_partition_each_strategy (the same strategy reading)
@pytest.mark.parametrize("strategy", ["radix_select", "sort_slice", "bitonic",
                                      RadixSort(threads=32, items=2)],
                         ids=str)
def test_each_strategy(strategy):
    x = values(np.float32, (1, 40), rng=RNG)  # one row (the radix sort's: slow)
    x[0, 5] = np.nan
    same(nk.nanquantile(x, 0.3, axis=1, strategy=strategy),
         reference(np.nanquantile, x, 0.3, axis=1))


def test_paths_and_bad_strategies():
    assert _order_path(None, 1 << 20, 1)[0] == "select"  # longer than a block's sort
    assert _order_path(None, 1 << 20, 5)[0] == "sort"  # many quantiles: one sort
    assert _order_path(None, 8, 1)[0] == "sort"  # a block's sort reads it once
    assert _order_path("bitonic", 1 << 20, 1) == ("sort", "bitonic")
    for bad in ("bitonic_select", "radix_block_select", "nope"):
        with pytest.raises(ValueError, match=f"radix_select.*got '{bad}'$"):  # as given
            nk.median(np.arange(4.0), strategy=bad)
