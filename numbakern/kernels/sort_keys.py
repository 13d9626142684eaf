"""Sort keys: any dtype's values as unsigned integers that compare in NumPy's order.

Both sort strategies (``strategies/bitonic_sort.py``, ``strategies/radix_sort.py``)
compare, or take digits of, unsigned integers. The input's bits are read through an
unsigned view of the same width (bool and int8 as uint8, float16 as uint16, ...) and
``to_key`` turns them into a key whose unsigned order is NumPy's order:

* **unsigned ints, bool**: the bits themselves;
* **signed ints**: flip the sign bit (``-1`` = ``0xFF..`` becomes ``0x7F..``, below
  ``0`` = ``0x80..``);
* **floats**: ``-0.0`` becomes ``+0.0`` and every NaN the all-ones key (above
  ``+inf``: NaN sorts last, all NaNs equal); then a negative value has all its bits
  flipped (a larger magnitude becomes a smaller key) and a positive one its sign bit
  set (above every negative);
* **descending**: the key complemented (largest first; NaN then comes first, as in
  ``torch.sort(descending=True)``).

bfloat16 (which NumPy only knows through ``ml_dtypes``, and torch tensors without it)
is named by the string :data:`BFLOAT16` and read as its uint16 bits: a float of 8
exponent and 7 mantissa bits, keyed by the float rule.

Equal keys (``-0.0`` and ``+0.0`` among them) keep their input order in both
strategies, so the sorted *values* are read back from the input by index: the
exact bits (``-0.0``, NaN payloads) come out where a stable sort puts them.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, from_dtype, int64, uint64


BFLOAT16 = "bfloat16"  # the key dtype of bfloat16 values held as their uint16 bits


def is_bfloat16(dtype) -> bool:
    return isinstance(dtype, str) and dtype == BFLOAT16


def key_name(dtype) -> str:
    """A key dtype's name in cache keys: NumPy's ``dtype.str``, or :data:`BFLOAT16`."""
    return BFLOAT16 if is_bfloat16(dtype) else np.dtype(dtype).str


def bits_dtype(dtype) -> np.dtype:
    """The unsigned integer dtype of ``dtype``'s width (the input is read as it)."""
    return np.dtype(np.uint16) if is_bfloat16(dtype) else np.dtype(f"u{np.dtype(dtype).itemsize}")


def _float_fields(dtype):
    """``(exponent bits, mantissa bits)`` of a float key dtype, or None."""
    if is_bfloat16(dtype):
        return 8, 7
    if np.dtype(dtype).kind != "f":
        return None
    finfo = np.finfo(dtype)
    return finfo.nexp, finfo.nmant


def build_to_key(dtype, descending: bool):
    """Device function ``to_key(bits) -> key`` (both of ``bits_dtype(dtype)``; ``dtype``
    a NumPy dtype or :data:`BFLOAT16`)."""
    width = 8 * bits_dtype(dtype).itemsize
    kt = from_dtype(bits_dtype(dtype))
    sign = uint64(1 << (width - 1))
    ones = uint64((1 << width) - 1)
    flip = ones if descending else uint64(0)
    fields = _float_fields(dtype)
    if fields is not None:
        nexp, nmant = fields
        inf = uint64(((1 << nexp) - 1) << nmant)  # +inf's bits
        magnitude = uint64((1 << (width - 1)) - 1)

        top = uint64(width - 1)

        @cuda.jit(device=True)
        def to_key(bits):
            # Selects, not branches: a radix sort pass takes a key's digit several
            # times, and divergent branches cost more than these few operations.
            u = uint64(bits)
            m = u & magnitude
            negative = (uint64(0) - (u >> top)) & ones  # all ones for a negative value
            k = u ^ (negative | sign)  # negative: every bit flipped; else the sign set
            k = sign if m == uint64(0) else k  # -0.0 == +0.0
            k = ones if m > inf else k  # NaN: above everything
            return kt(k ^ flip)

        return to_key
    lead = sign if np.dtype(dtype).kind == "i" else uint64(0)

    @cuda.jit(device=True)
    def to_key(bits):
        return kt((uint64(bits) ^ lead) ^ flip)

    return to_key


def build_from_key(dtype):
    """Device function ``from_key(key) -> bits``, the inverse of ascending ``to_key``
    where it is one: a value's bits from its key (uint64 in and out). The two keys
    ``to_key`` merges come back as one value: a zero's key as ``+0.0``, NaN's as
    the NaN of all mantissa bits set (``0x7FF...F``)."""
    width = 8 * bits_dtype(dtype).itemsize
    sign = uint64(1 << (width - 1))
    ones = uint64((1 << width) - 1)
    if _float_fields(dtype) is not None:
        @cuda.jit(device=True)
        def from_key(key):
            k = uint64(key)
            return k ^ sign if (k & sign) != uint64(0) else ~k & ones

        return from_key
    lead = sign if np.dtype(dtype).kind == "i" else uint64(0)

    @cuda.jit(device=True)
    def from_key(key):
        return uint64(key) ^ lead

    return from_key


def max_key(dtype) -> int:
    """The largest key (padding that sorts after every real key of equal value)."""
    return (1 << (8 * bits_dtype(dtype).itemsize)) - 1


@cuda.jit(device=True)
def _emit_index(x, out, base, j, i):
    out[base + j] = int64(i)


@cuda.jit(device=True)
def _emit_value(x, out, base, j, i):
    out[base + j] = x[base + i]


def emitter(indices: bool):
    """Device function ``emit(x, out, base, j, i)``: output ``base + j`` gets row
    element ``i``: its index (``indices``, an argsort) or its value's bits."""
    return _emit_index if indices else _emit_value
