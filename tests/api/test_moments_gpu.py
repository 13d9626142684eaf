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


def test_mean_keyword_on_cupy_and_torch_cuda(cp):
    """NumPy 2's ``mean=``: the squared-deviation kernel (any x layout, a broadcast
    mean, bfloat16 bits widened) and the (sum, count) reduction, compiled for the GPU;
    device input gets no floating-point warning (no synchronisation)."""
    import warnings

    rng = cp.random.default_rng(1)
    x = (100 + rng.standard_normal((64, 4099), dtype=cp.float32)).astype(cp.float32)
    m = x.mean(axis=1, keepdims=True)
    for name in ("var", "std", "nanvar", "nanstd"):
        got = getattr(nk, name)(x, axis=1, mean=m, ddof=1)
        want = getattr(cp, name)(x.astype(cp.float64), axis=1, ddof=1)
        assert isinstance(got, cp.ndarray)
        cp.testing.assert_allclose(got, want, rtol=1e-5)
    got = nk.var(x.T, axis=0, mean=m.T)  # a transposed x: copied to C order first
    cp.testing.assert_allclose(got, x.astype(cp.float64).var(axis=1), rtol=1e-5)
    y = x.copy()
    y[3, 7] = cp.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cp.isnan(nk.var(y, axis=1)[3])
    torch = pytest.importorskip("torch")
    t = torch.as_tensor(x, device="cuda").to(torch.bfloat16)
    wide = t.float()
    # NumPy's result_type of x and mean=: a float32 mean makes the result float32.
    for mean, dtype in ((wide.mean(dim=1, keepdim=True), torch.float32),
                        (t.mean(dim=1, keepdim=True), torch.bfloat16)):
        got = nk.var(t, axis=1, mean=mean)
        assert got.dtype == dtype and got.is_cuda
        want = (wide - mean.float()).square().mean(dim=1)
        torch.testing.assert_close(got.float(), want, rtol=2 ** -7, atol=0)
