"""Staged rows: half and float32 forward rows too long for registers, held in shared
memory (``RowPlan.staged``): read once, their maximum taken as they arrive, the sum
and the write read back from shared memory. Blocks of 64 threads (the simulator's
default) hold fused rows of up to 2048 elements (32 a thread), so longer rows are
staged on either backend."""

import dataclasses
from itertools import product
from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.api import softmax as api
from numbakern.kernels import softmax_rows
from numbakern.runtime import replay

from .test_softmax import (BF16_ULP, FORWARD, LOG_TOL, REF, SIMULATED_INF, TOL, _bfloat16,
                           device_rows, logits)


THREADS = 64


def plan(kind="softmax", n=3001, dtype="float16", normalizer="auto", layout="auto",
         fused=None, result="", keep=""):
    return api._plan(kind, n, dtype, normalizer, layout, fused, THREADS, None, None,
                     result, keep)


def test_long_half_forward_rows_are_staged():
    for kind in softmax_rows.FORWARD:
        for dtype in ("float16", "bfloat16"):
            p = plan(kind, dtype=dtype)
            assert p.staged and not p.fused and p.normalizer == "online"
            assert p.layout == "block" and p.threads == THREADS
    told = plan(normalizer="max_then_sum")
    assert told.staged and told.normalizer == "max_then_sum"
    # What the kernel does not take: scalar-load dtypes, another result dtype, tiles
    # asked for, backward passes, kept rows, warps, rows fused plans hold, rows past
    # the shared memory a block may have.
    assert not plan(dtype="float64").staged
    assert not plan(result="float32").staged
    assert not plan(fused=False).staged
    assert not plan("softmax_backward").staged  # (its sum reads y and dy)
    back = plan("log_softmax_backward")
    assert back.staged and not back.fused and back.threads == THREADS
    assert not plan(keep="causal").staged
    assert not plan(layout="warp").staged
    assert not plan(n=2048).staged and plan(n=2048).fused
    most = longest_staged(softmax_rows.stage_bytes(), 8)  # 8 vectors a lane held
    assert plan(n=most).staged and not plan(n=most + 8).staged


def longest_staged(stage_bytes, vector, held=softmax_rows.HELD[0], threads=THREADS):
    """The longest row whose staged vectors fit ``stage_bytes``, ``held`` vectors a
    lane of ``threads`` held in registers."""
    return (stage_bytes + held * threads * 16) // 16 * vector


def test_float32_rows_are_staged_where_no_fused_plan_holds_them():
    """A float32 row stages in one block's shared memory (one block a multiprocessor,
    where halves take two), and only where registers cannot hold it."""
    for kind in (*softmax_rows.FORWARD, "log_softmax_backward"):
        p = plan(kind, dtype="float32")
        assert p.staged and not p.fused and p.threads == THREADS, kind
    assert not plan(n=2048, dtype="float32").staged and plan(n=2048, dtype="float32").fused
    most = longest_staged(softmax_rows.stage_bytes(1), 4)
    assert plan(n=most, dtype="float32").staged
    assert not plan(n=most + 4, dtype="float32").staged
    assert not plan("softmax_backward", dtype="float32").staged
    one = softmax_rows.stage_bytes(2) // 4 + 4  # past two blocks' rows: one a multiprocessor
    assert softmax_rows.staged_threads("log_softmax_backward", one, 4) == 1024
    assert softmax_rows.staged_threads("softmax", one, 4) == 512
    assert softmax_rows.staged_threads("log_softmax_backward", 2048, 4) == 256


def test_forward_rows_hold_their_first_vectors_in_registers_where_there_is_room():
    """As many vectors a lane as the registers of the blocks that share a
    multiprocessor's shared memory allow: on the simulator's 64 threads, 8."""
    held, most = softmax_rows.held_count, softmax_rows.HELD[0]
    for kind in FORWARD:
        for dtype in (*softmax_rows.HALVES, "float32"):
            assert plan(kind, dtype=dtype).held == most, (kind, dtype)
            assert plan(kind, dtype=dtype).registers == 64 + 4 * most
    three = softmax_rows.stage_bytes(3) // 4  # float32 rows three blocks to one
    two, alone = softmax_rows.stage_bytes(2) // 4, softmax_rows.stage_bytes(1) // 4
    assert softmax_rows.staged_blocks(three, 4) == 3 and softmax_rows.staged_blocks(two, 4) == 2
    assert softmax_rows.staged_blocks(alone, 4) == 1
    assert [held(three, 4, t) for t in (256, 512)] == [4, 0]  # 85, 42 a thread
    assert [held(two, 4, t) for t in (256, 512)] == [8, 0]  # 128, 64
    assert [held(alone, 4, t) for t in (512, 1024)] == [8, 0]  # 128, 64
    for dtype in (*softmax_rows.HALVES, "float32"):  # its dy
        assert plan("log_softmax_backward", dtype=dtype).held == most


def held_shared(n, vector, held=softmax_rows.HELD[0], threads=THREADS):
    """Shared memory of a staged forward row of ``n``: its whole vectors but the
    ``held`` a lane of the block's ``threads`` holds in registers."""
    return max(n // vector - held * threads, 0) * 16


def test_staging_replaces_packed_plans_that_leave_a_multiprocessor_one_block():
    def packed(threads, per_thread=32):
        return softmax_rows.RowPlan("softmax", "max_then_sum", "block", threads, per_thread,
                                    None, None, "float16", packed=True)

    assert packed(1024).launch_bounds == (1024, 1) and api._one_block_each(packed(1024))
    assert packed(512).launch_bounds[1] == 2 and not api._one_block_each(packed(512))
    scalar = softmax_rows.RowPlan("softmax", "max_then_sum", "block", 512, 16, None, None,
                                  "float16")
    assert scalar.launch_bounds[1] == 1 and not api._one_block_each(scalar)


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


@pytest.fixture(params=["async", "registers"])
def copy(request, monkeypatch):
    """How staged rows reach shared memory: by ``cp.async`` (the plans' default,
    emulated under the simulator) or through registers (a device before sm_80).
    ``.path`` is which; ``.built`` the ``async_copy`` of each staged kernel built."""
    built, real = [], softmax_rows.kernel_for

    def kernel_for(plan):
        if plan.staged:
            if request.param == "registers":
                plan = dataclasses.replace(plan, async_copy=False)
            built.append(plan.async_copy)
        return real(plan)

    monkeypatch.setattr(softmax_rows, "kernel_for", kernel_for)
    # a call recorded under the other path would replay its kernels, never asking
    replay.forget()
    yield SimpleNamespace(path=request.param, built=built)
    replay.forget()


# Lengths around whole vectors (2056 is 257 of them; 2049 and 3001 have tails) and rows
# that start 0 or 1 element past a 16-byte boundary (heads of 0 to 7 halves); the lanes
# hold the first 512 vectors in registers (8 each), so 2049 and 2056 stage none (and
# load past their ends), 5001 113 or 112.
# Each normalizer: the maximum as the vectors arrive, then the sum from shared memory;
# or the online (max, sum) as they arrive.
@pytest.mark.parametrize("n, offset, normalizer",
                         [(2049, 1, "auto"), (2056, 0, "online"), (5001, 1, "auto"),
                          (5001, 0, "online")])
def test_staged_float16_rows_match_the_reference(n, offset, normalizer, staged_launches,
                                                 copy):
    for i, kind in enumerate(FORWARD):
        host = logits((3, n), np.float16, seed=n + i)
        y = device_rows(np.zeros_like(host), offset)
        FORWARD[kind](device_rows(host, offset), out=y, threads=THREADS,
                      normalizer=normalizer)
        assert staged_launches()[-1] == (kind, True, 8, held_shared(n, 8))
        assert copy.built[-1] == (copy.path == "async")
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float16]
        np.testing.assert_allclose(y.copy_to_host().astype(np.float64), REF[kind](host),
                                   **tol)


# float32 rows: four elements a vector, heads of 0 to 3 elements; 8 vectors a lane in
# registers, the rest staged: none staged at (2049, 0) (512 vectors, 8 a lane), one
# held load past the row's end at (2049, 1) (511), 237 staged at (3001, 3).
@pytest.mark.parametrize("n, offset, normalizer",
                         [(2049, 0, "online"), (2049, 1, "auto"), (3001, 3, "auto"),
                          (3001, 3, "max_then_sum")])
def test_staged_float32_rows_match_the_reference(n, offset, normalizer, staged_launches,
                                                 copy):
    for i, kind in enumerate(FORWARD):
        host = logits((3, n), np.float32, seed=n + i)
        y = device_rows(np.zeros_like(host), offset)
        FORWARD[kind](device_rows(host, offset), out=y, threads=THREADS,
                      normalizer=normalizer)
        assert staged_launches()[-1] == (kind, True, 4, held_shared(n, 4))
        assert copy.built[-1] == (copy.path == "async")
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float32]
        np.testing.assert_allclose(y.copy_to_host().astype(np.float64), REF[kind](host),
                                   **tol)
    y = REF["log_softmax"](host).astype(np.float32)
    dy = logits((3, n), np.float32, seed=n + 9, scale=1.0)
    dx = device_rows(np.zeros_like(y), offset)  # rows as far from a boundary as y's
    nk.log_softmax_backward(device_rows(y, offset), device_rows(dy, offset), out=dx,
                            threads=THREADS)
    assert staged_launches()[-1] == ("log_softmax_backward", True, 4, held_shared(n, 4))
    np.testing.assert_allclose(dx.copy_to_host(), log_backward_reference(y, dy),
                               rtol=1e-5, atol=1e-6 * np.abs(dy).sum(-1).max())


@pytest.mark.parametrize("kind", list(FORWARD))
def test_staged_bfloat16_rows_are_float32_rounded_once(kind, staged_launches):
    x = _bfloat16(logits((2, 2100), seed=7))
    normalizer = "online" if kind == "log_softmax" else "max_then_sum"
    got = FORWARD[kind](x, threads=32, normalizer=normalizer)  # 8 or 9 vectors a thread
    assert staged_launches()[-1] == (kind, True, 8, held_shared(2100, 8, threads=32))
    tol = dict(rtol=BF16_ULP, atol=BF16_ULP * 1e-2) if kind == "softmax" else \
        dict(rtol=BF16_ULP, atol=4 * BF16_ULP)
    np.testing.assert_allclose(got.astype(np.float64), REF[kind](x.astype(np.float64)),
                               **tol)


@SIMULATED_INF
@pytest.mark.parametrize("normalizer", ["max_then_sum", "online"])
def test_staged_special_values(normalizer, staged_launches, copy):
    # PyTorch's policy: a row holding NaN or +inf, or only -inf, is NaN; -inf beside
    # finite values is 0 (log: -inf), in the staged vectors and in the head and tail.
    host = logits((5, 2050), np.float16, seed=8)
    host[0, 100] = np.nan
    host[1, 2049] = np.inf  # in the tail
    host[2] = -np.inf
    host[3, :1500] = -np.inf  # every thread's first vectors (online: counted, not exp'd)
    host[4, ::7] = -np.inf
    x, y = device_rows(host, 3), device_rows(np.zeros_like(host), 3)
    for kind in FORWARD:
        got = FORWARD[kind](x, out=y, threads=THREADS, normalizer=normalizer)
        got = got.copy_to_host().astype(np.float64)
        assert staged_launches()[-1][:2] == (kind, True)
        assert copy.built[-1] == (copy.path == "async")
        assert np.isnan(got[:3]).all()
        want = REF[kind](host[3:])
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float16]
        np.testing.assert_allclose(got[3:], want, **tol)
        assert (np.isneginf(got[3:]) == np.isneginf(want)).all()


@SIMULATED_INF
@pytest.mark.parametrize("normalizer", ["max_then_sum", "online"])
def test_staged_float32_special_values_held_and_staged(normalizer, staged_launches,
                                                       copy):
    # Vectors 0-511 of a row of 3001 are held in registers (64 lanes, 8 each), the
    # rest staged: NaN and +inf in either, -inf filling the held ones.
    host = logits((7, 3001), np.float32, seed=10)
    host[0, 100] = np.nan
    host[1, 2900] = np.nan
    host[2, 2500] = np.inf
    host[3] = -np.inf
    host[4, :2100] = -np.inf
    host[5, ::7] = -np.inf
    host[6, 2100:] = -np.inf
    x = device_rows(host, 0)
    for kind in FORWARD:
        y = device_rows(np.zeros_like(host), 0)
        FORWARD[kind](x, out=y, threads=THREADS, normalizer=normalizer)
        got = y.copy_to_host().astype(np.float64)
        assert staged_launches()[-1][:2] == (kind, True)
        assert copy.built[-1] == (copy.path == "async")
        assert np.isnan(got[:4]).all(), kind
        want = REF[kind](host[4:])
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float32]
        np.testing.assert_allclose(got[4:], want, **tol)
        assert (np.isneginf(got[4:]) == np.isneginf(want)).all()


def test_staged_float32_in_place(staged_launches):
    host = logits((2, 3001), np.float32, seed=11)
    x = device_rows(host, 2)
    nk.softmax(x, out=x, threads=THREADS)  # every held and staged vector read before a store
    assert staged_launches()[-1] == ("softmax", True, 4, held_shared(3001, 4))
    np.testing.assert_allclose(x.copy_to_host().astype(np.float64), REF["softmax"](host),
                               **TOL[np.float32])


def test_staged_in_place_and_the_fallback_to_scalar_loads(staged_launches):
    host = logits((2, 2600), np.float16, seed=9)
    x = device_rows(host, 1)
    # y is x: every vector of a row is staged before any store
    nk.log_softmax(x, out=x, threads=THREADS)
    assert staged_launches()[-1] == ("log_softmax", True, 8, held_shared(2600, 8))
    np.testing.assert_allclose(x.copy_to_host().astype(np.float64), REF["log_softmax"](host),
                               **LOG_TOL[np.float16])
    # out's rows lie elsewhere from a boundary than x's: no vectors, so the tiled plan
    y = nk.softmax(device_rows(host, 1), out=cuda.device_array_like(host), threads=THREADS)
    assert staged_launches()[-1] == ("softmax", False, 0, 0)
    np.testing.assert_allclose(y.copy_to_host().astype(np.float64), REF["softmax"](host),
                               **TOL[np.float16])


def log_backward_reference(y, dy):
    y64, d64 = y.astype(np.float64), dy.astype(np.float64)
    return d64 - np.exp(y64) * d64.sum(-1, keepdims=True)


# dy staged, y read in the write pass; rows off boundaries (heads and tails), dx in
# place of dy (every dy of a row staged before a dx is written) and of y (each
# thread's y vectors read before it writes theirs).
@pytest.mark.parametrize("n, offset, place", [(2049, 1, None), (2056, 0, "dy"),
                                              (3001, 3, "y")])
def test_staged_log_softmax_backward(n, offset, place, staged_launches, copy):
    host = logits((3, n), np.float32, seed=n)
    y = REF["log_softmax"](host).astype(np.float16)
    dy = logits((3, n), np.float16, seed=n + 1, scale=1.0)
    ys, dys = device_rows(y, offset), device_rows(dy, offset)
    dx = {"dy": dys, "y": ys, None: device_rows(np.zeros_like(y), offset)}[place]
    nk.log_softmax_backward(ys, dys, out=dx, threads=THREADS)
    assert staged_launches()[-1] == ("log_softmax_backward", True, 8, held_shared(n, 8))
    assert copy.built[-1] == (copy.path == "async")
    want = log_backward_reference(y, dy)
    scale = np.abs(dy.astype(np.float64)).sum(-1, keepdims=True)
    np.testing.assert_allclose(dx.copy_to_host().astype(np.float64), want, rtol=2e-3,
                               atol=2e-3 * scale.max() * 2.0 ** -10)


def test_staged_log_softmax_backward_of_bfloat16(staged_launches):
    y = _bfloat16(REF["log_softmax"](logits((2, 2100), seed=3)))
    dy = _bfloat16(logits((2, 2100), seed=4, scale=1.0))
    got = nk.log_softmax_backward(y, dy, threads=32)
    assert staged_launches()[-1] == ("log_softmax_backward", True, 8,
                                     held_shared(2100, 8, threads=32))
    want = log_backward_reference(y, dy)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2 * BF16_ULP,
                               atol=1e-2)


def close_in_float64(got, reference, *inputs, rtol, atol, rows=1024):
    """Whether ``got`` (a 2-D torch tensor) is ``torch.allclose`` to
    ``reference(*inputs)`` computed in float64, ``rows`` rows at a time: a whole
    (8192, 50257) in float64 is 3.3 GB an array, and the suite's processes share one
    GPU."""
    for r in range(0, got.shape[0], rows):
        want = reference(*(t[r:r + rows].double() for t in inputs))
        if not got[r:r + rows].double().allclose(want, rtol=rtol, atol=atol):
            return False
    return True


def log_backward_in(y, dy):
    return dy - y.exp() * dy.sum(1, keepdim=True)


@pytest.mark.gpu
def test_gpu_float32_rows_staged_in_one_block(staged_launches):
    """(4096, 32768) and (8192, 50257) float32 rows and the longest a block stages
    (one block a multiprocessor; forward rows with 8 vectors a lane of 512 held, the
    backward's, of 1024 threads, with none), then one vector past each (tiled),
    against float64."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    forward = longest_staged(softmax_rows.stage_bytes(1), 4, threads=512)
    backward = softmax_rows.stage_bytes(1) // 4
    for n, staged in ((32768, (True, True)), (50257, (True, True)),
                      (backward, (True, True)), (backward + 4, (True, False)),
                      (forward, (True, False)), (forward + 4, (False, False))):
        shape = (4096 if n == 32768 else 8192 if n == 50257 else 64, n)
        x = torch.randn(*shape, device="cuda") * 4
        for kind in FORWARD:
            got = FORWARD[kind](x, axis=1)
            assert staged_launches()[-1][:2] == (kind, staged[0])
            tol = dict(rtol=1e-5, atol=1e-7) if kind == "softmax" else \
                dict(rtol=1e-5, atol=2e-5)
            assert close_in_float64(got, lambda t: getattr(torch, kind)(t, 1), x, **tol), \
                (kind, shape)
        y = torch.log_softmax(x, 1)
        dy = torch.randn(*shape, device="cuda")
        got = nk.log_softmax_backward(y, dy, axis=1)
        assert staged_launches()[-1][:2] == ("log_softmax_backward", staged[1])
        assert close_in_float64(got, log_backward_in, y, dy, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_vocabulary_rows_and_the_longest_staged_rows(dtype, staged_launches, copy):
    # (8192, 50257): rows 2 bytes apart from 16-byte boundaries, each its own head;
    # then the longest rows a block stages on this device (forward rows with 8
    # vectors a lane of 512 held, the backward's with none) and one vector past each.
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    forward = longest_staged(softmax_rows.stage_bytes(), 8, threads=512)
    backward = softmax_rows.stage_bytes() // 2
    for n, staged in ((50257, (True, True)), (backward, (True, True)),
                      (backward + 8, (True, False)), (forward, (True, False)),
                      (forward + 8, (False, False))):
        x = (torch.randn(8192 if n == 50257 else 64, n, device="cuda") * 4) \
            .to(getattr(torch, dtype))
        for kind, normalizer in product(FORWARD, ("max_then_sum", "online")):
            got = FORWARD[kind](x, axis=1, normalizer=normalizer)
            assert staged_launches()[-1][1] == staged[0]
            assert not staged[0] or copy.built[-1] == (copy.path == "async")
            assert got.dtype == x.dtype and got.device == x.device
            ulp = 2.0 ** (-8 if dtype == "bfloat16" else -11)
            # float16's smallest probabilities are subnormal (spaced 2^-24); log
            # probabilities reach ~16 in magnitude
            atol = (1e-9 if dtype == "bfloat16" else 2.0 ** -24) if kind == "softmax" \
                else 4 * ulp * 16
            assert close_in_float64(got, lambda t: getattr(torch, kind)(t, 1), x,
                                    rtol=2 * ulp, atol=atol), (kind, normalizer, n)
        y = torch.log_softmax(x.float(), 1).to(x.dtype)
        dy = torch.randn(*x.shape, device="cuda").to(x.dtype)
        got = nk.log_softmax_backward(y, dy, axis=1)
        assert staged_launches()[-1][:2] == ("log_softmax_backward", staged[1])
        assert close_in_float64(got, log_backward_in, y, dy, rtol=2 * ulp, atol=8 * ulp)
