"""Choose where kernels run, before ``numba.cuda`` is first imported.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is imported, and
the choice cannot be undone afterwards. So this module decides first:

* ``NUMBAKERN_SIMULATOR=1`` forces Numba's CUDA simulator;
* ``NUMBAKERN_SIMULATOR=0`` forbids it (a clear error when no GPU is usable);
* unset: a real GPU when the CUDA driver loads and reports a device, otherwise the
  simulator. A user's own ``NUMBA_ENABLE_CUDASIM=1`` is respected.

The driver is probed through ``ctypes`` (``cuInit`` and ``cuDeviceGetCount``), which
never crashes the interpreter on a machine with no driver or no GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass


class BackendError(RuntimeError):
    """The requested backend cannot be used on this machine.

    Raised by ``import numbakern`` when ``NUMBAKERN_SIMULATOR=0`` and no GPU is usable,
    or when ``numba.cuda`` was imported first in a mode that conflicts with the
    request or has no usable GPU.
    """


@dataclass(frozen=True)
class Backend:
    """Where numbakern's kernels run.

    Attributes:
        kind: ``"cuda"`` for a real GPU, ``"simulator"`` for Numba's CUDA simulator.
        device: the device's name (``"NVIDIA H200"``) or ``"CPU (Numba CUDA simulator)"``.
        compute_capability: ``(major, minor)`` of the GPU; ``None`` under the simulator.
        reason: why this backend was chosen, in words.
    """

    kind: str
    device: str
    compute_capability: tuple[int, int] | None
    reason: str

    @property
    def is_simulator(self) -> bool:
        """Whether kernels run under Numba's CUDA simulator (``kind == "simulator"``)."""
        return self.kind == "simulator"

    def __str__(self) -> str:
        cc = "" if self.compute_capability is None else " (sm_%d%d)" % self.compute_capability
        return f"{self.kind}: {self.device}{cc} [{self.reason}]"


def _driver_library() -> str | None:
    if sys.platform.startswith("win"):
        return "nvcuda.dll"
    if sys.platform == "darwin":
        return None
    return "libcuda.so.1"


def probe_gpu() -> tuple[bool, str]:
    """Ask the CUDA driver, through ctypes only, whether a GPU is usable.

    Returns ``(usable, why)``; never raises.
    """
    name = _driver_library()
    if name is None:
        return False, "no CUDA driver on this platform"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        found = ctypes.util.find_library("cuda")
        if found is None:
            return False, "no CUDA driver (libcuda) found"
        try:
            lib = ctypes.CDLL(found)
        except OSError as exc:
            return False, f"the CUDA driver did not load: {exc}"
    try:
        rc = lib.cuInit(0)
        if rc != 0:
            return False, f"cuInit failed with CUDA error {rc}"
        count = ctypes.c_int(0)
        rc = lib.cuDeviceGetCount(ctypes.byref(count))
        if rc != 0:
            return False, f"cuDeviceGetCount failed with CUDA error {rc}"
    except AttributeError as exc:  # a library named libcuda without the driver API
        return False, f"the CUDA driver lacks {exc}"
    if count.value < 1:
        return False, "the CUDA driver reports no device"
    return True, f"the CUDA driver reports {count.value} device(s)"


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    if value.strip() in ("1", "true", "True", "yes"):
        return True
    if value.strip() in ("0", "false", "False", "no"):
        return False
    raise BackendError(f"{name} must be 0 or 1 (or true/false, yes/no), got {value!r}")


def _numba_cuda_already_simulated() -> bool | None:
    """If numba.cuda was imported before numbakern, which mode it is in."""
    if "numba.cuda" not in sys.modules:
        return None
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


def running_the_command() -> bool:
    """Whether this interpreter is the ``numbakern`` command (console script or
    ``python -m numbakern``; while ``-m`` imports the package, ``argv[0]`` is ``"-m"``)."""
    first = sys.argv[0] if sys.argv else ""
    if first == "-m":  # the interpreter's own -m: "-m numbakern" or "-mnumbakern"
        argv = sys.orig_argv
        i = next((k for k, a in enumerate(argv) if a.startswith("-m")), len(argv))
        module = argv[i][2:] or (argv[i + 1] if i + 1 < len(argv) else "")
        return module == "numbakern"
    return os.path.splitext(os.path.basename(first))[0] == "numbakern"  # numbakern(.exe)


def select() -> tuple[bool, str]:
    """Decide simulator or GPU and set ``NUMBA_ENABLE_CUDASIM`` to match.

    Returns ``(use_simulator, reason)``. Raises :class:`BackendError` when the
    environment asks for something this machine cannot give.
    """
    forced = _env_flag("NUMBAKERN_SIMULATOR")
    already = _numba_cuda_already_simulated()
    if already is not None:
        if forced is not None and forced != already:
            raise BackendError(
                "numba.cuda was imported before numbakern in %s mode, so "
                "NUMBAKERN_SIMULATOR=%d cannot take effect; import numbakern first"
                % ("simulator" if already else "GPU", forced)
            )
        if not already:  # GPU mode chosen by whoever imported numba.cuda: is there one?
            usable, why = probe_gpu()
            if not usable:
                raise BackendError(
                    "numba.cuda was imported before numbakern in GPU mode, but no GPU is "
                    f"usable ({why}): import numbakern first (it picks the simulator), or "
                    "set NUMBA_ENABLE_CUDASIM=1"
                )
        return already, "numba.cuda was already imported in this mode"
    if forced is True:  # the value as set: 1, true, True or yes
        use_sim, reason = True, f"NUMBAKERN_SIMULATOR={os.environ['NUMBAKERN_SIMULATOR'].strip()}"
    elif _env_flag("NUMBA_ENABLE_CUDASIM") and forced is None:
        use_sim, reason = True, "NUMBA_ENABLE_CUDASIM=1"
    else:
        usable, why = probe_gpu()
        if forced is False and not usable:
            raise BackendError(
                f"NUMBAKERN_SIMULATOR=0 forbids the simulator, but no GPU is usable: {why}"
            )
        use_sim, reason = (not usable), why
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if use_sim else "0"
    # numbakern sizes its own grids; Numba's low-occupancy warning on a deliberately
    # small second-pass grid would only be noise.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    if "numba.cuda.core.config" in sys.modules:  # numba core imported, numba.cuda not yet
        sys.modules["numba.cuda.core.config"].ENABLE_CUDASIM = int(use_sim)
    return use_sim, reason


def describe(use_simulator: bool, reason: str) -> Backend:
    """Build the :class:`Backend` record; imports numba.cuda (already chosen)."""
    if use_simulator:
        return Backend("simulator", "CPU (Numba CUDA simulator)", None, reason)
    from numba import cuda

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    return Backend("cuda", name, tuple(dev.compute_capability), reason)
