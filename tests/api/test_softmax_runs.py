"""Short softmax rows in runs of lanes: ``RowPlan.lanes`` below a warp (several rows a
warp, each reduced by an XOR butterfly under its run's lane mask), numbakern/api/softmax.py
and numbakern/kernels/softmax_rows.py.

Under the simulator (64 threads a block, at most 2 blocks): each run length forced
through the planner's ``lanes`` knob, over rows of 1 to 129 elements (around a run's,
a warp's and a 16-byte vector's edges), row counts that leave the last warp partly
idle and loop the grid, forward (both normalizers, fused and tiled, scalar and
16-byte vector loads), backward, and masked/causal rows, against float64 NumPy
references at test_softmax.py's tolerances. And the GPU's automatic plans (no
kernels run): which run each short row gets.
"""

import importlib

import numpy as np
import pytest

import numbakern as nk

from .test_softmax import FORWARD, LOG_TOL, REF, TOL

softmax_module = importlib.import_module("numbakern.api.softmax")

SIZES = [1, 31, 32, 33, 64, 127, 128, 129]


def logits(shape, dtype=np.float32, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)


@pytest.fixture
def lanes(monkeypatch, row_plans):
    """``set(L)``: every later call plans with ``lanes=L`` (the planner's knob, past
    its cache); records each launched plan's ``(lanes, fused, vector)``."""
    seen = row_plans("lanes", "fused", "vector")

    def force(run):
        monkeypatch.setattr(softmax_module, "_planned",
                            lambda *a: softmax_module._plan(*a, lanes=run))
        return seen

    return force


def rows_for(run: int) -> int:
    """Two blocks' rows and three more: the grid (2 blocks) loops, and the last warp's
    runs are partly past the last row."""
    return 2 * (softmax_module._WARP_THREADS // run) + 3


@pytest.mark.parametrize("run", [1, 2, 4, 8, 16])
def test_fused_forward_in_runs(run, lanes):
    seen = lanes(run)
    rows = rows_for(run)
    for i, n in enumerate(n for n in SIZES if n <= 32 * run):
        kind = ("softmax", "log_softmax")[i % 2]
        x = logits((rows, n), seed=n)
        if n > 1:
            x[1, ::3] = -np.inf  # dropped elements beside finite ones
        got = FORWARD[kind](x, layout="warp", fused=True,
                            normalizer=("max_then_sum", "online")[i // 2 % 2])
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float32]
        np.testing.assert_allclose(got.astype(np.float64), REF[kind](x), **tol)
        assert seen[-1][:2] == (run, True)
    assert {v for _, _, v in seen} == {0, 4}  # rows of 32, 64, 128: 16-byte vectors


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_fused_forward_in_runs_other_dtypes(dtype, lanes):
    seen = lanes(8)
    for kind, n in [("softmax", 33), ("log_softmax", 64)]:
        x = logits((11, n), dtype, seed=n)
        got = FORWARD[kind](x, layout="warp")
        tol = (TOL if kind == "softmax" else LOG_TOL)[dtype]
        np.testing.assert_allclose(got.astype(np.float64), REF[kind](x), **tol)
    assert seen[-1] == (8, True, 16 // np.dtype(dtype).itemsize)


@pytest.mark.parametrize("run", [4, 16])
def test_tiled_forward_in_runs(run, lanes):
    seen = lanes(run)
    for i, n in enumerate([31, 129, 300]):
        kind = ("softmax", "log_softmax")[i % 2]
        x = logits((rows_for(run), n), seed=n)
        got = FORWARD[kind](x, layout="warp", fused=False,
                            normalizer=("online", "max_then_sum")[i % 2])
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float32]
        np.testing.assert_allclose(got.astype(np.float64), REF[kind](x), **tol)
        assert seen[-1][:2] == (run, False)


@pytest.mark.parametrize("run", [2, 8])
def test_backward_in_runs(run, lanes):
    """float32 rows of up to 12 a lane fused (two arrays held), longer ones tiled;
    against float64 sums of the same float32 inputs."""
    seen = lanes(run)
    for i, n in enumerate(n for n in SIZES if n <= 32 * run):
        x = logits((rows_for(run), n), seed=n)
        dy = np.random.default_rng(n).standard_normal(x.shape).astype(np.float32)
        d64 = dy.astype(np.float64)
        if i % 2 == 0:
            y = REF["softmax"](x).astype(np.float32)
            y64 = y.astype(np.float64)
            want = y64 * (d64 - (y64 * d64).sum(-1, keepdims=True))
            got = nk.softmax_backward(y, dy, layout="warp")
        else:
            y = REF["log_softmax"](x).astype(np.float32)
            want = d64 - np.exp(y.astype(np.float64)) * d64.sum(-1, keepdims=True)
            got = nk.log_softmax_backward(y, dy, layout="warp")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert seen[-1][:2] == (run, n <= 12 * run)


@pytest.mark.parametrize("run", [4, 8])
def test_masked_and_causal_rows_in_runs(run, lanes):
    """Kept kernels: a dropped element gives 0 (log: -inf), a row keeping nothing 0."""
    seen = lanes(run)
    n = 32
    x = logits((3, 7, n), seed=run)
    mask = np.random.default_rng(run).random((3, 7, n)) < 0.6
    mask[0, 0] = False  # a row that keeps nothing
    keys = np.arange(n)
    causal = keys[None, :] <= np.arange(7)[:, None] + n - 7
    for kind, fn in FORWARD.items():
        got = fn(x, mask=mask, causal=True, layout="warp")
        keep = mask & causal
        ref = REF[kind](np.where(keep, x, -np.inf))
        ref[~keep.any(-1)] = 0 if kind == "softmax" else -np.inf
        tol = (TOL if kind == "softmax" else LOG_TOL)[np.float32]
        np.testing.assert_allclose(got.astype(np.float64), ref, **tol)
        assert seen[-1][:2] == (run, True)
    y = nk.softmax(x, mask=mask, layout="warp").astype(np.float64)
    dy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    got = nk.softmax_backward(y.astype(np.float32), dy, mask=mask, layout="warp")
    dy = dy.astype(np.float64)
    want = np.where(mask, y * (dy - (y * dy).sum(-1, keepdims=True)), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert seen[-1][:2] == (run, True)


# --- the GPU's automatic plans (planning only, no kernel) ----------------------------------


def gpu_plan(kind, n, dtype="float32", **kw):
    """The warp-layout plan for a GPU's 128-thread blocks, runs chosen automatically."""
    return softmax_module._fused_plan(kind, n, dtype, "warp", (128,), kw.pop("out", ""),
                                      lanes=softmax_module._LANES, **kw)


def test_short_rows_take_the_fewest_lanes_that_hold_sixteen():
    for kind in ("softmax", "log_softmax"):
        for n, want in [(1, (1, 1)), (16, (1, 16)), (64, (4, 16)), (128, (8, 16)),
                        (256, (16, 16)), (512, (32, 16)), (781, (32, 32)),
                        (1024, (32, 32))]:
            got = gpu_plan(kind, n)
            assert (got.lanes, got.per_thread) == want, (kind, n)
            assert got.fits and got.rows_per_block == 128 // got.lanes
    for n, want in [(64, (8, 8)), (128, (16, 8)), (256, (32, 8))]:  # two arrays held
        got = gpu_plan("softmax_backward", n)
        assert (got.lanes, got.per_thread) == want, n


def test_runs_keep_whole_vectors_a_lane():
    """Rows of whole 16-byte vectors keep whole vectors a lane: 136 halves take 16
    lanes of 16 (two vectors), not 12 a lane (no vector)."""
    got = gpu_plan("softmax", 136, "float16")
    assert (got.lanes, got.per_thread) == (16, 16)
    got = gpu_plan("softmax", 100, "float16")  # not whole vectors: scalars, fewest a lane
    assert (got.lanes, got.per_thread) == (8, 16)
    got = gpu_plan("softmax", 128, "float16", out="float32")  # another result: scalars
    assert (got.lanes, got.per_thread) == (8, 16)


def test_runs_only_with_warp_shuffle_and_the_warp_layout():
    plan = softmax_module._plan
    f32 = np.dtype(np.float32)
    auto = plan("softmax", 128, f32, "auto", "auto", None, None, None, None)
    assert auto.layout == "warp" and auto.lanes < 32
    tree = plan("softmax", 128, f32, "auto", "auto", None, None, "shared_tree", None)
    assert tree.layout == "warp" and tree.lanes == 32  # its warp form, a warp a row
    tiled = plan("softmax", 128, f32, "auto", "warp", False, None, None, None)
    assert tiled.lanes == 32 and not tiled.fused
    forced = plan("softmax", 128, f32, "auto", "warp", False, None, None, None, lanes=8)
    assert forced.lanes == 8 and forced.group == 8
    with pytest.raises(ValueError, match="lanes must be one of"):
        plan("softmax", 128, f32, "auto", "warp", None, None, None, None, lanes=3)
    with pytest.raises(TypeError, match="lanes must be an int"):
        plan("softmax", 128, f32, "auto", "warp", None, None, None, None, lanes=8.0)
    with pytest.raises(ValueError, match="needs layout='warp'"):
        plan("softmax", 128, f32, "auto", "block", None, None, None, None, lanes=8)
    with pytest.raises(ValueError, match="leave the strategies warp_shuffle"):
        plan("softmax", 128, f32, "auto", "warp", None, None, "shared_tree", None, lanes=8)
    with pytest.raises(ValueError, match="does not fit"):
        plan("softmax", 129, f32, "auto", "warp", True, None, None, None, lanes=4)
