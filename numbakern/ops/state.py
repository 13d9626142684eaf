"""The accumulator state in device code: a tuple of ``N >= 1`` fields.

Strategies are written once for any op, so they never touch a field directly: they
call the device functions a :class:`StateKit` builds for one op and one set of field
dtypes:

* ``identity()`` and ``combine(a, b)`` on whole states;
* ``shfl_down(s, delta)``, ``shfl_up(s, delta)``, ``shfl_idx(s, src)``: a warp
  shuffle of every field (full mask), widened to the 32- or 64-bit types the
  hardware shuffles (bool and small integers to int32, float16 to float32, uint32 to
  int64, uint64 through int64 bit for bit);
* ``store(h0, h1, i, s)`` and ``load(h0, h1, i)``: a state to or from element ``i``
  of an *array of states*, the pair of handles ``(h0, h1)`` that only the kit reads:

  - one field: ``(array, anything)``: ``h1`` is left alone, so callers pass any
    small array there;
  - two fields: ``(array0, array1)``;
  - ``N >= 3`` fields: ``(tuple of the N arrays, the first array)``.

  Shared-memory temp storage, local arrays, partials and outputs are all such pairs;
  kernels and strategies pass them through without looking inside, so one- and
  two-field states compile to exactly the code they did before ``N`` fields existed
  (no tuple of arrays, no extra load, store or shuffle). :meth:`StateKit.pack` and
  :meth:`StateKit.unpack` convert between the pair and the tuple of ``N`` arrays on
  the host; ``shared_temp(slots)`` and ``local_temp(slots)`` build the device
  functions that allocate a pair of ``slots`` states;
* ``to_state(value, index)``: one input element as a state, the only way any kernel
  turns an element into a state (``op.map(value, index)``, each field cast to its
  dtype; a one-field op without a map: the value cast to the accumulator dtype), so
  every path reads its input by the op's one rule. A kit built with ``read`` (a
  device function) applies it to the stored element first: bfloat16 inputs are
  stored as their uint16 bits, and ``read`` widens them to the float32 they mean.

One- and two-field functions are written out below. For ``N >= 3`` the device
functions are made from source text (:func:`device_from_source`, the one place that
does): Numba compiles neither ``*args`` nor loops over a tuple of mixed types, so each
field's line is written out for the ``N`` at hand.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numba
import numpy as np
from numba import cuda, from_dtype

from numbakern.ops import Op, identity_field
from numbakern.runtime.cache import cached
from numbakern.runtime.device import FULL_MASK, SIMULATOR


def shuffle_dtype(dtype: np.dtype) -> np.dtype:
    """The 32/64-bit dtype a value of ``dtype`` travels as through a shuffle."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.dtype(np.float64 if dtype.itemsize == 8 else np.float32)
    if dtype.itemsize == 8 or dtype == np.uint32:
        return np.dtype(np.int64)
    return np.dtype(np.int32)


def _field_shuffles(dtype: np.dtype):
    """Device functions shuffling one field of ``dtype`` with widening."""
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
    read: Callable | None = None  # state_kit's: applied to each element first

    @property
    def fields(self) -> int:
        return len(self.dtypes)

    def pack(self, arrays) -> tuple:
        """The ``(h0, h1)`` handles of an array of states (the module docstring) from
        one array per field."""
        arrays = tuple(arrays)
        if len(arrays) != self.fields:
            raise ValueError(f"{self.fields} field arrays expected, got {len(arrays)}")
        if self.fields == 1:
            return arrays[0], arrays[0]
        if self.fields == 2:
            return arrays
        return arrays, arrays[0]

    def unpack(self, handles) -> tuple:
        """One array per field from the ``(h0, h1)`` handles :meth:`pack` made."""
        if self.fields == 1:
            return (handles[0],)
        if self.fields == 2:
            return tuple(handles)
        return tuple(handles[0])

    def shared_temp(self, slots: int) -> Callable:
        """Device function ``temp() -> (h0, h1)``: ``slots`` states of shared memory
        (a one-field state's ``h1`` a 1-slot dummy), the temp storage of a block
        strategy. Each call of this method builds a new function, so two storages of
        one kernel never alias (one function called twice gives the same memory)."""
        return _storage(self.dtypes, slots, "shared")

    def local_temp(self, slots: int) -> Callable:
        """Device function ``temp() -> (h0, h1)``: ``slots`` states of a thread's
        local memory (``cuda.local.array``)."""
        return _storage(self.dtypes, slots, "local")


def local_storage(dtypes: tuple, slots: int) -> Callable:
    """Device function ``temp() -> (h0, h1)``: ``slots`` elements of each of ``dtypes``
    in a thread's local memory, as :meth:`StateKit.local_temp` makes a state's (a
    tile's items held as inputs rather than states)."""
    return _storage(tuple(dtypes), slots, "local")


_SOURCES = itertools.count()


def device_from_source(name: str, source: str, env: dict, inline: bool = False) -> Callable:
    """``cuda.jit(device=True)`` of the function ``name`` defined by ``source``, its
    globals ``env`` (with ``cuda``). Each source gets its own file name: the
    simulator keys a static shared array by the (file, line) that asks for it, so
    two storages made here must never share one. ``inline``: inlined into its caller
    at the Numba IR level (``inline="always"``, a no-op under the simulator)."""
    filename = f"<numbakern.ops.state:{name}:{next(_SOURCES)}>"
    namespace = {"cuda": cuda, **env}
    exec(compile(source, filename, "exec"), namespace)
    if inline and not SIMULATOR:
        return cuda.jit(device=True, inline="always")(namespace[name])
    return cuda.jit(device=True)(namespace[name])


def fields_source(template: str, n: int, sep: str = ", ") -> str:
    """``template`` with ``{k}`` for each field ``k``, joined: the body of an
    ``N``-field tuple."""
    return sep.join(template.format(k=k) for k in range(n))


def _storage(dtypes: tuple, slots: int, space: str) -> Callable:
    """Device function ``temp() -> (h0, h1)`` allocating ``slots`` states in
    ``space`` ("shared" or "local"), one array per field, each on its own line."""
    n = len(dtypes)
    env = _casts(dtypes)
    lines = [f"    a{k} = cuda.{space}.array({slots}, t{k})" for k in range(n)]
    if n == 1:
        lines.append(f"    b0 = cuda.{space}.array(1, t0)")
        result = "a0, b0"
    elif n == 2:
        result = "a0, a1"
    else:
        result = f"({fields_source('a{k}', n)}), a0"
    source = "def temp():\n" + "\n".join(lines) + f"\n    return {result}\n"
    # A local array lives in its function's stack frame: inlined at the IR level, the
    # allocation is the kernel's own, and the arrays outlive the call.
    return device_from_source("temp", source, env, inline=space == "local")


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
    return tuple(identity_field(op.name, v, dt) for v, dt in zip(values, dtypes))


def build_kit(op: Op, dtypes: tuple[np.dtype, ...], read=None) -> StateKit:
    """Build the device functions for ``op``'s state with field ``dtypes``; ``read``:
    as :func:`state_kit`'s."""
    dtypes = tuple(np.dtype(d) for d in dtypes)
    if len(dtypes) != op.fields:
        raise ValueError(f"Op {op.name!r} has {op.fields} field(s), got dtypes {dtypes}")
    values = _identity_values(op, dtypes)
    _check_compiles(op, dtypes)
    f = op.device_combine()
    maker = {1: _one_field, 2: _two_fields}.get(len(dtypes), _n_fields)
    return StateKit(dtypes, *maker(f, dtypes, values),
                    to_state=_element_to_state(op, dtypes, read), identity_values=values,
                    read=read)


def _check_compiles(op: Op, dtypes: tuple) -> None:
    """A user's combine (and finish) compiled in Numba's nopython mode (on the CPU, once
    a kit) for these field dtypes, and its results counted: the simulator runs any
    Python, so without this an op that a GPU cannot compile would pass on a laptop; on
    a GPU, a combine returning the wrong number of fields would fail the kernel's
    compile deep inside numbakern's device functions, naming no op. A combine the CPU
    cannot compile (CUDA's intrinsics) is compiled for the device where there is one.

    Raises:
        TypeError: naming the op, the function and the field dtypes, with Numba's
            first line of the reason; or the NumPy ufuncs it calls that Numba's CUDA
            target cannot lower (``np.exp``, ``np.sqrt``: ``math.exp`` can).
    """
    if (getattr(op.combine, "__module__", None) or "").startswith("numbakern"):
        return
    types = tuple(from_dtype(d) for d in dtypes)
    if op.map is not None:
        _check_map(op, types[0])
    checks = [("combine", op.combine, types + types)]
    if op.finish is not None:
        checks.append(("finish", op.finish, types))
    for what, fn, signature in checks:
        # without Numba's runtime, as CUDA device code runs: a dict or list built
        # inside compiles on the CPU only
        try:  # (Numba's TypeError: a builtin, or *args taking no fixed signature)
            compiled = numba.njit(fn, _nrt=False)
            compiled.compile(signature)
        except (numba.core.errors.NumbaError, TypeError) as error:
            if not SIMULATOR and _compiles_for_the_device(fn, signature):
                continue  # CUDA's intrinsics are not the CPU's
            _check_with_runtime(op, what, fn, signature)
            raise _not_compiling(op, what, dtypes, error) from None
        _check_compiled(op, what, compiled.overloads[signature])


def _check_with_runtime(op: Op, what: str, fn, signature) -> bool:
    """Whether ``fn``, which does not compile without Numba's runtime, compiles with
    it; if so, what it returns is checked first (a list or a string it returns is
    named as such, not as a missing runtime)."""
    try:
        compiled = numba.njit(fn)
        compiled.compile(signature)
    except (numba.core.errors.NumbaError, TypeError):
        return False
    _check_compiled(op, what, compiled.overloads[signature])
    return True


def _compiles_for_the_device(fn, signature) -> bool:
    try:  # (numba-cuda's ValueError: a builtin, which has no signature to compile)
        cuda.compile_ptx_for_current_device(fn, signature, device=True)
    except (numba.core.errors.NumbaError, TypeError, ValueError):
        return False
    return True


def _not_compiling(op: Op, what: str, dtypes: tuple, error: Exception) -> TypeError:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    reason = next((line for line in lines if not line.startswith("Failed in nopython")),
                  lines[0] if lines else "")
    return TypeError(f"Op {op.name!r}: its {what} does not compile in Numba's nopython "
                     f"mode for field dtypes {tuple(str(d) for d in dtypes)}, so no GPU can "
                     f"run it (device code takes numbers, tuples and the math module; no "
                     f"lists, dicts or other Python objects): {reason}")


def _check_compiled(op: Op, what: str, result) -> None:
    """What the CPU compile of a user's ``what`` (combine, map or finish: Numba's
    compile ``result``) says of it on a GPU: its NumPy ufuncs and, but for a finish,
    what it returns."""
    _check_ufuncs(op, what, result.type_annotation.typemap)
    if what != "finish":
        _check_returns(op, result.signature.return_type, what)


def _check_ufuncs(op: Op, what: str, typemap: dict) -> None:
    """The NumPy ufuncs a function calls all have a lowering in Numba's CUDA target
    (its ``ufunc_db``: ``np.exp`` and ``np.sqrt``, which the CPU compiles, have none, and
    a device compile fails on them with a bare ``KeyError``)."""
    from numba.cuda.ufuncs import ufunc_db

    called = {t.typing_key for t in typemap.values() if isinstance(t, numba.types.Function)}
    missing = sorted(u.__name__ for u in called if isinstance(u, np.ufunc)
                     and u not in ufunc_db())
    if missing:
        instead = (f"math.{missing[0]}" if hasattr(math, missing[0]) else "an operator or "
                   "the math module's function")
        raise TypeError(f"Op {op.name!r}: its {what} calls NumPy's "
                        f"{', '.join('np.' + m for m in missing)}, which Numba's CUDA target "
                        f"cannot compile in device code: use {instead} instead")


def _check_map(op: Op, element) -> None:
    """A user's map returns a state: compiled for an element of the first field's type
    (``element``, standing in for the input's dtype, which the kit does not know), its
    result is checked as a combine's. A map that compiles only for its real input
    dtype is left to the kernel's own compile."""
    signature = (element, numba.types.int64)
    compiled = numba.njit(op.map, _nrt=False)
    try:
        compiled.compile(signature)
    except numba.core.errors.NumbaError as error:
        if _check_with_runtime(op, "map", op.map, signature):
            raise _not_compiling(op, "map", (element,), error) from None
        return
    _check_compiled(op, "map", compiled.overloads[signature])


def _check_returns(op: Op, returned, what: str = "combine") -> None:
    """A combine (or map) returns one number for one field, an ``N``-tuple of numbers for
    ``N`` (else the kernels would fail deep inside, naming no op, or fill NaN for
    None; a string or a list, which CPU Numba compiles, fails in a simulated thread)."""
    count = len(returned) if isinstance(returned, numba.types.BaseTuple) else None
    nothing = isinstance(returned, (numba.types.NoneType, numba.types.Omitted))
    if nothing or (op.fields == 1) != (count is None) or \
            (count is not None and count != op.fields):
        want = "a single value" if op.fields == 1 else f"a tuple of {op.fields} values"
        said = ("nothing (it returns None, or raises on every path Numba compiles)"
                if nothing else returned)
        raise TypeError(f"Op {op.name!r}: its {what} returns {said}; a state of "
                        f"{op.fields} field(s) needs {want}")
    fields = returned.types if count is not None else (returned,)
    odd = [t for t in fields if not isinstance(t, (numba.types.Number, numba.types.Boolean))]
    if odd:
        raise TypeError(f"Op {op.name!r}: its {what} returns {returned}; a state's fields "
                        f"are numbers (ints, floats or bools), not {odd[0]}")


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
    if op.fields > 2:
        env = {"f": op.device_map(), **_casts(dtypes)}
        source = ("def to_state(v, i):\n    s = f(v, i)\n"
                  f"    return ({fields_source('t{k}(s[{k}])', len(dtypes))},)\n")
        return device_from_source("to_state", source, env)
    t1 = from_dtype(dtypes[1])
    f = op.device_map()

    @cuda.jit(device=True)
    def to_state(v, i):
        s = f(v, i)
        return (t0(s[0]), t1(s[1]))

    return to_state


def _casts(dtypes) -> dict:
    """``{"t0": numba type of field 0, ...}``: the casts generated source calls."""
    return {f"t{k}": from_dtype(d) for k, d in enumerate(dtypes)}


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


def _n_fields(f, dtypes, values):
    """The kit's functions for ``N >= 3`` fields, from source (:func:`n_field_sources`)."""
    env = {"f": f, **_casts(dtypes)}
    for k, d in enumerate(dtypes):
        env[f"i{k}"] = values[k]
        env[f"down{k}"], env[f"up{k}"], env[f"idx{k}"] = _field_shuffles(d)
    return tuple(device_from_source(name, source, env)
                 for name, source in n_field_sources(len(dtypes)).items())


def n_field_sources(n: int) -> dict:
    """``{name: source}`` of the kit's functions for ``n`` fields, in
    :class:`StateKit`'s order: each is the two-field function with one line (or term)
    per field. Their globals: ``f`` (the op's combine), ``t<k>`` (field ``k``'s
    cast), ``i<k>`` (its identity value), ``down<k>``/``up<k>``/``idx<k>`` (its
    shuffles); the tests compile them with ``numba.njit`` too."""
    every = functools.partial(fields_source, n=n)
    return {
        "identity": f"def identity():\n    return ({every('i{k}')},)\n",
        "combine": (f"def combine(a, b):\n"
                    f"    c = f({every('a[{k}]')}, {every('b[{k}]')})\n"
                    f"    return ({every('t{k}(c[{k}])')},)\n"),
        "shfl_down": (f"def shfl_down(s, delta):\n"
                      f"    return ({every('down{k}(s[{k}], delta)')},)\n"),
        "shfl_up": f"def shfl_up(s, delta):\n    return ({every('up{k}(s[{k}], delta)')},)\n",
        "shfl_idx": f"def shfl_idx(s, src):\n    return ({every('idx{k}(s[{k}], src)')},)\n",
        # h0 is the tuple of the N arrays; h1 (its first array) is left alone
        "store": "def store(h0, h1, i, s):\n" + every("    h0[{k}][i] = s[{k}]", sep="\n") + "\n",
        "load": f"def load(h0, h1, i):\n    return ({every('t{k}(h0[{k}][i])')},)\n",
    }


def constant_state(values: tuple):
    """Device function ``state() -> values``: a constant state (any number of fields)."""
    if len(values) > 2:
        env = {f"v{k}": v for k, v in enumerate(values)}
        source = f"def state():\n    return ({fields_source('v{k}', len(values))},)\n"
        return device_from_source("state", source, env)
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


@functools.lru_cache(maxsize=None)
def rows_of(n: int) -> Callable:
    """Device function ``rows(h0, h1, a, b) -> (r0, r1)``: row ``(a, b)`` of the 3-D
    arrays of ``n`` fields the handles ``(h0, h1)`` stand for (two plain arrays for
    ``n <= 2``; the handles of a scan's outputs, totals and carries), as handles of
    1-D arrays."""
    if n <= 2:

        @cuda.jit(device=True)
        def rows(h0, h1, a, b):
            return h0[a, b], h1[a, b]

        return rows
    source = (f"def rows(h0, h1, a, b):\n    r0 = h0[0][a, b]\n"
              f"    return ({fields_source('h0[{k}][a, b]', n)}), r0\n")
    return device_from_source("rows", source, {})
