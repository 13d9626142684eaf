"""The flat layout's module names (``numbakern.reductions`` and the rest), deprecated.

numbakern's modules moved into layers (``api``, ``core``, ``strategies``, ``kernels``,
``ops``, ``runtime``, ``teach``: the README's Layout section). Code written against the
flat layout keeps working: importing an old name gives a module that finds each name
in the modules that now hold it, with a ``DeprecationWarning`` naming the new place.
The table below is the map from old to new.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

#: old module (under ``numbakern.``) -> the modules that now hold its names, first first
MOVED = {
    "_backend": ("runtime.backend",),
    "_simblock": ("runtime.simblock",),
    "arrays": ("core.arrays", "core.layout", "runtime.views"),
    "axes": ("core.axes", "core.deliver"),
    "bits": ("runtime.bits",),
    "cli": ("teach.cli",),
    "compare": ("teach.compare",),
    "counting": ("kernels.counting", "strategies.protocols", "core.jobs"),
    "demo": ("teach.demo",),
    "elementwise": ("kernels.elementwise",),
    "explain": ("teach.explain",),
    "histogram": ("api.histogram", "core.bins"),
    "job": ("core.jobs", "runtime.device"),
    "launch": ("runtime.launch", "runtime.device"),
    "memo": ("runtime.memo",),
    "reductions": ("api.reductions", "core.deliver"),
    "relaxed": ("runtime.relaxed",),
    "replay": ("runtime.replay",),
    "rowwise": ("kernels.softmax_rows",),
    "scan_rows": ("kernels.scan_rows",),
    "scan_tiles": ("kernels.scan_tiles", "core.jobs", "strategies.protocols"),
    "scans": ("api.scans",),
    "segmented": ("kernels.axis_reduce", "core.layout"),
    "simulator": ("runtime.simulator",),
    "softmax": ("api.softmax",),
    "sort": ("api.sort",),
    "sort_keys": ("kernels.sort_keys", "core.jobs", "core.arrays"),
    "state": ("ops.state",),
    "strategy": ("strategies.protocols", "runtime.device"),
    "trace": ("teach.trace",),
    "vector": ("kernels.vector",),
}

#: names that changed as they moved: old -> new
RENAMED = {
    "ScanGrid": "GridScan", "_check_threads": "check_threads", "_to_device": "to_device",
    "_device_view": "device_view", "_strided": "strided", "_refuse_replay": "refuse_replay",
    "_lane_folder": "lane_folder", "_constant_state": "constant_state",
    "vector_address": "address", "_deliver": "deliver", "_deliver_host": "deliver_host",
    "_segment_views": "scan_views",
}

#: what the flat layout's ``numbakern.kernels`` module held (the name is a package)
KERNELS = ("kernels.flat_reduce", "runtime.cache", "ops.state")


def lookup(old: str, homes: tuple, name: str):
    """Attribute ``name`` of old module ``old``, found in its new ``homes``."""
    new = RENAMED.get(name, name)
    for home in homes:
        module = importlib.import_module(f"numbakern.{home}")
        if hasattr(module, new):
            return getattr(module, new)
    raise AttributeError(f"module 'numbakern.{old}' has no attribute {name!r} (it moved to "
                         f"{', '.join('numbakern.' + h for h in homes)})")


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside the import machinery and
    numbakern: the user's import line, so Python's default filters show the warning
    (they show a DeprecationWarning raised in ``__main__``)."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen"):  # warnings skips these
            frame = frame.f_back
            continue
        module = frame.f_globals.get("__name__", "")
        if not module.split(".")[0] in ("numbakern", "importlib"):
            return level
        frame, level = frame.f_back, level + 1
    return 1


class _Shim(types.ModuleType):
    """An old module: each name read from the modules that hold it now."""

    def __init__(self, old: str):
        super().__init__(f"numbakern.{old}")
        self._old, self._homes = old, MOVED[old]
        self.__doc__ = f"Moved: see {', '.join('numbakern.' + h for h in self._homes)}."

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return lookup(self._old, self._homes, name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        package, _, old = fullname.rpartition(".")
        if package != "numbakern" or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        old = spec.name.rpartition(".")[2]
        warnings.warn(f"numbakern.{old} moved to "
                      f"{', '.join('numbakern.' + h for h in MOVED[old])}; the old name will "
                      "be removed", DeprecationWarning, stacklevel=_callers_level())
        return _Shim(old)

    def exec_module(self, module):
        pass


class _Package(types.ModuleType):
    """The ``numbakern`` package: old modules are attributes too (imported on first
    use), and importing one whose name is also a public function (``numbakern.softmax``,
    ``sort``, ``histogram``) leaves the function in place (the import machinery would
    set the module over it)."""

    def __setattr__(self, name, value):
        if isinstance(value, _Shim) and callable(self.__dict__.get(name)):
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str):
        """``numbakern.arrays`` and the other old modules as attributes, as before."""
        if name in MOVED:
            return importlib.import_module(f"numbakern.{name}")
        raise AttributeError(f"module 'numbakern' has no attribute {name!r}")


def install() -> None:
    sys.meta_path.append(_Finder())
    sys.modules["numbakern"].__class__ = _Package
    # numbakern.warp is public (the README's warp shuffles with width): an alias.
    sys.modules.setdefault("numbakern.warp", importlib.import_module("numbakern.runtime.warp"))


install()
