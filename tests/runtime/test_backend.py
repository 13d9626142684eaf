"""Backend selection, and how the simulator support is installed.

The environment decides once per interpreter, so most checks run a fresh Python.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import numbakern
from numbakern.runtime import backend as _backend

SIMULATOR = numbakern.backend().is_simulator
GPU_USABLE = _backend.probe_gpu()[0]

simulator_only = pytest.mark.simulator  # checks the simulator backend


def run_python(code, **env):
    """Run ``code`` in a fresh interpreter with only the given backend variables."""
    environ = {
        k: v for k, v in os.environ.items()
        if k not in ("NUMBAKERN_SIMULATOR", "NUMBA_ENABLE_CUDASIM")
    }
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environ, capture_output=True, text=True, timeout=120,
    )


@simulator_only
def test_backend_reports_the_simulator():
    b = numbakern.backend()
    assert b.kind == "simulator" and b.is_simulator
    assert b.compute_capability is None
    assert "simulator" in str(b)


def test_the_simulators_reason_echoes_the_variable_as_set():
    r = run_python("import numbakern; print(numbakern.backend())", NUMBAKERN_SIMULATOR="yes")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("[NUMBAKERN_SIMULATOR=yes]")


@pytest.mark.gpu
def test_backend_reports_the_gpu():
    b = numbakern.backend()
    assert b.kind == "cuda" and b.compute_capability >= (7, 0)


def test_probe_never_raises():
    usable, why = _backend.probe_gpu()
    assert isinstance(usable, bool) and why


def test_import_without_a_choice_never_crashes():
    r = run_python("import numbakern; print(numbakern.backend().kind)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("cuda" if GPU_USABLE else "simulator")


@pytest.mark.skipif(GPU_USABLE, reason="a GPU is usable here")
def test_forbidding_the_simulator_without_a_gpu_is_a_clear_error():
    r = run_python("import numbakern", NUMBAKERN_SIMULATOR="0")
    assert r.returncode != 0
    assert "BackendError: NUMBAKERN_SIMULATOR=0 forbids the simulator" in r.stderr


@pytest.mark.skipif(GPU_USABLE, reason="a GPU is usable here")
def test_numba_cuda_imported_first_in_gpu_mode_without_a_gpu_is_a_clear_error():
    r = run_python("from numba import cuda\nimport numbakern")
    assert r.returncode != 0
    assert "imported before numbakern in GPU mode, but no GPU is usable" in r.stderr


_INTRINSICS = (
    "shfl_sync shfl_up_sync shfl_down_sync shfl_xor_sync syncwarp activemask "
    "ballot_sync all_sync any_sync eq_sync match_any_sync match_all_sync lanemask_lt"
).split()


_REPLACED = ("popc", "clz", "ffs", "brev")


def test_numba_simulator_lacks_the_intrinsics_until_install():
    r = run_python(
        f"""
        from numba import cuda
        from numba.cuda.simulator import kernel, kernelapi
        fake = kernelapi.FakeCUDAModule
        before = dict(vars(fake))
        assert not [n for n in {_INTRINSICS!r} if hasattr(fake, n)]
        numba_manager = kernel.BlockManager

        from numbakern import simulator   # numba.cuda came first: sim mode is kept
        assert simulator.install() is True
        assert all(hasattr(fake, n) for n in {_INTRINSICS!r})
        replaced = {_REPLACED!r}  # simulated wrongly by Numba, replaced
        assert all(vars(fake)[k] is v for k, v in before.items() if k not in replaced), \
            "numba's own changed"
        assert all(vars(fake)[k] is not before[k] for k in replaced)
        assert kernelapi.GridGroup.sync.__module__ == "numbakern.runtime.simulator"
        assert kernel.BlockManager is not numba_manager
        state = dict(vars(fake)), kernel.BlockManager, kernelapi.FakeCUDAShared
        assert simulator.install() is True   # idempotent
        assert state == (dict(vars(fake)), kernel.BlockManager, kernelapi.FakeCUDAShared)
        print("ok")
        """,
        NUMBA_ENABLE_CUDASIM="1",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


@pytest.mark.skipif(not GPU_USABLE, reason="numbakern refuses numba.cuda in GPU mode "
                    "without a GPU (the test below)")
def test_install_leaves_numba_alone_when_the_simulator_is_off():
    r = run_python(
        f"""
        from numba import cuda                  # GPU mode; no driver needed to import
        from numba.cuda.simulator import kernel, kernelapi
        numba_manager = kernel.BlockManager
        from numbakern import simulator
        assert simulator.install() is False
        assert not [n for n in {_INTRINSICS!r} if hasattr(kernelapi.FakeCUDAModule, n)]
        assert kernel.BlockManager is numba_manager
        print("ok")
        """,
        NUMBA_ENABLE_CUDASIM="0",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


@simulator_only
def test_importing_numbakern_installed_the_support():
    from numba.cuda.simulator import kernel, kernelapi

    from numbakern.runtime import simblock as _simblock, simulator

    assert kernel.BlockManager is _simblock.BlockManager
    assert kernelapi.FakeCUDAModule.shfl_sync is simulator.shfl_sync
    assert simulator.install() is True
