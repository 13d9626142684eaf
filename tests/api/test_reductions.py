"""Whole-array reductions against NumPy, for every strategy (simulator: small grids).

Tolerances: integer and bool results must equal NumPy's exactly (wrap-around
included: modular arithmetic is associative, so any tree gives NumPy's answer).
Float results are compared with a float64 reference: ``|got - ref| <= 4 * eps(acc) *
sum(|x|) + eps(result) * |ref| + tiny(result)``, the error bound of a tree sum in the
accumulator dtype plus the final rounding to the result dtype (subnormals included).
Products use ``|ref|`` in place of ``sum(|x|)``. max/min are exact.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime.cache import cache_info
from numbakern.runtime.views import device_view
from numbakern.core.deliver import OutDtypeError
from numbakern.strategies import AtomicFold, SharedTree, TwoPass, WarpShuffle

# Every reduction strategy the registry lists, with small grids.
STRATEGIES = {s.label: s for s in nk.strategies.every("reduce", threads=32, blocks=2)}
# Block sizes that are not a power of two: 3 warps, and the shared tree's fold step.
ODD_BLOCKS = {
    "two_pass/warp_shuffle/96": TwoPass(WarpShuffle(96), blocks=2),
    "atomic_fold/shared_tree/96": AtomicFold(SharedTree(96), blocks=2),
}
ALL = {**STRATEGIES, **ODD_BLOCKS}

SIZES = [0, 1, 31, 32, 33, 127, 128, 129, 1000, 4099, 70]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


def sample(rng, n, dtype, low=-50, high=50):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind == "f":
        return rng.uniform(low, high, n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(low, info.min), min(high, info.max) + 1, n).astype(dtype)


def assert_matches(got, x, ref_fn, op_name):
    """Compare with NumPy: exact for integers, the float bound in the module docstring."""
    want = ref_fn(x)
    assert np.asarray(got).dtype == np.asarray(want).dtype, (got, want)
    if np.asarray(want).dtype.kind != "f":
        assert got == want
        return
    ref = ref_fn(x.astype(np.float64))
    if np.isnan(ref):
        assert np.isnan(got)
        return
    acc = np.float32 if x.dtype == np.float16 else x.dtype
    scale = np.abs(x.astype(np.float64))
    scale = scale.sum() if op_name == "sum" else abs(ref)
    result = np.finfo(want.dtype)
    tol = 4 * np.finfo(acc).eps * scale + result.eps * abs(ref) + result.smallest_subnormal
    assert abs(np.float64(got) - ref) <= tol, (got, ref, tol)


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("n", SIZES)
def test_sum_sizes(name, n):
    x = sample(np.random.default_rng(n), n, "float32")
    assert_matches(nk.sum(x, strategy=ALL[name]), x, np.sum, "sum")


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("n", [1, 33, 129])
@pytest.mark.parametrize("fn,ref", [(nk.max, np.max), (nk.min, np.min)])
def test_max_min_sizes(name, n, fn, ref):
    x = sample(np.random.default_rng(n), n, "int32")
    assert fn(x, strategy=STRATEGIES[name]) == ref(x)


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(name, dtype):
    rng = np.random.default_rng(7)
    x = sample(rng, 77, dtype)
    strat = STRATEGIES[name]
    assert_matches(nk.sum(x, strategy=strat), x, np.sum, "sum")
    assert_matches(nk.max(x, strategy=strat), x, np.max, "max")
    assert_matches(nk.min(x, strategy=strat), x, np.min, "min")
    small = sample(rng, 20, dtype, low=-1.5, high=1.5)
    assert_matches(nk.prod(small, strategy=strat), small, np.prod, "prod")
    if np.dtype(dtype).kind != "f":
        assert nk.xor_sum(x, strategy=strat) == np.bitwise_xor.reduce(x)
        assert nk.bitwise_and_sum(x, strategy=strat) == np.bitwise_and.reduce(x)
        assert nk.bitwise_or_sum(x, strategy=strat) == np.bitwise_or.reduce(x)


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("where", [0, 40, 99])
def test_nan_propagates(name, where):
    x = np.arange(100, dtype=np.float32)
    x[where] = np.nan
    strat = STRATEGIES[name]
    assert np.isnan(nk.max(x, strategy=strat))
    assert np.isnan(nk.min(x, strategy=strat))
    assert np.isnan(nk.sum(x, strategy=strat))


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_infinities(name):
    strat = STRATEGIES[name]
    x = np.array([1.0, np.inf, -3.0] * 20, dtype=np.float64)
    assert nk.max(x, strategy=strat) == np.inf
    assert nk.sum(x, strategy=strat) == np.inf
    assert nk.min(-x, strategy=strat) == -np.inf
    both = np.array([np.inf, -np.inf] * 10)
    assert np.isnan(nk.sum(both, strategy=strat))
    assert nk.max(np.full(50, -np.inf), strategy=strat) == -np.inf
    assert nk.min(np.full(50, np.inf), strategy=strat) == np.inf


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_all_negative_and_all_equal(name):
    """The identity fills empty lanes only: max of negatives is not 0 (numba's
    cuda.reduce folds its init=0 in and gets 0 here)."""
    strat = STRATEGIES[name]
    neg = -np.arange(1, 100, dtype=np.float32) - 5
    assert nk.max(neg, strategy=strat) == np.float32(-6)
    same = np.full(97, 3, dtype=np.int16)
    assert nk.max(same, strategy=strat) == 3
    assert nk.min(same, strategy=strat) == 3
    assert nk.sum(same, strategy=strat) == 291


@pytest.mark.parametrize("n", [1, 40])
def test_sum_of_negative_zeros_is_positive_zero_as_numpy(n):
    x = np.full(n, -0.0, dtype=np.float32)
    got = nk.sum(x, strategy=STRATEGIES["two_pass/warp_shuffle"])
    assert got == 0 and np.signbit(got) == np.signbit(np.sum(x)) == False  # noqa: E712


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_float16_accumulates_in_float32(name):
    """Partial sums pass 65504 (float16's max) but the total fits."""
    x = np.array([60000, 60000, -60000, -60000] * 8 + [1.5], dtype=np.float16)
    got = nk.sum(x, strategy=STRATEGIES[name])
    assert got.dtype == np.float16 and got == np.float16(1.5)


@pytest.mark.parametrize(
    "x,fn,ref",
    [
        (np.array([], np.float32), nk.sum, np.sum),
        (np.zeros((0, 3), np.int8), nk.sum, np.sum),
        (np.array([], np.int32), nk.prod, np.prod),
        (np.array([], np.uint8), nk.bitwise_and_sum, np.bitwise_and.reduce),
        (np.array([], np.int16), nk.xor_sum, np.bitwise_xor.reduce),
    ],
)
def test_empty(x, fn, ref):
    got, want = fn(x), ref(x)
    assert got == want and np.asarray(got).dtype == np.asarray(want).dtype
    assert not np.signbit(got)


@pytest.mark.parametrize("fn", [nk.max, nk.min])
def test_empty_max_raises(fn):
    with pytest.raises(ValueError, match="zero-size array"):
        fn(np.array([], np.float32))


def test_non_contiguous_and_nd_inputs():
    strat = STRATEGIES["two_pass/warp_shuffle"]
    base = np.arange(6 * 7 * 5, dtype=np.int64).reshape(6, 7, 5)
    for x in (base[::2], base[:, 1:4, ::2], base.T, np.asfortranarray(base), base[..., 3]):
        assert nk.sum(x, strategy=strat) == x.sum()
        assert nk.max(x, strategy=strat) == x.max()
    assert nk.sum([[1, 2], [3, 4]]) == 10


def test_result_dtypes_follow_numpy():
    for dtype in DTYPES:
        x = np.ones(5, dtype=dtype)
        assert np.asarray(nk.sum(x)).dtype == np.sum(x).dtype, dtype
        assert np.asarray(nk.prod(x)).dtype == np.prod(x).dtype, dtype
        assert np.asarray(nk.max(x)).dtype == np.max(x).dtype, dtype
    x = np.arange(10, dtype=np.int8)
    assert np.asarray(nk.sum(x, dtype=np.float32)).dtype == np.float32


def test_bitwise_ops_reject_floats():
    with pytest.raises(TypeError, match="^xor_sum is not defined for x of dtype float32"):
        nk.xor_sum(np.ones(4, np.float32))
    with pytest.raises(TypeError, match="^bitwise_xor is not defined for x of dtype float32"):
        nk.reduce(np.ones(4, np.float32), "bitwise_xor")  # the op, called by its name


@pytest.mark.parametrize("dtype", ["object", "S5", "U3", "V8"])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "median", "var", "any", "nanmedian"])
def test_object_text_and_bytes_outs_are_refused(name, dtype):
    """The kernels write numbers. NumPy computes into an object out in Python objects
    (a sum of int64 exact past 2**63, where the kernels' wraps), writes the text of
    its values into a text out for some functions (any, nanmedian) and refuses it for
    its arithmetic loops: numbakern refuses all of them (same_kind casting alone let
    an S5 out take the sums' first five characters)."""
    x = np.array([[2**62, 2**62, 1], [5, 9, 3]], np.int64)
    if dtype == "object" and name == "sum":
        assert np.sum(x, axis=1, out=np.zeros(2, object))[0] == 2**63 + 1
    with pytest.raises(OutDtypeError, match=f"^{name}: out has dtype .*; the kernels write "
                                            f"numbers: pass a bool, integer or float out"):
        getattr(nk, name)(x, axis=1, out=np.zeros(2, dtype))


@pytest.mark.parametrize("name, ufunc", [("xor_sum", np.bitwise_xor),
                                         ("bitwise_and_sum", np.bitwise_and),
                                         ("bitwise_or_sum", np.bitwise_or)])
def test_bitwise_ops_refuse_a_float_out_as_numpy(name, ufunc):
    xi = np.arange(6, dtype=np.int16).reshape(2, 3)
    with pytest.raises(TypeError):  # NumPy's bitwise ufuncs have no float loop
        ufunc.reduce(xi, axis=0, out=np.zeros(3))
    with pytest.raises(TypeError, match=f"^{name}: out has dtype float64"):
        getattr(nk, name)(xi, axis=0, out=np.zeros(3))
    with pytest.raises(TypeError, match="^reduce: out has dtype float64"):
        nk.reduce(xi, ufunc.__name__, axis=0, out=np.zeros(3))
    with pytest.raises(TypeError, match="out must be"):  # not an array: check_out's words
        getattr(nk, name)(xi, axis=0, out=[0, 0, 0])
    out = np.zeros(3, np.int64)  # a wider integer out: NumPy's int64 loop, the same bits
    assert getattr(nk, name)(xi, axis=0, out=out) is out
    np.testing.assert_array_equal(out, ufunc.reduce(xi, axis=0, out=np.zeros(3, np.int64)))


# --- user ops ------------------------------------------------------------------------


@nk.op(identity=0.0)
def absmax(a, b):
    return max(abs(a), abs(b))


def last_nonzero(a, b):
    return b if b != 0 else a


LAST_NONZERO = nk.Op("last_nonzero", last_nonzero, identity=0, commutative=False)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_custom_commutative_op(name):
    x = np.random.default_rng(3).standard_normal(150)
    x[77] = -40.0
    assert nk.reduce(x, absmax, strategy=STRATEGIES[name]) == 40.0


@pytest.mark.parametrize("threads", [32, 64, 96])
@pytest.mark.parametrize("n", [1, 33, 200, 1000])
def test_non_commutative_op_keeps_order(threads, n):
    x = np.zeros(n, dtype=np.int32)
    x[: n // 2 + 1] = np.arange(1, n // 2 + 2)
    want = x[np.nonzero(x)[0][-1]]
    strat = TwoPass(WarpShuffle(threads), blocks=3)
    assert nk.reduce(x, LAST_NONZERO, strategy=strat) == want


@pytest.mark.parametrize("name", ["two_pass/shared_tree", "atomic_fold/warp_shuffle",
                                  "atomic_fold/shared_tree"])
def test_non_commutative_op_refused_by_unordered_strategies(name):
    with pytest.raises(ValueError, match="commutative"):
        nk.reduce(np.arange(10), LAST_NONZERO, strategy=STRATEGIES[name])


def test_reduce_by_builtin_name_and_bad_names():
    x = np.arange(1, 11)
    assert nk.reduce(x, "prod") == np.prod(x)
    with pytest.raises(ValueError, match="one of"):
        nk.reduce(x, "median")
    with pytest.raises(ValueError, match="known"):
        nk.sum(x, strategy="three_pass")
    with pytest.raises(TypeError, match="strategy must be"):
        nk.sum(x, strategy=3)


def test_commutative_must_be_a_bool():  # 'no' read as True gave a wrong answer
    with pytest.raises(TypeError, match="commutative must be True or False"):
        nk.op(identity=0, commutative="no")(lambda a, b: a if a != 0 else b)


@pytest.mark.parametrize("call, error, match", [
    (lambda x: nk.sum(x, strategy="two_pass/"), ValueError, "unknown strategy"),
    (lambda x: nk.sum(x, axis=0, keepdims="yes"), TypeError, "keepdims must be True"),
    (lambda x: nk.max(x, keepdims=None), TypeError, "keepdims must be True"),
    (lambda x: nk.argmax(x, keepdims=1.0), TypeError, "keepdims must be True"),
    (lambda x: nk.argmax(x, tie_break_left="no"), TypeError, "tie_break_left must be"),
    (lambda x: TwoPass(blocks=1.5), TypeError, "blocks must be an int"),
    (lambda x: TwoPass(blocks=True), TypeError, "blocks must be an int"),
    (lambda x: TwoPass(blocks=2**31), ValueError, "blocks must be a positive int up to"),
    (lambda x: TwoPass(blocks=0), ValueError, "blocks must be a positive int up to"),
    (lambda x: nk.DecoupledLookback(publish_prefix="no"), TypeError, "publish_prefix must"),
    (lambda x: nk.DecoupledLookback(items=2.0), TypeError, "items must be an int"),
    (lambda x: nk.op(identity="a")(lambda a, b: a + b), TypeError,
     "identity must be a number"),
    (lambda x: nk.cumsum(x, out=np.zeros(10, np.int64)), OutDtypeError, "^cumsum: cannot"),
    (lambda x: nk.cumprod(x, out=np.zeros(10, np.int64)), OutDtypeError, "^cumprod: cannot"),
    (lambda x: nk.cumsum(x, dtype=np.complex64), TypeError,
     "^cumsum is not defined for dtype=complex64"),
    (lambda x: nk.cumprod(x.astype(np.complex64)), TypeError,
     "^cumprod is not defined for x of dtype complex64"),
    (lambda x: nk.associative_scan(x.astype(np.complex64), "sum"), TypeError,
     "^sum is not defined for x of dtype complex64"),
    (lambda x: nk.sum(x.reshape(2, 5), axis=1, lanes=32.0), TypeError, "lanes must be an int"),
    (lambda x: nk.argmax(x.reshape(2, 5), axis=1, lanes=True), TypeError,
     "lanes must be an int"),
    (lambda x: nk.segmented_reduce(x, [0, 10], lanes=32.0), TypeError, "lanes must be an int"),
    # errors name the function called, not the op under it
    (lambda x: nk.nanmax(x.astype(np.complex64)), TypeError, "^nanmax is not defined"),
    (lambda x: nk.ptp(x.astype(np.complex64)), TypeError, "^ptp is not defined"),
    (lambda x: nk.min_with_indices(x.astype(np.complex64)), TypeError,
     "^min_with_indices is not defined"),
    (lambda x: nk.max_with_indices(x, out=(np.empty(2), np.empty((), np.int64))), ValueError,
     "^max_with_indices: out has shape"),
    (lambda x: nk.scan_by_key(np.ones(10, np.int64), x, op="bitwise_or"), TypeError,
     "^scan_by_key is not defined for x of dtype float64"),
    (lambda x: nk.mean(x, dtype=np.complex64), TypeError,
     "^mean is not defined for dtype=complex64"),
    (lambda x: nk.xor_sum(x.astype(np.int32), initial=1.5), ValueError,
     "^xor_sum: initial=1.5 is not a value"),
    (lambda x: nk.median([[1], [2, 3]]), ValueError, "^x cannot be read as an array"),
    (lambda x: nk.histogram(x[:2], weights=[[1], [2, 3]]), ValueError,
     "^weights cannot be read as an array"),
    (lambda x: nk.histogram(x[:2], bins=[[1], [2, 3]]), ValueError,
     "^histogram: bins cannot be read as an array"),
])
def test_bad_arguments_found_by_a_fresh_user(call, error, match):
    with pytest.raises(error, match=match):
        call(np.arange(10.0))


@pytest.mark.parametrize("name", ["sum", "max", "argmax", "mean", "var", "ptp", "median",
                                  "average", "count_nonzero"])
def test_keepdims_as_an_integer_is_numpys(name):
    """NumPy's reductions read ``keepdims`` as an integer: 1 and 2 keep the axes, 0 does
    not (a float or a string is refused, as theirs)."""
    x = np.arange(12.0).reshape(3, 4)
    for keepdims in (1, 2, 0, np.int64(1), np.array(1)):
        got = getattr(nk, name)(x, axis=1, keepdims=keepdims)
        want = getattr(np, name)(x, axis=1, keepdims=keepdims)
        assert np.shape(got) == np.shape(want) == ((3, 1) if keepdims else (3,))
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(TypeError, match="keepdims must be True or False"):
        getattr(nk, name)(x, axis=1, keepdims=1.0)
    with pytest.raises(TypeError, match="keepdims must be True or False"):
        getattr(nk, name)(np.float64(3.0), keepdims="yes")  # a 0-d x's too


def test_keepdims_0_beside_torchs_keepdim_is_not_given_twice():
    x = np.arange(12.0).reshape(3, 4)
    for keepdims in (0, np.int64(0), False):
        got = nk.max_with_indices(x, axis=1, keepdims=keepdims, keepdim=True)
        assert got.values.shape == got.indices.shape == (3, 1)
    with pytest.raises(TypeError, match="give keepdims= or torch's keepdim=, not both"):
        nk.max_with_indices(x, axis=1, keepdims=1, keepdim=True)


def test_blocks_past_the_elements_are_not_launched():
    """blocks=10**9 over 100 elements once allocated 7.45 GiB of partials; a block
    beyond the elements would read nothing, so at most one a element runs."""
    x = np.arange(100.0)
    assert nk.sum(x, strategy=TwoPass(WarpShuffle(32), blocks=10**9)) == x.sum()
    assert nk.sum(x, strategy=nk.AtomicFold(WarpShuffle(32), blocks=10**9)) == x.sum()


@pytest.mark.parametrize("threads", [0, 16, 33, 2048])
def test_bad_thread_counts(threads):
    with pytest.raises(ValueError, match="multiple of 32"):
        WarpShuffle(threads)


# --- determinism and caching -----------------------------------------------------------


def test_two_pass_is_bitwise_deterministic():
    x = np.random.default_rng(11).standard_normal(3000).astype(np.float32)
    strat = TwoPass(WarpShuffle(64), blocks=2)
    first = nk.sum(x, strategy=strat)
    for _ in range(3):
        assert nk.sum(x, strategy=strat).tobytes() == first.tobytes()


def test_second_call_compiles_nothing():
    x = np.arange(100, dtype=np.float64)
    strat = TwoPass(SharedTree(64), blocks=2)
    nk.sum(x, strategy=strat)
    builds = cache_info()["builds"]
    nk.sum(x + 1, strategy=TwoPass(SharedTree(64), blocks=2))
    assert cache_info()["builds"] == builds


def test_strategies_are_immutable_values():
    """Plans and recorded launches hold strategy objects: a change after use would
    leave them running the old value (found in a trial), so changes raise."""
    from numba import cuda

    from numbakern.strategies import RadixSort, WarpPrivatized

    block = WarpShuffle(threads=32)
    grid = TwoPass(block)
    x = cuda.to_device(np.ones((2, 300), np.float32))
    for _ in range(2):
        nk.sum(x, axis=1, strategy=grid)
    for obj, name, value in [(block, "threads", 64), (grid, "block", SharedTree()),
                             (grid, "blocks", 4), (WarpPrivatized(), "threads", 64),
                             (RadixSort(), "items", 4)]:
        with pytest.raises(AttributeError, match="immutable"):
            setattr(obj, name, value)
        with pytest.raises(AttributeError, match="immutable.*deleting"):
            delattr(obj, name)
    assert grid == TwoPass(WarpShuffle(threads=32)) and block.threads == 32
    assert grid.blocks is None
    assert nk.sum(x, axis=1, strategy=grid).copy_to_host().tolist() == [300, 300]


def test_strategies_describe_themselves():
    assert set(nk.strategies.available()) == set(STRATEGIES)
    for name in nk.strategies.available():
        s = nk.strategies.resolve("reduce", name)
        info = nk.strategies.describe(s)
        assert info["deterministic"] == name.startswith("two_pass")
        # atomics fold in arrival order; the shared tree joins slot t with t + stride
        out_of_order = name.startswith("atomic_fold") or name.endswith("shared_tree")
        assert info["needs_commutative"] == out_of_order
        cost = s.cost(1 << 20, 4, 4, blocks=8)
        assert cost.bytes_read >= 4 << 20 and cost.launches in (1, 2)


def test_device_buffer_strides_from_interface():
    """A C-contiguous array may omit strides from __cuda_array_interface__."""
    from numbakern.runtime.launch import buffer

    class Fake:
        __cuda_array_interface__ = {"shape": (3, 4), "typestr": "<f4", "data": (4096, False),
                                    "version": 3, "strides": None}

    b = buffer(Fake())
    assert b.strides == (16, 4) and b.c_contiguous and b.size == 12


def test_gpu_launcher_packs_parameters_without_a_gpu(monkeypatch):
    """The GPU launch path's argument flattening and parameter buffer, checked with a
    fake driver call: every parameter 8 bytes, arrays as Numba flattens them."""
    import ctypes

    from numbakern.runtime import launch as L

    seen = {}

    def fake_launch(function, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        addresses = ctypes.cast(params, ctypes.POINTER(ctypes.c_uint64))
        seen["params"] = [ctypes.c_int64.from_address(addresses[i]).value for i in range(9)]
        seen["grid"], seen["block"] = gx, bx
        return 0

    class Dispatcher:
        def compile(self, argtypes):
            seen["argtypes"] = argtypes
            return None

    monkeypatch.setattr(L, "_cuLaunchKernel", fake_launch)
    monkeypatch.setattr(L, "_cupy_launch_kernel", None)  # the ctypes path
    monkeypatch.setattr(L, "_function_handle", lambda kernel: 1234)

    class Stream:
        handle = 0

    buf = L.DeviceBuffer(4096, (5,), (8,), np.float64)
    L._Launcher(Dispatcher())(3, 64, Stream(), (buf, np.int64(-7), 2.5))
    assert seen["grid"] == 3 and seen["block"] == 64
    assert str(seen["argtypes"][0]) == "array(float64, 1d, C)"
    assert seen["params"][:7] == [0, 0, 5, 8, 4096, 5, 8]
    assert seen["params"][7] == -7
    assert seen["params"][8] == int(np.float64(2.5).view(np.int64))


# Every strategy with float32's vectors of 4, every vector width with the first strategy:
# the loads are the grid's, the same whichever block strategy combines what they read.
@pytest.mark.parametrize("name, dtype", [(name, "float32") for name in STRATEGIES] +
                         [(next(iter(STRATEGIES)), d) for d in ("int8", "float16", "int64",
                                                                "float64")])
def test_vector_loads_and_their_scalar_tail(name, dtype):
    # An aligned contiguous input is read in 16-byte vectors (16 // itemsize elements);
    # the n % width elements past the last vector by scalar loads. Offsetting the
    # data by one element breaks the alignment: the kernel then reads scalars. The
    # largest n gives the grid of 64 threads 5 vectors each: one round of the 4-loads
    # loop, one of the loop after it, then the scalar tail.
    from numba import cuda

    from numbakern.kernels.flat_reduce import vector_width

    rng = np.random.default_rng(11)
    width = 16 // np.dtype(dtype).itemsize
    for n in (width - 1, width, 4 * width + 3, 64 * 5 * width + width - 1):
        x = sample(rng, n + 1, dtype)
        dev = cuda.to_device(x)
        assert vector_width(device_view(dev), False) == width
        assert vector_width(device_view(dev[1:]), False) == 0
        for view, host in ((dev[:n], x[:n]), (dev[1:], x[1:])):
            got = nk.sum(view, strategy=STRATEGIES[name])
            assert_matches(np.asarray(got.copy_to_host()), host, np.sum, "sum")
        got = nk.argmax(dev[:n], strategy=STRATEGIES[name])
        assert int(np.asarray(got.copy_to_host())) == int(np.argmax(x[:n]))


def test_whole_reduction_of_a_layout_that_needs_a_copy():
    """Three strided dimensions: one announced C-order copy, then the usual answers
    (element order kept for a non-commutative op)."""
    from numba import cuda

    from numbakern.core.arrays import CopyWarning

    h = np.random.default_rng(3).integers(-3, 4, (4, 5, 6)).astype(np.float32)
    view = cuda.to_device(h)[::2, ::2, ::2]
    want = h[::2, ::2, ::2]
    with pytest.warns(CopyWarning, match="copied"):
        got = nk.sum(view, strategy=STRATEGIES["two_pass/warp_shuffle"])
    np.testing.assert_allclose(got.copy_to_host(), want.sum(dtype=np.float64), rtol=1e-6)
    with pytest.warns(CopyWarning):
        last = nk.reduce(view, LAST_NONZERO, strategy=STRATEGIES["two_pass/warp_shuffle"])
    flat = want.ravel()
    assert float(last.copy_to_host()) == flat[flat != 0][-1]

# --- mean: the sum divided as np.mean divides --------------------------------------------
# Tolerance for float results: the sum's bound above divided by the count, plus the
# final rounding; integer and bool inputs average in float64 from an exact integer
# sum, so only the final rounding remains.


def assert_mean(got, x, **kw):
    want = np.mean(x, **kw)
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    ref = np.asarray(np.mean(x.astype(np.float64), **kw))
    axis = kw.get("axis")
    count = x.size // max(ref.size, 1)
    scale = np.abs(x.astype(np.float64)).sum(axis=axis, keepdims=kw.get("keepdims", False))
    exact_sum = x.dtype.kind in "biu"
    acc = np.float32 if x.dtype == np.float16 else (np.float64 if exact_sum else x.dtype)
    result = np.finfo(want.dtype)
    tol = (0 if exact_sum else 4 * np.finfo(acc).eps * scale / count) \
        + result.eps * np.abs(ref) + result.smallest_subnormal
    assert np.all(np.abs(got.astype(np.float64) - ref) <= tol), (got, ref, tol)


@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129, 1000])
def test_mean_sizes(name, n):
    x = sample(np.random.default_rng(n), n, "float32")
    assert_mean(nk.mean(x, strategy=ALL[name]), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mean_dtypes_and_axes(dtype):
    x = sample(np.random.default_rng(5), 210, dtype).reshape(6, 35)
    for kw in ({}, {"axis": 0}, {"axis": 1}, {"axis": -1, "keepdims": True},
               {"axis": (0, 1)}):
        assert_mean(nk.mean(x, **kw), x, **kw)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_mean_every_strategy_on_axes(name):
    x = sample(np.random.default_rng(9), 3 * 4 * 33, "float64").reshape(3, 4, 33)
    for axis in (None, 0, 1, 2, (0, 2)):
        assert_mean(nk.mean(x, axis=axis, strategy=STRATEGIES[name]), x, axis=axis)


def test_mean_dtype_argument_as_numpy():
    x = np.arange(10, dtype=np.int32)
    assert_mean(nk.mean(x, dtype=np.float32), x, dtype=np.float32)
    y = np.array([1.0, 2.0, 4.0])
    got = nk.mean(y, dtype=np.int64)  # NumPy: int sum 7, divided in float64, truncated
    assert got == np.mean(y, dtype=np.int64) and np.asarray(got).dtype == np.int64


def test_mean_out_and_errors():
    x = np.ones((5, 4), np.int16)
    out = np.empty(5, np.float32)
    assert nk.mean(x, axis=1, out=out) is out and np.array_equal(out, np.ones(5))
    with pytest.raises(ValueError, match="mean: out has shape"):
        nk.mean(np.ones(3), out=np.empty(3))
    with pytest.raises(OutDtypeError, match="mean: cannot cast"):
        nk.mean(np.ones((2, 3)), axis=1, out=np.empty(2, np.int32))
    with pytest.raises(TypeError):
        nk.mean(np.array(["a"]))


def test_mean_of_nothing_is_nan_with_numpys_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = nk.mean(np.zeros(0, np.float32))
    assert np.isnan(got) and np.asarray(got).dtype == np.float32
    assert any("Mean of empty slice" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(nk.mean(np.zeros((3, 0)), axis=1)).all()


def test_mean_device_input_gives_device_output():
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = cuda.to_device(h)
    assert np.allclose(nk.mean(d, axis=1).copy_to_host(), h.mean(axis=1))
    assert np.allclose(nk.mean(d).copy_to_host(), h.mean())
    o = cuda.device_array(3, np.float64)
    nk.mean(d, axis=1, out=o)
    assert np.allclose(o.copy_to_host(), h.mean(axis=1))


SUM_SPECIALS = [([np.inf, -np.inf], {}), ([np.inf, 1.0], {}), ([1e308, 1e308], {}),
                ([1.0, 2.0], {}), ([[np.inf, -np.inf], [1.0, 2.0]], {"axis": 1}),
                ([np.inf, -np.inf], {"where": np.array([True, False])}),
                ([np.inf, -np.inf, 5.0], {"axis": 0, "keepdims": True}),
                ([np.nan, np.inf, -np.inf], {})]


@pytest.mark.parametrize("name, value, n", [("sum", 2000, 40), ("nansum", 2000, 40),
                                           ("prod", 4.0, 12), ("cumsum", 2000, 40),
                                           ("nancumsum", 2000, 40), ("cumprod", 4.0, 12)])
def test_float16_into_a_float32_out_is_the_accumulator_cast_once(name, value, n):
    """Rows whose float16 result overflows (80000, 4^12) land unrounded in a float32
    out, from NumPy and from device input alike: NumPy's answer, which computes in
    out's dtype."""
    x = np.full((2, n), value, np.float16)
    shape = (2, n) if "cum" in name else (2,)
    want = getattr(np, name)(x, axis=1, out=np.zeros(shape, np.float32))
    host_out = np.zeros(shape, np.float32)
    assert getattr(nk, name)(x, axis=1, out=host_out) is host_out
    device_out = cuda.to_device(np.zeros(shape, np.float32))
    getattr(nk, name)(cuda.to_device(x), axis=1, out=device_out)
    np.testing.assert_array_equal(host_out, want)
    np.testing.assert_array_equal(device_out.copy_to_host(), want)


@pytest.mark.parametrize("name, x, dtype", [
    ("sum", np.full((2, 40), 2000, np.float16), np.float16),
    ("nansum", np.full((2, 40), 2000, np.float16), np.float16),
    ("prod", np.full((2, 3), 1e30), np.float32),
    ("sum", np.full((2, 40), 100, np.int8), np.int8),
    ("cumsum", np.full((2, 3), 30000, np.float16), np.float16),
    ("nancumsum", np.full((2, 3), 30000, np.float16), np.float16),
    ("cumsum", np.full((2, 40), 100, np.int8), np.int8),
    ("cumprod", np.full((2, 3), 1e30), np.float32),
    ("cumprod", np.array([[1.1, 1.3, 1.7]] * 2, np.float32), np.float32),
    ("nancumprod", np.array([[1e30, np.nan, 1e30]] * 2), np.float32),
    ("cumulative_prod", np.full((2, 3), 1e30), np.float32),
    ("mean", np.full((2, 4), 2049, np.float32), np.float16),  # float16 holds 2048
    ("mean", np.full((2, 4), 1e30), np.float16),
    ("mean", np.array([[1.0, 2.0, 2.0]] * 2), np.float32)])  # divided in out's float64
def test_a_dtype_narrower_than_out_rounds_before_out_takes_it(name, x, dtype):
    """With dtype= and an out of another dtype, NumPy computes in dtype= and casts into
    out: states wider than dtype (float16's float32, a float32 product's float64, int8
    summed in int64) are rounded to it first, into NumPy's, into device outs alike,
    and into a reversed out. (Exact sums here: a float16 scan otherwise differs from
    NumPy's, which rounds to float16 at every step.)"""
    shape = x.shape if "cum" in name else (2,)
    wide = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    with np.errstate(over="ignore", invalid="ignore"):
        want = getattr(np, name)(x, axis=1, dtype=dtype, out=np.zeros(shape, wide))
        host_out = np.zeros(shape, wide)[..., ::-1]
        assert getattr(nk, name)(x, axis=1, dtype=dtype, out=host_out) is host_out
    device_out = cuda.to_device(np.zeros(shape, wide))
    getattr(nk, name)(cuda.to_device(x), axis=1, dtype=dtype, out=device_out)
    np.testing.assert_array_equal(host_out, want)
    np.testing.assert_array_equal(device_out.copy_to_host(), want)


@pytest.mark.parametrize("out_dtype", [np.float32, np.float64])
def test_a_mean_into_an_out_of_another_dtype_is_divided_there(out_dtype):
    """np.mean divides in out's dtype: a float16 mean into a float32 out is float32's
    5/3, not float16's (whose nearest is 1.6669922)."""
    x = np.array([[1, 2, 2], [1, 1, 2]], np.float16)
    want = np.mean(x, axis=1, out=np.zeros(2, out_dtype))
    host_out, device_out = np.zeros(2, out_dtype), cuda.to_device(np.zeros(2, out_dtype))
    assert nk.mean(x, axis=1, out=host_out) is host_out
    nk.mean(cuda.to_device(x), axis=1, out=device_out)
    np.testing.assert_array_equal(host_out, want)
    np.testing.assert_array_equal(device_out.copy_to_host(), want)
    strided = cuda.to_device(np.zeros(4, out_dtype))[::2]  # through an allocation
    nk.mean(cuda.to_device(x), axis=1, out=strided)
    np.testing.assert_array_equal(strided.copy_to_host(), want)


@pytest.mark.parametrize("name", ["sum", "nansum"])
@pytest.mark.parametrize("axis", [None, 0])
def test_float16_sum_overflow_warns_once_as_numpy(name, axis):
    """A float16 sum past 65504 (accumulated in float32, then cast) warns NumPy's one
    overflow "in reduce", not the cast's as well."""
    x = np.full((10, 2), 60000, np.float16)
    seen = []
    for fn in (getattr(np, name), getattr(nk, name)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = fn(x, axis=axis)
        seen.append(([str(w.message) for w in caught], got))
    assert seen[1][0] == seen[0][0] == ["overflow encountered in reduce"]
    np.testing.assert_array_equal(seen[1][1], seen[0][1])


@pytest.mark.parametrize("name", ["sum", "nansum", "mean", "nanmean"])
@pytest.mark.parametrize("values, kw", SUM_SPECIALS)
def test_sums_of_special_values_warn_as_numpy(name, values, kw):
    """inf + -inf (NumPy: "invalid value encountered in reduce") and an overflow warn
    for host input, under np.geterr(), as NumPy's arithmetic does."""
    x = np.array(values)

    def run(fn):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = fn(x, **kw)
        return got, {str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)}

    want, numpy_warns = run(getattr(np, name))
    got, warns = run(getattr(nk, name))
    np.testing.assert_array_equal(got, want)
    assert warns == numpy_warns  # NumPy's messages too ("... encountered in reduce")
    if numpy_warns:
        with np.errstate(invalid="raise", over="raise"), pytest.raises(FloatingPointError):
            getattr(nk, name)(x, **kw)
    with np.errstate(invalid="ignore", over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        getattr(nk, name)(x, **kw)


def test_a_users_combine_or_identity_that_cannot_work_is_named_at_first_use():
    """A builtin or a *args combine fails Numba's compile, and an identity function
    that returns no number fails its cast: each a TypeError naming the op."""
    @nk.op(identity=0)
    def any_count(*values):
        return values[0] + values[1]

    @nk.op(identity=lambda dtype: "zero")
    def worded(a, b):
        return a + b

    for op, words in ((nk.op(identity=0)(max), "Op 'max': its combine does not compile"),
                      (any_count, "Op 'any_count': its combine does not compile"),
                      (worded, "Op 'worded': identity must be a number")):
        with pytest.raises(TypeError, match=words):
            nk.reduce(np.ones(4), op)


@pytest.mark.parametrize("call", [
    lambda d: nk.sum(d), lambda d: nk.max(d, axis=1), lambda d: nk.argmax(d),
    lambda d: nk.cumsum(d, axis=1), lambda d: nk.sort(d), lambda d: nk.median(d),
    lambda d: nk.histogram(d, bins=4, range=(0, 8)), lambda d: nk.softmax(d),
    lambda d: nk.topk(d, 2), lambda d: nk.logsumexp(d),
    lambda d: nk.segmented_reduce(d[0], [0, 2, 4]),
])
def test_device_arrays_of_non_native_byte_order_are_refused(call):
    """A big-endian device copy (``cuda.to_device`` keeps the byte order) would be
    read as little-endian words: refused, naming x, never a wrong answer or a crash
    inside Numba (host arrays of either order are converted)."""
    big = np.array([[3, 1, 2, 7], [5, 4, 6, 0]], ">f4")
    with pytest.raises(TypeError, match="x is a device array of non-native byte order"):
        call(cuda.to_device(big))
    got = call(big)  # the same call on the host converts and computes
    assert np.asarray(got[0] if isinstance(got, tuple) else got).size


def test_device_outs_and_weights_of_non_native_byte_order_are_refused():
    x = cuda.to_device(np.ones((2, 3)))
    with pytest.raises(OutDtypeError, match="out is a device array of non-native byte"):
        nk.sum(x, axis=1, out=cuda.device_array(2, ">f8"))
    with pytest.raises(OutDtypeError, match="out is a device array of non-native byte"):
        nk.cumsum(x, axis=1, out=cuda.device_array((2, 3), ">f8"))
    with pytest.raises(TypeError, match="weights is a device array of non-native byte"):
        nk.average(x, axis=1, weights=cuda.to_device(np.ones(3, ">f8")))
    with pytest.raises(TypeError, match="dy is a device array of non-native byte"):
        nk.softmax_backward(x, cuda.to_device(np.ones((2, 3), ">f8")))
    big = cuda.to_device(np.array([0, 1], ">i8"))  # any other device argument
    with pytest.raises(TypeError, match="a device array of non-native byte order"):
        nk.cross_entropy(x, big)
    with pytest.raises(TypeError, match="a device array of non-native byte order"):
        nk.segmented_reduce(cuda.to_device(np.ones(4)), big)


F16_CASES = {  # each element cast to float16 first, as NumPy's: inf, zeros, rounding
    "overflow": np.array([1e5, -1e5, 3.0, 2.0]),
    "overflow int": np.array([70000, 1, -70000, 3], np.int32),
    "underflow": np.array([1e-8] * 5 + [1.0]),
    "rounding": np.array([2049.0, 1.0, 2051.0, -0.0], np.float32),
    "negative zeros": np.array([-1e-8, -0.0]),
}


@pytest.mark.parametrize("case", list(F16_CASES))
@pytest.mark.parametrize("fn", ["sum", "nansum", "mean", "nanmean", "prod", "cumsum",
                                "nancumsum", "cumulative_sum"])
def test_a_float16_dtype_casts_each_wider_element_first(case, fn):
    """NumPy reduces (and scans) in a float16 ``dtype=`` each element cast to float16:
    ``1e5`` is inf there, ``1e-8`` 0; so here too, flat and along each axis (every
    case's partial sums are exact in float16, so float32 accumulation gives NumPy's)."""
    x = F16_CASES[case]
    for a, axis in ((x, None), (np.stack([x, x[::-1]]), 1), (np.stack([x, x[::-1]]).T, 0)):
        with np.errstate(all="ignore"):
            want = getattr(np, fn)(a, axis=axis, dtype=np.float16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = getattr(nk, fn)(a, axis=axis, dtype=np.float16)
        assert np.asarray(got).dtype == want.dtype == np.float16
        np.testing.assert_array_equal(got, want)
        signed = ~np.isnan(want)  # a NaN's sign is the hardware's (x86's is negative)
        assert (np.signbit(got)[signed] == np.signbit(want)[signed]).all()
    if fn == "mean":  # and where= (sums and counts in one pass)
        keep = np.arange(x.size) != x.size - 1
        with np.errstate(all="ignore"):
            want = np.mean(x, dtype=np.float16, where=keep)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(nk.mean(x, dtype=np.float16, where=keep), want)


@pytest.mark.parametrize("x, where", [
    (np.array([1e5, -1e5, 3.0]), True),
    (np.array([100000, -100000], np.int32), True),  # integers are cast too
    (np.array([1e5, 1.0, 2.0]), np.array([False, True, True])),  # masked out: cast anyway
    (np.float64(1e5), True),  # a 0-d input is cast before the reduce
    (np.array([65535, 1], np.uint16), True),
], ids=["inf - inf", "int32", "masked out", "0-d", "uint16"])
def test_a_float16_dtype_warns_of_its_casts_as_numpy(x, where):
    for fn in ("sum", "mean", "nanmean"):
        if fn == "nanmean" and where is not True:
            continue
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            got = getattr(nk, fn)(x, dtype=np.float16, where=where)
        with warnings.catch_warnings(record=True) as numpys:
            warnings.simplefilter("always")
            want = getattr(np, fn)(x, dtype=np.float16, where=where)
        np.testing.assert_array_equal(got, want)
        assert [str(w.message) for w in ours if w.category is RuntimeWarning] == \
            [str(w.message) for w in numpys], fn


def test_a_float16_segmented_reduction_casts_each_element():
    x = np.array([1e5, -1e5, 3.0])
    got = nk.segmented_reduce(x, np.array([0, 2, 3]), dtype=np.float16)
    with np.errstate(all="ignore"):
        want = np.add.reduceat(x, [0, 2], dtype=np.float16)  # [nan, 3.0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)
