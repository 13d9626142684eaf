"""prod, nanprod, cumsum, nancumsum, cumprod, nancumprod (and associative_scan of
their ops) of host input warn (or raise, under ``np.errstate``) as NumPy does where
its arithmetic overflows or meets ``inf - inf`` / ``inf * 0``: results' special values
and the warnings' words compared with NumPy's own on the same data, under the
simulator (tiny sizes).
"""

import warnings

import numpy as np
import pytest

import numbakern as nk

INF, NAN = np.inf, np.nan
ROWS = [
    [1e200, 1e200],              # overflow
    [INF, 0.0],                  # inf * 0
    [1e200, 1e200, 0.0],         # overflow, then the overflow meets a zero
    [INF, -INF],                 # inf - inf
    [1e308, 1e308, -INF],        # a running sum's overflow, then inf - inf
    [NAN, INF, -INF],            # a NaN first: no word
    [NAN, 1e200, 1e200, 0.0],
    [0.0, INF, 2.0],
    [1.0, 2.0, 3.0],
]
FUNCTIONS = ["prod", "nanprod", "cumsum", "nancumsum", "cumprod", "nancumprod"]
# A product's tree may overflow (or not) in another order than NumPy's loop: where an
# overflow meets a zero or an infinity, the value and the words are order's (prod's
# docstring). cumprod settles NumPy's sequential values, and so its words; these rows'
# running sums overflow at the same elements in any order.
ORDERED = {2, 4, 6}


def _words(fn, *args, **kw):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = fn(*args, **kw)
    return result, [str(w.message) for w in seen if w.category is RuntimeWarning]


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("row", ROWS, ids=range(len(ROWS)))
def test_the_words_of_numpys_loop(name, row):
    if name.endswith("prod") and not name.startswith(("cum", "nancum")) and \
            ROWS.index(row) in ORDERED:
        pytest.skip("an overflow meeting a zero or an infinity: the tree's order")
    x = np.array(row)
    got, got_words = _words(getattr(nk, name), x)
    want, want_words = _words(getattr(np, name), x)
    np.testing.assert_array_equal(got, want)
    assert got_words == want_words


@pytest.mark.parametrize("name", FUNCTIONS)
def test_rows_of_an_axis_and_errstate_raise(name):
    x = np.array([[1.0, 2.0, 3.0], [1e308, 1e308, 1.0]])
    for axis in (0, 1):
        got, got_words = _words(getattr(nk, name), x, axis=axis)
        want, want_words = _words(getattr(np, name), x, axis=axis)
        np.testing.assert_array_equal(got, want)
        assert got_words == want_words, axis
    with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow"):
        getattr(nk, name)(x, axis=1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(nk, name)(x, axis=1)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_exclusive_and_reverse_scans_warn_as_numpys_loop_over_what_they_hold(exclusive,
                                                                           reverse):
    """NumPy has neither: the words are those of its loop over the elements each
    running value holds (reversed, or all but the last)."""
    for row in ([1e200, 1e200, 0.0], [0.0, 1e200, 1e200], [INF, -INF, 1.0]):
        x = np.array(row)
        for name in ("cumsum", "cumprod"):
            held = x[::-1] if reverse else x
            held = held[:-1] if exclusive else held
            _, got_words = _words(getattr(nk, name), x, exclusive=exclusive, reverse=reverse)
            _, want_words = _words(getattr(np, name), held)
            assert got_words == want_words, (name, row)


@pytest.mark.parametrize("x, dtype", [
    (np.array([1e300, 1e300]), np.float32), (np.array([70000, 70000]), np.float16),
    (np.array([2**40] * 7), np.float32), (np.array([300, 300], np.float16), None)])
def test_a_cast_into_a_narrower_dtype_is_numpys(x, dtype):
    """A scan's ``dtype=`` casts first ("in cast"); a product's casts in its loop ("in
    reduce"), integers too; a float16 product's float32 accumulator says it once."""
    for fn in ("cumsum", "cumprod", "prod", "nanprod"):
        got, got_words = _words(getattr(nk, fn), x, dtype=dtype)
        want, want_words = _words(getattr(np, fn), x, dtype=dtype)
        np.testing.assert_array_equal(got, want)
        assert got_words == want_words, fn


def test_a_scans_float_dtype_casts_first_into_a_wider_out_too():
    """NumPy's loop runs in the ``dtype=`` and casts the elements to it: with a wider
    ``out`` the overflow is still the cast's, not the running value's."""
    x = np.array([1e5, 1.0])
    for fn in ("cumsum", "cumprod", "nancumsum", "nancumprod"):
        out = np.zeros(2, np.float32)
        got, got_words = _words(getattr(nk, fn), x, dtype=np.float16, out=out)
        want, want_words = _words(getattr(np, fn), x, dtype=np.float16,
                                  out=np.zeros(2, np.float32))
        assert got is out
        np.testing.assert_array_equal(got, want)
        assert got_words == want_words == ["overflow encountered in cast"], fn


OTHER_OUT = [  # (x, dtype=, out's dtype): NumPy's words differ in each
    ([1e5, 1e5, 1e5], np.float32, np.float16),     # the cast into out overflows
    ([3e38, 3e38], np.float64, np.float32),         # a running value the cast overflows
    ([1e5, 1e39], np.float32, np.float16),          # an element's cast, then out's
    ([1e39, 1.0], np.float32, np.float16),          # an element's cast alone
    ([INF, -INF, 1e5], np.float32, np.float16),     # inf - inf: the cast cleared it
    ([1000.0, 1e36], np.float32, np.float16),       # a product overflows the loop's float32
    ([1e5, NAN], np.float32, np.float16),
    ([300.0, 300.0, 300.0], np.float32, np.float16),
    ([2.0, 1e30, 1e30], np.float64, np.float32),
    ([65519.0, 5.1942e33], np.float32, np.float16),    # float32's own product overflows
    ([65500.0, 5.194991854000352e33], np.float32, np.float16),  # finite, then the cast
    ([3e38, 3e38, 1.0], np.float32, np.float64),       # a wider out: the loop's words lost
    ([INF, -INF, 1.0], np.float32, np.float64),
    ([6e4, 6e4], np.float16, np.float32),
    ([3e38, 3e38, 1.0], None, np.float64),             # out's loop, float64: no overflow
    ([1e300, 1e300], None, np.float32)]                # float64's loop, then the cast


@pytest.mark.parametrize("fn", ["cumsum", "cumprod", "nancumsum", "nancumprod"])
@pytest.mark.parametrize("row, dtype, out_dtype", OTHER_OUT, ids=range(len(OTHER_OUT)))
def test_a_scan_into_an_out_of_another_dtype_than_its_loop_warns_as_numpys_cast(
        fn, row, dtype, out_dtype):
    """NumPy casts its running values into an ``out`` of another dtype than its loop's
    (``dtype=``, else the result's promoted with ``out``'s), which clears its loop's
    own flags: that cast's overflow warns "in cast" and "in accumulate", an ``inf -
    inf`` or an overflow of the loop's own dtype nothing."""
    x = np.array([row, row[::-1]], np.float32 if dtype is None and out_dtype == np.float64
                 else np.float64)
    for axis in (None, 1):
        out = np.zeros(x.size if axis is None else x.shape, out_dtype)
        got, got_words = _words(getattr(nk, fn), x, axis, dtype, out)
        want, want_words = _words(getattr(np, fn), x, axis, dtype, np.zeros_like(out))
        assert got is out
        np.testing.assert_allclose(got, want, rtol=1e-14)  # a float64 loop's tree: ulps
        assert got_words == want_words, axis


def test_the_narrower_outs_cast_raises_first_under_errstate():
    x = np.array([1e5, 2.0])
    for fn in ("cumsum", "cumprod"):
        out = np.zeros(2, np.float16)
        with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="in cast"):
            getattr(nk, fn)(x, dtype=np.float32, out=out)


def test_an_infinite_initial_and_masked_factors_say_nothing_numpy_does_not():
    x = np.array([1e200, 1e200, 3.0])
    for kw in ({"initial": INF}, {"where": np.array([True, False, True])},
               {"where": np.array([True, True, False])}):
        got, got_words = _words(nk.prod, x, **kw)
        want, want_words = _words(np.prod, x, **kw)
        np.testing.assert_array_equal(got, want)
        assert got_words == want_words, kw


@pytest.mark.parametrize("op, numpys", [("sum", "cumsum"), ("prod", "cumprod"),
                                        ("nansum", "nancumsum"), ("nanprod", "nancumprod")])
@pytest.mark.parametrize("row", ROWS, ids=range(len(ROWS)))
def test_associative_scan_of_numpys_ops_warns_as_their_cumulative_function(op, numpys, row):
    x = np.array(row)
    got, got_words = _words(nk.associative_scan, x, op)
    want, want_words = _words(getattr(np, numpys), x)
    np.testing.assert_array_equal(got, want)
    assert got_words == want_words
