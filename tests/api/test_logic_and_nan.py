"""any, all, count_nonzero, nansum, nanprod, nancumsum, nancumprod, cummax and cummin
against NumPy (and torch's cummax rule), on every path: each element enters through
the op's map, so a strategy or layout chosen for speed reads it the same way.

Integer results exactly; float sums and products of small integers exactly too.
"""

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk

RNG = np.random.default_rng(17)
REDUCE = nk.strategies.every("reduce", threads=32, blocks=2)
SCAN = nk.strategies.every("scan", threads=32)
FUNCS = {"any": np.any, "all": np.all, "count_nonzero": np.count_nonzero,
         "nansum": np.nansum, "nanprod": np.nanprod}


def _data(dtype, shape):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:  # bytes other than 0 and 1, which NumPy reads as True
        return RNG.choice(np.array([0, 1, 2, 255], np.uint8), shape).view(bool)
    x = RNG.integers(-1, 3, shape).astype(dtype)
    if dtype.kind == "f":
        x[RNG.random(shape) < 0.2] = np.nan
        x[RNG.random(shape) < 0.1] = -0.0
    return x


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["bool", "int8", "float32"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_reductions_match_numpy(name, dtype):
    x = _data(dtype, (33, 40))
    fn, ref = getattr(nk, name), FUNCS[name]
    if name == "nanprod" and np.dtype(dtype).kind != "b":
        x = np.where(np.abs(x) > 1, np.sign(x), x).astype(dtype)  # products stay small
    for axis in (None, (0, 1)):  # over several blocks
        _same(fn(x, axis=axis), ref(x, axis=axis))
    rows = x[:5]  # a warp a row: three pairs of rows over the simulator's two blocks
    _same(fn(rows, axis=1), ref(rows, axis=1))
    _same(fn(rows.T, axis=0), ref(rows.T, axis=0))  # F-ordered rows
    _same(fn(x[:, :2], axis=1), ref(x[:, :2], axis=1))  # tiny rows
    _same(fn(x[:0], axis=0), ref(x[:0], axis=0))  # no elements: the identity


@pytest.mark.parametrize("dtype", ["uint64", "float16", "float64"])
def test_other_dtypes(dtype):
    x = _data(dtype, (6, 40))
    for name in ("any", "nansum"):
        _same(getattr(nk, name)(x, axis=1, keepdims=True),
              FUNCS[name](x, axis=1, keepdims=True))


@pytest.mark.parametrize("strategy", REDUCE, ids=lambda s: s.label)
def test_every_reduction_strategy(strategy):
    x = _data("float32", (9, 70))
    _same(nk.nansum(x, axis=1, strategy=strategy), np.nansum(x, axis=1))
    _same(nk.any(x > 1, strategy=strategy), np.any(x > 1))


def test_count_nonzero_of_the_whole_array_is_numpys_scalar_type():
    x = np.array([0.0, np.nan, 2.0, -0.0])
    assert nk.count_nonzero(x) == 2
    assert type(nk.count_nonzero(x)) is type(np.count_nonzero(x))  # np.intp in NumPy 2
    assert nk.count_nonzero(x.reshape(2, 2), axis=0).dtype == np.intp


@pytest.mark.parametrize("strategy", SCAN, ids=lambda s: s.label)
def test_nan_scans_match_numpy(strategy):
    x = _data("float64", (5, 37))
    small = np.where(np.abs(x) > 1, np.sign(x), x)
    _same(nk.nancumsum(x, strategy=strategy), np.nancumsum(x))
    _same(nk.nancumprod(small, axis=1, strategy=strategy, layout="tiles"),
          np.nancumprod(small, axis=1))


def test_nan_scans_on_warp_rows_and_integers():
    x = _data("float64", (5, 37))
    _same(nk.nancumsum(x, axis=1), np.nancumsum(x, axis=1))  # a warp per row
    _same(nk.nancumsum(x.astype(np.int32), axis=0), np.nancumsum(x.astype(np.int32), 0))


def _torch_cummax(x, less):
    """torch's cummax (less=False) / cummin rule, sequentially: a NaN, or a value at
    least as large (small) as the running one, takes over with its index."""
    values, indices = np.empty_like(x), np.empty(x.shape, np.int64)
    best, at = x[0], 0
    for i, v in enumerate(x):
        if v != v or (best == best and (v <= best if less else v >= best)):
            best, at = v, i
        values[i], indices[i] = best, at
    return values, indices


@pytest.mark.parametrize("direction", ["max", "min"])
def test_cummax_and_cummin_follow_torch(direction):
    fn = nk.cummax if direction == "max" else nk.cummin
    x = RNG.integers(0, 4, 150).astype(np.float32)  # many ties
    x[[40, 90, 91]] = np.nan
    values, indices = fn(x)
    want_v, want_i = _torch_cummax(x, direction == "min")
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(indices, want_i)
    rows = RNG.integers(-3, 3, (4, 33)).astype(np.int16)
    values, indices = fn(rows, axis=1)
    for r in range(4):
        want_v, want_i = _torch_cummax(rows[r], direction == "min")
        np.testing.assert_array_equal(values[r], want_v)
        np.testing.assert_array_equal(indices[r], want_i)
    assert values.dtype == np.int16 and indices.dtype == np.int64


@pytest.mark.parametrize("direction", ["max", "min"])
def test_reversed_cummax_ties_go_to_the_larger_index(direction):
    """reverse=True: element i is the extreme of x[i:], ties still to the largest
    index (the docstring's example), NaN still winning with its latest index."""
    fn = nk.cummax if direction == "max" else nk.cummin
    sign = 1 if direction == "max" else -1
    x = sign * np.array([1.0, 3.0, 2.0, 3.0, 0.0])
    assert fn(x, reverse=True).indices.tolist() == [3, 3, 3, 3, 4]
    y = RNG.integers(0, 3, 70).astype(np.float64)
    y[[10, 50]] = np.nan
    values, indices = fn(y, reverse=True)
    for i in range(y.size):
        tail = y[i:]
        if np.isnan(tail).any():
            want = i + int(np.flatnonzero(np.isnan(tail))[-1])
        else:
            best = tail.max() if direction == "max" else tail.min()
            want = i + int(np.flatnonzero(tail == best)[-1])
        assert indices[i] == want and (values[i] == y[want] or np.isnan(y[want])), i


NAN_ROWS = np.array([[np.nan, -np.inf, 3.0, 3.0, np.nan], [1.0, np.nan, -2.0, -0.0, -2.0],
                     [np.nan, np.inf, np.nan, 0.5, 0.5]], np.float32)


@pytest.mark.parametrize("strategy", REDUCE, ids=lambda s: s.label)
def test_nan_extremes_match_numpy(strategy):
    """NaN counts as -inf (+inf) at its own index; ties: the first; every strategy."""
    x = np.concatenate([NAN_ROWS, _data("float32", (6, 5))])
    for fn, ref in ((nk.nanargmax, np.nanargmax), (nk.nanargmin, np.nanargmin),
                    (nk.nanmax, np.nanmax), (nk.nanmin, np.nanmin)):
        _same(fn(x, axis=1, strategy=strategy), ref(x, axis=1))
        _same(fn(x, strategy=strategy), ref(x))
    assert nk.nanargmax(np.array([np.nan, -np.inf])) == 0  # as NumPy: NaN reads as -inf


def test_all_nan_slices():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        nk.nanargmax(x, axis=1)
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        nk.nanargmin(np.full(3, np.nan))
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        _same(nk.nanmax(x, axis=1), np.array([np.nan, 1.0]))
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        assert np.isnan(nk.nanmin(np.full(3, np.nan)))
    _same(nk.nanmax(np.arange(7, dtype=np.int16).reshape(7, 1), axis=0), np.array([6], np.int16))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.uint8])
def test_nanargmax_into_a_narrower_integer_out_finds_all_nan_slices_first(dtype):
    """The all-NaN flag rides in the int64 codes: an out of any integer dtype (NumPy
    takes any) gets the indices cast after the flags were read from the codes, so an
    all-NaN slice raises with out as it was (as NumPy's, host and device alike)."""
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, 4.0]])
    for fn, ref in ((nk.nanargmax, np.nanargmax), (nk.nanargmin, np.nanargmin)):
        out = np.zeros(2, dtype)
        assert fn(x, axis=1, out=out) is out
        _same(out, ref(x, axis=1, out=np.zeros(2, dtype)))
        device_out = cuda.to_device(np.zeros(2, dtype))
        fn(cuda.to_device(x), axis=1, out=device_out)
        _same(device_out.copy_to_host(), out)
        all_nan = np.array([[np.nan, np.nan], [1.0, 2.0]])
        for given, kept in ((all_nan, np.full(2, 7, dtype)),
                            (cuda.to_device(all_nan), cuda.to_device(np.full(2, 7, dtype)))):
            with pytest.raises(ValueError, match="All-NaN slice encountered"):
                fn(given, axis=1, out=kept)  # and out stays as it was, as NumPy's
            _same(kept if isinstance(kept, np.ndarray) else kept.copy_to_host(),
                  np.full(2, 7, dtype))
        with pytest.raises(ValueError, match=r"out has shape \(3,\)"):
            fn(x, axis=1, out=np.zeros(3, dtype))


def test_nanargmax_of_a_whole_array_wraps_an_index_into_a_narrower_0d_out():
    """A whole array's index written into a 0-d int8 ``out`` wraps as NumPy's (150 is
    -106 there), host and device alike: not an OverflowError from assigning a scalar."""
    x = np.zeros(200)
    x[150] = 1.0
    for fn, ref, sign in ((nk.nanargmax, np.nanargmax, 1), (nk.nanargmin, np.nanargmin, -1)):
        want = ref(sign * x, out=np.zeros((), np.int8))
        assert want == -106
        for kwargs in ({}, {"axis": 0}):
            out = np.zeros((), np.int8)
            assert fn(sign * x, out=out, **kwargs) is out
            _same(out, want)
            device_out = cuda.to_device(np.zeros((), np.int8))
            fn(cuda.to_device(sign * x), out=device_out, **kwargs)
            _same(device_out.copy_to_host(), want)


@pytest.mark.parametrize("fn", ["nanmax", "nanmin"])
def test_nanmax_and_nanmin_name_themselves_in_errors(fn):
    """Their errors name them, and an empty input gets NumPy's own words (which Dask's
    meta inference matches), not nanargmax's."""
    with pytest.raises(ValueError, match=f"zero-size array to reduction operation f{fn[3:]} "
                                         "which has no identity"):
        getattr(nk, fn)(np.array([], np.int32))
    with pytest.raises(ValueError, match=f"^{fn}: out has shape"):
        getattr(nk, fn)(np.ones((2, 2)), axis=1, out=np.zeros(3))


@pytest.mark.filterwarnings("ignore:All-NaN slice encountered")
def test_nanmax_and_nanmin_take_axis_tuples_as_numpy():
    """Found by the differential harness: np.nanmax/np.nanmin take a tuple of axes (their
    values mean something over several axes, unlike an index); numbakern raised
    TypeError. nanargmax keeps NumPy's one-axis rule."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::-1] - 7
    x[0, 1, 2] = x[1, 0, 0] = np.nan
    x[1] = np.nan
    for fn, ref in ((nk.nanmax, np.nanmax), (nk.nanmin, np.nanmin)):
        for axis in ((0, 2), (2, 0), (1, 2), (0, 1, 2), (1,), ()):
            for keepdims in (False, True):
                _same(fn(x, axis=axis, keepdims=keepdims), ref(x, axis=axis, keepdims=keepdims))
        _same(fn(np.float64(2.5).reshape(()), axis=()), np.float64(2.5))
    with pytest.raises(TypeError):
        nk.nanargmax(x, axis=(0, 1))


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("strategy", REDUCE[:2] + REDUCE[-2:], ids=lambda s: s.label)
def test_nanmean_matches_numpy(strategy):
    x = np.concatenate([NAN_ROWS.astype(np.float64), _data("float64", (6, 5))])
    for axis in (None, 0, 1):
        np.testing.assert_allclose(nk.nanmean(x, axis=axis, strategy=strategy),
                                   np.nanmean(x, axis=axis), rtol=1e-14)
    ints = RNG.integers(-5, 5, (4, 33)).astype(np.int16)
    _same(nk.nanmean(ints, axis=1, strategy=strategy), np.nanmean(ints, axis=1))


def test_nanmean_of_floats_takes_float_dtypes_only_as_numpy():
    x = np.array([1.5, np.nan, -3.5])
    with pytest.raises(TypeError, match="inexact"):
        np.nanmean(x, dtype=np.int64)
    with pytest.raises(TypeError, match="nanmean: dtype must be float16, float32 or "
                                        "float64, got int64"):
        nk.nanmean(x, dtype=np.int64)
    assert nk.nanmean(x, dtype=np.float32) == np.float32(-1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_nanmean_refuses_extended_precision_naming_itself(dtype):
    # no kernel holds np.longdouble: float input reached the kernel's compiler, and
    # integer input (NumPy's nanmean is its mean there) was refused under mean's name
    with pytest.raises(TypeError, match="^nanmean .*longdouble|^nanmean .*float128"):
        nk.nanmean(np.arange(4).astype(dtype), dtype=np.longdouble)


@pytest.mark.parametrize("where", [True, np.array([True, False, True])])
def test_nanmean_of_integers_names_itself_refusing_an_out(where):
    # NumPy's nanmean of integers is its mean, which numbakern computes, under
    # nanmean's name: the float64 means cannot go into an int64 out (same_kind)
    xi = np.arange(6, dtype=np.int16).reshape(2, 3)
    with pytest.raises(nk.OutDtypeError, match="^nanmean: cannot cast the float64 result"):
        nk.nanmean(xi, axis=0, out=np.zeros(3, np.int64), where=where)
    np.testing.assert_array_equal(nk.nanmean(xi, axis=0, where=where),
                                  np.nanmean(xi, axis=0, where=where))


@pytest.mark.parametrize("shape, kwargs", [((0,), {}), ((0, 3), {"axis": 0}),
                                           ((2, 0), {"axis": 1}), ((0, 0), {"axis": 0}),
                                           ((0,), {"keepdims": True}),
                                           ((0,), {"dtype": np.float32}),
                                           ((3, 0), {"axis": None})])
def test_mean_of_nothing_warns_numpys_two_warnings(shape, kwargs):
    """np.mean of no elements warns "Mean of empty slice", then its division's
    "invalid value encountered in (scalar) divide" where there is a result; the same
    for device input (both follow from the shape alone)."""
    for dtype in (np.float64, np.int32, np.float32, np.float16):
        x = np.zeros(shape, dtype)
        want, told = _messages(lambda: np.mean(x, **kwargs))
        for given in (x, cuda.to_device(x)):
            got, said = _messages(lambda: nk.mean(given, **kwargs))
            assert said == told
            _same(got if isinstance(given, np.ndarray) or np.ndim(got) == 0 and
                  not hasattr(got, "copy_to_host") else got.copy_to_host(), want)
        with np.errstate(invalid="ignore"):
            assert _messages(lambda: nk.mean(x, **kwargs))[1] == ["Mean of empty slice"]


def test_nanmean_of_integers_is_their_mean_as_numpy():
    """NumPy's nanmean of bool and integers is its mean: an integer dtype= sums in that
    dtype and wraps (three int8 100s sum to 44, mean 14), on host and device input."""
    for x, dtype in ((np.int8([100, 100, 100]), np.int8), (np.int16([30000, 30000]), np.int16),
                     (np.array([True, False, True]), None), (np.uint8([250, 7]), np.float32)):
        want = np.nanmean(x, dtype=dtype)
        _same(nk.nanmean(x, dtype=dtype), want)
        _same(nk.nanmean(cuda.to_device(x), dtype=dtype).copy_to_host(), want)
    m = RNG.integers(-9, 9, (3, 5)).astype(np.int32)
    keep = RNG.random((3, 5)) < 0.7
    _same(nk.nanmean(m, axis=0, keepdims=True, where=keep),
          np.nanmean(m, axis=0, keepdims=True, where=keep))


def test_nanmean_of_nothing_warns_as_numpy():
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        _same(nk.nanmean(np.array([[np.nan, np.nan], [1.0, 3.0]]), axis=1),
              np.array([np.nan, 2.0]))
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(nk.nanmean(np.zeros(0)))
    h = np.array([1, np.nan, 2], np.float16)
    assert nk.nanmean(h) == 1.5 and nk.nanmean(h).dtype == np.float16


def test_an_initial_out_of_the_accumulator_range_is_a_value_error():
    for initial in (2**63, -2**63 - 1, 2**70):
        with pytest.raises(ValueError, match="is not a value of the accumulator dtype"):
            nk.sum(np.int8([1]), initial=initial)


def test_initial_is_rounded_to_numpys_loop_dtype_first():
    """NumPy casts ``initial`` to its loop's dtype: float16 for a float16 sum (70000 is
    inf there) and bfloat16 for ml_dtypes' (1 + 2**-8 is 1.0), where the kernels'
    float32 accumulator would hold the value and carry it into the result."""
    h = np.full(4, -10000, np.float16)
    for got in (nk.sum(h, initial=70000), nk.nansum(h, initial=70000),
                nk.sum(np.ones(3, np.float32), dtype=np.float16, initial=70000)):
        assert got == np.inf and got.dtype == np.float16
    _same(nk.sum(h.reshape(2, 2), axis=1, initial=70000),
          np.sum(h.reshape(2, 2), axis=1, initial=70000))
    np.testing.assert_array_equal(
        nk.segmented_reduce(h, np.array([0, 2, 4]), "sum", initial=70000), [np.inf] * 2)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    b = np.array([-1, -1], ml_dtypes.bfloat16)
    want = np.sum(b[:1], initial=1.00390625)
    assert want == 0 and nk.sum(b[:1], initial=1.00390625) == want
    np.testing.assert_array_equal(
        nk.segmented_reduce(b, np.array([0, 1, 2]), "sum", initial=1.00390625), [0, 0])
    torch = pytest.importorskip("torch")
    t = torch.tensor([-1.0, -1.0], dtype=torch.bfloat16)
    assert nk.sum(t[:1], initial=1.00390625).item() == 0
    got = nk.segmented_reduce(t, torch.tensor([0, 1, 2]), "sum", initial=1.00390625)
    assert got.dtype == torch.bfloat16 and got.tolist() == [0, 0]

    # a float32 sum keeps what float32 holds, as NumPy's float32 loop does; so does
    # one into a float32 out (NumPy's loop is out's dtype), and a dtype=bfloat16 rounds
    assert nk.sum(np.float32([-1]), initial=1.00390625) == np.float32(0.00390625)
    for x, initial in ((np.float16([1, 2, -0.5, 0.25]), 70000), (b[:1], 1.005859375)):
        got, want = np.zeros((), np.float32), np.zeros((), np.float32)
        nk.sum(x, out=got, initial=initial)
        np.sum(x, out=want, initial=initial)
        assert got == want
    for x in (np.float32([-1]), np.float16([-1])):
        assert nk.sum(x, dtype=ml_dtypes.bfloat16, initial=1.005859375) == \
            np.sum(x, dtype=ml_dtypes.bfloat16, initial=1.005859375)
        by_position = (None, ml_dtypes.bfloat16, None, False, 1.005859375)
        assert nk.sum(x, *by_position) == np.sum(x, *by_position)
        # a bfloat16 initial is no bfloat16 input: dtype= still asks the result's dtype
        initial = ml_dtypes.bfloat16(1.5)
        for got in (nk.sum(x, dtype=ml_dtypes.bfloat16, initial=initial),
                    nk.sum(x, None, ml_dtypes.bfloat16, None, False, initial)):
            want = np.sum(x, dtype=ml_dtypes.bfloat16, initial=initial)
            assert got.dtype == want.dtype == np.dtype(ml_dtypes.bfloat16) and got == want
    # a float accumulator takes any real number, rounded, whatever its Python type
    for initial in (0.1, np.float64(0.1), np.float64(1e300), 16777217):
        for fn, ref in ((nk.sum, np.sum), (nk.max, np.max)):
            with np.errstate(over="ignore"):  # 1e300's cast: NumPy's warning, and ours
                want = ref(np.float32([1, 2]), initial=initial)
                assert fn(np.float32([1, 2]), initial=initial) == want
    # rounded once from the value given (through float32 first, 2**24 + 2**16 would tie)
    big = 2**24 + 2**16 + 1
    for fn in (nk.sum, nk.max):
        assert fn(np.zeros(1, ml_dtypes.bfloat16), initial=big) == np.float32(2**24 + 2**17)


def _messages(f):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        value = f()
    return value, [str(w.message) for w in seen]


@pytest.mark.parametrize("name, x, kwargs", [
    ("sum", np.ones(3, np.float16), {"initial": 1e6}),
    ("nansum", np.ones(3, np.float16), {"initial": -1e6}),
    ("sum", np.ones(3, np.float32), {"initial": 1e300, "axis": 0, "keepdims": True}),
    ("sum", np.ones(3, np.float32), {"initial": 70000.0, "dtype": np.float16}),
    ("prod", np.ones(3, np.float16), {"initial": 1e6}),
    ("max", np.ones(3, np.float16), {"initial": 1e6}),
    ("min", np.ones(3, np.float32), {"initial": -1e300}),
    ("sum", np.full(3, 60000, np.float16), {"initial": 1.0}),  # the data overflows
])
def test_an_initial_that_overflows_its_cast_warns_as_numpy(name, x, kwargs):
    """NumPy casts ``initial`` to its loop's dtype and warns "overflow encountered in
    cast" where a finite value becomes infinite (and no overflow of the reduce, whose
    inf came in), under ``np.geterr()``; the same for device input, on every call."""
    want, told = _messages(lambda: getattr(np, name)(x, **kwargs))
    got, said = _messages(lambda: getattr(nk, name)(x, **kwargs))
    _same(got, want)
    assert said == told and told
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        getattr(nk, name)(x, **kwargs)
    with np.errstate(over="ignore"):
        assert _messages(lambda: getattr(nk, name)(x, **kwargs))[1] == []
    d = cuda.to_device(x)
    for _ in range(3):
        got, said = _messages(lambda: getattr(nk, name)(d, **kwargs))
        _same(np.asarray(got if np.ndim(got) == 0 and not hasattr(got, "copy_to_host")
                         else got.copy_to_host()), want)
        if "cast" in told[0]:
            assert said == told



@pytest.mark.parametrize("strategy", REDUCE[:1] + REDUCE[-1:], ids=lambda s: s.label)
def test_initial_as_numpy(strategy):
    """``initial``: combined before each output's elements, and the result of none."""
    x = RNG.integers(-4, 5, (6, 9)).astype(np.float64)
    for fn, ref, initial in ((nk.sum, np.sum, 5), (nk.max, np.max, 3.5), (nk.min, np.min, -1),
                             (nk.nanprod, np.nanprod, 2)):
        for axis in (None, 1):
            _same(fn(x, axis=axis, initial=initial, strategy=strategy),
                  ref(x, axis=axis, initial=initial))
    _same(nk.max(np.zeros((0, 3)), axis=0, initial=-1), np.max(np.zeros((0, 3)), 0, initial=-1))
    with pytest.raises(ValueError, match="initial=1.5 is not a value"):
        nk.sum(np.arange(3, dtype=np.int8), initial=1.5, dtype=np.int8)
    with pytest.raises(TypeError, match="initial must be a number"):
        nk.sum(x, initial=[1, 2])


_WHERE_ROWS = np.array([[True, False, False], [False, False, False]])


@pytest.mark.parametrize("kwargs", [{"axis": 1, "where": np.array([False] * 3)},
                                    {"where": False}, {"axis": 1, "where": _WHERE_ROWS},
                                    {"axis": 1, "where": _WHERE_ROWS, "keepdims": True},
                                    {"where": False, "dtype": np.float32},
                                    {"where": False, "dtype": np.int64},   # and the cast's
                                    {"axis": 1, "where": _WHERE_ROWS, "dtype": np.int8}])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16])
def test_mean_where_keeping_nothing_warns_numpys_two_warnings(dtype, kwargs):
    """A mean whose where= keeps no element of a slice: "Mean of empty slice", then its
    division's "invalid value encountered in (scalar) divide", as NumPy's, and in an
    integer dtype what NumPy's cast makes of the NaN; nanmean only the first."""
    x = np.array([[1, 2, 4], [3, 3, 3]], dtype)
    integer = np.dtype(kwargs.get("dtype", np.float64)).kind == "i"
    for name in ("mean",) if integer and x.dtype.kind == "f" else ("mean", "nanmean"):
        want, told = _messages(lambda: getattr(np, name)(x, **kwargs))
        got, said = _messages(lambda: getattr(nk, name)(x, **kwargs))
        assert said == told, name
        _same(got, want)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError, match="divide"):
        nk.mean(x, **kwargs)


def test_a_mean_keeping_nothing_words_the_sum_before_the_division():
    x = np.array([[np.inf, -np.inf], [1.0, 2.0]])
    where = np.array([[True, True], [False, False]])
    assert _messages(lambda: nk.mean(x, axis=1, where=where))[1] == \
        _messages(lambda: np.mean(x, axis=1, where=where))[1] == [
            "Mean of empty slice", "invalid value encountered in reduce",
            "invalid value encountered in divide"]


_ROWS = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])


@pytest.mark.parametrize("name, x, kwargs", [
    ("var", _ROWS, {"axis": 1, "ddof": 3}),   # divide by zero (row 0), 0 / 0 (row 1)
    ("std", _ROWS, {"axis": 1, "ddof": 4}),
    ("var", _ROWS, {"ddof": 6}),              # a float64 scalar: "scalar divide"
    ("var", _ROWS.astype(np.float32), {"ddof": 6}),
    ("var", _ROWS, {"ddof": 6, "keepdims": True}),
    ("var", _ROWS[1], {"ddof": 3}),
    ("var", np.arange(6), {"ddof": 7}),
    ("var", np.zeros(0), {}),                 # the mean's 0 / 0 too
    ("std", np.zeros((2, 0)), {"axis": 1}),
    ("var", np.zeros((0, 2, 3)), {"axis": -2, "ddof": 4}),  # no outputs: only the words
    ("nanvar", np.zeros((0, 2, 3)), {"axis": -2, "ddof": 4}),
    ("var", np.array([1.0, np.nan, 2.0]), {"ddof": 3}),     # NaN / 0 raises nothing
    ("var", np.array([1.0, np.inf, 2.0]), {"ddof": 3}),
    ("var", _ROWS, {"axis": 1, "where": _WHERE_ROWS}),
    ("var", _ROWS, {"axis": 1, "ddof": 3, "out": np.zeros(2)}),
    ("var", _ROWS, {"axis": 1, "ddof": 3, "mean": _ROWS.mean(axis=1, keepdims=True)}),
    ("nanstd", _ROWS, {"axis": 1, "ddof": 3}),  # the nan forms: the words alone
    ("var", np.float64(3.0), {"ddof": 1}),
    ("var", np.array(2.0), {"where": False}),   # 0-d: "scalar divide" twice
    ("var", np.array(2.0), {"ddof": 1, "keepdims": True}),
    ("var", np.array([[np.inf, -np.inf, 1.0], [1.0, 2.0, 3.0]]),   # the sum's "reduce"
     {"axis": 1, "where": np.array([[True] * 3, [False] * 3])}),  # before the division's
    ("var", np.array([1e200, -1e200]), {"ddof": 2}),  # its square overflows: inf / 0
    ("std", np.array([3e38, -3e38], np.float32), {"ddof": 2}),
])
def test_variance_without_degrees_of_freedom_warns_as_numpy(name, x, kwargs):
    """NumPy's var and std then divide by zero: the mean's sum by a count of 0 (0 / 0),
    the squared deviations' by max(count - ddof, 0) (divide by zero for a positive sum,
    invalid for a zero one, nothing for NaN or inf), each worded as NumPy words it, in
    its order, the first of them raised under np.errstate(all="raise")."""
    want, told = _messages(lambda: getattr(np, name)(x, **kwargs))
    if "out" in kwargs:
        kwargs = {**kwargs, "out": np.zeros(2)}
    got, said = _messages(lambda: getattr(nk, name)(x, **kwargs))
    assert said == told
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    first = [w for w in told if "encountered" in w]
    if first:
        with np.errstate(all="raise"), warnings.catch_warnings(), pytest.raises(
                FloatingPointError, match=f"^{first[0]}$"):
            warnings.simplefilter("ignore")
            getattr(nk, name)(x, **kwargs)


def test_variance_without_degrees_of_freedom_warns_for_device_input_too():
    """Without where=, NumPy's words follow from the shape: device input gets them (its
    divisions' errors would need the result on the host, which stays on the device)."""
    x = cuda.to_device(_ROWS)
    got, said = _messages(lambda: nk.var(x, axis=1, ddof=3))
    assert said == ["Degrees of freedom <= 0 for slice"]
    np.testing.assert_array_equal(got.copy_to_host(), [np.inf, np.nan])
    assert _messages(lambda: nk.std(x, axis=1, ddof=2))[1] == []


def test_errstate_call_log_and_print_modes_are_numpys():
    """np.errstate's "call", "log" and "print" modes reach numbakern's floating-point
    errors as NumPy's own: the callback gets NumPy's error name and status bit."""
    x = np.array([np.inf, -np.inf, 1e308, 1e308])
    for lib in (np, nk):
        seen = []
        with np.errstate(all="call"):
            old = np.seterrcall(lambda error, status: seen.append((error, status)))
            try:
                lib.sum(x[:2])
                lib.sum(x[2:])
                lib.var(_ROWS, axis=1, ddof=3)
            finally:
                np.seterrcall(old)
        assert seen == [("invalid value", 8), ("overflow", 2), ("divide by zero", 9),
                        ("invalid value", 9)], lib.__name__  # one division raising two

    class Log:
        lines = []

        def write(self, text):
            self.lines.append(text)

    with np.errstate(invalid="log"), warnings.catch_warnings():
        warnings.simplefilter("error")
        old = np.seterrcall(Log())
        try:
            nk.sum(x[:2])
        finally:
            np.seterrcall(old)
    assert Log.lines == ["Warning: invalid value encountered in reduce\n"]
    with np.errstate(invalid="call"), pytest.raises(NameError, match="no function"):
        old = np.seterrcall(None)
        try:
            nk.sum(x[:2])
        finally:
            np.seterrcall(old)


def test_errstate_print_mode_writes_numpys_line(capfd):
    with np.errstate(invalid="print"), warnings.catch_warnings():
        warnings.simplefilter("error")
        nk.sum(np.array([np.inf, -np.inf]))
    assert capfd.readouterr().err == "Warning: invalid value encountered in reduce\n"


@pytest.mark.parametrize("name, x, kwargs", [
    ("sum", np.array([1.0, np.nan]), {"dtype": np.int64}),
    ("sum", np.array([1.0, 3e9]), {"dtype": np.int32}),
    ("sum", np.array([[1.0, np.nan], [1.0, 2.0]]), {"axis": 1, "dtype": np.int64}),
    ("sum", np.array([1.0, np.nan]), {"dtype": np.int64, "where": np.array([True, False])}),
    ("nansum", np.array([1.0, np.inf]), {"dtype": np.int32}),
    ("nansum", np.array([1.0, np.nan]), {"dtype": np.int32}),  # NaN is no element: quiet
    ("prod", np.array([1.0, -np.inf]), {"dtype": np.uint8}),
    ("nanprod", np.array([2.0, np.nan]), {"dtype": np.int16}),
    ("mean", np.array([1.0, np.nan]), {"dtype": np.int64}),
    ("sum", np.array([1.5, -2.5]), {"dtype": np.int8}),        # in range: quiet
    ("sum", np.float64(np.nan), {"dtype": np.int32}),          # 0-d: cast before reducing
    ("mean", np.zeros(0), {"dtype": np.int64}),
    ("mean", np.array([60000, 60000], np.float16), {"dtype": np.float16}),
])
def test_a_float_reduced_in_another_dtype_warns_numpys_words(name, x, kwargs):
    """NumPy's cast of each element into an integer dtype= is "invalid" where it has no
    value there (masked out or not); a float16 mean in float16 overflows in its reduce,
    not in a cast."""
    want, told = _messages(lambda: getattr(np, name)(x, **kwargs))
    got, said = _messages(lambda: getattr(nk, name)(x, **kwargs))
    assert said == told
    if not _every_element_fits(x, kwargs["dtype"], name.startswith("nan")) or \
            "encountered in reduce" in told or "encountered in cast" in told:
        # a float with no value in the integer dtype casts as the hardware does (x86's
        # INT_MIN for NumPy; a GPU saturates): only its dtype and shape are NumPy's
        assert np.asarray(got).dtype == np.asarray(want).dtype
        assert np.shape(got) == np.shape(want)
    else:
        _same(got, want)


def _every_element_fits(x, dtype, skip_nan: bool) -> bool:
    """Whether each element of float ``x`` (but NaN, where skipped) has a value in
    ``dtype``: an integer dtype's range holds it (a float dtype holds them all)."""
    dtype = np.dtype(dtype)
    values = np.asarray(x, np.float64).ravel()
    values = values[~np.isnan(values)] if skip_nan else values
    if dtype.kind not in "iu" or values.size == 0:
        return True
    info = np.iinfo(dtype)
    return bool(np.isfinite(values).all() and values.min() >= info.min
                and values.max() <= info.max)


def test_nanmax_of_a_list_or_scalar_says_axis_as_numpy():
    """NumPy's nanmax words an all-NaN slice of an ndarray "slice", of what it converts
    first (a list, a NumPy scalar) "axis"."""
    class Subclass(np.ndarray):
        pass

    for x in ([np.nan, np.nan], np.float64(np.nan), [[np.nan, 1.0], [np.nan, np.nan]],
              np.array([np.nan]), np.full(3, np.nan).view(Subclass)):
        for name in ("nanmax", "nanmin"):
            want, told = _messages(lambda: getattr(np, name)(x, axis=-1))
            got, said = _messages(lambda: getattr(nk, name)(x, axis=-1))
            assert said == told
            _same(got, want)
