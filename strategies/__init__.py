"""Strategies: how threads, blocks and tiles combine, one algorithm per file.

Installed as ``numbakern.strategies``. Each module is one algorithm, written to be
read on its own as a lesson; ``protocols.py`` states each family's contract. The
registry below lists them by family; :func:`resolve` turns a name (or an object) into
a strategy and :func:`available` lists the names.

=========================  =========  ======================================================
``warp_shuffle``           block      shuffle tree in each warp, then one warp over the totals
``shared_tree``            block      shared-memory tree, sequential addressing (commutative)
``hillis_steele``          block      Hillis-Steele steps in double-buffered shared memory
``blelloch``               block      work-efficient up-sweep and down-sweep, padded
``two_pass``               reduce     per-block partials, then a second pass (deterministic)
``atomic_fold``            reduce     one launch, blocks fold into the output atomically
``reduce_then_scan``       scan       chunk totals, their scan, then carried scans (determ.)
``decoupled_lookback``     scan       one pass; tiles look back at their predecessors' flags
``global_atomic``          histogram  one atomicAdd per element on global counters
``shared_privatized``      histogram  per-block counters in shared memory, then merged
``warp_privatized``        histogram  per-warp counters in shared memory, then merged
``bitonic``                sort       bitonic network in one block per row (short rows)
``radix``                  sort       Onesweep LSD radix sort: digit histograms, scan, scatter
``radix_block_select``     select     a block per row: 11-bit radix select in shared memory, sort
``bitonic_select``         select     a block per row: filter, bitonic merges into a sorted top-k
``radix_select``           select     the k-th key digit by digit (histogram, scan), then gather
``sort_slice``             select     stable argsort of the row, then its first k (the reference)
``online_softmax``         (an op)    the (max, scaled sum) pair the online softmax reduces
=========================  =========  ======================================================

Reductions and scans are named ``"grid/block"`` (``"atomic_fold/shared_tree"``), by
a grid name alone (block ``warp_shuffle``) or a block name alone (the family's default
grid: ``two_pass`` for reductions, ``decoupled_lookback`` for scans). A strategy of
your own is one class and one line: ``register(MyBlock)``.
"""

from __future__ import annotations

from .atomic_fold import AtomicFold
from .bitonic_select import BitonicSelect
from .bitonic_sort import BitonicSort
from .blelloch import Blelloch
from .decoupled_lookback import DecoupledLookback
from .global_atomic import GlobalAtomic
from .hillis_steele import HillisSteele
from .protocols import (BlockStrategy, GridReduce, GridScan, GridStrategy, HistogramStrategy,
                        SelectStrategy, SortStrategy, Strategy)
from .radix_block_select import RadixBlockSelect
from .radix_select import RadixSelect
from .radix_sort import RadixSort
from .reduce_then_scan import ReduceThenScan
from .registry import (FAMILIES, REGISTRY, available, available_scans, block_names, describe,
                       every, register, resolve, resolve_histogram, resolve_scan,
                       resolve_sort, unregister)
from .shared_privatized import SharedPrivatized
from .shared_tree import SharedTree
from .sort_slice import SortSlice
from .two_pass import TwoPass
from .warp_privatized import WarpPrivatized
from .warp_shuffle import WarpShuffle

for _cls in (WarpShuffle, SharedTree, HillisSteele, Blelloch, TwoPass, AtomicFold,
             DecoupledLookback, ReduceThenScan, SharedPrivatized, WarpPrivatized,
             GlobalAtomic, BitonicSort, RadixSort, RadixBlockSelect, BitonicSelect,
             RadixSelect, SortSlice):
    register(_cls)

__all__ = ["AtomicFold", "BitonicSelect", "BitonicSort", "Blelloch", "BlockStrategy",
           "DecoupledLookback", "FAMILIES", "GlobalAtomic", "GridReduce", "GridScan",
           "GridStrategy", "HillisSteele", "HistogramStrategy", "REGISTRY",
           "RadixBlockSelect", "RadixSelect", "RadixSort", "ReduceThenScan",
           "SelectStrategy", "SharedPrivatized", "SharedTree", "SortSlice", "SortStrategy",
           "Strategy", "TwoPass", "WarpPrivatized", "WarpShuffle", "available",
           "available_scans", "block_names", "describe", "every", "register", "resolve",
           "resolve_histogram", "resolve_scan", "resolve_sort", "unregister"]
