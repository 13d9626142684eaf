"""Staged half rows: forward rows too long for registers, held in shared memory
(``RowPlan.staged``): read once, their maximum taken as they arrive, the sum and
the write read back from shared memory. Under the simulator the fused plans hold up
to 2048 elements a row (64 threads x 32), so rows past that are staged."""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.api import softmax as api
from numbakern.kernels import softmax_rows

from .test_softmax import (BF16_ULP, FORWARD, LOG_TOL, REF, SIMULATED_INF, TOL, _bfloat16,
                           device_rows, logits)


def plan(kind="softmax", n=3001, dtype="float16", normalizer="auto", layout="auto",
         fused=None, result="", keep=""):
    return api._plan(kind, n, dtype, normalizer, layout, fused, None, None, None,
                     result, keep)


def test_long_half_forward_rows_are_staged():
    for kind in softmax_rows.FORWARD:
        for dtype in ("float16", "bfloat16"):
            p = plan(kind, dtype=dtype)
            assert p.staged and not p.fused and p.normalizer == "max_then_sum"
            assert p.layout == "block"
    # What the kernel does not take: scalar-load dtypes, another result dtype, the
    # online normalizer asked for, tiles asked for, backward passes, kept rows, warps,
    # rows fused plans hold, rows past the shared memory a block may have.
    assert not plan(dtype="float32").staged
    assert not plan(result="float32").staged
    assert not plan(normalizer="online").staged
    assert not plan(fused=False).staged
    assert not plan("softmax_backward").staged
    assert not plan(keep="causal").staged
    assert not plan(layout="warp").staged
    assert not plan(n=2048).staged and plan(n=2048).fused
    most = softmax_rows.stage_bytes() // 2
    assert plan(n=most).staged and not plan(n=most + 8).staged


@pytest.fixture
def staged_launches(row_plans, monkeypatch):
    """``(kind, staged, vector, shared bytes)`` of each row kernel launched."""
    plans, shared = row_plans("kind", "staged", "vector"), []
    real = api.launch

    def spy(*args, **kw):
        shared.append(kw.get("shared", 0))
        return real(*args, **kw)

    monkeypatch.setattr(api, "launch", spy)
    return lambda: [(*p, s) for p, s in zip(plans, shared)]


# Lengths around whole vectors (2056 is 257 of them; 2049 and 3001 have tails) and rows
# that start 0 or 1 element past a 16-byte boundary (heads of 0 to 7 halves).
@pytest.mark.parametrize("n, offset", [(2049, 1), (2056, 0), (2056, 1), (3001, 0)])
def test_staged_float16_rows_match_the_reference(n, offset, staged_launches):
    for i, kind in enumerate(FORWARD):
        host = logits((3, n), np.float16, seed=n + i)
        y = device_rows(np.zeros_like(host), offset)
        FORWARD[kind](device_rows(host, offset), out=y)
        assert staged_launches()[-1] == (kind, True, 8, n // 8 * 16)
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float16]
        np.testing.assert_allclose(y.copy_to_host().astype(np.float64), REF[kind](host),
                                   **tol)


@pytest.mark.parametrize("kind", list(FORWARD))
def test_staged_bfloat16_rows_are_float32_rounded_once(kind, staged_launches):
    x = _bfloat16(logits((2, 2100), seed=7))
    got = FORWARD[kind](x, threads=32)  # 32 threads: 8 or 9 vectors a thread
    assert staged_launches()[-1] == (kind, True, 8, 2100 // 8 * 16)
    tol = dict(rtol=BF16_ULP, atol=BF16_ULP * 1e-2) if kind == "softmax" else \
        dict(rtol=BF16_ULP, atol=4 * BF16_ULP)
    np.testing.assert_allclose(got.astype(np.float64), REF[kind](x.astype(np.float64)),
                               **tol)


@SIMULATED_INF
def test_staged_special_values(staged_launches):
    # PyTorch's policy: a row holding NaN or +inf, or only -inf, is NaN; -inf beside
    # finite values is 0 (log: -inf), in the staged vectors and in the head and tail.
    host = logits((5, 2050), np.float16, seed=8)
    host[0, 100] = np.nan
    host[1, 2049] = np.inf  # in the tail
    host[2] = -np.inf
    host[3, :1500] = -np.inf  # every thread's first vectors
    host[4, ::7] = -np.inf
    x, y = device_rows(host, 3), device_rows(np.zeros_like(host), 3)
    for kind in FORWARD:
        got = FORWARD[kind](x, out=y).copy_to_host().astype(np.float64)
        assert staged_launches()[-1][:2] == (kind, True)
        assert np.isnan(got[:3]).all()
        want = REF[kind](host[3:])
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float16]
        np.testing.assert_allclose(got[3:], want, **tol)
        assert (np.isneginf(got[3:]) == np.isneginf(want)).all()


def test_staged_in_place_and_the_fallback_to_scalar_loads(staged_launches):
    host = logits((2, 2600), np.float16, seed=9)
    x = device_rows(host, 1)
    nk.log_softmax(x, out=x)  # y is x: every vector of a row is staged before any store
    assert staged_launches()[-1] == ("log_softmax", True, 8, 2600 // 8 * 16)
    np.testing.assert_allclose(x.copy_to_host().astype(np.float64), REF["log_softmax"](host),
                               **LOG_TOL[np.float16])
    # out's rows lie elsewhere from a boundary than x's: no vectors, so the tiled plan
    y = nk.softmax(device_rows(host, 1), out=cuda.device_array_like(host))
    assert staged_launches()[-1] == ("softmax", False, 0, 0)
    np.testing.assert_allclose(y.copy_to_host().astype(np.float64), REF["softmax"](host),
                               **TOL[np.float16])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_vocabulary_rows_and_the_longest_staged_rows(dtype, staged_launches):
    # (8192, 50257): rows 2 bytes apart from 16-byte boundaries, each its own head;
    # then the longest rows a block stages on this device and one vector past them.
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    longest = softmax_rows.stage_bytes() // 2
    for shape, staged in (((8192, 50257), True), ((64, longest), True),
                          ((64, longest + 8), False)):
        x = (torch.randn(*shape, device="cuda") * 4).to(getattr(torch, dtype))
        for kind in FORWARD:
            got = FORWARD[kind](x, axis=1)
            assert staged_launches()[-1][1] == staged
            assert got.dtype == x.dtype and got.device == x.device
            want = getattr(torch, kind)(x.double(), 1)
            ulp = 2.0 ** (-8 if dtype == "bfloat16" else -11)
            atol = 1e-9 if kind == "softmax" else 4 * ulp * 16  # |log p| up to ~16
            assert torch.allclose(got.double(), want, rtol=2 * ulp, atol=atol), kind
