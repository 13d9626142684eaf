"""The PTX (and, where ptxas and nvdisasm are found, the sm_90 SASS) of the first-pass
kernels of float16 and bfloat16 reductions, built on a machine with or without a GPU.

    python bench/ptx_half.py [--keep DIR]

For the (16384, 8192) cases of ``bench_half.py -k reduction`` (sum, sum/mean/max of
rows) it plans each call as the API does (the op's kit, bfloat16 read through
``bfloat16.widen``, the layout, the launch), catches the first-pass launch instead of
running it, compiles that kernel for sm_90 (``numba.cuda.compile_ptx``) and prints:
which kernel and vector width, the global loads in the PTX, and from the SASS the
instructions of the hottest loop (the block loading most bytes) per element. A
thread's loop iteration reads 4 vectors of 8 elements, so 32 elements.

Without a GPU, numbakern is imported in GPU mode behind a fake driver probe and a fake
device of compute capability 9.0 with 132 multiprocessors (an H200): enough to plan
and compile, never to launch. NVVM and NVRTC must be loadable (``LD_LIBRARY_PATH``
to a CUDA toolkit's or the nvidia-* wheels' ``lib``); ``PTXAS`` and ``NVDISASM`` (or
PATH) for the SASS. A PTX newer than that ptxas takes is relabelled to its version.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

SHAPE = (16384, 8192)
ELEMENTS_PER_ITERATION = 32  # 4 vectors of 8 two-byte elements
CASES = [("sum", "sum", None, False), ("sum/rows", "sum", 1, False),
         ("mean/rows", "sum", 1, True), ("max/rows", "max", 1, False)]


def _gpu_mode_without_a_gpu() -> None:
    """Import numbakern in GPU mode where the driver finds no GPU (compile only)."""
    os.environ["NUMBAKERN_SIMULATOR"] = "0"
    real = ctypes.CDLL

    class FakeDriver:
        def cuInit(self, flags):
            return 0

        def cuDeviceGetCount(self, count):
            count._obj.value = 1
            return 0

    class FakeDevice:  # an H200's
        compute_capability, MULTIPROCESSOR_COUNT, id = (9, 0), 132, 0
        MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 232448
        MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 233472

    ctypes.CDLL = lambda name, *a, **k: FakeDriver() if "libcuda.so" in str(name) \
        else real(name, *a, **k)
    try:
        import numbakern.runtime.device as device
    finally:
        ctypes.CDLL = real
    import numba.cuda as cuda
    import numba.cuda.compiler as compiler
    import numba.cuda.dispatcher as dispatcher
    import numbakern.runtime.launch as launch

    import numba.cuda.cudadrv.nvrtc as nvrtc

    # The arch option is looked up through NVRTC, which NVVM alone does not need.
    nvrtc.find_closest_arch = lambda cc: cc
    import numba.cuda.cuda_paths as paths

    paths._get_nvrtc_path = lambda: None  # NVVM alone compiles; NVRTC may be absent
    device._multiprocessors = lambda i: FakeDevice.MULTIPROCESSOR_COUNT
    launch.current_device_id = lambda: 0
    cuda.get_current_device = compiler.get_current_device = \
        dispatcher.get_current_device = FakeDevice


def _has_gpu() -> bool:
    """Whether the CUDA driver reports a device (ctypes only: numbakern is imported
    after this decides how)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 \
            and count.value > 0
    except (OSError, AttributeError):
        return False


def first_pass(op_name: str, dtype: str, axis, mean: bool):
    """``(layout, kernel, args)`` of the first-pass launch of the call."""
    import numpy as np

    from numbakern import ops
    from numbakern.api import reductions
    from numbakern.core.layout import reduce_layout
    from numbakern.kernels import axis_reduce, bfloat16, flat_reduce
    from numbakern.kernels.emits import emit_store
    from numbakern.ops.state import state_kit
    from numbakern.runtime.launch import DeviceBuffer

    op = {"sum": ops.SUM, "max": ops.MAX}[op_name]
    in_dtype = np.dtype(np.float32 if dtype == "bfloat16" else dtype)  # BFloat16Input's
    acc = ops.numpy_mean_dtypes(in_dtype)[0] if mean else None
    setup = reductions._setup(op, None, acc, in_dtype, SHAPE, axis, False, None)
    kit = state_kit(op, setup.kit.dtypes, read=bfloat16.widen) if dtype == "bfloat16" \
        else setup.kit
    stored = np.dtype(np.uint16 if dtype == "bfloat16" else dtype)
    x = DeviceBuffer(1 << 40, SHAPE, (SHAPE[1] * 2, 2), stored)
    layout = reduce_layout(x, setup.axes, kit, False, None, False, 0, None)
    plan = layout.plan(setup.grid.block, None)
    out = DeviceBuffer(1 << 41, (plan.pieces * layout.outputs,), (4,), np.float32)
    caught = []
    saved = flat_reduce.launch, axis_reduce.launch
    flat_reduce.launch = axis_reduce.launch = lambda k, g, b, s, *a: caught.append((k, a))
    try:
        layout.run(plan, layout.emit_partial(plan) if plan.pieces > 1 else emit_store(kit),
                   (out, out), 0)
    finally:
        flat_reduce.launch, axis_reduce.launch = saved
    return layout, plan, kit, *caught[0]


def ptx_of(kernel, args) -> str:
    from numba import cuda

    from numbakern.runtime.launch import _signature, flatten

    return cuda.compile_ptx(kernel.py_func, _signature(flatten(args)[0]), cc=(9, 0))[0]


def _tool(name: str):
    return os.environ.get(name.upper()) or shutil.which(name)


def sass_of(ptx: str, workdir: str) -> str | None:
    ptxas, nvdisasm = _tool("ptxas"), _tool("nvdisasm")
    if not (ptxas and nvdisasm):
        return None
    source, cubin = os.path.join(workdir, "k.ptx"), os.path.join(workdir, "k.cubin")
    for attempt in range(2):
        with open(source, "w") as f:
            f.write(ptx)
        run = subprocess.run([ptxas, "-arch=sm_90", "-O3", source, "-o", cubin],
                             capture_output=True, text=True, check=False)
        known = re.search(r"current version is '([\d.]+)'", run.stderr)
        if run.returncode == 0 or not known or attempt:
            break
        ptx = re.sub(r"^\.version [\d.]+", f".version {known.group(1)}", ptx, flags=re.MULTILINE)
    if run.returncode:
        return None
    return subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True,
                          check=False).stdout


_LOAD_BYTES = ((".128", 16), (".64", 8), (".U16", 2), (".S16", 2), (".U8", 1), (".S8", 1))


def _loaded_bytes(instruction: str) -> int:
    if not instruction.startswith("LDG"):
        return 0
    return next((n for tag, n in _LOAD_BYTES if tag in instruction.split()[0]), 4)


def hottest_loop(sass: str) -> collections.Counter:
    """Opcode counts of the basic block that loads the most bytes (the main loop)."""
    blocks, current = [], []
    for line in sass.splitlines():
        if re.match(r"^\s*\.L_x_\d+:", line):
            blocks.append(current)
            current = []
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m:
            current.append(re.sub(r"^@!?U?P\w+\s+", "", m.group(1).strip()))
    blocks.append(current)
    best = max(blocks, key=lambda b: sum(map(_loaded_bytes, b)))
    return collections.Counter(i.split()[0] for i in best if not i.startswith("NOP"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="write each kernel's PTX (and SASS) here")
    options = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not _has_gpu():
        _gpu_mode_without_a_gpu()
    with tempfile.TemporaryDirectory() as workdir:
        for name, op, axis, mean in CASES:
            for dtype in ("float16", "bfloat16"):
                layout, plan, kit, kernel, args = first_pass(op, dtype, axis, mean)
                ptx = ptx_of(kernel, args)
                loads = collections.Counter(re.findall(r"\bld\.global[.\w]*", ptx))
                line = (f"{name:9s} {dtype:8s} {type(layout).__name__}/"
                        f"{kernel.py_func.__name__} kit#{id(kit) % 10000:04d} "
                        f"{plan.blocks}x{plan.block.threads}: PTX "
                        f"{dict(loads)}")
                sass = sass_of(ptx, workdir)
                if sass:
                    ops_ = hottest_loop(sass)
                    total = sum(ops_.values())
                    loads_ = {k: v for k, v in ops_.items() if k.startswith("LDG")}
                    line += (f" | SASS loop {total} instructions, {loads_}, "
                             f"{total / ELEMENTS_PER_ITERATION:.2f} an element")
                print(line)
                if options.keep:
                    os.makedirs(options.keep, exist_ok=True)
                    stem = os.path.join(options.keep, f"{name.replace('/', '_')}_{dtype}")
                    with open(stem + ".ptx", "w") as f:
                        f.write(ptx)
                    if sass:
                        with open(stem + ".sass", "w") as f:
                            f.write(sass)


if __name__ == "__main__":
    main()
