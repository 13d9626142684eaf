"""Row-wise kernels: softmax, log-softmax and their backward passes.

Every kernel here takes 3-D views ``(outer, inner, n)``: a row is ``x[o, i, :]``, its
``n`` elements at any stride, so any axis of any array reaches the kernel without a
copy (``numbakern/api/softmax.py`` builds the views). A *group* of threads owns a row at a
time and loops over rows grid-strided:

* ``layout="block"``: the group is the whole block; the row's maximum and sum are
  block reduces built by the caller's block strategies (``build_reduce`` with
  numbakern's ``MAX`` and ``SUM`` ops, or the online ``(max, sum)`` op of
  ``strategies/online_softmax.py``, which the plan carries), and thread 0 hands the
  result to the block through shared memory.
* ``layout="warp"``: the group is one warp, ``threads / 32`` rows per block, for short
  rows; the reduce is the block strategy's warp form (``warp_shuffle``: its shuffle
  tree, no barrier, no shared memory) and lane 0's result is shuffled to every lane.
  Or the group is a run of ``lanes`` lanes of a warp (a power of two below 32,
  ``32 / lanes`` rows a warp at once: :attr:`RowPlan.lanes`), reduced by an XOR
  butterfly within the run (every lane gets the result, no broadcast), as PyTorch's
  persistent warp softmax gives a row of ``n <= 16`` a run of ``next_pow2(n)`` lanes
  (``aten/src/ATen/native/cuda/PersistentSoftmax.cuh``, its ``WARP_SIZE``): shorter
  rows hold more elements a lane, so more bytes are in flight per load phase and
  each reduce takes ``log2(lanes)`` shuffles. The runs of one warp never wait for
  each other (each shuffles under its own lane mask), so a run past the last row
  may leave the loop while the others reduce.

How the row is read is the other choice (``per_thread``):

* **fused** (``per_thread = K > 0``): each thread loads its ``K`` elements of the row
  (``lane, lane + G, ..., lane + (K-1)G`` for a group of ``G`` threads: every warp
  load is coalesced) into registers once, reduces, and writes: one read and one
  write of device memory, the least a softmax can move. ``K`` is a compile-time
  constant, so the loops unroll and the row never leaves registers.
* **tiled** (``per_thread = 0``): rows of any length. Each pass over the row loops
  in tiles of ``UNROLL * G`` elements, ``UNROLL`` loads in flight per thread. A
  forward pass reads the row three times (maximum, sum, write) with
  ``"max_then_sum"`` and twice with ``"online"``: the online normalizer of
  ``strategies/online_softmax.py`` computes maximum and sum in one pass.
* **staged** (:attr:`RowPlan.staged`, rows in 16-byte vectors): a forward row too
  long for registers but not for shared memory is read once, each vector stored
  to the block's dynamic shared memory as it arrives and folded into the thread's
  online ``(max, sum)`` (or its maximum, with ``"max_then_sum"``, whose sum then
  reads the vectors back), and the write reads them back from there: one read and
  one write of device memory, as fused, for rows up to :func:`stage_bytes`. The
  log_softmax backward pass stages ``dy`` as it sums it and reads ``y`` once. On
  sm_80 and later (:attr:`RowPlan.async_copy`) a thread copies all its vectors of
  the row with ``cp.async`` at once, in two groups, and folds the first while the
  second is in flight.

And how elements move (``vector``): scalar loads and stores, or 16-byte vectors
(``numbakern/kernels/vector.py``: a quarter of the instructions for float32) where the arrays
allow them (:func:`vector_width`). A fused kernel's rows must start 16-byte aligned
and hold whole vectors; a tiled kernel reads the few elements of each row before its
first 16-byte boundary and after its last with scalar loads, as PyTorch's softmax
does, so any row length serves as long as each row lies as far from a boundary in
every array (then one thread's vectors of ``x`` are its vectors of ``y``).

And what a row keeps (``keep``, for ``mask=``, ``causal=``, ``scale=``): nothing
special (the kernels above), or a *kept* kernel, fused or tiled, block or warp, with
every block strategy: it loads an element its row drops as -inf and a kept one as
``x * scale``, so the row's (max, sum) and its output follow from the same code; a
mask row is found from the row's number through a 4-D view of the mask whose
broadcast dimensions have stride 0, a causal limit from the row's query index.
Kept kernels read vectors in the fused forward pass only (else scalars); no element,
nor vector, wholly dropped by the causal limit is read.

Numerics (no fastmath flags; ``math.log`` and float64's ``math.exp`` are libdevice's
accurate ones, the float32 and half exps :func:`row_exp`'s, within a few units in the
last place; float32 maxima one ``max.NaN.f32``, :func:`row_max`): float16 loads widen
to float32 and results narrow back; the maximum is always
subtracted; log-softmax is ``(x - max) - log(sum)``: ``x - max`` is exact for
nearby values even at ``x = 1e7`` in float32, and the small ``log(sum)`` comes last;
NaN-propagating maxima. A row holding NaN or +inf, or nothing but -inf, has no finite
normalizer and gives NaN throughout, as PyTorch does (``exp(x - max)`` with max
+-inf is ``exp(nan)``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numba import cuda, from_dtype, int64, uint32, uint64

from numbakern.kernels import bfloat16
from numbakern.kernels.vector import (VECTOR_BYTES, rows_aligned, vector_lanes, vector_loader,
                     vector_storer)
from numbakern.ops import MAX, SUM
from numbakern.ops.state import state_kit
from numbakern.runtime.async_copy import async_copies, commit, copy16, wait_groups
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import REGISTER_FILE, SIMULATOR, WARP, shared_capacity
from numbakern.runtime.fastmath import MAX_NAN_CAPABILITY, exp2_ftz, max_nan
from numbakern.runtime.launch import bounded_jit
from numbakern.runtime.views import address, skip, span_view

UNROLL = 4  # loads in flight per thread in a tiled pass
VECTORS = 4  # 16-byte loads in flight per thread in a tiled pass over vectors
TILE_ELEMENTS = 16  # at most, per thread, held in compute-dtype registers by a tile


def tile_vectors(plan) -> int:
    """Vectors a tiled pass loads per thread per tile: :data:`VECTORS`, fewer where
    that would hold more than :data:`TILE_ELEMENTS` (float16's vectors of eight halves
    widen to sixteen float32 registers each pair)."""
    return max(1, min(VECTORS, TILE_ELEMENTS // plan.vector))


# Vectors a lane of a staged forward row may hold in registers (RowPlan.held), most
# first: 8 is half a 512-thread block's share of a float32 row of 32768 (32 more
# registers a thread, 96 of the 128 a block alone on a multiprocessor may take), 4 fits
# three blocks of 256 (80 of 85).
HELD = (8, 4)
HELD_VECTOR_REGISTERS = VECTOR_BYTES // 4  # a held 16-byte vector's 32-bit registers
TILED_REGISTERS = 64  # a tiled or staged float32-compute kernel's, nothing held (sm_90)
MAX_REGISTERS = 128  # a fused kernel may take this many: 512 threads per SM at least

FORWARD = ("softmax", "log_softmax")
BACKWARD = ("softmax_backward", "log_softmax_backward")
NORMALIZERS = ("max_then_sum", "online")
# What a kept kernel keeps of a row: every element (``scale=`` alone), those its mask
# row holds True, those up to the causal limit, or both.
KEEPS = ("all", "mask", "causal", "mask&causal")


def compute_dtype(dtype) -> np.dtype:
    """float16 and bfloat16 compute in float32; float32 and float64 in themselves."""
    if dtype == "bfloat16":
        return np.dtype(np.float32)
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype == np.float16 else dtype


HALVES = ("float16", "bfloat16")


@cuda.jit(device=True)
def accurate_exp(x):
    return math.exp(x)


LOG2E, HALF_LOG2E = np.float32(np.log2(np.e)), np.float32(np.log2(np.e) / 2)


@cuda.jit(device=True)
def flushing_exp(x):
    return exp2_ftz(x * LOG2E)


@cuda.jit(device=True)
def squared_exp(x):
    r = exp2_ftz(x * HALF_LOG2E)
    return r * r


def row_exp(result: str):
    """The device ``exp`` for values rounded to ``result`` (a dtype's name) in the end.

    float32 and bfloat16: the square of ``ex2.approx.ftz(x * log2(e) / 2)``, which
    keeps subnormal results (down to 2^-149, where the halved exponent stays above
    -126) in three instructions where libdevice's accurate ``expf`` takes ten and its
    ``exp2f`` five; within about ``6 + 1.2 |x|`` units in the last place of float32
    (the argument's rounding grows with ``|x|``, as ``x - max`` carries a rounding of
    that size already) against ``expf``'s 2. float16: ``ex2.approx.ftz(x * log2(e))``,
    two instructions; what it flushes (results under 2^-126) rounds to zero in float16
    anyway. A row alone on its multiprocessor waits on these instructions
    (bench/NOTES.md). float64: the accurate ``exp``. The simulator runs the same
    arithmetic (:mod:`numbakern.runtime.fastmath`)."""
    if result == "float16":
        return flushing_exp
    return squared_exp if result in ("float32", "bfloat16") else accurate_exp


def row_max(dtype):
    """The device maximum of two values of the compute dtype ``dtype``, NaN if either
    is (``MAX``'s rule): one ``max.NaN.f32`` for float32 on a device of sm_80 or
    later and under the simulator, else ``MAX``'s combine (PTX has no NaN-propagating
    float64 maximum, nor a float32 one before sm_80)."""
    if np.dtype(dtype) == np.float32 and (SIMULATOR or _capability() >= MAX_NAN_CAPABILITY):
        return max_nan
    return MAX.device_combine()


def _capability() -> tuple[int, int]:
    """The compute capability of the device the kernels are built for now."""
    return tuple(cuda.get_current_device().compute_capability)


def storage_dtype(dtype) -> np.dtype:
    """The dtype of the arrays a kernel reads and writes: bfloat16 as its uint16 bits
    (Numba has no bfloat16 type; :func:`numbakern.kernels.bfloat16.widen` and
    ``narrow`` convert), the others as themselves."""
    return np.dtype(np.uint16) if dtype == "bfloat16" else np.dtype(dtype)


@dataclass(frozen=True)
class RowPlan:
    """Everything a row kernel is specialised on (its cache key, with the device).

    Attributes:
        kind: one of :data:`FORWARD` or :data:`BACKWARD`.
        normalizer: ``"max_then_sum"`` or ``"online"`` (forward); ``None`` (backward).
        layout: ``"block"`` or ``"warp"``.
        threads: threads per block.
        lanes: with ``layout="warp"``, the lanes that share a row: 32 (a warp, reduced
            by the block strategies' warp forms) or a power of two below it (a run of
            a warp, reduced by an XOR butterfly: ``warp_shuffle`` strategies only,
            which ``api.softmax`` checks).
        per_thread: elements each thread holds in registers (fused), or 0 (tiled).
        max_block: the block strategy of the maximum (``"max_then_sum"``), else None.
        sum_block: the block strategy of the sum, or of the online pair.
        pair_op: the online normalizer's ``(max, sum)`` op (``"online"``), else None.
        dtype: the input dtype (its name).
        vector: elements per 16-byte vector load and store (rows that allow them:
            :func:`vector_width`), or 0 for scalar loads.
        out: the result dtype's name when it is not the input's (``dtype=``); the
            input is then computed in it, as ``torch.softmax(x, dtype=)`` casts first.
        keep: which elements a row keeps (one of :data:`KEEPS`), or "" for the plain
            kernels: a kept kernel takes ``(mask, scale, queries, shift)`` after its
            views (:func:`kept_arguments`); vectors in the fused forward pass only.
        packed: a fused forward plan of half rows made for 16-byte vectors (rows
            longer than scalar loads hold in registers): :attr:`registers` counts
            what ptxas gives the vector kernel, and a launch whose rows do not allow
            vectors (:func:`vector_width`) takes another plan.
        staged: a tiled forward or log_softmax backward plan (a block a row) that
            holds the row (backward: its ``dy``) in dynamic shared memory
            (:func:`stage_shared`); a launch whose rows do not allow vectors takes
            another plan.
        async_copy: a staged plan whose row reaches shared memory by ``cp.async``
            (``runtime/async_copy.py``: all of a thread's vectors in flight at once,
            no register holding them) where the device has it, else through
            registers, four vectors in flight (:func:`row_stager`).
        held: vectors a lane of a staged row (forward: of ``x``; log_softmax
            backward: of ``dy``) holds in registers (:func:`held_vectors`), the rest
            staged: one of :data:`HELD` where registers are to spare
            (:func:`held_count`), else 0.
    """

    kind: str
    normalizer: str | None
    layout: str
    threads: int
    per_thread: int
    max_block: object
    sum_block: object
    dtype: str
    vector: int = 0
    pair_op: object = None
    out: str = ""
    keep: str = ""
    packed: bool = False
    lanes: int = WARP
    staged: bool = False
    async_copy: bool = False
    held: int = 0

    @property
    def result(self) -> str:
        """The result dtype's name."""
        return self.out or self.dtype

    @property
    def compute(self) -> str:
        """The dtype computed in (float32 for the halves)."""
        return compute_dtype(self.result).name

    @property
    def group(self) -> int:
        """Threads that share one row."""
        return self.lanes if self.layout == "warp" else self.threads

    @property
    def runs(self) -> bool:
        """Whether rows go to runs of lanes shorter than a warp (the butterfly)."""
        return self.layout == "warp" and self.lanes < WARP

    @property
    def rows_per_block(self) -> int:
        return self.threads // self.group

    @property
    def fused(self) -> bool:
        return self.per_thread > 0

    @property
    def words(self) -> int:
        """32-bit registers per element held: values per element times their width."""
        return ((2 if self.compute == "float64" else 1)
                * (2 if self.kind in BACKWARD else 1))

    @property
    def registers(self) -> int:
        """Registers per thread the kernel needs, fitted to ptxas for sm_90 (no spills).

        A fused kernel keeps each element's value and address live from its load to
        its store (about 3 registers an element, float64 and float16 conversions a few
        more on top); a tiled one holds a tile of ``UNROLL`` elements, or of
        :data:`VECTORS` vectors (float64 forward: 102-116 with ptxas 13.0).
        """
        if not self.fused:
            tiled = (120 if self.vector else 96) if self.compute == "float64" else \
                TILED_REGISTERS
            return tiled + self.held * HELD_VECTOR_REGISTERS
        halves = {self.dtype, self.result} & {"float16", "bfloat16"}
        base = 32 + (16 if self.compute == "float64" else 0) + (8 if halves else 0)
        base += 8 if self.kind in BACKWARD else 0
        base += 8 if self.keep else 0  # the mask row, its causal limit, the scale
        if self.packed:  # eight halves a 16-byte load, one address a vector
            return base + 3 * self.per_thread // 4
        return base + self.per_element * self.per_thread * self.words

    @property
    def per_element(self) -> int:
        """Registers per held value in :attr:`registers`: 3, but 2 for the backward
        kernels of half rows, whose values arrive eight to a 16-byte load (one
        address a vector, not one an element): ptxas for sm_90 gives the vector
        fused backward 40 registers at 8 elements a thread, 56 at 16
        (bench/softmax_sass.py), where 3 a value would say 96 and 144. A
        :attr:`packed` plan counts 3/4 a value: ptxas for sm_90 gives its vector
        forward kernel 44-52 registers at 1024 x 16 (softmax, log_softmax), 53-64 at
        1024 x 24, 61-64 at 1024 x 32 and 512 x 32, no spills (the model: 52, 58, 64;
        every packed plan that fits compiles under a 64-register cap)."""
        halves = self.dtype in HALVES and self.result in HALVES
        return 2 if halves and self.kind in BACKWARD and not self.keep else 3

    @property
    def fits(self) -> bool:
        """Whether the registers fit ``threads`` per block (and ``MAX_REGISTERS``)."""
        return self.registers <= min(MAX_REGISTERS, REGISTER_FILE // self.threads)

    @property
    def launch_bounds(self) -> tuple[int, int]:
        """``(threads, blocks per multiprocessor)`` for ptxas: as many blocks as the
        register estimate allows, so it neither spills nor overspends registers."""
        blocks = REGISTER_FILE // (self.threads * self.registers)
        return self.threads, max(1, min(blocks, 2048 // self.threads))

    @functools.cached_property
    def key(self) -> tuple:
        blocks = tuple(b.key if b is not None else None for b in (self.max_block, self.sum_block))
        return ("rowwise", self.kind, self.normalizer, self.pair_op, self.layout, self.threads,
                self.per_thread, blocks, self.dtype, self.vector, self.out, self.keep,
                self.packed, self.lanes, self.staged, self.async_copy, self.held)


def kernel_for(plan: RowPlan):
    """The compiled kernel for ``plan`` (built once per plan and device)."""
    build = _forward_kernel if plan.kind in FORWARD else _backward_kernel
    return cached(plan.key + (device_key(),), lambda: build(plan))


# --- a reduce that every thread of the group sees ------------------------------------


def _kit(plan: RowPlan, op):
    tc = np.dtype(plan.compute)
    return state_kit(op, (tc,) * op.fields)


def _allreduce(plan: RowPlan, block, op):
    """Device function ``allreduce(s, t0, t1, b0, b1) -> state``, valid in every thread
    of the group.

    ``t0``/``t1``: the block strategy's temp storage (or its warp form's); ``b0``/``b1``:
    one slot per field through which thread 0 broadcasts (unused by the warp layout).
    """
    kit = _kit(plan, op)
    if plan.runs:
        return run_allreduce(kit, plan.lanes)
    if plan.layout == "warp":
        warp_reduce, shfl_idx = block.build_warp_reduce(kit).function, kit.shfl_idx

        @cuda.jit(device=True)
        def allreduce(s, t0, t1, b0, b1):
            return shfl_idx(warp_reduce(s, t0, t1), 0)  # lane 0 holds the result

        return allreduce
    return block_allreduce(block, kit)


def run_allreduce(kit, lanes: int):
    """Device function ``allreduce(s, t0, t1, b0, b1) -> state`` over each run of
    ``lanes`` lanes of a warp (a power of two below 32), valid in every lane of the
    run: an XOR butterfly of ``log2(lanes)`` shuffles under the run's own lane mask
    (so runs need not meet), lanes ``l`` and ``l ^ d`` combining each other's states.
    The op must be commutative for every lane to hold the same result: numbakern's
    ``MAX``, ``SUM`` and the online pair are (floating-point ``a + b == b + a``;
    lanes may differ in the sign of a zero maximum, which no result shows). States
    of one or two fields, as the row kernels reduce; the temp arrays go unused."""
    combine, two = kit.combine, kit.fields == 2
    t0 = from_dtype(kit.dtypes[0])
    t1 = from_dtype(kit.dtypes[-1])
    ones = (1 << lanes) - 1

    @cuda.jit(device=True)
    def run_mask():
        return uint32(ones << (cuda.threadIdx.x % WARP // lanes * lanes))

    if two:

        @cuda.jit(device=True)
        def allreduce(s, a0, a1, b0, b1):
            mask = run_mask()
            d = lanes // 2
            while d > 0:
                s = combine(s, (t0(cuda.shfl_xor_sync(mask, s[0], d)),
                                t1(cuda.shfl_xor_sync(mask, s[1], d))))
                d //= 2
            return s

        return allreduce

    @cuda.jit(device=True)
    def allreduce(s, a0, a1, b0, b1):
        mask = run_mask()
        d = lanes // 2
        while d > 0:
            s = combine(s, (t0(cuda.shfl_xor_sync(mask, s[0], d)),))
            d //= 2
        return s

    return allreduce


def block_allreduce(block, kit):
    """Device function ``allreduce(s, t0, t1, b0, b1) -> state`` valid in every thread
    of the block: the block strategy's reduce, then thread 0's result through the
    one-slot arrays ``b0``/``b1``."""
    block_reduce, store, load = block.build_reduce(kit), kit.store, kit.load

    @cuda.jit(device=True)
    def allreduce(s, t0, t1, b0, b1):
        s = block_reduce(s, t0, t1)
        if cuda.threadIdx.x == 0:
            store(b0, b1, 0, s)
        # One barrier: the broadcast is visible, and no thread reaches this reduce's
        # temp storage again (next row) before every thread has passed it.
        cuda.syncthreads()
        return load(b0, b1, 0)

    return allreduce


def _slots(plan: RowPlan, block, op) -> tuple[int, int]:
    """Shared-memory slots for one reduce's two temp arrays (1 where unused)."""
    if block is None or plan.runs:  # the butterfly needs no shared memory
        return 1, 1
    if plan.layout == "warp":
        slots = block.build_warp_reduce(_kit(plan, op)).slots * (plan.threads // WARP)
    else:
        slots = block.temp_slots()
    slots = max(1, slots)
    return slots, (slots if op.fields == 2 else 1)


def element_converters(dtype, compute=None) -> tuple:
    """``(widen, narrow)`` for elements of ``dtype`` (a NumPy dtype or ``"bfloat16"``):
    ``widen(element)`` a stored element as ``compute`` (default: ``dtype``'s compute
    dtype), ``narrow(value)`` a computed value as a stored element (casts; bfloat16's
    bits widened and rounded)."""
    compute = np.dtype(compute or compute_dtype(dtype))
    to = from_dtype(compute)
    if dtype != "bfloat16":
        return to, from_dtype(np.dtype(dtype))
    narrow = bfloat16.narrower()
    if compute == np.float32:
        return bfloat16.widen, narrow
    bits = bfloat16.widen

    @cuda.jit(device=True)
    def widen(b):
        return to(bits(b))

    return widen, narrow


def _numba_types(plan: RowPlan):
    """``(compute type, narrow, compute scalar)``: ``narrow(v)`` turns a computed value
    into a result element (a cast, or bfloat16's rounding to its bits)."""
    tc = np.dtype(plan.compute)
    return from_dtype(tc), element_converters(plan.result)[1], tc.type


def _widener(plan: RowPlan):
    """``widen(element)``: an input element as the compute type."""
    return element_converters(plan.dtype, plan.compute)[0]


def _jit_kernel(plan: RowPlan):
    """``cuda.jit`` for a kernel: launch bounds on a GPU, nothing under the simulator.

    The bounds (:attr:`RowPlan.launch_bounds`) promise ``threads`` per block, so a
    launch never runs out of registers.
    """
    return bounded_jit(plan.launch_bounds)


# --- forward: the row's (max, sum) --------------------------------------------------


def _element_index(plan: RowPlan):
    """Device function ``element(lane, k)``: the row element a fused kernel's thread
    ``lane`` holds in its ``v[k]``: ``lane + k*G``, or with vectors of ``W``, element
    ``k % W`` of vector ``lane + (k // W)*G``. Coalesced either way: a warp reads 32
    consecutive elements, or 32 consecutive vectors."""
    G, W = plan.group, plan.vector
    if W:

        @cuda.jit(device=True)
        def element(lane, k):
            return (lane + (k // W) * G) * W + k % W

        return element

    @cuda.jit(device=True)
    def element(lane, k):
        return lane + k * G

    return element


def _fused_stats(plan: RowPlan, keep_exp: bool):
    """Device function ``stats(v, lane, n, sh) -> (max, sum, ref)`` over the ``K``
    values ``v`` this thread holds (-inf past the row's end).

    With ``keep_exp``, ``v[k]`` is overwritten by ``exp(v[k] - ref)`` (``ref``: the
    row's maximum, or this thread's own with ``"online"``) so the write phase needs
    no second ``exp``. ``sh``: the kernel's 8 shared arrays (two reduces' worth).
    """
    tc_t, _, tc = _numba_types(plan)
    exp = row_exp(plan.result)
    K = plan.per_thread
    NEG, ZERO, ONE = tc(-np.inf), tc(0), tc(1)
    vmax = row_max(tc)
    element = _element_index(plan)

    # Four independent chains a thread, not one of K: a row held in registers is
    # latency-bound (one wave of warps at (1823, 781)), and a chain of 32 dependent
    # NaN-propagating maxima (compare, compare, select) and 32 dependent adds is
    # most of a warp's time between its loads and its first shuffle.
    @cuda.jit(device=True)
    def local_max(v):
        m0, m1, m2, m3 = NEG, NEG, NEG, NEG
        for k in range(K):
            if k % 4 == 0:
                m0 = vmax(m0, v[k])
            elif k % 4 == 1:
                m1 = vmax(m1, v[k])
            elif k % 4 == 2:
                m2 = vmax(m2, v[k])
            else:
                m3 = vmax(m3, v[k])
        return vmax(vmax(m0, m1), vmax(m2, m3))

    @cuda.jit(device=True)
    def exp_sum(v, m):  # sum of exp(v - m), v[k] overwritten by it with keep_exp
        s0, s1, s2, s3 = ZERO, ZERO, ZERO, ZERO
        for k in range(K):
            e = tc_t(exp(v[k] - m))
            if keep_exp:
                v[k] = e
            if k % 4 == 0:
                s0 += e
            elif k % 4 == 1:
                s1 += e
            elif k % 4 == 2:
                s2 += e
            else:
                s3 += e
        return (s0 + s1) + (s2 + s3)

    if plan.normalizer == "online":
        red_pair = _allreduce(plan, plan.sum_block, plan.pair_op)

        @cuda.jit(device=True)
        def stats(v, lane, n, sh):
            m = local_max(v)
            s = ZERO
            if m == NEG:  # only -inf here: each counts exp(0) = 1 at max -inf
                for k in range(K):
                    if element(lane, k) < n:
                        s += ONE
                    if keep_exp:
                        v[k] = ZERO
            else:
                s = exp_sum(v, m)
            r = red_pair((m, s), sh[0], sh[1], sh[2], sh[3])
            return r[0], r[1], m

        return stats
    red_max = _allreduce(plan, plan.max_block, MAX)
    red_sum = _allreduce(plan, plan.sum_block, SUM)

    @cuda.jit(device=True)
    def stats(v, lane, n, sh):
        m = red_max((local_max(v),), sh[0], sh[1], sh[2], sh[3])[0]
        s = exp_sum(v, m)
        s = red_sum((s,), sh[4], sh[5], sh[6], sh[7])[0]
        return m, s, m

    return stats


def _tiled_stats(plan: RowPlan, load=None):
    """Device function ``stats(xr, lane, n, sh) -> (max, sum, max)`` reading the row
    ``xr`` in tiles: two passes (``"max_then_sum"``) or one (``"online"``). ``load(xr,
    c, n)``: element ``c`` as the compute type, -inf past ``n`` (default: ``xr`` an
    array; a kept kernel's loader reads its row tuple)."""
    tc_t, _, tc = _numba_types(plan)
    exp = row_exp(plan.result)
    G = plan.group
    NEG, ZERO = tc(-np.inf), tc(0)
    vmax = row_max(tc)
    load = load or _masked_loader(_widener(plan), NEG)
    if plan.normalizer == "online":
        red_pair = _allreduce(plan, plan.sum_block, plan.pair_op)

        @cuda.jit(device=True)
        def stats(xr, lane, n, sh):
            m, s = NEG, ZERO
            c = lane
            while c < n:
                x0, x1 = load(xr, c, n), load(xr, c + G, n)
                x2, x3 = load(xr, c + 2 * G, n), load(xr, c + 3 * G, n)
                mt = vmax(m, vmax(vmax(x0, x1), vmax(x2, x3)))
                if mt == NEG:  # nothing but -inf so far: count them, never exp(-inf + inf)
                    s += tc_t((c < n) + (c + G < n) + (c + 2 * G < n) + (c + 3 * G < n))
                else:  # one rescale per tile, one exp per element
                    if mt != m:
                        s *= tc_t(exp(m - mt))
                    s += tc_t(exp(x0 - mt)) + tc_t(exp(x1 - mt))
                    s += tc_t(exp(x2 - mt)) + tc_t(exp(x3 - mt))
                m = mt
                c += UNROLL * G
            r = red_pair((m, s), sh[0], sh[1], sh[2], sh[3])
            return r[0], r[1], r[0]

        return stats
    red_max = _allreduce(plan, plan.max_block, MAX)
    red_sum = _allreduce(plan, plan.sum_block, SUM)

    @cuda.jit(device=True)
    def stats(xr, lane, n, sh):
        m = NEG
        c = lane
        while c < n:
            x0, x1 = load(xr, c, n), load(xr, c + G, n)
            x2, x3 = load(xr, c + 2 * G, n), load(xr, c + 3 * G, n)
            m = vmax(m, vmax(vmax(x0, x1), vmax(x2, x3)))
            c += UNROLL * G
        m = red_max((m,), sh[0], sh[1], sh[2], sh[3])[0]
        s = ZERO
        c = lane
        while c < n:
            x0, x1 = load(xr, c, n), load(xr, c + G, n)
            x2, x3 = load(xr, c + 2 * G, n), load(xr, c + 3 * G, n)
            s += tc_t(exp(x0 - m)) + tc_t(exp(x1 - m))
            s += tc_t(exp(x2 - m)) + tc_t(exp(x3 - m))
            c += UNROLL * G
        s = red_sum((s,), sh[4], sh[5], sh[6], sh[7])[0]
        return m, s, m

    return stats


def _masked_loader(widen, fill):
    @cuda.jit(device=True)
    def load(xr, c, n):
        return widen(xr[c]) if c < n else fill

    return load


# --- forward: from (max, sum) to the output ------------------------------------------


def _finisher(plan: RowPlan):
    """``prepare(max, sum, ref) -> (a, b)`` once per row and ``finish(v, a, b)`` per
    element, ``v`` being what the thread holds: ``exp(x - ref)`` (fused softmax) or
    ``x`` (tiled softmax, log-softmax)."""
    tc_t, _, tc = _numba_types(plan)
    exp = row_exp(plan.result)
    ONE = tc(1)
    if plan.kind == "log_softmax":

        @cuda.jit(device=True)
        def prepare(m, s, ref):
            return m, tc_t(math.log(s))

        @cuda.jit(device=True)
        def finish(v, a, b):
            return (v - a) - b  # x - max first: exact for nearby values; log(sum) last

        return prepare, finish
    if plan.fused:

        @cuda.jit(device=True)
        def prepare(m, s, ref):
            # exp(ref - max) is 1 unless ref is a thread's own maximum ("online"); it
            # is exp(nan) = nan when the row's max is +-inf: the documented NaN rows.
            return tc_t(exp(ref - m)) / s, ONE

        @cuda.jit(device=True)
        def finish(v, a, b):
            return v * a

        return prepare, finish

    @cuda.jit(device=True)
    def prepare(m, s, ref):
        return m, ONE / s

    @cuda.jit(device=True)
    def finish(v, a, b):
        return tc_t(exp(v - a)) * b

    return prepare, finish


# --- kernels: the walk over rows --------------------------------------------------------


def _row_walk(plan: RowPlan):
    """Device functions of the grid-stride walk every row kernel makes over its rows:
    ``walk() -> (lane, row, step)``, this thread's lane in its group (a warp or the
    block), its group's first row and the stride to its next; ``split(row, inner) ->
    (o, i)``, a row's place in the 3-D views (rows are ``(outer, inner)`` pairs)."""
    G, RPB = plan.group, plan.rows_per_block

    @cuda.jit(device=True)
    def walk():
        return (cuda.threadIdx.x % G, int64(cuda.blockIdx.x) * RPB + cuda.threadIdx.x // G,
                int64(cuda.gridDim.x) * RPB)

    @cuda.jit(device=True)
    def split(row, inner):
        o = row // inner
        return o, row - o * inner

    return walk, split


# --- kernels: shared memory ------------------------------------------------------------


def temp_storage(plan: RowPlan, first: tuple, second: tuple | None = None):
    """Device function ``storage() -> arrays``: a row kernel's shared memory, called
    once per thread at the kernel's start (CUB's ``TempStorage``).

    ``first``/``second``: ``(block strategy or None, op)`` of each block reduce
    the kernel runs, in order. For each, the strategy's two temp arrays, then a
    broadcast slot per field (:func:`_allreduce`'s ``t0, t1, b0, b1``): 4 arrays, or
    8 with ``second``.
    """
    tc_t = _numba_types(plan)[0]
    a0, a1 = _slots(plan, *first)
    # Each shared array on its own line, and each line run once per thread: the
    # simulator keys a shared array by the line that asks for it.
    if second is None:

        @cuda.jit(device=True)
        def storage():
            return (cuda.shared.array(a0, tc_t),
                    cuda.shared.array(a1, tc_t),
                    cuda.shared.array(1, tc_t),
                    cuda.shared.array(1, tc_t))

        return storage
    b0, b1 = _slots(plan, *second)

    @cuda.jit(device=True)
    def storage():
        return (cuda.shared.array(a0, tc_t),
                cuda.shared.array(a1, tc_t),
                cuda.shared.array(1, tc_t),
                cuda.shared.array(1, tc_t),
                cuda.shared.array(b0, tc_t),
                cuda.shared.array(b1, tc_t),
                cuda.shared.array(1, tc_t),
                cuda.shared.array(1, tc_t))

    return storage


# --- forward kernels --------------------------------------------------------------------


def _forward_kernel(plan: RowPlan):
    """``kernel(x, y)`` over 3-D views: softmax or log-softmax of every row (with
    ``plan.vector``, ``kernel(x, y, *vector_views(plan, [x, y]))``)."""
    tc_t, out_t, tc = _numba_types(plan)
    K, G = plan.per_thread, plan.group
    walk, split = _row_walk(plan)
    NEG = tc(-np.inf)
    # Temp storage of two reduces: first the maximum (or the online pair), then the sum
    # (none after the online pair).
    if plan.normalizer == "online":
        storage = temp_storage(plan, (plan.sum_block, plan.pair_op), (None, SUM))
    else:
        storage = temp_storage(plan, (plan.max_block, MAX), (plan.sum_block, SUM))
    prepare, finish = _finisher(plan)
    jit = _jit_kernel(plan)
    widen = _widener(plan)
    load = _masked_loader(widen, NEG)

    if plan.keep:
        build = _kept_vector_forward if plan.vector else _kept_forward
        return build(plan, prepare, finish, jit, storage)
    if plan.vector:
        build = _vector_forward if plan.fused else \
            _staged_forward if plan.staged else _vector_tiled_forward
        return build(plan, prepare, finish, jit, storage)
    if plan.fused:
        stats = _fused_stats(plan, keep_exp=plan.kind == "softmax")

        @jit
        def fused_forward(x, y):
            sh = storage()
            v = cuda.local.array(K, tc_t)
            lane, row, step = walk()
            inner, n = x.shape[1], x.shape[2]
            # Unsigned indices: Numba wraps a signed index that could be negative
            # (a compare, a select and 64-bit adds a load); these are base + constant
            # offsets (ptxas for sm_90 at (1823, 781): 89 registers, not 128).
            un, ul = uint64(n), uint64(lane)
            while row < x.shape[0] * inner:  # the same for every thread of a group
                o, i = split(row, inner)
                xr, yr = x[o, i], y[o, i]
                for k in range(K):  # K loads in flight, then nothing but registers
                    c = ul + uint64(k * G)
                    v[k] = widen(xr[c]) if c < un else NEG
                m, s, ref = stats(v, lane, n, sh)
                a, b = prepare(m, s, ref)
                for k in range(K):
                    c = ul + uint64(k * G)
                    if c < un:
                        yr[c] = out_t(finish(v[k], a, b))
                row += step

        return fused_forward

    stats = _tiled_stats(plan)

    @jit
    def tiled_forward(x, y):
        sh = storage()
        lane, row, step = walk()
        inner, n = x.shape[1], x.shape[2]
        while row < x.shape[0] * inner:
            o, i = split(row, inner)
            xr, yr = x[o, i], y[o, i]
            m, s, ref = stats(xr, lane, n, sh)
            a, b = prepare(m, s, ref)
            c = lane
            while c < n:  # all loads of a tile before its stores: y may alias x
                x0, x1 = load(xr, c, n), load(xr, c + G, n)
                x2, x3 = load(xr, c + 2 * G, n), load(xr, c + 3 * G, n)
                yr[c] = out_t(finish(x0, a, b))
                if c + G < n:
                    yr[c + G] = out_t(finish(x1, a, b))
                if c + 2 * G < n:
                    yr[c + 2 * G] = out_t(finish(x2, a, b))
                if c + 3 * G < n:
                    yr[c + 3 * G] = out_t(finish(x3, a, b))
                c += UNROLL * G
            row += step

    return tiled_forward


# --- backward -------------------------------------------------------------------------


def _gradient(plan: RowPlan):
    """``term(y, dy)`` summed over the row, and ``grad(y, dy, total) -> dx``."""
    tc_t, _, _ = _numba_types(plan)
    exp = row_exp(plan.result)
    if plan.kind == "softmax_backward":

        @cuda.jit(device=True)
        def term(y, dy):
            return y * dy

        @cuda.jit(device=True)
        def grad(y, dy, total):
            return y * (dy - total)  # dx = y * (dy - sum(y * dy))

        return term, grad

    @cuda.jit(device=True)
    def term(y, dy):
        return dy

    @cuda.jit(device=True)
    def grad(y, dy, total):
        return dy - tc_t(exp(y)) * total  # y = log_softmax(x): softmax = exp(y)

    return term, grad


def _backward_kernel(plan: RowPlan):
    """``kernel(y, dy, dx)`` over 3-D views: one sum per row, then ``dx`` (with
    ``plan.vector``, ``kernel(y, dy, dx, *vector_views(plan, [y, dy, dx]))``)."""
    tc_t, out_t, tc = _numba_types(plan)
    K, G = plan.per_thread, plan.group
    walk, split = _row_walk(plan)
    ZERO = tc(0)
    storage = temp_storage(plan, (plan.sum_block, SUM))
    red_sum = _allreduce(plan, plan.sum_block, SUM)
    term, grad = _gradient(plan)
    jit = _jit_kernel(plan)
    widen = _widener(plan)
    load = _masked_loader(widen, ZERO)

    if plan.keep:
        return _kept_backward(plan, storage, red_sum, (term, grad), jit)
    if plan.vector:
        build = _vector_fused_backward if plan.fused else \
            _staged_log_backward if plan.staged else _vector_tiled_backward
        return build(plan, storage, red_sum, (term, grad), jit)
    if plan.fused:

        @jit
        def fused_backward(y, dy, dx):
            sh = storage()
            vy = cuda.local.array(K, tc_t)
            vd = cuda.local.array(K, tc_t)
            lane, row, step = walk()
            inner, n = y.shape[1], y.shape[2]
            un, ul = uint64(n), uint64(lane)  # unsigned: no negative-index wraparound
            while row < y.shape[0] * inner:
                o, i = split(row, inner)
                yr, dyr, dxr = y[o, i], dy[o, i], dx[o, i]
                total = ZERO
                for k in range(K):
                    c = ul + uint64(k * G)
                    vy[k] = widen(yr[c]) if c < un else ZERO
                    vd[k] = widen(dyr[c]) if c < un else ZERO
                    total += term(vy[k], vd[k])
                total = red_sum((total,), sh[0], sh[1], sh[2], sh[3])[0]
                for k in range(K):
                    c = ul + uint64(k * G)
                    if c < un:
                        dxr[c] = out_t(grad(vy[k], vd[k], total))
                row += step

        return fused_backward

    @jit
    def tiled_backward(y, dy, dx):
        sh = storage()
        lane, row, step = walk()
        inner, n = y.shape[1], y.shape[2]
        while row < y.shape[0] * inner:
            o, i = split(row, inner)
            yr, dyr, dxr = y[o, i], dy[o, i], dx[o, i]
            total = ZERO
            c = lane
            while c < n:
                total += term(load(yr, c, n), load(dyr, c, n))
                total += term(load(yr, c + G, n), load(dyr, c + G, n))
                total += term(load(yr, c + 2 * G, n), load(dyr, c + 2 * G, n))
                total += term(load(yr, c + 3 * G, n), load(dyr, c + 3 * G, n))
                c += UNROLL * G
            total = red_sum((total,), sh[0], sh[1], sh[2], sh[3])[0]
            c = lane
            while c < n:  # loads of a pair of elements before their stores: dx may alias
                y0, d0 = load(yr, c, n), load(dyr, c, n)
                y1, d1 = load(yr, c + G, n), load(dyr, c + G, n)
                dxr[c] = out_t(grad(y0, d0, total))
                if c + G < n:
                    dxr[c + G] = out_t(grad(y1, d1, total))
                c += 2 * G
            row += step

    return tiled_backward


# --- kept rows: mask=, causal=, scale= ---------------------------------------------------
#
# A kept kernel reads each row as the plain one does, but an element it does not keep
# loads as -inf and a kept one as ``x * scale``: the row's (max, sum) then cover the
# kept elements alone, and a dropped element gives exp(-inf) = 0 (log-softmax: -inf).
# A row whose maximum is -inf (nothing kept, or only -inf kept) gives 0 (log-softmax:
# -inf) rather than exp(-inf + inf) = NaN, as torch's ``_safe_softmax``; with
# ``scale=`` alone (every element kept) such rows stay NaN, as without it.


def kept_arguments(mask, scale: float, queries: int, shift: int) -> tuple:
    """A kept kernel's arguments after its views: ``mask``, a 4-D bool view ``(d0, d1,
    d2, n)`` whose first three dimensions, in C order, are the rows' (broadcast
    dimensions have stride 0); ``scale``; the causal limit of row ``r``, ``r % queries
    + shift`` (the last element it keeps)."""
    return mask, float(scale), int(queries), int(shift)


def _keeper(plan: RowPlan):
    """Device function ``keep(mr, lim, c)``: whether a row keeps its element ``c``
    (``mr``: its mask row; ``lim``: its causal limit)."""
    if plan.keep == "mask&causal":

        @cuda.jit(device=True)
        def keep(mr, lim, c):
            return mr[c] and c <= lim

    elif plan.keep == "mask":

        @cuda.jit(device=True)
        def keep(mr, lim, c):
            return mr[c]

    elif plan.keep == "causal":

        @cuda.jit(device=True)
        def keep(mr, lim, c):
            return c <= lim

    else:

        @cuda.jit(device=True)
        def keep(mr, lim, c):
            return True

    return keep


@cuda.jit(device=True)
def _mask_row(mask, row, queries, shift):
    """``(mask row, causal limit)`` of row ``row`` (:func:`kept_arguments`)."""
    d1, d2 = mask.shape[1], mask.shape[2]
    r = row // d2
    o = r // d1
    return mask[o, r - o * d1, row - r * d2], row % queries + shift


def _kept_loader(plan: RowPlan, fill):
    """Device function ``load(r, c, n)`` over a row tuple ``r = (xr, mr, lim, scale)``:
    ``x[c] * scale`` where the row keeps ``c``, ``fill`` where it does not or past
    ``n``."""
    widen, keep = _widener(plan), _keeper(plan)

    @cuda.jit(device=True)
    def load(r, c, n):
        if c < n and keep(r[1], r[2], c):
            return widen(r[0][c]) * r[3]
        return fill

    return load


def _kept_forward(plan: RowPlan, prepare, finish, jit, storage):
    """``kernel(x, y, *kept_arguments(...))``: the fused or tiled forward kernel over
    kept elements (scalar loads)."""
    tc_t, out_t, tc = _numba_types(plan)
    K, G = plan.per_thread, plan.group
    walk, split = _row_walk(plan)
    NEG = tc(-np.inf)
    EMPTY = tc(0) if plan.kind == "softmax" else NEG  # a row with nothing kept
    SAFE = plan.keep != "all"
    load = _kept_loader(plan, NEG)

    @cuda.jit(device=True)
    def put(v, a, b, live):
        return out_t(finish(v, a, b) if live else EMPTY)

    if plan.fused:
        stats = _fused_stats(plan, keep_exp=plan.kind == "softmax")

        @jit
        def kept_fused_forward(x, y, mask, scale, queries, shift):
            sh = storage()
            v = cuda.local.array(K, tc_t)
            sc = tc_t(scale)
            lane, row, step = walk()
            inner, n = x.shape[1], x.shape[2]
            while row < x.shape[0] * inner:
                o, i = split(row, inner)
                mr, lim = _mask_row(mask, row, queries, shift)
                r, yr = (x[o, i], mr, lim, sc), y[o, i]
                for k in range(K):
                    v[k] = load(r, lane + k * G, n)
                m, s, ref = stats(v, lane, n, sh)
                a, b = prepare(m, s, ref)
                live = not SAFE or m != NEG
                for k in range(K):
                    c = lane + k * G
                    if c < n:
                        yr[c] = put(v[k], a, b, live)
                row += step

        return kept_fused_forward

    stats = _tiled_stats(plan, load)

    @jit
    def kept_tiled_forward(x, y, mask, scale, queries, shift):
        sh = storage()
        sc = tc_t(scale)
        lane, row, step = walk()
        inner, n = x.shape[1], x.shape[2]
        while row < x.shape[0] * inner:
            o, i = split(row, inner)
            mr, lim = _mask_row(mask, row, queries, shift)
            r, yr = (x[o, i], mr, lim, sc), y[o, i]
            m, s, ref = stats(r, lane, n, sh)
            a, b = prepare(m, s, ref)
            live = not SAFE or m != NEG
            c = lane
            while c < n:  # all loads of a tile before its stores: y may alias x
                x0, x1 = load(r, c, n), load(r, c + G, n)
                x2, x3 = load(r, c + 2 * G, n), load(r, c + 3 * G, n)
                yr[c] = put(x0, a, b, live)
                if c + G < n:
                    yr[c + G] = put(x1, a, b, live)
                if c + 2 * G < n:
                    yr[c + 2 * G] = put(x2, a, b, live)
                if c + 3 * G < n:
                    yr[c + 3 * G] = put(x3, a, b, live)
                c += UNROLL * G
            row += step

    return kept_tiled_forward


def _kept_vector_forward(plan: RowPlan, prepare, finish, jit, storage):
    """``kernel(x, y, xf, yf, *kept_arguments(...))``: the fused kept forward kernel
    reading and writing rows in 16-byte vectors, as :func:`_vector_forward`; a vector
    wholly past a causal limit is not read."""
    tc_t, _, tc = _numba_types(plan)
    K, G, W = plan.per_thread, plan.group, plan.vector
    walk, split = _row_walk(plan)
    KV, NEG = K // W, tc(-np.inf)
    EMPTY = tc(0) if plan.kind == "softmax" else NEG  # a row with nothing kept
    SAFE, CAUSAL = plan.keep != "all", "causal" in plan.keep
    first_vector, keep = _first_vector(plan), _keeper(plan)
    stats = _fused_stats(plan, keep_exp=plan.kind == "softmax")
    vload, vstore = vector_loader(W), vector_storer(W)
    pack, widen = packer(plan), _widener(plan)

    @jit
    def kept_vector_forward(x, y, xf, yf, mask, scale, queries, shift):
        sh = storage()
        v = cuda.local.array(K, tc_t)
        sc = tc_t(scale)
        lane, row, step = walk()
        inner, n = x.shape[1], x.shape[2]
        while row < x.shape[0] * inner:
            o, i = split(row, inner)
            mr, lim = _mask_row(mask, row, queries, shift)
            xv, yv = first_vector(x, o, i), first_vector(y, o, i)
            for j in range(KV):  # KV vector loads in flight, then only registers
                e = (lane + j * G) * W
                if e < n and (not CAUSAL or e <= lim):
                    t = vload(xf, xv + lane + j * G)
                    for q in range(W):
                        v[j * W + q] = widen(t[q]) * sc if keep(mr, lim, e + q) else NEG
                else:
                    for q in range(W):
                        v[j * W + q] = NEG
            m, s, ref = stats(v, lane, n, sh)
            a, b = prepare(m, s, ref)
            live = not SAFE or m != NEG
            for k in range(K):
                v[k] = finish(v[k], a, b) if live else EMPTY
            for j in range(KV):
                if (lane + j * G) * W < n:
                    vstore(yf, yv + lane + j * G, pack(v, j * W))
            row += step

    return kept_vector_forward


def _kept_backward(plan: RowPlan, storage, red_sum, gradient, jit):
    """``kernel(y, dy, dx, *kept_arguments(...))``: the backward kernel of a kept
    forward pass: the row's sum as the plain kernel's (over every element, as torch's
    autograd through ``masked_fill`` sums: a dropped element's ``y`` is 0 for
    softmax), ``dx = scale * grad`` where the row keeps an element and 0 where it
    does not (the chain rule through ``x * scale`` and the mask)."""
    tc_t, out_t, tc = _numba_types(plan)
    K, G = plan.per_thread, plan.group
    walk, split = _row_walk(plan)
    ZERO = tc(0)
    term, grad = gradient
    keep = _keeper(plan)
    load = _masked_loader(_widener(plan), ZERO)

    @cuda.jit(device=True)
    def put(y, d, total, sc, kept):
        return out_t(sc * grad(y, d, total) if kept else ZERO)

    if plan.fused:

        @jit
        def kept_fused_backward(y, dy, dx, mask, scale, queries, shift):
            sh = storage()
            vy = cuda.local.array(K, tc_t)
            vd = cuda.local.array(K, tc_t)
            sc = tc_t(scale)
            lane, row, step = walk()
            inner, n = y.shape[1], y.shape[2]
            while row < y.shape[0] * inner:
                o, i = split(row, inner)
                mr, lim = _mask_row(mask, row, queries, shift)
                yr, dyr, dxr = y[o, i], dy[o, i], dx[o, i]
                total = ZERO
                for k in range(K):
                    vy[k] = load(yr, lane + k * G, n)
                    vd[k] = load(dyr, lane + k * G, n)
                    total += term(vy[k], vd[k])
                total = red_sum((total,), sh[0], sh[1], sh[2], sh[3])[0]
                for k in range(K):
                    c = lane + k * G
                    if c < n:
                        dxr[c] = put(vy[k], vd[k], total, sc, keep(mr, lim, c))
                row += step

        return kept_fused_backward

    @jit
    def kept_tiled_backward(y, dy, dx, mask, scale, queries, shift):
        sh = storage()
        sc = tc_t(scale)
        lane, row, step = walk()
        inner, n = y.shape[1], y.shape[2]
        while row < y.shape[0] * inner:
            o, i = split(row, inner)
            mr, lim = _mask_row(mask, row, queries, shift)
            yr, dyr, dxr = y[o, i], dy[o, i], dx[o, i]
            total = ZERO
            c = lane
            while c < n:
                total += term(load(yr, c, n), load(dyr, c, n))
                total += term(load(yr, c + G, n), load(dyr, c + G, n))
                c += 2 * G
            total = red_sum((total,), sh[0], sh[1], sh[2], sh[3])[0]
            c = lane
            while c < n:  # each element read before it is written: dx may alias
                dxr[c] = put(load(yr, c, n), load(dyr, c, n), total, sc, keep(mr, lim, c))
                c += G
            row += step

    return kept_tiled_backward


# --- rows read and written in 16-byte vectors --------------------------------------------


def vector_width(plan: RowPlan, n: int, views: list) -> int:
    """Elements per 16-byte vector for ``plan`` over ``views`` (3-D, rows last: every
    array the kernel reads or writes), or 0 for scalar loads: float rows (float16:
    eight halves a vector, widened to float32 as they arrive and rounded back as
    they are packed for the store), contiguous in every view, and

    * fused plans (rows held as whole vectors per thread): ``n`` and ``per_thread``
      multiples of the vector length, each row of every view starting 16-byte
      aligned (CUB's ``LOAD_VECTORIZE`` condition);
    * tiled plans (any ``n``: each row's head before its first 16-byte boundary and
      tail after its last go through scalar loads, one element a lane): each row as
      far from a boundary in every view (:func:`_rows_in_step`), so that a thread's
      vectors of one array are its vectors of the others; a group of at least
      ``W - 1`` lanes (runs of fewer read scalars).

    Fewer load and store instructions and address registers per element than
    scalar accesses. ``n``: the row length.
    """
    dtype = storage_dtype(plan.dtype)
    if plan.result != plan.dtype or (plan.dtype != "bfloat16" and dtype.kind != "f"):
        return 0  # (a result of another width than the input: scalar loads and stores)
    if plan.keep and (not plan.fused or plan.kind in BACKWARD):
        return 0  # (kept rows: vectors in the fused forward kernels only)
    if any(v.strides[2] != dtype.itemsize for v in views):
        return 0
    width = vector_lanes(dtype)
    if plan.fused:
        whole = n % width == 0 and plan.per_thread % width == 0
        return width if whole and all(rows_aligned(v, 2) for v in views) else 0
    if plan.group < width - 1:  # a head or tail holds up to W-1 elements, one a lane
        return 0
    return width if _rows_in_step(views, dtype.itemsize) else 0


def _rows_in_step(views: list, itemsize: int) -> bool:
    """Whether every row starts the same whole number of elements past a 16-byte
    boundary in each of ``views``: the same address modulo 16 and, along each outer
    dimension longer than one, non-negative strides of whole elements, equal modulo
    16. And the first boundary lies inside every view's memory (:func:`vector_views`
    starts there)."""
    offsets = {address(v) % VECTOR_BYTES for v in views}
    if len(offsets) > 1 or next(iter(offsets)) % itemsize:
        return False
    for d in (0, 1):
        strides = [v.strides[d] for v in views]
        if views[0].shape[d] > 1 and (any(s < 0 or s % itemsize for s in strides)
                                      or len({s % VECTOR_BYTES for s in strides}) > 1):
            return False
    head = _head(views[0])
    return all(head * itemsize <= sum((e - 1) * s for e, s in zip(v.shape, v.strides))
               for v in views)


def _head(view) -> int:
    """Elements from a view's first element to the first 16-byte boundary."""
    return -address(view) % VECTOR_BYTES // np.dtype(view.dtype).itemsize


def vector_views(plan: RowPlan, views: list) -> list:
    """The arguments a vector kernel takes after its 3-D ``views``: for each, a 1-D
    view of its memory from its first 16-byte boundary (what vector loads index:
    ``runtime.views.span_view`` less the elements before the boundary); a tiled kernel
    then takes the number of those elements, the same for every view
    (:func:`vector_width` has checked)."""
    head = _head(views[0])
    spans = [skip(span_view(v), head) for v in views]
    return spans if plan.fused else [*spans, head]


def _first_vector(plan: RowPlan):
    """Device function ``first_vector(a, o, i)``: the vector of ``a``'s 1-D view
    (from ``a``'s first element) where row ``(o, i)`` starts; rows of a fused vector
    plan start 16-byte aligned (:func:`vector_width`)."""
    step = storage_dtype(plan.dtype).itemsize * plan.vector

    @cuda.jit(device=True)
    def first_vector(a, o, i):
        return (o * a.strides[0] + i * a.strides[1]) // step

    return first_vector


def _vector_forward(plan: RowPlan, prepare, finish, jit, storage):
    """``kernel(x, y, xf, yf)``: the fused forward kernel reading and writing each row
    in 16-byte vectors through ``xf``/``yf``, 1-D views of the rows' memory from
    ``x``'s and ``y``'s first element (:func:`vector_width` has checked them)."""
    tc_t, _, tc = _numba_types(plan)
    K, G, W = plan.per_thread, plan.group, plan.vector
    walk, split = _row_walk(plan)
    KV, NEG = K // W, tc(-np.inf)
    first_vector = _first_vector(plan)
    stats = _fused_stats(plan, keep_exp=plan.kind == "softmax")
    vload, vstore = vector_loader(W), vector_storer(W)
    pack, widen = packer(plan), _widener(plan)

    @jit
    def vector_forward(x, y, xf, yf):
        sh = storage()
        v = cuda.local.array(K, tc_t)
        lane, row, step = walk()
        inner, n = x.shape[1], x.shape[2]
        while row < x.shape[0] * inner:  # the same for every thread of a group
            o, i = split(row, inner)
            xv, yv = first_vector(x, o, i), first_vector(y, o, i)
            for j in range(KV):  # KV vector loads in flight, then only registers
                if (lane + j * G) * W < n:
                    t = vload(xf, xv + lane + j * G)
                    for q in range(W):
                        v[j * W + q] = widen(t[q])
                else:
                    for q in range(W):
                        v[j * W + q] = NEG
            m, s, ref = stats(v, lane, n, sh)
            a, b = prepare(m, s, ref)
            for k in range(K):
                v[k] = finish(v[k], a, b)
            for j in range(KV):
                if (lane + j * G) * W < n:
                    vstore(yf, yv + lane + j * G, pack(v, j * W))
            row += step

    return vector_forward


# Tiled rows in vectors: a row is a head of scalars, `count` whole vectors, a tail of
# scalars (head and tail shorter than a vector: lanes 0 to W-2 take one element of
# each). Each pass loops over the vectors in tiles of `vectors * G`, masked at the end.


def row_span(plan: RowPlan):
    """Device function ``row_vectors(a, o, i, head0, n) -> (first, head, count)`` for
    row ``(o, i)`` of the 3-D view ``a``: ``head`` elements (at most ``n``) before the
    row's first 16-byte boundary, then ``count`` whole vectors, the first being
    vector ``first`` of ``a``'s 1-D view (whose element 0 is ``a``'s element
    ``head0``: :func:`vector_views`); the tail, the rest, is shorter than a vector."""
    W, itemsize = plan.vector, storage_dtype(plan.dtype).itemsize

    @cuda.jit(device=True)
    def row_vectors(a, o, i, head0, n):
        e = (o * a.strides[0] + i * a.strides[1]) // itemsize  # from a's first element
        head = min((head0 + W - e % W) % W, n)
        return (e + head - head0) // W, head, (n - head) // W

    return row_vectors


def edge_loader(plan: RowPlan, fill):
    """Device function ``edges(r, lane, head, count, n) -> (h, t)``: element ``lane``
    of row ``r``'s head and of its tail, ``fill`` where there is none."""
    W = plan.vector
    load = _masked_loader(_widener(plan), fill)

    @cuda.jit(device=True)
    def edges(r, lane, head, count, n):
        return load(r, lane, head), load(r, head + count * W + lane, n)

    return edges


def vector_rows(plan: RowPlan):
    """Device functions of the forward kernels over rows in vectors with scalar heads
    and tails: ``locate(x, y, row, head0) -> (xr, yr, xv, yv, head, count)``, row
    ``row``'s views in ``x`` and ``y``, its first whole vector in each
    (:func:`row_span`; the same head and count in both) and ``head, count``;
    ``finish_edges(yr, h, t, lane, head, count, a, b)``, the head and tail elements
    ``h``, ``t`` of this lane (:func:`edge_loader`) finished into ``yr``."""
    out_t, W = _numba_types(plan)[1], plan.vector
    split, row_vectors = _row_walk(plan)[1], row_span(plan)
    finish = _finisher(plan)[1]

    @cuda.jit(device=True)
    def locate(x, y, row, head0):
        o, i = split(row, x.shape[1])
        xv, head, count = row_vectors(x, o, i, head0, x.shape[2])
        return x[o, i], y[o, i], xv, row_vectors(y, o, i, head0, x.shape[2])[0], head, count

    @cuda.jit(device=True)
    def finish_edges(yr, h, t, lane, head, count, a, b):
        if lane < head:
            yr[lane] = out_t(finish(h, a, b))
        if head + count * W + lane < yr.shape[0]:
            yr[head + count * W + lane] = out_t(finish(t, a, b))

    return locate, finish_edges


def tile_loader(plan: RowPlan, vectors: int, fill):
    """Device function ``tile(v, af, first, j, count) -> loaded``: the row's vectors
    ``j, j + G, ..., j + (vectors - 1) G`` of ``count`` (vector 0 being ``af``'s
    vector ``first``) into the local array ``v``, ``fill`` past the row's last;
    ``loaded``: the elements read. Every load is issued before any value is used:
    ``vectors`` loads in flight."""
    G, W = plan.group, plan.vector
    vload, widen = vector_loader(W), _widener(plan)

    @cuda.jit(device=True)
    def tile(v, af, first, j, count):
        loaded = 0
        for u in range(vectors):
            if j + u * G < count:
                t = vload(af, first + j + u * G)
                for q in range(W):
                    v[u * W + q] = widen(t[q])
                loaded += W
            else:
                for q in range(W):
                    v[u * W + q] = fill
        return loaded

    return tile


def _online_folder(plan: RowPlan, length: int):
    return online_folder(np.dtype(plan.compute), length, row_exp(plan.result))


@functools.lru_cache(maxsize=None)
def online_folder(dtype, length: int, exp=accurate_exp):
    """Device function ``fold(m, s, v, valid) -> (m, s)``: the online ``(max, sum)``
    after the ``length`` values of the local array ``v`` (of compute dtype ``dtype``),
    ``valid`` of which are row elements (the others -inf): one rescale, one exp per
    value (the per-element combine of ``strategies/online_softmax.py`` costs two);
    ``exp``: the device exp, :func:`row_exp`'s for the result's dtype."""
    tc = np.dtype(dtype)
    tc_t, NEG = from_dtype(tc), tc.type(-np.inf)
    vmax = row_max(tc)

    @cuda.jit(device=True)
    def fold(m, s, v, valid):
        mt = m
        for k in range(length):
            mt = vmax(mt, v[k])
        if mt == NEG:  # nothing but -inf so far: count them, never exp(-inf + inf)
            return mt, s + tc_t(valid)
        if mt != m:
            s *= tc_t(exp(m - mt))
        for k in range(length):
            s += tc_t(exp(v[k] - mt))
        return mt, s

    return fold


def _vector_tiled_stats(plan: RowPlan):
    """Device function ``stats(xr, xf, first, head, count, lane, n, sh) -> (max, sum,
    max)``: :func:`_tiled_stats` reading the row's vectors from ``xf``
    (:func:`row_span`' ``first, head, count``) and its head and tail from ``xr``."""
    tc_t, _, tc = _numba_types(plan)
    exp = row_exp(plan.result)
    G, W, V = plan.group, plan.vector, tile_vectors(plan)
    L, NEG, ZERO = V * W, tc(-np.inf), tc(0)
    tile, edges = tile_loader(plan, V, NEG), edge_loader(plan, NEG)
    if plan.normalizer == "online":
        red_pair = _allreduce(plan, plan.sum_block, plan.pair_op)
        fold_edges, fold = _online_folder(plan, 2), _online_folder(plan, L)

        @cuda.jit(device=True)
        def stats(xr, xf, first, head, count, lane, n, sh):
            v = cuda.local.array(L, tc_t)
            h, t = edges(xr, lane, head, count, n)
            v[0] = h  # the edges fold first, through the tiles' array
            v[1] = t
            ends = (lane < head) + (head + count * W + lane < n)  # elements in h, t
            m, s = fold_edges(NEG, ZERO, v, ends)
            j = lane
            while j < count:
                m, s = fold(m, s, v, tile(v, xf, first, j, count))
                j += V * G
            r = red_pair((m, s), sh[0], sh[1], sh[2], sh[3])
            return r[0], r[1], r[0]

        return stats
    red_max = _allreduce(plan, plan.max_block, MAX)
    red_sum = _allreduce(plan, plan.sum_block, SUM)
    vmax = row_max(tc)

    @cuda.jit(device=True)
    def stats(xr, xf, first, head, count, lane, n, sh):
        v = cuda.local.array(L, tc_t)
        h, t = edges(xr, lane, head, count, n)
        m = vmax(h, t)
        j = lane
        while j < count:
            tile(v, xf, first, j, count)
            for k in range(L):
                m = vmax(m, v[k])
            j += V * G
        m = red_max((m,), sh[0], sh[1], sh[2], sh[3])[0]
        s = tc_t(exp(h - m)) + tc_t(exp(t - m))
        j = lane
        while j < count:
            tile(v, xf, first, j, count)
            for k in range(L):
                s += tc_t(exp(v[k] - m))
            j += V * G
        s = red_sum((s,), sh[4], sh[5], sh[6], sh[7])[0]
        return m, s, m

    return stats


def _vector_tiled_forward(plan: RowPlan, prepare, finish, jit, storage):
    """``kernel(x, y, xf, yf, head0)``: the tiled forward kernel with each row's whole
    16-byte vectors read from ``xf`` (by the stats pass and the write pass) and
    written to ``yf``, and its head and tail through ``x`` and ``y``
    (:func:`vector_views`)."""
    tc_t, _, tc = _numba_types(plan)
    G, W = plan.group, plan.vector
    walk = _row_walk(plan)[0]
    V = tile_vectors(plan)
    L, NEG = V * W, tc(-np.inf)  # a tile's elements per thread
    stats, (locate, finish_edges) = _vector_tiled_stats(plan), vector_rows(plan)
    tile, edges = tile_loader(plan, V, NEG), edge_loader(plan, NEG)
    vstore, pack = vector_storer(W), packer(plan)

    @jit
    def vector_tiled_forward(x, y, xf, yf, head0):
        sh = storage()
        v = cuda.local.array(L, tc_t)
        lane, row, step = walk()
        n = x.shape[2]
        while row < x.shape[0] * x.shape[1]:
            xr, yr, xv, yv, head, count = locate(x, y, row, head0)
            m, s, ref = stats(xr, xf, xv, head, count, lane, n, sh)
            a, b = prepare(m, s, ref)
            j = lane
            while j < count:  # all loads of a tile before its stores: y may alias x
                tile(v, xf, xv, j, count)
                for u in range(V):
                    if j + u * G < count:
                        for q in range(W):
                            v[u * W + q] = finish(v[u * W + q], a, b)
                        vstore(yf, yv + j + u * G, pack(v, u * W))
                j += V * G
            h, t = edges(xr, lane, head, count, n)
            finish_edges(yr, h, t, lane, head, count, a, b)
            row += step

    return vector_tiled_forward


def row_stage_bytes(n: int, vector: int) -> int:
    """Bytes of shared memory that stage a row of ``n`` elements, ``vector`` of them
    a 16-byte vector: room for every whole vector of the row."""
    return n // vector * VECTOR_BYTES


def stage_shared(plan: RowPlan, n: int) -> int:
    """Bytes of dynamic shared memory a block of ``plan`` (its ``vector`` set) takes
    for rows of ``n``: :func:`row_stage_bytes` for a staged plan, less the vectors
    its lanes hold in registers (:attr:`RowPlan.held`), else none. What shared memory
    leaves of a multiprocessor's 256 KiB is its L1, which every load in flight needs
    a line of: the held vectors' loads stall on a small one (bench/NOTES.md, "Split
    staging")."""
    return staged_bytes(n, plan.vector, plan.held, plan.group) if plan.staged else 0


def staged_bytes(n: int, vector: int, held: int, threads: int) -> int:
    """Bytes of shared memory a staged row of ``n`` takes (``vector`` a 16-byte
    vector): its whole vectors but the ``held`` a lane of ``threads`` holds."""
    return max(row_stage_bytes(n, vector) - held * threads * VECTOR_BYTES, 0)


def stage_bytes(blocks: int = 2) -> int:
    """The most dynamic shared memory a staged block may take with ``blocks`` blocks
    a multiprocessor (two: one loads while the other reduces), with room for their
    static shared memory and the driver's reserve; at most the device's opt-in
    maximum a block. Under the simulator, 48 KiB for two."""
    per_block, per_multiprocessor = shared_capacity()
    if SIMULATOR:
        return per_multiprocessor // blocks
    return min(per_block, per_multiprocessor // blocks - 2048)


def staged_blocks(n: int, vector: int) -> int:
    """Blocks whose whole staged rows of ``n`` a multiprocessor's shared memory holds:
    3, 2 or 1 (:func:`stage_bytes`; :func:`staged_threads` sizes the blocks by it)."""
    need = row_stage_bytes(n, vector)
    return 3 if need <= stage_bytes(3) else 2 if need <= stage_bytes(2) else 1


def held_count(n: int, vector: int, threads: int) -> int:
    """Vectors a lane of a staged row of ``n`` elements (``vector`` a 16-byte vector;
    blocks of ``threads``; a log_softmax backward row's ``dy``) holds in registers
    (:attr:`RowPlan.held`): the most of :data:`HELD` whose registers
    (:data:`HELD_VECTOR_REGISTERS` a vector on :data:`TILED_REGISTERS`) the blocks
    that share a multiprocessor's shared memory leave (:func:`staged_blocks`), so
    holding never costs a block. On the H200: 8 for a row alone (512 threads), 4 for
    three blocks of 256, none for two of 512 or a backward row alone (1024).
    Each held vector is one shared-memory write and two reads fewer, and room for
    the L1 that loads in flight need: float32 softmax (4096, 32768) took 0.290 ms
    against 0.304 staged whole, (8192, 50257) 0.834 against 0.851, float16 (4096,
    32768) 0.152-0.154 against 0.162-0.166 (bench/NOTES.md, "Split staging"; float32
    rows of three or two blocks, 16388 to 28672, were not timed). Forward rows past
    a block's whole row stage with 8 held: (4096, 65536) float32 0.573-0.580 ms and
    float16 0.321-0.324 against the tiled kernel's 0.724-0.747 and 0.398-0.402; the
    backward's 4 held rows of 32768 halves were level with staging them whole."""
    budget = min(MAX_REGISTERS, REGISTER_FILE // (threads * staged_blocks(n, vector)))
    return next((h for h in HELD if TILED_REGISTERS + HELD_VECTOR_REGISTERS * h <= budget),
                0)


def staged_threads(kind: str, n: int, vector: int) -> int:
    """Threads a block of a staged row of ``n`` elements (``vector`` a 16-byte
    vector): 256 where three blocks' rows fit a multiprocessor's shared memory, so
    three rows overlap their phases, else 512 (two blocks within 64 registers), or
    1024 for a log_softmax backward row that leaves a multiprocessor one block. On
    the H200 (4096, 32768) float16 took 0.203 ms at 256 against 0.222 at 512
    (log_softmax 0.189 against 0.204); (8192, 50257), two rows a multiprocessor
    either way, 0.627 against 0.573; float32 log_softmax_backward at (4096, 32768),
    one row a multiprocessor, 0.417 at 1024 against 0.473 at 512 (bench/NOTES.md,
    "Staged half rows", "Staged float32 rows")."""
    blocks = staged_blocks(n, vector)
    if blocks == 3:
        return 256
    return 1024 if kind == "log_softmax_backward" and blocks == 1 else 512


def four_vectors(plan: RowPlan):
    """Device function ``load4(af, first, j, count)``: the row's vectors ``j, j + G,
    j + 2G, j + 3G`` (vector 0 being ``af``'s vector ``first``), all four loads issued
    before any value is used; one past the row's end reads its last vector (the
    caller keeps nothing of it)."""
    G, vload = plan.group, vector_loader(plan.vector)

    @cuda.jit(device=True)
    def load4(af, first, j, count):
        return (vload(af, first + j), vload(af, first + min(j + G, count - 1)),
                vload(af, first + min(j + 2 * G, count - 1)),
                vload(af, first + min(j + 3 * G, count - 1)))

    return load4


def row_stager(plan: RowPlan, fold):
    """Device functions ``issue(sv, af, first, start, count)`` and ``drain(sv, af,
    first, start, count, state) -> state`` that bring this lane's vectors of a row
    (``j = start, start + G, ...`` below ``count``, vector 0 being ``af``'s vector
    ``first``) into slot ``j - held * G`` of the shared array ``sv`` (slot 0 holds
    the first vector past those the lanes hold in registers: :func:`held_vectors`),
    each folded into ``state`` by ``fold(state, vector)``: ``issue`` starts the
    copies, ``drain`` folds what they brought, so the caller may fold vectors it
    holds in registers in between. By ``cp.async`` where the plan asks for it and the device has it
    (:func:`_async_stager`); else ``issue`` does nothing and ``drain`` brings the
    vectors through registers, each folded as it arrives, four loads issued before
    the first store: a store to shared memory could alias a later load for all the
    compiler knows, so it would not hoist them."""
    if plan.async_copy and async_staging():
        return _async_stager(plan, fold)
    G, S = plan.group, plan.held * plan.group
    vstore, load4 = vector_storer(plan.vector), four_vectors(plan)

    @cuda.jit(device=True)
    def issue(sv, af, first, start, count):
        pass

    @cuda.jit(device=True)
    def stage(sv, e, j, count, state):
        if j < count:
            vstore(sv, j - S, e)
            return fold(state, e)
        return state

    @cuda.jit(device=True)
    def drain(sv, af, first, start, count, state):
        j = start
        while j < count:
            e = load4(af, first, j, count)
            state = stage(sv, e[0], j, count, state)
            state = stage(sv, e[1], j + G, count, state)
            state = stage(sv, e[2], j + 2 * G, count, state)
            state = stage(sv, e[3], j + 3 * G, count, state)
            j += 4 * G
        return state

    return issue, drain


def async_staging() -> bool:
    """Whether the kernels built now may stage rows by ``cp.async``: on a device of
    sm_80 or later, and under the simulator (whose copies are slice assignments)."""
    return SIMULATOR or async_copies(_capability())


def _async_stager(plan: RowPlan, fold):
    """:func:`row_stager`'s ``issue`` and ``drain`` by ``cp.async``: the thread
    issues the copies of all its vectors of the row, those before the middle of its
    staged vectors as one group and the rest as a second; ``drain`` folds the first
    group's vectors from shared memory once they have landed while the second is in
    flight, then the second's. A block has its whole row in flight, not four
    vectors a thread, and no register holds a vector on its way. A thread reads
    back only slots it copied, so no barrier is needed (``cp.async.wait_group``
    makes a thread's own copies visible to it)."""
    G, S, vload = plan.group, plan.held * plan.group, vector_loader(plan.vector)

    @cuda.jit(device=True)
    def second_group(start, count):
        """The first of the lane's vectors ``start, start + G, ...`` at or past the
        middle of the range: where its second group of copies begins."""
        middle = (start - start % G + count) // 2
        return start if start >= middle else start + (middle - start + G - 1) // G * G

    @cuda.jit(device=True)
    def issue(sv, af, first, start, count):
        second = second_group(start, count)
        j = start
        while j < second:
            copy16(sv, j - S, af, first + j)
            j += G
        commit()
        while j < count:
            copy16(sv, j - S, af, first + j)
            j += G
        commit()

    @cuda.jit(device=True)
    def fold_slots(sv, j, end, state):
        while j < end:
            state = fold(state, vload(sv, j - S))
            j += G
        return state

    @cuda.jit(device=True)
    def drain(sv, af, first, start, count, state):
        second = second_group(start, count)
        wait_groups(1)
        state = fold_slots(sv, start, second, state)
        wait_groups(0)
        return fold_slots(sv, second, count, state)

    return issue, drain


def held_vectors(plan: RowPlan):
    """Device functions over the :attr:`RowPlan.held` vectors a lane of a staged row
    holds in registers (``hv[k]``: the row's vector ``lane + k * G``, a local array
    of ``(held, W)`` stored elements): ``load(hv, af, first, lane, count)`` issues
    their loads (one past the row's end reads its last vector, which nothing keeps:
    a staged row has at least one whole vector);
    ``fold(state, hv, lane, count) -> state`` folds those within the row by
    ``fold``."""
    H, G, W = plan.held, plan.group, plan.vector
    vload = vector_loader(W)

    @cuda.jit(device=True)
    def load(hv, af, first, lane, count):
        for k in range(H):
            e = vload(af, first + min(lane + k * G, count - 1))
            for q in range(W):
                hv[k, q] = e[q]

    def folder(fold):
        @cuda.jit(device=True)
        def fold_held(state, hv, lane, count):
            for k in range(H):
                if lane + k * G < count:
                    state = fold(state, hv[k])
            return state

        return fold_held

    return load, folder


def _staged_stats(plan: RowPlan):
    """Device functions of a staged row's ``(max, sum)``: ``begin(h, t, ends)`` a
    thread's state from its head and tail elements (``ends`` of them in the row),
    ``fold(state, e)`` after a vector ``e`` of stored elements, ``end(state, h, t,
    sv, hv, lane, count, sh) -> (max, sum)`` the row's (``hv``: the lane's
    :func:`held_vectors`, the rest of its vectors in ``sv``).

    ``"max_then_sum"``: the state is two chains of maxima; ``end`` reduces them, reads
    the thread's vectors again (held, then staged) for the exp sum and reduces that.
    ``"online"``: the state is the online ``(max, sum)``, each vector folded in as it
    arrives (its exps issued while later loads are in flight); ``end`` is one
    reduce of the pairs.
    """
    tc_t, _, tc = _numba_types(plan)
    G, W, H = plan.group, plan.vector, plan.held
    NEG, ZERO = tc(-np.inf), tc(0)
    widen, exp, vmax = _widener(plan), row_exp(plan.result), row_max(tc)
    vload = vector_loader(W)
    if plan.normalizer == "online":
        red_pair = _allreduce(plan, plan.sum_block, plan.pair_op)
        fold_edges, fold_vector = _online_folder(plan, 2), _online_folder(plan, W)

        @cuda.jit(device=True)
        def begin(h, t, ends):
            v = cuda.local.array(2, tc_t)
            v[0] = h
            v[1] = t
            return fold_edges(NEG, ZERO, v, ends)

        @cuda.jit(device=True)
        def fold(state, e):
            v = cuda.local.array(W, tc_t)
            for q in range(W):
                v[q] = widen(e[q])
            return fold_vector(state[0], state[1], v, W)

        @cuda.jit(device=True)
        def end(state, h, t, sv, hv, lane, count, sh):
            r = red_pair(state, sh[0], sh[1], sh[2], sh[3])
            return r[0], r[1]

        return begin, fold, end
    red_max = _allreduce(plan, plan.max_block, MAX)
    red_sum = _allreduce(plan, plan.sum_block, SUM)

    @cuda.jit(device=True)
    def begin(h, t, ends):
        return vmax(h, t), NEG

    @cuda.jit(device=True)
    def fold(state, e):  # two chains of maxima, swapped each vector
        m = state[0]
        for q in range(W):
            m = vmax(m, widen(e[q]))
        return state[1], m

    @cuda.jit(device=True)
    def add_exps(s, e, m):
        for q in range(W):
            s += tc_t(exp(widen(e[q]) - m))
        return s

    @cuda.jit(device=True)
    def end(state, h, t, sv, hv, lane, count, sh):
        m = red_max((vmax(state[0], state[1]),), sh[0], sh[1], sh[2], sh[3])[0]
        s = tc_t(exp(h - m)) + tc_t(exp(t - m))
        for k in range(H):
            if lane + k * G < count:
                s = add_exps(s, hv[k], m)
        j = lane + H * G
        while j < count:
            s = add_exps(s, vload(sv, j - H * G), m)
            j += G
        return m, red_sum((s,), sh[4], sh[5], sh[6], sh[7])[0]

    return begin, fold, end


def _staged_forward(plan: RowPlan, prepare, finish, jit, storage):
    """``kernel(x, y, xf, yf, head0)``: the staged forward kernel.

    Each thread loads its first :attr:`RowPlan.held` vectors of the row (vector ``j``
    of the row's whole vectors, :func:`row_span`, for ``j = lane, lane + G, ...``)
    into registers (:func:`held_vectors`) and brings the rest into its slots of the
    block's dynamic shared array, by ``cp.async`` or through registers
    (:func:`row_stager`); it folds each vector into its state
    (:func:`_staged_stats`), the held ones while the copies are in flight, and the
    write takes them from registers and the thread's own slots. Held vectors spare
    the shared-memory reads that a row alone on its multiprocessor waits on
    (bench/NOTES.md, "Split staging").
    A thread reads only slots it wrote, so no barrier guards them (the block
    reduces have their own). Head and tail elements stay in registers, as the tiled
    kernel's. All of a row is read before any of it is written: ``y`` may alias
    ``x``.
    """
    tc_t, _, tc = _numba_types(plan)
    G, W = plan.group, plan.vector
    walk = _row_walk(plan)[0]
    locate, finish_edges = vector_rows(plan)
    edges = edge_loader(plan, tc(-np.inf))
    vload, vstore = vector_loader(W), vector_storer(W)
    pack, widen = packer(plan), _widener(plan)
    begin, fold, end = _staged_stats(plan)
    issue, drain = row_stager(plan, fold)
    load_held, folder = held_vectors(plan)
    fold_held = folder(fold)
    stored = from_dtype(storage_dtype(plan.dtype))
    H, HELD_ROWS = plan.held, max(plan.held, 1)  # (a local array has a row at least)

    @cuda.jit(device=True)
    def put(yf, j, e, a, b):
        """``y``'s vector ``j`` from ``x``'s ``e`` (held or staged)."""
        v = cuda.local.array(W, tc_t)
        for q in range(W):
            v[q] = finish(widen(e[q]), a, b)
        vstore(yf, j, pack(v, 0))

    @jit
    def staged_forward(x, y, xf, yf, head0):
        sh = storage()
        sv = cuda.shared.array(0, stored)
        hv = cuda.local.array((HELD_ROWS, W), stored)
        lane, row, step = walk()
        n = x.shape[2]
        while row < x.shape[0] * x.shape[1]:
            xr, yr, xv, yv, head, count = locate(x, y, row, head0)
            load_held(hv, xf, xv, lane, count)
            h, t = edges(xr, lane, head, count, n)
            issue(sv, xf, xv, lane + H * G, count)
            state = begin(h, t, (lane < head) + (head + count * W + lane < n))
            state = fold_held(state, hv, lane, count)
            state = drain(sv, xf, xv, lane + H * G, count, state)
            m, s = end(state, h, t, sv, hv, lane, count, sh)
            a, b = prepare(m, s, m)
            for k in range(H):
                if lane + k * G < count:
                    put(yf, yv + lane + k * G, hv[k], a, b)
            j = lane + H * G
            while j < count:
                put(yf, yv + j, vload(sv, j - H * G), a, b)
                j += G
            finish_edges(yr, h, t, lane, head, count, a, b)
            row += step

    return staged_forward


# --- backward in vectors ------------------------------------------------------------------


def _vector_fused_backward(plan: RowPlan, storage, red_sum, gradient, jit):
    """``kernel(y, dy, dx, yf, dyf, dxf)``: the fused backward kernel reading ``y`` and
    ``dy`` and writing ``dx`` in 16-byte vectors through 1-D views from each array's
    first element (rows aligned, whole vectors: :func:`vector_width`)."""
    tc_t, _, tc = _numba_types(plan)
    K, G, W = plan.per_thread, plan.group, plan.vector
    walk, split = _row_walk(plan)
    KV, ZERO = K // W, tc(0)
    first_vector = _first_vector(plan)
    term, grad = gradient
    vload, vstore, pack = vector_loader(W), vector_storer(W), packer(plan)
    widen = _widener(plan)

    @jit
    def vector_fused_backward(y, dy, dx, yf, dyf, dxf):
        sh = storage()
        vy = cuda.local.array(K, tc_t)
        vd = cuda.local.array(K, tc_t)
        lane, row, step = walk()
        inner, n = y.shape[1], y.shape[2]
        while row < y.shape[0] * inner:
            o, i = split(row, inner)
            yv, dv = first_vector(y, o, i), first_vector(dy, o, i)
            xv = first_vector(dx, o, i)
            for j in range(KV):  # 2 KV vector loads in flight, then only registers
                if (lane + j * G) * W < n:
                    ty, td = vload(yf, yv + lane + j * G), vload(dyf, dv + lane + j * G)
                    for q in range(W):
                        vy[j * W + q] = widen(ty[q])
                        vd[j * W + q] = widen(td[q])
                else:
                    for q in range(W):
                        vy[j * W + q] = ZERO
                        vd[j * W + q] = ZERO
            total = ZERO
            for k in range(K):
                total += term(vy[k], vd[k])
            total = red_sum((total,), sh[0], sh[1], sh[2], sh[3])[0]
            for k in range(K):
                vy[k] = grad(vy[k], vd[k], total)
            for j in range(KV):
                if (lane + j * G) * W < n:
                    vstore(dxf, xv + lane + j * G, pack(vy, j * W))
            row += step

    return vector_fused_backward


def backward_rows(plan: RowPlan, grad):
    """Device functions of the backward kernels over rows in vectors with scalar heads
    and tails: ``locate(y, dy, dx, row, head0, lane) -> (yr, dyr, dxr, yv, dv, xv,
    head, count, y0, y1, d0, d1)``, row ``row``'s views, its first whole vector in
    each array (:func:`row_span`: the same head and count in all three), and ``lane``'s
    head and tail elements of ``y`` and ``dy`` (:func:`edge_loader`, 0 where none);
    ``finish_edges(dxr, y0, y1, d0, d1, lane, head, count, total)``, their ``dx``
    by ``grad``."""
    out_t, W = _numba_types(plan)[1], plan.vector
    split, row_vectors = _row_walk(plan)[1], row_span(plan)
    edges = edge_loader(plan, np.dtype(plan.compute).type(0))

    @cuda.jit(device=True)
    def locate(y, dy, dx, row, head0, lane):
        o, i = split(row, y.shape[1])
        n = y.shape[2]
        yr, dyr, dxr = y[o, i], dy[o, i], dx[o, i]
        yv, head, count = row_vectors(y, o, i, head0, n)
        dv = row_vectors(dy, o, i, head0, n)[0]
        xv = row_vectors(dx, o, i, head0, n)[0]
        y0, y1 = edges(yr, lane, head, count, n)
        d0, d1 = edges(dyr, lane, head, count, n)
        return yr, dyr, dxr, yv, dv, xv, head, count, y0, y1, d0, d1

    @cuda.jit(device=True)
    def finish_edges(dxr, y0, y1, d0, d1, lane, head, count, total):
        if lane < head:
            dxr[lane] = out_t(grad(y0, d0, total))
        if head + count * W + lane < dxr.shape[0]:
            dxr[head + count * W + lane] = out_t(grad(y1, d1, total))

    return locate, finish_edges


def _vector_tiled_backward(plan: RowPlan, storage, red_sum, gradient, jit):
    """``kernel(y, dy, dx, yf, dyf, dxf, head0)``: the tiled backward kernel with each
    row's whole vectors read from ``yf``/``dyf`` and written to ``dxf``, its head and
    tail through ``y``, ``dy``, ``dx`` (:func:`vector_views`). Half of
    :func:`tile_vectors` of each input per tile."""
    tc_t, _, tc = _numba_types(plan)
    G, W = plan.group, plan.vector
    walk = _row_walk(plan)[0]
    U, ZERO = max(1, tile_vectors(plan) // 2), tc(0)
    L = U * W  # a tile's elements per thread, of each input
    term, grad = gradient
    locate, finish_edges = backward_rows(plan, grad)
    tile = tile_loader(plan, U, ZERO)
    vstore, pack = vector_storer(W), packer(plan)

    @jit
    def vector_tiled_backward(y, dy, dx, yf, dyf, dxf, head0):
        sh = storage()
        vy = cuda.local.array(L, tc_t)
        vd = cuda.local.array(L, tc_t)
        lane, row, step = walk()
        while row < y.shape[0] * y.shape[1]:
            # (the head and tail elements y0, y1, d0, d1 kept for the write pass)
            yr, dyr, dxr, yv, dv, xv, head, count, y0, y1, d0, d1 = locate(
                y, dy, dx, row, head0, lane)
            total = term(y0, d0) + term(y1, d1)
            j = lane
            while j < count:
                tile(vy, yf, yv, j, count)
                tile(vd, dyf, dv, j, count)
                for k in range(L):
                    total += term(vy[k], vd[k])
                j += U * G
            total = red_sum((total,), sh[0], sh[1], sh[2], sh[3])[0]
            j = lane
            while j < count:  # all loads of a tile before its stores: dx may alias
                tile(vy, yf, yv, j, count)
                tile(vd, dyf, dv, j, count)
                for u in range(U):
                    if j + u * G < count:
                        for q in range(W):
                            vy[u * W + q] = grad(vy[u * W + q], vd[u * W + q], total)
                        vstore(dxf, xv + j + u * G, pack(vy, u * W))
                j += U * G
            finish_edges(dxr, y0, y1, d0, d1, lane, head, count, total)
            row += step

    return vector_tiled_backward


def _staged_log_backward(plan: RowPlan, storage, red_sum, gradient, jit):
    """``kernel(y, dy, dx, yf, dyf, dxf, head0)``: the staged log_softmax backward
    kernel: ``dx = dy - exp(y) * sum(dy)``, whose sum reads ``dy`` alone. Each thread
    holds its first :attr:`RowPlan.held` vectors of ``dy`` in registers
    (:func:`held_vectors`) and the rest in its slots of the block's dynamic shared
    memory (:func:`row_stager`), and adds them up; the write pass reads ``y`` (four
    vectors in flight) beside the held ``dy`` and the thread's own slots. ``dy`` and
    ``y`` are read once each, where the tiled kernel reads ``dy`` twice. Every ``dy``
    of a row is staged or held before any ``dx`` is written, and each thread reads
    its vectors of ``y`` before it writes theirs: ``dx`` may alias either input."""
    tc_t = _numba_types(plan)[0]
    G, W, H = plan.group, plan.vector, plan.held
    S, HELD_ROWS = H * G, max(H, 1)
    walk = _row_walk(plan)[0]
    grad = gradient[1]
    locate, finish_edges = backward_rows(plan, grad)
    vload, vstore = vector_loader(W), vector_storer(W)
    pack, widen = packer(plan), _widener(plan)
    stored = from_dtype(storage_dtype(plan.dtype))

    @cuda.jit(device=True)
    def add(total, e):
        for q in range(W):
            total += widen(e[q])
        return total

    (issue, drain), load4 = row_stager(plan, add), four_vectors(plan)
    load_held, folder = held_vectors(plan)
    fold_held = folder(add)

    @cuda.jit(device=True)
    def put(dxf, xv, t, e, j, total):
        """``dx``'s vector ``j`` from ``y``'s ``t`` and ``dy``'s ``e``."""
        v = cuda.local.array(W, tc_t)
        for q in range(W):
            v[q] = grad(widen(t[q]), widen(e[q]), total)
        vstore(dxf, xv + j, pack(v, 0))

    @cuda.jit(device=True)
    def write(dxf, sv, xv, t, j, count, total):
        """``dx``'s vector ``j`` from ``y``'s (loaded as ``t``) and the staged ``dy``."""
        if j < count:
            put(dxf, xv, t, vload(sv, j - S), j, total)

    @jit
    def staged_log_backward(y, dy, dx, yf, dyf, dxf, head0):
        sh = storage()
        sv = cuda.shared.array(0, stored)
        hv = cuda.local.array((HELD_ROWS, W), stored)
        lane, row, step = walk()
        while row < y.shape[0] * y.shape[1]:
            yr, dyr, dxr, yv, dv, xv, head, count, y0, y1, d0, d1 = locate(
                y, dy, dx, row, head0, lane)
            load_held(hv, dyf, dv, lane, count)
            issue(sv, dyf, dv, lane + S, count)
            total = fold_held(d0 + d1, hv, lane, count)
            total = drain(sv, dyf, dv, lane + S, count, total)
            total = red_sum((total,), sh[0], sh[1], sh[2], sh[3])[0]
            for k in range(H):
                j = lane + k * G
                if j < count:
                    put(dxf, xv, vload(yf, yv + j), hv[k], j, total)
            j = lane + S
            while j < count:  # four loads of y before the first store of dx
                t = load4(yf, yv, j, count)
                write(dxf, sv, xv, t[0], j, count, total)
                write(dxf, sv, xv, t[1], j + G, count, total)
                write(dxf, sv, xv, t[2], j + 2 * G, count, total)
                write(dxf, sv, xv, t[3], j + 3 * G, count, total)
                j += 4 * G
            finish_edges(dxr, y0, y1, d0, d1, lane, head, count, total)
            row += step

    return staged_log_backward


def packer(plan: RowPlan):
    """Device function ``pack(v, b)``: the ``W`` elements ``v[b], ..., v[b + W - 1]``
    of a local array of the compute dtype as a tuple of the output dtype (float16
    rounds here, eight to a 16-byte store)."""
    out_t, W = _numba_types(plan)[1], plan.vector
    if W == 2:

        @cuda.jit(device=True)
        def pack(v, b):
            return (out_t(v[b]), out_t(v[b + 1]))

    elif W == 4:

        @cuda.jit(device=True)
        def pack(v, b):
            return (out_t(v[b]), out_t(v[b + 1]), out_t(v[b + 2]), out_t(v[b + 3]))

    else:

        @cuda.jit(device=True)
        def pack(v, b):
            return (out_t(v[b]), out_t(v[b + 1]), out_t(v[b + 2]), out_t(v[b + 3]),
                    out_t(v[b + 4]), out_t(v[b + 5]), out_t(v[b + 6]), out_t(v[b + 7]))

    return pack
