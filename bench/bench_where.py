"""``where=`` on reductions, float32: whole-array and row sums of (32768, 4096) with a
full bool mask, a per-row mask (32768, 1) and a per-column mask (4096,) read at stride
0, beside the same sum without a mask and the peers' way (``cupy.where(mask, x, 0)``
then a sum: a masked copy of ``x``; torch likewise), and ``mean``/``var`` with a mask.

The masked path reads the mask beside ``x`` with scalar loads (no 16-byte vectors, no
tiny-row kernel): the unmasked sum in the same run is the ceiling it is measured
against. GB/s count the input read, the mask's own bytes (1 per element for the full
mask, its size for a broadcast one) and the result written.

``x`` is small integers (``small_integers``; a masked sum's speed does not depend on
the values). Each result is checked before timing against the same reduction in
float64: sums exactly (every order of summing small integers is exact), means within
two float32 roundings (the exact sum divided by the count, or times its reciprocal),
variances within 1e-4 relative (a float32 sum of squares, non-negative terms: within
chain x eps32 of the result; 1e-4 holds chains of 1600 additions). Rows the mask
leaves empty have a NaN mean and variance, which the check expects.

Run on a GPU host:  ``pytest bench/bench_where.py --benchmark-json=where.json``.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbakern as nk

EPS32 = float(np.finfo(np.float32).eps)
SHAPE = (32768, 4096)
MASKS = ["full", "rows", "columns"]
AXES = {"all": None, "rows": 1}


@pytest.fixture(scope="module")
def x(small_integers):
    return small_integers(SHAPE)


@pytest.fixture(scope="module", params=MASKS)
def mask(request, cp):
    shape = {"full": SHAPE, "rows": (SHAPE[0], 1), "columns": (SHAPE[1],)}[request.param]
    return request.param, cp.random.RandomState(0).random_sample(shape) < 0.5


def _moved(x, mask, results: int) -> int:
    return x.nbytes + mask.nbytes + results * 4


def _results(axis) -> int:
    return 1 if axis is None else SHAPE[0]


def _masked_sum(cp, x, m, axis):
    """The float64 sum of ``x`` where ``m`` (exact: small integers)."""
    return cp.where(m, x, 0).sum(axis=axis, dtype=cp.float64)


def _masked_moment(cp, x, m, op):
    """The float64 mean or variance of each row of ``x`` where ``m`` (NaN where none)."""
    m = cp.broadcast_to(m, x.shape)
    count = m.sum(axis=1)
    mean = _masked_sum(cp, x, m, 1) / count
    if op == "mean":
        return mean
    return cp.where(m, (x - mean[:, None]) ** 2, 0).sum(axis=1) / count


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("strategy", ["two_pass/warp_shuffle", "atomic_fold/warp_shuffle"])
def test_sum_where_numbakern(cp, x, mask, strategy, axis, measure, verify):
    name, m = mask
    a = AXES[axis]
    measure(lambda: nk.sum(x, axis=a, where=m, strategy=strategy),
            _moved(x, m, _results(a)), check=verify.agrees(_masked_sum(cp, x, m, a)),
            provider=strategy, mask=name, axis=axis, op="sum_where")


@pytest.mark.parametrize("axis", AXES)
def test_sum_unmasked_numbakern(cp, x, axis, measure, verify):
    a = AXES[axis]
    measure(lambda: nk.sum(x, axis=a), x.nbytes + _results(a) * 4,
            check=verify.agrees(x.sum(axis=a, dtype=cp.float64)), provider="numbakern",
            mask="none", axis=axis, op="sum_where")


@pytest.mark.parametrize("axis", AXES)
def test_sum_where_cupy(cp, x, mask, axis, measure, verify):
    name, m = mask
    a = AXES[axis]
    measure(lambda: cp.where(m, x, cp.float32(0)).sum(axis=a), _moved(x, m, _results(a)),
            check=verify.agrees(_masked_sum(cp, x, m, a)), provider="cupy", mask=name,
            axis=axis, op="sum_where")


@pytest.mark.parametrize("axis", AXES)
def test_sum_where_torch(cp, x, mask, axis, measure, torch_cuda, verify):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    name, m = mask
    t, tm = torch_cuda.as_tensor(x, device="cuda"), torch_cuda.as_tensor(m, device="cuda")
    a = AXES[axis]
    dims = {} if a is None else {"dim": a}
    measure(lambda: torch_cuda.where(tm, t, 0.0).sum(**dims), _moved(x, m, _results(a)),
            check=verify.agrees(_masked_sum(cp, x, m, a)), provider="torch", mask=name,
            axis=axis, op="sum_where")


@pytest.mark.parametrize("op", ["mean", "var"])
def test_row_mean_var_where_numbakern(cp, x, mask, op, measure, verify):
    name, m = mask
    fn = getattr(nk, op)
    check = verify.agrees(_masked_moment(cp, x, m, op), rtol=2 * EPS32 if op == "mean" else 1e-4)
    measure(lambda: fn(x, axis=1, where=m), _moved(x, m, SHAPE[0]), check=check,
            provider="numbakern", mask=name, axis="rows", op=f"{op}_where")
