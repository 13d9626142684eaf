"""A/B on a GPU: the row kernels of short softmax rows, each plan beside torch's kernel,
in one process, by CUDA events.

    python bench/short_rows_ab.py [--shapes 65536x128 1823x781] [--dtypes float32]
                                  [--kinds softmax log_softmax]

For each shape, dtype (float32, float16) and kind (softmax, log_softmax and their
backward passes), the plans the library can run over rows of that length
(``api.softmax._plan`` with its knobs: ``layout``, ``fused``, ``threads`` and
``lanes``, the lanes a row of the warp layout gets), each checked against torch's
result and timed alone:

* ``default``: what ``nk.softmax`` and kin choose (``RowPlan`` printed as
  ``lanes x per_thread`` for the warp layout, ``threads x per_thread`` for a block);
* ``warp``: a whole warp a row (the plan before runs of lanes);
* ``lanes=L``: a run of ``L`` lanes a row (``32 / L`` rows a warp), where it fits;
* ``block T``: a block of ``T`` threads (64, 128, 256) a row, fused (rows of 512 and
  more).

Kernel time: a spin kernel (``torch.cuda._sleep``) holds the stream while the host
queues 50 launches, so the events around them time the kernels back to back, not the
host's launch cost; microseconds a launch, the median of 5 such batches. torch's
kernel (``torch.softmax`` and ``torch.ops.aten._softmax_backward_data`` and kin on
the same tensors) is timed the same way. ``whole``: one whole ``nk`` call (host
included) against one torch call, median of 30, CUDA events, as ``bench/ab.py``.
"""

from __future__ import annotations

import argparse
import statistics

SHAPES = [(65536, 128), (1823, 781), (32768, 64), (16384, 256), (4096, 1024)]
DTYPES = ["float32", "float16"]
KINDS = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]
BATCH, BATCHES, SPIN = 50, 5, 20_000_000  # launches a batch; batches; spin cycles (~10 ms)


def variants(kind: str, n: int, dtype: str) -> list:
    """``(name, plan)`` for every plan above that the planner accepts."""
    from numbakern.api import softmax as api

    normalizer = None if kind.endswith("backward") else "auto"

    def plan(layout="auto", fused=None, threads=None, lanes=None):
        return api._plan(kind, n, dtype, normalizer, layout, fused, threads, None, None,
                         dtype, "", True, lanes)

    chosen = [("default", plan())]
    for name, kw in [("warp", dict(layout="warp", fused=True, lanes=32))] + \
            [(f"lanes={L}", dict(layout="warp", fused=True, lanes=L)) for L in (4, 8, 16)] + \
            [(f"block {T}", dict(layout="block", fused=True, threads=T))
             for T in (64, 128, 256) if n >= 512]:
        try:
            chosen.append((name, plan(**kw)))
        except ValueError:  # no fused plan of that shape holds the row
            pass
    return chosen


def describe(plan) -> str:
    if not plan.fused:
        return f"tiled {plan.layout} {plan.threads}"
    group = f"{plan.lanes}" if plan.layout == "warp" else f"block {plan.threads}"
    return f"{group}x{plan.per_thread}"


def kernel_us(torch, launch) -> float:
    """Microseconds a launch of ``launch()``, kernels back to back (module docstring)."""
    launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(BATCHES):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN)
        start.record()
        for _ in range(BATCH):
            launch()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / BATCH)
    return statistics.median(times)


def whole_us(torch, call) -> float:
    for _ in range(3):
        call()
    times = []
    for _ in range(30):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def torch_call(torch, kind: str, x, y, dy):
    aten = torch.ops.aten
    return {"softmax": lambda: torch.softmax(x, -1),
            "log_softmax": lambda: torch.log_softmax(x, -1),
            "softmax_backward": lambda: aten._softmax_backward_data(dy, y, -1, x.dtype),
            "log_softmax_backward": lambda: aten._log_softmax_backward_data(dy, y, -1,
                                                                            x.dtype)}[kind]


def nk_call(nk, kind: str, x, y, dy):
    return {"softmax": lambda: nk.softmax(x), "log_softmax": lambda: nk.log_softmax(x),
            "softmax_backward": lambda: nk.softmax_backward(y, dy),
            "log_softmax_backward": lambda: nk.log_softmax_backward(y, dy)}[kind]


def bits(torch, t):
    """A tensor as the kernels read it: bfloat16 as its uint16 bits (no copy), which
    is what ``RowPlan(dtype="bfloat16")`` kernels take; others as they are."""
    return t.view(torch.uint16) if t.dtype == torch.bfloat16 else t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=[f"{r}x{c}" for r, c in SHAPES])
    parser.add_argument("--dtypes", nargs="+", default=DTYPES)
    parser.add_argument("--kinds", nargs="+", default=KINDS)
    options = parser.parse_args()

    import torch
    from numba import cuda

    import numbakern as nk
    from numbakern.api import softmax as api
    from numbakern.runtime.views import device_view

    pointer = torch.cuda.current_stream().cuda_stream
    stream = cuda.external_stream(pointer) if pointer else cuda.default_stream()
    print(f"{'case':44s} {'torch':>7s}  {'default':>18s}  others (us a kernel; whole calls "
          "nk / torch)", flush=True)
    for text in options.shapes:
        rows, n = (int(v) for v in text.split("x"))
        for dtype in options.dtypes:
            gen = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(rows, n, device="cuda", generator=gen).mul_(3).to(getattr(torch,
                                                                                     dtype))
            dy = torch.randn(rows, n, device="cuda", generator=gen).to(x.dtype)
            for kind in options.kinds:
                backward = kind.endswith("backward")
                y = (torch.log_softmax if kind.startswith("log") else torch.softmax)(x, -1)
                want = torch_call(torch, kind, x, y, dy)().float()
                result = torch.empty_like(x)
                inputs = [y, dy] if backward else [x]
                views = [device_view(bits(torch, t).reshape(1, rows, n))
                         for t in [*inputs, result]]
                torch_us = kernel_us(torch, torch_call(torch, kind, x, y, dy))
                cells = []
                for name, plan in variants(kind, n, dtype):
                    result.zero_()
                    api._launch(plan, views, stream)
                    err = float((result.float() - want).abs().max())
                    us = kernel_us(torch, lambda plan=plan: api._launch(plan, views, stream))
                    cells.append(f"{name} {describe(plan)} {us:6.1f} ({torch_us / us:.2f}x, "
                                 f"err {err:.0e})")
                whole = (whole_us(torch, nk_call(nk, kind, x, y, dy)),
                         whole_us(torch, torch_call(torch, kind, x, y, dy)))
                print(f"{kind:20s} {text:>10s} {dtype:8s}   {torch_us:7.1f}  " +
                      " | ".join(cells) + f" | whole {whole[0]:.1f} / {whole[1]:.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
