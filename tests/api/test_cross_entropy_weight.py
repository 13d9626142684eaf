"""cross_entropy's per-class ``weight=`` against torch.nn.functional.cross_entropy on
the CPU (float64 reference, torch.autograd for the gradient): the three reductions
(a mean divides by the counted rows' weights), label smoothing, ignore_index, class
counts around warp and block boundaries, the scalar and the 16-byte vector kernels
(sliced logits take the scalar one), every block strategy, device targets (the
weights of the mean summed on the device), torch tensors, and bad weights.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.strategies import every

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(11)
BLOCKS = {s.name: s for s in every("block", threads=64)}


def case(rows, classes, dtype=np.float64, ignored=()):
    x = (RNG.standard_normal((rows, classes)) * 3).astype(dtype)
    t = RNG.integers(0, classes, rows)
    t[list(ignored)] = -100
    w = (RNG.random(classes) * 2).astype(dtype)
    return x, t, w


def reference(x, t, w, reduction="mean", eps=0.0):
    xr = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    weight = None if w is None else torch.from_numpy(w.astype(np.float64))
    loss = F.cross_entropy(xr, torch.from_numpy(t), weight=weight, reduction=reduction,
                           label_smoothing=eps)
    loss.sum().backward()
    return loss.detach().numpy(), xr.grad.numpy()


def check(x, t, w, reduction, eps, rtol, **kw):
    loss, grad = nk.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=eps,
                                  return_grad=True, **kw)
    ref_loss, ref_grad = reference(x, t, w, reduction, eps)
    assert np.shape(loss) == ref_loss.shape
    scale = max(1.0, float(np.abs(ref_loss).max(initial=0)))
    np.testing.assert_allclose(loss, ref_loss, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(grad, ref_grad, rtol=rtol, atol=rtol * 1e-2)


@pytest.mark.parametrize("classes", [1, 31, 32, 33, 129])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_weighted_loss_and_gradient_match_torch(classes, reduction, eps):
    x, t, w = case(5, classes, ignored=[2])
    check(x, t, w, reduction, eps, 1e-12)


@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_float32_vector_and_scalar_kernels(eps):
    x, t, w = case(6, 133, np.float32, ignored=[0, 4])
    # 16-byte vectors, each row's head and tail as scalars (rows of 133 start at every
    # offset from a boundary)
    check(x, t, w, "mean", eps, 2e-5)
    check(np.ascontiguousarray(x[:, 1:]), t % 132, w[1:], "sum", eps, 2e-5)  # no tails
    # strided device rows: the scalar kernel
    loss, grad = nk.cross_entropy(cuda.to_device(x)[:, ::2], t % 67, weight=w[::2],
                                  reduction="none", label_smoothing=eps, return_grad=True)
    ref_loss, ref_grad = reference(x[:, ::2], t % 67, w[::2], "none", eps)
    np.testing.assert_allclose(loss.copy_to_host(), ref_loss, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(grad.copy_to_host(), ref_grad, rtol=2e-5, atol=2e-7)


@pytest.mark.parametrize("name", list(BLOCKS))
def test_every_block_strategy(name):
    x, t, w = case(3, 70, np.float32)
    check(x, t, w, "mean", 0.05, 2e-5, strategy=BLOCKS[name])


def test_device_targets_and_weights():
    x, t, w = case(7, 40, ignored=[1, 5])
    loss = nk.cross_entropy(x, cuda.to_device(t), weight=cuda.to_device(w))
    np.testing.assert_allclose(loss, reference(x, t, w)[0], rtol=1e-12)
    # a target out of range on the device is still reported, weights or not
    bad = t.copy()
    bad[3] = 40
    with pytest.raises(IndexError, match="target 40 of row 3"):
        nk.cross_entropy(x, cuda.to_device(bad), weight=w)


def test_torch_tensors_in_torch_out():
    x, t, w = case(4, 33, np.float32)
    xt, tt, wt = map(torch.from_numpy, (x, t, w))
    loss = nk.cross_entropy(xt, tt, weight=wt, label_smoothing=0.1)
    assert isinstance(loss, torch.Tensor) and loss.dtype == torch.float32
    torch.testing.assert_close(loss, F.cross_entropy(xt, tt, weight=wt, label_smoothing=0.1))


def test_a_mean_of_no_weight_is_nan_as_torch():
    x, t, w = case(3, 8)
    w[:] = 0.0
    loss = nk.cross_entropy(x, t, weight=w)
    assert np.isnan(loss) and np.isnan(reference(x, t, w)[0])
    t[:] = -100  # every row ignored
    assert np.isnan(nk.cross_entropy(x, t, weight=np.ones(8)))
    assert nk.cross_entropy(x, t, weight=np.ones(8), reduction="sum") == 0.0


def test_unit_weights_change_nothing():
    x, t, _ = case(5, 65, ignored=[0])
    for eps in (0.0, 0.3):
        plain = nk.cross_entropy(x, t, label_smoothing=eps, return_grad=True)
        weighted = nk.cross_entropy(x, t, weight=np.ones(65), label_smoothing=eps,
                                    return_grad=True)
        np.testing.assert_allclose(weighted[0], plain[0], rtol=1e-13)
        np.testing.assert_allclose(weighted[1], plain[1], rtol=1e-13, atol=1e-16)


def test_bad_weights_are_named():
    x, t, w = case(3, 8)
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\)"):
        nk.cross_entropy(x, t, weight=w[:7])
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\)"):
        nk.cross_entropy(x, t, weight=w.reshape(2, 4))
    with pytest.raises(TypeError, match="weight must hold floats"):
        nk.cross_entropy(x, t, weight=np.ones(8, np.int64))


def test_bfloat16_tensors_and_weights():
    x, t, w = case(3, 40, np.float32)
    xb, wb, tt = torch.from_numpy(x).bfloat16(), torch.from_numpy(w).bfloat16(), \
        torch.from_numpy(t)
    want = F.cross_entropy(xb.float(), tt, weight=wb.float())
    got = nk.cross_entropy(xb, tt, weight=wb)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)
    # float32 logits with bfloat16 weights: the weights' values, exactly widened
    got = nk.cross_entropy(torch.from_numpy(x), tt, weight=wb)
    torch.testing.assert_close(got, F.cross_entropy(torch.from_numpy(x), tt,
                                                    weight=wb.float()))


@pytest.mark.parametrize("weighted", [False, True])
def test_mean_counts_rows_over_several_blocks(weighted):
    # 131 rows: three blocks of the count kernel (64 threads under the simulator); the
    # last block to finish sets the mean's 1 / count, whichever it is
    x, t, w = case(131, 2, ignored=[0, 64, 127, 130])
    w = w if weighted else None
    check(x, t, w, "mean", 0.0, 1e-12)
    loss = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), weight=w)
    np.testing.assert_allclose(loss.copy_to_host(), reference(x, t, w, "mean", 0.0)[0],
                               rtol=1e-12)
