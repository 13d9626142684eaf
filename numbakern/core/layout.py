"""Layouts: how an array's axes reach the kernels, as strided views of its own memory.

Kernels see few dimensions: a reduction sees ``(M outputs, N elements each)`` as a 4-D
view ``[K0, K1, R0, R1]``, a softmax or a scan ``(outer, inner, n)`` with the axis
last, a whole-array reduction one run. The rules here find such views without moving
a byte: axes are sorted by stride and merged where the memory allows
(``stride_outer == extent * stride_inner``). Only a layout that would need more
dimensions than a kernel takes is copied, and that copy is announced with a
:class:`~numbakern.core.arrays.CopyWarning`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from numbakern.core.arrays import CopyWarning, as_cupy_stream, contiguous_copy, kind_of
from numbakern.kernels.axis_reduce import AxisReduce, TinyRows, tiny_row_width
from numbakern.kernels.flat_reduce import FlatReduce
from numbakern.runtime.device import SIMULATOR
from numbakern.runtime.launch import buffer
from numbakern.runtime.memo import planner
from numbakern.runtime.stacklevel import warn
from numbakern.runtime.views import device_view, strided, to_device

def collapse(shape, strides, any_order: bool) -> list[tuple[int, int]]:
    """Merge dimensions into the fewest ``(extent, stride)`` pairs.

    Length-1 dimensions are dropped; a dimension merges into the one outside it when
    ``outer_stride == extent * stride``. With ``any_order`` (a commutative op whose
    result does not depend on element order) dimensions are first sorted by
    stride, so an F-ordered array becomes one contiguous run.
    """
    dims = [(int(n), int(s)) for n, s in zip(shape, strides) if n != 1]
    if any_order:
        dims.sort(key=lambda d: -abs(d[1]))
    merged: list[tuple[int, int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == n * s:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    return merged


def axis_last_views(arrays: list, axis: int):
    """3-D ``(outer, inner, n)`` views of same-shaped device arrays, ``axis`` last.

    The other dimensions merge where every array's strides allow (so each array keeps
    its own memory layout, nothing is copied); ``None`` when more than two outer
    dimensions would remain.
    """
    shape = tuple(arrays[0].shape)
    dims: list[tuple[int, tuple[int, ...]]] = []
    for d, extent in enumerate(shape):
        if d == axis or extent == 1:
            continue
        strides = tuple(a.strides[d] for a in arrays)
        if dims and all(p == extent * s for p, s in zip(dims[-1][1], strides)):
            dims[-1] = (dims[-1][0] * extent, strides)
        else:
            dims.append((extent, strides))
    if len(dims) > 2:
        return None
    dims = [(1, (0,) * len(arrays))] * (2 - len(dims)) + dims
    return [
        strided(a, [(dims[0][0], dims[0][1][k]), (dims[1][0], dims[1][1][k]),
                     (shape[axis], a.strides[axis])], np.dtype(a.dtype))
        for k, a in enumerate(arrays)
    ]


def flat_view(x, any_order: bool, stream):
    """The input as a 1-D or 2-D device view in C order (``any_order``: memory order).

    Returns ``(view, n)``. NumPy input is transferred once; device input is viewed in
    place unless its layout needs three strided dimensions (then copied, with a
    :class:`CopyWarning`).
    """
    n = math.prod(x.shape)
    if kind_of(x) == "numpy":
        host = x.ravel(order="K") if any_order else np.ascontiguousarray(x).ravel()
        return to_device(host, stream), n
    view = device_view(x)
    if not SIMULATOR and view.c_contiguous:  # the common case, without collapse()'s loop
        return view.with_layout((n,), (view.dtype.itemsize,)), n
    dims = collapse(x.shape, view.strides, any_order)
    if len(dims) > 2:
        warn(
            f"numbakern copied a {x.shape} input whose strides {view.strides} need more "
            "than two strided dimensions; pass a contiguous array to avoid the copy",
            CopyWarning)
        packed = contiguous_copy(x, view, stream)
        return strided(packed, [(n, np.dtype(x.dtype).itemsize)], np.dtype(x.dtype)), n
    return strided(view, dims, np.dtype(x.dtype)), n


# --- layout: the (M, N) view ----------------------------------------------------------


@dataclass(frozen=True)
class Dims:
    """Collapsed dimensions, outermost first: ``(extent, stride_bytes, mult)`` each."""

    kept: tuple[tuple[int, int, int], ...]
    reduced: tuple[tuple[int, int, int], ...]

    @property
    def fits(self) -> bool:
        """Whether a 4-D view (two kept, two reduced dimensions) describes it."""
        return len(self.kept) <= 2 and len(self.reduced) <= 2


def _c_mults(extents) -> list[int]:
    """C-order multipliers of a shape: ``mult[i] = prod(extents[i+1:])``."""
    mults, m = [], 1
    for n in reversed(extents):
        mults.append(m)
        m *= n
    return mults[::-1]


def _collapse(dims, sort: bool) -> tuple:
    dims = [d for d in dims if d[0] != 1]
    if sort:  # memory order, outermost first (stable: ties keep axis order)
        dims.sort(key=lambda d: -abs(d[1]))
    merged: list[tuple[int, int, int]] = []
    for n, s, m in dims:
        if merged and merged[-1][1] == n * s and merged[-1][2] == n * m:
            merged[-1] = (merged[-1][0] * n, s, m)
        else:
            merged.append((n, s, m))
    return tuple(merged)


@planner  # a pure function of its arguments; a repeated layout costs a lookup
def plan_dims(shape, strides, axes, track_index: bool, any_order: bool) -> Dims:
    """Collapse kept and reduced axes of an array with ``shape``/``strides`` (bytes).

    Kept axes are sorted by stride (each carries its place in the C-ordered result).
    Reduced axes are sorted too when ``any_order`` (a commutative op); with
    ``track_index`` each carries its C-order index multiplier, and axes merge only
    where both memory and index allow.
    """
    kept_axes = [a for a in range(len(shape)) if a not in axes]
    red_axes = sorted(axes)
    out_mults = _c_mults([shape[a] for a in kept_axes])
    idx_mults = _c_mults([shape[a] for a in red_axes]) if track_index else [0] * len(red_axes)
    kept = [(shape[a], strides[a], m) for a, m in zip(kept_axes, out_mults)]
    red = [(shape[a], strides[a], m) for a, m in zip(red_axes, idx_mults)]
    return Dims(_collapse(kept, True), _collapse(red, any_order))


@dataclass(frozen=True)
class AxisView:
    """The kernels' view of a reduction: ``view[k0, k1, r0, r1]`` and its numbers."""

    view: object
    M: int
    N: int
    K1: int
    R1: int
    out_mult: tuple[int, int]
    index_mult: tuple[int, int]
    reduced_dims: int  # 1: r1 alone; 2: r0 and r1 (one division per element)
    kept_stride: int  # innermost kept stride, bytes (0 when nothing is kept)
    reduced_stride: int  # innermost reduced stride, bytes


def _pad(dims, itemsize: int) -> list[tuple[int, int, int]]:
    return [(1, itemsize, 0)] * (2 - len(dims)) + list(dims)


def axis_view(x, axes, track_index: bool, any_order: bool, stream) -> AxisView:
    """Describe reducing ``axes`` of ``x`` (NumPy, CuPy or device array) to the kernels.

    NumPy input is transferred once, in its own memory order (a C- or F-ordered or
    any permuted array moves as it lies; a gapped or reversed one is packed by the
    host copy it needs anyway); device input is viewed in place. A layout whose kept
    or reduced axes do not collapse to two dimensions each is transposed first
    (device input: a copy, with a CopyWarning).
    """
    dtype = np.dtype(x.dtype)
    host = kind_of(x) == "numpy"
    base, perm, strides = _read_as(x, host)
    dims = plan_dims(x.shape, strides, axes, track_index, any_order)
    if not dims.fits:
        base, shape, axes = _transposed(x, axes, stream)
        dims = plan_dims(shape, _c_strides(shape, dtype.itemsize), axes, track_index,
                         any_order)
    elif host:
        base = to_device(np.ascontiguousarray(x.transpose(perm)), stream)
    kept, red = _pad(dims.kept, dtype.itemsize), _pad(dims.reduced, dtype.itemsize)
    view = strided(base, [(n, s) for n, s, _ in kept + red], dtype)
    return AxisView(
        view=view,
        M=kept[0][0] * kept[1][0],
        N=red[0][0] * red[1][0],
        K1=kept[1][0],
        R1=red[1][0],
        out_mult=(kept[0][2], kept[1][2]),
        index_mult=(red[0][2], red[1][2]),
        reduced_dims=2 if red[0][0] > 1 else 1,
        kept_stride=abs(dims.kept[-1][1]) if dims.kept else 0,
        reduced_stride=abs(dims.reduced[-1][1]) if dims.reduced else 0,
    )


def _read_as(x, host: bool) -> tuple:
    """``(device view, perm, strides)`` of how the kernels will read ``x``: a device
    array in place (its own strides; no perm), a host array as the copy it is
    uploaded as, its own memory order packed (``perm``: that order; no view yet)."""
    if not host:
        base = device_view(x)
        return base, None, base.strides
    itemsize = np.dtype(x.dtype).itemsize
    perm = sorted(range(x.ndim), key=lambda a: -abs(x.strides[a]))
    packed = _c_strides([x.shape[a] for a in perm], itemsize)
    strides = [0] * x.ndim
    for i, a in enumerate(perm):
        strides[a] = packed[i]
    return None, perm, strides


def _c_strides(shape, itemsize: int) -> tuple[int, ...]:
    return tuple(m * itemsize for m in _c_mults(shape))


def _transposed(x, axes, stream):
    """``x`` with kept axes first, then reduced axes, C-contiguous on the device (two
    dimensions after collapsing). Returns ``(device array, its shape, reduced axes)``."""
    kept = [a for a in range(x.ndim) if a not in axes]
    perm = kept + sorted(axes)
    shape = tuple(x.shape[a] for a in perm)
    moved = tuple(range(len(kept), x.ndim))
    if kind_of(x) == "numpy":
        return to_device(np.ascontiguousarray(x.transpose(perm)), stream), shape, moved
    warn(
        f"numbakern copied a {x.shape} input: its kept and reduced axes {tuple(axes)} do "
        "not collapse to two strided dimensions each; pass a contiguous array to avoid "
        "the copy",
        CopyWarning)
    if SIMULATOR:
        return to_device(np.ascontiguousarray(x.copy_to_host().transpose(perm)), stream), \
            shape, moved
    try:  # a device-side transpose; CuPy views any __cuda_array_interface__ array
        import cupy
    except ImportError:
        raise RuntimeError(f"numbakern copies a {x.shape} input of this layout with CuPy, "
                           "which is not installed: pass a contiguous array") from None
    with as_cupy_stream(stream):  # the copy in order with the call's kernels
        packed = cupy.ascontiguousarray(cupy.asarray(buffer(x)).transpose(perm))
    return buffer(packed), shape, moved


def scan_views(xv, outs: list, axis):
    """3-D ``(A, B, n)`` views of the input and outputs: the scanned axis last, the
    others merged where every array's strides allow. ``None`` if more than two outer
    dimensions (or, for ``axis=None``, more than one flat one) would remain."""
    if axis is None:  # the flattened input in C order; outputs are 1-D
        dims = collapse(xv.shape, xv.strides, False)
        if len(dims) > 1:
            return None
        n, stride = dims[0] if dims else (1, np.dtype(xv.dtype).itemsize)
        flat = [(1, 0), (1, 0), (n, stride)]
        return [strided(xv, flat, np.dtype(xv.dtype))] + [
            strided(o, [(1, 0), (1, 0), (n, o.strides[0])], np.dtype(o.dtype)) for o in outs]
    return axis_last_views([xv] + outs, axis)


# --- which layout a reduction takes ----------------------------------------------------------


# --- a reduction's where= mask, read beside the input -------------------------------------


@dataclass(frozen=True)
class MaskedView:
    """A reduction's layout with NumPy's ``where=``: ``av`` (the input's
    :class:`AxisView`) and ``mask``, a bool 4-D device view indexed exactly as
    ``av.view`` (a broadcast axis at stride 0: no array of the input's size is made)."""

    av: AxisView
    mask: object


def _host_mask(mask: np.ndarray) -> np.ndarray:
    """A host mask as it is uploaded: its stride-0 (broadcast) axes cut to length 1,
    the rest contiguous, so the upload is the mask's own size at most."""
    return np.ascontiguousarray(mask[tuple(slice(0, 1) if s == 0 else slice(None)
                                           for s in mask.strides)])


def _broadcast_strides(mask_shape, mask_strides, shape) -> tuple[int, ...]:
    """The strides of a mask broadcast to ``shape``: 0 along its length-1 and its
    missing (leading) axes."""
    while len(mask_shape) > len(shape):  # leading length-1 axes (a 0-d x's mask)
        mask_shape, mask_strides = mask_shape[1:], mask_strides[1:]
    pad = len(shape) - len(mask_shape)
    return (0,) * pad + tuple(0 if e == 1 and n != 1 else s for e, s, n in
                              zip(mask_shape, mask_strides, shape[pad:]))


def _joint(dims, sort: bool) -> tuple:
    """Collapse ``(extent, x_stride, mask_stride, mult)`` dimensions: sorted by the
    input's strides when ``sort``, merged only where the input, the mask and the
    multiplier all allow."""
    dims = [d for d in dims if d[0] != 1]
    if sort:
        dims.sort(key=lambda d: -abs(d[1]))
    merged: list[tuple[int, int, int, int]] = []
    for n, s, w, m in dims:
        if merged and merged[-1][1] == n * s and merged[-1][2] == n * w \
                and merged[-1][3] == n * m:
            merged[-1] = (merged[-1][0] * n, s, w, m)
        else:
            merged.append((n, s, w, m))
    return tuple(merged)


def _joint_dims(shape, strides, mask_strides, axes, track_index: bool, any_order: bool):
    """:func:`plan_dims` for the input and its mask together: ``(kept, reduced)``
    tuples of ``(extent, x_stride, mask_stride, mult)``."""
    kept_axes = [a for a in range(len(shape)) if a not in axes]
    red_axes = sorted(axes)
    out_mults = _c_mults([shape[a] for a in kept_axes])
    idx_mults = _c_mults([shape[a] for a in red_axes]) if track_index else [0] * len(red_axes)
    kept = [(shape[a], strides[a], mask_strides[a], m) for a, m in zip(kept_axes, out_mults)]
    red = [(shape[a], strides[a], mask_strides[a], m) for a, m in zip(red_axes, idx_mults)]
    return _joint(kept, True), _joint(red, any_order)


def _mask_base(mask, shape, stream):
    """``(device view, its strides broadcast to shape)`` of a bool mask (NumPy masks
    uploaded at their own size)."""
    if kind_of(mask) == "numpy":
        host = _host_mask(mask)
        return to_device(host, stream), _broadcast_strides(host.shape, host.strides, shape)
    view = device_view(mask)
    return view, _broadcast_strides(tuple(mask.shape), view.strides, shape)


def _packed_mask(mask, shape, perm, stream):
    """The mask broadcast to ``shape`` and transposed by ``perm``, C-contiguous on the
    device: the copy a layout that does not collapse needs (as :func:`_transposed`,
    unwarned for a NumPy mask, which goes to the device anyway)."""
    on_host = kind_of(mask) == "numpy"
    if not on_host:
        warn(
            f"numbakern copied the where= mask of shape {tuple(mask.shape)}, laid out as "
            f"the input's {tuple(shape)} elements: the input's layout does not collapse to "
            "two strided dimensions per group; pass a contiguous input to avoid the copy",
            CopyWarning)
    if on_host or SIMULATOR:
        host = mask if on_host else mask.copy_to_host()
        return to_device(np.ascontiguousarray(np.broadcast_to(host, shape).transpose(perm)),
                         stream)
    import cupy  # _transposed has already required it for the input's copy

    with as_cupy_stream(stream):
        packed = cupy.ascontiguousarray(
            cupy.broadcast_to(cupy.asarray(buffer(mask)), shape).transpose(perm))
    return buffer(packed)


def masked_axis_view(x, mask, axes, track_index: bool, any_order: bool, stream) -> MaskedView:
    """:func:`axis_view` with a ``where=`` mask (bool, broadcastable to ``x``; checked
    by the caller) read beside ``x``: the two 4-D views share their extents and
    traversal, each with its own strides (the mask's 0 where it broadcasts). Axes
    merge only where both arrays allow; where they cannot merge into two kept and two
    reduced dimensions, both are copied contiguous first (a :class:`CopyWarning` for
    each device array; NumPy ones are uploaded so, unwarned)."""
    dtype = np.dtype(x.dtype)
    shape = tuple(x.shape)
    host = kind_of(x) == "numpy"
    base, perm, strides = _read_as(x, host)
    mask_base, mask_strides = _mask_base(mask, shape, stream)
    kept, red = _joint_dims(shape, strides, mask_strides, axes, track_index, any_order)
    if len(kept) > 2 or len(red) > 2:
        base, moved_shape, moved = _transposed(x, axes, stream)
        perm = [a for a in range(x.ndim) if a not in axes] + sorted(axes)
        mask_base = _packed_mask(mask, shape, perm, stream)
        kept, red = _joint_dims(moved_shape, _c_strides(moved_shape, dtype.itemsize),
                                _c_strides(moved_shape, 1), moved, track_index, any_order)
    elif host:
        base = to_device(np.ascontiguousarray(x.transpose(perm)), stream)
    pad = [(1, dtype.itemsize, 0, 0)]
    k4 = pad * (2 - len(kept)) + list(kept)
    r4 = pad * (2 - len(red)) + list(red)
    view = strided(base, [(n, s) for n, s, _, _ in k4 + r4], dtype)
    mask_view = strided(mask_base, [(n, w) for n, _, w, _ in k4 + r4], np.bool_)
    av = AxisView(
        view=view, M=k4[0][0] * k4[1][0], N=r4[0][0] * r4[1][0], K1=k4[1][0], R1=r4[1][0],
        out_mult=(k4[0][3], k4[1][3]), index_mult=(r4[0][3], r4[1][3]),
        reduced_dims=2 if r4[0][0] > 1 else 1,
        kept_stride=abs(kept[-1][1]) if kept else 0,
        reduced_stride=abs(red[-1][1]) if red else 0)
    return MaskedView(av, mask_view)


def reduce_layout(x, axes, kit, ordered: bool, lanes, track_index: bool, stream, where=None):
    """The layout a reduce job hands the grid strategy, for reducing ``axes`` of ``x``:

    * every axis, no index kept: :class:`~numbakern.kernels.flat_reduce.FlatReduce`,
      one run (in memory order for a commutative op, C order otherwise);
    * rows of one aligned vector each, lying back to back (and ``lanes`` not given):
      :class:`~numbakern.kernels.axis_reduce.TinyRows`;
    * otherwise :class:`~numbakern.kernels.axis_reduce.AxisReduce` over
      :func:`axis_view` (row or column kernel; a whole-array argmax is one row, so
      each element keeps its C-order index).

    With ``where`` (a bool mask broadcastable to ``x``), always
    :class:`~numbakern.kernels.axis_reduce.AxisReduce` over :func:`masked_axis_view`:
    each element's load reads its mask beside it, a masked-out one is the op's
    identity (scalar loads: the vector and tiny-row paths read no mask).
    """
    if where is not None:
        masked = masked_axis_view(x, where, axes, track_index, not ordered, stream)
        return AxisReduce(masked.av, kit, ordered, lanes, np.dtype(x.dtype), masked.mask)
    if len(axes) == x.ndim and not track_index:
        view, n = flat_view(x, any_order=not ordered, stream=stream)
        return FlatReduce(view, n, kit, ordered)
    av = axis_view(x, axes, track_index, not ordered, stream)
    dtype = np.dtype(x.dtype)
    width = tiny_row_width(av, dtype) if lanes is None else 0
    if width:
        return TinyRows(av, kit, width)
    return AxisReduce(av, kit, ordered, lanes, dtype)
