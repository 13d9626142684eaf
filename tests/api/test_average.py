"""``average``: NumPy's weighted mean, compared with ``np.average`` on the same input
(values within float tolerances, dtypes, shapes, the ``returned`` sums and NumPy's
errors), across the sizes where warps and blocks end and every reduce strategy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk

RNG = np.random.default_rng(11)
STRATEGIES = {s.label: s for s in nk.strategies.every("reduce", threads=32, blocks=2)}


def same(got, want, rtol=1e-12, atol=0.0):
    """Equal dtype and shape; values within ``rtol`` (and ``atol``, for float32 sums
    that cancel to near zero, where the summation order moves the last bits)."""
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol)


@pytest.mark.parametrize("label", sorted(STRATEGIES))
@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129])
def test_weighted_rows_against_numpy(label, n):
    x = RNG.standard_normal((3, n))
    w = RNG.random(n) + 0.1
    for axis, weights in ((1, w), (None, np.broadcast_to(w, x.shape)), (0, w[:3] if n >= 3
                                                                        else None)):
        if axis == 0 and weights is None:
            continue
        got = nk.average(x, axis=axis, weights=weights, returned=True,
                         strategy=STRATEGIES[label])
        want = np.average(x, axis=axis, weights=weights, returned=True)
        same(got[0], want[0])
        same(got[1], want[1])


@pytest.mark.parametrize("dtype,wdtype,rtol", [
    (np.int32, np.int64, 1e-12),      # integers: float64 (NumPy's rule)
    (np.bool_, np.bool_, 1e-12),
    (np.float32, np.float16, 1e-6),   # float32
    (np.float16, np.int8, 1e-3),      # float16, summed in float32, rounded once
    (np.int8, np.float32, 1e-12),     # float64: at least float64 for integer x
])
def test_result_dtypes_as_numpy(dtype, wdtype, rtol):
    x = RNG.integers(0, 5, (4, 33)).astype(dtype)
    w = RNG.integers(1, 4, 33).astype(wdtype)
    for keepdims in (False, True):
        got = nk.average(x, axis=1, weights=w, returned=True, keepdims=keepdims)
        want = np.average(x, axis=1, weights=w, returned=True, keepdims=keepdims)
        same(got[0], want[0], rtol)
        same(got[1], want[1], rtol)


def test_weights_along_axes_in_the_order_given():
    """NumPy pairs the weights' axes with ``axis`` in the order given (not sorted)."""
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    for axis, shape in (((2, 1), (4, 3)), ((1, 2), (3, 4)), ((1, 0), (3, 2)), (-1, (4,)),
                        ([0, 2], (2, 4))):
        w = np.arange(1.0, 1 + np.prod(shape)).reshape(shape)
        same(nk.average(x, axis=axis, weights=w), np.average(x, axis=axis, weights=w))


def test_without_weights_it_is_the_mean():
    x = RNG.standard_normal((5, 40)).astype(np.float32)
    for axis in (None, 0, (0, 1)):
        got = nk.average(x, axis=axis, returned=True)
        want = np.average(x, axis=axis, returned=True)
        same(got[0], want[0], 1e-5, 1e-6)  # float32: tree order against NumPy's pairwise
        same(got[1], want[1])
    assert type(nk.average(x)) is type(np.average(x))  # a NumPy scalar


def test_special_values_and_warnings_as_numpy():
    h = np.float16
    cases = [(np.array([1.0, np.nan]), [1, 0]),        # NaN * 0: NaN, no warning
             (np.array([1.0, 2.0]), [np.inf, 1.0]),    # inf / inf: "scalar divide"
             (np.array([1e300, 2.0]), [1e10, 1.0]),    # products overflow: "multiply"
             (np.array([1e308, 1e308]), [1.0, 1.0]),   # their sum overflows: "reduce"
             (np.array([np.inf, -np.inf]), [1, 2]),    # inf - inf in the sum
             (np.array([1.0, 2.0]), [np.inf, -np.inf]),  # ... in both sums
             # float16 products rounded to float16 as NumPy's multiply rounds them
             (np.array([200, 200], h), np.array([200, -199], h)),
             (np.array([1000, -1000, 5], h), np.array([100, 100, 1], h)),
             (np.array([1, 1], h), np.array([60000, 60000], h))]  # weights' sum
    for x, w in cases:
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            got = nk.average(x, weights=w)
        with warnings.catch_warnings(record=True) as numpys:
            warnings.simplefilter("always")
            want = np.average(x, weights=w)
        np.testing.assert_array_equal(got, want)
        assert type(got) is type(want)
        # NumPy's floating-point words (a driver's DeprecationWarning at a process's
        # first stream, cuda-python's, is neither's)
        ours = [w for w in ours if issubclass(w.category, RuntimeWarning)]
        assert [str(w.message) for w in ours] == [str(w.message) for w in numpys]
        assert all(w.filename == __file__ for w in ours)  # at the user's call
    with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="multiply"):
        nk.average(np.array([1e300, 2.0]), weights=[1e10, 1.0])
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError, match="reduce"):
        nk.average(np.array([1.0, 2.0]), weights=[np.inf, -np.inf])


def test_errors_as_numpy():
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        nk.average(x, axis=1, weights=[1, 2, -3])
    with pytest.raises(ZeroDivisionError):  # NumPy's a.size / avg.size
        nk.average(np.zeros((0, 3)), axis=1)
    for shape, axis, w in (((0, 3), 1, [1, -1, 0]), ((1, 0, 2), 2, [0, 0])):
        with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):  # no outputs,
            nk.average(np.zeros(shape), axis=axis, weights=w)  # yet NumPy sums w first
    with pytest.raises(TypeError, match="Axis must be specified"):
        nk.average(x, weights=[1, 2, 3])
    with pytest.raises(ValueError, match="weights of shape"):
        nk.average(x, axis=1, weights=[1, 2])
    with pytest.raises(TypeError, match="weights must hold real numbers"):
        nk.average(x, axis=1, weights=np.ones(3, np.complex64))
    with pytest.raises(TypeError, match="x must hold real numbers"):  # no float128 kernels
        nk.average(x.astype(np.longdouble), axis=1, weights=np.ones(3))
    for bad in (np.array(["a"]), np.array([1j]), np.array([1], object)):  # no weights too
        with pytest.raises(TypeError, match="average: x must hold real numbers"):
            nk.average(bad)
    with pytest.raises(np.exceptions.AxisError):
        nk.average(x, axis=2, weights=np.ones(3))
    with pytest.raises(TypeError, match="returned"):
        nk.average(x, returned="yes")


def test_empty_slices_and_0d_input():
    empty = np.zeros((2, 0))
    same(nk.average(empty, axis=0, weights=empty), np.average(empty, axis=0, weights=empty))
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):  # sums of nothing
        nk.average(empty, axis=1, weights=empty + 1)
    got = nk.average(np.float64(3), weights=2.0, returned=True)
    assert got == np.average(np.float64(3), weights=2.0, returned=True)
    assert type(got[0]) is np.float64


def test_device_arrays_in_device_arrays_out():
    x = RNG.standard_normal((3, 65)).astype(np.float32)
    w = (RNG.random(65) + 0.5).astype(np.float32)
    for weights in (cuda.to_device(w), w):  # on x's device, or on the host
        got, scale = nk.average(cuda.to_device(x), axis=1, weights=weights, returned=True)
        assert hasattr(got, "copy_to_host") and hasattr(scale, "copy_to_host")
        want = np.average(x, axis=1, weights=w, returned=True)
        same(got.copy_to_host(), want[0], 1e-5, 1e-6)
        same(scale.copy_to_host(), want[1], 1e-6)
    empty = nk.average(cuda.to_device(x[:0]), axis=1, weights=w, returned=True)
    assert all(hasattr(e, "copy_to_host") and e.shape == (0,) for e in empty)
    strided = cuda.to_device(x)[:, ::2]
    same(nk.average(strided, axis=None, weights=cuda.to_device(np.ones((3, 33), np.float32)))
         .copy_to_host(), np.average(x[:, ::2]), 1e-5, 1e-6)


@pytest.mark.gpu
def test_cupy_and_cuda_tensors_in_their_own_type_out():
    x = RNG.standard_normal((5, 1000)).astype(np.float32)
    w = (RNG.random(1000) + 0.5).astype(np.float32)
    want = np.average(x, axis=1, weights=w, returned=True)
    cp = pytest.importorskip("cupy")
    got = nk.average(cp.asarray(x), axis=1, weights=cp.asarray(w), returned=True)
    assert all(isinstance(g, cp.ndarray) for g in got)
    same(cp.asnumpy(got[0]), want[0], 1e-5, 1e-6)
    same(cp.asnumpy(got[1]), want[1], 1e-6)
    torch = pytest.importorskip("torch")
    got = nk.average(torch.from_numpy(x).cuda(), axis=1, weights=torch.from_numpy(w).cuda())
    assert isinstance(got, torch.Tensor) and got.is_cuda
    same(got.cpu().numpy(), want[0], 1e-5, 1e-6)
