"""Checks of benchmark results on the device, shared by the suites (``bench/conftest.py``'s
``verify``) and ``bench/peers.py``: a result against a reference, exactly or within a
bound, a chunk at a time (results reach several GB), for CuPy arrays, torch tensors and
Numba device arrays alike; indices in range, distinct, and holding their values.
"""

from __future__ import annotations

import math
from functools import partial
from types import SimpleNamespace

#: elements compared at a time: float64 temporaries of 128 MiB
CHUNK = 1 << 24


def device_array(cp, a):
    """``a`` as an array of ``cp`` (CuPy; NumPy in a test of these helpers), on the
    device without a copy: CuPy and Numba device arrays (``__cuda_array_interface__``)
    and torch tensors, detached; bfloat16, which CuPy lacks, widened to float32 by torch
    (a copy: :func:`assert_close` widens a chunk at a time)."""
    if hasattr(a, "detach"):
        a = a.detach()
        if str(a.dtype) == "torch.bfloat16":
            a = a.float()
    return cp.asarray(a)


def _off(cp, got, want, rtol, atol, exact: bool, equal_nan: bool):
    """(how many elements of ``got`` are off ``want``, the largest ``|got - want|`` among
    them) as device scalars: an element is right if equal, NaN where ``want`` is NaN
    (``equal_nan``), or (``exact`` False) within ``atol + rtol * |want|``, in float64
    (a finite distance: an infinite ``want`` makes the bound infinite too, so only an
    equal ``got`` is right there)."""
    ok = got == want
    if equal_nan and got.dtype.kind == "f" and want.dtype.kind == "f":
        ok |= cp.isnan(got) & cp.isnan(want)
    err = cp.abs(cp.subtract(got, want, dtype=cp.float64))
    if not exact:
        ok |= cp.isfinite(err) & (err <= atol + rtol * cp.abs(want.astype(cp.float64)))
    return cp.count_nonzero(~ok), cp.where(ok, 0.0, err).max()


def _rows(a):
    """``a`` with at least one axis (a 0-d result as one element), of its own kind:
    CuPy, NumPy, Numba or torch (whose chunks are widened one at a time)."""
    return a.reshape(1) if len(a.shape) == 0 else a


def _dtype_name(a) -> str:
    """``a``'s dtype by name, a torch tensor's as a NumPy-style array's."""
    return str(a.dtype).removeprefix("torch.")


def assert_close(cp, got, want, rtol=0.0, atol=0.0, same_dtype=False,
                 equal_nan=True) -> None:
    """Raise AssertionError unless ``got`` has ``want``'s shape (and dtype, with
    ``same_dtype``: a reference of the result's own dtype) and each element is right by
    :func:`_off` (``rtol = atol = 0``: equal, integers compared exactly; NaN matches
    only NaN, and with ``equal_nan`` False not even NaN: a reference that is itself a
    peer's result). ``atol`` may be an array broadcasting to ``want`` (a bound per element).
    Tuples, such as (values, indices), compare part by part. On the device,
    :data:`CHUNK` elements at a time."""
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            raise AssertionError(f"a {type(got).__name__}, not {len(want)} results")
        for i, (g, w) in enumerate(zip(got, want)):
            try:
                assert_close(cp, g, w, rtol, atol, same_dtype, equal_nan)
            except AssertionError as exc:
                raise AssertionError(f"result {i}: {exc}") from None
        return
    if same_dtype and _dtype_name(got) != _dtype_name(want):  # before bfloat16 widens
        raise AssertionError(f"dtype {_dtype_name(got)}, the reference's {_dtype_name(want)}")
    got, want = (a if hasattr(a, "shape") else device_array(cp, a) for a in (got, want))
    if tuple(got.shape) != tuple(want.shape):
        raise AssertionError(f"shape {tuple(got.shape)}, the reference's {tuple(want.shape)}")
    size = math.prod(want.shape)
    if not size:
        return
    scalar = isinstance(atol, (int, float))
    exact = not rtol and scalar and not atol
    bound = "equal" if exact else \
        f"within {rtol:.3g} * |want| + {f'{atol:.3g}' if scalar else 'a bound each'}"
    got, want = _rows(got), _rows(want)
    atol = cp.broadcast_to(device_array(cp, atol), tuple(want.shape))  # a view
    step = max(1, CHUNK // max(1, math.prod(want.shape[1:])))  # rows a chunk
    bad, worst = 0, 0.0
    for i in range(0, want.shape[0], step):  # each chunk made a CuPy array on its own
        g, w = (device_array(cp, a[i:i + step]) for a in (got, want))
        n, e = _off(cp, g, w, rtol, atol[i:i + step], exact, equal_nan)
        bad, worst = bad + n, cp.maximum(worst, e)  # NaN kept
    if int(bad):
        raise AssertionError(f"{int(bad)} of {size} elements not {bound}; "
                             f"max |error| {float(worst):.4g}")


def taken(cp, x, indices):
    """``x``'s elements at ``indices`` along the last axis; AssertionError if an index
    is outside the axis."""
    idx = device_array(cp, indices)
    if idx.size and bool(((idx < 0) | (idx >= x.shape[-1])).any()):
        raise AssertionError("an index outside the axis")
    return cp.take_along_axis(x, idx, axis=-1)


def assert_distinct(cp, indices) -> None:
    """AssertionError if a row of ``indices`` (the last axis) holds an index twice."""
    s = cp.sort(device_array(cp, indices), axis=-1)
    if bool((s[..., 1:] == s[..., :-1]).any()):
        raise AssertionError("an index taken twice in a row")


def pair_check(cp, x, want):
    """The check of a (values, indices) pair of rows of ``x`` (a sort's, a top-k's):
    the values ``want`` exactly, the indices distinct in each row and holding them."""
    def check(got):
        values, indices = got
        assert_close(cp, values, want)
        assert_distinct(cp, indices)
        assert_close(cp, taken(cp, x, indices), want)

    return check


def running_product_check(cp, x, want, step=1e-4, drift=0.5):
    """The check of a cumprod of 1-D ``x`` (factors near 1, every prefix a normal
    float: a zero or infinite one makes a ratio NaN) against its float64 ``want``:
    each output over the one before within ``step`` of its factor, the first the first
    factor, and every output within ``drift`` relative of ``want``.

    A float32 cumprod's prefixes drift from the float64 ones as its rounding errors
    compound, about linearly with the length: a tiled float32 scan (in-tile chains of
    4096, then the tile prefixes chained) of factors in [0.999, 1.001] is 2.3e-3 off
    at 2**25 on the CPU, 1.9e-2 at 2**28; CuPy's and torch's of 2**28 on the GPU at
    least 1.2% and 0.9%. That is a lost or doubled tile's size (a product of thousands
    of such factors), so the drift cannot tell them apart; the step can: between
    neighbours a scan's rounding is a few ulps (the prefix both share cancels), where
    a lost tile jumps by its product (of 4096 such factors: within ``step`` of 1 about
    once in 400). ``drift`` only bounds a steady bias too small for one step to show.
    """
    x = device_array(cp, x)

    def check(got):
        got = device_array(cp, got)
        assert_close(cp, got[:1], x[:1], rtol=1e-6)
        for lo in range(1, got.size, CHUNK):
            hi = min(lo + CHUNK, got.size)
            ratio = cp.divide(got[lo:hi], got[lo - 1:hi - 1], dtype=cp.float64)
            assert_close(cp, ratio, x[lo:hi].astype(cp.float64), rtol=step)
        assert_close(cp, got, want, rtol=drift)

    return check


def softmax_backward(xp, y, dy):
    """``dx = y * (dy - sum(y * dy))`` of the rows of ``y = softmax(x)`` and ``dy``, and
    the magnitudes rounded on the way, ``y * (|dy| + sum|y * dy|)``: a row sum may cancel
    to nothing, so a check's bound is a multiple of these, not of ``|dx|``. ``xp``:
    CuPy or torch, the module of the arrays."""
    p = y * dy
    return (y * (dy - p.sum(axis=1, keepdims=True)),
            y * (abs(dy) + abs(p).sum(axis=1, keepdims=True)))


def log_softmax_backward(xp, y, dy):
    """``dx = dy - exp(y) * sum(dy)`` of the rows of ``y = log_softmax(x)`` and ``dy``,
    and the magnitudes rounded on the way, ``|dy| + exp(y) * sum|dy|`` (as
    :func:`softmax_backward`)."""
    e = xp.exp(y)
    return (dy - e * dy.sum(axis=1, keepdims=True),
            abs(dy) + e * abs(dy).sum(axis=1, keepdims=True))


def verifier(cp) -> SimpleNamespace:
    """The checks over ``cp`` (CuPy; NumPy in a test of these helpers), as the suites'
    ``verify`` fixture gives them: ``agrees(want, rtol=0, atol=0, same_dtype=False)``
    makes a ``check`` for ``measure`` (the result against ``want`` by
    :func:`assert_close`); ``pair(x, want)`` the check of a (values, indices) pair whose
    indices may order equal values either way (:func:`pair_check`);
    ``running_product(x, want)`` that of a cumprod (:func:`running_product_check`);
    ``close(got, want,
    rtol=0, atol=0)`` asserts at once; ``taken(x, indices)`` and ``distinct(indices)``
    for indices (:func:`taken`, :func:`assert_distinct`); ``array(a)`` is
    :func:`device_array`."""
    close = partial(assert_close, cp)
    return SimpleNamespace(
        close=close, agrees=lambda want, rtol=0.0, atol=0.0, same_dtype=False: (
            lambda got: close(got, want, rtol, atol, same_dtype)),
        pair=partial(pair_check, cp), running_product=partial(running_product_check, cp),
        taken=partial(taken, cp),
        distinct=partial(assert_distinct, cp), array=partial(device_array, cp))
