"""Results back in the caller's array type: NumPy in, NumPy out; CuPy in, CuPy out;
other device arrays as Numba device arrays; or written into the caller's ``out``.

Kernels write 1-D device arrays (in an accumulator dtype, for reductions); every
public function hands them back through here, so the rules live once.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from numbakern.core.arrays import Workspace, as_cupy
from numbakern.kernels.elementwise import cast_into
from numbakern.runtime.device import SIMULATOR
from numbakern.runtime.views import flat, host_copy, reshaped

def deliver(workspace: Workspace, arr, dtype, shape, out):
    """A 1-D device array of results as the user's array of ``dtype`` and ``shape``,
    or written into ``out``."""
    dtype = np.dtype(dtype)
    if workspace.kind == "numpy":
        host = host_copy(arr, workspace.stream)
        workspace.stream.synchronize()
        return deliver_host(workspace, host.astype(dtype, copy=False).reshape(shape), out)
    if workspace.kind == "cupy" and not SIMULATOR:
        result = as_cupy(arr).astype(dtype, copy=False).reshape(shape)
        if out is None:
            return result
        out[...] = result
        return out
    if out is not None:
        cast_into(arr, flat(out), workspace.stream)
        return out
    if np.dtype(arr.dtype) != dtype:
        cast = workspace.empty(arr.shape[0], dtype)
        cast_into(arr, cast, workspace.stream)
        arr = cast
    return reshaped(arr, shape)


def deliver_host(workspace: Workspace, host: np.ndarray, out):
    """A host array of results (empty or constant reductions) as the user's array."""
    if workspace.kind == "numpy":
        if out is None:
            return host[()] if host.ndim == 0 else host
        np.copyto(out, host, casting="unsafe")  # check_out allowed the cast
        return out
    if workspace.kind == "cupy" and not SIMULATOR:
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
