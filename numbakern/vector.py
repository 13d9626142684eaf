"""Vector loads: one 16-byte load instruction for several consecutive elements.

A memory-bound kernel is limited by the bytes each thread has in flight. Scalar loads
of float32 put 4 bytes in flight per instruction; ``ld.global.v4.f32`` puts 16, so a
thread needs a quarter of the load instructions (and their address arithmetic) to
keep the same bytes in flight. CUB does this in ``LOAD_VECTORIZE`` when the input is
aligned, and falls back to scalar loads when it is not; numbakern does the same
(``kernels.vector_width``).

Numba has no vector type, so :func:`vector_loader` builds an intrinsic that emits an
LLVM load of ``<W x T>`` and returns its lanes as a tuple. Under the simulator the
same call is a slice of the array.
"""

from __future__ import annotations

import functools

import numpy as np
from numba.cuda.core import config

VECTOR_BYTES = 16  # the widest load a CUDA thread can issue


def lanes(dtype) -> int:
    """Elements of ``dtype`` in one 16-byte vector load."""
    return VECTOR_BYTES // np.dtype(dtype).itemsize


if config.ENABLE_CUDASIM:

    @functools.lru_cache(maxsize=None)
    def vector_loader(width: int):
        """``load(a, j) -> (a[j*W], ..., a[j*W + W-1])`` (simulator version)."""

        def load(a, j):
            return tuple(a[j * width:(j + 1) * width])

        return load

else:
    from llvmlite import ir
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    @functools.lru_cache(maxsize=None)
    def vector_loader(width: int):
        """Device function ``load(a, j) -> (a[j*W], ..., a[j*W + W-1])``, one
        ``W``-wide vector load.

        ``a``: a 1-D C-contiguous device array whose data pointer is aligned to
        ``W * itemsize`` bytes (the caller checks); ``j``: the vector's index.
        """

        @intrinsic
        def load(typingctx, a, j):
            if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"):
                raise TypingError(f"vector load needs a 1-D C-contiguous array, got {a}")
            if not isinstance(j, types.Integer):
                raise TypingError(f"vector load index must be an integer, got {j}")

            def codegen(context, builder, sig, args):
                array = context.make_array(sig.args[0])(context, builder, args[0])
                element = context.get_data_type(a.dtype)
                vector = ir.VectorType(element, width)
                base = builder.bitcast(array.data, vector.as_pointer())
                index = context.cast(builder, args[1], sig.args[1], types.int64)
                loaded = builder.load(builder.gep(base, [index]),
                                      align=width * context.get_abi_sizeof(element))
                items = [builder.extract_element(loaded, ir.Constant(ir.IntType(32), k))
                         for k in range(width)]
                return context.make_tuple(builder, sig.return_type, items)

            return types.UniTuple(a.dtype, width)(a, j), codegen

        return load
