"""cross_entropy's reduced loss finished by the row kernel's last block
(numbakern/kernels/cross_entropy.py, ``FINISH_ROWS``) against torch's in float64 on
the CPU: row counts around warp and block boundaries (one block per row, so every
count is a different number of blocks taking the ticket), a mean counted by the last
block (without a gradient) or scaled by the count kernel (with one), a sum, weights,
ignored rows, every block strategy, half precision, and the route itself: the launches
a device call records (``replay.latest``), with and past ``FINISH_ROWS`` rows.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.kernels import cross_entropy as ce
from numbakern.runtime import replay
from numbakern.runtime.device import SIMULATOR
from numbakern.strategies import every

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(23)
# float32 gradients: a target class of probability near 1 gives p - 1 by cancellation,
# off by about one unit in the last place of the row's lse (1e-6 for lse near 10) on
# the GPU, whose exp and log are float32's
GRAD_TOL = dict(rtol=2e-5, atol=2e-6)
KEY = ("cross_entropy", "sim" if SIMULATOR else "device")  # replay.latest's
# two warps: a block strategy's reduce meets shared memory (one warp may not)
BLOCKS = {s.name: s for s in every("block", threads=64)}
ONE_WARP = every("block", threads=32)[0]
ROWS = [1, 31, 32, 33, 65]


def case(rows, classes, dtype=np.float32):
    x = (RNG.standard_normal((rows, classes)) * 3).astype(dtype)
    t = RNG.integers(0, classes, rows)
    t[::7] = -100  # rows 0, 7, ...: ignored
    w = (RNG.random(classes) * 2).astype(dtype)
    return x, t, w


def reference(x, t, w, reduction):
    xr = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    weight = None if w is None else torch.from_numpy(w.astype(np.float64))
    loss = F.cross_entropy(xr, torch.from_numpy(t), weight=weight, reduction=reduction)
    loss.backward()
    return loss.item(), xr.grad.numpy()


def steps(x, t, **kw):
    """The launches and checks a device call of these arrays records."""
    replay.forget()
    nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), **kw)
    return replay.latest[KEY].names


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_last_block_reduces_every_rows_loss(rows, reduction, weighted):
    x, t, w = case(rows, 40)
    w = w if weighted else None
    want, want_grad = reference(x, t, w, reduction)
    loss = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), w, reduction=reduction)
    both, grad = nk.cross_entropy(x, t, w, reduction=reduction, return_grad=True)
    if np.isnan(want):  # one row, ignored: torch's mean of nothing
        assert np.isnan(loss.copy_to_host()) and np.isnan(both)
        return
    np.testing.assert_allclose(loss.copy_to_host(), want, rtol=2e-6)
    np.testing.assert_allclose(both, want, rtol=2e-6)
    np.testing.assert_allclose(grad, want_grad, **GRAD_TOL)


def test_rows_past_one_round_of_the_last_blocks_loads():
    """More rows than the finishing block loads in one round (``_UNROLL`` a thread)."""
    x, t, w = case(ce._UNROLL * ONE_WARP.threads + 5, 3)
    for reduction in ("mean", "sum"):
        got = nk.cross_entropy(x, t, w, reduction=reduction, strategy=ONE_WARP)
        np.testing.assert_allclose(got, reference(x, t, w, reduction)[0], rtol=2e-6)


@pytest.mark.parametrize("name", list(BLOCKS))
@pytest.mark.parametrize("weighted", [False, True])
def test_every_block_strategy_finishes_the_loss(name, weighted):
    x, t, w = case(33, 20)
    w = w if weighted else None
    for reduction in ("mean", "sum"):
        want, want_grad = reference(x, t, w, reduction)
        loss = nk.cross_entropy(x, t, w, reduction=reduction, strategy=BLOCKS[name])
        both, grad = nk.cross_entropy(x, t, w, reduction=reduction, return_grad=True,
                                      strategy=BLOCKS[name])
        np.testing.assert_allclose(loss, want, rtol=2e-6)
        np.testing.assert_allclose(both, want, rtol=2e-6)
        np.testing.assert_allclose(grad, want_grad, **GRAD_TOL)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_losses_are_rounded_once_by_the_last_block(dtype):
    x = torch.randn(33, 24).to(getattr(torch, dtype))
    t = torch.from_numpy(RNG.integers(0, 24, 33))
    for reduction in ("mean", "sum"):
        got = nk.cross_entropy(x, t, reduction=reduction)
        # torch's half losses: computed in float32, rounded once to the half dtype;
        # the sums' orders differ, so the roundings may differ by one unit in the last
        # place (2^-10 of the value for float16, 2^-7 for bfloat16), not more
        want = F.cross_entropy(x.float(), t, reduction=reduction).to(x.dtype)
        assert got.dtype == x.dtype and got.shape == ()
        ulp = 2.0 ** (-10 if dtype == "float16" else -7)
        torch.testing.assert_close(got.float(), want.float(), rtol=ulp, atol=0)


def test_a_mean_of_nothing_counted_by_the_last_block_is_nan():
    x, t, w = case(33, 20)
    assert np.isnan(nk.cross_entropy(x, np.full(33, -100)))
    assert nk.cross_entropy(x, np.full(33, -100), reduction="sum") == 0
    zero = np.zeros_like(w)  # every counted weight 0: torch's nan too
    assert np.isnan(nk.cross_entropy(x, t, zero))
    assert np.isnan(reference(x, t, zero, "mean")[0])


def test_the_route_is_one_row_kernel_up_to_finish_rows(monkeypatch):
    x, t, _ = case(33, 16)
    assert steps(x, t) == ("_fill", "vector_cross_entropy", "check")
    assert steps(x, t, reduction="sum", check_target=False) == \
        ("_fill", "vector_cross_entropy")
    assert steps(x, t, return_grad=True) == \
        ("_fill", "count_rows", "vector_cross_entropy", "check")
    monkeypatch.setattr(ce, "FINISH_ROWS", 32)  # 33 rows: reduced after the row kernel
    assert steps(x, t) == ("_fill", "count_rows", "vector_cross_entropy", "reduce_kernel",
                           "check")
    for rows in (32, 33):  # both routes against torch
        x, t, w = case(rows, 16)
        for reduction in ("mean", "sum"):
            got = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), w,
                                   reduction=reduction)
            np.testing.assert_allclose(got.copy_to_host(), reference(x, t, w, reduction)[0],
                                       rtol=2e-6)


@pytest.mark.parametrize("weighted", [False, True])
def test_the_scalar_kernel_finishes_strided_rows(weighted):
    """Logits whose class axis is strided take the scalar kernel (no 16-byte vectors),
    whose finish reuses its own temp storage."""
    x, t, w = case(33, 20)
    w = w if weighted else None
    wide = np.zeros((33, 40), x.dtype)
    wide[:, ::2] = x
    # every other column of a device array: a view (a Numba device array's .T is a
    # transposed copy on a GPU, C-contiguous)
    strided_rows = cuda.to_device(wide)[:, ::2]
    for reduction in ("mean", "sum"):
        replay.forget()
        got = nk.cross_entropy(strided_rows, cuda.to_device(t), w, reduction=reduction,
                               strategy=BLOCKS["hillis_steele"])
        np.testing.assert_allclose(got.copy_to_host(), reference(x, t, w, reduction)[0],
                                   rtol=2e-6)
        if not weighted:  # weights are uploaded: that call is not recorded
            assert replay.latest[KEY].names[:2] == ("_fill", "cross_entropy")


def test_a_replayed_finish_starts_its_ticket_afresh():
    """The ticket is set by the call's fill launch, which a replay runs again: each
    replayed call's last block still finishes (a ticket left at the previous call's
    count would let no block finish, and the loss would be stale)."""
    replay.forget()
    replayed = replay.counts["replayed"]
    for _ in range(4):
        x, t, _ = case(9, 16)
        got = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t))
        np.testing.assert_allclose(got.copy_to_host(), reference(x, t, None, "mean")[0],
                                   rtol=2e-6)
    assert replay.counts["replayed"] == replayed + 3
    assert replay.latest[KEY].names[:2] == \
        ("_fill", "vector_cross_entropy")
