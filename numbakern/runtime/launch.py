"""Launch compiled kernels with a few microseconds of host work, not hundreds.

Numba's ``kernel[grid, block, stream](*args)`` types every argument, wraps every
array into a ``DeviceNDArray`` (a CuPy array goes through
``__cuda_array_interface__`` and, by default, a stream synchronisation) and checks the
context on each call: about 100-300 us per launch, as long as a whole 1 GB
reduction on an H200. This module keeps one compiled kernel per argument signature
and passes arguments the way Numba's own ``_Kernel.launch`` flattens them (an array is
``meminfo, parent, size, itemsize, data, *shape, *strides``), straight to the driver's
``cuLaunchKernel``.

Arrays are described by :class:`DeviceBuffer`: a pointer, shape, strides and dtype,
read from CuPy arrays, Numba device arrays or any ``__cuda_array_interface__``
object. Under the simulator there is nothing to save: :func:`launch` uses Numba's
ordinary launch.
"""

from __future__ import annotations

import ctypes
import functools
import math
import sys
import threading
from typing import Any

import numpy as np
from numba import cuda, from_dtype, types

from .device import SIMULATOR


def _is_c_contiguous(shape, strides, itemsize) -> bool:
    if 0 in shape:  # no elements: contiguous whatever the strides, as NumPy says
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


class DeviceBuffer:
    """A device array described by pointer, shape, strides (bytes) and dtype.

    ``owner`` keeps the memory alive (a CuPy array, a Numba device array, ...).
    Exposes ``__cuda_array_interface__``, so Numba's ordinary launch and CuPy accept it.
    A plain class with slots: one is made per array per launch, immutable, so it
    holds its launch signature (``sig``) and kernel parameters (``abi``) ready-made.
    """

    __slots__ = ("ptr", "shape", "strides", "dtype", "owner", "c_contiguous", "sig", "abi")

    def __init__(self, ptr: int, shape, strides, dtype, owner: Any = None,
                 c_contiguous: bool | None = None):
        self.ptr = ptr
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.dtype = np.dtype(dtype)
        self.owner = owner
        self.c_contiguous = (_is_c_contiguous(self.shape, self.strides, self.dtype.itemsize)
                             if c_contiguous is None else c_contiguous)
        self.sig = (self.dtype, len(self.shape), self.c_contiguous)
        # Numba's flattened array argument: meminfo, parent, size, itemsize, data,
        # shape..., strides...
        self.abi = (0, 0, math.prod(self.shape), self.dtype.itemsize, ptr, *self.shape,
                    *self.strides)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # np.prod costs ~10 us, a launch budget

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3, "stream": None}

    def with_layout(self, shape, strides) -> "DeviceBuffer":
        """A view of the same memory with another shape and strides."""
        return DeviceBuffer(self.ptr, shape, strides, self.dtype, self.owner)

    def __repr__(self) -> str:
        return (f"DeviceBuffer(ptr={self.ptr:#x}, shape={self.shape}, strides={self.strides}, "
                f"dtype={self.dtype})")


def buffer(obj: Any) -> DeviceBuffer:
    """Describe a device array (CuPy, Numba, any ``__cuda_array_interface__``)."""
    if isinstance(obj, DeviceBuffer):
        return obj
    if type(obj).__module__.startswith("cupy"):
        return DeviceBuffer(obj.data.ptr, obj.shape, obj.strides, obj.dtype, obj,
                            obj.flags.c_contiguous)
    if type(obj).__module__.startswith("torch") and obj.is_cuda and not obj.requires_grad:
        described = _torch_buffer(obj)
        if described is not None:
            return described
    if hasattr(obj, "device_ctypes_pointer"):
        # A Numba device array, read directly: its interface converts the stream it was
        # made on with int(), which warns (DeprecationWarning, Python 3.12) for the
        # default stream, whose handle is an enum.
        return DeviceBuffer(obj.device_ctypes_pointer.value or 0, obj.shape, obj.strides,
                            obj.dtype, obj)
    cai = obj.__cuda_array_interface__
    dtype = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous by the interface's rule
        strides = tuple(dtype.itemsize * int(np.prod(shape[i + 1:], dtype=np.int64))
                        for i in range(len(shape)))
    return DeviceBuffer(cai["data"][0], shape, tuple(strides), dtype, obj)


def _torch_buffer(t) -> DeviceBuffer | None:
    """A CUDA tensor that requires no grad, read directly (torch's
    ``__cuda_array_interface__`` is Python that costs several microseconds a call);
    None for a dtype outside :data:`_TORCH_NUMPY` (bfloat16, float8), which the
    interface describes or refuses."""
    dtype = _TORCH_NUMPY.get(str(t.dtype))
    if dtype is None:
        return None
    size = dtype.itemsize
    strides = tuple(s * size for s in t.stride())
    return DeviceBuffer(t.data_ptr(), tuple(t.shape), strides, dtype, t)


# torch dtypes (by name) that torch's interface describes as these NumPy dtypes
_TORCH_NUMPY = {f"torch.{name}": np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")}

_SCALARS = {  # Python scalar kinds -> Numba type; both travel as 8 bytes
    "i": (types.int64,),
    "f": (types.float64,),
}


def _scalar_kind(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("launch: pass flags as integers, not bools")
    if isinstance(value, (int, np.integer)):
        return "i"
    if isinstance(value, (float, np.floating)):
        return "f"
    raise TypeError(f"launch: unsupported kernel argument {value!r}")


@functools.cache
def _libcuda() -> ctypes.CDLL:
    """The CUDA driver library, opened once for every ctypes call of this module."""
    return ctypes.CDLL("libcuda.so.1")


def _driver():
    """libcuda's cuLaunchKernel through ctypes: ~2 us a call, where cuda.core's launch
    spends ~50 us converting arguments."""
    fn = _libcuda().cuLaunchKernel
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


_cuLaunchKernel = None


def _as_int64_bits(value, kind: str) -> int:
    """A scalar's 8 bytes as a signed int64 (uint64 values wrap, floats by their bits)."""
    if kind == "f":
        return int(np.float64(value).view(np.int64))
    value = int(value)
    return value - 2**64 if value >= 2**63 else value


def _signature(key) -> tuple:
    """Numba argument types from the cheap per-call key."""
    argtypes = []
    for k in key:
        if isinstance(k, str):
            argtypes.append(_SCALARS[k][0])
        elif k[0] == "tuple":  # a tuple of arrays (an N-field state's, ops/state.py)
            argtypes.append(types.BaseTuple.from_types(_signature(k[1])))
        else:
            dtype, ndim, contiguous = k
            argtypes.append(types.Array(from_dtype(dtype), ndim, "C" if contiguous else "A"))
    return tuple(argtypes)


def _function_handle(kernel) -> int:
    """The CUfunction (in the current context) of a compiled Numba kernel."""
    from cuda.bindings import driver

    cukernel = kernel._codelibrary.get_cufunc().kernel.handle
    err, function = driver.cuKernelGetFunction(cukernel)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuKernelGetFunction failed: {err}")
    return int(function)


def stream_handle(stream) -> int:
    """A Numba stream's raw CUstream handle as an int (0: the default stream)."""
    handle = stream.handle
    return int(getattr(handle, "value", handle) or 0)


def stream_pointer(stream) -> int:
    """The raw handle of a CuPy stream (``.ptr``), a Numba stream or a pointer, as an
    int (0: the default stream).

    Raises:
        TypeError: ``stream`` is none of these (a bool included).
        ValueError: a pointer outside ``[0, 2**64)``.
    """
    ptr = getattr(stream, "ptr", stream)
    if isinstance(ptr, (int, np.integer)) and not isinstance(ptr, (bool, np.bool_)):
        if not 0 <= ptr < 1 << 64:
            raise ValueError(f"stream as a pointer must lie in [0, 2**64), got {ptr}")
        return int(ptr)
    if hasattr(stream, "handle"):  # a Numba stream
        return stream_handle(stream)
    raise TypeError(
        f"stream must be None, a numba.cuda stream, a CuPy stream or a pointer, got {stream!r}"
    )


def simulator_stream(stream):
    """The simulator's one stream, for a ``stream=`` that a GPU would take (``None``
    too); raises ``TypeError`` for what a GPU would refuse (:func:`stream_pointer`)."""
    default = cuda.default_stream()
    if stream is not None and not isinstance(stream, type(default)):
        stream_pointer(stream)
    return default


def flatten(args) -> tuple[tuple, list, list]:
    """Kernel arguments as ``(signature key, 8-byte parameter values, data slots)``:
    each array becomes Numba's ``meminfo, parent, size, itemsize, data, *shape,
    *strides`` and each scalar one int64; ``slots`` pairs each array's data-pointer
    position in the values with its :class:`DeviceBuffer` (what :mod:`numbakern.runtime.replay`
    patches)."""
    key, flat, slots = [], [], []
    for a in args:
        if type(a) is tuple:
            # Numba flattens a tuple argument member by member, each array as above
            # (the N-field states of numbakern/ops/state.py pass a tuple of arrays).
            inner, values, inner_slots = flatten(a)
            key.append(("tuple", inner))
            slots += [(len(flat) + slot, buf) for slot, buf in inner_slots]
            flat += values
            continue
        if type(a) is not DeviceBuffer:
            if isinstance(a, (int, float, np.number)):
                kind = _scalar_kind(a)
                key.append(kind)
                flat.append(_as_int64_bits(a, kind))
                continue
            a = buffer(a)
        key.append(a.sig)
        slots.append((len(flat) + 4, a))
        flat += a.abi
    return tuple(key), flat, slots


_UNSET = object()
# CuPy's Cython binding of cuLaunchKernel, when CuPy is loaded at the first launch:
# 3.6 us a call on the H200 host against 5.5 us through ctypes (2026-11-30).
_cupy_launch_kernel: Any = _UNSET


def bounded_jit(bounds=None):
    """``cuda.jit`` for a kernel, with launch bounds on a GPU: ``bounds`` is the
    threads a block (ptxas then keeps to the ``65536 / threads`` registers such a block
    may have, spilling if it must, where the kernel would otherwise fail to launch:
    ``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES``, float64 cross_entropy at 1024 threads; a
    kernel already within them is unchanged), or ``(threads, blocks a
    multiprocessor)`` (registers for that many blocks at once). Plain under the
    simulator, or with ``bounds`` None."""
    return cuda.jit if SIMULATOR or bounds is None else cuda.jit(launch_bounds=bounds)


def driver_launch(function: int, grid: int, block: int, stream: int, params,
                  shared: int = 0) -> None:
    """``cuLaunchKernel`` on a 1-D grid with parameters already in place (``params``
    from :func:`parameter_block`) and ``shared`` bytes of dynamic shared memory
    (:func:`allow_shared` has raised the function's limit where it needs more)."""
    global _cupy_launch_kernel, _cuLaunchKernel
    if not (SIMULATOR or getattr(_local, "has_context", False)):
        _make_context_current()
    if _cupy_launch_kernel is _UNSET:
        cupy = sys.modules.get("cupy")
        _cupy_launch_kernel = cupy.cuda.driver.launchKernel if cupy is not None else None
    if _cupy_launch_kernel is not None:  # raises CUDADriverError itself
        _cupy_launch_kernel(function, grid, 1, 1, block, 1, 1, shared, stream, params[2], 0)
        return
    if _cuLaunchKernel is None:
        _cuLaunchKernel = _driver()
    err = _cuLaunchKernel(function, grid, 1, 1, block, 1, 1, shared, stream, params[0], None)
    _checked(err, "cuLaunchKernel")


class _Launcher:
    """One dispatcher's compiled kernels (CUfunction handles), by argument signature.

    Every parameter of a Numba kernel taking arrays and int64/float64 scalars is 8
    bytes wide, so the parameters travel as one int64 array and an array of pointers
    into it, as ``cuLaunchKernel`` wants them; both are made once per signature.
    """

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.compiled: dict[tuple, tuple] = {}  # key -> (CUfunction, values, pointers)
        self.lock = threading.Lock()  # the driver copies the values at launch
        self._compiling = threading.Lock()  # one compilation per signature

    def __call__(self, grid, block, stream, args, shared: int = 0):
        key, flat, _ = flatten(args)
        function, values, pointers = self.entry(key, len(flat))
        if shared:
            allow_shared(function, shared)
        with self.lock:
            values[:] = flat
            driver_launch(function, grid, block, stream_handle(stream), pointers, shared)

    def entry(self, key: tuple, count: int) -> tuple:
        """``(CUfunction, values, pointers)`` for a signature, compiled on first use."""
        entry = self.compiled.get(key)
        if entry is None:
            with self._compiling:  # threads first calling one signature compile once
                entry = self.compiled.get(key)
                if entry is None:
                    entry = self.compiled[key] = self._prepare(key, count)
        return entry

    def _prepare(self, key, count: int) -> tuple:
        """Compile for this signature; a parameter buffer and pointers into it.

        Returns ``(CUfunction, values, (pointer array, its numpy owner))``.
        """
        kernel = self.dispatcher.compile(_signature(key))
        return (_function_handle(kernel), *parameter_block(count))


# Shared memory a block may have without asking (CUDA's 48 KiB, static and dynamic
# together); more dynamic shared memory than that leaves beside the kernel's static
# arrays needs the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES raised
# first.
_DEFAULT_SHARED = 48 * 1024
_STATIC_SHARED = 1  # CUfunction_attribute: CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
_MAX_DYNAMIC_SHARED = 8  # CUfunction_attribute: ..._MAX_DYNAMIC_SHARED_SIZE_BYTES
_shared_allowed: dict[int, int] = {}  # CUfunction -> dynamic shared bytes allowed
_shared_lock = threading.Lock()


def allow_shared(function: int, nbytes: int) -> None:
    """Let ``function`` (a CUfunction) launch with ``nbytes`` of dynamic shared memory:
    by default it may have what 48 KiB leaves beside its static shared memory; past
    that, ``cuFuncSetAttribute`` raises its limit (once per function and size; the
    driver refuses more than the device's opt-in maximum less the static part). The
    limit only rises, under a lock: two threads raising it at once could otherwise
    leave the driver's limit below the one recorded."""
    allowed = _shared_allowed.get(function)
    if allowed is not None and allowed >= nbytes:
        return
    with _shared_lock:
        allowed = _shared_allowed.get(function)
        if allowed is None:
            allowed = _shared_allowed[function] = _DEFAULT_SHARED - _attribute(
                function, _STATIC_SHARED)
        if allowed >= nbytes:
            return
        set_attribute = _libcuda().cuFuncSetAttribute
        set_attribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        _checked(set_attribute(function, _MAX_DYNAMIC_SHARED, nbytes),
                 f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {nbytes})")
        _shared_allowed[function] = nbytes


def _attribute(function: int, attribute: int) -> int:
    """``cuFuncGetAttribute`` of a CUfunction."""
    value = ctypes.c_int(0)
    get_attribute = _libcuda().cuFuncGetAttribute
    get_attribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_void_p]
    _checked(get_attribute(ctypes.byref(value), attribute, function),
             f"cuFuncGetAttribute({attribute})")
    return value.value


def parameter_block(count: int) -> tuple:
    """``count`` int64 parameter values and ``cuLaunchKernel``'s array of pointers to
    each: ``(values, (pointer array as ctypes, its numpy owner, its address))``."""
    values = np.zeros(count, dtype=np.int64)
    addresses = values.ctypes.data + 8 * np.arange(count, dtype=np.uint64)
    pointers = addresses.ctypes.data_as(ctypes.POINTER(ctypes.c_void_p))
    return values, (pointers, addresses, addresses.ctypes.data)


_launchers: dict[tuple, _Launcher] = {}


def current_device_id() -> int:
    """The current CUDA device's ordinal: ~1 us through CuPy's runtime binding when CuPy
    is loaded, else through Numba (~15 us)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return cupy.cuda.runtime.getDevice()
    return cuda.get_current_device().id


def launch(kernel, grid: int, block: int, stream, *args, shared: int = 0) -> None:
    """Launch ``kernel`` (a ``@cuda.jit`` dispatcher) on ``grid`` x ``block`` threads.

    Args:
        kernel: a Numba CUDA kernel, compiled here once per argument signature.
        grid, block: blocks and threads per block (1-D).
        stream: a Numba stream.
        args: device arrays (CuPy, Numba, :class:`DeviceBuffer`, any
            ``__cuda_array_interface__``) and Python/NumPy scalars (integers are
            passed as int64, floats as float64).
        shared: bytes of dynamic shared memory a block (``cuda.shared.array(0, ...)``);
            past what 48 KiB leaves beside the kernel's static shared memory, the
            function's limit is raised first (:func:`allow_shared`).

    Raises:
        numbakern.runtime.simcost.SimulatorTooSlow: under the simulator, a launch
            estimated (or measured, as it runs) to take longer than
            ``NUMBAKERN_SIM_MAX_SECONDS`` (:mod:`numbakern.runtime.simcost`).
    """
    recording = current_recording()
    if recording is not None:
        recording.launch(kernel, grid, block, stream, args, shared)
    if SIMULATOR:
        from .simcost import guarded

        with guarded(kernel, grid, block, args):  # refused, announced, watched
            _local.own_launch = True  # (Numba's launch, not a strategy's own)
            try:
                kernel[grid, block, stream, shared](*args)
            finally:
                _local.own_launch = False
        return
    launcher_for(kernel)(grid, block, stream, args, shared)


def _watch_other_launches() -> None:
    """Make a kernel launched through Numba's own API (``kernel[grid, block](...)``: a
    strategy of the user's launching its own kernel) refuse the recording in progress
    on its thread: a replay re-runs the launches :func:`launch` recorded and would
    leave that kernel's work undone (``numbakern/runtime/replay.py``). numbakern's own
    launches go through the driver (or, under the simulator, mark themselves)."""
    if SIMULATOR:  # a launch configures the kernel first; a device function's call not
        from numba.cuda.simulator.kernel import FakeCUDAKernel as kernel_type
        method = "__getitem__"
    else:
        from numba.cuda.dispatcher import CUDADispatcher as kernel_type
        method = "call"
    numbas = getattr(kernel_type, method)

    @functools.wraps(numbas)
    def watched(self, *args, **kwargs):
        recording = current_recording()
        if recording is not None and not getattr(_local, "own_launch", False):
            recording.refuse("a kernel launched outside numbakern's launch (a "
                             "strategy's own kernel[grid, block] call)")
        return numbas(self, *args, **kwargs)

    setattr(kernel_type, method, watched)


_watch_other_launches()


#: bytes of each pinned buffer that :func:`read_small` copies through: a check's words
#: (``runtime/views.checked_words``: nanmax's flags, nanmedian's counts, one word an
#: output) replay up to 131072 outputs; more are read by a plain copy, never replayed
PINNED_BYTES = 1 << 20
# cuMemHostAlloc's flag: pinned for every context (each device's), not just the
# current one
_PORTABLE = 1
_copy_functions = None
# pinned buffers not in use (one per thread reading at once; never freed)
_pinned_free: list = []


def _copier():
    """libcuda's ``cuMemcpyDtoHAsync``, ``cuStreamSynchronize`` and ``cuMemHostAlloc``
    through ctypes (a microsecond or two a call)."""
    lib = _libcuda()
    copy = lib.cuMemcpyDtoHAsync_v2
    copy.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
    sync = lib.cuStreamSynchronize
    sync.argtypes = [ctypes.c_void_p]
    alloc = lib.cuMemHostAlloc
    alloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
    for fn in (copy, sync, alloc):
        fn.restype = ctypes.c_int
    return copy, sync, alloc


def _checked(err: int, what: str) -> None:
    if err:
        raise RuntimeError(f"{what} failed with CUDA error {err}{_error_words(err)}")


def _error_words(err: int) -> str:
    """`` (CUDA_ERROR_NAME: the driver's description)`` for a CUresult, as CuPy's
    launch path tells it; empty where the driver cannot name it."""
    words = []
    for getter in ("cuGetErrorName", "cuGetErrorString"):
        text = ctypes.c_char_p()
        try:
            rc = getattr(_libcuda(), getter)(ctypes.c_int(err), ctypes.byref(text))
        except (OSError, AttributeError):  # no driver library to ask
            return ""
        if rc or not text.value:
            return ""
        words.append(text.value.decode(errors="replace"))
    return f" ({words[0]}: {words[1]})"


def _pinned() -> tuple[int, np.ndarray]:
    """A free pinned buffer: ``(address, its bytes as a uint8 array)``."""
    try:
        return _pinned_free.pop()  # atomic under the GIL: no two threads get one
    except IndexError:
        pass
    address = ctypes.c_void_p()
    _checked(_copy_functions[2](ctypes.byref(address), PINNED_BYTES, _PORTABLE),
             "cuMemHostAlloc")
    raw = (ctypes.c_uint8 * PINNED_BYTES).from_address(address.value)
    return address.value, np.ctypeslib.as_array(raw)


def read_small(ptr: int, nbytes: int, stream: int) -> np.ndarray:
    """``nbytes`` (at most :data:`PINNED_BYTES`) of device memory at ``ptr`` as a new
    uint8 array, read after the work queued on ``stream`` (a raw handle; 0: the
    default stream): one ``cuMemcpyDtoHAsync`` into a pinned buffer kept for reuse,
    then ``cuStreamSynchronize``. Numba's ``copy_to_host`` spends tens of
    microseconds on a ``DeviceNDArray`` and a pageable copy for the same few words.

    Raises:
        RuntimeError: the copy or an earlier launch on ``stream`` failed (its CUDA
            error code).
    """
    global _copy_functions
    if not getattr(_local, "has_context", False):
        _make_context_current()
    if _copy_functions is None:
        _copy_functions = _copier()
    copy, sync, _ = _copy_functions
    buffer_ = _pinned()
    try:
        _checked(copy(buffer_[0], ptr, nbytes, stream), "cuMemcpyDtoHAsync")
        _checked(sync(stream), "cuStreamSynchronize")
        return buffer_[1][:nbytes].copy()
    finally:
        _pinned_free.append(buffer_)


def _make_context_current() -> None:
    """Make the current device's primary context current on this thread.

    ``cuLaunchKernel`` needs a current context, and a thread that has not yet touched
    the GPU (a Dask or thread-pool worker) has none.
    """
    from numba.cuda.cudadrv.devices import get_context

    get_context(current_device_id())
    _local.has_context = True


def launcher_for(kernel) -> _Launcher:
    """The launcher of ``kernel`` on the current device."""
    # Per device: a CUfunction belongs to the context it was loaded in. The launcher
    # holds the dispatcher, so its id cannot be reused while the entry lives.
    key = (id(kernel), current_device_id())
    launcher = _launchers.get(key)
    if launcher is None:
        launcher = _launchers.setdefault(key, _Launcher(kernel))  # one, if threads race
    return launcher


# numbakern.runtime.replay's recording in progress on this thread, if any: every launch and
# allocation reports to it (the record lives here, beside the launch, so that the
# modules reporting to it need not import replay).
_local = threading.local()


def current_recording():
    """The recording in progress on this thread (see :mod:`numbakern.runtime.replay`), or None."""
    return getattr(_local, "recording", None)


def set_recording(recording) -> None:
    _local.recording = recording


def to_device_array(buf: DeviceBuffer):
    """A Numba ``DeviceNDArray`` view of a buffer (for code that wants one)."""
    return cuda.as_cuda_array(buf, sync=False)
