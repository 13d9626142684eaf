"""The peers of ``numbakern compare`` that take more than one library call: the fused
softmax of Triton's tutorial 02, ``torch.compile`` of softmax, and CCCL's algorithms
from Python (``cuda.compute``: CUB's device-wide reduce, scan, radix sort and
segmented reduce).

Importing this module imports none of torch, triton, CuPy or ``cuda.compute``: each
function is given its library by the caller (``compare``'s ``_module``: torch for the
first two, ``cuda.compute`` for the CCCL ones) or imports it when first called, and
``compare`` calls them only on a GPU. An input a peer does not cover raises
(``ValueError`` or ``TypeError``), which ``compare`` reports as the peer being n/a.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

# --- Triton tutorial 02, Fused Softmax ------------------------------------------------


def softmax_launch(n_cols: int) -> tuple[int, int]:
    """``(BLOCK_SIZE, num_warps)`` of the fused softmax for rows of ``n_cols``.

    The tutorial's rule: a program holds its whole row, padded to the next power of
    two (``triton.next_power_of_2``), and more warps share a longer row: 4 warps, 8
    from a block of 2048 columns, 16 from 4096.

    Raises:
        ValueError: ``n_cols < 1``.
    """
    if n_cols < 1:
        raise ValueError(f"the fused softmax needs at least one column, got {n_cols}")
    block = 1 << (n_cols - 1).bit_length()
    warps = 16 if block >= 4096 else 8 if block >= 2048 else 4
    return block, warps


@lru_cache(maxsize=None)
def _fused_softmax_kernel():
    """The kernel, defined on first use: ``@triton.jit`` needs triton imported."""
    import triton
    import triton.language as tl

    @triton.jit
    def fused_softmax(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols,
                      BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)  # row * stride may pass 2^31 elements
        cols = tl.arange(0, BLOCK_SIZE)
        inside = cols < n_cols
        # the padding reads -inf: it leaves the max alone and adds exp(-inf) = 0
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=inside, other=-float("inf"))
        x = x.to(tl.float32)
        numerator = tl.exp(x - tl.max(x, axis=0))
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty),
                 mask=inside)

    return fused_softmax


def triton_softmax(torch, x, dim: int = -1):
    """Softmax of each row of a 2-D CUDA tensor by the fused kernel of Triton's
    tutorial 02 ("Fused Softmax").

    One program per row (a grid of ``n_rows`` programs, the tutorial's first
    version, not its persistent grid): it loads the row once (masked, the padding up
    to :func:`softmax_launch`'s ``BLOCK_SIZE`` read as -inf), subtracts the row's
    max, exponentiates, divides by the sum and stores, with ``softmax_launch``'s
    ``num_warps``. float16 and bfloat16 rows are computed in float32 and stored in
    their own dtype.

    Args:
        torch: the torch module.
        x: a CUDA tensor of shape ``(n_rows, n_cols)``, float16, bfloat16 or float32,
            its columns contiguous.
        dim: the softmax's axis: the last (-1 or 1).

    Returns:
        A tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: ``x`` not 2-D, ``dim`` not its last axis, columns not contiguous.
        TypeError: another dtype (float64 included: the kernel computes in float32).
    """
    if x.ndim != 2 or dim not in (-1, 1):
        raise ValueError("the tutorial's kernel takes the rows of a 2-D tensor "
                         f"(softmax over the last axis), not dim {dim} of {x.ndim}-D")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"the fused softmax computes in float32: float16, bfloat16 or "
                        f"float32 rows, not {x.dtype}")
    if x.numel() and x.stride(1) != 1:
        raise ValueError("the fused softmax reads rows of contiguous columns")
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.numel() == 0:
        return out
    n_rows, n_cols = x.shape
    block, warps = softmax_launch(n_cols)
    _fused_softmax_kernel()[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols,
                                       BLOCK_SIZE=block, num_warps=warps)
    return out


# --- torch.compile ----------------------------------------------------------------------


@lru_cache(maxsize=None)
def _compiled(torch, name: str, dim: int, shape: tuple, dtype):
    """``torch.compile`` of ``torch.<name>(t, dim)`` for one shape and dtype, with static
    shapes, from a reset Dynamo. Dynamo keys what it compiled by the code object (one
    lambda's, whatever the closure): a second shape through it would be recompiled
    for dynamic shapes (generic, slower kernels), and past its recompile limit (8)
    run eagerly; each case is then what a user compiling for that shape gets."""
    torch._dynamo.reset()
    fn = getattr(torch, name)
    return torch.compile(lambda t: fn(t, dim), dynamic=False)


def compiled_softmax(torch, x, dim: int = -1, log: bool = False):
    """``torch.compile`` of ``torch.softmax(x, dim)`` (``log``: ``torch.log_softmax``).

    Compiled once per (function, dim, shape, dtype), with static shapes (see
    ``_compiled``); the first call compiles, before compare times it. Each build
    resets Dynamo, discarding whatever else the process had compiled: a benchmark's
    peer, not a call for a model's process.

    Args:
        torch: the torch module.
        x: a floating CUDA tensor, any shape.
        dim: the axis to normalise.
        log: log_softmax instead of softmax.

    Returns:
        A tensor of ``x``'s shape and dtype.
    """
    name = "log_softmax" if log else "softmax"
    return _compiled(torch, name, dim, tuple(x.shape), x.dtype)(x)


# --- cuda.compute (CCCL from Python) --------------------------------------------------


def _check_dtype(x) -> None:
    """Raise TypeError unless ``x`` holds integers, float32 or float64 (float16 would
    accumulate in float16, bool is no number to CUB's operators)."""
    dtype = np.dtype(x.dtype)
    if dtype.kind not in "iu" and dtype not in (np.float32, np.float64):
        raise TypeError(f"cuda.compute's built-in operators here take integers, float32 "
                        f"and float64, not {dtype}")


def _whole(x, axis):
    """``x``'s elements as one 1-D CuPy array: the input of CUB's device-wide
    algorithms here (``axis`` None, or the only axis of a 1-D array).

    Raises:
        ValueError: a reduction along one axis of a multi-dimensional array.
        TypeError: as ``_check_dtype``.
    """
    if axis is not None and not (x.ndim == 1 and axis in (0, -1)):
        raise ValueError(f"cuda.compute runs over the whole array here, not along axis "
                         f"{axis} of a {x.ndim}-D array")
    _check_dtype(x)
    return x.ravel()


def _sum_dtype(dtype) -> np.dtype:
    """NumPy's dtype of a sum of ``dtype`` (int32 sums to int64, as numbakern's)."""
    return np.sum(np.zeros(0, dtype)).dtype


def _identity(op: str, dtype: np.dtype) -> np.ndarray:
    """``op``'s identity as CCCL's ``h_init``: a 0-d array, whose dtype is the
    accumulator's."""
    if op == "sum":
        return np.zeros((), dtype)
    if dtype.kind == "f":
        return np.array(-np.inf if op == "max" else np.inf, dtype)
    info = np.iinfo(dtype)
    return np.array(info.min if op == "max" else info.max, dtype)


_PREPARED: dict = {}  # (algorithm, dtypes, sizes, ...) -> (algorithm object, temp storage)
# enough for a benchmark's cases; each holds its storage and its last call's arrays
# (CCCL keeps the owners of the pointers it was called with): clear_prepared frees them
_PREPARED_MAX = 8


def clear_prepared() -> None:
    """Drop every algorithm object :func:`prepared_call` keeps, with its temporary
    storage and the arrays of its last call (a benchmark calls it between cases)."""
    _PREPARED.clear()


def give_back_memory() -> None:
    """Hand the device memory that pools keep back to the driver: the objects
    :func:`prepared_call` keeps, CuPy's pool, torch's caching allocator and Numba's
    pending frees, of the libraries already imported (one process's pools kept 16-23
    GiB of its largest cases' arrays, which ran later cases out of memory:
    bench/NOTES.md). A GPU test or benchmark calls it after each case; under the
    simulator only the kept objects go."""
    import gc
    import sys

    from numbakern.runtime.device import SIMULATOR

    clear_prepared()
    if SIMULATOR:
        return
    gc.collect()  # a failed case's arrays, held in reference cycles
    if "cupy" in sys.modules:
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        sys.modules["torch"].cuda.empty_cache()
    from numba import cuda

    cuda.current_context().deallocations.clear()


def prepared_call(compute, name: str, key: tuple, arrays: dict, build: dict | None = None,
                  call: dict | None = None) -> None:
    """Run ``cuda.compute``'s ``name`` (``make_<name>``) as a user who calls it again and
    again would: the algorithm object built and its temporary storage allocated once
    per ``key`` (what the build depends on: dtypes, operator, sizes), then each call
    the algorithm alone (CCCL's object API). ``arrays``: the arguments both the build
    and the call take (arrays, operator, initial value); ``build`` and ``call``: those
    only one of them takes (``order``; ``num_items``). The one-shot functions
    (``compute.reduce_into``, ...) build a cache key, ask the storage's size and
    allocate and free it on every call: tens of microseconds of host time that a peer
    timed at its best does not spend."""
    import cupy

    call = {**arrays, **(call or {})}
    entry = _PREPARED.get(key)
    if entry is None:
        algorithm = getattr(compute, f"make_{name}")(**arrays, **(build or {}))
        size = algorithm(temp_storage=None, **call)
        if len(_PREPARED) >= _PREPARED_MAX:
            _PREPARED.pop(next(iter(_PREPARED)))  # the oldest
        entry = _PREPARED[key] = (algorithm, cupy.empty(max(int(size), 1), np.uint8))
    algorithm, temp = entry
    algorithm(temp_storage=temp, **call)


def cccl_reduce(compute, x, op: str, axis=None):
    """NumPy's ``sum``, ``max`` or ``min`` of a whole CuPy array by ``cuda.compute``'s
    reduce (``make_reduce_into``, CUB's ``DeviceReduce``: ``prepared_call``) with a
    built-in operator (``OpKind.PLUS``, ``MAXIMUM``, ``MINIMUM``), from the operator's
    identity.

    Args:
        compute: the ``cuda.compute`` module.
        x: a CuPy array of integers, float32 or float64, any shape.
        op: ``"sum"``, ``"max"`` or ``"min"``.
        axis: None (or 0 of a 1-D array).

    Returns:
        A 0-d CuPy array of NumPy's result dtype (a sum of int32: int64). Max and min
        do not propagate NaN as NumPy does (CUB's operators compare).

    Raises:
        ValueError, TypeError: as ``_whole`` (an axis; another dtype).
    """
    import cupy

    flat = _whole(x, axis)
    dtype = _sum_dtype(flat.dtype) if op == "sum" else np.dtype(flat.dtype)
    kind = {"sum": compute.OpKind.PLUS, "max": compute.OpKind.MAXIMUM,
            "min": compute.OpKind.MINIMUM}[op]
    out = cupy.empty(1, dtype)
    init = _identity(op, dtype)
    prepared_call(compute, "reduce_into", ("reduce", op, flat.dtype.str, dtype.str, flat.size),
                  dict(d_in=flat, d_out=out, op=kind, h_init=init),
                  call=dict(num_items=flat.size))
    return out.reshape(())


def cccl_cumsum(compute, x, axis=None):
    """NumPy's ``cumsum`` of a whole CuPy array (flattened, as NumPy's without an
    axis) by ``cuda.compute``'s ``make_inclusive_scan`` (CUB's ``DeviceScan``,
    ``OpKind.PLUS`` from 0 in the result dtype, so int32 accumulates in int64).

    Returns:
        A 1-D CuPy array of ``x.size`` elements, NumPy's result dtype.

    Raises:
        ValueError, TypeError: as ``_whole``.
    """
    import cupy

    flat = _whole(x, axis)
    dtype = _sum_dtype(flat.dtype)
    out = cupy.empty(flat.size, dtype)
    plus, init = compute.OpKind.PLUS, np.zeros((), dtype)
    prepared_call(compute, "inclusive_scan", ("scan", flat.dtype.str, dtype.str, flat.size),
                  dict(d_in=flat, d_out=out, op=plus, init_value=init),
                  call=dict(num_items=flat.size))
    return out


def cccl_sort(compute, x, axis=-1):
    """The ascending sort of a 1-D CuPy array by ``cuda.compute``'s ``make_radix_sort``
    (CUB's ``DeviceRadixSort``, keys only).

    Raises:
        ValueError: ``x`` not 1-D.
    """
    import cupy

    if x.ndim != 1:
        raise ValueError(f"cuda.compute.radix_sort sorts one row, not a {x.ndim}-D array")
    out = cupy.empty_like(x)
    prepared_call(compute, "radix_sort", ("sort", x.dtype.str, x.size),
                  dict(d_in_keys=x, d_out_keys=out, d_in_values=None, d_out_values=None),
                  build=dict(order=compute.SortOrder.ASCENDING), call=dict(num_items=x.size))
    return out


def cccl_segmented_sum(compute, x, offsets):
    """The sum of each segment ``x[offsets[i]:offsets[i + 1]]`` by
    ``cuda.compute``'s ``make_segmented_reduce`` (CUB's ``DeviceSegmentedReduce``,
    ``OpKind.PLUS`` from 0).

    Args:
        compute: the ``cuda.compute`` module.
        x: a 1-D CuPy array of integers, float32 or float64.
        offsets: a 1-D CuPy int64 array of ``num_segments + 1`` ascending offsets.

    Returns:
        A CuPy array of ``num_segments`` sums, NumPy's sum dtype.

    Raises:
        ValueError: ``x`` not 1-D.
        TypeError: as ``_check_dtype``.
    """
    import cupy

    if x.ndim != 1:
        raise ValueError(f"segments of a 1-D array, not of a {x.ndim}-D one")
    _check_dtype(x)
    dtype = _sum_dtype(x.dtype)
    out = cupy.empty(offsets.size - 1, dtype)
    arrays = dict(d_in=x, d_out=out, start_offsets_in=offsets[:-1],
                  end_offsets_in=offsets[1:], op=compute.OpKind.PLUS,
                  h_init=np.zeros((), dtype))
    key = ("segments", x.dtype.str, dtype.str, x.size, offsets.dtype.str, offsets.size)
    prepared_call(compute, "segmented_reduce", key, arrays,
                  call=dict(num_segments=offsets.size - 1))
    return out


def cccl_segmented_sort(compute, keys, values, offsets):
    """Each segment ``keys[offsets[i]:offsets[i + 1]]`` sorted ascending, ``values``
    carried along, by ``cuda.compute``'s ``make_segmented_sort`` (CUB's
    ``DeviceSegmentedSort``: not stable).

    Args:
        compute: the ``cuda.compute`` module.
        keys, values: 1-D CuPy arrays of one length.
        offsets: a 1-D CuPy array of ``num_segments + 1`` ascending offsets.

    Returns:
        ``(keys, values)``: new CuPy arrays.
    """
    import cupy

    out_keys, out_values = cupy.empty_like(keys), cupy.empty_like(values)
    arrays = dict(d_in_keys=keys, d_out_keys=out_keys, d_in_values=values,
                  d_out_values=out_values, start_offsets_in=offsets[:-1],
                  end_offsets_in=offsets[1:])
    key = ("segmented_sort", keys.dtype.str, values.dtype.str, keys.size, offsets.dtype.str,
           offsets.size)
    prepared_call(compute, "segmented_sort", key, arrays,
                  build=dict(order=compute.SortOrder.ASCENDING),
                  call=dict(num_items=keys.size, num_segments=offsets.size - 1))
    return out_keys, out_values
