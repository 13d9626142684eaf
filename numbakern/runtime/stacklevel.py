"""Where a numbakern warning points: the user's call, not a line inside numbakern.

A fixed ``stacklevel`` is right for one call path only; the same warning raised
through a decorator, the replay wrapper or a Dask chunk function would point into
the library and, for categories Python's default filters show once per location,
be shown once for all the user's calls.
"""

from __future__ import annotations

import sys

# Modules whose frames stand between the user's call and a warning: numbakern's own
# command runs through click (and ``python -m numbakern`` through runpy), so a
# warning of ``numbakern compare`` points at whoever invoked the command.
_INTERNAL = ("numbakern", "numba", "numba_cuda", "contextlib", "click", "runpy")


def user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside numbakern, Numba and the command
    line's machinery (the call the user made), counted from the function that calls
    this one and then ``warnings.warn``. With no such frame (``python -m numbakern
    compare``: no user code called) the level is past the stack, where Python reports
    the warning at ``sys:1`` rather than at a line inside numbakern."""
    frame, level = sys._getframe(1), 1
    while frame is not None and module_name(frame).split(".")[0] in _INTERNAL:
        frame, level = frame.f_back, level + 1
    return level


def warn(message, category=RuntimeWarning) -> None:
    """``warnings.warn`` at the user's call (:func:`user_stacklevel`). A call being
    recorded for replay (``numbakern/runtime/replay.py``) is refused: a replay runs
    no Python, so it would skip the warning on every later call. Every warning of
    numbakern's calls goes through here, so none can be lost that way."""
    import warnings

    from .launch import current_recording

    recording = current_recording()
    if recording is not None:
        recording.refuse("a call that warns (a replay would not)")
    warnings.warn(message, category, stacklevel=user_stacklevel())


def module_name(frame) -> str:
    """The frame's module name; a module run by ``python -m`` (``__main__``) by the
    name it was run as (``numbakern.__main__``)."""
    names = frame.f_globals
    name = names.get("__name__", "")
    spec = names.get("__spec__")
    if name == "__main__" and spec is not None:
        return spec.name
    return name


def numpy_fp_error(kind: str, text: str) -> None:
    """NumPy's floating-point error ``kind`` (``"invalid"``, ``"over"``, ``"divide"``)
    handled as ``np.geterr()`` says, as NumPy's own arithmetic would: a
    ``RuntimeWarning`` saying ``text`` under ``"warn"`` (the default), nothing under
    ``"ignore"``, ``FloatingPointError`` under ``"raise"`` (``"print"``, ``"log"`` and
    ``"call"`` warn)."""
    import numpy as np

    mode = np.geterr()[kind]
    if mode == "ignore":
        return
    if mode == "raise":
        raise FloatingPointError(text)
    warn(text)
