"""Array handling: NumPy, CuPy and ``__cuda_array_interface__`` inputs, without copies.

* NumPy in: one host-to-device transfer (the data has to get there), NumPy out.
* CuPy in: a zero-copy Numba view, kernels on CuPy's current stream, CuPy out, no
  host round trip.
* Any other object with ``__cuda_array_interface__`` (a Numba device array, a
  PyTorch CUDA tensor, ...): a zero-copy view; the result is a Numba device array.

Non-contiguous inputs are described to the kernels as a 1-D or 2-D strided view
(dimensions merged where the strides allow), so slices such as ``x[::2]`` or
``x[:, :100]`` are read in place. Only a layout that needs three or more strided
dimensions is copied, and that copy is announced with a :class:`CopyWarning`.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import numpy as np
from numba import cuda

from .launch import (SIMULATOR, DeviceBuffer, buffer, current_device_id, current_recording,
                     stream_handle, to_device_array)


class CopyWarning(UserWarning):
    """numbakern had to copy an input to lay it out for a kernel."""


def kind_of(x: Any) -> str:
    """``"cupy"``, ``"device"`` (any other CUDA array) or ``"numpy"``."""
    module = type(x).__module__.split(".")[0]
    if module == "cupy":
        return "cupy"
    if getattr(x, "__cuda_ndarray__", False) or hasattr(x, "__cuda_array_interface__"):
        return "device"
    return "numpy"


def as_array_like(x: Any):
    """The input as an array object with shape, dtype and strides (lists via NumPy).

    Host arrays in a non-native byte order are converted (they are copied to the
    device anyway). Raises ``TypeError`` for masked arrays, whose mask a kernel
    would silently ignore.
    """
    if kind_of(x) != "numpy":
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError("masked arrays are not supported: pass x.filled(value) or "
                        "x.compressed()")
    x = np.asarray(x)
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    return x


def resolve_stream(stream: Any, kind: str):
    """A Numba stream from ``None``, a Numba stream, a CuPy stream or a raw pointer.

    ``None`` means CuPy's current stream for CuPy input (so the result is ordered
    after the user's own CuPy work) and the default stream otherwise.
    """
    if SIMULATOR:  # one stream there; still refuse what a GPU would refuse
        if stream is not None and not isinstance(stream, type(cuda.default_stream())):
            _stream_pointer(stream)
        return cuda.default_stream()
    if stream is None:
        if kind == "cupy":
            import cupy

            return _external_stream(cupy.cuda.get_current_stream().ptr)
        return _external_stream(0)
    if isinstance(stream, cuda.cudadrv.driver.Stream):
        return stream
    return _external_stream(_stream_pointer(stream))


def _stream_pointer(stream: Any) -> int:
    """The raw handle of a CuPy stream (``.ptr``) or a pointer; TypeError otherwise."""
    ptr = getattr(stream, "ptr", stream)
    if isinstance(ptr, (int, np.integer)):
        return int(ptr)
    raise TypeError(
        f"stream must be None, a numba.cuda stream, a CuPy stream or a pointer, got {stream!r}"
    )


def _external_stream(ptr: int):
    """A Numba stream for a raw handle (0: the default stream), made once per handle
    and device (Numba's stream objects are not free to create)."""
    return _stream_on(ptr, current_device_id())


@functools.lru_cache(maxsize=64)
def _stream_on(ptr: int, device: int):
    return cuda.default_stream() if ptr == 0 else cuda.external_stream(ptr)


def honours_stream(fn):
    """Decorator: with CuPy input and an explicit ``stream=``, run the whole call with
    that stream as CuPy's current one, so the call's CuPy temporaries (partials,
    casts, copies, and the memory pool's reuse of them) are ordered with its kernels.
    Without it they would follow CuPy's current stream, racing the kernels."""

    @functools.wraps(fn)
    def call(x, *args, stream=None, **kwargs):
        if stream is None or SIMULATOR or kind_of(x) != "cupy":
            return fn(x, *args, stream=stream, **kwargs)
        import cupy

        handle = stream_handle(resolve_stream(stream, "cupy"))
        with cupy.cuda.ExternalStream(handle) if handle else cupy.cuda.Stream.null:
            return fn(x, *args, stream=stream, **kwargs)

    return call


def collapse(shape, strides, any_order: bool) -> list[tuple[int, int]]:
    """Merge dimensions into the fewest ``(extent, stride)`` pairs.

    Length-1 dimensions are dropped; a dimension merges into the one outside it when
    ``outer_stride == extent * stride``. With ``any_order`` (a commutative op whose
    result does not depend on element order) dimensions are first sorted by
    stride, so an F-ordered array becomes one contiguous run.
    """
    dims = [(int(n), int(s)) for n, s in zip(shape, strides) if n != 1]
    if any_order:
        dims.sort(key=lambda d: -abs(d[1]))
    merged: list[tuple[int, int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == n * s:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    return merged


def _strided(view, dims, dtype):
    """A device view of ``view``'s memory with the given (extent, stride) dims."""
    shape = tuple(n for n, _ in dims) or (1,)
    strides = tuple(s for _, s in dims) or (dtype.itemsize,)
    if SIMULATOR:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        base = view._ary
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(base, shape, strides))
    return view.with_layout(shape, strides)


def span_view(view):
    """A 1-D view of a device view's memory from its first element to its last (the
    view's strides non-negative): what 16-byte vector loads index, the elements between
    rows included."""
    dtype = np.dtype(view.dtype)
    span = sum((e - 1) * s for e, s in zip(view.shape, view.strides)) // dtype.itemsize
    return _strided(view, [(span + 1, dtype.itemsize)], dtype)


def axis_last_views(arrays: list, axis: int):
    """3-D ``(outer, inner, n)`` views of same-shaped device arrays, ``axis`` last.

    The other dimensions merge where every array's strides allow (so each array keeps
    its own memory layout, nothing is copied); ``None`` when more than two outer
    dimensions would remain.
    """
    shape = tuple(arrays[0].shape)
    dims: list[tuple[int, tuple[int, ...]]] = []
    for d, extent in enumerate(shape):
        if d == axis or extent == 1:
            continue
        strides = tuple(a.strides[d] for a in arrays)
        if dims and all(p == extent * s for p, s in zip(dims[-1][1], strides)):
            dims[-1] = (dims[-1][0] * extent, strides)
        else:
            dims.append((extent, strides))
    if len(dims) > 2:
        return None
    dims = [(1, (0,) * len(arrays))] * (2 - len(dims)) + dims
    return [
        _strided(a, [(dims[0][0], dims[0][1][k]), (dims[1][0], dims[1][1][k]),
                     (shape[axis], a.strides[axis])], np.dtype(a.dtype))
        for k, a in enumerate(arrays)
    ]


def _device_view(x):
    """The input as the kernels' argument type: a simulator array, or a buffer."""
    return x if SIMULATOR else buffer(x)


def _refuse_replay(why: str) -> None:
    """Tell a recording call (numbakern/replay.py) that it must not be replayed."""
    recording = current_recording()
    if recording is not None:
        recording.refuse(why)


def _to_device(host: np.ndarray, stream):
    _refuse_replay("a host-to-device copy")
    return _device_view(cuda.to_device(np.ascontiguousarray(host), stream=stream))


def flat_view(x, any_order: bool, stream):
    """The input as a 1-D or 2-D device view in C order (``any_order``: memory order).

    Returns ``(view, n)``. NumPy input is transferred once; device input is viewed in
    place unless its layout needs three strided dimensions (then copied, with a
    :class:`CopyWarning`).
    """
    n = math.prod(x.shape)
    if kind_of(x) == "numpy":
        host = x.ravel(order="K") if any_order else np.ascontiguousarray(x).ravel()
        return _to_device(host, stream), n
    view = _device_view(x)
    if not SIMULATOR and view.c_contiguous:  # the common case, without collapse()'s loop
        return view.with_layout((n,), (view.dtype.itemsize,)), n
    dims = collapse(x.shape, view.strides, any_order)
    if len(dims) > 2:
        warnings.warn(
            f"numbakern copied a {x.shape} input whose strides {view.strides} need more "
            "than two strided dimensions; pass a contiguous array to avoid the copy",
            CopyWarning,
            stacklevel=3,
        )
        packed = contiguous_copy(x, view, stream)
        return _strided(packed, [(n, np.dtype(x.dtype).itemsize)], np.dtype(x.dtype)), n
    return _strided(view, dims, np.dtype(x.dtype)), n


def contiguous_copy(x, view, stream):
    """A C-contiguous device copy of device input ``x`` (``view``: its device view):
    on the device for CuPy input, through the host otherwise (Numba has no strided
    device-to-device copy)."""
    if kind_of(x) == "cupy" and not SIMULATOR:
        import cupy

        return _device_view(cupy.ascontiguousarray(x))
    return _to_device(host_copy(view, stream), stream)


def host_copy(view, stream=0) -> np.ndarray:
    """Copy a device array (simulator array or buffer) to a new host array."""
    _refuse_replay("a device-to-host copy")
    if SIMULATOR:
        return view.copy_to_host()
    return to_device_array(view).copy_to_host(stream=stream)


def as_cupy(buf: DeviceBuffer):
    """A CuPy array over a buffer's memory: its owner itself when it is one."""
    import cupy

    owner = buf.owner
    if isinstance(owner, cupy.ndarray) and owner.data.ptr == buf.ptr and \
            owner.shape == buf.shape and owner.strides == buf.strides:
        return owner if owner.dtype == buf.dtype else owner.view(buf.dtype)
    return cupy.asarray(buf)


def user_array(buf):
    """The array a device buffer stands for (CuPy or Numba); itself in the simulator."""
    return buf if SIMULATOR else buf.owner


class Workspace:
    """Allocations and results for one call, in the input's array library."""

    def __init__(self, kind: str, stream):
        self.kind = kind
        self.stream = stream

    def empty(self, shape, dtype) -> Any:
        """A C-contiguous device array of ``shape`` and ``dtype``.

        A :class:`~numbakern.launch.DeviceBuffer` on a GPU (CuPy's memory pool for CuPy
        input, else Numba's allocator); a simulator array under the simulator.
        """
        if self.kind == "cupy" and not SIMULATOR:
            import cupy

            arr = buffer(cupy.empty(shape, dtype=dtype))
        else:
            arr = _device_view(cuda.device_array(shape, dtype=dtype, stream=self.stream))
        recording = current_recording()
        if recording is not None:
            recording.allocate(arr)
        return arr

    def from_host(self, host: np.ndarray) -> Any:
        """A device copy of a small host array (identities, initial values)."""
        _refuse_replay("a host-to-device copy")
        if self.kind == "cupy" and not SIMULATOR:
            import cupy

            return buffer(cupy.asarray(host))
        return _to_device(host, self.stream)

    def view_as(self, arr, dtype) -> Any:
        """Reinterpret a device array's bits as ``dtype`` (same item size)."""
        dtype = np.dtype(dtype)
        if SIMULATOR:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            return FakeCUDAArray(arr._ary.view(dtype))
        return DeviceBuffer(arr.ptr, arr.shape, arr.strides, dtype, arr.owner)

    def scalar(self, arr, dtype) -> Any:
        """Element 0 of a device array as the user's scalar of ``dtype``.

        NumPy scalar for NumPy input; a 0-d CuPy array (computed on the device) for
        CuPy input; a 0-d Numba device array otherwise.
        """
        dtype = np.dtype(dtype)
        if self.kind == "cupy" and not SIMULATOR:
            return as_cupy(arr).reshape(-1)[0].astype(dtype, copy=False)
        host = host_copy(arr, self.stream)
        self.stream.synchronize()
        value = np.asarray(host[0]).astype(dtype)[()]
        if self.kind == "numpy":
            return value
        return cuda.to_device(np.asarray(value), stream=self.stream)
