"""Selection: ``topk``, the ``k`` largest (or smallest) elements along an axis.

``topk(x, k)`` returns ``(values, indices)``, a named tuple as
``torch.return_types.topk``, with torch's contract: NaN counts as larger than every
number, ``k`` from 0 to the axis length. Where torch leaves ties open, numbakern
picks one answer: the lower index first, as a stable sort (``x[i] == x[j]`` with
``i < j``: ``i`` is taken first and, in a sorted answer, comes first; ``-0.0`` and
``+0.0`` are equal). The strategies (``numbakern.strategies.available("select")``):
``radix_block_select`` (a radix select in each row's block, ``k <= 2048``),
``bitonic_select`` (a block per row, ``k <= 256``), ``radix_select`` (digit by
digit over many blocks, any ``k`` and row length) and ``sort_slice`` (stable
argsort, then slice).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from numbakern import strategies as _strategies
from numbakern.api._dispatch import dispatch
from numbakern.api.sort import INDEX_DTYPE, _moveaxis, _restore, _xp, check_dtype
from numbakern.core.arrays import (BFloat16Bits, Workspace, as_array_like, as_layout_array,
                                   flat_device, flattened, honours_stream, kind_of, resolve_stream,
                                   to_user)
from numbakern.core.axes import LAST, axis_index, axis_or_dim, check_flag, optional_axis
from numbakern.core.jobs import SelectJob
from numbakern.kernels.sort_keys import BFLOAT16, bits_dtype
from numbakern.runtime.checks import check_count
from numbakern.runtime.replay import replayable




class TopK(NamedTuple):
    """What :func:`topk` returns, as ``torch.return_types.topk``."""

    values: Any
    indices: Any


@dispatch
@replayable
@honours_stream
def topk(x, k, axis=LAST, largest=True, sorted=True, *, dim=None, strategy=None,
         stream=None):
    """The ``k`` largest (``largest=False``: smallest) elements of ``x`` along ``axis``,
    and their indices, as ``torch.topk(x, k, dim=axis, largest, sorted)``.

    Args:
        x: a NumPy array (or anything ``np.asarray`` takes), a CuPy array, a torch
            tensor or any ``__cuda_array_interface__`` array; any shape, any layout;
            dtypes bool, int8-int64, uint8-uint64, float16, bfloat16 (read in place),
            float32, float64 (those :func:`numbakern.sort` takes). A 0-d ``x`` is
            taken as torch takes it: ``k`` 0 or 1, ``axis`` -1 or 0, and 0-d results
            (``x`` itself and index 0, for ``k=0`` too, as ``torch.topk``).
        k: an int from 0 (empty results) to the length of ``axis``.
        axis: an int (default ``-1``) or ``None`` (the flattened array, C order).
        dim: torch's name for ``axis`` (keyword only); giving both is a
            ``TypeError``.
        largest: the largest (True) or the smallest (False).
        sorted: True: in order along ``axis`` (largest first, or smallest first).
            False: the same elements, in an order the strategy states:
            ``radix_select`` gives them in index order (ascending index), the
            others sorted anyway.
        strategy: ``None`` (``radix_block_select`` for ``k <= 2048`` on rows of at
            most 2**17 elements, else ``radix_select``), a name from
            ``numbakern.strategies.available("select")`` or a strategy object
            (``RadixBlockSelect``, ``BitonicSelect``, ``RadixSelect``, ``SortSlice``).
        stream: as the sorts (a Numba or CuPy stream, or a raw pointer).

    Returns:
        ``TopK(values, indices)``: ``values`` of ``x``'s dtype (the elements' exact
        bits: ``-0.0``, NaN payloads), ``indices`` int64 positions along ``axis``;
        both of ``x``'s shape with ``axis`` of length ``k`` (``(k,)`` for
        ``axis=None``), C-contiguous, in the caller's array type.

    The order is the sort's: ``-inf < ... < -0.0 == +0.0 < ... < +inf < NaN``, all
    NaNs equal (NaN is the largest, as ``torch.topk``: ``largest=True`` gives NaNs
    first, ``largest=False`` takes them last). **Ties**: among equal values the
    lower index is taken first and, in a sorted answer, comes first: the answer is
    the first ``k`` of ``argsort(x, descending=largest)`` (stable), whatever the
    strategy. torch's CPU ``topk`` leaves the order of ties open, so its indices
    may differ from these where values tie; the values never do.

    Raises:
        TypeError: ``k`` not an int; a non-bool ``largest`` or ``sorted``; a dtype
            outside bool/int/uint/float; a strategy of another family; ``axis`` and
            ``dim`` both given; ``axis`` not an int or None; a bad ``stream``.
        ValueError: ``k`` below 0 or above the axis length; an unknown strategy;
            ``bitonic_select`` asked for ``k`` above its ``max_k`` (256),
            ``radix_block_select`` above its ``capacity`` (2048).
        numpy.exceptions.AxisError: ``axis`` out of range (for a 0-d input: other
            than -1, 0 and None; an ``IndexError``, as torch's).

    Algorithms: radix select (Alabi et al., "Fast k-selection algorithms for graphics
    processing units", 2012; as ``torch.topk``), in one block per row with its
    candidates in shared memory (as RAFT's one-block radix top-k) or over many blocks
    a row, a per-block bitonic select after FAISS's BlockSelect (Johnson, Douze and
    Jégou, 2017), and a stable sort then a slice
    (``numbakern/strategies/radix_block_select.py``, ``radix_select.py``,
    ``bitonic_select.py``, ``sort_slice.py``).
    """
    axis = axis_or_dim(axis, dim, "topk")
    asked = x.dtype if isinstance(x, np.ndarray) else None
    if isinstance(x, BFloat16Bits):  # selected by bfloat16 keys, values kept as bits
        x, dtype = as_array_like(x.bits), BFLOAT16
        stored = np.dtype(x.dtype)
    else:
        x = as_array_like(x)
        dtype = stored = check_dtype(x.dtype)
    if len(x.shape) == 0 and axis is not None:
        given = x if asked is None or asked.isnative else np.asarray(x, asked)
        return _topk_0d(given, k, axis, largest, sorted, strategy, stream)
    kind = kind_of(x)
    largest = check_flag(largest, "largest")
    in_order = check_flag(sorted, "sorted")
    shape = tuple(x.shape)
    axis = optional_axis(axis, len(shape))
    arr, wrap = as_layout_array(x, kind)
    moved = flattened(arr) if axis is None else _moveaxis(arr, axis, -1)
    n = moved.shape[-1]
    k = _check_k(k, n)
    selector = _strategies.resolve("select", strategy, n=n, k=max(k, 1))
    selector.check(n, k)
    out_shape = moved.shape[:-1] + (k,)
    rows = math.prod(moved.shape[:-1])
    if rows * k == 0:
        xp = _xp(arr)
        kept = asked if asked is not None and not asked.isnative else stored
        return TopK(wrap(_restore(xp.empty(out_shape, kept), axis)),
                    wrap(_restore(xp.empty(out_shape, INDEX_DTYPE), axis)))
    workspace = Workspace(kind, resolve_stream(stream, kind))
    bits = bits_dtype(dtype)
    xbits = flat_device(moved, workspace, bits)
    values = workspace.empty(rows * k, bits)
    indices = workspace.empty(rows * k, INDEX_DTYPE)
    selector.select(SelectJob(xbits, values, indices, rows, n, k, dtype, largest, in_order,
                              workspace))
    got_values = to_user(values, workspace, out_shape, stored)
    if asked is not None and not asked.isnative:
        got_values = got_values.astype(asked)  # NumPy keeps a big-endian input's byte order
    return TopK(wrap(_restore(got_values, axis)),
                wrap(_restore(to_user(indices, workspace, out_shape), axis)))


def _topk_0d(x, k, axis, largest, sorted, strategy, stream) -> TopK:
    """``torch.topk`` of a 0-d input: ``axis`` -1 or 0, ``k`` 0 or 1 (torch gives the
    element for both), 0-d results."""
    if axis_index(axis) not in (0, -1):
        raise np.exceptions.AxisError(f"axis {axis!r} is out of range for a 0-d x: "
                                      f"topk takes -1, 0 or None there (as torch.topk)")
    k = check_count(k, "k")
    if k not in (0, 1):
        raise ValueError(f"k must be 0 or 1 for a 0-d x (as torch.topk), got {k}")
    top = topk(x.reshape(1), 1, 0, largest, sorted, strategy=strategy, stream=stream)
    return TopK(top.values.reshape(()), top.indices.reshape(()))


def _check_k(k, n: int) -> int:
    k = check_count(k, "k")
    if not 0 <= k <= n:
        raise ValueError(f"k must be from 0 to the length of the axis ({n}), got {k}")
    return k


__all__ = ["TopK", "topk"]
