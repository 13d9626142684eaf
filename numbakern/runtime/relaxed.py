"""Relaxed loads from L2, for polling words that other blocks publish.

A decoupled look-back (``strategies/radix_sort.py``) reads words that blocks on other
multiprocessors store, and reads one again until it is published. Numba's plain
array read may be served from a stale L1 line, or hoisted out of the polling loop
by the compiler; an atomic read (``atomicOr(p, 0)``) is correct but goes through
L2's atomic units and costs a wraparound check of a signed index. ``load_relaxed``
is PTX ``ld.relaxed.gpu.global`` (PTX ISA, "Memory Consistency Model": a relaxed
load at GPU scope sees the latest value any block stored, word by word), issued as
an inline assembly with side effects, so it is neither cached in L1 nor moved out
of a loop.

``load_relaxed(array, i)``: element ``i`` (an unsigned integer: no negative-index
wraparound) of a 1-D uint32, uint64, float32 or float64 array in global memory (a
float is loaded as its bits). Under Numba's simulator it is ``array[i]``.

``load_relaxed_pair(array, i)`` and ``store_relaxed_pair(array, i, a, b)``: words ``i``
and ``i + 1`` of a 1-D uint64 array (``i`` even, unsigned, the array 16-byte aligned:
any allocation is) read or written as one 16-byte access, ``ld.relaxed.gpu.global.v2.b64``
and ``st.relaxed.gpu.global.v2.b64``. A look-back packs an 8-byte value beside its status
this way, so a reader that sees the new status sees the value stored with it, and
neither side needs a fence. The PTX model treats a vector access as one access per
element and promises nothing about their atomicity together; CUB relies on an aligned
16-byte relaxed access being single-copy atomic on sm_70 and later (``ScanTileState<T,
true>`` in ``cub/agent/single_pass_scan_operators.cuh``: 8-byte values travel with
their status as a ``ulonglong2`` ``TxnWord``, through ``load_relaxed`` /
``store_relaxed`` of ``cub/detail/strong_load.cuh`` / ``strong_store.cuh``, which are
``ld.relaxed.gpu.v2.u64`` / ``st.relaxed.gpu.v2.u64``), and so does this. Under the
simulator they are ``(array[i], array[i + 1])`` and two plain stores.

``fence_acq_rel()``: PTX ``fence.acq_rel.gpu`` (SASS ``MEMBAR.ALL.GPU``), what a
publisher needs between storing a value and setting its flag, and a reader between
reading the flag and the value (the PTX model's release and acquire patterns).
``cuda.threadfence()`` is ``fence.sc.gpu`` (``MEMBAR.SC.GPU``), a sequentially
consistent fence that also orders it against every other SC fence in the GPU: more
than a flag handoff needs, and slower. A no-op under the simulator (one thread at a
time).
"""

from __future__ import annotations

from numba.cuda.core import config

if config.ENABLE_CUDASIM:

    def load_relaxed(array, i):
        """``array[i]`` (simulator version: one thread runs at a time)."""
        return array[i]

    def load_relaxed_pair(array, i):
        """``(array[i], array[i + 1])`` (simulator version)."""
        return array[i], array[i + 1]

    def store_relaxed_pair(array, i, a, b):
        """``array[i], array[i + 1] = a, b`` (simulator version)."""
        array[i] = a
        array[i + 1] = b

    def fence_acq_rel():
        """Nothing (simulator version: one thread runs at a time)."""

else:
    from llvmlite import ir
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    _LOADED = (types.uint32, types.uint64, types.float32, types.float64)

    @intrinsic
    def load_relaxed(typingctx, array, i):
        """``array[i]`` read with ``ld.relaxed.gpu.global`` (module doc)."""
        if not (isinstance(array, types.Array) and array.ndim == 1
                and array.dtype in _LOADED):
            raise TypingError(f"load_relaxed: a 1-D uint32, uint64, float32 or float64 "
                              f"array, got {array}")
        if not (isinstance(i, types.Integer) and not i.signed):
            raise TypingError(f"load_relaxed: an unsigned index, got {i}")
        bits = array.dtype.bitwidth

        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            index = context.cast(builder, args[1], sig.args[1], types.uint64)
            pointer = builder.gep(data, [index])
            fn = ir.FunctionType(ir.IntType(bits), [pointer.type])
            asm = ir.InlineAsm(fn, f"ld.relaxed.gpu.global.b{bits} $0, [$1];",
                               f"={'r' if bits == 32 else 'l'},l,~{{memory}}",
                               side_effect=True)
            word = builder.call(asm, [pointer])
            return builder.bitcast(word, context.get_value_type(sig.return_type))

        return array.dtype(array, i), codegen

    def _pair_pointer(context, builder, sig, args):
        """The address of word ``args[1]`` of the uint64 array ``args[0]``."""
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.gep(data, [context.cast(builder, args[1], sig.args[1], types.uint64)])

    def _check_pair(name, array, i):
        if not (isinstance(array, types.Array) and array.ndim == 1
                and array.dtype == types.uint64):
            raise TypingError(f"{name}: a 1-D uint64 array, got {array}")
        if not (isinstance(i, types.Integer) and not i.signed):
            raise TypingError(f"{name}: an unsigned index, got {i}")

    @intrinsic
    def load_relaxed_pair(typingctx, array, i):
        """``(array[i], array[i + 1])`` read with one ``ld.relaxed.gpu.global.v2.b64``
        (module doc)."""
        _check_pair("load_relaxed_pair", array, i)
        pair = types.UniTuple(types.uint64, 2)

        def codegen(context, builder, sig, args):
            pointer = _pair_pointer(context, builder, sig, args)
            word = ir.IntType(64)
            fn = ir.FunctionType(ir.LiteralStructType([word, word]), [pointer.type])
            asm = ir.InlineAsm(fn, "ld.relaxed.gpu.global.v2.b64 {$0, $1}, [$2];",
                               "=l,=l,l,~{memory}", side_effect=True)
            both = builder.call(asm, [pointer])
            return context.make_tuple(builder, pair, [builder.extract_value(both, 0),
                                                      builder.extract_value(both, 1)])

        return pair(array, i), codegen

    @intrinsic
    def store_relaxed_pair(typingctx, array, i, a, b):
        """``array[i], array[i + 1] = a, b`` written with one
        ``st.relaxed.gpu.global.v2.b64`` (module doc); ``a`` and ``b`` uint64."""
        _check_pair("store_relaxed_pair", array, i)
        if a != types.uint64 or b != types.uint64:
            raise TypingError(f"store_relaxed_pair: uint64 words, got {a} and {b}")

        def codegen(context, builder, sig, args):
            pointer = _pair_pointer(context, builder, sig, args)
            word = ir.IntType(64)
            fn = ir.FunctionType(ir.VoidType(), [pointer.type, word, word])
            asm = ir.InlineAsm(fn, "st.relaxed.gpu.global.v2.b64 [$0], {$1, $2};",
                               "l,l,l,~{memory}", side_effect=True)
            builder.call(asm, [pointer, args[2], args[3]])
            return context.get_dummy_value()

        return types.none(array, i, a, b), codegen

    @intrinsic
    def fence_acq_rel(typingctx):
        """``fence.acq_rel.gpu`` (module doc)."""

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "fence.acq_rel.gpu;",
                               "~{memory}", side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return types.none(), codegen
