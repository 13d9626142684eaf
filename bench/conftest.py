"""Shared pieces of the GPU benchmarks: skip without a GPU, the copy-bandwidth ceiling,
CUDA-event timing, the GB/s figures every benchmark records in ``extra_info``, and the
check of each timed result.

Run on a GPU host:  ``pytest bench/ --benchmark-json=bench.json``.
Two times are recorded for each case: pytest-benchmark's wall time of a call followed
by a device synchronisation (what a Python caller waits), and the median of CUDA-event
timings of the same call (``extra_info["event_ms"]``). GB/s use the event time.

Before it is timed, every case's first result goes to its ``check`` (``measure``'s
keyword, required): a wrong result fails the case, naming the implementation, the case
and the largest error, and is never timed. The suites hold each result to a reference
(``verify.agrees``): exactly for integers, indices and sorts, and for float sums and
scans of ``small_integers`` (every order of summing them is exact); float results that
cannot be exact within a bound each suite states, relative to a float64 reference where
one can be had. The comparison runs on the device, a block of rows at a time (results
reach several GB): CuPy arrays, torch tensors and Numba device arrays alike.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest

import numbakern
from numbakern.teach import compare
from numbakern.teach.peers import give_back_memory

# bench/peers.py and bench/checks.py, beside this file: setup.cfg's
# --import-mode=importlib does not put this folder on sys.path (pytest 9), so say it
sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from checks import verifier  # noqa: E402


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def _memory(cp) -> str:
    """The device's free memory and what CuPy's pool and torch's allocator hold."""
    free, total = cp.cuda.runtime.memGetInfo()
    held = f"CuPy's pool {cp.get_default_memory_pool().total_bytes() / 2**30:.1f}"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        held += f", torch's {torch.cuda.memory_reserved() / 2**30:.1f}"
    return f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB free; {held} GiB held"


def _first_result(cp, fn, check, who: str, case: str):
    """``fn()`` checked: the case fails, naming ``who``, if ``fn`` raises, if the check
    cannot run (both with the device's memory, the usual cause in a long run), or if
    the result is wrong (``check``'s AssertionError)."""
    try:
        result = fn()
    except Exception as exc:
        pytest.fail(f"{who} raised in {case}: {exc!r}; {_memory(cp)}", pytrace=False)
    try:
        check(result)
    except AssertionError as exc:
        pytest.fail(f"{who} is wrong in {case}: {exc or 'wrong'}", pytrace=False)
    except Exception as exc:
        pytest.fail(f"the check of {who} could not run in {case}: {exc!r}; {_memory(cp)}",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _memory_given_back():
    """After each case, the device memory the pools keep goes back to the driver
    (``numbakern.teach.peers.give_back_memory``): the suites' module-scoped inputs and
    references stay, the pools' leftovers of earlier cases do not."""
    yield
    give_back_memory()


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
def verify(cp):
    """The checks on the device (``bench/checks.py``'s :func:`verifier`)."""
    return verifier(cp)


@pytest.fixture(scope="session")
def small_integers(cp):
    """``small_integers(shape, dtype="float32")``: ``bench/peers.py``'s, integers in
    [-8, 8] whose sums and scans are exact in any order."""
    return partial(peers.small_integers, cp)


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
def measure(cp, copy_gbps, benchmark, request):
    """``measure(fn, nbytes, check=..., **info)``: call ``fn`` once and pass its result
    to ``check`` (which raises AssertionError if it is wrong: the case fails, untimed);
    then benchmark ``fn`` (synchronised) and record event time, GB/s and the fraction
    of copy bandwidth in ``extra_info``."""

    def run(fn, nbytes: int, *, check, **info):
        who = info.get("provider", info.get("impl", "the implementation"))
        _first_result(cp, fn, check, who, request.node.name)

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
