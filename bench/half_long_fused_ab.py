"""A/B on a GPU: long float16 rows (4096, 32768) through the fused vector forward
kernel at 1024 threads x 32 halves (the row in registers, read once), against the
default plan (tiled, online: read twice), CUDA-event medians of kernel launches.

    python bench/half_long_fused_ab.py

Not a plan the library chooses: its register model puts 1024 x 32 halves at 136
registers (3 an element, for scalar loads), where ptxas for sm_90 gives the vector
kernel 61 (softmax) and 64 (log_softmax) under 1024-thread launch bounds, no spills
(bench/NOTES.md, "Half softmax family"). This script decides whether a plan for it
is worth adding: it builds the plan by hand, launches both plans' kernels through the API's
launch (``api.softmax._launch``: the same vector views) on CuPy arrays, checks each
against ``nk.softmax`` / ``nk.log_softmax`` and times the launches alone.
"""

from __future__ import annotations

import dataclasses
import statistics

SHAPE = (4096, 32768)


def main() -> None:
    import cupy as cp
    from numba import cuda

    import numbakern as nk
    from numbakern.api import softmax as api
    from numbakern.runtime.views import device_view

    x = cp.random.default_rng(0).standard_normal(SHAPE, dtype=cp.float32).astype(cp.float16)
    y = cp.empty((1, *SHAPE), cp.float16)
    views = [device_view(x.reshape(1, *SHAPE)), device_view(y)]  # the kernels' buffers
    stream = cuda.default_stream()
    for kind, reference in (("softmax", nk.softmax), ("log_softmax", nk.log_softmax)):
        default = api._planned(kind, SHAPE[1], "float16", "auto", "auto", None, None, None,
                               None, "float16", "")
        base = api._planned(kind, 4096, "float16", "max_then_sum", "block", None, 1024,
                            None, None, "float16", "")
        fused = dataclasses.replace(base, per_thread=32)  # 1024 x 32 = 32768
        want = reference(x, axis=1).astype(cp.float32)
        line = []
        for name, plan in (("default (tiled)", default), ("fused 1024x32", fused)):
            def run(plan=plan):
                api._launch(plan, views, stream)

            run()
            err = float(cp.abs(y[0].astype(cp.float32) - want).max())
            for _ in range(3):
                run()
            ms = []
            for _ in range(30):
                a, b = cp.cuda.Event(), cp.cuda.Event()
                a.record()
                run()
                b.record()
                b.synchronize()
                ms.append(cp.cuda.get_elapsed_time(a, b))
            line.append(f"{name} {statistics.median(ms):.3f} ms (max |diff| {err:.1e})")
        print(f"{kind} {SHAPE} float16: " + ", ".join(line), flush=True)

if __name__ == "__main__":
    main()
