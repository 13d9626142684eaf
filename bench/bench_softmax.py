"""Row softmax, log-softmax and their backward passes, float32, beside PyTorch and CuPy.

GB/s count the bytes a row-wise kernel cannot avoid moving: forward, one read of the
input and one write of the output (2 x nbytes); backward, reads of ``y`` and ``dy``
and a write of ``dx`` (3 x nbytes). ``extra_info`` records the plan numbakern chose
(layout, threads, elements per thread, normalizer). Target (issue 5): 3 TB/s or more
at (32768, 4096) forward, on an H200.

    pytest bench/bench_softmax.py --benchmark-json=softmax.json

Skips without a GPU or CuPy; the PyTorch cases skip without PyTorch.

Each result is checked before timing against the same function computed in float64
(a block of rows at a time): softmax within 1e-5 relative and log_softmax within 1e-5
relative plus 1e-6 (float32's exp and division are within an ulp or two; the row's
sum in float32 within its chain of additions times eps32, a few 1e-6 at most). The
backward passes subtract a row sum, so an element may cancel to nothing: each is held
within 1e-5 of the magnitudes rounded on its way, ``y * (|dy| + sum|y * dy|)`` for
softmax and ``|dy| + exp(y) * sum|dy|`` for log-softmax (a float32 sum of a row is within
chain x eps32 of the sum of its terms' magnitudes: 1e-5 holds chains of 80 additions in
the worst case; random roundings grow as the square root).
"""

import importlib

import checks  # bench/checks.py, beside this file (conftest.py puts it on sys.path)
import numpy as np
import pytest

import numbakern as nk

softmax_module = importlib.import_module("numbakern.api.softmax")

SHAPES = [(1823, 781), (32768, 4096), (4096, 32768), (65536, 128), (8192, 50257)]
TARGET = (32768, 4096)
PAIRS = [(m, s) for m in ("warp_shuffle", "shared_tree") for s in ("warp_shuffle",
                                                                  "shared_tree")]
VARIANTS = {
    "auto": {},
    **{f"{m}+{s}": dict(max_strategy=m, sum_strategy=s, normalizer="max_then_sum")
       for m, s in PAIRS},
    "online/warp_shuffle": dict(normalizer="online", sum_strategy="warp_shuffle"),
    "online/shared_tree": dict(normalizer="online", sum_strategy="shared_tree"),
    "tiled/online": dict(fused=False, normalizer="online"),
    "tiled/max_then_sum": dict(fused=False, normalizer="max_then_sum"),
    "block": dict(layout="block"),
}
THREADS = [256, 512, 1024]  # a sweep of block sizes at the target shape


def _label(shape):
    return f"{shape[0]}x{shape[1]}"


def _by_rows(cp, fn, *arrays, rows=1024):
    """``fn(cp, *blocks)`` of the arrays' blocks of rows widened to float64, each of its
    results kept in float32: a float64 reference without float64 copies of whole arrays."""
    blocks = [[r.astype(cp.float32) for r in fn(cp, *(a[i:i + rows].astype(cp.float64)
                                                       for a in arrays))]
              for i in range(0, len(arrays[0]), rows)]
    return [cp.concatenate(part) for part in zip(*blocks)]


def _softmax(cp, x):
    e = cp.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True),)


def _log_softmax(cp, x):
    z = x - x.max(axis=1, keepdims=True)
    return (z - cp.log(cp.exp(z).sum(axis=1, keepdims=True)),)


def _softmax_backward(cp, y, dy):
    """``dx`` and the bound (module doc)."""
    dx, magnitudes = checks.softmax_backward(cp, y, dy)
    return dx, 1e-5 * magnitudes


def _log_softmax_backward(cp, y, dy):
    """``dx`` and the bound (module doc)."""
    dx, magnitudes = checks.log_softmax_backward(cp, y, dy)
    return dx, 1e-5 * magnitudes


@pytest.fixture(scope="module")
def softmax_check(rows, cp, verify):
    return verify.agrees(*_by_rows(cp, _softmax, rows[0]), rtol=1e-5)


@pytest.fixture(scope="module")
def log_softmax_check(rows, cp, verify):
    return verify.agrees(*_by_rows(cp, _log_softmax, rows[0]), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def softmax_backward_check(rows, cp, verify):
    want, bound = _by_rows(cp, _softmax_backward, *rows[1:])
    return verify.agrees(want, atol=bound)


@pytest.fixture(scope="module")
def log_softmax_backward_check(rows, cp, verify):
    want, bound = _by_rows(cp, _log_softmax_backward, *rows[1:])
    return verify.agrees(want, atol=bound)


@pytest.fixture(scope="module", params=SHAPES, ids=_label)
def rows(request, cp):
    """(x, y = softmax(x), dy) on the device, float32."""
    shape = request.param
    rng = cp.random.RandomState(0)  # seeded: a failing case reruns on its own data
    x = rng.standard_normal(shape, dtype=cp.float32)
    e = cp.exp(x - x.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    dy = rng.standard_normal(shape, dtype=cp.float32)
    return x, y, dy


def _plan_info(kind, x, **kw):
    """What numbakern runs for these arguments (layout, threads, ...), for the record."""
    normalizer = None if "backward" in kind else kw.get("normalizer", "auto")
    plan = softmax_module._plan(kind, x.shape[1], np.dtype(x.dtype), normalizer,
                                kw.get("layout", "auto"), kw.get("fused"), kw.get("threads"),
                                kw.get("max_strategy"), kw.get("sum_strategy"))
    return dict(layout=plan.layout, threads=plan.threads, per_thread=plan.per_thread,
                normalizer=plan.normalizer)


def _torch(torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    return torch_cuda


# --- forward ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_numbakern_softmax(rows, variant, measure, softmax_check):
    x, kw = rows[0], VARIANTS[variant]
    measure(lambda: nk.softmax(x, **kw), 2 * x.nbytes, check=softmax_check,
            provider=f"numbakern/{variant}", op="softmax", shape=_label(x.shape),
            **_plan_info("softmax", x, **kw))


@pytest.mark.parametrize("variant", ["auto", "tiled/online"])
def test_numbakern_log_softmax(rows, variant, measure, log_softmax_check):
    x, kw = rows[0], VARIANTS[variant]
    measure(lambda: nk.log_softmax(x, **kw), 2 * x.nbytes, check=log_softmax_check,
            provider=f"numbakern/{variant}", op="log_softmax", shape=_label(x.shape),
            **_plan_info("log_softmax", x, **kw))


@pytest.mark.parametrize("threads", THREADS)
def test_numbakern_softmax_threads(rows, threads, measure, softmax_check):
    x = rows[0]
    if x.shape != TARGET:
        pytest.skip("block-size sweep at the target shape only")
    kw = dict(layout="block", threads=threads)
    measure(lambda: nk.softmax(x, **kw), 2 * x.nbytes, check=softmax_check,
            provider=f"numbakern/threads={threads}", op="softmax", shape=_label(x.shape),
            **_plan_info("softmax", x, **kw))


def test_torch_softmax(rows, measure, torch_cuda, softmax_check):
    torch = _torch(torch_cuda)
    t = torch.as_tensor(rows[0], device="cuda")
    measure(lambda: torch.softmax(t, 1), 2 * t.nbytes, check=softmax_check, provider="torch",
            op="softmax", shape=_label(t.shape))


def test_torch_log_softmax(rows, measure, torch_cuda, log_softmax_check):
    torch = _torch(torch_cuda)
    t = torch.as_tensor(rows[0], device="cuda")
    measure(lambda: torch.log_softmax(t, 1), 2 * t.nbytes, check=log_softmax_check,
            provider="torch", op="log_softmax", shape=_label(t.shape))


def test_cupy_softmax(rows, measure, softmax_check):
    from cupyx.scipy.special import softmax

    x = rows[0]
    measure(lambda: softmax(x, axis=1), 2 * x.nbytes, check=softmax_check, provider="cupyx",
            op="softmax", shape=_label(x.shape))


def test_cupy_log_softmax(rows, measure, log_softmax_check):
    from cupyx.scipy.special import log_softmax

    x = rows[0]
    measure(lambda: log_softmax(x, axis=1), 2 * x.nbytes, check=log_softmax_check,
            provider="cupyx", op="log_softmax", shape=_label(x.shape))


# --- backward -----------------------------------------------------------------------------

BACKWARD_VARIANTS = {"auto": {}, "shared_tree": dict(sum_strategy="shared_tree"),
                     "tiled": dict(fused=False)}


@pytest.mark.parametrize("variant", BACKWARD_VARIANTS)
def test_numbakern_softmax_backward(rows, variant, measure, softmax_backward_check):
    _, y, dy = rows
    kw = BACKWARD_VARIANTS[variant]
    measure(lambda: nk.softmax_backward(y, dy, **kw), 3 * y.nbytes,
            check=softmax_backward_check, provider=f"numbakern/{variant}",
            op="softmax_backward", shape=_label(y.shape),
            **_plan_info("softmax_backward", y, **kw))


def test_numbakern_log_softmax_backward(rows, measure, log_softmax_backward_check):
    _, y, dy = rows  # timing needs float32 rows, not log-probabilities
    measure(lambda: nk.log_softmax_backward(y, dy), 3 * y.nbytes,
            check=log_softmax_backward_check, provider="numbakern/auto",
            op="log_softmax_backward", shape=_label(y.shape),
            **_plan_info("log_softmax_backward", y))


@pytest.mark.parametrize("threads", THREADS)
def test_numbakern_softmax_backward_threads(rows, threads, measure, softmax_backward_check):
    _, y, dy = rows
    if y.shape != TARGET:
        pytest.skip("block-size sweep at the target shape only")
    kw = dict(layout="block", threads=threads)
    measure(lambda: nk.softmax_backward(y, dy, **kw), 3 * y.nbytes,
            check=softmax_backward_check, provider=f"numbakern/threads={threads}",
            op="softmax_backward", shape=_label(y.shape),
            **_plan_info("softmax_backward", y, **kw))


def test_torch_softmax_backward(rows, measure, torch_cuda, softmax_backward_check):
    torch = _torch(torch_cuda)
    _, y, dy = (torch.as_tensor(a, device="cuda") for a in rows)
    measure(lambda: torch._softmax_backward_data(dy, y, 1, y.dtype), 3 * y.nbytes,
            check=softmax_backward_check, provider="torch", op="softmax_backward",
            shape=_label(y.shape))


def test_torch_log_softmax_backward(rows, measure, torch_cuda, log_softmax_backward_check):
    torch = _torch(torch_cuda)
    _, y, dy = (torch.as_tensor(a, device="cuda") for a in rows)
    measure(lambda: torch._log_softmax_backward_data(dy, y, 1, y.dtype), 3 * y.nbytes,
            check=log_softmax_backward_check, provider="torch", op="log_softmax_backward",
            shape=_label(y.shape))
