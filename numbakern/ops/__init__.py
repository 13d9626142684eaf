"""Operators as data: an associative combine, its identity, its dtypes, its atomic.

An :class:`Op` is everything a strategy needs to know about *what* is combined, so
that the strategy only decides *how* threads combine (the split CuPy's reduction
kernels make: identity, map, reduce, post-map, accumulator type).

The accumulator **state** of an op is a tuple of ``N >= 1`` fields: one for sum,
max and the rest, two for a value-index pair (argmax) or the online-softmax
(running max, running scaled sum), three for Welford's (count, mean, M2) of var.
Strategies move whole states through registers, shuffles and shared memory, and only
ever combine them with :attr:`Op.combine`.
"""

from __future__ import annotations

import dis
import functools
import inspect
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from numba import float64, int64

INTEGER_KINDS = "biu"
ALL_KINDS = "biuf"
#: the ``numba.cuda.atomic`` functions an op may name as its native fold: those that
#: ``strategies/atomic_fold.py`` folds with natively (its ``_NATIVE``)
ATOMICS = ("add", "max", "min", "and_", "or_", "xor")


def _float_identity(value: float) -> Callable[[np.dtype], Any]:
    """Identity for floats, the extreme integer (or bool) value for the others."""

    def identity(dtype: np.dtype) -> Any:
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            return dtype.type(value)
        if dtype.kind == "b":
            return np.bool_(value > 0)
        info = np.iinfo(dtype)
        return dtype.type(info.max if value > 0 else info.min)

    return identity


def _check_identity(name: str, value: Any) -> None:
    """A constant identity must be a number (bool, int, float) or a tuple of them."""
    values = value if isinstance(value, tuple) else (value,)
    if not all(np.asarray(v).dtype.kind in "biuf" and np.ndim(v) == 0 for v in values):
        raise TypeError(f"Op {name!r}: identity must be a number, a tuple of numbers or a "
                        f"function of the dtype, got {value!r}")


@dataclass(frozen=True)
class _constant_identity:
    """A constant identity, a number or a tuple of numbers (one per field), as a
    function of the field dtypes (one dtype, or a tuple of them). A class, not a
    closure, so that an op holding it pickles; ``constant`` is what
    :func:`field_dtypes` reads the fields' kinds from."""

    constant: Any

    def __call__(self, dtypes):
        # as given: casting here would hide a value a dtype cannot hold from
        # identity_field's check (2.5 for integers would become 2)
        return self.constant


# NumPy's ufunc behind each op of another name, as its error messages call it
_UFUNC_NAMES = {"max": "maximum", "min": "minimum", "nanmax": "fmax", "nanmin": "fmin",
                "nanargmax": "fmax", "nanargmin": "fmin"}


def ufunc_name(op_name: str) -> str:
    """The NumPy ufunc's name that NumPy's messages give for the op ``op_name``."""
    return _UFUNC_NAMES.get(op_name, op_name)


def identity_field(name: str, value: Any, dtype: np.dtype) -> Any:
    """``value``, an identity's field, as a scalar of ``dtype``; ``ValueError`` naming
    op ``name`` when the dtype cannot hold it exactly (``identity=np.inf`` or ``2.5``
    for an integer field, ``1e300`` for float32: give a function of the dtype, as the
    built-in max does)."""
    if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        # (a function's value: a constant identity is checked when the op is made)
        raise TypeError(f"Op {name!r}: identity must be a number (or a tuple of numbers, "
                        f"one a field), got {value!r} for dtype {dtype}")
    with np.errstate(invalid="ignore", over="ignore"):
        cast = np.asarray(value).astype(dtype)[()]
    # compared as Python numbers: NumPy would compare 1e300 with float32's inf in
    # float32, where the two are equal
    if not (cast.item() == value or (cast != cast and value != value)):
        raise ValueError(f"Op {name!r}: identity {value!r} is not a value of dtype {dtype} "
                         "(give identity as a function of the dtype)")
    return cast


def _all_ones(dtype: np.dtype) -> Any:
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.bool_(True)
    return np.array(-1).astype(dtype)[()]  # every bit set, signed or not


@functools.lru_cache(maxsize=None)
def numpy_sum_dtype(in_dtype: np.dtype, dtype: Any = None) -> np.dtype:
    """NumPy's result dtype for ``np.sum(x, dtype=dtype)`` (bool and small ints widen)."""
    return np.asarray(np.sum(np.zeros(1, dtype=in_dtype), dtype=dtype)).dtype


def same_dtype(in_dtype: np.dtype, dtype: Any = None) -> np.dtype:
    """The result keeps the input's dtype (max, min, bitwise ops), or ``dtype``."""
    return np.dtype(in_dtype if dtype is None else dtype)


def numpy_mean_dtypes(in_dtype: np.dtype, dtype: Any = None) -> tuple:
    """``(accumulator, result)`` dtypes of ``np.mean(x, dtype=dtype)``: integers and
    bool sum in float64 to a float64 mean, float16 in float32 to a float16 mean, a
    given ``dtype`` is both; the accumulator is None where the sum's own rule holds."""
    in_dtype = np.dtype(in_dtype)
    acc = dtype
    if dtype is None and in_dtype.kind in "biu":
        acc = np.float64
    elif dtype is None and in_dtype == np.float16:
        acc = np.float32
    result = np.dtype(dtype if dtype is not None else
                      np.float64 if in_dtype.kind in "biu" else in_dtype)
    return acc, result


def accumulator_dtype(result: np.dtype) -> np.dtype:
    """float16 accumulates in float32 (its running sum overflows at 65504); others as is."""
    result = np.dtype(result)
    return np.dtype(np.float32) if result == np.float16 else result


def _as_dtype(dtype: Any) -> np.dtype:
    """``np.dtype(dtype)``, with a ``TypeError`` naming the ``dtype=`` argument."""
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype={dtype!r} is not a NumPy dtype") from None


def check_native_dtype(dtype: np.dtype, name: str) -> None:
    """``TypeError`` naming ``name`` for a ``dtype=`` of non-native byte order, which
    NumPy's ufuncs refuse too (a ``dtype=`` selects a type, not how it is stored)."""
    if not dtype.isnative:
        raise TypeError(f"{name}: dtype must be of native byte order (dtype= selects the "
                        f"type, not how it is stored), got {dtype.str}")


def _field_names(n: int) -> str:
    """``"a0, a1, b0, b1"`` for ``n = 2``: a combine's parameters for ``n`` fields."""
    return ", ".join([f"a{k}" for k in range(n)] + [f"b{k}" for k in range(n)])


def _check_arity(name: str, fn, count: int, role: str = "combine", names: str = "") -> None:
    """``fn`` (the op's ``role``: combine, map or finish) must take ``count``
    positional arguments, named ``names`` in the error (a combine's by default)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: Numba will say
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != count and not any(p.kind == p.VAR_POSITIONAL for p in params):
        names = names or ("a, b" if count == 2 else _field_names(count // 2))
        raise TypeError(f"Op {name!r}: {role} must take {count} arguments ({names}), "
                        f"got {len(positional)}")


#: instructions that name a local without reading it
_WRITES = frozenset({"STORE_FAST", "DELETE_FAST", "STORE_FAST_STORE_FAST"})


def _reads_argument(fn, k: int) -> bool:
    """Whether Python function ``fn`` reads its ``k``-th parameter (``self`` not
    counted in a bound method); True where its code cannot tell otherwise (no code, a
    parameter taken through ``*args``: :func:`_code_reads`)."""
    if inspect.ismethod(fn):
        fn, k = fn.__func__, k + 1
    code = getattr(getattr(fn, "py_func", fn), "__code__", None)
    if code is None or code.co_argcount <= k:
        return True
    return _code_reads(code, code.co_varnames[k])


@functools.lru_cache(maxsize=256)  # dis takes ~10 us a map, and a call asks each time
def _code_reads(code, name: str) -> bool:
    """Whether ``code`` reads its local ``name``: an inner function captures it, or an
    instruction but a plain store names it (Python 3.13's ``STORE_FAST_LOAD_FAST``
    both stores and loads, say)."""
    if name in code.co_cellvars:
        return True
    return any(ins.opname not in _WRITES
               and name in (ins.argval if isinstance(ins.argval, tuple) else (ins.argval,))
               for ins in dis.get_instructions(code))


def _check_kinds_and_atomic(name: str, kinds: Any, atomic: Any) -> None:
    """Refuse, when the op is made, the ``kinds`` and ``atomic`` that would only fail
    (a ``KeyError`` on ``"z"``) or be ignored (an unknown atomic) at first use."""
    if not isinstance(kinds, str):
        raise TypeError(f"Op {name!r}: kinds must be a string of NumPy dtype kinds drawn "
                        f"from {ALL_KINDS!r}, got {kinds!r}")
    if not kinds or set(kinds) - set(ALL_KINDS):
        raise ValueError(f"Op {name!r}: kinds must be one or more of the NumPy dtype kinds "
                         f"{ALL_KINDS!r} (bool, signed, unsigned, float), got {kinds!r}")
    if atomic is not None and not isinstance(atomic, str):
        raise TypeError(f"Op {name!r}: atomic must be None or a string, got {atomic!r}")
    if atomic is not None and atomic not in ATOMICS:
        raise ValueError(f"Op {name!r}: atomic must be None or one of "
                         f"{', '.join(map(repr, ATOMICS))} (the numba.cuda.atomic "
                         f"functions the atomic_fold strategy folds with), got {atomic!r}")


def _check_empty_and_nan(name: str, empty: Any, nan_propagating: Any, fields: int) -> None:
    """``empty`` one of its three forms (a number for a one-field op only: nothing
    reads it for more), ``nan_propagating`` a bool: a misspelt ``"Raise"`` would
    otherwise read as ``"identity"``, and ``"no"`` as true."""
    number = isinstance(empty, (int, float, np.bool_, np.integer, np.floating))
    if isinstance(empty, str) and empty not in ("identity", "raise") or (
            not isinstance(empty, str) and not number):
        raise ValueError(f"Op {name!r}: empty must be 'identity', 'raise' or a number (the "
                         f"result of reducing no elements), got {empty!r}")
    if number and fields > 1:
        raise ValueError(f"Op {name!r}: an op of {fields} fields takes empty='identity' or "
                         f"'raise', not a number ({empty!r})")
    if not isinstance(nan_propagating, (bool, np.bool_)):
        raise TypeError(f"Op {name!r}: nan_propagating must be True or False, got "
                        f"{nan_propagating!r}")


def _fixed_dtypes(name: str, fields: int, given) -> Callable:
    """``state_dtypes`` given as the ``fields`` dtypes themselves, as the function of
    ``(in_dtype, dtype)`` the op holds.

    Raises:
        TypeError: as :func:`checked_state_dtypes`.
    """
    dtypes = checked_state_dtypes(name, fields, given, "be a function of (in_dtype, dtype) "
                                                       "or a tuple of")
    return lambda in_dtype, dtype: dtypes


def checked_state_dtypes(name: str, fields: int, given, form: str = "give") -> tuple:
    """``given``, what an op's ``state_dtypes`` said, as ``fields`` NumPy dtypes that a
    kernel's state can hold: bool, integers of up to 8 bytes, float16/32/64, in the
    GPU's (native) byte order. ``form``: what ``state_dtypes`` must be, for the message.

    Raises:
        TypeError: another number of dtypes, or a dtype outside those (complex,
            longdouble, object, text, big-endian, ...), naming ``state_dtypes`` and
            the field.
    """
    try:
        dtypes = tuple(np.dtype(d) for d in given)
    except (TypeError, ValueError):
        dtypes = None
    if dtypes is None or len(dtypes) != fields:
        raise TypeError(f"Op {name!r}: state_dtypes must {form} {fields} dtypes, got "
                        f"{given!r}")
    for k, d in enumerate(dtypes):
        if d.kind not in ALL_KINDS or d.itemsize > 8 or foreign_float(d) or not d.isnative:
            raise TypeError(f"Op {name!r}: state_dtypes gives {d.str if not d.isnative else d} "
                            f"for field {k}; a state's fields are bool, signed or unsigned "
                            "integers of up to 8 bytes, or float16/32/64, of native byte "
                            "order")
    return dtypes


#: NumPy's float and complex types (the kernels take the floats of at most 8 bytes)
NUMPY_INEXACT = (np.float16, np.float32, np.float64, np.longdouble, np.complex64,
                 np.complex128, np.clongdouble)


def foreign_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` says kind ``"f"`` or ``"c"`` but is none of NumPy's types:
    ``ml_dtypes.float8_e5m2`` and ``complex32`` do, unlike the other float8 types, so
    a check of the kind alone would let them through to a kernel (which Numba cannot
    compile) or into an ``out``."""
    return dtype.kind in "fc" and dtype.type not in NUMPY_INEXACT


@dataclass(frozen=True, eq=False)
class Op:
    """An associative binary operator over accumulator states.

    Attributes:
        name: short name (``"sum"``, ``"max"``, ...).
        combine: ``f(a, b) -> c``, a plain Python function that Numba compiles as a
            CUDA device function. For one-field ops ``a``, ``b`` and ``c`` are
            scalars; for ``N``-field ops (``fields=N``, ``N >= 2``) the signature is
            ``f(a0, ..., aN-1, b0, ..., bN-1) -> (c0, ..., cN-1)`` (two fields:
            ``f(a0, a1, b0, b1) -> (c0, c1)``). Must be associative: strategies
            combine in a tree. ``a`` always covers elements before ``b``.
        identity: ``identity(dtype) -> scalar`` (for ``N`` fields,
            ``identity(dtypes) -> N-tuple``, one value per field): the value that
            fills lanes holding no element. A plain scalar (or an ``N``-tuple of
            them) is accepted and cast to the field dtypes.
        commutative: whether ``f(a, b) == f(b, a)``; strategies that combine out of
            order (shared_tree's sequential addressing, atomic_fold) refuse ops
            that are not.
        atomic: the ``numba.cuda.atomic`` function that folds this op natively
            (``"add"``, ``"max"``, ``"min"``, ``"and_"``, ``"or_"``, ``"xor"``), or
            ``None``: atomic_fold then uses a compare-and-swap loop.
        kinds: the NumPy dtype kinds accepted as input (``"biuf"``; ``"biu"`` for
            bitwise ops); others raise ``TypeError``.
        result_dtype: ``rule(in_dtype, dtype) -> result dtype``, NumPy's.
        fields: the number of fields of a state, ``N >= 1``.
        nan_propagating: for max/min, NaN wins (NumPy's ``np.max``); atomics that
            assume no NaN cannot serve.
        empty: the result of reducing no elements: ``"identity"`` (NumPy's rule for
            ufuncs with an identity), ``"raise"`` (``ValueError``, as ``np.max``), or
            for a one-field op, a number (sum gives ``0``, not the kernel's fill value
            ``-0.0``).
        map: ``map(value, index)``: the state of one element, ``index`` its C-order
            position among the reduced axes (along the axis of a scan; within its
            segment in ``segmented_reduce``; in the result, counted from
            ``offsets[0]``, in ``segmented_scan``) (argmax:
            ``(value, index)``; a one-field op: a scalar, such as ``value != 0`` for
            ``any``; an ``N``-field op: an ``N``-tuple). Required for ops of two or
            more fields; a one-field op without one casts the element to the
            accumulator dtype.
        state_dtypes: for ops of two or more fields, ``state_dtypes(in_dtype, dtype)
            -> (d0, ..., dN-1)``: each field's dtype, or those ``N`` dtypes themselves
            (a tuple, whatever the input; default: :func:`field_dtypes`, read from the
            identity's values).
        finish: for ops of two or more fields, ``finish(s0, ..., sN-1) -> value``:
            what a scan stores for each element, one output array instead of one
            per field (``reduce`` returns the fields) (CuPy's ``post_map_expr``;
            ``numbakern/ops/products.py``'s float product turns its ``(mantissa,
            exponent)`` state into a float this way).

    Raises:
        TypeError: ``combine`` not callable or not taking ``2 * fields`` positional
            arguments; ``map`` not a function of two arguments; ``finish`` not taking
            ``fields`` arguments; ``identity`` is ``None``; ``commutative`` not a
            bool; ``kinds`` not a string; ``state_dtypes`` neither a function nor
            ``fields`` dtypes a state can hold (:func:`checked_state_dtypes`, which
            also checks what a function gives, at a call); ``name`` not a string;
            ``nan_propagating`` not a bool.
        ValueError: ``empty`` neither ``"identity"``, ``"raise"`` nor a number (or a
            number on an op of two or more fields); ``fields`` not an integer ``>= 1``;
            an op of two or more fields without ``map``; a ``finish`` on a one-field
            op; ``kinds`` empty or with a letter outside ``"biuf"``; ``atomic`` neither
            ``None`` nor one of the six names above.
    """

    name: str
    combine: Callable
    identity: Callable[[np.dtype], Any]
    commutative: bool = True
    atomic: str | None = None
    kinds: str = ALL_KINDS
    result_dtype: Callable[..., np.dtype] = same_dtype
    fields: int = 1
    nan_propagating: bool = False
    empty: Any = "identity"
    map: Callable | None = None
    state_dtypes: Callable | None = None
    finish: Callable | None = None
    _device: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"an op's name must be a string, got {self.name!r}")
        if not callable(self.combine):
            raise TypeError(f"Op {self.name!r}: combine must be a function, got {self.combine!r}")
        if (isinstance(self.fields, (bool, np.bool_)) or not isinstance(self.fields, int)
                or self.fields < 1):
            raise ValueError(f"Op {self.name!r}: fields must be an integer >= 1, got "
                             f"{self.fields!r}")
        _check_arity(self.name, self.combine, 2 * self.fields)
        if self.identity is None:
            raise TypeError(f"Op {self.name!r}: identity must be a scalar (or a tuple, or a "
                            "function of the dtype), not None: it fills lanes with no element")
        if not callable(self.identity):
            _check_identity(self.name, self.identity)
            count = len(self.identity) if isinstance(self.identity, tuple) else 1
            if count != self.fields:
                raise ValueError(f"Op {self.name!r}: identity gives {count} field(s), the op "
                                 f"has {self.fields}: give one value per field")
            object.__setattr__(self, "identity", _constant_identity(self.identity))
        if not isinstance(self.commutative, (bool, np.bool_)):  # 'no' would read as True
            raise TypeError(f"Op {self.name!r}: commutative must be True or False, got "
                            f"{self.commutative!r}")
        _check_kinds_and_atomic(self.name, self.kinds, self.atomic)
        _check_empty_and_nan(self.name, self.empty, self.nan_propagating, self.fields)
        if self.fields > 1 and self.map is None:
            raise ValueError(f"Op {self.name!r}: an op of {self.fields} fields needs "
                             "map(value, index)")
        if self.map is not None:
            if not callable(self.map):
                raise TypeError(f"Op {self.name!r}: map must be a function of (value, "
                                f"index), got {self.map!r}")
            _check_arity(self.name, self.map, 2, "map", "value, index")
        if self.state_dtypes is not None and (not callable(self.state_dtypes)
                                              or isinstance(self.state_dtypes, type)):
            object.__setattr__(self, "state_dtypes", _fixed_dtypes(self.name, self.fields,
                                                                   self.state_dtypes))
        if self.finish is not None and (self.fields < 2 or not callable(self.finish)):
            raise ValueError(f"Op {self.name!r}: finish must be a function of a state of "
                             f"two or more fields, got {self.finish!r} for {self.fields} "
                             "field(s)")
        if self.finish is not None:
            _check_arity(self.name, self.finish, self.fields, "finish",
                         ", ".join(f"s{k}" for k in range(self.fields)))

    def check_dtype(self, dtype: np.dtype, what: str = "x of dtype", caller: str | None = None
                    ) -> None:
        """Raise ``TypeError`` naming the op (or ``caller``, the function the user
        called: ``cumsum`` for the sum op) and dtype if this op cannot take it.

        ``what`` names the argument in the message (the input's dtype, or ``dtype=``).
        Kernels handle bool, integers up to 64 bits and float16/32/64 only: not
        float128, complex or object.
        """
        dtype = np.dtype(dtype)
        if dtype.kind not in self.kinds or dtype.itemsize > 8 or foreign_float(dtype):
            allowed = {"b": "bool", "i": "signed integers", "u": "unsigned integers",
                       "f": "float16/32/64"}
            names = ", ".join(allowed[k] for k in self.kinds)
            where = f"{what}{dtype}" if what.endswith("=") else f"{what} {dtype}"
            raise TypeError(f"{caller or self.name} is not defined for {where}; it accepts "
                            f"{names}")

    def result_dtype_for(self, in_dtype: np.dtype, dtype: Any = None,
                         caller: str | None = None) -> np.dtype:
        """The checked result dtype of this op on ``in_dtype`` with NumPy's ``dtype=``
        (errors name ``caller``, the function called, else the op).

        Raises:
            TypeError: an input or ``dtype=`` outside what the kernels handle (complex,
                object, float128, ...), or one NumPy cannot reduce to.
        """
        self.check_dtype(in_dtype, caller=caller)
        if dtype is not None:
            self.check_dtype(_as_dtype(dtype), "dtype=", caller)
        return np.dtype(self.result_dtype(np.dtype(in_dtype), dtype))

    def given_state_dtypes(self, in_dtype: np.dtype, dtype: Any = None) -> tuple | None:
        """The fields' dtypes that ``state_dtypes`` gives for this input and ``dtype=``,
        checked by :func:`checked_state_dtypes` (a ``TypeError`` naming it); None for
        an op that gives none."""
        if self.state_dtypes is None:
            return None
        return checked_state_dtypes(self.name, self.fields,
                                    self.state_dtypes(in_dtype, dtype))

    def empty_result(self, dtype: np.dtype) -> Any:
        """The result of reducing zero elements, as ``dtype``; raises for ``"raise"``."""
        if isinstance(self.empty, str) and self.empty == "raise":
            raise ValueError(
                f"zero-size array to reduction operation {ufunc_name(self.name)} which "
                f"has no identity"
            )
        if isinstance(self.empty, str):
            return identity_field(self.name, self.identity(dtype), np.dtype(dtype))
        return np.asarray(self.empty).astype(dtype)[()]

    def device_combine(self):
        """The combine function compiled as a CUDA device function (built once)."""
        return self._compiled("combine", self.combine)

    @property
    def reads_index(self) -> bool:
        """Whether ``map`` may read its element's index (its second parameter appears
        in its code, or its code cannot be read): where it does not, the index need
        not be tracked, and a chunk's own positions serve as well as the array's."""
        return self.map is not None and _reads_argument(self.map, 1)

    def device_map(self):
        """The map function compiled as a CUDA device function."""
        return self._compiled("map", self.map)

    def device_finish(self):
        """The finish function compiled as a CUDA device function."""
        return self._compiled("finish", self.finish)

    def _compiled(self, what: str, fn: Callable):
        if what not in self._device:
            from numba import cuda

            self._device[what] = cuda.jit(device=True)(fn)
        return self._device[what]

    def __repr__(self) -> str:
        return f"Op({self.name!r})"

    def __reduce_ex__(self, protocol):
        """Pickled by name, as pickle takes a function, where the module that defines
        its combine (or its map) holds it under a name: a built-in op, a vector
        norm's, or one that ``@numbakern.op`` bound to its function's name; any
        other (an op of ``__main__``, which ``cloudpickle`` sends by value to Dask's
        workers, or one made by calling :class:`Op` and kept nowhere) by its fields,
        its compiled device functions left out (each process compiles its own)."""
        for fn in (self.combine, self.map):
            module = getattr(fn, "__module__", None)
            if module == "__main__" or module not in sys.modules:
                continue
            for name, value in list(vars(sys.modules[module]).items()):  # a snapshot
                if value is self:
                    return _named, (module, name)
        state = {k: v for k, v in self.__dict__.items() if k != "_device"}
        return _rebuilt, (type(self), state)


def _named(module: str, name: str):
    """What ``name`` names in ``module`` (an op, unpickled)."""
    import importlib

    return getattr(importlib.import_module(module), name)


def _rebuilt(cls: type, state: dict) -> Op:
    """An op from its pickled fields, with an empty cache of compiled functions."""
    built = object.__new__(cls)
    built.__dict__.update(state, _device={})
    return built


def op(identity: Any, *, name: str | None = None, commutative: bool = True, **kwargs):
    """Decorator: turn a plain ``f(a, b)`` into an :class:`Op`.

    Args:
        identity: the value that fills lanes holding no element (a scalar, a
            function of the dtype, or an ``N``-tuple for ``fields=N``).
        name: the op's name (default: the function's ``__name__``).
        commutative: whether ``f(a, b) == f(b, a)``.
        **kwargs: any other :class:`Op` field (``atomic``, ``kinds``, ``fields``,
            ``map``, ``empty``, ...).

    Returns:
        a decorator that returns the :class:`Op`.

    Raises:
        TypeError, ValueError: as :class:`Op` (when the decorator is applied); an
            unknown keyword is a ``TypeError``.

    Example::

        @numbakern.op(identity=0.0, map=lambda v, i: abs(v))
        def absmax(a, b):          # the largest |x|
            return max(a, b)
    """

    def wrap(fn: Callable) -> Op:
        return Op(getattr(fn, "__name__", repr(fn)) if name is None else name, fn, identity,
                  commutative=commutative, **kwargs)

    return wrap


# --- built-in operators -------------------------------------------------------------
# NaN propagation for max/min: `a > b or a != a` keeps a when a is NaN, and when b is
# NaN both tests fail and b (the NaN) is returned. NumPy's np.max does the same.


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


def _max(a, b):
    return a if (a > b or a != a) else b


def _min(a, b):
    return a if (a < b or a != a) else b


def _and(a, b):
    return a & b


def _or(a, b):
    return a | b


def _xor(a, b):
    return a ^ b


# +0.0 as NumPy's add.reduce starts from: the sum of -0.0s is +0.0 there too.
SUM = Op("sum", _add, _constant_identity(0), atomic="add", result_dtype=numpy_sum_dtype)
PROD = Op("prod", _mul, _constant_identity(1), result_dtype=numpy_sum_dtype)
MAX = Op("max", _max, _float_identity(-np.inf), atomic="max", nan_propagating=True,
         empty="raise")
MIN = Op("min", _min, _float_identity(np.inf), atomic="min", nan_propagating=True,
         empty="raise")
BITWISE_AND = Op("bitwise_and", _and, _all_ones, atomic="and_", kinds=INTEGER_KINDS)
BITWISE_OR = Op("bitwise_or", _or, _constant_identity(0), atomic="or_", kinds=INTEGER_KINDS)
BITWISE_XOR = Op("bitwise_xor", _xor, _constant_identity(0), atomic="xor", kinds=INTEGER_KINDS)


# --- ops whose elements are mapped first: logical and NaN-skipping reductions ---------
# Each element's state is ``map(value, index)`` (``numbakern/ops/state.py``'s
# ``to_state``), on every path alike. NaN != 0 is True, as NumPy's any and count_nonzero
# read it.


def _nonzero(v, i):
    return v != 0


def _nan_as_zero(v, i):
    return v if v == v else 0


def _nan_as_one(v, i):
    return v if v == v else 1


def _bool_result(in_dtype: np.dtype, dtype: Any = None) -> np.dtype:
    return np.dtype(np.bool_)


def _count_result(in_dtype: np.dtype, dtype: Any = None) -> np.dtype:
    return np.dtype(np.intp)


ANY = Op("any", _or, _constant_identity(False), atomic="or_", result_dtype=_bool_result,
         map=_nonzero)
ALL = Op("all", _and, _constant_identity(True), atomic="and_", result_dtype=_bool_result,
         map=_nonzero)
COUNT_NONZERO = Op("count_nonzero", _add, _constant_identity(0), atomic="add",
                   result_dtype=_count_result, map=_nonzero)
NANSUM = Op("nansum", _add, _constant_identity(0), atomic="add", result_dtype=numpy_sum_dtype,
            map=_nan_as_zero)
NANPROD = Op("nanprod", _mul, _constant_identity(1), result_dtype=numpy_sum_dtype,
             map=_nan_as_one)


# --- the (min, max) pair of ptp ----------------------------------------------------------


def _minmax(a0, a1, b0, b1):
    # Inlined rather than calling _min/_max: a combine is compiled for the device, and
    # plain Python helpers it calls are not.
    lo = a0 if (a0 < b0 or a0 != a0) else b0
    hi = a1 if (a1 > b1 or a1 != a1) else b1
    return lo, hi


def _twice(v, i):
    return v, v


def _minmax_identity(dtypes):
    return _float_identity(np.inf)(dtypes[0]), _float_identity(-np.inf)(dtypes[1])


#: ``(min, max)`` of a stretch, in one pass (``ptp`` is ``max - min``); NaN propagates
MINMAX = Op("minmax", _minmax, _minmax_identity, fields=2, map=_twice, nan_propagating=True,
            empty="raise", kinds="iuf")

BUILTIN = {o.name: o for o in (SUM, PROD, MAX, MIN, BITWISE_AND, BITWISE_OR, BITWISE_XOR,
                               ANY, ALL, COUNT_NONZERO, NANSUM, NANPROD)}


def get(op_or_name: Op | str, also: tuple = ()) -> Op:
    """Look up a built-in op by name, or pass an :class:`Op` through; ``also``: names
    the caller takes besides (``"argmax"`` ...), for the message.

    Raises:
        TypeError: a plain function (wrap it with :func:`op`).
        ValueError: an unknown name, or anything else that is not an :class:`Op`.
    """
    if isinstance(op_or_name, Op):
        return op_or_name
    if callable(op_or_name):
        kind = "class" if isinstance(op_or_name, type) else \
            "function" if inspect.isroutine(op_or_name) else "callable"
        raise TypeError(
            f"op must be a numbakern.Op, got the {kind} {op_or_name!r}: wrap it with "
            "@numbakern.op(identity=...) (the identity fills lanes that hold no element)"
        )
    try:
        return BUILTIN[op_or_name]
    except (KeyError, TypeError):
        raise ValueError(
            f"op must be a numbakern.Op or one of {sorted([*BUILTIN, *also])}, got "
            f"{op_or_name!r}"
        ) from None


# --- argmax / argmin: a (value, int64 index) pair ------------------------------------
# The combine is the maximum (argmin: minimum) under a *total* order on pairs: NaN above
# every number (NumPy's argmax and argmin both return the first NaN), then the value,
# then the index: the smaller index wins a tie with ``tie_break_left``, the larger
# without. A total order makes the combine associative and commutative, so every
# strategy gives the exact same answer whatever order it combines in. The identity
# (the extreme value, with an index that loses every tie) fills lanes with no element.

INDEX_DTYPE = np.dtype(np.int64)
_LEFT_IDENTITY_INDEX = np.iinfo(np.int64).max  # loses every tie under tie_break_left
_RIGHT_IDENTITY_INDEX = -1  # loses every tie otherwise


def _argmax_left(a0, a1, b0, b1):
    if b0 != b0:  # b is NaN: it wins unless a is an earlier NaN
        if a0 != a0 and a1 < b1:
            return a0, a1
        return b0, b1
    if a0 != a0 or a0 > b0 or (a0 == b0 and a1 < b1):
        return a0, a1
    return b0, b1


def _argmax_right(a0, a1, b0, b1):
    if b0 != b0:
        if a0 != a0 and a1 > b1:
            return a0, a1
        return b0, b1
    if a0 != a0 or a0 > b0 or (a0 == b0 and a1 > b1):
        return a0, a1
    return b0, b1


def _argmin_left(a0, a1, b0, b1):
    if b0 != b0:
        if a0 != a0 and a1 < b1:
            return a0, a1
        return b0, b1
    if a0 != a0 or a0 < b0 or (a0 == b0 and a1 < b1):
        return a0, a1
    return b0, b1


def _argmin_right(a0, a1, b0, b1):
    if b0 != b0:
        if a0 != a0 and a1 > b1:
            return a0, a1
        return b0, b1
    if a0 != a0 or a0 < b0 or (a0 == b0 and a1 > b1):
        return a0, a1
    return b0, b1


def _arg_map(value, index):
    return value, index


def _arg_identity(direction: str, tie_break_left: bool):
    extreme = _float_identity(-np.inf if direction == "max" else np.inf)
    index = _LEFT_IDENTITY_INDEX if tie_break_left else _RIGHT_IDENTITY_INDEX

    def identity(dtypes):
        return extreme(dtypes[0]), INDEX_DTYPE.type(index)

    return identity


@dataclass(frozen=True, eq=False, repr=False)
class ArgOp(Op):
    """A value-index op (argmax, argmin): ``fields=2``, state ``(value, int64 index)``.

    Attributes (beyond :class:`Op`'s):
        direction: ``"max"`` or ``"min"``.
        tie_break_left: among equal values (NaNs count as equal to each other) the
            smallest index wins; ``False``: the largest.
    """

    direction: str = "max"
    tie_break_left: bool = True

    @property
    def identity_index(self) -> int:
        """The index the identity state carries (it loses every tie)."""
        return _LEFT_IDENTITY_INDEX if self.tie_break_left else _RIGHT_IDENTITY_INDEX


def _arg(direction: str, left: bool, combine) -> ArgOp:
    suffix = "" if left else "_right"
    return ArgOp(f"arg{direction}{suffix}", combine, _arg_identity(direction, left), fields=2,
                 map=_arg_map, nan_propagating=True, empty="raise", direction=direction,
                 tie_break_left=left)


ARGMAX = _arg("max", True, _argmax_left)
ARGMAX_RIGHT = _arg("max", False, _argmax_right)
ARGMIN = _arg("min", True, _argmin_left)
ARGMIN_RIGHT = _arg("min", False, _argmin_right)
_ARG_OPS = {(o.direction, o.tie_break_left): o
            for o in (ARGMAX, ARGMAX_RIGHT, ARGMIN, ARGMIN_RIGHT)}


def arg_op(direction: str, tie_break_left: bool = True) -> ArgOp:
    """The built-in argmax (``direction="max"``) or argmin op with the given tie rule.

    Raises:
        ValueError: ``direction`` not ``"max"`` or ``"min"``.
    """
    try:
        return _ARG_OPS[direction, bool(tie_break_left)]
    except KeyError:
        raise ValueError(f"direction must be 'max' or 'min', got {direction!r}") from None


# --- nanargmax / nanargmin: NaN as -inf (+inf), and a flag for slices of only NaN ------
# NumPy's nanargmax reads a NaN as -inf (nanargmin: +inf) at its own index, and raises
# for a slice of nothing but NaN; nanmax gives NaN there. The state is (value, code):
# the code is the index, with bit 62 set while every element so far was NaN (the
# combine ANDs the bits). Ties: the smaller index. The identity's code has every index
# bit set (it loses every tie) and the flag (neutral under AND).

ALL_NAN = 1 << 62
INDEX_BITS = ALL_NAN - 1


def _nan_coded(extreme: float):
    def code(value, i):
        if value != value:
            return extreme, int64(i) | ALL_NAN
        return value, int64(i)

    return code


def _nanargmax(a0, a1, b0, b1):
    flag = a1 & b1 & ALL_NAN
    ai, bi = a1 & INDEX_BITS, b1 & INDEX_BITS
    if a0 > b0 or (a0 == b0 and ai < bi):
        return a0, ai | flag
    return b0, bi | flag


def _nanargmin(a0, a1, b0, b1):
    flag = a1 & b1 & ALL_NAN
    ai, bi = a1 & INDEX_BITS, b1 & INDEX_BITS
    if a0 < b0 or (a0 == b0 and ai < bi):
        return a0, ai | flag
    return b0, bi | flag


NANARGMAX = Op("nanargmax", _nanargmax, _arg_identity("max", True), fields=2,
               map=_nan_coded(-math.inf), empty="raise")
NANARGMIN = Op("nanargmin", _nanargmin, _arg_identity("min", True), fields=2,
               map=_nan_coded(math.inf), empty="raise")


# --- nanmean: (sum, count) of the elements that are not NaN ---------------------------


def _sum_count(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


def _not_nan(value, i):
    if value != value:
        return 0, int64(0)
    return value, int64(1)


def _sum_count_identity(dtypes):
    return np.dtype(dtypes[0]).type(0), np.dtype(dtypes[1]).type(0)


#: ``(sum, count)`` of the non-NaN elements (``nanmean`` divides them)
SUM_COUNT = Op("sum_count", _sum_count, _sum_count_identity, fields=2, map=_not_nan)


def _counted_one(value, i):
    return value, int64(1)


#: ``(sum, count)`` of every element (``mean`` with ``where=``: the mask decides the count)
SUM_AND_COUNT = Op("sum_and_count", _sum_count, _sum_count_identity, fields=2,
                   map=_counted_one)


# --- var and std: Welford's (count, mean, M2), merged by Chan et al.'s formula ---------
# Three fields: int64 count, float64 mean, float64 M2.
# Chan, Golub and LeVeque, "Updating formulae and a pairwise algorithm for computing
# sample variances" (1979): n = na + nb, delta = mb - ma, mean = ma + delta * nb / n,
# M2 = M2a + M2b + delta**2 * na * nb / n.


def _moments(a0, a1, a2, b0, b1, b2):
    n = a0 + b0
    if b0 == 0:
        return n, a1, a2
    if a0 == 0:
        return n, b1, b2
    delta = b1 - a1
    share = float64(b0) / float64(n)
    return n, a1 + delta * share, a2 + b2 + delta * delta * float64(a0) * share


def _one_moment(value, i):
    return int64(1), float64(value), 0.0


def _one_moment_unless_nan(value, i):
    if value != value:
        return int64(0), 0.0, 0.0
    return int64(1), float64(value), 0.0


def _moments_identity(dtypes):
    return np.int64(0), np.float64(0), np.float64(0)


#: ``(count, mean, M2)`` of a stretch: ``var = M2 / (count - ddof)``
MOMENTS = Op("moments", _moments, _moments_identity, fields=3, map=_one_moment,
             kinds="biuf")
#: the same over the elements that are not NaN (``nanvar``, ``nanstd``)
NAN_MOMENTS = Op("nan_moments", _moments, _moments_identity, fields=3,
                 map=_one_moment_unless_nan, kinds="biuf")
MOMENT_DTYPES = (np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.float64))


def field_dtypes(op: Op, result: np.dtype) -> tuple:
    """The field dtypes of an op of two or more fields when it does not say
    (``state_dtypes``): each field of the kind of its identity's value, in ``result``
    where that is of the same kind, else float64, int64 or bool. Never an integer
    field for a float identity."""
    result = np.dtype(result)
    values = getattr(op.identity, "constant", None)
    if values is None:  # a function of the dtypes: its values' kinds in float64 fields
        values = op.identity((np.dtype(np.float64),) * op.fields)
    fields = []
    for v in values:
        kind = np.asarray(v).dtype.kind
        if kind == result.kind or (kind in "iu" and result.kind in "iu"):
            fields.append(result)
        else:
            fields.append(np.dtype({"f": np.float64, "b": np.bool_}.get(kind, np.int64)))
    return tuple(fields)
