"""A device ``out`` that overlaps an input in part is refused (its kernels would read
what other tiles had already written); in place and interleaved views are not."""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime.device import SIMULATOR


def test_a_scan_into_its_input_shifted_is_refused():
    x = cuda.to_device(np.arange(1, 1001, dtype=np.int64))
    with pytest.raises(ValueError, match="out overlaps x in part"):
        nk.cumsum(x[:-1], out=x[1:])
    with pytest.raises(ValueError, match="cumprod: out overlaps x"):
        nk.cumprod(x[1:], out=x[:-1])


def test_in_place_and_interleaved_scans_are_taken():
    host = np.arange(1, 1001, dtype=np.int64)
    x = cuda.to_device(host)
    nk.cumsum(x, out=x)  # in place: the same elements
    np.testing.assert_array_equal(x.copy_to_host(), np.cumsum(host))
    x = cuda.to_device(host)
    nk.cumsum(x[::2], out=x[1::2])  # the same memory, no element in common
    np.testing.assert_array_equal(x.copy_to_host()[1::2], np.cumsum(host[::2]))
    np.testing.assert_array_equal(x.copy_to_host()[::2], host[::2])


def test_numpy_arrays_may_overlap_as_numpy_allows():
    a, b = np.arange(1, 300), np.arange(1, 300)
    nk.cumsum(a[:-1], out=a[1:])
    np.cumsum(b[:-1], out=b[1:])
    np.testing.assert_array_equal(a, b)


def test_softmax_family_outs_that_overlap_an_input_in_part_are_refused():
    host = np.random.default_rng(0).standard_normal((2, 70)).astype(np.float32)
    x = cuda.to_device(host)
    with pytest.raises(ValueError, match="softmax: out overlaps x in part"):
        nk.softmax(x[:, :64], out=x[:, 4:68])
    y, dy = cuda.to_device(host), cuda.to_device(host)
    with pytest.raises(ValueError, match="softmax_backward: out overlaps dy in part"):
        nk.softmax_backward(y[:, :64], dy[:, :64], out=dy[:, 6:70])
    nk.softmax(x, out=x)  # in place
    e = np.exp(host - host.max(1, keepdims=True))
    np.testing.assert_allclose(x.copy_to_host(), e / e.sum(1, keepdims=True), rtol=1e-5)


def test_a_cross_entropy_gradient_over_its_logits_in_part_is_refused():
    logits = cuda.to_device(np.random.default_rng(1).standard_normal((4, 9)).astype(
        np.float32))
    target = np.array([0, 3, 7, 1])
    with pytest.raises(ValueError, match="grad_out overlaps logits in part"):
        nk.cross_entropy(logits[:, :8], target, return_grad=True, grad_out=logits[:, 1:])


def _strided(a, shape, strides):
    return np.lib.stride_tricks.as_strided(a, shape, strides)


def test_an_out_whose_elements_share_memory_is_refused_for_every_kind():
    """A zero stride along an axis of length > 1, or rows that overlap: the writes to
    one element would race (NumPy's as_strided views are writeable; under the
    simulator, device arrays wrapping them too)."""
    kinds = [lambda a: a]
    if SIMULATOR:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        kinds.append(FakeCUDAArray)
    x = np.random.default_rng(2).standard_normal((3, 4, 2)).astype(np.float32)
    host = np.zeros(10, np.float32)
    for out, cause in ((_strided(host, (3, 4), (0, 4)), "a zero stride along an axis"),
                       (_strided(host, (3, 4), (8, 4)), "overlapping rows")):
        for kind in kinds:
            dx = x if kind is kinds[0] else cuda.to_device(x)
            with pytest.raises(ValueError, match=f"sum: out has elements that share memory "
                                                 rf"\(strides .*: {cause}"):
                nk.sum(dx, axis=2, out=kind(out))
            with pytest.raises(ValueError, match="cumsum: out has elements that share"):
                nk.cumsum(dx[:, :, 0], axis=1, out=kind(out))
            with pytest.raises(ValueError, match="softmax: out has elements that share"):
                nk.softmax(dx[:, :, 0], out=kind(out))


def test_outs_of_distinct_elements_in_any_layout_are_taken():
    x = np.random.default_rng(3).standard_normal((2, 3, 5)).astype(np.float32)
    base = np.zeros(8, np.float32)
    out = _strided(base, (2, 3), (12, 8))  # interleaved rows: elements 0 2 4 and 3 5 7
    assert nk.sum(x, axis=2, out=out) is out
    np.testing.assert_allclose(out, x.sum(axis=2), rtol=1e-6)
    np.testing.assert_array_equal(base[[1, 6]], 0)
    one = _strided(np.zeros(3, np.float32), (1, 3), (0, 4))  # stride 0 along a 1
    nk.sum(x[:1], axis=2, out=one)
    np.testing.assert_allclose(one, x[:1].sum(axis=2), rtol=1e-6)
