"""Calls from several Python threads at once, on either backend.

Under the simulator each launch runs its own ``FakeCUDAModule`` (numbakern/runtime/
simulator.py, ``CudaRouter``), so concurrent calls run side by side; on a GPU the
kernel cache, the launchers and the replay tables must hold under concurrent first
calls of one signature. Threads start together on a ``threading.Barrier``, so the
calls really overlap. Inputs are small (tens of elements): the simulator runs every
CUDA thread as an OS thread. Tolerances as the families' own tests: float32 results
against a float64 NumPy reference, rtol 1e-5 (plus atol 1e-6), indices exact.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime import replay

THREADS = 8


def _together(work, n=THREADS):
    """Run ``work(i)`` on ``n`` threads released at once; their results or errors."""
    barrier = threading.Barrier(n, timeout=60)
    results = [None] * n

    def run(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # reported by the test, never lost
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish (deadlock?)"
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    return results


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


CALLS = [
    (nk.sum, lambda x: x.sum()),
    (nk.cumsum, np.cumsum),
    (nk.argmax, np.argmax),
    (nk.softmax, _softmax),
]


def _check(got, want):
    if np.issubdtype(np.asarray(want).dtype, np.integer):
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_calls_from_eight_threads_at_once_all_give_numpys_answers():
    rng = np.random.default_rng(25)
    inputs = [rng.standard_normal(20 + 9 * i).astype(np.float32) for i in range(THREADS)]

    def work(i):
        return CALLS[i % len(CALLS)][0](inputs[i])

    results = _together(work)
    for i, got in enumerate(results):
        _check(got, CALLS[i % len(CALLS)][1](inputs[i].astype(np.float64)))


def test_a_user_kernel_and_host_code_of_its_module_run_while_other_threads_launch():
    # Host code of a kernel's module reads `cuda` (here cuda.to_device) while other
    # threads' launches of that module's kernel are running.
    @cuda.jit
    def add_block_index(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += cuda.blockIdx.x

    def work(i):
        x = cuda.to_device(np.zeros(40 + i, np.int64))
        add_block_index[3, 16](x)
        return x.copy_to_host()

    for i, got in enumerate(_together(work)):
        assert np.array_equal(got, np.arange(40 + i) // 16)


def _fresh_first_calls(device_array, to_host):
    """Eight threads make the first call of one new signature at once (a shape and
    dtype no other test uses: a new replay key and, for int16 cumsum, likely new
    kernels); every answer is right, one replay entry is kept, and the next call
    replays it correctly. (How many of the eight replay depends on when the first
    recording is kept: on the H200 all seven others replayed in two runs of three.)"""
    rng = np.random.default_rng(2025)
    n = 37
    hosts = [rng.integers(-50, 50, n).astype(np.int16) for _ in range(THREADS)]
    inputs = [device_array(h) for h in hosts]
    table = nk.cumsum.replay_table

    results = _together(lambda i: to_host(nk.cumsum(inputs[i])))
    for h, got in zip(hosts, results):
        assert np.array_equal(got, np.cumsum(h))
    kind = replay._device_array(inputs[0]).kind  # "sim", "device" or "cupy": this
    keys = [k for k in table if any(isinstance(p, tuple) and p and p[0] == kind  # test's alone
                                     and p[2:3] == ((n,),) for p in k)]
    assert len(keys) == 1
    before = replay.counts["replayed"]  # (a first call that found the entry replayed)
    h = rng.integers(-50, 50, n).astype(np.int16)
    assert np.array_equal(to_host(nk.cumsum(device_array(h))), np.cumsum(h))
    assert replay.counts["replayed"] == before + 1


def test_concurrent_first_calls_of_one_signature_share_one_replay_entry():
    _fresh_first_calls(cuda.to_device, lambda r: r.copy_to_host())


@pytest.mark.gpu
def test_concurrent_first_calls_of_one_signature_on_the_gpu_with_cupy():
    cupy = pytest.importorskip("cupy")
    _fresh_first_calls(cupy.asarray, cupy.asnumpy)


def test_numpys_words_of_two_threads_never_leave_one_threads_recorder_installed():
    """The first thread opens the block and waits (up to 0.5 s) for the second to open
    its own; the first closes before the second. Overlapping, each
    ``warnings.catch_warnings`` would put back what it found, the second the first's
    recorder, holding every later warning of the process; one at a time, the
    process's filters and warning display are as they were."""
    import warnings

    from numbakern.runtime.stacklevel import numpys_words

    opened, first_closed = threading.Event(), threading.Event()
    shown, filters = warnings._showwarnmsg_impl, list(warnings.filters)

    def first():
        with numpys_words():
            opened.set()
            time.sleep(0.5)  # the second thread tries to open its block meanwhile
        first_closed.set()

    def second():
        opened.wait(10)
        with numpys_words():
            first_closed.wait(2)

    threads = [threading.Thread(target=f) for f in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert warnings._showwarnmsg_impl is shown
    assert warnings.filters == filters
