"""The softmax family in float16 and bfloat16 on PyTorch CUDA tensors, beside torch.

The inputs are torch tensors, as a model has them: numbakern's figures include its
DLPack hand-over (bfloat16 is read and written as its bits, with no working
copy). GB/s count the bytes a row kernel cannot avoid moving in the
tensor's own dtype: forward 2 x nbytes, backward 3 x nbytes. Target: 1.2x
``torch.softmax`` and friends at each shape. Masked softmax (issue 20): float16
attention scores (32, 16, 2048, 2048), causal and through a broadcast (1, 1, Q, K)
mask, scale 1/8, beside torch eager's ``softmax(masked_fill(...))`` and the same
through ``torch.compile``; target 1.2x.

Reductions and scans (issue 17): float16 and bfloat16 tensors of (16384, 8192)
(256 MiB) through sum (whole and per row), max, argmax, mean and cumsum per row,
beside torch's same op; bfloat16 is read in place (each element widened as it is
loaded; a ``CopyWarning`` there fails the run). GB/s count the input once (and the
output once for cumsum).

    pytest bench/bench_half.py --benchmark-json=half.json
    pytest bench/bench_half.py -k masked --benchmark-json=masked.json
    pytest bench/bench_half.py -k reduction --benchmark-json=half_reductions.json
"""

import functools
import warnings

import numpy as np
import pytest

import numbakern as nk

SHAPES = [(32768, 4096), (4096, 32768), (8192, 50257)]
DTYPES = ["float16", "bfloat16"]


def _label(shape):
    return f"{shape[0]}x{shape[1]}"


@pytest.fixture(scope="module", params=[(s, d) for s in SHAPES for d in DTYPES],
                ids=lambda p: f"{_label(p[0])}-{p[1]}")
def rows(request, cp, torch_cuda):
    """(x, y = softmax(x), log_softmax(x), dy) as CUDA tensors of one half dtype."""
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    torch = torch_cuda
    shape, dtype = request.param
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(shape, device="cuda", generator=g).to(getattr(torch, dtype))
    dy = torch.randn(shape, device="cuda", generator=g).to(x.dtype)
    return x, torch.softmax(x, 1), torch.log_softmax(x, 1), dy


def _info(x, op, provider):
    return dict(op=op, provider=provider, shape=_label(tuple(x.shape)),
                dtype=str(x.dtype).replace("torch.", ""))


@pytest.fixture(autouse=True)
def _quiet_copies():
    """A CopyWarning does not stop the softmax figures (the reduction figures turn
    it into an error: ``_in_place``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        yield


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_numbakern_forward(rows, op, measure):
    x = rows[0]
    fn = getattr(nk, op)
    measure(lambda: fn(x, axis=1), 2 * x.nbytes, **_info(x, op, "numbakern"))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_torch_forward(rows, op, measure, torch_cuda):
    x = rows[0]
    fn = getattr(torch_cuda, op)
    measure(lambda: fn(x, 1), 2 * x.nbytes, **_info(x, op, "torch"))


@pytest.mark.parametrize("op", ["softmax_backward", "log_softmax_backward"])
def test_numbakern_backward(rows, op, measure):
    _, y, log_y, dy = rows
    out = y if op == "softmax_backward" else log_y
    fn = getattr(nk, op)
    measure(lambda: fn(out, dy, axis=1), 3 * y.nbytes, **_info(y, op, "numbakern"))


@pytest.mark.parametrize("op", ["softmax_backward", "log_softmax_backward"])
def test_torch_backward(rows, op, measure, torch_cuda):
    _, y, log_y, dy = rows
    if op == "softmax_backward":
        fn = lambda: torch_cuda._softmax_backward_data(dy, y, 1, y.dtype)  # noqa: E731
    else:
        fn = lambda: torch_cuda._log_softmax_backward_data(dy, log_y, 1, y.dtype)  # noqa: E731
    measure(fn, 3 * y.nbytes, **_info(y, op, "torch"))


def test_results_agree(rows):
    """The timed calls compute the same thing (checked once per shape and dtype)."""
    x, y, log_y, dy = rows
    import torch

    tol = dict(rtol=2e-2, atol=2e-3)
    torch.testing.assert_close(nk.softmax(x, axis=1).float(), y.float(), **tol)
    torch.testing.assert_close(nk.log_softmax(x, axis=1).float(), log_y.float(),
                               rtol=2e-2, atol=5e-2)
    got = nk.softmax_backward(y, dy, axis=1).float()
    ref = torch._softmax_backward_data(dy, y, 1, y.dtype).float()
    torch.testing.assert_close(got, ref, rtol=5e-2, atol=5e-3)
    got = nk.log_softmax_backward(log_y, dy, axis=1).float()
    ref = torch._log_softmax_backward_data(dy, log_y, 1, y.dtype).float()
    torch.testing.assert_close(got, ref, rtol=5e-2, atol=5e-2)
    assert np.isfinite(nk.sum(x).float().item())


# --- masked softmax: attention scores, causal ---------------------------------------------

ATTENTION = (32, 16, 2048, 2048)  # batch x heads x queries x keys: 4 GiB of float16
SCALE = 0.125  # 1/sqrt(64)


@pytest.fixture(scope="module")
def scores(cp, torch_cuda):
    """(x, the causal mask as a (1, 1, Q, K) bool tensor): float16 CUDA tensors."""
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(ATTENTION, device="cuda", generator=g, dtype=torch.float16)
    keep = torch.ones(ATTENTION[-2:], dtype=torch.bool, device="cuda").tril()[None, None]
    return x, keep


@pytest.mark.parametrize("how", ["causal", "mask"])
def test_numbakern_masked_softmax(scores, how, measure):
    x, keep = scores
    kw = dict(causal=True) if how == "causal" else dict(mask=keep)
    measure(lambda: nk.softmax(x, scale=SCALE, **kw), 2 * x.nbytes,
            **_info(x, f"masked_softmax/{how}", "numbakern"))


def test_torch_masked_softmax(scores, measure, torch_cuda):
    """torch eager as an attention without a flash kernel writes it."""
    x, keep = scores
    measure(lambda: torch_cuda.softmax((x * SCALE).masked_fill(~keep, -float("inf")), -1),
            2 * x.nbytes, **_info(x, "masked_softmax", "torch"))


def test_torch_compile_masked_softmax(scores, measure, torch_cuda):
    """The same expression through torch.compile (Inductor fuses scale, mask and
    softmax into one kernel); compiled once before timing, for this shape alone (a
    reset Dynamo, static shapes: the nested function's code object is every case's,
    and a second shape through it would compile generic dynamic-shape kernels)."""
    x, keep = scores
    torch = torch_cuda
    torch._dynamo.reset()

    @torch.compile(dynamic=False)
    def masked(x, keep):
        return torch.softmax((x * SCALE).masked_fill(~keep, -float("inf")), -1)

    masked(x, keep)
    measure(lambda: masked(x, keep), 2 * x.nbytes,
            **_info(x, "masked_softmax", "torch.compile"))


def test_masked_results_agree(scores, torch_cuda):
    x, keep = scores
    want = torch_cuda.softmax((x[:2].float() * SCALE).masked_fill(~keep, -float("inf")), -1)
    for kw in (dict(causal=True), dict(mask=keep)):
        got = nk.softmax(x, scale=SCALE, **kw)[:2].float()
        torch_cuda.testing.assert_close(got, want, rtol=2e-3, atol=1e-4)


# --- reductions and scans of half-precision tensors, read in place ---------------------

REDUCE_SHAPE = (16384, 8192)
# op: (numbakern's call, torch's call, bytes moved beyond reading the input once)
REDUCTIONS = {
    "sum": (lambda x: nk.sum(x), lambda t, x: t.sum(x), 0),
    "sum/rows": (lambda x: nk.sum(x, axis=1), lambda t, x: t.sum(x, 1), 0),
    "max/rows": (lambda x: nk.max(x, axis=1), lambda t, x: t.amax(x, 1), 0),
    "argmax/rows": (lambda x: nk.argmax(x, axis=1), lambda t, x: t.argmax(x, 1), 0),
    "mean/rows": (lambda x: nk.mean(x, axis=1), lambda t, x: t.mean(x, 1), 0),
    "cumsum/rows": (lambda x: nk.cumsum(x, axis=1), lambda t, x: t.cumsum(x, 1), 1),
}


@pytest.fixture(scope="module", params=DTYPES)
def halves(request, cp, torch_cuda):
    """A (16384, 8192) CUDA tensor of one half dtype."""
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    g = torch_cuda.Generator(device="cuda").manual_seed(0)
    x = torch_cuda.randn(REDUCE_SHAPE, device="cuda", generator=g)
    return x.to(getattr(torch_cuda, request.param))


def _in_place(fn):
    """``fn`` with a CopyWarning as an error: the figures are of in-place reads."""

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("error", nk.CopyWarning)
            return fn()

    return run


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_numbakern_reduction(halves, op, measure):
    call, _, extra = REDUCTIONS[op]
    measure(_in_place(lambda: call(halves)), (1 + extra) * halves.nbytes,
            **_info(halves, op, "numbakern"))


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_torch_reduction(halves, op, measure, torch_cuda):
    _, call, extra = REDUCTIONS[op]
    measure(lambda: call(torch_cuda, halves), (1 + extra) * halves.nbytes,
            **_info(halves, op, "torch"))


def test_reduction_results_agree(halves, torch_cuda):
    """The timed calls compute the same thing, in the input's dtype (argmax: int64)."""
    x64 = halves[:64].double()
    for op, (call, theirs, _) in REDUCTIONS.items():
        got = _in_place(functools.partial(call, halves[:64]))()
        want = theirs(torch_cuda, x64)
        if op == "argmax/rows":
            assert got.dtype == torch_cuda.int64 and torch_cuda.equal(got, want)
            continue
        assert got.dtype == halves.dtype, op
        torch_cuda.testing.assert_close(got.double(), want, rtol=1e-2, atol=2e-2 * (
            64 * 8192) ** 0.5 if op == "sum" else 0.25 if op.startswith("cumsum") else 1e-2)
