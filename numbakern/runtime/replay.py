"""Replay: a repeated call with the same signature re-runs its recorded launches.

Why
---
Once a call's arguments are checked, its strategy resolved and its kernels chosen,
what reaches the GPU is fixed: some allocations, some kernel launches whose
parameters are constants (sizes, strides, grid) plus the addresses of the inputs and
of the allocations, and a result that is a view of an allocation. None of it depends
on the data, only on the signature: the arrays' dtypes, shapes, strides and address
alignment, the other arguments' values, the device. Yet Python spends 40-100 us
deciding it again on each call (H200 host, bench/NOTES.md): as long as the kernels
of a whole 256 MB reduction.

So the first call with a signature runs as usual while a recording notes each
allocation (``Workspace.empty``), each launch (``launch.launch``) and what the result
is a view of. Later calls replay it: one allocation holding every temporary, the
new addresses patched into the recorded kernel parameters, the driver calls, the
result views. It is the idea of CUDA graphs (capture once, launch many times) kept
at the level of plain launches, so that addresses can change from call to call.

What is never replayed
----------------------
A recording is kept only when everything the call did to device memory went through
those two doors. Each of these makes a signature run the ordinary way every time:
a device-to-host read other than a check's (below: a later decision might depend on
the data), a host-to-device upload, a launch argument whose address is neither an
input's nor an allocation's (a copy CuPy made, say), a launch on another stream, a
kernel launched through Numba's own ``kernel[grid, block](...)`` (a user's strategy
launching its own), a write outside the launches (a CuPy copy into ``out=``), a
result that is neither a view of an allocation nor an argument the launches wrote (a
host scalar, a CuPy cast), an empty array.
Calls with host (NumPy or CPU tensor) input, with an argument that cannot be keyed (a
list, a mutable array), or with an explicit ``stream=`` on CuPy arrays or tensors
(whose allocators order memory by their own current stream) also run the ordinary way.
A call on Numba device arrays replays on the ``stream=`` it is given: its one
allocation is Numba's, which no stream orders, and the key leaves the stream out.

A check (``views.checked_words``: a kernel's report on device offsets or targets,
nanmax's all-NaN flags) is the one read a program holds. The call goes on the same
way whatever the words, as long as they pass the check: so the replay reads them
where the recording did, after the launches before them, and, where they fail, runs
the call the ordinary way from the start (which raises or warns). It is the guard of a
tracing JIT: the recorded path stands while what it assumed of the data holds.

An ``out=`` that the launches wrote is a result the replay hands back as the caller's
own object. Such a call replays only while its arguments stay apart in memory as they
were when it was recorded, and no tensor among them requires grad. Arguments that are
the same array (one address, dtype, shape and strides: ``out=x``, cross_entropy's
``grad_out=logits``) are one input whose recorded addresses serve both, the pattern
of such pairs part of the key; arguments that overlap otherwise are the ordinary
path's to allow or refuse, every time. Such a call with a check (above) is not
replayed: its launches may write over the array before the check's read, and a
check that fails re-runs the call on what they left (nanmax's ``out=x`` would no
longer see the NaN it must warn of); unless the check's words depend on no
argument the call writes (cross_entropy's targets), whose re-run then fails the same
way.

A call with CUDA tensors is keyed by the tensors themselves, before they are
translated (``api._dispatch``), so that its replay skips the translation too: the one
allocation comes from torch's caching allocator, the launches go to torch's current
stream, and the results are tensor views of that allocation. A repeated call on one
CuPy array or CUDA tensor (the other arguments plain values) finds its program
sooner, from the array's type and layout (``numbakern.runtime.tensor_table``).

Under the simulator the same recordings replay through Numba's simulated launches,
so the test suite exercises recording and replay on every machine.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from .device import SIMULATOR, torch_stream
from .launch import (DeviceBuffer, _local, buffer, current_device_id, current_recording,
                     driver_launch, flatten, launcher_for, parameter_block, read_small,
                     set_recording, simulator_stream, stream_handle, stream_pointer,
                     to_device_array)
from .memo import VALUES, value_tag

ALIGN = 256  # each temporary's offset in the call's one allocation (CuPy's pool's too)
# An address keys a call by its remainder modulo this: the one property of an address a
# plan reads (16-byte vector loads, kernels.vector_width).
ADDRESS_KEY = 16
MAX_SIGNATURES = 256  # per function; the table starts afresh when full

# Replays, recordings kept and refused, since import: for tests and the curious.
counts: Counter = Counter()
# The last recording of each (function name, array kind): a Program, or Refused with
# its reason (bench/host_time.py prints them).
latest: dict = {}

_HOST = (list, dict, set, np.ndarray)  # never keyed: their contents are the input
# Kinds whose calls replay with a stream= too: their one allocation is Numba's, which
# no stream orders (CuPy's pool and torch's caching allocator order theirs by their
# current stream, which a replay would have to set: such calls run the ordinary way).
_ANY_STREAM = frozenset({"device", "sim"})
_enabled = True


def ready() -> bool:
    """Whether a call may replay now: replay is on, and no recording is in progress on
    this thread (a call inside another's recording runs the ordinary way, so that its
    launches are recorded there)."""
    return _enabled and getattr(_local, "recording", None) is None


@contextlib.contextmanager
def disabled():
    """Run the calls inside the ``with`` block the ordinary way (for comparisons)."""
    global _enabled
    before, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = before


# --- arrays: what keys them, where they live -----------------------------------------


class _Array(NamedTuple):
    """An array argument: its address and the layout that keys it."""

    kind: str  # "cupy", "torch", "device" (Numba, ... on a GPU) or "sim"
    address: int
    dtype: np.dtype
    shape: tuple
    strides: tuple
    device: int = -1  # a tensor's own CUDA device (the current one is keyed apart)


class _Unkeyed(Exception):
    """An argument whose contents are the input (a CPU tensor): no signature."""


def _device_array(v) -> _Array | None:
    """``v`` as a device array, or None when it is not one."""
    if type(v).__module__.startswith("torch"):
        return _tensor(v)
    if SIMULATOR:
        ary = getattr(v, "_ary", None)  # the simulator's FakeCUDAArray
        if ary is None:
            return None
        return _Array("sim", ary.__array_interface__["data"][0], ary.dtype, ary.shape,
                      ary.strides)
    if type(v).__module__.startswith("cupy"):
        if not hasattr(v, "data"):
            return None
        return _Array("cupy", v.data.ptr, v.dtype, v.shape, v.strides)
    if not hasattr(v, "__cuda_array_interface__"):
        return None
    b = buffer(v)  # the launcher's reading of the interface (strides None: C order)
    return _Array("device", b.ptr, b.dtype, b.shape, b.strides)


def _tensor(t) -> _Array | None:
    """A CUDA tensor as kind "torch" (keyed by its own pointer, dtype and strides in
    bytes); a CPU tensor and a negated view (whose memory holds its values'
    negatives: the call copies it) cannot be keyed; other torch objects are not
    arrays."""
    if not hasattr(t, "data_ptr"):
        return None
    if not t.is_cuda or t.is_neg():
        raise _Unkeyed
    size = t.dtype.itemsize
    return _Array("torch", t.data_ptr(), t.dtype, tuple(t.shape),
                  tuple(s * size for s in t.stride()), t.get_device())


def _extent(a: _Array) -> tuple[int, int]:
    """``[lo, hi)``: the bytes an array's elements span (empty for an empty array)."""
    if 0 in a.shape:
        return a.address, a.address
    lo = hi = a.address
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.dtype.itemsize


def _overlapping(arrays: list) -> bool:
    """Whether the memory of any two of ``arrays`` overlaps, an array passed twice (the
    same address and layout: :func:`_aliases`) counted once."""
    extents = sorted(_extent(a) for a in set(arrays))
    return any(lo < prev_hi for (_, prev_hi), (lo, _) in zip(extents, extents[1:]))


def _aliases(arrays: list, objects: list) -> tuple:
    """For each of ``arrays``, the index of the first one that is the same array (same
    address, dtype, shape and strides; its own index where none is), then the same for
    the ``objects`` passed (one object twice, or two over the same memory: which one
    the result is); ``()`` when all are apart. Part of a call's key: a recording made
    with ``out=x`` replays only on calls that pass one array twice in the same places."""
    first: dict = {}
    pattern = tuple(first.setdefault(a, i) for i, a in enumerate(arrays))
    if len(first) == len(arrays):
        return ()
    same: dict = {}
    return pattern, tuple(same.setdefault(id(o), i) for i, o in enumerate(objects))


def _signature(args: tuple, kwargs: dict, arrays: list, refs: list, objects: list):
    """The key of a call, or None when it cannot be keyed; fills ``arrays`` with the
    array arguments, ``objects`` with the same arguments as passed, and ``refs`` with
    objects keyed by identity (kept alive by the table, so that their ids stay
    theirs)."""
    try:
        return _key(args, kwargs, arrays, refs, objects)
    except _Unkeyed:
        return None


def _key(args: tuple, kwargs: dict, arrays: list, refs: list, objects: list):
    key = []
    for v in (*args, *kwargs.values()):
        if isinstance(v, VALUES):
            key.append((value_tag(v), v))
        elif type(v) is tuple:
            if not all(isinstance(e, VALUES) for e in v):
                return None
            key.append((tuple, tuple(map(value_tag, v)), v))
        elif isinstance(v, _HOST):
            return None
        else:
            bits = getattr(v, "bfloat16_bits", None)  # core.arrays.BFloat16Bits
            a = _device_array(v if bits is None else bits)
            if bits is not None:
                if a is None:  # host bits: never keyed, as host arrays
                    return None
                key.append(type(v).__name__)  # not a uint16 input's signature
            if a is None:
                refs.append(v)  # a strategy, an op, a function: by identity
                key.append((type(v), id(v)))
                continue
            if arrays and a.kind != arrays[0].kind:
                return None
            arrays.append(a)
            objects.append(v)
            key.append((a.kind, a.dtype, a.shape, a.strides, a.address % ADDRESS_KEY,
                        a.device))
    if not arrays:
        return None
    key.append(_aliases(arrays, objects))
    key.append(tuple(kwargs))
    if not SIMULATOR:
        key.append(_device_of(arrays[0].kind))
    return tuple(key)


def _device_of(kind: str) -> int:
    """The current device's ordinal, asked of torch for tensors (CuPy may be absent,
    and Numba takes ~15 us)."""
    if kind == "torch":
        return sys.modules["torch"].cuda.current_device()
    return current_device_id()


# --- the decorator ---------------------------------------------------------------------


class Refused(NamedTuple):
    """A signature whose call cannot replay (a host read of its results, say): why."""

    why: str


_UNKEYED = object()


_TABLES: list[dict] = []  # every replayable function's table of recorded calls


def forget() -> None:
    """Drop every recorded call: a name (a strategy's, say) may mean something else
    from now on (``numbakern.strategies.register``)."""
    for table in _TABLES:
        table.clear()


def register(table: dict) -> dict:
    """Have :func:`forget` clear ``table`` too (a table of recorded calls kept
    elsewhere: ``numbakern.runtime.tensor_table``'s)."""
    _TABLES.append(table)
    return table


def replayable(fn):
    """Decorator: replay ``fn``'s recorded launches on repeated signatures (this
    module's docstring says when); ``fn`` itself otherwise.

    The wrapper's ``resolve(args, kwargs)`` returns ``(result, program)``: the
    :class:`Program` that replays a call of this signature, a :class:`Refused` for a
    signature that never replays (its reason), or None when there is neither, for
    tables keyed otherwise (``numbakern.runtime.tensor_table``).
    """
    table: dict = register({})

    def resolve(args: tuple, kwargs: dict):
        if not _enabled or current_recording() is not None:
            return fn(*args, **kwargs), None
        stream = kwargs.get("stream")
        arrays, refs, objects = [], [], []
        # a program does not depend on its stream: the key leaves it out
        key = _signature(args, kwargs if stream is None else {**kwargs, "stream": None},
                         arrays, refs, objects)
        try:
            entry = table.get(key) if key is not None else _UNKEYED
        except TypeError:  # an unhashable value (a structured NumPy scalar): fn decides
            entry = _UNKEYED
        if entry is _UNKEYED or (stream is not None and arrays[0].kind not in _ANY_STREAM):
            return fn(*args, **kwargs), None
        if entry is None:
            result, program = _record(fn, args, kwargs, arrays, objects, stream)
            if program is None:  # a check failed on this data: the next call records
                return result, None
            if len(table) >= MAX_SIGNATURES:
                table.clear()
            table[key] = (program, refs)
            latest[fn.__name__, arrays[0].kind] = program
            if type(program) is Refused:
                counts["refused"] += 1
                return result, program
            counts["recorded"] += 1
            return result, program
        program = entry[0]
        if type(program) is Refused:
            return fn(*args, **kwargs), program
        if program.returns_inputs and not _writable_apart(arrays, objects):
            return fn(*args, **kwargs), None
        try:
            result = program.run([a.address for a in arrays], objects, stream)
        except Unpassed:
            return fn(*args, **kwargs), program
        counts["replayed"] += 1
        return result, program

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return resolve(args, kwargs)[0]

    call.replay_table = table
    call.resolve = resolve
    return call


def _writable_apart(arrays: list, objects: list) -> bool:
    """Whether a call that writes some of its arguments (``out=``) may replay: no two
    arguments share memory but as one array passed twice, as when it was recorded (the
    key holds that pattern; the ordinary path decides what another overlap means: in
    place, or an error), and no tensor requires grad or is an inference tensor outside
    ``torch.inference_mode()`` (the ordinary path refuses to write either)."""
    return not _overlapping(arrays) and \
        not any(getattr(v, "requires_grad", False) or _inference_outside(v)
                for v in objects)


def _inference_outside(v) -> bool:
    """Whether ``v`` is a torch inference tensor while inference mode is off."""
    if type(v).__module__.split(".")[0] != "torch":
        return False
    torch = sys.modules["torch"]
    return v.is_inference() and not torch.is_inference_mode_enabled()


def _record(fn, args, kwargs, arrays: list, objects: list, stream=None):
    """Run ``fn`` once while recording: ``(result, program or Refused)``, or
    ``(result, None)`` when one of its checks failed (a trait of the data, not of the
    signature); ``objects``: the array arguments as passed; ``stream``: the call's
    ``stream=``, which its launches must all have gone to."""
    recording = Recording(arrays, objects)
    set_recording(recording)
    try:
        result = fn(*args, **kwargs)
    finally:
        set_recording(None)
    if recording.check_failed:
        return result, None
    try:
        program = recording.program(result, stream)
    except _Flaw as flaw:
        program = Refused(str(flaw))
    return result, program


class _Flaw(Exception):
    """Why a recording cannot be replayed."""


# --- recording -------------------------------------------------------------------------


class Recording:
    """What one call did to device memory (reported by ``launch`` and ``arrays``)."""

    def __init__(self, inputs: list, objects: list = ()):
        self.inputs = inputs
        self.objects = objects  # the inputs as passed: which one a result is
        self.allocations: list[tuple[int, int]] = []  # (address, bytes)
        # (kernel, grid, block, stream, args, shared), or a check's _CheckNote, in order
        self.launches: list[tuple] = []
        self.flaw: str | None = None
        self.check_failed = False  # a check's words did not pass (views.checked_words)
        # Every allocation stays alive until the call ends, so that no other allocation
        # of the call (a CuPy cast, say) can reuse its memory and pass for it.
        self.alive: list = []
        if _overlapping(inputs):
            # Which input an address belongs to would be ambiguous, and recorded
            # offsets from one input would replay into another.
            self.refuse("inputs that share memory")

    def refuse(self, why: str) -> None:
        """Mark the call as not replayable (the first reason is kept)."""
        if self.flaw is None:
            self.flaw = why

    def allocate(self, arr) -> None:
        """An allocation of ``Workspace.empty``: a DeviceBuffer, or a simulator array."""
        if SIMULATOR:
            address, nbytes = arr._ary.__array_interface__["data"][0], arr._ary.nbytes
        else:
            address, nbytes = arr.ptr, arr.size * arr.dtype.itemsize
        if nbytes == 0:
            self.refuse("an empty allocation")
        self.allocations.append((address, nbytes))
        self.alive.append(arr)

    def launch(self, kernel, grid: int, block: int, stream, args: tuple, shared: int = 0
               ) -> None:
        self.launches.append((kernel, grid, block, stream, args, shared))

    def check(self, view, stream, passes, same_on_rerun: bool = False) -> None:
        """A read of a check's words (``views.checked_words``, which says what
        ``same_on_rerun`` promises), after the launches so far: a replay reads
        ``view``'s memory there and goes on while ``passes``."""
        self.launches.append(_CheckNote(view, stream, passes, same_on_rerun))

    def fail_check(self) -> None:
        """A check's words did not pass: the call raises or warns, and keeps no
        recording (the next call of its signature records afresh)."""
        self.check_failed = True

    def program(self, result, stream=None) -> "Program":
        """The replayable program of a call given ``stream`` (None: its kind's
        default); raises :class:`_Flaw` when there is none."""
        if self.flaw is not None:
            raise _Flaw(self.flaw)
        if len(set(self.inputs)) < len(self.inputs) and \
                any(type(step) is _CheckNote and not step.same_on_rerun
                    for step in self.launches):
            # The launches before a check may write over the array passed twice, and a
            # check that fails re-runs the call the ordinary way, on what they left.
            raise _Flaw("an array passed twice to a call that checks its results")
        layout = _Layout(self.inputs, self.allocations, self.objects)
        kind = self.inputs[0].kind
        stream = _stream_of(kind) if stream is None else _given(stream)
        steps = []
        for step in self.launches:
            if type(step) is _CheckNote:
                on, built = step.stream, _check_step(layout, step)
            else:
                kernel, grid, block, on, args, shared = step
                built = (_sim_step if SIMULATOR else _gpu_step)(layout, kernel, grid, block,
                                                                args, shared)
            if _handle(on) != _handle(stream):
                raise _Flaw("a launch or a check on another stream")
            steps.append(built)
        names = tuple(map(_step_name, self.launches))
        return Program(kind, layout.total, steps, _result_spec(result, layout), names)


def _step_name(step) -> str:
    if type(step) is _CheckNote:
        return "check"
    kernel = step[0]
    return getattr(getattr(kernel, "py_func", kernel), "__name__", repr(kernel))


class _Layout:
    """Where recorded addresses came from: input ``i`` or the one allocation (source
    ``len(inputs)``) at an offset."""

    def __init__(self, inputs: list, allocations: list, objects: list = ()):
        self.inputs = inputs
        self.objects = objects
        self.extents = [(*_extent(a), a.address) for a in inputs]
        self.block = len(inputs)
        self.launched = set()  # the inputs that some launch took an address in
        self.offsets = []  # (address, bytes, offset in the one allocation)
        total = 0
        for address, nbytes in allocations:
            self.offsets.append((address, nbytes, total))
            total += -(-nbytes // ALIGN) * ALIGN
        self.total = total

    def locate(self, address: int, launched: bool = True) -> tuple[int, int]:
        """``(source, offset)`` of a recorded address (``launched``: a launch's
        argument, noted in :attr:`launched`); _Flaw when it is neither."""
        for start, nbytes, offset in self.offsets:
            if start <= address < start + nbytes:
                return self.block, offset + address - start
        for i, (lo, hi, base) in enumerate(self.extents):
            if lo <= address < hi:
                if launched:
                    self.launched.add(i)
                return i, address - base
        raise _Flaw("an address (a launch's argument, a check's words or the result) "
                    "that is neither an input nor an allocation")


def _stream_of(kind: str):
    """The stream an ordinary call with ``stream=None`` uses (arrays.resolve_stream)."""
    if SIMULATOR:
        return cuda.default_stream()
    if kind == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    if kind == "torch":  # a tensor call runs on torch's current stream (api._interop)
        return torch_stream(sys.modules["torch"].cuda.current_device())
    return 0


def _given(stream):
    """A call's ``stream=`` as :func:`_stream_of` gives a default: the simulator's one
    stream there, else the raw handle of a Numba or CuPy stream or a pointer."""
    return simulator_stream(stream) if SIMULATOR else stream_pointer(stream)


def _handle(stream) -> int:
    if isinstance(stream, int):
        return stream
    return 0 if SIMULATOR else stream_handle(stream)


# --- steps: one launch or one check each -----------------------------------------------


class Unpassed(Exception):
    """A replay's check found words that do not pass: the call runs the ordinary way."""


class _CheckNote(NamedTuple):
    view: Any  # the words' device view (a simulator array on the simulator)
    stream: Any
    passes: Any  # words -> bool
    same_on_rerun: bool  # views.checked_words's


class _Check(NamedTuple):
    """A replay's read of a check's words, and the test they must pass."""

    words: "_ArraySpec"
    passes: Any


def _check_step(layout: _Layout, note: _CheckNote) -> _Check:
    if SIMULATOR:
        ary = note.view._ary
        address, strides = ary.__array_interface__["data"][0], ary.strides
    else:
        buf = buffer(note.view)
        address, strides = buf.ptr, buf.strides
    source, offset = layout.locate(address, launched=False)
    return _Check(_ArraySpec(source, offset, tuple(note.view.shape), tuple(strides),
                             np.dtype(note.view.dtype)), note.passes)


def _passes(check: _Check, bases: list, block, stream: int) -> None:
    """Read a check's words after the launches queued on ``stream``; raise
    :class:`Unpassed` when they fail."""
    spec = check.words
    if SIMULATOR:
        words = np.array(_sim_view(spec, bases, block)._ary)
    else:
        words = read_small(bases[spec.source] + spec.offset, _nbytes(spec), stream) \
            .view(spec.dtype).reshape(spec.shape)
    if not check.passes(words):
        counts["unpassed"] += 1
        raise Unpassed


class _GpuStep(NamedTuple):
    function: int
    grid: int
    block: int
    values: np.ndarray  # the parameters, patched before each launch
    pointers: tuple
    patches: tuple  # (slot in values, source, offset)
    shared: int  # dynamic shared memory, bytes a block


def _gpu_step(layout: _Layout, kernel, grid, block, args, shared) -> _GpuStep:
    key, flat, slots = flatten(args)
    patches = []
    for slot, buf in slots:
        if buf.size == 0:  # never dereferenced
            flat[slot] = 0
            continue
        patches.append((slot, *layout.locate(buf.ptr)))
    function = launcher_for(kernel).entry(key, len(flat))[0]
    values, pointers = parameter_block(len(flat))
    values[:] = flat
    return _GpuStep(function, grid, block, values, pointers, tuple(patches), shared)


class _InputResult(NamedTuple):
    """A result that is argument ``index`` itself (an ``out=``): a replay returns the
    caller's object."""

    index: int


class _SimStep(NamedTuple):
    kernel: Any
    grid: int
    block: int
    args: tuple  # constants, or (source, offset, shape, strides, dtype) for arrays
    shared: int  # dynamic shared memory, bytes a block


class _ArraySpec(NamedTuple):
    source: int
    offset: int
    shape: tuple
    strides: tuple
    dtype: np.dtype


@dataclass(frozen=True)
class _NamedResult:
    """A named tuple of results (``topk``'s ``TopK``): its class and its members'
    specs, so that a replay hands back the same type."""

    cls: type
    items: tuple


def _sim_step(layout: _Layout, kernel, grid, block, args, shared) -> _SimStep:
    return _SimStep(kernel, grid, block, tuple(_sim_spec(layout, a) for a in args), shared)


def _sim_spec(layout: _Layout, a):
    """An argument as replay rebuilds it: an array as an :class:`_ArraySpec`, a tuple
    of arrays (an N-field state's, ``numbakern/ops/state.py``) member by member."""
    if type(a) is tuple:
        return tuple(_sim_spec(layout, m) for m in a)
    ary = getattr(a, "_ary", None)
    if ary is None:
        return a
    if ary.size == 0:
        raise _Flaw("an empty array argument")
    source, offset = layout.locate(ary.__array_interface__["data"][0])
    return _ArraySpec(source, offset, ary.shape, ary.strides, ary.dtype)


def _sim_arg(a, bases: list, block):
    """The argument a :func:`_sim_spec` stands for, in this replay's memory."""
    if type(a) is _ArraySpec:
        return _sim_view(a, bases, block)
    if type(a) is tuple:
        return tuple(_sim_arg(m, bases, block) for m in a)
    return a


# --- results ---------------------------------------------------------------------------


def _tensor_result(spec, total: int):
    """How a torch replay allocates and views its result: ``(shape, dtype, views)``,
    ``torch.empty(shape, dtype=dtype)`` the call's one allocation and ``views(block)``
    the result (None: the allocation is the result).

    A result of one dtype is allocated in that dtype (no uint8 block and ``view``):
    alone in the allocation and C-contiguous, it is the allocation itself; beside
    temporaries, one ``as_strided`` view. Several results (tuples) or none: a uint8
    block, viewed per result.
    """
    if type(spec) is _ArraySpec:
        size = spec.dtype.itemsize
        if total % size == 0 and spec.offset % size == 0 and \
                all(s % size == 0 for s in spec.strides):
            if spec.offset == 0 and spec.strides == _c_strides(spec.shape, size) and \
                    -(-_nbytes(spec) // ALIGN) * ALIGN == total:
                return spec.shape, spec.dtype, None
            shape, strides = spec.shape, tuple(s // size for s in spec.strides)
            offset = spec.offset // size
            return (total // size,), spec.dtype, \
                lambda block: block.as_strided(shape, strides, offset)
    torch = sys.modules["torch"]
    return (total,), torch.uint8, lambda block: _tensor_views(spec, block)


def _tensor_views(spec, block):
    if spec is None:
        return None
    if type(spec) is tuple:
        return tuple(_tensor_views(s, block) for s in spec)
    if type(spec) is _NamedResult:
        return spec.cls(*_tensor_views(spec.items, block))
    size = spec.dtype.itemsize
    return block.view(spec.dtype).as_strided(
        spec.shape, tuple(s // size for s in spec.strides), spec.offset // size)


def _c_strides(shape: tuple, size: int) -> tuple:
    strides, step = [], size
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _nbytes(spec: _ArraySpec) -> int:
    n = spec.dtype.itemsize
    for d in spec.shape:
        n *= d
    return n


def _result_spec(result, layout: _Layout):
    """What the result is made of: views of the one allocation, in tuples."""
    if result is None:
        return None
    if isinstance(result, tuple):
        items = tuple(_result_spec(r, layout) for r in result)
        return items if type(result) is tuple else _NamedResult(type(result), items)
    a = _device_array(result)
    if a is None or 0 in a.shape:
        raise _Flaw("a result that is not a device array view")
    source, offset = layout.locate(a.address, launched=False)
    if source == layout.block:
        return _ArraySpec(source, offset, a.shape, a.strides, a.dtype)
    if a == layout.inputs[source] and source in layout.launched:
        # an out= that the launches wrote (a write outside them refuses the recording:
        # views.refuse_replay_of_out_copy); of an array passed twice, the object that
        # was handed back (locate names the first)
        same = [i for i, o in enumerate(layout.objects) if o is result]
        return _InputResult(same[0] if same else source)
    raise _Flaw("a result that is neither a view of an allocation nor an argument that "
                "the launches wrote")


def _returns_inputs(spec) -> bool:
    if type(spec) is tuple:
        return any(map(_returns_inputs, spec))
    if type(spec) is _NamedResult:
        return _returns_inputs(spec.items)
    return type(spec) is _InputResult


class Program:
    """A recorded call, ready to replay on new arrays of the same signature.

    ``names``: the recorded steps, in order: each launch's kernel, ``"check"`` for a
    check (for messages and benches).
    """

    def __init__(self, kind: str, total: int, steps: list, result, names: tuple = ()):
        self.kind = kind
        self.total = total
        self.steps = steps
        self.result = result
        self.names = names
        self.lock = threading.Lock()  # the steps' parameter arrays are shared
        self.returns_inputs = _returns_inputs(result)
        self.tensor_result = _tensor_result(result, total) \
            if kind == "torch" and not self.returns_inputs else None

    def run(self, bases: list, objects: list = (), stream=None):
        """Replay on the call's array arguments at addresses ``bases`` (in order; as
        passed: ``objects``, which a result that is an argument returns), on the call's
        ``stream=`` (None: its kind's default)."""
        block, address = self._allocate()
        return self._launch([*bases, address], block, address,
                            _stream_of(self.kind) if stream is None else _given(stream),
                            objects)

    def replay(self, addresses: list, device: int, first):
        """Replay a call whose array arguments are at ``addresses`` (in order) on CUDA
        ``device`` (the current one: ``numbakern.runtime.tensor_table`` asked once);
        ``first``: the first array argument (a torch replay allocates through it)."""
        if SIMULATOR or (self.kind != "torch" and self.kind != "cupy"):
            return self.run(addresses)
        if self.kind == "cupy":
            cupy = sys.modules["cupy"]
            block = cupy.cuda.alloc(self.total)  # as _allocate and _stream_of, inline
            self._drive((*addresses, block.ptr), cupy.cuda.get_current_stream().ptr)
            return self._view(self.result, block, block.ptr)
        torch = sys.modules["torch"]
        shape, dtype, views = self.tensor_result
        # on the first tensor's device (the current one): new_empty parses no device;
        # a subclass's new_empty could return the subclass, the general path does not
        block = first.new_empty(shape, dtype=dtype) if type(first) is torch.Tensor else \
            torch.empty(shape, dtype=dtype, device=first.device)
        self._drive((*addresses, block.data_ptr()),
                    torch._C._cuda_getCurrentRawStream(device))
        return block if views is None else views(block)

    def _launch(self, bases: list, block, address: int, stream, objects):
        if SIMULATOR:
            from .simcost import guarded

            for step in self.steps:
                if type(step) is _Check:
                    _passes(step, bases, block, stream)
                    continue
                args = [_sim_arg(a, bases, block) for a in step.args]
                with guarded(step.kernel, step.grid, step.block, args):
                    step.kernel[step.grid, step.block, stream, step.shared](*args)
        else:
            self._drive(bases, stream)
        return self._view(self.result, block, address, objects)

    def _drive(self, bases, stream: int) -> None:
        """The recorded launches, each with the new addresses patched in."""
        with self.lock:
            for step in self.steps:
                if type(step) is _Check:
                    _passes(step, bases, None, stream)
                    continue
                values = step.values
                for slot, source, offset in step.patches:
                    values[slot] = bases[source] + offset
                driver_launch(step.function, step.grid, step.block, stream, step.pointers,
                              step.shared)

    def _allocate(self):
        """``(owner, address)`` of one allocation holding every temporary (none for a
        call that wrote only its ``out=``)."""
        if not self.total:
            return None, 0
        if SIMULATOR:
            block = np.empty(self.total, np.uint8)
            return block, block.__array_interface__["data"][0]
        if self.kind == "cupy":
            import cupy

            block = cupy.cuda.alloc(self.total)  # a pool MemoryPointer: 0.6 us, empty() 1.9
            return block, block.ptr
        if self.kind == "torch":  # torch's caching allocator, on its current stream
            torch = sys.modules["torch"]
            block = torch.empty(self.total, dtype=torch.uint8, device="cuda")
            return block, block.data_ptr()
        block = cuda.device_array(self.total, np.uint8)
        return block, block.__cuda_array_interface__["data"][0]

    def _view(self, spec, block, address: int, objects=()):
        if spec is None:
            return None
        if type(spec) is tuple:
            return tuple(self._view(s, block, address, objects) for s in spec)
        if type(spec) is _NamedResult:
            return spec.cls(*self._view(spec.items, block, address, objects))
        if type(spec) is _InputResult:
            written = objects[spec.index]
            if self.kind == "torch" and not written.is_inference():
                # as the translated call's own write does (api/_interop.py): autograd
                # must see that a tensor it saved has changed
                sys.modules["torch"].autograd.graph.increment_version(written)
            return written
        if SIMULATOR:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            return FakeCUDAArray(np.ndarray(spec.shape, spec.dtype, buffer=block,
                                            offset=spec.offset, strides=spec.strides))
        if self.kind == "cupy":
            import cupy

            return cupy.ndarray(spec.shape, spec.dtype, memptr=block + spec.offset,
                                strides=spec.strides)
        if self.kind == "torch":
            return _tensor_views(spec, block)
        return to_device_array(DeviceBuffer(address + spec.offset, spec.shape, spec.strides,
                                            spec.dtype, owner=block))


class _HostInterface:
    """A NumPy view of simulator memory at an address (it holds the memory's owner)."""

    def __init__(self, address, spec: _ArraySpec, owner):
        self.owner = owner
        self.__array_interface__ = {"data": (address, False), "shape": spec.shape,
                                    "strides": spec.strides, "typestr": spec.dtype.str,
                                    "version": 3}


def _sim_view(spec: _ArraySpec, bases: list, block):
    """A simulator array at a source's address (the caller holds the inputs)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    owner = block if spec.source == len(bases) - 1 else None
    return FakeCUDAArray(np.asarray(_HostInterface(bases[spec.source] + spec.offset, spec,
                                                   owner)))
