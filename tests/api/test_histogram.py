"""histogram, bincount and histogram_counts against NumPy, every strategy (simulator)."""

import warnings

import numpy as np
import pytest

from numba import cuda

import numbakern as nk
from numbakern.strategies import WarpPrivatized

RNG = np.random.default_rng(11)
STRATEGIES = [s for t in (32, 64) for s in nk.strategies.every("histogram", threads=t, blocks=2)]
IDS = [f"{s.name}-{s.threads}" for s in STRATEGIES]


def reference_counts(x, bins):
    x = x.astype(np.int64).ravel()
    return np.bincount(x[(x >= 0) & (x < bins)], minlength=bins)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=IDS)
def test_counts_uniform_out_of_range_and_one_bin(strategy):
    x = RNG.integers(-5, 40, 333).astype(np.int32)  # some below 0, some >= 32
    assert np.array_equal(nk.histogram_counts(x, 32, strategy=strategy), reference_counts(x, 32))
    same = np.full(257, 7, np.uint8)  # worst contention: every element in one bin
    got = nk.histogram_counts(same, 10, strategy=strategy)
    assert got.dtype == np.int64 and np.array_equal(got, reference_counts(same, 10))
    assert np.array_equal(nk.histogram_counts(np.zeros(0, np.int64), 5, strategy=strategy),
                          np.zeros(5, np.int64))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.uint32, np.int64, np.uint64])
def test_counts_dtypes(dtype):
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    x = RNG.integers(0, 2, 100).astype(bool) if info is None else \
        RNG.integers(max(info.min, -20), 50, 100).astype(dtype)
    assert np.array_equal(nk.histogram_counts(x.reshape(4, 25), 40), reference_counts(x, 40))


def test_bincount():
    x = RNG.integers(0, 50, 200)
    for s in STRATEGIES[::2]:
        assert np.array_equal(nk.bincount(x, strategy=s), np.bincount(x))
    assert np.array_equal(nk.bincount(x, minlength=70), np.bincount(x, minlength=70))
    assert np.array_equal(nk.bincount(np.array([True, False, True])),
                          np.bincount(np.array([True, False, True])))
    assert np.array_equal(nk.bincount(np.zeros(0, np.int32), minlength=3), np.zeros(3, np.int64))
    assert nk.bincount(np.zeros(0, np.int32)).shape == (0,)
    with pytest.raises(ValueError, match="negative"):
        nk.bincount(np.array([1, -1, 2]))
    with pytest.raises(ValueError, match="minlength"):
        nk.bincount(x, minlength=-1)
    with pytest.raises(ValueError, match="1-D"):
        nk.bincount(x.reshape(10, 20))
    with pytest.raises(ValueError):  # the shape first, whatever the dtype, as NumPy's
        np.bincount(np.ones((2, 3)))
    with pytest.raises(ValueError, match="^bincount: x must be 1-D, got shape"):
        nk.bincount(np.ones((2, 3)))
    with pytest.raises(TypeError, match="integer"):
        nk.bincount(np.ones(3))
    with pytest.raises(TypeError, match="^bincount: minlength must be an int"):
        nk.bincount(np.array([1]), minlength=True)  # NumPy refuses it too
    for most in (2**64 - 1, 2**63, 2**60 - 1):  # more counts than an array holds
        with pytest.raises(ValueError, match=f"^x holds {most}: bincount would need"):
            nk.bincount(np.array([3, most], np.uint64))


@pytest.mark.parametrize("call", [
    lambda s: nk.bincount(np.zeros(0, np.int64), strategy=s),
    lambda s: nk.histogram(np.zeros(0, np.float32), strategy=s),
    lambda s: nk.histogram_counts(np.zeros(0, np.int32), 4, strategy=s),
])
def test_bad_strategy_refused_for_empty_input(call):  # found by a fresh-user trial
    with pytest.raises(ValueError, match="unknown histogram strategy"):
        call("bogus")


def check_histogram(x, bins, range=None, strategy=None):
    hist, edges = nk.histogram(x, bins, range=range, strategy=strategy)
    hist_np, edges_np = np.histogram(x, bins, range=range)
    assert hist.dtype == np.int64 and np.array_equal(hist, hist_np), (hist, hist_np)
    assert edges.dtype == edges_np.dtype and np.array_equal(edges, edges_np)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=IDS)
def test_histogram_values_on_edges(strategy):
    x = np.concatenate([np.linspace(0, 1, 11), np.linspace(0, 1, 31), [0.1, 0.2, 0.3, 0.7]])
    check_histogram(x, 10, strategy=strategy)  # values on (NumPy-rounded) edges
    check_histogram(x.astype(np.float32), 3, (0.1, 0.7), strategy=strategy)
    check_histogram(x, 7, (0.0, 0.3), strategy=strategy)


@pytest.mark.filterwarnings("ignore:Converting input from bool")  # NumPy's, for bool x
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint16,
                                   np.int32, np.uint64, np.int64, np.bool_])
def test_histogram_dtypes_and_ranges(dtype):
    x = (RNG.standard_normal(300) * 8).astype(dtype) if np.dtype(dtype).kind == "f" else \
        RNG.integers(0, 60, 300).astype(dtype)
    for rng in (None, (-3, 25), (np.float32(-1.5), np.float32(2.25)), (4, 4)):
        check_histogram(x, 9, rng)


@pytest.mark.filterwarnings("ignore:Converting input from bool")  # NumPy's, for bool x
def test_bool_bytes_other_than_0_and_1_count_as_true():
    """NumPy reads any nonzero bool byte as True; the table binner of 1-byte inputs
    used to index its table by the raw byte (255 fell outside the range)."""
    x = np.array([0, 2, 1, 255, 1, 0, 7], np.uint8).view(bool)
    np.testing.assert_array_equal(nk.histogram(x, bins=2, range=(0, 2))[0],
                                  np.histogram(x, bins=2, range=(0, 2))[0])
    np.testing.assert_array_equal(nk.bincount(x), np.bincount(x))


def test_numpy_signature_compatibility():
    """Found by a fresh-user trial: NumPy's weights/density places, and an empty list."""
    assert nk.bincount([]).tolist() == [] and nk.bincount([]).dtype == np.int64
    assert nk.bincount([], minlength=2).tolist() == [0, 0]
    assert nk.histogram_counts([], 3).tolist() == [0, 0, 0]
    got = nk.bincount(np.array([1, 2]), np.array([1.0, 0.5]))  # NumPy's positional weights
    assert got.tolist() == [0.0, 1.0, 0.5] and got.dtype == np.float64
    assert nk.histogram(np.array([1.0, 2.0]), 2, density=False)[0].tolist() == [1, 1]
    assert nk.histogram(np.array([1.0, 2.0]), 2, None, True)[0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=IDS)
@pytest.mark.parametrize("n", [1, 31, 32, 33, 129])
def test_weighted_bincount_against_numpy(strategy, n):
    """Each bin's sum of its values' weights: float64 whatever the weights' dtype,
    within float64 rounding of NumPy's (the sums add in a tree, NumPy's in order)."""
    x = RNG.integers(0, 40, n)
    w = RNG.standard_normal(n)
    kinds = (w, w.astype(np.float32), w > 0, (10 * w).astype(np.int16))
    weights = kinds[n % len(kinds)]  # each dtype at several sizes (simulator time)
    got = nk.bincount(x, weights, minlength=45, strategy=strategy)
    want = np.bincount(x, weights, minlength=45)
    assert got.dtype == want.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_weighted_bincount_edges_and_errors():
    x = np.array([0, 2, 2, 5])
    w = np.array([1.0, np.nan, 2.0, np.inf])
    np.testing.assert_array_equal(nk.bincount(x, w), np.bincount(x, w))  # NaN, inf kept
    for empty in ([], np.zeros(0, np.int32)):  # int64 zeros, weights or not, as NumPy's
        got, want = nk.bincount(empty, [], minlength=3), np.bincount(empty, [], minlength=3)
        assert got.dtype == want.dtype == np.int64 and got.tolist() == want.tolist()
        assert nk.bincount(empty, [1.0]).tolist() == []  # its weights unread, as NumPy's
    device = nk.bincount(cuda.to_device(x), cuda.to_device(w[::-1].copy()))
    np.testing.assert_array_equal(device.copy_to_host(), np.bincount(x, w[::-1]))
    device = nk.bincount(cuda.to_device(x), w)  # host weights for device values
    np.testing.assert_array_equal(device.copy_to_host(), np.bincount(x, w))
    with pytest.raises(ValueError, match="weights of shape"):
        nk.bincount(x, w[:3])
    for dtype in (np.complex64, np.longdouble):  # NumPy refuses to cast either
        with pytest.raises(TypeError, match="weights must hold real numbers"):
            nk.bincount(x, w.astype(dtype))


@pytest.mark.parametrize("x, bins, rng", [
    # the width of a float32 range past float32's largest value (NumPy takes it in float64)
    (np.array([0.3e38, -2.9e38, 0.0, 0.35e38], np.float32), 10, (-3e38, 3e38)),
    # integers past 2**53 against an integer range: kept exactly, as NumPy compares
    (np.array([2**53, 2**53 + 1, 0, 2**53 - 1], np.int64), 1, (0, 2**53)),
    (np.array([2**53, 2**53 + 1, 0], np.uint64), 1, (0, 2**53)),
    (np.array([2**60 + 1, 2**60 + 2, 2**60 + 100, 2**61, 2**61 + 1], np.int64), 2,
     (2**60 + 2, 2**61)),
    (np.array([2**63 - 1, -2**63, 0], np.int64), 3, (-2**63, 2**63 - 1)),
    # a float16 range wider than float16's largest value (found by a fresh-user trial:
    # the host table of every float16 value raised IndexError)
    (np.array([1.0, -5.0, 100.0, 1000.0], np.float16), 3, (-60000, 60000)),
    (np.array([1.0, -5.0, 100.0, 30000.0], np.float16), 3, (0, 70000)),
], ids=["float32 wide range", "int64 past 2**53", "uint64 past 2**53", "int64 near 2**61",
        "int64 full range", "float16 wide range", "float16 range past its max"])
def test_histogram_ranges_at_the_ends_of_the_dtype(x, bins, rng):
    check_histogram(x, bins, rng)


def test_histogram_where_numpys_own_arithmetic_overflows():
    """60000 - (-60000) overflows float16 (NumPy raises IndexError); numbakern takes
    such a value's bin in float64 instead, as BinRule documents."""
    x = np.array([60000, 1, -60000], np.float16)
    with pytest.raises(IndexError):
        np.histogram(x, 3, (-60000, 60000))
    assert nk.histogram(x, 3, (-60000, 60000))[0].tolist() == [1, 1, 1]
    y = np.array([1e38, 0.0], np.float32)  # 1e38 + 3e38 overflows float32
    assert nk.histogram(y, 10, (-3e38, 3e38))[0].tolist() == [0] * 5 + [1, 1, 0, 0, 0]


def test_histogram_nan_inf_and_empty():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, 1.0, 2.0], np.float32)
    check_histogram(x, 4, (0, 1))  # NaN and inf never counted; 1.0 in the last bin
    check_histogram(np.zeros(0, np.float64), 5)
    with pytest.raises(ValueError, match="not finite"):
        nk.histogram(x, 4)
    with pytest.raises(ValueError, match="larger"):
        nk.histogram(x, 4, range=(1, 0))
    for bins in (0, False):  # NumPy reads a Python bool as an int (operator.index)
        with pytest.raises(ValueError, match="^histogram: bins must be positive"):
            nk.histogram(x, bins)
    check_histogram(x, True, (0, 1))  # one bin
    # (an array of edges is taken: test_histogram_bin_arrays; NumPy refuses np.True_)
    for bins in ("auto", np.True_):
        with pytest.raises(TypeError, match="^histogram: bins must be an int"):
            nk.histogram(x, bins)


def test_too_many_bins_for_shared_memory():
    x = np.arange(100)
    # the remedies named are those that would count these bins
    with pytest.raises(ValueError, match=r"shared memory for 20000 bins, more than the "
                                         r"49152 a block has: use fewer bins or "
                                         r"global_atomic \(no shared memory\)$"):
        nk.histogram_counts(x, 20000, strategy="shared_privatized")
    with pytest.raises(ValueError, match=r"use fewer bins, fewer threads \(warp_privatized"
                                         r"\(threads=32\) fits\), shared_privatized \(one "
                                         r"copy of the counters a block\) or global_atomic"):
        nk.histogram_counts(x, 2000, strategy=WarpPrivatized(threads=256, blocks=1))
    got = nk.histogram_counts(x, 20000)  # the default falls back to global atomics
    assert np.array_equal(got, reference_counts(x, 20000))


def test_errors_and_registry():
    with pytest.raises(TypeError, match="use numbakern.histogram"):
        nk.histogram_counts(np.ones(3), 4)
    with pytest.raises(ValueError, match="num_bins"):
        nk.histogram_counts(np.ones(3, np.int32), 0)
    with pytest.raises(ValueError, match="unknown histogram strategy"):
        nk.histogram_counts(np.ones(3, np.int32), 4, strategy="magic")
    assert sorted(nk.strategies.REGISTRY["histogram"]) == ["global_atomic", "shared_privatized",
                                               "warp_privatized"]


def test_private_counters_cannot_overflow_a_forced_small_grid():
    """A block's private counters are uint32: the grid grows so that no block counts
    2**31 elements, whatever ``blocks`` asks for."""
    from numbakern.strategies.shared_privatized import SharedPrivatized

    strategy = SharedPrivatized(blocks=1)
    assert strategy.grid(10) == 1
    assert strategy.grid(2**32 + 5) == 3


def test_histogram_of_bools_with_non_canonical_bytes_counts_every_non_zero_byte_as_true():
    # NumPy reads any non-zero byte as True (IntelPython/dpnp#3054: a peer binned the
    # bytes); the table binner must too.
    b = np.array([0, 2, 255, 1, 0, 2], np.uint8).view(np.bool_)
    for bins, rng in ((2, (0, 1)), (3, None)):
        hist, edges = nk.histogram(b, bins=bins, range=rng)
        want, want_edges = np.histogram(b, bins=bins, range=rng)
        assert np.array_equal(hist, want)
        assert np.array_equal(edges, want_edges)


@pytest.mark.parametrize("bad, error", [((0, 1, 2), ValueError), ((1,), ValueError),
                                        (5, TypeError), ("abc", ValueError),
                                        ([[0, 1]], ValueError)])
def test_a_range_that_is_not_a_pair_is_named(bad, error):  # found by a fresh-user trial
    """NumPy's exception types: a lone number or string cannot be unpacked (TypeError),
    a sequence of another length can but not into two (ValueError)."""
    with pytest.raises(error, match=r"histogram: range must be None or a \(lo, hi\) "
                                    r"pair, got"):
        nk.histogram(np.array([0.0, 1.0]), bins=2, range=bad)
    with pytest.raises(error):
        np.histogram(np.array([0.0, 1.0]), bins=2, range=bad)


def test_range_ends_of_0d_tensors_and_bfloat16_scalars():
    """A 0-d tensor's end is read as the NumPy scalar it holds (NumPy's own edges
    raised "Could not convert tensor(0.)"); bfloat16 scalars are real numbers."""
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.linspace(0, 1, 50)
    hist, edges = nk.histogram(torch.from_numpy(x), bins=4,
                               range=(torch.tensor(0.0), torch.tensor(0.5)))
    want, want_edges = np.histogram(x, bins=4, range=(np.float32(0), np.float32(0.5)))
    assert hist.tolist() == want.tolist() and edges.numpy().tolist() == want_edges.tolist()
    ends = (ml_dtypes.bfloat16(0.25), ml_dtypes.bfloat16(0.75))
    got, want = nk.histogram(x, 3, range=ends), np.histogram(x, 3, range=ends)
    assert got[0].tolist() == want[0].tolist() and got[1].dtype == want[1].dtype


@pytest.mark.parametrize("seed", range(6))
def test_bfloat16_values_bin_as_numpys_bfloat16_arithmetic(seed):
    """Edges in bfloat16 and each value in NumPy's bin by bfloat16 arithmetic (a
    fresh-eyes fuzz: 13 of 20 arrays binned apart when the bins were float32's), read
    in place (no CopyWarning); NumPy and torch input alike."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(64) * 3).astype(ml_dtypes.bfloat16)
    bins = int(rng.integers(3, 40))
    half = (ml_dtypes.bfloat16(-1), ml_dtypes.bfloat16(1.5))
    for kw in ({}, {"range": half}, {"range": (-1, 2)}, {"range": (-1.5, 2.25)},
               {"density": True},
               {"weights": rng.random(64).astype(np.float32)}):
        with warnings.catch_warnings():
            warnings.simplefilter("error", nk.CopyWarning)
            hist, edges = nk.histogram(x, bins, **kw)
        want, want_edges = np.histogram(x, bins, **kw)
        assert hist.dtype == want.dtype and edges.dtype == want_edges.dtype, kw
        np.testing.assert_array_equal(edges, want_edges)
        np.testing.assert_allclose(hist, want, rtol=1e-6)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x.astype(np.float32)).bfloat16()
    for rng in (None, (-1.5, 2.25)):  # NumPy's edges: bfloat16, float32 for floats
        hist, edges = nk.histogram(t, bins, range=rng)
        want, want_edges = np.histogram(x, bins, range=rng)
        assert str(edges.dtype) == f"torch.{want_edges.dtype}" and hist.tolist() == want.tolist()
        assert edges.float().numpy().tolist() == want_edges.astype(np.float32).tolist()


def test_bfloat16_device_input_finds_its_range_from_its_bits():
    """A device bfloat16 input's least and greatest values come back as their bits:
    the automatic range read them as integers (lo > hi, NumPy's ValueError on an
    H100). Negative and positive values, a NaN refused as NumPy refuses it."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from numbakern.core.arrays import BFloat16Input

    x = (RNG.standard_normal(200) * 3).astype(ml_dtypes.bfloat16)
    bits = BFloat16Input(cuda.to_device(x.view(np.uint16)))
    hist, edges = (np.asarray(a.copy_to_host()) for a in nk.histogram(bits, 13))
    want, want_edges = np.histogram(x, 13)
    assert hist.tolist() == want.tolist()
    assert edges.view(ml_dtypes.bfloat16).tolist() == want_edges.tolist()
    x[7] = np.nan
    with pytest.raises(ValueError, match="autodetected range of .* is not finite"):
        nk.histogram(BFloat16Input(cuda.to_device(x.view(np.uint16))), 13)


#: a longdouble wider than float64 (float128 on x86 Linux; float64 on some platforms)
WIDE = np.dtype(np.longdouble).itemsize > 8
WIDE_ENDS = [(np.longdouble(0), 3), (0, np.array(np.longdouble(3)))] if WIDE else []


@pytest.mark.parametrize("bad", [(None, None), ("a", "b"), (0, 1j), (-1, 2**64), *WIDE_ENDS])
@pytest.mark.parametrize("dtype", [np.uint64, np.float32, np.int8])
def test_a_range_end_that_is_no_real_number_is_named(bad, dtype):
    """(None, None) was "'>' not supported", ('a', 'b') and 2**64 the TypeError of
    np.isfinite: NumPy's TypeError, but naming no argument; a float128 end (edges no
    kernel holds) Numba's "NotImplementedError: float128" for most dtypes of x."""
    with pytest.raises(TypeError, match=r"histogram: range must be a \(lo, hi\) pair of "
                                        r"real numbers \(ints and floats of at most 64 bits"):
        nk.histogram(np.array([1, 2], dtype), bins=2, range=bad)


@pytest.mark.skipif(not WIDE, reason="longdouble is float64 here")
def test_float128_input_is_named():
    with pytest.raises(TypeError, match="histogram: x must have a bool, integer or float "
                                        "dtype of at most 8 bytes, got float128"):
        nk.histogram(np.array([1.0, 2.0], np.longdouble), bins=2, range=(0, 2))


@pytest.mark.parametrize("call, name", [
    (lambda x, n: nk.histogram(x, bins=n), "bins"),
    (lambda x, n: nk.bincount(x, minlength=n), "minlength"),
    (lambda x, n: nk.histogram_counts(x, n), "num_bins"),
])
def test_more_counts_than_an_array_holds_are_refused_naming_the_argument(call, name):
    count = 2**62  # was NumPy's "array is too big", naming no argument
    with pytest.raises(ValueError, match=f"^{name}={count} asks for {count} int64 counts, "
                                         "past the largest array there can be"):
        call(np.array([1, 2, 3]), count)
    with pytest.raises(ValueError, match=f"^{name}={count} asks for"):  # before any count
        call(np.zeros(0, np.int64), count)


def test_bool_input_warns_numpys_conversion_on_every_call():
    """NumPy's histogram warns that it converts bool to uint8, whatever the bins."""
    x = np.array([True, False, True, True])
    want = np.histogram(x, bins=3)
    for given in (x, x, cuda.to_device(x), cuda.to_device(x)):
        with pytest.warns(RuntimeWarning, match=r"^Converting input from bool to "
                          r"<class 'numpy.uint8'> for compatibility.$") as told:
            hist, edges = nk.histogram(given, bins=3)
        assert len(told) == 1 and told[0].filename == __file__
        hist = hist if isinstance(hist, np.ndarray) else hist.copy_to_host()
        assert np.array_equal(hist, want[0]) and np.array_equal(edges, want[1])


WEIGHT_DTYPES = [np.float64, np.float32, np.float16, np.int8, np.uint64, np.bool_]


@pytest.mark.parametrize("wdtype", WEIGHT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [1, 33, 129])
def test_weighted_histogram_against_numpy(wdtype, n):
    """Each bin's sum of the weights of its values, in the weights' dtype (NumPy's
    rule), NaN and values outside the range left out, every strategy by turns; float
    sums within rounding of NumPy's (a tree against its order), integer and bool sums
    exact."""
    strategy = STRATEGIES[(n + WEIGHT_DTYPES.index(wdtype)) % len(STRATEGIES)]
    x = RNG.standard_normal(n).astype(np.float32)
    x[::7] = np.nan
    scale = RNG.random(n) if np.dtype(wdtype).kind == "u" else RNG.standard_normal(n)
    w = (scale * 20).astype(wdtype)  # no negative float cast to uint64
    for x_as in (x, x.astype(np.float16), (x[~np.isnan(x)] * 10).astype(np.int16)):
        w_as = w[:x_as.size]
        got = nk.histogram(x_as, 6, range=(-2, 2), weights=w_as, strategy=strategy)[0]
        want = np.histogram(x_as, 6, range=(-2, 2), weights=w_as)[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        rtol = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6,
                np.dtype(np.float64): 1e-12}.get(want.dtype, 0)
        np.testing.assert_allclose(got.astype(float), want.astype(float), rtol=rtol,
                                   atol=rtol)


def test_weighted_histogram_keeps_the_weights_byte_order_where_numpy_does():
    """NumPy sums equal bins' weights in the weights' own dtype, a big-endian one
    included (an empty ``x`` too); between given edges, and with ``density``, its
    result is native."""
    x = np.array([0.0, 0.5, 1.0, 2.0, 7.0])
    for w in (np.array([1, 2, 3, 4, 5], ">f4"), np.array([1, -2, 3, 4, 5], ">i2")):
        for args, kw in (((x, 2), {}), ((x, 3), dict(range=(0, 1))), ((x[:0], 2), {}),
                         ((x, [0, 1, 2]), {}), ((x, 2), dict(density=True))):
            weights = w[:args[0].size]
            got = nk.histogram(*args, weights=weights, **kw)[0]
            want = np.histogram(*args, weights=weights, **kw)[0]
            assert got.dtype.str == want.dtype.str, (args, kw)
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_big_endian_weights_beside_a_tensor_or_a_device_x():
    """A result going back as a torch tensor or a device array is native, whatever the
    weights' byte order (torch holds no other)."""
    torch = pytest.importorskip("torch")
    x = np.linspace(0, 1, 20)
    w = np.arange(20).astype(">f4")
    hist, edges = nk.histogram(torch.from_numpy(x), 3, weights=w)
    assert isinstance(hist, torch.Tensor) and hist.dtype == torch.float32
    np.testing.assert_array_equal(hist.numpy(), np.histogram(x, 3, weights=w)[0])
    hist = nk.histogram(cuda.to_device(x), 3, weights=w)[0]
    np.testing.assert_array_equal(hist.copy_to_host(), np.histogram(x, 3, weights=w)[0])


def test_weighted_histogram_takes_as_many_bins_as_counting_does():
    """The elements out of range are left out of the counts, not counted in a bin
    past the last: every bin count the strategy's counters take, weighted too."""
    x = np.linspace(-0.5, 1.5, 40)
    strategy = WarpPrivatized(threads=1024, blocks=1)  # 32 copies: at most 384 bins
    bins = 384
    assert strategy.fits(bins) and not strategy.fits(bins + 1)
    got = nk.histogram(x, bins, range=(0, 1), strategy=strategy, weights=np.ones(40))[0]
    np.testing.assert_array_equal(got, np.histogram(x, bins, range=(0, 1),
                                                    weights=np.ones(40))[0])


@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_density_against_numpy(weighted):
    """``n / np.diff(edges) / n.sum()`` as NumPy's: float64, over 2-D input whose bins
    have unequal widths only through rounding; NaN and NumPy's warning for a zero
    total."""
    x = RNG.standard_normal((5, 13))
    w = RNG.random((5, 13)).astype(np.float32) if weighted else None
    got, edges = nk.histogram(x, 9, weights=w, density=True)
    want, want_edges = np.histogram(x, 9, weights=w, density=True)
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(edges, want_edges)
    empty = np.zeros(0) if w is None else np.zeros((0, 3))
    weights = None if w is None else np.zeros((0, 3), np.int8)
    with pytest.warns(RuntimeWarning, match="invalid value encountered in divide") as told:
        got = nk.histogram(empty, 3, weights=weights, density=True)[0]
    assert told[0].filename == __file__  # told at the user's call
    assert got.dtype == np.float64 and np.isnan(got).all()


def test_weighted_histogram_on_device_arrays_and_its_errors():
    x = RNG.standard_normal(70)
    w = RNG.standard_normal(70).astype(np.float32)
    want = np.histogram(x, 5, range=(-1, 1), weights=w)[0]
    for dw in (cuda.to_device(w), w):  # device or host weights for device values
        got = nk.histogram(cuda.to_device(x), 5, range=(-1, 1), weights=dw)[0]
        assert isinstance(got, type(cuda.to_device(w)))
        got = got.copy_to_host()
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    dens = nk.histogram(cuda.to_device(x), 5, range=(-1, 1), density=True)[0].copy_to_host()
    np.testing.assert_allclose(dens, np.histogram(x, 5, range=(-1, 1), density=True)[0])
    with pytest.raises(ValueError, match="weights should have the same shape as a"):
        nk.histogram(x, 5, weights=w[:5])
    with pytest.raises(TypeError, match="histogram: weights must hold real numbers"):
        nk.histogram(x, 5, weights=w.astype(np.complex64))
    empty = nk.histogram(np.zeros(0), 4, weights=np.zeros(0, np.int16))[0]
    assert empty.dtype == np.int16 and empty.tolist() == [0, 0, 0, 0]
