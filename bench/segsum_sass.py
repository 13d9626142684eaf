"""Registers and spills of the segmented reduction's tile kernel, built without a GPU.

    python bench/segsum_sass.py [--registers N] [--dtype float32] [--block warp_shuffle]

Builds the tile kernel of ``numbakern.segmented_reduce(x, offsets)`` (a sum,
``two_pass``: the kernel that finishes each long segment itself; 16-byte vector
loads; ``numbakern/kernels/segment_reduce.py``) as the layout does, for 256-thread
blocks, compiles it for sm_90 with its launch bounds (``TILE_REGISTERS``, or
``--registers``; 0: none) and prints what ``ptxas -v`` says: registers, spill
stores and loads, and the blocks of 256 a multiprocessor then holds. Nothing runs:
numbakern is imported in GPU mode behind ``ptx_half.py``'s fake driver. NVVM must
be loadable (``LD_LIBRARY_PATH`` to a CUDA toolkit's ``lib``); ``ptxas`` on PATH or
in ``PTXAS`` (``nvdisasm`` or ``NVDISASM`` for ``--keep``'s SASS). Not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ptx_half


def tile_ptx(dtype: str, block_name: str) -> tuple[str, tuple | None]:
    """``(ptx, launch bounds)`` of the two_pass sum's tile kernel over a 1-D ``dtype``
    array (vector loads where the dtype has them)."""
    import numpy as np
    from numba import cuda, from_dtype, types

    from numbakern import ops
    from numbakern.kernels import segment_reduce as sr
    from numbakern.kernels.emits import emit_partial
    from numbakern.ops.state import state_kit
    from numbakern.strategies import resolve

    block = resolve("block", block_name)
    dtype = np.dtype(dtype)
    op = ops.get("sum")
    kit = state_kit(op, (ops.accumulator_dtype(op.result_dtype_for(dtype, None)),))
    width = sr.vector_lanes(dtype)
    kernel = sr.build_tile_kernel(block, kit, emit_partial(kit, False).build(), False,
                                  sr.part_reducer(kit, False, True, width), True)
    array = lambda d: types.Array(from_dtype(np.dtype(d)), 1, "C")
    state = array(kit.dtypes[0])
    signature = (array(dtype), array(np.int64), types.int64, types.int64, types.int64,
                 types.int64, array(np.int64), array(np.int64), array(np.int64), state, state)
    bounds = kernel.targetoptions.get("launch_bounds")
    return cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0), launch_bounds=bounds)[0], \
        bounds


def ptxas_info(ptx: str, keep: str | None = None) -> str:
    """``ptxas -v``'s report on ``ptx`` for sm_90; ``keep``: a folder for the PTX and the
    cubin (and its SASS, where ``nvdisasm`` is found)."""
    with tempfile.TemporaryDirectory() as workdir:
        workdir = keep or workdir
        source = os.path.join(workdir, "k.ptx")
        for attempt in range(2):  # a PTX newer than this ptxas: relabelled to its version
            with open(source, "w") as f:
                f.write(ptx)
            run = subprocess.run([ptx_half._tool("ptxas") or "ptxas", "-arch=sm_90", "-O3",
                                  "-v", source, "-o", os.path.join(workdir, "k.cubin")],
                                 capture_output=True, text=True, check=False)
            known = re.search(r"current version is '([\d.]+)'", run.stderr)
            if run.returncode == 0 or not known or attempt:
                break
            ptx = re.sub(r"^\.version [\d.]+", f".version {known.group(1)}", ptx,
                         flags=re.MULTILINE)
        nvdisasm = ptx_half._tool("nvdisasm")
        if keep and nvdisasm and not run.returncode:
            with open(os.path.join(keep, "k.sass"), "w") as f:
                f.write(subprocess.run([nvdisasm, "-c", os.path.join(keep, "k.cubin")],
                                       capture_output=True, text=True, check=False).stdout)
    if run.returncode:
        raise SystemExit(run.stderr)
    return run.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registers", type=int, help="TILE_REGISTERS (0: no bounds)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--block", default="warp_shuffle")
    parser.add_argument("--keep", help="a folder for the PTX, cubin and SASS")
    options = parser.parse_args()
    os.environ.setdefault("NUMBA_FORCE_CUDA_CC", "9.0")  # no NVRTC asked for its archs
    if not ptx_half._has_gpu():
        ptx_half._gpu_mode_without_a_gpu()
        import numba.cuda.cuda_paths as paths

        paths._get_nvrtc_path = lambda: None  # NVVM alone compiles; NVRTC may be absent
    from numbakern.kernels import segment_reduce as sr

    if options.registers is not None:
        sr.TILE_REGISTERS = options.registers
    ptx, bounds = tile_ptx(options.dtype, options.block)
    if options.keep:
        os.makedirs(options.keep, exist_ok=True)
    info = ptxas_info(ptx, options.keep)
    registers = int(re.search(r"Used (\d+) registers", info).group(1))
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    stack = re.search(r"(\d+) bytes stack frame", info)
    resident = min(65536 // (256 * registers), 8)
    print(f"tile kernel, {options.dtype} sum, {options.block}, two_pass, launch bounds "
          f"{bounds}: {registers} registers, spill stores/loads "
          f"{spills.group(1) if spills else '?'} / {spills.group(2) if spills else '?'} "
          f"bytes, stack {stack.group(1) if stack else '?'} bytes; {resident} blocks of "
          f"256 a multiprocessor")


if __name__ == "__main__":
    main()
