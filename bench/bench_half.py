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

Each result is checked before timing. The softmax family against the same function in
float32 (torch's, from the same half inputs), within 1e-3 relative for float16 and 1e-2
for bfloat16 (rounding to the dtype costs half an ulp: at most 2^-11 and 2^-8 of the
value), plus 2^-24 for float16 (its subnormal step: a long row's probabilities fall
below 6e-5); the backward passes also within the dtype's unit roundoff (2^-11, 2^-8) of
the magnitudes rounded on the way (a row sum may cancel, and torch rounds its
intermediates to the dtype: ``bench/bench_softmax.py``'s float32 bound, 1e-5 of them,
fails torch's results, bench/NOTES.md). The masked softmax a batch at a time (the scores
are 4 GiB). Sums, means and cumsums read sparse integers (-1, 0 and 1, one element in 32
not 0; their speed does not depend on the values): every partial sum along a row is an
integer of at most a few hundred, exact even in bfloat16 (so torch's cumsum, which
accumulates in the tensor's dtype, pytorch#180150, is exact too), and the whole sum's
are exact in float32, so each result must equal the float64 one rounded once to the
dtype. max and argmax read normals: max equal to the float64 max, argmax to
``cupy.argmax`` (the first of equal maxima, as torch's).

    pytest bench/bench_half.py --benchmark-json=half.json
    pytest bench/bench_half.py -k masked --benchmark-json=masked.json
    pytest bench/bench_half.py -k reduction --benchmark-json=half_reductions.json
"""

import warnings

import checks  # bench/checks.py, beside this file (conftest.py puts it on sys.path)
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
    # a mean of 1: the row sums of the backward passes do not cancel, so the check's
    # bound (the magnitudes summed) stays near the result and a lost tile shows
    dy = (torch.randn(shape, device="cuda", generator=g) + 1).to(x.dtype)
    return x, torch.softmax(x, 1), torch.log_softmax(x, 1), dy


def _info(x, op, provider):
    return dict(op=op, provider=provider, shape=_label(tuple(x.shape)),
                dtype=str(x.dtype).replace("torch.", ""))


def _tol(x):
    """(rtol, atol) of a result of ``x``'s dtype (the module doc's)."""
    return {"torch.float16": (1e-3, 2.0**-24), "torch.bfloat16": (1e-2, 0.0)}[str(x.dtype)]


def _forward_check(verify, torch, x, op):
    """The check of ``op`` (softmax or log_softmax) of ``x``'s rows."""
    rtol, atol = _tol(x)
    return verify.agrees(getattr(torch, op)(x.float(), 1), rtol=rtol, atol=atol)


def _backward_check(verify, torch, op, out, dy):
    """The check of ``op``'s ``dx`` from the forward output ``out`` and ``dy``: in
    float32, within the dtype's bound plus its unit roundoff of the magnitudes rounded
    on the way (the module doc)."""
    reference = checks.softmax_backward if op == "softmax_backward" else \
        checks.log_softmax_backward
    want, magnitudes = reference(torch, out.float(), dy.float())
    rtol, atol = _tol(out)
    roundoff = {"torch.float16": 2.0**-11, "torch.bfloat16": 2.0**-8}[str(out.dtype)]
    return verify.agrees(want, rtol=rtol, atol=roundoff * magnitudes + atol)


@pytest.fixture(autouse=True)
def _quiet_copies():
    """A CopyWarning does not stop the softmax figures (the reduction figures turn
    it into an error: ``_in_place``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        yield


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_numbakern_forward(rows, op, measure, verify, torch_cuda):
    x = rows[0]
    fn = getattr(nk, op)
    measure(lambda: fn(x, axis=1), 2 * x.nbytes,
            check=_forward_check(verify, torch_cuda, x, op), **_info(x, op, "numbakern"))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_torch_forward(rows, op, measure, verify, torch_cuda):
    x = rows[0]
    fn = getattr(torch_cuda, op)
    measure(lambda: fn(x, 1), 2 * x.nbytes, check=_forward_check(verify, torch_cuda, x, op),
            **_info(x, op, "torch"))


@pytest.mark.parametrize("op", ["softmax_backward", "log_softmax_backward"])
def test_numbakern_backward(rows, op, measure, verify, torch_cuda):
    _, y, log_y, dy = rows
    out = y if op == "softmax_backward" else log_y
    fn = getattr(nk, op)
    measure(lambda: fn(out, dy, axis=1), 3 * y.nbytes,
            check=_backward_check(verify, torch_cuda, op, out, dy),
            **_info(y, op, "numbakern"))


@pytest.mark.parametrize("op", ["softmax_backward", "log_softmax_backward"])
def test_torch_backward(rows, op, measure, verify, torch_cuda):
    _, y, log_y, dy = rows
    if op == "softmax_backward":
        fn = lambda: torch_cuda._softmax_backward_data(dy, y, 1, y.dtype)  # noqa: E731
    else:
        fn = lambda: torch_cuda._log_softmax_backward_data(dy, log_y, 1, y.dtype)  # noqa: E731
    out = y if op == "softmax_backward" else log_y
    measure(fn, 3 * y.nbytes, check=_backward_check(verify, torch_cuda, op, out, dy),
            **_info(y, op, "torch"))


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


def _masked_check(verify, torch, x, keep):
    """The check of a masked softmax of the scores: torch's in float32, a batch at a
    time, within float16's bound."""
    rtol, atol = _tol(x)

    def check(got):
        for b in range(len(x)):
            scaled = (x[b].float() * SCALE).masked_fill(~keep[0], -float("inf"))
            verify.close(got[b], torch.softmax(scaled, -1), rtol, atol)

    return check


@pytest.mark.parametrize("how", ["causal", "mask"])
def test_numbakern_masked_softmax(scores, how, measure, verify, torch_cuda):
    x, keep = scores
    kw = dict(causal=True) if how == "causal" else dict(mask=keep)
    measure(lambda: nk.softmax(x, scale=SCALE, **kw), 2 * x.nbytes,
            check=_masked_check(verify, torch_cuda, x, keep),
            **_info(x, f"masked_softmax/{how}", "numbakern"))


def test_torch_masked_softmax(scores, measure, verify, torch_cuda):
    """torch eager as an attention without a flash kernel writes it."""
    x, keep = scores
    measure(lambda: torch_cuda.softmax((x * SCALE).masked_fill(~keep, -float("inf")), -1),
            2 * x.nbytes, check=_masked_check(verify, torch_cuda, x, keep),
            **_info(x, "masked_softmax", "torch"))


def test_torch_compile_masked_softmax(scores, measure, verify, torch_cuda):
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
            check=_masked_check(verify, torch, x, keep),
            **_info(x, "masked_softmax", "torch.compile"))


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
ON_NORMALS = ("max/rows", "argmax/rows")  # the others read sparse integers (module doc)


@pytest.fixture(scope="module", params=DTYPES)
def halves(request, cp, torch_cuda):
    """Two (16384, 8192) CUDA tensors of one half dtype: normals, and sparse integers
    (-1 and 1 one in 64 each, else 0)."""
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    torch = torch_cuda
    dtype = getattr(torch, request.param)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(REDUCE_SHAPE, device="cuda", generator=g)
    k = torch.randint(0, 64, REDUCE_SHAPE, device="cuda", generator=g)
    return x.to(dtype), ((k == 0).float() - (k == 1).float()).to(dtype)


def _reduced(halves, op, verify, torch):
    """``op``'s input (module doc) and the check of its result: argmax equal to
    ``cupy.argmax``; the others to the float64 result rounded once to the dtype."""
    x = halves[0] if op in ON_NORMALS else halves[1]
    if op == "argmax/rows":
        return x, verify.agrees(verify.array(x).argmax(axis=1), same_dtype=True)
    return x, verify.agrees(REDUCTIONS[op][1](torch, x.double()).to(x.dtype), same_dtype=True)


def _in_place(fn):
    """``fn`` with a CopyWarning as an error: the figures are of in-place reads."""

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("error", nk.CopyWarning)
            return fn()

    return run


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_numbakern_reduction(halves, op, measure, verify, torch_cuda):
    call, _, extra = REDUCTIONS[op]
    x, check = _reduced(halves, op, verify, torch_cuda)
    measure(_in_place(lambda: call(x)), (1 + extra) * x.nbytes, check=check,
            **_info(x, op, "numbakern"))


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_torch_reduction(halves, op, measure, verify, torch_cuda):
    _, call, extra = REDUCTIONS[op]
    x, check = _reduced(halves, op, verify, torch_cuda)
    measure(lambda: call(torch_cuda, x), (1 + extra) * x.nbytes, check=check,
            **_info(x, op, "torch"))
