"""Memoise argument checking and planning: a repeated call costs a dictionary lookup.

A reduction, scan or softmax spends most of its host time, before any launch, on
deciding things that depend only on its arguments (dtypes, axes, the strategy, the
kernel plan), never on the data. :func:`planner` caches those decisions.
"""

from __future__ import annotations

import functools
import math

import numpy as np

# Arguments that are their value: equal ones are interchangeable once their types match
# (numbakern.runtime.replay keys its calls on the same ones).
VALUES = (int, float, str, bool, type(None), type, np.dtype, np.generic)


def value_tag(v):
    """What keys a plain value besides itself: its type (``1``, ``True`` and ``1.0`` are
    equal and hash alike, but a check may accept one and refuse another), and a float
    zero's sign (``0.0 == -0.0``, but ``prod(x, initial=-0.0)`` is ``-0.0``)."""
    if isinstance(v, (float, np.floating)) and v == 0:
        return type(v), math.copysign(1.0, v)
    return type(v)


def _tag(arg):
    """What keys ``arg`` besides its value: :func:`value_tag`, one level into tuples.
    Any other object (a strategy, say) by identity: objects equal by their key may
    still differ in what a plan keeps of them, so each plans for itself."""
    if type(arg) is tuple:
        return tuple(map(value_tag, arg))
    if isinstance(arg, VALUES):
        return value_tag(arg)
    return type(arg), id(arg)  # the cache holds arg, so its id stays its own


def _type_tags(args: tuple) -> tuple:
    return tuple(map(_tag, args))


_PLANNERS: list = []  # every planner's cache


def forget() -> None:
    """Drop every cached plan: a name (a strategy's, say) may mean something else from
    now on (``numbakern.strategies.register``)."""
    for cache in _PLANNERS:
        cache.cache_clear()


def planner(fn):
    """Decorator: cache ``fn(*args)`` when every argument hashes, keyed on the values
    and their types (objects other than plain values on their identity); call ``fn``
    directly otherwise (an unhashable argument, such as a
    list for ``axis``, is for ``fn`` to accept or refuse). Exceptions are not cached,
    so a bad argument raises every time."""
    cached = functools.lru_cache(maxsize=1024)(lambda tags, *args: fn(*args))
    _PLANNERS.append(cached)

    @functools.wraps(fn)
    def plan(*args):
        try:
            return cached(_type_tags(args), *args)
        except TypeError as exc:
            if "unhashable" not in str(exc):
                raise
        return fn(*args)

    plan.cache_clear = cached.cache_clear
    return plan
