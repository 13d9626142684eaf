"""Reinterpret a value's bits as another type of the same width.

A compare-and-swap loop works on integers; to fold a float (or any value) with CAS,
its bits travel as an integer of the same width. ``bitcast(value, to)`` is that
reinterpretation, ``to`` a Numba type of the same size: an LLVM ``bitcast`` on the
GPU, ``numpy``'s ``view`` under the simulator.
"""

from __future__ import annotations

import numpy as np
from numba.cuda.core import config

if config.ENABLE_CUDASIM:
    from numba.np.numpy_support import as_dtype

    def bitcast(value, to):
        """Reinterpret ``value``'s bits as Numba type ``to`` (simulator version)."""
        return np.asarray(value).view(as_dtype(to))[()]

else:
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    @intrinsic
    def bitcast(typingctx, value, to):
        """Reinterpret ``value``'s bits as Numba type ``to`` (same width)."""
        if not isinstance(to, types.NumberClass):
            raise TypingError("bitcast: 'to' must be a Numba number type")
        target = to.instance_type
        if value.bitwidth != target.bitwidth:
            raise TypingError(f"bitcast: {value} and {target} differ in width")

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(value, to), codegen
