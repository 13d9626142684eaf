"""Losses over rows of logits: ``cross_entropy``, fused (loss and gradient in one
kernel, ``numbakern/kernels/cross_entropy.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.api._dispatch import dispatch
from numbakern.api.reductions import _reduce as _reduce_axes
from numbakern.api.softmax import _deliver, _describe, bits_like
from numbakern.core.arrays import BFloat16Bits, Workspace, honours_stream, kind_of, resolve_stream
from numbakern.core.deliver import check_disjoint, check_out, deliver
from numbakern.kernels import bfloat16, cross_entropy as _ce
from numbakern.kernels.elementwise import THREADS, cast_into, fill, grid_for
from numbakern.kernels import softmax_rows
from numbakern.kernels.softmax_rows import compute_dtype
from numbakern.ops.state import state_kit
from numbakern.runtime.checks import check_flag, check_real
from numbakern.runtime.launch import launch
from numbakern.runtime.replay import replayable
from numbakern.runtime.views import (checked_words, device_view, host_copy, host_words,
                                     reinterpreted, sample_rows, sliced, strided, to_device)
from numbakern.strategies.online_softmax import ONLINE_SOFTMAX

REDUCTIONS = ("mean", "sum", "none")
_ROW_BLOCKS = 65535  # rows are grid-strided beyond this many blocks


def cross_entropy(logits, target, weight=None, *, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", return_grad=False, grad_out=None, strategy=None,
                  stream=None, check_target=True):
    """Cross-entropy of rows of logits against class-index targets, as
    ``torch.nn.functional.cross_entropy``, with its gradient from the same kernel.

    Args:
        logits: ``(N, C)``, torch's unbatched ``(C,)`` (one row, with a 0-d
            ``target``: every ``reduction`` gives a 0-d loss, ``"none"`` that row's),
            or, as torch, ``(N, C, d1, ..., dk)`` (a class score per
            position: each ``(n, d1, ..., dk)`` is a row over the ``C`` classes)
            float16, bfloat16, float32 or float64 array (NumPy, CuPy, a torch tensor,
            ...). Computed in float32 (float64 for float64). ``(N, C)``: any strides.
            K-dimensional: read in place, never copied, one launch per sample ``n``
            (its rows ``d`` are the class axis's neighbours, a stride apart), so the
            axes ``d1, ..., dk`` of a device array must be laid out as one axis (any
            C-contiguous array is; NumPy input is copied to the device anyway).
        target: ``(N,)`` (``()`` for ``(C,)`` logits, ``(N, d1, ..., dk)`` for
            K-dimensional logits) integer
            class indices in ``[0, C)``, or ``ignore_index``.
        weight: ``None`` or torch's per-class weights: ``(C,)`` floats (any float
            dtype and kind; read in the compute dtype). Row ``i``'s loss is multiplied
            by ``weight[target[i]]`` (with smoothing, torch's
            ``(1 - eps) w_t (lse - x_t) + eps / C sum_c w_c (lse - x_c)``), and a mean
            divides by the sum of the counted rows' ``weight[target[i]]``, as
            ``torch.nn.functional.cross_entropy``; NaN when that sum is 0 (torch's
            too where the counted weights are all 0; with weights of both signs
            summing to 0, torch's mean is the weighted loss over 0, +-inf: the
            kernels multiply by ``1 / sum``, NaN for a sum of 0). Device
            weights are copied to the host once (``C`` values, a synchronisation) to
            append their sum.
        ignore_index: rows with this target count nothing (loss and gradient 0; a
            mean divides by the rows that count).
        label_smoothing: ``eps`` in ``[0, 1]``: the target is ``(1 - eps)`` one-hot
            plus ``eps / C`` everywhere (PyTorch's definition); a number, or a 0-d
            NumPy array or torch tensor of one (a CUDA tensor read through ``item()``,
            as torch).
        reduction: ``"mean"`` (over rows that count; NaN when none does),
            ``"sum"`` or ``"none"`` (each row's loss).
        return_grad: also return the gradient of the reduced loss with respect to
            ``logits`` (for ``"none"``, of the sum of the row losses), written in the
            same pass: ``softmax(x) - target distribution``, scaled.
        grad_out: where to write the gradient (``logits``' shape, dtype and kind;
            ``logits`` itself works: the gradient then replaces the logits, and no
            second logits-sized buffer exists).
        strategy: the block strategy reducing each row (its online ``(max, sum)``,
            and its sum with smoothing): a name or a
            :class:`~numbakern.strategies.BlockStrategy`; default ``warp_shuffle``.
        stream: as the reductions'.
        check_target: ``False`` skips the read of the kernel's report on device
            targets, and with it the call's one synchronisation: the call returns as
            soon as its kernels are queued (torch checks its CUDA targets by a device
            assertion, which stops the process instead). A device target outside
            ``[0, C)`` that is not ``ignore_index`` then raises nothing: its row
            counts as an ignored row (loss 0, gradient 0, outside a mean's count),
            never read through. Host targets are checked either way (on the host,
            before the launch).

    Returns:
        the loss (a scalar of ``logits``' dtype for ``"mean"``/``"sum"`` and for
        ``(C,)`` logits, ``(N,)`` (``(N, d1, ..., dk)``) for ``"none"``), or
        ``(loss, grad)`` with
        ``return_grad`` (``grad``: ``logits``' shape).

    Raises:
        IndexError: a target outside ``[0, C)`` that is not ``ignore_index`` (host
            targets checked before the launch; device targets by the kernel, raised
            after it, which costs a synchronisation; not with ``check_target=False``).
            ``grad_out`` then holds no gradient (the kernel has written it, a
            replayed in-place call twice).
        ValueError: 0-d ``logits`` or ``logits`` with no class, K-dimensional
            device ``logits`` whose axes after the class axis are not one strided
            axis, ``target`` of the wrong
            shape, a bad ``reduction`` or ``label_smoothing``, a bad ``grad_out`` (or
            one without ``return_grad``), ``weight`` not of shape ``(C,)``,
            ``ignore_index`` outside int64's range.
        TypeError: ``check_target`` or ``return_grad`` not a bool,
            ``logits`` not float16/bfloat16/32/64, ``target`` not integer,
            ``ignore_index`` not an int, ``grad_out`` of another dtype, ``weight`` not
            floats.

    Targets are class indices; class probabilities as targets (torch's other form)
    are not taken.

    A repeated call on device arrays replays its recorded launches and the read of
    the kernel's report on device targets, a check (``numbakern/runtime/replay.py``):
    that read is the call's one synchronisation (none with ``check_target=False``).

    Source: the fused loss-and-gradient kernels of Liger-Kernel and QuACK; the
    online softmax normalizer of Milakov and Gimelshein (2018).
    """
    check_target = check_flag(check_target, "check_target")
    return_grad = check_flag(return_grad, "return_grad")
    return _launched(logits, target, weight=weight, ignore_index=ignore_index,
                     label_smoothing=label_smoothing, reduction=reduction,
                     return_grad=return_grad, grad_out=grad_out, strategy=strategy,
                     stream=stream, check_target=check_target)


def _launched(logits, target, *, weight, ignore_index, label_smoothing, reduction,
              return_grad, grad_out, strategy, stream, check_target):
    """:func:`cross_entropy`'s work, its arguments checked but for ``check_target``: its
    launches, then the read of the kernel's report on device targets (a check, which
    a replay takes again: ``views.checked_words``)."""
    view, kind, shape, dtype, precision = _describe(logits, "logits")
    if not shape:
        raise ValueError("logits must be (C,), (N, C) or (N, C, d1, ..., dk) as torch's "
                         "(C: the classes), got a 0-d array")
    unbatched = len(shape) == 1  # torch's (C,) logits, a 0-d target: one row
    given = shape
    if unbatched:
        view, shape = _one_row(view, kind), (1, *shape)
        reduction = "sum" if reduction == "none" else reduction  # one row's loss
    N, C = shape[:2]
    positions = shape[2:]  # torch's K-dimensional form: rows at (n, d1, ..., dk)
    rows_per_sample = math.prod(positions)
    if C == 0:
        raise ValueError("logits must have at least one class (column)")
    eps = _smoothing(label_smoothing)
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if not isinstance(ignore_index, (int, np.integer)) or isinstance(ignore_index, bool):
        raise TypeError(f"ignore_index must be an int, got {ignore_index!r}")
    ignore = int(ignore_index)
    if not -2**63 <= ignore < 2**63:  # torch's int64_t; no target could equal it
        raise ValueError(f"ignore_index must fit in int64, got {ignore}")
    tv, on_host = _target(target, () if unbatched else (N, *positions), C, ignore)
    if unbatched:
        tv = tv.reshape(1) if on_host else strided(tv, [(1, np.dtype(tv.dtype).itemsize)])
    if grad_out is not None and not return_grad:
        raise ValueError("grad_out is written only with return_grad=True")
    out = bits_like(grad_out, precision, "grad_out", "cross_entropy")  # None: allocated
    check_out(out, given, dtype, kind, "cross_entropy", exact=True, arg="grad_out")
    block = _strategies.resolve("block", strategy)
    workspace = Workspace(kind, resolve_stream(stream, kind))
    tc = compute_dtype(precision)
    x = to_device(view, workspace.stream) if kind == "numpy" else device_view(view)
    check_disjoint(out, {"logits": x}, kind, "cross_entropy", arg="grad_out")
    R = N * rows_per_sample  # rows over the classes
    t = workspace.from_host(tv.reshape(-1).astype(np.int64)) if on_host else \
        _flat_target(tv, R)
    w = _weights(weight, C, tc, workspace)
    grad = _grad_array(workspace, out, x, logits, shape, dtype, kind, return_grad,
                       unbatched)
    rows, values = _row_losses(workspace, reduction, (N, *positions), tc, dtype)
    samples = _samples(x, grad, t, rows, N, C, positions)
    slots = max(len(samples), 1)
    finish = _finish(reduction, return_grad, len(samples), R)
    scale, ticket, bad = _scale_and_report(workspace, t, ignore, C, tc,
                                           reduction == "mean" and finish != "mean", R, w,
                                           slots)
    w = w if w is not None else scale  # a kernel without weights never reads them
    result = workspace.empty(1, dtype) if finish else rows  # rows: never written
    for i, (xs, gs, ts, rs) in enumerate(samples):
        _launch(block, precision, xs, gs, (ts, rs, scale, sliced(bad, i, i + 1), ignore,
                                           tc.type(eps), w, result, ticket, R),
                eps > 0, workspace.stream, weight is not None, finish)
    loss = deliver(workspace, result, dtype, (), None) if finish else \
        _loss(workspace, rows, values, R, tc, dtype, precision, reduction)
    if return_grad:
        grad = _deliver(grad, kind, out, workspace)
        grad = grad.reshape(given) if unbatched and out is None else grad
    if check_target and not on_host:
        _report(bad, t, R // slots, given, C, ignore, workspace.stream)
    return (loss, grad) if return_grad else loss


# replay.latest's name, and the name a Dask array is refused under
_launched.__name__ = _launched.__qualname__ = "cross_entropy"
_launched = dispatch(replayable(honours_stream(_launched)))


def _constant(workspace: Workspace, n: int, value, dtype):
    """``n`` elements of ``value`` in the workspace, set by a launch (a recorded call
    replays it; an upload from the host would not be)."""
    arr = workspace.empty(n, dtype)
    fill(arr, value, workspace.stream)
    return arr


def _one_row(view, kind: str):
    """A 1-D view as a ``(1, n)`` view of the same memory."""
    if kind == "numpy":
        return view[None]
    return strided(view, [(1, 0), (view.shape[0], view.strides[0])])


def _launch(block, precision, x, grad, arguments: tuple, smoothing: bool, stream,
            weighted: bool, finish) -> None:
    """One block per row (grid-strided past :data:`_ROW_BLOCKS`): the vector kernel
    where the rows of ``x`` and the gradient allow 16-byte vectors
    (``softmax_rows.vector_width``), else the scalar one. ``finish``: as the kernels'
    (``kernels/cross_entropy.py``)."""
    N, C = x.shape
    g = grad if grad is not None else x
    plan = _ce.vector_plan(block, ONLINE_SOFTMAX, precision)
    views = [strided(a, [(1, 0), (N, a.strides[0]), (C, a.strides[1])]) for a in (x, g)]
    plan = dataclasses.replace(plan, vector=softmax_rows.vector_width(plan, C, views))
    grid, (t, rows, *rest) = min(N, _ROW_BLOCKS), arguments
    if plan.vector:
        kernel = _ce.vector_kernel_for(plan, smoothing, grad is not None, weighted, finish)
        launch(kernel, grid, block.threads, stream, views[0], t, views[1], rows, *rest,
               *softmax_rows.vector_views(plan, views))
    else:
        kernel = _ce.kernel_for(block, ONLINE_SOFTMAX, precision, smoothing, grad is not None,
                                weighted, finish)
        launch(kernel, grid, block.threads, stream, x, t, g, rows, *rest)


def _finish(reduction: str, gradient: bool, launches: int, R: int):
    """How the row kernel finishes the loss (``kernels/cross_entropy.py``'s ``finish``):
    ``"mean"`` or ``"sum"`` where one launch covers at most ``FINISH_ROWS`` rows (a
    mean with a gradient is the sum of rows already scaled by ``1 / count``, which the
    gradient needs before the rows), else None: the rows are reduced after."""
    if reduction == "none" or launches != 1 or R > _ce.FINISH_ROWS:
        return None
    return "mean" if reduction == "mean" and not gradient else "sum"


def _smoothing(value) -> float:
    """``label_smoothing=`` checked: a real number in [0, 1] (:func:`check_real`), as
    softmax's ``scale=``."""
    eps = float(check_real(value, "label_smoothing"))
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1], got {value!r}")
    return eps


def _samples(x, grad, t, rows, N: int, C: int, positions: tuple) -> list:
    """``[(logits, gradient, targets, row losses)]``, one 2-D launch each: the whole
    ``(N, C)`` input, or each sample ``n`` of K-dimensional logits as ``(D, C)`` rows
    (its positions, ``D = d1 ... dk``) read in place: the class axis strided, the
    positions one axis of one stride (ValueError naming ``logits`` otherwise)."""
    if not positions:
        return [(x, grad, t, rows)] if N else []
    D = math.prod(positions)
    if not N * D:
        return []
    stride = _positions_stride(x, positions, "logits")
    out = []
    for n in range(N):
        dims = [(D, stride), (C, x.strides[1])]
        g = None if grad is None else \
            sample_rows(grad, n, [(D, _positions_stride(grad, positions, "grad_out")),
                                  (C, grad.strides[1])])
        out.append((sample_rows(x, n, dims), g, sliced(t, n * D, (n + 1) * D),
                    sliced(rows, n * D, (n + 1) * D)))
    return out


def _positions_stride(a, positions: tuple, name: str) -> int:
    """The byte stride of ``a``'s axes after the class axis read as one axis."""
    strides = [s for e, s in zip(positions, a.strides[2:]) if e != 1] or [0]
    sizes = [e for e in positions if e != 1]
    for i in range(len(sizes) - 1):
        if strides[i] != strides[i + 1] * sizes[i + 1]:
            raise ValueError(
                f"{name} of shape {tuple(a.shape)} with strides {tuple(a.strides)}: the "
                f"axes after the class axis must be laid out as one axis (a C-contiguous "
                f"array; or pass (N, C) rows, or a copy of {name})")
    return strides[-1]


def _flat_target(view, R: int):
    """Device targets as one axis of ``R`` (their C-contiguous layout as a 1-D view)."""
    if len(view.shape) == 1:
        return view
    itemsize = np.dtype(view.dtype).itemsize
    want = [itemsize * math.prod(view.shape[i + 1:]) for i in range(len(view.shape))]
    if R and any(e != 1 and s != w for e, s, w in zip(view.shape, view.strides, want)):
        raise ValueError("device targets of K-dimensional logits must be C-contiguous")
    return strided(view, [(R, itemsize)])


def _target(target, shape: tuple, C: int, ignore: int):
    """``(view, on_host)``: the targets checked as far as the host can (all of them
    for host targets: ``IndexError`` naming ``target``)."""
    on_host = kind_of(target) == "numpy"
    view = np.asarray(target) if on_host else device_view(target)
    dtype = np.dtype(view.dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"target must hold integer class indices, got dtype {dtype}")
    if tuple(view.shape) != shape:
        raise ValueError(f"target must have shape {shape} (one class per row of logits: "
                         f"logits' shape without its class axis), got {tuple(view.shape)}")
    if on_host:
        wrong = np.flatnonzero((view != ignore) & ((view < 0) | (view >= C)))
        if wrong.size:
            i = int(wrong[0])
            raise IndexError(f"target {int(view.reshape(-1)[i])} of row {_where(i, shape)} "
                             f"is out of bounds for {C} classes (and is not "
                             f"ignore_index={ignore})")
    return view, on_host


def _weights(weight, C: int, tc: np.dtype, workspace: Workspace):
    """``weight`` on the device as the kernels read it: ``C + 1`` elements of the
    compute dtype, the weights' sum (taken in float64) last; None without weights."""
    if weight is None:
        return None
    bits = isinstance(weight, BFloat16Bits)
    weight = weight.bits if bits else weight
    host = np.asarray(weight) if kind_of(weight) == "numpy" else \
        host_words(device_view(weight), workspace.stream)  # after the work that wrote it
    if bits:
        host = bfloat16.widen_on_host(host)
    if host.dtype.kind != "f":
        raise TypeError(f"weight must hold floats (one weight per class), got dtype "
                        f"{host.dtype}")
    if host.shape != (C,):
        raise ValueError(f"weight must have shape ({C},) (one weight per class of "
                         f"logits), got {host.shape}")
    wide = host.astype(np.float64)
    return workspace.from_host(np.append(wide, wide.sum()).astype(tc))


def _where(i: int, shape: tuple):
    """Row ``i`` as the caller indexes it: ``i`` for ``(N,)`` targets (0 for the one
    row of ``(C,)`` logits), else the tuple."""
    return i if len(shape) <= 1 else tuple(int(k) for k in np.unravel_index(i, shape))


def _report(bad, target, per: int, logits_shape: tuple, C: int, ignore: int, stream
            ) -> None:
    """Raise the first out-of-bounds target the launches recorded: ``bad`` holds a
    slot per launch, the total row count (at least ``per``, a launch's rows) where
    none was found, else the first bad row's index within the launch; read after the
    work on ``stream``. ``target``: the flat device targets."""
    # the report depends on the targets alone, which no call writes: an in-place call
    # (grad_out=logits) re-run after its replay wrote the gradient fails the same way
    found = checked_words(bad, stream, functools.partial(_all_at_least, per),
                          same_on_rerun=True)
    hits = np.flatnonzero(found < per)
    if hits.size:
        shape = (1,) if len(logits_shape) == 1 else (logits_shape[0], *logits_shape[2:])
        row = int(hits[0]) * per + int(found[hits[0]])
        value = int(host_copy(target).reshape(-1)[row])
        raise IndexError(f"target {value} of row {_where(row, shape)} is out of bounds "
                         f"for {C} classes (and is not ignore_index={ignore})")


def _all_at_least(per: int, words: np.ndarray) -> bool:
    """A report's check: no slot names a row (each holds ``per``)."""
    return bool((words >= per).all())


def _scale_and_report(workspace: Workspace, t, ignore: int, C: int, tc: np.dtype,
                      counted: bool, N: int, w, slots: int) -> tuple:
    """``(scale, ticket, bad)``: a 1-element device array of the compute dtype ``tc``
    that the row kernels multiply each loss and gradient by (with ``counted``,
    ``1 / rows counted``, with weights ``w`` ``1 / sum of their weights``; else 1), the
    finishing block's ticket holding ``N`` (its ``start``), and ``slots`` int64
    report slots holding ``N`` (no bad target). One fill launch sets them all (the
    scale's 1, or a count and its ticket at 0) in one allocation; a count is one more
    launch (``cross_entropy.count_kernel``), on the device: the host never waits
    for it."""
    head = 2 if counted else 1
    words = workspace.empty(head + 1 + slots, np.int64)
    one = np.ones(1, tc).view(np.int32 if tc.itemsize == 4 else np.int64)[0]
    fill(words, 0 if counted else int(one), workspace.stream, head, N)  # 1.0's bits
    ticket, bad = sliced(words, head, head + 1), sliced(words, head + 1, head + 1 + slots)
    if not counted:
        return reinterpreted(words, tc, 1), ticket, bad
    scale = workspace.empty(1, tc)
    grid, count_ticket = min(grid_for(N), 1024), sliced(words, 1, 2)
    if w is None:
        launch(_ce.count_kernel(), grid, THREADS, workspace.stream, t, ignore, C,
               sliced(words, 0, 1), count_ticket, scale)
    else:  # 0.0's float64 bits are int64 0's
        launch(_ce.weighted_count_kernel(), grid, THREADS, workspace.stream, t, ignore, w,
               reinterpreted(words, np.float64, 1), count_ticket, scale)
    return scale, ticket, bad


def _grad_array(workspace, out, x, logits, shape, dtype, kind, wanted: bool,
                unbatched: bool = False):
    """The device array the gradient goes to (``out``'s, as one row for
    ``unbatched`` logits; ``x`` itself when it is ``logits``), or None."""
    if not wanted:
        return None
    if out is None:
        return workspace.empty(shape, dtype)
    if kind == "numpy":
        return x if out is logits else workspace.empty(shape, dtype)
    return _one_row(device_view(out), kind) if unbatched else device_view(out)


def _row_losses(workspace, reduction: str, shape: tuple, tc, dtype) -> tuple:
    """``(the row kernel's losses: 1-D, compute dtype, the "none" result or None)``.
    A ``"none"`` of float32 or float64 logits has its losses written straight into
    the result, allocated in its final shape (what is delivered on a GPU is the
    allocation itself, ``user_array``, not a view made of it afterwards)."""
    R = math.prod(shape)
    if reduction != "none":
        return workspace.empty(max(R, 1), tc), None
    values = workspace.empty(shape, dtype)
    if np.dtype(dtype) == tc and R:
        return strided(values, [(R, tc.itemsize)]), values
    return workspace.empty(max(R, 1), tc), values


def _loss(workspace, rows, values, N: int, tc, dtype, precision: str, reduction: str):
    """The loss in ``logits``' dtype: ``values`` (``"none"``'s result, from
    :func:`_row_losses`) holding the ``N`` row losses, else their sum."""
    if values is not None:
        if N and np.dtype(dtype) != tc:
            _narrow(rows, strided(values, [(N, np.dtype(dtype).itemsize)]), precision,
                    workspace, N)
        return _deliver(values, workspace.kind, None, workspace)
    if N:
        kit = state_kit(_ops.SUM, (tc,))
        grid = _strategies.resolve("reduce", None)
        total = _reduce_axes(rows if N == rows.shape[0] else rows[:N], (0,), _ops.SUM, kit,
                             grid, workspace, None, track_index=False)[0]
    else:
        total = _constant(workspace, 1, np.nan if reduction == "mean" else 0, tc)
    if np.dtype(dtype) == tc:  # float32 or float64 logits: the sum is the loss
        return deliver(workspace, total, dtype, (), None)
    value = workspace.empty(1, dtype)
    _narrow(total, value, precision, workspace, 1)
    return deliver(workspace, value, dtype, (), None)  # a 0-d view: the call replays


def _narrow(src, dst, precision: str, workspace, n: int) -> None:
    if not n:
        return
    if precision == "bfloat16":
        bfloat16.narrow_into(src, dst, workspace.stream)
    else:
        cast_into(src, dst, workspace.stream)


__all__ = ["cross_entropy"]
