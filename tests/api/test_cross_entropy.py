"""Fused cross-entropy (numbakern/api/losses.py) against PyTorch's on the CPU.

torch.nn.functional.cross_entropy in float64 is the reference for the loss, and
torch.autograd for the gradient; class counts sweep warp and block boundaries; every
block strategy the registry lists reduces the rows; all three reductions, label
smoothing, ignore_index (some rows, every row), the gradient written over the
logits, half-precision tensors, and bad input.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.strategies import every

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(5)
CLASSES = [1, 31, 32, 33, 129, 1000]
BLOCKS = {s.name: s for s in every("block", threads=64)}
TOL = {np.float64: 1e-12, np.float32: 2e-6}


def case(rows, classes, dtype=np.float64, ignored=()):
    x = (RNG.standard_normal((rows, classes)) * 3).astype(dtype)
    t = RNG.integers(0, classes, rows)
    t[list(ignored)] = -100
    return x, t


def reference(x, t, reduction="mean", eps=0.0, weight=None, dtype=np.float64):
    """torch's loss and gradient, computed in ``dtype``."""
    xr = torch.from_numpy(x.astype(dtype)).requires_grad_(True)
    w = None if weight is None else torch.from_numpy(weight.astype(dtype))
    loss = F.cross_entropy(xr, torch.from_numpy(t), reduction=reduction, label_smoothing=eps,
                           weight=w)
    loss.sum().backward()
    return loss.detach().numpy(), xr.grad.numpy()


def on_device(x, layout):
    """``x`` on the device as contiguous rows (the vector kernel) or as every other
    column of a wider array (strided rows: the scalar kernel; a Numba device array's
    ``.T`` is a transposed copy on a GPU, not a view)."""
    return cuda.to_device(x) if layout == "rows" else \
        cuda.to_device(np.repeat(x, 2, axis=1))[:, ::2]


@pytest.mark.parametrize("classes", CLASSES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_and_gradient_match_torch(classes, reduction, eps):
    x, t = case(5, classes, ignored=[2])
    loss, grad = nk.cross_entropy(x, t, reduction=reduction, label_smoothing=eps,
                                  return_grad=True)
    ref_loss, ref_grad = reference(x, t, reduction, eps)
    assert np.asarray(loss).dtype == np.float64 and np.shape(loss) == ref_loss.shape
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(BLOCKS))
def test_every_block_strategy_reduces_the_rows(name):
    x, t = case(4, 129, np.float32)
    loss, grad = nk.cross_entropy(x, t, label_smoothing=0.05, return_grad=True,
                                  strategy=BLOCKS[name])
    ref_loss, ref_grad = reference(x, t, "mean", 0.05)
    assert loss.dtype == np.float32
    np.testing.assert_allclose(loss, ref_loss, rtol=TOL[np.float32] * 10)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", list(BLOCKS))
@pytest.mark.parametrize("layout", ["rows", "strided"])
def test_float64_smoothing_at_1024_threads_fits_static_shared_memory(name, layout):
    """The widest case of the kernels' shared memory: 1024 threads of float64 pairs
    (Hillis-Steele's 2 x 1024 slots a field) and the smoothing sum beside them, which
    must stay within a block's 48 KiB of static shared memory (the simulator refuses
    more, as ptxas does); contiguous rows take the vector kernel, strided ones the
    scalar kernel. Two rows, one ignored: every row is a block of 1024 simulated
    threads, and the simulator checks a block's shared memory as it reaches each
    array."""
    x, t = case(2, 40, ignored=[1])
    strategy = every("block", threads=1024)[list(BLOCKS).index(name)]
    logits = on_device(x, layout)
    loss, grad = nk.cross_entropy(logits, cuda.to_device(t), label_smoothing=0.1,
                                  return_grad=True, strategy=strategy)
    ref_loss, ref_grad = reference(x, t, "mean", 0.1)
    np.testing.assert_allclose(loss.copy_to_host(), ref_loss, rtol=1e-12)
    np.testing.assert_allclose(grad.copy_to_host(), ref_grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["rows", "strided"])
@pytest.mark.parametrize("weighted", [False, True])
def test_large_logits_keep_the_log_of_the_sum(dtype, layout, weighted):
    """Logits far from 0 but close to each other (the loss depends on their
    differences only): the max and the log of the scaled sum stay apart, as torch's
    log-softmax keeps them, so neither the loss nor the gradient loses the log to
    rounding (two logits of 1e8 in float32 gave loss 0 and gradient 0 and 1), nor
    label smoothing's sum; near the dtype's largest (3e38 with a tie) torch's gradient
    1/2, 1/2, -1, and its loss where it has one: a smoothed loss whose terms pass the
    dtype's largest is inf, as torch's own in that dtype."""
    big, ulp = (1e8, 8) if dtype == np.float32 else (1e17, 16)  # C = 5: 1/C inexact
    x = np.array([[big, big, big, big, big],
                  [big, big + ulp, big - 2 * ulp, big + ulp, big + 2 * ulp],
                  [-big, -big, -big + ulp, 0.0, -big],
                  [3e38, 3e38, 0.0, -3e38, 1.0]], dtype)
    t = np.array([0, 2, 1, 2])
    w = np.array([0.5, 2.0, 1.0, 1.5, 0.25], dtype) if weighted else None
    logits = on_device(x, layout)
    for eps in (0.0, 0.1):
        loss, grad = nk.cross_entropy(logits, cuda.to_device(t), weight=w, reduction="none",
                                      label_smoothing=eps, return_grad=True)
        want, want_grad = reference(x, t, "none", eps, w)
        own = reference(x, t, "none", eps, w, dtype)[0]
        want = np.where(np.isinf(own), own, want)
        rtol = 2e-6 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(loss.copy_to_host(), want, rtol=rtol)
        np.testing.assert_allclose(grad.copy_to_host(), want_grad, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("layout", ["rows", "strided"])
@pytest.mark.parametrize("weighted", [False, True])
def test_masked_logits_with_smoothing_as_torch(layout, weighted):
    """-inf logits (masked classes), the first among them: label smoothing's loss is
    inf as torch's (NaN for a weight of 0, torch's ``0 * -inf``), the gradient finite;
    a far finite mask (-1e9) of weight 0 leaves a small loss exact."""
    inf = np.inf
    x = np.array([[-inf, 1.0, 2.0, -inf], [1.0, -inf, 3.0, 0.5], [-inf, -inf, 5.0, -inf],
                  [2.0, 2.0, 2.0, 2.0], [-1e9, 1.0, 2.0, 3.0], [2.0, -1e9, -inf, 1.0]])
    t = np.array([1, 2, 2, 0, 1, 0])
    w = np.array([0.0, 2.0, 0.5, 1.5]) if weighted else None
    loss, grad = nk.cross_entropy(on_device(x, layout), cuda.to_device(t), weight=w,
                                  reduction="none", label_smoothing=0.1, return_grad=True)
    want, want_grad = reference(x, t, "none", 0.1, w)
    np.testing.assert_allclose(loss.copy_to_host(), want, rtol=1e-12)
    np.testing.assert_allclose(grad.copy_to_host(), want_grad, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("layout", ["rows", "strided"])
def test_smoothing_sums_about_the_max_without_cancelling(layout):
    """Label smoothing's ``sum_c w_c (lse - x_c)`` taken about the row's max (every
    term >= 0): a target far below the rest (a mask of weight 0 among weighted classes,
    -1e4 among 128 zeros at label_smoothing=1) keeps its loss to float32's rounding,
    where a sum about the target's or the first logit cancelled; a difference past
    float32's largest is inf, as torch's float32 loss, not inf - inf."""
    def run(x, t, w=None, eps=0.1):
        return nk.cross_entropy(on_device(x, layout), cuda.to_device(np.array(t)), weight=w,
                                reduction="none", label_smoothing=eps).copy_to_host()

    def torchs(x, t, w=None, eps=0.1):
        return reference(x, np.array(t), "none", eps, w)[0]

    x = np.array([[0.3, -1.2, -1e9, 0.8, 1.1]])
    w = np.array([1.0, 2.0, 0.0, 1.0, 0.5])
    np.testing.assert_allclose(run(x, [2], w), torchs(x, [2], w), rtol=1e-12)
    x32 = np.zeros((1, 129), np.float32)
    x32[0, 5] = -1e4
    np.testing.assert_allclose(run(x32, [5], eps=1.0), torchs(x32, [5], eps=1.0), rtol=2e-6)
    assert np.isinf(run(np.array([[3e38, -3e38, 0.0]], np.float32), [1]))


def test_ignored_rows_count_nothing_and_a_mean_of_none_is_nan():
    x, t = case(4, 33, ignored=[0, 1, 2, 3])
    loss, grad = nk.cross_entropy(x, t, return_grad=True)
    assert np.isnan(loss) and (grad == 0).all()  # torch: nan, and a zero gradient
    assert nk.cross_entropy(x, t, reduction="sum") == 0
    x, t = case(4, 33)
    t[1] = 7
    got = nk.cross_entropy(x, t, ignore_index=7, reduction="none")
    np.testing.assert_allclose(got, reference(x, np.where(t == 7, -100, t), "none")[0])
    assert got[1] == 0


def test_the_gradient_may_replace_the_logits():
    x, t = case(3, 70)
    ref_loss, ref_grad = reference(x, t)
    host = x.copy()
    loss, grad = nk.cross_entropy(host, t, return_grad=True, grad_out=host)
    assert grad is host
    np.testing.assert_allclose(host, ref_grad, rtol=1e-12, atol=1e-14)
    device = cuda.to_device(x)
    loss, grad = nk.cross_entropy(device, t, return_grad=True, grad_out=device)
    assert grad is device
    np.testing.assert_allclose(device.copy_to_host(), ref_grad, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(loss.copy_to_host(), ref_loss, rtol=1e-12)


@pytest.mark.parametrize("check_target", [False, True])
def test_a_gradient_over_the_logits_replays(check_target):
    """grad_out=logits: the same array twice, which a repeated device call replays,
    its report read or not: the report depends on the targets alone, so a bad target
    met in a replay (after the kernel wrote the gradient over the logits) fails the
    ordinary re-run the same way, and raises the same error. Good calls after it
    replay again."""
    from numbakern.runtime import replay

    replay.forget()
    replayed, unpassed = replay.counts["replayed"], replay.counts["unpassed"]
    for bad in (False, False, False, True, False):
        x, t = case(3, 70)
        ref_loss, ref_grad = reference(x, t)
        device = cuda.to_device(x)
        if bad:
            t[1] = 70
            if check_target:
                with pytest.raises(IndexError, match="target 70 of row 1"):
                    nk.cross_entropy(device, cuda.to_device(t), return_grad=True,
                                     grad_out=device)
                continue
            ref_loss, ref_grad = reference(x, np.where(t == 70, -100, t))
        loss, grad = nk.cross_entropy(device, cuda.to_device(t), return_grad=True,
                                      grad_out=device, check_target=check_target)
        assert grad is device
        np.testing.assert_allclose(device.copy_to_host(), ref_grad, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(loss.copy_to_host(), ref_loss, rtol=1e-12)
    # the bad call: replayed unchecked, run the ordinary way once its check failed
    assert replay.counts["replayed"] - replayed == (3 if check_target else 4)
    assert replay.counts["unpassed"] - unpassed == (1 if check_target else 0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_tensors_of_every_float_dtype(dtype):
    x = torch.randn(6, 50).to(getattr(torch, dtype))
    t = torch.tensor([3, -100, 49, 0, 7, 7])
    loss, grad = nk.cross_entropy(x, t, label_smoothing=0.1, return_grad=True)
    xr = x.clone().requires_grad_(True)
    ref = F.cross_entropy(xr, t, label_smoothing=0.1)
    ref.backward()
    assert loss.dtype == x.dtype and grad.dtype == x.dtype
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(loss.float(), ref.float(), **tol)
    torch.testing.assert_close(grad.float(), xr.grad.float(), **tol)
    out = torch.empty_like(x)
    assert nk.cross_entropy(x, t, return_grad=True, grad_out=out)[1] is out


@pytest.mark.parametrize("classes", [1, 33])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_unbatched_logits_take_a_0d_target_as_torch(classes, reduction):
    x = RNG.standard_normal(classes) * 3
    w = RNG.uniform(0.5, 2.0, classes)
    for t, weight, eps in ((classes - 1, None, 0.0), (0, w, 0.1), (-100, w, 0.0),
                           (-100, None, 0.1)):
        loss, grad = nk.cross_entropy(x, np.array(t), weight=weight, label_smoothing=eps,
                                      reduction=reduction, return_grad=True)
        xr = torch.from_numpy(x).requires_grad_(True)
        ref = F.cross_entropy(xr, torch.tensor(t), reduction=reduction, label_smoothing=eps,
                              weight=None if weight is None else torch.from_numpy(weight))
        ref.backward()
        assert np.shape(loss) == () and np.asarray(loss).dtype == np.float64
        np.testing.assert_allclose(loss, ref.detach().numpy(), rtol=1e-12, atol=1e-14)
        assert grad.shape == (classes,)
        np.testing.assert_allclose(grad, xr.grad.numpy(), rtol=1e-12, atol=1e-14)
    xt = torch.from_numpy(x).float()  # tensors in, tensors out; the gradient in place
    out = torch.empty_like(xt)
    loss, grad = nk.cross_entropy(xt, torch.tensor(0), reduction=reduction,
                                  return_grad=True, grad_out=out)
    assert grad is out and isinstance(loss, torch.Tensor) and loss.shape == ()
    xr = xt.clone().requires_grad_(True)
    ref = F.cross_entropy(xr, torch.tensor(0), reduction=reduction)
    ref.backward()
    torch.testing.assert_close(loss, ref.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, xr.grad, rtol=1e-5, atol=1e-6)
    device = cuda.to_device(x)
    loss, grad = nk.cross_entropy(device, cuda.to_device(np.array(0)), return_grad=True,
                                  grad_out=device, reduction=reduction)
    assert grad is device
    xr = torch.from_numpy(x).requires_grad_(True)
    F.cross_entropy(xr, torch.tensor(0), reduction=reduction).backward()
    np.testing.assert_allclose(device.copy_to_host(), xr.grad.numpy(), rtol=1e-12,
                               atol=1e-14)
    # one row, named alike whether the target is on the host or the device
    for place in (np.asarray, cuda.to_device):
        with pytest.raises(IndexError, match=f"target {classes} of row 0 is out of bounds "
                                             f"for {classes} classes \\(and is not "
                                             f"ignore_index=-100\\)"):
            nk.cross_entropy(place(x), place(np.array(classes)))


def test_bad_input_is_named():
    x, t = case(3, 10)
    with pytest.raises(IndexError, match="target 10 of row 1 is out of bounds for 10"):
        nk.cross_entropy(x, np.array([0, 10, 2]))
    with pytest.raises(IndexError, match="target -3 of row 0 is out of bounds"):
        nk.cross_entropy(x, np.array([-3, 1, 2]))
    with pytest.raises(IndexError, match="target 12 of row 2 is out of bounds for 10"):
        nk.cross_entropy(cuda.to_device(x), cuda.to_device(np.array([0, 1, 12])))
    with pytest.raises(ValueError, match=r"target must have shape \(3,\)"):
        nk.cross_entropy(x, np.array([0, 1]))
    with pytest.raises(TypeError, match="target must hold integer"):
        nk.cross_entropy(x, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match=r"logits must be \(C,\), \(N, C\) or \(N, C, d1"):
        nk.cross_entropy(x[0, 0], t)
    with pytest.raises(ValueError, match=r"target must have shape \(\)"):
        nk.cross_entropy(x[0], t)  # unbatched (C,) logits: a 0-d target
    with pytest.raises(ValueError, match=r"target must have shape \(1, 10\)"):
        nk.cross_entropy(x[None], t)  # K-dimensional logits: (N, d1) targets
    with pytest.raises(ValueError, match="reduction must be one of"):
        nk.cross_entropy(x, t, reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing must lie in"):
        nk.cross_entropy(x, t, label_smoothing=1.5)
    for smoothing in ("0.5", True, None, np.array([0.5])):  # as torch, a number only
        with pytest.raises(TypeError, match="label_smoothing must be a real number"):
            nk.cross_entropy(x, t, label_smoothing=smoothing)
    # a 0-d array of one (torch takes a 0-d tensor) is that number
    assert nk.cross_entropy(x, t, label_smoothing=np.array(0.25)) == \
        nk.cross_entropy(x, t, label_smoothing=0.25)
    with pytest.raises(TypeError, match="logits must be float16"):
        nk.cross_entropy(x > 0, t)
    with pytest.raises(ValueError, match="grad_out is written only with return_grad=True"):
        nk.cross_entropy(x, t, grad_out=x)
    with pytest.raises(ValueError, match="at least one class"):
        nk.cross_entropy(np.zeros((3, 0)), t)
    with pytest.raises(ValueError, match=r"logits must be \(C,\).*got a 0-d array"):
        nk.cross_entropy(np.float32(1.0), np.int64(0))  # torch: no class dimension
    with pytest.raises(TypeError, match="ignore_index must be an int"):
        nk.cross_entropy(x, t, ignore_index=1.5)
    for past in (2**63, -2**63 - 1, 2**70):  # torch's int64_t refuses them too
        with pytest.raises(ValueError, match="ignore_index must fit in int64"):
            nk.cross_entropy(x, t, ignore_index=past)
    for flag in ("yes", 1, [1]):  # as every other flag of the library
        with pytest.raises(TypeError, match="return_grad must be True or False"):
            nk.cross_entropy(x, t, return_grad=flag)
    with pytest.raises(ValueError, match="unknown block strategy ''"):
        nk.cross_entropy(x, t, strategy="")


@pytest.mark.gpu
def test_the_in_place_gradient_allocates_nothing_logits_sized():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((4096, 32000), dtype=cupy.float32)
    t = cupy.random.randint(0, 32000, 4096)
    nk.cross_entropy(x, t, return_grad=True, grad_out=x)  # compile first
    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    pool.free_all_blocks()
    before = pool.total_bytes()
    nk.cross_entropy(x, t, return_grad=True, grad_out=x)
    cupy.cuda.Device().synchronize()
    assert pool.total_bytes() - before < x.nbytes // 10


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_a_repeated_device_call_replays_and_still_checks_its_targets(reduction):
    """The second call of a layout replays the recorded launches (new logits and
    targets each time, so every address is patched in), then reads the kernel's
    report: an out-of-bounds device target still raises after a replay, and the next
    call is right again (the report's slots are set by a launch, not once)."""
    from numbakern.runtime import replay

    replay.forget()
    recorded, replayed = replay.counts["recorded"], replay.counts["replayed"]
    unpassed = replay.counts["unpassed"]
    for _ in range(3):
        x, t = case(6, 40, ignored=[1])
        loss, grad = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t),
                                      reduction=reduction, return_grad=True)
        ref_loss, ref_grad = reference(x, t, reduction)
        np.testing.assert_allclose(loss.copy_to_host(), ref_loss, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grad.copy_to_host(), ref_grad, rtol=1e-12, atol=1e-14)
    assert (replay.counts["recorded"], replay.counts["replayed"]) == \
        (recorded + 1, replayed + 2)
    t[3] = 40
    with pytest.raises(IndexError, match="target 40 of row 3 is out of bounds for 40"):
        nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), reduction=reduction,
                         return_grad=True)
    # the replay's check failed: the call ran the ordinary way, which raised
    assert (replay.counts["replayed"], replay.counts["unpassed"]) == (replayed + 2,
                                                                      unpassed + 1)
    t[3] = 7
    loss, _ = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), reduction=reduction,
                               return_grad=True)
    np.testing.assert_allclose(loss.copy_to_host(), reference(x, t, reduction)[0],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_unchecked_device_targets_read_no_report_and_count_a_bad_row_as_ignored(
        reduction, monkeypatch):
    """check_target=False: no report read, and a device target out of bounds raises
    nothing: its row is ignored, as torch gives for that row's target set to
    ignore_index."""
    from numbakern.api import losses

    reads = []
    real_report = losses._report
    monkeypatch.setattr(losses, "_report", lambda *a: reads.append(1) or real_report(*a))
    x, t = case(6, 40, ignored=[1])
    for bad in (40, -3, 7):
        t[3] = bad
        got, grad = nk.cross_entropy(cuda.to_device(x), cuda.to_device(t),
                                     reduction=reduction, return_grad=True,
                                     check_target=False)
        ref_loss, ref_grad = reference(x, np.where(t == bad, -100, t) if bad != 7 else t,
                                       reduction)
        np.testing.assert_allclose(got.copy_to_host(), ref_loss, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grad.copy_to_host(), ref_grad, rtol=1e-12, atol=1e-14)
    assert reads == []
    nk.cross_entropy(cuda.to_device(x), cuda.to_device(t), reduction=reduction)
    assert reads == [1]  # the checked call reads it
    t[3] = 40
    with pytest.raises(IndexError, match="target 40 of row 3"):  # host targets: checked
        nk.cross_entropy(x, t, check_target=False)
    with pytest.raises(TypeError, match="check_target must be True or False"):
        nk.cross_entropy(x, t, check_target=None)


def test_a_0d_tensor_label_smoothing_as_torch():
    """torch takes a 0-d tensor for ``label_smoothing`` (a float parameter); so does
    this one (the tensor reaches the check as a 0-d array)."""
    torch = pytest.importorskip("torch")
    x = torch.tensor(case(4, 5)[0])
    t = torch.tensor([0, 1, 2, 3])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):  # bfloat16: 0.10009765625
        smoothing = torch.tensor(0.1, dtype=dtype)
        got = nk.cross_entropy(x, t, label_smoothing=smoothing)
        want = torch.nn.functional.cross_entropy(x, t, label_smoothing=smoothing)
        torch.testing.assert_close(got, want)
    scale = torch.tensor(0.5, dtype=torch.bfloat16)  # and softmax's scale, a number too
    torch.testing.assert_close(nk.softmax(x, scale=scale), torch.softmax(x * 0.5, -1))
    meta = torch.tensor(0.1, device="meta")  # a device numbakern does not read: named
    with pytest.raises(ValueError, match="label_smoothing is on device meta"):
        nk.cross_entropy(x, t, label_smoothing=meta)
    with pytest.raises(ValueError, match="scale is on device meta"):
        nk.softmax(x, scale=meta)


def test_torch_cpu_logits_with_device_targets_are_checked():
    # the call of a CPU tensor hands its results back as CPU tensors: the report too
    x, t = case(4, 6)
    loss = nk.cross_entropy(torch.from_numpy(x), cuda.to_device(t))
    assert isinstance(loss, torch.Tensor)
    np.testing.assert_allclose(loss.numpy(), reference(x, t)[0], rtol=1e-12)
    t[2] = 6
    with pytest.raises(IndexError, match="target 6 of row 2 is out of bounds for 6"):
        nk.cross_entropy(torch.from_numpy(x), cuda.to_device(t))
