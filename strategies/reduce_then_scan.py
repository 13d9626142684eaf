"""Reduce-then-scan grid scan: chunk totals, a scan of them, then each chunk with its carry.

The lesson
----------
A block can scan a tile (``numbakern/kernels/scan_tiles.py``), but a tile in the middle of an
array needs the combine of *everything before it*, which other blocks hold. Blocks of
one launch cannot wait for each other safely, so the simplest answer lets launches
end in between (Merrill and Garland's "reduce-then-scan", the shape of most GPU scans
before 2016):

1. **Reduce.** Each segment is cut into ``C`` chunks of consecutive tiles; block
   ``(segment, c)`` reduces its chunk, tile by tile, and writes the chunk's total.
2. **Scan the totals.** One block per segment scans its ``C`` chunk totals
   (exclusive): ``carry[c]`` is the combine of chunks ``0..c-1``.
3. **Scan with the carry.** Block ``(segment, c)`` reads its chunk again and scans
   it tile by tile, starting from ``carry[c]`` (chunk 0 starts from nothing) and
   carrying each tile's total into the next.

When a segment fits in one chunk (short rows), passes 1 and 2 are skipped and each
block scans whole segments: one launch, one read, one write.

An **initial carry** (``job.carry``: one value per segment, in device memory) goes on
the left of chunk 0's start and of every later chunk's carry: ``carry (+) carry[c]``,
in pass 3, so passes 1 and 2 are unchanged and the order of combines stays fixed.

Every combine happens in an order fixed by the sizes alone, so the result is
**bitwise identical run to run**, floats included, and element order is kept (any
associative op). The price is the second read of the input: ``2n`` reads and ``n``
writes, where the decoupled look-back (``strategies/decoupled_lookback.py``) moves
``n`` and ``n``. ``C`` is a few chunks per multiprocessor, so passes 1 and 3 fill the
GPU and pass 2 scans only a few thousand totals.
"""

from __future__ import annotations

from numba import cuda, int64

from numbakern.ops.state import rows_of
from numbakern.kernels.scan_tiles import NO_CARRY, Tile, carry_reader, state_loader
from numbakern.runtime.cache import cached
from numbakern.runtime.device import ceil_div, max_resident_blocks
from numbakern.runtime.launch import bounded_jit, launch

from .protocols import Cost, GridScan


class ReduceThenScan(GridScan):
    """Grid scan by chunk totals, an exclusive scan of them, and a carried scan per chunk.

    Args:
        block: the block scan strategy (default ``WarpShuffle()``).
        blocks: about how many chunks (blocks of passes 1 and 3) in all; ``None``:
            two per resident block of the device.
        items: items per thread in a tile (``None``: automatic).
        hold: where item prefixes wait during the block scan: ``"registers"`` or
            ``"shared"``.

    Deterministic; order-preserving (any associative op); three launches (one for
    segments that fit in one chunk). The reduce-then-scan baseline of Merrill and
    Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back" (2016).

    Raises:
        TypeError: ``block`` not a block strategy with a block scan (``warp_shuffle``,
            ``hillis_steele``, ``blelloch``); ``items`` or ``blocks`` not an int (a
            float or a bool).
        ValueError: ``items`` or ``blocks`` below 1 or past ``2**31 - 1``; an
            unknown ``hold``. At scan time, a tile of ``items`` that overflows shared
            memory.
    """

    name = "reduce_then_scan"
    deterministic = True
    takes_carry = True

    def scan(self, job) -> None:
        items = self.tile_items(job)
        threads = self.block.threads
        tile = threads * items
        tiles = ceil_div(job.n, tile)  # per segment
        chunks, per_chunk = self.chunking(job.segments, tiles)
        main = self._kernels(job, items, "main", job.element_loader(), job.output_storer(),
                             job.exclusive, job.empty, 2, job.out_fields)
        if chunks == 1:
            carries = job.alloc_states((1, 1, 1))
        else:
            totals = job.alloc_states((1, job.segments, chunks))
            launch(main[0], job.segments * chunks, threads, job.stream,
                   *job.sources, job.n, tiles, per_chunk, chunks, *totals)
            carries = job.alloc_states((1, job.segments, chunks))
            state = cached(("scan_state_load", job.kit), lambda: state_loader(job.kit))
            partial = self._kernels(job, items, "totals", state, job.kit.store, True,
                                    job.kit.identity_values, job.kit.fields, job.kit.fields)
            launch(partial[1], job.segments, threads, job.stream, *totals, *carries,
                   chunks, ceil_div(chunks, tile), ceil_div(chunks, tile), 1, *carries,
                   NO_CARRY)
        launch(main[1], job.segments * chunks, threads, job.stream, *job.sources, *job.outs,
               job.n, tiles, per_chunk, chunks, *carries, job.carry_arg)

    def chunking(self, segments: int, tiles: int) -> tuple[int, int]:
        """``(chunks per segment, tiles per chunk)`` for about ``blocks`` blocks in all."""
        target = self.blocks or 2 * max_resident_blocks(self.block.threads)
        chunks = max(1, min(tiles, ceil_div(target, segments)))
        per_chunk = ceil_div(tiles, chunks)
        return ceil_div(tiles, per_chunk), per_chunk

    def _kernels(self, job, items, source, load, store, exclusive, empty, sources, outputs):
        """``sources``, ``outputs``: how many arrays the kernels read and write (two
        inputs, the job's outputs; or the chunk totals' and carries' states)."""
        key = ("reduce_then_scan", source, self.block.key, items, self.hold, job.key)
        return cached(key, lambda: _build(self.block, job.kit, items, load, store,
                                          exclusive, empty, self.hold, sources, outputs,
                                          job.carried and source == "main"))

    def cost(self, n: int, in_itemsize: int, out_itemsize: int, chunks: int) -> Cost:
        """Traffic of one scan of ``n`` elements cut into ``chunks`` chunks."""
        if chunks <= 1:
            return Cost(1, n * in_itemsize, n * out_itemsize, 0)
        return Cost(3, 2 * n * in_itemsize, n * out_itemsize, 0)


def _build(block, kit, items, load, store, exclusive, empty, hold, sources, outputs,
           carried: bool = False):
    """The pass-1 kernel (chunk totals) and the scan kernel (passes 2 and 3), reading
    ``sources`` arrays and writing ``outputs`` (``numbakern/ops/state.py``'s
    ``rows_of``); ``carried``: the scan kernel starts each segment from its initial
    carry (its last argument; any array otherwise, never read)."""
    t = Tile(block, kit, items, load, store, exclusive, empty, hold)
    read_carry = carry_reader(kit, carried)
    combine, identity, kload, kstore = kit.combine, kit.identity, kit.load, kit.store
    load_tile, block_scan, emit_tile = t.load_tile, t.block_scan, t.emit_tile
    thread_prefix = t.thread_prefix
    size = t.size
    xs_storage, temp_storage, local_storage = t.xs_storage, t.temp_storage, t.local_storage
    src_rows, dst_rows, state_rows = rows_of(sources), rows_of(outputs), rows_of(kit.fields)

    @cuda.jit(device=True)
    def chunk_of_block(chunks, rows):
        """This block's ``(segment, c, a, b)``: chunk ``c`` of its segment, which is
        row ``(a, b)`` of ``rows`` inner rows (``src1.shape[1]``: ``src0`` may be a
        tuple of arrays, ``numbakern/ops/state.py``)."""
        blk = int64(cuda.blockIdx.x)
        seg = blk // chunks
        a = seg // rows
        return seg, blk - seg * chunks, a, seg - a * rows

    @bounded_jit(block.threads)
    def totals_kernel(src0, src1, n, tiles, per_chunk, chunks, tot0, tot1):
        """Pass 1: block (segment, c) writes the total of chunk c."""
        xs0, xs1 = xs_storage()
        tmp0, tmp1 = temp_storage()
        l0, l1 = local_storage()
        seg, c, a, b = chunk_of_block(chunks, src1.shape[1])
        row0, row1 = src_rows(src0, src1, a, b)
        acc = identity()
        has = False
        t = c * per_chunk
        stop = min(t + per_chunk, tiles)
        while t < stop:
            r = load_tile(row0, row1, n, t * size, xs0, xs1, l0, l1)
            total = block_scan(r, tmp0, tmp1)[2]
            acc = combine(acc, total) if has else total
            has = True
            cuda.syncthreads()  # before the next tile reuses shared memory
            t += 1
        if cuda.threadIdx.x == 0:
            tr0, tr1 = state_rows(tot0, tot1, 0, seg)
            kstore(tr0, tr1, c, acc)

    @bounded_jit(block.threads)
    def scan_kernel(src0, src1, dst0, dst1, n, tiles, per_chunk, chunks, car0, car1, cin):
        """Passes 2 and 3: block (segment, c) scans chunk c, starting from carry c
        (with an initial carry on its left)."""
        xs0, xs1 = xs_storage()
        tmp0, tmp1 = temp_storage()
        l0, l1 = local_storage()
        seg, c, a, b = chunk_of_block(chunks, src1.shape[1])
        if c > 0:
            cr0, cr1 = state_rows(car0, car1, 0, seg)
            carry = kload(cr0, cr1, c)
            if carried:
                carry = combine(read_carry(cin, seg), carry)
            has = True
        elif carried:
            carry = read_carry(cin, seg)
            has = True
        else:
            carry = identity()  # a placeholder: has=False keeps it out of every result
            has = False
        row0, row1 = src_rows(src0, src1, a, b)
        out0, out1 = dst_rows(dst0, dst1, a, b)
        t = c * per_chunk
        stop = min(t + per_chunk, tiles)
        while t < stop:
            r = load_tile(row0, row1, n, t * size, xs0, xs1, l0, l1)
            _, exc, total = block_scan(r, tmp0, tmp1)
            pre, have = thread_prefix(exc, carry, has)
            emit_tile(out0, out1, n, t * size, pre, have, xs0, xs1, l0, l1)
            carry = combine(carry, total) if has else total
            has = True
            cuda.syncthreads()  # before the next tile reuses shared memory
            t += 1

    return totals_kernel, scan_kernel
