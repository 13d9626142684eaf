"""Shared pieces of the GPU benchmarks: skip without a GPU, the copy-bandwidth ceiling,
CUDA-event timing and the GB/s figures every benchmark records in ``extra_info``.

Run on a GPU host:  ``pytest bench/ --benchmark-json=bench.json``.
Two times are recorded for each case: pytest-benchmark's wall time of a call followed
by a device synchronisation (what a Python caller waits), and the median of CUDA-event
timings of the same call (``extra_info["event_ms"]``). GB/s use the event time.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbakern


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


def event_ms(cp, fn, reps: int = 30) -> float:
    """Median of ``reps`` CUDA-event timings of ``fn()`` after a warm-up, in ms."""
    fn()
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


@pytest.fixture(scope="session")
def copy_gbps(cp) -> float:
    """Device-to-device copy bandwidth, bytes read + written per second / 1e9."""
    n = 1 << 28
    src = cp.ones(n, dtype=cp.float32)
    dst = cp.empty_like(src)
    ms = event_ms(cp, lambda: cp.copyto(dst, src))
    return 2 * src.nbytes / ms / 1e6


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
        ms = event_ms(cp, fn)
        gbps = nbytes / ms / 1e6
        benchmark.extra_info.update(
            info, event_ms=ms, bytes=nbytes, gbps=gbps, copy_gbps=copy_gbps,
            copy_fraction=gbps / copy_gbps,
        )
        return gbps

    return run
