"""One reduction in flight: the input view, the op's state kit, and where to allocate.

Grid strategies receive a :class:`ReduceJob` and ask it for what they need (a grid
size, the element loader, state arrays), so that they stay about *how* blocks
combine.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from . import kernels
from .arrays import SIMULATOR, Workspace
from .launch import current_device_id
from .strategy import ceil_div

# Under the simulator every block costs ~0.1 s of Python threads: two are enough to
# exercise the grid-level combine.
SIMULATOR_MAX_BLOCKS = 2


@functools.lru_cache(maxsize=None)
def _multiprocessors(device_id: int) -> int:
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def max_resident_blocks(threads: int) -> int:
    """Blocks that fill the device once (2048 threads per multiprocessor on sm_70+)."""
    if SIMULATOR:
        return SIMULATOR_MAX_BLOCKS
    return _multiprocessors(current_device_id()) * max(1, 2048 // threads)


class ReduceJob:
    """Reduce ``n`` elements of ``x`` (a 1-D or 2-D device view) with ``op``.

    Attributes:
        x, n, op, kit: the input, its element count, the op and its state kit.
        ordered: keep element order (a non-commutative op).
        stream: the Numba stream every launch goes to.
    """

    def __init__(self, x, n: int, op, kit, ordered: bool, workspace: Workspace):
        self.x = x
        self.n = np.int64(n)
        self.op = op
        self.kit = kit
        self.ordered = ordered
        self.workspace = workspace
        self.stream = workspace.stream
        self.vector = kernels.vector_width(x, ordered)
        self.key = (op, kit.dtypes, x.ndim, np.dtype(x.dtype).str, ordered,
                    kernels.device_key())  # a first pass's kernel key adds self.vector

    def grid_blocks(self, requested: int | None, threads: int) -> int:
        """``requested`` (at most one a element: more would have nothing to read), or
        enough blocks to fill the device once (fewer for small n)."""
        if requested is not None:
            return max(1, min(requested, int(self.n)))
        want = ceil_div(int(self.n), threads * kernels.UNROLL)
        return max(1, min(want, max_resident_blocks(threads)))

    def element_loader(self):
        """Device function ``load(a0, a1, i) -> state`` for this input."""
        key = ("load", self.op, self.kit.dtypes, self.x.ndim)
        return kernels.cached(key, lambda: kernels.element_loader(self.op, self.kit, self.x.ndim))

    def vector_reader(self):
        """``(width, to_state)`` for a first pass that reads ``x`` in vectors, or None
        (see :func:`numbakern.kernels.vector_width`)."""
        if not self.vector:
            return None
        key = ("to_state", self.op, self.kit.dtypes)
        return self.vector, kernels.cached(
            key, lambda: kernels._element_to_state(self.op, self.kit))

    def alloc_state(self, k: int) -> tuple:
        """Two arrays of ``k`` states (one per field; one-field states repeat the first,
        which the kit never touches as a second field)."""
        first = self.workspace.empty(k, self.kit.dtypes[0])
        if self.kit.fields == 1:
            return first, first
        return first, self.workspace.empty(k, self.kit.dtypes[1])
