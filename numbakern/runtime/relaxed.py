"""A relaxed load from L2, for polling words that other blocks publish.

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
wraparound) of a 1-D uint32 or uint64 array in global memory. Under Numba's
simulator it is ``array[i]``.

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

    def fence_acq_rel():
        """Nothing (simulator version: one thread runs at a time)."""

else:
    from llvmlite import ir
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    @intrinsic
    def load_relaxed(typingctx, array, i):
        """``array[i]`` read with ``ld.relaxed.gpu.global`` (module doc)."""
        if not (isinstance(array, types.Array) and array.ndim == 1
                and array.dtype in (types.uint32, types.uint64)):
            raise TypingError(f"load_relaxed: a 1-D uint32 or uint64 array, got {array}")
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
            return builder.call(asm, [pointer])

        return array.dtype(array, i), codegen

    @intrinsic
    def fence_acq_rel(typingctx):
        """``fence.acq_rel.gpu`` (module doc)."""

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "fence.acq_rel.gpu;",
                               "~{memory}", side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return types.none(), codegen
