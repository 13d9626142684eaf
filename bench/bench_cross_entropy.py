"""Fused cross-entropy forward + backward beside torch eager, on torch tensors.

numbakern: one call, the loss and the gradient, timed into a preallocated gradient
(``grad_out=g``: the same bytes as over the logits, whose values would otherwise be
gradients from the second call on), its memory measured written over the logits
(``grad_out=logits``). torch: ``F.cross_entropy`` then ``backward()`` (logits that
require grad; the gradient is a second logits-sized tensor), eager and through
``torch.compile``. GB/s count the bytes the
fused kernel cannot avoid: two reads of the logits and one write of the gradient
(3 x nbytes). ``extra_info["peak_extra_bytes"]``: device memory beyond the inputs at
the call's peak (torch's allocator statistics for torch; CuPy's pool, where
numbakern's temporaries live, for numbakern).

    pytest bench/bench_cross_entropy.py --benchmark-json=ce.json

Each (loss, gradient) is checked before timing against float64 ones (torch's
log_softmax of the widened logits, a block of rows at a time): within 1e-5 relative for
float32 (exp and a row sum in float32: a few 1e-6 at most) and 1e-2 for numbakern's
bfloat16 (half a bfloat16 ulp is at most 2^-8 of the value). torch's bfloat16 is held
within 7e-2: autograd keeps the log-probabilities in bfloat16, |log p| up to about 20
to half an ulp of 1/8, so ``p = exp(log p)`` within e^(1/16) - 1 = 6.5%.
"""

import pytest

import numbakern as nk

CASES = [((16384, 50257), "float32"), ((8192, 128256), "bfloat16")]
RTOL = {"float32": 1e-5, "bfloat16": 1e-2}  # the module doc says why


def _label(case):
    (n, c), dtype = case
    return f"{n}x{c}-{dtype}"


@pytest.fixture(scope="module", params=CASES, ids=_label)
def logits(request, cp, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    torch = torch_cuda
    (n, c), dtype = request.param
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn((n, c), device="cuda", generator=g).to(getattr(torch, dtype))
    t = torch.randint(0, c, (n,), device="cuda", generator=g)
    return x, t


@pytest.fixture(scope="module")
def expected(logits, torch_cuda):
    """The mean loss (float64) and the gradient (float32, from float64), by blocks of
    1024 rows: ``-log p[t]`` averaged; ``(p - onehot(t)) / N``."""
    torch = torch_cuda
    x, t = logits
    loss = torch.zeros((), dtype=torch.float64, device="cuda")
    grad = torch.empty_like(x, dtype=torch.float32)
    for i in range(0, len(x), 1024):
        logp = torch.log_softmax(x[i:i + 1024].double(), 1)
        picked = (torch.arange(len(logp), device="cuda"), t[i:i + 1024])
        loss -= logp[picked].sum()
        p = logp.exp_()
        p[picked] -= 1
        grad[i:i + 1024] = p / len(x)
    return loss / len(x), grad


def _check(verify, expected, x, provider):
    """The check of (loss, gradient): the module doc's bound."""
    dtype = str(x.dtype).removeprefix("torch.")
    rtol = 7e-2 if dtype == "bfloat16" and provider != "numbakern" else RTOL[dtype]
    return verify.agrees(expected, rtol=rtol)


def _info(x, provider):
    return dict(op="cross_entropy fwd+bwd", provider=provider,
                shape=f"{x.shape[0]}x{x.shape[1]}", dtype=str(x.dtype).removeprefix("torch."))


def test_numbakern(logits, measure, cp, verify, expected):
    x, t = logits
    work = x.clone()
    pool = cp.get_default_memory_pool()
    nk.cross_entropy(work, t, return_grad=True, grad_out=work)
    cp.cuda.Device().synchronize()
    pool.free_all_blocks()
    before = pool.total_bytes()
    nk.cross_entropy(work, t, return_grad=True, grad_out=work)
    cp.cuda.Device().synchronize()
    extra = pool.total_bytes() - before
    # into work's memory (now a gradient), reading x's logits every call
    measure(lambda: nk.cross_entropy(x, t, return_grad=True, grad_out=work),
            3 * x.nbytes, check=_check(verify, expected, x, "numbakern"),
            peak_extra_bytes=extra, **_info(x, "numbakern"))


def _torch_step(torch, x, t, loss_fn, measure, provider, check):
    """Time ``loss_fn`` + ``backward()`` on a leaf copy of ``x``, recording torch's peak
    extra memory of one step; ``check`` gets (loss, gradient)."""
    leaf = x.clone().requires_grad_(True)

    def step():
        leaf.grad = None
        loss = loss_fn(leaf, t)
        loss.backward()
        return loss

    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    measure(step, 3 * x.nbytes, check=lambda loss: check((loss, leaf.grad)),
            peak_extra_bytes=extra, **_info(x, provider))


def test_torch_eager(logits, measure, torch_cuda, verify, expected):
    x, t = logits
    _torch_step(torch_cuda, x, t, torch_cuda.nn.functional.cross_entropy, measure, "torch",
                _check(verify, expected, x, "torch"))


def test_torch_compile(logits, measure, torch_cuda, verify, expected):
    """torch.compile of the loss (Inductor fuses the forward, AOTAutograd the
    backward); compiled by the first step, before timing, for this case alone (a reset
    Dynamo, static shapes: a second shape through the same function would compile
    generic dynamic-shape kernels)."""
    x, t = logits
    torch_cuda._dynamo.reset()
    loss = torch_cuda.compile(torch_cuda.nn.functional.cross_entropy, dynamic=False)
    _torch_step(torch_cuda, x, t, loss, measure, "torch.compile",
                _check(verify, expected, x, "torch.compile"))
