"""The launcher's kernel parameters, checked without a GPU (the driver call stubbed).

On a GPU every kernel goes through ``launch._Launcher``; a wrong parameter there is a
wrong pointer in every kernel. These tests hold its flattening to Numba's array ABI
(``meminfo, parent, size, itemsize, data, *shape, *strides``, 8 bytes each) and its
scalars to int64 (wrapping uint64) and float64 bits.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from numbakern.runtime import launch


@pytest.fixture
def launched(monkeypatch):
    """``run(args) -> (signature key, int64 parameters)`` through a stubbed driver."""
    seen = {}
    launcher = launch._Launcher(dispatcher=None)

    def prepare(key, count):
        values = np.zeros(count, dtype=np.int64)
        addresses = values.ctypes.data + 8 * np.arange(count, dtype=np.uint64)
        seen["key"] = key
        return 0, values, (addresses.ctypes.data_as(ctypes.POINTER(ctypes.c_void_p)),
                           addresses)

    def driver(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        seen["values"] = launcher.compiled[seen["key"]][1].tolist()
        return 0

    monkeypatch.setattr(launcher, "_prepare", prepare)
    monkeypatch.setattr(launch, "_cuLaunchKernel", driver)
    monkeypatch.setattr(launch, "_cupy_launch_kernel", None)  # the ctypes path

    class Stream:
        handle = 0

    def run(args):
        launcher(1, 32, Stream(), args)
        return seen["key"], seen["values"]

    return run


def test_arrays_flatten_as_numbas_abi(launched):
    matrix = launch.DeviceBuffer(0x10000, (7, 5), (40, 8), np.float64)
    reversed_view = launch.DeviceBuffer(0x20000 + 32, (9,), (-4,), np.int32)
    key, values = launched((matrix, reversed_view))
    assert key == ((np.dtype(np.float64), 2, True), (np.dtype(np.int32), 1, False))
    assert values == [0, 0, 35, 8, 0x10000, 7, 5, 40, 8,
                      0, 0, 9, 4, 0x20000 + 32, 9, -4]


def test_scalars_travel_as_8_bytes(launched):
    key, values = launched((3, np.int64(-2), np.uint64(2**64 - 1), 2.5, np.float32(1.5)))
    assert key == ("i", "i", "i", "f", "f")
    assert values == [3, -2, -1, int(np.float64(2.5).view(np.int64)),
                      int(np.float64(1.5).view(np.int64))]


def test_cuda_array_interface_objects_are_described(launched):
    class Foreign:  # no strides: C-contiguous by the interface's rule
        __cuda_array_interface__ = {"shape": (3, 4), "strides": None, "typestr": "<f4",
                                    "data": (0x4000, False), "version": 3}

    key, values = launched((Foreign(),))
    assert key == ((np.dtype(np.float32), 2, True),)
    assert values == [0, 0, 12, 4, 0x4000, 3, 4, 16, 4]


def test_bools_are_refused(launched):
    with pytest.raises(TypeError, match="not bools"):
        launched((True,))


def test_a_tuple_of_arrays_flattens_member_by_member(launched):
    """An N-field state's arrays travel as one tuple argument (numbakern/ops/state.py):
    Numba flattens it member by member, each array in its ABI, and types it as a
    tuple of arrays."""
    from numba import types

    counts = launch.DeviceBuffer(0x10000, (4,), (8,), np.int64)
    means = launch.DeviceBuffer(0x20000, (4,), (8,), np.float64)
    key, values = launched(((counts, means, means), counts, 7))
    assert key == (("tuple", ((np.dtype(np.int64), 1, True),) + ((np.dtype(np.float64), 1,
                                                                    True),) * 2),
                   (np.dtype(np.int64), 1, True), "i")
    one = [0, 0, 4, 8]
    assert values == (one + [0x10000, 4, 8] + one + [0x20000, 4, 8] + one + [0x20000, 4, 8]
                      + one + [0x10000, 4, 8] + [7])
    signature = launch._signature(key)
    assert isinstance(signature[0], types.Tuple) and len(signature[0]) == 3
    assert signature[0][0] == types.Array(types.int64, 1, "C")
    _, _, slots = launch.flatten(((counts, means, means), counts))
    assert [slot for slot, _ in slots] == [4, 11, 18, 25]


@pytest.fixture
def stub_copier(monkeypatch):
    """``read_small`` through a stubbed driver: host memory stands for the device's,
    ``calls`` records each driver call."""
    calls = []
    kept = []  # the stub's "pinned" allocations, alive for the test

    def copy(dst, src, nbytes, stream):
        calls.append(("copy", nbytes, stream))
        ctypes.memmove(dst, src, nbytes)
        return 0

    def sync(stream):
        calls.append(("sync", stream))
        return 0

    def alloc(pointer, nbytes, flags):
        calls.append(("alloc", nbytes, flags))
        kept.append(ctypes.create_string_buffer(nbytes))
        pointer._obj.value = ctypes.addressof(kept[-1])
        return 0

    monkeypatch.setattr(launch, "_copy_functions", (copy, sync, alloc))
    monkeypatch.setattr(launch, "_pinned_free", [])
    monkeypatch.setattr(launch._local, "has_context", True, raising=False)
    return calls


def test_small_reads_reuse_one_pinned_buffer_and_wait_on_the_stream(stub_copier):
    device = np.array([7, -3, 2**40], dtype=np.int64)
    got = launch.read_small(device.ctypes.data, device.nbytes, 0x55)
    np.testing.assert_array_equal(got.view(np.int64), device)
    got[:] = 0  # the caller's own copy: the next read is not disturbed
    again = launch.read_small(device.ctypes.data + 8, 16, 0)
    np.testing.assert_array_equal(again.view(np.int64), device[1:])
    assert stub_copier == [("alloc", launch.PINNED_BYTES, 1), ("copy", 24, 0x55),
                           ("sync", 0x55), ("copy", 16, 0), ("sync", 0)]


def test_a_failed_small_read_raises_with_the_cuda_error_and_keeps_its_buffer(
        stub_copier, monkeypatch):
    copy, _, alloc = launch._copy_functions
    monkeypatch.setattr(launch, "_copy_functions", (copy, lambda stream: 700, alloc))
    word = np.array([1], dtype=np.int64)
    with pytest.raises(RuntimeError, match="cuStreamSynchronize failed with CUDA error 700"):
        launch.read_small(word.ctypes.data, 8, 0)
    assert len(launch._pinned_free) == 1  # given back for the next read


def test_host_words_reads_contiguous_words_by_the_driver_and_the_rest_by_numba(
        stub_copier, monkeypatch):
    """``views.host_words`` on a GPU (the simulator switch and the driver stubbed): a
    short contiguous view through ``read_small`` on the stream's handle; a strided or
    too long one through ``host_copy``."""
    from numbakern.runtime import views

    monkeypatch.setattr(views, "SIMULATOR", False)
    monkeypatch.setattr(views, "host_copy", lambda view, stream=0: ("numba", view.shape))
    words = np.array([4, 9, 16, 25], dtype=np.int64)
    view = launch.DeviceBuffer(words.ctypes.data, (2,), (8,), np.int64)

    class Stream:
        handle = 0x77

    got = views.host_words(view, Stream())
    assert got.dtype == np.int64 and got.tolist() == [4, 9]
    assert stub_copier[-2:] == [("copy", 16, 0x77), ("sync", 0x77)]
    strided = launch.DeviceBuffer(words.ctypes.data, (2,), (16,), np.int64)
    assert views.host_words(strided) == ("numba", (2,))
    long = launch.DeviceBuffer(words.ctypes.data, (launch.PINNED_BYTES // 8 + 1,), (8,),
                               np.int64)
    assert views.host_words(long) == ("numba", (launch.PINNED_BYTES // 8 + 1,))
    assert len([c for c in stub_copier if c[0] == "copy"]) == 1


def test_a_failed_ctypes_launch_names_the_cuda_error(launched, monkeypatch):
    names = {b"cuGetErrorName": b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
             b"cuGetErrorString": b"too many resources requested for launch"}

    class Driver:  # the two lookups, answering as libcuda does through a char**
        def __getattr__(self, getter):
            def get(err, text):
                assert err.value == 701
                text._obj.value = names[getter.encode()]
                return 0
            return get

    monkeypatch.setattr(launch, "_cuLaunchKernel", lambda *args: 701)
    monkeypatch.setattr(launch, "_libcuda", Driver)
    with pytest.raises(RuntimeError, match=r"cuLaunchKernel failed with CUDA error 701 "
                       r"\(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources"):
        launched((3,))


def test_an_error_the_driver_cannot_name_keeps_its_number(monkeypatch):
    def no_driver():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(launch, "_libcuda", no_driver)
    with pytest.raises(RuntimeError, match=r"^cuMemAlloc failed with CUDA error 2$"):
        launch._checked(2, "cuMemAlloc")


@pytest.mark.gpu
def test_the_driver_names_its_errors():
    with pytest.raises(RuntimeError, match=r"CUDA error 701 \(CUDA_ERROR_LAUNCH_OUT_OF_RESO"):
        launch._checked(701, "cuLaunchKernel")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8", "bool"])
def test_a_cuda_tensor_is_described_as_its_interface_says(dtype):
    # read directly (not through torch's Python interface), to the same description
    torch = pytest.importorskip("torch")
    t = torch.zeros((6, 10), dtype=getattr(torch, dtype), device="cuda")[1::2, ::3]
    got = launch.buffer(t)
    cai = t.__cuda_array_interface__
    assert (got.ptr, got.shape, got.strides, got.dtype) == \
        (cai["data"][0], tuple(cai["shape"]), tuple(cai["strides"]), np.dtype(cai["typestr"]))
    assert not got.c_contiguous and got.owner is t


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8", "bool", "complex64"])
def test_a_tensor_is_described_as_numpy_sees_its_memory(dtype):
    # the direct description of a (CUDA) tensor, checked on a CPU tensor's memory
    torch = pytest.importorskip("torch")
    t = torch.zeros((6, 10), dtype=getattr(torch, dtype))[1::2, ::3]
    got, view = launch._torch_buffer(t), t.numpy()
    assert (got.ptr, got.shape, got.strides, got.dtype) == \
        (view.__array_interface__["data"][0], view.shape, view.strides, view.dtype)
    assert got.owner is t and not got.c_contiguous
    # NumPy names no bfloat16: torch's interface describes it, or refuses it
    assert launch._torch_buffer(torch.zeros(3, dtype=torch.bfloat16)) is None


class _NumbasCopy:
    """``to_device_array(buf).copy_to_host`` of a buffer over host memory, refusing a
    negative stride as Numba does ("D->H copy not implemented for negative strides")."""

    def __init__(self, buf):
        self.buf = buf

    def copy_to_host(self, stream=0):
        if any(s < 0 for s in self.buf.strides):
            raise NotImplementedError("D->H copy not implemented for negative strides")
        (n,), (stride,) = self.buf.shape, self.buf.strides  # a span: 1-D, forwards
        memory = (ctypes.c_char * ((n - 1) * stride + self.buf.dtype.itemsize)).from_address(
            self.buf.ptr)
        return np.ndarray((n,), self.buf.dtype, memory, 0, (stride,)).copy()


@pytest.mark.parametrize("take", [lambda w: w[::-1, ::2], lambda w: w[::-2, ::-3],
                                  lambda w: w[2, ::-1], lambda w: w[1:, 1:][::-1].T],
                         ids=["rows-reversed", "both-reversed", "a-row-reversed",
                              "transposed"])
def test_host_copy_reads_negative_strides_through_their_span(take, monkeypatch):
    """``views.host_copy`` on a GPU (the simulator switch and Numba's copy stubbed) of
    views with negative strides, alone or beside positive ones: their memory read
    forwards, the copy holding the view's elements in its shape."""
    from numbakern.runtime import views

    monkeypatch.setattr(views, "SIMULATOR", False)
    monkeypatch.setattr(views, "to_device_array", _NumbasCopy)
    words = np.arange(48, dtype=np.int64).reshape(6, 8)
    view = take(words)
    buf = launch.DeviceBuffer(view.ctypes.data, view.shape, view.strides, view.dtype, words)
    got = views.host_copy(buf)
    assert got.shape == view.shape and not np.shares_memory(got, words)
    np.testing.assert_array_equal(got, view)
