"""Vector loads: one 16-byte load instruction for several consecutive elements.

A memory-bound kernel is limited by the bytes each thread has in flight. Scalar loads
of float32 put 4 bytes in flight per instruction; ``ld.global.v4.f32`` puts 16, so a
thread needs a quarter of the load instructions (and their address arithmetic) to
keep the same bytes in flight. CUB does this in ``LOAD_VECTORIZE`` when the input is
aligned, and falls back to scalar loads when it is not; numbakern does the same
(``flat_reduce.vector_width``; the scan tiles: ``scan_tiles.tile_vectors``).

Numba has no vector type, so :func:`vector_loader` builds an intrinsic that emits an
LLVM load of ``<W x T>`` and returns its lanes as a tuple (lanes of 1 or 2 bytes are
loaded as ``<4 x i32>`` and cut out in registers: NVVM would split a ``<8 x half>``
load into two 8-byte ones), and :func:`vector_storer` one that stores a tuple as one
``<W x T>`` (``st.global.v4.f32``; 1- and 2-byte lanes packed into ``<4 x i32>``).
Under the simulator the same calls are slices of the array.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda, int64

from numbakern.runtime.device import SIMULATOR
from numbakern.runtime.views import address

VECTOR_BYTES = 16  # the widest load a CUDA thread can issue


def vector_lanes(dtype) -> int:
    """Elements of ``dtype`` in one 16-byte vector, or 0 for a dtype the vector loads
    do not take (bool, and anything wider than 8 bytes)."""
    dtype = np.dtype(dtype)
    return VECTOR_BYTES // dtype.itemsize if dtype.kind in "iuf" and dtype.itemsize <= 8 \
        else 0


def rows_aligned(view, outer: int) -> bool:
    """Whether every row of ``view`` starts 16-byte aligned: its first element, and each
    step along its first ``outer`` dimensions (those longer than one, which must not
    run backwards), CUB's ``LOAD_VECTORIZE`` condition per row."""
    if address(view) % VECTOR_BYTES:
        return False
    return all(e <= 1 or (s >= 0 and s % VECTOR_BYTES == 0)
               for e, s in zip(view.shape[:outer], view.strides[:outer]))


if SIMULATOR:
    from numbakern.runtime.simulator import vector_aligned

    @functools.lru_cache(maxsize=None)
    def vector_loader(width: int):
        """``load(a, j) -> (a[j*W], ..., a[j*W + W-1])`` (simulator version)."""

        def load(a, j):
            vector_aligned(a, "load")
            return tuple(a[j * width:(j + 1) * width])

        return load

    @functools.lru_cache(maxsize=None)
    def vector_storer(width: int):
        """``store(a, j, values)``: ``a[j*W : j*W + W] = values`` (simulator version)."""

        def store(a, j, values):
            vector_aligned(a, "store")
            a[j * width:(j + 1) * width] = values

        return store

else:
    from llvmlite import ir
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    def _check_vector_array(a, j, what: str) -> None:
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"):
            raise TypingError(f"vector {what} needs a 1-D C-contiguous array, got {a}")
        if not isinstance(j, types.Integer):
            raise TypingError(f"vector {what} index must be an integer, got {j}")

    def _words(context, element, width: int):
        """The LLVM vector a ``width``-lane vector of ``element`` is loaded (and stored)
        as: itself
        for lanes of 4 or 8 bytes, else ``<4 x i32>``. NVVM splits a ``<8 x half>``
        or ``<8 x i16>`` load into two 8-byte ``ld.global.v4.u16`` (sm_90 SASS: two
        ``LDG.E.64``), while ``<4 x i32>`` is one ``ld.global.v4.u32``
        (``LDG.E.128``)."""
        size = context.get_abi_sizeof(element)
        if size >= 4:
            return ir.VectorType(element, width)
        return ir.VectorType(ir.IntType(32), width * size // 4)

    def _lanes(builder, loaded, element, width: int) -> list:
        """The ``width`` lanes of ``loaded``; from 32-bit words, each lane is cut out
        of its word in registers (lane 0 the low bits, as the bytes lie in memory): a
        shift and a truncation, which the widening that follows absorbs (float16:
        ``HADD2.F32`` of the word's low or high half; bfloat16 bits: one ``LOP3`` or
        shift)."""
        i32 = ir.IntType(32)
        if loaded.type.element == element:
            return [builder.extract_element(loaded, ir.Constant(i32, k)) for k in range(width)]
        per = width // loaded.type.count
        bits = 32 // per
        lanes = []
        for k in range(width):
            word = builder.extract_element(loaded, ir.Constant(i32, k // per))
            if k % per:
                word = builder.lshr(word, ir.Constant(i32, bits * (k % per)))
            lane = builder.trunc(word, ir.IntType(bits))
            lanes.append(lane if isinstance(element, ir.IntType) else
                         builder.bitcast(lane, element))
        return lanes

    def _pack(builder, lanes: list, element, words):
        """The vector of type ``words`` holding ``lanes`` (as :func:`_lanes` reads
        them: lane 0 in a word's low bits)."""
        i32 = ir.IntType(32)
        packed = ir.Constant(words, ir.Undefined)
        if words.element == element:
            for k, lane in enumerate(lanes):
                packed = builder.insert_element(packed, lane, ir.Constant(i32, k))
            return packed
        per = len(lanes) // words.count
        bits = 32 // per
        for w in range(words.count):
            word = ir.Constant(i32, 0)
            for k in range(per):
                lane = lanes[w * per + k]
                if not isinstance(element, ir.IntType):
                    lane = builder.bitcast(lane, ir.IntType(bits))
                lane = builder.zext(lane, i32)
                if k:
                    lane = builder.shl(lane, ir.Constant(i32, bits * k))
                word = builder.or_(word, lane)
            packed = builder.insert_element(packed, word, ir.Constant(i32, w))
        return packed

    @functools.lru_cache(maxsize=None)
    def vector_loader(width: int):
        """Device function ``load(a, j) -> (a[j*W], ..., a[j*W + W-1])``, one
        ``W``-wide vector load.

        ``a``: a 1-D C-contiguous device array whose data pointer is aligned to
        ``W * itemsize`` bytes (the caller checks); ``j``: the vector's index.
        """

        @intrinsic
        def load(typingctx, a, j):
            _check_vector_array(a, j, "load")

            def codegen(context, builder, sig, args):
                array = context.make_array(sig.args[0])(context, builder, args[0])
                element = context.get_data_type(a.dtype)
                words = _words(context, element, width)
                base = builder.bitcast(array.data, words.as_pointer())
                index = context.cast(builder, args[1], sig.args[1], types.int64)
                loaded = builder.load(builder.gep(base, [index]),
                                      align=width * context.get_abi_sizeof(element))
                items = _lanes(builder, loaded, element, width)
                return context.make_tuple(builder, sig.return_type, items)

            return types.UniTuple(a.dtype, width)(a, j), codegen

        return load

    @functools.lru_cache(maxsize=None)
    def vector_storer(width: int):
        """Device function ``store(a, j, values)``: ``a[j*W : j*W + W] = values``, one
        ``W``-wide vector store.

        ``a``: as :func:`vector_loader`'s; ``values``: a tuple of ``W`` elements of
        ``a``'s dtype.
        """

        @intrinsic
        def store(typingctx, a, j, values):
            _check_vector_array(a, j, "store")
            if not (isinstance(values, types.UniTuple) and values.count == width
                    and values.dtype == a.dtype):
                raise TypingError(f"vector store takes {width} values of {a.dtype}, got "
                                  f"{values}")

            def codegen(context, builder, sig, args):
                array = context.make_array(sig.args[0])(context, builder, args[0])
                element = context.get_data_type(a.dtype)
                words = _words(context, element, width)
                lanes = [builder.extract_value(args[2], k) for k in range(width)]
                packed = _pack(builder, lanes, element, words)
                base = builder.bitcast(array.data, words.as_pointer())
                index = context.cast(builder, args[1], sig.args[1], types.int64)
                builder.store(packed, builder.gep(base, [index]),
                              align=width * context.get_abi_sizeof(element))
                return context.get_dummy_value()

            return types.none(a, j, values), codegen

        return store


def lane_folder(combine, to_state, first: int, count: int):
    """Device function ``fold(v, base)``: the combine of lanes ``first .. first+count-1``
    of the vector ``v`` (element ``base + lane``), as a tree. Every lane index is a
    compile-time constant, so the tuple stays in registers without relying on loop
    unrolling (the compiled first pass uses 32 registers and no local memory on
    sm_90)."""
    if count == 1:

        @cuda.jit(device=True)
        def fold(v, base):
            return to_state(v[first], int64(base) + first)  # uint64 + int is a float

        return fold
    half = count // 2
    low = lane_folder(combine, to_state, first, half)
    high = lane_folder(combine, to_state, first + half, count - half)

    @cuda.jit(device=True)
    def fold(v, base):
        return combine(low(v, base), high(v, base))

    return fold


@dataclass(frozen=True)
class LaneStates:
    """Device functions over the ``count`` op states one thread holds, one per lane of a
    vector it loads (a column kernel's thread owns ``count`` adjacent outputs). The
    states are a binary tree of tuples whose leaves are the kit's states, as
    :func:`lane_folder`'s tree, so every lane index is a compile-time constant and the
    states stay in registers.

    * ``identity() -> tree``;
    * ``fold(tree, v, index) -> tree``: lane ``j``'s state combined with
      ``to_state(v[j], index)`` (``index``: the element's place in its output's row);
    * ``merge(tree, other) -> tree``: lane by lane;
    * ``store(h0, h1, base, tree)`` / ``load(h0, h1, base) -> tree``: lane ``j`` at
      slot ``base + j`` of a temp storage;
    * ``emit(o0, o1, row, pos, step, piece, S, M, tree)``: lane ``j`` through the
      kernel's emit as output ``row + j``, at ``pos + j * step`` of the result.
    """

    identity: Callable
    fold: Callable
    merge: Callable
    store: Callable
    load: Callable
    emit: Callable


def lane_states(kit, emit, count: int, first: int = 0) -> LaneStates:
    """The :class:`LaneStates` of lanes ``first .. first+count-1`` for ``kit``'s op and
    the kernel's ``emit`` device function."""
    if count == 1:
        return _leaf_states(kit, emit, first)
    low = lane_states(kit, emit, count // 2, first)
    high = lane_states(kit, emit, count - count // 2, first + count // 2)
    li, lf, lm, ls, ll, le = (low.identity, low.fold, low.merge, low.store, low.load,
                              low.emit)
    hi, hf, hm, hs, hl, he = (high.identity, high.fold, high.merge, high.store, high.load,
                              high.emit)

    @cuda.jit(device=True)
    def identity():
        return li(), hi()

    @cuda.jit(device=True)
    def fold(t, v, index):
        return lf(t[0], v, index), hf(t[1], v, index)

    @cuda.jit(device=True)
    def merge(t, u):
        return lm(t[0], u[0]), hm(t[1], u[1])

    @cuda.jit(device=True)
    def store(h0, h1, base, t):
        ls(h0, h1, base, t[0])
        hs(h0, h1, base, t[1])

    @cuda.jit(device=True)
    def load(h0, h1, base):
        return ll(h0, h1, base), hl(h0, h1, base)

    @cuda.jit(device=True)
    def emit_lanes(o0, o1, row, pos, step, piece, S, M, t):
        le(o0, o1, row, pos, step, piece, S, M, t[0])
        he(o0, o1, row, pos, step, piece, S, M, t[1])

    return LaneStates(identity, fold, merge, store, load, emit_lanes)


def _leaf_states(kit, emit, lane: int) -> LaneStates:
    """One lane's functions: the kit's own, at lane ``lane``."""
    combine, to_state = kit.combine, kit.to_state
    store_state, load_state = kit.store, kit.load

    @cuda.jit(device=True)
    def fold(s, v, index):
        return combine(s, to_state(v[lane], index))

    @cuda.jit(device=True)
    def store(h0, h1, base, s):
        store_state(h0, h1, base + lane, s)

    @cuda.jit(device=True)
    def load(h0, h1, base):
        return load_state(h0, h1, base + lane)

    @cuda.jit(device=True)
    def emit_lane(o0, o1, row, pos, step, piece, S, M, s):
        emit(o0, o1, row + lane, pos + lane * step, piece, S, M, s)

    return LaneStates(kit.identity, fold, combine, store, load, emit_lane)
