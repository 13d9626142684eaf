"""var, std and logsumexp on a real GPU past 2^28 elements (marked `gpu`; skipped under
the simulator), against CuPy's float64 answers on the same data.

Tolerances: var/std are accumulated as Welford states in float64 (then rounded once
to float32), so they are held to 1e-6 relative; logsumexp accumulates float32 in
float32 through the online ``(max, sum)`` tree: 4 eps(float32) relative error of its
sum of positive terms is an absolute error of the log, plus two roundings of the
result.
"""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu

N = (1 << 28) + 17  # past 2^28, and not a multiple of any block or tile
EPS = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def big(cp):
    """2^28 + 17 float32 values of mean 1e4 (the naive one-pass variance fails here)."""
    rng = cp.random.default_rng(0)
    return (1e4 + rng.standard_normal(N, dtype=cp.float32)).astype(cp.float32)


@pytest.mark.parametrize("strategy", [None, "two_pass"])
def test_var_and_std_past_2_28(cp, big, strategy):
    wide = big.astype(cp.float64)
    want = float(wide.var())
    assert abs(float(nk.var(big, strategy=strategy)) - want) <= 1e-6 * want
    assert abs(float(nk.std(big, ddof=1, strategy=strategy)) - float(wide.std(ddof=1))) \
        <= 1e-6 * want ** 0.5


def test_var_of_rows(cp, big):
    rows = big[: 32768 * 4096].reshape(32768, 4096)
    want = rows.astype(cp.float64).var(axis=1)
    got = nk.var(rows, axis=1)
    assert bool(cp.all(cp.abs(got.astype(cp.float64) - want) <= 1e-5 * want))


def test_logsumexp_past_2_28(cp, big):
    x = (big - 1e4) * 3
    wide = x.astype(cp.float64)
    m = float(wide.max())
    want = m + float(cp.log(cp.exp(wide - m).sum()))
    assert abs(float(nk.logsumexp(x)) - want) <= EPS * (4 + 2 * abs(want))
    rows = x[: 32768 * 4096].reshape(32768, 4096).astype(cp.float64)
    rm = rows.max(axis=1, keepdims=True)
    want_rows = (rm + cp.log(cp.exp(rows - rm).sum(axis=1, keepdims=True)))[:, 0]
    got_rows = nk.logsumexp(x[: 32768 * 4096].reshape(32768, 4096), axis=1)
    assert bool(cp.all(cp.abs(got_rows.astype(cp.float64) - want_rows)
                       <= EPS * (4 + 2 * cp.abs(want_rows))))
