"""Results back in the caller's array type: NumPy in, NumPy out; CuPy in, CuPy out;
other device arrays as Numba device arrays; or written into the caller's ``out``.

Kernels write 1-D device arrays (in an accumulator dtype, for reductions); every
public function checks its ``out`` and hands its results back through here, so the
rules live once:

* ``out`` must be an array of the input's library (NumPy for NumPy input, CuPy for
  CuPy, any ``__cuda_array_interface__`` array for other device input) with exactly
  the result's shape (``ValueError`` otherwise). The result is cast into it with
  ``same_kind`` casting: float results go to float arrays, integers to integers or
  floats, bool anywhere. That is stricter than NumPy's reductions, which cast
  ``unsafe``ly (a float sum into an int array): such an ``out`` raises
  :class:`OutDtypeError`, a ``ValueError`` that is also a ``TypeError``, the class
  NumPy raises for a forbidden cast. Indices (argmax and friends) need an integer
  ``out``, as NumPy's argmax (int64 results; a narrower integer ``out`` wraps).
* A function that writes its result in place (softmax) takes an ``out`` of the
  result's dtype only.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from numbakern.core.arrays import Workspace, as_cupy, kind_of, on_cupy
from numbakern.kernels.elementwise import cast_into
from numbakern.runtime.views import device_view, flat, host_copy, reshaped

OUT_CASTING = "same_kind"


class OutDtypeError(ValueError, TypeError):
    """``out``'s dtype cannot take the result under ``same_kind`` casting."""


def check_out(out, shape: tuple, dtype, kind: str, name: str, integer: bool = False,
              exact: bool = False, arg: str = "out") -> None:
    """Raise unless ``out`` (or ``None``) can receive a ``dtype`` result of ``shape``.

    Args:
        out: the user's ``out``.
        shape, dtype: the result's.
        kind: the input's array library, ``"numpy"``, ``"cupy"`` or ``"device"``.
        name: the function, for messages.
        integer: ``out`` must have an integer dtype (indices, as NumPy's argmax).
        exact: ``out`` must have ``dtype`` itself (a result written in place).
        arg: ``out``'s name in messages (``grad_out`` ...).

    Raises:
        TypeError: ``out`` is not an array of the input's library.
        ValueError: a wrong shape, a read-only NumPy ``out``; :class:`OutDtypeError`
            for a wrong dtype.
    """
    if out is None:
        return
    if kind == "numpy" and not isinstance(out, np.ndarray):
        raise TypeError(f"{name}: {arg} must be a NumPy array for NumPy input, got "
                        f"{type(out).__name__}")
    if kind == "cupy" and kind_of(out) != "cupy":
        raise TypeError(f"{name}: {arg} must be a CuPy array for CuPy input, got "
                        f"{type(out).__name__}")
    if kind == "device" and kind_of(out) == "numpy":
        raise TypeError(f"{name}: {arg} must be a device array (with "
                        f"__cuda_array_interface__) for device input, got "
                        f"{type(out).__name__}")
    view = out if kind == "numpy" else device_view(out)  # NumPy's dtype, whoever made it
    if tuple(view.shape) != tuple(shape):
        raise ValueError(f"{name}: {arg} has shape {tuple(view.shape)}, the result has shape "
                         f"{tuple(shape)}")
    if kind == "numpy" and not out.flags.writeable:
        raise ValueError(f"{name}: {arg} must be a writeable NumPy array")
    got, dtype = np.dtype(view.dtype), np.dtype(dtype)
    if integer and got.kind not in "iu":
        raise OutDtypeError(f"{name}: indices need an integer {arg}, got dtype {got}")
    if exact and got != dtype:
        raise OutDtypeError(f"{name}: {arg} must have the result's dtype {dtype} (it is "
                            f"written in place), got {got}")
    if not np.can_cast(dtype, got, casting=OUT_CASTING):
        raise OutDtypeError(f"{name}: cannot cast the {dtype} result to {arg}'s dtype {got} "
                            f"with casting rule '{OUT_CASTING}'")


def deliver(workspace: Workspace, arr, dtype, shape, out):
    """A 1-D device array of results as the user's array of ``dtype`` and ``shape``,
    or written into ``out``."""
    dtype = np.dtype(dtype)
    if workspace.kind == "numpy":
        host = host_copy(arr, workspace.stream)
        workspace.stream.synchronize()
        return deliver_host(workspace, host.astype(dtype, copy=False).reshape(shape), out)
    if on_cupy(workspace.kind):
        result = as_cupy(workspace.cast(arr, dtype)).reshape(shape)
        if out is None:
            return result
        out[...] = result
        return out
    if out is not None:
        cast_into(arr, flat(out), workspace.stream)
        return out
    return reshaped(workspace.cast(arr, dtype), shape)


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
        out[...] = cupy.asarray(host)
        return out
    if out is None:
        return cuda.to_device(host, stream=workspace.stream)
    dst = flat(out)
    if dst.shape[0]:
        cast_into(workspace.from_host(host.reshape(-1)), dst, workspace.stream)
    return out
