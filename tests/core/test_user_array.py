"""``user_array``: what a call delivers on a GPU is the allocation itself only when the
buffer is the whole of it; a reshaped or sliced buffer is delivered as a view of its
own memory (a flat allocation delivered for a reshaped view once gave cross_entropy's
K-dimensional losses the wrong shape). The GPU branch is driven here with a stand-in
owner, since under the simulator ``user_array`` returns the buffer itself."""

import numpy as np
import pytest

from numbakern.core import arrays
from numbakern.runtime.launch import DeviceBuffer


class Owner:
    """A stand-in Numba device array: the interface and the attributes read."""

    def __init__(self, ptr, shape, dtype):
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.strides = tuple(int(np.prod(shape[i + 1:])) * self.dtype.itemsize
                             for i in range(len(shape)))
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "typestr": self.dtype.str, "version": 3}


@pytest.fixture
def on_gpu(monkeypatch):
    monkeypatch.setattr(arrays, "SIMULATOR", False)
    monkeypatch.setattr(arrays, "to_device_array", lambda buf: ("view", buf))


def test_the_whole_allocation_is_delivered_as_itself(on_gpu):
    owner = Owner(4096, (6,), np.float32)
    assert arrays.user_array(DeviceBuffer(4096, (6,), (4,), np.float32, owner)) is owner


@pytest.mark.parametrize("ptr, shape, strides, dtype", [
    (4096, (2, 3), (12, 4), np.float32),  # reshaped
    (4100, (5,), (4,), np.float32),  # sliced
    (4096, (6,), (4,), np.int32),  # another dtype
])
def test_a_view_is_delivered_as_a_view(on_gpu, ptr, shape, strides, dtype):
    owner = Owner(4096, (6,), np.float32)
    buf = DeviceBuffer(ptr, shape, strides, dtype, owner)
    assert arrays.user_array(buf) == ("view", buf)
