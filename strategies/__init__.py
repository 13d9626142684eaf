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
    """What a strategy promises: for tables and for teaching.

    Returns:
        a dict with ``name`` (``"grid/block"``), ``deterministic``,
        ``needs_commutative`` (bools), ``threads`` and ``barriers_per_block`` (ints).
    """
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
        ValueError: an unknown name (the message lists the known ones); ``threads``
            not a multiple of 32 from 32 to 1024.
        TypeError: anything else; ``threads`` not an int.
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
    return _from_name(spec, GRID, BLOCK, "two_pass", "strategy", threads)


def _from_name(spec: str, grids: dict, blocks: dict, default_grid: str, what: str,
               threads: int | None):
    """A grid strategy from ``"grid/block"``, a grid name alone (block
    ``warp_shuffle``) or a block name alone (grid ``default_grid``)."""
    grid_name, slash, block_name = spec.partition("/")
    if slash and not block_name:  # "two_pass/": a block was meant and left out
        grid_name = ""
    if not block_name and grid_name in blocks:
        grid_name, block_name = default_grid, grid_name
    block_name = block_name or "warp_shuffle"
    if grid_name not in grids or block_name not in blocks:
        known = ", ".join(f"{g}/{b}" for g in grids for b in blocks)
        raise ValueError(
            f"unknown {what} {spec!r}; known: {known} "
            f"(or a grid name {sorted(grids)} or a block name {sorted(blocks)} alone)"
        )
    return grids[grid_name](block=blocks[block_name](threads))


__all__ = ["AtomicFold", "SharedTree", "TwoPass", "WarpShuffle", "available", "describe",
           "resolve", "GRID", "BLOCK"]


# --- scans ---------------------------------------------------------------------------
#
# A scan needs a block strategy with ``build_scan`` and a grid scan strategy:
#
# ========================  =====  =======================================================
# ``warp_shuffle``          block  Kogge-Stone shuffles in each warp, then over the warps
# ``hillis_steele``         block  Hillis-Steele steps in double-buffered shared memory
# ``blelloch``              block  work-efficient up-sweep and down-sweep, padded
# ``reduce_then_scan``      grid   chunk totals, their scan, then carried scans (determ.)
# ``decoupled_lookback``    grid   one pass; tiles look back at their predecessors' flags
# ========================  =====  =======================================================
#
# Named as for reductions: ``"grid/block"``, a grid name alone (block ``warp_shuffle``)
# or a block name alone (grid ``decoupled_lookback``, the default).

from numbakern.scan_tiles import ScanGrid  # noqa: E402

from .blelloch import Blelloch  # noqa: E402
from .decoupled_lookback import DecoupledLookback  # noqa: E402
from .hillis_steele import HillisSteele  # noqa: E402
from .reduce_then_scan import ReduceThenScan  # noqa: E402

SCAN_GRID = {cls.name: cls for cls in (DecoupledLookback, ReduceThenScan)}
SCAN_BLOCK = {cls.name: cls for cls in (WarpShuffle, HillisSteele, Blelloch)}


def available_scans() -> list[str]:
    """Every scan ``"grid/block"`` name, e.g. ``["decoupled_lookback/warp_shuffle", ...]``."""
    return [f"{g}/{b}" for g in SCAN_GRID for b in SCAN_BLOCK]


def resolve_scan(spec=None, threads: int | None = None) -> ScanGrid:
    """Turn a scan strategy spec into a :class:`~numbakern.scan_tiles.ScanGrid`.

    Args:
        spec: ``None`` (``decoupled_lookback/warp_shuffle``), a scan grid strategy, a
            block strategy with a block scan (run under ``decoupled_lookback``), or a
            name as above.
        threads: threads per block when ``spec`` is a name or ``None``.

    Raises:
        ValueError: an unknown name, or a reduction-only one (the message lists the
            scan strategies).
        TypeError: anything else, or a block strategy with no block scan.

    ``threads`` is checked as :func:`resolve` checks it.
    """
    if isinstance(spec, ScanGrid):
        return spec
    if isinstance(spec, BlockStrategy):
        return DecoupledLookback(block=spec)
    if spec is None:
        return DecoupledLookback(block=WarpShuffle(threads))
    if isinstance(spec, GridStrategy):
        raise TypeError(f"{spec!r} is a reduction strategy; scans take one of "
                        f"{', '.join(available_scans())}")
    if not isinstance(spec, str):
        raise TypeError(
            f"strategy must be a name such as 'decoupled_lookback/warp_shuffle', a scan "
            f"grid strategy or a block strategy, got {spec!r}"
        )
    return _from_name(spec, SCAN_GRID, SCAN_BLOCK, "decoupled_lookback", "scan strategy",
                      threads)


__all__ += ["Blelloch", "DecoupledLookback", "HillisSteele", "ReduceThenScan", "SCAN_BLOCK",
            "SCAN_GRID", "available_scans", "resolve_scan"]


# --- sorts and histograms --------------------------------------------------------------
#
# ========================  =========  ==================================================
# ``bitonic``               sort       bitonic network in one block per row (short rows)
# ``radix``                 sort       LSD radix sort: digit histograms, scan, scatter
# ``global_atomic``         histogram  one atomicAdd per element on global counters
# ``shared_privatized``     histogram  per-block counters in shared memory, then merged
# ``warp_privatized``       histogram  per-warp counters in shared memory, then merged
# ========================  =========  ==================================================

from .bitonic_sort import BitonicSort  # noqa: E402
from .global_atomic import GlobalAtomic  # noqa: E402
from .radix_sort import RadixSort  # noqa: E402
from .shared_privatized import SharedPrivatized  # noqa: E402
from .warp_privatized import WarpPrivatized  # noqa: E402

SORT = {cls.name: cls for cls in (BitonicSort, RadixSort)}
HISTOGRAM = {cls.name: cls for cls in (GlobalAtomic, SharedPrivatized, WarpPrivatized)}


def resolve_sort(spec=None, n: int = 0):
    """A sort strategy for rows of ``n`` elements.

    ``None``: :class:`BitonicSort` when a row fits in one block, else
    :class:`RadixSort`; a name in ``SORT``; or a strategy object (anything with
    ``sort(job)`` and ``fits(n)``). Raises ``ValueError`` for an unknown name,
    ``TypeError`` for anything else.
    """
    if spec is None:
        bitonic = BitonicSort()
        return bitonic if bitonic.fits(n) else RadixSort()
    if isinstance(spec, (BitonicSort, RadixSort)):
        return spec
    if isinstance(spec, str):
        if spec not in SORT:
            raise ValueError(f"unknown sort strategy {spec!r}; known: {', '.join(SORT)}")
        return SORT[spec]()
    raise TypeError(f"strategy must be None, one of {sorted(SORT)} or a BitonicSort or "
                    f"RadixSort, got {spec!r}")


def resolve_histogram(spec=None, bins: int = 1):
    """A histogram strategy for ``bins`` bins.

    ``None``: ``shared_privatized`` when one copy of the counters per block fits in
    shared memory, else ``global_atomic`` (``warp_privatized`` measured 2-3% slower
    on an H200, bench/NOTES.md 2026-12-01);
    a name in ``HISTOGRAM``; or a strategy object. Raises ``ValueError`` for an
    unknown name, ``TypeError`` for anything else.
    """
    from numbakern.counting import HistogramStrategy

    if spec is None:
        return SharedPrivatized() if SharedPrivatized().fits(bins) else GlobalAtomic()
    if isinstance(spec, HistogramStrategy):
        return spec
    if isinstance(spec, str):
        if spec not in HISTOGRAM:
            raise ValueError(f"unknown histogram strategy {spec!r}; known: "
                             f"{', '.join(HISTOGRAM)}")
        return HISTOGRAM[spec]()
    raise TypeError(f"strategy must be None, one of {sorted(HISTOGRAM)} or a histogram "
                    f"strategy object, got {spec!r}")


__all__ += ["BitonicSort", "GlobalAtomic", "HISTOGRAM", "RadixSort", "SORT",
            "SharedPrivatized", "WarpPrivatized", "resolve_histogram", "resolve_sort"]
