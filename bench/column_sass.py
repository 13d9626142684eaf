"""Registers and spills of the column-reduction kernels for sm_90, built without a GPU.

    LD_LIBRARY_PATH=/usr/local/cuda-13.0/lib CUDA_HOME=/usr/local/cuda-13.0 \
        python bench/column_sass.py

For each op and dtype: the vector column kernel (``axis_reduce.build_vector_column_kernel``,
a thread owning a 16-byte vector of adjacent outputs) without launch bounds and with
the bounds it launches with (``vector_column_registers``), and the scalar column kernel,
compiled to PTX for sm_90 with ``cuda.compile_ptx`` (the driver probe faked as in
``bench/scan_sass.py``) and assembled by the toolkit's ``ptxas -v``: registers, spills,
shared memory. bench/NOTES.md's register figures of the vector column kernel
(2026-12-03) came from this script. Not a test.

``--scalar``: the scalar column kernel alone, over more cases (float64 max and argmax,
var's three fields of float64 input, an int32 sum) and the variants of its loads and
emits, without bounds and with those ``column_registers`` gives it (its partials'
pass has none).
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scan_sass  # noqa: E402,F401  (fakes the driver: numbakern in GPU mode)

import numpy as np  # noqa: E402
from numba import cuda, types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

from numbakern import ops  # noqa: E402
from numbakern.kernels import axis_reduce  # noqa: E402
from numbakern.kernels.emits import emit_partial, emit_store  # noqa: E402
from numbakern.kernels.finishes import variance_emit  # noqa: E402
from numbakern.ops.state import state_kit  # noqa: E402
from numbakern.runtime.device import blocks_per_multiprocessor  # noqa: E402

THREADS = 256
CASES = [  # (op, input dtype, state field dtypes)
    (ops.SUM, "float32", ("float32",)), (ops.MAX, "float32", ("float32",)),
    (ops.ARGMAX, "float32", ("float32", "int64")), (ops.SUM, "float16", ("float32",)),
    (ops.SUM, "float64", ("float64",)), (ops.MOMENTS, "float32", ("int64", "float64", "float64")),
]
#: the scalar column kernel's further cases (``--scalar``): float64 pairs and moments
SCALAR_CASES = CASES + [
    (ops.MAX, "float64", ("float64",)), (ops.ARGMAX, "float64", ("float64", "int64")),
    (ops.MOMENTS, "float64", ("int64", "float64", "float64")), (ops.SUM, "int32", ("int64",)),
]


def _array(dtype, ndim, layout="A"):
    return types.Array(from_dtype(np.dtype(dtype)), ndim, layout)


def ptxas(ptx: str) -> str:
    tool = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        info = subprocess.run([tool, "-arch=sm_90", "-O3", "-v", src, "-o",
                               os.path.join(d, "k.cubin")], capture_output=True, text=True)
    lines = [line.split("info    : ")[-1] for line in info.stderr.splitlines()
             if "registers" in line or "spill" in line]
    return " | ".join(lines) or info.stderr[-300:]


def _states(fields):
    """Argument types of an array of states (the kit's pair of handles)."""
    outs = tuple(_array(f, 1, "C") for f in fields)
    return (outs[0], outs[-1]) if len(outs) < 3 else (types.Tuple(outs), outs[0])


def scalar_variants(kit, dtype, fields):
    """``(name, load, emit, a0 a1 types, o0 o1 types, plain, masked)`` of the scalar
    column kernel's first pass (one reduced dimension or two, 64-bit indices,
    ``where=``; writing partials, or whole outputs: a store, or var's finish), and of
    its partials' pass (``plain`` None: launched without bounds)."""
    view, states = _array(dtype, 4), _states(fields)
    partial = emit_partial(kit, True).build()
    store = (variance_emit(False, False) if kit.fields == 3 else emit_store(kit)).build()
    stored = (_array("float64", 1, "C"), types.float64) if kit.fields == 3 else states
    view_loader = axis_reduce.view_loader
    return [
        ("1-D", view_loader(kit, 1, True), partial, (view, view), states, True, False),
        ("store", view_loader(kit, 1, True), store, (view, view), stored, True, False),
        ("2-D", view_loader(kit, 2, True), partial, (view, view), states, False, False),
        ("int64", view_loader(kit, 1, False), partial, (view, view), states, False, False),
        ("where", view_loader(kit, 1, True, True), partial, (view, _array("bool", 4)),
         states, False, True),
        ("parts", axis_reduce.partial_loader(kit, True), store, states, stored, None, False),
    ]


def scalar_main() -> None:
    """The scalar column kernel (``build_column_kernel``) without launch bounds and
    with those it launches with (``column_registers``)."""
    for op, dtype, fields in SCALAR_CASES:
        kit = state_kit(op, tuple(np.dtype(f) for f in fields))
        itemsize = np.dtype(fields[0]).itemsize
        for name, load, emit, ins, outs, plain, masked in scalar_variants(kit, dtype, fields):
            kernel = axis_reduce.build_column_kernel(THREADS, kit, load, emit, False, True)
            bounds = [None]
            if plain is not None:
                registers = axis_reduce.column_registers(kit.fields, itemsize, plain, masked)
                bounds.append((THREADS, blocks_per_multiprocessor(THREADS, registers)))
            for bounds in bounds:
                ptx = cuda.compile_ptx(kernel.py_func, (*ins, *[types.int64] * 11, *outs),
                                       cc=(9, 0), launch_bounds=bounds)[0]
                print(f"{op.name:8} {dtype:8} scalar {name:6} bounds {str(bounds):10} "
                      f"{ptxas(ptx)}")


def main() -> None:
    if "--scalar" in sys.argv[1:]:
        return scalar_main()
    for op, dtype, fields in CASES:
        kit = state_kit(op, tuple(np.dtype(f) for f in fields))
        emit = emit_partial(kit, True).build()
        outs = _states(fields)
        scalars = [types.int64] * 11
        width = 16 // np.dtype(dtype).itemsize
        vector = axis_reduce.build_vector_column_kernel(THREADS, kit, emit, False, width, True)
        scalar = axis_reduce.build_column_kernel(
            THREADS, kit, axis_reduce.view_loader(kit, 1, True), emit, False, True)
        bound = (THREADS, blocks_per_multiprocessor(
            THREADS, axis_reduce.vector_column_registers(kit.fields, width)))
        for name, kernel, second, bounds in (
                ("vector", vector, _array(dtype, 1, "C"), None),
                ("vector", vector, _array(dtype, 1, "C"), bound),
                ("scalar", scalar, _array(dtype, 4), None)):
            signature = (_array(dtype, 4), second, *scalars, *outs)
            ptx = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0),
                                   launch_bounds=bounds)[0]
            print(f"{op.name:8} {dtype:8} {name:6} bounds {str(bounds):10} {ptxas(ptx)}")


if __name__ == "__main__":
    main()
