"""Segmented scans (numbakern/api/segment_scans.py) against per-segment NumPy.

The reference scans each ``x[offsets[i]:offsets[i + 1]]`` with ``np.cumsum`` (or the
op's ``accumulate``) and concatenates, in float64 for float sums (a tree's rounding,
stated below) and exactly otherwise. Segment lengths sweep warp, block and tile
boundaries; every scan strategy the registry lists, inclusive and exclusive, forward
and reverse, a non-commutative op, host and device offsets, bad offsets.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

import numbakern as nk
from numbakern.strategies import every

LENGTHS = [0, 1, 31, 32, 33, 0, 127, 128, 129, 2, 0]
SHORT = [0, 1, 31, 33, 0, 129, 2]  # warp and block edges, in fewer tiles
MODES = [(False, False), (True, False), (False, True), (True, True)]  # exclusive, reverse
STRATEGIES = {s.label: s for s in every("scan", threads=64)}
UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
          "bitwise_xor": np.bitwise_xor}
RNG = np.random.default_rng(19)


def offsets_of(lengths, start=0):
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(np.int64)


def reference(x, offsets, name="sum", exclusive=False, reverse=False, dtype=None):
    """Each segment scanned by NumPy, concatenated: ``np.cumsum``'s dtype rule for sums
    and products, float64 for float sums; an exclusive scan starts at the identity."""
    ufunc = UFUNCS[name]
    if name in ("sum", "prod"):
        dtype = (np.cumsum if name == "sum" else np.cumprod)(x[:0], dtype=dtype).dtype
    dtype = np.dtype(dtype or x.dtype)
    wide = np.float64 if dtype.kind == "f" and name == "sum" else dtype
    first = {"sum": 0, "prod": 1, "bitwise_xor": 0}.get(name)
    if first is None:
        first = (-np.inf if name == "max" else np.inf) if dtype.kind == "f" else \
            (np.iinfo(dtype).min if name == "max" else np.iinfo(dtype).max)
    parts = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        seg = x[a:b].astype(wide)
        seg = seg[::-1] if reverse else seg
        with np.errstate(invalid="ignore"):
            scanned = ufunc.accumulate(seg, dtype=wide) if seg.size else seg
        if exclusive and seg.size:
            scanned = np.concatenate([np.array([first], wide), scanned[:-1]])
        parts.append(scanned[::-1] if reverse else scanned)
    return np.concatenate(parts) if parts else np.zeros(0, wide), dtype


def check(got, x, offsets, name="sum", exclusive=False, reverse=False, dtype=None):
    """Integers, max and min exactly (bits included: -0.0 and NaN where NumPy puts
    them); a float sum within ``n * eps`` of the running sum of magnitudes."""
    expected, want = reference(x, offsets, name, exclusive, reverse, dtype)
    assert got.dtype == want and got.shape == expected.shape, (got.dtype, want, got.shape)
    if want.kind != "f" or name != "sum":
        np.testing.assert_array_equal(got, expected.astype(want))
        assert (np.signbit(got) == np.signbit(expected)).all()
        return
    with np.errstate(invalid="ignore"):
        magnitude, _ = reference(np.abs(x), offsets, "sum", exclusive, reverse)
    n = max(int(np.diff(offsets).max(initial=1)), 1)
    bound = n * np.finfo(want).eps * magnitude + (np.finfo(want).tiny if want != np.float16
                                                  else 1e-3)
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite], expected[~finite])  # inf, NaN as NumPy's
    with np.errstate(invalid="ignore"):
        error = np.abs(got - expected)
    assert (error[finite] <= bound[finite]).all(), (got, expected, bound)


# Two modes a strategy, not four: every block strategy meets every mode (under one grid
# or the other), and so does every grid.
STRATEGY_MODES = [(label, (MODES[k % 4], MODES[(k + 2) % 4]))
                  for k, label in enumerate(STRATEGIES)]


@pytest.mark.parametrize("label,modes", STRATEGY_MODES, ids=[m[0] for m in STRATEGY_MODES])
def test_every_strategy_inclusive_exclusive_forward_reverse(label, modes):
    x = RNG.standard_normal(sum(LENGTHS)).astype(np.float32)
    offsets = offsets_of(LENGTHS)
    for exclusive, reverse in modes:
        got = nk.segmented_scan(x, offsets, exclusive=exclusive, reverse=reverse,
                                strategy=STRATEGIES[label])
        check(got, x, offsets, "sum", exclusive, reverse)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint64, np.bool_, np.float16,
                                   np.float64])
def test_dtypes_follow_cumsum(dtype):
    """Inclusive on every dtype; exclusive (the dtype's zero first) on the integers
    and dtype= on bool and the floats, the two kinds each on narrow and wide ones."""
    x = (RNG.integers(0, 3, sum(SHORT)) > 0 if dtype == np.bool_
         else RNG.integers(0, 100, sum(SHORT)).astype(dtype))
    offsets = offsets_of(SHORT)
    check(nk.segmented_scan(x, offsets), x, offsets)
    if np.dtype(dtype).kind in "iu":
        check(nk.segmented_scan(x, offsets, exclusive=True), x, offsets, exclusive=True)
    else:
        check(nk.segmented_scan(x, offsets, dtype=np.float64), x, offsets, dtype=np.float64)


@pytest.mark.parametrize("source", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_float16_scan_of_wider_elements_rounds_each_element_first(source, reverse):
    """As NumPy casts them (``np.cumsum(x, dtype=float16)``): 70000 is inf before it is
    added, so a segment of 70000 and -70000 runs into NaN (its product into -inf), and
    0.1 is float16's 0.1; sums and products within float16's rounding of those of the
    rounded elements."""
    x = np.array([7e4, -7e4, 0.1, 0.2, 0.3, -7e4, 7e4, 1.0, 3e4, 3e4], dtype=np.float64)
    x = x.astype(source) if source != np.int64 else np.round(x).astype(np.int64)
    offsets = np.array([0, 2, 5, 7, 10])
    keys = np.repeat(np.arange(4), np.diff(offsets))
    with np.errstate(over="ignore"):
        rounded = x.astype(np.float16).astype(np.float64)
    for name, ufunc in (("sum", np.add), ("prod", np.multiply)):
        want = []
        for a, b in zip(offsets[:-1], offsets[1:]):
            seg = rounded[a:b][::-1] if reverse else rounded[a:b]
            with np.errstate(invalid="ignore", over="ignore"):
                scanned = ufunc.accumulate(seg).astype(np.float16)
            want.append(scanned[::-1] if reverse else scanned)
        want = np.concatenate(want)
        got = nk.segmented_scan(x, offsets, name, dtype=np.float16, reverse=reverse)
        by_key = nk.scan_by_key(keys, x, name, dtype=np.float16, reverse=reverse)
        for result in (got, by_key):
            assert result.dtype == np.float16
            # inf and NaN exactly where the rounded elements put them
            np.testing.assert_allclose(result, want, rtol=1e-3, atol=0)


@pytest.mark.parametrize("name", ["prod", "max", "min", "bitwise_xor"])
def test_other_ops(name):
    x = RNG.integers(-3, 4, sum(SHORT)).astype(np.int64 if name != "max" else np.float32)
    if name == "max":
        x[[5, 40, 150]] = np.nan
        x[[7, 8]] = -0.0
    offsets = offsets_of(SHORT)
    for exclusive in (False, True):
        check(nk.segmented_scan(x, offsets, name, exclusive=exclusive), x, offsets, name,
              exclusive)


def test_float_sums_keep_minus_zero_and_nan_and_inf():
    x = np.array([-0.0, -0.0, 1.0, np.inf, 2.0, np.nan, 3.0, -np.inf, np.inf])
    offsets = np.array([0, 2, 5, 7, 9])
    check(nk.segmented_scan(x, offsets), x, offsets)
    check(nk.segmented_scan(x, offsets, exclusive=True), x, offsets, exclusive=True)
    assert np.signbit(nk.segmented_scan(x, offsets)[:2]).all()  # not +0.0 + -0.0


def test_a_non_commutative_op_keeps_each_segments_order():
    @nk.op(identity=0, commutative=False)
    def last_nonzero(a, b):
        return b if b != 0 else a

    x = RNG.integers(0, 3, sum(LENGTHS)).astype(np.int64)
    offsets = offsets_of(LENGTHS)
    expected = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        fill = 0
        for v in x[a:b]:
            fill = v if v else fill
            expected.append(fill)
    for label in ("decoupled_lookback/blelloch", "reduce_then_scan/hillis_steele"):
        np.testing.assert_array_equal(
            nk.segmented_scan(x, offsets, last_nonzero, strategy=STRATEGIES[label]), expected)


def test_one_long_segment_and_many_single_ones():
    x = RNG.integers(-9, 9, 700).astype(np.int32)
    check(nk.segmented_scan(x, np.array([0, 700])), x, np.array([0, 700]))
    ones = np.arange(150)
    offsets = np.arange(151)
    np.testing.assert_array_equal(nk.segmented_scan(ones, offsets), ones)
    np.testing.assert_array_equal(nk.segmented_scan(ones, offsets, exclusive=True), 0 * ones)


def test_the_result_covers_the_span_of_the_offsets():
    x = np.arange(10)
    np.testing.assert_array_equal(nk.segmented_scan(x, np.array([2, 5, 7])), [2, 5, 9, 5, 11])
    assert nk.segmented_scan(x, np.array([4])).shape == (0,)
    assert nk.segmented_scan(x, np.array([4, 4, 4])).shape == (0,)
    assert nk.segmented_scan(np.zeros(0, np.int32), [0, 0]).dtype == np.int64


def test_device_offsets_strided_input_and_device_results():
    host = RNG.standard_normal(2 * sum(SHORT) + 20).astype(np.float32)
    device = cuda.to_device(host)[::2]
    offsets = offsets_of(SHORT, 3)
    for given_offsets in (offsets, cuda.to_device(offsets.astype(np.int32))):
        got = nk.segmented_scan(device, given_offsets, reverse=True)
        check(got.copy_to_host(), host[::2], offsets, reverse=True)


def test_torch_tensors_in_tensors_out():
    x = torch.arange(10, dtype=torch.int32)
    got = nk.segmented_scan(x, torch.tensor([0, 4, 10]))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int64
    assert got.tolist() == [0, 1, 3, 6, 4, 9, 15, 22, 30, 39]


@pytest.mark.parametrize("offsets, match", [
    ([0, 3, 2, 10], "segment 1 runs from 3 to 2"),
    ([0, 9, 4, 5], "segment 1 runs from 9 to 4"),  # not 0, which passes the span's end
    ([0, 3, 8, 8, 2], "segment 3 runs from 8 to 2"),
    ([0, 8, 7], "segment 1 runs from 8 to 7"),
    ([0, 12, 7, 9], "segment 0 runs from 0 to 12"),  # past len(x): the first bad one
    ([0, 4, 11], r"lie in \[0, 10\].*got 0 .. 11"),
    ([-1, 4, 5], r"lie in \[0, 10\].*got -1 .. 5"),
    (np.array([0, 2**64 - 1], np.uint64), r"got 0 .. 18446744073709551615"),  # not -1
])
def test_bad_device_offsets_are_caught(offsets, match):
    device = cuda.to_device(np.asarray(offsets) if isinstance(offsets, np.ndarray)
                            else np.array(offsets, dtype=np.int64))
    with pytest.raises(ValueError, match=rf"offsets must not decrease.*{match}"):
        nk.segmented_scan(np.arange(10.0), device)
    if "segment" in match:  # the segment segmented_reduce and segmented_sort name too
        for call in (nk.segmented_reduce, nk.segmented_sort):
            with pytest.raises(ValueError, match=match):
                call(np.arange(10.0), device)


def test_bad_arguments():
    with pytest.raises(ValueError, match="x must be 1-D"):
        nk.segmented_scan(np.zeros((2, 3)), np.array([0, 1]))
    for x in (None, "abc"):
        with pytest.raises(TypeError, match=f"x must be a 1-D array, got {type(x).__name__}"):
            nk.segmented_scan(x, np.array([0, 1]))
        with pytest.raises(TypeError, match=f"x must be a 1-D array, got {type(x).__name__}"):
            nk.segmented_reduce(x, np.array([0, 1]))
    with pytest.raises(TypeError, match="one-field ops"):
        nk.segmented_scan(np.zeros(3), np.array([0, 3]), nk.ops.arg_op("max"))
    with pytest.raises(TypeError, match="segmented_scan is not defined for x of dtype float64"):
        nk.segmented_scan(np.zeros(3), np.array([0, 3]), "bitwise_xor")
    with pytest.raises(TypeError, match="exclusive"):
        nk.segmented_scan(np.zeros(3), np.array([0, 3]), exclusive="yes")
    with pytest.raises(ValueError, match="op must be"):
        nk.segmented_scan(np.zeros(3), np.array([0, 3]), "median")
    with pytest.raises(ValueError):
        nk.segmented_scan(np.zeros(3), np.array([0, 3]), strategy="nope")


@settings(max_examples=6, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 70), min_size=1, max_size=8), st.integers(0, 3),
       st.booleans(), st.booleans())
def test_random_segmentations_match_numpy(lengths, start, exclusive, reverse):
    offsets = offsets_of(lengths, start)
    x = RNG.integers(-1000, 1000, offsets[-1] + 2).astype(np.int32)
    check(nk.segmented_scan(x, offsets, exclusive=exclusive, reverse=reverse), x, offsets,
          exclusive=exclusive, reverse=reverse)


# --- scan by key -------------------------------------------------------------------------


def runs_of(keys):
    """Offsets of the runs of equal consecutive keys (``!=``: NaN never equal)."""
    with np.errstate(invalid="ignore"):
        changes = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    return np.concatenate([[0], changes, [len(keys)]]).astype(np.int64)


@pytest.mark.parametrize("label", ["decoupled_lookback/warp_shuffle",
                                   "reduce_then_scan/blelloch"])
def test_scan_by_key_is_a_segmented_scan_of_the_runs(label):
    keys = np.repeat(RNG.integers(0, 3, 20), RNG.choice([1, 2, 31, 33, 0], 20))
    x = RNG.integers(-50, 50, keys.size).astype(np.int16)
    for exclusive, reverse in [(False, False), (True, True)]:
        got = nk.scan_by_key(keys, x, exclusive=exclusive, reverse=reverse,
                             strategy=STRATEGIES[label])
        check(got, x, runs_of(keys), exclusive=exclusive, reverse=reverse)


def test_scan_by_key_compares_keys_with_not_equal():
    keys = np.array([0.0, -0.0, np.nan, np.nan, 1.0, 1.0, 0.0], np.float16)
    x = np.arange(1, 8)
    np.testing.assert_array_equal(nk.scan_by_key(keys, x), [1, 3, 3, 4, 5, 11, 7])
    np.testing.assert_array_equal(nk.scan_by_key(keys.astype(np.float64), x, "max",
                                                 reverse=True), [2, 2, 3, 4, 6, 6, 7])
    got = nk.scan_by_key(torch.tensor([True, True, False]), torch.tensor([1.5, 2.0, 3.0]))
    assert isinstance(got, torch.Tensor) and got.tolist() == [1.5, 3.5, 3.0]
    assert nk.scan_by_key(np.zeros(0), np.zeros(0, np.int8)).dtype == np.int64


def test_scan_by_key_answers_in_the_keys_kind():
    """The result's type is the first argument's (keys), whatever x's kind."""
    keys, x = np.array([1, 1, 2, 2, 2]), np.arange(5.0)
    host = nk.scan_by_key(keys, cuda.to_device(x))
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, [0, 1, 2, 5, 9])
    device = nk.scan_by_key(cuda.to_device(keys), x)
    assert not isinstance(device, np.ndarray)
    np.testing.assert_array_equal(device.copy_to_host(), [0, 1, 2, 5, 9])


def test_scan_by_key_bad_arguments():
    with pytest.raises(TypeError, match="keys must have a bool, integer or float dtype of at "
                       "most 8 bytes, got object"):
        nk.scan_by_key(None, np.zeros(3))
    with pytest.raises(ValueError, match="keys must be 1-D of x's length 3"):
        nk.scan_by_key(np.zeros(4), np.zeros(3))
    with pytest.raises(TypeError, match="keys must have a bool, integer or float"):
        nk.scan_by_key(np.zeros(3, complex), np.zeros(3))
    with pytest.raises(TypeError, match="one-field ops"):
        nk.scan_by_key(np.zeros(3), np.zeros(3), nk.ops.arg_op("max"))


def test_device_calls_replay_and_still_report_bad_offsets():
    """Device values and offsets: the marking and the scan each replay their recorded
    launches on a repeated signature (``runtime/replay.py``), on new data and new
    offsets of the same span; the one read between them still checks every offset."""
    from numbakern.runtime import replay

    offsets = offsets_of([5, 0, 70, 2, 33])
    before = replay.counts["replayed"]
    for reverse in (False, True):
        for _ in range(3):
            x = RNG.integers(-50, 50, offsets[-1]).astype(np.int32)
            inner = np.sort(RNG.integers(0, offsets[-1] + 1, offsets.size - 2))
            moved = np.concatenate([[0], inner, [offsets[-1]]]).astype(np.int64)
            got = nk.segmented_scan(cuda.to_device(x), cuda.to_device(moved), reverse=reverse,
                                    exclusive=True)
            check(got.copy_to_host(), x, moved, exclusive=True, reverse=reverse)
    assert replay.counts["replayed"] - before == 8  # both halves, calls 2 and 3
    falling = cuda.to_device(np.array([0, 5, 4, 75, 77, 110]))  # the same signature
    with pytest.raises(ValueError, match="segment 1 runs from 5 to 4"):
        nk.segmented_scan(cuda.to_device(x), falling, exclusive=True)
    short = cuda.to_device(np.array([2, 5, 5, 75, 77, 100]))  # another span: rescanned
    got = nk.segmented_scan(cuda.to_device(x), short, exclusive=True)
    check(got.copy_to_host(), x, short.copy_to_host(), exclusive=True)


def test_device_scans_by_key_replay():
    from numbakern.runtime import replay

    before = replay.counts["replayed"]
    for _ in range(3):
        keys = RNG.integers(0, 3, 150).astype(np.int16)
        x = RNG.integers(-50, 50, 150).astype(np.int64)
        got = nk.scan_by_key(cuda.to_device(keys), cuda.to_device(x), reverse=True)
        offsets = np.concatenate([[0], np.flatnonzero(np.diff(keys)) + 1, [keys.size]])
        check(got.copy_to_host(), x, offsets, reverse=True)
    assert replay.counts["replayed"] - before == 2


def test_a_users_map_counts_the_index_from_offsets_0():
    """``Op.map``'s index in a segmented scan is the element's place in the result:
    counted from ``offsets[0]`` (its docstring says so), the same on every strategy."""
    @nk.op(identity=-1.0, commutative=False, map=lambda v, i: float(i))
    def last_index(a, b):
        return b if b >= 0 else a

    for strategy in every("scan", threads=32):
        got = nk.segmented_scan(np.zeros(6), np.array([2, 4, 6]), last_index,
                                strategy=strategy)
        np.testing.assert_array_equal(got, [0.0, 1.0, 2.0, 3.0])
