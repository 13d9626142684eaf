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


# sum and max (no identity: initial) in turn along the registry's list: each grid
# strategy meets both; every strategy sums short and long segments in
# test_long_short_and_empty_segments_in_one_call_on_every_strategy
@pytest.mark.parametrize("label, name", [(label, ("sum", "max")[i % 2])
                                         for i, label in enumerate(STRATEGIES)])
def test_every_strategy_over_boundary_lengths(label, name):
    strategy = STRATEGIES[label]
    x = RNG.standard_normal(sum(LENGTHS)).astype(np.float32)
    offsets = offsets_of(LENGTHS)
    initial = None if name == "sum" else -np.inf
    got = nk.segmented_reduce(x, offsets, name, strategy=strategy, initial=initial)
    check(got, x, offsets, name, initial)


# every dtype and every group size (None: picked from the lengths), each group size with
# two dtypes; not every pair
@pytest.mark.parametrize("dtype, lanes", [(np.int32, None), (np.bool_, None),
                                          (np.uint8, 32), (np.float64, 32),
                                          (np.float64, 64), (np.int32, 64)])
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
    ones = np.arange(70, dtype=np.int64)  # more segments than a block has warps
    np.testing.assert_array_equal(nk.segmented_reduce(ones, np.arange(71)), ones)


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
])
@pytest.mark.parametrize("fn", [nk.segmented_reduce, nk.segmented_scan])
def test_bad_offsets_are_refused_by_name(fn, offsets, match):
    """Host offsets are checked before any launch, the same way for every segmented
    function (``api/segments.py``)."""
    with pytest.raises(ValueError, match=match):
        fn(np.arange(10), np.array(offsets))


@pytest.mark.parametrize("fn", [nk.segmented_reduce, nk.segmented_scan, nk.segmented_sort,
                                nk.segmented_argmax])
@pytest.mark.parametrize("dtype", [np.float64, np.bool_])
def test_offsets_of_another_dtype_than_integers_are_a_type_error(fn, dtype):
    """As NumPy's reduceat for float indices (and numbakern's rule for a dtype it
    cannot take)."""
    with pytest.raises(TypeError, match=f"offsets must hold integers, got dtype "
                                        f"{np.dtype(dtype)}"):
        fn(np.arange(10.0), np.array([0, 4, 10], dtype))


@pytest.mark.parametrize("offsets, read_as", [([-1, 2**63], "float64"), ((0, 2**64), "object")])
def test_python_ints_numpy_reads_as_no_integer_dtype_are_said_so(offsets, read_as):
    """A list of ints past int64's and uint64's ranges together is no integer array
    to NumPy: the error says why the ints the caller passed are not integers."""
    assert np.asarray(offsets).dtype == read_as
    with pytest.raises(TypeError, match=f"all in int64's range or all in uint64's "
                                        f"\\(NumPy reads these Python ints as {read_as}"):
        nk.segmented_reduce(np.arange(4.0), offsets)


@pytest.mark.parametrize("offsets", [None, "abc", 3.5])
@pytest.mark.parametrize("fn", [nk.segmented_reduce, nk.segmented_scan, nk.segmented_sort])
def test_offsets_that_are_no_array_are_a_type_error_naming_their_type(fn, offsets):
    with pytest.raises(TypeError, match=f"^offsets must be a 1-D array of integers, got "
                                        f"{type(offsets).__name__}$"):
        fn(np.arange(10), offsets)


def test_empty_segments_of_ops_without_identity_need_initial():
    with pytest.raises(ValueError, match="no identity; pass initial=.*segment 1"):
        nk.segmented_reduce(np.arange(10.0), np.array([0, 4, 4, 10]), "max")
    with pytest.raises(ValueError, match="x must be 1-D"):
        nk.segmented_reduce(np.zeros((2, 3)), np.array([0, 1]))
    pair = nk.op(identity=(0.0, 0.0), fields=2, map=lambda v, i: (v, 1.0))(
        lambda a0, a1, b0, b1: (a0 + b0, a1 + b1))
    with pytest.raises(TypeError, match="segmented_argmax"):
        nk.segmented_reduce(np.zeros(3), np.array([0, 3]), pair)


@settings(max_examples=5, deadline=None, derandomize=True)
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
    with pytest.raises(TypeError, match="offsets must hold integers"):
        nk.segmented_reduce(np.arange(10.0), cuda.to_device(np.array([0.0, 4.0])))


@pytest.mark.parametrize("offsets", [[0, 3, 2, 10], [-1, 4, 5], [0, 4, 4, 11], [0, 900, 300,
                                                                               1200, 1100]])
def test_unchecked_device_offsets_neither_raise_nor_fault(offsets):
    """``check_offsets=False``: bad device offsets raise nothing and fault nothing (the
    kernels clamp every segment; the results are unspecified), long segments
    included, replayed calls too."""
    x = np.arange(1200.0)
    device = cuda.to_device(np.array(offsets, dtype=np.int64))
    got = nk.segmented_reduce(x, device, check_offsets=False)
    assert got.shape == (len(offsets) - 1,) and got.dtype == np.float64
    xd = cuda.to_device(x)
    for _ in range(2):  # the second replays its launches, and skips the report too
        assert nk.segmented_reduce(xd, device, check_offsets=False).shape == got.shape


def test_unchecked_good_device_offsets_give_the_checked_results():
    """Good offsets: the checked call's results, replayed calls too, between replays
    of bad offsets of the same signature (long segments)."""
    x = np.arange(1200.0)
    bad = cuda.to_device(np.array([0, 900, 300, 1200, 1100], dtype=np.int64))
    good = offsets_of([5, 0, 695, 500])
    want = nk.segmented_reduce(x, cuda.to_device(good))
    np.testing.assert_array_equal(
        nk.segmented_reduce(x, cuda.to_device(good), check_offsets=False), want)
    xd = cuda.to_device(x)
    for _ in range(2):  # the second replays its launches, and skips the report too
        got = nk.segmented_reduce(xd, cuda.to_device(good), check_offsets=False)
        np.testing.assert_array_equal(got.copy_to_host(), want)
        nk.segmented_reduce(xd, bad, check_offsets=False)


def test_unchecked_offsets_refused_where_only_the_check_sees_an_error():
    """Host offsets are checked whatever ``check_offsets`` says (on the host); an op
    with no identity and no ``initial`` needs the report for its empty segments."""
    with pytest.raises(ValueError, match="offsets must not decrease"):
        nk.segmented_reduce(np.arange(10.0), np.array([0, 3, 2, 10]), check_offsets=False)
    with pytest.raises(ValueError, match="check_offsets=False needs an op with an identity"):
        nk.segmented_reduce(np.arange(10.0), cuda.to_device(np.array([0, 4, 10])), "max",
                            check_offsets=False)
    assert nk.segmented_reduce(np.arange(10.0), cuda.to_device(np.array([0, 4, 4, 10])),
                               "max", initial=-1.0, check_offsets=False).tolist() == \
        [3.0, -1.0, 9.0]
    with pytest.raises(TypeError, match="check_offsets"):
        nk.segmented_reduce(np.arange(10.0), np.array([0, 10]), check_offsets="no")


def test_unsigned_offsets_that_fall_are_refused():
    """np.diff of unsigned offsets wraps; the check must not use it."""
    with pytest.raises(ValueError, match=r"offsets must not decrease, but offsets\[2\] = 3"):
        nk.segmented_reduce(np.arange(8.0), np.array([0, 5, 3, 8], np.uint32))
    with pytest.raises(ValueError, match="argmax of an empty segment"):
        nk.segmented_argmax(np.arange(8.0), np.array([0, 4, 4, 8], np.uint8))


# --- long segments: split into tiles over several blocks (kernels/segment_reduce.py) ------
# Under the simulator a tile is threads * 4 elements: 256 for these 64-thread blocks, so
# a segment of 257 or more is long. Three blocks per launch keep the simulator quick and
# still give a long segment runs in several blocks (and so several partials).

TILE = 64 * 4
MIXED = [0, 1, 33, TILE, TILE + 1, 0, 700, 5, 3 * TILE, 64, 0, 2 * TILE - 1, 31, 1500, 0]
TILED = {s.label: s for s in every("reduce", threads=64, blocks=3)}


def _ties_and_nan(n):
    """Values with repeated maxima and minima across tiles, and one NaN (later)."""
    x = RNG.integers(-3, 4, n).astype(np.float32)
    return x


def _arg_reference(x, offsets, direction):
    pick = np.argmax if direction == "max" else np.argmin
    return np.array([pick(x[a:b]) for a, b in zip(offsets[:-1], offsets[1:])])


@pytest.mark.parametrize("label", list(TILED))
def test_long_short_and_empty_segments_in_one_call_on_every_strategy(label):
    """Every strategy sums; then one of max (an op without identity, given initial),
    argmax and argmin, taken in turn along the registry's list, so that each grid
    strategy (two_pass, atomic_fold) meets all three and each op several block
    strategies."""
    strategy = TILED[label]
    offsets = offsets_of(MIXED, start=3)
    x = RNG.standard_normal(offsets[-1] + 5).astype(np.float32)
    check(nk.segmented_reduce(x, offsets, strategy=strategy), x, offsets, "sum")
    other = ("max", "argmax", "argmin")[list(TILED).index(label) % 3]
    if other == "max":
        check(nk.segmented_reduce(x, offsets, "max", strategy=strategy, initial=-np.inf), x,
              offsets, "max", -np.inf)
        return
    nonempty = offsets_of([n for n in MIXED if n], start=3)
    ties = _ties_and_nan(nonempty[-1])
    ties[nonempty[8] + 2 * TILE + 3] = np.nan  # inside the third tile of a long segment
    ties[nonempty[8] + 2 * TILE + 9] = np.nan
    fn = nk.segmented_argmax if other == "argmax" else nk.segmented_argmin
    np.testing.assert_array_equal(fn(ties, nonempty, strategy=strategy),
                                  _arg_reference(ties, nonempty, other[3:]))


def test_every_op_and_dtype_over_long_segments():
    strategy = nk.TwoPass(nk.WarpShuffle(threads=64), blocks=3)
    offsets = offsets_of(MIXED)
    n = offsets[-1]
    for dtype, name in ((np.int32, "sum"), (np.int8, "min"), (np.float64, "min"),
                        (np.bool_, "sum")):
        x = (RNG.integers(0, 4, n) > 0 if dtype == np.bool_
             else RNG.integers(-50, 50, n).astype(dtype))
        initial = None if name == "sum" else 100
        got = nk.segmented_reduce(x, offsets, name, strategy=strategy, initial=initial)
        check(got, x, offsets, name, initial)
    x = RNG.choice(np.array([1.0, -1.0, 1.001, 0.999]), n)  # a product that stays finite
    check(nk.segmented_reduce(x, offsets, "prod", strategy=strategy), x, offsets, "prod")
    bits = RNG.integers(0, 2**31, n).astype(np.int64)
    want = [np.bitwise_xor.reduce(bits[a:b]) if b > a else 0
            for a, b in zip(offsets[:-1], offsets[1:])]
    np.testing.assert_array_equal(nk.segmented_reduce(bits, offsets, "bitwise_xor",
                                                      strategy=strategy), want)


@pytest.mark.parametrize("lanes", [32, 64])
def test_short_segments_by_warp_or_block_beside_long_ones(lanes):
    strategy = nk.TwoPass(nk.WarpShuffle(threads=64), blocks=2)
    offsets = offsets_of([3, 40, 0, 300, 65, 1])
    x = RNG.integers(-50, 50, offsets[-1]).astype(np.int32)
    check(nk.segmented_reduce(x, offsets, strategy=strategy, lanes=lanes), x, offsets, "sum")


def test_a_block_a_segment_from_any_start():
    """A block per segment over segments starting at every residue of a 16-byte vector,
    lengths around a vector and the block; sum, min with initial, argmax (ties go to
    the first)."""
    strategy = nk.TwoPass(nk.WarpShuffle(threads=64))
    lengths = [0, 1, 3, 4, 5, 7, 9, 63, 64, 65, 256, 255, 2, 3, 1, 129]
    x = RNG.integers(-4, 5, sum(lengths) + 3).astype(np.float32)
    for start in range(4):
        offsets = offsets_of(lengths, start)
        check(nk.segmented_reduce(x, offsets, strategy=strategy, lanes=64), x, offsets,
              "sum")
        check(nk.segmented_reduce(x, offsets, "min", initial=np.inf, strategy=strategy,
                                  lanes=64), x, offsets, "min", np.inf)
        filled = offsets_of([n for n in lengths if n], start)  # argmax takes no empty one
        want = [int(np.argmax(x[a:b])) for a, b in zip(filled[:-1], filled[1:])]
        got = nk.segmented_argmax(x, filled, strategy=strategy, lanes=64)
        np.testing.assert_array_equal(got, want)


def test_one_huge_segment_among_tiny_ones_and_signed_zeros():
    lengths = [1, 0, 4000, 2, 0]
    offsets = offsets_of(lengths)
    x = RNG.standard_normal(offsets[-1])
    x[1 + 1000] = -0.0
    for label in ("two_pass/warp_shuffle", "atomic_fold/shared_tree"):
        got = nk.segmented_reduce(x, offsets, strategy=TILED[label])
        check(got, x, offsets, "sum")
    x = np.zeros(offsets[-1])
    x[3000] = -0.0
    got = nk.segmented_reduce(x, offsets, "max", initial=-np.inf)
    np.testing.assert_array_equal(got, [0.0, -np.inf, 0.0, 0.0, -np.inf])
    x = np.full(offsets[-1], -0.0)
    assert not np.signbit(nk.segmented_reduce(x, offsets)).any()  # NumPy: a sum's -0.0 + 0.0


def test_a_non_commutative_op_keeps_order_across_tiles_and_blocks():
    @nk.op(identity=0, commutative=False)
    def last_nonzero(a, b):
        return b if b != 0 else a

    offsets = offsets_of(MIXED)
    x = np.zeros(offsets[-1], np.int64)
    x[RNG.integers(0, offsets[-1], 60)] = RNG.integers(1, 9, 60)
    expected = [next((v for v in x[a:b][::-1] if v), 0) for a, b in zip(offsets, offsets[1:])]
    for block in ("warp_shuffle", "hillis_steele"):
        strategy = TILED[f"two_pass/{block}"]
        np.testing.assert_array_equal(nk.segmented_reduce(x, offsets, last_nonzero,
                                                          strategy=strategy), expected)


def test_long_segments_of_strided_input_and_device_offsets():
    offsets = offsets_of(MIXED)
    host = RNG.standard_normal(2 * offsets[-1]).astype(np.float32)
    device = cuda.to_device(host)[::2]  # no vector loads: scalar tiles
    got = nk.segmented_reduce(device, cuda.to_device(offsets.astype(np.int32)),
                              strategy=TILED["two_pass/shared_tree"])
    check(got.copy_to_host(), host[::2], offsets, "sum")
    unaligned = RNG.standard_normal(offsets[-1] + 1).astype(np.float32)
    got = nk.segmented_reduce(cuda.to_device(unaligned)[1:], offsets)  # 4 bytes past 16
    check(got.copy_to_host(), unaligned[1:], offsets, "sum")


def test_bad_device_offsets_around_long_segments_are_caught():
    """A falling offset between long segments: clamped (no read out of bounds, no tile
    claimed twice past the array) and reported."""
    offsets = cuda.to_device(np.array([0, 900, 300, 1200, 1100], np.int64))
    with pytest.raises(ValueError, match=r"offsets must not decrease.*segment 1 runs"):
        nk.segmented_reduce(np.arange(1200.0), offsets, strategy=TILED["two_pass/warp_shuffle"])
    with pytest.raises(ValueError, match=r"segment 0 runs from 0 to 5000"):
        nk.segmented_reduce(np.arange(1200.0), cuda.to_device(np.array([0, 5000])))


def test_device_calls_replay_and_still_report_bad_offsets():
    """Device values and offsets: a repeated signature replays its recorded launches
    (``runtime/replay.py``) on new data, and the offsets' report still runs after."""
    from numbakern.runtime import replay

    offsets = offsets_of([5, 0, 300, 2])
    before = replay.counts["replayed"]
    for _ in range(2):
        x = RNG.standard_normal(offsets[-1]).astype(np.float32)
        got = nk.segmented_reduce(cuda.to_device(x), cuda.to_device(offsets))
        check(got.copy_to_host(), x, offsets, "sum")
        arg = nk.segmented_argmin(cuda.to_device(x), cuda.to_device(offsets[[0, 1, 3, 4]]))
        np.testing.assert_array_equal(arg.copy_to_host(),
                                      _arg_reference(x, offsets[[0, 1, 3, 4]], "min"))
    assert replay.counts["replayed"] - before == 2
    falling = cuda.to_device(np.array([0, 5, 4, 305, 307]))  # the same signature
    with pytest.raises(ValueError, match="segment 1 runs from 5 to 4"):
        nk.segmented_reduce(cuda.to_device(x), falling)
    with pytest.raises(ValueError, match=r"argmin of an empty segment \(segment 1"):
        nk.segmented_argmin(cuda.to_device(x), cuda.to_device(offsets[[0, 1, 1, 4, 4]]))


def test_a_replayed_call_raises_for_an_empty_segment_only_where_the_op_has_no_identity():
    """The report's check decides from the op and ``initial`` as given: an empty
    segment of max raises (every call: a call that raises keeps no recording), of sum
    (or of max with ``initial``) gives the identity (``initial``), and its second call
    replays."""
    from numbakern.runtime import replay

    x = cuda.to_device(np.arange(6.0))
    empty = cuda.to_device(np.array([0, 2, 2, 6]))
    before = replay.counts["replayed"]
    for _ in range(2):
        with pytest.raises(ValueError, match=r"operation max which has no identity; pass "
                                             r"initial= \(segment 1 is empty\)"):
            nk.segmented_reduce(x, empty, "max")
        got = nk.segmented_reduce(x, empty, "sum")
        np.testing.assert_array_equal(got.copy_to_host(), [1.0, 0.0, 14.0])
    assert replay.counts["replayed"] - before == 1  # sum's second call
    with_initial = nk.segmented_reduce(x, empty, "max", initial=-1.0)
    np.testing.assert_array_equal(with_initial.copy_to_host(), [1.0, -1.0, 5.0])


# The tile kernel finishes each long segment itself (two_pass): stored at once when all
# its runs lie in one block, else by the block that closes its last run. Tiles of
# 32 * 4 = 128 elements; lengths around one tile, a block's run of tiles and several.
RUNS = [129, 127, 128, 256, 257, 0, 383, 640, 1, 1023, 1024, 1025, 3, 2049, 130]


@pytest.mark.parametrize("blocks", [2, 7])  # 3: test_replayed_calls_count_their_runs_afresh
def test_long_segments_finished_by_their_last_run_in_the_tile_kernel(blocks):
    offsets = offsets_of(RUNS)
    n = int(offsets[-1])
    strategy = nk.TwoPass(nk.WarpShuffle(threads=32), blocks=blocks)
    x = RNG.integers(-1000, 1000, n).astype(np.int64)
    check(nk.segmented_reduce(x, offsets, strategy=strategy), x, offsets, "sum")
    nonempty = offsets_of([r for r in RUNS if r])
    ties = RNG.integers(-3, 4, n).astype(np.float32)
    ties[nonempty[12] + 1500] = np.nan  # in a later run of the longest segment
    np.testing.assert_array_equal(nk.segmented_argmax(ties, nonempty, strategy=strategy),
                                  _arg_reference(ties, nonempty, "max"))
    floats = RNG.standard_normal(n).astype(np.float32)
    first = nk.segmented_reduce(floats, offsets, strategy=strategy)
    check(first, floats, offsets, "sum")
    # the runs meet in one tree whichever block closes last: bitwise repeatable
    np.testing.assert_array_equal(nk.segmented_reduce(floats, offsets, strategy=strategy),
                                  first)


def test_replayed_calls_count_their_runs_afresh():
    """The run counts are reset by each call's fill, replayed or not: the first call
    leaves its counts behind, and the replayed second must start from zero."""
    from numbakern.runtime import replay

    offsets = cuda.to_device(offsets_of(RUNS))
    strategy = nk.TwoPass(nk.WarpShuffle(threads=32), blocks=3)
    before = replay.counts["replayed"]
    for _ in range(2):
        x = RNG.integers(-1000, 1000, int(offsets_of(RUNS)[-1])).astype(np.int64)
        got = nk.segmented_reduce(cuda.to_device(x), offsets, strategy=strategy)
        check(got.copy_to_host(), x, offsets_of(RUNS), "sum")
    assert replay.counts["replayed"] - before == 1


# With ``blocks=4`` a block of the tile kernel reduces R = 8 tiles (30 tiles of 32 * 4 =
# 128 elements in blocks of 8, 8, 8 and a last one of 6, its last tile partial). Two
# long segments start inside a tile and run over 2 and 3 blocks.
SPANNING = [5, 0, 2000, 1690, 105]


def _spanning_plan(strategy, x, offsets):
    from numbakern.kernels.segment_reduce import SegmentReduce
    from numbakern.ops.state import state_kit

    kit = state_kit(nk.ops.get("sum"), (np.dtype(np.int64),))
    layout = SegmentReduce(cuda.to_device(x), cuda.to_device(offsets), kit, False, None, None)
    return layout.plan(strategy.block, strategy.blocks)


@pytest.mark.simulator  # SPANNING is sized for the simulator's tiles
def test_the_tile_grid_is_one_wave_of_resident_blocks():
    """Without ``blocks=`` the tile kernel's grid is at most the blocks resident at
    once (``tile_blocks``), each with an equal run of tiles."""
    from numbakern.kernels.segment_reduce import tile_blocks

    strategy = nk.strategies.resolve("reduce", "two_pass/warp_shuffle", threads=32)
    offsets = offsets_of(SPANNING)
    plan = _spanning_plan(strategy, np.zeros(int(offsets[-1]), np.int64), offsets)
    wave = tile_blocks(32)
    assert plan.per_block == -(-plan.tiles // wave)
    assert plan.tile_blocks == -(-plan.tiles // plan.per_block) <= wave


@pytest.mark.simulator  # SPANNING is sized for the simulator's tiles
@pytest.mark.parametrize("label", ["two_pass/warp_shuffle", "atomic_fold/warp_shuffle"])
def test_segments_over_several_blocks_of_tiles_and_a_partial_last_block(label):
    strategy = {s.label: s for s in every("reduce", threads=32, blocks=4)}[label]
    offsets = offsets_of(SPANNING)
    n = int(offsets[-1])
    x = RNG.integers(-1000, 1000, n).astype(np.int64)
    plan = _spanning_plan(strategy, x, offsets)
    R, K, T = plan.per_block, plan.tiles, plan.tile
    assert R >= 2 and plan.tile_blocks >= 3 and K % R and n % T  # the case meant
    assert offsets[2] % T and offsets[2] // T // R == 0 and (offsets[3] - 1) // T // R >= 1
    assert offsets[3] % T and (offsets[4] - 1) // T // R == plan.tile_blocks - 1
    check(nk.segmented_reduce(x, offsets, strategy=strategy), x, offsets, "sum")
    ties = RNG.integers(-3, 4, n).astype(np.float32)
    ties[offsets[4] - 7] = np.nan  # in the last, partial block's part of segment 3
    nonempty = np.unique(offsets)  # argmax of an empty segment raises
    np.testing.assert_array_equal(nk.segmented_argmax(ties, nonempty, strategy=strategy),
                                  _arg_reference(ties, nonempty, "max"))
    floats = RNG.standard_normal(n).astype(np.float32)
    first = nk.segmented_reduce(floats, offsets, strategy=strategy)
    check(first, floats, offsets, "sum")
    if label.startswith("two_pass"):  # runs met in one tree: bitwise repeatable
        np.testing.assert_array_equal(nk.segmented_reduce(floats, offsets, strategy=strategy),
                                      first)
