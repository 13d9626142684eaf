"""Registers, occupancy and 16-byte loads of the softmax kernels that
``bench_half.py`` times (``--dtypes float32`` for float32's), built on a machine
with or without a GPU (sm_90 SASS).

    python bench/softmax_sass.py [--keep DIR]

For each op, shape and dtype of ``bench_half.py`` it plans the call as the API does
(``api.softmax._planned``, then the launch's vector width over contiguous rows from
a 256-byte aligned base), compiles the kernel for sm_90, and prints the plan
(threads x elements per thread, or tiled), ptxas's registers and spills, the blocks
and threads a multiprocessor holds by those registers, and the 16-byte loads
(``LDG.E.128``) in the SASS: with the threads they give the bytes in flight a
multiprocessor can have. Needs what ``bench/ptx_half.py`` needs (NVVM, ptxas,
nvdisasm). ``--keep``'s listings go to ``bench/sass_loops.py``: the instructions of
each loop, by opcode.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ptx_half  # noqa: E402

SHAPES = [(32768, 4096), (4096, 32768), (8192, 50257)]
OPS = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]
REGISTERS_PER_SM, THREADS_PER_SM = 65536, 2048


def kernel_and_args(op: str, shape: tuple, dtype: str):
    import numpy as np

    from numbakern.api import softmax as api
    from numbakern.kernels import softmax_rows
    from numbakern.runtime.launch import DeviceBuffer

    plan = api._planned(op, shape[1], dtype, "auto" if op in softmax_rows.FORWARD
                        else None, "auto", None, None, None, None, dtype, "")
    stored = np.dtype(np.uint16 if dtype == "bfloat16" else dtype)
    size = stored.itemsize
    views = [DeviceBuffer((1 + k) << 40, (1, shape[0], shape[1]),
                          (shape[0] * shape[1] * size, shape[1] * size, size), stored)
             for k in range(2 if op in softmax_rows.FORWARD else 3)]
    width = softmax_rows.vector_width(plan, shape[1], views)
    if width:
        plan = dataclasses.replace(plan, vector=width)
        views = [*views, *softmax_rows.vector_views(plan, views)]
    return plan, softmax_rows.kernel_for(plan), views


def ptx_of(kernel, args, bounds) -> str:
    """The kernel's PTX for sm_90 under the launch bounds the library compiles it with
    (they cap ptxas's registers: 64 at 1024 threads)."""
    from numba import cuda

    from numbakern.runtime.launch import _signature, flatten

    return cuda.compile_ptx(kernel.py_func, _signature(flatten(args)[0]), cc=(9, 0),
                            launch_bounds=bounds)[0]


def resources(ptx: str, workdir: str):
    """``(registers, spill bytes, SASS text)`` from ptxas -v and nvdisasm (SASS None
    where nvdisasm is not installed)."""
    source, cubin = os.path.join(workdir, "k.ptx"), os.path.join(workdir, "k.cubin")
    with open(source, "w") as f:
        f.write(ptx)
    run = subprocess.run([ptx_half._tool("ptxas"), "-arch=sm_90", "-O3", "-v", source, "-o",
                          cubin], capture_output=True, text=True, check=True)
    regs = int(re.search(r"Used (\d+) registers", run.stderr).group(1))
    spills = sum(int(b) for b in re.findall(r"(\d+) bytes spill", run.stderr))
    disassembler = ptx_half._tool("nvdisasm")
    if disassembler is None:
        return regs, spills, None
    sass = subprocess.run([disassembler, "-c", cubin], capture_output=True, text=True,
                          check=True).stdout
    return regs, spills, sass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="write each kernel's PTX and SASS here")
    parser.add_argument("-k", default="", help="only cases whose label contains this")
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"],
                        help="input dtypes (float32 too)")
    options = parser.parse_args()
    if not ptx_half._has_gpu():
        ptx_half._gpu_mode_without_a_gpu()
    with tempfile.TemporaryDirectory() as workdir:
        for op in OPS:
            for shape in SHAPES:
                for dtype in options.dtypes:
                    label = f"{op} {shape[0]}x{shape[1]} {dtype}"
                    if options.k not in label:
                        continue
                    plan, kernel, args = kernel_and_args(op, shape, dtype)
                    ptx = ptx_of(kernel, args, plan.launch_bounds)
                    regs, spills, sass = resources(ptx, workdir)
                    blocks = min(REGISTERS_PER_SM // (plan.threads * (-(-regs // 8) * 8)),
                                 THREADS_PER_SM // plan.threads)
                    ldg = "-" if sass is None else len(re.findall(r"LDG\.E\.128", sass))
                    how = (f"{plan.threads}x{plan.per_thread}" if plan.fused
                           else f"{'staged' if plan.staged else 'tiled'} {plan.threads}")
                    print(f"{label:40s} {how:10s} W={plan.vector} {plan.normalizer or '':12s}"
                          f" {kernel.py_func.__name__:22s} regs {regs:3d} spill {spills:3d} "
                          f"blocks/SM {blocks} threads/SM {blocks * plan.threads:4d} "
                          f"LDG.E.128 in SASS {ldg}", flush=True)
                    if options.keep and sass is not None:
                        os.makedirs(options.keep, exist_ok=True)
                        stem = os.path.join(options.keep, label.replace(" ", "_"))
                        with open(stem + ".sass", "w") as f:
                            f.write(sass)


if __name__ == "__main__":
    main()
