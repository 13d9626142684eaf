"""Softmax, log-softmax and their backward passes along any axis.

Each function composes a row kernel of ``numbakern/kernels/softmax_rows.py`` from
block strategies: the row's maximum is a block reduce with ``max_strategy`` and
numbakern's ``MAX`` op, its sum of exponentials one with ``sum_strategy`` and
``SUM`` (or, with ``normalizer="online"``, one reduce of ``(max, sum)`` pairs: see
``strategies/online_softmax.py``).

Arguments common to all four functions:

* ``axis``: the axis to normalise along (an int, negative counts from the end). The
  kernels see the axis as the last one of a strided view, so no device input is
  copied (except a layout needing more than two strided outer dimensions, which is
  copied with a :class:`~numbakern.CopyWarning`).
* ``layout``: ``"block"`` (one row per block), ``"warp"`` (one row per warp, for
  short rows, reduced by the block strategies' warp forms) or ``"auto"``: a warp per
  row up to 1024 float32 elements (512 for float64 or a backward pass, 256 for both)
  when the strategies have warp forms (every registered one does). With the
  default ``warp_shuffle`` strategies a short row gets a run of fewer lanes of a
  warp (the fewest powers of two that hold it at 16 elements a lane, 8 for the
  backward passes: 8 lanes for 128 float32), several rows a warp, each reduced by
  an XOR butterfly of shuffles.
* ``fused``: hold the row in registers and move it once each way (``True``), loop
  over the row in tiles (``False``), or decide by row length (``None``).
* ``threads``: threads per block (a multiple of 32 up to 1024); by default from the
  strategy objects, else chosen by row length.
* ``out``: where to write the result, of the input's shape and dtype and kind
  (may be the input itself).
* ``stream``: a Numba stream, a CuPy stream or a raw pointer; default CuPy's
  current stream for CuPy input, else the default stream.
* ``mask``, ``causal``, ``scale``: which elements each row keeps, and a factor
  applied before the maximum (attention's masked, causal and temperature-scaled
  softmax). A NumPy mask is uploaded at its own size and read broadcast (stride 0),
  a device mask read in place; the kernels load a dropped element as -inf, so no
  masked copy of the input is made. Rows with nothing kept give 0 (log-softmax:
  -inf), as torch's ``_safe_softmax``.

Inputs: NumPy arrays (returned as NumPy), CuPy arrays (returned as CuPy, nothing
copied to the host), PyTorch tensors (returned as tensors: ``numbakern/api/_interop.py``),
other ``__cuda_array_interface__`` arrays (returned as Numba device arrays); float16
and bfloat16 (computed in float32, rounded once to the input's dtype; bfloat16 from
torch tensors or ``ml_dtypes`` arrays, read and written as its 16 bits, no copy),
float32, float64; any shape. A 0-d input is a row of its one element, as torch's
(``axis`` 0 or -1; softmax gives 1, log-softmax 0, NaN for NaN or +-inf; the
backward passes torch's ``y * (dy - dy * y)`` and ``dy - exp(y) * dy``: 0, or NaN,
where ``y`` is the forward result), and its result is 0-d. Integers and bools are taken
by the forward passes with a float ``dtype=`` only, cast to it first (as
``torch.softmax(x, dtype=)``). Empty inputs give empty results and launch nothing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from numbakern.api._dispatch import dispatch

from numbakern import strategies as _strategies
from numbakern.core.arrays import (BFloat16Bits, CopyWarning, Workspace, as_array_like,
                                   contiguous_copy, honours_stream, kind_of, resolve_stream,
                                   user_array)
from numbakern.core.axes import LAST, axis_or_dim, normalize_axis
from numbakern.core.deliver import OutDtypeError, check_disjoint, check_out
from numbakern.core.layout import axis_last_views, collapse
from numbakern.kernels import softmax_rows
from numbakern.kernels.softmax_rows import RowPlan
from numbakern.kernels.vector import VECTOR_BYTES, vector_lanes
from numbakern.runtime.checks import check_count, check_real
from numbakern.runtime.device import SIMULATOR, WARP
from numbakern.runtime.launch import launch
from numbakern.runtime.memo import planner
from numbakern.runtime.replay import replayable
from numbakern.runtime.stacklevel import warn
from numbakern.runtime.views import device_view, host_copy, strided, to_device
from numbakern.strategies.online_softmax import ONLINE_SOFTMAX
from numbakern.strategies.protocols import BlockStrategy, check_threads

FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

_PER_THREAD = (1, 2, 4, 8, 12, 16, 24, 32)  # the fused kernels compiled
# Elements per thread the automatic block size aims for. Measured on an H200 at
# (32768, 4096) float32, kernel times by CUPTI (bench/NOTES.md, 2026-11-30), rows read
# and written in 16-byte vectors: softmax 258 us with 128 threads x 32, 261 with
# 256 x 16, 418 with 512 x 8 (fewer threads wait at each row's barriers);
# log_softmax 297 us at 256 x 16, 351 at 128 x 32, 421 at 512 x 8. The backward
# passes keep 8.
_PER_THREAD_TARGET = {"softmax": 32, "log_softmax": 16}
_PER_THREAD_DEFAULT = 8
# The backward passes of half rows aim for 16: two 16-byte vectors of each input a
# thread (64 bytes in flight, as float32's 8 in vectors of four), where 8 gave one of
# each: 2.9 TB/s at (32768, 4096) float16 against float32's 4.0 (bench/NOTES.md,
# "Half softmax family").
_PER_THREAD_HALF_BACKWARD = 16
# Half forward rows past what scalar loads hold (12288 halves at 512 x 24) but of
# whole 16-byte vectors: held packed (RowPlan.packed) at up to 1024 x 32, one read of
# the row where the tiled kernels read it twice: (4096, 32768) float16 softmax 0.224
# ms against the tiled 0.315 on an H200 (bench/NOTES.md, "Half softmax family").
# They aim for 32 a thread: 16384 takes 512 x 32 (two blocks a multiprocessor at
# ptxas's 61-64 registers, four loads a thread in flight) over 1024 x 16 (one block,
# two loads).
_PER_THREAD_HALF_LONG = 32
# Half rows of every length aim for it, log_softmax as softmax: (16384, 1536) float16
# log_softmax took 33.4 us at 64 x 24 against 60.7 at 128 x 12, (32768, 4096) 138 at
# 128 x 32 (packed) against 194 at 256 x 16 (H200, bench/NOTES.md "Softmax rows of
# 512-2048").
_PER_THREAD_TARGET_HALF = dict.fromkeys(softmax_rows.FORWARD, _PER_THREAD_HALF_LONG)
_BLOCK_SIZES = (32, 64) if SIMULATOR else (128, 256, 512, 1024)
# The forward kinds offer blocks of 64 too: rows of 781 float16 at 64 x 16 took 5.2 us
# at (1823, 781) and 55.1 at (32768, 781) where 128 x 8 took 6.2 and 68.2; float32
# log_softmax 6.0 and 98.8 where its warp of 32 a lane took 7.6 and 162 (H200,
# bench/NOTES.md "Softmax rows of 512-2048"). The backward passes were not measured.
_FORWARD_BLOCK_SIZES = _BLOCK_SIZES if SIMULATOR else (64,) + _BLOCK_SIZES
# "auto" takes a warp a row while a lane holds at most this many elements of the
# kind (others: any that fit). log_softmax's warp at 32 a lane fell behind a block of
# 64 at every row count measured (above); softmax's stays ahead of it (5.4 us at
# (1823, 781), 55.1 at (32768, 781), against 5.8 and 60.4).
_WARP_MOST = {"log_softmax": 16}
_WARP_THREADS = 64 if SIMULATOR else 128  # warp layout: 4 rows per block on a GPU
# Short rows: a row to a run of the fewest lanes (a power of two, up to a warp) that
# hold it at this many elements a lane (forward; the backward passes hold two
# arrays, so half), as PyTorch's persistent warp softmax holds WARP_BATCH = 2 rows of
# up to 128 a warp. (65536, 128) float32: 8 lanes of 16 (four 16-byte loads a lane in
# flight, three shuffles a reduce) where a warp of 4 had one load (23.0 us against
# torch's 18.2 on an H200, bench/NOTES.md "Short softmax rows").
_RUN_ELEMENTS = {"forward": 16, "backward": 8}
_LANES = (1, 2, 4, 8, 16, 32)
# Tiled rows: as few rows in flight as fill the device, so a row's second read finds
# it in L2: 1024 threads, one block a multiprocessor, 132 rows of 128 KB (17 MB) in
# flight on an H200 at (4096, 32768) float32, softmax 350 us; 512 threads, two blocks,
# 378 us; 256, 404 (bench/NOTES.md, 2026-12-01). Plans whose registers do not fit
# 1024 threads (float64) take 512.
_TILED_THREADS = (64,) if SIMULATOR else (1024, 512)
_GRID_MAX = 2 if SIMULATOR else 2**31 - 1  # simulator: blocks are costly, loop rows


# --- public functions ---------------------------------------------------------------


@dispatch
@replayable
@honours_stream
def softmax(x, axis=LAST, *, dim=None, mask=None, causal=False, scale=None, max_strategy=None,
            sum_strategy=None, normalizer="auto", layout="auto", fused=None, threads=None,
            out=None, stream=None, dtype=None):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, as ``torch.softmax``.

    Args:
        x: float16, bfloat16, float32 or float64 array of any shape (0-d: a row of
            one element, see the module docstring); an integer or bool array with a
            float ``dtype=``, read through a cast to it (as ``torch.softmax(x,
            dtype=)``).
        mask: a bool array broadcastable to ``x``, of any kind ``x`` may be: True
            keeps an element, False drops it (as ``x.masked_fill(~mask, -inf)``).
        causal: keep, of ``x``'s last two axes ``(queries, keys)``, key ``j`` for
            query ``i`` when ``j <= i + keys - queries``: lower-triangular, aligned
            bottom-right when queries and keys differ (FlashAttention's, torch's
            ``causal_lower_right``), no mask array made; ``axis`` must be the last.
            With ``mask``, an element is kept when both keep it.
        scale: a finite real number (or a 0-d NumPy array or torch tensor of one; a
            CUDA tensor is read through ``item()``, as torch reads one) multiplying
            ``x`` before the maximum (temperature ``1/T``, attention's ``1/sqrt(d)``);
            default 1.
            The product is taken in the compute dtype (float32 for float16 and
            bfloat16 ``x``), so it does not overflow where ``x * scale`` formed in
            ``x``'s own dtype first would.
        max_strategy, sum_strategy: block strategies for the row's maximum and sum: a
            name from ``numbakern.strategies.available("block")`` or a
            :class:`~numbakern.strategies.BlockStrategy`; default ``warp_shuffle``.
        normalizer: ``"max_then_sum"`` (a max reduce, then a sum reduce),
            ``"online"`` (one reduce of ``(max, sum)`` pairs with ``sum_strategy``,
            Milakov and Gimelshein 2018; ``max_strategy`` must be left None) or
            ``"auto"``: online for tiled rows (it saves a read of the row) unless
            ``max_strategy`` is given, max-then-sum for rows held in registers (the
            faster there on an H200: 258 against 260-298 us at (32768, 4096)).
        axis: the axis to normalise along (any; default the last). Device input is
            read in place through strided views.
        dim: torch's name for ``axis`` (keyword only); giving both is a
            ``TypeError``.
        layout: ``"warp"`` (one warp per row: short rows), ``"block"`` (one block
            per row) or ``"auto"`` (warp for short rows).
        fused: ``True`` keeps each row in registers (one read, one write; rows that
            fit), ``False`` loops over the row in tiles (any length), ``None``
            chooses.
        threads: threads per block (a multiple of 32); default chosen by row length.
        out: an array of ``x``'s shape and the result's dtype (``x`` itself works).
        stream: a Numba stream, a CuPy stream or a raw pointer.
        dtype: the result's dtype (float16, bfloat16, float32 or float64), as
            ``torch.softmax(x, dtype=)``: ``x`` is computed in it (float32 for
            float16), so float16 logits can give float32 probabilities (float64
            ``x`` into float16 or bfloat16 reads each logit as a float32: the
            README's PyTorch section). Default: ``x``'s dtype.

    Returns:
        An array of ``x``'s shape and dtype (or ``dtype``); each row sums to 1 (to
        rounding).
        Rows holding NaN or +inf, and rows of nothing but -inf, are NaN throughout
        (PyTorch's results); logits of +-1000 give exact 1s and 0s. With ``mask`` or
        ``causal``: dropped elements are 0 (log-softmax: -inf), and a row that keeps
        nothing, or only -inf, is 0 throughout (log-softmax: -inf), never NaN, as
        torch's ``_safe_softmax``; a kept NaN or +inf still makes its row NaN.

    Raises:
        TypeError: ``x`` not float16/bfloat16/32/64 (an integer or bool ``x``
            without ``dtype=``; complex always), or ``dtype`` not float16/32/64
            (or bfloat16);
            ``axis`` not one int (a float, a bool, None or a tuple; a 0-d integer
            array is an int); a
            strategy of the wrong type; ``mask`` not bool; ``causal`` not a bool;
            ``scale`` not a real number.
        ValueError: an unknown name, mismatched threads, ``layout="warp"`` with a
            strategy that has no warp form, ``fused=True`` for a row too long to
            hold, a bad ``out``; ``mask`` not broadcastable to ``x``; ``causal`` on
            0-d or 1-D ``x`` or along another axis than the last; ``scale`` not
            finite.
        numpy.exceptions.AxisError: ``axis`` out of range (of a 0-d ``x``: other
            than 0 or -1, as ``torch.softmax``'s ``dim``).
    """
    axis = axis_or_dim(axis, dim, "softmax")
    return _forward("softmax", x, axis, max_strategy, sum_strategy, normalizer, layout,
                    fused, threads, out, stream, dtype, (mask, causal, scale))


@dispatch
@replayable
@honours_stream
def log_softmax(x, axis=LAST, *, dim=None, mask=None, causal=False, scale=None, max_strategy=None,
                sum_strategy=None, normalizer="auto", layout="auto", fused=None,
                threads=None, out=None, stream=None, dtype=None):
    """``(x - max) - log(sum(exp(x - max)))`` along ``axis``, as ``torch.log_softmax``.

    Same arguments, results and errors as :func:`softmax`. ``x - max`` is taken
    first, so rows of large nearby values keep their precision (float32 rows near
    1e7 give the exact differences); ``log(sum)`` is subtracted last.
    """
    axis = axis_or_dim(axis, dim, "log_softmax")
    return _forward("log_softmax", x, axis, max_strategy, sum_strategy, normalizer, layout,
                    fused, threads, out, stream, dtype, (mask, causal, scale))


@dispatch
@replayable
@honours_stream
def softmax_backward(y, dy, axis=LAST, *, dim=None, mask=None, causal=False, scale=None,
                     sum_strategy=None, layout="auto", fused=None, threads=None, out=None,
                     stream=None, dtype=None):
    """Gradient of softmax: ``dx = y * (dy - sum(y * dy))`` along ``axis``.

    Args:
        y: the softmax output (float16/bfloat16/32/64, any shape).
        dy: the gradient of the loss with respect to ``y``: same shape, dtype, kind.
        mask, causal, scale: those the forward pass took: ``dx`` is 0 at dropped
            elements and ``scale`` times the above where kept (the chain rule through
            ``x * scale`` and ``masked_fill``; the row's sum runs over the whole row,
            as torch's autograd takes it).
        sum_strategy: block strategy of the row sum (name or object).
        axis: the axis to normalise along (any; default the last). Device input is
            read in place through strided views.
        dim: torch's name for ``axis`` (keyword only); giving both is a
            ``TypeError``.
        layout: ``"warp"`` (one warp per row: short rows), ``"block"`` (one block
            per row) or ``"auto"`` (warp for short rows).
        fused: ``True`` keeps each row in registers (one read, one write; rows that
            fit), ``False`` loops over the row in tiles (any length), ``None``
            chooses.
        threads: threads per block (a multiple of 32); default chosen by row length.
        out: an array of ``y``'s shape and the result's dtype.
        stream: a Numba stream, a CuPy stream or a raw pointer.
        dtype: ``dx``'s dtype (float16, float32 or float64), computed in it (float32
            for float16): the forward input's dtype after ``softmax(x, dtype=)``, as
            torch's backward returns the input's dtype. Default: ``y``'s.

    Returns:
        ``dx``, of ``y``'s shape and dtype (or ``dtype``).

    Raises:
        TypeError, ValueError: as :func:`softmax` (an integer or bool ``y`` or ``dy``
        is refused with ``dtype=`` too: they are a forward pass's float output and its
        gradient); ``y`` and ``dy`` differing in shape, dtype or kind (host or device
        memory: a NumPy array and a torch CPU tensor are one kind, and ``dx`` takes
        ``y``'s type).
    """
    axis = axis_or_dim(axis, dim, "softmax_backward")
    return _backward("softmax_backward", y, dy, axis, sum_strategy, layout, fused, threads,
                     out, stream, dtype, (mask, causal, scale))


@dispatch
@replayable
@honours_stream
def log_softmax_backward(y, dy, axis=LAST, *, dim=None, mask=None, causal=False, scale=None,
                         sum_strategy=None, layout="auto", fused=None, threads=None,
                         out=None, stream=None, dtype=None):
    """Gradient of log-softmax: ``dx = dy - exp(y) * sum(dy)`` along ``axis``.

    ``y`` is the log-softmax output. Same arguments, results and errors as
    :func:`softmax_backward`.
    """
    axis = axis_or_dim(axis, dim, "log_softmax_backward")
    return _backward("log_softmax_backward", y, dy, axis, sum_strategy, layout, fused,
                     threads, out, stream, dtype, (mask, causal, scale))


# --- validation -----------------------------------------------------------------------


def _describe(a: Any, name: str):
    """``(view, kind, shape, dtype, precision)`` of an input checked to be a float
    array: ``view`` is the NumPy array, or the device array as the kernels take it;
    ``dtype`` its elements' (uint16 for :class:`BFloat16Bits`), ``precision`` the
    name of the float type they hold (``"bfloat16"`` for those bits)."""
    bits = isinstance(a, BFloat16Bits)
    a = as_array_like(a.bits if bits else a, name)
    kind = kind_of(a)
    view = a if kind == "numpy" else device_view(a)
    dtype = np.dtype(view.dtype)
    if bits and dtype != np.uint16:
        raise TypeError(f"{name}: bfloat16 bits must be uint16, got {dtype}")
    if not bits and dtype not in FLOATS:
        raise TypeError(f"{name} must be float16, bfloat16, float32 or float64, got "
                        f"dtype {dtype}")
    return view, kind, tuple(view.shape), dtype, "bfloat16" if bits else dtype.name


def bits_like(out, precision: str, name: str, caller: str):
    """``out`` as the array the kernels write: a :class:`BFloat16Bits`' bits for
    bfloat16 input, else ``out`` itself; ``OutDtypeError`` (a ``TypeError``, as every
    out of the wrong dtype gives) when one is bfloat16 and the other not (a uint16
    array is no bfloat16 ``out``)."""
    if out is None:
        return None
    bits = isinstance(out, BFloat16Bits)
    if bits != (precision == "bfloat16"):
        got = "bfloat16" if bits else np.dtype(getattr(out, "dtype", "O")).name
        raise OutDtypeError(f"{caller}: {name} must have the result's dtype {precision} "
                            f"(it is written in place), got {got}")
    return out.bits if bits else out


def _axis(axis, ndim: int) -> int:
    """The one axis the rows lie along: an int or anything with ``__index__`` (a 0-d
    integer array, as NumPy takes), not a bool, a None or a tuple. A 0-d input is a
    row of its one element, as torch's: axis 0 or -1 (both 0)."""
    try:
        return normalize_axis(axis, max(ndim, 1),
                              "axis must be an int (the axis the rows lie along)")
    except np.exceptions.AxisError:
        if ndim:
            raise
        raise np.exceptions.AxisError(f"axis {axis} is out of bounds for a 0-d input, a "
                                      f"row of one element: axis 0 or -1") from None


def _as_row(view):
    """A device view as the kernels take it: a 0-d one as a row of its one element."""
    return view if len(view.shape) else strided(view, [(1, np.dtype(view.dtype).itemsize)])


def _block_strategy(spec, name: str) -> BlockStrategy | str | None:
    if spec is None or isinstance(spec, BlockStrategy):
        return spec
    if isinstance(spec, str):
        if spec not in _strategies.REGISTRY["block"]:
            raise ValueError(f"{name} must be one of {_strategies.available('block')} or a "
                             f"BlockStrategy, got {spec!r}")
        return spec
    raise TypeError(f"{name} must be a block strategy name or a BlockStrategy such as "
                    f"WarpShuffle(), got {spec!r}")


def _scale(scale) -> float:
    """``scale=`` checked: a finite real number, a 0-d array of one included (None:
    1)."""
    if scale is None:
        return 1.0
    scale = check_real(scale, "scale")
    try:
        value = float(scale)
    except OverflowError:  # an int past float64's range
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"scale must be finite (a float64), got {scale!r}")
    return value


def _keep(mask, causal, scale: float, shape: tuple, axis: int, name: str) -> str:
    """Which elements the rows keep (``softmax_rows.KEEPS``; "": all, unscaled), with
    ``mask`` and ``causal`` checked against ``name``'s ``shape`` and ``axis``."""
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if causal and len(shape) < 2:
        raise ValueError(f"causal=True masks the last two axes (queries, keys); {name} is "
                         f"{len(shape)}-D")
    if causal and axis != len(shape) - 1:
        raise ValueError(f"causal=True normalises over the keys, the last axis; got "
                         f"axis={axis} of a {len(shape)}-D {name}")
    if mask is not None:
        _check_mask(mask, shape, name)
    kept = [k for k, on in (("mask", mask is not None), ("causal", causal)) if on]
    return "&".join(kept) or ("all" if scale != 1.0 else "")


def _check_mask(mask, shape: tuple, name: str) -> None:
    if isinstance(mask, BFloat16Bits):
        raise TypeError("mask must be a bool array (True keeps), got bfloat16")
    mask = as_array_like(mask, "mask")
    if np.dtype(mask.dtype) != np.bool_:
        raise TypeError(f"mask must be a bool array (True keeps), got dtype {mask.dtype}")
    try:
        fits = np.broadcast_shapes(tuple(mask.shape), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to "
                         f"{name}'s shape {shape}")


def _kept_arguments(mask, causal: bool, scale: float, shape: tuple, axis: int, view,
                    workspace: Workspace) -> tuple:
    """A kept kernel's arguments (``softmax_rows.kept_arguments``) for rows laid out
    as the 3-D ``view`` (of an input of ``shape``, ``axis`` last); without a mask, a
    one-element array at stride 0 that the kernel never reads."""
    if mask is None:
        rows = view.shape[0] * view.shape[1]
        flags = workspace.empty((1,), np.bool_)
        rows_view = strided(flags, [(1, 0), (1, 0), (rows, 0), (shape[axis], 0)])
    else:
        rows_view = _mask_view(as_array_like(mask), shape, axis, workspace)
    queries, shift = (shape[-2], shape[-1] - shape[-2]) if causal else (1, 0)
    return softmax_rows.kept_arguments(rows_view, scale, queries, shift)


def _mask_view(mask, shape: tuple, axis: int, workspace: Workspace):
    """``mask`` broadcast to ``shape`` as a 4-D device view ``(d0, d1, d2, n)``: its
    dimensions but ``axis``, in order, merged where its strides allow (broadcast ones
    at stride 0: nothing of ``shape``'s size is made), then ``axis``. A NumPy mask is
    uploaded at its own size; one whose dimensions do not merge into three is first
    broadcast on the host over as few outer dimensions as make them merge, with a
    :class:`CopyWarning` (a device mask: ``ValueError``)."""
    host = kind_of(mask) == "numpy"
    if host:  # laid out as its upload will be; a broadcast view's stride-0 axes as one
        mask = np.ascontiguousarray(mask[tuple(slice(0, 1) if s == 0 else slice(None)
                                               for s in mask.strides)])
    own = mask.strides if host else device_view(mask).strides
    dims, strides = _mask_dims(mask.shape, own, shape, axis)
    if len(dims) > 3 and not host:
        raise ValueError(f"mask of shape {tuple(mask.shape)} broadcast to {shape} needs "
                         f"more than three strided dimensions besides the axis; pass it "
                         f"broadcast and contiguous")
    if len(dims) > 3:
        warn(f"numbakern copied mask of shape {mask.shape}, broadcast over some "
             f"of {shape}: its broadcast needs more than three strided "
             "dimensions", CopyWarning)
        padded = mask.reshape((1,) * (len(shape) - mask.ndim) + mask.shape)
        for k in range(1, len(shape) + 1):  # k = len(shape): x's size, which merges
            mask = np.ascontiguousarray(np.broadcast_to(padded, shape[:k] + padded.shape[k:]))
            dims, strides = _mask_dims(mask.shape, mask.strides, shape, axis)
            if len(dims) <= 3:
                break
    dims = [(1, 0)] * (3 - len(dims)) + dims
    dev = to_device(mask, workspace.stream) if host else device_view(mask)
    return strided(dev, dims + [(shape[axis], strides[axis])], np.bool_)


def _mask_dims(mask_shape, mask_strides, shape: tuple, axis: int):
    """``(dims, strides)``: the merged ``(extent, stride)`` dimensions of a mask of
    ``mask_shape``/``mask_strides`` broadcast to ``shape``, ``axis`` left out, and its
    stride along each of ``shape``'s dimensions (0 where broadcast)."""
    pad = len(shape) - len(mask_shape)
    strides = (0,) * pad + tuple(0 if e == 1 else s for e, s in zip(mask_shape, mask_strides))
    outer = [d for d in range(len(shape)) if d != axis]
    return collapse([shape[d] for d in outer], [strides[d] for d in outer], False), strides


# --- planning: layout, block size, fused or tiled ----------------------------------------


def _plan(kind: str, n: int, dtype, normalizer, layout, fused, threads,
          max_spec, sum_spec, result: str = "", keep: str = "",
          vectors: bool = True, lanes: int | None = None) -> RowPlan:
    """Choose the kernel for rows of ``n`` elements of ``dtype`` (a NumPy dtype, or the
    name ``"bfloat16"``) giving ``result`` (a dtype's name; "": ``dtype``), keeping
    ``keep`` (``softmax_rows.KEEPS``, "": every element, unscaled); all errors about
    arguments here. ``vectors``: whether the rows may be read in 16-byte vectors
    (False: a packed plan's rows were not aligned, see :func:`_fused_plan`).
    ``lanes``: the lanes a row of the warp layout gets (``RowPlan.lanes``; a power
    of two up to 32; below 32 with ``warp_shuffle`` strategies only), or None: the
    fewest that hold a fused row at :data:`_RUN_ELEMENTS` a lane (:func:`_run_lanes`),
    a warp for tiled rows or other strategies."""
    dtype = dtype if dtype == "bfloat16" else np.dtype(dtype).name
    out = result if result and result != dtype else ""
    if fused is not None and not isinstance(fused, (bool, np.bool_)):
        raise TypeError(f"fused must be None, True or False, got {fused!r}")
    backward = kind in softmax_rows.BACKWARD
    normalizer = _normalizer(normalizer, backward, max_spec)
    specs = {"max_strategy": _block_strategy(max_spec, "max_strategy"),
             "sum_strategy": _block_strategy(sum_spec, "sum_strategy")}
    threads = _threads(threads, specs)

    layout = _layout(layout, specs, lambda: _auto_warp_plan(kind, n, dtype, out, keep))
    runs = _run_lanes(lanes, layout, specs)
    if layout == "warp":
        threads = threads or _WARP_THREADS
    offered = _FORWARD_BLOCK_SIZES if kind in softmax_rows.FORWARD else _BLOCK_SIZES
    chosen = None if fused is False else _fused_plan(
        kind, n, dtype, layout, (threads,) if threads else offered, out, keep,
        vectors, runs)
    if fused and chosen is None:
        aligned = "" if vectors else " (with rows not 16-byte aligned)"
        raise ValueError(f"fused=True: a row of {n} {dtype} elements{aligned} does not fit "
                         f"in the registers of one {layout}; use fused=None or False")
    staged = (fused is None and vectors
              and _stages(kind, n, dtype, layout, out, keep, threads)
              and (chosen is None or (dtype in softmax_rows.HALVES and threads is None
                                      and _one_block_each(chosen))))
    if staged:
        chosen = None
        threads = _staged_threads(kind, n, dtype, threads)
    per_thread = chosen.per_thread if chosen else 0
    threads = chosen.threads if chosen else (threads or _tiled_threads(kind, dtype, out,
                                                                       keep))
    if normalizer == "auto":  # online saves a read of a tiled row, unless told the max's way
        online = not per_thread and specs["max_strategy"] is None
        normalizer = "online" if online else "max_then_sum"
    max_block, sum_block = (_make(specs[k], threads) for k in ("max_strategy", "sum_strategy"))
    if normalizer != "max_then_sum":
        max_block = None
    pair_op = ONLINE_SOFTMAX if normalizer == "online" else None
    lanes = chosen.lanes if chosen else (lanes or WARP)
    return RowPlan(kind, normalizer, layout, threads, per_thread, max_block, sum_block,
                   dtype, pair_op=pair_op, out=out, keep=keep,
                   packed=bool(chosen and chosen.packed), lanes=lanes, staged=staged,
                   async_copy=staged,
                   held=softmax_rows.held_count(n, _vector(dtype), threads) if staged
                   else 0)


_planned = planner(_plan)  # a repeated call plans in a dictionary lookup


def _auto_warp_plan(kind: str, n: int, dtype: str, out: str, keep: str):
    """The fused warp plan that makes ``layout="auto"`` take a warp a row, or None:
    one that fits, its elements a lane within :data:`_WARP_MOST`."""
    plan = _fused_plan(kind, n, dtype, "warp", (_WARP_THREADS,), out, keep)
    most = _WARP_MOST.get(kind)
    return None if plan is None or (most and plan.per_thread > most) else plan


def _run_lanes(lanes, layout: str, specs: dict) -> tuple:
    """The lanes a row may get, fewest first: ``(lanes,)`` checked when given, else
    every power of two up to a warp for the warp layout with ``warp_shuffle``
    strategies (the runs' butterfly is that strategy's shuffles), else a warp."""
    if lanes is None:
        shuffles = all(_is_shuffle(s) for s in specs.values())
        return _LANES if layout == "warp" and shuffles else (WARP,)
    if check_count(lanes, "lanes") not in _LANES:
        raise ValueError(f"lanes must be one of {_LANES}, got {lanes!r}")
    if lanes < WARP and layout != "warp":
        raise ValueError(f"lanes={lanes} shares a warp between rows: it needs layout='warp'")
    if lanes < WARP and not all(_is_shuffle(s) for s in specs.values()):
        raise ValueError(f"lanes={lanes} reduces each row by warp shuffles: leave the "
                         f"strategies warp_shuffle, got {specs}")
    return (lanes,)


def _is_shuffle(spec) -> bool:
    """Whether a strategy spec (None: the default) is ``warp_shuffle``."""
    return _strategy_class(spec).name == "warp_shuffle"


def _strategy_class(spec) -> type:
    """The block strategy class of a spec: an object, a name, or None (the default)."""
    return type(spec) if isinstance(spec, BlockStrategy) else \
        _strategies.REGISTRY["block"][spec or _strategies.registry.DEFAULT_BLOCK]


def _tiled_threads(kind: str, dtype: str, out: str = "", keep: str = "") -> int:
    """The largest of :data:`_TILED_THREADS` whose tiled kernel's registers fit."""
    return next(t for t in _TILED_THREADS
                if RowPlan(kind, None, "block", t, 0, None, None, dtype, out=out,
                           keep=keep).fits)


def _normalizer(normalizer, backward: bool, max_spec):
    if backward:
        return None
    if normalizer not in ("auto",) + softmax_rows.NORMALIZERS:
        raise ValueError(f"normalizer must be 'auto', 'max_then_sum' or 'online', got "
                         f"{normalizer!r}")
    if normalizer == "online" and max_spec is not None:
        raise ValueError("normalizer='online' reduces (max, sum) pairs with sum_strategy; "
                         "leave max_strategy None")
    return normalizer


def _threads(threads, specs: dict) -> int | None:
    """The block size fixed by ``threads`` or the strategy objects, if any."""
    fixed = {k: s.threads for k, s in specs.items() if isinstance(s, BlockStrategy)}
    if threads is not None:
        fixed["threads"] = check_threads(threads)
    if len(set(fixed.values())) > 1:
        raise ValueError(f"the block strategies share one block, so their threads must "
                         f"agree; got {fixed}")
    return next(iter(fixed.values()), None)


def _has_warp_form(spec) -> bool:
    """Whether a strategy spec (None: ``warp_shuffle``) has a warp form of its reduce."""
    return _strategy_class(spec).offers_warp_reduce()


def _layout(layout, specs: dict, warp_fused) -> str:
    """The layout asked for, or for ``"auto"`` a warp per row when the strategies have
    warp forms and ``warp_fused()`` finds the row fits a warp's registers."""
    if layout not in ("auto", "block", "warp"):
        raise ValueError(f"layout must be 'auto', 'block' or 'warp', got {layout!r}")
    warp_forms = all(_has_warp_form(s) for s in specs.values())
    if layout == "warp" and not warp_forms:
        raise ValueError("layout='warp' reduces each row with the block strategies' warp "
                         f"forms; {specs} include one without: use layout='block'")
    if layout == "auto":
        layout = "warp" if warp_forms and warp_fused() is not None else "block"
    return layout


def _fused_plan(kind: str, n: int, dtype: str, layout: str, offered: tuple, out: str = "",
                keep: str = "", vectors: bool = True, lanes: tuple = (WARP,)):
    """A fused plan for rows of ``n``, or None if no offered block size can hold one.

    Warp layout: of ``lanes`` (fewest first), the first that holds the row at
    :data:`_RUN_ELEMENTS` a lane (a warp always qualifies) and has a plan that fits
    (:func:`_fused_plan_of`).
    """
    if layout != "warp":
        return _fused_plan_of(kind, n, dtype, layout, offered, out, keep, vectors)
    most = _RUN_ELEMENTS["backward" if kind in softmax_rows.BACKWARD else "forward"]
    width = _vector(dtype)
    whole = width and not out and n % width == 0  # rows that may move in vectors
    for run in lanes:  # a run given alone (the knob) is tried at any elements a lane
        if run == WARP or run * most >= n or len(lanes) == 1:
            # a run keeps whole vectors a lane where the row is whole vectors
            sizes = [k for k in _PER_THREAD if k % width == 0] if whole and run < WARP \
                else _PER_THREAD
            plan = _fused_plan_of(kind, n, dtype, layout, offered, out, keep, vectors, run,
                                  sizes)
            if plan is not None:
                return plan
    return None


def _fused_plan_of(kind: str, n: int, dtype: str, layout: str, offered: tuple, out: str,
                   keep: str, vectors: bool, lanes: int = WARP, sizes=_PER_THREAD):
    """For each block size offered, the fewest elements per thread (a compiled size)
    that hold the row and fit the registers; of those, the nearest the target per
    thread (several loads in flight, moderate registers), larger blocks first. Half
    forward rows of whole 16-byte vectors (``n`` a multiple of eight), one block a
    row, nothing kept: packed plans (``RowPlan.packed``, multiples of eight a thread)
    that give every thread some of the row compete too, unless ``vectors`` is False;
    where no other plan holds the row, any packed plan.
    ``lanes``: a warp layout's lanes a row; ``sizes``: the elements a thread allowed."""
    plans = _fewest(kind, n, dtype, layout, offered, sizes, out, keep, lanes=lanes)
    targets = _PER_THREAD_TARGET_HALF if dtype in softmax_rows.HALVES else _PER_THREAD_TARGET
    target = targets.get(kind, _PER_THREAD_DEFAULT)
    if kind in softmax_rows.BACKWARD and plans and plans[0].per_element == 2:
        target = _PER_THREAD_HALF_BACKWARD
    if vectors and _packs(kind, n, dtype, layout, out, keep):
        # packed plans compete (the others first on a tie) where no thread idles, and
        # are alone past what scalar loads hold
        alone = not plans
        plans += [p for p in _fewest(kind, n, dtype, layout, offered,
                                     [k for k in _PER_THREAD if k % _HALF_VECTOR == 0],
                                     packed=True)
                  if alone or p.per_thread * (p.threads - 1) < n]
    return min(plans, key=lambda p: (abs(p.per_thread - target), -p.threads),
               default=None)


_HALF_VECTOR = VECTOR_BYTES // 2  # halves a 16-byte vector


def _fewest(kind: str, n: int, dtype: str, layout: str, offered: tuple, sizes, out: str = "",
            keep: str = "", packed: bool = False, lanes: int = WARP) -> list:
    """For each block size offered, the plan of the fewest ``sizes`` a thread that
    holds a row of ``n`` and fits the registers (none for a size that cannot);
    ``lanes``: a warp layout's lanes a row."""
    plans = []
    for threads in offered:
        for k in sizes:
            plan = RowPlan(kind, None, layout, threads, k, None, None, dtype, out=out,
                           keep=keep, packed=packed, lanes=lanes)
            if k * plan.group >= n and plan.fits:
                plans.append(plan)
                break
    return plans


def _packs(kind: str, n: int, dtype: str, layout: str, out: str, keep: str) -> bool:
    """Whether rows of ``n`` may take a packed plan: half forward rows of whole
    vectors, a block each, the result in the input's dtype, nothing kept (the kept
    vector kernel spills at 1024 x 32: 184-220 bytes, ptxas for sm_90)."""
    return (kind in softmax_rows.FORWARD and dtype in softmax_rows.HALVES and not out
            and not keep and layout == "block" and n % _HALF_VECTOR == 0)


def _stages(kind: str, n: int, dtype: str, layout: str, out: str, keep: str,
            threads: int | None) -> bool:
    """Whether rows of ``n`` may be staged in shared memory (``RowPlan.staged``): rows
    of :data:`_STAGED_KINDS`, a block each (of ``threads``, or None:
    :func:`_staged_threads`), the result in the input's dtype, nothing kept, what
    they stage (their whole vectors but those held in registers:
    ``softmax_rows.held_count``) within ``softmax_rows.stage_bytes``: two blocks a
    multiprocessor for halves (rows of up to 57344 on an H200), one for float32 (up to
    57856); forward rows of either with 8 vectors a lane of 512 held go further (90112
    halves, 74240 float32: one block a multiprocessor, its registers). Read once,
    where the tiled kernel reads them twice; for halves, where a fused plan holds the row,
    :func:`_one_block_each` says which wins (bench/NOTES.md, "Staged half rows");
    float32 rows are staged only where none does."""
    if kind not in _STAGED_KINDS or out or keep or layout != "block":
        return False
    if dtype not in (*softmax_rows.HALVES, "float32"):
        return False
    blocks = 2 if dtype in softmax_rows.HALVES else 1
    vector, threads = _vector(dtype), _staged_threads(kind, n, dtype, threads)
    held = softmax_rows.held_count(n, vector, threads)
    staged = softmax_rows.staged_bytes(n, vector, held, threads)
    return staged <= softmax_rows.stage_bytes(blocks)


def _staged_threads(kind: str, n: int, dtype: str, threads: int | None) -> int:
    """Threads a block of a staged row: the caller's, else 64 under the simulator (as
    its tiled blocks), else ``softmax_rows.staged_threads``."""
    return threads or (_TILED_THREADS[0] if SIMULATOR else
                       softmax_rows.staged_threads(kind, n, _vector(dtype)))


def _vector(dtype: str) -> int:
    """Elements of ``dtype`` (a name; bfloat16 as its stored bits) in a 16-byte
    vector, 0 for a dtype the vector loads do not take."""
    return vector_lanes(softmax_rows.storage_dtype(dtype))


# The kinds a staged kernel serves: the forward passes, and log_softmax's backward,
# whose row sum reads dy alone (softmax's reads y * dy: both inputs, twice the
# shared memory).
_STAGED_KINDS = (*softmax_rows.FORWARD, "log_softmax_backward")


def _one_block_each(plan: RowPlan) -> bool:
    """Whether a fused ``plan`` is packed (16-byte vectors held in registers) and
    leaves a multiprocessor one block: then a block alternates loading, reducing and
    storing, where staged blocks overlap those. On the H200 (4096, 32768) float16
    log_softmax took 0.189 ms staged by 256 threads (0.204 by 512) against the packed
    1024 x 32's 0.222-0.228, softmax 0.203 against 0.225-0.232; two packed blocks of
    512 x 32 at (8192, 16384) stay ahead of staging (0.191 against 0.205)."""
    return plan.packed and plan.launch_bounds[1] == 1


def _make(spec, threads: int) -> BlockStrategy:
    return _strategies.resolve("block", spec, threads=threads)


# --- views and launch --------------------------------------------------------------------


def _launch(plan: RowPlan, views: list, stream, kept: tuple = ()) -> None:
    """Launch ``plan``'s kernel over the 3-D ``views``; ``kept``: a kept plan's
    arguments (``softmax_rows.kept_arguments``)."""
    rows, n = views[0].shape[0] * views[0].shape[1], views[0].shape[2]
    grid = min(-(-rows // plan.rows_per_block), _GRID_MAX)
    width = softmax_rows.vector_width(plan, n, views)
    if width:  # the same rows, read and written in 16-byte vectors
        plan = dataclasses.replace(plan, vector=width)
        views = [*views, *softmax_rows.vector_views(plan, views)]
    launch(softmax_rows.kernel_for(plan), grid, plan.threads, stream, *views, *kept,
           shared=softmax_rows.stage_shared(plan, n))


def _memory(kind: str) -> str:
    """Where an array of ``kind`` lives, in words (a torch CPU tensor is host memory,
    as NumPy's)."""
    return {"numpy": "host memory", "cupy": "a CuPy array"}.get(kind, "device memory")


def _run(kind: str, inputs: list, names: list, axis, plan_args: tuple, out, stream,
         result_dtype=None, keeping: tuple = (None, False, None)):
    """Validate, plan, lay out, launch; returns the result in the inputs' kind (of
    ``result_dtype``, default the inputs' dtype); ``keeping``: ``(mask, causal,
    scale)`` as the public functions take them."""
    described = [_describe(a, name) for a, name in zip(inputs, names)]
    _, akind, shape, dtype, precision = described[0]
    for (_, k, s, _, p), name in zip(described[1:], names[1:]):
        for what, got, want in (("shape", s, shape), ("dtype", p, precision),
                                ("memory", _memory(k), _memory(akind))):
            if got != want:
                raise ValueError(f"{kind}: {name} must have {names[0]}'s {what}, "
                                 f"{want}; got {got}")
    axis = _axis(axis, len(shape))
    rows = shape or (1,)  # the kernels' shape: a 0-d input is a row of one element
    if result_dtype is not None:
        dtype = np.dtype(_result_dtype(result_dtype))
        precision = dtype.name if precision != dtype.name else precision
    mask, causal, scale = keeping
    scale = _scale(scale)
    keep = _keep(mask, causal, scale, shape, axis, names[0])
    plan = _planned(kind, rows[axis], described[0][4], *plan_args, precision, keep)
    out = bits_like(out, precision, "out", kind)
    check_out(out, shape, dtype, akind, kind, exact=True)
    check_disjoint(out, {name: d[0] for d, name in zip(described, names)}, akind, kind)
    workspace = Workspace(akind, resolve_stream(stream, akind))
    if math.prod(shape) == 0:
        return out if out is not None else _empty(workspace, shape, dtype)
    devs = [_as_row(_on_device(a, akind, workspace)) for a, _, _, _, _ in described]
    result = workspace.empty(shape, dtype) if out is None or akind == "numpy" else out
    result_view = _as_row(device_view(result))
    views = axis_last_views(devs + [result_view], axis)
    if views is None:  # an input strided in three or more outer dimensions
        warn(f"numbakern copied {names} of shape {shape}: their strides need "
             "more than two strided dimensions", CopyWarning)
        devs = [contiguous_copy(a.bits if isinstance(a, BFloat16Bits) else a, d,
                                workspace.stream) for a, d in zip(inputs, devs)]
        views = axis_last_views(devs + [result_view], axis)
        if views is None:
            raise ValueError("out is strided in three or more outer dimensions; pass a "
                             "contiguous out")
    if (plan.packed or plan.staged) and not softmax_rows.vector_width(plan, rows[axis],
                                                                      views):
        plan = _planned(kind, rows[axis], described[0][4], *plan_args, precision, keep,
                        False)  # rows that cannot move in vectors: the scalar loads' plan
    kept = _kept_arguments(mask, causal, scale, rows, axis, views[0],
                           workspace) if keep else ()
    _launch(plan, views, workspace.stream, kept)
    return _deliver(result, akind, out, workspace)


def _forward(kind, x, axis, max_strategy, sum_strategy, normalizer, layout, fused, threads,
             out, stream, dtype, keeping):
    args = (normalizer, layout, fused, threads, max_strategy, sum_strategy)
    return _run(kind, [_cast_first(x, dtype, stream)], ["x"], axis, args, out, stream,
                dtype, keeping)


def _cast_first(x, dtype, stream):
    """An integer or bool ``x`` cast to a given ``dtype=`` (checked), as
    ``torch.softmax(x, dtype=)`` casts before computing: on the host for host input, on
    the device (an element-wise kernel) for device input; without ``dtype=``, a
    ``TypeError`` saying so. Anything else is ``x`` itself: the kernels read floats in
    place and compute them in ``dtype``; :func:`_describe` refuses the rest."""
    if isinstance(x, BFloat16Bits):
        return x
    a = as_array_like(x, "x")
    if np.dtype(a.dtype).kind not in "biu":
        return a
    if dtype is None:
        raise TypeError(f"x must be float16, bfloat16, float32 or float64 (an integer or "
                        f"bool one with a float dtype=), got dtype {a.dtype}")
    result = _result_dtype(dtype)
    kind = kind_of(a)
    if kind == "numpy":
        with np.errstate(over="ignore"):  # torch's cast, and the device's, say nothing
            return a.astype(result)
    from numbakern.api.reductions import _c_order

    workspace = Workspace(kind, resolve_stream(stream, kind))
    # (the cast kernel reads one C-ordered run: a strided x is copied first)
    return user_array(workspace.cast(_c_order(a, workspace), result)).reshape(tuple(a.shape))


def _result_dtype(dtype) -> np.dtype:
    """``dtype=`` checked: float16, float32 or float64 (``TypeError`` otherwise)."""
    try:
        result = np.dtype(dtype)
    except TypeError:
        result = None
    if result is None or result not in FLOATS:  # (None == np.dtype("float64") is True)
        raise TypeError("dtype must be float16, float32, float64 or ml_dtypes.bfloat16, got "
                        f"{dtype if result is None else _dtype_text(result)!r}")
    return result


def _dtype_text(dtype: np.dtype) -> str:
    """A dtype's name, or for one of non-native byte order its string (``'>f8'``)."""
    return dtype.name if dtype.isnative else dtype.str


def _backward(kind, y, dy, axis, sum_strategy, layout, fused, threads, out, stream, dtype,
              keeping):
    args = (None, layout, fused, threads, None, sum_strategy)
    return _run(kind, [y, dy], ["y", "dy"], axis, args, out, stream, dtype, keeping)


def _on_device(view, kind: str, workspace: Workspace):
    return to_device(view, workspace.stream) if kind == "numpy" else view


def _empty(workspace: Workspace, shape, dtype):
    if workspace.kind == "numpy":
        return np.empty(shape, dtype)
    return user_array(workspace.empty(shape, dtype))


def _deliver(result, kind: str, out, workspace: Workspace):
    if kind == "numpy":
        host = host_copy(result, workspace.stream)
        workspace.stream.synchronize()
        if out is None:
            return host.reshape(result.shape)
        out[...] = host
        return out
    return out if out is not None else user_array(result)


__all__ = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]
