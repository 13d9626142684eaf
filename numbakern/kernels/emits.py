"""Emits: where a reduce kernel puts the state of a piece of an output.

Every reduce kernel (whole array, rows, columns, tiny rows) ends the same way: the
thread that holds a piece's state (thread 0 of a block, lane 0 of a warp, the thread
of a tiny row) calls ``emit(o0, o1, row, pos, piece, S, M, s)``:

* ``row``: the output in the kernel's traversal order; ``pos``: its place in the
  C-ordered result; ``piece`` of ``S``: which part of the output's elements ``s``
  combines; ``M``: the number of outputs; ``o0, o1``: the arrays the emit writes.

The grid strategy chooses the emit (``strategies/protocols.py``, ``GridReduce``):
store a whole output, write a partial for a second pass, or fold atomically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from numba import cuda


@dataclass(frozen=True)
class Emit:
    """An emit to build: ``build()`` makes the device function; ``name`` keys the
    kernels built with it."""

    name: tuple
    build: Callable


def emit_store(kit) -> Emit:
    """The whole output's state, to its place in the result (one piece)."""
    store = kit.store

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            store(o0, o1, pos, s)

        return emit

    return Emit(("store",), build)


def emit_partial(kit, by_piece: bool) -> Emit:
    """A piece's state, to partial ``row * S + piece`` (an output's partials together),
    or ``by_piece``, ``piece * M + row`` (a piece's outputs together: the column
    kernel's, which its second pass then reads coalesced, one thread per output)."""
    store = kit.store

    def build():
        if by_piece:

            @cuda.jit(device=True)
            def emit(o0, o1, row, pos, piece, S, M, s):
                store(o0, o1, piece * M + row, s)

        else:

            @cuda.jit(device=True)
            def emit(o0, o1, row, pos, piece, S, M, s):
                store(o0, o1, row * S + piece, s)

        return emit

    return Emit(("partial", by_piece), build)


def emit_fold(name: tuple, fold: Callable) -> Emit:
    """A piece's state, folded into its place in the result by ``fold(o0, o1, pos, s)``
    (an atomic fold: ``strategies/atomic_fold.py``)."""

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            fold(o0, o1, pos, s)

        return emit

    return Emit(name, build)
