"""The strategy protocols, and the registry of strategies by short name.

A reduction has two levels of "how do threads combine", after CUB:

* a :class:`BlockStrategy` combines the states of the threads of one block
  (``strategies/warp_shuffle.py``, ``strategies/shared_tree.py``);
* a :class:`GridStrategy` combines the blocks' results
  (``strategies/two_pass.py``, ``strategies/atomic_fold.py``).

A user passes a grid strategy holding a block strategy,
``TwoPass(block=WarpShuffle(threads=256))``, or a short name, ``"two_pass"`` or
``"atomic_fold/shared_tree"`` (grid, then block). :func:`available` lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from numba.cuda.core import config

SIMULATOR = bool(config.ENABLE_CUDASIM)


def check_count(value, name: str) -> int:
    """``value`` as an int: a Python or NumPy integer (not a bool), else TypeError."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return int(value)


#: the most blocks of one launch (CUDA's grid x limit)
MAX_GRID = 2**31 - 1


def check_optional_count(value, name: str, most: int = MAX_GRID) -> int | None:
    """``None`` (automatic), or ``value`` as an int from 1 to ``most``: TypeError for
    a non-int (a bool or float included), ValueError out of range."""
    if value is None:
        return None
    value = check_count(value, name)
    if not 1 <= value <= most:
        raise ValueError(f"{name} must be a positive int up to {most} or None (automatic), "
                         f"got {value}")
    return value


def _check_threads(threads: int) -> int:
    threads = check_count(threads, "threads")
    if threads < 32 or threads > 1024 or threads % 32:
        raise ValueError(f"threads must be a multiple of 32 from 32 to 1024, got {threads}")
    return threads


@dataclass(frozen=True)
class Cost:
    """What one reduction of ``n`` elements costs a strategy: for teaching and for GB/s.

    ``bytes_read`` and ``bytes_written`` count device-memory traffic (input, partials,
    output), ``launches`` kernel launches and ``atomics`` atomic operations.
    """

    launches: int
    bytes_read: int
    bytes_written: int
    atomics: int


class _MadeOnce(type):
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        object.__setattr__(obj, "_made", True)  # __init__ is over: fixed from now on
        return obj


class Immutable(metaclass=_MadeOnce):
    """Base of strategy classes: an object's attributes are fixed once it is made.

    Strategies are values: equal and hashed by their ``key``, and the plans and
    recorded launches numbakern caches (``memo.py``, ``replay.py``) hold them. A
    strategy changed after it was made would leave those answering for its old value
    (found in a trial: setting ``threads`` on a used object ran the old block size),
    so a change raises ``AttributeError``; make a new object instead.
    """

    def __setattr__(self, name, value):
        if getattr(self, "_made", False):
            raise AttributeError(f"{type(self).__name__} objects are immutable: make a new "
                                 f"one (for example {type(self).__name__}(...)) instead of "
                                 f"setting {name!r}")
        object.__setattr__(self, name, value)


class BlockStrategy(Immutable):
    """How the threads of one block combine their states.

    Subclasses set ``name``, ``needs_commutative`` and implement :meth:`temp_slots`
    and :meth:`build_reduce`.
    """

    name: ClassVar[str]
    needs_commutative: ClassVar[bool]
    #: default threads per block: 256 on a GPU; 64 under the simulator, which runs
    #: one OS thread per CUDA thread
    DEFAULT_THREADS: ClassVar[int] = 64 if SIMULATOR else 256

    def __init__(self, threads: int | None = None):
        self.threads = _check_threads(self.DEFAULT_THREADS if threads is None else threads)

    @property
    def warps(self) -> int:
        return self.threads // 32

    def temp_slots(self) -> int:
        """How many states of shared-memory temp storage the block reduce needs."""
        raise NotImplementedError

    def build_reduce(self, kit) -> Callable:
        """Return a device function ``block_reduce(s, t0, t1) -> state``.

        ``s`` is the calling thread's state, ``t0``/``t1`` the temp storage (one
        shared array per field, :meth:`temp_slots` long). Every thread of the block
        must call it; the result is valid in thread 0 only.
        """
        raise NotImplementedError

    def barriers(self) -> int:
        """``__syncthreads()`` calls in one block reduce."""
        raise NotImplementedError

    @property
    def key(self) -> tuple:
        return (self.name, self.threads)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threads={self.threads})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


class GridStrategy(Immutable):
    """How the blocks of a grid combine their results.

    Subclasses set ``name``, ``deterministic``, ``needs_commutative`` and implement
    :meth:`reduce` and :meth:`cost`.
    """

    name: ClassVar[str]
    deterministic: ClassVar[bool]
    needs_commutative: ClassVar[bool]

    def __init__(self, block: BlockStrategy | None = None, blocks: int | None = None):
        if block is None:
            from .strategies.warp_shuffle import WarpShuffle

            block = WarpShuffle()
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
        return (self.name, self.blocks, self.block.key)

    @property
    def label(self) -> str:
        return f"{self.name}/{self.block.name}"

    def __repr__(self) -> str:
        blocks = "" if self.blocks is None else f", blocks={self.blocks}"
        return f"{type(self).__name__}(block={self.block!r}{blocks})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


def reduce_from_scan(block_scan) -> Callable:
    """A block reduce made of a block scan (``(inclusive, exclusive, total)`` per
    thread): the scan's total, valid in every thread."""
    from numba import cuda

    @cuda.jit(device=True)
    def block_reduce(s, t0, t1):
        return block_scan(s, t0, t1)[2]

    return block_reduce


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def log2_ceil(n: int) -> int:
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0
