"""cross_entropy of K-dimensional logits ``(N, C, d1, ..., dk)`` against targets
``(N, d1, ..., dk)``, as torch.nn.functional.cross_entropy takes them (a row over
the classes at every position), on the CPU reference: the reductions, label
smoothing, weights, ignore_index, the gradient (also written over the logits), device
and torch arrays, and the layouts refused.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(23)


def case(shape, ignored=2):
    N, C = shape[:2]
    x = RNG.standard_normal(shape) * 3
    t = RNG.integers(0, C, (N, *shape[2:]))
    t.reshape(-1)[:ignored] = -100
    return x, t


def reference(x, t, reduction="mean", eps=0.0, weight=None):
    xr = torch.from_numpy(x).requires_grad_(True)
    loss = F.cross_entropy(xr, torch.from_numpy(t), reduction=reduction, label_smoothing=eps,
                           weight=None if weight is None else torch.from_numpy(weight))
    loss.sum().backward()
    return loss.detach().numpy(), xr.grad.numpy()


# One and two position axes, one sample, a position axis of length 1, one class; few
# positions each (the simulator runs a block per position).
SHAPES = [(2, 5, 3), (2, 9, 2, 2), (1, 7, 4), (2, 3, 1, 3), (2, 1, 3)]


# Every shape per position ("none"); the mean and the sum, which fold those same
# losses, over two of them.
@pytest.mark.parametrize("shape, reduction", [(s, "none") for s in SHAPES] +
                         [(s, r) for s in SHAPES[1::2] for r in ("mean", "sum")])
def test_k_dimensional_logits_match_torch(shape, reduction):
    x, t = case(shape)
    for eps, weight in ((0.0, None), (0.1, RNG.random(shape[1]))):
        loss, grad = nk.cross_entropy(x, t, reduction=reduction, label_smoothing=eps,
                                      weight=weight, return_grad=True)
        ref_loss, ref_grad = reference(x, t, reduction, eps, weight)
        assert np.shape(loss) == ref_loss.shape and grad.shape == x.shape
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=1e-14)


def test_empty_positions_and_samples():
    for shape in ((2, 4, 0), (0, 4, 3)):
        x, t = case(shape, ignored=0)
        loss = nk.cross_entropy(x, t, reduction="none")
        assert np.shape(loss) == reference(x, t, "none")[0].shape
        assert np.isnan(nk.cross_entropy(x, t))  # a mean of no rows, as torch's


def test_device_logits_read_in_place_and_the_gradient_over_them():
    x, t = case((2, 6, 2, 3))
    ref_loss, ref_grad = reference(x, t, "mean", 0.2)
    d = cuda.to_device(x)
    loss, grad = nk.cross_entropy(d, cuda.to_device(t), label_smoothing=0.2,
                                  return_grad=True, grad_out=d)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-12)
    np.testing.assert_allclose(d.copy_to_host(), ref_grad, rtol=1e-12, atol=1e-14)
    # a sliced position axis is still one strided axis
    x, t = case((2, 4, 6))
    loss = nk.cross_entropy(cuda.to_device(x)[:, :, ::2], t[:, ::2], reduction="none")
    np.testing.assert_allclose(loss.copy_to_host(), reference(
        np.ascontiguousarray(x[:, :, ::2]), t[:, ::2], "none")[0], rtol=1e-12)


def test_torch_tensors():
    x, t = case((2, 5, 2, 3))
    xt, tt = torch.from_numpy(x).float(), torch.from_numpy(t)
    loss = nk.cross_entropy(xt, tt, reduction="none")
    assert isinstance(loss, torch.Tensor) and loss.shape == (2, 2, 3)
    torch.testing.assert_close(loss, F.cross_entropy(xt, tt, reduction="none"))


def test_bad_targets_and_layouts_are_named():
    x, t = case((2, 4, 3))
    with pytest.raises(ValueError, match=r"target must have shape \(2, 3\)"):
        nk.cross_entropy(x, t[:, :2])
    with pytest.raises(ValueError, match=r"target must have shape \(2, 3\)"):
        nk.cross_entropy(x, t.reshape(-1))
    with pytest.raises(ValueError, match=r"target must have shape \(\)"):
        nk.cross_entropy(x[0, 0], t[0])  # (C,) logits: torch's unbatched form
    bad = t.copy()
    bad[1, 2] = 4
    with pytest.raises(IndexError, match=r"target 4 of row \(1, 2\)"):
        nk.cross_entropy(x, bad)
    with pytest.raises(IndexError, match=r"target 4 of row \(1, 2\)"):
        nk.cross_entropy(x, cuda.to_device(bad))
    x4, t4 = case((2, 3, 4, 5))
    with pytest.raises(ValueError, match="logits of shape .* one axis"):
        nk.cross_entropy(cuda.to_device(x4)[:, :, :, ::2], t4[:, :, ::2])  # two strides


@pytest.mark.parametrize("shape", [(2, 3, 0), (0, 3, 4), (2, 3, 0, 4)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_empty_positions_on_the_device_give_torchs_answer(shape, reduction):
    # an empty array's strides may be anything (NumPy's are 0): nothing to lay out
    x = np.zeros(shape)
    t = np.zeros((shape[0], *shape[2:]), np.int64)
    got = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), reduction=reduction)
    ref = F.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), reduction=reduction)
    assert got.shape == tuple(ref.shape)
    np.testing.assert_array_equal(got.copy_to_host(), ref.numpy())
