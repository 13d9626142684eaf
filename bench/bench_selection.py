"""Median and quantile benchmarks beside PyTorch and CuPy (GPU only).

Run: ``pytest bench/bench_selection.py --benchmark-json=selection.json``. GB/s count
the input read once. numbakern's selection is a full sort for now (the radix sort,
then one order-statistics kernel), so these time about a sort of the same keys.

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
QS = [0.1, 0.5, 0.9]


def _input(cp, shape):
    return cp.random.standard_normal(shape, dtype=cp.float32)


def _torch(torch_cuda, x):
    if torch_cuda is None:
        pytest.skip("PyTorch with CUDA is not installed")
    return torch_cuda.as_tensor(x, device="cuda")


@pytest.mark.parametrize("shape", [(FLAT,), ROWS], ids=["2^28", "32768x4096"])
@pytest.mark.parametrize("impl", ["numbakern", "torch", "cupy"])
def test_median(measure, cp, torch_cuda, shape, impl):
    x = _input(cp, shape)
    axis = -1 if len(shape) > 1 else None
    if impl == "numbakern":
        fn = lambda: nk.median(x, axis=axis)
    elif impl == "cupy":
        fn = lambda: cp.median(x, axis=axis)
    else:
        t = _torch(torch_cuda, x)
        fn = (lambda: torch_cuda.median(t, dim=-1)) if axis is not None else \
            (lambda: torch_cuda.median(t))
    measure(fn, x.nbytes, op="median", impl=impl, shape=shape, dtype="float32")


@pytest.mark.parametrize("shape", [(FLAT,), ROWS], ids=["2^28", "32768x4096"])
@pytest.mark.parametrize("impl", ["numbakern", "torch", "cupy"])
def test_quantile(measure, cp, torch_cuda, shape, impl):
    x = _input(cp, shape)
    axis = -1 if len(shape) > 1 else None
    if impl == "numbakern":
        fn = lambda: nk.quantile(x, QS, axis=axis)
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
