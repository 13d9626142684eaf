"""Warp-per-row scans: many short rows, one warp each, rows grid-strided.

The lesson
----------
The tile scans (``numbakern/kernels/scan_tiles.py``) give every tile of every row a block of
its own: a row of 2 elements still gets a block of 256 threads, its barriers and its
flags. With thousands of short rows (``cumsum`` along axis 0 of a ``(2, 4000)`` array
is 4000 rows of 2), that is thousands of mostly idle blocks: wasteful on a GPU, and
under Numba's simulator, where every block is a crowd of OS threads, minutes.

Short rows want what the row reductions do (``numbakern/kernels/axis_reduce.py``): **one warp
per row**, ``threads / 32`` rows per block, and a grid capped at what fills the device
once, the warps striding over the rows (``row += warps in the grid``). A warp scans
its row in order, 32 elements at a time:

1. **Load a chunk.** Lane ``l`` loads element ``start + l`` (32 neighbours: one
   coalesced load when the row is contiguous); lanes past the row's end take the
   identity, which only ever reaches lanes past the end.
2. **Warp scan** the chunk with the block strategy's warp form (``warp_shuffle``:
   Kogge-Stone with ``shfl_up_sync``, no shared memory, no barrier; ``hillis_steele``
   and ``blelloch``: their own steps on the warp's slots of shared memory): lane ``l``
   gets lanes ``0..l`` combined in order.
3. **Carry in.** Every lane puts the combine of the earlier chunks (``carry``) in
   front of its prefix: ``carry (+) prefix``, in that order, so a non-commutative op
   keeps its order. The first chunk has no carry (a flag, never an identity folded
   in). An exclusive scan takes lane ``l - 1``'s result (lane 0: the carry, or the
   op's empty result in the first chunk).
4. **Store** the chunk, and broadcast lane 31's inclusive result as the next carry.

An **initial carry** (``job.carry``, one value per row in device memory) is the first
chunk's carry: the row starts with ``have`` set, so the order of combines is the one
a longer row would have had.

**Rows of at most 16 elements share a warp.** A warp on a row of 2 would leave 30
lanes idle; instead the row gets ``group`` lanes, the smallest power of two that holds
it, and ``32 / group`` rows lie side by side in one warp, each scanned in one chunk
by the same Kogge-Stone steps, ``log2(group)`` of them, a lane combining only with
lanes of its own group (``lane % group >= offset``: CUDA's ``width`` argument done
by hand). A row of 2 costs one shuffle step, shared by 16 rows.

A row of ``n`` elements costs ``ceil(n / 32)`` chunks of 5 shuffle steps and one
broadcast each, run one after another: for rows up to about a thousand elements
that is less than the tile scan's barriers, flags and idle threads. Each element is
read once and written once, and combines happen in an order fixed by ``n`` alone:
the result is **bitwise reproducible**, whichever grid strategy was asked for.

Which strategy serves here
--------------------------
A row belongs to one warp, so no block ever waits for another: the grid strategy
(``decoupled_lookback`` or ``reduce_then_scan``) has nothing to do and is not used.
The warp scan is the block strategy's warp form (``strategies/protocols.py``); a block
strategy without one scans its rows as tiles (``layout="auto"``), and
``layout="warp"`` refuses it.
"""

from __future__ import annotations

from numba import cuda, int64

from numbakern.kernels.scan_tiles import carry_reader
from numbakern.ops.state import constant_state, rows_of
from numbakern.runtime.cache import cached
from numbakern.runtime.device import SIMULATOR, WARP, ceil_div, max_resident_blocks
from numbakern.runtime.launch import launch

#: rows of at most this many elements get one warp each under ``layout="auto"``
WARP_ROW_MAX = 1024
#: threads per block of the warp layout (rows per block: threads / 32); fewer under the
#: simulator, where every thread is an OS thread
ROW_THREADS = 64 if SIMULATOR else 128
LAYOUTS = ("auto", "warp", "tiles")


def check_layout(layout) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`, else ``ValueError``."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout must be 'auto', 'warp' or 'tiles', got {layout!r}")
    return layout


def use_warp_rows(layout: str, n: int, segments: int, block) -> bool:
    """Whether a scan of ``segments`` rows of ``n`` elements runs a warp per row with
    ``block``'s warp form.

    ``"auto"``: yes when the block strategy has a warp form, there are at least two
    rows and each has at most :data:`WARP_ROW_MAX` elements (one row, however short,
    is better scanned by a whole block: its tile is one block's work, in parallel
    over all its threads).

    Raises:
        ValueError: ``layout="warp"`` with a block strategy that has no warp form.
    """
    if layout == "auto":
        return block.offers_warp_scan() and segments >= 2 and n <= WARP_ROW_MAX
    if layout == "warp" and not block.offers_warp_scan():
        raise ValueError(f"layout='warp' scans each row with the block strategy's warp form; "
                         f"{block.name} has none: use layout='tiles' or 'auto'")
    return layout == "warp"


def lane_group(n: int) -> int:
    """Lanes per row: 32, or for rows of at most 16 elements the smallest power of two
    that holds the row (``32 / group`` rows then share a warp)."""
    return WARP if n > WARP // 2 else 1 << (max(1, n) - 1).bit_length()


def scan_rows(job, block) -> None:
    """Scan ``job.x`` into ``job.outs`` (a ``ScanJob``), one warp per row, with the
    warp form of ``block`` (its thread count is not used: blocks here have
    :data:`ROW_THREADS`)."""
    group = lane_group(job.n)
    per_block = (ROW_THREADS // WARP) * (WARP // group)
    blocks = max(1, min(ceil_div(job.segments, per_block), max_resident_blocks(ROW_THREADS)))
    key = ("scan_rows", group, block.key, job.key)
    kernel = cached(key, lambda: build_row_scan(
        block, job.kit, group, job.element_loader(), job.output_storer(), job.exclusive,
        job.empty, job.out_fields, job.carried))
    launch(kernel, blocks, ROW_THREADS, job.stream, *job.sources, *job.outs, job.n,
           job.carry_arg)


def build_row_scan(block, kit, group: int, load, store, exclusive: bool, empty: tuple,
                   outputs: int = 1, carried: bool = False):
    """Kernel ``(src0, src1, dst0, dst1, n, cin)``: each warp scans whole rows of the
    3-D ``(A, B, n)`` views (``32 / group`` at a time, ``group`` lanes each) with
    ``block``'s warp scan, the ``A * B`` rows grid-strided over the warps;
    ``carried``: row ``r`` starts from ``cin[r]`` (else ``cin`` is never read)."""
    read_carry = carry_reader(kit, carried)
    form = block.build_warp_scan(kit, group)
    group_scan = form.function
    temp = kit.shared_temp(max(1, form.slots * (ROW_THREADS // WARP)))
    dst_rows = rows_of(outputs)
    combine, identity, shfl_up, shfl_idx = kit.combine, kit.identity, kit.shfl_up, kit.shfl_idx
    empty_state = constant_state(empty)
    per_warp = WARP // group

    @cuda.jit
    def scan_rows_kernel(src0, src1, dst0, dst1, n, cin):
        temp0, temp1 = temp()
        lane = cuda.threadIdx.x % WARP
        pos = lane % group  # the lane's place in its row's chunk
        warps = cuda.blockDim.x // WARP
        first = (int64(cuda.blockIdx.x) * warps + cuda.threadIdx.x // WARP) * per_warp
        step = int64(cuda.gridDim.x) * warps * per_warp
        rows = src0.shape[1]
        segments = src0.shape[0] * rows
        while first < segments:  # the warp's first row: the same in all 32 lanes
            row = first + lane // group
            live = row < segments  # the warp's last rows may lie past the end
            a = min(row, segments - 1) // rows
            b = min(row, segments - 1) - a * rows
            row0, row1 = src0[a, b], src1[a, b]
            out0, out1 = dst_rows(dst0, dst1, a, b)
            if carried:
                carry = read_carry(cin, a * rows + b)
                have = True
            else:
                carry = identity()  # a placeholder: have=False keeps it out of every result
                have = False
            start = int64(0)
            while start < n:  # one chunk for group < 32 (n <= group)
                j = start + pos
                inc = group_scan(load(row0, row1, j, n) if j < n else identity(), temp0, temp1)
                if have:
                    inc = combine(carry, inc)
                if exclusive:
                    y = shfl_up(inc, 1)  # lane l-1's prefix
                    if pos == 0:
                        y = carry if have else empty_state()
                else:
                    y = inc
                if live and j < n:
                    store(out0, out1, j, y)
                start += group
                if start < n:  # only with group = 32: lane 31 holds the chunk's total
                    carry = shfl_idx(inc, WARP - 1)
                    have = True
            first += step

    return scan_rows_kernel
