"""Where a numbakern warning points: the user's call, not a line inside numbakern.

A fixed ``stacklevel`` is right for one call path only; the same warning raised
through a decorator, the replay wrapper or a Dask chunk function would point into
the library and, for categories Python's default filters show once per location,
be shown once for all the user's calls.
"""

from __future__ import annotations

import sys

# Modules whose frames stand between the user's call and a warning.
_INTERNAL = ("numbakern", "numba", "numba_cuda", "contextlib")


def user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside numbakern and Numba (the call the
    user made), counted from the function that calls this one and then
    ``warnings.warn``."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and \
            frame.f_globals.get("__name__", "").split(".")[0] in _INTERNAL:
        frame, level = frame.f_back, level + 1
    return level
