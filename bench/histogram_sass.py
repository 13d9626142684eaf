"""SASS of the float histogram's counting kernel, built without a GPU.

    python bench/histogram_sass.py [--dtype float32] [--bins 100] [--range 0 1] [--counts]
                                   [--keep DIR]

Plans ``numbakern.histogram(x, bins, range=...)`` as the API does (its binner and
default strategy), compiles the counting kernel it would launch for sm_90
(``numba.cuda.compile_ptx`` behind ``ptx_half.py``'s fake driver and device), and,
where ``ptxas`` and ``nvdisasm`` are found (``PTXAS=``, ``NVDISASM=`` or PATH),
prints its registers and the SASS of its main loop: instructions, float64 ones
(``D*``, ``F2F.F64``/``F2I.*F64``, ``I2F.F64``), loads and shared atomics, per element
(the loop counts ``UNROLL`` elements a trip; 1 before the unrolled kernel), counting
every instruction of the loop, its rarely taken paths too (read ``--keep``'s SASS for
the path an element takes). NVVM must
be loadable (``LD_LIBRARY_PATH`` to a CUDA toolkit's ``lib``). Not a test.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import ptx_half


def _instructions(sass: str) -> list[tuple[int, str]]:
    """``(address, text)`` of each SASS instruction (predicates dropped), with
    ``(-1, label)`` entries where a label stands."""
    out = []
    for line in sass.splitlines():
        label = re.match(r"^\s*(\.L_x_\d+):", line)
        if label:
            out.append((-1, label.group(1)))
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            out.append((int(m.group(1), 16), re.sub(r"^@!?U?P\w+\s+", "", m.group(2).strip())))
    return out


def main_loop(sass: str) -> list[str]:
    """The instructions of the loop (a label and a branch back to it) with the most
    global loads: every instruction between them, rarely taken paths included."""
    code = _instructions(sass)
    labels = {text: k for k, (addr, text) in enumerate(code) if addr < 0}
    loops = []
    for k, (addr, text) in enumerate(code):
        target = re.search(r"BRA\s+`\((\.L_x_\d+)\)", text)
        if target and labels.get(target.group(1), k) < k:
            loops.append([t for a, t in code[labels[target.group(1)]:k + 1] if a >= 0])
    return max(loops, key=lambda body: (sum(t.startswith("LDG") for t in body), len(body)))


def _float64(op: str) -> bool:
    return bool(re.match(r"^(D[A-Z]+|MUFU\.\w*64\w*)", op)) or ".F64" in op


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--bins", type=int, default=100)
    parser.add_argument("--range", type=float, nargs=2, default=(0.0, 1.0))
    parser.add_argument("--counts", action="store_true",
                        help="histogram_counts's kernel instead (integer input, value = bin)")
    parser.add_argument("--keep", help="write the PTX and SASS here")
    options = parser.parse_args()
    if not ptx_half._has_gpu():
        ptx_half._gpu_mode_without_a_gpu()
    import numpy as np
    from numba import cuda, from_dtype, types

    from numbakern.core.bins import TABLE_ITEMSIZE, BinRule, int_binner, table_binner
    from numbakern.kernels import counting
    from numbakern.kernels.counting import build_histogram_kernel
    from numbakern.strategies import resolve

    UNROLL = getattr(counting, "UNROLL", 1)
    dtype = np.dtype(options.dtype)
    rule = None if options.counts else BinRule(dtype, options.bins, tuple(options.range))
    (bin_of, key, read_dtype), aux = (int_binner(dtype, options.bins), np.zeros(1, np.int64)) \
        if options.counts else table_binner(dtype, rule) \
        if dtype.itemsize <= TABLE_ITEMSIZE else \
        (rule.device(dtype) if hasattr(rule, "device") else (rule.binner(dtype), rule.aux()))
    strategy = resolve("histogram", None, bins=options.bins)
    kernel = build_histogram_kernel(strategy, options.bins, bin_of)
    array = lambda d: types.Array(from_dtype(np.dtype(d)), 1, "C")
    signature = (array(read_dtype), types.int64, array(aux.dtype), array(np.int64))
    bounds = counting.launch_bounds(strategy.threads) if hasattr(counting, "launch_bounds") \
        else None
    ptx = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0), launch_bounds=bounds)[0]
    what = "histogram_counts" if options.counts else f"histogram on {tuple(options.range)}"
    print(f"{what} {dtype} {options.bins} bins: "
          f"{strategy!r}, binner {key[0]}, unroll {UNROLL}")
    with tempfile.TemporaryDirectory() as workdir:
        sass = ptx_half.sass_of(ptx, workdir)
        if options.keep:
            os.makedirs(options.keep, exist_ok=True)
            for name, text in (("k.ptx", ptx), ("k.sass", sass or "")):
                with open(os.path.join(options.keep, name), "w") as f:
                    f.write(text)
        if sass is None:
            print("(ptxas or nvdisasm not found: PTX only)")
            return
        source = os.path.join(workdir, "k.ptx")  # as sass_of left it (its .version)
        info = subprocess.run([ptx_half._tool("ptxas"), "-arch=sm_90", "-O3", "-v", source,
                               "-o", os.path.join(workdir, "k.cubin")],
                              capture_output=True, text=True, check=False).stderr
    registers = re.search(r"Used (\d+) registers", info)
    loads = lambda b: sum(1 for s in b if s.startswith("LDG"))
    body = main_loop(sass)
    ops = collections.Counter(s.split()[0] for s in body if not s.startswith("NOP"))
    total = sum(ops.values())
    f64 = {k: v for k, v in ops.items() if _float64(k)}
    per = lambda c: f"{c / UNROLL:.1f}"
    print(f"  {registers.group(1) if registers else '?'} registers; main loop "
          f"{total} SASS ({per(total)} an element), float64 {sum(f64.values())} "
          f"({per(sum(f64.values()))} an element: {dict(f64)}), "
          f"LDG {per(loads(body))}, "
          f"ATOMS {per(sum(v for k, v in ops.items() if k.startswith('ATOMS')))} an element")
    print("  " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))


if __name__ == "__main__":
    main()
