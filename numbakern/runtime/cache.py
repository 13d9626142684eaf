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
_stats = {"hits": 0, "builds": 0}


def cached(key: tuple, build: Callable[[], object]):
    """Return the object cached under ``key``, building it once."""
    with _lock:
        if key in _cache:
            _stats["hits"] += 1
            return _cache[key]
    obj = build()
    with _lock:
        _stats["builds"] += 1
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
