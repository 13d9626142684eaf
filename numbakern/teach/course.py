"""The course's figures: one recording per strategy of every family, drawn.

:func:`draw_course` runs every strategy the registry lists (reductions, scans,
histograms, sorts, selections (top-k), and softmax's normalizers with each block),
and a sum along each axis of a 2-D input (the row and column kernels), on one small
input of its family under the simulator, checks the recording's proof, and draws it to
``<folder>/<family>__<strategy>.png`` (``/`` in a name becomes ``__``), the files
``docs/course.md`` shows. ``numbakern course`` calls it.
"""

from __future__ import annotations

import os

import numpy as np

from numbakern import strategies as _strategies

#: the families, in the course's order, with the word ``explain`` takes for each;
#: ``axis``: a sum along each axis of a small 2-D input (the row and column kernels)
FAMILIES = ("reduce", "scan", "histogram", "sort", "select", "softmax", "axis")

#: the course's reductions along an axis: ``name: (shape, axis)``, both summed with
#: the default strategy (two_pass/warp_shuffle), output 0's tree drawn
AXIS_VIEWS = {"rows": ((8, 40), 1), "columns": ((40, 6), 0)}
#: the course's selections: the k largest (topk's default order) of its input
SELECT_K = 5


def strategies(family: str) -> list[str]:
    """The names of ``family``'s strategies the course draws (the registry's; for
    softmax each normalizer with each block strategy; for ``axis`` the views of
    :data:`AXIS_VIEWS`)."""
    if family == "softmax":
        from .softmax_trace import softmax_strategies

        return softmax_strategies()
    if family == "axis":
        return list(AXIS_VIEWS)
    return _strategies.available(family)


def figure_name(family: str, strategy: str) -> str:
    """The file a strategy's figure is written to: ``scan__decoupled_lookback__blelloch.png``."""
    return f"{family}__{strategy.replace('/', '__')}.png"


def _input(family: str) -> np.ndarray:
    """The family's course input: small random integers (exact in every dtype)."""
    rng = np.random.default_rng(24)
    if family == "histogram":
        return rng.integers(0, 8, 40)
    if family == "sort":
        return rng.integers(0, 50, 16).astype(np.int16)
    if family == "select":  # wider than 0-9: fewer ties, two at the 5th largest
        return rng.integers(0, 50, 40).astype(np.float32)
    if family == "axis":
        return rng.integers(0, 10, 320).astype(np.float32)  # the first 8 x 40 or 40 x 6
    return rng.integers(0, 10, 40).astype(np.float32)


def _record_and_draw(family: str, strategy: str, x, path: str) -> bool:
    """Record ``strategy`` on ``x``, draw it to ``path``; whether its proof holds."""
    if family == "reduce":
        from .explain import draw
        from .trace import trace_reduce

        trace = trace_reduce(x, "sum", strategy, threads=32, blocks=2)
        draw(trace, path)
        return trace.exact_cover
    if family == "axis":
        from .axis_trace import trace_axis_reduce
        from .explain import draw

        shape, axis = AXIS_VIEWS[strategy]
        trace = trace_axis_reduce(x[:np.prod(shape)].reshape(shape), axis, "sum",
                                  threads=32, blocks=2)
        draw(trace.outputs[0], path)
        return trace.exact
    if family == "scan":
        from .explain_scan import draw_scan
        from .scan_trace import trace_scan

        trace = trace_scan(x, strategy, threads=32, items=1, blocks=2)
        draw_scan(trace, path)
        return trace.exact_cover and trace.matches_numpy
    if family == "histogram":
        from .hist_trace import draw_histogram, trace_histogram

        trace = trace_histogram(x, 8, strategy, threads=32, blocks=2)
        draw_histogram(trace, path)
        return trace.exact
    if family == "select":
        from .explain_select import draw_select, trace_select

        trace = trace_select(x, SELECT_K, strategy, threads=32)
        draw_select(trace, path)
        return trace.exact
    if family == "sort":
        from .explain_sort import draw_sort
        from .sort_trace import trace_sort

        trace = trace_sort(x, strategy, threads=32, items=1)
        draw_sort(trace, path)
        return trace.exact
    from .explain_softmax import draw_softmax
    from .softmax_trace import trace_softmax

    trace = trace_softmax(x, strategy, threads=32)
    draw_softmax(trace, path)
    return trace.exact


def _shrink(path: str) -> None:
    """Re-save a figure with a 64-colour palette: a third of the bytes, the same
    picture (line art of a few colours), for figures kept in the repository."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=64, method=Image.Quantize.FASTOCTREE)
    small.save(path, optimize=True)


def draw_course(folder: str, families=FAMILIES, progress=None) -> list[str]:
    """Record and draw every strategy of ``families`` into ``folder``.

    Args:
        folder: an existing, writable folder.
        families: some of :data:`FAMILIES`.
        progress: called with each file's path before it is drawn, if given.

    Returns:
        the paths written, in the course's order.

    Raises:
        ValueError: an unknown family.
        RuntimeError: a recording whose proof fails (nothing wrong is drawn silently).
        TraceError: not under the simulator.
    """
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"families must be among {FAMILIES}, got {unknown[0]!r}")
    written = []
    for family in families:
        x = _input(family)
        for strategy in strategies(family):
            path = os.path.join(folder, figure_name(family, strategy))
            if progress is not None:
                progress(path)
            if not _record_and_draw(family, strategy, x, path):
                raise RuntimeError(f"the recording of {strategy} ({family}) fails its proof")
            _shrink(path)
            written.append(path)
    return written
