"""bfloat16 in device code, as its 16 bits: Numba has no bfloat16 type (and its
simulator none at all), so kernels read and write bfloat16 arrays as uint16 and
convert with these two functions.

bfloat16 is the top half of a float32 (sign, 8 exponent bits, 7 mantissa bits), so
widening is exact: the bits shifted into the top of a float32. Narrowing rounds to
nearest, ties to even, as ``__float2bfloat16_rn`` and PyTorch's conversion do; a NaN
stays a (quiet) NaN of the same sign.
"""

from __future__ import annotations

import math

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


def widen_on_host(bits) -> np.ndarray:
    """bfloat16 bits on the host (an array of uint16) as the float32 array of the
    same values (a float32's upper half): :func:`widen` of each element."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def round_on_host(value) -> np.float32:
    """A real number rounded once to the nearest bfloat16 (ties to even; NaN and the
    infinities kept; past the largest bfloat16, an infinity), as a float32: what
    :func:`narrow` gives a float32, for any number on the host (a float64 or an int
    up to 2**53, which a float32 would round first)."""
    v = float(value)
    if not math.isfinite(v) or v == 0:
        return np.float32(v)
    step = 2.0 ** max(math.frexp(v)[1] - 8, -133)  # 8 significant bits; subnormals'
    r = math.copysign(round(v / step) * step, v)  # (round: ties to even; -0.0 kept)
    return np.float32(r if abs(r) < 2.0**128 else math.copysign(math.inf, v))


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
