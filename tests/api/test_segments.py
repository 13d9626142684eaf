"""Segmented reductions (numbakern/api/segments.py) against per-segment NumPy.

The reference reduces each ``x[offsets[i]:offsets[i + 1]]`` with NumPy itself (not
``np.add.reduceat``, whose empty segments take one element), in float64 for floats
(stated tolerances) and exactly for integers. Segment lengths sweep warp and block
boundaries; every grid strategy the registry lists, both group sizes, a
non-commutative op, device offsets, strided input and bad offsets.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

import numbakern as nk
from numbakern.strategies import every

LENGTHS = [0, 1, 31, 32, 33, 0, 127, 128, 129, 2, 0]
STRATEGIES = {s.label: s for s in every("reduce", threads=64)}
NUMPY = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
RNG = np.random.default_rng(11)


def offsets_of(lengths, start=0):
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(np.int64)


def reference(x, offsets, name, initial=None):
    fn = NUMPY[name]
    wide = x.astype(np.float64) if x.dtype.kind == "f" else x
    out = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        seg = wide[a:b]
        if initial is not None:
            seg = np.concatenate([[initial], seg]).astype(seg.dtype)
        out.append(fn(seg) if seg.size else {"sum": 0, "prod": 1}[name])
    return np.array(out)


def check(got, x, offsets, name, initial=None):
    """Integers exactly; a float sum within a tree's rounding of its float64 value:
    ``n * eps`` of the segment's sum of magnitudes (a segment summing to about zero
    has no relative error to speak of)."""
    expected = reference(x, offsets, name, initial)
    want = np.asarray(NUMPY[name](x[:1] if x.size else np.zeros(1, x.dtype))).dtype
    assert got.dtype == want and got.shape == expected.shape
    if x.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
        return
    if name in ("max", "min"):
        np.testing.assert_array_equal(got, expected.astype(x.dtype))
        return
    if name == "prod":  # each multiplication rounds once
        rtol = 2 * np.diff(offsets).max(initial=1) * np.finfo(x.dtype).eps
        np.testing.assert_allclose(got, expected, rtol=rtol)
        return
    magnitude = reference(np.abs(x), offsets, "sum")
    lengths = np.maximum(np.diff(offsets), 1)
    bound = lengths * np.finfo(x.dtype).eps * magnitude
    assert (np.abs(got - expected) <= bound).all(), (got, expected, bound)


@pytest.mark.parametrize("label", list(STRATEGIES))
@pytest.mark.parametrize("name", ["sum", "max"])
def test_every_strategy_over_boundary_lengths(label, name):
    strategy = STRATEGIES[label]
    x = RNG.standard_normal(sum(LENGTHS)).astype(np.float32)
    offsets = offsets_of(LENGTHS)
    initial = None if name == "sum" else -np.inf
    got = nk.segmented_reduce(x, offsets, name, strategy=strategy, initial=initial)
    check(got, x, offsets, name, initial)


@pytest.mark.parametrize("lanes", [None, 32, 64])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64, np.bool_])
def test_dtypes_and_group_sizes(dtype, lanes):
    x = (RNG.integers(0, 5, sum(LENGTHS)) > 1 if dtype == np.bool_
         else RNG.integers(0, 100, sum(LENGTHS)).astype(dtype))
    offsets = offsets_of(LENGTHS)
    strategy = nk.TwoPass(nk.WarpShuffle(threads=64))
    for name in ("sum", "prod", "min"):
        initial = None if name != "min" else (True if dtype == np.bool_ else 200)
        got = nk.segmented_reduce(x, offsets, name, strategy=strategy, lanes=lanes,
                                  initial=initial)
        check(got, x, offsets, name, initial)


def test_argmax_and_argmin_count_from_each_segment_start():
    x = np.array([3.0, 1, 4, 1, 5, 9, 2, 6, 5, 3, np.nan, 5, -2, -2])
    offsets = np.array([0, 3, 8, 12, 14])
    np.testing.assert_array_equal(nk.segmented_argmax(x, offsets), [2, 2, 2, 0])
    np.testing.assert_array_equal(nk.segmented_argmin(x, offsets), [1, 0, 2, 0])
    with pytest.raises(ValueError, match="argmax of an empty segment.*segment 1"):
        nk.segmented_argmax(x, np.array([0, 3, 3, 14]))


def test_a_non_commutative_op_keeps_element_order():
    @nk.op(identity=0, commutative=False)
    def last_nonzero(a, b):
        return b if b != 0 else a

    x = RNG.integers(0, 3, sum(LENGTHS)).astype(np.int64)
    offsets = offsets_of(LENGTHS)
    expected = [next((v for v in x[a:b][::-1] if v), 0) for a, b in zip(offsets, offsets[1:])]
    for lanes in (32, 64):
        got = nk.segmented_reduce(x, offsets, last_nonzero, lanes=lanes,
                                  strategy=nk.TwoPass(nk.WarpShuffle(threads=64)))
        np.testing.assert_array_equal(got, expected)


def test_device_offsets_strided_input_and_device_results():
    host = RNG.standard_normal(2 * sum(LENGTHS)).astype(np.float32)
    device = cuda.to_device(host)[::2]
    for offsets in (offsets_of(LENGTHS), cuda.to_device(offsets_of(LENGTHS).astype(np.int32))):
        got = nk.segmented_reduce(device, offsets)
        check(got.copy_to_host(), host[::2], offsets_of(LENGTHS), "sum")


def test_one_long_segment_and_many_single_ones():
    x = RNG.standard_normal(3000)
    got = nk.segmented_reduce(x, np.array([0, 3000]))
    np.testing.assert_allclose(got, [x.sum()], rtol=1e-12)
    ones = np.arange(300, dtype=np.int64)
    np.testing.assert_array_equal(nk.segmented_reduce(ones, np.arange(301)), ones)


def test_offsets_may_cover_part_of_x_and_nothing():
    x = np.arange(10)
    np.testing.assert_array_equal(nk.segmented_reduce(x, np.array([2, 5, 7])), [9, 11])
    assert nk.segmented_reduce(x, np.array([4])).shape == (0,)
    np.testing.assert_array_equal(nk.segmented_reduce(np.zeros(0, np.int32), [0, 0, 0]),
                                  [0, 0])


@pytest.mark.parametrize("offsets, match", [
    ([0, 3, 2, 10], r"offsets must not decrease, but offsets\[2\] = 2 < offsets\[1\] = 3"),
    ([0, 11], r"offsets must lie in \[0, 10\]"),
    ([-1, 4], r"offsets must lie in \[0, 10\]"),
    ([[0, 4]], "offsets must be 1-D"),
    ([], "offsets must be 1-D with at least one entry"),
    ([0.0, 4.0], "offsets must hold integers"),
])
@pytest.mark.parametrize("fn", [nk.segmented_reduce, nk.segmented_scan])
def test_bad_offsets_are_refused_by_name(fn, offsets, match):
    """Host offsets are checked before any launch, the same way for every segmented
    function (``api/segments.py``)."""
    with pytest.raises(ValueError, match=match):
        fn(np.arange(10), np.array(offsets))


def test_empty_segments_of_ops_without_identity_need_initial():
    with pytest.raises(ValueError, match="no identity; pass initial=.*segment 1"):
        nk.segmented_reduce(np.arange(10.0), np.array([0, 4, 4, 10]), "max")
    with pytest.raises(ValueError, match="x must be 1-D"):
        nk.segmented_reduce(np.zeros((2, 3)), np.array([0, 1]))
    pair = nk.op(identity=(0.0, 0.0), fields=2, map=lambda v, i: (v, 1.0))(
        lambda a0, a1, b0, b1: (a0 + b0, a1 + b1))
    with pytest.raises(TypeError, match="segmented_argmax"):
        nk.segmented_reduce(np.zeros(3), np.array([0, 3]), pair)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 70), min_size=1, max_size=8), st.integers(0, 3))
def test_random_segmentations_match_numpy(lengths, start):
    offsets = offsets_of(lengths, start)
    x = RNG.integers(-1000, 1000, offsets[-1] + 2).astype(np.int32)
    check(nk.segmented_reduce(x, offsets), x, offsets, "sum")
    check(nk.segmented_reduce(x, offsets, "min", initial=5000), x, offsets, "min", 5000)


@pytest.mark.parametrize("offsets, segment", [([0, 3, 2, 10], 1), ([0, 4, 11], 1),
                                              ([-1, 4, 5], 0)])
def test_bad_device_offsets_are_caught_by_the_kernel(offsets, segment):
    """Device offsets are not read on the host: the kernel clamps a bad segment (no
    read out of bounds) and the call raises after it, naming the first one."""
    device = cuda.to_device(np.array(offsets, dtype=np.int64))
    with pytest.raises(ValueError, match=rf"offsets must not decrease.*segment {segment} runs"):
        nk.segmented_reduce(np.arange(10.0), device)
    with pytest.raises(ValueError, match="no identity.*segment 1 is empty"):
        nk.segmented_reduce(np.arange(10.0), cuda.to_device(np.array([0, 4, 4, 10])), "max")
    with pytest.raises(ValueError, match="offsets must hold integers"):
        nk.segmented_reduce(np.arange(10.0), cuda.to_device(np.array([0.0, 4.0])))


def test_unsigned_offsets_that_fall_are_refused():
    """np.diff of unsigned offsets wraps; the check must not use it."""
    with pytest.raises(ValueError, match=r"offsets must not decrease, but offsets\[2\] = 3"):
        nk.segmented_reduce(np.arange(8.0), np.array([0, 5, 3, 8], np.uint32))
    with pytest.raises(ValueError, match="argmax of an empty segment"):
        nk.segmented_argmax(np.arange(8.0), np.array([0, 4, 4, 8], np.uint8))
