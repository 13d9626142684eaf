"""The contract of each strategy family, stated once.

A strategy decides *how* threads or blocks combine; everything else (the input's
layout, the op, where memory comes from) reaches it through a *job* (``numbakern/core/
jobs.py``). Each family's contract is written here after CUB's ``block_reduce.cuh``:
its phases, its temp storage, which threads hold the result, what it costs, whether it
is deterministic and whether it needs a commutative op. A new strategy subclasses one
of these, lives in one file, and is added to its family's registry with one line,
``numbakern.strategies.register(MyStrategy)`` (the built-in ones are registered in
``strategies/__init__.py``); every layout of its family then uses it. Its ``name``
must be its own within its family (``register`` refuses a taken one).

=====================  ===========================  =====================================
family                 base class                   decides
=====================  ===========================  =====================================
``"block"``            :class:`BlockStrategy`       how the threads of one block (or one
                                                    warp) combine their states
``"reduce"``           :class:`GridReduce`          how the blocks that share an output
                                                    meet: partials, or atomics
``"scan"``             :class:`GridScan`            how a tile learns the combine of the
                                                    tiles before it
``"histogram"``        :class:`HistogramStrategy`   where a block's counts gather
``"sort"``             :class:`SortStrategy`        how rows are put in order
``"select"``           :class:`SelectStrategy`      how each row's k first are found
=====================  ===========================  =====================================

Strategies are values: immutable once made, equal and hashed by their ``key``
(the plans and recorded launches numbakern caches hold them).

A strategy that launches kernels of its own (a grid, sort, select or histogram
strategy) launches them with ``numbakern.runtime.launch.launch`` and takes device
memory from its job's workspace (``job.workspace.empty``): a repeated call then
replays those launches (``numbakern/runtime/replay.py``). A kernel launched with
Numba's ``kernel[grid, block](...)`` still runs, but the call is never replayed.
"""

from __future__ import annotations

import functools
import inspect
import math
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, NamedTuple

from numba import cuda
from numba.cuda.dispatcher import CUDADispatcher

from numbakern.kernels.counting import COUNTER_BYTES, build_histogram_kernel, resident_blocks
from numbakern.kernels.scan_tiles import auto_items, check_hold, padded_slots
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.checks import check_count, check_flag, check_optional_count
from numbakern.runtime.device import (DEFAULT_THREADS, FULL_MASK, SHARED_LIMIT, SIMULATOR,
                                      WARP, ceil_div)
from numbakern.runtime.launch import launch

from .registry import REGISTRY, resolve

__all__ = ["BlockStrategy", "Cost", "DIGIT_BITS", "GridReduce", "GridScan", "GridStrategy",
           "HistogramStrategy", "Immutable", "RADIX", "SelectStrategy", "SortStrategy",
           "Strategy", "WarpForm",
           "block_barrier", "check_count", "check_flag", "check_optional_count",
           "check_threads", "digit_counter", "log2_ceil", "pair_before", "pair_sorter",
           "place_in_block", "place_in_runs",
           "reduce_from_scan", "warp_barrier", "warp_reduce_form", "warp_scan_form"]

# --- argument checks every strategy shares -------------------------------------------


def check_threads(threads: int | None) -> int:
    """Threads per block: ``None`` (the default, 256; 64 under the simulator) or a
    multiple of 32 from 32 to 1024."""
    threads = check_count(DEFAULT_THREADS if threads is None else threads, "threads")
    if threads < 32 or threads > 1024 or threads % 32:
        raise ValueError(f"threads must be a multiple of 32 from 32 to 1024, got {threads}")
    return threads


def log2_ceil(n: int) -> int:
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0


@dataclass(frozen=True)
class Cost:
    """What one operation of ``n`` elements costs a strategy: for teaching and for GB/s.

    ``bytes_read`` and ``bytes_written`` count device-memory traffic (input, partials,
    output), ``launches`` kernel launches and ``atomics`` atomic operations.
    """

    launches: int
    bytes_read: int
    bytes_written: int
    atomics: int


# --- values, not objects ---------------------------------------------------------------


class _MadeOnce(ABCMeta):  # abstract methods: a class missing one is no strategy
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_made", True)  # __init__ is over: fixed from now on
        return obj

    @property
    def __signature__(cls) -> inspect.Signature:
        """``__init__``'s parameters, which ``help()`` and ``inspect.signature`` would
        otherwise take from ``__call__`` above (``*args, **kwargs``)."""
        signature = inspect.signature(cls.__init__)
        return signature.replace(parameters=list(signature.parameters.values())[1:])


class Immutable(metaclass=_MadeOnce):
    """Base of strategy classes: an object's attributes are fixed once it is made.

    A strategy changed after it was made would leave the plans and recorded launches
    that hold it answering for its old value (found in a trial: setting ``threads``
    on a used object ran the old block size), so a change raises ``AttributeError``;
    make a new object instead.
    """

    def __setattr__(self, name, value):
        if getattr(self, "_made", False):
            raise AttributeError(self._refusal(f"setting {name!r}"))
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if getattr(self, "_made", False):
            raise AttributeError(self._refusal(f"deleting {name!r}"))
        object.__delattr__(self, name)

    def _refusal(self, change: str) -> str:
        kind = type(self).__name__
        return (f"{kind} objects are immutable: make a new one (for example {kind}(...)) "
                f"instead of {change}")


class Strategy(Immutable):
    """What every strategy has: a ``name`` (its registry name), a ``family`` and a
    ``key`` by which it is equal to and hashed like another. A key starts with the
    class itself, so compiled kernels, which are cached on keys, never pass from one
    class to another of the same name (a subclass of a built-in strategy, or an
    edited class registered again)."""

    name: ClassVar[str]
    family: ClassVar[str]

    @property
    @abstractmethod
    def key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


# --- block: the threads of one block (or one warp) -------------------------------------


class WarpForm(NamedTuple):
    """A block strategy's algorithm run by each warp on its own (a warp per row).

    ``function``: the device function (signatures in :class:`BlockStrategy`);
    ``slots``: the shared-memory states *each warp* needs (0 for one that works in
    registers): a kernel of ``W`` warps allocates ``W * slots``, and warp ``w`` uses
    slots ``w * slots`` onwards (the functions find them from ``threadIdx.x``).
    """

    function: Callable
    slots: int


def _returning_device_functions(build: Callable, name: str) -> Callable:
    """``build`` that raises ``TypeError`` where it returns anything but a CUDA
    device function (``@cuda.jit(device=True)``)."""
    @functools.wraps(build)
    def checked(self, *args, **kwargs):
        built = build(self, *args, **kwargs)
        device = getattr(built, "_device", False) if SIMULATOR else \
            isinstance(built, CUDADispatcher)
        if not device:
            raise TypeError(f"{type(self).__name__}.{name} must return a CUDA device "
                            f"function (@cuda.jit(device=True)), got {built!r}: a plain "
                            f"Python function runs under the simulator only")
        return built

    return checked


class BlockStrategy(Strategy):
    """How the threads of one block combine their states (CUB's ``BlockReduce`` and
    ``BlockScan`` algorithms).

    The device functions are built from the op's *state kit* ``kit``
    (``numbakern/ops/state.py``): ``kit.combine(a, b)`` and ``kit.identity()`` on whole
    states, ``kit.shfl_down/shfl_up/shfl_idx(s, k)`` (a warp shuffle of every field),
    ``kit.store(t0, t1, i, s)`` and ``kit.load(t0, t1, i)`` (a state to or from slot
    ``i`` of an array of states: the pair of handles ``t0, t1`` that only the kit
    reads, whatever the number of fields), ``kit.fields`` and ``kit.dtypes``. A
    strategy touches states only through these, so it serves every op.

    Every device function takes the calling thread's state ``s`` and the temp storage
    ``t0, t1`` (:meth:`temp_slots` states of shared memory, allocated by the kernel
    with ``kit.shared_temp(slots)``: ``cuda.shared.array`` is never called inside a
    strategy), and must be
    called by every thread of the block. Two calls that share ``t0, t1`` need a
    barrier between them (CUB's rule for ``TempStorage``).

    * :meth:`build_reduce` (required): ``block_reduce(s, t0, t1) -> state``, the
      combine of every thread's state, **valid in thread 0** (some strategies give it
      to every thread; none promises more than thread 0).
    * :meth:`build_scan` (optional, :attr:`has_scan`): ``block_scan(s, t0, t1) ->
      (inclusive, exclusive, total)``, all three **valid in every thread**, in thread
      order; ``exclusive`` in thread 0 is the identity and must never be combined.
    * :meth:`build_warp_reduce` and :meth:`build_warp_scan` (optional): the same
      algorithm run by each warp on its own, for layouts that give a row to a warp.
      A layout whose strategy has no warp form gives each row a block instead.

    Subclasses set ``name`` and ``needs_commutative`` (whether the algorithm combines
    states out of thread order) and implement :meth:`temp_slots`, :meth:`build_reduce`
    and :meth:`barriers`.

    Args:
        threads: threads per block, a multiple of 32 from 32 to 1024 (default 256; 64
            under the simulator, which runs one OS thread per CUDA thread).

    Raises:
        TypeError: ``threads`` not an int. ValueError: not a multiple of 32 in range.
    """

    family = "block"
    needs_commutative: ClassVar[bool]
    #: default threads per block: 256 on a GPU; 64 under the simulator
    DEFAULT_THREADS: ClassVar[int] = DEFAULT_THREADS

    def __init__(self, threads: int | None = None):
        self.threads = check_threads(self.DEFAULT_THREADS if threads is None else threads)

    def __init_subclass__(cls, **kwargs):
        """A subclass's ``build_reduce`` and ``build_scan`` are held to return device
        functions: a plain Python function runs under the simulator but not on a GPU,
        where it would first fail inside Numba's compiler."""
        super().__init_subclass__(**kwargs)
        for name in ("build_reduce", "build_scan"):
            own = cls.__dict__.get(name)
            if own is not None and own is not getattr(BlockStrategy, name):  # (no scan kept)
                setattr(cls, name, _returning_device_functions(own, name))

    @property
    def warps(self) -> int:
        return self.threads // 32

    @abstractmethod
    def temp_slots(self) -> int:
        """How many states of shared-memory temp storage the block reduce and block
        scan need."""
        raise NotImplementedError

    @abstractmethod
    def build_reduce(self, kit) -> Callable:
        """Device function ``block_reduce(s, t0, t1) -> state``, valid in thread 0."""
        raise NotImplementedError

    @abstractmethod
    def barriers(self) -> int:
        """``__syncthreads()`` calls in one block reduce."""
        raise NotImplementedError

    def build_scan(self, kit) -> Callable:
        """Device function ``block_scan(s, t0, t1) -> (inclusive, exclusive, total)``,
        valid in every thread (see the class docstring)."""
        raise TypeError(f"{self.name} has no block scan")

    def build_warp_reduce(self, kit) -> WarpForm | None:
        """A warp form of the reduce, or None: ``warp_reduce(s, t0, t1) -> state``,
        called by every lane of a warp, valid in lane 0."""
        return None

    def build_warp_scan(self, kit, group: int) -> WarpForm | None:
        """A warp form of the scan, or None: ``warp_scan(s, t0, t1) -> inclusive``,
        called by every lane of a warp; each run of ``group`` lanes (a power of two up
        to 32) scans on its own, lane ``l`` getting lanes ``l - l % group .. l`` of its
        run combined in lane order, no identity folded in."""
        return None

    @property
    def has_scan(self) -> bool:
        return type(self).offers_scan()

    @classmethod
    def offers_scan(cls) -> bool:
        """Whether the class has a block scan (:meth:`build_scan`)."""
        return cls.build_scan is not BlockStrategy.build_scan

    @classmethod
    def offers_warp_reduce(cls) -> bool:
        """Whether the class has a warp form of its reduce (:meth:`build_warp_reduce`)."""
        return cls.build_warp_reduce is not BlockStrategy.build_warp_reduce

    @classmethod
    def offers_warp_scan(cls) -> bool:
        """Whether the class has a warp form of its scan (:meth:`build_warp_scan`)."""
        return cls.build_warp_scan is not BlockStrategy.build_warp_scan

    @property
    def key(self) -> tuple:
        return (type(self), self.threads)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threads={self.threads})"


def reduce_from_scan(block_scan) -> Callable:
    """A block reduce made of a block scan (``(inclusive, exclusive, total)`` per
    thread): the scan's total, valid in every thread."""

    @cuda.jit(device=True)
    def block_reduce(s, t0, t1):
        return block_scan(s, t0, t1)[2]

    return block_reduce


# --- helpers for strategies whose algorithm runs on a block or on runs of a warp -----------


@cuda.jit(device=True)
def block_barrier():
    """``__syncthreads()``: the barrier of a run that is the whole block."""
    cuda.syncthreads()


@cuda.jit(device=True)
def warp_barrier():
    """``__syncwarp()``: the barrier of runs within one warp (every lane calls it)."""
    cuda.syncwarp(FULL_MASK)


@cuda.jit(device=True)
def place_in_block():
    """``(i, base)`` for a run that is the whole block: the thread's index, slot 0."""
    return cuda.threadIdx.x, 0


def place_in_runs(lanes: int, slots: int):
    """Device function ``place() -> (i, base)`` for runs of ``lanes`` consecutive
    threads: the thread's place in its run, and its run's first slot (``slots`` a
    run)."""

    @cuda.jit(device=True)
    def place():
        tid = cuda.threadIdx.x
        return tid % lanes, (tid // lanes) * slots

    return place


def warp_scan_form(scan, slots: int) -> WarpForm:
    """The warp scan of a run scan ``scan(s, t0, t1) -> (inclusive, exclusive, total)``
    over runs within a warp: the inclusive prefix, then a ``__syncwarp()`` so that the
    next call may reuse the slots at once."""

    @cuda.jit(device=True)
    def warp_scan(s, t0, t1):
        inc = scan(s, t0, t1)[0]
        cuda.syncwarp(FULL_MASK)
        return inc

    return WarpForm(warp_scan, slots)


def warp_reduce_form(scan, slots: int) -> WarpForm:
    """The warp reduce of a run scan over the whole warp: its total (valid in every
    lane), then a ``__syncwarp()`` so that the next call may reuse the slots at once."""

    @cuda.jit(device=True)
    def warp_reduce(s, t0, t1):
        total = scan(s, t0, t1)[2]
        cuda.syncwarp(FULL_MASK)
        return total

    return WarpForm(warp_reduce, slots)


# --- grid strategies: a block strategy, and how the blocks meet ---------------------------


class GridStrategy(Strategy):
    """Base of the grid families: a :class:`BlockStrategy` for the blocks, and a
    number of blocks (``None``: chosen from the input size and the device).

    Subclasses set ``name``, ``deterministic`` (the same bits on every run) and
    ``needs_commutative``.

    Raises:
        TypeError: ``block`` not a :class:`BlockStrategy`; ``blocks`` not an int (a
            float or a bool) or ``None``.
        ValueError: ``blocks`` an int below 1 or past ``2**31 - 1`` (a grid's most
            blocks).
    """

    deterministic: ClassVar[bool]
    needs_commutative: ClassVar[bool]

    def __init__(self, block: BlockStrategy | None = None, blocks: int | None = None):
        if block is None:
            block = REGISTRY["block"]["warp_shuffle"]()
        if not isinstance(block, BlockStrategy):
            raise TypeError(f"block must be a BlockStrategy such as WarpShuffle(), got {block!r}")
        self.block = block
        self.blocks = check_optional_count(blocks, "blocks")

    @property
    def commutative_required(self) -> bool:
        """Whether this combination needs a commutative op."""
        return self.needs_commutative or self.block.needs_commutative

    @property
    def key(self) -> tuple:
        return (type(self), self.blocks, self.block.key)

    @property
    def label(self) -> str:
        return f"{self.name}/{self.block.name}"

    def __repr__(self) -> str:
        blocks = "" if self.blocks is None else f", blocks={self.blocks}"
        return f"{type(self).__name__}(block={self.block!r}{blocks})"


class GridReduce(GridStrategy):
    """How the blocks that share an output meet (CUB's ``DeviceReduce`` and
    ``DeviceSegmentedReduce`` passes).

    A reduce job (:class:`~numbakern.core.jobs.ReduceJob`) holds ``outputs`` results,
    each the combine of ``count`` elements: one output for a whole-array reduction,
    one per row, column or tiny row for an axis reduction. The job's layout decides
    which threads read which elements; when too few outputs would fill the device, it
    cuts each output's elements into ``pieces``, one block (or warp) each. The grid
    strategy decides how the pieces of an output meet:

    * ``job.plan(self)``: the first pass (its ``pieces`` per output);
    * ``job.store(plan)``: run it when every output is one piece: each stores its
      output;
    * ``job.run(plan, emit, out)``: run it, each piece's state handed to ``emit``
      (``numbakern/kernels/emits.py``): ``job.emit_partial(plan)`` writes partial
      ``(output, piece)`` into ``outputs * pieces`` states, or the strategy's own
      (an atomic fold into the output);
    * ``job.reduce_partials(plan, partials)``: a second pass over the partials.

    :meth:`reduce` returns the result's field arrays, one state per output in the
    order of the C-ordered result.
    """

    family = "reduce"

    @abstractmethod
    def reduce(self, job) -> tuple:
        """Reduce every output of ``job``; returns the field arrays."""
        raise NotImplementedError

    @abstractmethod
    def cost(self, n: int, itemsize: int, state_bytes: int, blocks: int) -> Cost:
        """The traffic of one reduction of ``n`` elements over ``blocks`` blocks."""
        raise NotImplementedError


class GridScan(GridStrategy):
    """How a tile learns the combine of every tile before it (CUB's ``DeviceScan``).

    A scan job (:class:`~numbakern.core.jobs.ScanJob`) holds ``segments`` rows of
    ``n`` elements, cut into tiles of ``threads * items`` elements that a block scans
    with the block strategy's :meth:`BlockStrategy.build_scan`
    (``numbakern/kernels/scan_tiles.py``); the grid strategy supplies each tile's
    carry. :meth:`scan` writes ``job.outs``. Its kernels read the input through
    ``job.element_loader()`` from the pair ``job.sources`` (launched as
    ``*job.sources``): ``(x, x)`` for a plain scan, the values and the head flags for a
    segmented one.

    Args:
        block: a block strategy with a block scan (default ``WarpShuffle()``).
        blocks: see the subclass.
        items: items per thread (``None``: chosen from the state's size).
        hold: where item prefixes wait during the block scan and carry-in:
            ``"shared"`` (the default) or ``"registers"``
            (``numbakern.kernels.scan_tiles.Tile``).

    Raises:
        TypeError: ``block`` has no block scan. ValueError: ``items`` not a positive
            int; an unknown ``hold``.
    """

    family = "scan"
    needs_commutative = False
    #: whether :meth:`scan` honours ``job.carry`` (an initial carry per segment); a
    #: strategy that does not is never given one (callers fall back: a separate pass)
    takes_carry = False

    def __init__(self, block: BlockStrategy | None = None, blocks: int | None = None,
                 items: int | None = None, hold: str = "shared"):
        super().__init__(block, blocks)
        self.hold = check_hold(hold)
        if not self.block.has_scan:
            raise TypeError(f"{self.block!r} has no block scan; use a block strategy with "
                            "one (numbakern.strategies.available('block', scan=True))")
        self.items = check_optional_count(items, "items")

    @property
    def key(self) -> tuple:
        return super().key + (self.items, self.hold)

    def __repr__(self) -> str:
        extra = "" if self.items is None else f", items={self.items}"
        extra += "" if self.hold == "shared" else f", hold={self.hold!r}"
        return super().__repr__()[:-1] + extra + ")"

    def tile_items(self, job) -> int:
        """Items per thread for this job; raises if the tile overflows shared memory."""
        temp = self.block.temp_slots()
        items = self.items or auto_items(job.state_bytes, self.block.threads,
                                         job.value_bytes, job.kit.fields, temp, job.n)
        nbytes = (padded_slots(self.block.threads * items) + temp + 1) * job.state_bytes
        if nbytes > SHARED_LIMIT:
            advice = "use fewer items" if self.items else \
                f"use fewer threads or another block strategy than {self.block!r}"
            raise ValueError(
                f"items={items} x threads={self.block.threads} x {job.state_bytes}-byte "
                f"states need {nbytes} bytes of shared memory (the tile and the block "
                f"scan's), more than the {SHARED_LIMIT} a block has: {advice}"
            )
        return items

    @abstractmethod
    def scan(self, job) -> None:
        """Scan ``job.x`` into ``job.outs``."""
        raise NotImplementedError

    @abstractmethod
    def cost(self, n: int, in_itemsize: int, out_itemsize: int, tiles: int) -> Cost:
        raise NotImplementedError


# --- histograms ---------------------------------------------------------------------------


class HistogramStrategy(Strategy):
    """Where a block's counts accumulate before they reach the global counters.

    A histogram is a reduction whose state is a whole array of counters. Each
    strategy gives three device functions (:meth:`build_counter`), which the shared
    kernel (``numbakern/kernels/counting.py``) and the radix sort's digit histogram
    run:

    * ``clear(sh)``: every thread of the block calls it; zeroes the block's private
      counters in shared memory (:meth:`shared_slots` uint32) and ends with a barrier;
    * ``count(sh, out, b)``: one element falls in bin ``b`` (``0 <= b < bins``);
    * ``total(sh, b) -> uint32``: after a barrier, the block's count of bin ``b``
      (privatized strategies: the kernel then folds it into the global int64 counts
      with one atomic per non-empty bin).

    Counts are integers, so every strategy gives the same counts on every run.

    Args:
        threads: threads per block (a multiple of 32, 32 to 1024).
        blocks: blocks of the grid-stride loop (``None``: enough to fill the device,
            at most one per ``threads`` elements).

    Subclasses set ``name`` and ``privatized`` and implement :meth:`shared_slots`
    and :meth:`build_counter`.
    """

    family = "histogram"
    #: whether counts gather in shared memory first (then folded with atomics)
    privatized: ClassVar[bool]
    DEFAULT_THREADS: ClassVar[int] = DEFAULT_THREADS

    def __init__(self, threads: int | None = None, blocks: int | None = None):
        self.threads = check_threads(self.DEFAULT_THREADS if threads is None else threads)
        self.blocks = check_optional_count(blocks, "blocks")

    @property
    def warps(self) -> int:
        return self.threads // 32

    @property
    def key(self) -> tuple:
        return (type(self), self.threads, self.blocks)

    def __repr__(self) -> str:
        blocks = "" if self.blocks is None else f", blocks={self.blocks}"
        return f"{type(self).__name__}(threads={self.threads}{blocks})"

    @abstractmethod
    def shared_slots(self, bins: int) -> int:
        """uint32 counters this strategy keeps in shared memory for ``bins`` bins."""
        raise NotImplementedError

    @abstractmethod
    def build_counter(self, bins: int):
        """``(clear, count, total)`` device functions for ``bins`` bins."""
        raise NotImplementedError

    def fits(self, bins: int, extra: int = 0) -> bool:
        """Whether ``bins`` counters fit in a block's shared memory beside ``extra``
        bytes of the caller's kernel's own."""
        return self.shared_slots(bins) * COUNTER_BYTES + extra <= SHARED_LIMIT

    def check(self, bins: int, extra: int = 0, fewer: str = "fewer bins") -> None:
        """Raise ``ValueError`` if ``bins`` private counters overflow shared memory
        (beside ``extra`` bytes of the caller's kernel's own); ``fewer`` names, in the
        caller's words, the argument that would ask for fewer bins."""
        if not self.fits(bins, extra):
            need = self.shared_slots(bins) * COUNTER_BYTES + extra
            raise ValueError(
                f"{self.name} with {self.threads} threads needs {need} bytes of shared "
                f"memory for {bins} bins, more than the {SHARED_LIMIT} a block has: use "
                f"{_listed(self._remedies(bins, extra, fewer))}")

    def _remedies(self, bins: int, extra: int, fewer: str) -> list[str]:
        """What would count ``bins`` bins where this strategy cannot."""
        remedies = [fewer]
        if self.threads > 32 and type(self)(threads=32).fits(bins, extra):
            remedies.append(f"fewer threads ({self.name}(threads=32) fits)")
        if self.shared_slots(bins) > bins and bins * COUNTER_BYTES + extra <= SHARED_LIMIT:
            remedies.append("shared_privatized (one copy of the counters a block)")
        return [*remedies, "global_atomic (no shared memory)"]

    def grid(self, n: int) -> int:
        """Blocks for ``n`` elements: ``blocks`` if given, else enough to fill the
        device; never so few that one block counts 2**31 elements (its private uint32
        counters would overflow)."""
        fewest = ceil_div(n, 2**31)
        if self.blocks is not None:  # at most one a element: more would count nothing
            return max(min(self.blocks, max(1, n)), fewest)
        return max(1, fewest, min(ceil_div(n, self.threads), resident_blocks(self.threads)))

    def histogram(self, job) -> None:
        """Add the counts of ``job.x`` to ``job.out`` (zeroed by the caller)."""
        self.check(job.bins)
        key = ("histogram", self.key, job.bins, job.bin_key, device_key())
        kernel = cached(key, lambda: build_histogram_kernel(self, job.bins, job.bin_of))
        launch(kernel, self.grid(job.n), self.threads, job.stream, job.x, job.n, job.aux,
               job.out)


# --- sorts -----------------------------------------------------------------------------


class SortStrategy(Strategy):
    """How the rows of a sort job (:class:`~numbakern.core.jobs.SortJob`) are put in
    order: ``rows`` independent rows of ``n`` keys, each sorted **stably** (equal keys
    keep their input order) into ``job.out``, as values or as indices. Keys are
    unsigned integers in NumPy's order (``job.to_key()``); a strategy that needs a
    scan of its counts asks the job (``job.exclusive_sum``), never the front end.

    Subclasses set ``name`` and implement :meth:`fits` and :meth:`sort`.
    """

    family = "sort"
    deterministic = True

    @abstractmethod
    def fits(self, n: int) -> bool:
        """Whether this strategy takes rows of ``n`` keys."""
        raise NotImplementedError

    def check(self, n: int) -> None:
        """Raise ``ValueError`` if this strategy does not take rows of ``n`` keys (the
        front ends call it before :meth:`sort`)."""
        if not self.fits(n):
            raise ValueError(f"the {self.name} sort strategy does not take rows of {n} "
                             f"keys (its fits({n}) is False): pass strategy='radix', or "
                             f"None to let numbakern choose")

    @abstractmethod
    def sort(self, job) -> None:
        """Sort ``job``'s rows into ``job.out``."""
        raise NotImplementedError


# --- selection (top-k) --------------------------------------------------------------------


class SelectStrategy(Strategy):
    """How each row of a select job (:class:`~numbakern.core.jobs.SelectJob`) gives up
    its ``k`` first elements: ``rows`` independent rows of ``n`` keys (``job.to_key()``,
    unsigned, the wanted order ascending), of each the ``k`` smallest keys, **ties by
    the lower index** (the first ``k`` of a stable argsort, whatever the strategy),
    written to ``job.values`` (the input's bits) and ``job.indices`` (int64, within
    the row).

    * ``job.sorted``: each output row in order (ascending key, equal keys by index);
      otherwise a strategy may leave its own order and says which in its docstring.
    * A strategy that sorts (its winners, or a whole row) asks the job
      (``job.argsort``) with a sort strategy, never the front end.
    * ``k`` is from 1 to ``n`` (the front end answers ``k = 0`` and empty inputs
      itself); :meth:`check` refuses what a strategy cannot take.

    Subclasses set ``name`` and ``max_k`` (the largest ``k`` taken; ``None``: any)
    and implement :meth:`select`. Every selection is deterministic: keys and indices
    are integers, and the ties rule picks one answer.
    """

    family = "select"
    deterministic = True
    #: the largest k this strategy takes (None: any k up to the row length)
    max_k: ClassVar[int | None] = None

    def fits(self, n: int, k: int) -> bool:
        """Whether this strategy takes ``k`` of rows of ``n``."""
        return self.max_k is None or k <= self.max_k

    def check(self, n: int, k: int) -> None:
        """Raise ``ValueError`` (naming ``k``) if this strategy cannot take ``k``."""
        if not self.fits(n, k):
            raise ValueError(f"k={k} is more than the {self.name} strategy takes "
                             f"(k <= {self.max_k}); use strategy='radix_select' or "
                             f"'sort_slice', or strategy=None to let numbakern choose")

    @abstractmethod
    def select(self, job) -> None:
        """Write each row's ``k`` first elements to ``job.values`` and ``job.indices``."""
        raise NotImplementedError


# --- (key, index) pairs in shared memory (the block-per-row selects') ------------------


@cuda.jit(device=True)
def pair_before(a, ia, b, ib):
    """Whether pair ``(a, ia)`` comes before ``(b, ib)``: the smaller key, ties by the
    smaller index (keys ordered so that the wanted ones are the smallest)."""
    return a < b or (a == b and ia < ib)


def block_exclusive_scan(threads: int, itype) -> Callable:
    """``scan(v, totals, tid) -> (exclusive prefix, total)``: the block's exclusive
    prefix sum of each thread's ``v`` in the integer type ``itype`` (numba's int32 or
    int64), and the block's total. A Kogge-Stone scan in each warp, then the warps'
    totals (``totals``: one shared slot a warp); two barriers, so every thread of the
    block must call it."""
    warps = threads // WARP

    @cuda.jit(device=True)
    def exclusive_scan(v, totals, tid):
        lane = tid % WARP
        w = tid // WARP
        s = itype(v)
        d = 1
        while d < WARP:
            up = cuda.shfl_up_sync(FULL_MASK, s, d)
            if lane >= d:
                s = itype(s + up)
            d *= 2
        if lane == WARP - 1:
            totals[w] = s
        cuda.syncthreads()
        earlier = itype(0)
        total = itype(0)
        for j in range(warps):  # at most 32 warps: each thread adds them itself
            t = totals[j]
            if j < w:
                earlier += t
            total += t
        cuda.syncthreads()  # totals read before a later scan writes them
        return itype(earlier + s - v), total

    return exclusive_scan


def pair_sorter(threads: int) -> Callable:
    """Device function ``sort(keys, idx, size, tid)``: a block's bitonic sort of the
    first ``size`` (a power of two) ``(key, index)`` pairs of two shared arrays into
    :func:`pair_before`'s order, every thread of the block calling it (Batcher, 1968).
    Each step's ``size / 2`` compare-exchanges are dealt to the threads: pair ``p`` is
    ``(u, u + dist)``, ``u`` being ``p`` with a 0 bit put in at ``dist``'s place,
    ascending where ``u & span`` is 0; one barrier a step."""

    @cuda.jit(device=True)
    def sort(keys, idx, size, tid):
        half = size // 2
        span = 2
        while span <= size:
            dist = span // 2
            while dist > 0:
                p = tid
                while p < half:
                    u = ((p & ~(dist - 1)) << 1) | (p & (dist - 1))
                    v = u + dist
                    ka, kb = keys[u], keys[v]
                    ia, ib = idx[u], idx[v]
                    if pair_before(kb, ib, ka, ia) == ((u & span) == 0):
                        keys[u], keys[v] = kb, ka
                        idx[u], idx[v] = ib, ia
                    p += threads
                cuda.syncthreads()
                dist //= 2
            span *= 2

    return sort


# --- radix passes: the digit and its counter (the radix sort's, radix select's) ----------

#: bits per digit of a radix pass, and the buckets a digit has
DIGIT_BITS = 8
RADIX = 1 << DIGIT_BITS


def counter_threads(threads, histogram):
    """The threads a radix pass's kernels are given: ``threads``, else (None) a
    ``histogram`` object's own (a name has none: None, the strategy's default)."""
    if threads is None and not isinstance(histogram, str):
        return getattr(histogram, "threads", None)
    return threads


def digit_counter(histogram, threads: int, user: str = "sort") -> HistogramStrategy:
    """The block digit counter of a radix pass (the sort's, radix select's): a
    privatized histogram strategy of ``threads`` (global atomics would fold every key
    into global memory, where the counts gather anyway); ``user`` names the caller in
    messages."""
    counter = resolve("histogram", histogram, threads=threads, argument="histogram")
    if not counter.privatized:
        raise ValueError(f"histogram must be a privatized strategy such as "
                         f"'shared_privatized' or 'warp_privatized', got {histogram!r}")
    if counter.threads != threads:
        raise ValueError(f"the histogram strategy has {counter.threads} threads, the "
                         f"{user} {threads}")
    counter.check(RADIX)
    return counter


def _listed(items: list[str]) -> str:
    """``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"
