"""The accumulator state in device code: a tuple of one or two fields.

Strategies are written once for any op, so they never touch a field directly: they
call the device functions a :class:`StateKit` builds for one op and one set of field
dtypes:

* ``identity()`` and ``combine(a, b)`` on whole states;
* ``shfl_down(s, delta)``, ``shfl_up(s, delta)``, ``shfl_idx(s, src)``: a warp
  shuffle of every field (full mask), widened to the 32- or 64-bit types the
  hardware shuffles (bool and small integers to int32, float16 to float32, uint32 to
  int64, uint64 through int64 bit for bit);
* ``store(a0, a1, i, s)`` and ``load(a0, a1, i)``: a state to or from element ``i``
  of a pair of arrays, one per field (shared-memory temp storage, partials, outputs).
  One-field states leave ``a1`` alone, so callers pass any small array there;
* ``to_state(value, index)``: one input element as a state, the only way any kernel
  turns an element into a state (``op.map(value, index)``, each field cast to its
  dtype; a one-field op without a map: the value cast to the accumulator dtype), so
  every path reads its input by the op's one rule. A kit built with ``read`` (a
  device function) applies it to the stored element first: bfloat16 inputs are
  stored as their uint16 bits, and ``read`` widens them to the float32 they mean.

Which function of each pair is used is decided here, in Python, from the number of
fields: Numba compiles only the one chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numba import cuda, from_dtype

from numbakern.ops import Op
from numbakern.runtime.cache import cached
from numbakern.runtime.device import FULL_MASK


def shuffle_dtype(dtype: np.dtype) -> np.dtype:
    """The 32/64-bit dtype a value of ``dtype`` travels as through a shuffle."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.dtype(np.float64 if dtype.itemsize == 8 else np.float32)
    if dtype.itemsize == 8 or dtype == np.uint32:
        return np.dtype(np.int64)
    return np.dtype(np.int32)


def _field_shuffles(dtype: np.dtype):
    """Device functions shuffling one field of ``dtype`` with widening (a complex128
    field, two floats held as one, as its two float64 halves)."""
    if np.dtype(dtype) == np.complex128:
        return _complex_shuffles()
    wide = from_dtype(shuffle_dtype(dtype))
    back = from_dtype(np.dtype(dtype))

    @cuda.jit(device=True)
    def down(v, delta):
        return back(cuda.shfl_down_sync(FULL_MASK, wide(v), delta))

    @cuda.jit(device=True)
    def up(v, delta):
        return back(cuda.shfl_up_sync(FULL_MASK, wide(v), delta))

    @cuda.jit(device=True)
    def idx(v, src):
        return back(cuda.shfl_sync(FULL_MASK, wide(v), src))

    return down, up, idx


def _complex_shuffles():
    @cuda.jit(device=True)
    def down(v, delta):
        return complex(cuda.shfl_down_sync(FULL_MASK, v.real, delta),
                       cuda.shfl_down_sync(FULL_MASK, v.imag, delta))

    @cuda.jit(device=True)
    def up(v, delta):
        return complex(cuda.shfl_up_sync(FULL_MASK, v.real, delta),
                       cuda.shfl_up_sync(FULL_MASK, v.imag, delta))

    @cuda.jit(device=True)
    def idx(v, src):
        return complex(cuda.shfl_sync(FULL_MASK, v.real, src),
                       cuda.shfl_sync(FULL_MASK, v.imag, src))

    return down, up, idx


@dataclass(frozen=True, eq=False)
class StateKit:
    """Device functions for one op's state with the given field dtypes (one kit per op
    and dtypes, :func:`state_kit`: kits compare and hash by identity, so kernels built
    from a kit are cached on it)."""

    dtypes: tuple[np.dtype, ...]
    identity: Callable
    combine: Callable
    shfl_down: Callable
    shfl_up: Callable
    shfl_idx: Callable
    store: Callable
    load: Callable
    to_state: Callable
    identity_values: tuple[Any, ...]

    @property
    def fields(self) -> int:
        return len(self.dtypes)

    @property
    def temp_dtypes(self) -> tuple:
        """Numba dtypes of a pair of temp-storage arrays (the second, for one-field
        states, is a 1-slot dummy of the first field's type)."""
        return from_dtype(self.dtypes[0]), from_dtype(self.dtypes[-1])


def _identity_values(op: Op, dtypes: tuple[np.dtype, ...]) -> tuple[Any, ...]:
    """The identity's fields in ``dtypes``.

    Raises:
        ValueError: it gives another number of fields, or a value a field's dtype
            cannot hold (``identity=np.inf`` for an integer input: use a function of
            the dtype, as the built-in max does).
    """
    try:
        raw = op.identity(dtypes[0]) if len(dtypes) == 1 else op.identity(dtypes)
    except (OverflowError, ValueError) as error:
        raise ValueError(f"Op {op.name!r}: identity cannot be made in dtype "
                         f"{dtypes if len(dtypes) > 1 else dtypes[0]}: {error}") from None
    values = raw if isinstance(raw, tuple) else (raw,)
    if len(values) != len(dtypes):
        raise ValueError(f"Op {op.name!r}: identity gives {len(values)} fields, "
                         f"the op has {len(dtypes)}")
    out = []
    for v, dt in zip(values, dtypes):
        with np.errstate(invalid="ignore", over="ignore"):
            cast = np.asarray(v).astype(dt)[()]
        if not (cast == v or (cast != cast and v != v)):
            raise ValueError(f"Op {op.name!r}: identity {v!r} is not a value of dtype {dt} "
                             "(give identity as a function of the dtype)")
        out.append(cast)
    return tuple(out)


def build_kit(op: Op, dtypes: tuple[np.dtype, ...], read=None) -> StateKit:
    """Build the device functions for ``op``'s state with field ``dtypes``; ``read``:
    as :func:`state_kit`'s."""
    dtypes = tuple(np.dtype(d) for d in dtypes)
    if len(dtypes) != op.fields:
        raise ValueError(f"Op {op.name!r} has {op.fields} field(s), got dtypes {dtypes}")
    values = _identity_values(op, dtypes)
    f = op.device_combine()
    maker = _one_field if len(dtypes) == 1 else _two_fields
    return StateKit(dtypes, *maker(f, dtypes, values),
                    to_state=_element_to_state(op, dtypes, read), identity_values=values)


def state_kit(op: Op, dtypes: tuple, read=None) -> StateKit:
    """The op's device functions for these field dtypes (built once, then cached).

    ``read``: None, or a device function turning each stored input element into the
    value the op maps (``numbakern.kernels.bfloat16.widen`` for bfloat16 stored as
    its bits); it is part of the kit's identity, so kernels built on the kit are
    never shared with a kit that reads elements as they are."""
    key = ("kit", op, tuple(np.dtype(d).str for d in dtypes), read)
    return cached(key, lambda: build_kit(op, dtypes, read))


def _element_to_state(op: Op, dtypes: tuple, read=None):
    """Device function ``to_state(value, index) -> state`` (the module docstring)."""
    plain = _mapped_to_state(op, dtypes)
    if read is None:
        return plain

    @cuda.jit(device=True)
    def to_state(v, i):
        return plain(read(v), i)

    return to_state


def _mapped_to_state(op: Op, dtypes: tuple):
    """``to_state`` of an element read as it is stored."""
    t0 = from_dtype(dtypes[0])
    if op.fields == 1 and op.map is None:

        @cuda.jit(device=True)
        def to_state(v, i):
            return (t0(v),)

        return to_state
    if op.fields == 1:
        g = op.device_map()

        @cuda.jit(device=True)
        def to_state(v, i):
            return (t0(g(v, i)),)

        return to_state
    t1 = from_dtype(dtypes[1])
    f = op.device_map()

    @cuda.jit(device=True)
    def to_state(v, i):
        s = f(v, i)
        return (t0(s[0]), t1(s[1]))

    return to_state


def _one_field(f, dtypes, values):
    i0 = values[0]
    down0, up0, idx0 = _field_shuffles(dtypes[0])
    t0 = from_dtype(dtypes[0])

    @cuda.jit(device=True)
    def identity():
        return (i0,)

    @cuda.jit(device=True)
    def combine(a, b):
        return (t0(f(a[0], b[0])),)

    @cuda.jit(device=True)
    def shfl_down(s, delta):
        return (down0(s[0], delta),)

    @cuda.jit(device=True)
    def shfl_up(s, delta):
        return (up0(s[0], delta),)

    @cuda.jit(device=True)
    def shfl_idx(s, src):
        return (idx0(s[0], src),)

    @cuda.jit(device=True)
    def store(a0, a1, i, s):
        a0[i] = s[0]

    @cuda.jit(device=True)
    def load(a0, a1, i):
        return (t0(a0[i]),)

    return identity, combine, shfl_down, shfl_up, shfl_idx, store, load


def _two_fields(f, dtypes, values):
    i0, i1 = values
    down0, up0, idx0 = _field_shuffles(dtypes[0])
    down1, up1, idx1 = _field_shuffles(dtypes[1])
    t0, t1 = from_dtype(dtypes[0]), from_dtype(dtypes[1])

    @cuda.jit(device=True)
    def identity():
        return (i0, i1)

    @cuda.jit(device=True)
    def combine(a, b):
        c = f(a[0], a[1], b[0], b[1])
        return (t0(c[0]), t1(c[1]))

    @cuda.jit(device=True)
    def shfl_down(s, delta):
        return (down0(s[0], delta), down1(s[1], delta))

    @cuda.jit(device=True)
    def shfl_up(s, delta):
        return (up0(s[0], delta), up1(s[1], delta))

    @cuda.jit(device=True)
    def shfl_idx(s, src):
        return (idx0(s[0], src), idx1(s[1], src))

    @cuda.jit(device=True)
    def store(a0, a1, i, s):
        a0[i] = s[0]
        a1[i] = s[1]

    @cuda.jit(device=True)
    def load(a0, a1, i):
        return (t0(a0[i]), t1(a1[i]))

    return identity, combine, shfl_down, shfl_up, shfl_idx, store, load


def constant_state(values: tuple):
    """Device function ``state() -> values``: a constant state (one or two fields)."""
    if len(values) == 1:
        v0 = values[0]

        @cuda.jit(device=True)
        def state():
            return (v0,)

        return state
    v0, v1 = values

    @cuda.jit(device=True)
    def state():
        return (v0, v1)

    return state
