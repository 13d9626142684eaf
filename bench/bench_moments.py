"""var, std, logsumexp, nansum, nanmean and vector_norm (ord 2) of float32 beside
their peers, same run: ``torch.var`` / ``torch.std`` (``correction=0``, NumPy's
``ddof=0``), ``torch.logsumexp``, ``torch.nansum``, ``torch.nanmean``,
``torch.linalg.vector_norm``, ``cupy.var``, ``cupy.nansum``, ``cupy.linalg.norm``.
Two shapes: a flat 2^28 array (axis=None) and rows of (32768, 4096) reduced along the
last axis. GB/s count the input read.

Run on a GPU host:  ``pytest bench/bench_moments.py --benchmark-json=moments.json``,
then ``python bench/table.py moments.json``.
"""

from __future__ import annotations

import pytest

import numbakern as nk

SHAPES = {"2^28": ((1 << 28,), None), "rows": ((32768, 4096), -1)}
OPS = ["var", "std", "logsumexp", "nansum", "nanmean", "vector_norm"]


@pytest.fixture(scope="module", params=list(SHAPES))
def case(request, cp):
    shape, axis = SHAPES[request.param]
    x = cp.random.standard_normal(shape, dtype=cp.float32)
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


@pytest.mark.parametrize("op", OPS)
def test_numbakern(case, op, cp, measure):
    name, x, axis = case
    y = _input(cp, x, op)
    measure(lambda: getattr(nk, op)(y, axis=axis), y.nbytes, op=op, shape=name,
            dtype="float32", provider="numbakern")


@pytest.mark.parametrize("op", OPS)
def test_torch(case, op, cp, measure, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    name, x, axis = case
    y = _input(cp, x, op)
    t = torch_cuda.as_tensor(y, device="cuda")
    fn = _torch_call(torch_cuda, t, op, axis)
    if op == "logsumexp" and axis is None:
        flat = t.reshape(-1)
        fn = lambda: torch_cuda.logsumexp(flat, dim=0)  # noqa: E731
    measure(fn, y.nbytes, op=op, shape=name, dtype="float32", provider="torch")


@pytest.mark.parametrize("op", OPS)
def test_cupy(case, op, cp, measure):
    name, x, axis = case
    y = _input(cp, x, op)
    fn = _cupy_call(cp, y, op, axis)
    if fn is None:
        pytest.skip(f"CuPy has no {op}")
    measure(fn, y.nbytes, op=op, shape=name, dtype="float32", provider="cupy")
