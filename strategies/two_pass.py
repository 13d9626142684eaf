"""Two-pass grid reduce: each block writes a partial, a second launch reduces them.

The lesson
----------
Blocks of one launch cannot wait for each other, so the simplest way to combine
them is to let the launch end:

1. **Pass 1.** ``G`` blocks each reduce their share of the input (grid-strided, see
   ``numbakern/kernels.py``) with the block strategy, and thread 0 writes the
   block's state to ``partials[blockIdx.x]``.
2. **Pass 2.** One block reduces the ``G`` partials, in block order, with the same
   block strategy, and writes the result. (Skipped when ``G == 1``.)

``G`` depends only on the input size and the device, never on timing, and every
combine happens in a fixed tree: the result is **bitwise identical run to run**, and
element order is kept, so non-commutative ops work with an order-preserving block
strategy (``warp_shuffle``).

Cost: two launches and ``G`` states written and read back, a few kilobytes against
the input's gigabytes. This is numbakern's default: deterministic and, with ``G``
a few blocks per multiprocessor, as fast as one pass.
"""

from __future__ import annotations

from numba import cuda

from numbakern import kernels
from numbakern.launch import launch
from numbakern.strategy import Cost, GridStrategy


class TwoPass(GridStrategy):
    """Grid reduce by per-block partials and a second one-block launch.

    Args:
        block: the block strategy (default ``WarpShuffle()``).
        blocks: blocks in pass 1; ``None`` chooses from the input size and device.

    Deterministic; order-preserving (non-commutative ops allowed if the block
    strategy preserves order).

    Raises:
        TypeError: ``block`` not a :class:`~numbakern.strategy.BlockStrategy`.
        ValueError: ``blocks`` not a positive int or ``None``.
    """

    name = "two_pass"
    deterministic = True
    needs_commutative = False

    def reduce(self, job):
        """Reduce ``job.x`` to one state; returns the field arrays (length 1)."""
        threads = self.block.threads
        blocks = job.grid_blocks(self.blocks, threads)
        load_x = job.element_loader()
        first = self._kernel(job, "x", load_x)
        if blocks == 1:
            out = job.alloc_state(1)
            launch(first, 1, threads, job.stream, job.x, out[1], job.n, *out)
            return out
        partials = job.alloc_state(blocks)
        launch(first, blocks, threads, job.stream, job.x, partials[1], job.n, *partials)
        out = job.alloc_state(1)
        second = self._kernel(job, "partials", job.kit.load)
        launch(second, 1, threads, job.stream, *partials, blocks, *out)
        return out

    def _kernel(self, job, source: str, load):
        key = ("two_pass", source, self.block.key, job.key,
               job.vector if source == "x" else 0)
        return kernels.cached(
            key,
            lambda: kernels.build_reduce_kernel(
                self.block, job.kit, load, _write_partial(job.kit), job.ordered,
                job.vector_reader() if source == "x" else None,
            ),
        )

    def cost(self, n: int, itemsize: int, state_bytes: int, blocks: int) -> Cost:
        if blocks == 1:
            return Cost(1, n * itemsize, state_bytes, 0)
        return Cost(2, n * itemsize + blocks * state_bytes, (blocks + 1) * state_bytes, 0)


def _write_partial(kit):
    store = kit.store

    @cuda.jit(device=True)
    def emit(o0, o1, s):
        if cuda.threadIdx.x == 0:
            store(o0, o1, cuda.blockIdx.x, s)

    return emit
