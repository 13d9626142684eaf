"""cross_entropy's weight= and K-dimensional logits on a real GPU against torch's on
the GPU (skipped under the simulator): the device views each sample's rows are read
through, the weighted mean summed on the device, bfloat16 and float32 tensors, the
gradient written over the logits."""

import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype, tol", [("float32", 2e-5), ("bfloat16", 2e-2)])
@pytest.mark.parametrize("shape", [(512, 50257), (8, 21, 64, 64), (2, 19, 3, 5, 7)])
def test_weighted_and_k_dimensional_match_torch(torch, dtype, tol, shape):
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(0)
    N, C = shape[:2]
    x = torch.randn(shape, device="cuda", generator=g).to(getattr(torch, dtype))
    t = torch.randint(0, C, (N, *shape[2:]), device="cuda", generator=g)
    t.view(-1)[::7] = -100
    w = torch.rand(C, device="cuda", generator=g).to(x.dtype)
    for reduction in ("mean", "none"):
        for eps in (0.0, 0.1):
            ref_x = x.float().clone().requires_grad_(True)  # never x itself (float32)
            ref = F.cross_entropy(ref_x, t, weight=w.float(), reduction=reduction,
                                  label_smoothing=eps)
            ref.sum().backward()
            work = x.clone()
            loss, grad = nk.cross_entropy(work, t, weight=w, reduction=reduction,
                                          label_smoothing=eps, return_grad=True,
                                          grad_out=work)
            assert grad.data_ptr() == work.data_ptr() and grad.shape == x.shape
            torch.testing.assert_close(loss.float(), ref.detach(), rtol=tol, atol=tol)
            torch.testing.assert_close(grad.float(), ref_x.grad, rtol=tol, atol=tol * 1e-2)


@pytest.mark.parametrize("dtype, tol", [("float32", 2e-5), ("bfloat16", 2e-2)])
def test_unbatched_logits_match_torch(torch, dtype, tol):
    """torch's (C,) logits with a 0-d target: one row viewed in place on the device
    (a strided view, the target's too), the gradient written over the logits."""
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(50257, device="cuda", generator=g).to(getattr(torch, dtype))
    t = torch.tensor(123, device="cuda")
    for reduction in ("mean", "sum", "none"):
        ref_x = x.float().clone().requires_grad_(True)
        ref = F.cross_entropy(ref_x, t, reduction=reduction, label_smoothing=0.1)
        ref.backward()
        work = x.clone()
        loss, grad = nk.cross_entropy(work, t, reduction=reduction, label_smoothing=0.1,
                                      return_grad=True, grad_out=work)
        assert loss.shape == () and loss.is_cuda and grad is work
        torch.testing.assert_close(loss.float(), ref.detach(), rtol=tol, atol=tol)
        torch.testing.assert_close(grad.float(), ref_x.grad, rtol=tol, atol=tol * 1e-2)
        loss, grad = nk.cross_entropy(x, t, reduction=reduction, return_grad=True)
        assert grad.shape == x.shape and grad.dtype == x.dtype


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_unchecked_targets_replay_with_no_report_read(torch, reduction):
    """check_target=False on CUDA tensors: repeated calls replay with nothing read back
    (the replay counter moves, no refusal is recorded), and an out-of-bounds target's
    row counts as ignored, as torch gives for ignore_index there."""
    from numbakern.runtime import replay

    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(300, 1000, device="cuda", generator=g)
    t = torch.randint(0, 1000, (300,), device="cuda", generator=g)
    t[7], t[123] = 1000, -5
    ref = F.cross_entropy(x, torch.where((t < 0) | (t >= 1000), -100, t), reduction=reduction)
    before = replay.counts["replayed"]
    for _ in range(3):
        loss = nk.cross_entropy(x, t, reduction=reduction, check_target=False)
        torch.testing.assert_close(loss, ref, rtol=2e-5, atol=2e-5)
    assert replay.counts["replayed"] - before >= 2
    with pytest.raises(IndexError, match="target 1000 of row 7"):
        nk.cross_entropy(x, t, reduction=reduction)


def test_checked_targets_replay_and_a_bad_one_written_just_before_still_raises(torch):
    """The report on device targets is a check that replays (``views.checked_words``):
    on a side torch stream, repeated calls replay with the right loss, and a bad target
    written by a torch op queued on that stream right before the next call is read
    after that op, and raises."""
    from numbakern.runtime import replay

    F = torch.nn.functional
    x = torch.randn(300, 1000, device="cuda")
    t = torch.randint(0, 1000, (300,), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    before = replay.counts["replayed"]
    with torch.cuda.stream(side):
        for _ in range(3):
            loss = nk.cross_entropy(x, t)
            torch.testing.assert_close(loss, F.cross_entropy(x, t), rtol=2e-5, atol=2e-5)
        assert replay.counts["replayed"] - before >= 2
        torch.cuda._sleep(10_000_000)  # the write lands well after the launches queue
        t[123] = 1000
        with pytest.raises(IndexError, match="target 1000 of row 123"):
            nk.cross_entropy(x, t)


def test_weights_written_on_a_side_stream_are_read_after_that_work(torch):
    """weight= made by torch on a non-blocking side stream, the call on that stream:
    the weights are read after the work that wrote them, not on the legacy stream."""
    F = torch.nn.functional
    x = torch.randn(256, 5000, device="cuda")
    t = torch.randint(0, 5000, (256,), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        w = torch.rand(5000, device="cuda").pow(3).add(0.5)  # queued work, then read
        loss = nk.cross_entropy(x, t, weight=w)
    side.synchronize()
    torch.testing.assert_close(loss, F.cross_entropy(x, t, weight=w), rtol=2e-5, atol=2e-5)


def test_a_0d_cuda_tensor_is_a_number_as_torch_takes_one(torch):
    """label_smoothing= and softmax's scale= as 0-d CUDA tensors: their values, as
    torch's float parameters read them (not an array the checks refuse)."""
    x = torch.randn(4, 5, device="cuda")
    t = torch.tensor([0, 1, 2, 3], device="cuda")
    for dtype in (torch.float32, torch.bfloat16):
        eps = torch.tensor(0.1, device="cuda", dtype=dtype)
        want = torch.nn.functional.cross_entropy(x, t, label_smoothing=eps.item())
        torch.testing.assert_close(nk.cross_entropy(x, t, label_smoothing=eps), want)
    scale = torch.tensor(0.5, device="cuda")
    torch.testing.assert_close(nk.softmax(x, scale=scale), torch.softmax(x * 0.5, -1))
