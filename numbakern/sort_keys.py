"""Sort keys: any dtype's values as unsigned integers that compare in NumPy's order.

Both sort strategies (``strategies/bitonic_sort.py``, ``strategies/radix_sort.py``)
compare, or take digits of, unsigned integers. The input's bits are read through an
unsigned view of the same width (bool and int8 as uint8, float16 as uint16, ...) and
``to_key`` turns them into a key whose unsigned order is NumPy's order:

* **unsigned ints, bool**: the bits themselves;
* **signed ints**: flip the sign bit (``-1`` = ``0xFF..`` becomes ``0x7F..``, below
  ``0`` = ``0x80..``);
* **floats**: ``-0.0`` becomes ``+0.0`` and every NaN the all-ones key (above
  ``+inf``: NaN sorts last, all NaNs equal); then a negative value has all its bits
  flipped (a larger magnitude becomes a smaller key) and a positive one its sign bit
  set (above every negative);
* **descending**: the key complemented (largest first; NaN then comes first, as in
  ``torch.sort(descending=True)``).

Equal keys (``-0.0`` and ``+0.0`` among them) keep their input order in both
strategies, so the sorted *values* are read back from the input by index: the
exact bits (``-0.0``, NaN payloads) come out where a stable sort puts them.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int64, uint64

from . import kernels
from .arrays import SIMULATOR, Workspace, _to_device, as_cupy, host_copy
from .launch import buffer


def bits_dtype(dtype: np.dtype) -> np.dtype:
    """The unsigned integer dtype of ``dtype``'s width (the input is read as it)."""
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def check_dtype(dtype: np.dtype, name: str = "x") -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf" or dtype.itemsize > 8:  # keys are at most 64-bit
        raise TypeError(f"{name} must have a bool, integer or float dtype of at most 8 "
                        f"bytes, got {dtype}")
    return dtype


def build_to_key(dtype: np.dtype, descending: bool):
    """Device function ``to_key(bits) -> key`` (both of ``bits_dtype(dtype)``)."""
    dtype = np.dtype(dtype)
    width = 8 * dtype.itemsize
    kt = from_dtype(bits_dtype(dtype))
    sign = uint64(1 << (width - 1))
    ones = uint64((1 << width) - 1)
    flip = ones if descending else uint64(0)
    kind = dtype.kind
    if kind == "f":
        finfo = np.finfo(dtype)
        inf = uint64(((1 << finfo.nexp) - 1) << finfo.nmant)  # +inf's bits
        magnitude = uint64((1 << (width - 1)) - 1)

        top = uint64(width - 1)

        @cuda.jit(device=True)
        def to_key(bits):
            # Selects, not branches: a radix sort pass takes a key's digit several
            # times, and divergent branches cost more than these few operations.
            u = uint64(bits)
            m = u & magnitude
            negative = (uint64(0) - (u >> top)) & ones  # all ones for a negative value
            k = u ^ (negative | sign)  # negative: every bit flipped; else the sign set
            k = sign if m == uint64(0) else k  # -0.0 == +0.0
            k = ones if m > inf else k  # NaN: above everything
            return kt(k ^ flip)

        return to_key
    lead = sign if kind == "i" else uint64(0)

    @cuda.jit(device=True)
    def to_key(bits):
        return kt((uint64(bits) ^ lead) ^ flip)

    return to_key


def max_key(dtype: np.dtype) -> int:
    """The largest key (padding that sorts after every real key of equal value)."""
    return (1 << (8 * np.dtype(dtype).itemsize)) - 1


class SortJob:
    """One sort in flight: ``rows`` independent rows of ``n`` elements, sorted.

    Attributes:
        x: the input's bits, a 1-D C-contiguous device array of ``rows * n``
            unsigned ints (row ``r`` at ``[r*n, (r+1)*n)``).
        out: where the result goes, 1-D like ``x``: int64 indices within the row
            (``indices``) or the sorted values' bits.
        indices: write indices (argsort) rather than values (sort).
        descending: largest first.
        dtype: the input's dtype (the key rule); ``to_key`` its device function.
    """

    def __init__(self, x, out, rows: int, n: int, dtype: np.dtype, descending: bool,
                 indices: bool, workspace: Workspace):
        self.x, self.out = x, out
        self.rows, self.n = int(rows), int(n)
        self.dtype = np.dtype(dtype)
        self.key_dtype = bits_dtype(self.dtype)
        self.descending, self.indices = bool(descending), bool(indices)
        self.workspace = workspace
        self.stream = workspace.stream
        self.key = (self.dtype.str, self.descending, self.indices, kernels.device_key())

    def to_key(self):
        return kernels.cached(("sort_to_key", self.dtype.str, self.descending),
                              lambda: build_to_key(self.dtype, self.descending))

    def emitter(self):
        """Device function ``emit(x, out, base, j, i)``: output ``base + j`` gets row
        element ``i`` (its index, or its value's bits)."""
        return _EMIT_INDEX if self.indices else _EMIT_VALUE


@cuda.jit(device=True)
def _EMIT_INDEX(x, out, base, j, i):
    out[base + j] = int64(i)


@cuda.jit(device=True)
def _EMIT_VALUE(x, out, base, j, i):
    out[base + j] = x[base + i]


def flat_device(arr, workspace: Workspace, view_dtype=None):
    """``arr`` (a NumPy or CuPy array, already laid out) as a 1-D C-contiguous device
    view, its bits read as ``view_dtype`` (default its own dtype).

    NumPy arrays are made contiguous on the host and transferred once; CuPy arrays
    are made contiguous on the device (a copy only if they are not already).
    """
    view_dtype = np.dtype(arr.dtype if view_dtype is None else view_dtype)
    if isinstance(arr, np.ndarray):
        host = np.ascontiguousarray(arr).reshape(-1)
        if not host.dtype.isnative:
            host = host.astype(host.dtype.newbyteorder("="))
        return _to_device(host.view(view_dtype), workspace.stream)
    import cupy

    return buffer(cupy.ascontiguousarray(arr).reshape(-1).view(view_dtype))


def as_layout_array(x, kind: str):
    """``(array, wrap)``: the input as a NumPy or CuPy array to lay out, and how to
    return a result of that kind (NumPy in, NumPy out; CuPy in, CuPy out; other device
    arrays: a Numba device array)."""
    if kind == "numpy":
        return np.asarray(x), lambda r: r
    if kind == "cupy" and not SIMULATOR:
        return x, lambda r: r
    if SIMULATOR:  # a simulator device array: lay it out on the host
        return x.copy_to_host(), lambda r: cuda.to_device(np.ascontiguousarray(r))
    import cupy

    return cupy.asarray(x), lambda r: cuda.as_cuda_array(r)


def to_user(buf, workspace: Workspace, shape, dtype=None):
    """A 1-D device result as the caller's NumPy or CuPy array of ``shape`` (its bits
    read as ``dtype``)."""
    if workspace.kind == "numpy" or SIMULATOR:
        out = host_copy(buf, workspace.stream)
        workspace.stream.synchronize()
    else:
        out = as_cupy(buf)
    if dtype is not None:
        out = out.view(dtype)
    return out.reshape(shape)
