"""Where a numbakern warning points: the user's call, not a line inside numbakern.

A fixed ``stacklevel`` is right for one call path only; the same warning raised
through a decorator, the replay wrapper or a Dask chunk function would point into
the library and, for categories Python's default filters show once per location,
be shown once for all the user's calls.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading

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


# Set by quiet_numpy_errors: a context's own, so one thread's setting is no other's
_QUIET = contextvars.ContextVar("numbakern_quiet_numpy_errors", default=False)


@contextlib.contextmanager
def quiet_numpy_errors():
    """Within the block, the ``RuntimeWarning``s numbakern words and its reports of
    NumPy's floating-point errors (:func:`numpy_fp_error`) in this thread (context)
    are dropped, NumPy's own warnings not: a Dask chunk's partial result, whose
    all-NaN chunk is no all-NaN slice. Unlike ``warnings.catch_warnings``, which swaps
    the process's filter list, it is safe in Dask's worker threads. A call quieted
    so is still not recorded for replay (its replays would be quiet too)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def warn(message, category=RuntimeWarning) -> None:
    """``warnings.warn`` at the user's call (:func:`user_stacklevel`). A call being
    recorded for replay (``numbakern/runtime/replay.py``) is refused: a replay runs
    no Python, so it would skip the warning on every later call. Every warning of
    numbakern's calls goes through here, so none can be lost that way."""
    import warnings

    _refuse_replay("a call that warns (a replay would not)")
    if _QUIET.get() and issubclass(category, RuntimeWarning):
        return
    warnings.warn(message, category, stacklevel=user_stacklevel())


# ``warnings.catch_warnings`` swaps the process's filters and ``showwarning`` and puts
# back what it found: two threads' blocks overlapping would leave the second's
# recorder installed after both (every later warning of the process held in a list no
# one reads). Reentrant: a block may call a function that opens one. Only numbakern's
# own blocks are ordered so: a caller's catch_warnings in another thread can still
# overlap one (Python before 3.14 keeps one filter list a process).
_CATCHING = threading.RLock()


@contextlib.contextmanager
def numpys_words():
    """Within the block, the warnings NumPy's own functions raise are held, then told
    again by :func:`warn` at the user's call (and refusing a recording, as every
    numbakern warning does); before an exception leaving the block too, such as
    ``np.errstate``'s ``FloatingPointError``, as NumPy warns first. One thread at a
    time holds the block (Dask's worker threads run it too)."""
    import warnings

    try:
        with _CATCHING, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for w in caught:
            warn(w.message, w.category)


def module_name(frame) -> str:
    """The frame's module name; a module run by ``python -m`` (``__main__``) by the
    name it was run as (``numbakern.__main__``)."""
    names = frame.f_globals
    name = names.get("__name__", "")
    spec = names.get("__spec__")
    if name == "__main__" and spec is not None:
        return spec.name
    return name


# NumPy's bit of each floating-point error in the status its ``"call"`` mode passes
FPE_BITS = {"divide": 1, "over": 2, "under": 4, "invalid": 8}


def numpy_fp_error(kind: str, text: str, status: int | None = None) -> None:
    """NumPy's floating-point error ``kind`` (``"invalid"``, ``"over"``, ``"divide"``)
    handled as ``np.geterr()`` says, as NumPy's own arithmetic would
    (``numpy/_core/src/umath/extobj.c``): a ``RuntimeWarning`` saying ``text`` under
    ``"warn"`` (the default), nothing under ``"ignore"``, ``FloatingPointError`` under
    ``"raise"``; under ``"call"`` the ``np.seterrcall`` function is called with the
    error's name and its status bit, under ``"log"`` its object's ``write`` gets
    ``"Warning: <text>"``, under ``"print"`` stderr does. ``text`` is NumPy's
    ``"<error> encountered in <operation>"``; ``status``, the bits of every error the
    operation raised (NumPy passes them all to each call), else ``kind``'s alone."""
    import numpy as np

    # whatever the mode: a replay would neither look nor report under a later mode
    _refuse_replay("a call that meets a floating-point error (a replay would not look)")
    mode = np.geterr()[kind]
    if mode == "ignore" or _QUIET.get():
        return
    if mode == "raise":
        raise FloatingPointError(text)
    if mode == "warn":
        warn(text)
        return
    handler = np.geterrcall()
    error, _, operation = text.partition(" encountered in ")
    if mode == "print":
        sys.stderr.write(f"Warning: {text}\n")
    elif handler is None:  # NumPy's words (but its double space before the operation)
        raise NameError(f"python callback specified for {error} (in {operation}) but no "
                        "function found." if mode == "call" else f"log specified for "
                        f"{error} (in {operation}) but no object with write method found.")
    elif mode == "call":
        handler(error, FPE_BITS[kind] if status is None else status)
    else:
        handler.write(f"Warning: {text}\n")


def numpy_fp_errors(errors) -> None:
    """NumPy's errors ``[(kind, text)]`` of one operation, in its order (divide by
    zero, overflow, invalid), each told all their bits (:func:`numpy_fp_error`)."""
    status = 0
    for kind, _ in errors:
        status |= FPE_BITS[kind]
    for kind, text in sorted(errors, key=lambda error: FPE_BITS[error[0]]):
        numpy_fp_error(kind, text, status)


def _refuse_replay(why: str) -> None:
    from .launch import current_recording

    recording = current_recording()
    if recording is not None:
        recording.refuse(why)
