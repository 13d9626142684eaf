"""Decoupled look-back grid scan: one pass, each tile learns its prefix from the tiles before it.

The lesson
----------
Duane Merrill and Michael Garland, "Single-pass Parallel Prefix Scan with Decoupled
Look-back" (NVIDIA NVR-2016-002, 2016), the algorithm behind CUB's ``DeviceScan``.
Reduce-then-scan (``strategies/reduce_then_scan.py``) reads the input twice because
a tile's carry is only known after every earlier tile has been reduced. Here each
tile publishes what it knows as soon as it knows it, and a tile waiting for its
carry reads what its predecessors have published:

1. **Take tile** ``blockIdx.x`` (see below), and load and scan it in the block
   (``numbakern/kernels/scan_tiles.py``): this gives the tile's *aggregate*.
2. **Publish** the aggregate with status **A**. (The first tile of a segment has
   nothing before it: it publishes its aggregate as its *inclusive prefix*, status
   **P**, and skips step 3.)
3. **Look back** with one warp: lane ``l`` reads the status of tile ``tile - 32 + l``
   (waiting while it is **X**, not yet published). The warp combines, in tile order,
   the values from the nearest **P** up to ``tile - 1``: a segmented Kogge-Stone scan
   whose segments start at **P** lanes. If the window has no **P**, it holds 32
   aggregates: combine them, move the window 32 tiles back, and repeat.
4. **Publish** ``prefix (+) aggregate`` with status **P**, so that later tiles stop
   their look-back here; then write the tile's outputs starting from ``prefix``.

An **initial carry** (``job.carry``: one value per segment, in device memory) is the
combine of everything before the segment: the segment's first tile starts from it
as its prefix and publishes ``carry (+) aggregate`` as its **P**, so every later tile's
look-back ends on a prefix that has the carry on its left. It costs the first tile one
read, and nothing else; the carry never reaches the host.

Each tile is read once and written once: ``n`` reads and ``n`` writes, the least a
scan can move. The look-back usually stops at the first tile before it (already
**P**), and its cost hides behind other blocks' loads.

The atomics, and why they matter
--------------------------------
* **The tile order.** A block waits only for tiles before its own, so no block may
  start before the blocks of the tiles it waits for, or it could spin on a
  multiprocessor that they need: a deadlock. The paper hands tile ids out from an
  atomic counter in the order blocks start; CUDA's block scheduler launches blocks in
  increasing ``blockIdx`` order, and CUB's ``DeviceScan`` takes ``tile = blockIdx.x``
  on that ground ("blocks are launched in increasing order, so just assign one tile
  per block", ``AgentScan::ConsumeRange``), as this kernel does: no atomic and no block
  barrier before a tile's loads start (3-4% of a float32 scan of 2^28 on the H200,
  ``bench/NOTES.md``). Numba's simulator runs blocks one at a time in index order.
* **The status flags.** A tile's status and value must be seen together. For states
  of at most 32 bits (float32, int32, ...) both are packed in one 64-bit word
  (status in the high half) written with ``atomicExch`` and read whole by one
  relaxed load at GPU scope (``ld.relaxed.gpu``: from L2, never a stale L1 line, and
  cheaper than an atomic ``or`` of zero through L2's atomic units), so a reader never
  sees a new status with an old value; so are pairs of a byte and at most 32 bits (a
  segmented scan's flags and value). A one-field 8-byte state (int64, uint64,
  float64) travels beside its status in a 16-byte word, as CUB's ``ScanTileState``
  does: word ``2t`` of a uint64 array is tile ``t``'s status and word ``2t + 1`` its
  value's bits (a segmented scan's flag byte, beside an 8-byte value, rides in the
  status word), written by one ``st.relaxed.gpu.global.v2.b64`` and read by one
  ``ld.relaxed.gpu.global.v2.b64`` (``runtime/relaxed.py``: an aligned 16-byte access
  is single-copy atomic in practice, which CUB relies on too), so neither side needs a
  fence. Larger and other multi-field states keep a status array and separate
  value arrays (one for aggregates, one for inclusive prefixes, so a value is never
  overwritten after its status says it is there): the writer stores the value, then
  ``fence.acq_rel.gpu``, then sets the status with an atomic (a release); the reader
  reads the status, ``fence.acq_rel.gpu``, then the value, both relaxed loads (an
  acquire). ``__threadfence()`` (``fence.sc.gpu``, SASS ``MEMBAR.SC.GPU``) would also
  order the fence against every other such fence on the GPU, which a flag handoff
  does not need. Under the simulator the reads of 64-bit and separate words are
  atomic ``or``s of zero (what the scan traces of ``numbakern/teach``, whose tagged
  states take separate words, record as look-back reads); 16-byte pairs are plain
  reads of two words.

The look-back combines the same elements in an order that depends on timing (which
predecessors had published **P** when read): float results may differ in the last
bits run to run. Use ``reduce_then_scan`` for bitwise reproducibility.

Numba's simulator runs one block at a time, in order, so a tile never has to wait
there; if it ever finds a predecessor unpublished, tile order is broken, and the
simulated look-back raises instead of spinning forever.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int32, int64, uint32, uint64

from numbakern.kernels.scan_tiles import Tile, carry_reader, vector_rows
from numbakern.kernels.vector import VECTOR_BYTES
from numbakern.ops.state import device_from_source, fields_source, rows_of
from numbakern.runtime.bits import bitcast
from numbakern.runtime.cache import cached
from numbakern.runtime.device import FULL_MASK, SIMULATOR, WARP, ceil_div
from numbakern.runtime.launch import launch
from numbakern.runtime.relaxed import (fence_acq_rel, load_relaxed, load_relaxed_pair,
                                       store_relaxed_pair)
from numbakern.runtime.views import span_view

from .protocols import Cost, GridScan, check_flag

#: tile status: not yet published, aggregate published, inclusive prefix published
STATUS_X, STATUS_A, STATUS_P = 0, 1, 2
#: what a scan of one tile a segment takes for its status words and values: a scalar,
#: never read (as ``scan_tiles.NO_CARRY``: an array would be an allocation of the call)
NO_STATUS = 0


class DecoupledLookback(GridScan):
    """Single-pass grid scan by decoupled look-back (Merrill and Garland, 2016).

    Args:
        block: the block scan strategy (default ``WarpShuffle()``).
        items: items per thread in a tile (``None``: automatic).
        publish_prefix: tiles publish their inclusive prefix (status P) once known,
            which ends later tiles' look-back there. ``False`` publishes aggregates
            only: every look-back then walks back to its segment's first tile, 32
            tiles a step; slower, for teaching and for testing that path.
        hold: where item prefixes wait during the look-back: ``"registers"`` or
            ``"shared"`` (fewer registers, more resident blocks).
        vectors: load and store tiles in 16-byte vectors where the arrays allow
            (``ScanJob.tile_vectors``: a plain one-field scan of contiguous rows that
            start 16-byte aligned); ``False``: scalar loads and stores always. Both
            make the same tiles and the same combines (integer results are equal;
            float ones differ only as two runs of the look-back do).

    One launch (after zeroing the flags); ``n`` reads and ``n`` writes; order-
    preserving (any associative op); not bitwise deterministic for floats.

    Raises:
        TypeError: ``block`` not a block strategy with a block scan (``warp_shuffle``,
            ``hillis_steele``, ``blelloch``); ``items`` not an int (a float or a
            bool); ``publish_prefix`` or ``vectors`` not a bool.
        ValueError: ``items`` below 1 or past ``2**31 - 1``; an unknown ``hold``. At
            scan time, a tile of ``items`` that overflows shared memory.
    """

    name = "decoupled_lookback"
    deterministic = False
    takes_carry = True

    def __init__(self, block=None, items: int | None = None, publish_prefix: bool = True,
                 hold: str = "shared", vectors: bool = True):
        super().__init__(block, None, items, hold)
        self.publish_prefix = check_flag(publish_prefix, "publish_prefix")
        self.vectors = check_flag(vectors, "vectors")

    @property
    def key(self) -> tuple:
        return super().key + (self.publish_prefix, self.vectors)

    def __repr__(self) -> str:
        extra = "" if self.publish_prefix else ", publish_prefix=False"
        extra += "" if self.vectors else ", vectors=False"
        return super().__repr__()[:-1] + extra + ")"

    def scan(self, job) -> None:
        items = self.tile_items(job)
        threads = self.block.threads
        tiles = ceil_div(job.n, threads * items)  # per segment
        total = tiles * job.segments
        # One tile a segment: no tile waits on another, so there are no status words:
        # no zeroing launch and no allocation (a small scan is then one launch, and its
        # result the call's whole allocation, which a torch replay allocates as is).
        single = tiles == 1
        status, values = (NO_STATUS, (NO_STATUS,) * 4) if single else \
            _status_arrays(job, total)
        vectors = job.tile_vectors(self.block, items, self.hold) if self.vectors else None
        key = ("decoupled_lookback", self.block.key, items, self.publish_prefix, self.hold,
               single, vectors, job.key)
        kernel = cached(key, lambda: _build(
            self.block, job.kit, items, job.element_loader(), job.output_storer(),
            job.exclusive, job.empty, self.publish_prefix, self.hold, job.out_fields,
            single, job.carried, vectors))
        sources, outs = job.sources, job.outs
        if vectors is not None:  # a one-field scan's second handles are free: the spans
            sources, outs = (job.x, span_view(job.x)), (outs[0], span_view(outs[0]))
        launch(kernel, total, threads, job.stream, *sources, *outs, job.n, tiles,
               status, *values, job.carry_arg)

    def cost(self, n: int, in_itemsize: int, out_itemsize: int, tiles: int) -> Cost:
        """Traffic of one scan of ``n`` elements in ``tiles`` tiles (flags included)."""
        flags = 8 * tiles
        return Cost(2, n * in_itemsize + flags, n * out_itemsize + 2 * flags, 2 * tiles)


# --- status words ---------------------------------------------------------------------


def _status_arrays(job, total: int) -> tuple:
    """``(status, values)`` of ``total`` tiles: the zeroed status words, and the four
    value handles the kernel's ``publish`` and ``read`` take (the status words
    themselves where a state travels in them)."""
    packed = _packs(job.kit) or _pairs(job.kit)
    word = np.uint64 if packed else np.uint32
    status = job.zeros(total * (2 if _pairs(job.kit) else 1), word)
    if packed:
        return status, (status,) * 4
    words = [_word_dtype(d) for d in job.kit.dtypes]
    aggregates = [job.workspace.empty(total, w) for w in words]
    inclusive = [job.workspace.empty(total, w) for w in words]
    return status, (*_handles(aggregates), *_handles(inclusive))


def _packs(kit) -> bool:
    """Whether a state fits beside its status in one 64-bit word: one field of at most
    32 bits, or a one-byte field (a segmented scan's flags) and one of at most 32."""
    sizes = [np.dtype(d).itemsize for d in kit.dtypes[:kit.fields]]
    return sizes[-1] <= 4 and (kit.fields == 1 or (kit.fields == 2 and sizes[0] == 1))


def _pairs(kit) -> bool:
    """Whether a state travels beside its status in a 16-byte word: one 8-byte field
    (int64, uint64, float64; the status and the value's bits, a uint64 each), or a
    one-byte field (a segmented scan's flags, beside the status) and an 8-byte one."""
    sizes = [np.dtype(d).itemsize for d in kit.dtypes[:kit.fields]]
    return sizes[-1] == 8 and (kit.fields == 1 or (kit.fields == 2 and sizes[0] == 1))


def _word_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.uint64 if np.dtype(dtype).itemsize == 8 else np.uint32)


def _codec(dtype: np.dtype):
    """Device functions ``to_word(v)`` and ``from_word(w)``: a field as an unsigned word.

    Narrow fields (bool, 8- and 16-bit integers; float16 is held as float32) travel
    sign- or zero-extended in 32 bits; others bit for bit.
    """
    dtype = np.dtype(dtype)
    t = from_dtype(dtype)
    if dtype.itemsize == 8:

        @cuda.jit(device=True)
        def to_word(v):
            return bitcast(v, uint64)

        @cuda.jit(device=True)
        def from_word(w):
            return bitcast(w, t)

    elif dtype.itemsize == 4:

        @cuda.jit(device=True)
        def to_word(v):
            return bitcast(v, uint32)

        @cuda.jit(device=True)
        def from_word(w):
            return bitcast(w, t)

    else:

        @cuda.jit(device=True)
        def to_word(v):
            return bitcast(int32(v), uint32)

        @cuda.jit(device=True)
        def from_word(w):
            return t(bitcast(w, int32))

    return to_word, from_word


if SIMULATOR:

    @cuda.jit(device=True)
    def _read_word(a, i):
        """A published word (simulator: an atomic read, which the scan traces record)."""
        return cuda.atomic.or_(a, i, 0)

else:

    @cuda.jit(device=True)
    def _read_word(a, i):
        """A published word: one relaxed load at GPU scope (module doc)."""
        return load_relaxed(a, uint64(i))


def _packed_status(kit):
    """``publish`` and ``read`` for a one-field state packed with its status."""
    if kit.fields == 2:
        return _packed_pair_status(kit)
    to_word, from_word = _codec(kit.dtypes[0])
    shift, low = uint64(32), uint64(0xFFFFFFFF)

    @cuda.jit(device=True)
    def publish(st, v0, v1, w0, w1, tile, status, s):
        cuda.atomic.exch(st, tile, (uint64(status) << shift) | uint64(to_word(s[0])))

    @cuda.jit(device=True)
    def read(st, v0, v1, w0, w1, tile):
        word = uint64(_read_word(st, tile))  # one 64-bit read: status and value together
        return int32(word >> shift), (from_word(uint32(word & low)),)

    return publish, read


def _packed_pair_status(kit):
    """``publish`` and ``read`` for a (one-byte, up to 32-bit) state packed with its
    status: the status in bits 32-39, the byte in bits 40-47, the value below. A
    segmented scan's (flags, float32) pairs then publish and read as a plain float32
    scan's state does: one atomic each, no fence (CUB packs its tile descriptors the
    same way wherever they fit in 64 bits, ``ScanTileState``)."""
    to0, from0 = _codec(kit.dtypes[0])
    to1, from1 = _codec(kit.dtypes[1])
    shift, byte, low = uint64(32), uint64(0xFF), uint64(0xFFFFFFFF)
    high = uint64(40)

    @cuda.jit(device=True)
    def publish(st, v0, v1, w0, w1, tile, status, s):
        word = (uint64(status) << shift) | ((uint64(to0(s[0])) & byte) << high) | \
            uint64(to1(s[1]))
        cuda.atomic.exch(st, tile, word)

    @cuda.jit(device=True)
    def read(st, v0, v1, w0, w1, tile):
        word = uint64(_read_word(st, tile))  # one 64-bit read: status and value together
        return int32((word >> shift) & byte), (from0(uint32((word >> high) & byte)),
                                               from1(uint32(word & low)))

    return publish, read


def _pair_status(kit):
    """``publish`` and ``read`` for a one-field 8-byte state beside its status: words
    ``2 * tile`` (status) and ``2 * tile + 1`` (value) of the uint64 status array, moved
    as one 16-byte relaxed access each way, so no fence orders the value against the
    status (module doc)."""
    if kit.fields == 2:
        return _pair_of_two_status(kit)
    to_word, from_word = _codec(kit.dtypes[0])

    @cuda.jit(device=True)
    def publish(st, v0, v1, w0, w1, tile, status, s):
        store_relaxed_pair(st, uint64(2 * tile), uint64(status), uint64(to_word(s[0])))

    @cuda.jit(device=True)
    def read(st, v0, v1, w0, w1, tile):
        status, word = load_relaxed_pair(st, uint64(2 * tile))  # both, one access
        return int32(status), (from_word(word),)

    return publish, read


def _pair_of_two_status(kit):
    """:func:`_pair_status` for a (one-byte, 8-byte) state (a segmented scan's flags and
    value): the status in bits 0-7 of the first word, the byte in bits 8-15, the value
    in the second word."""
    to0, from0 = _codec(kit.dtypes[0])
    to1, from1 = _codec(kit.dtypes[1])
    byte, eight = uint64(0xFF), uint64(8)

    @cuda.jit(device=True)
    def publish(st, v0, v1, w0, w1, tile, status, s):
        head = uint64(status) | ((uint64(to0(s[0])) & byte) << eight)
        store_relaxed_pair(st, uint64(2 * tile), head, uint64(to1(s[1])))

    @cuda.jit(device=True)
    def read(st, v0, v1, w0, w1, tile):
        head, word = load_relaxed_pair(st, uint64(2 * tile))  # both, one access
        return int32(head & byte), (from0(uint32((head >> eight) & byte)), from1(word))

    return publish, read


def _status_words(kit):
    """``publish`` and ``read`` of a state's status words: packed in 64 bits, paired in
    16 bytes, or a status array beside value arrays."""
    if _packs(kit):
        return _packed_status(kit)
    if _pairs(kit):
        return _pair_status(kit)
    return _separate_status(kit)


def _no_status_words(kit):
    """``publish`` and ``lookback`` of a scan of one tile a segment, whose kernels never
    call them (every tile is its segment's first) and are handed :data:`NO_STATUS`:
    they touch nothing, so that the branches that would call them type-check."""
    identity = kit.identity

    @cuda.jit(device=True)
    def publish(st, v0, v1, w0, w1, tile, status, s):
        pass

    @cuda.jit(device=True)
    def lookback(st, v0, v1, w0, w1, tile, first):
        return identity()

    return publish, lookback


def _separate_status(kit):
    """``publish`` and ``read`` for states in value arrays beside a uint32 status array."""
    identity = kit.identity
    put, get = _field_words(kit)

    @cuda.jit(device=True)
    def publish(st, v0, v1, w0, w1, tile, status, s):
        if status == STATUS_P:
            put(w0, w1, tile, s)
        else:
            put(v0, v1, tile, s)
        fence_acq_rel()  # the value reaches memory before the status does (a release)
        cuda.atomic.exch(st, tile, uint32(status))

    @cuda.jit(device=True)
    def read(st, v0, v1, w0, w1, tile):
        status = int32(_read_word(st, tile))
        if status == STATUS_X:
            return status, identity()
        fence_acq_rel()  # the status is read before the value (an acquire)
        if status == STATUS_P:
            return status, get(w0, w1, tile)
        return status, get(v0, v1, tile)

    return publish, read


def _handles(words: list) -> tuple:
    """The ``(h0, h1)`` handles of the word arrays, one per field, as
    ``numbakern/ops/state.py`` pairs a state's arrays."""
    if len(words) <= 2:
        return (words * 2)[:2]
    return tuple(words), words[0]


def _field_words(kit):
    """``put(a0, a1, i, s)`` and ``get(a0, a1, i)``: a state in arrays of words, one per
    field (the handles :func:`_handles` makes); ``get`` reads with relaxed loads (from
    L2, never a stale L1 line; atomics under the simulator)."""
    if kit.fields > 2:
        return _n_field_words(kit)
    to0, from0 = _codec(kit.dtypes[0])
    if kit.fields == 1:

        @cuda.jit(device=True)
        def put(a0, a1, i, s):
            a0[i] = to0(s[0])

        @cuda.jit(device=True)
        def get(a0, a1, i):
            return (from0(_read_word(a0, i)),)

        return put, get
    to1, from1 = _codec(kit.dtypes[1])

    @cuda.jit(device=True)
    def put(a0, a1, i, s):
        a0[i] = to0(s[0])
        a1[i] = to1(s[1])

    @cuda.jit(device=True)
    def get(a0, a1, i):
        return (from0(_read_word(a0, i)), from1(_read_word(a1, i)))

    return put, get


def _n_field_words(kit):
    """:func:`_field_words` for ``N >= 3`` fields, from source (one line per field)."""
    env = {}
    for k, d in enumerate(kit.dtypes):
        env[f"to{k}"], env[f"from{k}"] = _codec(d)
    n = kit.fields
    put = device_from_source("put", "def put(a0, a1, i, s):\n" + fields_source(
        "    a0[{k}][i] = to{k}(s[{k}])", n, "\n") + "\n", env)
    get = device_from_source("get", "def get(a0, a1, i):\n    return (" + fields_source(
        "from{k}(read_word(a0[{k}], i))", n) + ",)\n", {**env, "read_word": _read_word})
    return put, get


def _waiter(read):
    """``wait(st, ..., tile, me) -> (status, state)``: tile's status once published."""
    if SIMULATOR:

        @cuda.jit(device=True)
        def wait(st, v0, v1, w0, w1, tile, me):
            status, s = read(st, v0, v1, w0, w1, tile)
            if status == STATUS_X:  # blocks run one at a time: it will never publish
                raise RuntimeError(
                    f"decoupled look-back: tile {me} waits for tile {tile}, which has not "
                    "published; tiles are being scanned out of order"
                )
            return status, s

        return wait

    @cuda.jit(device=True)
    def wait(st, v0, v1, w0, w1, tile, me):
        status, s = read(st, v0, v1, w0, w1, tile)
        while status == STATUS_X:  # tile < me: its block is running and will publish
            status, s = read(st, v0, v1, w0, w1, tile)
        return status, s

    return wait


def _build_lookback(kit, wait):
    combine, identity, shfl_up, shfl_idx = kit.combine, kit.identity, kit.shfl_up, kit.shfl_idx

    @cuda.jit(device=True)
    def lookback(st, v0, v1, w0, w1, tile, first):
        """Called by warp 0: the combine of tiles ``first .. tile-1`` (all lanes)."""
        lane = cuda.threadIdx.x % WARP
        end = tile
        running = identity()  # placeholder until `have`
        have = False
        while True:
            pred = end - WARP + lane  # lane 31 is the nearest tile
            if pred >= first:
                status, s = wait(st, v0, v1, w0, w1, pred, tile)
            else:  # before the segment: a stop marker whose value is never combined
                status, s = STATUS_P, identity()
            head = int32(1) if status == STATUS_P else int32(0)
            d = 1
            while d < WARP:  # segmented inclusive scan; a P lane starts a segment
                other = shfl_up(s, d)
                other_head = cuda.shfl_up_sync(FULL_MASK, head, d)
                if lane >= d and head == 0:
                    s = combine(other, s)
                    head = other_head
                d *= 2
            window = shfl_idx(s, WARP - 1)  # nearest P (or window start) .. end-1
            found = cuda.shfl_sync(FULL_MASK, head, WARP - 1)
            running = combine(window, running) if have else window
            have = True
            if found != 0:
                return running
            end -= WARP

    return lookback


def _rows(vectors, outputs: int):
    """``in_rows(src0, src1, a, b, n)`` and ``out_rows(dst0, dst1, a, b, n)``: the pairs
    of rows a tile reads and writes. A scalar tile's: row ``(a, b)`` of each 3-D view.
    A vector tile's (one-field: the kernel is handed each 3-D view and a 1-D span of
    its memory in place of the unused second handle): 1-D C-contiguous rows cut from
    the spans, which vector loads and stores index
    (``scan_tiles.vector_rows``)."""
    if vectors is not None:
        return (vector_rows(VECTOR_BYTES // vectors.load),
                vector_rows(VECTOR_BYTES // vectors.store))
    dst_rows = rows_of(outputs)

    @cuda.jit(device=True)
    def in_rows(src0, src1, a, b, n):
        return src0[a, b], src1[a, b]

    @cuda.jit(device=True)
    def out_rows(dst0, dst1, a, b, n):
        return dst_rows(dst0, dst1, a, b)

    return in_rows, out_rows


def _build(block, kit, items, load, store, exclusive, empty, publish_prefix, hold,
           outputs: int, single: bool = False, carried: bool = False, vectors=None):
    t = Tile(block, kit, items, load, store, exclusive, empty, hold, vectors)
    read_carry = carry_reader(kit, carried)
    combine, kload, kstore = kit.combine, kit.load, kit.store
    load_tile, block_scan, emit_tile = t.load_tile, t.block_scan, t.emit_tile
    thread_prefix = t.thread_prefix
    if single:
        publish, lookback = _no_status_words(kit)
    else:
        publish, read = _status_words(kit)
        lookback = _build_lookback(kit, _waiter(read))
    size = t.size
    xs_storage, temp_storage, local_storage = t.xs_storage, t.temp_storage, t.local_storage
    broadcast = kit.shared_temp(1)
    in_rows, out_rows = _rows(vectors, outputs)

    @cuda.jit
    def lookback_kernel(src0, src1, dst0, dst1, n, tiles, st, v0, v1, w0, w1, cin):
        xs0, xs1 = xs_storage()
        tmp0, tmp1 = temp_storage()
        bc0, bc1 = broadcast()
        l0, l1 = local_storage()
        tid = cuda.threadIdx.x
        tile = int64(cuda.blockIdx.x)  # 1. blocks launch in index order (module docstring)
        seg = tile // tiles
        k = tile - seg * tiles  # the tile's place in its segment
        rows = src0.shape[1]
        a = seg // rows
        b = seg - a * rows
        start = k * size
        row0, row1 = in_rows(src0, src1, a, b, n)
        r = load_tile(row0, row1, n, start, xs0, xs1, l0, l1)
        inc, exc, total = block_scan(r, tmp0, tmp1)
        if k == 0 and carried:  # 2. the segment's first tile: its prefix is the carry
            carry = read_carry(cin, seg)
            if tid == 0 and not single:  # a single tile's is read by none
                publish(st, v0, v1, w0, w1, tile, STATUS_P, combine(carry, total))
            has = True
        elif k == 0:  # 2. nothing before the segment's first tile
            if tid == 0 and not single:
                publish(st, v0, v1, w0, w1, tile, STATUS_P, total)
            carry = total
            has = False
        else:
            if tid == 0:
                publish(st, v0, v1, w0, w1, tile, STATUS_A, total)
            if tid < WARP:  # 3. look back
                prefix = lookback(st, v0, v1, w0, w1, tile, tile - k)
                if tid == 0:  # 4. publish the inclusive prefix; hand the carry round
                    if publish_prefix:
                        publish(st, v0, v1, w0, w1, tile, STATUS_P, combine(prefix, total))
                    kstore(bc0, bc1, 0, prefix)
            cuda.syncthreads()
            carry = kload(bc0, bc1, 0)
            has = True
        pre, have = thread_prefix(exc, carry, has)
        out0, out1 = out_rows(dst0, dst1, a, b, n)
        emit_tile(out0, out1, n, start, pre, have, xs0, xs1, l0, l1)

    return lookback_kernel
