"""Two-pass grid reduce: each block writes a partial, a second launch reduces them.

The lesson
----------
Blocks of one launch cannot wait for each other, so the simplest way to combine
them is to let the launch end:

1. **Pass 1.** ``G`` blocks each reduce their share of the input (grid-strided, see
   ``numbakern/kernels/flat_reduce.py``) with the block strategy, and thread 0 writes
   the block's state to ``partials[blockIdx.x]``.
2. **Pass 2.** One block reduces the ``G`` partials, in block order, with the same
   block strategy, and writes the result. (Skipped when ``G == 1``.)

The same two passes serve many outputs at once (an axis reduction): when too few
rows fill the device, each row is cut into pieces, every piece writes a partial,
and the second pass reduces each row's partials (``numbakern/kernels/axis_reduce.py``
lays them out so that it reads them coalesced).

``G`` depends only on the input size and the device, never on timing, and every
combine happens in a fixed tree: the result is **bitwise identical run to run**, and
element order is kept, so non-commutative ops work with an order-preserving block
strategy (``warp_shuffle``).

Cost: two launches and ``G`` states written and read back, a few kilobytes against
the input's gigabytes. This is numbakern's default: deterministic and, with ``G``
a few blocks per multiprocessor, as fast as one pass.
"""

from __future__ import annotations

from .protocols import Cost, GridReduce


class TwoPass(GridReduce):
    """Grid reduce by per-block partials and a second one-block launch.

    Harris, "Optimizing Parallel Reduction in CUDA" (NVIDIA, 2007): a launch per
    level of partials; CUB's ``DeviceReduce`` (``DeviceReduceKernel``, then
    ``DeviceReduceSingleTileKernel`` over the partials).

    Args:
        block: the block strategy (default ``WarpShuffle()``).
        blocks: blocks in pass 1; ``None`` chooses from the input size and device.

    Deterministic; order-preserving (non-commutative ops allowed if the block
    strategy preserves order).

    Raises:
        TypeError: ``block`` not a :class:`~numbakern.strategies.BlockStrategy`;
            ``blocks`` not an int (a float or a bool) or ``None``.
        ValueError: ``blocks`` an int below 1 or past ``2**31 - 1`` (a grid's most
            blocks).
    """

    name = "two_pass"
    deterministic = True
    needs_commutative = False

    def reduce(self, job) -> tuple:
        """Reduce every output of ``job`` (``strategies/protocols.py``, ``GridReduce``);
        returns the field arrays."""
        plan = job.plan(self)
        if plan.pieces == 1:  # one block per output: nothing to meet
            return job.store(plan)
        partials = job.alloc_state(job.outputs * plan.pieces)
        job.run(plan, job.emit_partial(plan), partials)
        return job.reduce_partials(plan, partials)

    def cost(self, n: int, itemsize: int, state_bytes: int, blocks: int) -> Cost:
        if blocks == 1:
            return Cost(1, n * itemsize, state_bytes, 0)
        return Cost(2, n * itemsize + blocks * state_bytes, (blocks + 1) * state_bytes, 0)
