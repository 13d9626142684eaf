"""Reductions along axes (``axis``, ``keepdims``, ``dtype``, ``out``) against NumPy.

Simulator: every strategy of ``numbakern.strategies.available()`` with small grids
(32 or 64 threads, ``blocks=2``). Sweeps are split to stay fast: sizes with one
dtype, dtypes with one size, layouts with one strategy. Tolerances as in
``test_reductions.py``: integers exact; float sums within ``4 * eps(acc) * sum|x|``
plus the final rounding; max/min exact. GPU tests (``-m gpu``) repeat the matrix at
realistic shapes against CuPy.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import numbakern as nk
from numbakern.core import layout
from numbakern.kernels import axis_reduce
from numbakern.core.arrays import CopyWarning, resolve_stream
from numbakern.core.axes import AxisError, normalize_axes, result_shape
from numbakern.core.deliver import OutDtypeError, check_out
from numbakern.strategies import AtomicFold, SharedTree, TwoPass, WarpShuffle

STRATEGIES = {s.label: s for s in nk.strategies.every("reduce", threads=32, blocks=2)}
DEFAULT = STRATEGIES["two_pass/warp_shuffle"]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


def sample(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return rng.uniform(-50, 50, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(-50, info.min), min(50, info.max) + 1, shape).astype(dtype)


def assert_close(got, ref, x, exact=False):
    """``got`` against ``ref(x)`` (a NumPy reduction): same shape and dtype; integers
    and ``exact`` ops (max, min) equal; float sums within ``4 * eps(acc) * ref(|x|)``
    (the tree-sum bound, accumulator dtype) plus the final rounding, against
    ``ref`` computed in float64."""
    got, want = np.asarray(got), np.asarray(ref(x))
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.dtype.kind != "f" or exact:
        np.testing.assert_array_equal(got, want)
        return
    acc = np.finfo(np.float32 if want.dtype == np.float16 else want.dtype)  # accumulator
    ref64 = np.asarray(ref(x.astype(np.float64)))
    tol = (4 * acc.eps * np.asarray(ref(np.abs(x.astype(np.float64))))
           + np.finfo(want.dtype).eps * np.abs(ref64) + np.finfo(want.dtype).tiny)
    assert np.all(np.abs(got.astype(np.float64) - ref64) <= tol), (got, ref64)


@nk.op(identity=0.0, commutative=False)
def last_nonzero(a, b):
    """An op whose result depends on element order: the last nonzero element."""
    return b if b != 0 else a


# --- axis, keepdims and out rules (no kernels) ----------------------------------------


@pytest.mark.parametrize("axis,ndim,want", [
    (None, 3, (0, 1, 2)), (1, 3, (1,)), (-1, 3, (2,)), ((2, 0), 3, (0, 2)),
    ((-1, -3), 3, (0, 2)), ((), 3, ()), (np.int64(1), 2, (1,)), (0, 0, ()), (-1, 0, ()),
])
def test_normalize_axes(axis, ndim, want):
    assert normalize_axes(axis, ndim) == want


@pytest.mark.parametrize("axis,ndim,error", [
    (3, 3, AxisError), (-4, 3, AxisError), ((0, 3), 3, AxisError), ((0,), 0, AxisError),
    (1, 0, AxisError), ((1, 1), 3, ValueError), ((0, -3), 3, ValueError), (1.0, 3, TypeError),
    ("0", 3, TypeError), ([0, 1], 3, TypeError),  # NumPy refuses a list too
])
def test_normalize_axes_errors(axis, ndim, error):
    with pytest.raises(error):
        normalize_axes(axis, ndim)


def test_a_repeated_axis_is_named():
    with pytest.raises(ValueError, match=r"^duplicate value in 'axis': \(2, -1\) names "
                                         r"axis 2 of 3 more than once$"):
        nk.sum(np.ones((2, 3, 4)), axis=(2, -1))


def test_axis_error_is_numpys():
    with pytest.raises(AxisError) as info:
        nk.sum(np.ones((2, 3)), axis=2)
    assert isinstance(info.value, ValueError) and isinstance(info.value, IndexError)
    assert str(info.value) == "axis 2 is out of bounds for array of dimension 2"


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 1, 4), (2, 3, 4, 5)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_result_shape_matches_numpy(shape, keepdims):
    x = np.ones(shape)
    ndim = len(shape)
    for axis in [None, 0, -1, (0, -1)[:ndim], tuple(range(ndim))]:
        axes = normalize_axes(axis, ndim)
        assert result_shape(shape, axes, keepdims) == np.sum(x, axis=axis,
                                                              keepdims=keepdims).shape


def test_check_out():
    check_out(np.empty((2,), np.float64), (2,), np.dtype(np.float32), "numpy", "sum")
    check_out(np.empty((2,), np.float32), (2,), np.dtype(np.int64), "numpy", "sum")
    with pytest.raises(ValueError, match="shape"):
        check_out(np.empty((3,)), (2,), np.dtype(np.float64), "numpy", "sum")
    with pytest.raises(OutDtypeError) as info:
        check_out(np.empty((2,), np.int64), (2,), np.dtype(np.float32), "numpy", "sum")
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        check_out([0.0, 0.0], (2,), np.dtype(np.float64), "numpy", "sum")


# --- layout planning: which kernel, how rows are split ----------------------------------


def test_plan_dims_collapses_c_and_f_order():
    x = np.ones((4, 5, 6), np.float32)
    dims = layout.plan_dims(x.shape, x.strides, (1, 2), False, True)
    assert dims.kept == ((4, 120, 1),) and dims.reduced == ((30, 4, 0),)
    f = np.asfortranarray(x)
    dims = layout.plan_dims(f.shape, f.strides, (0, 1), False, True)
    assert dims.kept == ((6, 80, 1),) and dims.reduced == ((20, 4, 0),)


def test_plan_dims_keeps_c_index_for_argmax():
    f = np.asfortranarray(np.ones((4, 5), np.float32))
    dims = layout.plan_dims(f.shape, f.strides, (0, 1), True, True)
    # memory order (axis 1 outer), each with its C-order index multiplier: no merge
    assert dims.reduced == ((5, 16, 1), (4, 4, 5))


def _plan(shape, axis, strategy=DEFAULT, lanes=None, order="C"):
    x = np.ones(shape, np.float32, order=order)
    axes = normalize_axes(axis, x.ndim)
    av = layout.axis_view(x, axes, False, True, resolve_stream(None, "numpy"))
    return axis_reduce.plan_launch(av, strategy.block, strategy.blocks, lanes, 4)


def test_plan_chooses_kernels():
    s64 = TwoPass(WarpShuffle(64), blocks=2)
    assert _plan((8, 300), 1, s64).kernel == "row" and _plan((8, 300), 1, s64).lanes == 32
    assert _plan((8, 3000), 1, s64).lanes == 32
    long_row = axis_reduce.WARP_ROW_MAX + 1
    assert _plan((8, long_row), 1, s64).lanes == 64  # long rows: a block each
    assert _plan((8, 300), 1, s64, lanes=64).lanes == 64
    assert _plan((300, 8), 0).kernel == "column"
    assert _plan((300, 8), 1).kernel == "column"  # 32-byte rows: one thread each
    assert _plan((300, 8), 0, order="F").kernel == "row"
    assert _plan((1, 3000), 1).pieces == 2  # one long row is split over the 2 blocks
    assert _plan((4, 3000), 1).pieces == 1  # enough rows to fill them


def test_lanes_checked():
    with pytest.raises(ValueError, match="lanes"):
        nk.sum(np.ones((2, 3)), axis=1, lanes=48, strategy=DEFAULT)


# --- every strategy, every op family, against NumPy ------------------------------------


AXES = [0, 1, 2, -1, (0, 2), (1, 2), (0, 1)]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_every_axis(name):
    """Every strategy, half of AXES each (even or odd places, in turn along the
    registry's list): each axis meets both grid strategies and two block strategies
    of each, row and column kernels alike."""
    s = STRATEGIES[name]
    x = sample(np.random.default_rng(7), (3, 37, 5), "float32")
    half = list(STRATEGIES).index(name) % 2
    for i, axis in enumerate(AXES):
        if i % 2 != half:
            continue
        keep = i % 4 < 2  # both keepdims for each half
        assert_close(nk.sum(x, axis=axis, keepdims=keep, strategy=s),
                     lambda a: np.sum(a, axis=axis, keepdims=keep), x)
        assert_close(nk.max(x, axis=axis, keepdims=not keep, strategy=s),
                     lambda a: np.max(a, axis=axis, keepdims=not keep), x, exact=True)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # products wrap
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_strategy_integer_ops(name):
    """Every op on every strategy, along one axis (0 and 1 in turn along ops and
    strategies: each op meets both axes on both grid strategies)."""
    s = STRATEGIES[name]
    x = sample(np.random.default_rng(8), (6, 45), "int32")
    first = list(STRATEGIES).index(name) % 2
    for k, (fn, ref) in enumerate([(nk.min, np.min), (nk.prod, np.prod),
                                   (nk.xor_sum, np.bitwise_xor.reduce),
                                   (nk.bitwise_and_sum, np.bitwise_and.reduce),
                                   (nk.bitwise_or_sum, np.bitwise_or.reduce)]):
        axis = (k + first) % 2
        np.testing.assert_array_equal(fn(x, axis=axis, strategy=s), ref(x, axis=axis))


# --- row kernel: one warp or one block per row, split rows ----------------------------


ROW_STRATEGIES = {"two_pass/warp_shuffle": TwoPass(WarpShuffle(64), blocks=2),
                  "atomic_fold/shared_tree": AtomicFold(SharedTree(64), blocks=2)}
ROW_SIZES = [1, 31, 33, 64, 129, 700]


# every size on both strategies; the group size (None: picked from the row) in turn,
# so that each strategy meets each group size twice, short rows and long
@pytest.mark.parametrize("label, lanes, n", [
    (label, [None, 32, 64][(i + j) % 3], n)
    for j, label in enumerate(ROW_STRATEGIES) for i, n in enumerate(ROW_SIZES)])
def test_row_sizes(label, lanes, n):
    strategy = ROW_STRATEGIES[label]
    rng = np.random.default_rng(n)
    for rows in (1, 3):  # one row is split over both blocks once it is long enough
        x = sample(rng, (rows, n), "float32")
        assert_close(nk.sum(x, axis=1, strategy=strategy, lanes=lanes),
                     lambda a: a.sum(axis=1), x)


def test_row_blocks_of_three_warps():
    s = TwoPass(WarpShuffle(96), blocks=2)
    x = sample(np.random.default_rng(3), (2, 1100), "float32")
    assert_close(nk.sum(x, axis=1, strategy=s), lambda a: a.sum(axis=1), x)
    assert_close(nk.sum(x[:1], axis=1, strategy=s, lanes=96), lambda a: a.sum(axis=1), x[:1])


def test_partials_lanes():
    """An output's partials get a warp up to PARTIALS_WARP_MAX of them, then a block."""
    most = axis_reduce.PARTIALS_WARP_MAX
    assert axis_reduce.partials_lanes(most, WarpShuffle(256)) == 32
    assert axis_reduce.partials_lanes(most + 1, WarpShuffle(256)) == 256


@pytest.mark.parametrize("strategy", [s for s in nk.strategies.every("reduce", threads=64,
                                                                      blocks=4)
                                      if s.name == "two_pass"], ids=lambda s: s.label)
def test_partials_of_one_output_met_by_a_block(strategy, monkeypatch):
    """A flat argmax and argmin and a one-row sum, each split over 4 pieces, met by a
    block (the limit lowered to 2 partials so that the simulator's small grids reach
    it), with the extreme tied across pieces: the first index wins, as NumPy's."""
    monkeypatch.setattr(axis_reduce, "PARTIALS_WARP_MAX", 2)
    seen = []
    lanes_of = axis_reduce.partials_lanes
    monkeypatch.setattr(axis_reduce, "partials_lanes",
                        lambda pieces, block: seen.append(lanes_of(pieces, block)) or seen[-1])
    # 8800 elements: 4 pieces on a GPU too (at least 32 elements a thread there)
    x = sample(np.random.default_rng(4), (8800,), "float32")
    x[[100, 8000]] = x.max() + 1  # pieces of 2200: the tie spans the first and fourth
    x[[300, 8700]] = x.min() - 1
    assert nk.argmax(x, strategy=strategy) == 100
    assert nk.argmin(x, strategy=strategy) == 300
    assert_close(nk.sum(x[None], axis=1, strategy=strategy), lambda a: a.sum(axis=1), x[None])
    assert seen == [64, 64, 64]


# --- row kernel with 16-byte vector loads: rows that start aligned ----------------------


@pytest.mark.parametrize("dtype, lanes", [("int8", None), ("float16", 64), ("int32", None),
                                          ("float32", 64), ("uint64", None),
                                          ("float64", 64)])
def test_vector_rows(dtype, lanes):
    """Rows of 16-byte multiples read in vectors; one row is split over both blocks, so
    pieces start and stop inside vectors (the scalar head and tail). Every vector width
    (16, 8, 4 and 2 elements); the group size (None: picked from the row, or a block
    of 64 lanes) in turn, each with three dtypes."""
    width = 16 // np.dtype(dtype).itemsize
    strategy = TwoPass(WarpShuffle(64), blocks=2)
    rng = np.random.default_rng(width)
    # rows of one and three vectors, and a long row alone (split over both blocks) and
    # among others
    for n, rows in ((width, 3), (3 * width, 1), (65 * width, 1), (65 * width, 3)):
        x = sample(rng, (rows, n), dtype)
        av = layout.axis_view(x, (1,), False, True, resolve_stream(None, "numpy"))
        assert axis_reduce.row_vector_width(av, x.dtype, ordered=False) == width
        assert_close(nk.sum(x, axis=1, strategy=strategy, lanes=lanes),
                     lambda a: a.sum(axis=1), x)
        x[:, 1::3] = x.max()  # ties in and across vectors: the first index wins
        np.testing.assert_array_equal(
            nk.argmax(x, axis=1, strategy=strategy, lanes=lanes), x.argmax(axis=1))


def test_vector_rows_need_aligned_rows():
    x = sample(np.random.default_rng(0), (8, 68), "float32")
    stream = resolve_stream(None, "numpy")
    for view, width in [(x, 4), (x[:, 4:], 4), (x[:, 1:], 0), (x[:, :67], 0), (x[1::2], 4)]:
        av = layout.axis_view(view, (1,), False, True, stream)
        assert axis_reduce.row_vector_width(av, x.dtype, ordered=False) == width
    assert axis_reduce.row_vector_width(av, x.dtype, ordered=True) == 0


# --- tiny rows: one thread and one vector load per row ---------------------------------


TINY = [("int8", 4), ("int8", 16), ("uint16", 8), ("int32", 2), ("float16", 2),
        ("float32", 2), ("float32", 4), ("uint64", 2), ("float64", 2)]


# each (dtype, width) once, on the registry's strategies in turn: every strategy at least once
@pytest.mark.parametrize("name, dtype, n", [(list(STRATEGIES)[i % len(STRATEGIES)], d, n)
                                            for i, (d, n) in enumerate(TINY)])
def test_tiny_rows(name, dtype, n):
    x = sample(np.random.default_rng(n), (129, n), dtype)
    x[::5] = x[::5, :1]  # rows of equal values: ties, the first index wins
    av = layout.axis_view(x, (1,), False, True, resolve_stream(None, "numpy"))
    assert axis_reduce.tiny_row_width(av, x.dtype) == n
    strategy = STRATEGIES[name]
    assert_close(nk.sum(x, axis=1, strategy=strategy), lambda a: a.sum(axis=1), x)
    assert_close(nk.min(x, axis=-1, keepdims=True, strategy=strategy),
                 lambda a: a.min(axis=-1, keepdims=True), x, exact=True)
    np.testing.assert_array_equal(nk.argmax(x, axis=1, strategy=strategy), x.argmax(axis=1))


def test_tiny_rows_are_vectors_of_4_to_16_bytes():
    """Rows of 2 int8 (2 bytes) are no vector a load takes (32-bit words at least):
    they go to the other kernels, with NumPy's answers."""
    stream = resolve_stream(None, "numpy")
    for dtype, n, width in [("int8", 2, 0), ("int8", 4, 4), ("int16", 2, 2),
                            ("int8", 32, 0)]:
        x = sample(np.random.default_rng(n), (33, n), dtype)
        av = layout.axis_view(x, (1,), False, True, stream)
        assert axis_reduce.tiny_row_width(av, x.dtype) == width, (dtype, n)
        np.testing.assert_array_equal(nk.max(x, axis=1), x.max(axis=1))
        np.testing.assert_array_equal(nk.any(x, axis=1), x.any(axis=1))


def test_tiny_rows_keep_element_order_and_need_back_to_back_rows():
    x = sample(np.random.default_rng(1), (40, 4), "float32")
    x[::3, 3] = 0  # then the third element is the last nonzero one
    want = np.where(x[:, 3] != 0, x[:, 3], x[:, 2])
    np.testing.assert_array_equal(nk.reduce(x, last_nonzero, axis=1, strategy=DEFAULT), want)
    from numba import cuda

    d = cuda.to_device(x)  # device views are read in place (host input is packed)
    stream = resolve_stream(None, "device")
    for view, width in [(d, 4), (d[:, :2], 0), (d[:, :3], 0), (d[::2], 0), (d[:1], 4),
                        (d[:, 2:], 0)]:
        av = layout.axis_view(view, (1,), False, True, stream)
        assert axis_reduce.tiny_row_width(av, x.dtype) == width
        np.testing.assert_array_equal(nk.max(view, axis=1).copy_to_host(),
                                      view.copy_to_host().max(axis=1))


# --- column kernel: adjacent threads, adjacent columns --------------------------------


COLUMN_STRATEGIES = {"two_pass/shared_tree": TwoPass(SharedTree(64), blocks=2),
                     "atomic_fold/warp_shuffle": AtomicFold(WarpShuffle(64), blocks=2)}


# every (rows, columns) once, the two strategies alternating: each meets every size
@pytest.mark.parametrize("label, cols, n", [
    (list(COLUMN_STRATEGIES)[(i + j) % 2], cols, n)
    for i, cols in enumerate([1, 2, 3, 33, 70]) for j, n in enumerate([1, 5, 300])])
def test_column_sizes(label, cols, n):
    strategy = COLUMN_STRATEGIES[label]
    x = sample(np.random.default_rng(cols * n), (n, cols), "float32")
    assert_close(nk.sum(x, axis=0, strategy=strategy), lambda a: a.sum(axis=0), x)


# --- column kernel with vector loads: a thread owns a vector of adjacent columns --------


def _column_width(x, axis):
    av = layout.axis_view(x, normalize_axes(axis, x.ndim), False, True,
                          resolve_stream(None, "device" if hasattr(x, "copy_to_host")
                                         else "numpy"))
    return axis_reduce.column_vector_width(av, np.dtype(x.dtype), masked=False)


def test_column_vectors_need_whole_aligned_vectors():
    from numba import cuda

    d = cuda.to_device(sample(np.random.default_rng(0), (6, 5, 16), "float32"))
    for view, axis, width in [(d, 0, 4), (d, 1, 4), (d[:, :, :8], 1, 4), (d[:, :, 4:], 1, 4),
                              (d[:, :, 1:9], 1, 1),  # misaligned
                              (d[:, :, :6], 1, 1),  # columns not of whole vectors
                              (d[:, :, ::2], 1, 1),  # columns not adjacent
                              (d, (0, 1), 4),  # the reduced axes collapse to one
                              (d[:, ::2], (0, 1), 1),  # two reduced dimensions
                              (d[::2, :, :8], 1, 4)]:  # kept rows 512 bytes apart
        assert _column_width(view, axis) == width, (view.shape, view.strides, axis)
    for dtype, width in [("int8", 1), ("float16", 8), ("int32", 4), ("float64", 2)]:
        assert _column_width(np.zeros((3, 16), dtype), 0) == width
    av = layout.axis_view(np.zeros((3, 16), np.float32), (0,), False, True,
                          resolve_stream(None, "numpy"))
    assert axis_reduce.column_vector_width(av, np.dtype(np.float32), masked=True) == 1
    assert axis_reduce.column_vector_width(av, np.dtype(np.float32), False, fields=2) == 4
    assert axis_reduce.column_vector_width(av, np.dtype(np.float32), False, fields=3) == 1


VECTOR_COLUMN_SIZES = [(1, 4), (31, 8), (33, 124), (129, 132), (300, 260), (2, 1000)]


# every (rows, columns) on each of the column strategies and a 32-thread one; for each,
# sum, max and argmax (pairs of states a lane, ties across the element rows)
@pytest.mark.parametrize("label, n, cols", [
    (label, n, cols) for i, (n, cols) in enumerate(VECTOR_COLUMN_SIZES)
    for j, label in enumerate(list(COLUMN_STRATEGIES) + ["two_pass/warp_shuffle"])
    if (i + j) % 2 == 0 or cols in (132, 1000)])
def test_vector_columns(label, n, cols):
    strategy = COLUMN_STRATEGIES.get(label, STRATEGIES.get(label))
    x = sample(np.random.default_rng(n * cols), (n, cols), "float32")
    x[n // 2:, ::3] = x.max()  # ties: the first row with the maximum wins
    assert _column_width(x, 0) == 4
    assert_close(nk.sum(x, axis=0, strategy=strategy), lambda a: a.sum(axis=0), x)
    assert_close(nk.max(x, axis=0, strategy=strategy), lambda a: a.max(axis=0), x, exact=True)
    np.testing.assert_array_equal(nk.argmax(x, axis=0, strategy=strategy), x.argmax(axis=0))


@pytest.mark.parametrize("dtype", ["float16", "int32", "uint64", "float64"])
def test_vector_columns_every_width(dtype):
    """Middle-axis reductions (outer kept rows of whole vectors) of every vector width."""
    x = sample(np.random.default_rng(3), (3, 70, 16), dtype)
    assert _column_width(x, 1) == 16 // np.dtype(dtype).itemsize
    assert_close(nk.sum(x, axis=1, strategy=DEFAULT), lambda a: a.sum(axis=1), x)
    assert_close(nk.min(x, axis=1, keepdims=True, strategy=DEFAULT),
                 lambda a: a.min(axis=1, keepdims=True), x, exact=True)
    np.testing.assert_array_equal(nk.argmin(x, axis=1, strategy=DEFAULT), x.argmin(axis=1))


def test_vector_columns_keep_element_order():
    x = sample(np.random.default_rng(2), (300, 8), "float32")
    x[150:, 1::2] = 0  # the last nonzero element of those columns is in row 149
    want = np.array([col[np.flatnonzero(col)[-1]] for col in x.T])
    assert _column_width(x, 0) == 4
    ordered = [s for s in STRATEGIES.values() if not s.commutative_required]
    assert ordered
    for strategy in ordered:
        np.testing.assert_array_equal(nk.reduce(x, last_nonzero, axis=0, strategy=strategy),
                                      want)


def test_partials_pass_splits_pieces_over_groups():
    """The column partials' pass gives each thread one round of loads where a warp's
    columns (or all the outputs) are left to a block, the other threads of a block
    of 256 splitting the pieces."""
    for outputs, pieces, columns in [(4096, 132, 32), (32768, 16, 128), (262144, 2, 256),
                                     (3, 40, 4), (20, 4, 32), (20, 1000, 32)]:
        assert axis_reduce.partial_columns(outputs, pieces, 256) == columns
    assert axis_reduce.partial_columns(4096, 132, 96) == 32  # 3 groups of 32


def test_split_rows_stay_in_one_wave():
    """Pieces of rows never spill past the blocks that fit at once: 128 column tiles
    where 1056 blocks fit take 8 pieces (1024 blocks), not 9 (1152: a second wave)."""
    assert axis_reduce._pieces(128, 4096, 1, 1056) == (8, 512)
    for groups in (1, 7, 100, 500, 1055):
        pieces, chunk = axis_reduce._pieces(groups, 1 << 20, 32, 1056)
        assert groups * pieces <= 1056 and pieces * chunk >= 1 << 20


@pytest.mark.simulator  # a GPU's PIECE_MIN_PER_THREAD caps 4096 rows at 128 pieces
def test_scalar_column_plan_fills_the_blocks_its_registers_allow(monkeypatch):
    """Where the grid is the planner's, split columns read by scalar loads (1023 of
    them: not whole vectors) fill one wave of the blocks that fit by the kernel's
    launch bounds (``column_registers``): 5 blocks of 256 a multiprocessor for a
    float32 sum, 4 for argmax and var, 2 for var under ``where=``; not 8, the most
    blocks of 256 a multiprocessor holds. 132 multiprocessors (an H200) faked."""
    from numbakern import ops
    from numbakern.ops.state import state_kit
    from numbakern.runtime.device import blocks_per_multiprocessor

    monkeypatch.setattr(axis_reduce, "resident_blocks",
                        lambda threads, registers: 132 * blocks_per_multiprocessor(
                            threads, registers))
    x = np.empty((4096, 1023), np.float32)
    av = layout.axis_view(x, (0,), False, True, resolve_stream(None, "numpy"))
    block, mask = WarpShuffle(256), np.ones(x.shape, bool)
    for op, dtypes, masked, per_multiprocessor in [
            (ops.SUM, ("float32",), False, 5), (ops.SUM, ("float64",), False, 5),
            (ops.ARGMAX, ("float32", "int64"), False, 4),
            (ops.MOMENTS, ("int64", "float64", "float64"), False, 4),
            (ops.MOMENTS, ("int64", "float64", "float64"), True, 2)]:
        kit = state_kit(op, tuple(np.dtype(d) for d in dtypes))
        job = axis_reduce.AxisReduce(av, kit, False, None, x.dtype, mask if masked else None)
        plan = job.plan(block, None)
        target = 132 * per_multiprocessor
        assert (plan.kernel, plan.width, plan.threads) == ("column", 1, 256)
        assert plan.blocks == 4 * axis_reduce._pieces(4, 4096, 1, target)[0]
        assert 0.9 * target < plan.blocks <= target, (op.name, masked)


# --- layouts: no copies, any strides ---------------------------------------------------


def _layouts():
    rng = np.random.default_rng(11)
    base = sample(rng, (4, 30, 6), "float32")
    return {
        "C": base,
        "F": np.asfortranarray(base),
        "sliced": sample(rng, (8, 64, 13), "float32")[::2, 5:35, ::-2],
        "transposed": base.transpose(2, 0, 1),
        "reversed": base[::-1, :, ::-1],
    }


@pytest.mark.parametrize("layout", list(_layouts()))
def test_layouts(layout):
    x = _layouts()[layout]
    for axis in [0, 1, 2, (0, 2), (1, 2)]:
        assert_close(nk.sum(x, axis=axis, strategy=DEFAULT), lambda a: np.sum(a, axis=axis), x)
    assert_close(nk.min(x, axis=(0, 1), strategy=STRATEGIES["atomic_fold/shared_tree"]),
                 lambda a: np.min(a, axis=(0, 1)), x, exact=True)


def test_device_input_gives_device_output():
    from numba import cuda

    x = sample(np.random.default_rng(2), (3, 40, 5), "int16")
    got = nk.sum(cuda.to_device(x), axis=1, keepdims=True, strategy=DEFAULT)
    assert hasattr(got, "copy_to_host")
    np.testing.assert_array_equal(got.copy_to_host(), x.sum(axis=1, keepdims=True))


def test_copy_only_when_layout_needs_it():
    from numba import cuda

    x4 = sample(np.random.default_rng(5), (3, 4, 5, 6), "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CopyWarning)
        got = nk.sum(cuda.to_device(x4), axis=(1, 3), strategy=DEFAULT)  # 2 kept, 2 reduced
    assert_close(got.copy_to_host(), lambda a: a.sum(axis=(1, 3)), x4)
    x = sample(np.random.default_rng(5), (3, 4, 5, 6, 2), "float32")
    with pytest.warns(CopyWarning):
        got = nk.sum(cuda.to_device(x), axis=(0, 2, 4), strategy=DEFAULT)  # 3 reduced
    assert_close(got.copy_to_host(), lambda a: a.sum(axis=(0, 2, 4)), x)
    assert_close(nk.sum(x, axis=(0, 2, 4), strategy=DEFAULT), lambda a: a.sum(axis=(0, 2, 4)), x)


# --- dtypes ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes(dtype):
    x = sample(np.random.default_rng(4), (5, 40), dtype)
    for axis in (0, 1):
        assert_close(nk.sum(x, axis=axis, strategy=DEFAULT), lambda a: np.sum(a, axis=axis), x)
        assert_close(nk.max(x, axis=axis, strategy=DEFAULT), lambda a: np.max(a, axis=axis), x,
                     exact=True)
    if np.dtype(dtype).kind != "f":
        np.testing.assert_array_equal(nk.xor_sum(x, axis=1, strategy=DEFAULT),
                                      np.bitwise_xor.reduce(x, axis=1))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # int8 sums wrap
def test_dtype_argument_and_float16_accumulation():
    x = np.full((2, 3000), 1.0, np.float16)  # float16 alone would stall at 2048
    got = nk.sum(x, axis=1, strategy=DEFAULT)
    assert got.dtype == np.float16 and np.all(got == 3000)
    x = sample(np.random.default_rng(6), (4, 30), "int8")
    for dtype in (np.int8, np.float32, np.uint16):
        assert_close(nk.sum(x, axis=0, dtype=dtype, strategy=DEFAULT),
                     lambda a: np.sum(a, axis=0, dtype=dtype), x)
    np.testing.assert_array_equal(nk.prod(x[:, :3], axis=0, dtype=np.int64, strategy=DEFAULT),
                                  np.prod(x[:, :3], axis=0, dtype=np.int64))


# --- empty reductions ------------------------------------------------------------------


def test_empty_axes():
    np.testing.assert_array_equal(nk.sum(np.zeros((3, 0)), axis=1), np.zeros(3))
    assert nk.prod(np.zeros((3, 0), np.int32), axis=1, keepdims=True).shape == (3, 1)
    assert nk.sum(np.zeros((0, 3)), axis=1).shape == (0,)
    assert nk.max(np.zeros((0, 3)), axis=1).shape == (0,)
    for x, axis in [(np.zeros((3, 0)), 1), (np.zeros((0, 3)), 0), (np.zeros((0, 0)), 1)]:
        with pytest.raises(ValueError, match="zero-size"):
            nk.max(x, axis=axis)


def test_nothing_reduced():
    x = sample(np.random.default_rng(9), (3, 4), "int8")
    np.testing.assert_array_equal(nk.sum(x, axis=(), strategy=DEFAULT), np.sum(x, axis=()))
    np.testing.assert_array_equal(nk.max(x[:, :1], axis=1, strategy=DEFAULT), x[:, 0])


# --- out= and axis=None ----------------------------------------------------------------


def test_out():
    x = sample(np.random.default_rng(10), (3, 20, 4), "float32")
    out = np.empty((3, 1, 4), np.float64)
    assert nk.sum(x, axis=1, keepdims=True, out=out, strategy=DEFAULT) is out
    # computed in float32 (the result dtype without out), then cast exactly into out
    assert_close(out.astype(np.float32), lambda a: np.sum(a, axis=1, keepdims=True), x)
    out = np.empty((20,), np.int64)
    assert nk.max(x.astype(np.int16), axis=(0, 2), out=out, strategy=DEFAULT) is out
    np.testing.assert_array_equal(out, np.max(x.astype(np.int16), axis=(0, 2)))
    out = np.empty((), np.float32)
    assert nk.sum(x, out=out, strategy=DEFAULT) is out
    assert_close(out, lambda a: np.asarray(np.sum(a), dtype=a.dtype), x)


def test_out_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="shape"):
        nk.sum(x, axis=0, out=np.empty(3, np.float32))
    with pytest.raises(ValueError, match="shape"):
        nk.sum(x, axis=0, keepdims=True, out=np.empty(4, np.float32))
    with pytest.raises(ValueError, match="shape"):
        nk.sum(x, out=np.empty((1,), np.float32))
    with pytest.raises(OutDtypeError):
        nk.sum(x, axis=0, out=np.empty(4, np.int64))
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        nk.sum(x, axis=0, out=[0, 0, 0, 0])
    read_only = np.empty(4, np.float32)
    read_only.setflags(write=False)
    with pytest.raises(ValueError, match="out must be a writeable"):  # before any kernel
        nk.sum(x, axis=0, out=read_only)


def test_out_device():
    from numba import cuda

    x = sample(np.random.default_rng(12), (6, 33), "int32")
    out = cuda.device_array(6, np.float64)
    assert nk.sum(cuda.to_device(x), axis=1, out=out, strategy=DEFAULT) is out
    np.testing.assert_array_equal(out.copy_to_host(), x.sum(axis=1).astype(np.float64))


STRIDED_OUTS = {  # a device out in any layout, as NumPy takes any: layout -> (the
    # host array it views, given the result's shape and dtype; the view). Numba's device
    # transpose copies, so Fortran order comes from the array itself.
    "column": (lambda shape, dt: np.zeros((shape[0], 3), dt), lambda a: a[:, 1]),
    "reversed": (lambda shape, dt: np.zeros(shape, dt), lambda a: a[::-1]),
    "Fortran order": (lambda shape, dt: np.zeros(shape, dt, order="F"), lambda a: a),
    "every other column, rows reversed":
        (lambda shape, dt: np.zeros((shape[0], 2 * shape[1]), dt), lambda a: a[::-1, ::2]),
}


@pytest.mark.parametrize("layout", list(STRIDED_OUTS))
@pytest.mark.parametrize("name", ["sum", "mean", "max", "argmax", "var"])
def test_out_device_in_any_layout(layout, name):
    from numba import cuda

    # a 1-D result for the 1-D layouts, (3, 33) for the others
    shape = (5, 33) if layout in ("column", "reversed") else (3, 5, 33)
    x = sample(np.random.default_rng(14), shape, "float32")
    want = getattr(np, name)(x.astype(np.float64), axis=1)
    host, view = STRIDED_OUTS[layout]
    base = cuda.to_device(host(want.shape, np.int64 if name == "argmax" else np.float32))
    out = view(base)
    assert getattr(nk, name)(cuda.to_device(x), axis=1, out=out) is out
    got = view(base.copy_to_host())  # Numba copies no view of negative strides back
    if name == "argmax":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_out_device_of_strides_between_elements_is_refused():
    """A device out whose strides are not whole elements (6 bytes between float32s)
    is refused before any kernel runs: every write would be misaligned."""
    from numba import cuda

    if nk.backend().is_simulator:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        memory = np.zeros(64, np.uint8).view(np.float32)
        out = FakeCUDAArray(np.lib.stride_tricks.as_strided(memory, (4,), (6,)))
    else:
        memory = cuda.device_array(64, np.uint8)
        out = cuda.devicearray.DeviceNDArray((4,), (6,), np.float32, gpu_data=memory.gpu_data)
    with pytest.raises(ValueError, match="not whole elements"):
        nk.sum(cuda.to_device(np.ones((4, 8), np.float32)), axis=1, out=out)


def test_axis_none_keepdims():
    x = sample(np.random.default_rng(13), (3, 5, 2), "int32")
    got = nk.sum(x, keepdims=True, strategy=DEFAULT)
    assert got.shape == (1, 1, 1) and got[0, 0, 0] == x.sum()
    assert isinstance(nk.sum(x, axis=(0, 1, 2), strategy=DEFAULT), np.int64)


# --- non-commutative ops keep element order along any axis ---------------------------


@nk.op(identity=0.0, commutative=False)
def first_nonzero(a, b):
    return a if a != 0 else b


def _first_nonzero_ref(x, axis):
    moved = np.moveaxis(x, axis, -1)
    idx = np.argmax(moved != 0, axis=-1)
    return np.take_along_axis(moved, idx[..., None], -1)[..., 0]


@pytest.mark.parametrize("shape,axis", [((1, 700), 1), ((3, 50), 1), ((300, 3), 0)])
def test_non_commutative_op(shape, axis):
    x = np.random.default_rng(1).uniform(1, 2, shape).astype(np.float32)
    x *= np.random.default_rng(2).uniform(size=shape) < 0.02  # mostly zeros
    s = TwoPass(WarpShuffle(32), blocks=2)
    got = nk.reduce(x, first_nonzero, axis=axis, strategy=s)
    np.testing.assert_array_equal(got, _first_nonzero_ref(x, axis))


# --- GPU: the same matrix at realistic shapes ------------------------------------------


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


GPU_CASES = [((32768, 4096), 1), ((4096, 32768), 1), ((1_000_000, 2), 1),
             ((4096, 32768), 0), ((1_000_000, 2), 0), ((3, 2_000_000), 1), ((64, 513, 7), (0, 2)),
             ((2, 3, 5_000_000), 2)]


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", nk.strategies.available())
@pytest.mark.parametrize("shape,axis", GPU_CASES)
def test_gpu_sum_max_vs_cupy(cp, strategy, shape, axis):
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    got = nk.sum(x, axis=axis, strategy=strategy)
    assert isinstance(got, cp.ndarray)
    want = x.astype(cp.float64).sum(axis=axis)
    scale = float(cp.abs(x).max()) * (x.size // want.size)
    assert float(cp.abs(got - want).max()) <= 4 * np.finfo(np.float32).eps * scale
    cp.testing.assert_array_equal(nk.max(x, axis=axis, strategy=strategy), x.max(axis=axis))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_gpu_dtypes(cp, dtype, strategy):
    x = sample(np.random.default_rng(0), (777, 1031), dtype)
    xd = cp.asarray(x)
    for axis in (0, 1, None):
        assert_close(cp.asnumpy(nk.sum(xd, axis=axis, strategy=strategy)),
                     lambda a: np.sum(a, axis=axis), x)
        np.testing.assert_array_equal(cp.asnumpy(nk.min(xd, axis=axis, strategy=strategy)),
                                      np.min(x, axis=axis))
    assert_close(nk.sum(x, axis=1, strategy=strategy), lambda a: np.sum(a, axis=1), x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_gpu_vector_rows(cp, dtype, strategy):
    x = sample(np.random.default_rng(1), (1000, 4112), dtype)  # rows of 16-byte multiples
    xd = cp.asarray(x)
    for view in (xd, xd[:1], xd[::3, 16:]):
        h = cp.asnumpy(view)
        assert_close(cp.asnumpy(nk.sum(view, axis=1, strategy=strategy)),
                     lambda a: np.sum(a, axis=1), h)
        np.testing.assert_array_equal(cp.asnumpy(nk.argmax(view, axis=1, strategy=strategy)),
                                      h.argmax(axis=1))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_tiny_rows(cp, dtype):
    n = 16 // np.dtype(dtype).itemsize // 2 or 2  # rows of 8 bytes (2 for 8-byte types)
    x = sample(np.random.default_rng(2), (100_003, n), dtype)
    xd = cp.asarray(x)
    assert_close(cp.asnumpy(nk.sum(xd, axis=1)), lambda a: np.sum(a, axis=1), x)
    np.testing.assert_array_equal(cp.asnumpy(nk.argmin(xd, axis=1)), x.argmin(axis=1))


@pytest.mark.gpu
def test_gpu_layouts_and_out(cp):
    x = cp.random.standard_normal((64, 2000, 24), dtype=cp.float32)
    for view in (x[:, ::3, 1:], cp.asfortranarray(x), x.transpose(2, 0, 1)):
        for axis in (0, 1, (0, 2), (1, 2)):
            want = view.astype(cp.float64).sum(axis=axis)
            got = nk.sum(view, axis=axis)
            assert float(cp.abs(got - want).max()) <= 1e-3 * float(cp.abs(want).max() + 1)
    out = cp.empty((64, 1, 24), cp.float64)
    assert nk.sum(x, axis=1, keepdims=True, out=out) is out
    cp.testing.assert_allclose(out, x.astype(cp.float64).sum(axis=1, keepdims=True),
                               rtol=1e-4, atol=1e-3)
