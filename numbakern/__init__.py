"""numbakern: Numba-CUDA reductions, scans and softmax with pluggable strategies.

Importing numbakern first chooses where kernels run (a real GPU, or Numba's CUDA
simulator on a machine without one: see :func:`backend`), and under the simulator
installs the warp intrinsics the simulator lacks.
"""

from . import _backend

try:
    _USE_SIMULATOR, _REASON = _backend.select()
except _backend.BackendError as _error:
    if _backend.running_the_command():  # one line for the command's user, not a traceback
        raise SystemExit(f"Error: {_error}") from None
    raise

from numba import cuda  # noqa: E402  (only after the backend is chosen)

if _USE_SIMULATOR:
    from . import simulator as _simulator  # noqa: E402

    _simulator.install()

from ._backend import Backend, BackendError  # noqa: E402

_BACKEND: Backend | None = None


def backend() -> Backend:
    """Say where numbakern's kernels run.

    Returns:
        a :class:`Backend`: ``kind`` is ``"cuda"`` or ``"simulator"``, with the
        device's name and compute capability (``None`` under the simulator) and the
        reason for the choice. Set ``NUMBAKERN_SIMULATOR=1`` to force the simulator,
        ``=0`` to forbid it (then importing numbakern raises :class:`BackendError`
        when no GPU is usable).
    """
    global _BACKEND
    if _BACKEND is None:
        _BACKEND = _backend.describe(_USE_SIMULATOR, _REASON)
    return _BACKEND


from . import strategies  # noqa: E402
from .ops import Op, op  # noqa: E402
from .reductions import (  # noqa: E402
    bitwise_and_sum,
    bitwise_or_sum,
    max,
    mean,
    min,
    prod,
    reduce,
    sum,
    xor_sum,
)
from .strategies import AtomicFold, SharedTree, TwoPass, WarpShuffle  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AtomicFold", "Backend", "BackendError", "Op", "SharedTree", "TwoPass", "WarpShuffle",
    "backend", "bitwise_and_sum", "bitwise_or_sum", "max", "mean", "min", "op", "prod",
    "reduce", "strategies", "sum", "xor_sum",
]

# Value-index reductions (issue 4: axes, keepdims, out=, argmax/argmin).
from .reductions import argmax, argmin, max_with_indices, min_with_indices  # noqa: E402

__all__ += ["argmax", "argmin", "max_with_indices", "min_with_indices"]

# Scans (issue 6: cumsum, cumprod, associative_scan; scan strategies).
from .scans import associative_scan, cumprod, cumsum  # noqa: E402
from .strategies import Blelloch, DecoupledLookback, HillisSteele, ReduceThenScan  # noqa: E402

__all__ += ["associative_scan", "cumprod", "cumsum", "Blelloch", "DecoupledLookback",
            "HillisSteele", "ReduceThenScan"]

# Softmax (issue 5: softmax, log-softmax and their backward passes, any axis).
from .softmax import log_softmax, log_softmax_backward, softmax, softmax_backward  # noqa: E402

__all__ += ["log_softmax", "log_softmax_backward", "softmax", "softmax_backward"]

# Sort, argsort and histograms (issue 7: bitonic and radix sorts; histogram strategies).
from .histogram import bincount, histogram, histogram_counts  # noqa: E402
from .sort import argsort, sort  # noqa: E402
from .strategies import (  # noqa: E402
    BitonicSort,
    GlobalAtomic,
    RadixSort,
    SharedPrivatized,
    WarpPrivatized,
)

__all__ += ["argsort", "bincount", "histogram", "histogram_counts", "sort", "BitonicSort",
            "GlobalAtomic", "RadixSort", "SharedPrivatized", "WarpPrivatized"]
