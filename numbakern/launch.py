"""Launch compiled kernels with a few microseconds of host work, not hundreds.

Numba's ``kernel[grid, block, stream](*args)`` types every argument, wraps every
array into a ``DeviceNDArray`` (a CuPy array goes through
``__cuda_array_interface__`` and, by default, a stream synchronisation) and checks the
context on each call: about 100-300 us per launch, as long as a whole 1 GB
reduction on an H200. This module keeps one compiled kernel per argument signature
and passes arguments the way Numba's own ``_Kernel.launch`` flattens them (an array is
``meminfo, parent, size, itemsize, data, *shape, *strides``), straight to
``cuda.core.launch``.

Arrays are described by :class:`DeviceBuffer`: a pointer, shape, strides and dtype,
read from CuPy arrays, Numba device arrays or any ``__cuda_array_interface__``
object. Under the simulator there is nothing to save: :func:`launch` uses Numba's
ordinary launch.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, from_dtype, types
from numba.cuda.core import config

SIMULATOR = bool(config.ENABLE_CUDASIM)


@dataclass(frozen=True)
class DeviceBuffer:
    """A device array described by pointer, shape, strides (bytes) and dtype.

    ``owner`` keeps the memory alive (a CuPy array, a Numba device array, ...).
    Exposes ``__cuda_array_interface__``, so Numba's ordinary launch and CuPy accept it.
    """

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    owner: Any = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def c_contiguous(self) -> bool:
        expected = self.dtype.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3, "stream": None}

    def numba_type(self) -> types.Array:
        layout = "C" if self.c_contiguous else "A"
        return types.Array(from_dtype(self.dtype), self.ndim, layout)

    def with_layout(self, shape, strides) -> "DeviceBuffer":
        """A view of the same memory with another shape and strides."""
        return DeviceBuffer(self.ptr, tuple(shape), tuple(strides), self.dtype, self.owner)


def buffer(obj: Any) -> DeviceBuffer:
    """Describe a device array (CuPy, Numba, any ``__cuda_array_interface__``)."""
    if isinstance(obj, DeviceBuffer):
        return obj
    if type(obj).__module__.startswith("cupy"):
        return DeviceBuffer(obj.data.ptr, obj.shape, obj.strides, obj.dtype, obj)
    cai = obj.__cuda_array_interface__
    dtype = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous by the interface's rule
        strides = tuple(np.empty(0, dtype).strides[0] * int(np.prod(shape[i + 1:]))
                        for i in range(len(shape)))
    return DeviceBuffer(cai["data"][0], shape, tuple(strides), dtype, obj)


_SCALAR_CTYPES = {types.int64: ctypes.c_int64, types.int32: ctypes.c_int32,
                  types.uint64: ctypes.c_uint64, types.float64: ctypes.c_double,
                  types.float32: ctypes.c_float}


def _scalar_type(value) -> types.Type:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("launch: pass bools as integers")
    if isinstance(value, (int, np.integer)):
        return types.int64
    if isinstance(value, (float, np.floating)):
        return types.float64
    raise TypeError(f"launch: unsupported argument {value!r}")


class _Launcher:
    """One dispatcher's compiled kernels, by argument signature."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.compiled: dict[tuple, Any] = {}

    def __call__(self, grid, block, stream, args):
        from cuda.core import LaunchConfig, launch as core_launch

        argtypes, flat = [], []
        for a in args:
            if isinstance(a, (int, float, np.number)):
                t = _scalar_type(a)
                argtypes.append(t)
                flat.append(_SCALAR_CTYPES[t](a))
                continue
            b = buffer(a)
            argtypes.append(b.numba_type())
            flat += [0, 0, b.size, b.dtype.itemsize, b.ptr, *b.shape, *b.strides]
        key = tuple(argtypes)
        kernel = self.compiled.get(key)
        if kernel is None:
            kernel = self.compiled[key] = self.dispatcher.compile(key)
        cufunc = kernel._codelibrary.get_cufunc()
        config_ = LaunchConfig(grid=grid, block=block, shmem_size=0)
        core_launch(stream, config_, cufunc.kernel, *flat)


_launchers: dict[int, _Launcher] = {}


def launch(kernel, grid: int, block: int, stream, *args) -> None:
    """Launch ``kernel`` (a ``@cuda.jit`` dispatcher) on ``grid`` x ``block`` threads.

    Args:
        kernel: a Numba CUDA kernel, compiled here once per argument signature.
        grid, block: blocks and threads per block (1-D).
        stream: a Numba stream.
        args: device arrays (CuPy, Numba, :class:`DeviceBuffer`, any
            ``__cuda_array_interface__``) and Python/NumPy scalars (integers are
            passed as int64, floats as float64).
    """
    if SIMULATOR:
        kernel[grid, block, stream](*args)
        return
    launcher = _launchers.get(id(kernel))
    if launcher is None or launcher.dispatcher is not kernel:
        launcher = _launchers[id(kernel)] = _Launcher(kernel)
    launcher(grid, block, stream, args)


def to_device_array(buf: DeviceBuffer):
    """A Numba ``DeviceNDArray`` view of a buffer (for code that wants one)."""
    return cuda.as_cuda_array(buf, sync=False)
