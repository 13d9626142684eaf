"""The softmax family in float16 and bfloat16 on PyTorch CUDA tensors, beside torch.

The inputs are torch tensors, as a model has them: numbakern's figures include its
DLPack hand-over (and, for bfloat16, the float32 working copy it makes and the
rounding back). GB/s count the bytes a row kernel cannot avoid moving in the
tensor's own dtype: forward 2 x nbytes, backward 3 x nbytes. Target: 1.2x
``torch.softmax`` and friends at each shape.

    pytest bench/bench_half.py --benchmark-json=half.json
"""

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
    """bfloat16's CopyWarning is expected here; the figures include the copy."""
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
    assert np.isfinite(nk.sum(x).float().item())
