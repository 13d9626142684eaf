"""Median, quantile and partition benchmarks beside PyTorch and CuPy (GPU only).

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
* partition (``test_partition``, float32, flat 2^28 with ``kth = 2^27`` and the logits
  with ``kth = 50`` along the last axis; ``numbakern-sort`` is the full sort, the
  path before radix select): ``cupy.partition`` / ``cupy.argpartition`` (a sort, as
  cupy/cupy#7060 found); ``np.partition`` on the host (the input copied there first,
  outside the timing: the CPU's introselect, a yardstick); ``torch.kthvalue`` (the
  ``kth`` value alone, no partition: the least a peer computes) and ``torch.topk``
  of ``kth + 1`` (the smallest ``kth + 1``, the part of a partition before and at
  ``kth``). torch.topk's ``k`` of 2^27 + 1 takes its sort path.
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


PARTITION_SHAPES = [(FLAT,), LOGITS]
PARTITION_IDS = ["2^28-kth2^27", "8192x50257-kth50"]


def _kth(shape) -> int:
    return shape[0] // 2 if len(shape) == 1 else 50


@pytest.mark.parametrize("shape", PARTITION_SHAPES, ids=PARTITION_IDS)
@pytest.mark.parametrize("impl", [*STRATEGY, "numbakern-arg", "numbakern-arg-sort", "cupy",
                                  "cupy-arg", "numpy", "torch.kthvalue", "torch.topk"])
def test_partition(measure, cp, torch_cuda, shape, impl):
    x = _input(cp, shape)
    kth = _kth(shape)
    arg = {"numbakern-arg": None, "numbakern-arg-sort": "radix"}
    if impl in STRATEGY:
        fn = lambda: nk.partition(x, kth, axis=-1, strategy=STRATEGY[impl])
    elif impl in arg:
        fn = lambda: nk.argpartition(x, kth, axis=-1, strategy=arg[impl])
    elif impl == "cupy":
        fn = lambda: cp.partition(x, kth, axis=-1)
    elif impl == "cupy-arg":
        fn = lambda: cp.argpartition(x, kth, axis=-1)
    elif impl == "numpy":
        import numpy as np

        host = cp.asnumpy(x)
        fn = lambda: np.partition(host, kth, axis=-1)
    else:
        t = _torch(torch_cuda, x)
        if impl == "torch.kthvalue":
            fn = lambda: torch_cuda.kthvalue(t, kth + 1, dim=-1)  # 1-based
        else:
            fn = lambda: torch_cuda.topk(t, kth + 1, dim=-1, largest=False, sorted=False)
    measure(fn, x.nbytes, op="partition", impl=impl, shape=shape, dtype="float32")


@pytest.mark.parametrize("impl", [*STRATEGY, "numbakern-arg", "numbakern-arg-select",
                                  "cupy"])
def test_partition_two_kth(measure, cp, torch_cuda, impl):
    """Two ranks: radix select reads the row on each digit pass once a rank, so the
    default takes the sort past one (``selection.SELECT_MOST``); ``numbakern-select``
    and ``numbakern-arg-select`` time the selection that rule gives up."""
    x = _input(cp, (FLAT,))
    kth = [FLAT // 4, FLAT // 2]
    arg = {"numbakern-arg": None, "numbakern-arg-select": "radix_select"}
    if impl in STRATEGY:
        fn = lambda: nk.partition(x, kth, strategy=STRATEGY[impl])
    elif impl in arg:
        fn = lambda: nk.argpartition(x, kth, strategy=arg[impl])
    else:
        fn = lambda: cp.partition(x, kth)
    measure(fn, x.nbytes, op="partition2", impl=impl, shape=(FLAT,), dtype="float32")
