"""SASS counts of the decoupled look-back scan kernel, built without a GPU.

    python bench/scan_sass.py [--dtype float32] [--in-dtype int32] [--plain]
                              [--items N] [--hold shared|registers] [--keep FILE]
                              [--ptx FILE]

``--dtype`` is the state's (``int64`` with ``--in-dtype int32``: NumPy's int32
cumsum); ``--keep`` writes the plain kernel's SASS, ``--ptx`` its PTX (the vector
tile's: ``FILE`` with ``.vector`` before the suffix). Set ``PYTHONPATH`` to the
checkout (the script inserts its parent directory too) and ``LD_LIBRARY_PATH`` to a
toolkit's NVVM (``/tmp/cudasite/nvidia/cu13/lib`` on the build host;
``/usr/local/cuda-13.0/lib`` with ``CUDA_HOME=/usr/local/cuda-13.0`` where a toolkit
is installed; ``NVDISASM`` names an nvdisasm outside it).

Compiles the look-back kernel of a plain sum scan (with scalar tiles and with vector
tiles: ``scan_tiles.Vectors``, 16-byte loads and stores of contiguous aligned rows)
and of a segmented sum scan (``(int8 flags, value)`` states) to PTX for sm_90 with
``cuda.compile_ptx`` (the driver probe, the current device and NVRTC's architecture list
faked: nothing runs), then, where the CUDA toolkit's ``ptxas`` and ``nvdisasm`` are
found (``$CUDA_HOME/bin``, ``PATH``, or the ``NVDISASM`` variable), assembles each and
prints its registers, SASS instruction count, branches, shared-memory accesses, the
widths of the global loads and stores, fences and global atomics; without them, the
PTX's instruction count and its 16-byte global loads and stores. bench/NOTES.md's table
of the segmented scan's kernel (2026-12-02) came from this script. Not a test.
"""
import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

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
from numbakern.kernels.scan_tiles import (Vectors, auto_items, element_loader,  # noqa: E402
                                         narrows, output_storer)
from numbakern.kernels.segment_scan import head_loader  # noqa: E402
from numbakern.ops.segmented import FLAG_DTYPE, segmented  # noqa: E402
from numbakern.ops.state import state_kit  # noqa: E402
from numbakern.strategies import WarpShuffle  # noqa: E402
from numbakern.strategies import decoupled_lookback as lookback  # noqa: E402


def _array(dtype, ndim, layout="A"):
    return types.Array(from_dtype(np.dtype(dtype)), ndim, layout)


def kernel_ptx(segmented_scan: bool, dtype: np.dtype, items: int | None, hold: str,
               in_dtype: np.dtype | None = None, vectors: bool = False):
    """``(items, ptx)`` of the look-back kernel over 3-D views, 256 threads; ``in_dtype``
    (plain scans): an input narrower than the state (int32 read, int64 summed);
    ``vectors`` (plain scans): the vector tile's kernel (``None`` where ``items`` is not
    a multiple of the vectors' lanes), which takes 1-D spans for the second handles."""
    in_dtype = dtype if in_dtype is None or segmented_scan else in_dtype
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
    if lookback._packs(kit) or lookback._pairs(kit):  # values in the status words
        status = _array(np.uint64, 1, "C")
        values = (status,) * 4
    else:
        status = _array(np.uint32, 1, "C")
        words = [_array(lookback._word_dtype(d), 1, "C") for d in kit.dtypes]
        values = (words[0], words[-1], words[0], words[-1])
    value_bytes = dtype.itemsize if segmented_scan else \
        in_dtype.itemsize if in_dtype.itemsize < dtype.itemsize else None  # as ScanJob's
    items = items or auto_items(sum(d.itemsize for d in kit.dtypes), block.threads, value_bytes)
    plan = None
    if vectors:
        narrow = in_dtype.str if narrows(in_dtype, dtype.itemsize, hold) else None
        plan = Vectors(16 // in_dtype.itemsize, 16 // dtype.itemsize, dtype.str, narrow)
        if items % plan.load or items % plan.store:
            return items, None
    kernel = lookback._build(block, kit, items, load, store, False, kit.identity_values, True,
                             hold, 1, vectors=plan)
    out_second = _array(dtype, 3)
    if not segmented_scan:
        second = _array(in_dtype, 3)
    if plan is not None:  # the spans in place of the second handles
        second, out_second = _array(in_dtype, 1, "C"), _array(dtype, 1, "C")
    signature = (_array(in_dtype, 3), second, _array(dtype, 3), out_second, types.int64,
                 types.int64, status, *values, types.int64)  # NO_CARRY: no initial carry
    return items, cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))[0]


def _tool(name: str):
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    found = os.environ.get(name.upper()) or shutil.which(name)
    if found is None and os.path.exists(os.path.join(home, "bin", name)):
        found = os.path.join(home, "bin", name)
    return found


def ptx_counts(ptx: str) -> str:
    """The PTX's instructions (lines ending in ``;`` inside the kernel, declarations
    left out), its 16-byte global loads and stores (``.v4`` of 32-bit lanes, ``.v2``
    of 64-bit) and its local-memory accesses."""
    body = ptx[ptx.index("{"):]
    lines = [t for t in (s.strip() for s in body.splitlines())
             if t.endswith(";") and not t.startswith((".reg", ".shared", ".local", "//"))]
    wide = r"\.global(\.[a-z]+)*\.(v4\.[bfsu]32|v2\.[bfsu]64)\b"
    loads = sum(1 for t in lines if re.match(r"ld" + wide, t))
    stores = sum(1 for t in lines if re.match(r"st" + wide, t))
    local = sum(1 for t in lines if re.match(r"(ld|st)\.local", t))
    return (f"PTX {len(lines)} instructions, {loads} 16-byte global loads, {stores} "
            f"16-byte global stores, {local} local")


def sass_counts(ptx: str, keep: str | None = None) -> str:
    ptxas, nvdisasm = _tool("ptxas"), _tool("nvdisasm")
    if ptxas is None:
        return "(ptxas not found: PTX only)"
    if nvdisasm is None:
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "k.ptx")
            with open(src, "w") as f:
                f.write(ptx)
            info = subprocess.run([ptxas, "-arch=sm_90", "-O3", "-v", src, "-o",
                                   os.path.join(tmp, "k.cubin")],
                                  capture_output=True, text=True, check=True).stderr
        registers = re.search(r"Used (\d+) registers", info).group(1)
        spills = re.search(r"(\d+) bytes spill stores", info)
        spilled = spills.group(1) if spills else "?"
        return f"{registers} registers ({spilled} bytes spilled; nvdisasm not found)"
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        info = subprocess.run([ptxas, "-arch=sm_90", "-O3", "-v", src, "-o", cubin],
                              capture_output=True, text=True, check=True).stderr
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True,
                              check=True).stdout
    if keep:
        with open(keep, "w") as f:
            f.write(sass)
    registers = re.search(r"Used (\d+) registers", info).group(1)
    spills = re.search(r"(\d+) bytes spill stores", info)
    registers += f" ({spills.group(1) if spills else '?'} bytes spilled)"
    lines = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(.*)$", sass, re.M)
    count = lambda word: sum(1 for s in lines if re.search(rf"\b{word}\b", s))  # noqa: E731
    has = lambda word: sum(1 for s in lines if word in s)  # noqa: E731
    widths = lambda op: ",".join(  # noqa: E731
        f"{w or '32'}:{n}" for w, n in sorted(_widths(lines, op)))
    return (f"{registers} registers, {len(lines)} SASS, {count('BRA')} BRA, "
            f"{has('LDS')} LDS, {has('STS')} STS, "
            f"global loads {widths('LD')}, stores {widths('ST')} (bits:count), "
            f"MEMBAR.SC {has('MEMBAR.SC')}, MEMBAR.ALL {has('MEMBAR.ALL')}, "
            f"ATOMG {has('ATOMG')}")


def _widths(lines, op: str):
    """``{(width, count)}`` of the global (``LDG``/``STG``) and generic (``LD``/``ST``)
    accesses by their width suffix (``.64``, ``.128``; none: 32 bits)."""
    found = {}
    for s in lines:
        m = re.search(rf"\b{op}G?\.E[A-Z0-9.]*", s)
        if m is None:
            continue
        w = re.search(r"\.(64|128)\b", m.group(0))
        key = w.group(1) if w else ""
        found[key] = found.get(key, 0) + 1
    return found.items()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--in-dtype", default=None,
                        help="input dtype of the plain scan (default: --dtype)")
    parser.add_argument("--plain", action="store_true", help="the plain scan only")
    parser.add_argument("--keep", default=None, help="write the plain kernel's SASS here")
    parser.add_argument("--hold", default="shared", choices=["shared", "registers"])
    parser.add_argument("--ptx", default=None, help="write the plain kernels' PTX here")
    args = parser.parse_args()
    dtype = np.dtype(args.dtype)
    in_dtype = np.dtype(args.in_dtype) if args.in_dtype else dtype
    kinds = (("plain", False, False), ("vector", False, True))
    if not args.plain:
        kinds += (("segmented", True, False),)
    for name, seg, vectors in kinds:
        items, ptx = kernel_ptx(seg, dtype, args.items, args.hold, in_dtype, vectors)
        shown = f"{in_dtype}->{dtype}" if in_dtype != dtype and not seg else str(dtype)
        if ptx is None:
            print(f"{name:9s} {shown} items {items:2d}: items not a multiple of the lanes")
            continue
        if args.ptx and not seg:
            root, ext = os.path.splitext(args.ptx)
            with open(root + (".vector" if vectors else "") + ext, "w") as f:
                f.write(ptx)
        keep = None if seg or not args.keep else \
            args.keep if not vectors else "%s.vector%s" % os.path.splitext(args.keep)
        print(f"{name:9s} {shown} items {items:2d}: {sass_counts(ptx, keep)}; "
              f"{ptx_counts(ptx)}")


if __name__ == "__main__":
    main()
