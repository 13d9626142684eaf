"""Shared test set-up: the `gpu` marker skips unless a real CUDA GPU runs; the
`simulator` marker skips unless Numba's simulator runs (a test of what only it has:
device functions called from Python, its own grid and tile sizes, its views)."""

import os

import pytest

# Each pytest-xdist worker ("gw0", "gw1", ...) keeps its simulated threads on a CPU of
# its own (numbakern.runtime.simblock): picked by process id, two workers share one
# CPU half the time and the suite takes up to twice as long. Only workers set it: they
# inherit the controller's environment.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["NUMBAKERN_SIMULATOR_CPU"] = os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")

# The simulator's "this launch will take a while" warning estimates a launch from the
# kernel's last measured cost per thread or element, which a row kernel's rows of
# other lengths, or a busy machine, can put far off: under a test's
# warnings-as-errors it would fail whatever ran before it. Tests of the warning set
# their own limit.
os.environ.setdefault("NUMBAKERN_SIM_WARN_SECONDS", "inf")

import numbakern
from numbakern.teach.peers import give_back_memory


def pytest_collection_modifyitems(config, items):
    simulator = numbakern.backend().is_simulator
    wrong = "gpu" if simulator else "simulator"
    skip = pytest.mark.skip(reason="needs a real CUDA GPU; the simulator runs here"
                            if simulator else "tests the simulator; a GPU runs here")
    for item in items:
        if wrong in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"numbakern backend: {numbakern.backend()}"


@pytest.fixture(autouse=True)
def _gpu_memory_given_back(request):
    """After a gpu test, the device memory its arrays left in CuPy's pool, torch's
    caching allocator and Numba's pending frees goes back to the driver: pytest-xdist's
    processes share one card, where each one's pools kept 16-23 GiB of its largest
    tests' arrays and five of them ran an 80 GB card out of memory
    (bench/NOTES.md)."""
    yield
    if "gpu" in request.keywords and not numbakern.backend().is_simulator:
        give_back_memory()
