"""A segmented scan as an ordinary scan: any one-field op lifted to (flags, value) pairs.

A scan restarted at every segment head is a plain scan under a transformed operator
(Schwartz, "Ultracomputers", 1980; Sengupta, Harris, Zhang and Owens, "Scan
primitives for GPU computing", 2007): each element becomes a pair ``(head, value)``,
``head`` set on the first element of a segment, and

    (fa, a) (+)' (fb, b) = (fa | fb, b if fb else a (+) b)

which is associative whenever ``(+)`` is, so every scan strategy (decoupled
look-back, reduce-then-scan, any block strategy and its warp form) serves a
segmented scan unchanged: the flag travels as a second field of the state.

One more bit makes the lifted op exact on its own: ``EMPTY``, "no value since the
last head" (or none at all). The lifted identity is ``(EMPTY, identity)``, so the
identity that fills lanes past the end is never folded into a value (``-0.0``
stays ``-0.0``), and an exclusive scan is an inclusive scan of the input shifted
by one within each segment: a head enters as ``(HEAD | EMPTY, identity)`` and
every other element as the value before it (``numbakern/kernels/segment_scan.py``'s
loader), so each segment starts from the identity and the first value after it
comes out exactly.

The scan stores only the value field (the op's ``finish``), in the accumulator
dtype of the op's own result.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import from_dtype, int8

from numbakern.ops import Op

#: the element starts a segment (the scan restarts there)
HEAD = 1
#: no value since the last head, or none at all: the value field is only a filler
EMPTY = 2
FLAG_DTYPE = np.dtype(np.int8)


@functools.lru_cache(maxsize=None)
def segmented(op: Op, accumulator: str) -> Op:
    """``op`` (one field) lifted to ``(flags, value)`` states whose value field has the
    dtype named ``accumulator``; its ``finish`` stores the value.

    Raises:
        TypeError: ``op`` has two fields.
    """
    if op.fields != 1:
        raise TypeError(f"{op.name} has {op.fields} fields; segmented scans take "
                        "one-field ops")
    inner = op.device_combine()
    acc = from_dtype(np.dtype(accumulator))

    def combine(a0, a1, b0, b1):
        # Selects, not branches: b restarts the scan (nothing of a survives); b holds no
        # element (a as it is); a holds no value after its head (b's value as it is);
        # else both. The inner combine runs whatever the case (its result may be
        # dropped): branching on the flags cost a segmented float32 scan 2.2 times a
        # plain one's instructions per element, 150 branches a kernel (sm_90 SASS).
        both = acc(inner(a1, b1))
        restart = (b0 & HEAD) != 0
        nothing = (b0 & EMPTY) != 0
        flags = b0 if restart else (a0 if nothing else int8(a0 & HEAD))
        value = b1 if restart else (a1 if nothing else (b1 if (a0 & EMPTY) != 0 else both))
        return flags, value

    def identity(dtypes):
        return FLAG_DTYPE.type(EMPTY), op.identity(np.dtype(dtypes[1]))

    def element(value, index):  # what a lone element is: no head, its value
        return int8(0), value

    def value_of(flags, value):
        return value

    def dtypes(in_dtype, dtype=None):
        return FLAG_DTYPE, np.dtype(accumulator)

    return Op(f"segmented_{op.name}", combine, identity, commutative=False, kinds=op.kinds,
              fields=2, map=element, state_dtypes=dtypes, finish=value_of)


__all__ = ["HEAD", "EMPTY", "FLAG_DTYPE", "segmented"]
