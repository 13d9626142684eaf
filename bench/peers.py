"""numbakern beside every peer a user would pick instead, as one markdown table.

    PYTHONPATH=/tmp/site python3 bench/peers.py --json peers.json   # on a GPU host
    PYTHONPATH=/tmp/site python3 bench/peers.py --quick             # smoke test: small sizes

The peers, each where it is installed and has the case: CuPy; PyTorch eager (on the
same memory, ``torch.as_tensor``); for softmax, ``torch.compile`` of ``torch.softmax``
and the fused softmax of Triton's tutorial 02 (one program per row,
``numbakern.teach.peers``); and CCCL's ``cuda.compute`` (CUB's device-wide reduce,
radix sort and scan, built-in operators) for whole-array sums, sorts and cumsums.

Each case is a whole call on CuPy float32 input drawn from ``cp.random.default_rng(0)``
(the case names any other dtype), timed by CUDA events: the median of 30 calls after
2 warm-ups (``bench/ab.py``'s ``event_ms``). Before that each result is checked
against the reference, the first peer that ran (CuPy's): exactly for integers,
indices and sorts, and for float32 sums and cumsums, whose inputs are small integers
(``small_integers``: every partial sum exact, so one lost element shows); means
within an ulp; softmax within ``allclose``'s default,
histogram counts within a millionth of the elements (an element on a bin's edge falls
either side in float32). The checks run on the device: results reach 1.6 GB. A
result that fails is reported WRONG and not timed; a peer that raises is n/a.

The first row is a device-to-device copy of 2^28 float32 (``cudaMemcpyAsync``): its
bandwidth, bytes read + written, is what a memory-bound call cannot pass. The last
rows are host time, microseconds per call of a tiny call (``bench/host_time.py``'s
``per_call_us``: 2000 calls, synchronised once at the end), numbakern on CuPy input
and on a torch tensor, beside CuPy's and torch's own call.

``ratio``: the best peer's time / numbakern's (> 1: numbakern is faster).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from os.path import dirname
from typing import Callable

import numpy as np

sys.path.insert(0, dirname(__file__))
from ab import event_ms  # noqa: E402
from checks import assert_close  # noqa: E402
from host_time import per_call_us  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)


@dataclass
class Libs:
    """The run's libraries; a peer's module is None where it is not installed."""

    cp: object
    nk: object
    peers: object  # numbakern.teach.peers: Triton's softmax, torch.compile, cuda.compute
    names: tuple  # the installed peers, in the table's order
    torch: object = None
    compute: object = None


def libraries() -> Libs:
    import cupy as cp

    import numbakern as nk
    from numbakern.teach import peers
    from numbakern.teach.compare import installed_peers

    names = installed_peers()
    torch = importlib.import_module("torch") if "torch" in names else None
    compute = importlib.import_module("cuda.compute") if "cuda.compute" in names else None
    return Libs(cp, nk, peers, names, torch, compute)


@dataclass
class Case:
    """One row: numbakern's call, each peer's, and how a result is held to the
    reference's: ``tol(want)`` -> allowed ``|got - want|``, or None for equal."""

    name: str
    numbakern: Callable
    peers: dict = field(default_factory=dict)
    tol: Callable | None = None


def normal(cp, shape, dtype="float32"):
    return cp.random.default_rng(0).standard_normal(shape, dtype=dtype)


def small_integers(cp, shape, dtype="float32"):
    """Integers in [-8, 8] (seed 0) as ``dtype``: every partial sum of up to 2^30 of them
    (a random walk of about 2^17 at most) is exact in float32, in any order, so a sum or
    a scan is checked exactly and one lost or doubled element shows (a float bound on
    normals lets through a lost tile of thousands)."""
    return cp.random.default_rng(0).integers(-8, 9, shape, dtype=cp.int32).astype(dtype)


def _torch_peers(lib: Libs, x, call: Callable) -> dict:
    """``{"torch": call(t)}`` on ``x``'s memory as a tensor, where torch is installed."""
    if lib.torch is None:
        return {}
    t = lib.torch.as_tensor(x, device="cuda")
    return {"torch": lambda: call(t)}


def _input(lib: Libs, x, via_torch: bool):
    """numbakern's input: the CuPy array, or the same memory as a torch tensor."""
    return lib.torch.as_tensor(x, device="cuda") if via_torch else x


def reduction(lib: Libs, name: str, fn: str, shape, axis=None, via_torch=False) -> Case:
    """``sum`` or ``mean`` of float32 small integers (cuda.compute: the whole-array sum):
    sums exact, means within an ulp (a division or a multiply by the reciprocal)."""
    cp = lib.cp
    x = small_integers(cp, shape)
    kw, dim = ({}, {}) if axis is None else ({"axis": axis}, {"dim": axis})
    peers = {"cupy": lambda: getattr(cp, fn)(x, **kw),
             **_torch_peers(lib, x, lambda t: getattr(lib.torch, fn)(t, **dim))}
    if lib.compute and fn == "sum" and axis is None:
        peers["cuda.compute"] = lambda: lib.peers.cccl_reduce(lib.compute, x, "sum")
    a = _input(lib, x, via_torch)
    tol = (lambda want: EPS32 * abs(want)) if fn == "mean" else None  # noqa: E731
    return Case(name, lambda: getattr(lib.nk, fn)(a, **kw), peers, tol)


def argmax(lib: Libs, name: str, n: int, via_torch=False) -> Case:
    x = normal(lib.cp, n)
    a = _input(lib, x, via_torch)
    return Case(name, lambda: lib.nk.argmax(a),
                {"cupy": lambda: lib.cp.argmax(x),
                 **_torch_peers(lib, x, lambda t: lib.torch.argmax(t))})


def softmax(lib: Libs, name: str, shape, via_torch=False) -> Case:
    """Softmax of each row (the last axis)."""
    from cupyx.scipy.special import softmax as cupyx_softmax

    x = normal(lib.cp, shape)
    peers = {"cupy": lambda: cupyx_softmax(x, axis=-1),
             **_torch_peers(lib, x, lambda t: lib.torch.softmax(t, -1))}
    t = lib.torch.as_tensor(x, device="cuda") if lib.torch else None
    if "torch.compile" in lib.names:
        peers["torch.compile"] = lambda: lib.peers.compiled_softmax(lib.torch, t)
    if "triton" in lib.names:
        peers["triton"] = lambda: lib.peers.triton_softmax(lib.torch, t)
    a = _input(lib, x, via_torch)
    return Case(name, lambda: lib.nk.softmax(a), peers,
                lambda want: 1e-8 + 1e-5 * lib.cp.abs(want))


def sort(lib: Libs, name: str, x) -> Case:
    # torch has no sort of values alone: torch.sort (msort too) writes the indices as
    # well, which a user who wants the values pays for
    peers = {"cupy": lambda: lib.cp.sort(x),
             **_torch_peers(lib, x, lambda t: lib.torch.sort(t).values)}
    if lib.compute:
        peers["cuda.compute"] = lambda: lib.peers.cccl_sort(lib.compute, x)
    return Case(name, lambda: lib.nk.sort(x), peers)


def histogram(lib: Libs, name: str, n: int) -> Case:
    """100 bins on [0, 1] of uniform float32 (``torch.histc``'s counts are float32,
    exact to 2^24 a bin)."""
    x = lib.cp.random.default_rng(0).random(n, dtype="float32")
    peers = {"cupy": lambda: lib.cp.histogram(x, bins=100, range=(0, 1))[0],
             **_torch_peers(lib, x, lambda t: lib.torch.histc(t, bins=100, min=0, max=1))}
    return Case(name, lambda: lib.nk.histogram(x, 100, range=(0, 1))[0], peers,
                lambda want: 1e-6 * n)


def cumsum(lib: Libs, name: str, x, via_torch=False) -> Case:
    """Inclusive sum; int32 sums to int64 in numbakern, CuPy (asked), torch and
    cuda.compute alike."""
    cp = lib.cp
    wide = cp.int64 if x.dtype.kind == "i" else None
    peers = {"cupy": lambda: cp.cumsum(x, dtype=wide),
             **_torch_peers(lib, x, lambda t: lib.torch.cumsum(t, 0))}
    if lib.compute:
        peers["cuda.compute"] = lambda: lib.peers.cccl_cumsum(lib.compute, x)
    a = _input(lib, x, via_torch)
    return Case(name, lambda: lib.nk.cumsum(a), peers)  # integers, or small ones as floats


def device_cases(lib: Libs, quick: bool):
    """The timed cases, each built when reached (its input freed before the next's)."""
    cp = lib.cp
    big = 20 if quick else 28
    for k in (10, 20) if quick else (10, 20, 24, 28, 30):
        yield reduction(lib, f"sum 2^{k}", "sum", 1 << k)
    for k in (10, 20) if quick else (10, 20, 24, 28):
        yield argmax(lib, f"argmax 2^{k}", 1 << k)
    for k in (20,) if quick else (24, 28):
        yield reduction(lib, f"mean 2^{k}", "mean", 1 << k)
    rows, cols = (256, 4096) if quick else (32768, 4096)
    yield reduction(lib, f"mean axis 0 ({rows}, {cols})", "mean", (rows, cols), axis=0)
    if not quick:
        yield reduction(lib, "sum axis 0 (4096, 32768)", "sum", (4096, 32768), axis=0)
        yield reduction(lib, "sum axis 1 (256, 1024, 1024)", "sum", (256, 1024, 1024), axis=1)
    shapes = [(1823, 781), (65536, 128)]
    shapes += [] if quick else [(32768, 4096), (4096, 32768), (8192, 50257)]
    for shape in shapes:
        yield softmax(lib, f"softmax {shape}", shape)
    yield sort(lib, f"sort 2^{big}", normal(cp, 1 << big))
    yield sort(lib, f"sort uint32 2^{big}", cp.random.default_rng(0).integers(
        0, 1 << 32, 1 << big, dtype=cp.int64).astype(cp.uint32))  # every key as likely
    yield sort(lib, f"sort float64 2^{big - 2}", normal(cp, 1 << (big - 2), "float64"))
    yield histogram(lib, f"histogram 2^{big}, 100 bins", 1 << big)
    yield cumsum(lib, f"cumsum 2^{big}", small_integers(cp, 1 << big))
    yield cumsum(lib, f"cumsum int32 2^{big} (int64 result)",
                 cp.random.default_rng(0).integers(0, 1 << 20, 1 << big, dtype=cp.int32))


def host_cases(lib: Libs):
    """Tiny calls, numbakern on CuPy input and (where torch is) on a torch tensor,
    beside CuPy's and torch's own calls only."""
    for via in ["CuPy"] + (["torch"] if lib.torch else []):
        on_torch, where = via == "torch", f"{via} input"
        for case in (reduction(lib, f"host: sum 2^10, {where}", "sum", 1 << 10, None, on_torch),
                     reduction(lib, f"host: mean 2^10, {where}", "mean", 1 << 10, None,
                               on_torch),
                     argmax(lib, f"host: argmax 2^10, {where}", 1 << 10, on_torch),
                     cumsum(lib, f"host: cumsum 2^10, {where}",
                            small_integers(lib.cp, 1 << 10), on_torch),
                     softmax(lib, f"host: softmax (64, 16), {where}", (64, 16), on_torch)):
            case.peers = {p: fn for p, fn in case.peers.items() if p in ("cupy", "torch")}
            yield case


def run_case(lib: Libs, case: Case, timer: Callable) -> dict:
    """The case's row: numbakern's and each peer's time by ``timer``, or why none.

    Every call runs once first (compiling what it compiles); its result is then
    checked against the reference (the first peer that ran) before it is timed.
    """
    calls = {"numbakern": case.numbakern, **case.peers}
    got, row = {}, {"case": case.name}
    for name, fn in calls.items():
        try:
            got[name] = fn()
        except Exception as exc:  # a peer without this case, or a failure: reported
            row[name] = "error" if name == "numbakern" else "n/a"
            print(f"{case.name}: {name} raised {type(exc).__name__}: {exc}", file=sys.stderr)
    ref = next((p for p in case.peers if p in got), None)
    for name in list(got):
        if ref is not None and name != ref:
            try:
                want = got[ref]  # a peer's result: a NaN in both is not agreement
                assert_close(lib.cp, got[name], want, atol=0.0 if case.tol is None else
                             case.tol(want), equal_nan=False)
            except AssertionError as exc:
                row[name] = "WRONG"
                print(f"{case.name}: {name} WRONG against {ref}: {exc}", file=sys.stderr)
                continue
        row[name] = timer(calls[name])
    return row


def run_all(lib: Libs, cases, timer: Callable, rows: list) -> None:
    """Run each case as it is built, its row to ``rows``, freeing its memory after."""
    for case in cases:
        rows.append(run_case(lib, case, timer))
        print(rows[-1], file=sys.stderr, flush=True)
        del case
        lib.peers.give_back_memory()


def copy_row(lib: Libs, n: int) -> dict:
    """A device-to-device copy of ``n`` float32 (``cudaMemcpyAsync``), in the cupy
    column; the case names its bandwidth, bytes read + written."""
    cp = lib.cp
    src = normal(cp, n)
    dst = cp.empty_like(src)
    ms = event_ms(cp, lambda: dst.data.copy_from_device_async(src.data, src.nbytes))
    gbps = 2 * src.nbytes / ms / 1e6
    return {"case": f"copy 2^{n.bit_length() - 1} device to device: {gbps:,.0f} GB/s "
                    "(read + written)", "cupy": ms, "gbps": gbps, "no_best": True}


def markdown(rows: list, peers: tuple, device: str) -> str:
    """The table: a column per installed peer; best peer and ratio per case."""
    def cell(v):
        return "" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)

    head = ["case", "numbakern", *peers, "best peer", "ratio"]
    lines = [f"{device}: CUDA-event medians of whole calls in ms (host rows: us per call); "
             "float32 unless named; ratio = best peer / numbakern (> 1: numbakern faster)",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        timed = {p: r[p] for p in peers if isinstance(r.get(p), float)}
        best = min(timed, key=timed.get) if timed and not r.get("no_best") else ""
        mine = r.get("numbakern")
        ratio = f"{timed[best] / mine:.2f}" if best and isinstance(mine, float) else ""
        cells = [r["case"], cell(mine), *(cell(r.get(p)) for p in peers), best, ratio]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and 200 host calls: a smoke test")
    parser.add_argument("-k", default="", help="only the cases whose name holds this")
    args = parser.parse_args()
    if importlib.util.find_spec("cupy") is None:  # whole calls on a GPU, on CuPy input
        parser.error("needs CuPy on a GPU host")
    lib = libraries()
    cp = lib.cp
    device = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    rows = [copy_row(lib, 1 << (24 if args.quick else 28))]
    lib.peers.give_back_memory()
    calls = 200 if args.quick else 2000
    def chosen(cases):
        return (c for c in cases if args.k in c.name)

    run_all(lib, chosen(device_cases(lib, args.quick)),
            lambda fn: event_ms(cp, fn, warmup=2, repeat=30), rows)
    run_all(lib, chosen(host_cases(lib)),
            lambda fn: per_call_us(fn, cp.cuda.runtime.deviceSynchronize, calls), rows)
    print(markdown(rows, lib.names, device))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "peers": list(lib.names), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
