"""Row softmax, log-softmax and their backward passes, float32, beside PyTorch and CuPy.

GB/s count the bytes a row-wise kernel cannot avoid moving: forward, one read of the
input and one write of the output (2 x nbytes); backward, reads of ``y`` and ``dy``
and a write of ``dx`` (3 x nbytes). ``extra_info`` records the plan numbakern chose
(layout, threads, elements per thread, normalizer). Target (issue 5): 3 TB/s or more
at (32768, 4096) forward, on an H200.

    pytest bench/bench_softmax.py --benchmark-json=softmax.json

Skips without a GPU or CuPy; the PyTorch cases skip without PyTorch.
"""

import importlib

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


@pytest.fixture(scope="module", params=SHAPES, ids=_label)
def rows(request, cp):
    """(x, y = softmax(x), dy) on the device, float32."""
    shape = request.param
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    e = cp.exp(x - x.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    dy = cp.random.standard_normal(shape, dtype=cp.float32)
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
def test_numbakern_softmax(rows, variant, measure):
    x, kw = rows[0], VARIANTS[variant]
    measure(lambda: nk.softmax(x, **kw), 2 * x.nbytes, provider=f"numbakern/{variant}",
            op="softmax", shape=_label(x.shape), **_plan_info("softmax", x, **kw))


@pytest.mark.parametrize("variant", ["auto", "tiled/online"])
def test_numbakern_log_softmax(rows, variant, measure):
    x, kw = rows[0], VARIANTS[variant]
    measure(lambda: nk.log_softmax(x, **kw), 2 * x.nbytes, provider=f"numbakern/{variant}",
            op="log_softmax", shape=_label(x.shape), **_plan_info("log_softmax", x, **kw))


@pytest.mark.parametrize("threads", THREADS)
def test_numbakern_softmax_threads(rows, threads, measure):
    x = rows[0]
    if x.shape != TARGET:
        pytest.skip("block-size sweep at the target shape only")
    kw = dict(layout="block", threads=threads)
    measure(lambda: nk.softmax(x, **kw), 2 * x.nbytes, provider=f"numbakern/threads={threads}",
            op="softmax", shape=_label(x.shape), **_plan_info("softmax", x, **kw))


def test_torch_softmax(rows, measure, torch_cuda):
    torch = _torch(torch_cuda)
    t = torch.as_tensor(rows[0], device="cuda")
    measure(lambda: torch.softmax(t, 1), 2 * t.nbytes, provider="torch", op="softmax",
            shape=_label(t.shape))


def test_torch_log_softmax(rows, measure, torch_cuda):
    torch = _torch(torch_cuda)
    t = torch.as_tensor(rows[0], device="cuda")
    measure(lambda: torch.log_softmax(t, 1), 2 * t.nbytes, provider="torch",
            op="log_softmax", shape=_label(t.shape))


def test_cupy_softmax(rows, measure):
    from cupyx.scipy.special import softmax

    x = rows[0]
    measure(lambda: softmax(x, axis=1), 2 * x.nbytes, provider="cupyx", op="softmax",
            shape=_label(x.shape))


def test_cupy_log_softmax(rows, measure):
    from cupyx.scipy.special import log_softmax

    x = rows[0]
    measure(lambda: log_softmax(x, axis=1), 2 * x.nbytes, provider="cupyx",
            op="log_softmax", shape=_label(x.shape))


# --- backward -----------------------------------------------------------------------------

BACKWARD_VARIANTS = {"auto": {}, "shared_tree": dict(sum_strategy="shared_tree"),
                     "tiled": dict(fused=False)}


@pytest.mark.parametrize("variant", BACKWARD_VARIANTS)
def test_numbakern_softmax_backward(rows, variant, measure):
    _, y, dy = rows
    kw = BACKWARD_VARIANTS[variant]
    measure(lambda: nk.softmax_backward(y, dy, **kw), 3 * y.nbytes,
            provider=f"numbakern/{variant}", op="softmax_backward", shape=_label(y.shape),
            **_plan_info("softmax_backward", y, **kw))


def test_numbakern_log_softmax_backward(rows, measure):
    _, y, dy = rows  # timing needs float32 rows, not log-probabilities
    measure(lambda: nk.log_softmax_backward(y, dy), 3 * y.nbytes, provider="numbakern/auto",
            op="log_softmax_backward", shape=_label(y.shape),
            **_plan_info("log_softmax_backward", y))


@pytest.mark.parametrize("threads", THREADS)
def test_numbakern_softmax_backward_threads(rows, threads, measure):
    _, y, dy = rows
    if y.shape != TARGET:
        pytest.skip("block-size sweep at the target shape only")
    kw = dict(layout="block", threads=threads)
    measure(lambda: nk.softmax_backward(y, dy, **kw), 3 * y.nbytes,
            provider=f"numbakern/threads={threads}", op="softmax_backward",
            shape=_label(y.shape), **_plan_info("softmax_backward", y, **kw))


def test_torch_softmax_backward(rows, measure, torch_cuda):
    torch = _torch(torch_cuda)
    _, y, dy = (torch.as_tensor(a, device="cuda") for a in rows)
    measure(lambda: torch._softmax_backward_data(dy, y, 1, y.dtype), 3 * y.nbytes,
            provider="torch", op="softmax_backward", shape=_label(y.shape))


def test_torch_log_softmax_backward(rows, measure, torch_cuda):
    torch = _torch(torch_cuda)
    _, y, dy = (torch.as_tensor(a, device="cuda") for a in rows)
    measure(lambda: torch._log_softmax_backward_data(dy, y, 1, y.dtype), 3 * y.nbytes,
            provider="torch", op="log_softmax_backward", shape=_label(y.shape))
