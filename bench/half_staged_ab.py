"""A/B on a GPU: long half rows staged in shared memory (``RowPlan.staged``: read
once), by ``cp.async`` (``RowPlan.async_copy``) and through registers, against the
tiled kernel (read twice) and the packed fused plans (the row in registers: the
default where they win, and 1024 x 16 at rows of 16384, what ``threads=1024``
gives), beside torch's kernel on the same data, CUDA-event medians of kernel
launches. softmax, log_softmax and log_softmax_backward (whose ``dy`` is staged).

    python bench/half_staged_ab.py [--shapes K] [--kernels-only]

(``--shapes K``: the first K shapes only.)

Each plan's kernel is launched through the API's launch (``api.softmax._launch``: the
same vector views, the same dynamic shared memory) on CuPy arrays, checked against
the public function's result by the default plan and timed alone; torch's
``softmax`` / ``log_softmax`` (``dim=1``) and ``torch._log_softmax_backward_data``
run on the same memory through DLPack. Then whole calls of the public functions on
torch float16 and bfloat16 tensors.
"""

from __future__ import annotations

import dataclasses

from ab import event_ms  # bench/ab.py: 3 warm-up launches, the median of 30 by CUDA events

SHAPES = [(8192, 50257), (4096, 32768), (8192, 16384), (16384, 8192), (32768, 4096)]
KINDS = ("softmax", "log_softmax", "log_softmax_backward")


def plans(kind: str, n: int) -> list:
    from numbakern.api import softmax as api

    backward = kind.endswith("backward")

    def plan(normalizer="auto", layout="auto", fused=None, threads=None):
        return api._planned(kind, n, "float16", None if backward else normalizer, layout,
                            fused, threads, None, None, "float16", "")

    chosen = [("default", plan()), ("tiled", plan(fused=False))]
    if n == 16384 and not backward:
        chosen.append(("threads=1024", plan("auto", "block", True, 1024)))
    for threads, normalizer in ((512, "online"), (256, "online"), (512, "max_then_sum"),
                                (256, "max_then_sum")):
        if backward and normalizer != "online":
            continue
        base = dataclasses.replace(plan(normalizer, "block", False, threads), staged=True)
        for copy in (True, False):
            chosen.append((f"staged {threads}{'' if backward else ' ' + normalizer}"
                           f" {'async' if copy else 'registers'}",
                           dataclasses.replace(base, async_copy=copy)))
    default = chosen[0][1]
    how = (f" {default.threads}x{default.per_thread}" if default.fused else
           f" (staged {default.threads}{' async' if default.async_copy else ''})"
           if default.staged else "")
    chosen[0] = ("default" + how, default)
    return chosen


def _inputs(cp, kind: str, shape: tuple):
    """The CuPy inputs of ``kind`` for rows of ``shape`` (float16), torch's function of
    them, and numbakern's reference result."""
    import torch

    import numbakern as nk

    x = cp.random.default_rng(0).standard_normal(shape, dtype=cp.float32).astype(cp.float16)
    if not kind.endswith("backward"):
        xt = torch.from_dlpack(x)
        return [x], (lambda: getattr(torch, kind)(xt, dim=1)), getattr(nk, kind)(x, axis=1)
    y = nk.log_softmax(x, axis=1)
    dy = cp.random.default_rng(1).standard_normal(shape, dtype=cp.float32).astype(cp.float16)
    yt, dyt = torch.from_dlpack(y), torch.from_dlpack(dy)
    return ([y, dy], lambda: torch._log_softmax_backward_data(dyt, yt, 1, torch.float16),
            nk.log_softmax_backward(y, dy, axis=1))


def kernels(shapes) -> None:
    import cupy as cp
    from numba import cuda

    from numbakern.api import softmax as api
    from numbakern.runtime.views import device_view

    stream = cuda.default_stream()
    for shape in shapes:
        for kind in KINDS:
            inputs, theirs, want = _inputs(cp, kind, shape)
            want = want.astype(cp.float32)
            out = cp.empty((1, *shape), cp.float16)
            views = [device_view(a.reshape(1, *shape)) for a in inputs] + [device_view(out)]
            line = []
            for name, plan in plans(kind, shape[1]):
                def run(plan=plan):
                    api._launch(plan, views, stream)

                run()
                err = float(cp.abs(out[0].astype(cp.float32) - want).max())
                line.append(f"{name} {event_ms(cp, run):.3f} ms (max |diff| {err:.1e})")
            line.append(f"torch {event_ms(cp, theirs):.3f} ms")
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
