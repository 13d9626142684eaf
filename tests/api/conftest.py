"""Fixtures the GPU tests of tensors share."""

import pytest

from numbakern.api import _interop


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
