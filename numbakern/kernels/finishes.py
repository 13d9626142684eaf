"""Finishes: a mean's, a variance's, a logsumexp's or a vector norm's last step (an
argmax's: its index alone), done by the reduce kernel's store.

Why
---
``mean`` is a sum divided by a count; ``var`` is Welford's ``(count, mean, M2)``
state turned into ``M2 / (count - ddof)``. Done apart, each is a second launch after
the reduction: one more kernel of a few nanoseconds of work, and on the H200 host
~3.6 us of launch and a replayed call that is two recorded launches where a sum is
one (bench/NOTES.md, "Host time of replayed calls").

The thread that stores an output's whole state (thread 0 of the last block of a
two-pass reduction, lane 0 of a row's warp, a tiny row's thread) already holds every
input of that step, so it can write the finished value instead: the reduce kernels
call an :class:`~numbakern.kernels.emits.Emit` ``emit(o0, o1, row, pos, piece, S, M,
s)`` with the state ``s``, and each emit here writes ``o0[pos]`` = the finished value
(``o0``: the result array, in the result dtype; ``o1``: a float64 scalar argument,
the count or ``ddof``, unused by logsumexp). The arithmetic is that of the separate
finishing kernels of ``numbakern/kernels/elementwise.py`` (float64, then the store's
cast), so a folded finish and a separate one give the same bits.

A grid strategy folds the finish only where it stores whole outputs
(``ReduceJob.store``, ``ReduceJob.reduce_partials``); one that ends otherwise (an
atomic fold's words) returns the states and the caller finishes them apart.
"""

from __future__ import annotations

import functools
import math

from numba import cuda, float64

from numbakern.kernels.elementwise import variance_of
from numbakern.kernels.emits import Emit
from numbakern.ops.norms import root_of


@functools.lru_cache(maxsize=None)
def divide_emit() -> Emit:
    """``o0[pos] = float64(sum) / o1``: a mean from a one-field sum state and the
    count ``o1`` (a float64 argument), as ``elementwise.divide_into``."""

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            o0[pos] = float64(s[0]) / o1  # the store casts, as NumPy's unsafe cast

        return emit

    return Emit(("finish", "divide"), build)


@functools.lru_cache(maxsize=None)
def divide_by_count_emit() -> Emit:
    """``o0[pos] = float64(sum) / float64(count)``, NaN for a count of 0: a mean from a
    ``(sum, count)`` state (``ops.SUM_AND_COUNT``, ``ops.SUM_COUNT``), as
    ``elementwise.divide_by_into``; ``o1`` unused."""

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            o0[pos] = float64(s[0]) / float64(s[1]) if s[1] else math.nan

        return emit

    return Emit(("finish", "divide_by_count"), build)


@functools.lru_cache(maxsize=None)
def variance_emit(root: bool, skip_nan: bool) -> Emit:
    """``o0[pos] = M2 / (count - o1)`` (its root for ``root``) from a ``(count, mean,
    M2)`` state (``ops.MOMENTS``, ``ops.NAN_MOMENTS``), ``o1`` being ``ddof``: NumPy's
    values where ``count - ddof <= 0`` and NaN where the mean is not finite, as
    ``elementwise.variance_into``."""
    variance = variance_of(bool(root), bool(skip_nan))

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            o0[pos] = variance(s[0], s[1], s[2], o1)

        return emit

    return Emit(("finish", "variance", bool(root), bool(skip_nan)), build)


@functools.lru_cache(maxsize=None)
def log_sum_exp_emit() -> Emit:
    """``o0[pos] = max + log(sum)`` (``+inf`` where the maximum is) from the online
    softmax's ``(max, sum of exp(x - max))`` state (``strategies/online_softmax.py``),
    in the state's dtype, as ``elementwise.log_sum_exp_into``; ``o1`` unused."""

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            # +inf dominates (its sum is inf - inf, NaN); a NaN maximum stays NaN
            o0[pos] = s[0] if s[0] == math.inf else s[0] + math.log(s[1])

        return emit

    return Emit(("finish", "log_sum_exp"), build)


@functools.lru_cache(maxsize=None)
def index_emit() -> Emit:
    """``o0[pos] = index``: an argmax's or argmin's result from its ``(value, index)``
    state (``ops.arg_op``), the value dropped; ``o1`` unused. Stored alone, the indices
    are the call's whole allocation: a torch replay allocates its result directly
    instead of viewing it beside a value field (``runtime/replay.py``)."""

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            o0[pos] = s[1]

        return emit

    return Emit(("finish", "index"), build)


@functools.lru_cache(maxsize=None)
def root_emit() -> Emit:
    """``o0[pos] = root_of(float64(sum), o1)``: a vector norm from a one-field sum of
    squares or powers, ``o1`` being the exponent (0.5: the square root), as
    ``elementwise.root_into``."""

    def build():
        @cuda.jit(device=True)
        def emit(o0, o1, row, pos, piece, S, M, s):
            o0[pos] = root_of(float64(s[0]), o1)

        return emit

    return Emit(("finish", "root"), build)
