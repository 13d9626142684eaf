"""How long a simulated launch will take: say so, show progress, refuse hours.

Numba's simulator runs every CUDA thread as a Python thread, about 10 to 500 us of
CPU per element or thread (by kernel) where a GPU takes nanoseconds: a sum of 10**7
elements runs for minutes, a count into 10**9 bins for hours. Every launch numbakern
makes under the simulator (:func:`numbakern.runtime.launch.launch` and replays) goes
through :func:`guarded`:

* **Estimate** (before the launch, cheap: a product and a dict lookup):
  ``units * seconds_per_unit``, where ``units`` is the number of CUDA threads
  (blocks times threads per block) plus the elements of the largest array argument
  (grid-stride kernels do a thread's work per element), and ``seconds_per_unit`` is
  the cost measured on this kernel's last launch of at least
  :data:`MIN_MEASURED_SECONDS` and :data:`MIN_MEASURED_UNITS`, or :data:`PRIOR_SECONDS_PER_UNIT`
  for a kernel not launched yet.
* **Refuse** when the estimate is over ``NUMBAKERN_SIM_MAX_SECONDS`` (default
  :data:`MAX_SECONDS`, one hour): :class:`SimulatorTooSlow` names the size, the
  estimate and the ways out (a GPU; a smaller input; a larger limit, ``inf`` for
  none). While the launch runs, the estimate is re-made from the blocks done once it
  has run :data:`MEASURE_AFTER_SECONDS`; a launch whose measured projection passes
  the limit stops after its current block with the same error.
* **Say so** when the estimate (or the projection) is over
  ``NUMBAKERN_SIM_WARN_SECONDS`` (default :data:`WARN_SECONDS`): one
  :class:`SimulatorSlowWarning` per launch, with the estimate in seconds, and a
  progress bar over the launch's blocks (rich, on stderr, removed when done).

Launches a user makes with ``kernel[grid, block](...)`` are not guarded.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import warnings

from .stacklevel import user_stacklevel

WARN_SECONDS = 10.0
MAX_SECONDS = 3600.0
PRIOR_SECONDS_PER_UNIT = 2e-5  # a sum's cost on a 2-core laptop; scans cost 10-20x
MEASURE_AFTER_SECONDS = 2.0
MIN_MEASURED_SECONDS = 0.2  # shorter launches leave the kernel's cost as it was,
MIN_MEASURED_UNITS = 20_000  # and so do smaller ones (their time is the launch's own)

_cost: dict[int, float] = {}  # id(kernel) -> seconds per unit, measured
_lock = threading.Lock()


class SimulatorTooSlow(RuntimeError):
    """A launch the simulator would take longer on than ``NUMBAKERN_SIM_MAX_SECONDS``."""


class SimulatorSlowWarning(UserWarning):
    """A launch the simulator will take a while on (over ``NUMBAKERN_SIM_WARN_SECONDS``)."""


def _limit(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds (or inf), got {value!r}") \
            from None
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a number of seconds >= 0 (or inf), got {value!r}")
    return seconds


def max_seconds() -> float:
    """``NUMBAKERN_SIM_MAX_SECONDS``, or :data:`MAX_SECONDS`; ValueError if not a number."""
    return _limit("NUMBAKERN_SIM_MAX_SECONDS", MAX_SECONDS)


def warn_seconds() -> float:
    """``NUMBAKERN_SIM_WARN_SECONDS``, or :data:`WARN_SECONDS`; ValueError if not a number."""
    return _limit("NUMBAKERN_SIM_WARN_SECONDS", WARN_SECONDS)


def _blocks(grid) -> int:
    return math.prod(grid) if isinstance(grid, tuple) else int(grid)


def units(grid, block, args) -> tuple[int, int, int]:
    """``(units, CUDA threads, elements of the largest array argument)``."""
    threads = _blocks(grid) * _blocks(block)
    elements = 0
    for a in args:
        size = getattr(a, "size", None)
        if isinstance(size, int) and getattr(a, "ndim", 0):
            elements = size if size > elements else elements
    return threads + elements, threads, elements


def estimate(kernel, grid, block, args) -> float:
    """Seconds the simulator is expected to take on this launch (see the module)."""
    n = units(grid, block, args)[0]
    return n * _cost.get(id(kernel), PRIOR_SECONDS_PER_UNIT)


def _name(kernel) -> str:
    return getattr(kernel, "__name__", None) or type(kernel).__name__


def _advice(limit: float) -> str:
    return ("Run on a machine with a CUDA GPU (numbakern picks it by itself; "
            "NUMBAKERN_SIMULATOR=0 insists on one), use a smaller input, or raise the "
            f"limit: NUMBAKERN_SIM_MAX_SECONDS={limit:g} now, inf for none")


def _size(threads: int, elements: int, blocks: int) -> str:
    return (f"{blocks} block(s), {threads} CUDA threads, {elements} elements in its "
            "largest array")


class _Watch:
    """Per-block progress of one launch: the bar, the projection, the refusal."""

    def __init__(self, kernel, blocks: int, est: float, limit: float, warn: float,
                 size: str):
        self.kernel, self.blocks, self.est = kernel, blocks, est
        self.limit, self.warn, self.size = limit, warn, size
        self.start = time.perf_counter()
        self.done = 0
        self.bar = None
        if est > warn:
            self._say(est)

    def _say(self, seconds: float) -> None:
        warnings.warn(SimulatorSlowWarning(
            f"kernel {_name(self.kernel)} under the simulator: {self.size}; about "
            f"{seconds:.0f} s (NUMBAKERN_SIM_WARN_SECONDS={self.warn:g}). A GPU takes "
            "milliseconds; Ctrl-C stops the launch"),
            stacklevel=user_stacklevel())
        try:
            from rich.progress import Progress

            self.bar = Progress(transient=True)
            self.task = self.bar.add_task(f"simulating {_name(self.kernel)}",
                                          total=self.blocks, completed=self.done)
            self.bar.start()
        except Exception:  # no terminal to draw on, no rich: the warning said it
            self.bar = None

    def __call__(self) -> None:
        """After each block (from the launching thread)."""
        self.done += 1
        elapsed = time.perf_counter() - self.start
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done)
        if elapsed < MEASURE_AFTER_SECONDS or self.done >= self.blocks:
            return
        projected = elapsed / self.done * self.blocks
        if projected > self.limit:
            raise SimulatorTooSlow(
                f"kernel {_name(self.kernel)} under the simulator: {self.size}; measured "
                f"{elapsed:.1f} s for {self.done} of {self.blocks} blocks, about "
                f"{projected:.0f} s in all, over the limit. {_advice(self.limit)}")
        if self.bar is None and projected > self.warn:
            self._say(projected)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@contextlib.contextmanager
def guarded(kernel, grid, block, args):
    """Run a simulated launch inside: refused, announced and watched as the module
    says.

    Raises:
        SimulatorTooSlow: the estimate, or the projection from the blocks done, is
            over ``NUMBAKERN_SIM_MAX_SECONDS``.
        ValueError: a limit variable that is not a number of seconds.
    """
    from .simblock import _launching

    n, threads, elements = units(grid, block, args)
    blocks = _blocks(grid)
    est = n * _cost.get(id(kernel), PRIOR_SECONDS_PER_UNIT)
    limit, warn = max_seconds(), warn_seconds()
    size = _size(threads, elements, blocks)
    if est > limit:
        raise SimulatorTooSlow(
            f"kernel {_name(kernel)} under the simulator: {size}; estimated {est:.0f} s, over "
            f"the limit. {_advice(limit)}")
    watch = _Watch(kernel, blocks, est, limit, warn, size)
    before = getattr(_launching, "progress", None)
    _launching.progress = watch
    try:
        yield
    finally:
        _launching.progress = before
        watch.close()
    elapsed = time.perf_counter() - watch.start
    if n >= MIN_MEASURED_UNITS and elapsed >= MIN_MEASURED_SECONDS:  # else mostly overhead
        with _lock:
            _cost[id(kernel)] = elapsed / n
