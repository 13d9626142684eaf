"""Median and quantile benchmarks beside PyTorch and CuPy (GPU only).

Run: ``pytest bench/bench_selection.py --benchmark-json=selection.json``. GB/s count
the input read once. numbakern's default finds the order statistics by radix select
(``numbakern`` cases; ``numbakern-sort`` is the sort path, ``strategy="radix"``;
``numbakern-select`` radix select named, ``strategy="radix_select"``).

Peers, and what they compute:

* ``torch.median`` returns the lower of the two middle values (NumPy and numbakern
  average them), and one dimension at a time; timed all the same, as the nearest peer.
* ``torch.quantile`` refuses inputs of more than 2^24 elements ("input tensor is too
  large"): such cases are skipped with that reason, as a measured fact about the peer.
* ``cupy.median`` / ``cupy.quantile``, when CuPy is importable (the ``cp`` fixture
  needs it anyway).
"""

import pytest

import numbakern as nk

FLAT = 1 << 28
ROWS = (32768, 4096)
LOGITS = (8192, 50257)  # odd rows: one middle element a row
SHAPES = [(FLAT,), ROWS, LOGITS]
IDS = ["2^28", "32768x4096", "8192x50257"]
STRATEGY = {"numbakern": None, "numbakern-sort": "radix", "numbakern-select": "radix_select"}
QS = [0.1, 0.5, 0.9]


def _input(cp, shape):
    return cp.random.standard_normal(shape, dtype=cp.float32)


def _torch(torch_cuda, x):
    if torch_cuda is None:
        pytest.skip("PyTorch with CUDA is not installed")
    return torch_cuda.as_tensor(x, device="cuda")


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.parametrize("impl", [*STRATEGY, "torch", "cupy"])
def test_median(measure, cp, torch_cuda, shape, impl):
    x = _input(cp, shape)
    axis = -1 if len(shape) > 1 else None
    if impl in STRATEGY:
        fn = lambda: nk.median(x, axis=axis, strategy=STRATEGY[impl])
    elif impl == "cupy":
        fn = lambda: cp.median(x, axis=axis)
    else:
        t = _torch(torch_cuda, x)
        fn = (lambda: torch_cuda.median(t, dim=-1)) if axis is not None else \
            (lambda: torch_cuda.median(t))
    measure(fn, x.nbytes, op="median", impl=impl, shape=shape, dtype="float32")


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.parametrize("impl", [*STRATEGY, "torch", "cupy"])
def test_quantile(measure, cp, torch_cuda, shape, impl):
    x = _input(cp, shape)
    axis = -1 if len(shape) > 1 else None
    if impl in STRATEGY:
        fn = lambda: nk.quantile(x, QS, axis=axis, strategy=STRATEGY[impl])
    elif impl == "cupy":
        fn = lambda: cp.quantile(x, cp.asarray(QS), axis=axis)
    else:
        t = _torch(torch_cuda, x)
        q = torch_cuda.tensor(QS, device="cuda")
        fn = (lambda: torch_cuda.quantile(t, q, dim=-1)) if axis is not None else \
            (lambda: torch_cuda.quantile(t, q))
        try:
            fn()
        except RuntimeError as error:  # "quantile() input tensor is too large"
            pytest.skip(f"torch.quantile refuses this input: {error}")
    measure(fn, x.nbytes, op="quantile", impl=impl, shape=shape, dtype="float32")
