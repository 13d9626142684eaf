"""Device views: the arrays kernels take, made from other arrays without copying.

On a GPU a kernel argument is a :class:`~numbakern.runtime.launch.DeviceBuffer` (a
pointer, shape, strides and dtype); under the simulator it is Numba's fake device
array over a NumPy array. Every view numbakern makes (strided, reinterpreted,
reversed, shortened) is made here, once for each backend, so that no other module
needs to know which one runs.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .device import SIMULATOR
from .launch import (
    PINNED_BYTES,
    DeviceBuffer,
    buffer,
    current_recording,
    read_small,
    stream_handle,
    to_device_array,
)

if SIMULATOR:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray


def device_view(x):
    """A device array (CuPy, Numba, ``__cuda_array_interface__``) as the kernels'
    argument type: a :class:`DeviceBuffer`, or itself under the simulator.

    Raises:
        TypeError: an array of non-native byte order (a big-endian ``cuda.to_device``
            copy), whose words the kernels would read as little-endian: every device
            argument comes here (``as_array_like`` names the main ones first).
    """
    check_native(x)
    return x if SIMULATOR else buffer(x)


def check_native(x, name: str = "an argument") -> None:
    """``TypeError`` naming ``name`` for a device array of non-native byte order (a
    big-endian ``cuda.to_device`` copy), whose words the kernels would read as
    little-endian."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype) and not dtype.isnative:
        raise TypeError(f"{name} is a device array of non-native byte order (dtype "
                        f"{dtype.str}), which the GPU's little-endian kernels cannot "
                        f"read: convert it before the copy to the device, "
                        f"a.astype(a.dtype.newbyteorder('='))")


def strided(view, dims, dtype=None):
    """A view of ``view``'s memory with the given ``(extent, stride in bytes)`` dims."""
    dtype = np.dtype(view.dtype if dtype is None else dtype)
    shape = tuple(n for n, _ in dims) or (1,)
    strides = tuple(s for _, s in dims) or (dtype.itemsize,)
    if SIMULATOR:
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(view._ary, shape, strides))
    return view.with_layout(shape, strides)


def sample_rows(view, n: int, dims):
    """Element ``n`` along the first axis of a device view, as a view of its memory
    with the given ``(extent, stride in bytes)`` dims (the class axis of a sample of
    ``(N, C, d1, ...)`` logits laid out as rows)."""
    shape = tuple(e for e, _ in dims)
    strides = tuple(s for _, s in dims)
    if SIMULATOR:
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(view._ary[n], shape, strides))
    b = buffer(view)
    return DeviceBuffer(b.ptr + n * b.strides[0], shape, strides, b.dtype, b.owner)


def reshaped(view, shape):
    """A C-contiguous view with another shape (same number of elements)."""
    if SIMULATOR:
        return FakeCUDAArray(view._ary.reshape(shape))
    return to_device_array(view).reshape(shape)


def span_view(view):
    """A 1-D view of a device view's memory from its first element to its last (the
    view's strides non-negative): what 16-byte vector loads index, the elements between
    rows included: :func:`lowest_span`, whose lowest element is then the first."""
    return lowest_span(view)[0]


def lowest_span(view):
    """A 1-D view of a device view's memory from its lowest element to its highest,
    and the index in it of the view's first element: strides of any sign, each a
    multiple of the item size (a kernel then reaches element ``idx`` at ``first +
    sum(idx[d] * strides[d] // itemsize)``)."""
    dtype = np.dtype(view.dtype)
    size = dtype.itemsize
    below = sum((n - 1) * -s for n, s in zip(view.shape, view.strides) if s < 0) // size
    above = sum((n - 1) * s for n, s in zip(view.shape, view.strides) if s > 0) // size
    if SIMULATOR:  # every negative axis turned around: the first element is the lowest
        ahead = tuple(slice(None, None, -1 if s < 0 else 1) for s in view.strides)
        return strided(FakeCUDAArray(view._ary[ahead]), [(below + above + 1, size)]), below
    return DeviceBuffer(view.ptr - below * size, (below + above + 1,), (size,), dtype,
                        view.owner), below


def skip(span, k: int):
    """The 1-D device view ``span`` without its first ``k`` elements."""
    if not k:
        return span
    if SIMULATOR:
        return span[k:]
    return DeviceBuffer(span.ptr + k * span.dtype.itemsize, (span.shape[0] - k,),
                        span.strides, span.dtype, span.owner)


def sliced(view, start: int, stop: int):
    """Elements ``start:stop`` of a 1-D device view of any stride, as a view."""
    if SIMULATOR:
        return view[start:stop]
    stride = view.strides[0]
    return DeviceBuffer(view.ptr + start * stride, (stop - start,), view.strides, view.dtype,
                        view.owner)


def head(arr, m: int):
    """The first ``m`` elements of a 1-D contiguous device array, as a view."""
    if SIMULATOR:
        return arr[:m]
    return arr.with_layout((m,), arr.strides)


def first_element(view):
    """Element 0 of a 1-D device view, as a 0-d Numba device array over its memory (a
    view, which a replay can hand back again: no copy, no synchronisation)."""
    if SIMULATOR:
        return FakeCUDAArray(view._ary[:1].reshape(()))
    b = buffer(view)
    return to_device_array(DeviceBuffer(b.ptr, (), (), b.dtype, b if b.owner is None else b.owner))


def reversed_last(view):
    """The same view with its last axis running backwards."""
    if SIMULATOR:
        return FakeCUDAArray(view._ary[..., ::-1])
    n, stride = view.shape[-1], view.strides[-1]
    return DeviceBuffer(view.ptr + (n - 1) * stride, view.shape,
                        view.strides[:-1] + (-stride,), view.dtype, view.owner)


def view_as(arr, dtype):
    """Reinterpret a device array's bits as ``dtype`` (same item size)."""
    dtype = np.dtype(dtype)
    if SIMULATOR:
        return FakeCUDAArray(arr._ary.view(dtype))
    return DeviceBuffer(arr.ptr, arr.shape, arr.strides, dtype, arr.owner)


def reinterpreted(arr, dtype, k: int):
    """The first ``k`` elements of ``dtype`` in the bytes of a 1-D C-contiguous device
    array (at least ``k * dtype.itemsize`` bytes of them)."""
    dtype = np.dtype(dtype)
    if SIMULATOR:
        return FakeCUDAArray(arr._ary.view(np.uint8)[:k * dtype.itemsize].view(dtype))
    return DeviceBuffer(arr.ptr, (k,), (dtype.itemsize,), dtype,
                        arr if arr.owner is None else arr.owner)


def c_contiguous(arr) -> bool:
    """Whether a device view's elements lie in C order with no gaps."""
    return arr._ary.flags.c_contiguous if SIMULATOR else buffer(arr).c_contiguous


def flat(arr, name: str = "out"):
    """A C-contiguous device array as a 1-D view the kernels can write.

    Raises:
        ValueError: ``arr`` (named ``name`` in the message) is not C-contiguous.
    """
    if not c_contiguous(arr):
        raise ValueError(f"{name} must be C-contiguous for device input")
    if SIMULATOR:
        return FakeCUDAArray(arr._ary.reshape(-1))
    buf = buffer(arr)
    return buf.with_layout((buf.size,), (buf.dtype.itemsize,))


def address(x) -> int:
    """The address of a device view's first element (a simulator array's NumPy data)."""
    return x._ary.ctypes.data if SIMULATOR else x.ptr


def refuse_replay(why: str) -> None:
    """Tell a recording call (``numbakern/runtime/replay.py``) that it must not be
    replayed."""
    recording = current_recording()
    if recording is not None:
        recording.refuse(why)


def refuse_replay_of_out_copy() -> None:
    """:func:`refuse_replay` for a copy into ``out=`` that bypasses ``launch`` (CuPy's
    ``out[...] =``, torch's ``copy_``): a replay would leave ``out`` unwritten."""
    refuse_replay("a copy into out= outside numbakern's launches")


def to_device(host: np.ndarray, stream):
    """A device copy of a host array, as a view (never replayed: it uploads data)."""
    refuse_replay("a host-to-device copy")
    return device_view(cuda.to_device(np.ascontiguousarray(host), stream=stream))


def host_copy(view, stream=0) -> np.ndarray:
    """Copy a device array (simulator array or buffer) to a new host array of its
    shape and strides. Numba copies no negative stride to the host ("D->H copy not
    implemented for negative strides"): such a view's span of memory is read forwards
    (:func:`lowest_span`) and the result viewed in it from its first element."""
    refuse_replay("a device-to-host copy")
    if any(s < 0 for s in view.strides):
        span, first = lowest_span(view)
        host = np.ascontiguousarray(host_copy(span, stream))
        return np.ndarray(tuple(view.shape), host.dtype, host, first * host.itemsize,
                          tuple(view.strides))
    if SIMULATOR:
        return view.copy_to_host()
    return to_device_array(view).copy_to_host(stream=stream)


def host_words(view, stream=0) -> np.ndarray:
    """A host copy of a few words of device memory (flags, counts, a kernel's report),
    read after the work queued on ``stream`` (a Numba stream, or 0: the default
    stream), in the view's shape: for a C-contiguous view of at most ``PINNED_BYTES``
    (of any number of dims: a 0-d result, a few outputs' flags), one driver copy
    into a reused pinned buffer and a stream synchronisation
    (``runtime/launch.read_small``), without the ``DeviceNDArray`` and the pageable
    copy of :func:`host_copy` (which serves anything else, and the simulator).

    Raises:
        RuntimeError: a CUDA error from the copy or an earlier launch on ``stream``.
    """
    if SIMULATOR:
        return host_copy(view, stream)
    refuse_replay("a device-to-host copy")
    buf = buffer(view)
    return _pinned_read(buf, stream) if _small(buf) else host_copy(view, stream)


def checked_words(view, stream, passes, same_on_rerun: bool = False) -> np.ndarray:
    """:func:`host_words` for a check: a kernel's report or flags that the rest of the
    call reads only through ``passes(words)``, True when the call goes on as though
    nothing were found (no error, no warning, nothing more launched), and a pure
    function of the words and of what keys the call (its dtypes, shapes, values).

    So the read need not stop the call from replaying
    (``numbakern/runtime/replay.py``): while the call is being recorded, words that
    pass make the read a step of its program, which a replay takes again after the
    launches before it, running the call the ordinary way where the words fail (then
    it raises or warns as the check says); words that fail leave the call unrecorded.
    ``same_on_rerun``: the words depend on no argument the call writes (device
    targets, offsets), so that a re-run on what a replay wrote over an array passed
    twice (``grad_out=logits``) finds them failing too: such a call may replay.
    """
    recording = current_recording()
    if recording is None:
        return host_words(view, stream)
    if SIMULATOR:
        words = view.copy_to_host()
        if words.nbytes > PINNED_BYTES:  # as on a GPU: not through the pinned buffer
            refuse_replay("a device-to-host copy")
            return words
    else:
        buf = buffer(view)
        if not _small(buf):
            return host_words(view, stream)  # not through the pinned buffer: refused
        words = _pinned_read(buf, stream)
    if passes(words):
        recording.check(view, stream, passes, same_on_rerun)
    else:
        recording.fail_check()
    return words


def _small(buf) -> bool:
    """Whether :func:`host_words` reads ``buf`` through the pinned buffer."""
    return buf.c_contiguous and buf.size * buf.dtype.itemsize <= PINNED_BYTES


def _pinned_read(buf, stream) -> np.ndarray:
    """:func:`host_words`'s read of a :func:`_small` buffer."""
    handle = stream if isinstance(stream, int) else stream_handle(stream)
    return read_small(buf.ptr, buf.size * buf.dtype.itemsize, handle).view(buf.dtype) \
        .reshape(buf.shape)


def device_empty(shape, dtype, stream):
    """A new device array from Numba's allocator, as a view."""
    return device_view(cuda.device_array(shape, dtype=dtype, stream=stream))
