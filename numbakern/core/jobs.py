"""Jobs: one operation in flight, as a strategy receives it.

A strategy is about *how* threads and blocks combine; everything else about the call
(the input as device views, the op's state kit, where to allocate, which stream, the
kernel pieces that depend on the layout) reaches it through a job, and the strategy
asks the job for what it needs. There is one job per family: :class:`ReduceJob`,
:class:`ScanJob`, :class:`SortJob`, :class:`HistogramJob` and :class:`SelectJob`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from numbakern.core.arrays import Workspace
from numbakern.kernels.elementwise import zeros
from numbakern.kernels.emits import emit_store
from numbakern.kernels.scan_tiles import element_loader as scan_element_loader
from numbakern.kernels.scan_tiles import NO_CARRY, output_storer
from numbakern.kernels.scan_tiles import tile_vectors as scan_tile_vectors
from numbakern.kernels.segment_scan import head_loader
from numbakern.kernels.sort_keys import bits_dtype, build_to_key, emitter, is_bfloat16, key_name
from numbakern.ops import SUM
from numbakern.ops.state import state_kit
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.views import strided

INT64 = np.dtype(np.int64)


def alloc_states(workspace: Workspace, kit, shape) -> tuple:
    """The ``(h0, h1)`` handles of device arrays of ``shape`` states, one array per
    field (``kit.pack``: one-field states repeat the first array, which the kit never
    touches as a second field; ``N >= 3`` fields travel as a tuple)."""
    return kit.pack(workspace.empty(shape, d) for d in kit.dtypes)


class Finish(NamedTuple):
    """A reduction's last step folded into its store: ``emit`` (an
    ``numbakern.kernels.emits.Emit`` that writes a finished value from a whole
    output's state, ``numbakern/kernels/finishes.py``) and the ``out`` pair it is
    handed as ``(o0, o1)``: the result array and a scalar argument."""

    emit: object
    out: tuple


class ReduceJob:
    """One reduction in flight: ``outputs`` results, each the combine of ``count``
    elements, laid out by ``layout`` (``numbakern/kernels``: ``FlatReduce`` for a whole
    array, ``AxisReduce`` for rows and columns, ``TinyRows``).

    A grid strategy (``strategies/protocols.py``, ``GridReduce``) asks it for the first
    pass (:meth:`plan`, :meth:`run`) and for what goes between the pieces of an output
    (:meth:`store`, :meth:`emit_partial`, :meth:`reduce_partials`), so that it
    stays about *how* pieces meet, whatever the layout.

    A job may carry a ``finish`` (a :class:`Finish`): the caller's last step
    (a mean's divide, a variance's ``M2 / (count - ddof)``,
    ``numbakern/kernels/finishes.py``), which the pass that stores whole outputs then
    does itself, writing finished values instead of states: one launch fewer.
    ``finished`` tells the caller whether that happened (a strategy that ends
    otherwise, an atomic fold's words, returns the states, which the caller finishes
    apart).

    Attributes:
        op, kit: the op and its state kit; ``workspace``, ``stream``: where
            allocations and launches go; ``finish``, ``finished``: above.
    """

    def __init__(self, layout, op, kit, workspace: Workspace, finish=None):
        self.layout = layout
        self.op = op
        self.kit = kit
        self.workspace = workspace
        self.stream = workspace.stream
        self.outputs = layout.outputs
        self.count = layout.count
        # only layouts whose storing passes take an emit can fold a finish
        self.finish = finish if getattr(layout, "finishes", False) else None
        self.finished = False

    def plan(self, grid):
        """The first pass for ``grid``'s block strategy and block count: its
        ``pieces`` per output."""
        return self.layout.plan(grid.block, grid.blocks)

    def run(self, plan, emit, out) -> None:
        """Run the first pass, each piece's state handed to ``emit`` (an
        ``numbakern.kernels.emits.Emit``), which writes ``out``."""
        self.layout.run(plan, emit, out, self.stream)

    def store(self, plan) -> tuple:
        """Run a first pass of one piece per output, each storing its output; returns
        the field arrays (with a :class:`Finish`, its ``out``, finished)."""
        if self.finish is not None:
            self.run(plan, self.finish.emit, self.finish.out)
            self.finished = True
            return self.finish.out
        out = self.alloc_state(self.outputs)
        self.run(plan, emit_store(self.kit), out)
        return out

    def emit_partial(self, plan):
        """The emit that writes ``outputs * plan.pieces`` partial states."""
        return self.layout.emit_partial(plan)

    def reduce_partials(self, plan, partials) -> tuple:
        """A second pass: each output's partials reduced with the plan's block
        strategy; returns the field arrays. A layout whose first pass already wrote
        every result among the partials (``results_among_partials``) needs none."""
        held = getattr(self.layout, "results_among_partials", None)
        if held is not None:
            return held(plan, partials)
        if self.finish is not None:
            self.layout.reduce_partials(plan, partials, self.finish.out, self.stream,
                                        self.finish.emit)
            self.finished = True
            return self.finish.out
        out = self.alloc_state(self.outputs)
        self.layout.reduce_partials(plan, partials, out, self.stream)
        return out

    def alloc_state(self, k: int) -> tuple:
        """Two arrays of ``k`` states (:func:`alloc_states`)."""
        return alloc_states(self.workspace, self.kit, k)


class ScanJob:
    """One scan in flight: what grid scan strategies are given.

    Attributes:
        x: the input as a 3-D device view ``(A, B, n)``: ``A*B`` segments of ``n``
            elements (last stride negative for a reverse scan).
        sources: the pair of 3-D views a kernel hands the element loader as
            ``(row0, row1)``: ``(x, x)``, or ``x`` and a second input of its shape
            that the loader reads too (a segmented scan's head flags). Strategies
            launch with ``*job.sources``, never ``x`` twice.
        outs: the outputs, one 3-D view per state field (one in all for an op with a
            ``finish``), laid out as ``x``, as the handles ``(h0, h1)`` of
            ``numbakern/ops/state.py`` (``rows_of(out_fields)`` takes a row of them).
        out_fields: how many output arrays there are.
        n, segments: elements per segment, number of segments.
        op, kit: the op and its state kit.
        exclusive, reverse: the scan's direction and kind.
        empty: the state an exclusive scan writes first (the combine of nothing).
        narrow: None, or a device function writing the first output's values (a
            bfloat16 result written as its bits: ``kernels.bfloat16.narrower()``).
        carry: None, or the initial carry: a 1-D C-contiguous device view of
            ``segments`` values (one-field states only), segment ``s``'s at ``s``, read
            as a state (``kernels.scan_tiles.carry_reader``) and combined on the left
            of every output of its segment. Strategies that take one say so
            (``GridScan.takes_carry``); kernels receive :attr:`carry_arg`.
        stream, workspace: where launches go and allocations come from.
    """

    #: whether its element loader reads one element alone (a vector tile can then
    #: load the elements it reads: :meth:`tile_vectors`)
    vector_loads = True

    def __init__(self, x, outs, op, kit, exclusive: bool, reverse: bool, empty: tuple,
                 workspace: Workspace, second=None, narrow=None, carry=None):
        self.x = x
        self.narrow = narrow
        self.carry = carry
        self.sources = (x, x if second is None else second)
        self.out_fields = len(outs)
        self._outs = tuple(outs)
        self.outs = (outs if len(outs) == 2 else (outs[0], outs[0]) if len(outs) == 1 else
                     (tuple(outs), outs[0]))  # the handles of numbakern/ops/state.py
        a, b, n = x.shape
        self.n = int(n)
        self.segments = int(a) * int(b)
        self.op = op
        self.kit = kit
        self.exclusive = exclusive
        self.reverse = reverse
        self.empty = empty
        self.workspace = workspace
        self.stream = workspace.stream
        out_dtypes = tuple(np.dtype(o.dtype).str for o in outs)
        empty_bits = tuple(np.asarray(v).tobytes() for v in empty)  # NaN-safe
        # the kit, not only its dtypes: a kit that widens bfloat16 bits reads uint16
        # input as no other kit does
        carried = None if carry is None else np.dtype(carry.dtype).str
        self.key = (op, kit, np.dtype(x.dtype).str, out_dtypes, exclusive, reverse,
                    empty_bits, narrow, carried, device_key())

    @property
    def carried(self) -> bool:
        return self.carry is not None

    @property
    def carry_arg(self):
        """The kernels' carry argument: the carry, or ``NO_CARRY`` (never read)."""
        return NO_CARRY if self.carry is None else self.carry

    @property
    def state_bytes(self) -> int:
        return sum(d.itemsize for d in self.kit.dtypes)

    @property
    def value_bytes(self) -> int | None:
        """The bytes that size a tile's items (``scan_tiles.auto_items``): the input's
        element where a one-field state widens it (int32 summed in int64: 16 items a
        thread, as int32's, not the 8 of 8-byte states); else None, the whole state's."""
        width = np.dtype(self.x.dtype).itemsize
        return width if self.kit.fields == 1 and width < self.state_bytes else None

    def element_loader(self):
        """Device function ``load(row0, row1, j, n) -> state`` for the input."""
        key = ("scan_load", self.op, self.kit, self.reverse)
        return cached(key, lambda: scan_element_loader(self.kit, self.reverse))

    def output_storer(self):
        """Device function ``store(row0, row1, j, state)`` for the outputs."""
        finish = self.op.finish and self.op.device_finish()
        dtypes = tuple(np.dtype(o.dtype) for o in self._outs[:1 if finish else self.kit.fields])
        fields = self.kit.fields
        key = ("scan_store", tuple(d.str for d in dtypes), finish, fields, self.narrow)
        return cached(key, lambda: output_storer(dtypes, finish, fields, self.narrow))

    def alloc_states(self, shape) -> tuple:
        """Two device arrays of ``shape`` states (:func:`alloc_states`)."""
        return alloc_states(self.workspace, self.kit, shape)

    def tile_vectors(self, block, items: int, hold: str = "shared"):
        """How a tile of ``block.threads * items`` holding its prefixes as ``hold``
        says moves this job's elements: a ``scan_tiles.Vectors`` (16-byte loads and
        stores) or None (scalars). Vectors take a plain one-field scan (no finish, no
        bfloat16 narrowing, the element loader of :meth:`element_loader`, a map that
        reads no index: a vector's elements are mapped without theirs) of rows the
        views allow (``scan_tiles.tile_vectors``)."""
        plain = (self.vector_loads and self.out_fields == 1 and self.op.finish is None
                 and self.narrow is None and not self.op.reads_index)
        return scan_tile_vectors(self.x, self._outs[0], self.kit, block, items, plain, hold)

    def zeros(self, k: int, dtype):
        """A zeroed 1-D device array (a look-back's status flags)."""
        return zeros(self.workspace, k, dtype)


class SegmentedScanJob(ScanJob):
    """A scan restarted at each segment head: ``op`` is a one-field op lifted by
    ``numbakern.ops.segmented.segmented`` and ``heads`` (a uint8 view of ``x``'s shape,
    the second source) marks where segments start (for a reverse scan, where they
    end: the reversed view's starts). ``exclusive`` is made by the loader, which
    shifts each segment by one (``numbakern/kernels/segment_scan.py``); the strategy
    sees an inclusive scan. ``inner``: the kit of the op before lifting, which turns
    an element into its value."""

    vector_loads = False  # its loader reads the heads too

    def __init__(self, x, heads, outs, op, kit, inner, exclusive: bool, reverse: bool,
                 workspace: Workspace):
        super().__init__(x, outs, op, kit, False, reverse, kit.identity_values, workspace,
                         second=heads)
        self.inner, self.shifted = inner, bool(exclusive)
        self.key = self.key + ("segmented", inner, self.shifted)

    @property
    def value_bytes(self) -> int:
        """The value field's: items per thread as the unsegmented scan's."""
        return self.kit.dtypes[1].itemsize

    def element_loader(self):
        """Device function ``load(row0, row1, j, n) -> state``: ``row1`` the heads."""
        # the inner kit, not only the dtypes: one that rounds wider elements to float16
        # reads them as no other kit does
        key = ("segment_scan_load", self.op, self.inner, self.shifted, self.reverse)
        return cached(key, lambda: head_loader(self.inner, self.shifted, self.reverse))


class SortJob:
    """One sort in flight: ``rows`` independent rows of ``n`` elements, sorted.

    Attributes:
        x: the input's bits, a 1-D C-contiguous device array of ``rows * n``
            unsigned ints (row ``r`` at ``[r*n, (r+1)*n)``).
        out: where the result goes, 1-D like ``x``: int64 indices within the row
            (``indices``) or the sorted values' bits.
        indices: write indices (argsort) rather than values (sort).
        descending: largest first.
        dtype: the input's dtype (the key rule; ``sort_keys.BFLOAT16`` for bfloat16
            bits); ``to_key`` its device function.
    """

    def __init__(self, x, out, rows: int, n: int, dtype: np.dtype, descending: bool,
                 indices: bool, workspace: Workspace):
        self.x, self.out = x, out
        self.rows, self.n = int(rows), int(n)
        self.dtype = dtype if is_bfloat16(dtype) else np.dtype(dtype)
        self.key_dtype = bits_dtype(self.dtype)
        self.descending, self.indices = bool(descending), bool(indices)
        self.workspace = workspace
        self.stream = workspace.stream
        self.key = (key_name(self.dtype), self.descending, self.indices, device_key())

    def sorted_by(self, sorter) -> None:
        """``sorter.sort(self)``, once ``sorter.check`` takes rows of ``n`` keys (a
        strategy the caller named, a user's included, is held to its ``fits``).

        Raises:
            ValueError: the strategy does not take rows of ``n`` keys.
        """
        sorter.check(self.n)
        sorter.sort(self)

    def to_key(self):
        """Device function ``to_key(bits) -> key``: NumPy's order as unsigned order."""
        return cached(("sort_to_key", key_name(self.dtype), self.descending),
                      lambda: build_to_key(self.dtype, self.descending))

    def emitter(self):
        """Device function ``emit(x, out, base, j, i)``: output ``base + j`` gets row
        element ``i`` (its index, or its value's bits)."""
        return emitter(self.indices)

    def exclusive_sum(self, counts, out, scan) -> None:
        """``out[i] = counts[0] + ... + counts[i-1]`` (``out[0] = 0``) for 1-D int64
        device arrays of one length, by the scan strategy ``scan`` (a ``GridScan``),
        on this job's stream: the scan a radix sort makes of its digit counts. Nothing
        is checked or allocated outside the job's workspace (the public ``cumsum``
        would check its arguments and allocate through Numba: half a millisecond of
        host time for a sort whose kernels take as long)."""
        n = counts.shape[0]
        views = [strided(a, [(1, 0), (1, 0), (n, INT64.itemsize)]) for a in (counts, out)]
        kit = state_kit(SUM, (INT64,))
        scan.scan(ScanJob(views[0], (views[1],), SUM, kit, True, False, kit.identity_values,
                          self.workspace))


class HistogramJob:
    """One histogram in flight.

    Attributes:
        x: the input, a 1-D device view; ``n`` its length.
        bins: number of counters; ``out`` a zeroed 1-D int64 device array of them.
        bin_of: device function ``bin_of(x, i, aux) -> int64``: element ``i``'s bin,
            or ``-1`` to leave it out; ``aux`` a device array it may read (bin edges,
            a lookup table); ``bin_key`` names ``bin_of`` in kernel cache keys.
    """

    def __init__(self, x, n: int, bins: int, bin_of, bin_key: tuple, aux, out,
                 workspace: Workspace):
        self.x, self.n, self.bins = x, int(n), int(bins)
        self.bin_of, self.bin_key, self.aux, self.out = bin_of, bin_key, aux, out
        self.workspace = workspace
        self.stream = workspace.stream


class SelectJob:
    """One top-k selection in flight: ``rows`` independent rows of ``n`` elements, of
    each the ``k`` first in the wanted order (largest first when ``largest``).

    The order is the sort's (``numbakern/kernels/sort_keys.py``): keys are unsigned
    integers from :meth:`to_key`, the wanted elements are those of the ``k``
    *smallest* keys (``largest`` complements them, so NaN, the largest value, has the
    smallest key), ties by the lower index: the first ``k`` of a stable argsort.

    Attributes:
        x: the input's bits, 1-D C-contiguous, ``rows * n`` unsigned ints (row ``r``
            at ``[r*n, (r+1)*n)``).
        values, indices: the outputs, 1-D, ``rows * k`` each: the selected values'
            bits and their int64 indices within the row (row ``r`` at ``[r*k, (r+1)*k)``).
        sorted: whether the strategy must leave each output row in order (ascending
            key, ties by index); when ``False`` it may leave any order.
        record: a list into which a strategy that keeps per-pass facts (radix
            select's buckets) appends them, or ``None`` (``numbakern explain``).
    """

    def __init__(self, x, values, indices, rows: int, n: int, k: int, dtype: np.dtype,
                 largest: bool, sorted: bool, workspace: Workspace, record=None):
        self.x, self.values, self.indices = x, values, indices
        self.rows, self.n, self.k = int(rows), int(n), int(k)
        self.dtype = dtype if is_bfloat16(dtype) else np.dtype(dtype)
        self.key_dtype = bits_dtype(self.dtype)
        self.largest, self.sorted = bool(largest), bool(sorted)
        self.workspace = workspace
        self.stream = workspace.stream
        self.record = record
        self.key = (key_name(self.dtype), self.largest, device_key())

    def to_key(self):
        """Device function ``to_key(bits) -> key``: the wanted order as ascending
        unsigned order (``largest``: the key complemented)."""
        return cached(("sort_to_key", key_name(self.dtype), self.largest),
                      lambda: build_to_key(self.dtype, self.largest))

    def on_row(self, x, n: int, values, indices) -> "SelectJob":
        """The same selection (``k``, dtype, order, ``sorted``, workspace) of one row of
        ``n`` other bits ``x`` into ``values`` and ``indices``: what a strategy that
        narrows a row to its candidates (keeping their index order) asks to finish."""
        return SelectJob(x, values, indices, 1, n, self.k, self.dtype, self.largest,
                         self.sorted, self.workspace)

    def argsort(self, bits, out, rows: int, n: int, sorter) -> None:
        """Stable argsort of ``rows`` rows of ``n`` elements' ``bits`` (of this job's
        dtype) into ``out`` (int64 indices within each row), in this job's order, by
        the sort strategy ``sorter``: what a strategy that sorts its winners (or the
        whole row) asks for."""
        SortJob(bits, out, rows, n, self.dtype, self.largest, True,
                self.workspace).sorted_by(sorter)
