"""Shared pieces of the GPU benchmarks: skip without a GPU, the copy-bandwidth ceiling,
CUDA-event timing and the GB/s figures every benchmark records in ``extra_info``.

Run on a GPU host:  ``pytest bench/ --benchmark-json=bench.json``.
Two times are recorded for each case: pytest-benchmark's wall time of a call followed
by a device synchronisation (what a Python caller waits), and the median of CUDA-event
timings of the same call (``extra_info["event_ms"]``). GB/s use the event time.
"""

from __future__ import annotations

import pytest

import numbakern
from numbakern.teach import compare


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


@pytest.fixture(scope="session")
def cp():
    """CuPy, or skip: the benchmarks need a real GPU and CuPy to make inputs."""
    if numbakern.backend().is_simulator:
        pytest.skip("benchmarks need a real CUDA GPU")
    cupy = _cupy()
    if cupy is None:
        pytest.skip("benchmarks need CuPy")
    return cupy


@pytest.fixture(scope="session")
def torch_cuda():
    """PyTorch with CUDA, or None (a peer that is compared only when installed)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


@pytest.fixture(scope="session")
def copy_gbps(cp) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second / 1e9), as
    ``numbakern compare`` measures it: the one ceiling for both."""
    return compare.copy_gbps()


@pytest.fixture
def measure(cp, copy_gbps, benchmark):
    """``measure(fn, nbytes, **info)``: benchmark ``fn`` (synchronised) and record
    event time, GB/s and the fraction of copy bandwidth in ``extra_info``."""

    def run(fn, nbytes: int, **info):
        def synced():
            out = fn()
            cp.cuda.Device().synchronize()
            return out

        benchmark.pedantic(synced, rounds=20, iterations=1, warmup_rounds=2)
        ms = compare.measure(fn, repeat=30) * 1e3  # CUDA events, median
        gbps = nbytes / ms / 1e6
        benchmark.extra_info.update(
            info, event_ms=ms, bytes=nbytes, gbps=gbps, copy_gbps=copy_gbps,
            copy_fraction=gbps / copy_gbps,
        )
        return gbps

    return run
