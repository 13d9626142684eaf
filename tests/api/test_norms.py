"""vector_norm against NumPy 2's ``np.linalg.vector_norm``: every order, axis form and
reduce strategy, the root folded into the reduction's store or taken apart, dtypes and
special values, and the arguments it refuses.

Tolerances: float32 results against NumPy in float64, rtol 2e-6; float64 rtol 1e-12;
float16 rtol 2e-3; max, min and counts exactly.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.ops import norms
from numbakern.strategies import available

RNG = np.random.default_rng(29)
ORDERS = [2, None, 1, 0, np.inf, -np.inf, 3, 0.5, -1, -2.5]


def _ref(x, **kw):
    with np.errstate(divide="ignore"):
        return np.linalg.vector_norm(np.asarray(x, np.float64), **kw)


def _check(got, x, rtol=2e-6, dtype=np.float32, **kw):
    want = _ref(x, **kw)
    got = np.asarray(got)
    assert got.dtype == dtype and got.shape == np.shape(want), (got, want)
    np.testing.assert_allclose(got, want, rtol=rtol)


@pytest.mark.parametrize("ord", ORDERS, ids=str)
def test_every_order_and_axis_form(ord):
    x = RNG.standard_normal((5, 6, 40)).astype(np.float32)
    for axis in (None, 0, 2, (0, 2), ()):
        for keepdims in (False, True):
            kw = {"axis": axis, "keepdims": keepdims, "ord": 2 if ord is None else ord}
            _check(nk.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord), x, **kw)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129, 512, 1000])
def test_sizes_around_warp_block_and_grid_boundaries(n):
    h = RNG.standard_normal(n).astype(np.float32)
    x = cuda.to_device(h)
    for ord in (2, np.inf, -3):
        _check(nk.vector_norm(x, ord=ord).copy_to_host(), h, ord=ord)


@pytest.mark.parametrize("strategy", available("reduce"))
def test_every_strategy_whole_array_and_axes(strategy):
    h = RNG.standard_normal((40, 33)).astype(np.float32)
    for ord in (2, 1, np.inf, -np.inf, 0, 1.5):
        _check(nk.vector_norm(h, ord=ord, strategy=strategy), h, ord=ord)  # several blocks
        _check(nk.vector_norm(h, axis=0, ord=ord, strategy=strategy), h, axis=0, ord=ord)
    rows = h[:2].reshape(2, -1).repeat(10, axis=1)  # row partials: pieces a row
    _check(nk.vector_norm(rows, axis=1, strategy=strategy), rows, axis=1)


def test_the_folded_root_has_the_bits_of_the_root_taken_apart():
    """The default strategy takes the root in the reduction's store, atomic_fold in a
    launch after it: both as ``sqrt`` (or the power) of the float64 sum, then cast."""
    for n in (33, 512, 1500):
        x = cuda.to_device(RNG.standard_normal(n).astype(np.float32))
        squares = nk.reduce(x, norms.SUM_SQUARES).copy_to_host()
        want = np.float32(np.sqrt(np.float64(squares)))
        assert nk.vector_norm(x).copy_to_host().tobytes() == want.tobytes()
        apart = nk.vector_norm(x, strategy="atomic_fold/warp_shuffle").copy_to_host()
        np.testing.assert_allclose(apart, want, rtol=2e-6)
    x = cuda.to_device(RNG.standard_normal((4, 70)).astype(np.float32))
    powers = nk.reduce(x, norms.sum_powers(3.0), axis=1).copy_to_host()
    exponent = np.float64(np.reciprocal(np.float32(3)))  # 1/3 rounded as NumPy's
    want = (np.float64(powers) ** exponent).astype(np.float32)
    assert np.array_equal(nk.vector_norm(x, axis=1, ord=3).copy_to_host(), want)


def test_dtypes_as_numpy():
    ints = np.array([[-128, 3, 0], [0, 127, -1]], np.int8)  # |-128| in float64, no wrap
    for ord in (1, 2, np.inf, -np.inf, 0):
        _check(nk.vector_norm(ints, axis=1, ord=ord), ints, dtype=np.float64, rtol=1e-12,
               axis=1, ord=ord)
    flags = np.array([0, 1, 2, 255], np.uint8).view(bool)  # every non-zero byte is True
    assert nk.vector_norm(flags, ord=1) == 3.0
    big = np.array([2**63 - 1, 2**63 - 1], np.int64)
    _check(nk.vector_norm(big), big, dtype=np.float64, rtol=1e-12)
    wide = RNG.standard_normal((3, 50))
    _check(nk.vector_norm(wide, axis=1, ord=2.5), wide, dtype=np.float64, rtol=1e-12,
           axis=1, ord=2.5)
    half = (RNG.standard_normal(300) * 400).astype(np.float16)  # squares past 65504
    got = nk.vector_norm(half)
    assert got.dtype == np.float16  # squared and summed in float32, unlike NumPy's
    np.testing.assert_allclose(got, _ref(half), rtol=2e-3)
    with np.errstate(over="ignore"):
        assert np.isinf(np.linalg.vector_norm(half))


def test_special_values_as_numpy():
    x = np.array([[3.0, np.nan, 4.0], [np.inf, 1.0, 0.0], [0.0, -0.0, 0.0]], np.float32)
    for ord in ORDERS[2:] + [2]:
        got = nk.vector_norm(x, axis=1, ord=ord)
        with np.errstate(divide="ignore"):
            want = np.linalg.vector_norm(x, axis=1, ord=ord)
        assert np.array_equal(got, want, equal_nan=True), (ord, got, want)
    empty = np.zeros((0, 3), np.float32)
    for ord, value in ((2, 0.0), (np.inf, 0.0), (0, 0.0), (-1, np.inf)):
        assert nk.vector_norm(empty, axis=0, ord=ord).tolist() == [value] * 3
    with pytest.raises(ValueError, match="zero-size array"):
        nk.vector_norm(empty, ord=-np.inf)
    huge = np.array([1e200, 1e200])  # no scaling: inf, as NumPy's
    with np.errstate(over="ignore"):
        assert nk.vector_norm(huge) == np.linalg.vector_norm(huge) == np.inf
    assert nk.vector_norm(huge, ord=0.5) == pytest.approx(4e200)
    assert nk.vector_norm(np.array([1e-200]), ord=-3) == 0.0  # its power overflows


def test_refuses_what_it_does_not_take():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="invalid norm order 'fro' for vectors"):
        nk.vector_norm(x, ord="fro")
    for ord in (True, np.nan, 1j, [2]):
        with pytest.raises(TypeError, match="ord must be a real number"):
            nk.vector_norm(x, ord=ord)
    with pytest.raises(TypeError, match="vector_norm is not defined for x of dtype complex"):
        nk.vector_norm(np.ones(3, np.complex64))
    with pytest.raises(nk.AxisError):
        nk.vector_norm(x, axis=1)
    with pytest.raises(TypeError, match="positional"):
        nk.vector_norm(x, 0)


def test_torch_tensors_agree_with_torch():
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(RNG.standard_normal((6, 33)).astype(np.float32))
    for ord in (2, 1, float("inf"), float("-inf"), 0, 3.0):
        got = nk.vector_norm(t, axis=1, ord=ord)
        assert isinstance(got, torch.Tensor)
        torch.testing.assert_close(got, torch.linalg.vector_norm(t, ord=ord, dim=1))


def test_the_norms_ops_pickle_by_name():
    """Dask's workers resolve them again rather than compile a copy each task."""
    import pickle

    for op in (norms.SUM_SQUARES, norms.SUM_ABS, norms.MAX_ABS, norms.MIN_ABS,
               norms.COUNT_NONZERO):
        assert pickle.loads(pickle.dumps(op)) is op


def test_numpys_reciprocal_order_zero_d_axes_and_bfloat16_in_place():
    x = np.array([3.0, 4.0, 0.5], np.float32)
    for ord in (1e39, -1e39, 3, -1):  # 1/ord in float32: 0 past its range, a norm of 1
        with np.errstate(all="ignore"):
            want = np.linalg.vector_norm(x, ord=ord)
        assert nk.vector_norm(x, ord=ord) == pytest.approx(want, rel=1e-6)
    with np.errstate(all="ignore"):
        assert nk.vector_norm(x.astype(np.float16), ord=1e5) == 1.0  # float16's range
    for axis in (0, -1, (0,)):
        with pytest.raises(nk.AxisError):
            nk.vector_norm(np.array(2.0), axis=axis)
    assert nk.vector_norm(np.array(-2.0)) == nk.vector_norm(np.array(-2.0), axis=()) == 2.0
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)  # read in place, widened
        got = nk.vector_norm(x.astype(bf16), ord=3)
    assert got.dtype == bf16
    assert float(got) == pytest.approx(np.linalg.vector_norm(x.astype(np.float64), ord=3),
                                       rel=8e-3)
