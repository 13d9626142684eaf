"""Scan tiles: the unit of work that both grid scans share.

A scan of ``segments`` independent sequences of length ``n`` (the rows of an axis
scan; one sequence for ``axis=None``) is cut into **tiles** of
``TILE = threads * items`` consecutive elements of one segment. A block scans a tile
in six phases (CUB's ``BlockLoad`` / ``BlockScan`` / ``BlockStore`` with
``BLOCK_LOAD_TRANSPOSE``):

1. **Load, striped.** Item ``k`` of thread ``t`` is element ``start + k*threads + t``:
   each warp load reads 32 neighbours (coalesced), and all ``items`` loads are issued
   before any is used, so a thread has ``items`` loads in flight.
2. **Transpose** through shared memory to the *blocked* arrangement: thread ``t`` then
   holds elements ``start + t*items + k``, ``k = 0..items-1``, in element order. One
   padding slot every 32 (slot ``i + i // 32``) keeps the strided reads free of bank
   conflicts.
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
   shared memory and stored striped (coalesced again).

The identity only fills the items past the end of a segment; no output ever
combines it: the first element's prefix is *nothing*, tracked with a flag, not an
identity folded in. A reverse scan is the same scan over views whose last stride is
negative, never a total minus a prefix.
"""

from __future__ import annotations

from numba import cuda, from_dtype, uint64

from numbakern.ops.state import constant_state, device_from_source, fields_source
from numbakern.runtime.device import SHARED_LIMIT, SIMULATOR, WARP

#: items per thread under the simulator, which runs one OS thread per CUDA thread
SIMULATOR_ITEMS = 2


@cuda.jit(device=True)
def pad(i):
    """Shared-memory slot of tile position ``i``: one padding slot every 32.

    Unsigned, as are the kernels' element indices: Numba then leaves out its
    negative-index wraparound, three instructions per access.
    """
    return uint64(i + (i >> 5))


def padded_slots(tile: int) -> int:
    return tile + (tile - 1) // WARP


def auto_items(state_bytes: int, threads: int, value_bytes: int | None = None) -> int:
    """Items per thread: 64 bytes of state per thread (16 float32, 8 float64), at most
    16, fewer if the tile would not fit in shared memory; 2 under the simulator.
    ``value_bytes``: the bytes that count instead of the state's (a segmented scan's
    value field, its one-byte flags left out: 16 items of (flags, float32) need 48
    registers a thread on sm_90, 12 items 64, and fewer instructions an element; an
    input narrower than its state, int32 summed in int64: 16 items, 48 registers, a
    third fewer instructions an element than 8 and half the tiles to look back over).
    A tile of ``state_bytes`` states takes at most half a block's shared memory (24
    KB), or three quarters (36 KB: 16 int64 items of 256 threads, 5 blocks of 34 KB
    on an sm_90 multiprocessor) when ``value_bytes`` sizes it."""
    if SIMULATOR:
        return SIMULATOR_ITEMS
    items = max(1, min(16, 64 // (value_bytes or state_bytes)))
    limit = SHARED_LIMIT * 3 // 4 if value_bytes else SHARED_LIMIT // 2
    while items > 1 and padded_slots(threads * items) * state_bytes > limit:
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
        load, store: element loader and storer (signatures as above).
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
                 empty: tuple, hold: str = "shared"):
        self.threads = block.threads
        self.items = items
        self.size = block.threads * items
        self.xs_storage = kit.shared_temp(padded_slots(self.size))
        self.temp_storage = kit.shared_temp(block.temp_slots())
        self.local_storage = kit.local_temp(items)
        self.block_scan = block.build_scan(kit)
        shared = check_hold(hold) == "shared"
        self.load_tile = _build_load_tile(kit, self.threads, items, load, shared)
        self.emit_tile = _build_emit_tile(kit, self.threads, items, store, exclusive, empty,
                                          shared)
        self.thread_prefix = _build_thread_prefix(kit)


def check_hold(hold: str) -> str:
    if hold not in ("registers", "shared"):
        raise ValueError(f"hold must be 'registers' or 'shared', got {hold!r}")
    return hold


def _build_load_tile(kit, threads: int, items: int, load, shared: bool):
    size = threads * items
    combine, identity, kload, kstore = kit.combine, kit.identity, kit.load, kit.store

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
        r = kload(xs0, xs1, pad(tid * items))
        kstore(l0, l1, 0, r)
        for k in range(1, items):  # 3. thread scan
            r = combine(r, kload(xs0, xs1, pad(tid * items + k)))
            if shared:
                kstore(xs0, xs1, pad(tid * items + k), r)
            else:
                kstore(l0, l1, k, r)
        return r

    return load_tile


def _build_emit_tile(kit, threads: int, items: int, store, exclusive: bool, empty: tuple,
                     shared: bool):
    size = threads * items
    combine, kload, kstore = kit.combine, kit.load, kit.store
    empty_state = constant_state(empty)

    @cuda.jit(device=True)
    def emit_tile(row0, row1, n, start, pre, have, xs0, xs1, l0, l1):
        """Phase 6: ``pre`` (if ``have``) before each item prefix, stored striped.

        Each thread overwrites only the slots it read in phase 2, so no barrier is
        needed before the writes; one is needed before the next tile's loads.
        """
        tid = cuda.threadIdx.x
        before = pre  # the previous item's prefix (exclusive scans)
        for k in range(items):
            r = kload(xs0, xs1, pad(tid * items + k)) if shared else kload(l0, l1, k)
            if not exclusive:
                y = combine(pre, r) if have else r
            elif k == 0:
                y = pre if have else empty_state()
            else:
                y = combine(pre, before) if have else before
            kstore(xs0, xs1, pad(tid * items + k), y)
            before = r
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
