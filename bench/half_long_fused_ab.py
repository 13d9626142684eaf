"""A/B on a GPU: long float16 rows through the packed fused plans the library now
chooses (the row in registers, read once) against the tiled kernel (online: read
twice), CUDA-event medians of kernel launches.

    python bench/half_long_fused_ab.py

(4096, 32768): the default (1024 x 32, packed) against tiled. (8192, 16384): the
default (512 x 32: two blocks a multiprocessor, four 16-byte loads a thread in
flight) against 1024 x 16 (one block, two loads; what ``threads=1024`` gives) and
tiled. ptxas for sm_90: 61 (softmax) and 64 (log_softmax) registers at 1024 x 32
and 512 x 32, 44 and 52 at 1024 x 16, no spills (bench/NOTES.md, "Half softmax:
long aligned rows"). Each plan's kernel is launched through the API's launch
(``api.softmax._launch``: the same vector views) on CuPy arrays, checked against
``nk.softmax`` / ``nk.log_softmax`` and timed alone.
"""

from __future__ import annotations

from ab import event_ms  # bench/ab.py: 3 warm-up launches, the median of 30 by CUDA events

SHAPES = [(4096, 32768), (8192, 16384)]


def plans(kind: str, n: int) -> list:
    from numbakern.api import softmax as api

    def plan(layout="auto", fused=None, threads=None):
        return api._planned(kind, n, "float16", "auto", layout, fused, threads, None, None,
                            "float16", "")

    chosen = [("default", plan()), ("tiled", plan(fused=False))]
    if n == 16384:
        chosen.append(("threads=1024", plan("block", True, 1024)))
    return [(f"{name} {p.threads}x{p.per_thread}" if p.fused else name, p)
            for name, p in chosen]


def main() -> None:
    import cupy as cp
    from numba import cuda

    import numbakern as nk
    from numbakern.api import softmax as api
    from numbakern.runtime.views import device_view

    stream = cuda.default_stream()
    for shape in SHAPES:
        x = cp.random.default_rng(0).standard_normal(shape, dtype=cp.float32)
        x = x.astype(cp.float16)
        y = cp.empty((1, *shape), cp.float16)
        views = [device_view(x.reshape(1, *shape)), device_view(y)]  # the kernels' buffers
        for kind, reference in (("softmax", nk.softmax), ("log_softmax", nk.log_softmax)):
            want = reference(x, axis=1).astype(cp.float32)
            line = []
            for name, plan in plans(kind, shape[1]):
                def run(plan=plan):
                    api._launch(plan, views, stream)

                run()
                err = float(cp.abs(y[0].astype(cp.float32) - want).max())
                line.append(f"{name} {event_ms(cp, run):.3f} ms (max |diff| {err:.1e})")
            print(f"{kind} {shape} float16: " + ", ".join(line), flush=True)


if __name__ == "__main__":
    main()
