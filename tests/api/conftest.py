"""Fixtures the API tests share: torch and CuPy for the tensor tests, and a spy on the
row kernels the softmax family launches."""

import pytest

from numbakern.api import _interop
from numbakern.kernels import softmax_rows


@pytest.fixture(scope="module")
def torch():
    """PyTorch with CUDA, or skip."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch with CUDA")
    return torch


@pytest.fixture(params=["cupy", "no_cupy"])
def cupy_or_not(request, monkeypatch):
    """Each test twice: tensors through CuPy views, and through numbakern's own device
    buffers as if CuPy were not installed."""
    if request.param == "no_cupy":
        monkeypatch.setattr(_interop, "_cupy", lambda: None)
    elif _interop._cupy() is None:
        pytest.skip("CuPy is not installed")
    return request.param


@pytest.fixture
def row_plans(monkeypatch):
    """``record(*fields)``: from then on, each row kernel launched appends its plan's
    ``fields`` (``RowPlan`` attributes, a tuple) to the list ``record`` returns."""
    def record(*fields):
        seen = []
        get = softmax_rows.kernel_for

        def spy(plan):
            seen.append(tuple(getattr(plan, f) for f in fields))
            return get(plan)

        monkeypatch.setattr(softmax_rows, "kernel_for", spy)
        return seen

    return record


@pytest.fixture
def side_stream():
    """``side_stream(library)``: ``(stream, delay)`` for ``"cupy"`` or ``"torch"``: a
    non-blocking stream of that library, to make current with ``with stream:``, and
    ``delay()``, which queues ~10 ms of GPU work on the current stream. A write queued
    after the delay lands well after the next call's launches are queued, so a check
    that read its words on another stream (the legacy default stream, which a
    non-blocking stream does not wait for) would miss it."""
    def make(library: str):
        if library == "torch":
            torch = pytest.importorskip("torch")
            return torch.cuda.stream(torch.cuda.Stream()), lambda: torch.cuda._sleep(10_000_000)
        cp = pytest.importorskip("cupy")
        spin = cp.RawKernel(r"""extern "C" __global__ void spin(long long cycles) {
            long long start = clock64(); while (clock64() - start < cycles) {} }""", "spin")
        return cp.cuda.Stream(non_blocking=True), \
            lambda: spin((1,), (1,), (cp.int64(10_000_000),))
    return make
