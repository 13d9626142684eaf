"""Scan tiles: the unit of work that both grid scans share.

A scan of ``segments`` independent sequences of length ``n`` (the rows of an axis
scan; one sequence for ``axis=None``) is cut into **tiles** of
``TILE = threads * items`` consecutive elements of one segment. A block scans a tile
in six phases (CUB's ``BlockLoad`` / ``BlockScan`` / ``BlockStore`` with
``BLOCK_LOAD_TRANSPOSE``):

1. **Load, striped.** Item ``k`` of thread ``t`` is element ``start + k*threads + t``:
   each warp load reads 32 neighbours (coalesced), and all ``items`` loads are issued
   before any is used, so a thread has ``items`` loads in flight. A *vector tile*
   (:class:`Vectors`: a one-field state, rows contiguous and 16-byte aligned in the
   input and the output) loads 16 bytes an instruction instead (``ld.global.v4``: 4
   float32 or int32 elements), striped by vectors: vector ``k*threads + t`` of the
   tile (elements ``W*(k*threads + t) ..`` ``+ W-1``) is thread ``t``'s ``k``-th, so
   each warp instruction reads 512 contiguous bytes, with a quarter of the load and
   address instructions. In a segment's last tile, a vector that does not lie
   wholly inside the segment is read element by element.
2. **Transpose** through shared memory to the *blocked* arrangement: thread ``t`` then
   holds elements ``start + t*items + k``, ``k = 0..items-1``, in element order. One
   padding slot every 32 (slot ``i + i // 32``) keeps the strided reads free of bank
   conflicts (a vector tile of 8-byte states: one every 16, :func:`pad_every`). The
   blocked arrangement, and so every combine after it, is the same whichever way the
   tile was loaded: a vector tile's results are the scalar tile's, bit for bit. A
   *narrow* vector tile (4-byte inputs of 8-byte states: :func:`narrows`) transposes
   the inputs as they are, at half the shared-memory bytes, and keeps them there
   rather than its prefixes.
3. **Thread scan.** Each thread scans its own items sequentially, in registers.
4. **Block scan** of the thread totals: the block strategy's ``build_scan``, which
   gives each thread the combine of the threads before it (its *exclusive* prefix).
5. **Carry in.** The grid strategy supplies the combine of everything before the
   tile (reduce-then-scan: from a scan of chunk totals; decoupled look-back: from the
   tiles before it). A scan given an *initial carry* (``ScanJob.carry``: one value per
   segment, in device memory, read by the kernel: no host synchronisation) treats it
   as the combine of elements before the segment's first: the first tile starts from
   it, and every later tile's prefix has it on the left (:func:`carry_reader`).
6. **Output**: carry, thread prefix and item prefix combined, transposed back through
   shared memory and stored striped (coalesced again); a vector tile stores 16 bytes
   an instruction, striped by vectors of the output (4 float32, 2 int64), the part of
   a last tile's last vectors inside the segment element by element.

The identity only fills the items past the end of a segment; no output ever
combines it: the first element's prefix is *nothing*, tracked with a flag, not an
identity folded in. A reverse scan is the same scan over views whose last stride is
negative, never a total minus a prefix.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import cuda, from_dtype, uint64

from numbakern.kernels.vector import (rows_aligned, vector_lanes, vector_loader,
                                      vector_storer)
from numbakern.ops.state import (constant_state, device_from_source, fields_source,
                                  local_storage)
from numbakern.runtime.device import SHARED_LIMIT, SIMULATOR, WARP, simulator_items


@cuda.jit(device=True)
def pad(i):
    """Shared-memory slot of tile position ``i``: one padding slot every 32.

    Unsigned, as are the kernels' element indices: Numba then leaves out its
    negative-index wraparound, three instructions per access.
    """
    return uint64(i + (i >> 5))


@cuda.jit(device=True)
def pad16(i):
    """:func:`pad` with one padding slot every 16 (a vector tile of 8-byte states)."""
    return uint64(i + (i >> 4))


def padded_slots(tile: int, every: int = WARP) -> int:
    return tile + (tile - 1) // every


def pad_every(state_bytes: int, vectors) -> int:
    """Tile positions between padding slots: 32, or 16 for a vector tile of 8-byte
    states.

    Shared memory has 32 four-byte banks; a warp's access is conflict-free when its
    lanes' words fall in distinct banks (8-byte words: each half-warp's 16 words in
    distinct pairs of banks, slots distinct modulo 16). Lane ``t``'s blocked
    read of item ``k`` is position ``t*items + k``; a vector tile's transposes touch
    ``W*(c + t) + w`` (lane stride ``W``, the vector's lanes). With a slot every 32,
    4-byte states are conflict-free for both (``items`` 16: slot ``16t + k + t//2``,
    bank ``16(t%2) + t//2 + k``; ``W`` 4: bank ``4t + t//8 + w``); 8-byte states are
    not (``W`` 4: slots ``4t + t//8`` repeat modulo 16 every 4 lanes, 2-way; blocked
    ``16t + k + t//2``: lanes 2m and 2m+1 collide). A slot every 16 makes them
    ``4t + t//4``, ``2t + t//8`` (int64 stores, ``W`` 2) and ``17t + k``: distinct
    modulo 16 over a half-warp. The scalar tile keeps one every 32: its striped
    accesses are conflict-free with either, and its 8-byte blocked reads' 2-way
    conflicts are left as they were measured."""
    return WARP // 2 if vectors is not None and state_bytes == 8 else WARP


def auto_items(state_bytes: int, threads: int, value_bytes: int | None = None,
               fields: int = 1, temp_slots: int = 0, n: int = 0) -> int:
    """Items per thread: 64 bytes of state per thread (16 float32), at most 16, fewer if
    the tile would not fit in shared memory; under the simulator, by the segment's
    length ``n`` (``runtime.device.simulator_items``).
    A one-field 8-byte state (float64, int64) takes 16 items too: float64's cumsum of
    2^27 ran 7% faster at 16 than at 8 (bench/NOTES.md, 2026-12-05), though 48
    registers a thread and 34 KB of tile leave 5 blocks a multiprocessor where 8 items
    leave 8: half the tiles to look back over, and half the block-wide steps.
    ``value_bytes``: the bytes that count instead of the state's (a segmented scan's
    value field, its one-byte flags left out: 16 items of (flags, float32) need 48
    registers a thread on sm_90, 12 items 64, and fewer instructions an element; an
    input narrower than its state, int32 summed in int64: 16 items, 48 registers, a
    third fewer instructions an element than 8 and half the tiles to look back over).
    A tile of ``state_bytes`` states takes at most half a block's shared memory (24
    KB), or three quarters (36 KB: 16 int64 items of 256 threads, 5 blocks of 34 KB
    on an sm_90 multiprocessor) when ``value_bytes`` sizes it or the state is one
    8-byte field. ``temp_slots``: the block scan's own states, beside the tile and its
    carry: the three within a block's shared memory, where one item a thread allows
    (Hillis-Steele's 2 x 1024 16-byte states leave no room for a tile of 1024)."""
    wide = fields == 1 and state_bytes == 8
    items = simulator_items(n) if SIMULATOR else \
        16 if wide else max(1, min(16, 64 // (value_bytes or state_bytes)))
    limit = SHARED_LIMIT * 3 // 4 if value_bytes or wide else SHARED_LIMIT // 2
    while items > 1 and (
            padded_slots(threads * items) * state_bytes > limit
            or (padded_slots(threads * items) + temp_slots + 1) * state_bytes > SHARED_LIMIT):
        items //= 2
    return items


def element_loader(kit, reverse: bool):
    """``load(row0, row1, j, n) -> state``: element ``j`` of a segment as a state
    (``kit.to_state``), its index the element's place along the axis in the *input's*
    order (``n - 1 - j`` for a reverse scan, whose view runs backwards)."""
    to_state = kit.to_state

    @cuda.jit(device=True)
    def load(row0, row1, j, n):
        return to_state(row0[uint64(j)], n - 1 - j if reverse else j)

    return load


def output_storer(dtypes, finish=None, fields: int = 2, narrow=None):
    """``store(row0, row1, j, state)``: a state into the output arrays (the handles of
    ``numbakern/ops/state.py``), cast; with ``finish`` (an op's compiled
    ``finish(s0, ..., s<fields-1>)``), its value into ``row0`` alone. ``narrow``: a
    device function that writes a one-field state in place of the cast (bfloat16's
    rounding to its bits, into a uint16 ``row0``)."""
    o0 = from_dtype(dtypes[0]) if narrow is None else narrow
    if fields > 2 and finish is not None:
        source = ("def store(row0, row1, j, s):\n"
                  f"    row0[uint64(j)] = o0(finish({fields_source('s[{k}]', fields)}))\n")
        return device_from_source("store", source, {"o0": o0, "finish": finish,
                                                     "uint64": uint64})
    if len(dtypes) > 2:
        source = ("def store(row0, row1, j, s):\n"
                  + fields_source("    row0[{k}][uint64(j)] = o{k}(s[{k}])", len(dtypes),
                                   "\n") + "\n")
        env = {f"o{k}": from_dtype(d) for k, d in enumerate(dtypes)}
        return device_from_source("store", source, {**env, "uint64": uint64})
    if finish is not None:

        @cuda.jit(device=True)
        def store(row0, row1, j, s):
            row0[uint64(j)] = o0(finish(s[0], s[1]))

        return store
    if len(dtypes) == 1:

        @cuda.jit(device=True)
        def store(row0, row1, j, s):
            row0[uint64(j)] = o0(s[0])

        return store
    o1 = from_dtype(dtypes[1])

    @cuda.jit(device=True)
    def store(row0, row1, j, s):
        row0[uint64(j)] = o0(s[0])
        row1[uint64(j)] = o1(s[1])

    return store


def carry_reader(kit, carried: bool):
    """``read(cin, seg) -> state``: segment ``seg``'s initial carry, ``cin[seg]`` cast to
    the state (a one-field state; the carry is a result already, so the op's map is
    not applied: a nansum carry of NaN stays NaN). Without a carry (``carried``
    false) the kernels never call it, and ``cin`` is :data:`NO_CARRY`: it returns the
    identity, so both branches of ``if carried`` type-check."""
    if not carried:
        identity = kit.identity

        @cuda.jit(device=True)
        def read(cin, seg):
            return identity()

        return read
    t0 = from_dtype(kit.dtypes[0])

    @cuda.jit(device=True)
    def read(cin, seg):
        return (t0(cin[uint64(seg)]),)

    return read


#: what a scan kernel takes for its initial carry when it has none: a scalar, never
#: read (an array would have to be an input or an allocation of the call, for replays:
#: ``runtime/replay.py``; and a trace would name an input by it: ``teach/scan_trace.py``)
NO_CARRY = 0


def state_loader(kit):
    """``load(row0, row1, j, n) -> state`` for arrays of states (partials, carries)."""
    kload = kit.load

    @cuda.jit(device=True)
    def load(row0, row1, j, n):
        return kload(row0, row1, j)

    return load


# --- the tile -------------------------------------------------------------------------


class Tile:
    """The device functions and shared-memory shape of one tile scan.

    Args:
        block: the block strategy (``build_scan``).
        kit: the op's state kit.
        items: items per thread.
        load, store: element loader and storer (signatures as above): a scalar
            tile's every element, a vector tile's elements outside whole vectors.
        exclusive: write exclusive prefixes (else inclusive).
        empty: the state an exclusive scan writes first.
        hold: where the thread's item prefixes wait while the block scan and the grid
            strategy run: ``"shared"`` (in place in the tile's shared memory: 40
            registers a thread for 16 float32 items against 56, so 6 blocks of 256
            threads fit on a multiprocessor instead of 4, with 50% more loads in
            flight) or ``"registers"`` (two shared-memory accesses fewer per item).

    A kernel allocates its storage at its start, each a pair of state handles
    (``numbakern/ops/state.py``), and passes them on: ``xs0, xs1 = xs_storage()``
    (the tile in shared memory), ``tmp0, tmp1 = temp_storage()`` (the block
    strategy's) and ``l0, l1 = local_storage()`` (the thread's items).
    """

    def __init__(self, block, kit, items: int, load, store, exclusive: bool,
                 empty: tuple, hold: str = "shared", vectors=None):
        self.threads = block.threads
        self.items = items
        self.size = block.threads * items
        every = pad_every(kit.dtypes[0].itemsize, vectors)
        self.xs_storage = kit.shared_temp(padded_slots(self.size, every))
        self.temp_storage = kit.shared_temp(block.temp_slots())
        self.local_storage = kit.local_temp(items)
        self.block_scan = block.build_scan(kit)
        shared = check_hold(hold) == "shared"
        if vectors is None:
            self.load_tile = _build_load_tile(kit, self.threads, items, load, shared)
            self.emit_tile = _build_emit_tile(kit, self.threads, items, store, exclusive,
                                              empty, shared)
        else:
            padder = pad if every == WARP else pad16
            if vectors.narrow is None:
                self.load_tile = _build_vector_load_tile(kit, self.threads, items, load,
                                                         shared, vectors.load, padder)
            else:  # phase 6 reads the thread's inputs into registers
                self.local_storage = local_storage((np.dtype(vectors.narrow),), items)
                self.load_tile = _build_narrow_load_tile(kit, self.threads, items, vectors)
            self.emit_tile = _build_vector_emit_tile(kit, self.threads, items, store,
                                                     exclusive, empty, shared, vectors,
                                                     padder)
        self.thread_prefix = _build_thread_prefix(kit)


def check_hold(hold: str) -> str:
    if hold not in ("registers", "shared"):
        raise ValueError(f"hold must be 'registers' or 'shared', got {hold!r}")
    return hold


def _build_load_tile(kit, threads: int, items: int, load, shared: bool):
    size = threads * items
    identity, kload, kstore = kit.identity, kit.load, kit.store
    thread_scan = _build_thread_scan(kit, items, shared, pad)

    @cuda.jit(device=True)
    def load_tile(row0, row1, n, start, xs0, xs1, l0, l1):
        """Phases 1-3: returns this thread's total; leaves its item prefixes in l (or
        in its own slots of xs)."""
        tid = cuda.threadIdx.x
        first = start + tid
        if start + size <= n:  # 1. striped loads, all in flight before any is used
            for k in range(items):
                kstore(l0, l1, k, load(row0, row1, first + k * threads, n))
        else:  # the segment's last tile; past its end the identity feeds no output
            for k in range(items):
                j = first + k * threads
                kstore(l0, l1, k, load(row0, row1, j, n) if j < n else identity())
        for k in range(items):  # 2. transpose to the blocked arrangement
            kstore(xs0, xs1, pad(k * threads + tid), kload(l0, l1, k))
        cuda.syncthreads()
        return thread_scan(xs0, xs1, l0, l1, tid)  # 3.

    return load_tile


def _build_thread_scan(kit, items: int, shared: bool, padder):
    """Phase 3, both tiles': ``thread_scan(xs0, xs1, l0, l1, tid)`` scans thread
    ``tid``'s items of the blocked tile (slots ``padder(tid * items + k)``) in order,
    leaves the item prefixes in those slots (``shared``) or in ``l``, and returns the
    thread's total."""
    combine, kload, kstore = kit.combine, kit.load, kit.store

    @cuda.jit(device=True)
    def thread_scan(xs0, xs1, l0, l1, tid):
        r = kload(xs0, xs1, padder(tid * items))
        kstore(l0, l1, 0, r)
        for k in range(1, items):
            r = combine(r, kload(xs0, xs1, padder(tid * items + k)))
            if shared:
                kstore(xs0, xs1, padder(tid * items + k), r)
            else:
                kstore(l0, l1, k, r)
        return r

    return thread_scan


def _build_item_prefix(kit, items: int, hold: str, padder):
    """``prefix(xs0, xs1, l0, l1, tid, k, r) -> state``: thread ``tid``'s item prefix
    ``k`` (``r``: item ``k - 1``'s, unused for ``k`` 0): where phase 3 left it, in its
    blocked slots (``"shared"``) or in ``l`` (``"registers"``); or made again, in phase
    3's order, from a narrow tile's inputs, which its phase 6 reads into ``l``
    (``"inputs"``)."""
    combine, kload, to_state = kit.combine, kit.load, kit.to_state
    if hold == "shared":

        @cuda.jit(device=True)
        def prefix(xs0, xs1, l0, l1, tid, k, r):
            return kload(xs0, xs1, padder(tid * items + k))

    elif hold == "registers":

        @cuda.jit(device=True)
        def prefix(xs0, xs1, l0, l1, tid, k, r):
            return kload(l0, l1, k)

    else:  # a vector tile's state is its element's alone (tile_vectors: plain)

        @cuda.jit(device=True)
        def prefix(xs0, xs1, l0, l1, tid, k, r):
            if k == 0:
                return to_state(l0[0], 0)
            return combine(r, to_state(l0[k], 0))

    return prefix


def _build_item_outputs(kit, items: int, exclusive: bool, empty: tuple, hold: str,
                        padder):
    """The first half of phase 6, both tiles': ``item_outputs(pre, have, xs0, xs1, l0,
    l1, tid)`` puts ``pre`` (if ``have``) before each of thread ``tid``'s item
    prefixes (held as ``hold`` says: :func:`_build_item_prefix`) and writes the
    results (inclusive, or exclusive: each item's the prefix before it) into its
    blocked slots, for the transpose back. Each thread overwrites only the slots it
    read in phase 2, so no barrier is needed before (a narrow tile's 8-byte slots
    hold other threads' 4-byte inputs: its emit_tile reads them first, then waits at
    a barrier)."""
    combine, kstore = kit.combine, kit.store
    empty_state = constant_state(empty)
    item_prefix = _build_item_prefix(kit, items, hold, padder)

    @cuda.jit(device=True)
    def item_outputs(pre, have, xs0, xs1, l0, l1, tid):
        before = pre  # the previous item's prefix (exclusive scans)
        r = pre  # the previous item's prefix within the thread
        for k in range(items):
            r = item_prefix(xs0, xs1, l0, l1, tid, k, r)
            if not exclusive:
                y = combine(pre, r) if have else r
            elif k == 0:
                y = pre if have else empty_state()
            else:
                y = combine(pre, before) if have else before
            kstore(xs0, xs1, padder(tid * items + k), y)
            before = r

    return item_outputs


def _build_emit_tile(kit, threads: int, items: int, store, exclusive: bool, empty: tuple,
                     shared: bool):
    size = threads * items
    kload = kit.load
    item_outputs = _build_item_outputs(kit, items, exclusive, empty,
                                       "shared" if shared else "registers", pad)

    @cuda.jit(device=True)
    def emit_tile(row0, row1, n, start, pre, have, xs0, xs1, l0, l1):
        """Phase 6: ``pre`` (if ``have``) before each item prefix, stored striped; a
        barrier is needed before the next tile's loads."""
        tid = cuda.threadIdx.x
        item_outputs(pre, have, xs0, xs1, l0, l1, tid)
        cuda.syncthreads()
        first = start + tid
        if start + size <= n:
            for k in range(items):
                store(row0, row1, first + k * threads, kload(xs0, xs1, pad(k * threads + tid)))
        else:
            for k in range(items):
                if first + k * threads < n:
                    store(row0, row1, first + k * threads,
                          kload(xs0, xs1, pad(k * threads + tid)))

    return emit_tile


# --- vector tiles ---------------------------------------------------------------------


class Vectors(NamedTuple):
    """How a vector tile moves its elements: ``load`` input elements a 16-byte load,
    ``store`` output elements (of dtype ``out``, NumPy's ``str``) a 16-byte store;
    ``narrow``: the input's dtype (NumPy's ``str``) where the tile transposes its
    inputs at their own width and keeps them rather than its prefixes
    (:func:`narrows`), else None."""

    load: int
    store: int
    out: str
    narrow: str | None = None


def narrows(in_dtype, state_bytes: int, hold: str) -> bool:
    """Whether a vector tile of ``in_dtype`` elements and ``state_bytes`` states moves
    its inputs at their own width: 4-byte inputs of 8-byte states (int32 summed in
    int64, float32 in float64), where the tile holds its item prefixes in shared
    memory (``hold="shared"``).

    Such a tile transposes its inputs through its shared memory viewed as 4-byte
    words and leaves them there through the block scan and the look-back (phase 3
    only reduces a thread's items); phase 6 reads a thread's items into registers, and
    after a barrier (its 8-byte outputs overwrite other threads' inputs) scans them
    again, in phase 3's order, with the carry. An 8-byte tile moves 48 bytes of shared
    memory an element (the loads' transpose, the held prefixes, the outputs'
    transpose, each written and read); this one 28 (4 written, 4 read twice, 8 + 8),
    needs 39 registers a thread instead of 48, and so holds 6 blocks of 256 on an H200
    multiprocessor instead of 5 (``bench/NOTES.md``: int32 -> int64 cumsum of 2^28
    1.10 -> 1.04 ms). Holding the inputs in registers instead (no second read, no
    barrier) takes 64 registers, 4 blocks, and measured 1.19 ms. CUB's ``BlockLoad``
    likewise moves a scan's input in the input's type, its ``BlockStore`` the
    output's."""
    return hold == "shared" and np.dtype(in_dtype).itemsize == 4 and state_bytes == 8


def tile_vectors(x, out, kit, block, items: int, plain: bool,
                 hold: str = "shared") -> Vectors | None:
    """The :class:`Vectors` of a tile of ``block.threads * items`` over the 3-D views
    ``x`` and ``out`` (rows last), or None for scalar loads and stores.

    A vector tile needs ``plain``: a one-field state the element loader makes from the
    element alone and the storer casts into one output (no finish, no narrowing: the
    caller knows), of 4 or 8 bytes (the banks :func:`pad_every` reckons with);
    numeric input and output whose 16-byte vectors hold whole items of a thread
    (``items`` a multiple of each); rows contiguous in both views (a reverse scan's
    run backwards: scalar) and each row starting 16-byte aligned
    (:func:`~numbakern.kernels.vector.rows_aligned`, CUB's ``LOAD_VECTORIZE``
    condition: a 2-D array's rows whose length is not a multiple of the vector's take
    scalars); and the tile, padded as :func:`pad_every` pads it, and the block
    strategy's temp storage within a block's shared memory. Tiles start at multiples
    of ``threads * items`` elements, so every tile of an aligned row is aligned.
    ``hold``: the tile's (:class:`Tile`); a ``"shared"`` one of 4-byte inputs and
    8-byte states is narrow (:func:`narrows`)."""
    if not plain or kit.fields != 1 or kit.dtypes[0].itemsize not in (4, 8):
        return None
    lanes_in, lanes_out = vector_lanes(x.dtype), vector_lanes(out.dtype)
    if not lanes_in or not lanes_out or items % lanes_in or items % lanes_out:
        return None
    for view in (x, out):
        if view.shape[2] > 1 and view.strides[2] != np.dtype(view.dtype).itemsize:
            return None
        if not rows_aligned(view, 2):
            return None
    state = kit.dtypes[0].itemsize
    narrow = np.dtype(x.dtype).str if narrows(x.dtype, state, hold) else None
    vectors = Vectors(lanes_in, lanes_out, np.dtype(out.dtype).str, narrow)
    slots = padded_slots(block.threads * items, pad_every(state, vectors)) + \
        block.temp_slots() + 1
    return vectors if slots * state <= SHARED_LIMIT else None


def vector_rows(itemsize: int):
    """``rows(h, span, a, b, n) -> (row, row)``: row ``(a, b)`` of the 3-D view ``h``
    (elements of ``itemsize`` bytes) as a 1-D C-contiguous array of ``n`` elements, cut from
    ``span``, a 1-D view of ``h``'s memory from its first element: what vector loads
    and stores index (:func:`tile_vectors` has checked that rows are contiguous and
    aligned). Twice: a one-field tile's element loader and storer take a pair."""

    @cuda.jit(device=True)
    def rows(h, span, a, b, n):
        first = uint64(a * h.strides[0] + b * h.strides[1]) // uint64(itemsize)
        row = span[first:first + uint64(n)]
        return row, row

    return rows


def lane_spreader(kit, width: int):
    """``spread(v, l0, l1, k, j)``: the ``width`` elements of the vector ``v`` (elements
    ``j ..`` of the segment) as states into slots ``k ..`` of ``l``, one line a lane
    (constant lane indices: the tuple stays in registers without relying on loop
    unrolling)."""
    lines = "\n".join(f"    kstore(l0, l1, k + {w}, to_state(v[{w}], j + {w}))"
                      for w in range(width))
    return device_from_source("spread", f"def spread(v, l0, l1, k, j):\n{lines}\n",
                              {"kstore": kit.store, "to_state": kit.to_state})


def lane_gatherer(kit, width: int, out: str):
    """``gather(xs0, xs1, slot) -> (y0, .., y<width-1>)``: shared slots ``slot ..``
    ``slot + width-1`` of the tile, cast to the output dtype ``out``: the lanes of one
    vector store."""
    lanes = ", ".join(f"o0(kload(xs0, xs1, slot + uint64({w}))[0])" for w in range(width))
    return device_from_source("gather",
                              f"def gather(xs0, xs1, slot):\n    return ({lanes},)\n",
                              {"kload": kit.load, "uint64": uint64,
                               "o0": from_dtype(np.dtype(out))})


def _build_vector_load_tile(kit, threads: int, items: int, load, shared: bool, width: int,
                            padder):
    """``load_tile`` of a vector tile: phases 1 and 2 in vectors of ``width``, phase 3
    as the scalar tile's (the same blocked arrangement, the same combines).

    A vector's lanes never straddle a padding slot (``width`` divides
    :func:`pad_every`'s 16 or 32, and vectors start at multiples of ``width``), so lane
    ``w``'s slot is the vector's first plus ``w``: one slot computed a vector, not one
    an element (ptxas does not see that ``(p + w) >> 5`` is ``p >> 5``)."""
    size = threads * items
    vectors = items // width
    identity, kload, kstore = kit.identity, kit.load, kit.store
    vload = vector_loader(width)
    spread = lane_spreader(kit, width)
    thread_scan = _build_thread_scan(kit, items, shared, padder)

    @cuda.jit(device=True)
    def load_tile(row0, row1, n, start, xs0, xs1, l0, l1):
        """Phases 1-3 (``row0``: a 1-D C-contiguous row, 16-byte aligned)."""
        tid = cuda.threadIdx.x
        first = start // width + tid  # the thread's first vector in the row
        if start + size <= n:  # 1. vector-striped loads, all in flight before any is used
            for k in range(vectors):
                v = first + k * threads
                spread(vload(row0, v), l0, l1, k * width, v * width)
        else:  # the segment's last tile: whole vectors inside it, then elements
            for k in range(vectors):
                v = first + k * threads
                j = v * width
                if j + width <= n:
                    spread(vload(row0, v), l0, l1, k * width, j)
                else:
                    for w in range(width):
                        kstore(l0, l1, k * width + w,
                               load(row0, row1, j + w, n) if j + w < n else identity())
        for k in range(vectors):  # 2. transpose to the blocked arrangement
            slot = padder((k * threads + tid) * width)  # a vector's lanes: slots in a row
            for w in range(width):
                kstore(xs0, xs1, slot + uint64(w), kload(l0, l1, k * width + w))
        cuda.syncthreads()
        return thread_scan(xs0, xs1, l0, l1, tid)  # 3.

    return load_tile


def lane_putter(width: int):
    """``put(xs, slot, v)``: the ``width`` lanes of the vector ``v`` into slots ``slot ..``
    of the 1-D shared array ``xs``, one line a lane (as :func:`lane_spreader`)."""
    lines = "\n".join(f"    xs[slot + uint64({w})] = v[{w}]" for w in range(width))
    return device_from_source("put", f"def put(xs, slot, v):\n{lines}\n",
                              {"uint64": uint64})


def _build_narrow_load_tile(kit, threads: int, items: int, vectors: Vectors):
    """``load_tile`` of a narrow vector tile (:func:`narrows`): phases 1 and 2 in the
    input's own width, through the tile's shared memory viewed as input words (padded
    as a 4-byte tile's: :func:`pad`), and phase 3 as a reduction of the thread's items,
    left in place for phase 6 (:func:`_build_reload`).

    Elements past the segment's end are zeros of the input dtype, not the identity
    (which an input word may not hold: int64's minimum for a max): they only ever
    follow a segment's last element in the blocked order, so they reach the totals
    of threads and tiles whose every output lies before them, and no output."""
    size = threads * items
    width = vectors.load
    count = items // width
    combine, to_state = kit.combine, kit.to_state
    word = np.dtype(vectors.narrow).type
    vload = vector_loader(width)
    put = lane_putter(width)

    @cuda.jit(device=True)
    def load_tile(row0, row1, n, start, xs0, xs1, l0, l1):
        """Phases 1-3 (``row0``: a 1-D C-contiguous row, 16-byte aligned)."""
        tid = cuda.threadIdx.x
        xin = xs0.view(word)  # the tile's shared memory as input words
        first = start // width + tid
        if start + size <= n:  # 1-2. vector-striped loads, stored as they arrive
            for k in range(count):
                put(xin, pad((k * threads + tid) * width), vload(row0, first + k * threads))
        else:
            for k in range(count):
                v = first + k * threads
                j = v * width
                slot = pad((k * threads + tid) * width)
                if j + width <= n:
                    put(xin, slot, vload(row0, v))
                else:
                    for w in range(width):
                        xin[slot + uint64(w)] = row0[uint64(j + w)] if j + w < n else word(0)
        cuda.syncthreads()
        r = to_state(xin[pad(tid * items)], 0)  # 3. a state is its element's alone
        for k in range(1, items):  # (tile_vectors: plain)
            r = combine(r, to_state(xin[pad(tid * items + k)], 0))
        return r

    return load_tile


def _build_reload(items: int, narrow: str | None):
    """``reload(xs0, l0, tid)``: thread ``tid``'s items of a narrow tile (``narrow``:
    their dtype), left in its shared memory by phase 2
    (:func:`_build_narrow_load_tile`), into ``l0``; nothing for other tiles."""
    if narrow is None:

        @cuda.jit(device=True)
        def reload(xs0, l0, tid):
            pass

        return reload
    word = np.dtype(narrow).type

    @cuda.jit(device=True)
    def reload(xs0, l0, tid):
        xin = xs0.view(word)
        for k in range(items):
            l0[k] = xin[pad(tid * items + k)]

    return reload


def _build_vector_emit_tile(kit, threads: int, items: int, store, exclusive: bool,
                            empty: tuple, shared: bool, vectors: Vectors, padder):
    """``emit_tile`` of a vector tile: the scalar tile's prefixes, stored in vectors of
    ``vectors.store`` output elements."""
    size = threads * items
    width = vectors.store
    count = items // width
    kload = kit.load
    narrow = vectors.narrow is not None
    hold = "inputs" if narrow else "shared" if shared else "registers"
    reload = _build_reload(items, vectors.narrow)
    item_outputs = _build_item_outputs(kit, items, exclusive, empty, hold, padder)
    vstore = vector_storer(width)
    gather = lane_gatherer(kit, width, vectors.out)

    @cuda.jit(device=True)
    def emit_tile(row0, row1, n, start, pre, have, xs0, xs1, l0, l1):
        """Phase 6 (``row0``: a 1-D C-contiguous row, 16-byte aligned); barriers as the
        scalar tile's."""
        tid = cuda.threadIdx.x
        reload(xs0, l0, tid)  # a narrow tile's inputs into registers, before any
        if narrow:  # output overwrites them
            cuda.syncthreads()
        item_outputs(pre, have, xs0, xs1, l0, l1, tid)
        cuda.syncthreads()
        first = start // width + tid
        if start + size <= n:
            for k in range(count):
                v = first + k * threads
                vstore(row0, v, gather(xs0, xs1, padder((k * threads + tid) * width)))
        else:
            for k in range(count):
                v = first + k * threads
                slot = padder((k * threads + tid) * width)
                j = v * width
                if j + width <= n:
                    vstore(row0, v, gather(xs0, xs1, slot))
                else:
                    for w in range(width):
                        if j + w < n:
                            store(row0, row1, j + w, kload(xs0, xs1, slot + uint64(w)))

    return emit_tile


def _build_thread_prefix(kit):
    combine = kit.combine

    @cuda.jit(device=True)
    def thread_prefix(exc, carry, has_carry):
        """Phase 5: ``(prefix, have)``: everything before this thread's first item."""
        if cuda.threadIdx.x == 0:
            return carry, has_carry
        if has_carry:
            return combine(carry, exc), True
        return exc, True

    return thread_prefix
