"""Asynchronous copies from global to shared memory: ``cp.async`` (sm_80 and later).

A thread that loads a value into a register and stores it to shared memory holds a
register for every load in flight, so the bytes a block has in flight are bounded by
its registers (four 16-byte vectors a thread in the staged softmax rows:
``kernels/softmax_rows.py``). PTX ``cp.async`` (PTX ISA, "Data Movement and Conversion
Instructions: cp.async") copies 16 bytes from global memory straight into shared
memory without a register: a thread issues the copies of a whole row at once, and
waits for them with ``cp.async.wait_group``. This is how CUB's ``BlockLoadToShared``,
CUTLASS's multistage pipelines and Triton's ``num_stages`` feed shared memory on
Ampere and Hopper. ``.cg`` caches the lines in L2 only: each byte is read once.

``copy16(dst, i, src, j)``: copy vector ``j`` of ``src`` (16-byte vectors of a 1-D
C-contiguous global array whose data is 16-byte aligned) into vector slot ``i`` of
``dst`` (a 1-D shared array, 16-byte aligned as dynamic shared memory is).
``commit()``: close the group of the thread's copies issued since the last commit.
``wait_groups(pending)``: wait until at most ``pending`` (a compile-time integer) of
the thread's committed groups are still in flight; the copies of the others are then
visible to this thread (to other threads only after a barrier). ``wait_all()``: every
copy of the thread, committed or not.

Numba has no ``cp.async``; these are inline PTX with a memory clobber, so the
compiler moves no shared-memory access across a wait. Under Numba's simulator a copy
is a slice assignment done at once, and the waits do nothing.
"""

from __future__ import annotations

from numba.cuda.core import config

#: the first compute capability with ``cp.async``
ASYNC_COPY_CAPABILITY = (8, 0)
VECTOR_BYTES = 16

if config.ENABLE_CUDASIM:
    from .simulator import vector_aligned

    def copy16(dst, i, src, j):
        """``dst``'s vector ``i`` = ``src``'s vector ``j`` (simulator version)."""
        vector_aligned(src, "copy")
        vector_aligned(dst, "copy")
        width = VECTOR_BYTES // src.itemsize
        dst[i * width:(i + 1) * width] = src[j * width:(j + 1) * width]

    def commit():
        """Nothing (simulator version: copies are done when issued)."""

    def wait_groups(pending):
        """Nothing (simulator version: copies are done when issued)."""

    def wait_all():
        """Nothing (simulator version: copies are done when issued)."""

else:
    from llvmlite import ir
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    def _byte_pointer(context, builder, array_type, array, index, index_type):
        """The address of 16-byte vector ``index`` of ``array``'s data, as ``i8*``."""
        data = context.make_array(array_type)(context, builder, array).data
        base = builder.bitcast(data, ir.IntType(8).as_pointer())
        offset = builder.mul(context.cast(builder, index, index_type, types.int64),
                             ir.Constant(ir.IntType(64), VECTOR_BYTES))
        return builder.gep(base, [offset])

    def _check(array, index, what: str) -> None:
        if not (isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"):
            raise TypingError(f"copy16: {what} must be a 1-D C-contiguous array, got {array}")
        if not isinstance(index, types.Integer):
            raise TypingError(f"copy16: {what}'s vector index must be an integer, got {index}")

    @intrinsic
    def copy16(typingctx, dst, i, src, j):
        """``cp.async.cg.shared.global`` of 16 bytes (module doc)."""
        _check(dst, i, "dst")
        _check(src, j, "src")

        def codegen(context, builder, sig, args):
            to = _byte_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
            frm = _byte_pointer(context, builder, sig.args[2], args[2], args[3], sig.args[3])
            fn = ir.FunctionType(ir.VoidType(), [to.type, frm.type])
            # the shared array's address is generic: cvta makes it a shared-window one
            asm = ir.InlineAsm(fn, "{ .reg .u64 s; cvta.to.shared.u64 s, $0; "
                               "cp.async.cg.shared.global [s], [$1], 16; }",
                               "l,l,~{memory}", side_effect=True)
            builder.call(asm, [to, frm])
            return context.get_dummy_value()

        return types.none(dst, i, src, j), codegen

    def _statement(text: str):
        """An intrinsic of no arguments that emits the PTX statement ``text``."""

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}",
                               side_effect=True)
            builder.call(asm, [])
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def commit(typingctx):
        """``cp.async.commit_group`` (module doc)."""
        return types.none(), _statement("cp.async.commit_group;")

    @intrinsic
    def wait_groups(typingctx, pending):
        """``cp.async.wait_group pending`` (module doc)."""
        if not isinstance(pending, types.IntegerLiteral):
            raise TypingError(f"wait_groups: pending must be a compile-time integer, "
                              f"got {pending}")
        return types.none(pending), _statement(f"cp.async.wait_group {pending.literal_value};")

    @intrinsic
    def wait_all(typingctx):
        """``cp.async.wait_all`` (module doc)."""
        return types.none(), _statement("cp.async.wait_all;")


def async_copies(capability: tuple[int, int]) -> bool:
    """Whether a device of compute ``capability`` has ``cp.async``."""
    return tuple(capability) >= ASYNC_COPY_CAPABILITY
