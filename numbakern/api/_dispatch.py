"""The one place where a public function sees arrays of other libraries.

* A Dask array as the first argument: the call goes to :mod:`numbakern.api.dask`
  (the function of the same name), which builds a lazy Dask array whose chunks
  numbakern's kernels compute.
* PyTorch tensors, other DLPack producers and bfloat16 arrays, in any argument
  (``out`` included): translated on the way in and out by :mod:`numbakern.api._interop`.

Nothing of Dask or PyTorch is imported unless such an array is passed: the checks
read the arguments' types (and a NumPy array's dtype name) only.
"""

from __future__ import annotations

import functools

import numpy as np

from numbakern.api._interop import (WIDENED_WITH_ML_DTYPES, foreign_call, is_foreign,
                                    positional_names)
from numbakern.runtime.replay import replayable
from numbakern.runtime.tensor_table import tabled


def is_dask(x) -> bool:
    """Whether ``x`` is a Dask collection (``dask.array.Array`` and friends), by its
    type's module alone."""
    return type(x).__module__.split(".")[0] == "dask"


# Types whose values need nothing of this module: learnt as calls see them (a set's
# ``add`` is atomic, so calls from several threads may learn at once). NumPy arrays,
# dtypes and classes are decided value by value (a bfloat16 dtype is translated), so
# is the string "bfloat16".
_PLAIN: set[type] = {int, float, bool, str, tuple, list, slice, type(None)}
_BY_VALUE = (np.ndarray, np.dtype, type)


def _plain(a) -> bool:
    """Whether ``a`` goes to the function as it is (no Dask, no translation)."""
    t = type(a)
    if t in _PLAIN:  # but dtype="bfloat16", NumPy's name of ml_dtypes' type
        return t is not str or a != "bfloat16"
    if is_dask(a) or is_foreign(a):
        return False
    if not isinstance(a, _BY_VALUE + (str,)):  # (np.str_: by value, as str)
        _PLAIN.add(t)
    return True


def _plain_outs(kwargs: dict) -> bool:
    """Whether an ``out=`` given as a tuple or list (a pair of arrays) holds only
    plain items (:func:`_plain`): the interop translates the pair's tensors."""
    out = kwargs.get("out")
    return type(out) not in (tuple, list) or all(map(_plain, out))


def dispatch(fn):
    """Decorator for a public function whose first argument is an array.

    A Dask array goes to ``numbakern.api.dask.<fn's name>``; a function that module
    lacks raises ``TypeError`` rather than computing the whole Dask array on the host.
    Foreign arrays (torch, DLPack, bfloat16) go through :func:`foreign_call`; for a
    replayable ``fn``, that translated call is itself replayable, keyed by the CUDA
    tensors as given (``numbakern.runtime.replay``), and a repeated call on one CuPy
    array or CUDA tensor replays straight from a table keyed by its type and layout
    (``numbakern.runtime.tensor_table``; the wrapper's ``tensor_replay_table``).
    """
    name = fn.__name__
    names = positional_names(fn)

    def translated(*args, **kwargs):
        return foreign_call(fn, names, args, kwargs)

    translated.__name__ = translated.__qualname__ = name  # replay.latest's name
    replays = hasattr(fn, "replay_table")
    if replays:  # a tensor call replays without its translation
        translated = replayable(translated)

    @functools.wraps(fn)
    def call(x, *args, **kwargs):
        if _plain(x) and all(map(_plain, args)) and all(map(_plain, kwargs.values())) \
                and _plain_outs(kwargs):
            return fn(x, *args, **kwargs)
        # Something is a Dask array or needs translating (``_plain`` said no).
        if is_dask(x):
            return _to_dask(name, x, args, kwargs)
        if any(map(is_dask, args)) or any(map(is_dask, kwargs.values())):
            raise TypeError(f"numbakern.{name}: a Dask array is taken as the first "
                            f"argument only (the others would be computed on the host "
                            f"whole); pass x as a Dask array, or compute the others first")
        return translated(x, *args, **kwargs)

    if not replays:
        return _by_keyword(call, names)
    fast = functools.wraps(fn)(tabled(call, {"torch": translated, "cupy": fn, "sim": fn}))
    fast.translated = translated
    return _by_keyword(fast, names)


def _by_keyword(public, names: list):
    """``public`` taking its leading arguments by their own names as keywords too
    (``softmax_backward(y=..., dy=...)``, ``scan_by_key(keys, x=...)``): the wrappers
    above name the first one ``x``, so these are passed on by position. Functions whose
    first argument is ``x`` need nothing."""
    if names[0] == "x":
        return public

    @functools.wraps(public)
    def call(*args, **kwargs):
        i = len(args)
        if not i and names[0] not in kwargs:
            raise TypeError(f"{public.__name__}() missing 1 required positional argument: "
                            f"'{names[0]}'")
        given = []
        while i < len(names) and names[i] in kwargs:
            given.append(kwargs.pop(names[i]))
            i += 1
        return public(*args, *given, **kwargs)

    return call  # functools.wraps kept public's attributes (its tensor_replay_table)


def _to_dask(name: str, x, args, kwargs):
    from numbakern.api import dask as _dask

    lazy = getattr(_dask, name, None)
    if lazy is None or name not in _dask.__all__:
        raise TypeError(f"numbakern.{name} does not take Dask arrays; it takes NumPy, "
                        f"CuPy and CUDA arrays and torch tensors (Dask arrays: "
                        f"{', '.join(_dask.__all__)})")
    if kwargs.get("stream") is not None:
        raise TypeError(f"numbakern.{name}: stream= is not taken for Dask arrays (each "
                        "chunk's call runs on the current stream of the thread that "
                        "computes it)")
    if name not in WIDENED_WITH_ML_DTYPES and _dask.asks_bfloat16(x, args, kwargs):
        return _dask.optimized(_dask.through_float32(lazy, x, args, kwargs))
    return _dask.optimized(lazy(x, *args, **kwargs))
