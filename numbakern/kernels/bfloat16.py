"""bfloat16 in device code, as its 16 bits: Numba has no bfloat16 type (and its
simulator none at all), so kernels read and write bfloat16 arrays as uint16 and
convert with these two functions.

bfloat16 is the top half of a float32 (sign, 8 exponent bits, 7 mantissa bits), so
widening is exact: the bits shifted into the top of a float32. Narrowing rounds to
nearest, ties to even, as ``__float2bfloat16_rn`` and PyTorch's conversion do; a NaN
stays a (quiet) NaN of the same sign.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, uint16, uint32

from numbakern.runtime.bits import bitcast
from numbakern.runtime.device import SIMULATOR
from numbakern.runtime.launch import launch

_QUIET = uint32(0x0040)  # the top mantissa bit of a bfloat16: a NaN stays a NaN
_ROUND = uint32(0x7FFF)  # half an ulp of bfloat16 less one, in a float32's low 16 bits


@cuda.jit(device=True)
def widen(bits):
    """bfloat16 bits (a uint16) as the float32 of the same value."""
    return bitcast(uint32(uint32(bits) << uint32(16)), float32)  # Numba shifts in 64 bits


@cuda.jit(device=True)
def narrow(value):
    """A float32 (or any float) as the bits of the nearest bfloat16, ties to even."""
    b = bitcast(float32(value), uint32)
    if (b & uint32(0x7FFFFFFF)) > uint32(0x7F800000):  # NaN
        return uint16((b >> uint32(16)) | _QUIET)
    b += _ROUND + ((b >> uint32(16)) & uint32(1))
    return uint16(b >> uint32(16))


def round_on_host(value) -> np.float32:
    """A number rounded to the nearest bfloat16 (ties to even, NaN kept), as a float32:
    :func:`narrow` then :func:`widen`, on the host."""
    b = np.asarray(value, np.float32).view(np.uint32)[()]
    if (b & 0x7FFFFFFF) > 0x7F800000:  # NaN
        return np.float32(value)
    b = (b + np.uint32(0x7FFF) + ((b >> 16) & 1)) & np.uint32(0xFFFF0000)
    return np.uint32(b).view(np.float32)


def narrower():
    """``narrow`` for the kernels being built now: on a GPU of compute capability 8.0
    or more, one ``cvt.rn.bf16.f32`` instruction (the same rounding; a NaN becomes
    the canonical quiet NaN ``0x7FFF``, as CUDA's ``__float2bfloat16_rn`` and
    PyTorch's CUDA kernels give), else :func:`narrow`'s integer rounding (eight
    instructions: the half-precision row kernels are bound by instructions)."""
    if SIMULATOR or tuple(cuda.get_current_device().compute_capability) < (8, 0):
        return narrow
    return _narrow_by_cvt


if not SIMULATOR:
    from llvmlite import ir
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    @intrinsic
    def _cvt_rn_bf16(typingctx, value):
        if value != types.float32:
            raise TypingError(f"cvt.rn.bf16.f32 takes a float32, got {value}")

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.IntType(16), [ir.FloatType()]),
                               "cvt.rn.bf16.f32 $0, $1;", "=h,f")
            return builder.call(asm, args)

        return types.uint16(types.float32), codegen

    @cuda.jit(device=True)
    def _narrow_by_cvt(value):
        return _cvt_rn_bf16(float32(value))


@cuda.jit
def _narrow_all(src, dst):
    i = cuda.grid(1)
    if i < src.shape[0]:
        dst[i] = narrow(src[i])


def narrow_into(src, dst, stream) -> None:
    """``dst[i] = narrow(src[i])``: a 1-D float array rounded into the 1-D uint16
    array ``dst`` of bfloat16 bits."""
    n = src.shape[0]
    if n:
        launch(_narrow_all, -(-n // 256), 256, stream, src, dst)
