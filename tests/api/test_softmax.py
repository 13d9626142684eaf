"""Softmax, log-softmax and their backward passes (numbakern/api/softmax.py, rowwise.py).

Under the simulator: every max/sum block-strategy pair, the online normalizer under
each block strategy, the warp and block layouts, fused (row in registers) and tiled
kernels, row lengths around warp and block edges, against float64 NumPy references.
GPU tests (marked ``gpu``): the fused-softmax tutorial's check against PyTorch,
float64 rows of every width from 513 to 1023, and a (8192, 50257) input.
"""

import importlib
import math
import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.kernels import softmax_rows as rowwise
from numbakern.core.arrays import CopyWarning
from numbakern.strategies import SharedTree, WarpShuffle
from numbakern.strategies.online_softmax import ONLINE_SOFTMAX, combine

softmax_module = importlib.import_module("numbakern.api.softmax")

SIZES = [1, 2, 31, 32, 33, 127, 128, 129, 781]
BLOCKS = nk.strategies.available("block")
PAIRS = [(m, s) for m in BLOCKS for s in BLOCKS]
FORWARD = {"softmax": nk.softmax, "log_softmax": nk.log_softmax}
BACKWARD = {"softmax_backward": nk.softmax_backward,
            "log_softmax_backward": nk.log_softmax_backward}
# float32 results against float64 references: a few ulp of each output, plus a few ulp
# of the row's largest log-probabilities for log-softmax.
TOL = {np.float16: dict(rtol=2e-3, atol=1e-4), np.float32: dict(rtol=1e-5, atol=1e-7),
       np.float64: dict(rtol=1e-12, atol=1e-15)}
LOG_TOL = {np.float16: dict(rtol=2e-3, atol=2e-2), np.float32: dict(rtol=1e-5, atol=2e-5),
           np.float64: dict(rtol=1e-12, atol=1e-12)}


def ref_log_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = x.max(axis=axis, keepdims=True)
        return (x - m) - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def ref_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


REF = {"softmax": ref_softmax, "log_softmax": ref_log_softmax}
# Under the simulator, device code's inf - inf runs as NumPy scalar arithmetic, which
# warns; on a GPU it is silently NaN, as intended.
SIMULATED_INF = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def logits(shape, dtype=np.float32, seed=0, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def check_forward(kind, x, axis=-1, **kw):
    got = FORWARD[kind](x, axis=axis, **kw)
    assert got.dtype == x.dtype and got.shape == x.shape
    tol = (TOL if kind == "softmax" else LOG_TOL)[x.dtype.type]
    np.testing.assert_allclose(got.astype(np.float64), REF[kind](x, axis), **tol)
    return got


# --- every block-strategy pair, fused and tiled, around warp and block edges ----------


def sweep(half, shift=0):
    """Every other row length of SIZES (``half`` 0 or 1 says which), softmax and
    log-softmax taking turns (the simulator is slow: tests that share a path take
    the two halves)."""
    kinds = list(FORWARD)
    return [(kinds[(i + shift) % 2], n) for i, n in enumerate(SIZES[half::2])]


def pair_cases():
    """Each max/sum pair once, fused or tiled on a checkerboard, over half of SIZES:
    every strategy, as the max and as the sum, fused and tiled, meets every length
    (the product of pairs, kernels and lengths is the simulator's hours)."""
    cases = []
    for m, maximum in enumerate(BLOCKS):
        for s, total in enumerate(BLOCKS):
            fused = (m + s) % 2 == 0
            turn = (m // 2 + s // 2) % 2
            cases.append(pytest.param((maximum, total), fused, turn,
                                      id=f"{maximum}+{total}-{'fused' if fused else 'tiled'}"))
    return cases


@pytest.mark.parametrize("pair, fused, turn", pair_cases())
def test_block_layout_every_strategy_pair(pair, fused, turn):
    for kind, n in sweep(turn):
        check_forward(kind, logits((2, n), seed=n), max_strategy=pair[0], sum_strategy=pair[1],
                      normalizer="max_then_sum", layout="block", fused=fused, threads=32)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "tiled"])
@pytest.mark.parametrize("block", BLOCKS)
def test_online_normalizer_under_every_block_strategy(block, fused):
    # two warps a block (the block pairs above run one); fused and tiled take every
    # other length each
    for kind, n in sweep(int(fused), shift=1):
        check_forward(kind, logits((2, n), seed=n), sum_strategy=block, normalizer="online",
                      layout="block", fused=fused, threads=64)


@pytest.mark.parametrize("normalizer", ["max_then_sum", "online"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "tiled"])
def test_warp_layout(fused, normalizer):
    # each kernel and each normalizer over every length, the pairs of them taking turns
    turn = (int(fused) + (normalizer == "online")) % 2
    for kind, n in sweep(turn, shift=int(fused)):
        # 5 rows: two blocks of two warps, and a spare warp
        check_forward(kind, logits((5, n), seed=n), layout="warp", fused=fused,
                      normalizer=normalizer)


# Tiled automatically: each pair's plan; run, each strategy as the max once and as the
# sum once (the pairs' product, tiled, is test_block_layout_every_strategy_pair's).
LONG_RUNS = [((b, BLOCKS[(i + 1) % len(BLOCKS)]), "max_then_sum")
             for i, b in enumerate(BLOCKS)] + [((b, b), "online") for b in BLOCKS]


@pytest.mark.simulator  # the simulator's 64 threads a row decide the plan
def test_rows_longer_than_registers_are_planned_in_tiles():
    for pair, normalizer in [(p, "max_then_sum") for p in PAIRS] + \
            [((b, b), "online") for b in BLOCKS]:
        plan = softmax_module._plan("softmax", 2500, np.dtype(np.float32), normalizer, "auto",
                                    None, None, None if normalizer == "online" else pair[0],
                                    pair[1])
        assert not plan.fused and plan.layout == "block", (pair, normalizer)


@pytest.mark.simulator  # the simulator's 64 threads a row decide the plan
@pytest.mark.parametrize("pair, normalizer", LONG_RUNS,
                         ids=lambda v: f"{v[0]}+{v[1]}" if isinstance(v, tuple) else v)
def test_rows_longer_than_registers_loop_in_tiles(pair, normalizer, row_kernels):
    x = logits((2, 2500), seed=1)  # > 32 per thread x 64 threads: tiles, automatically
    kind = list(FORWARD)[LONG_RUNS.index((pair, normalizer)) % 2]
    kw = {} if normalizer == "online" else {"max_strategy": pair[0]}
    got = check_forward(kind, x, sum_strategy=pair[1], normalizer=normalizer, **kw)
    assert row_kernels[-1][:2] == (kind, False)
    p = got.astype(np.float64)
    np.testing.assert_allclose((p if kind == "softmax" else np.exp(p)).sum(-1), 1, rtol=1e-5)


# --- fused rows read and written in 16-byte vectors ---------------------------------------


@pytest.fixture
def vector_plans(monkeypatch):
    """The vector widths of the fused kernels launched (the plan each launch used)."""
    seen = []
    choose = rowwise.vector_width

    def spy(plan, n, views):
        seen.append(choose(plan, n, views))
        return seen[-1]

    monkeypatch.setattr(rowwise, "vector_width", spy)
    return seen


# every vector width under one layout and normalizer; the others with float32's
@pytest.mark.simulator  # the simulator's 64 threads a row decide the plan
@pytest.mark.parametrize("dtype, layout, normalizer",
                         [(d, "warp", "online") for d in (np.float16, np.float32, np.float64)] +
                         [(np.float32, lay, norm) for lay, norm in
                          (("warp", "max_then_sum"), ("block", "online"),
                           ("block", "max_then_sum"))],
                         ids=lambda v: v.__name__ if isinstance(v, type) else v)
def test_vector_rows(dtype, layout, normalizer, vector_plans):
    width = 16 // np.dtype(dtype).itemsize
    # whole vectors per thread in every plan chosen (float16: 8 per thread, one vector)
    for i, n in enumerate((136, 200, 256) if width == 8 else (68, 128, 256)):
        x = logits((5, n), dtype, seed=n)
        x[1, ::3] = -np.inf  # masked lanes beside finite ones
        check_forward(list(FORWARD)[i % 2], x, layout=layout, fused=True,
                      normalizer=normalizer)
    assert set(vector_plans) == {width}
    wide = 264 if width == 8 else 136
    device = cuda.to_device(logits((6, wide), dtype))[::2, 8:]  # rows still 16-byte aligned
    host = device.copy_to_host()
    np.testing.assert_allclose(nk.softmax(device, layout=layout).copy_to_host(),
                               ref_softmax(host), **TOL[dtype])
    assert vector_plans[-1] == width


def test_vector_rows_need_aligned_whole_vectors(vector_plans):
    x = cuda.to_device(logits((4, 132)))
    for view, width in [(x, 4), (x[:, 4:], 4), (x[:, 1:], 0), (x[:, :130], 0),
                        (x[::-1], 0)]:
        nk.softmax(view, fused=True)
        assert vector_plans[-1] == width
    # a block of 32 threads, 2 per thread: no vector of 8 (a warp layout's runs of
    # lanes would hold one: test_softmax_runs.py)
    nk.softmax(logits((4, 64), np.float16), fused=True, layout="block")
    assert vector_plans[-1] == 0
    nk.softmax(logits((4, 64), np.float16), fused=False)  # tiled: vectors of 8 halves
    assert vector_plans[-1] == 8
    nk.softmax(x[:, 1:], fused=False)  # tiled: rows 4 bytes past a boundary, out's not
    assert vector_plans[-1] == 0


# --- tiled rows and backward passes in 16-byte vectors ------------------------------------

# Around vectors, warps and tiles, under blocks of TILE_THREADS: a forward tile of
# vectors is then 512 float32 or float16 elements (4 vectors of 4, or 2 of 8, a
# thread) and 256 float64; a backward tile half that of each input (128 float64):
# 781 passes more than one tile in every dtype and direction.
VECTOR_SIZES = [1, 3, 4, 5, 31, 32, 33, 127, 128, 129, 781]
TILE_THREADS = 32


@pytest.fixture
def row_kernels(row_plans):
    """``(kind, fused, vector)`` of the row kernel each launch ran."""
    return row_plans("kind", "fused", "vector")


def device_rows(host, offset):
    """``host`` on the device, each row ``offset`` elements into a row that much
    wider: with ``offset`` 1 the rows start 4 (float32) or 8 (float64) bytes past a
    16-byte boundary, and later rows elsewhere (a head of 0 to W-1 elements)."""
    wide = np.zeros((host.shape[0], host.shape[1] + offset), host.dtype)
    wide[:, offset:] = host
    return cuda.to_device(wide)[:, offset:]


def vector_lanes(dtype):
    return 16 // np.dtype(dtype).itemsize


def tiled_lanes(dtype, n, offset, rows):
    """The vector width a tiled kernel takes over ``device_rows`` of ``rows`` rows:
    none when the first 16-byte boundary (``head`` elements in) lies past the view's
    last element, as it does for one-element rows of float16 seven elements short."""
    width = vector_lanes(dtype)
    head = (width - offset) % width
    return width if head <= (rows - 1) * (n + offset) + n - 1 else 0


# Every width (dtype) and alignment under the default block layout, every length; the
# other layout and normalizer, which read the same vectors, with float32's over half
# the lengths each (the offset rows the half with 1 and 781).
@pytest.mark.parametrize("dtype, layout, normalizer, offset",
                         [(d, "block", "online", o) for d in (np.float16, np.float32, np.float64)
                          for o in (0, 1)] +
                         [(np.float32, lay, norm, o) for lay, norm in
                          (("block", "max_then_sum"), ("warp", "online")) for o in (0, 1)],
                         ids=lambda v: v.__name__ if isinstance(v, type) else
                         {0: "aligned", 1: "offset"}.get(v, v) if not isinstance(v, str) else v)
def test_tiled_rows_in_vectors(dtype, layout, normalizer, offset, row_kernels):
    # Whole vectors between a scalar head and tail per row (eight halves a vector).
    primary = layout == "block" and normalizer == "online"
    sizes = VECTOR_SIZES if primary else VECTOR_SIZES[1 - offset::2]
    for kind, n in [(list(FORWARD)[i % 2], n) for i, n in enumerate(sizes)]:
        host = logits((2, n), dtype, seed=n)
        y = device_rows(np.zeros_like(host), offset)  # each row as far from a boundary as x's
        FORWARD[kind](device_rows(host, offset), out=y, fused=False, layout=layout,
                      normalizer=normalizer, threads=TILE_THREADS)
        assert row_kernels[-1] == (kind, False, tiled_lanes(dtype, n, offset, rows=2))
        tol = (TOL if kind == "softmax" else LOG_TOL)[dtype]
        np.testing.assert_allclose(y.copy_to_host().astype(np.float64), REF[kind](host), **tol)


def test_tiled_vectors_in_place_and_fallbacks(row_kernels):
    host = logits((4, 781), seed=5)
    x = device_rows(host, 1)
    nk.softmax(x, fused=False)  # out's rows lie elsewhere from a boundary than x's: scalar
    assert row_kernels[-1] == ("softmax", False, 0)
    nk.log_softmax(x, out=x, fused=False)  # y is x: vectors, each loaded before stored
    assert row_kernels[-1] == ("log_softmax", False, 4)
    np.testing.assert_allclose(x.copy_to_host(), ref_log_softmax(host), **LOG_TOL[np.float32])
    reversed_rows = cuda.to_device(host)[::-1]
    out = cuda.device_array_like(host)
    nk.softmax(reversed_rows, fused=False, out=out[::-1])
    assert row_kernels[-1] == ("softmax", False, 0)
    # read back through out itself: Numba copies no view of negative strides back
    np.testing.assert_allclose(out.copy_to_host()[::-1], ref_softmax(host[::-1]),
                               **TOL[np.float32])
    y, dy = cuda.to_device(host), device_rows(host, 1)  # y aligned, dy not: scalar
    nk.softmax_backward(y, dy, fused=False)
    assert row_kernels[-1] == ("softmax_backward", False, 0)


@SIMULATED_INF
@pytest.mark.parametrize("normalizer", ["online", "max_then_sum"])
def test_tiled_vectors_minus_infinity_first(normalizer, row_kernels):
    # 32 threads: every lane's first tile (4 vectors of 4, 512 elements) and the rows'
    # heads are all -inf; the tails too. Then rows with no finite normalizer.
    host = logits((4, 1203), seed=6)
    host[:, :515] = -np.inf
    host[:, -2:] = -np.inf
    host[3, 700] = np.nan
    kw = dict(fused=False, layout="block", threads=32, normalizer=normalizer)
    y = device_rows(np.zeros_like(host), 1)
    nk.softmax(device_rows(host, 1), out=y, **kw)
    assert row_kernels[-1] == ("softmax", False, 4)
    y = y.copy_to_host()
    np.testing.assert_allclose(y[:3], ref_softmax(host[:3]), **TOL[np.float32])
    assert (y[:3, :515] == 0).all() and np.isnan(y[3]).all()
    lg = device_rows(np.zeros_like(host), 1)
    nk.log_softmax(device_rows(host, 1), out=lg, **kw)
    lg = lg.copy_to_host()
    assert np.isneginf(lg[:3, :515]).all() and np.isnan(lg[3]).all()
    np.testing.assert_allclose(lg[:3, 515:-2], ref_log_softmax(host[:3])[:, 515:-2],
                               **LOG_TOL[np.float32])
    host[:2] = -np.inf  # nothing but -inf
    host[2, 900] = np.inf
    y = device_rows(np.zeros_like(host), 1)
    nk.softmax(device_rows(host, 1), out=y, **kw)
    assert np.isnan(y.copy_to_host()).all()


@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "offset"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_tiled_backward_in_vectors(dtype, offset, row_kernels):
    # the two passes take turns, the other way round at the other offset: each meets
    # every length in each dtype
    for i, n in enumerate(VECTOR_SIZES):
        kind = list(BACKWARD)[(i + offset) % 2]
        x, dy = backward_case(n, rows=2, dtype=dtype, seed=n)
        check_backward_bounds(x, dy, dtype, place=lambda a: device_rows(a, offset),
                              kinds=(kind,), fused=False, layout="block",
                              threads=TILE_THREADS)
        assert row_kernels[-1] == (kind, False, tiled_lanes(dtype, n, offset, rows=2))


@pytest.mark.parametrize("layout", ["warp", "block"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fused_backward_in_vectors(dtype, layout, row_kernels):
    width = vector_lanes(dtype)
    # 4 per thread of 32 (8 for float16's vectors of 8): whole vectors
    for n in (200, 256) if width == 8 else (68, 128):
        x, dy = backward_case(n, dtype=dtype, seed=n)
        check_backward_bounds(x, dy, dtype, fused=True, layout=layout, threads=32)
        assert row_kernels[-2:] == [(k, True, width) for k in BACKWARD]
    cases = [(252, 0, 0), (256, 1, 0)] if width == 8 else [(66, 0, 2 if width == 2 else 0),
                                                           (68, 1, 0)]
    for n, offset, want in cases:  # part vectors,
        x, dy = backward_case(n, dtype=dtype, seed=n)                      # unaligned rows
        check_backward_bounds(x, dy, dtype, place=lambda a: device_rows(a, offset),
                              fused=True, layout=layout, threads=32)
        assert row_kernels[-1] == ("log_softmax_backward", True, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_float16_and_float64(dtype):
    for n, kw in [(33, {}), (129, dict(layout="block")), (300, dict(fused=False))]:
        x = logits((3, n), dtype, seed=n)
        for kind in FORWARD:
            check_forward(kind, x, **kw)


def test_rows_sum_to_one():
    for n in (1, 7, 128, 781, 3000):
        y = nk.softmax(logits((2, n), seed=n, scale=10.0)).astype(np.float64)
        np.testing.assert_allclose(y.sum(-1), 1.0, rtol=n * 1e-7 + 1e-6)
        assert (y >= 0).all()


# --- which kernel the automatic choice runs --------------------------------------------


def test_automatic_plans():
    plan = softmax_module._plan
    f32 = np.dtype(np.float32)
    short = plan("softmax", 128, f32, "auto", "auto", None, None, None, None)
    assert (short.layout, short.fused, short.normalizer) == ("warp", True, "max_then_sum")
    tree = plan("softmax", 128, f32, "auto", "auto", None, None, "shared_tree", None)
    assert tree.layout == "warp" and tree.max_block == SharedTree(tree.threads)  # warp form
    long = plan("softmax", 10**6, f32, "auto", "auto", None, None, None, None)
    assert (long.layout, long.fused, long.normalizer) == ("block", False, "online")
    told = plan("softmax", 10**6, f32, "auto", "auto", None, None, "warp_shuffle", None)
    assert told.normalizer == "max_then_sum"
    fixed = plan("softmax", 100, f32, "auto", "block", None, None, WarpShuffle(32), None)
    assert fixed.threads == 32 and fixed.per_thread == 4
    backward = plan("softmax_backward", 128, f32, None, "auto", None, None, None, None)
    assert backward.max_block is None and backward.words == 2


@pytest.mark.parametrize("n,softmax_layout,log_layout", [
    (512, "warp", "warp"), (513, "warp", "block"), (781, "warp", "block"),
    (1024, "warp", "block")])
def test_log_softmax_takes_a_warp_while_a_lane_holds_sixteen(n, softmax_layout, log_layout):
    """``layout="auto"``: log_softmax rows a warp each up to 16 elements a lane
    (``_WARP_MOST``), past that a block; softmax a warp wherever its plan fits. Asked
    for, log_softmax's warp of more a lane is still planned."""
    plan = softmax_module._plan
    f32 = np.dtype(np.float32)
    assert plan("softmax", n, f32, "auto", "auto", None, None, None, None).layout == \
        softmax_layout
    auto = plan("log_softmax", n, f32, "auto", "auto", None, None, None, None)
    assert auto.layout == log_layout and auto.fused
    assert auto.layout == "block" or auto.per_thread <= 16
    told = plan("log_softmax", n, f32, "auto", "warp", None, None, None, None)
    assert told.layout == "warp" and told.fused and told.per_thread * 32 >= n


def test_registers_fit_the_block():
    for kind in ("softmax", "softmax_backward"):
        for dtype in ("float16", "float32", "float64"):
            for threads in (128, 256, 512, 1024):
                for k in (0, 1, 8, 32):
                    p = rowwise.RowPlan(kind, None, "block", threads, k, None, None, dtype)
                    t, blocks = p.launch_bounds
                    assert t == threads and blocks >= 1
                    assert not p.fits or p.registers * threads * blocks <= 65536


# --- numerics -------------------------------------------------------------------------

VARIANTS = [dict(layout="warp"), dict(layout="block", normalizer="max_then_sum"),
            dict(layout="block", normalizer="online"),
            dict(layout="block", fused=False, normalizer="max_then_sum"),
            dict(layout="block", fused=False, normalizer="online")]
VARIANT_IDS = ["warp", "fused", "fused-online", "tiled", "tiled-online"]


@pytest.mark.parametrize("kw", VARIANTS, ids=VARIANT_IDS)
def test_log_softmax_keeps_precision_far_from_zero(kw):
    # float32 rows near 1e7 (ulp 1): x - max is exact, log(sum) is subtracted last.
    # Computing x - (max + log(sum)) instead rounds at 1e7 and is off by up to 0.5.
    x = (1e7 + np.arange(200, dtype=np.float64)).astype(np.float32)[None, :]
    got = nk.log_softmax(x, threads=32, **kw)
    np.testing.assert_allclose(got, ref_log_softmax(x), rtol=0, atol=2e-5)
    np.testing.assert_allclose(nk.softmax(x, threads=32, **kw), ref_softmax(x), rtol=1e-5,
                               atol=1e-8)


@SIMULATED_INF
@pytest.mark.parametrize("kw", VARIANTS, ids=VARIANT_IDS)
def test_large_logits_give_exact_ones_and_zeros(kw):
    x = np.array([[1000, -1000, 0, -1000], [-1000, -1000, 1000, 1000]], np.float32)
    y = nk.softmax(x, threads=32, **kw)
    np.testing.assert_array_equal(y, [[1, 0, 0, 0], [0, 0, 0.5, 0.5]])
    lg = nk.log_softmax(x[:1], threads=32, **kw)
    np.testing.assert_array_equal(lg, [[0, -2000, -1000, -2000]])


@SIMULATED_INF
@pytest.mark.parametrize("kw", VARIANTS, ids=VARIANT_IDS)
def test_rows_without_a_finite_normalizer_are_nan(kw):
    # PyTorch's policy: all -inf, any +inf or any NaN in a row makes the row NaN.
    inf, nan = np.inf, np.nan
    x = np.array([[-inf] * 5, [0, inf, 1, 2, 3], [0, 1, nan, 2, 3], [inf, -inf, 0, 1, 2],
                  [0.5, 1, 2, 3, 4]], np.float32)
    for f in (nk.softmax, nk.log_softmax):
        y = f(x, threads=32, **kw)
        assert np.isnan(y[:4]).all(), y
        assert np.isfinite(y[4]).all()


@SIMULATED_INF
@pytest.mark.parametrize("kw", VARIANTS, ids=VARIANT_IDS)
def test_minus_infinity_beside_finite_values(kw):
    # The online trap: a thread (or tile) that sees only -inf first must not turn
    # exp(-inf - -inf) into NaN. 32 threads: lane 0 holds 0, 32, 64, ... of each row.
    x = logits((2, 300), seed=3)
    x[0, :160] = -np.inf  # lanes' first tiles (4 x 32) all -inf
    x[1, ::32] = -np.inf  # every element of lane 0
    y = nk.softmax(x, threads=32, **kw)
    np.testing.assert_allclose(y, ref_softmax(x), rtol=1e-5, atol=1e-8)
    assert (y[0, :160] == 0).all() and (y[1, ::32] == 0).all()
    lg = nk.log_softmax(x, threads=32, **kw)
    assert np.isneginf(lg[0, :160]).all()
    np.testing.assert_allclose(lg[0, 160:], ref_log_softmax(x)[0, 160:], rtol=1e-5, atol=2e-5)


def test_online_op_combine():
    inf, nan = math.inf, math.nan
    assert ONLINE_SOFTMAX.fields == 2 and ONLINE_SOFTMAX.commutative
    assert combine(-inf, 0.0, -inf, 1.0) == (-inf, 1.0)  # no exp(-inf - -inf)
    assert combine(-inf, 2.0, 3.0, 1.0) == (3.0, 1.0)
    m, s = combine(inf, 1.0, 0.0, 1.0)
    assert m == inf and math.isnan(s)
    m, s = combine(inf, 1.0, -inf, 0.0)  # +inf meets the identity: still NaN
    assert m == inf and math.isnan(s)
    m, s = combine(nan, 1.0, 0.0, 1.0)
    assert math.isnan(m) and math.isnan(s)
    # Folding elements in any tree gives (max, sum exp(x - max)).
    xs = np.random.default_rng(0).standard_normal(9) * 5
    states = [(float(x), 1.0) for x in xs]
    left = states[0]
    for st in states[1:]:
        left = combine(*left, *st)
    pairs = states
    while len(pairs) > 1:
        pairs = [combine(*pairs[i], *pairs[i + 1]) if i + 1 < len(pairs) else pairs[i]
                 for i in range(0, len(pairs), 2)]
    want = (xs.max(), np.exp(xs - xs.max()).sum())
    np.testing.assert_allclose(left, want, rtol=1e-14)
    np.testing.assert_allclose(pairs[0], want, rtol=1e-14)


# --- backward ---------------------------------------------------------------------------


def backward_case(n, rows=3, dtype=np.float64, seed=0):
    x = logits((rows, n), dtype, seed=seed)
    dy = logits((rows, n), dtype, seed=seed + 1, scale=1.0)
    return x, dy


@pytest.mark.parametrize("kw", [dict(layout="warp"), dict(layout="block"),
                                dict(layout="block", fused=False)],
                         ids=["warp", "fused", "tiled"])
@pytest.mark.parametrize("block", BLOCKS)
def test_backward_closed_form(block, kw):
    if kw["layout"] == "warp" and block == "shared_tree":
        pytest.skip("the warp layout reduces with shuffles")
    # the two passes take turns over the lengths, starting with each at half the blocks
    start = BLOCKS.index(block) % 2
    for i, n in enumerate((1, 31, 32, 33, 129, 781)):
        x, dy = backward_case(n, dtype=np.float32, seed=n)
        check_backward_bounds(x, dy, np.float32, kinds=(list(BACKWARD)[(i + start) % 2],),
                              sum_strategy=block, threads=32, **kw)


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
def test_backward_matches_finite_differences(kind):
    # d/dx of sum(f(x) * dy), by central differences of numbakern's own forward pass,
    # one column of every row at a time.
    x, dy = backward_case(7, rows=2, seed=5)
    forward, backward = FORWARD[kind], BACKWARD[f"{kind}_backward"]
    grad = backward(forward(x), dy)
    eps = 1e-6
    numeric = np.empty_like(x)
    for j in range(x.shape[1]):
        step = np.zeros_like(x)
        step[:, j] = eps
        up = (forward(x + step) * dy).sum(-1)
        down = (forward(x - step) * dy).sum(-1)
        numeric[:, j] = (up - down) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_backward_long_rows_and_float16():
    x, dy = backward_case(2500, rows=2, dtype=np.float32, seed=2)  # tiled
    check_backward_bounds(x, dy, np.float32, sum_strategy="shared_tree")
    x, dy = backward_case(100, dtype=np.float16, seed=3)
    check_backward_bounds(x, dy, np.float16)
    assert nk.log_softmax_backward(x, dy).dtype == np.float16


# --- axes, layouts, kinds, out= -----------------------------------------------------------


def test_any_axis_of_3d_input():
    x = logits((4, 5, 6), seed=7)
    for axis in (0, 1, 2, -1, -3):
        for kind in FORWARD:
            check_forward(kind, x, axis=axis)
    dy = logits((4, 5, 6), seed=8)
    y = ref_softmax(x, 1)
    want = y * (dy - (y * dy).sum(1, keepdims=True))
    np.testing.assert_allclose(nk.softmax_backward(y.astype(np.float32), dy, axis=1), want,
                               rtol=1e-4, atol=1e-6)


def test_axis_0_of_a_matrix_and_1d_input():
    x = logits((50, 3), seed=9)
    check_forward("softmax", x, axis=0)
    check_forward("log_softmax", x[:, 1], axis=0)


def test_device_input_strided_views_are_not_copied():
    host = logits((6, 40, 5), seed=10)
    d = cuda.to_device(host)
    view = d[1:5, ::3, :]  # strided outer and row dimensions
    with warnings.catch_warnings():
        warnings.simplefilter("error", CopyWarning)
        got = nk.softmax(view, axis=1)
    assert not isinstance(got, np.ndarray)
    np.testing.assert_allclose(got.copy_to_host(), ref_softmax(host[1:5, ::3, :], 1),
                               rtol=1e-5, atol=1e-8)


def test_reversed_device_views():
    host = logits((5, 70), seed=13)
    d = cuda.to_device(host)
    got = nk.log_softmax(d[::-1, ::-2], layout="block", threads=32)
    np.testing.assert_allclose(got.copy_to_host(), ref_log_softmax(host[::-1, ::-2]),
                               rtol=1e-5, atol=2e-5)


def test_layout_needing_three_strided_outer_dims_is_copied_with_a_warning():
    host = logits((4, 4, 5, 6), seed=11)
    d = cuda.to_device(host)[::2, ::2, 1:, :]
    with pytest.warns(CopyWarning):
        got = nk.log_softmax(d, axis=-1)
    np.testing.assert_allclose(got.copy_to_host(), ref_log_softmax(host[::2, ::2, 1:, :]),
                               rtol=1e-5, atol=2e-5)


def test_out_and_in_place():
    x = logits((3, 50), seed=12)
    out = np.empty_like(x)
    assert nk.softmax(x, out=out) is out
    np.testing.assert_allclose(out, ref_softmax(x), rtol=1e-5, atol=1e-8)
    same = x.copy()
    nk.log_softmax(same, out=same)
    np.testing.assert_allclose(same, ref_log_softmax(x), rtol=1e-5, atol=2e-5)
    d = cuda.to_device(x)
    nk.softmax(d, out=d, fused=False, layout="block")  # tiled, in place on the device
    np.testing.assert_allclose(d.copy_to_host(), ref_softmax(x), rtol=1e-5, atol=1e-8)
    dx = cuda.device_array_like(x)
    y = cuda.to_device(ref_softmax(x).astype(np.float32))
    assert nk.softmax_backward(y, d, out=dx) is dx


def test_a_numpy_out_of_either_byte_order():
    """A NumPy ``out`` takes the result by a host copy, as NumPy's own: a big-endian
    one of the result's dtype is written (values, not bytes), one of another dtype
    refused; ``cross_entropy``'s ``grad_out`` the same."""
    x = logits((3, 50), seed=13).astype(np.float64)
    for fn, ref in ((nk.softmax, ref_softmax), (nk.log_softmax, ref_log_softmax)):
        out = np.empty(x.shape, ">f8")
        assert fn(x, out=out) is out
        np.testing.assert_allclose(out, ref(x), rtol=1e-12, atol=1e-12)
    dx = np.empty(x.shape, ">f8")
    assert nk.softmax_backward(ref_softmax(x), x, out=dx) is dx
    np.testing.assert_allclose(dx, nk.softmax_backward(ref_softmax(x), x), rtol=0, atol=0)
    with pytest.raises(nk.OutDtypeError, match="float64"):
        nk.softmax(x, out=np.empty(x.shape, ">f4"))
    grad = np.empty(x.shape, ">f8")
    _, got = nk.cross_entropy(x, np.array([2, 0, 49]), return_grad=True, grad_out=grad)
    assert got is grad
    want = nk.cross_entropy(x, np.array([2, 0, 49]), return_grad=True)[1]
    np.testing.assert_array_equal(grad, want)


@pytest.mark.parametrize("shape,axis", [((0, 5), -1), ((5, 0), -1), ((5, 0), 0), ((0,), 0),
                                        ((2, 0, 3), 1)])
def test_empty_inputs_launch_nothing(shape, axis, monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("launched a kernel for an empty input")

    monkeypatch.setattr(softmax_module, "launch", no_launch)
    x = np.empty(shape, np.float32)
    for f in FORWARD.values():
        y = f(x, axis=axis)
        assert y.shape == shape and y.dtype == np.float32
    for f in BACKWARD.values():
        assert f(x, x, axis=axis).shape == shape
    d = nk.softmax(cuda.to_device(x), axis=axis)
    assert d.shape == shape


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("call,error,match", [
    (lambda x: nk.softmax(x.astype(np.int32)), TypeError, "x must be float"),
    (lambda x: nk.softmax(x, axis=2), np.exceptions.AxisError, "axis 2"),
    (lambda x: nk.softmax(x, axis=1.0), TypeError, "axis must be an int"),
    (lambda x: nk.log_softmax(x, axis=None), TypeError, "axis must be an int"),
    (lambda x: nk.softmax(x, axis=(0,)), TypeError, "axis must be an int"),
    (lambda x: nk.softmax(np.float32(1.0), axis=1), np.exceptions.AxisError,
     "axis 1 is out of bounds for a 0-d input, a row of one element: axis 0 or -1"),
    (lambda x: nk.log_softmax_backward(np.float32(0.0), np.float32(1.0), dim=-2),
     np.exceptions.AxisError, "axis -2 is out of bounds for a 0-d input"),
    (lambda x: nk.softmax(np.float32(1.0), causal=True), ValueError, "x is 0-D"),
    (lambda x: nk.softmax(x, max_strategy="bogus"), ValueError, "max_strategy must be"),
    (lambda x: nk.softmax(x, sum_strategy=nk.TwoPass()), TypeError, "sum_strategy must be"),
    (lambda x: nk.softmax(x, layout="diagonal"), ValueError, "layout must be"),
    (lambda x: nk.softmax(x, normalizer="fast"), ValueError, "normalizer must be"),
    (lambda x: nk.softmax(x, normalizer="online", max_strategy="shared_tree"), ValueError,
     "leave max_strategy None"),
    (lambda x: nk.softmax(x, fused="yes"), TypeError, "fused must be"),
    (lambda x: nk.softmax(x, fused=1), TypeError, "fused must be"),
    (lambda x: nk.log_softmax(x, fused=1.0), TypeError, "fused must be"),
    (lambda x: nk.softmax(np.zeros((1, 5000), np.float32), fused=True, threads=32),
     ValueError, "fused=True"),
    (lambda x: nk.softmax(x, max_strategy=WarpShuffle(32), sum_strategy=SharedTree(64)),
     ValueError, "threads must agree"),
    (lambda x: nk.softmax(x, threads=48), ValueError, "multiple of 32"),
    (lambda x: nk.softmax(x, out=np.empty((3, 4), np.float32)), ValueError, "out has shape"),
    (lambda x: nk.softmax(x, out=cuda.to_device(x)), TypeError, "out must be a NumPy"),
    (lambda x: nk.softmax(x, out=[0.0] * 15), TypeError,
     r"out must be a NumPy array \(or a CPU tensor\) for NumPy or CPU-tensor input, got list"),
    (lambda x: nk.softmax_backward(x, x[:, :3]), ValueError,
     r"softmax_backward: dy must have y's shape, \(\d+, \d+\); got \(\d+, 3\)"),
    (lambda x: nk.log_softmax_backward(x, x.astype(np.float64)), ValueError,
     "log_softmax_backward: dy must have y's dtype, float32; got float64"),
    (lambda x: nk.softmax_backward(x, cuda.to_device(x)), ValueError,
     "softmax_backward: dy must have y's memory, host memory; got device memory"),
])
def test_bad_arguments_raise_clearly(call, error, match):
    with pytest.raises(error, match=match):
        call(logits((3, 5)))


# --- GPU --------------------------------------------------------------------------------

GPU_VARIANTS = {
    **{f"block-{m}+{s}": dict(max_strategy=m, sum_strategy=s, normalizer="max_then_sum",
                              layout="block") for m, s in PAIRS},
    **{f"block-online-{b}": dict(sum_strategy=b, normalizer="online", layout="block")
       for b in BLOCKS},
    "warp": dict(layout="warp"), "warp-online": dict(layout="warp", normalizer="online"),
    "tiled": dict(fused=False), "auto": {},
}


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_gpu_fused_softmax_tutorial_check(variant):
    # Triton tutorial 02: 1823 x 781 float32 against torch.softmax, allclose's defaults;
    # read as the tutorial does, a 1823 x 781 view of rows stored 784 wide.
    torch, kw = _torch(), GPU_VARIANTS[variant]
    torch.manual_seed(0)
    rows, cols = 1823, 781
    x = torch.randn(rows, cols, device="cuda")
    xp = torch.zeros(rows + 1, cols + 3, device="cuda")
    xp[:rows, :cols] = x
    yp = torch.zeros_like(xp)
    nk.softmax(xp[:rows, :cols], axis=1, out=yp[:rows, :cols], **kw)
    torch.cuda.synchronize()
    got, want = yp[:rows, :cols], torch.softmax(x, axis=1)
    assert torch.allclose(got, want), float((got - want).abs().max())
    lg = torch.as_tensor(nk.log_softmax(x, **kw), device="cuda")
    assert torch.allclose(lg, torch.log_softmax(x, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_float64_rows_513_to_1023_wide():
    for n in range(513, 1024):
        x = logits((8, n), np.float64, seed=n)
        np.testing.assert_allclose(nk.softmax(x), ref_softmax(x), rtol=1e-12, atol=1e-15)
        lg = nk.log_softmax(x)
        np.testing.assert_allclose(lg, ref_log_softmax(x), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, dict(fused=False), dict(layout="block")],
                         ids=["auto", "tiled", "block"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_gpu_every_kind_and_width(dtype, kw):
    # The register-heavy configurations only a GPU compiles: every compiled size.
    for n in (1, 600, 2048, 4096, 8192, 12000, 40000):
        x, dy = backward_case(n, rows=64, dtype=dtype, seed=n)
        for kind in FORWARD:
            check_forward(kind, x, **kw)
        check_backward_bounds(x, dy, dtype, **kw)


def check_backward_bounds(x, dy, dtype, place=None, kinds=tuple(BACKWARD), **kw):
    # The references start from the inputs as the kernel saw them (rounded to `dtype`),
    # and the error allowed grows with each row's sum of magnitudes, as a float32 row
    # sum's rounding error does (Higham, "Accuracy and Stability of Numerical
    # Algorithms", section 4.2): cancellation in dy - sum(...) leaves small results
    # whose relative error no fixed rtol bounds. `place`: host array -> the device
    # array to pass (dx laid out as the inputs); None passes NumPy arrays. `kinds`:
    # the backward passes to run (BACKWARD's names).
    assert kinds and set(kinds) <= set(BACKWARD), kinds
    d64 = dy.astype(np.float64)
    if "softmax_backward" in kinds:
        y = ref_softmax(x).astype(dtype)
        y64 = y.astype(np.float64)
        got = run_backward(nk.softmax_backward, y, dy, place, **kw)
        want = y64 * (d64 - (y64 * d64).sum(-1, keepdims=True))
        scale = y64 * (np.abs(d64) + (y64 * np.abs(d64)).sum(-1, keepdims=True))
        assert_within(got, want, scale, dtype)
    if "log_softmax_backward" not in kinds:
        return
    lg = ref_log_softmax(x).astype(dtype)
    p64 = np.exp(lg.astype(np.float64))
    got = run_backward(nk.log_softmax_backward, lg, dy, place, **kw)
    want = d64 - p64 * d64.sum(-1, keepdims=True)
    scale = np.abs(d64) + p64 * np.abs(d64).sum(-1, keepdims=True)
    assert_within(got, want, scale, dtype)


def run_backward(backward, y, dy, place, **kw):
    if place is None:
        return backward(y, dy, **kw)
    dx = place(np.zeros_like(y))
    backward(place(y), place(dy), out=dx, **kw)
    return dx.copy_to_host()


def assert_within(got, want, scale, dtype):
    n = want.shape[-1]
    if dtype == np.float16:  # computed in float32, then rounded to float16 (subnormals too)
        bound = 2e-3 * np.abs(want) + 1e-3 * scale + np.finfo(dtype).smallest_subnormal
    else:
        bound = 1e-5 * np.abs(want) + 4 * np.log2(n + 1) * np.finfo(dtype).eps * scale
    err = np.abs(got.astype(np.float64) - want)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), (worst, got[worst], want[worst], bound[worst])


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, dict(normalizer="max_then_sum"),
                                dict(sum_strategy="shared_tree")], ids=["online", "max", "tree"])
def test_gpu_vocabulary_rows_8192_by_50257(kw):
    torch = _torch()
    torch.manual_seed(1)
    x = torch.randn(8192, 50257, device="cuda") * 4
    got = torch.as_tensor(nk.softmax(x, **kw), device="cuda")
    want = torch.softmax(x.double(), 1)
    assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-9)
    assert torch.allclose(got.double().sum(1), torch.ones(8192, device="cuda",
                                                          dtype=torch.float64), rtol=1e-5)


# --- bfloat16, read and written as its bits -------------------------------------------------

def _bfloat16(a):
    mld = pytest.importorskip("ml_dtypes")
    return np.asarray(a, np.float32).astype(mld.bfloat16)


BF16_ULP = 2.0 ** -7  # a bfloat16 rounding of a float32 result: half an ulp, 2^-8, each way


BF16_PLANS = {"fused": dict(fused=True), "tiled-online": dict(fused=False, normalizer="online"),
              "tiled-max": dict(fused=False, normalizer="max_then_sum"),
              "warp": dict(layout="warp")}
BF16_SIZES = [1, 8, 31, 33, 128, 200]


# softmax and log-softmax take turns over the lengths, the other way round on every
# other plan: each plan meets every length, and each kind half of them
@pytest.mark.parametrize("n, plan, kind",
                         [(n, plan, list(FORWARD)[(i + j) % 2])
                          for j, plan in enumerate(BF16_PLANS) for i, n in enumerate(BF16_SIZES)])
def test_bfloat16_forward_is_float32_rounded_once(n, plan, kind):
    """bfloat16 rows (vectors of eight where they allow) give float32's softmax of the
    same values rounded once to bfloat16: within one bfloat16 rounding of it."""
    x = _bfloat16(logits((3, n), seed=n))
    got = FORWARD[kind](x, **BF16_PLANS[plan])
    assert got.dtype == x.dtype
    expected = REF[kind](x.astype(np.float64))
    tol = dict(rtol=BF16_ULP, atol=BF16_ULP * 1e-2) if kind == "softmax" else \
        dict(rtol=BF16_ULP, atol=4 * BF16_ULP)
    np.testing.assert_allclose(got.astype(np.float64), expected, **tol)


def test_bfloat16_rows_use_vectors_of_eight(row_kernels):
    x = _bfloat16(logits((4, 256), seed=2))
    nk.softmax(x, fused=True, threads=32)
    assert row_kernels[-1] == ("softmax", True, 8)
    nk.log_softmax(x, fused=False)
    assert row_kernels[-1] == ("log_softmax", False, 8)


def test_bfloat16_special_values_and_backward():
    x = logits((4, 40), seed=3)
    x[0, 5] = np.nan
    x[1, 7] = np.inf
    x[2] = -np.inf
    x[3, :10] = -np.inf
    got = nk.softmax(_bfloat16(x)).astype(np.float64)
    assert np.isnan(got[:3]).all()  # NaN, +inf and all -inf rows: NaN throughout
    assert (got[3, :10] == 0).all()
    np.testing.assert_allclose(got[3], ref_softmax(_bfloat16(x[3:]).astype(np.float64))[0],
                               rtol=BF16_ULP, atol=1e-6)
    y = nk.softmax(_bfloat16(logits((3, 100), seed=4)))
    dy = _bfloat16(logits((3, 100), seed=5, scale=1.0))
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    got = nk.softmax_backward(y, dy)
    assert got.dtype == y.dtype
    ref = y64 * (dy64 - (y64 * dy64).sum(-1, keepdims=True))
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2 * BF16_ULP, atol=1e-3)
    got = nk.log_softmax_backward(y, dy)  # y read as log-probabilities
    ref = dy64 - np.exp(y64) * dy64.sum(-1, keepdims=True)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2 * BF16_ULP, atol=2e-2)


@pytest.mark.simulator  # device functions called from Python
def test_bfloat16_narrowing_rounds_to_nearest_even():
    """The device functions' rounding (called as Python, as the simulator runs them)
    against ml_dtypes' round to nearest even: ties either way, the largest float32
    (rounds to inf), -inf, a NaN, subnormals."""
    mld = pytest.importorskip("ml_dtypes")
    from numbakern.kernels import bfloat16
    bits = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF, 0xFF800000,
                     0x7FC00001, 0x00008000, 0x80018000], dtype=np.uint32)
    values = bits.view(np.float32)
    got = np.array([bfloat16.narrow(v) for v in values], dtype=np.uint16)
    expected = values.astype(mld.bfloat16).view(np.uint16)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan], expected[~nan])
    assert np.isnan(got[nan].view(mld.bfloat16).astype(np.float32)).all()
    widened = np.array([bfloat16.widen(b) for b in expected[~nan]], dtype=np.float32)
    np.testing.assert_array_equal(widened, expected[~nan].view(mld.bfloat16).astype(np.float32))


# --- dtype=: the result's dtype, computed in it ---------------------------------------------


@pytest.mark.parametrize("kw", [dict(), dict(fused=False), dict(layout="warp"),
                                dict(fused=False, normalizer="max_then_sum")],
                         ids=["auto", "tiled", "warp", "tiled-max"])
@pytest.mark.parametrize("source, result", [(np.float16, np.float32),
                                            (np.float32, np.float64),
                                            (np.float64, np.float32)])
def test_dtype_gives_the_result_dtype_computed_in_it(source, result, kw):
    """As torch.softmax(x, dtype=): x is cast to dtype first (float16 computed in
    float32), so the result carries dtype's precision, not x's."""
    x = logits((3, 100), source, seed=9)
    wide = x.astype(result).astype(np.float64)  # x as dtype sees it
    for kind, fn in FORWARD.items():
        got = fn(x, dtype=result, **kw)
        assert got.dtype == result
        tol = (TOL if kind == "softmax" else LOG_TOL)[result]
        np.testing.assert_allclose(got.astype(np.float64), REF[kind](wide), **tol)


def test_dtype_and_out_must_agree_and_dtype_must_be_a_float():
    x = logits((2, 40), np.float16)
    out = np.empty((2, 40), np.float32)
    assert nk.softmax(x, dtype=np.float32, out=out) is out
    with pytest.raises(nk.OutDtypeError, match="result's dtype float32"):
        nk.softmax(x, dtype=np.float32, out=np.empty((2, 40), np.float16))
    with pytest.raises(TypeError,
                       match="dtype must be float16, float32, float64 or ml_dtypes.bfloat16"):
        nk.softmax(x, dtype=np.int32)
    with pytest.raises(TypeError, match="ml_dtypes.bfloat16, got '>f8'$"):
        nk.softmax(x, dtype=">f8")


@pytest.mark.parametrize("source", ["int64", "int8", "uint8", "bool"])
def test_integer_and_bool_input_is_cast_to_a_float_dtype_first_as_torch(source):
    """torch.softmax(x, dim, dtype=) casts an integer or bool tensor to dtype, then
    computes; without dtype= numbakern refuses them (torch's kernels do too)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    host = (rng.integers(0, 2, (3, 7)) if source == "bool" else
            rng.integers(0, 9, (3, 7))).astype(source)
    t = torch.from_numpy(host)
    for kind, fn in FORWARD.items():
        reference = getattr(torch, kind)
        for dtype in (torch.float32, torch.float64, torch.float16):
            want = reference(t, 1, dtype=dtype)
            got = fn(t, dim=1, dtype=dtype)
            assert isinstance(got, torch.Tensor) and got.dtype == dtype
            tol = (TOL if kind == "softmax" else LOG_TOL)[np.float64 if dtype ==
                                                         torch.float64 else np.float32]
            torch.testing.assert_close(got, want, rtol=tol["rtol"] if dtype != torch.float16
                                       else 1e-3, atol=tol["atol"] * 10)
        # NumPy arrays (host) and device arrays (cast on the device, strided too) alike
        want = reference(t, 0, dtype=torch.float32).numpy()
        for x in (host, cuda.to_device(host), cuda.to_device(np.asfortranarray(host))):
            got = fn(x, axis=0, dtype=np.float32)
            got = got if isinstance(got, np.ndarray) else got.copy_to_host()
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        out = np.empty(host.shape, np.float64)
        assert fn(host, dtype=np.float64, out=out) is out
        with pytest.raises(TypeError, match="x must be float16, .*float dtype=.*got dtype "
                                            f"{source}"):
            fn(host)
        with pytest.raises(TypeError, match="dtype must be float16"):
            fn(host, dtype=np.int32)


@pytest.mark.parametrize("value", [3.0, -2.5, np.nan, np.inf, -np.inf])
def test_a_0d_input_is_a_row_of_one_element_as_torch(value):
    """torch.softmax(torch.tensor(v), 0) (or dim=-1) is tensor(1.) for finite v, NaN
    for NaN and +-inf; log_softmax 0 (NaN); the backward passes 0 (NaN). The result is
    0-d, whatever the kind of input."""
    torch = pytest.importorskip("torch")
    t = torch.tensor(value, dtype=torch.float32)
    dy = torch.tensor(2.0)
    want = {"softmax": torch.softmax(t, 0), "log_softmax": torch.log_softmax(t, -1)}
    want_dx = {"softmax_backward": torch.ops.aten._softmax_backward_data(
                   dy, want["softmax"], 0, torch.float32),
               "log_softmax_backward": torch.ops.aten._log_softmax_backward_data(
                   dy, want["log_softmax"], 0, torch.float32)}
    for kind, fn in FORWARD.items():
        for axis in (0, -1):
            got = fn(t, dim=axis)
            assert isinstance(got, torch.Tensor) and got.shape == ()
            torch.testing.assert_close(got, want[kind], equal_nan=True)
            host = fn(np.float32(value), axis=axis)
            assert isinstance(host, np.ndarray) and host.shape == () and \
                host.dtype == np.float32
            np.testing.assert_array_equal(host, want[kind].numpy())
        device = fn(cuda.to_device(np.array(value, np.float32)))
        assert device.shape == ()
        np.testing.assert_array_equal(device.copy_to_host(), want[kind].numpy())
        wide = fn(np.float16(value), dtype=np.float64)
        assert wide.dtype == np.float64 and wide.shape == ()
        np.testing.assert_array_equal(wide, want[kind].double().numpy())
        out = np.array(7.0, np.float32)
        assert fn(np.float32(value), out=out) is out
        np.testing.assert_array_equal(out, want[kind].numpy())
        # a mask that drops the one element: a row keeping nothing (_safe_softmax's 0)
        dropped = fn(np.float32(value), mask=np.array(False))
        assert dropped.shape == () and dropped == (0 if kind == "softmax" else -np.inf)
    for kind, fn in BACKWARD.items():
        y = want[kind.removesuffix("_backward")]
        got = fn(y, dy, dim=0)
        assert isinstance(got, torch.Tensor) and got.shape == ()
        torch.testing.assert_close(got, want_dx[kind], equal_nan=True)
        np.testing.assert_array_equal(fn(y.numpy(), dy.numpy(), axis=-1),
                                      want_dx[kind].numpy())


def test_0d_backward_passes_of_any_y_as_torch():
    """The backward passes' arithmetic on a 0-d ``y`` that is no forward result
    (where a kernel writing 0 would be found out): torch's formulas."""
    torch = pytest.importorskip("torch")
    aten = {"softmax_backward": torch.ops.aten._softmax_backward_data,
            "log_softmax_backward": torch.ops.aten._log_softmax_backward_data}
    for y_value, dy_value in ((0.5, 2.0), (-1.0, 2.0), (0.25, -3.0)):
        y, dy = torch.tensor(y_value), torch.tensor(dy_value)
        for kind, fn in BACKWARD.items():
            want = aten[kind](dy, y, 0, torch.float32)
            assert want != 0
            torch.testing.assert_close(fn(y, dy, dim=0), want)
            np.testing.assert_allclose(fn(np.float32(y_value), np.float32(dy_value)),
                                       want.numpy(), rtol=1e-6)


def test_0d_bfloat16_numpy_backward_passes_as_torch():
    """A 0-d ``ml_dtypes.bfloat16`` ``dy`` is an array like ``y``, not a number to
    widen: the result is 0-d bfloat16, torch's bits, positional or by keyword."""
    torch = pytest.importorskip("torch")
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    aten = {"softmax_backward": torch.ops.aten._softmax_backward_data,
            "log_softmax_backward": torch.ops.aten._log_softmax_backward_data}
    for y_value, dy_value in ((1.0, 0.5), (0.25, -3.0)):
        y, dy = np.array(y_value, bf16), np.array(dy_value, bf16)
        for kind, fn in BACKWARD.items():
            want = aten[kind](torch.tensor(dy_value, dtype=torch.bfloat16),
                              torch.tensor(y_value, dtype=torch.bfloat16), 0, torch.bfloat16)
            for got in (fn(y, dy), fn(y=y, dy=dy), fn(y, dy[()])):
                assert got.dtype == bf16 and got.shape == (), kind
                assert got.view(np.uint16) == want.view(torch.int16).item() & 0xFFFF, kind


def test_an_integer_cast_to_float16_is_silent_as_torchs():
    """70000 cast to float16 is inf (NaN results, as torch's); NumPy's cast would warn
    from inside the library, torch's says nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = nk.softmax(np.array([70000, 0]), dtype=np.float16)
    assert got.dtype == np.float16 and np.isnan(got).all()


@pytest.mark.gpu
def test_gpu_integer_cuda_tensors_with_dtype_and_0d_cuda_tensors_as_torch():
    """The cast of an integer CUDA tensor (a transposed one too) to ``dtype=`` on the
    device, and a 0-d CUDA tensor as a row of one element, forward and backward,
    against torch on the same tensors."""
    torch = _torch()
    t = torch.randint(-6, 9, (300, 1000), device="cuda", dtype=torch.int32)
    for kind, fn in FORWARD.items():
        for x, dim in ((t, 1), (t.T, 0)):
            for dtype in (torch.float32, torch.float16, torch.float64):
                got, want = fn(x, dim=dim, dtype=dtype), getattr(torch, kind)(x, dim,
                                                                               dtype=dtype)
                assert got.is_cuda and got.dtype == dtype and got.shape == want.shape
                torch.testing.assert_close(got, want, rtol=1e-3 if dtype == torch.float16
                                           else 1e-5, atol=1e-4)
        for value in (3.0, float("nan"), float("inf")):
            x = torch.tensor(value, device="cuda")
            got, want = fn(x, dim=0), getattr(torch, kind)(x, 0)
            assert got.is_cuda and got.shape == ()
            torch.testing.assert_close(got, want, equal_nan=True)
    y, dy = torch.tensor(1.0, device="cuda"), torch.tensor(2.0, device="cuda")
    backward = {"softmax_backward": torch.ops.aten._softmax_backward_data,
                "log_softmax_backward": torch.ops.aten._log_softmax_backward_data}
    for kind, fn in BACKWARD.items():
        got = fn(y, dy, dim=-1)
        assert got.is_cuda and got.shape == ()
        torch.testing.assert_close(got, backward[kind](dy, y, 0, torch.float32))


# --- half rows' backward: 16 elements a thread (two vectors of each input) -----------------

GPU_BLOCKS = (128, 256, 512, 1024)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_backward_plans_hold_two_vectors_of_each_input(dtype):
    """The GPU's block sizes: half rows' backward aims for 16 a thread and stays fused
    up to 512 x 16; float32 plans are what they were; half forward rows aim for 32 a
    thread, packed plans among the others where every thread holds some of the row."""
    plan = softmax_module._fused_plan
    for kind in BACKWARD:
        got = plan(kind, 4096, dtype, "block", GPU_BLOCKS)
        assert (got.threads, got.per_thread, got.per_element) == (256, 16, 2)
        assert got.fits and got.registers * 256 <= 65536 // 2  # two blocks at least
        for n, want in [(2048, (128, 16)), (6144, (512, 12)), (8192, (512, 16))]:
            got = plan(kind, n, dtype, "block", GPU_BLOCKS)
            assert (got.threads, got.per_thread) == want, (kind, n)
        assert plan(kind, 8193, dtype, "block", GPU_BLOCKS) is None  # tiled
        f32 = plan(kind, 4096, "float32", "block", GPU_BLOCKS)
        assert (f32.threads, f32.per_thread, f32.per_element) == (512, 8, 3)
        assert plan(kind, 8192, "float32", "block", GPU_BLOCKS) is None
    for kind in FORWARD:  # packed 128 x 32: 135 us at (32768, 4096), 256 x 16 174-194
        got = plan(kind, 4096, dtype, "block", GPU_BLOCKS)
        assert (got.threads, got.per_thread, got.packed) == (128, 32, True)
        got = plan(kind, 1536, dtype, "block", (64,) + GPU_BLOCKS)  # no packed 64 x 24
        assert (got.threads, got.per_thread, got.packed) == (64, 24, False)
        got = plan(kind, 64, dtype, "block", GPU_BLOCKS)  # packed would idle threads
        assert not got.packed


@pytest.mark.parametrize("n, fused", [(1016, True), (1024, True), (1025, False)])
def test_half_backward_sixteen_a_thread(n, fused, row_kernels):
    """Under the simulator's 64 threads, rows up to 64 x 16 now take the fused vector
    kernel (two vectors of eight of each input a thread); one more element, tiled."""
    x, dy = backward_case(n, rows=2, dtype=np.float16, seed=n)
    check_backward_bounds(x, dy, np.float16, layout="block", threads=64)
    assert row_kernels[-2:] == [("softmax_backward", fused, 8),
                                ("log_softmax_backward", fused, 8)]
    y = nk.softmax(_bfloat16(x.astype(np.float32)))
    d = _bfloat16(dy.astype(np.float32))
    y64, d64 = y.astype(np.float64), d.astype(np.float64)
    got = nk.softmax_backward(y, d, layout="block", threads=64).astype(np.float64)
    ref = y64 * (d64 - (y64 * d64).sum(-1, keepdims=True))
    np.testing.assert_allclose(got, ref, rtol=2 * BF16_ULP, atol=1e-4)
    got = nk.log_softmax_backward(y, d, layout="block", threads=64).astype(np.float64)
    ref = d64 - np.exp(y64) * d64.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=2 * BF16_ULP, atol=2e-2)
    assert row_kernels[-1] == ("log_softmax_backward", fused, 8)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2048, 4096, 6144, 8192, 8193])
def test_gpu_half_backward_around_sixteen_a_thread(n):
    """The GPU's half backward plans: 128 x 16, 256 x 16, 512 x 12, 512 x 16 fused,
    then tiled (float16 by the bounds above, bfloat16 within its rounding)."""
    x, dy = backward_case(n, rows=64, dtype=np.float16, seed=n)
    check_backward_bounds(x, dy, np.float16)
    y = nk.softmax(_bfloat16(x.astype(np.float32)))
    d = _bfloat16(dy.astype(np.float32))
    y64, d64 = y.astype(np.float64), d.astype(np.float64)
    ref = y64 * (d64 - (y64 * d64).sum(-1, keepdims=True))
    np.testing.assert_allclose(nk.softmax_backward(y, d).astype(np.float64), ref,
                               rtol=2 * BF16_ULP, atol=1e-4)
    ref = d64 - np.exp(y64) * d64.sum(-1, keepdims=True)
    np.testing.assert_allclose(nk.log_softmax_backward(y, d).astype(np.float64), ref,
                               rtol=2 * BF16_ULP, atol=2e-2)


# --- half forward rows past scalar registers: packed in 16-byte vectors ---------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_long_aligned_half_rows_take_packed_plans(dtype):
    """The GPU's block sizes: half forward rows of whole vectors that scalar plans
    leave tiled (past 512 x 24) are held packed up to 1024 x 32, aiming for 32 a
    thread (16384: 512 x 32, two blocks a multiprocessor); under 64 registers, so
    their launch bounds cap ptxas at 64 (no spills there, bench/NOTES.md)."""
    plan = softmax_module._fused_plan
    for kind in FORWARD:
        for n, want in [(12296, (512, 32)), (16384, (512, 32)), (16392, (1024, 24)),
                        (24576, (1024, 24)), (24584, (1024, 32)), (32768, (1024, 32))]:
            got = plan(kind, n, dtype, "block", GPU_BLOCKS)
            assert (got.threads, got.per_thread, got.packed) == (*want, True), (kind, n)
            assert got.fits and got.registers <= 64
            assert got.launch_bounds == (got.threads, 65536 // (64 * got.threads))
        assert plan(kind, 32768, dtype, "block", GPU_BLOCKS).registers == 64
        got = plan(kind, 12288, dtype, "block", GPU_BLOCKS)  # scalar plans: as they were
        assert (got.threads, got.per_thread, got.packed) == (512, 24, False)
        for n in (32776, 50257, 32764, 16388):  # too long, or not whole vectors: tiled
            assert plan(kind, n, dtype, "block", GPU_BLOCKS) is None, (kind, n)
        assert plan(kind, 32768, dtype, "block", GPU_BLOCKS, vectors=False) is None
        assert plan(kind, 32768, dtype, "block", GPU_BLOCKS, keep="mask") is None
        assert plan(kind, 32768, dtype, "block", GPU_BLOCKS, out="float32") is None
        assert plan(kind, 32768, dtype, "warp", (128,)) is None
        assert plan(kind, 32768, dtype, "block", (512,)) is None  # 64 a thread: none
        f32 = plan(kind, 16384, "float32", "block", GPU_BLOCKS)
        assert (f32.threads, f32.per_thread, f32.packed) == (512, 32, False)
        assert plan(kind, 16392, "float32", "block", GPU_BLOCKS) is None
    for kind in BACKWARD:
        assert plan(kind, 16384, dtype, "block", GPU_BLOCKS) is None


@pytest.mark.simulator
@pytest.mark.parametrize("n, packed", [(1536, False), (1544, True), (2048, True),
                                       (2044, False)])
def test_long_half_rows_packed_under_the_simulator(n, packed, row_kernels):
    """The simulator's 64 threads hold 24 halves a thread by scalar loads (1536), 32
    packed: rows of 1544-2048 whole vectors run the fused vector kernel; 2044 (not
    whole vectors) the tiled one."""
    x = logits((2, n), np.float16, seed=n)
    x[1, ::5] = -np.inf
    plan = softmax_module._plan("softmax", n, np.dtype(np.float16), "auto", "auto", None,
                                None, None, None)
    assert (plan.fused, plan.packed) == (n <= 2048 and n % 8 == 0, packed)
    for kind in FORWARD:
        check_forward(kind, x)
        assert row_kernels[-1] == (kind, n % 8 == 0, 8)
    y = nk.softmax(_bfloat16(x.astype(np.float32)))
    assert row_kernels[-1] == ("softmax", n % 8 == 0, 8)
    ref = ref_softmax(_bfloat16(x.astype(np.float32)).astype(np.float64))
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=BF16_ULP, atol=1e-6)


@pytest.mark.simulator  # rows of 2048 halves are packed at the simulator's 64 threads
def test_packed_plans_need_aligned_rows(row_kernels):
    """A packed plan's rows off 16-byte boundaries take the scalar loads' plan
    (tiled), or with fused=True a ValueError; masked rows and other result dtypes
    are not packed."""
    host = logits((2, 2048), np.float16, seed=7)
    shifted = device_rows(host, 1)  # rows 2 bytes past a boundary
    got = nk.softmax(shifted).copy_to_host()
    np.testing.assert_allclose(got.astype(np.float64), ref_softmax(host), **TOL[np.float16])
    assert row_kernels[-1] == ("softmax", False, 0)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        nk.log_softmax(shifted, fused=True)
    nk.softmax(host, fused=True)
    assert row_kernels[-1] == ("softmax", True, 8)
    mask = np.ones(host.shape, bool)
    mask[:, ::3] = False
    got = nk.softmax(host, mask=mask)
    assert row_kernels[-1][:2] == ("softmax", False)
    np.testing.assert_allclose(got.astype(np.float64),
                               ref_softmax(np.where(mask, host, -np.inf)), **TOL[np.float16])
    nk.softmax(host, dtype=np.float32)
    assert row_kernels[-1] == ("softmax", False, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [16384, 24576, 32768])
def test_gpu_long_half_rows_packed(n, row_kernels):
    """(64, n) float16 and bfloat16 softmax and log_softmax through the packed plans
    (512 x 32, 1024 x 24, 1024 x 32; with threads=1024, 1024 x 16 for 16384) against
    float64, and rows shifted off 16-byte boundaries through the tiled kernels.
    (``fused=True``: with ``fused=None`` rows past 16384 are staged in shared memory,
    test_softmax_staged.py.)"""
    x = logits((64, n), np.float16, seed=n)
    for kind in FORWARD:
        check_forward(kind, x, fused=True)
        assert row_kernels[-1] == (kind, True, 8)
        check_forward(kind, x, threads=1024, fused=True)
        assert row_kernels[-1] == (kind, True, 8)
    b = _bfloat16(x.astype(np.float32))
    b64 = b.astype(np.float64)
    np.testing.assert_allclose(nk.softmax(b, fused=True).astype(np.float64), ref_softmax(b64),
                               rtol=BF16_ULP, atol=1e-9)
    np.testing.assert_allclose(nk.log_softmax(b, fused=True).astype(np.float64),
                               ref_log_softmax(b64),
                               rtol=BF16_ULP, atol=2e-2)
    assert row_kernels[-1] == ("log_softmax", True, 8)
    got = nk.softmax(device_rows(x, 1)).copy_to_host()
    np.testing.assert_allclose(got.astype(np.float64), ref_softmax(x), **TOL[np.float16])
    assert row_kernels[-1][:2] == ("softmax", False)
