"""The kernel cache: compiled kernels and device functions, built once per key.

Numba cannot take Python objects into a kernel, so kernels are made by factories that
close over device functions and compile-time constants; each is cached here on an
explicit key (strategy, op, dtypes, layout, device), never on data: a second call
with the same key compiles nothing.
"""

from __future__ import annotations

import threading
from typing import Callable

from .device import SIMULATOR

_lock = threading.Lock()
_cache: dict[tuple, object] = {}
_building: dict[tuple, threading.Lock] = {}  # a lock per key being built
_stats = {"hits": 0, "builds": 0}


def cached(key: tuple, build: Callable[[], object]):
    """Return the object cached under ``key``, building it once.

    Thread-safe: threads asking for the same new key at once wait for one build
    (a lock per key), threads asking for other keys do not wait. A build that
    raises caches nothing; the next call builds again.
    """
    with _lock:
        if key in _cache:
            _stats["hits"] += 1
            return _cache[key]
        building = _building.setdefault(key, threading.Lock())
    with building:
        with _lock:
            if key in _cache:
                _stats["hits"] += 1
                return _cache[key]
        try:
            obj = build()
        except BaseException:
            with _lock:
                _building.pop(key, None)
            raise
        with _lock:
            _stats["builds"] += 1
            _building.pop(key, None)
            return _cache.setdefault(key, obj)


def cache_info() -> dict:
    """``{"hits": ..., "builds": ..., "size": ...}`` of the kernel cache."""
    with _lock:
        return dict(_stats, size=len(_cache))


def device_key() -> tuple:
    """The current device, for cache keys (kernels are compiled per device)."""
    if SIMULATOR:
        return ("simulator", 0)
    from .launch import current_device_id

    return ("cuda", current_device_id())
