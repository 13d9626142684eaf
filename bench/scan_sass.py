"""SASS counts of the decoupled look-back scan kernel, built without a GPU.

    python bench/scan_sass.py [--dtype float32] [--items N] [--hold shared|registers]

Compiles the look-back kernel of a plain sum scan and of a segmented sum scan
(``(int8 flags, value)`` states) to PTX for sm_90 with ``cuda.compile_ptx`` (the
driver probe, the current device and NVRTC's architecture list faked: nothing runs),
then, where the CUDA toolkit's ``ptxas`` and ``nvdisasm`` are found (``$CUDA_HOME/bin``,
``PATH``, or the ``NVDISASM`` variable), assembles each and prints its registers, SASS
instruction count, branches and shared-memory accesses. bench/NOTES.md's table of the
segmented scan's kernel (2026-12-02) came from this script. Not a test.
"""
import argparse
import ctypes
import os
import re
import shutil
import subprocess
import tempfile

_real_cdll = ctypes.CDLL


class _Driver:  # answers numbakern's probe only: one device
    def cuInit(self, flags):
        return 0

    def cuDeviceGetCount(self, count):
        count._obj.value = 1
        return 0


def _probe_once(name, *args, **kwargs):
    if name and "libcuda" in str(name):
        ctypes.CDLL = _real_cdll
        return _Driver()
    return _real_cdll(name, *args, **kwargs)


os.environ.pop("NUMBAKERN_SIMULATOR", None)
os.environ.setdefault("NUMBA_FORCE_CUDA_CC", "9.0")
ctypes.CDLL = _probe_once
import numbakern  # noqa: E402,F401  (GPU mode, on the faked probe)

ctypes.CDLL = _real_cdll
import numba.cuda.cuda_paths as _paths  # noqa: E402
import numba.cuda.dispatcher as _dispatcher  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda, from_dtype, types  # noqa: E402


class _Device:
    compute_capability = (9, 0)


_dispatcher.get_current_device = lambda: _Device()
_paths._get_nvrtc_path = lambda: None

from numbakern import ops  # noqa: E402
from numbakern.kernels.scan_tiles import auto_items, element_loader, output_storer  # noqa: E402
from numbakern.kernels.segment_scan import head_loader  # noqa: E402
from numbakern.ops.segmented import FLAG_DTYPE, segmented  # noqa: E402
from numbakern.ops.state import state_kit  # noqa: E402
from numbakern.strategies import WarpShuffle  # noqa: E402
from numbakern.strategies import decoupled_lookback as lookback  # noqa: E402


def _array(dtype, ndim, layout="A"):
    return types.Array(from_dtype(np.dtype(dtype)), ndim, layout)


def kernel_ptx(segmented_scan: bool, dtype: np.dtype, items: int | None, hold: str):
    """``(items, ptx)`` of the look-back kernel over 3-D views, 256 threads."""
    block = WarpShuffle()
    inner = state_kit(ops.SUM, (dtype,))
    if segmented_scan:
        op = segmented(ops.SUM, dtype.str)
        kit = state_kit(op, (FLAG_DTYPE, dtype))
        load = head_loader(inner, False, False)
        store = output_storer((dtype,), op.device_finish(), 2)
        second = _array(np.uint8, 3)
    else:
        kit, load, store = inner, element_loader(inner, False), output_storer((dtype,), None, 1)
        second = _array(dtype, 3)
    if lookback._packs(kit):
        status = _array(np.uint64, 1, "C")
        values = (status,) * 4
    else:
        status = _array(np.int32, 1, "C")
        words = [_array(lookback._word_dtype(d), 1, "C") for d in kit.dtypes]
        values = (words[0], words[-1], words[0], words[-1])
    value_bytes = dtype.itemsize if segmented_scan else None
    items = items or auto_items(sum(d.itemsize for d in kit.dtypes), block.threads, value_bytes)
    kernel = lookback._build(block, kit, items, load, store, False, kit.identity_values, True,
                             hold, 1)
    signature = (_array(dtype, 3), second, _array(dtype, 3), _array(dtype, 3), types.int64,
                 types.int64, status, *values)
    return items, cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))[0]


def _tool(name: str):
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    found = os.environ.get(name.upper()) or shutil.which(name)
    if found is None and os.path.exists(os.path.join(home, "bin", name)):
        found = os.path.join(home, "bin", name)
    return found


def sass_counts(ptx: str) -> str:
    ptxas, nvdisasm = _tool("ptxas"), _tool("nvdisasm")
    if ptxas is None or nvdisasm is None:
        return "(ptxas or nvdisasm not found: PTX only)"
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        info = subprocess.run([ptxas, "-arch=sm_90", "-O3", "-v", src, "-o", cubin],
                              capture_output=True, text=True, check=True).stderr
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True,
                              check=True).stdout
    registers = re.search(r"Used (\d+) registers", info).group(1)
    lines = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(.*)$", sass, re.M)
    count = lambda word: sum(1 for s in lines if re.search(rf"\b{word}\b", s))  # noqa: E731
    return (f"{registers} registers, {len(lines)} SASS, {count('BRA')} BRA, "
            f"{sum(1 for s in lines if 'LDS' in s)} LDS, {sum(1 for s in lines if 'STS' in s)} STS")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--hold", default="shared", choices=["shared", "registers"])
    args = parser.parse_args()
    dtype = np.dtype(args.dtype)
    for name, seg in (("plain", False), ("segmented", True)):
        items, ptx = kernel_ptx(seg, dtype, args.items, args.hold)
        print(f"{name:9s} {dtype} items {items:2d}: {sass_counts(ptx)}")


if __name__ == "__main__":
    main()
