"""Sort, then slice: the reference top-k.

The lesson
----------
The ``k`` largest elements of a row are the first ``k`` of the row sorted in
descending order, so the simplest top-k is a sort followed by a slice:

1. **Argsort every row** (a stable one, in the wanted order: descending for the
   largest, NaN first, as ``torch.sort(descending=True, stable=True)``; ascending
   for the smallest). Stability is the ties rule: among equal values the lower
   index comes first, so the answer is one answer, not one of several.
2. **Keep the first ``k`` positions** of each row's order and gather their values
   (``numbakern/kernels/take_rows.py``).

It does ``O(n log n)`` work for ``O(n)`` worth of answer (``n / k`` times more
than a selection needs when ``k`` is small), and writes the whole order, ``8 n``
bytes, to read ``8 k`` of it. Yet it is the yardstick every selection is checked
against, and on short rows or large ``k`` it is competitive: pytorch/pytorch#22812
found ``sort()[:k]`` beating ``torch.topk`` for large ``k``. The sort is any sort
strategy (``strategies/bitonic_sort.py`` for rows that fit a block, else
``strategies/radix_sort.py``), so every sort that numbakern gains serves it too.
The output is always in order (``sorted=False`` changes nothing).
"""

from __future__ import annotations

import numpy as np

from numbakern.kernels.take_rows import take_rows
from numbakern.runtime.device import ceil_div, max_resident_blocks
from numbakern.runtime.launch import launch

from .protocols import SelectStrategy, check_threads
from .registry import resolve


class SortSlice(SelectStrategy):
    """Stable argsort of every row, then its first ``k``: the reference strategy.

    PyTorch's ``topk_out_with_sort`` (``aten/src/ATen/native/cuda/TensorTopK.cpp``):
    ``torch.topk``'s sort-then-narrow path, here with a stable sort.

    Args:
        threads: threads per block of the gather (and of the sort, when ``sort`` is
            a name or ``None``; ``None``: the sort's own default, e.g. the radix
            sort's tile shapes by key width).
        sort: the sort strategy: ``None`` (bitonic for rows that fit one block, else
            radix, as ``numbakern.argsort``), a name or a sort strategy object.

    Output rows are sorted whatever ``job.sorted`` asks. Launches: the sort's, plus
    one gather. Memory: an int64 order of the whole input.

    Raises:
        ValueError: ``threads`` not a multiple of 32 from 32 to 1024; an unknown sort.
        TypeError: ``threads`` not an int (a float or a bool) or None; ``sort`` not a
            sort strategy.
    """

    name = "sort_slice"

    def __init__(self, threads: int | None = None, sort=None):
        self.threads = check_threads(threads)
        self.sort_threads = threads  # None: each sort's own default
        if sort is not None:
            sort = resolve("sort", sort, threads=threads, argument="sort")
        self.sorter = sort

    @property
    def key(self) -> tuple:
        return (type(self), self.threads, self.sort_threads,
                None if self.sorter is None else self.sorter.key)

    def __repr__(self) -> str:
        sort = "" if self.sorter is None else f", sort={self.sorter!r}"
        return f"SortSlice(threads={self.threads}{sort})"

    def select(self, job) -> None:
        sorter = self.sorter or resolve("sort", None, threads=self.sort_threads, n=job.n)
        order = job.workspace.empty(job.rows * job.n, np.int64)
        job.argsort(job.x, order, job.rows, job.n, sorter)
        total = job.rows * job.k
        blocks = max(1, min(ceil_div(total, self.threads), 4 * max_resident_blocks(self.threads)))
        launch(take_rows, blocks, self.threads, job.stream, job.x, job.n, order, job.n, order,
               0, job.k, total, job.values, job.indices)
