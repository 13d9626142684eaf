"""The one place where a public function sees a Dask array: it hands the call to
:mod:`numbakern.api.dask` (the function of the same name), which builds a lazy Dask
array whose chunks numbakern's kernels compute.

Nothing of Dask is imported unless a Dask array is passed: the check reads the
argument's type's module name only.
"""

from __future__ import annotations

import functools


def is_dask(x) -> bool:
    """Whether ``x`` is a Dask collection (``dask.array.Array`` and friends), by its
    type's module alone."""
    return type(x).__module__.split(".")[0] == "dask"


def dask_aware(fn):
    """Decorator: a Dask array as the first argument goes to
    ``numbakern.api.dask.<fn's name>``; a function that module lacks raises
    ``TypeError`` rather than computing the whole Dask array on the host."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(x, *args, **kwargs):
        if not is_dask(x):
            return fn(x, *args, **kwargs)
        from numbakern.api import dask as _dask

        lazy = getattr(_dask, name, None)
        if lazy is None or name not in _dask.__all__:
            raise TypeError(f"numbakern.{name} does not take Dask arrays; it takes NumPy, "
                            f"CuPy and CUDA arrays (Dask arrays: {', '.join(_dask.__all__)})")
        return lazy(x, *args, **kwargs)

    return call
