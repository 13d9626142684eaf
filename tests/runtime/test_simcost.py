"""Interrupts and long runs under the simulator (numbakern/runtime/simblock.py,
numbakern/runtime/simcost.py): a KeyboardInterrupt stops a simulated launch and the
next call works; launches estimated (or measured) to take longer than
``NUMBAKERN_SIM_MAX_SECONDS`` are refused with the size, the estimate and the ways
out; long ones are announced once. Nothing here times anything: limits are set to
0 or to tiny values, so the outcome does not depend on the machine's speed.
"""

from __future__ import annotations

import signal
import threading
import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime import simcost
from numbakern.runtime.launch import launch

pytestmark = pytest.mark.skipif(not nk.backend().is_simulator,
                                reason="the simulator's own guards")

started = threading.Event()


def _mark_started():
    started.set()


@cuda.jit
def spin_at_barriers(x):
    # Runs until its block is aborted: every syncthreads() checks the abort flag.
    if cuda.threadIdx.x == 0:
        _mark_started()
    while True:
        x[cuda.threadIdx.x] += 1
        cuda.syncthreads()


@cuda.jit
def spin_reading_cuda(x):
    # No barrier: stops at its next cuda.* read once the block is aborted.
    _mark_started()
    while x[0] >= 0:
        x[cuda.threadIdx.x] = cuda.blockIdx.x


@cuda.jit
def fill_index(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = i


def _interrupt_when_started(stopped: threading.Event):
    """Send SIGINT to the main thread once the kernel runs, again every 5 s until
    the launch has stopped (a signal that lands between two checks is not lost)."""
    started.clear()
    main = threading.main_thread().ident

    def fire():
        if not started.wait(60):
            return
        for _ in range(60):
            signal.pthread_kill(main, signal.SIGINT)
            if stopped.wait(5):  # longer than an interrupted launch drains
                return

    t = threading.Thread(target=fire, daemon=True)
    t.start()
    return t


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="SIGINT reaches the main thread only")
@pytest.mark.parametrize("kernel", [spin_at_barriers, spin_reading_cuda])
def test_a_keyboard_interrupt_stops_the_launch_and_the_next_calls_work(kernel):
    x = cuda.to_device(np.zeros(64, np.int64))
    stopped = threading.Event()
    # Python's own handler, whatever an earlier test in this process installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        firing = _interrupt_when_started(stopped)
        with pytest.raises(KeyboardInterrupt):
            launch(kernel, 4, 64, cuda.default_stream(), x)
    finally:
        stopped.set()
        signal.signal(signal.SIGINT, previous)
    firing.join(60)
    # The module's `cuda` is numba.cuda again for host code, and kernels launch.
    y = cuda.to_device(np.zeros(100, np.int64))
    launch(fill_index, 4, 32, cuda.default_stream(), y)
    assert np.array_equal(y.copy_to_host(), np.arange(100))
    v = np.linspace(-1, 1, 50)
    assert nk.sum(v) == pytest.approx(v.sum(), abs=1e-12)
    np.testing.assert_allclose(nk.cumsum(v), np.cumsum(v), rtol=1e-12, atol=1e-12)


def test_a_launch_over_the_limit_is_refused_naming_size_estimate_and_the_way_out(
        monkeypatch):
    monkeypatch.setenv("NUMBAKERN_SIM_MAX_SECONDS", "0")
    with pytest.raises(simcost.SimulatorTooSlow) as e:
        nk.sum(np.arange(300.0))
    msg = str(e.value)
    assert "300 elements" in msg and "estimated" in msg
    assert "CUDA GPU" in msg and "NUMBAKERN_SIM_MAX_SECONDS" in msg and "inf" in msg
    monkeypatch.setenv("NUMBAKERN_SIM_MAX_SECONDS", "inf")
    assert nk.sum(np.arange(300.0)) == np.arange(300.0).sum()


def test_bincount_of_a_huge_value_is_refused_at_once_without_the_memory():
    with pytest.raises(simcost.SimulatorTooSlow, match="1000000001 elements"):
        nk.bincount(np.array([10**9]))
    assert np.array_equal(nk.bincount(np.array([3, 1, 3])), [0, 1, 0, 2])


def test_a_long_launch_says_so_once_with_its_estimate_and_still_answers(monkeypatch):
    monkeypatch.setenv("NUMBAKERN_SIM_WARN_SECONDS", "0")
    x = cuda.to_device(np.zeros(40, np.int64))
    with pytest.warns(simcost.SimulatorSlowWarning, match=r"about \d+ s") as record:
        launch(fill_index, 2, 32, cuda.default_stream(), x)
    assert len(record) == 1
    assert record[0].filename == __file__  # points at the call, not into numbakern
    assert np.array_equal(x.copy_to_host(), np.arange(40))


def test_a_launch_whose_measured_blocks_project_past_the_limit_stops(monkeypatch):
    # The estimate (no cost yet, a tiny prior) lets it start; after its first block
    # the projection from the time measured is over a limit of a nanosecond.
    monkeypatch.setattr(simcost, "PRIOR_SECONDS_PER_UNIT", 0.0)
    monkeypatch.setattr(simcost, "MEASURE_AFTER_SECONDS", 0.0)
    monkeypatch.setenv("NUMBAKERN_SIM_MAX_SECONDS", "1e-9")

    @cuda.jit
    def count_blocks(x):
        if cuda.threadIdx.x == 0:
            x[cuda.blockIdx.x] = 1

    x = cuda.to_device(np.zeros(8, np.int64))
    with pytest.raises(simcost.SimulatorTooSlow, match="measured .* for 1 of 8 blocks"):
        launch(count_blocks, 8, 2, cuda.default_stream(), x)
    assert x.copy_to_host().tolist() == [1, 0, 0, 0, 0, 0, 0, 0]  # no block after it


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_limit_that_is_not_a_number_of_seconds_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("NUMBAKERN_SIM_MAX_SECONDS", value)
    with pytest.raises(ValueError, match="NUMBAKERN_SIM_MAX_SECONDS must be"):
        nk.sum(np.arange(3.0))


def test_the_estimate_counts_threads_and_the_largest_array():
    x = np.zeros((10, 30))
    assert simcost.units(3, 64, (x, 5, np.zeros(7))) == (3 * 64 + 300, 192, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert simcost.estimate(object(), 1, 1, ()) == pytest.approx(
            simcost.PRIOR_SECONDS_PER_UNIT)
