"""partition, argpartition, median, quantile, percentile and the NaN-skipping forms
against NumPy, under the simulator (small sizes).

Partition is checked by its contract (the kth element is np.sort's, none larger before
it, none smaller after, NaN largest), never against np.partition's arrangement of the
other elements, which NumPy leaves unspecified. Medians and quantiles are compared
with NumPy's own: exactly for float32 and float64 (the same arithmetic in the same
order), integers through NumPy's quantile of their float64 values (NumPy subtracts
int8 in int8, where it wraps: README), float16 within one float16 ulp (interpolated in
float32 here, in float16 by NumPy).
"""

import warnings

import numpy as np
import pytest
import torch

import numbakern as nk
from numba import cuda
from numbakern.api import selection
from numbakern.kernels.partition_split import MAX_PIVOTS
from numbakern.strategies import BitonicSort, RadixSelect, RadixSort, SortSlice

RNG = np.random.default_rng(19)
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]
SIZES = [1, 2, 31, 32, 33, 127, 128, 129]


def values(dtype, shape, special=True, rng=RNG):
    """Values of ``dtype`` with ties; floats with +-inf and +-0.0 (NaN added by tests)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -100
        x = rng.integers(lo, 100, n).astype(dtype)
    else:
        x = (rng.standard_normal(n) * 10).round(1).astype(dtype)  # rounded: ties
        if special and n > 4:
            x[rng.permutation(n)[:4]] = np.array([np.inf, -np.inf, 0.0, -0.0], dtype)
    return x.reshape(shape)


def same(got, expected, atol=0.0):
    """Same dtype, shape and values (NaN equal to NaN), or within ``atol``."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if atol:
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=2.0 ** -10, atol=atol)
    else:
        np.testing.assert_array_equal(got, expected)


def reference(fn, x, *args, **kwargs):
    """NumPy's ``fn`` with the result in NumPy's dtype; integers interpolated from
    their float64 values and float16 from float32 (see above)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.asarray(fn(x, *args, **kwargs))
        if x.dtype.kind in "iu" and expected.dtype.kind == "f":
            wide = expected.dtype  # the dtype NumPy computes in
            expected = np.asarray(fn(x.astype(wide), *args, **kwargs)).astype(expected.dtype)
        if x.dtype == np.float16:
            expected = np.asarray(fn(x.astype(np.float32), *args, **kwargs)).astype(
                expected.dtype)
    return expected


def tolerance(x):
    """float16: one float16 ulp of the largest finite magnitude (NumPy rounds each
    step of its interpolation to float16); exact otherwise."""
    if x.dtype != np.float16:
        return 0.0
    finite = np.abs(x[np.isfinite(x)].astype(np.float64))
    return 2.0 ** -10 * (finite.max() if finite.size else 1.0)


# --- partition --------------------------------------------------------------------------

def check_partition(x, part, kth, axis):
    """``part`` is a partition of ``x`` around every ``kth`` along ``axis``."""
    if axis is None:
        x, axis = x.reshape(-1), -1
    assert part.shape == x.shape and part.dtype == x.dtype
    xs = np.moveaxis(x, axis, -1)
    ps = np.moveaxis(part, axis, -1)
    n = xs.shape[-1]
    np.testing.assert_array_equal(np.sort(ps, axis=-1), np.sort(xs, axis=-1))  # a permutation
    ordered = np.sort(xs, axis=-1)
    for k in np.atleast_1d(kth):
        k = int(k) % n
        pivot = ps[..., k:k + 1]
        np.testing.assert_array_equal(ps[..., k], ordered[..., k])
        nan = np.isnan(pivot) if x.dtype.kind == "f" else np.zeros_like(pivot, bool)
        with np.errstate(invalid="ignore"):
            assert np.all((ps[..., :k] <= pivot) | nan)
            after = ps[..., k + 1:]
            assert np.all((after >= pivot) | (np.isnan(after) if x.dtype.kind == "f" else False))


@pytest.mark.parametrize("dtype", [np.bool_, *INTS, *FLOATS], ids=lambda d: np.dtype(d).name)
def test_partition_every_dtype(dtype):
    x = values(dtype, (3, 40))
    if x.dtype.kind == "f":
        x[1, ::7] = np.nan
    # rows this short take the sort whatever kth is (_partition_path): several ranks
    # for partition, one negative int for argpartition (ranks 0 and n - 1 on the
    # selection's path: test_partition_select_sizes_and_ranks)
    kth = [3, 20, -2]
    check_partition(x, nk.partition(x, kth), kth, -1)
    check_argpartition(x, nk.argpartition(x, -1, axis=-1), -1, -1)


@pytest.mark.parametrize("n", SIZES)
def test_partition_sizes_and_axes(n):
    x = values(np.float32, (n, 3))
    x.reshape(-1)[::5] = np.nan
    wide = BitonicSort(threads=32, max_size=512)  # the flattened rows too, not radix
    # both ops along axis 0 (3 rows of n); partition across the n rows of 3,
    # argpartition of the flattened row
    for axis, ops in ((0, "pa"), (-1, "p"), (None, "a")):
        length = x.size if axis is None else x.shape[axis]
        kth = [0, length // 2, -1]
        if "p" in ops:
            check_partition(x, nk.partition(x, kth, axis=axis, strategy=wide), kth, axis)
        if "a" in ops:
            idx = nk.argpartition(x, kth, axis=axis, strategy=wide)
            check_argpartition(x, idx, kth, axis)


def test_partition_middle_axis_and_strategies():
    x = values(np.int32, (4, 33, 3))
    check_partition(x, nk.partition(x, [1, 30], axis=1), [1, 30], 1)
    one = x[:1, :, :1]  # one row: the radix sort takes about a second a row here
    for strategy in (BitonicSort(threads=32, max_size=64), RadixSort(threads=32, items=2)):
        check_partition(one, nk.partition(one, 5, axis=1, strategy=strategy), 5, 1)


def test_partition_ties_keep_every_element():
    x = np.array([2, 1, 2, 1, 2, 1, 0, 2], np.int16)
    check_partition(x, nk.partition(x, 4), 4, -1)
    assert sorted(nk.argpartition(x, 4).tolist()) == list(range(8))


def test_partition_errors_and_edges():
    x = np.arange(5.0)
    with pytest.raises(ValueError, match="kth"):
        nk.partition(x, 5)
    with pytest.raises(ValueError, match="kth"):
        nk.partition(x, -6)
    with pytest.raises(ValueError, match="kth"):
        nk.argpartition(x, [1, 7])
    with pytest.raises(TypeError, match="kth"):
        nk.partition(x, 1.0)
    with pytest.raises(TypeError, match="kth"):
        nk.partition(x, [])  # NumPy: a float array, TypeError
    with pytest.raises(ValueError, match="kth"):
        nk.partition(x, True)
    with pytest.raises(ValueError, match="kth"):
        nk.partition(x, [[1]])
    with pytest.raises(ValueError, match="kind"):
        nk.partition(x, 1, kind="quicksort")
    with pytest.raises(np.exceptions.AxisError):
        nk.partition(x, 1, axis=1)
    with pytest.raises(np.exceptions.AxisError):
        nk.partition(np.array(3.0), 0)  # as NumPy: a 0-d array has no axis -1
    with pytest.raises(TypeError):
        nk.partition(x.astype(complex), 1)
    same(nk.partition(np.array(3.0), 0, axis=None), np.array([3.0]))
    same(nk.argpartition(np.array(3.0), 0), np.array([0]))
    same(nk.partition(np.zeros((0, 3)), 5), np.zeros((0, 3)))  # NumPy checks no kth here
    same(nk.partition(np.array([np.int8(4)]), np.int64(0)), np.array([4], np.int8))


@pytest.mark.parametrize("call", [nk.partition, nk.argpartition])
def test_partition_of_none_names_the_dtype_first(call):
    """partition(None, 0) was NumPy's AxisError for a 0-d array; every other function
    names the object dtype."""
    with pytest.raises(TypeError, match="x must have a bool, integer or float dtype of "
                                        "at most 8 bytes, got object"):
        call(None, 0)


@pytest.mark.parametrize("call", [
    lambda x, s: nk.median(x, strategy=s),
    lambda x, s: nk.partition(x, 2, strategy=s),
    lambda x, s: nk.argpartition(x, 2, strategy=s),
    lambda x, s: nk.quantile(x, 0.5, strategy=s),
])
@pytest.mark.parametrize("strategy, error, match", [
    (5, TypeError, r"^strategy must be None, a sort strategy .*got 5$"),
    (object(), TypeError, r"^strategy must be None, a sort strategy .*got <object"),
    (nk.GlobalAtomic(), TypeError, r"got GlobalAtomic\(threads=\d+\), a histogram strategy$"),
    (nk.TwoPass(), TypeError, r", a reduce strategy$"),
    ("nope", ValueError, r"^strategy must be None, a sort strategy .*got 'nope'$"),
    ("bitonic_select", ValueError, r"got 'bitonic_select'$"),
])
def test_a_strategy_of_another_family_is_a_type_error(call, strategy, error, match):
    """TypeError for what is no sort or select strategy, as every other function's
    strategy= (numbakern.strategies.resolve); ValueError for a name or a select
    strategy these do not take. All were ValueError."""
    with pytest.raises(error, match=match):
        call(np.arange(10.0), strategy)


def test_partition_keeps_byte_order_as_numpy():
    """NumPy's partition gives a big-endian input's values back in its byte order
    (argpartition's indices are native int64), by every path, empty inputs too."""
    x = np.array([[3, 1, 2, 5, 0, 4], [9, 7, 8, 6, 5, 7]], ">i4")
    for kth, strategy in ((2, None), ([1, -1], SELECT)):  # the sort path, the split
        got = nk.partition(x, kth, axis=1, strategy=strategy)
        assert got.dtype == np.partition(x, kth, axis=1).dtype == np.dtype(">i4")
        check_partition(x, got, kth, 1)
        check_argpartition(x, nk.argpartition(x, kth, axis=1, strategy=strategy), kth, 1)
    f = np.array([2.5, -1.0, np.nan, 0.0], ">f8")
    check_partition(f, nk.partition(f, [0, 3], axis=None), [0, 3], None)
    for empty in (np.zeros((0, 3), ">f8"), np.zeros((2, 0), ">u2")):
        same(nk.partition(empty, 0), np.partition(empty, 0))
        assert nk.partition(empty, 0).dtype == empty.dtype
        assert nk.sort(empty).dtype == empty.dtype
        assert nk.topk(empty, 0).values.dtype == empty.dtype


def test_partition_around_no_kth_moves_nothing():
    """An empty integer ``kth`` places no element: NumPy returns the input unchanged
    (a copy) and argpartition ``0 .. n-1`` along the axis; ``kth=[]`` is a float
    array to NumPy, a TypeError (test_partition_errors_and_edges)."""
    x = values(np.int64, (3, 40))
    no_kth = np.array([], np.int64)
    for axis in (0, 1, -1, None):
        for strategy in (None, SELECT, BitonicSort(threads=32, max_size=64)):
            got = nk.partition(x, no_kth, axis=axis, strategy=strategy)
            same(got, np.partition(x, no_kth, axis=axis))
            same(nk.argpartition(x, no_kth, axis=axis, strategy=strategy),
                 np.argpartition(x, no_kth, axis=axis))
    big = x.astype(">i8")
    same(nk.partition(big, no_kth, axis=0), np.partition(big, no_kth, axis=0))
    assert nk.partition(big, no_kth).dtype == big.dtype
    with pytest.raises(TypeError, match="kth"):
        nk.argpartition(x, ())  # NumPy: "Partition index must be integer"
    device = cuda.to_device(x)
    got = nk.partition(device, no_kth, axis=1)
    device.copy_to_device(np.zeros_like(x))  # the result is a copy, not a view of x
    same(got.copy_to_host(), x)


# --- partition by radix select and buckets -------------------------------------------

SELECT = RadixSelect(threads=32)  # the select path at any row length (small blocks)


def check_argpartition(x, idx, kth, axis):
    """``idx`` is int64, a permutation of each row's positions, and ``x`` taken at it
    a partition around every ``kth``."""
    assert idx.dtype == np.int64
    flat = axis is None
    xs = x.reshape(-1) if flat else x
    ax = -1 if flat else axis
    n = xs.shape[ax]
    np.testing.assert_array_equal(np.sort(idx, axis=ax),
                                  np.broadcast_to(np.arange(n).reshape(
                                      [n if a == ax % xs.ndim else 1 for a in range(xs.ndim)]),
                                      xs.shape))
    check_partition(x, np.take_along_axis(xs, idx, ax), kth, axis)


def same_bits(got, x, axis):
    """Each row of ``got`` holds the exact bits of ``x``'s row (-0.0, NaN payloads)."""
    width = f"u{x.dtype.itemsize}"
    xs = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    gs = got.reshape(-1) if axis is None else np.moveaxis(got, axis, -1)
    np.testing.assert_array_equal(np.sort(gs.view(width), -1), np.sort(xs.view(width), -1))


@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 127, 128, 129])
def test_partition_select_sizes_and_ranks(n):
    x = values(np.float32, (2, n))
    x[0, ::3] = np.nan
    x[1, 1::4] = -0.0  # ties of -0.0 and 0.0, as one key
    x[1, ::5] = 0.0
    ends = [k for k in (0, 1, n - 2, n - 1) if k < n]  # k at 0, 1, n-2, n-1 at once
    part = nk.partition(x, ends, strategy=SELECT)
    check_partition(x, part, ends, -1)
    same_bits(part, x, -1)
    repeats = [n // 2, n // 2, -1, 0]  # repeats, negative
    check_argpartition(x, nk.argpartition(x, repeats, strategy=SELECT), repeats, -1)


@pytest.mark.parametrize("dtype", [np.bool_, *INTS, *FLOATS], ids=lambda d: np.dtype(d).name)
def test_partition_select_every_dtype(dtype):
    x = values(dtype, (2, 45))
    if x.dtype.kind == "f":
        x[0, ::7] = np.nan
    # SELECT's 32 threads (the name's default, 64: test_partition_each_strategy)
    kth = [0, 20, -1]
    part = nk.partition(x, kth, strategy=SELECT)
    check_partition(x, part, kth, -1)
    same_bits(part, x, -1)
    one = x[:1]  # the row with NaN
    check_argpartition(one, nk.argpartition(one, 3, strategy=SELECT), 3, -1)


def test_partition_select_axes_and_flat():
    x = values(np.int32, (3, 37, 2))  # int64 keys: test_partition_select_every_dtype
    # few rows each (the simulator runs every selection's blocks); argpartition along
    # every axis (its check takes x at the indices: a partition too), partition along
    # the middle axis and flat
    for part, axis, kth in ((x[:, :3], 0, [0, 2]), (x[:2], 1, [1, 18, -2]), (x[:2, :3], -1, 1),
                            (x, None, [5, 100, -1])):
        if axis in (1, None):
            check_partition(part, nk.partition(part, kth, axis=axis, strategy=SELECT),
                            kth, axis)
        check_argpartition(part, nk.argpartition(part, kth, axis=axis, strategy=SELECT),
                           kth, axis)


def test_partition_default_selects_a_long_flat_row():
    # a few thousand elements: past the simulator's bitonic rows (256), so the
    # default takes radix select and the split (several chunks, several rounds each)
    # around one rank; around three, the sort
    x = values(np.float32, (3000,))
    x[::17] = np.nan
    for kth, path in ((1500, "select"), ([1, 1500, 2998], "sort")):
        assert selection._partition_path(None, x.size, np.size(kth), x.dtype,
                                         False)[0] == path
        part = nk.partition(x, kth)
        check_partition(x, part, kth, None)
        same_bits(part, x, None)
        check_argpartition(x, nk.argpartition(x, kth), kth, None)


def test_partition_path_rule():
    path = selection._partition_path
    f32, i8, f16 = np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.float16)
    long = 4 * BitonicSort().max_size
    assert path(None, long, 1, f32, False)[0] == "select"
    assert path(None, long, 1, np.dtype(np.uint64), True)[0] == "select"
    assert path(None, BitonicSort().max_size, 1, f32, False) == ("sort", None)  # a block
    assert path(None, long, 1, i8, True) == ("sort", None)  # one radix pass
    assert path(None, long, 1, f16, False) == ("sort", None)
    assert path(None, long, 1, f16, True)[0] == "select"
    assert path(None, long, 2, f32, False) == ("sort", None)  # a selection a rank
    assert path(None, long, MAX_PIVOTS + 1, f32, False) == ("sort", None)  # 257 buckets
    assert path("radix_select", 8, MAX_PIVOTS + 1, f32, False) == ("sort", None)
    assert path("radix_select", 8, MAX_PIVOTS, f32, False)[0] == "select"
    assert path(SELECT, 8, 1, i8, False) == ("select", SELECT)
    assert path("bitonic", long, 1, f32, False) == ("sort", "bitonic")
    sorter = RadixSort(threads=32)
    assert path(SortSlice(sort=sorter), long, 1, f32, False)[1].key == sorter.key
    assert path("sort_slice", long, 1, f32, False) == ("sort", None)


def test_partition_each_strategy():
    x = values(np.float32, (2, 33))  # float64 keys: test_partition_select_every_dtype
    x[1, ::4] = np.nan
    kth = [0, 16, -1]
    # each strategy by name for one op and as an object for the other
    pairs = [(None, None), ("radix_select", SELECT), (SortSlice(threads=32), "sort_slice"),
             ("bitonic", BitonicSort(threads=32, max_size=64))]
    for for_partition, for_argpartition in pairs:
        check_partition(x, nk.partition(x, kth, strategy=for_partition), kth, -1)
        check_argpartition(x, nk.argpartition(x, kth, strategy=for_argpartition), kth, -1)
    # the radix sort (the simulator's slowest) on the row with NaN; its partition:
    # test_partition_middle_axis_and_strategies
    one = x[1:]
    idx = nk.argpartition(one, kth, strategy=RadixSort(threads=32, items=2))
    check_argpartition(one, idx, kth, -1)
    for name in ("bitonic_select", "radix_block_select", "nope"):
        with pytest.raises(ValueError, match="strategy"):
            nk.partition(x, 1, strategy=name)


def test_partition_select_many_kth_and_empty():
    # 256 elements: the default sort is a block's bitonic one (longer rows: the
    # simulator's slow radix sort)
    x = values(np.float32, (256,))
    kth = list(range(0, 256, 2))  # 128 ranks: 257 buckets, past the split: the sort
    check_partition(x, nk.partition(x, kth, strategy="radix_select"), kth, None)
    # 127 ranks: 255 buckets, the split's most; a selection a rank, so int8 keys (one
    # digit pass; many ties); the values' split: test_partition_select_sizes_and_ranks
    xi = values(np.int8, (256,))
    kth = list(range(0, 254, 2))
    check_argpartition(xi, nk.argpartition(xi, kth, strategy=SELECT), kth, None)
    same(nk.partition(np.zeros((2, 0), np.float32), 3, strategy=SELECT),
         np.zeros((2, 0), np.float32))
    same(nk.argpartition(np.zeros((0, 4)), 1, strategy=SELECT), np.zeros((0, 4), np.int64))


def test_argpartition_select_keeps_index_order_within_a_bucket():
    # the split is stable: the elements equal to a pivot, and those between two
    # pivots, in input order (as the stable sort it replaces leaves equal ones)
    x = np.array([5, 1, 5, 0, 5, 9, 1, 5, 7, 5], np.int32)
    idx = nk.argpartition(x, [1, 6], strategy=SELECT)
    same(idx, np.array([3, 1, 6, 0, 2, 4, 7, 9, 5, 8]))  # <1 | =1 | 1..5 | =5 | >5


# --- median --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.bool_, *INTS, *FLOATS], ids=lambda d: np.dtype(d).name)
def test_median_every_dtype(dtype):
    x = values(dtype, (3, 32))
    # even counts (32; 96 flat, every other dtype) and odd (3)
    for axis in (0, 1, None)[:3 - [np.bool_, *INTS, *FLOATS].index(dtype) % 2]:
        same(nk.median(x, axis=axis), reference(np.median, x, axis=axis))
    same(nk.nanmedian(x, axis=1), reference(np.nanmedian, x, axis=1))


@pytest.mark.parametrize("n", SIZES)
def test_median_and_quantile_sizes(n):
    x = values(np.float64, (2, n))
    same(nk.median(x, axis=-1), np.median(x, axis=-1))
    same(nk.quantile(x, [0.0, 0.25, 0.5, 0.9, 1.0], axis=-1),
         reference(np.quantile, x, [0.0, 0.25, 0.5, 0.9, 1.0], axis=-1))
    same(nk.median(x, strategy=BitonicSort(threads=32, max_size=512)), np.median(x))


def test_median_axes_tuples_and_keepdims():
    x = values(np.float32, (3, 4, 5))
    for i, axis in enumerate((None, 0, 1, -1, (0, 2), (1, 2), [0, 1], (0, 1, 2))):
        keepdims = bool(i % 2)  # each axis form with and without, across the two ops
        same(nk.median(x, axis=axis, keepdims=keepdims),
             np.median(x, axis=axis, keepdims=keepdims))
        same(nk.quantile(x, [0.2, 0.7], axis=axis, keepdims=not keepdims),
             np.quantile(x, [0.2, 0.7], axis=axis, keepdims=not keepdims))
    got = nk.median(x, axis=1)
    assert isinstance(got, np.ndarray) and got.shape == (3, 5)
    assert isinstance(nk.median(x), np.floating)
    z = np.array(3, np.int8)  # NumPy's keepdims of a 0-d input: a 0-d array
    for fn, args in (("median", ()), ("nanmedian", ()), ("quantile", (0.5,))):
        got, want = getattr(nk, fn)(z, *args, keepdims=True), getattr(np, fn)(z, *args,
                                                                               keepdims=True)
        assert type(got) is type(want) is np.ndarray and got.shape == () and got == want
        assert type(getattr(nk, fn)(z, *args)) is type(getattr(np, fn)(z, *args))


def test_median_nan_inf_and_overflow():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 0.0], [np.inf, -np.inf, 1.0]])
    same(nk.median(x, axis=1), np.median(x, axis=1))
    same(nk.median(np.array([np.inf, -np.inf])), np.median(np.array([np.inf, -np.inf])))
    big = np.float32([3e38, 3e38])  # NumPy's mean sums in float32: inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        same(nk.median(big), np.median(big))
    y = np.array([[np.nan, 2.0, 1.0, np.nan], [5.0, 1.0, 2.0, 7.0]])
    same(nk.nanmedian(y, axis=1), np.nanmedian(y, axis=1))


@pytest.mark.parametrize("strategy", [None, nk.SortSlice(), nk.RadixSelect()],
                         ids=["auto", "sort_slice", "radix_select"])
def test_all_nan_slices_warn_once_each_as_numpy(strategy):
    """NumPy's nanmedian and nanquantile warn once for each slice of nothing but NaN
    (seen under ``simplefilter("always")``); nanmax once a call."""
    y = np.ones((5, 3))
    y[[0, 2, 3]] = np.nan
    y[4, 1] = np.nan
    nothing = np.full(4, np.nan)  # axis None: one slice
    cases = [(y, nk.nanmedian, np.nanmedian, (), {"axis": 1}),
             (y, nk.nanquantile, np.nanquantile, ([0.2, 0.7],), {"axis": 1}),
             (y, nk.nanpercentile, np.nanpercentile, (30,), {"axis": 1, "keepdims": True}),
             (y.T, nk.nanmedian, np.nanmedian, (), {"axis": 0}),
             (nothing, nk.nanmedian, np.nanmedian, (), {})]
    for x, fn, ref, args, kwargs in cases:
        said = []
        for f, more in ((fn, {"strategy": strategy}), (ref, {})):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                f(x, *args, **kwargs, **more)
            said.append([str(w.message) for w in seen])
        assert said[0] == said[1] == ["All-NaN slice encountered"] * (1 if x is nothing
                                                                       else 3), (fn, kwargs)


def test_all_nan_slices_warn_and_give_nan():
    y = np.array([[np.nan, np.nan], [1.0, np.nan]], np.float32)
    for fn, ref, args in ((nk.nanmedian, np.nanmedian, ()),
                          (nk.nanquantile, np.nanquantile, ([0.1, 0.5],)),
                          (nk.nanpercentile, np.nanpercentile, (30,))):
        with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
            got = fn(y, *args, axis=1)
        # NumPy's dtype here depends on the data (an all-NaN slice makes its
        # nanquantile of float32 with q=[...] float32, float64 otherwise): README
        np.testing.assert_array_equal(got, reference(ref, y, *args, axis=1))
        assert got.dtype == reference(ref, y[1:], *args, axis=1).dtype
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same(nk.nanmedian(y[1:], axis=1), np.nanmedian(y[1:], axis=1))  # no warning
        same(nk.nanquantile(y[1:], [], axis=1), np.nanquantile(y[1:], [], axis=1))
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):  # no q: as NumPy
        got = nk.nanquantile(y, [], axis=1)
    assert got.shape == (0, 2) and got.dtype == np.nanquantile(y[1:], [], axis=1).dtype


def test_empty_inputs_as_numpy():
    for shape, axis in (((0,), None), ((2, 0), 1), ((0, 2), 0), ((2, 0), None)):
        x = np.zeros(shape, np.float32)
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            got = nk.median(x, axis=axis)
        same(got, reference(np.median, x, axis=axis))
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            got = nk.nanquantile(x, [0.5, 0.2], axis=axis)
        same(got, reference(np.nanquantile, x, [0.5, 0.2], axis=axis))  # q's dims dropped
        out = np.zeros(np.shape(got))  # an out of the same shape takes it, as NumPy's
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            assert nk.nanquantile(x, [0.5, 0.2], axis=axis, out=out) is out
        same(out, got.astype(np.float64))
        with pytest.raises(IndexError):
            nk.quantile(x, 0.5, axis=axis)
        with pytest.raises(IndexError):
            nk.percentile(x, 50, axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = np.zeros((0, 2), np.float32)
        same(nk.median(x, axis=1), np.median(x, axis=1))
        same(nk.quantile(x, [0.5], axis=1), np.quantile(x, [0.5], axis=1))
        same(nk.nanmedian(np.zeros((0, 0)), axis=1), np.nanmedian(np.zeros((0, 0)), axis=1))
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        same(nk.nanmedian(np.zeros(0, np.int32)), reference(np.nanmedian, np.zeros(0, np.int32)))


def _answer_and_warnings(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = np.asarray(fn(*args, **kwargs))
            answer = (r.shape, r.dtype, np.isnan(r).all() if r.dtype.kind == "f" else r)
        except (IndexError, TypeError) as error:
            answer = type(error)
    return answer, sorted(str(w.message) for w in caught)


@pytest.mark.parametrize("name", ["median", "nanmedian", "nanquantile", "nanpercentile",
                                  "quantile", "percentile"])
def test_input_of_no_elements_answers_as_numpy_with_its_warnings(name):
    """With no elements, NumPy's median is np.mean's answer and its NaN-skipping forms
    np.nanmean's (no q dimensions, the mean's dtype): where the slices are empty,
    NaN with "Mean of empty slice" and the division's "invalid value"; where there
    are no slices, an empty result and no warning, whatever the reduced length."""
    args = ([0.1, 0.9],) if "quantile" in name else (
        (np.float32(50),) if "percentile" in name else ())
    for shape, axis in (((0, 4), -1), ((3, 0), 0), ((0,), None), ((3, 0), -1),
                        ((0, 4), (0, 1))):
        for dtype in (np.float32, np.int16, bool, np.uint8):
            for keepdims in (False, True):
                x = np.zeros(shape, dtype)
                want = _answer_and_warnings(getattr(np, name), x, *args, axis=axis,
                                            keepdims=keepdims)
                got = _answer_and_warnings(getattr(nk, name), x, *args, axis=axis,
                                           keepdims=keepdims)
                assert got == want, (shape, axis, np.dtype(dtype).name, keepdims)
    if name == "median":  # NumPy warns, then its errstate raises: both, in order
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            with pytest.raises(FloatingPointError), np.errstate(invalid="raise"):
                nk.median(np.zeros((3, 0)), axis=1)
    if name.startswith("nan") and name != "nanmedian":
        x = np.zeros((0, 4), np.float32)  # an out of the mean's shape: no q dimension
        out = np.empty(0, np.float32)
        assert getattr(nk, name)(x, *args, axis=-1, out=out) is out


# --- quantile -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [*INTS, *FLOATS], ids=lambda d: np.dtype(d).name)
def test_quantile_every_dtype_and_q_form(dtype):
    x = values(dtype, (2, 45))
    if x.dtype.kind == "f":
        x[1, 3] = np.nan
    u = tolerance(x)
    # every dtype: q at both ends and between, as a 2-D array; each other form of q
    # on one or two dtypes in turn
    forms = (0.3, 0, 1, 0.5, [0.1, 0.99], np.float32([0.4]), np.float64(0.6))
    q = np.array([[0.0, 0.25], [0.75, 1.0]])
    same(nk.quantile(x, q, axis=1), reference(np.quantile, x, q, axis=1), u)
    same(nk.nanquantile(x, q, axis=1), reference(np.nanquantile, x, q, axis=1), u)
    q = forms[[*INTS, *FLOATS].index(dtype) % len(forms)]
    same(nk.quantile(x, q, axis=1), reference(np.quantile, x, q, axis=1), u)
    if [*INTS, *FLOATS].index(dtype) % 2:  # along an axis or flat, by turns
        same(nk.percentile(x, 37.5, axis=0), reference(np.percentile, x, 37.5, axis=0), u)
    else:
        same(nk.percentile(x, [10, 100]), reference(np.percentile, x, [10, 100]), u)
    same(nk.nanpercentile(x, 50, axis=1), reference(np.nanpercentile, x, 50, axis=1), u)


def test_a_device_q_is_read_on_the_calls_stream():
    x = values("float32", (3, 40))
    stream = cuda.stream()
    q = cuda.to_device(np.array([0.9, 0.1, 0.3, 0.7]), stream=stream)
    for dq, hq in ((q, [0.9, 0.1, 0.3, 0.7]), (q[::2], [0.9, 0.3]), (q[1], 0.1)):
        same(nk.quantile(x, dq, axis=1, stream=stream),
             reference(np.quantile, x, np.array(hq), axis=1), tolerance(x))
    same(nk.nanpercentile(x, cuda.to_device(np.array([25.0, 100.0]))),
         reference(np.nanpercentile, x, np.array([25.0, 100.0])), tolerance(x))


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_methods(method):
    x = values(np.float32, (3, 21))
    x[0, 4] = np.nan
    q = [0.0, 0.05, 0.125, 0.5, 0.55, 0.975, 1.0]  # nearest meets its half-way ties
    same(nk.quantile(x, q, axis=1, method=method), np.quantile(x, q, axis=1, method=method))
    same(nk.nanquantile(x, q, axis=1, method=method),
         np.nanquantile(x, q, axis=1, method=method))
    xi = values(np.int16, (4, 9))
    same(nk.quantile(xi, q, axis=0, method=method),
         reference(np.quantile, xi, q, axis=0, method=method))


@pytest.mark.parametrize("q_dtype", [np.float16, np.float32])
@pytest.mark.parametrize("n", [10, 13])
def test_the_virtual_index_is_computed_in_qs_own_float_type(q_dtype, n):
    """NumPy takes ``(n - 1) * q`` in the type of a float16 or float32 ``q``, and
    ``lower``, ``higher`` and ``nearest`` then pick the element that index rounds to:
    float16's 9 * (1/3) is 3.0 where float32's is 2.9993, so NumPy's lower quantile is
    element 3, not 2."""
    x = np.sort(RNG.permutation(3 * n).astype(np.int64)[:n])
    q = np.array([1 / 3, 0.1666, 0.4167, 0.8335, 0.999, 2 / 3], q_dtype)
    for method in ("linear", "lower", "higher", "nearest", "midpoint"):
        same(nk.quantile(x, q, method=method), np.quantile(x, q, method=method))
    same(nk.nanquantile(x, q[0]), np.nanquantile(x, q[0]))
    p = np.array([100 / 3], q_dtype)
    same(nk.percentile(x, p, method="lower"), np.percentile(x, p, method="lower"))


def test_a_float16_q_rounds_its_index_as_numpy_past_2048_elements():
    """Among 2050 elements, 2049 is 2048 in float16, and the product of it and q has
    a float16's 11 bits: NumPy's higher quantile of q = 0.02832 is element 58 (float16's
    index 58.0), where float32 finds 58.03 and takes 59."""
    x = np.arange(2050) * 3
    q = np.float16([0.02832, 0.5])
    same(nk.quantile(x, q, method="higher"), np.quantile(x, q, method="higher"))
    assert np.quantile(x, q, method="higher")[0] == 3 * 58


@pytest.mark.parametrize("strategy", ["radix_select", "sort_slice"])
def test_an_index_of_n_minus_1_rounded_up_reads_the_last_element(strategy):
    """Among 2052 elements, 2051 rounds up to 2052 in float16, so q = 1's index is one
    past the end (NumPy's partition fails there): the last element, on both paths, as
    ``linear`` gives."""
    x = np.arange(2052.0) - 5000
    q = np.float16([1.0, 0.5])
    for method in ("lower", "nearest", "linear"):
        got = nk.quantile(x, q, method=method, strategy=strategy)
        same(got, [x[-1], np.quantile(x, q[1], method=method)])


@pytest.mark.parametrize("name, q, axis", [("quantile", 0.0, None), ("percentile", 50, None),
                                           ("quantile", 0.5, 0), ("quantile", 0.5, 1),
                                           ("nanquantile", 0.5, None),
                                           ("nanpercentile", 50, None)])
def test_bools_with_no_elements_get_numpys_empty_answer_before_its_bool_error(name, q, axis):
    """NumPy cannot interpolate bools (TypeError), but says so only for slices that
    have elements: with none, quantile raises IndexError and nanquantile is NaN."""
    x = np.zeros((0, 3), bool) if axis is not None else np.array([], bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            want = getattr(np, name)(x, q, axis=axis)
        except (IndexError, TypeError) as error:
            with pytest.raises(type(error)):
                getattr(nk, name)(x, q, axis=axis)
            return
        got = getattr(nk, name)(x, q, axis=axis)
    assert np.asarray(got).dtype == want.dtype and np.isnan(got).all()


def test_quantile_infinities_and_ties():
    x = np.array([[-np.inf, 0.0, 0.0, 1.0, np.inf], [2.0, 2.0, 2.0, 2.0, 2.0]])
    for q in (0.0, 0.1, 0.5, 0.9, 1.0):  # NumPy's lerp: NaN beside an infinity
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.quantile(x, q, axis=1)
        same(nk.quantile(x, q, axis=1), expected)


def same_signs(got, expected):
    """``same``, and every zero with NumPy's sign (``same`` takes -0.0 == 0.0); a
    NaN's sign bit is the hardware's (x86's inf - inf is negative, a GPU's positive)."""
    same(got, expected)
    number = ~np.isnan(np.asarray(expected))
    np.testing.assert_array_equal(np.signbit(np.asarray(got))[number],
                                  np.signbit(expected)[number])


# each dtype with one interpolating method and one that takes an element
@pytest.mark.parametrize("dtype, methods", [(np.float64, ("linear", "lower")),
                                            (np.float32, ("midpoint", "nearest"))])
def test_signed_zeros_as_numpy(dtype, methods):
    # Zero signs follow NumPy's arithmetic: its median is a mean whose sum starts from
    # +0.0 (median of [-0.0] is 0.0), its quantile's lerp reads a virtual index at or
    # past the end as index -1 with weight v + 1 (the 0.5 quantile of [-0.0] is -0.0)
    # (no row holds both zeros: where -0.0 and 0.0 fall among equal keys is np.partition's
    # choice, unspecified)
    rng = np.random.default_rng(23)
    pool = np.array([-0.0, -0.0, np.nan, 1.5, -np.inf, np.inf], dtype)
    q = [0.0, 0.3, 0.5, 0.75, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf, as NumPy's
        for n in (1, 2, 33):  # one element, a pair's mean, a row past a warp
            x = rng.choice(pool, (8, n))
            x[:2] = -0.0  # zeros only
            x[2:4] = 0.0
            for fn in ("median", "nanmedian"):
                same_signs(getattr(nk, fn)(x, axis=1), getattr(np, fn)(x, axis=1))
            for method in methods:
                for fn in ("quantile", "nanquantile"):
                    same_signs(getattr(nk, fn)(x, q, axis=1, method=method),
                               getattr(np, fn)(x, q, axis=1, method=method))
            same_signs(nk.percentile(x, 50, axis=1), np.percentile(x, 50, axis=1))
        for fn in ("median", "nanmedian", "mean", "sum"):
            same_signs(getattr(nk, fn)(np.array([-0.0], dtype)),
                       getattr(np, fn)(np.array([-0.0], dtype)))


def test_quantile_of_bool_as_numpy():
    x = np.array([True, False, True, True])
    same(nk.quantile(x, 1), np.quantile(x, 1))
    same(nk.quantile(x, 0.5, method="lower"), np.quantile(x, 0.5, method="lower"))
    same(nk.median(x, strategy=BitonicSort(threads=32, max_size=512)), np.median(x))
    with pytest.raises(TypeError, match="bool"):
        nk.quantile(x, 0.5)


def test_quantile_keeps_byte_order_where_numpy_does():
    """NumPy takes the elements of a big-endian array as they are for the methods that
    read one (and an integer ``q``): those results stay big-endian, unless a scalar
    (or ``nanquantile`` along an axis with a scalar ``q``, which builds its result
    afresh); interpolated ones and medians are native."""
    x = values(np.float64, (3, 40)).astype(">f8")
    x[1, 3] = np.nan
    for fn, q, kw in ((nk.quantile, [0.25, 0.5], dict(axis=1, method="lower")),
                      (nk.quantile, 0.5, dict(axis=1, method="nearest")),
                      (nk.quantile, 1, dict(axis=0, keepdims=True)),
                      (nk.nanquantile, 0.5, dict(axis=1, method="higher")),
                      (nk.nanquantile, [0.5], dict(axis=1, method="higher")),
                      (nk.percentile, [50], dict(method="lower")),
                      (nk.quantile, 0.5, dict(axis=1)),
                      (nk.median, None, dict(axis=0))):
        args = () if q is None else (q,)
        same(fn(x, *args, **kw), getattr(np, fn.__name__)(x, *args, **kw))
    ints = values(np.int32, (2, 9)).astype(">i4")
    same(nk.quantile(ints, 0.5, axis=1, method="higher"),
         np.quantile(ints, 0.5, axis=1, method="higher"))
    empty = np.zeros((0, 4), ">f4")  # no slice: the result made without a kernel
    for fn, q in ((nk.quantile, [0.2, 0.5]), (nk.percentile, 50), (nk.quantile, 1)):
        for method in ("lower", "linear"):
            same(fn(empty, q, axis=1, method=method),
                 getattr(np, fn.__name__)(empty, q, axis=1, method=method))


def test_quantile_errors():
    x = np.arange(10.0)
    for q in (1.5, -0.1, np.nan, [0.5, 2.0]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            nk.quantile(x, q)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        nk.percentile(x, 101)
    with pytest.raises(ValueError, match="method"):
        nk.quantile(x, 0.5, method="hazen")
    with pytest.raises(ValueError, match="q must be"):
        nk.quantile(x, np.zeros((1, 1, 1)))
    with pytest.raises(TypeError, match="q must"):
        nk.quantile(x, "a")
    wide = np.longdouble if np.dtype(np.longdouble).itemsize > 8 else None
    for q in () if wide is None else (wide(0.5), np.array([0.5], wide)):  # no kernel
        with pytest.raises(TypeError, match="q must be .* at most float64, got dtype "
                                            "(longdouble|float128)"):
            nk.quantile(x, q)
    with pytest.raises(np.exceptions.AxisError):
        nk.median(x, axis=1)
    with pytest.raises(np.exceptions.AxisError):
        nk.quantile(np.float32(3), 0.5, axis=0)
    with pytest.raises(ValueError):
        nk.median(np.zeros((2, 3)), axis=(0, 0))
    with pytest.raises(TypeError, match="keepdims"):
        nk.median(x, keepdims="yes")
    with pytest.raises(TypeError):
        nk.median(x.astype(complex))
    same(nk.quantile(np.float32(3), 0.5), np.quantile(np.float32(3), 0.5))
    same(nk.median(np.float32(3)), np.median(np.float32(3)))


def test_out_and_strategies():
    x = values(np.float64, (4, 40))
    out = np.empty(4)
    assert nk.median(x, axis=1, out=out) is out
    same(out, np.median(x, axis=1))
    out = np.empty((2, 4))
    assert nk.quantile(x, [0.1, 0.9], axis=1, out=out) is out
    same(out, np.quantile(x, [0.1, 0.9], axis=1))
    with pytest.raises(ValueError, match="shape"):
        nk.median(x, axis=1, out=np.empty(3))
    one = x[:1]
    for strategy in ("bitonic", RadixSort(threads=32, items=2)):
        same(nk.quantile(one, 0.3, axis=1, strategy=strategy), np.quantile(one, 0.3, axis=1))
    with pytest.raises(ValueError, match="strategy|bitonic|radix"):
        nk.median(x, strategy="nope")


def test_torch_tensors_in_tensors_out():
    x = values(np.float32, (3, 33))
    t = torch.from_numpy(x)
    got = nk.quantile(t, torch.tensor([0.25, 0.5], dtype=torch.float64), axis=1)
    assert isinstance(got, torch.Tensor)
    same(got.numpy(), np.quantile(x, np.array([0.25, 0.5]), axis=1))
    med = nk.median(t, axis=0)
    assert isinstance(med, torch.Tensor)
    same(med.numpy(), np.median(x, axis=0))
    torch.testing.assert_close(nk.median(t, axis=1), torch.quantile(t, 0.5, dim=1))
    part = nk.partition(t, 4, axis=1)
    assert isinstance(part, torch.Tensor)
    check_partition(x, part.numpy(), 4, 1)


def test_device_arrays_and_streams():
    x = values(np.float32, (3, 40))
    x[1, 5] = np.nan
    got = nk.quantile(cuda.to_device(x), [0.5, 0.8], axis=1, stream=cuda.default_stream())
    assert hasattr(got, "copy_to_host")
    same(got.copy_to_host(), np.quantile(x, [0.5, 0.8], axis=1))
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        got = nk.nanmedian(cuda.to_device(np.full((2, 3), np.nan, np.float32)), axis=1)
    assert np.isnan(got.copy_to_host()).all()
    part = nk.partition(cuda.to_device(x), 7, axis=1)
    check_partition(x, part.copy_to_host(), 7, 1)
    part = nk.partition(cuda.to_device(x), [2, 7], axis=1, strategy=SELECT,
                        stream=cuda.stream())
    check_partition(x, part.copy_to_host(), [2, 7], 1)
    cols = np.ascontiguousarray(x[:, :4])  # along axis 0: a row a column
    idx = nk.argpartition(cuda.to_device(cols), 2, axis=0, strategy=SELECT)
    check_argpartition(cols, idx.copy_to_host(), 2, 0)
    with pytest.raises(TypeError, match="stream"):
        nk.median(x, stream="a stream")
