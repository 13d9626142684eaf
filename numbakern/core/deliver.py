"""Results back in the caller's array type: NumPy in, NumPy out; CuPy in, CuPy out;
other device arrays as Numba device arrays; or written into the caller's ``out``.

Kernels write 1-D device arrays (in an accumulator dtype, for reductions); every
public function checks its ``out`` and hands its results back through here, so the
rules live once:

* ``out`` must be an array of the input's library (NumPy for NumPy input, CuPy for
  CuPy, any ``__cuda_array_interface__`` array for other device input) with exactly
  the result's shape (``ValueError`` otherwise), in any layout (sliced, transposed,
  reversed: a device one is written in place by a strided cast kernel) whose strides
  are whole elements. The result is cast into it with ``same_kind`` casting: float
  results go to float arrays, integers to integers or floats, bool anywhere numeric.
  Never to object, text or bytes, though ``same_kind`` allows them: NumPy computes
  into an object ``out`` in Python objects (exact integers where the kernels' wrap),
  and writes the text of its values into a text one for some functions (``any``,
  ``nanmedian``) while its arithmetic loops refuse it. That is
  stricter than NumPy's reductions, which cast ``unsafe``ly (a float sum into an int
  array): such an ``out`` raises :class:`OutDtypeError`, a ``ValueError`` that is also
  a ``TypeError``, the class NumPy raises for a forbidden cast. Indices (argmax and
  friends) need an integer ``out`` that casts safely to int64, as NumPy's argmax
  (int64 results; a narrower integer ``out`` wraps; uint64 is refused).
* A function that writes its result in place (softmax) takes an ``out`` of the
  result's dtype only.
* An ``out`` whose elements share memory (a zero stride along an axis longer than 1,
  as an expanded tensor or a writeable broadcast view has, or overlapping rows) is
  refused (``ValueError``, :func:`check_distinct`), whatever its library: the
  kernels' writes to one element would race.
* A device ``out`` that its kernels write while they read the inputs (scans, the
  softmax family, cross_entropy's gradient) must be an input itself (in place) or
  share no element with any (:func:`check_disjoint`): a tile would otherwise read
  what another has already overwritten. NumPy input and output are copied to the
  device and back, so they may overlap as NumPy allows.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from numbakern.core.arrays import Workspace, as_cupy, kind_of, on_cupy
from numbakern.kernels.elementwise import cast_into_view
from numbakern.ops import foreign_float
from numbakern.runtime.views import (address, device_view, flat, host_copy,
                                     refuse_replay_of_out_copy, reshaped)

OUT_CASTING = "same_kind"


class OutDtypeError(ValueError, TypeError):
    """An ``out`` (or ``grad_out``, ...) whose dtype cannot receive the result.

    Raised by :func:`check_out`, before any kernel runs, when the result's dtype does
    not cast to ``out``'s under ``same_kind`` casting (a float sum into an int array,
    which NumPy's reductions would cast ``unsafe``ly), when indices (argmax and
    friends) meet an ``out`` that is not an integer array, and when a result written
    in place (the softmax family) meets an ``out`` of any dtype but its own.

    Both a ``ValueError`` and a ``TypeError``: every other ``out`` that
    :func:`check_out` refuses (a wrong shape, a read-only or self-overlapping array)
    is a ``ValueError``, so ``except ValueError`` catches any bad ``out``; and NumPy
    raises a ``UFuncTypeError``, a ``TypeError``, for an output it cannot cast to
    (``np.add(x, 1, out=ints)``), so code written against NumPy's error catches this
    one too.
    """


def check_out(out, shape: tuple, dtype, kind: str, name: str, integer: bool = False,
              exact: bool = False, arg: str = "out") -> np.dtype:
    """Raise unless ``out`` (or ``None``) can receive a ``dtype`` result of ``shape``;
    return the dtype the result is written in: ``out``'s, else ``dtype``.

    Args:
        out: the user's ``out``.
        shape, dtype: the result's.
        kind: the input's array library, ``"numpy"``, ``"cupy"`` or ``"device"``.
        name: the function, for messages.
        integer: ``out`` must have an integer dtype that casts safely to int64
            (indices, cast as NumPy's argmax casts them: all but uint64).
        exact: ``out`` must have ``dtype`` itself (a result written in place).
        arg: ``out``'s name in messages (``grad_out`` ...).

    Raises:
        TypeError: ``out`` is not an array of the input's library.
        ValueError: a wrong shape, a read-only NumPy ``out``, an ``out`` whose
            elements share memory (:func:`overlaps_itself`: an expanded tensor, say),
            a device ``out`` whose strides are not whole elements;
            :class:`OutDtypeError` for a wrong dtype.
    """
    if out is None:
        return np.dtype(dtype)
    if kind == "numpy" and not isinstance(out, np.ndarray):
        raise TypeError(f"{name}: {arg} must be a NumPy array (or a CPU tensor) for "
                        f"NumPy or CPU-tensor input, got {type(out).__name__}")
    if kind == "cupy" and kind_of(out) != "cupy":
        raise TypeError(f"{name}: {arg} must be a CuPy array for CuPy input, got "
                        f"{type(out).__name__}")
    if kind == "device" and kind_of(out) == "numpy":
        raise TypeError(f"{name}: {arg} must be a device array (with "
                        f"__cuda_array_interface__) for device input, got "
                        f"{type(out).__name__}")
    if kind != "numpy" and isinstance(out.dtype, np.dtype) and not out.dtype.isnative:
        raise OutDtypeError(f"{name}: {arg} is a device array of non-native byte order "
                            f"(dtype {out.dtype.str}), which the GPU's little-endian "
                            f"kernels cannot write: pass a native one")
    view = out if kind == "numpy" else device_view(out)  # NumPy's dtype, whoever made it
    if tuple(view.shape) != tuple(shape):
        raise ValueError(f"{name}: {arg} has shape {tuple(view.shape)}, the result has shape "
                         f"{tuple(shape)}")
    if kind == "numpy" and not out.flags.writeable:
        raise ValueError(f"{name}: {arg} must be a writeable NumPy array")
    itemsize = np.dtype(view.dtype).itemsize
    check_distinct(tuple(view.shape), tuple(view.strides), itemsize, name, arg)
    if kind != "numpy" and any(s % itemsize for s in view.strides):
        raise ValueError(f"{name}: {arg} has strides {tuple(view.strides)} in bytes, not "
                         f"whole elements of {itemsize} bytes (a kernel's writes would be "
                         f"misaligned); pass an {arg} of whole-element strides")
    got, dtype = np.dtype(view.dtype), np.dtype(dtype)
    if foreign_float(got):
        raise OutDtypeError(f"{name}: {arg} has dtype {got}, which numbakern does not "
                            "write: its floats are float16, bfloat16, float32 and float64")
    if got.kind in "OSUV":  # same_kind lets numbers into all of these
        raise OutDtypeError(f"{name}: {arg} has dtype {got}; the kernels write numbers: "
                            f"pass a bool, integer or float {arg}")
    if integer and got.kind not in "iu":
        raise OutDtypeError(f"{name}: indices need an integer {arg}, got dtype {got}")
    if integer and not np.can_cast(got, np.int64, casting="safe"):  # NumPy's argmax's rule
        raise OutDtypeError(f"{name}: indices need an integer {arg} that casts safely to "
                            f"int64 (as NumPy's argmax), got dtype {got}")
    # a NumPy out of either byte order takes the result by a host copy, as NumPy's
    if exact and (got.newbyteorder("=") if kind == "numpy" else got) != dtype:
        raise OutDtypeError(f"{name}: {arg} must have the result's dtype {dtype} (it is "
                            f"written in place), got {got}")
    if not integer and not np.can_cast(dtype, got, casting=OUT_CASTING):
        raise OutDtypeError(f"{name}: cannot cast the {dtype} result to {arg}'s dtype {got} "
                            f"with casting rule '{OUT_CASTING}'")
    return got


def overlaps_itself(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """Whether two elements of an array of ``shape``, ``strides`` (bytes) and
    ``itemsize`` share a byte: a zero stride along an axis of length > 1, or any other
    overlapping layout. The axes sorted by stride, each stepping past all the smaller
    axes' extent, is the common layout (any transpose or slice of a contiguous array)
    and has none; other layouts are decided element by element, a case too large to
    enumerate (over ``_MAX_WORK`` elements) counting as overlap."""
    if 0 in shape:
        return False
    axes = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    extent = itemsize
    for stride, n in axes:
        if stride < extent:
            break
        extent += stride * (n - 1)
    else:
        return False
    if axes[0][0] == 0 or math.prod(n for _, n in axes) > _MAX_WORK:
        return True
    offsets = np.zeros(1, np.int64)
    for stride, n in axes:
        offsets = (offsets[:, None] + stride * np.arange(n, dtype=np.int64)).reshape(-1)
    return bool((np.diff(np.sort(offsets)) < itemsize).any())


def check_distinct(shape: tuple, strides: tuple, itemsize: int, name: str,
                   arg: str = "out") -> None:
    """Raise ``ValueError`` naming ``arg`` where its layout (``strides`` in bytes)
    :func:`overlaps_itself`: the writes to its shared elements would race."""
    if overlaps_itself(shape, strides, itemsize):
        cause = "a zero stride along an axis longer than 1, as an expanded or broadcast " \
            "array has" if any(s == 0 and n > 1 for n, s in zip(shape, strides)) else \
            "steps shorter than what they step over: overlapping rows"
        raise ValueError(f"{name}: {arg} has elements that share memory (strides "
                         f"{strides} in bytes for shape {shape}: {cause}), whose writes "
                         f"would race; pass an {arg} of distinct elements (a contiguous "
                         f"one)")


def check_disjoint(outs, inputs: dict, kind: str, name: str, arg: str = "out") -> None:
    """Raise unless each device array of ``outs`` (a list, one array, or ``None``) is
    one of ``inputs`` (a dict of argument name -> device array) exactly (the same
    elements in the same order: in place) or shares no element with any of them.
    NumPy input (``kind``) passes: it is copied to the device, its results back.

    Overlap is decided element by element (``np.shares_memory`` on array headers over
    the device addresses, which it never reads), so interleaved views such as
    ``x[::2]`` and ``x[1::2]`` pass; a case too hard to decide counts as overlap.

    Raises:
        ValueError: an ``out`` that overlaps an input in part, naming both.
    """
    if outs is None or kind == "numpy":
        return
    for out in outs if isinstance(outs, list) else [outs]:
        o = device_view(out)
        for label, x in inputs.items():
            v = device_view(x)
            if _same_elements(o, v) or not _shares_memory(o, v):
                continue
            raise ValueError(f"{name}: {arg} overlaps {label} in part; pass {label} itself "
                             f"as {arg} (in place) or another {arg} that shares no memory "
                             f"with it")


def check_apart(outs, kind: str, name: str) -> None:
    """Raise ``ValueError`` where two arrays of one result's ``outs`` (a tuple, say values
    and indices) share an element: each would overwrite the other's."""
    views = [o if kind == "numpy" else device_view(o) for o in outs if o is not None]
    for i, a in enumerate(views):
        for b in views[i + 1:]:
            if _overlap(a, b) if kind == "numpy" else _shares_memory(a, b):
                raise ValueError(f"{name}: the arrays of out share memory, and each would "
                                 f"overwrite the other's results; pass arrays apart")


def _same_elements(a, b) -> bool:
    """The same first element and the same steps (dimensions of one element left out:
    a ``(1, n)`` view of an ``(n,)`` array is the array)."""
    def steps(v):
        return [(e, s) for e, s in zip(v.shape, v.strides) if e != 1]

    return address(a) == address(b) and steps(a) == steps(b)


class _Header:
    """A NumPy array interface over device memory, for ``np.shares_memory`` alone."""

    def __init__(self, view):
        self.__array_interface__ = {
            "data": (address(view), True), "shape": tuple(view.shape),
            "strides": tuple(view.strides), "typestr": np.dtype(view.dtype).str,
            "version": 3}


def _shares_memory(a, b) -> bool:
    if math.prod(a.shape) == 0 or math.prod(b.shape) == 0:
        return False
    return _overlap(np.asarray(_Header(a)), np.asarray(_Header(b)))


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` share an element (a case too hard to decide counts)."""
    try:
        return bool(np.shares_memory(a, b, max_work=_MAX_WORK))
    except np.exceptions.TooHardError:
        return True


_MAX_WORK = 1 << 16  # NumPy's search for a shared element, bounded


def deliver(workspace: Workspace, arr, dtype, shape, out):
    """A 1-D device array of results (in the accumulator's dtype) as the user's array of
    ``dtype`` and ``shape``, or written into ``out``: the accumulator's values cast once
    into ``out``'s dtype, whatever the input's library (a float16 sum's float32 values
    go into a float32 ``out`` unrounded, as NumPy's, which computes in ``out``'s)."""
    dtype = np.dtype(dtype)
    if workspace.kind == "numpy":
        host = host_copy(arr, workspace.stream)
        workspace.stream.synchronize()
        if out is not None:
            np.copyto(out, host.reshape(shape), casting="unsafe")  # check_out allowed it
            return out
        return deliver_host(workspace, host.astype(dtype, copy=False).reshape(shape), None)
    if out is not None:  # a launch in any layout: a repeated call replays it too
        cast_into_view(arr, out, workspace.stream)
        return out
    if on_cupy(workspace.kind):
        return as_cupy(workspace.cast(arr, dtype)).reshape(shape)
    return reshaped(workspace.cast(arr, dtype), shape)


def written_into(out, result, stream):
    """A fresh C-contiguous result cast into ``out`` (``check_out`` allowed it): NumPy's
    assignment for a host result, a launch on ``stream`` for a device one (into any
    layout, so a repeated call replays it)."""
    if isinstance(result, (np.ndarray, np.generic)):
        # unsafe, as NumPy's argmax wraps an index in a narrower out (a scalar assigned
        # with out[...] = goes through a Python int, which raises instead)
        np.copyto(out, result, casting="unsafe")
    else:
        cast_into_view(flat(result), out, stream)
    return out


def deliver_host(workspace: Workspace, host: np.ndarray, out):
    """A host array of results (empty or constant reductions) as the user's array."""
    if workspace.kind == "numpy":
        if out is None:
            return host[()] if host.ndim == 0 else host
        np.copyto(out, host, casting="unsafe")  # check_out allowed the cast
        return out
    if on_cupy(workspace.kind):
        import cupy

        if out is None:
            return cupy.asarray(host)
        refuse_replay_of_out_copy()
        out[...] = cupy.asarray(host)
        return out
    if out is None:
        return cuda.to_device(host, stream=workspace.stream)
    if host.size:
        cast_into_view(workspace.from_host(host.reshape(-1)), out, workspace.stream)
    return out


def retupled(results: tuple, items) -> tuple:
    """``items`` (one for each of ``results``) in a tuple of ``results``' type: a named
    tuple (``topk``'s, ``max_with_indices``') keeps its class and fields."""
    return type(results)(*items) if hasattr(results, "_fields") else tuple(items)
