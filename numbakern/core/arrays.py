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
from typing import Any

import numpy as np
from numba import cuda

from numbakern.kernels.elementwise import PUT_WORDS, cast_into, put
from numbakern.ops import foreign_float
from numbakern.runtime.device import SIMULATOR, ceil_div
from numbakern.runtime.launch import (DeviceBuffer, buffer, current_device_id, current_recording,
                                      simulator_stream, stream_handle, stream_pointer,
                                      to_device_array)
from numbakern.runtime.stacklevel import warn
from numbakern.runtime.views import (check_native, device_empty, device_view, first_element,
                                     head, host_copy, reinterpreted, to_device)


class CopyWarning(UserWarning):
    """numbakern copied an input before a kernel could read it: the result is the same,
    the copy costs memory of the input's size and a pass over it.

    Warned when a device input's strides need more strided dimensions than the
    kernel takes (a reduction's two kept and two reduced, a scan's or the softmax
    family's two outer ones besides the axis: ``numbakern/core/layout.py``); when
    rows are not contiguous for a function that reads contiguous rows (the sorts,
    selections, quantiles and histograms) or a flattened scan's input is not in C
    order; when a ``where=`` or ``mask`` broadcast must be laid out at the input's
    size; and for bfloat16 input read through a float32 copy (the README's interop
    table says where). A NumPy input (or CPU tensor), copied to the device anyway, is
    not warned about for its layout. Pass a contiguous array
    to avoid the copy, or silence it with ``warnings.simplefilter("ignore",
    numbakern.CopyWarning)``.
    """


class BFloat16Bits:
    """bfloat16 values held as their uint16 bits (a NumPy, CuPy or device array of
    uint16): how a bfloat16 array reaches the functions that read it natively (the
    softmax family), since neither Numba nor CuPy has a bfloat16 type.
    ``numbakern/api/_interop.py`` makes them from torch and ``ml_dtypes`` arrays."""

    __slots__ = ("bits",)

    def __init__(self, bits):
        self.bits = bits

    @property
    def bfloat16_bits(self):
        """The bits, for ``numbakern/runtime/replay.py``'s keys (by this name: the
        runtime layer knows no class of this one)."""
        return self.bits


class BFloat16Input(BFloat16Bits):
    """A bfloat16 input that a reduction or a scan reads in place, as its uint16
    ``bits``, each element widened to the float32 it stands for by the state kit's
    ``read`` (``numbakern/ops/state.py``). To the argument checks and dtype rules it
    is a float32 array of its shape (``dtype`` is float32): results and accumulators
    are float32's, and ``numbakern/api/_interop.py`` rounds floating results back to
    bfloat16 once. Only the layouts see ``bits`` (:func:`bits_of`)."""

    __slots__ = ()
    dtype = np.dtype(np.float32)

    @property
    def shape(self) -> tuple:
        return tuple(self.bits.shape)

    @property
    def ndim(self) -> int:
        return len(self.bits.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.bits.shape))

    def reshape(self, *shape):
        """The bits reshaped (argmax's 0-d input becomes one element); a bare
        DeviceBuffer (a CUDA tensor's, without CuPy) is C-contiguous here."""
        if hasattr(self.bits, "reshape"):
            return BFloat16Input(self.bits.reshape(*shape))
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        strides, step = [], self.bits.dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
        return BFloat16Input(self.bits.with_layout(shape, tuple(strides)))


def bits_of(x):
    """``(array the kernels read, widened)``: a :class:`BFloat16Input`'s bits and
    True, anything else as itself and False."""
    if isinstance(x, BFloat16Input):
        return x.bits, True
    return x, False


def kind_of(x: Any) -> str:
    """``"cupy"``, ``"device"`` (any other CUDA array) or ``"numpy"``."""
    if isinstance(x, BFloat16Input):
        x = x.bits
    module = type(x).__module__.split(".")[0]
    if module == "cupy":
        return "cupy"
    if module == "torch":  # torch builds its whole interface (Python) to answer hasattr
        return "device" if x.is_cuda else "numpy"
    if getattr(x, "__cuda_ndarray__", False) or hasattr(x, "__cuda_array_interface__"):
        return "device"
    return "numpy"


def on_cupy(kind: str) -> bool:
    """Whether CuPy holds this call's device memory: CuPy input on a GPU. (Under the
    simulator, on a machine where CuPy runs too, device memory is the simulator's.)"""
    return kind == "cupy" and not SIMULATOR


def native_order(a):
    """``a`` (a host or Dask array) in native byte order: itself where it is, else a
    converted copy, which the little-endian kernels (and torch) read as its values."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def check_float_type(dtype: np.dtype, name: str) -> None:
    """``TypeError`` naming ``name`` for a dtype of kind ``"f"`` or ``"c"`` that is
    none of NumPy's (:func:`numbakern.ops.foreign_float`); nothing for a dtype that
    is not NumPy's at all (a torch tensor's)."""
    if isinstance(dtype, np.dtype) and foreign_float(dtype):
        raise TypeError(f"{name} has dtype {dtype}, which numbakern does not take: its "
                        "floats are float16, bfloat16, float32 and float64")


def host_array(x: Any, name: str) -> np.ndarray:
    """``np.asarray(x)``; a ragged list is a ValueError naming ``name``, NumPy's words
    after it."""
    try:
        return np.asarray(x)
    except ValueError as e:
        raise ValueError(f"{name} cannot be read as an array: {e}") from None


def as_array_like(x: Any, name: str = "x"):
    """The input ``name`` as an array object with shape, dtype and strides (lists via
    NumPy).

    Host arrays in a non-native byte order are converted (they are copied to the
    device anyway). Raises ``TypeError`` for Python integers beyond 64 bits (NumPy
    holds them as objects), for masked arrays, whose mask a kernel
    would silently ignore, for ``np.matrix``, whose results NumPy keeps 2-D
    (numbakern would hand back plain arrays of other shapes), for a device array
    of non-native byte order (a big-endian ``cuda.to_device`` copy), which the kernels
    would read as little-endian words, and for a float type that is not NumPy's
    (:func:`check_float_type`).
    """
    if isinstance(x, BFloat16Input):
        return x
    if kind_of(x) != "numpy":
        check_native(x, name)
        check_float_type(getattr(x, "dtype", None), name)
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError("masked arrays are not supported: pass x.filled(value) or "
                        "x.compressed()")
    if isinstance(x, np.matrix):
        raise TypeError("np.matrix is not supported (NumPy keeps its results 2-D): pass "
                        "np.asarray(x)")
    x = host_array(x, name)
    check_float_type(x.dtype, name)
    if x.dtype == object and x.size and all(type(v) is int for v in x.flat) and \
            any(not -2**63 <= v < 2**64 for v in x.flat):
        raise TypeError(f"{name} holds Python integers beyond 64 bits (e.g. "
                        f"{max(x.flat, key=abs)}), which NumPy keeps as objects; the "
                        f"kernels take integers of at most 64 bits")
    return native_order(x)


def resolve_stream(stream: Any, kind: str):
    """A Numba stream from ``None``, a Numba stream, a CuPy stream or a raw pointer.

    ``None`` means CuPy's current stream for CuPy input (so the result is ordered
    after the user's own CuPy work) and the default stream otherwise.
    """
    if SIMULATOR:
        return simulator_stream(stream)
    if stream is None:
        if kind == "cupy":
            import cupy

            return _external_stream(cupy.cuda.get_current_stream().ptr)
        return _external_stream(0)
    if isinstance(stream, cuda.cudadrv.driver.Stream):
        return stream
    return _external_stream(stream_pointer(stream))


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
        if stream is None or not on_cupy(kind_of(x)):
            return fn(x, *args, stream=stream, **kwargs)
        with as_cupy_stream(resolve_stream(stream, "cupy")):
            return fn(x, *args, stream=stream, **kwargs)

    return call


def as_cupy_stream(stream):
    """A Numba stream as a CuPy stream object, to make it CuPy's current one (``with``)
    while CuPy allocates and launches for a call on it."""
    import cupy

    handle = stream_handle(stream)
    return cupy.cuda.ExternalStream(handle) if handle else cupy.cuda.Stream.null


def contiguous_copy(x, view, stream):
    """A C-contiguous device copy of device input ``x`` (``view``: its device view):
    on the device for CuPy input, through the host otherwise (Numba has no strided
    device-to-device copy)."""
    if on_cupy(kind_of(x)):
        import cupy

        return device_view(cupy.ascontiguousarray(x))
    return to_device(host_copy(view, stream), stream)


def as_cupy(buf: DeviceBuffer):
    """A CuPy array over a buffer's memory: its owner itself when it is one."""
    import cupy

    owner = buf.owner
    if isinstance(owner, cupy.ndarray) and owner.data.ptr == buf.ptr and \
            owner.shape == buf.shape and owner.strides == buf.strides:
        return owner if owner.dtype == buf.dtype else owner.view(buf.dtype)
    return cupy.asarray(buf)


def user_array(buf):
    """The array a device buffer stands for, in its owner's library (CuPy or Numba):
    the owner itself when the buffer is the whole of it, else a view of the buffer's
    memory (a reshaped or sliced allocation is delivered as that view, never as the
    allocation); the buffer itself in the simulator."""
    if SIMULATOR:
        return buf
    owner = buf.owner
    if type(owner).__module__.startswith("cupy"):
        return as_cupy(buf)
    if buffer(owner).ptr == buf.ptr and \
            tuple(owner.shape) == buf.shape and tuple(owner.strides) == buf.strides and \
            np.dtype(owner.dtype) == buf.dtype:
        return owner
    return to_device_array(buf)


class Workspace:
    """Allocations and results for one call, in the input's array library."""

    def __init__(self, kind: str, stream):
        self.kind = kind
        self.stream = stream

    def empty(self, shape, dtype) -> Any:
        """A C-contiguous device array of ``shape`` and ``dtype``.

        A :class:`~numbakern.runtime.launch.DeviceBuffer` on a GPU (CuPy's memory pool for CuPy
        input, else Numba's allocator); a simulator array under the simulator.
        """
        if on_cupy(self.kind):
            import cupy

            arr = buffer(cupy.empty(shape, dtype=dtype))
        else:
            arr = device_empty(shape, dtype, self.stream)
        recording = current_recording()
        if recording is not None:
            recording.allocate(arr)
        return arr

    def cast(self, arr, dtype) -> Any:
        """The 1-D device array ``arr`` in ``dtype``: itself, or a cast copy in an
        allocation of this workspace (C casts, an element-wise kernel). Never CuPy's
        ``astype``: its allocation lies outside a recording, so a call whose result
        it made could not replay (``numbakern/runtime/replay.py``), and every call
        of, say, a float16 sum (accumulated in float32) paid the whole host path."""
        if np.dtype(arr.dtype) == np.dtype(dtype):
            return arr
        cast = self.empty(arr.shape[0], dtype)
        cast_into(arr, cast, self.stream)
        return cast

    def from_host(self, host: np.ndarray, times: int = 1) -> Any:
        """A device copy of a small host array (identities, initial values, flags, a
        selection's ranks), ``times`` copies of it one after another: a 1-D one of at
        most ``PUT_WORDS`` 8-byte words (whole words where ``times`` > 1) is written by
        a launch that carries its bytes (``kernels.elementwise.put``: a recorded call
        replays it), however many times; anything larger is copied (a call that copies
        is never replayed)."""
        host = np.asarray(host)
        if host.ndim == 1 and host.dtype.kind in "biuf" and \
                0 < host.nbytes <= PUT_WORDS * 8 and (times == 1 or host.nbytes % 8 == 0):
            words = self.empty(ceil_div(host.nbytes, 8) * times, np.int64)
            put(words, host, self.stream)
            return reinterpreted(words, host.dtype, host.shape[0] * times)
        host = np.tile(host, times)
        if on_cupy(self.kind):
            import cupy

            return buffer(cupy.asarray(host))
        return to_device(host, self.stream)

    def scalar(self, arr, dtype) -> Any:
        """Element 0 of a device array as the user's scalar of ``dtype``.

        NumPy scalar for NumPy input; a 0-d CuPy array for CuPy input and a 0-d Numba
        device array for other device input, each a view of element 0 cast on the
        device (no copy to the host: the call replays).
        """
        dtype = np.dtype(dtype)
        if self.kind == "numpy":
            host = host_copy(arr, self.stream)
            self.stream.synchronize()
            return np.asarray(host[0]).astype(dtype)[()]
        if on_cupy(self.kind):
            if np.dtype(arr.dtype) != dtype and type(arr) is DeviceBuffer and \
                    arr.ndim == 1:  # cast as deliver's are: the call replays
                arr = self.cast(head(arr, 1), dtype)
            return as_cupy(arr).reshape(-1)[0].astype(dtype, copy=False)
        return first_element(self.cast(head(arr, 1), dtype))


# --- sorts: the input laid out as NumPy or CuPy, the result back ----------------------

def flat_device(arr, workspace: Workspace, view_dtype=None):
    """``arr`` (a NumPy or CuPy array, already laid out) as a 1-D C-contiguous device
    view, its bits read as ``view_dtype`` (default its own dtype).

    NumPy arrays are made contiguous on the host and transferred once; CuPy arrays
    are made contiguous on the device: a copy, announced by a :class:`CopyWarning`,
    only if they are not already (rows along another axis than the last, a strided
    view), since the sorts, selections and histograms read contiguous rows.
    """
    view_dtype = np.dtype(arr.dtype if view_dtype is None else view_dtype)
    if isinstance(arr, np.ndarray):
        host = native_order(np.ascontiguousarray(arr).reshape(-1))
        return to_device(host.view(view_dtype), workspace.stream)
    import cupy

    if not arr.flags.c_contiguous:
        _rows_copied(arr)
    return buffer(cupy.ascontiguousarray(arr).reshape(-1).view(view_dtype))


def flattened(arr):
    """``arr.reshape(-1)`` of a NumPy or CuPy array being laid out (``axis=None``): a
    CuPy array that is not C-contiguous is copied by it, announced as
    :func:`flat_device` announces its copies."""
    if not isinstance(arr, np.ndarray) and not arr.flags.c_contiguous:
        _rows_copied(arr)
    return arr.reshape(-1)


def _rows_copied(arr) -> None:
    warn(f"numbakern copied a {tuple(arr.shape)} device input to lay it out "
         "contiguously: sorts, selections and histograms read contiguous rows; "
         "pass a C-contiguous array, its rows along the last axis, to avoid "
         "the copy", CopyWarning)


def as_layout_array(x, kind: str):
    """``(array, wrap)``: the input as a NumPy or CuPy array to lay out, and how to
    return a result of that kind (NumPy in, NumPy out; CuPy in, CuPy out; other device
    arrays: a Numba device array)."""
    if kind == "numpy":
        return np.asarray(x), lambda r: r
    if on_cupy(kind):
        return x, lambda r: r
    if SIMULATOR:  # a simulator device array: lay it out on the host
        return x.copy_to_host(), lambda r: cuda.to_device(np.ascontiguousarray(r))
    import cupy

    return cupy.asarray(x), lambda r: cuda.as_cuda_array(r)


def to_user(buf, workspace: Workspace, shape, dtype=None):
    """A 1-D device result as the caller's NumPy or CuPy array of ``shape`` (its bits
    read as ``dtype``)."""
    if workspace.kind == "numpy" or SIMULATOR:
        out = host_copy(buf, workspace.stream)
        workspace.stream.synchronize()
    else:
        out = as_cupy(buf)
    if dtype is not None:
        out = out.view(dtype)
    return out.reshape(shape)
