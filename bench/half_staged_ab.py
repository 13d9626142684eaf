"""A/B on a GPU: long half rows staged in shared memory (``RowPlan.staged``: read
once) against the tiled kernel (read twice) and the packed fused plans (the row in
registers: the default where they win, and 1024 x 16 at rows of 16384, what
``threads=1024`` gives), beside torch's softmax kernel on the same data, CUDA-event
medians of kernel launches.

    python bench/half_staged_ab.py [--shapes K] [--kernels-only]

(``--shapes K``: the first K shapes only.)

Each plan's kernel is launched through the API's launch (``api.softmax._launch``: the
same vector views, the same dynamic shared memory) on CuPy arrays, checked against
``nk.softmax`` / ``nk.log_softmax`` of the default plan and timed alone; torch's
``softmax`` / ``log_softmax`` (``dim=1``) run on the same memory through DLPack.
Then whole calls of the public functions on torch float16 and bfloat16 tensors.
"""

from __future__ import annotations

import dataclasses

from ab import event_ms  # bench/ab.py: 3 warm-up launches, the median of 30 by CUDA events

SHAPES = [(8192, 50257), (4096, 32768), (8192, 16384), (16384, 8192)]


def plans(kind: str, n: int) -> list:
    from numbakern.api import softmax as api

    def plan(normalizer="auto", layout="auto", fused=None, threads=None):
        return api._planned(kind, n, "float16", normalizer, layout, fused, threads, None,
                            None, "float16", "")

    chosen = [("default", plan()), ("tiled", plan(fused=False))]
    if n == 16384:
        chosen.append(("threads=1024", plan("auto", "block", True, 1024)))
    for threads, normalizer in ((512, "max_then_sum"), (512, "online"), (256, "online"),
                                (1024, "max_then_sum")):
        base = plan(normalizer, "block", False, threads)
        chosen.append((f"staged {threads} {normalizer}", dataclasses.replace(base, staged=True)))
    return [(f"{name} {p.threads}x{p.per_thread}" if p.fused else
             f"{name}{' (staged)' if name == 'default' and p.staged else ''}", p)
            for name, p in chosen]


def kernels(shapes) -> None:
    import cupy as cp
    import torch
    from numba import cuda

    import numbakern as nk
    from numbakern.api import softmax as api
    from numbakern.runtime.views import device_view

    stream = cuda.default_stream()
    for shape in shapes:
        x = cp.random.default_rng(0).standard_normal(shape, dtype=cp.float32)
        x = x.astype(cp.float16)
        y = cp.empty((1, *shape), cp.float16)
        views = [device_view(x.reshape(1, *shape)), device_view(y)]
        xt = torch.from_dlpack(x)
        for kind, reference in (("softmax", nk.softmax), ("log_softmax", nk.log_softmax)):
            want = reference(x, axis=1).astype(cp.float32)
            line = []
            for name, plan in plans(kind, shape[1]):
                def run(plan=plan):
                    api._launch(plan, views, stream)

                run()
                err = float(cp.abs(y[0].astype(cp.float32) - want).max())
                line.append(f"{name} {event_ms(cp, run):.3f} ms (max |diff| {err:.1e})")
            torch_fn = getattr(torch, kind)
            line.append(f"torch {event_ms(cp, lambda: torch_fn(xt, dim=1)):.3f} ms")
            print(f"{kind} {shape} float16: " + ", ".join(line), flush=True)


def whole_calls() -> None:
    import cupy as cp
    import torch

    import numbakern as nk

    for shape in SHAPES[:2]:
        for dtype in (torch.float16, torch.bfloat16):
            x = torch.randn(shape, device="cuda", dtype=torch.float32).to(dtype)
            for kind in ("softmax", "log_softmax"):
                ours = event_ms(cp, lambda: getattr(nk, kind)(x, axis=1))
                theirs = event_ms(cp, lambda: getattr(torch, kind)(x, dim=1))
                print(f"whole {kind} {shape} {dtype}: nk {ours:.3f} ms, torch {theirs:.3f} ms, "
                      f"{theirs / ours:.2f}x", flush=True)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=len(SHAPES))
    parser.add_argument("--kernels-only", action="store_true")
    args = parser.parse_args()
    kernels(SHAPES[:args.shapes])
    if not args.kernels_only:
        whole_calls()
