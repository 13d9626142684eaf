"""var, std, logsumexp, nansum, nanmean and vector_norm (ord 2) of float32 beside
their peers, same run: ``torch.var`` / ``torch.std`` (``correction=0``, NumPy's
``ddof=0``), ``torch.logsumexp``, ``torch.nansum``, ``torch.nanmean``,
``torch.linalg.vector_norm``, ``cupy.var``, ``cupy.nansum``, ``cupy.linalg.norm``.
Two shapes: a flat 2^28 array (axis=None) and rows of (32768, 4096) reduced along the
last axis. GB/s count the input read.

The input is small integers (``small_integers``; none of these reductions is faster
or slower for other values) with NaN in column 7 for the nan-forms. Each result is
checked against the same reduction in float64 before timing: ``nansum`` exactly (every
order of summing small integers is exact), ``nanmean`` within two float32 roundings
(the exact sum divided, or times the reciprocal), and var, std, logsumexp and
vector_norm within 1e-4 relative: float32 sums of non-negative terms (squares,
exponentials) in any order are within (longest chain of additions) x eps32 of the
result, and 1e-4 holds chains of 1600 additions in the worst case (the strategies'
chains are a few hundred; random roundings grow as their square root).

Run on a GPU host:  ``pytest bench/bench_moments.py --benchmark-json=moments.json``,
then ``python bench/table.py moments.json``.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbakern as nk

EPS32 = float(np.finfo(np.float32).eps)
SHAPES = {"2^28": ((1 << 28,), None), "rows": ((32768, 4096), -1)}
OPS = ["var", "std", "logsumexp", "nansum", "nanmean", "vector_norm"]
#: each op's bound relative to the float64 result (the module doc says why)
RTOL = {"nansum": 0.0, "nanmean": 2 * EPS32, "var": 1e-4, "std": 1e-4, "logsumexp": 1e-4,
        "vector_norm": 1e-4}


@pytest.fixture(scope="module", params=list(SHAPES))
def case(request, small_integers, cp):
    shape, axis = SHAPES[request.param]
    x = small_integers(shape)
    x[..., 7] = cp.nan  # the nan-forms have NaN to skip; var and logsumexp do not see it
    return request.param, x, axis


def _torch_call(torch, t, op, axis):
    dim = () if axis is None else axis
    return {
        "var": lambda: torch.var(t, dim=dim, correction=0),
        "std": lambda: torch.std(t, dim=dim, correction=0),
        "logsumexp": lambda: torch.logsumexp(t, dim=dim if axis is not None else 0),
        "nansum": lambda: torch.nansum(t, dim=dim),
        "nanmean": lambda: torch.nanmean(t, dim=axis),
        "vector_norm": lambda: torch.linalg.vector_norm(t, dim=axis),
    }[op]


def _cupy_call(cp, x, op, axis):
    return {"var": lambda: cp.var(x, axis=axis), "std": lambda: cp.std(x, axis=axis),
            "nansum": lambda: cp.nansum(x, axis=axis),
            "nanmean": lambda: cp.nanmean(x, axis=axis),
            "vector_norm": lambda: cp.linalg.norm(x, axis=axis)}.get(op)


def _input(cp, x, op):
    """The nan-forms read the NaNs; the others a copy with them zeroed (made once)."""
    if op.startswith("nan"):
        return x
    y = x.copy()
    y[..., 7] = 0.0
    return y


def _float64(cp, y, op, axis):
    """``op`` of ``y`` along ``axis``, computed in float64."""
    y = y.astype(cp.float64)
    if op == "logsumexp":
        top = y.max(axis=axis, keepdims=True)
        return cp.log(cp.exp(y - top).sum(axis=axis)) + top.squeeze(axis)
    if op == "vector_norm":
        return cp.sqrt((y * y).sum(axis=axis))
    return getattr(cp, op)(y, axis=axis)


def _check(verify, cp, y, op, axis):
    """The check of ``op``'s result: the float64 one within ``RTOL[op]``."""
    return verify.agrees(_float64(cp, y, op, axis), rtol=RTOL[op])


@pytest.mark.parametrize("op", OPS)
def test_numbakern(case, op, cp, measure, verify):
    name, x, axis = case
    y = _input(cp, x, op)
    measure(lambda: getattr(nk, op)(y, axis=axis), y.nbytes,
            check=_check(verify, cp, y, op, axis), op=op, shape=name, dtype="float32",
            provider="numbakern")


@pytest.mark.parametrize("op", OPS)
def test_torch(case, op, cp, measure, torch_cuda, verify):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    name, x, axis = case
    y = _input(cp, x, op)
    t = torch_cuda.as_tensor(y, device="cuda")
    fn = _torch_call(torch_cuda, t, op, axis)
    if op == "logsumexp" and axis is None:
        flat = t.reshape(-1)
        fn = lambda: torch_cuda.logsumexp(flat, dim=0)  # noqa: E731
    measure(fn, y.nbytes, check=_check(verify, cp, y, op, axis), op=op, shape=name,
            dtype="float32", provider="torch")


@pytest.mark.parametrize("op", OPS)
def test_cupy(case, op, cp, measure, verify):
    name, x, axis = case
    y = _input(cp, x, op)
    fn = _cupy_call(cp, y, op, axis)
    if fn is None:
        pytest.skip(f"CuPy has no {op}")
    measure(fn, y.nbytes, check=_check(verify, cp, y, op, axis), op=op, shape=name,
            dtype="float32", provider="cupy")
