"""Scans: cumsum, cumprod, associative_scan over every block x grid scan strategy.

Simulator tests use blocks of 32 or 64 threads and 1-3 items per thread, so tiles are
32-192 elements and every size below spans a few tiles: the carries between tiles
(and, for reduce-then-scan, between chunks) are exercised on a laptop. References:
integers exactly (NumPy's, with its wraparound); floats against a float64 scan, within
``4 * eps * (items + log2(threads) + tiles)`` of the running sum of magnitudes, the
error bound of a scan whose combines nest that deep. GPU tests (marked ``gpu``) repeat
the contract at up to 2**32 elements.
"""

import math
import time
import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
import numbakern.api.scans as scans_mod
from numbakern.core import arrays
from numbakern.kernels import scan_rows as rows_mod
from numbakern.kernels import scan_tiles
from numbakern.ops.state import state_kit
from numbakern.runtime.device import SIMULATOR_SHORT
from numbakern.strategies import (
    REGISTRY,
    Blelloch,
    DecoupledLookback,
    HillisSteele,
    ReduceThenScan,
    SharedTree,
    TwoPass,
    WarpShuffle,
    decoupled_lookback,
    resolve_scan,
)

COMBOS = nk.strategies.available("scan")
MODES = [(False, False), (True, False), (False, True), (True, True)]  # (exclusive, reverse)


def make(spec: str, threads: int = 32, items: int = 2, blocks: int = 3, hold: str = "shared"):
    grid, block = spec.split("/")
    blk = REGISTRY["block"][block](threads)
    if grid == "reduce_then_scan":
        return ReduceThenScan(blk, blocks=blocks, items=items, hold=hold)
    return DecoupledLookback(blk, items=items, hold=hold)


def ref_scan(x, f, exclusive=False, reverse=False, empty=0) -> list:
    """Sequential reference: a Python loop over ``f`` in the scan's order."""
    seq = list(x)[::-1] if reverse else list(x)
    out, acc = [], None
    for v in seq:
        if exclusive:
            out.append(empty if acc is None else acc)
        acc = v if acc is None else f(acc, v)
        if not exclusive:
            out.append(acc)
    return out[::-1] if reverse else out


def np_scan(x, exclusive=False, reverse=False, fn=np.cumsum, empty=0):
    """NumPy's scan with the exclusive / reverse variants built from it."""
    y = fn(x[::-1])[::-1] if reverse else fn(x)
    if not exclusive:
        return y
    first = np.full(1, empty, dtype=y.dtype)
    return np.concatenate([y[1:], first]) if reverse else np.concatenate([first, y[:-1]])


def float_close(got, x64, exclusive=False, reverse=False, depth=64):
    """``got`` against a float64 scan, within the nesting-depth error bound."""
    ref = np_scan(x64, exclusive, reverse)
    scale = np_scan(np.abs(x64), exclusive, reverse)
    eps = np.finfo(got.dtype if got.dtype != np.float16 else np.float32).eps
    tol = 4 * eps * depth * scale + np.finfo(got.dtype).eps * np.abs(ref) + 1e-30
    return np.all(np.abs(got.astype(np.float64) - ref) <= tol)


# --- every strategy: sizes around warp, block and tile boundaries ------------------------


# A covering set, not the cross product: every strategy once, each block strategy and
# each grid at both 32 and 64 threads (the tile edges move with the thread count).
SIZED = [(spec, 32 if k % 2 == 0 else 64) for k, spec in enumerate(COMBOS)]


@pytest.mark.parametrize("spec,threads", SIZED, ids=[f"{s}-{t}" for s, t in SIZED])
def test_sizes_every_strategy(spec, threads):
    tile = threads * 2
    rng = np.random.default_rng(threads)
    g = make(spec, threads)
    sizes = [1, 31, 33, tile - 1, tile, tile + 1, 3 * tile + 5]
    for k, n in enumerate(sizes):
        if k % 2:  # int32 in, int64 state: exact, and the look-back's separate-flag path
            x = rng.integers(-1000, 1000, n).astype(np.int32)
            got = nk.cumsum(x, strategy=g)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, np.cumsum(x), err_msg=f"{spec} n={n}")
        else:  # float32: the packed flag-and-value path
            x = rng.uniform(-1, 1, n).astype(np.float32)
            got = nk.cumsum(x, strategy=g)
            assert got.dtype == np.float32 and got.shape == (n,)
            assert float_close(got, x.astype(np.float64)), f"{spec} n={n}"


@pytest.mark.simulator
@pytest.mark.parametrize("grid", ["decoupled_lookback", "reduce_then_scan"])
def test_rows_past_the_simulators_short_length_scan_in_wide_tiles(grid):
    """A default grid's tiles hold 2 items a thread up to ``SIMULATOR_SHORT`` elements
    and 16 past it (several tiles and a partial one), whose scans are exact on small
    integers, as int32 summed in int64 and as float32, forwards and in reverse."""
    assert [scan_tiles.auto_items(4, 64, n=n) for n in (SIMULATOR_SHORT, SIMULATOR_SHORT + 1)] \
        == [2, 16]
    strategy = REGISTRY["scan"][grid]()
    n = SIMULATOR_SHORT + 33
    x = np.random.default_rng(3).integers(-8, 9, n)
    for dtype in (np.int32, np.float32):
        for reverse in (False, True):
            got = nk.cumsum(x.astype(dtype)[::-1] if reverse else x.astype(dtype),
                            strategy=strategy)
            np.testing.assert_array_equal(got, np.cumsum(x[::-1] if reverse else x),
                                          err_msg=f"{grid} {dtype.__name__}")


@pytest.mark.parametrize("spec", COMBOS)
def test_modes_every_strategy(spec):
    """Inclusive, exclusive, reverse and both on an exact sum; the ordered op in two of
    the modes, one of them reverse (every block strategy, and every grid, meets all
    four over the strategies)."""
    rng = np.random.default_rng(1)
    g = make(spec, items=3, blocks=2)
    n = 2 * 32 * 3 + 17  # three tiles, the last partial: reduce-then-scan's two chunks
    # (two tiles, then one) carry within a chunk and between chunks
    x = rng.integers(-100, 100, n).astype(np.int16)
    v = (rng.integers(1, 9, n) * (rng.random(n) < 0.2)).astype(np.float64)
    k = COMBOS.index(spec)
    for m, (exclusive, reverse) in enumerate(MODES):
        got = nk.cumsum(x, exclusive=exclusive, reverse=reverse, strategy=g)
        np.testing.assert_array_equal(got, np_scan(x.astype(np.int64), exclusive, reverse),
                                      err_msg=f"{spec} exclusive={exclusive} reverse={reverse}")
        if m % 2 != k % 2:
            continue
        got = nk.associative_scan(v, last_nonzero, exclusive=exclusive, reverse=reverse,
                                  strategy=g)
        want = ref_scan(v, last_nonzero.combine, exclusive, reverse, empty=0.0)
        np.testing.assert_array_equal(got, np.array(want),
                                      err_msg=f"{spec} exclusive={exclusive} reverse={reverse}")


@pytest.mark.parametrize("spec", ["decoupled_lookback/warp_shuffle",
                                  "reduce_then_scan/blelloch"])
def test_items_held_in_registers(spec):
    """Item prefixes held in registers give the scans that shared memory gives (the
    default hold: test_modes_every_strategy runs it, every mode on every strategy)."""
    x = np.random.default_rng(12).integers(-100, 100, 3 * 64 + 7).astype(np.int32)
    g = make(spec, hold="registers")
    for exclusive, reverse in MODES:
        got = nk.cumsum(x, exclusive=exclusive, reverse=reverse, strategy=g)
        np.testing.assert_array_equal(got, np_scan(x.astype(np.int64), exclusive, reverse),
                                      err_msg=f"{spec} registers {exclusive} {reverse}")
    with pytest.raises(ValueError, match="hold"):
        DecoupledLookback(hold="global")


@nk.op(identity=0.0, commutative=False)
def last_nonzero(a, b):
    """Forward fill: the last non-zero value so far (associative, not commutative)."""
    return b if b != 0 else a


# A sum whose "identity" is not one: any result that folded it in would be 100 off.
NOT_AN_IDENTITY = nk.Op("sum_bad_identity", lambda a, b: a + b, 100)


@pytest.mark.parametrize("spec", COMBOS)
def test_identity_never_folded_in(spec):
    x = np.random.default_rng(2).integers(-50, 50, 2 * 64 + 9).astype(np.int64)  # 3 tiles
    g = make(spec)
    for reverse in (False, True):
        got = nk.associative_scan(x, NOT_AN_IDENTITY, reverse=reverse, strategy=g)
        np.testing.assert_array_equal(got, np_scan(x, False, reverse), err_msg=spec)
    got = nk.associative_scan(x, NOT_AN_IDENTITY, exclusive=True, strategy=g)
    np.testing.assert_array_equal(got[1:], np.cumsum(x)[:-1])
    assert got[0] == 100  # the exclusive scan's first element is the op's identity


# A non-commutative two-field op: (m, c) is the map h -> m*h + c (mod P); combining
# composes the maps in element order. Element i maps to (x[i], i).
P = 1_000_003


def _affine(a0, a1, b0, b1):
    return (a0 * b0) % P, (b0 * a1 + b1) % P


def _affine_map(v, i):
    return v, i


AFFINE = nk.Op("affine", _affine, lambda dtypes: (1, 0), commutative=False, fields=2,
               map=_affine_map)


def affine_ref(x, exclusive, reverse):
    idx = np.arange(len(x))
    pairs = list(zip(x.tolist(), idx.tolist()))
    got = ref_scan(pairs, lambda a, b: _affine(*a, *b), exclusive, reverse, empty=(1, 0))
    return (np.array([p[0] for p in got], dtype=np.int64),
            np.array([p[1] for p in got], dtype=np.int64))


@pytest.mark.parametrize("spec", COMBOS)
def test_two_field_non_commutative_op(spec):
    x = np.random.default_rng(3).integers(1, P, 2 * 64 + 5).astype(np.int64)  # 3 tiles
    g = make(spec)
    for exclusive, reverse in [(False, False), (False, True), (True, True)]:
        m, c = nk.associative_scan(x, AFFINE, exclusive=exclusive, reverse=reverse,
                                   strategy=g)
        assert m.dtype == np.int64 and c.dtype == np.int64
        want_m, want_c = affine_ref(x, exclusive, reverse)
        np.testing.assert_array_equal(m, want_m, err_msg=f"{spec} {exclusive} {reverse}")
        np.testing.assert_array_equal(c, want_c, err_msg=f"{spec} {exclusive} {reverse}")


@pytest.mark.parametrize("spec", ["decoupled_lookback/hillis_steele",
                                  "reduce_then_scan/warp_shuffle"])
def test_running_max_with_indices(spec):
    """cummax with indices: the argmax pair op, first occurrence on ties, NaN wins."""
    rng = np.random.default_rng(13)
    x = rng.integers(0, 20, 3 * 64 + 11).astype(np.float32)  # many ties
    x[150] = np.nan
    pairs = list(zip(x.tolist(), range(x.size)))
    first = spec.startswith("decoupled")  # the two specs split the four cases between them
    for name, op, reverse in (("argmax", nk.ops.ARGMAX, not first),
                              ("argmin", nk.ops.ARGMIN, first)):
        values, index = nk.associative_scan(x, name, reverse=reverse, strategy=make(spec))
        assert values.dtype == np.float32 and index.dtype == np.int64
        want = ref_scan(pairs, lambda a, b: op.combine(*a, *b), False, reverse)
        np.testing.assert_array_equal(values, np.array([w[0] for w in want], np.float32))
        np.testing.assert_array_equal(index, [w[1] for w in want])
    if not first:  # the default strategy's case, once
        return
    half = x[:150].astype(np.float16)  # float16 values are held as float32 in the state
    values, index = nk.associative_scan(half, "argmax")
    assert values.dtype == np.float16
    np.testing.assert_array_equal(values, np.maximum.accumulate(half))
    assert all(index[i] == np.argmax(half[:i + 1]) for i in range(150))


def test_cummax_and_cummin_return_named_pairs_as_topk_and_replay():
    """``(values, indices)`` as a named tuple (``torch.return_types.cummax``'s fields,
    as :class:`numbakern.api.select.TopK`'s), for every input kind, ``out=`` and an
    empty input; a device call still replays."""
    from numbakern.runtime import replay

    x = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], dtype=np.float32)
    for fn, kind, ufunc in ((nk.cummax, scans_mod.CumMax, np.maximum),
                            (nk.cummin, scans_mod.CumMin, np.minimum)):
        assert kind._fields == ("values", "indices")
        r = fn(x, axis=1)
        assert type(r) is kind
        np.testing.assert_array_equal(r.values, ufunc.accumulate(x, axis=1))
        assert r.indices.dtype == np.int64 and r.indices is r[1]
        outs = (np.empty(10, np.float32), np.empty(10, np.int64))
        r = fn(x, out=outs)
        assert type(r) is kind and r.values is outs[0] and r.indices is outs[1]
        assert type(fn(np.empty((0, 3), np.float32), axis=0)) is kind
        d = cuda.to_device(x)
        replay.forget()
        before = replay.counts["replayed"]
        for _ in range(3):
            r = fn(d, axis=1)
            assert type(r) is kind
            np.testing.assert_array_equal(r.values.copy_to_host(), ufunc.accumulate(x, axis=1))
        assert replay.counts["replayed"] == before + 2


def test_torchs_scans_of_a_0d_input_along_its_axis_are_0d():
    """torch.cummax, cummin and logcumsumexp of a 0-d tensor along dim 0 or -1 give
    0-d results (NumPy's scans, and axis=None, give (1,)); a 0-d out is written."""
    torch = pytest.importorskip("torch")
    t = torch.tensor(2.5)
    for name in ("cummax", "cummin", "logcumsumexp"):
        fn, ref = getattr(nk, name), getattr(torch, name)
        want = ref(t, 0)
        for dim in (0, -1):
            got = fn(t, dim=dim)
            for g, w in zip(got if name != "logcumsumexp" else (got,),
                            want if name != "logcumsumexp" else (want,)):
                assert isinstance(g, torch.Tensor) and g.shape == () and torch.equal(g, w)
        for x in (np.float32(2.5), cuda.to_device(np.array(2.5, np.float32))):
            got = fn(x, axis=0)
            for g in got if name != "logcumsumexp" else (got,):
                assert g.shape == ()
                host = g.copy_to_host() if hasattr(g, "copy_to_host") else g
                assert host == (2.5 if g.dtype.kind == "f" else 0)
        flat = fn(np.float32(2.5))  # axis=None: flattened
        assert np.shape(flat if name == "logcumsumexp" else flat.values) == (1,)
        with pytest.raises(np.exceptions.AxisError):
            fn(np.float32(2.5), axis=1)
    outs = (np.empty((), np.float32), np.empty((), np.int64))
    r = nk.cummax(np.float32(-1.5), axis=-1, out=outs)
    assert r.values is outs[0] and r.indices is outs[1] and outs[0] == -1.5 and outs[1] == 0
    out = np.empty((), np.float64)
    assert nk.logcumsumexp(np.float64(3.0), axis=0, out=out) is out and out == 3.0
    for bad in ((np.empty(1, np.float32), np.empty(1, np.int64)), np.empty((), np.float32)):
        with pytest.raises((ValueError, TypeError), match="cummax: out "):
            nk.cummax(np.float32(2.5), 0, out=bad)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    got = nk.logcumsumexp(np.array(3, ml_dtypes.bfloat16), -1)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype.name == "bfloat16"


def test_an_out_pair_with_a_none_is_refused_by_name():
    """A pair's fields are written together: (None, indices) was an AttributeError."""
    for x in (np.ones(3, np.float32), np.float32(1)):
        with pytest.raises(TypeError, match="cummin: out must be a tuple of 2 arrays"):
            nk.cummin(x, 0, out=(None, np.empty(np.shape(x), np.int64)))


def test_an_out_pair_needs_integer_indices():
    """cummax's, cummin's and associative_scan's argmax/argmin indices go to a signed
    integer ``out`` (any width; torch's wants int64): a float or unsigned one is
    refused with the same words, not written as floats."""
    x = np.array([[1.0, 3.0, 2.0], [0.0, -1.0, 5.0]], np.float32)
    for unsigned in (np.uint32, np.uint64):
        with pytest.raises(nk.OutDtypeError, match="^cummax: indices need a signed integer"):
            nk.cummax(x, axis=1, out=(np.zeros((2, 3), np.float32), np.zeros((2, 3), unsigned)))
    for op in ("argmax", nk.ops.arg_op("min")):
        with pytest.raises(nk.OutDtypeError,
                           match="^associative_scan: indices need a signed integer"):
            nk.associative_scan(x, op, axis=1, out=(np.zeros((2, 3)), np.zeros((2, 3))))
    for f in (nk.cummax, nk.cummin):
        for indices in (np.zeros((2, 3), np.float32), cuda.to_device(np.zeros((2, 3)))):
            values = np.zeros((2, 3), np.float32) if isinstance(indices, np.ndarray) else \
                cuda.to_device(np.zeros((2, 3), np.float32))
            source = x if isinstance(indices, np.ndarray) else cuda.to_device(x)
            with pytest.raises(nk.OutDtypeError, match=f"{f.__name__}: indices need a "
                                                       "signed integer out .*got dtype float"):
                f(source, axis=1, out=(values, indices))
        pair = (np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int32))
        assert f(x, axis=1, out=pair).indices is pair[1]
        want = [[0, 1, 1], [0, 0, 2]] if f is nk.cummax else [[0, 0, 0], [0, 1, 1]]
        np.testing.assert_array_equal(pair[1], want)


# --- dtypes and NumPy's result types -------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32",
                                   "uint32", "int64", "uint64", "float16", "float32",
                                   "float64"])
def test_cumsum_dtypes(dtype):
    rng = np.random.default_rng(4)
    n = 300
    if dtype == "bool":
        x = rng.integers(0, 2, n).astype(bool)
    elif dtype.startswith("float"):
        x = rng.uniform(-4, 4, n).astype(dtype)
    else:
        x = rng.integers(0, 120, n).astype(dtype)
    got = nk.cumsum(x)
    want = np.cumsum(x)
    assert got.dtype == want.dtype, dtype
    if dtype.startswith("float"):
        assert float_close(got, x.astype(np.float64)), dtype
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the simulator's integer wrap
def test_result_dtype_rules():
    x = np.arange(1, 40, dtype=np.uint8)
    got = nk.cumsum(x, dtype=np.int16)  # wraps in int16, as NumPy's
    np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int16))
    assert got.dtype == np.int16
    got = nk.cumprod(np.arange(1, 30, dtype=np.int8))
    assert got.dtype == np.cumprod(np.arange(1, 30, dtype=np.int8)).dtype
    np.testing.assert_array_equal(got, np.cumprod(np.arange(1, 30, dtype=np.int8)))
    b = np.array([True, False, True, True])
    assert nk.cumsum(b).tolist() == [1, 1, 2, 3] and nk.cumsum(b).dtype == np.int64
    assert nk.associative_scan(b, "bitwise_or").dtype == np.bool_
    assert nk.cumsum(np.float32(2.5)).shape == (1,)  # 0-d: flattened, as NumPy
    for axis in (0, -1):  # NumPy scans a 0-d array along axis 0 or -1 too
        np.testing.assert_array_equal(nk.cumsum(np.float32(2.5), axis=axis), [2.5])
    with pytest.raises(np.exceptions.AxisError):
        nk.cumsum(np.float32(2.5), axis=1)


def _numpy_cumprod(x, exclusive=False, reverse=False, nan=False):
    """NumPy's sequential cumprod (or nancumprod) of a 1-d array, any direction."""
    seq = x[::-1] if reverse else x
    with np.errstate(all="ignore"):
        out = (np.nancumprod if nan else np.cumprod)(seq)
    if exclusive:
        out = np.concatenate([np.ones(1, out.dtype), out[:-1]])
    return out[::-1] if reverse else out


def _same_floats(got, want):
    np.testing.assert_array_equal(got, want)  # NaN equal to NaN
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


F32 = np.float32
SEQUENTIAL_CASES = {
    "overflow, then a zero": [1e30, 1e30, 0, 2],  # inf * 0: NaN, not the tree's 0
    "underflow, then huge": [1e-30, 1e-30, 1e30, 1e30],  # 0 stays 0, not 1e-30
    "inf, then a zero": [3, -2, np.inf, 0.5, 0, 1],
    "signs through zero": [1e20, 1e20, 1e-20, -1e-20, 0.0, -3],
    "underflow, then inf": [-1e-30, 1e-30, -1e20, np.inf, 1],
    "finite": [2, 3, -4, 5],
}


# Each case fits one tile, so the block strategy fixes the order of the products: every
# case meets every block strategy, under each grid in turn (every grid meets every block).
BLOCKS = sorted({spec.split("/")[1] for spec in COMBOS})
GRIDS = sorted({spec.split("/")[0] for spec in COMBOS})
CASE_SPECS = [(case, f"{GRIDS[(k + b) % len(GRIDS)]}/{block}")
              for k, case in enumerate(SEQUENTIAL_CASES) for b, block in enumerate(BLOCKS)]


@pytest.mark.parametrize("case,spec", CASE_SPECS, ids=[f"{c}-{s}" for c, s in CASE_SPECS])
def test_cumprod_keeps_numpys_sequential_special_values(case, spec):
    """Forward and reverse, inclusive or exclusive by turn: every case and every block
    strategy meets all four modes."""
    x = np.array(SEQUENTIAL_CASES[case], F32)
    i = CASE_SPECS.index((case, spec))
    for exclusive, reverse in MODES[i % 2::2]:
        got = nk.cumprod(x, exclusive=exclusive, reverse=reverse, strategy=make(spec),
                         layout="tiles")
        _same_floats(got, _numpy_cumprod(x, exclusive, reverse))


@pytest.mark.parametrize("layout", ["warp", "tiles"])
def test_cumprod_rows_and_nancumprod_special_values(layout):
    x = np.array([[1e30, 1e30, 0, 2, 1], [1e30, np.nan, 1e30, 0, 2], [0.5, 2, -1, 4, 8]], F32)
    got = nk.cumprod(x, axis=1, layout=layout)
    with np.errstate(all="ignore"):
        _same_floats(got, np.cumprod(x, axis=1))
        _same_floats(nk.nancumprod(x, axis=1, layout=layout), np.nancumprod(x, axis=1))


def test_cumprod_rounds_each_factor_to_dtype_and_wraps_integers():
    # a dtype= narrower than the input: each factor is rounded to it first, as NumPy's
    # loop casts (1e-200 is a float32 0, 1e200 a float32 inf)
    for factors, dtype in (([1e200, 1e-200, 3.0], np.float32), ([1e-200, 1e200, 3.0],
                                                                 np.float32),
                           ([1e5, 1e-8, 2.0], np.float16)):
        a = np.array(factors)
        with np.errstate(all="ignore"):
            _same_floats(nk.cumprod(a, dtype=dtype), np.cumprod(a, dtype=dtype))
            _same_floats(nk.nancumprod(a, dtype=dtype), np.nancumprod(a, dtype=dtype))
    h = np.full(12, 8, np.float16)  # the float16 running product overflows at 8**6
    h[9] = 0
    with np.errstate(all="ignore"):
        _same_floats(nk.cumprod(h), np.cumprod(h))  # inf from there on, then NaN
    z = np.arange(1, 120, dtype=np.int64) | 1  # int64 products wrap, as NumPy's
    np.testing.assert_array_equal(nk.cumprod(z), np.cumprod(z))


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_functions_as_numpy_2(name):
    ours, numpys = getattr(nk, name), getattr(np, name)
    x = np.arange(1, 13, dtype=np.int16).reshape(3, 4)
    for axis in (0, 1, -1):
        for include_initial in (False, True):
            got = ours(x, axis=axis, include_initial=include_initial)
            want = numpys(x, axis=axis, include_initial=include_initial)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    for x in (np.arange(5.0), np.float32(3), np.zeros((2, 0))):  # 1-d, 0-d, empty axis
        axis = -1 if np.ndim(x) > 1 else None
        np.testing.assert_array_equal(ours(x, axis=axis, include_initial=True),
                                      numpys(x, axis=axis, include_initial=True))
    for axis in (0, -1):  # a 0-d input is one element along axis 0 (or -1)
        np.testing.assert_array_equal(ours(np.int32(3), axis=axis, include_initial=True),
                                      numpys(np.int32(3), axis=axis, include_initial=True))
    with pytest.raises(np.exceptions.AxisError):
        ours(np.array(3), axis=1)
    with pytest.raises(TypeError, match=f"{name}: dtype must be of native byte order"):
        ours(np.arange(3.0), dtype=">f8")  # NumPy 2 refuses it too (cumsum takes it)
    for shape, axis in (((5,), 1), ((2, 3), 2), ((2, 3), -3)):  # not wrapped round
        for include_initial in (False, True):
            with pytest.raises(np.exceptions.AxisError):
                ours(np.ones(shape), axis=axis, include_initial=include_initial)
    f = np.array([1e30, 1e30, 0, 2], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(ours(f, include_initial=True, dtype=np.float32),
                                      numpys(f, include_initial=True, dtype=np.float32))
    d = cuda.to_device(np.ones((3, 4), np.float32))
    out = cuda.device_array((3, 5), np.float32)
    assert ours(d, axis=1, include_initial=True, out=out) is out
    np.testing.assert_array_equal(out.copy_to_host(), numpys(np.ones((3, 4), np.float32),
                                                             axis=1, include_initial=True))
    with pytest.raises(ValueError, match=f"{name}: axis is required"):
        ours(np.ones((2, 3)))
    for axis in ((1,), (np.int64(-2),)):  # NumPy takes a tuple of one axis
        np.testing.assert_array_equal(ours(x, axis=axis), numpys(x, axis=axis))
    for axis in ((), (0, 1)):
        with pytest.raises(ValueError, match=f"{name}: axis must be one axis"):
            ours(x, axis=axis)
    with pytest.raises(ValueError, match="out has shape"):
        ours(np.ones(3), include_initial=True, out=np.empty(3))


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_functions_into_an_out_over_x(name):
    """Found by a fresh-eyes helper: with include_initial, the empty sum or product
    was written into out's first slot before x was read, so an out over x (as NumPy
    allows for host arrays) gave [0, 0, 3, 7] for the sums of [2, 3, 4]. A device out
    may hold x as its part past the first slot (in place); one whose part overlaps x
    otherwise is refused before any write."""
    ours, numpys = getattr(nk, name), getattr(np, name)
    for cut in (slice(None, 3), slice(1, None)):
        a, b = np.array([2.0, 3.0, 4.0, 5.0]), np.array([2.0, 3.0, 4.0, 5.0])
        assert ours(a[cut], include_initial=True, out=a) is a
        np.testing.assert_array_equal(a, numpys(b[cut], include_initial=True, out=b))
    m, n = np.arange(1.0, 13.0).reshape(3, 4), np.arange(1.0, 13.0).reshape(3, 4)
    ours(m[:, :3], axis=1, include_initial=True, out=m)
    np.testing.assert_array_equal(m, numpys(n[:, :3], axis=1, include_initial=True, out=n))
    d = cuda.to_device(np.array([2.0, 3.0, 4.0, 5.0]))
    with pytest.raises(ValueError, match=f"{name}: out past its first slot overlaps x in "
                                         "part"):
        ours(d[:3], include_initial=True, out=d)
    np.testing.assert_array_equal(d.copy_to_host(), [2.0, 3.0, 4.0, 5.0])
    ours(d[1:], include_initial=True, out=d)  # x is the rest of out: in place
    np.testing.assert_array_equal(d.copy_to_host(), numpys(np.array([3.0, 4.0, 5.0]),
                                                           include_initial=True))
    with pytest.raises(ValueError, match=f"^{name}: out overlaps x in part"):
        ours(d[:-1], out=d[1:])  # without include_initial too: not "cumsum: ..."


@pytest.mark.parametrize("hold", ["shared", "registers"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_users_map_gets_each_elements_position_in_a_vector_tile_too(dtype, hold):
    """Found by a reviewer: a tile of 16-byte vector loads mapped its elements with
    index 0, so a map reading the index scanned zeros. Such a map now takes scalar
    loads."""
    @nk.op(identity=0, map=lambda v, i: v * 0 + i)
    def index_sum(a, b):
        return a + b

    got = nk.associative_scan(np.ones(600, dtype), index_sum, dtype=np.float64,
                              strategy=nk.DecoupledLookback(items=8, hold=hold))
    np.testing.assert_array_equal(got, np.cumsum(np.arange(600.0)))


@pytest.mark.parametrize("spec", COMBOS)
def test_associative_scan_prod_gives_cumprods_special_values(spec):
    """Found by the differential harness: associative_scan(x, "prod") ran the plain
    product tree, so [1, 1, inf, 1e-23, 1e-23] (float32) ended in NaN (the tiny factors'
    product rounds to 0 first, then inf * 0) where NumPy's sequential product stays
    inf. It now takes cumprod's path ("nanprod": nancumprod's), on every strategy."""
    x = np.array([1, 1, np.inf, 1.323489e-23, 1.323489e-23], np.float32)
    # warps run the block strategy's warp form, the grid unused: once a block strategy
    for layout in ("warp", "tiles") if spec.startswith("decoupled") else ("tiles",):
        got = nk.associative_scan(x, "prod", strategy=make(spec), layout=layout)
        np.testing.assert_array_equal(got, np.cumprod(x))
        y = np.concatenate([x[:3], [np.nan], x[3:]]).astype(np.float32)
        got = nk.associative_scan(y, "nanprod", reverse=True, strategy=make(spec),
                                  layout=layout)
        np.testing.assert_array_equal(got, np.nancumprod(y[::-1])[::-1])
    assert nk.associative_scan(np.array([2, 3], np.int8), "prod").dtype == np.int64


def test_max_min_bitwise_scans():
    rng = np.random.default_rng(5)
    x = rng.normal(size=333).astype(np.float32)
    x[100] = np.nan
    np.testing.assert_array_equal(nk.associative_scan(x, "max"), np.maximum.accumulate(x))
    np.testing.assert_array_equal(nk.associative_scan(x, "min", reverse=True),
                                  np.minimum.accumulate(x[::-1])[::-1])
    i = rng.integers(-100, 100, 333).astype(np.int8)
    got = nk.associative_scan(i, "max", exclusive=True)
    assert got[0] == np.iinfo(np.int8).min  # nothing before: the identity
    np.testing.assert_array_equal(got[1:], np.maximum.accumulate(i)[:-1])
    u = rng.integers(0, 256, 333).astype(np.uint8)
    np.testing.assert_array_equal(nk.associative_scan(u, "bitwise_xor"),
                                  np.bitwise_xor.accumulate(u))
    assert nk.cumsum(np.ones(5, np.float32), exclusive=True)[0] == 0.0
    assert not np.signbit(nk.cumsum(np.ones(5), exclusive=True)[0])  # 0.0, not -0.0
    assert nk.cumprod(np.full(5, 2.0), exclusive=True).tolist() == [1, 2, 4, 8, 16]


def test_float32_accuracy_long():
    """A float32 scan is checked against float64, never NumPy's float32 loop."""
    x = np.random.default_rng(6).uniform(0, 1, 4000).astype(np.float32)  # 16 tiles
    g = make("decoupled_lookback/warp_shuffle", threads=64, items=4)
    got = nk.cumsum(x, strategy=g)
    tiles = math.ceil(x.size / 256)
    assert float_close(got, x.astype(np.float64), depth=4 + 6 + tiles)


# --- axes, layouts, out= ------------------------------------------------------------------


@pytest.mark.parametrize("shape,axes", [((3, 70), (-1, None)),
                                        ((100, 3), (0,)),
                                        ((2, 3, 4), (0, 1, 2, None))])
def test_axes(shape, axes):
    rng = np.random.default_rng(7)
    x = rng.integers(-9, 9, shape).astype(np.int32)
    g = make("reduce_then_scan/warp_shuffle", items=1, blocks=6)  # rows of several chunks
    for axis in axes:
        for exclusive, reverse in [(False, False), (True, True)]:
            got = nk.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse, strategy=g,
                            layout="tiles")  # short rows: "auto" would take a warp each
            moved = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
            want = np.apply_along_axis(np_scan, -1, moved.astype(np.int64), exclusive,
                                       reverse)
            if axis is not None:
                want = np.moveaxis(want, -1, axis)
            np.testing.assert_array_equal(got, want, err_msg=f"{shape} axis={axis}")
            assert got.flags.c_contiguous


def test_device_input_strided_views_and_out():
    """Device arrays are scanned in place through strided views, into a device out."""
    rng = np.random.default_rng(8)
    base = rng.integers(-9, 9, (4, 3, 14)).astype(np.int64)
    host = base[::2, :, ::3]  # strided in every dimension
    g = make("decoupled_lookback/blelloch")  # a block per row: few rows, few threads
    for axis in (0, 1, 2):
        d = cuda.to_device(base)[::2, :, ::3]
        out = cuda.device_array(host.shape, np.float64)
        got = nk.cumsum(d, axis=axis, out=out, strategy=g, layout="tiles")
        assert got is out
        np.testing.assert_array_equal(out.copy_to_host(), np.cumsum(host, axis=axis))
    flat = nk.cumsum(cuda.to_device(base)[1], axis=None, reverse=True)
    np.testing.assert_array_equal(flat.copy_to_host(),
                                  np.cumsum(base[1].ravel()[::-1])[::-1])
    with pytest.warns(arrays.CopyWarning, match="flattened scan"):  # not one flat run
        flat = nk.cumsum(cuda.to_device(base)[:, :2], axis=None)
    np.testing.assert_array_equal(flat.copy_to_host(), np.cumsum(base[:, :2]))


def test_numpy_out_and_casting():
    x = np.arange(50, dtype=np.int32)
    out = np.zeros(50, np.float64)
    assert nk.cumsum(x, out=out) is out
    np.testing.assert_array_equal(out, np.cumsum(x))
    with pytest.raises(TypeError, match="same_kind"):
        nk.cumsum(np.ones(5), out=np.zeros(5, np.int64))
    with pytest.raises(ValueError, match="shape"):
        nk.cumsum(np.ones((2, 3)), axis=1, out=np.zeros(6))
    with pytest.raises(TypeError, match="device array"):
        nk.cumsum(cuda.to_device(np.ones(3)), out=np.zeros(3))
    with pytest.raises(TypeError, match="tuple of 2 arrays"):
        nk.associative_scan(np.ones(3, np.int64), AFFINE, out=np.zeros(3, np.int64))


@pytest.mark.parametrize("scan", [nk.cumsum, nk.cumprod, nk.nancumsum, nk.nancumprod])
def test_a_big_endian_numpy_out_receives_the_scan(scan):
    """NumPy writes into an out of either byte order; the kernels' buffer is native."""
    x = np.array([[1.5, np.nan, 2.0], [3.0, -1.0, 0.5]])
    for dtype in (">f8", ">f4"):
        out = np.zeros((2, 3), dtype)
        assert scan(x, axis=1, out=out) is out
        np.testing.assert_allclose(out, getattr(np, scan.__name__)(x, axis=1), rtol=1e-6)


def test_a_big_endian_out_pair_receives_cummax():
    x = np.array([1.5, -2.0, np.nan, 2.0])
    values, indices = np.zeros(4, ">f8"), np.zeros(4, ">i8")
    nk.cummax(x, out=(values, indices))
    np.testing.assert_array_equal(values, np.maximum.accumulate(x))  # torch's: NaN wins
    np.testing.assert_array_equal(indices, [0, 0, 2, 2])


def test_empty_inputs():
    assert nk.cumsum(np.zeros(0, np.float32)).shape == (0,)
    got = nk.cumsum(np.zeros((3, 0), np.int8), axis=1)
    assert got.shape == (3, 0) and got.dtype == np.int64
    assert nk.cumprod(np.zeros((0, 4)), axis=1).shape == (0, 4)
    m, c = nk.associative_scan(np.zeros(0, np.int64), AFFINE)
    assert m.shape == c.shape == (0,)


def test_errors():
    x = np.ones(4)
    with pytest.raises(np.exceptions.AxisError):
        nk.cumsum(x, axis=1)
    with pytest.raises(TypeError, match="axis"):
        nk.cumsum(x, axis=1.0)
    with pytest.raises(TypeError, match="exclusive"):
        nk.cumsum(x, exclusive=1)
    with pytest.raises(TypeError, match="bitwise_xor"):
        nk.associative_scan(x, "bitwise_xor")
    with pytest.raises(ValueError, match="unknown scan strategy"):
        nk.cumsum(x, strategy="two_pass")
    with pytest.raises(TypeError, match="reduction strategy"):
        nk.cumsum(x, strategy=TwoPass())
    with pytest.raises(TypeError, match="no block scan"):
        nk.cumsum(x, strategy=SharedTree())
    with pytest.raises(ValueError, match="items"):
        DecoupledLookback(items=0)
    with pytest.raises(ValueError, match="shared memory"):
        nk.cumsum(x, strategy=DecoupledLookback(WarpShuffle(1024), items=64))
    with pytest.raises(TypeError, match="is a scan strategy; a reduction takes"):
        nk.sum(x, strategy=ReduceThenScan())


def test_resolve_scan_names():
    resolve = nk.strategies.resolve
    assert resolve("scan", None) == DecoupledLookback(WarpShuffle())
    assert resolve("scan", "blelloch") == DecoupledLookback(Blelloch())
    assert resolve("scan", "reduce_then_scan") == ReduceThenScan(WarpShuffle())
    assert resolve("scan", "reduce_then_scan/hillis_steele", threads=32) == \
        ReduceThenScan(HillisSteele(32))
    assert resolve("scan", HillisSteele(64)).block == HillisSteele(64)
    assert resolve_scan("blelloch") == resolve("scan", "blelloch")  # the older name
    assert not DecoupledLookback().deterministic and ReduceThenScan().deterministic


def test_reduce_then_scan_chunking():
    g = ReduceThenScan(WarpShuffle(256), blocks=2112)
    assert g.chunking(1, 65536) == (2048, 32)  # 2**28 float32 in 4096-element tiles
    assert g.chunking(32768, 1) == (1, 1)  # short rows: one pass
    assert g.chunking(4, 100) == (100, 1)


# --- the decoupled look-back's own paths ---------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])  # packed / separate flags
def test_lookback_through_aggregates_only(dtype):
    """Tiles that publish only aggregates make every look-back walk back to the first
    tile of its row, 32 tiles a step, across the row boundary's stop markers."""
    rng = np.random.default_rng(9)
    x = rng.integers(-5, 5, (2, 35 * 32)).astype(dtype)  # 35 tiles per row
    g = DecoupledLookback(WarpShuffle(32), items=1, publish_prefix=False)
    got = nk.cumsum(x, axis=1, strategy=g)
    np.testing.assert_array_equal(got, np.cumsum(x, axis=1))


@pytest.mark.simulator  # a GPU would spin: the simulator's look-back raises
@pytest.mark.simulator
def test_a_lookback_waiting_for_an_unpublished_tile_fails_not_hangs():
    """Blocks run one at a time under the simulator, in index order: a tile whose
    predecessor never published (a broken tile order) would spin forever, so the
    simulator's look-back raises instead."""
    kit = state_kit(nk.ops.SUM, (np.dtype(np.float32),))
    wait = decoupled_lookback._waiter(decoupled_lookback._status_words(kit)[1])

    @cuda.jit
    def waits_for_tile_2(st, out):
        status, s = wait(st, st, st, st, st, 2, 3)
        out[0] = s

    with pytest.raises(RuntimeError, match="tile 3 waits for tile 2, which has not published"):
        waits_for_tile_2[1, 1](cuda.to_device(np.zeros(4, np.uint64)),
                               cuda.to_device(np.zeros(1, np.float32)))


def test_block_strategies_also_reduce():
    """Hillis-Steele and Blelloch serve reductions too (their scan's total)."""
    x = np.arange(1000, dtype=np.int64)
    for block in (HillisSteele(32), Blelloch(96)):
        assert nk.sum(x, strategy=TwoPass(block=block)) == x.sum()


# --- many short rows: one warp per row (numbakern/kernels/scan_rows.py) -----------------------
#
# Row lengths 1, 2 (rows sharing a warp in lane groups), 31, 32, 33 (one chunk, one chunk
# exactly, a carry into a one-element chunk) and 70 (three chunks: the middle one
# carried into and out of), in every mode. The layout each scan took is checked by
# spying on which scan ran.

LENGTHS = [1, 2, 31, 32, 33, 70]


@pytest.fixture
def ran(monkeypatch):
    """Which layout each scan took: a list of ``"warp"`` / ``"tiles"``."""
    calls = []
    real_rows = rows_mod.scan_rows
    real_dl, real_rts = DecoupledLookback.scan, ReduceThenScan.scan

    def rows(job, block):
        calls.append("warp")
        real_rows(job, block)

    def tiles(real):
        def scan(self, job):
            calls.append("tiles")
            real(self, job)
        return scan

    monkeypatch.setattr(scans_mod, "scan_rows", rows)
    monkeypatch.setattr(DecoupledLookback, "scan", tiles(real_dl))
    monkeypatch.setattr(ReduceThenScan, "scan", tiles(real_rts))
    return calls


def along(fn, x, axis, *args):
    """``fn`` applied to every 1-D slice of ``x`` along ``axis``."""
    return np.moveaxis(np.apply_along_axis(fn, -1, np.moveaxis(x, axis, -1), *args), -1, axis)


@pytest.mark.parametrize("n", LENGTHS)
def test_every_mode_and_row_length(n, ran):
    """Every mode on an exact sum; the ordered op in two of them, one reverse (each
    mode meets three of the lengths)."""
    rng = np.random.default_rng(n)
    k = LENGTHS.index(n)
    x = rng.integers(-100, 100, (9, n)).astype(np.int32)  # 9 rows: the last warp part-full
    v = (rng.integers(1, 9, (9, n)) * (rng.random((9, n)) < 0.3)).astype(np.float64)
    for m, (exclusive, reverse) in enumerate(MODES):
        got = nk.cumsum(x, axis=-1, exclusive=exclusive, reverse=reverse)
        want = along(np_scan, x.astype(np.int64), -1, exclusive, reverse)
        np.testing.assert_array_equal(got, want, err_msg=f"n={n} {exclusive} {reverse}")
        if m % 2 != k % 2:
            continue
        got = nk.associative_scan(v, last_nonzero, axis=1, exclusive=exclusive,
                                  reverse=reverse)
        want = np.array([ref_scan(r, last_nonzero.combine, exclusive, reverse, empty=0.0)
                         for r in v])
        np.testing.assert_array_equal(got, want, err_msg=f"n={n} {exclusive} {reverse}")
    assert ran == ["warp"] * 6


@pytest.mark.parametrize("n", [2, 33])
def test_identity_never_folded_in_and_two_fields(n, ran):
    x = np.random.default_rng(3).integers(1, 1000, (5, n)).astype(np.int64)
    for reverse in (False, True):
        got = nk.associative_scan(x, NOT_AN_IDENTITY, axis=1, reverse=reverse)
        np.testing.assert_array_equal(got, along(np_scan, x, 1, False, reverse))
    got = nk.associative_scan(x, NOT_AN_IDENTITY, axis=1, exclusive=True)
    assert (got[:, 0] == 100).all()  # the exclusive scan's first element: the identity
    np.testing.assert_array_equal(got[:, 1:], np.cumsum(x, axis=1)[:, :-1])
    for exclusive, reverse in [(False, False), (True, True)]:
        m, c = nk.associative_scan(x, AFFINE, axis=1, exclusive=exclusive, reverse=reverse)
        for r in range(x.shape[0]):
            want_m, want_c = affine_ref(x[r], exclusive, reverse)
            np.testing.assert_array_equal(m[r], want_m)
            np.testing.assert_array_equal(c[r], want_c)
    assert ran == ["warp"] * 5


@pytest.mark.parametrize("dtype", ["bool", "uint8", "float16", "float64", "int64"])
def test_dtypes(dtype):
    rng = np.random.default_rng(4)
    shape = (7, 33)
    if dtype == "bool":
        x = rng.integers(0, 2, shape).astype(bool)
    elif dtype.startswith("float"):
        x = rng.uniform(-4, 4, shape).astype(dtype)
    else:
        x = rng.integers(0, 120, shape).astype(dtype)
    got = nk.cumsum(x, axis=1)
    want = np.cumsum(x, axis=1)
    assert got.dtype == want.dtype, dtype
    if dtype.startswith("float"):
        assert all(float_close(g, r.astype(np.float64)) for g, r in zip(got, x)), dtype
    else:
        np.testing.assert_array_equal(got, want)
    got = nk.cumprod(x[:, :5], axis=1, reverse=True)
    want = np.cumprod(x[:, :5][:, ::-1], axis=1)[:, ::-1]
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-2 if dtype == "float16" else 1e-12)


@pytest.mark.parametrize("shape", [(3, 31), (4, 5, 2), (2, 33, 3)])
def test_axes_of_2d_and_3d(shape, ran):
    x = np.random.default_rng(5).integers(-9, 9, shape).astype(np.int16)
    for axis in (0, -1):
        for exclusive, reverse in [(False, False), (True, True)]:
            got = nk.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse)
            want = along(np_scan, x.astype(np.int64), axis, exclusive, reverse)
            np.testing.assert_array_equal(got, want, err_msg=f"{shape} axis={axis}")
            assert got.flags.c_contiguous
    assert set(ran) == {"warp"}


def test_device_strided_views_and_out(ran):
    base = np.random.default_rng(6).integers(-9, 9, (6, 5, 40)).astype(np.int64)
    host = base[::2, :, ::3]  # strided in every dimension
    for axis in (0, 1, 2):
        d = cuda.to_device(base)[::2, :, ::3]
        out = cuda.device_array(host.shape, np.float64)
        got = nk.cumsum(d, axis=axis, out=out, reverse=True)
        assert got is out
        want = np.flip(np.cumsum(np.flip(host, axis), axis=axis), axis)
        np.testing.assert_array_equal(out.copy_to_host(), want)
    assert ran == ["warp"] * 3


def test_the_2x4000_axis0_case(ran):
    """4000 rows of 2: 126 s under the simulator as tiles (one block per row)."""
    b = np.random.default_rng(7).uniform(0, 1, (2, 4000)).astype(np.float32)
    t = time.perf_counter()
    got = nk.cumsum(b, axis=0)
    assert time.perf_counter() - t < 20  # the tile path needed minutes
    np.testing.assert_array_equal(got, np.cumsum(b, axis=0))  # one combine: exact
    got = nk.cumsum(b.T, axis=-1, exclusive=True)
    np.testing.assert_array_equal(got[:, 0], 0)
    np.testing.assert_array_equal(got[:, 1], b[0])
    assert ran == ["warp", "warp"]


def test_automatic_choice_and_overrides(ran):
    x = np.arange(3 * 40, dtype=np.int32).reshape(3, 40)
    want = np.cumsum(x, axis=1)
    tiles = DecoupledLookback(WarpShuffle(32), items=1)  # rows of two tiles
    np.testing.assert_array_equal(nk.cumsum(x, axis=1, strategy=tiles), want)
    np.testing.assert_array_equal(nk.cumsum(x, axis=1, strategy=tiles, layout="tiles"), want)
    np.testing.assert_array_equal(
        nk.cumsum(x, axis=1, strategy=ReduceThenScan(Blelloch(32), items=1), layout="tiles"),
        want)
    np.testing.assert_array_equal(nk.cumsum(x[0], layout="warp"), want[0])  # one row
    np.testing.assert_array_equal(nk.cumsum(x[0], strategy=tiles), want[0])
    assert ran == ["warp", "tiles", "tiles", "warp", "tiles"]
    block = nk.WarpShuffle()
    assert rows_mod.use_warp_rows("auto", rows_mod.WARP_ROW_MAX, 2, block)
    assert not rows_mod.use_warp_rows("auto", rows_mod.WARP_ROW_MAX + 1, 1000, block)
    assert not rows_mod.use_warp_rows("auto", 5, 1, block)
    assert [rows_mod.lane_group(n) for n in (1, 2, 3, 16, 17, 100)] == [1, 2, 4, 16, 32, 32]
    for bad in ("block", None, 1):
        with pytest.raises(ValueError, match="layout"):
            nk.cumsum(x, axis=1, layout=bad)


# --- on a real GPU ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("spec", COMBOS)
@pytest.mark.parametrize("n", [1, 31, 33, 4095, 4096, 4097, (1 << 20) + 7, 1 << 24])
def test_gpu_sizes_every_strategy(cp, spec, n):
    x = cp.random.uniform(-1, 1, n, dtype=cp.float32)
    got = nk.cumsum(x, strategy=spec)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32
    depth = 16 + 8 + math.ceil(n / 4096)
    assert float_close(cp.asnumpy(got), cp.asnumpy(x).astype(np.float64), depth=depth)
    # Small integers in float32: every partial sum is exact, so the scan must be too,
    # whatever order it combines in (a missing or doubled carry cannot hide).
    xf = cp.random.randint(-3, 4, n).astype(cp.float32)
    got = nk.cumsum(xf, reverse=True, strategy=spec)
    want = cp.cumsum(xf[::-1].astype(cp.int64))[::-1]
    assert bool((got.astype(cp.int64) == want).all())
    xi = cp.random.randint(-1000, 1000, n, dtype=cp.int32)
    for exclusive, reverse in MODES:
        got = nk.cumsum(xi, exclusive=exclusive, reverse=reverse, strategy=spec)
        want = np_scan(cp.asnumpy(xi).astype(np.int64), exclusive, reverse)
        np.testing.assert_array_equal(cp.asnumpy(got), want)


@pytest.mark.gpu
@pytest.mark.parametrize("spec", COMBOS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_gpu_cumprod_keeps_numpys_special_values(cp, spec, dtype):
    """Powers of two whose running products overflow and round to 0, with zeros, infs
    and NaNs among them: exact until they leave the range, so NumPy's loop is the
    reference bit for bit (rows of tiles, and rows for the warp layout)."""
    f = np.finfo(dtype)
    huge, small = 2.0 ** (f.maxexp // 2 + 1), 2.0 ** ((f.minexp - f.nmant) // 2 - 1)
    pool = np.array([1, -1, 2, 0.5, 0, -0.0, np.inf, -np.inf, np.nan, huge, -huge, small,
                     -small], dtype)
    rng = np.random.default_rng(12)
    for shape, axis in [((100_003,), None), ((64, 1000), 1)]:
        x = pool[rng.choice(len(pool), shape, p=[.2, .2, .1, .1] + [.4 / 9] * 9)]
        for exclusive, reverse in MODES:
            got = nk.cumprod(cp.asarray(x), axis=axis, exclusive=exclusive,
                             reverse=reverse, strategy=spec)
            rows = x.reshape(-1, shape[-1]) if axis else x.reshape(1, -1)
            want = np.stack([_numpy_cumprod(r, exclusive, reverse) for r in rows])
            _same_floats(cp.asnumpy(got).reshape(want.shape), want)


@pytest.mark.gpu
@pytest.mark.parametrize("spec", COMBOS)
def test_gpu_ordered_ops(cp, spec):
    rng = np.random.default_rng(10)
    n = 100_003
    v = (rng.integers(1, 9, n) * (rng.random(n) < 0.01)).astype(np.float64)
    got = nk.associative_scan(cp.asarray(v), last_nonzero, reverse=True, strategy=spec)
    want = ref_scan(v, last_nonzero.combine, False, True, 0.0)
    np.testing.assert_array_equal(cp.asnumpy(got), np.array(want))
    x = rng.integers(1, P, 20_011).astype(np.int64)
    m, c = nk.associative_scan(cp.asarray(x), AFFINE, exclusive=True, strategy=spec)
    want_m, want_c = affine_ref(x, True, False)
    np.testing.assert_array_equal(cp.asnumpy(m), want_m)
    np.testing.assert_array_equal(cp.asnumpy(c), want_c)


@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["decoupled_lookback", "reduce_then_scan"])
def test_gpu_2_28(cp, spec):
    n = 1 << 28
    x = cp.random.uniform(0, 1, n, dtype=cp.float32)
    got = cp.asnumpy(nk.cumsum(x, strategy=spec))
    assert float_close(got, cp.asnumpy(x).astype(np.float64), depth=16 + 8 + n // 4096)
    sparse = (cp.random.random(n, dtype=cp.float32) < 1 / 32).astype(cp.float32)
    got = nk.cumsum(sparse, strategy=spec)  # sums stay below 2**24: exact in float32
    assert bool((got.astype(cp.int64) == cp.cumsum(sparse.astype(cp.int64))).all())
    xi = cp.random.randint(-(1 << 20), 1 << 20, n, dtype=cp.int32)
    got = nk.cumsum(xi, strategy=spec)
    assert got.dtype == cp.int64
    assert bool((got == cp.cumsum(xi.astype(cp.int64))).all())
    got = nk.cumsum(xi, reverse=True, exclusive=True, strategy=spec)
    want = cp.cumsum(xi[::-1].astype(cp.int64))[::-1]
    assert bool((got[:-1] == want[1:]).all()) and int(got[-1]) == 0


@pytest.mark.gpu
@pytest.mark.bigmem
def test_gpu_int64_past_2_32(cp):
    """int8 ones, 2**32 + 100 of them: an int64 cumsum whose indices pass 2**32."""
    n = (1 << 32) + 100
    x = cp.ones(n, dtype=cp.int8)
    y = nk.cumsum(x)
    del x
    assert y.dtype == cp.int64 and y.shape == (n,)
    step = 1 << 28
    for start in range(0, n, step):  # compare with arange in slices (34 GB each)
        stop = min(start + step, n)
        assert bool((y[start:stop] == cp.arange(start + 1, stop + 1, dtype=cp.int64)).all())


@pytest.mark.gpu
@pytest.mark.bigmem
def test_gpu_long_rows(cp):
    """(65536, 100000) float32 rows: 26 GB in, 26 GB out, 25 tiles per row."""
    x = cp.random.uniform(0, 1, (65536, 100000), dtype=cp.float32)
    y = nk.cumsum(x, axis=1)
    rows = np.random.default_rng(11).choice(65536, 16, replace=False)
    for r in rows:
        assert float_close(cp.asnumpy(y[r]), cp.asnumpy(x[r]).astype(np.float64), depth=64)
    totals = cp.sum(x, axis=1, dtype=cp.float64)
    err = cp.abs(y[:, -1].astype(cp.float64) - totals)
    assert bool((err <= 4 * np.finfo(np.float32).eps * 64 * totals).all())


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(100000, 2), (50000, 7), (20000, 33), (4096, 1000)])
def test_gpu_short_rows(cp, shape):
    """One warp per row (lane groups for rows of at most 16) against CuPy, every mode."""
    x = cp.random.randint(-1000, 1000, shape, dtype=cp.int64)
    v = cp.asnumpy(x[:64]).astype(np.float64) * (np.arange(shape[1]) % 3 == 0)
    for exclusive, reverse in MODES:
        got = nk.cumsum(x, axis=-1, exclusive=exclusive, reverse=reverse)
        want = cp.flip(cp.cumsum(cp.flip(x, -1), axis=-1), -1) if reverse else x.cumsum(-1)
        if exclusive:
            want = (want - x)
        cp.testing.assert_array_equal(got, want)
        got = nk.associative_scan(v, last_nonzero, axis=-1, exclusive=exclusive,
                                  reverse=reverse)
        ref = np.array([ref_scan(r, last_nonzero.combine, exclusive, reverse, empty=0.0)
                        for r in v])
        np.testing.assert_array_equal(got, ref)
    got = nk.cumsum(x.T, axis=0)  # strided rows, read in place
    cp.testing.assert_array_equal(got, x.T.cumsum(0))


def test_an_unknown_op_name_lists_every_name_associative_scan_takes():
    with pytest.raises(ValueError, match=r"'argmax', 'argmin', 'bitwise_and'.*got 'bogus'"):
        nk.associative_scan(np.arange(10), "bogus")
    values, indices = nk.associative_scan(np.array([3, 1, 4, 1, 5]), "argmax")
    np.testing.assert_array_equal(values, [3, 3, 4, 4, 5])
    np.testing.assert_array_equal(indices, [0, 0, 2, 2, 4])


def test_a_wrong_out_names_its_shape_not_its_elements():
    with pytest.raises(TypeError, match=r"a tuple of 2 arrays for this op, got an array "
                                        r"of shape \(5,\)$"):
        nk.associative_scan(np.arange(5), "argmax", out=np.zeros(5, np.int64))
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"cummax: out must be a tuple of 2 arrays for this "
                                        r"op, got an array of shape \(3,\)$"):
        nk.cummax(torch.ones(3), dim=0, out=torch.empty(3))  # an array, not an "ndarray"
    big = np.zeros((2, 3))
    with pytest.raises(TypeError, match=r"out must be an array for this op, got a tuple of "
                                        r"\(an array of shape \(2, 3\), an array of shape "
                                        r"\(2, 3\)\)$"):
        nk.cumsum(big, axis=1, out=(big, big))
    with pytest.raises(TypeError, match=r"out must be an array for this op, got a tuple "):
        nk.cumsum(big, axis=1, out=(big,))  # as NumPy, which takes no (out,) here


@pytest.mark.parametrize("fn", ["cumprod", "nancumprod"])
def test_float_products_into_a_complex_out_settle_as_reals(fn):
    """The settling pass reads the products back: into a complex ``out`` it read
    complex values as floats (a ComplexWarning an element under the simulator); the
    real products are settled first, then cast into ``out`` (cumprod's docstring:
    NumPy's complex loop gives NaN imaginary parts at infinities, not checked here)."""
    x = np.array([[1.0, 2.0, 3.0], [4.0, np.nan, 0.5], [1e300, 1e300, 0.0]])
    out = np.zeros((3, 3), np.complex128)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            got = getattr(nk, fn)(x, axis=1, out=out)
            want = getattr(np, fn)(x, axis=1)
    assert got is out
    np.testing.assert_array_equal(out.real, want)
    assert not out.imag.any()


@pytest.mark.parametrize("name", ["cumsum", "nancumprod", "argsort"])
@pytest.mark.parametrize("axis", [1, -2])
def test_a_0d_input_along_an_axis_past_its_flattened_one_is_numpys_axis_error(name, axis):
    """NumPy takes a 0-d array along axis 0 or -1 as its one element (the flattened
    array, of one dimension): another axis is out of bounds for dimension 1."""
    x = np.array(2.5, np.float32)
    with pytest.raises(np.exceptions.AxisError) as numpys:
        getattr(np, name)(x, axis=axis)
    with pytest.raises(np.exceptions.AxisError) as ours:
        getattr(nk, name)(x, axis=axis)
    assert str(ours.value) == str(numpys.value)
    along = 0 if axis > 0 else -1  # an axis NumPy takes
    assert getattr(nk, name)(x, axis=along).tolist() == getattr(np, name)(x, axis=along).tolist()


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "nancumsum", "nancumprod",
                                  "cumulative_sum", "cumulative_prod", "logcumsumexp"])
def test_extended_precision_is_refused_as_input_and_taken_as_a_host_out(name):
    """float128 (NumPy's longdouble on x86): no kernel holds it. As x or dtype= it is a
    TypeError naming it (cumprod's float path once let Numba's own error through); a
    NumPy out of it takes the float64 scan by NumPy's cast, as NumPy's out does."""
    wide = np.dtype(np.longdouble)
    if wide.itemsize <= 8:
        pytest.skip("longdouble is float64 on this platform")
    f = getattr(nk, name)
    with pytest.raises(TypeError, match="float128"):
        f(np.ones(3, wide))
    if name != "logcumsumexp":  # it takes no dtype=
        with pytest.raises(TypeError, match="dtype=float128"):
            f(np.ones(3, np.float32), dtype=wide)
    x = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, 1.0]])
    out = np.zeros((2, 3), wide)
    assert f(x, axis=1, out=out) is out
    if name == "logcumsumexp":
        want = np.logaddexp.accumulate(x, axis=1)
    else:
        want = getattr(np, name)(x, axis=1)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-15)


def test_a_two_result_scan_refuses_an_extended_precision_out():
    wide = np.dtype(np.longdouble)
    if wide.itemsize <= 8:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(TypeError, match="cummax: out's arrays .* float128, int64"):
        nk.cummax(np.ones(3), out=(np.zeros(3, wide), np.zeros(3, np.int64)))


@pytest.mark.parametrize("dtype", ["object", "S5", "U3", "V8"])
def test_object_text_and_bytes_outs_are_refused(dtype):
    """NumPy scans into an object out in Python objects (exact integers: the kernels'
    wrap) and refuses text and bytes: the kernels write numbers, so these are refused
    (same_kind casting alone let them through; a scan's cast kernel then crashed)."""
    x = np.array([[2**62, 2**62, 2**62], [5, 9, 1]], np.int64)
    if dtype == "object":
        want = np.cumsum(x, axis=1, out=np.zeros((2, 3), object))
        assert want[0, 2] == 3 * 2**62  # Python ints: no int64 holds it
    else:
        with pytest.raises(TypeError):  # NumPy's add has no loop into text or bytes
            np.cumsum(x, axis=1, out=np.zeros((2, 3), dtype))
    for name in ("cumsum", "cumprod", "cumulative_sum", "nancumsum"):
        with pytest.raises(nk.OutDtypeError, match=f"^{name}: out has dtype .*; the kernels "
                                                   f"write numbers"):
            getattr(nk, name)(x, axis=1, out=np.zeros((2, 3), dtype))
    with pytest.raises(nk.OutDtypeError, match="cummax: out has dtype"):
        nk.cummax(x, axis=1, out=(np.zeros((2, 3), dtype), np.zeros((2, 3), np.int64)))


def test_cummax_refuses_value_and_index_outs_that_share_memory():
    x = np.array([[1, 4, 0], [9, 2, 5], [3, 3, 8]])
    out = np.zeros((3, 3), np.int64)
    for pair in ((out, out), (out[::-1], out), (out, out.T)):
        with pytest.raises(ValueError, match="^cummax: the arrays of out share memory"):
            nk.cummax(x, axis=1, out=pair)
    both = np.zeros((2, 3, 3), np.int64)  # two halves of one array share nothing
    got = nk.cummax(x, axis=1, out=(both[0], both[1]))
    assert np.shares_memory(got[0], both[0]) and np.shares_memory(got[1], both[1])
    np.testing.assert_array_equal(both[0], np.maximum.accumulate(x, axis=1))
    np.testing.assert_array_equal(both[1], [[0, 1, 1], [0, 0, 0], [0, 1, 2]])
