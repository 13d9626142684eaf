"""Masked, causal and scaled softmax (``mask=``, ``causal=``, ``scale=`` of
numbakern/api/softmax.py; the kept kernels of numbakern/kernels/softmax_rows.py).

The peer is torch on the CPU in float64: ``softmax(x * scale).masked_fill(~mask,
-inf)`` with ``nan_to_num`` for rows that keep nothing (torch's ``_safe_softmax``),
and ``torch.autograd`` through the same for the backward passes. Under the
simulator: every plan (warp, fused, fused-online, tiled, tiled-online), every block
strategy, causal with fewer and with more queries than keys, broadcast masks read at
stride 0, float16, bfloat16 and ``dtype=``. GPU tests (marked ``gpu``):
attention-shaped float16 and bfloat16 CUDA tensors against torch on the device.
"""

import importlib

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.core.arrays import CopyWarning
from numbakern.kernels import softmax_rows as rowwise

torch = pytest.importorskip("torch")
softmax_module = importlib.import_module("numbakern.api.softmax")

FORWARD = {"softmax": nk.softmax, "log_softmax": nk.log_softmax}
BACKWARD = {"softmax": nk.softmax_backward, "log_softmax": nk.log_softmax_backward}
PLANS = {"warp": dict(layout="warp"),
         "fused": dict(layout="block", fused=True, normalizer="max_then_sum"),
         "fused-online": dict(layout="block", fused=True, normalizer="online"),
         "tiled": dict(layout="block", fused=False, normalizer="max_then_sum"),
         "tiled-online": dict(layout="block", fused=False, normalizer="online")}
BACKWARD_PLANS = {"warp": dict(layout="warp"), "fused": dict(layout="block", fused=True),
                  "tiled": dict(layout="block", fused=False)}
BLOCKS = nk.strategies.available("block")
# float32 kernels against float64 references: a few ulp of each output (log-softmax:
# of the row's largest log-probabilities too).
TOL = {"softmax": dict(rtol=1e-5, atol=1e-7), "log_softmax": dict(rtol=1e-5, atol=2e-5)}
BF16_ULP = 2.0 ** -7


def logits(shape, dtype=np.float32, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)


def causal_mask(queries, keys):
    """Bottom-right aligned: query i keeps key j when j <= i + keys - queries."""
    return np.arange(keys) <= np.arange(queries)[:, None] + keys - queries


def reference(kind, x, mask=None, scale=1.0, dim=-1):
    """torch's masked softmax in float64, rows of nothing but -inf once masked 0
    (log: -inf), as ``_safe_softmax``."""
    z = torch.from_numpy(np.asarray(x, np.float64)) * scale
    if mask is not None:
        z = z.masked_fill(~torch.from_numpy(np.broadcast_to(mask, x.shape).copy()),
                          -np.inf)
    dead = (z == -np.inf).all(dim, keepdim=True)
    if kind == "softmax":
        return torch.softmax(z, dim).masked_fill(dead, 0.0).numpy()
    return torch.log_softmax(z, dim).masked_fill(dead, -np.inf).numpy()


def attention_mask(shape, seed=1):
    """A (1, 1, Q, K) mask broadcast over batch and heads: random, with one row
    dropped whole and one row keeping a single element."""
    mask = np.random.default_rng(seed).random((1, 1) + shape[-2:]) < 0.6
    mask[..., 0, :] = False
    mask[..., 1, :] = False
    mask[..., 1, 3] = True
    return mask


def check(kind, x, tol=None, **kw):
    got = FORWARD[kind](x, **kw)
    mask = kw.get("mask")
    if kw.get("causal"):
        c = causal_mask(*x.shape[-2:])
        mask = c if mask is None else mask & c
    want = reference(kind, x.astype(np.float64), mask, kw.get("scale") or 1.0)
    np.testing.assert_allclose(got.astype(np.float64), want, **(tol or TOL[kind]))
    return got


# --- every plan and block strategy ---------------------------------------------------------


@pytest.mark.parametrize("plan", PLANS)
def test_broadcast_mask_and_scale_on_every_plan(plan):
    x = logits((2, 2, 3, 37))  # a mask row dropped whole, one keeping one key, one random
    mask = attention_mask(x.shape)
    for kind in FORWARD:
        got = check(kind, x, mask=mask, scale=0.5, **PLANS[plan])
        assert (got[..., 0, :] == (0 if kind == "softmax" else -np.inf)).all()
        if kind == "softmax":
            assert (got[..., 1, 3] == 1).all()  # the one element its row keeps


@pytest.mark.parametrize("block", BLOCKS)
def test_every_block_strategy(block):
    x = logits((3, 50), seed=2)
    mask = np.random.default_rng(3).random((3, 50)) < 0.5
    check("softmax", x, mask=mask, max_strategy=block, sum_strategy=block,
          normalizer="max_then_sum", layout="block", fused=True, threads=32)
    check("log_softmax", x, mask=mask, sum_strategy=block, normalizer="online",
          layout="block", fused=False, threads=32)
    check("softmax", x, mask=mask, max_strategy=block, sum_strategy=block, layout="warp")


CAUSAL_PLANS = ["warp", "fused-online", "tiled"]
CAUSAL_SHAPES = [(3, 8), (8, 3), (5, 5)]


# softmax and log-softmax take turns over the plans and shapes: each plan and each
# shape meets both
@pytest.mark.parametrize("plan, queries, keys, kind",
                         [(p, q, k, list(FORWARD)[(i + j) % 2])
                          for i, p in enumerate(CAUSAL_PLANS)
                          for j, (q, k) in enumerate(CAUSAL_SHAPES)])
def test_causal_is_aligned_bottom_right(plan, queries, keys, kind):
    x = logits((2, queries, keys), seed=queries)  # two batches: the query is row % queries
    got = check(kind, x, causal=True, **PLANS[plan])
    if queries > keys:  # the first queries - keys rows see no key: 0 (log: -inf), not NaN
        dead = 0 if kind == "softmax" else -np.inf
        assert (got[:, :queries - keys] == dead).all()


def test_causal_with_a_mask_keeps_what_both_keep():
    x = logits((2, 3, 6, 9), seed=4)
    padding = np.random.default_rng(5).random((2, 1, 1, 9)) < 0.7  # per batch, over keys
    for kind in FORWARD:
        check(kind, x, mask=padding, causal=True, scale=2.0)


def test_causal_rows_of_a_strided_device_view():
    # Every other key of a device array, read in place: the rows' query index comes
    # from the row number whatever the strides.
    x = logits((2, 3, 5, 24), seed=6)
    got = nk.softmax(cuda.to_device(x)[:, :, :, ::2], causal=True).copy_to_host()
    np.testing.assert_allclose(got, reference("softmax", x[..., ::2], causal_mask(5, 12)),
                               **TOL["softmax"])


def test_only_masked_calls_take_the_kept_kernels(monkeypatch):
    """Without mask, causal or a scale other than 1, the plain kernels run; with any of
    them, the kept kernels (16-byte vectors for fused forward rows that allow them)."""
    seen = []
    get = rowwise.kernel_for

    def spy(plan):
        seen.append((plan.keep, plan.vector))
        return get(plan)

    monkeypatch.setattr(rowwise, "kernel_for", spy)
    x, kw = logits((2, 3, 128), seed=23), dict(fused=True, threads=32)  # 4 a thread
    nk.softmax(x, **kw)
    nk.softmax(x, scale=1.0, causal=False, **kw)
    nk.softmax(x, scale=0.5, **kw)
    nk.softmax(x, causal=True, **kw)
    nk.log_softmax(x, mask=x > 0, causal=True, **kw)
    nk.softmax_backward(x, x, mask=x > 0, **kw)
    nk.softmax(x, causal=True, fused=False)
    assert seen == [("", 4), ("", 4), ("all", 4), ("causal", 4), ("mask&causal", 4),
                    ("mask", 0), ("causal", 0)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fused_rows_in_vectors(dtype, monkeypatch):
    """Vectors of 4 (float32) or 8 (halves) elements, the causal limit and the mask
    inside vectors, vectors wholly past the limit unread."""
    mld = pytest.importorskip("ml_dtypes")
    widths = []
    get = rowwise.kernel_for
    monkeypatch.setattr(rowwise, "kernel_for",
                        lambda plan: widths.append(plan.vector) or get(plan))
    width = 4 if dtype == "float32" else 8  # elements of a 16-byte vector
    n = 32 * width  # a vector's elements a thread
    x = logits((2, 6, n), seed=27).astype(mld.bfloat16 if dtype == "bfloat16" else dtype)
    mask = attention_mask(x.shape)[0]
    for kind, fn in FORWARD.items():
        got = fn(x, mask=mask, causal=True, scale=0.5, fused=True, threads=32)
        want = reference(kind, x.astype(np.float64), mask & causal_mask(6, n), 0.5)
        tol = TOL[kind] if dtype == "float32" else \
            dict(rtol=BF16_ULP if dtype == "bfloat16" else 2e-3,
                 atol=1e-4 if kind == "softmax" else 4 * BF16_ULP)
        np.testing.assert_allclose(got.astype(np.float64), want, **tol)
    assert widths == [width] * 2


# --- values: kept -inf, NaN, scale alone --------------------------------------------------


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the simulator's -inf - -inf
def test_special_values_under_a_mask():
    x = logits((4, 20), seed=7)
    mask = np.ones((4, 20), bool)
    x[0, :5] = -np.inf
    mask[0, 5:] = False  # keeps only -inf: 0, as _safe_softmax
    x[1, 6] = np.nan  # a kept NaN: NaN row
    x[2, 6] = np.nan
    mask[2, 6] = False  # a dropped NaN is never read
    x[3] = -np.inf  # scale alone keeps every element: all -inf stays NaN, as torch
    got = nk.softmax(x, mask=mask)
    assert (got[0] == 0).all() and np.isnan(got[1]).all()
    np.testing.assert_allclose(got[2], reference("softmax", x[2:3], mask[2:3])[0],
                               **TOL["softmax"])
    assert np.isnan(nk.softmax(x[3:], scale=0.5)).all()
    np.testing.assert_allclose(nk.softmax(x[1:2, 7:], scale=-0.25),
                               reference("softmax", x[1:2, 7:], scale=-0.25),
                               **TOL["softmax"])


# --- float16, bfloat16, dtype= ------------------------------------------------------------


def test_float16_and_dtype_float32():
    x = logits((2, 5, 40), np.float16, seed=8)
    mask = np.random.default_rng(9).random((5, 40)) < 0.5
    check("softmax", x, dict(rtol=2e-3, atol=1e-4), mask=mask, causal=True)
    got = check("log_softmax", x, mask=mask, scale=0.3, dtype=np.float32)
    assert got.dtype == np.float32


def test_bfloat16_is_float32_rounded_once():
    mld = pytest.importorskip("ml_dtypes")
    x = logits((2, 4, 33), seed=10).astype(mld.bfloat16)
    mask = attention_mask(x.shape)[0]
    for kind, fn in FORWARD.items():
        got = fn(x, mask=mask, causal=True, fused=False)
        assert got.dtype == x.dtype
        want = reference(kind, x.astype(np.float64), mask & causal_mask(4, 33))
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=BF16_ULP,
                                   atol=BF16_ULP * (1e-2 if kind == "softmax" else 4))
    y = nk.softmax(x, mask=mask, causal=True)
    dy = logits(x.shape, seed=11).astype(mld.bfloat16)
    dx = nk.softmax_backward(y, dy, mask=mask, causal=True)
    assert dx.dtype == x.dtype
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    want = y64 * (dy64 - (y64 * dy64).sum(-1, keepdims=True))  # y is 0 where dropped
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=2 * BF16_ULP, atol=1e-2)


# --- backward against torch.autograd ------------------------------------------------------


def autograd(kind, x, dy, mask, scale):
    """d(loss)/dx through torch's masked (log-)softmax of ``x * scale``, float64."""
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    z = (xt * scale).masked_fill(~torch.from_numpy(np.broadcast_to(mask, x.shape).copy()),
                                 -np.inf)
    y = torch.softmax(z, -1) if kind == "softmax" else torch.log_softmax(z, -1)
    y.backward(torch.from_numpy(dy.astype(np.float64)))
    return xt.grad.numpy()


@pytest.mark.parametrize("plan", BACKWARD_PLANS)
def test_backward_matches_autograd(plan):
    x, dy = logits((2, 5, 36), seed=11), logits((2, 5, 36), seed=12) / 3
    mask = np.random.default_rng(13).random((1, 5, 36)) < 0.6
    mask[0, 0] = False  # a row that keeps nothing: dx = 0
    kept = mask & causal_mask(5, 36)
    for kind in FORWARD:
        y = FORWARD[kind](x, mask=mask, causal=True, scale=0.7)
        dx = BACKWARD[kind](y, dy, mask=mask, causal=True, scale=0.7,
                            **BACKWARD_PLANS[plan])
        want = autograd(kind, x, dy, kept, 0.7)
        live = kept.any(-1)[0]
        np.testing.assert_allclose(dx[:, live], want[:, live], rtol=1e-4, atol=1e-6)
        assert (dx[:, ~live] == 0).all() and (dx[~np.broadcast_to(kept, x.shape)] == 0).all()


def test_backward_dtype_gives_the_forward_inputs_dtype():
    x = logits((3, 40), np.float16, seed=14)
    dy = logits((3, 40), np.float32, seed=15) / 3
    mask = np.random.default_rng(16).random((3, 40)) < 0.5
    y = nk.softmax(x, mask=mask, scale=2.0, dtype=np.float32)
    dx = nk.softmax_backward(y, dy, mask=mask, scale=2.0, dtype=np.float16)
    assert dx.dtype == np.float16
    want = autograd("softmax", x, dy, mask, 2.0)
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=2e-3, atol=1e-4)


# --- array kinds, the broadcast mask is not copied ------------------------------------------


def test_broadcast_mask_is_uploaded_at_its_own_size(monkeypatch):
    uploaded = []
    upload = softmax_module.to_device

    def spy(host, stream):
        uploaded.append(host.shape)
        return upload(host, stream)

    monkeypatch.setattr(softmax_module, "to_device", spy)
    x = logits((3, 2, 4, 10), seed=17)
    mask = attention_mask(x.shape)
    check("softmax", x, mask=mask)
    check("softmax", x, mask=np.broadcast_to(mask, x.shape))  # a view: its element, once
    assert sorted(uploaded) == [(1, 1, 4, 10), (1, 1, 4, 10), x.shape, x.shape]


def test_device_and_torch_masks():
    x = logits((2, 3, 12), seed=18)
    mask = np.random.default_rng(19).random((3, 12)) < 0.5
    want = reference("softmax", x, mask)
    got = nk.softmax(cuda.to_device(x), mask=cuda.to_device(mask)).copy_to_host()
    np.testing.assert_allclose(got, want, **TOL["softmax"])
    xt, mt = torch.from_numpy(x), torch.from_numpy(mask)
    got = nk.softmax(xt, mask=mt, causal=True)
    assert isinstance(got, torch.Tensor)
    peer = torch.ops.aten._safe_softmax(
        xt.double().masked_fill(~(mt & torch.from_numpy(causal_mask(3, 12))), -np.inf), -1)
    torch.testing.assert_close(got.double(), peer, **TOL["softmax"])
    dy = torch.from_numpy(logits((2, 3, 12), seed=20))
    dx = nk.softmax_backward(got, dy, mask=mt, causal=True)
    assert isinstance(dx, torch.Tensor) and dx.shape == xt.shape


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "tiled"])
def test_in_place(fused):
    x, dy = logits((2, 4, 40), seed=24), logits((2, 4, 40), seed=25)
    mask = np.random.default_rng(26).random((4, 40)) < 0.5
    want = reference("softmax", x, mask & causal_mask(4, 40))
    xd = cuda.to_device(x)
    assert nk.softmax(xd, mask=mask, causal=True, fused=fused, out=xd) is xd
    y = xd.copy_to_host()
    np.testing.assert_allclose(y, want, **TOL["softmax"])
    dd = cuda.to_device(dy)
    nk.softmax_backward(xd, dd, mask=mask, causal=True, fused=fused, out=dd)
    dx = y * (dy - (y * dy).sum(-1, keepdims=True))  # 0 where dropped: y is
    np.testing.assert_allclose(dd.copy_to_host(), dx, rtol=1e-5, atol=1e-6)


def test_a_replayed_call_reads_the_new_mask_and_scale():
    from numbakern.runtime import replay

    x = cuda.to_device(logits((2, 3, 20), seed=28))
    masks = [np.random.default_rng(seed).random((3, 20)) < 0.5 for seed in (29, 30, 31)]
    before = replay.counts["replayed"]
    for mask, scale in zip(masks, (0.5, 0.5, 2.0)):
        got = nk.softmax(x, mask=cuda.to_device(mask), causal=True, scale=scale)
        want = reference("softmax", x.copy_to_host(), mask & causal_mask(3, 20), scale)
        np.testing.assert_allclose(got.copy_to_host(), want, **TOL["softmax"])
    assert replay.counts["replayed"] == before + 1  # the second call; the third's scale differs


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("call, error, match", [
    (lambda x: nk.softmax(x, mask=np.ones((3, 4), bool)), ValueError, "mask of shape"),
    (lambda x: nk.softmax_backward(x, x, mask=np.ones(7, bool)), ValueError, "mask of shape"),
    (lambda x: nk.softmax(x, mask=np.ones((2, 5), np.int8)), TypeError, "mask must be a bool"),
    (lambda x: nk.softmax(x, mask=np.ones((2, 5), np.float32)), TypeError, "mask must be a bool"),
    (lambda x: nk.softmax(x[0], causal=True), ValueError, "causal=True .* 1-D"),
    (lambda x: nk.softmax(x, axis=0, causal=True), ValueError, "causal=True .* last axis"),
    (lambda x: nk.softmax(x, causal="yes"), TypeError, "causal must be"),
    (lambda x: nk.softmax(x, scale=float("nan")), ValueError, "scale must be finite"),
    (lambda x: nk.log_softmax(x, scale=np.inf), ValueError, "scale must be finite"),
    (lambda x: nk.softmax(x, scale=10**400), ValueError, "scale must be finite"),
    (lambda x: nk.softmax(x, scale="2"), TypeError, "scale must be a real number"),
    (lambda x: nk.softmax(x, scale=True), TypeError, "scale must be a real number"),
    (lambda x: nk.softmax(x, scale=np.ones(2)), TypeError, "scale must be a real number"),
    (lambda x: nk.softmax(x, scale=np.array(np.inf)), ValueError, "scale must be finite"),
])
def test_bad_arguments_raise_clearly(call, error, match):
    with pytest.raises(error, match=match):
        call(logits((2, 5)))


def test_a_zero_dimensional_array_scale_is_its_number():
    x = logits((2, 5))
    np.testing.assert_array_equal(nk.softmax(x, scale=np.array(0.5)), nk.softmax(x, scale=0.5))


def test_dask_refuses_mask_causal_and_scale():
    da = pytest.importorskip("dask.array")
    x = da.from_array(logits((2, 5)), chunks=(1, 5))
    for kw in (dict(mask=np.ones((2, 5), bool)), dict(causal=True), dict(scale=2.0)):
        with pytest.raises(NotImplementedError, match=next(iter(kw)) + "="):
            nk.softmax(x, **kw)
    with pytest.raises(NotImplementedError, match="causal="):
        nk.log_softmax(x, causal=True)


def test_mask_broadcast_beyond_three_dimensions_is_copied_with_a_warning(monkeypatch):
    # (2, 1, 2, 1, 6) over (2, 2, 2, 2, 6): four strided dimensions besides the axis;
    # broadcast over the second, the first three merge: 48 elements uploaded, not 96.
    uploaded = []
    upload = softmax_module.to_device
    monkeypatch.setattr(softmax_module, "to_device",
                        lambda host, stream: uploaded.append(host.shape) or upload(host, stream))
    x = logits((2, 2, 2, 2, 6), seed=21)
    mask = np.random.default_rng(22).random((2, 1, 2, 1, 6)) < 0.6
    with pytest.warns(CopyWarning, match="mask"):
        check("softmax", x, mask=mask)
    assert (2, 2, 2, 1, 6) in uploaded


# --- GPU ------------------------------------------------------------------------------------


def _cuda_torch():
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape", [(2, 4, 128, 128), (2, 4, 64, 2048), (1, 2, 300, 5000)])
def test_gpu_causal_attention_rows_against_torch(shape, dtype):
    t = _cuda_torch()
    gen = t.Generator(device="cuda").manual_seed(0)
    x = t.randn(shape, device="cuda", generator=gen).to(getattr(t, dtype))
    pad = t.rand((shape[0], 1, 1, shape[-1]), device="cuda", generator=gen) < 0.8
    keep = pad & t.ones(shape[-2:], dtype=t.bool, device="cuda").tril(shape[-1] - shape[-2])
    scale = shape[-1] ** -0.5
    z = (x.float() * scale).masked_fill(~keep, -float("inf"))
    tol = dict(rtol=2 ** -7, atol=1e-3) if dtype == "bfloat16" else \
        dict(rtol=2e-3, atol=1e-4)
    got = nk.softmax(x, mask=pad, causal=True, scale=scale)
    t.testing.assert_close(got.float(), t.softmax(z, -1).nan_to_num(0.0), **tol)
    lg = nk.log_softmax(x, mask=pad, causal=True, scale=scale, dtype=t.float32)
    want = t.log_softmax(z, -1)
    t.testing.assert_close(lg[keep.expand_as(lg)], want[keep.expand_as(want)],
                           rtol=1e-5, atol=1e-4)
    assert (lg[~keep.expand_as(lg)] == -float("inf")).all()


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, dict(fused=False), dict(layout="block")],
                         ids=["auto", "tiled", "block"])
def test_gpu_masked_backward_against_autograd(kw):
    t = _cuda_torch()
    gen = t.Generator(device="cuda").manual_seed(1)
    x = t.randn((4, 8, 256, 256), device="cuda", generator=gen, requires_grad=True)
    mask = t.rand((1, 1, 256, 256), device="cuda", generator=gen) < 0.7
    keep = mask & t.ones(256, 256, dtype=t.bool, device="cuda").tril()
    dy = t.randn(x.shape, device="cuda", generator=gen)
    for forward, backward, fn in ((nk.softmax, nk.softmax_backward, t.softmax),
                                  (nk.log_softmax, nk.log_softmax_backward, t.log_softmax)):
        x.grad = None
        fn((x * 0.125).masked_fill(~keep, -float("inf")), -1).backward(dy)
        y = forward(x.detach(), mask=mask, causal=True, scale=0.125, **kw)
        dx = backward(y, dy, mask=mask, causal=True, scale=0.125, **kw)
        t.testing.assert_close(dx, x.grad.nan_to_num(0.0), rtol=1e-4, atol=1e-5)
