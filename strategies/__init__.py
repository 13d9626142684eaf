"""Strategies: how the threads of a block, and the blocks of a grid, combine values.

Installed as ``numbakern.strategies``. Each module is one algorithm, written to be
read on its own as a lesson:

========================  =====  =========================================================
``warp_shuffle``          block  shuffle tree in each warp, then one warp over the totals
``shared_tree``           block  shared-memory tree, sequential addressing (commutative)
``two_pass``              grid   per-block partials, then a one-block launch (deterministic)
``atomic_fold``           grid   one launch, blocks fold into the output atomically
========================  =====  =========================================================

A strategy is named by ``"grid/block"`` (``"atomic_fold/shared_tree"``), by a grid
name alone (block ``warp_shuffle``) or a block name alone (grid ``two_pass``).
"""

from __future__ import annotations

from numbakern.strategy import BlockStrategy, GridStrategy

from .atomic_fold import AtomicFold
from .shared_tree import SharedTree
from .two_pass import TwoPass
from .warp_shuffle import WarpShuffle

GRID = {cls.name: cls for cls in (TwoPass, AtomicFold)}
BLOCK = {cls.name: cls for cls in (WarpShuffle, SharedTree)}


def available() -> list[str]:
    """Every ``"grid/block"`` name, e.g. ``["two_pass/warp_shuffle", ...]``."""
    return [f"{g}/{b}" for g in GRID for b in BLOCK]


def describe(strategy: GridStrategy) -> dict:
    """What a strategy promises: for tables and for teaching."""
    return {
        "name": strategy.label,
        "deterministic": strategy.deterministic,
        "needs_commutative": strategy.commutative_required,
        "threads": strategy.block.threads,
        "barriers_per_block": strategy.block.barriers(),
    }


def resolve(spec=None, threads: int | None = None) -> GridStrategy:
    """Turn a strategy spec into a :class:`GridStrategy`.

    Args:
        spec: ``None`` (the default, ``two_pass/warp_shuffle``), a grid strategy, a
            block strategy (run under ``two_pass``), or a name as above.
        threads: threads per block when ``spec`` is a name or ``None``.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
        TypeError: anything else.
    """
    if isinstance(spec, GridStrategy):
        return spec
    if isinstance(spec, BlockStrategy):
        return TwoPass(block=spec)
    if spec is None:
        return TwoPass(block=WarpShuffle(threads))
    if not isinstance(spec, str):
        raise TypeError(
            f"strategy must be a name such as 'two_pass/warp_shuffle', a GridStrategy or "
            f"a BlockStrategy, got {spec!r}"
        )
    grid_name, _, block_name = spec.partition("/")
    if not block_name and grid_name in BLOCK:
        grid_name, block_name = "two_pass", grid_name
    block_name = block_name or "warp_shuffle"
    if grid_name not in GRID or block_name not in BLOCK:
        raise ValueError(
            f"unknown strategy {spec!r}; known: {', '.join(available())} "
            f"(or a grid name {sorted(GRID)} or a block name {sorted(BLOCK)} alone)"
        )
    return GRID[grid_name](block=BLOCK[block_name](threads))


__all__ = ["AtomicFold", "SharedTree", "TwoPass", "WarpShuffle", "available", "describe",
           "resolve", "GRID", "BLOCK"]
