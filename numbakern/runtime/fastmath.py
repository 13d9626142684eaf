"""Two float32 PTX instructions Numba has no name for, for the row kernels' inner loops.

``exp2_ftz(t)``: ``ex2.approx.ftz.f32``, 2^t in one ``MUFU.EX2`` (PTX ISA, "Floating
Point Instructions: ex2"; within 2 units in the last place, as CUDA's math library
documents its ``exp2f``, which is this instruction; results under 2^-126 flushed to
zero). libdevice's ``exp2f`` and ``fast_expf`` (``exp2f(x * log2(e))``)
give ``ex2.approx.f32``, without the flush, which costs a compare and two predicated
multiplies around it to keep subnormal results.

``max_nan(a, b)``: ``max.NaN.f32`` (sm_80 and later: :data:`MAX_NAN_CAPABILITY`;
PTX for an older device that holds it does not assemble), the larger of ``a`` and ``b``,
NaN if either is NaN, +0 above -0: one ``FMNMX.NAN`` where ``a if a > b or a != a
else b`` (numbakern's ``MAX`` combine, the same NaN rule) takes a compare, a NaN
test and a select.

Both are inline PTX. Under Numba's simulator they are plain Python of the same
results (to rounding: ``2.0 ** t``).
"""

from __future__ import annotations

import math

from numba.cuda.core import config

#: the first compute capability with ``max.NaN``
MAX_NAN_CAPABILITY = (8, 0)

if config.ENABLE_CUDASIM:

    def exp2_ftz(t):
        """2^t, results under 2^-126 flushed to zero (simulator version)."""
        if t >= 128:
            return type(t)(math.inf)
        r = 2.0 ** t  # NaN stays NaN
        return type(t)(0.0 if r < 2.0 ** -126 else r)

    def max_nan(a, b):
        """The larger of ``a`` and ``b``, NaN if either is (simulator version)."""
        if a != a or b != b:
            return a + b
        if a == b:
            return b if math.copysign(1, a) < 0 else a
        return a if a > b else b

else:
    from llvmlite import ir
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    def _float32_asm(builder, text: str, args: list):
        """Call the PTX ``text`` of float32 operands ``$1..`` giving float32 ``$0``."""
        f32 = ir.FloatType()
        fn = ir.FunctionType(f32, [f32] * len(args))
        constraint = ",".join(["=f"] + ["f"] * len(args))
        return builder.call(ir.InlineAsm(fn, text, constraint), args)

    def _check(name, *args):
        if any(a != types.float32 for a in args):
            raise TypingError(f"{name}: float32 operands, got {args}")

    @intrinsic
    def exp2_ftz(typingctx, t):
        """2^t by ``ex2.approx.ftz.f32`` (module doc)."""
        _check("exp2_ftz", t)

        def codegen(context, builder, sig, args):
            return _float32_asm(builder, "ex2.approx.ftz.f32 $0, $1;", list(args))

        return types.float32(t), codegen

    @intrinsic
    def max_nan(typingctx, a, b):
        """``max.NaN.f32`` of ``a`` and ``b`` (module doc)."""
        _check("max_nan", a, b)

        def codegen(context, builder, sig, args):
            return _float32_asm(builder, "max.NaN.f32 $0, $1, $2;", list(args))

        return types.float32(a, b), codegen
