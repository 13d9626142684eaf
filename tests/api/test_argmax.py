"""argmax, argmin, max_with_indices, min_with_indices against NumPy.

Every strategy of ``numbakern.strategies.available()`` runs with small grids (64
threads, ``blocks=2``) on rows placed so that equal values meet at every level: two
lanes of one warp, one thread's own stride, two warps of a block, two blocks of a
split row, the two ends. ``tie_break_left=False`` is checked against NumPy on the
reversed axis. Indices are exact (the combine is a total order), so every comparison
is ``==``. GPU tests (``-m gpu``) repeat this at realistic shapes and past 2**32
elements.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbakern as nk
from numbakern import ops
from numbakern.ops.state import state_kit
from numbakern.core.axes import AxisError
from numbakern.core.deliver import OutDtypeError
from numbakern.strategies import AtomicFold, SharedTree, TwoPass, WarpShuffle
from numbakern.strategies.atomic_fold import _rank, folder_for

STRATEGIES = {s.label: s for s in nk.strategies.every("reduce", threads=64, blocks=2)}
DEFAULT = TwoPass(WarpShuffle(32), blocks=2)
ATOMIC = AtomicFold(SharedTree(32), blocks=2)
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]
REF = {"max": np.argmax, "min": np.argmin}
FN = {"max": nk.argmax, "min": nk.argmin}


def last_index(x, axis, direction):
    """NumPy's answer with ties going to the largest index: argmax of the reversed axis."""
    if axis is None:
        return x.size - 1 - REF[direction](x.ravel()[::-1])
    return x.shape[axis] - 1 - REF[direction](np.flip(x, axis), axis=axis)


def check(x, axis, strategy, direction="max", **kw):
    """Both tie rules against NumPy; returns nothing, asserts exactly."""
    left = FN[direction](x, axis=axis, strategy=strategy, **kw)
    right = FN[direction](x, axis=axis, strategy=strategy, tie_break_left=False, **kw)
    want = REF[direction](x, axis=axis)
    assert np.asarray(left).dtype == np.int64
    np.testing.assert_array_equal(left, want)
    np.testing.assert_array_equal(right, last_index(x, axis, direction))


# --- the order key the atomic fold packs (no kernels) ---------------------------------


@pytest.mark.simulator  # device functions called from Python
def test_float_rank_is_monotone_and_ties_zeros():
    rank, unrank = _rank(np.dtype(np.float32))
    info = np.finfo(np.float32)
    values = np.array([-np.inf, -info.max, -1.5, -info.tiny, -info.smallest_subnormal, -0.0,
                       0.0, info.smallest_subnormal, info.tiny, 1.0, 1.5, info.max, np.inf],
                      np.float32)
    keys = [int(rank(v)) for v in values]
    assert keys == sorted(keys) and len(set(keys)) == len(values) - 1  # -0.0 == 0.0
    assert keys[5] == keys[6]
    back = np.array([unrank(np.uint32(k)) for k in keys], np.float32)
    np.testing.assert_array_equal(back, values)


@pytest.mark.simulator  # device functions called from Python
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32",
                                   "uint32"])
def test_integer_rank_is_monotone(dtype):
    rank, unrank = _rank(np.dtype(dtype))
    if dtype == "bool":
        values = np.array([False, True])
    else:
        info = np.iinfo(dtype)
        values = np.unique(np.array([info.min, info.min + 1, -1, 0, 1, info.max - 1,
                                     info.max]).clip(info.min, info.max).astype(dtype))
    keys = [int(rank(v)) for v in values]
    assert keys == sorted(set(keys))
    np.testing.assert_array_equal(np.array([unrank(np.uint32(k)) for k in keys]), values)


def test_folder_methods():
    def method(dtype, count):
        kit = state_kit(ops.ARGMAX, (np.dtype(dtype), ops.INDEX_DTYPE))
        return folder_for(ops.ARGMAX, kit, count).method

    assert method("float32", 2**32) == "packed"
    assert method("int8", 2**32 + 1) == "lock"  # indices past 32 bits
    assert method("float64", 10) == "lock"  # values past 32 bits


# --- ties at every level of the combine -----------------------------------------------

N = 600
TIES = {  # two positions of the extreme value in one row of N
    "ends": (0, N - 1),
    "inside_a_warp": (3, 17),  # lanes 3 and 17 of the first pass
    "one_thread": (5, 5 + 64 * 2),  # the same lane, two trips of its loop
    "across_warps": (10, 10 + 32),  # lane 10 of warps 0 and 1 (64 lanes per row)
    "across_blocks": (40, N - 40),  # the two pieces of a split row
}


def tie_row(positions, direction, dtype=np.float32, seed=0):
    x = np.random.default_rng(seed).uniform(-1, 1, (1, N)).astype(dtype)
    x[0, list(positions)] = 2 if direction == "max" else -2
    return x


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("lanes", [32, 64])
@pytest.mark.parametrize("case", list(TIES))
def test_ties_in_rows(name, lanes, case):
    x = tie_row(TIES[case], "max")
    check(x, 1, STRATEGIES[name], lanes=lanes)


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("case", ["across_warps", "across_blocks"])
def test_ties_argmin(name, case):
    check(tie_row(TIES[case], "min"), 1, STRATEGIES[name], "min", lanes=64)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_ties_in_columns(name):
    # (600, 3), axis 0: the column kernel, 4 columns x 16 groups, rows split in 2
    x = np.random.default_rng(1).uniform(-1, 1, (N, 3)).astype(np.float32)
    for col, rows in enumerate([(0, N - 1), (3, 7), (10, 500)]):  # ends, groups, pieces
        x[list(rows), col] = 2
    check(x, 0, STRATEGIES[name])
    check(-x, 0, STRATEGIES[name], "min")


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_many_rows_many_ties(name):
    x = np.random.default_rng(2).integers(0, 4, (9, 77)).astype(np.int16)  # ties everywhere
    check(x, 1, STRATEGIES[name])
    check(x, 0, STRATEGIES[name], "min")


# --- NaN and infinities ----------------------------------------------------------------


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_nan(name):
    x = np.random.default_rng(3).uniform(-1, 1, (4, 200)).astype(np.float32)
    x[:, 7] = np.inf
    for row, cols in enumerate([[0], [100], [199], [50, 150]]):  # start, middle, end, two
        x[row, cols] = np.nan
    for direction in ("max", "min"):
        check(x, 1, STRATEGIES[name], direction)
        values, _ = getattr(nk, f"{direction}_with_indices")(x, axis=1, strategy=STRATEGIES[name])
        assert np.isnan(values).all()


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_nan_across_blocks(name):
    x = np.random.default_rng(4).uniform(-1, 1, (1, N)).astype(np.float64)
    x[0, [100, 500]] = np.nan
    check(x, 1, STRATEGIES[name])
    check(x, None, STRATEGIES[name], "min")


@pytest.mark.parametrize("strategy", [DEFAULT, ATOMIC], ids=["two_pass", "atomic_fold"])
@pytest.mark.parametrize("fill", [-np.inf, np.inf, np.nan])
def test_all_equal_extremes(strategy, fill):
    x = np.full((2, 300), fill, np.float32)
    for direction in ("max", "min"):
        check(x, 1, strategy, direction)
        check(x[:1], None, strategy, direction)  # one row of 300: split over the blocks


def test_length_one_axis():
    x = np.random.default_rng(5).standard_normal((7, 1, 3)).astype(np.float32)
    for axis in (1, -2):
        np.testing.assert_array_equal(nk.argmax(x, axis=axis, strategy=DEFAULT), np.zeros((7, 3)))
    values, indices = nk.min_with_indices(x, axis=1, keepdims=True, strategy=ATOMIC)
    np.testing.assert_array_equal(values, x)
    np.testing.assert_array_equal(indices, np.zeros((7, 1, 3)))


# --- layouts, shapes, keepdims ------------------------------------------------------------


def _layouts():
    rng = np.random.default_rng(6)
    base = rng.integers(0, 5, (4, 40, 3)).astype(np.float32)
    return {"F": np.asfortranarray(base), "sliced": base[::2, 3:, ::-1],
            "transposed": base.transpose(2, 0, 1)}


@pytest.mark.parametrize("layout", list(_layouts()))
@pytest.mark.parametrize("strategy", [DEFAULT, ATOMIC], ids=["two_pass", "atomic_fold"])
def test_layouts(layout, strategy):
    x = _layouts()[layout]
    for axis in (None, 0, 1, 2):  # None: the flat C-order index, whatever the layout
        check(x, axis, strategy)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (2, 3, 1, 4)])
def test_keepdims_shapes(shape):
    x = np.random.default_rng(7).integers(0, 3, shape).astype(np.int8)
    for axis in [None, *range(len(shape)), -1]:
        for keepdims in (False, True):
            for direction in ("max", "min"):
                got = FN[direction](x, axis=axis, keepdims=keepdims, strategy=DEFAULT)
                want = REF[direction](x, axis=axis, keepdims=keepdims)
                assert np.shape(got) == want.shape
                np.testing.assert_array_equal(got, want)


def test_zero_d():
    x = np.array(2.5, np.float32)
    assert nk.argmax(x) == 0 and nk.argmin(x, axis=-1) == 0
    assert nk.argmax(x, keepdims=True).shape == ()
    with pytest.raises(AxisError):
        nk.argmax(x, axis=1)


# --- dtypes ------------------------------------------------------------------------------


def extremes_row(dtype, n=500):
    """A row of one dtype with its two extreme values each placed twice, in different
    halves (the pieces of a split row), over random small values."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(8)
    if dtype.kind == "b":
        x = np.zeros(n, bool)
        x[[70, 430]] = True
        return x[None]
    if dtype.kind == "f":
        x = rng.uniform(-1, 1, n).astype(dtype)
        lo, hi = np.finfo(dtype).min, np.finfo(dtype).max
    else:
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -5), 6, n).astype(dtype)
        lo, hi = info.min, info.max
    x[[70, 430]] = hi
    x[[90, 410]] = lo
    return x[None]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", [DEFAULT, ATOMIC], ids=["two_pass", "atomic_fold"])
def test_dtypes(dtype, strategy):
    x = extremes_row(dtype)
    for direction in ("max", "min"):
        check(x, 1, strategy, direction)
        values, indices = getattr(nk, f"{direction}_with_indices")(x, axis=1, strategy=strategy)
        assert values.dtype == x.dtype and indices.dtype == np.int64
        np.testing.assert_array_equal(values, getattr(np, direction)(x, axis=1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])  # packed words, then the lock
def test_atomic_fold_many_rows_split(dtype):
    s = AtomicFold(WarpShuffle(32), blocks=6)  # 3 rows, 2 pieces each
    x = np.random.default_rng(9).integers(0, 3, (3, 400)).astype(dtype)
    x[1, [5, 390]] = 7
    check(x, 1, s)
    check(x, 1, s, "min")


def test_values_and_indices_agree():
    x = np.random.default_rng(10).integers(-9, 9, (5, 60, 4)).astype(np.int32)
    for fn, ref in [(nk.max_with_indices, np.max), (nk.min_with_indices, np.min)]:
        for strategy in STRATEGIES.values():
            values, indices = fn(x, axis=1, strategy=strategy)
            np.testing.assert_array_equal(values, ref(x, axis=1))
            np.testing.assert_array_equal(np.take_along_axis(x, indices[:, None], 1)[:, 0],
                                          values)


def test_values_and_indices_come_as_torch_max_s_named_tuple_by_axis_or_dim():
    """``torch.max(x, dim)``'s fields and keywords: ``.values``, ``.indices``, ``dim=``,
    ``keepdim=``; a repeated call (a replay) and the Dask form give the same named tuple."""
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    x = np.random.default_rng(11).standard_normal((4, 37)).astype(np.float32)
    for direction in ("max", "min"):
        fn = getattr(nk, f"{direction}_with_indices")
        want = getattr(torch, direction)(torch.from_numpy(x), dim=1)
        for _ in range(2):
            got = fn(x, dim=1)
            assert type(got).__name__ == f"{direction.title()}WithIndices"
            assert got._fields == ("values", "indices")
            np.testing.assert_array_equal(got.values, want.values.numpy())
            np.testing.assert_array_equal(got.indices, want.indices.numpy())
        t = fn(torch.from_numpy(x), dim=-1)
        assert type(t) is type(got) and torch.equal(t.indices, want.indices)
        lazy = fn(da.from_array(x, chunks=(2, 10)), dim=1)
        assert type(lazy) is type(got)
        np.testing.assert_array_equal(lazy.indices.compute(), want.indices.numpy())
        with pytest.raises(TypeError, match="not both"):
            fn(x, 1, dim=1)
        np.testing.assert_array_equal(fn(x).indices, getattr(np, f"arg{direction}")(x))
        kept = getattr(torch, direction)(torch.from_numpy(x), dim=1, keepdim=True)
        for got in (fn(torch.from_numpy(x), dim=1, keepdim=True),
                    fn(da.from_array(x, chunks=(2, 10)), dim=1, keepdim=True)):
            assert tuple(got.values.shape) == tuple(kept.values.shape) == (4, 1)
            np.testing.assert_array_equal(np.asarray(got.indices), kept.indices.numpy())
        with pytest.raises(TypeError, match="keepdims= or torch's keepdim=, not both"):
            fn(x, dim=1, keepdims=True, keepdim=True)
        assert fn(x, dim=1, keepdims=np.False_, keepdim=True).values.shape == (4, 1)
        with pytest.raises(TypeError, match="keepdim must be True or False"):
            fn(x, dim=1, keepdim="yes")


# --- errors and out= ---------------------------------------------------------------------


def test_axis_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError):
        nk.argmax(x, axis=(0,))
    with pytest.raises(TypeError):
        nk.argmin(x, axis=1.0)
    with pytest.raises(AxisError):
        nk.argmax(x, axis=2)
    with pytest.raises(AxisError):
        nk.max_with_indices(x, axis=-3)


def test_empty():
    with pytest.raises(ValueError, match="empty sequence"):
        nk.argmax(np.zeros((3, 0)), axis=1)
    with pytest.raises(ValueError, match="empty sequence"):
        nk.argmin(np.zeros((0, 3)))
    got = nk.argmax(np.zeros((0, 3)), axis=1)
    assert got.shape == (0,) and got.dtype == np.int64
    with pytest.raises(TypeError):
        nk.argmax(np.zeros(3, complex))


def test_out():
    x = np.random.default_rng(11).standard_normal((4, 30)).astype(np.float32)
    out = np.empty(4, np.int64)
    assert nk.argmax(x, axis=1, out=out, strategy=DEFAULT) is out
    np.testing.assert_array_equal(out, x.argmax(axis=1))
    out32 = np.empty((1, 30), np.int32)  # same_kind: int32 takes int64 indices
    assert nk.argmin(x, axis=0, keepdims=True, out=out32, strategy=DEFAULT) is out32
    np.testing.assert_array_equal(out32, x.argmin(axis=0, keepdims=True))
    values, indices = np.empty(30, np.float64), np.empty(30, np.int64)
    got = nk.max_with_indices(x, axis=0, out=(values, indices), strategy=DEFAULT)
    assert got[0] is values and got[1] is indices
    np.testing.assert_array_equal(values, x.max(axis=0))


def test_out_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="shape"):
        nk.argmax(x, axis=0, out=np.empty(3, np.int64))
    with pytest.raises(ValueError, match="shape"):
        nk.argmax(x, axis=0, keepdims=True, out=np.empty(4, np.int64))
    with pytest.raises(OutDtypeError):
        nk.argmax(x, axis=0, out=np.empty(4, np.float64))
    with pytest.raises(OutDtypeError):
        nk.max_with_indices(x, axis=0, out=(np.empty(4, np.int32), None))
    with pytest.raises(TypeError, match="pair"):
        nk.max_with_indices(x, axis=0, out=np.empty(4))
    # NumPy casts an index out to int64 under 'safe': any integer but uint64
    for fn in (nk.argmax, nk.argmin, nk.nanargmax, nk.nanargmin):
        with pytest.raises(OutDtypeError, match=f"^{fn.__name__}: indices need an integer "
                                                "out that casts safely to int64"):
            fn(x, axis=0, out=np.empty(4, np.uint64))
        with pytest.raises(TypeError, match="safe"):
            getattr(np, fn.__name__)(x, axis=0, out=np.empty(4, np.uint64))
        np.testing.assert_array_equal(fn(x, axis=0, out=np.empty(4, np.uint32)), np.zeros(4))
    with pytest.raises(OutDtypeError, match="casts safely to int64"):
        nk.max_with_indices(x, axis=0, out=(np.empty(4, np.float32), np.empty(4, np.uint64)))
    shared = np.empty(4, np.int64)  # the values would overwrite the indices
    for pair in ((shared, shared), (shared[::-1], shared)):
        with pytest.raises(ValueError, match="^max_with_indices: the arrays of out share"):
            nk.max_with_indices(x.astype(np.int64), axis=0, out=pair)


# --- GPU ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_gpu_logits(cp, strategy):
    logits = cp.random.standard_normal((8192, 50257), dtype=cp.float32)
    logits[::7, 123] = logits[::7].max(axis=1) + 1  # ties: two copies of the maximum
    logits[::7, 40000] = logits[::7, 123]
    got = nk.argmax(logits, axis=-1, strategy=strategy)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.int64
    cp.testing.assert_array_equal(got, cp.argmax(logits, axis=-1))
    values, indices = nk.max_with_indices(logits, axis=-1, strategy=strategy,
                                          tie_break_left=False)
    cp.testing.assert_array_equal(values, logits.max(axis=-1))
    want_right = 50256 - cp.argmax(logits[:, ::-1], axis=-1)
    cp.testing.assert_array_equal(indices, want_right)


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_gpu_past_2_to_the_32(cp, strategy):
    n = 2**32 + 100  # int8: ~4.3 GB
    x = cp.zeros(n, cp.int8)
    x[[2**32 + 50, 2**32 + 70]] = 5
    x[[2**32 + 60, 2**32 + 80]] = -5
    assert int(nk.argmax(x, strategy=strategy)) == 2**32 + 50
    assert int(nk.argmax(x, strategy=strategy, tie_break_left=False)) == 2**32 + 70
    assert int(nk.argmin(x, strategy=strategy)) == 2**32 + 60
    values, indices = nk.min_with_indices(x.reshape(2, -1), axis=1, strategy=strategy)
    cp.testing.assert_array_equal(indices, cp.asarray([0, (2**32 + 60) - n // 2]))
    cp.testing.assert_array_equal(values, cp.asarray([0, -5], cp.int8))


GPU_SHAPES = [((32768, 4096), 1), ((4096, 32768), 1), ((4096, 32768), 0), ((1_000_000, 2), 1),
              ((1_000_000, 2), 0), ((2, 1_000_000), 1), ((16, 2_000_003), None)]


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", nk.strategies.available())
@pytest.mark.parametrize("shape,axis", GPU_SHAPES)
def test_gpu_shapes_with_ties(cp, strategy, shape, axis):
    x = cp.random.randint(0, 50, shape).astype(cp.float32)  # many ties
    x[0, 0] = cp.nan if shape[0] > 100 else x[0, 0]
    host = cp.asnumpy(x)
    for direction in ("max", "min"):
        got = FN[direction](x, axis=axis, strategy=strategy)
        np.testing.assert_array_equal(cp.asnumpy(got), REF[direction](host, axis=axis))
        got = FN[direction](x, axis=axis, strategy=strategy, tie_break_left=False)
        np.testing.assert_array_equal(cp.asnumpy(got), last_index(host, axis, direction))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_gpu_dtypes_and_layouts(cp, dtype, strategy):
    host = np.concatenate([extremes_row(dtype, 5000)] * 300)  # (300, 5000)
    for x in (host, cp.asarray(host), cp.asfortranarray(cp.asarray(host)),
              cp.asarray(host)[::2, 7:]):
        ref = cp.asnumpy(x) if isinstance(x, cp.ndarray) else x
        for axis in (0, 1, None):
            for direction in ("max", "min"):
                got = FN[direction](x, axis=axis, strategy=strategy)
                got = cp.asnumpy(got) if isinstance(got, cp.ndarray) else got
                np.testing.assert_array_equal(got, REF[direction](ref, axis=axis))
