"""A repeated call on one CuPy array or CUDA tensor, replayed from its type and layout.

Why
---
A replayable call (:mod:`numbakern.runtime.replay`) is keyed argument by argument:
each value by its type, each array by what ``replay`` reads of it whatever its
library, the device asked of torch or CuPy, and a public function's ``dispatch``
first asks of every argument whether it needs translating. For a tensor that is
~60 Python function calls and two device queries before the first launch: on the
H200 host a replayed sum of 2^10 elements cost 29 us against torch's own 19.5.

The common repeated call has an array first, plain values (``axis=1``,
``keepdims=True``) and perhaps more arrays of the first one's type (a backward
pass's ``dy``, a loss's targets) for the rest. Such a call is keyed here from the
arrays' type alone: a dict of type -> reader, learnt the first time a type is seen
(no ``isinstance`` chains, no attribute probing, no import of torch or CuPy unless
the caller passed one of their objects), the reader returning an array's dtype,
shape, strides, address alignment and the current device (one query: it must be
the tensor's own). The key maps to the recorded :class:`~replay.Program` itself,
which replays with one allocation (in the result's dtype where it can) on the
caller's current stream.

The first call of a key (and any call that is not such a call: arrays of another
type, an ``out=``, a tuple ``axis``, a value of another type, a CPU tensor, a tensor
on another device than the current one, one array passed twice, a recording in
progress) runs the general path, whose program, once it has one, is entered here
under the key, as is its refusal (a call that reads its results on the host), whose
later calls then run the function itself without keying the call again.

Keys are at least as specific as the general path's (which they stand for): the
array's layout and alignment, the device, every positional and keyword value with
its type (``1``, ``1.0`` and ``True`` are equal in a dict but not to the checks),
the keywords' names and order.
"""

from __future__ import annotations

import sys

from .device import SIMULATOR
from .memo import value_tag
from .replay import ADDRESS_KEY, MAX_SIGNATURES, Refused, Unpassed, counts, ready, register

# Arguments besides the array that a key holds by value (with their types).
_VALUES = frozenset({int, float, bool, str, type(None)})
_UNLEARNT = object()
# type -> reader (or None: the type is never keyed here), learnt as calls see types
_READERS: dict = {}
_torch_C = None  # torch._C, once a tensor has been seen


def _torch_reader(x):
    """``(layout key, address, device)`` of a CUDA tensor on the current device;
    None for a CPU tensor, one on another device (the general path refuses it) or a
    negated view (the general path copies it)."""
    device = x.get_device()
    if device < 0 or _torch_C._cuda_getDevice() != device or x.is_neg():
        return None
    address = x.data_ptr()
    return (x.dtype, x.shape, x.stride(), address % ADDRESS_KEY, device), address, device


def _cupy_reader(x):
    """A CuPy array's key on the current device (as the general path's, which reads
    no device of the array's own)."""
    address = x.data.ptr
    device = sys.modules["cupy"].cuda.runtime.getDevice()
    return (x.dtype, x.shape, x.strides, address % ADDRESS_KEY, device), address, device


def _simulator_reader(x):
    """A Numba simulator array (the simulator has one device)."""
    ary = x._ary
    address = ary.ctypes.data
    return (ary.dtype, ary.shape, ary.strides, address % ADDRESS_KEY), address, 0


_torch_reader.kind = "torch"
_cupy_reader.kind = "cupy"
_simulator_reader.kind = "sim"


def reader_of(t: type):
    """The reader of values of type ``t``, or None (learnt once per type)."""
    reader = _READERS.get(t, _UNLEARNT)
    if reader is _UNLEARNT:
        reader = _READERS.setdefault(t, _learn(t))
    return reader


def _learn(t: type):
    global _torch_C
    library = t.__module__.partition(".")[0]
    if library == "torch":  # torch is imported: the caller holds one of its objects
        torch = sys.modules["torch"]
        if issubclass(t, torch.Tensor):
            _torch_C = torch._C
            return _torch_reader
    elif library == "cupy" and not SIMULATOR:  # simulator memory is never CuPy's
        if issubclass(t, sys.modules["cupy"].ndarray):
            return _cupy_reader
    elif library == "numba" and SIMULATOR:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        if issubclass(t, FakeCUDAArray):
            return _simulator_reader
    return None


def _rest_key(args: tuple, kwargs: dict, reader, addresses: list):
    """The other arguments' key, or None when one is neither a plain value nor an array
    that ``reader`` (the first array's) reads on the current device; appends the
    arrays' addresses to ``addresses``, in order."""
    key = []
    for v in (*args, *kwargs.values()):
        t = type(v)
        if t in _VALUES:
            if t is str and v == "bfloat16":  # NumPy's name of a dtype that the public
                return None  # function's dispatch translates: the general path's
            key.append((value_tag(v), v) if t is float else (t, v))
        elif reader_of(t) is reader:
            found = reader(v)
            if found is None:
                return None
            key.append(found[0])
            addresses.append(found[1])
        else:
            return None
    return tuple(key), tuple(kwargs)


def tabled(general, replayables: dict):
    """``general`` (a public function's call) behind a table of recorded calls of
    arrays of one type; ``replayables``: array kind -> the replayable call whose
    programs the table holds (its ``resolve``), for the kinds of :func:`reader_of`'s
    readers.

    The wrapper's ``tensor_replay_table`` maps keys (this module's docstring) to
    :class:`~numbakern.runtime.replay.Program` or
    :class:`~numbakern.runtime.replay.Refused`.
    """
    table: dict = register({})

    def call(x, *args, **kwargs):
        reader = _READERS.get(type(x), _UNLEARNT)
        if reader is _UNLEARNT:
            reader = reader_of(type(x))
        if reader is None or not ready():
            return general(x, *args, **kwargs)
        try:
            found = reader(x)
        except (AttributeError, RuntimeError):  # no strides (a sparse tensor), say
            found = None
        if found is None:
            return general(x, *args, **kwargs)
        layout, address, device = found
        addresses = [address]
        if args or kwargs:
            try:
                rest = _rest_key(args, kwargs, reader, addresses)
            except (AttributeError, RuntimeError):
                rest = None
            if rest is None or len(set(addresses)) < len(addresses):
                # an array passed twice: the general path keys which ones (replay)
                return general(x, *args, **kwargs)
            key = (type(x), layout, rest)
        else:
            key = (type(x), layout)
        program = table.get(key)
        if program is None:
            return _first(table, key, replayables[reader.kind], x, args, kwargs)
        if type(program) is Refused:  # straight to the call: no second key to build
            return replayables[reader.kind].__wrapped__(x, *args, **kwargs)
        try:
            result = program.replay(addresses, device, x)
        except Unpassed:  # a check's words failed: the call's own path raises or warns
            return replayables[reader.kind].__wrapped__(x, *args, **kwargs)
        counts["replayed"] += 1
        return result

    call.tensor_replay_table = table
    return call


def _first(table: dict, key, replayable, x, args: tuple, kwargs: dict):
    """A key's first call: through the general path, its program (if any) kept (not
    one whose result is its argument: that replay needs the general path's check that
    the arguments are apart, and the caller's object), or its refusal: a refused
    signature's later calls run ``replayable``'s function itself, whose own launches
    may replay (nanmax's reads its all-NaN flags after replayed launches)."""
    result, program = replayable.resolve((x, *args), kwargs)
    if type(program) is Refused or program is not None and not program.returns_inputs:
        if len(table) >= MAX_SIGNATURES:
            table.clear()
        table[key] = program
    return result
