"""Host cost of numbakern's lazy Dask calls, without a GPU: the graph, Dask's
optimisation of it, a whole compute with the chunk kernels replaced by NumPy, and the
array operations that compute makes outside the kernels.

    python bench/dask_graph_time.py [--against REV] [--chunks 8 4] [--reps 200]

The array has the layout of ``bench/dask_chunks.py``'s (a (rows, 4096) float32 array
in row chunks, reshaped to 1-D, as its ``sum`` and ``argmax`` cases call them), with
2 rows a chunk: the graph is the same whatever the chunk size. For each op and number
of chunks:

* ``layers``: the call's graph layers (beyond the input's); ``tasks``: the tasks
  once ``dask.optimize`` has run (the input's included);
* ``kernels``: numbakern calls in one compute; ``ops``: the other array operations
  of one compute (each a kernel launch on CuPy; counted on chunks that are not NumPy
  arrays, as CuPy's are not; views are free);
* the thread's CPU time (the machine may be shared: waits for a core do not count),
  median over ``--reps``, of ``build`` (the lazy call, ``numbakern.argmax(x)``...),
  ``+optimize`` (the call and ``dask.optimize`` of its result) and ``+compute`` (the
  call and ``dask.persist`` on the synchronous scheduler, as ``dask_chunks.py``
  times it, each chunk's numbakern kernel replaced by its NumPy equivalent:
  ``numbakern.reduce`` by ``np.sum``, ``max_with_indices`` by ``np.max`` and
  ``np.argmax``).

``--against REV`` loads ``numbakern/api/dask.py`` as it was at the git revision REV
as a second module and times both in the same process, alternating ``before`` (REV)
and ``after`` (the working tree).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this tree's numbakern, not an installed one
ROW = 4096


class Counted(NDArrayOperatorsMixin):
    """A NumPy array that counts the array operations made on it (each would be a
    kernel launch on CuPy): ufuncs and their reductions, array functions, ``astype``
    and reads to the host (``bool``, ``int``); reshapes and transposes are views and
    free. The chunk kernels' stand-ins hand these out with ``--count``."""

    ops = 0
    kernels = 0
    FREE = frozenset({np.reshape, np.transpose, np.shape, np.ndim})

    def __init__(self, a):
        self.a = np.asarray(a)

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: self.a.ndim)
    size = property(lambda self: self.a.size)

    @staticmethod
    def _unwrap(v):
        if isinstance(v, Counted):
            return v.a
        if isinstance(v, (list, tuple)):
            return type(v)(Counted._unwrap(e) for e in v)
        return v

    @staticmethod
    def _wrap(v):
        return Counted(v) if isinstance(v, np.ndarray | np.generic) else v

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        Counted.ops += 1
        return self._wrap(getattr(ufunc, method)(*self._unwrap(inputs),
                                                 **{k: self._unwrap(v)
                                                    for k, v in kwargs.items()}))

    def __array_function__(self, func, types, args, kwargs):
        Counted.ops += func not in self.FREE
        return self._wrap(func(*self._unwrap(args),
                               **{k: self._unwrap(v) for k, v in kwargs.items()}))

    def _counted(name, free=False):
        def method(self, *args, **kwargs):
            Counted.ops += not free
            return self._wrap(getattr(self.a, name)(*args, **kwargs))

        return method

    max, min, any, all = _counted("max"), _counted("min"), _counted("any"), _counted("all")
    astype = _counted("astype")
    reshape, transpose = _counted("reshape", True), _counted("transpose", True)

    def __getitem__(self, key):  # a view
        return Counted(self.a[key])

    def __bool__(self):
        Counted.ops += 1
        return bool(self.a)

    def __int__(self):
        Counted.ops += 1
        return int(self.a)

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


def _with_indices(direction, counted: bool):
    pick, arg = (np.max, np.argmax) if direction == "max" else (np.min, np.argmin)

    def fn(x, axis=None, keepdims=False, **_):
        Counted.kernels += 1
        x = Counted._unwrap(x)
        v = pick(x, axis=axis, keepdims=keepdims)
        i = arg(x, axis=axis, keepdims=keepdims).astype(np.int64)
        return (Counted(v), Counted(i)) if counted else (v, i)

    return fn


def stand_in(counted: bool = False):
    """numbakern's chunk calls by NumPy (``counted``: their results :class:`Counted`)."""

    def reduce(x, op, axis=None, dtype=None, keepdims=False, **_):
        Counted.kernels += 1
        r = np.sum(Counted._unwrap(x), axis=axis, dtype=dtype, keepdims=keepdims)
        return Counted(r) if counted else r

    return types.SimpleNamespace(reduce=reduce,
                                 max_with_indices=_with_indices("max", counted),
                                 min_with_indices=_with_indices("min", counted))


def load(rev: str | None):
    """numbakern's Dask module, the working tree's or the one at git revision ``rev``."""
    if rev is None:
        import numbakern.api.dask as module
    else:
        source = subprocess.run(["git", "show", f"{rev}:numbakern/api/dask.py"], cwd=ROOT,
                                check=True, capture_output=True, text=True).stdout
        path = Path(tempfile.mkdtemp()) / "dask_before.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("numbakern.api._dask_before", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def as_tuple(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def median_ms(fn, reps: int) -> float:
    """The median CPU time of this thread (the machine may be shared: the thread's
    own time does not count the waits for a core)."""
    fn()
    times = []
    for _ in range(reps):
        start = time.thread_time()
        fn()
        times.append((time.thread_time() - start) * 1e3)
    return statistics.median(times)


def shape_of(result) -> tuple[int, int]:
    """The number of layers of the lazy call's graph (beyond the input's) and of
    tasks once Dask has optimised it."""
    import dask

    arrays = as_tuple(result)
    layers = set().union(*(a.__dask_graph__().layers for a in arrays))
    optimised = dask.optimize(*arrays)
    tasks = set().union(*(dict(a.__dask_graph__()) for a in optimised))
    return len(layers) - 2, len(tasks)  # less from_array's and reshape's


def main() -> int:
    import dask
    import dask.array as da

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="time this revision's module too")
    parser.add_argument("--chunks", type=int, nargs="*", default=[8, 4])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--ops", nargs="*", default=["sum", "argmax", "max_with_indices"])
    args = parser.parse_args()
    modules = {"after": load(None)}
    if args.against:
        modules = {"before": load(args.against), **modules}
    plain, counted = stand_in(), stand_in(counted=True)

    def steps(call):
        def build():
            return call()

        def optimize():
            return dask.optimize(*as_tuple(call()))

        def compute():
            with dask.config.set(scheduler="sync"):
                return dask.persist(*as_tuple(call()))

        return {"build": build, "+optimize": optimize, "+compute": compute}

    def counts(module, op, x, want) -> tuple[int, int]:
        """The stand-in kernel calls and the other array operations of one compute
        (checking its answer), on chunks that are :class:`Counted` (as CuPy arrays,
        not NumPy ones)."""
        module._nk = lambda: counted
        lazy = as_tuple(getattr(module, op)(x))
        Counted.ops = Counted.kernels = 0
        with dask.config.set(scheduler="sync"):
            got = Counted._unwrap(dask.compute(*lazy))
        found = Counted.kernels, Counted.ops
        got = got if len(got) > 1 else got[0]
        assert np.allclose(np.asarray(got, dtype=float), want, rtol=1e-4), got
        module._nk = lambda: plain
        return found

    print(f"{'op':18} {'chunks':>6} {'module':>7} {'layers':>6} {'tasks':>5} "
          f"{'kernels':>7} {'ops':>4} {'build':>8} {'+optimize':>10} {'+compute':>9}",
          flush=True)
    for n in args.chunks:
        a = np.random.default_rng(0).standard_normal((2 * n, ROW)).astype(np.float32)
        x = da.from_array(a, chunks=(2, ROW)).reshape(-1)
        counted_x = da.from_array(Counted(a), chunks=(2, ROW), asarray=False, meta=a[:0],
                                  name=f"counted-{n}").reshape(-1)
        for op in args.ops:
            want = {"sum": a.sum(dtype=np.float64), "argmax": a.argmax(),
                    "max_with_indices": (a.max(), a.argmax())}[op]
            calls = {label: functools.partial(lambda m, op, x: getattr(m, op)(x), m, op, x)
                     for label, m in modules.items()}
            found = {label: counts(modules[label], op, counted_x, want)
                     for label in calls}
            figures = {label: {} for label in calls}
            for step in ("build", "+optimize", "+compute"):
                for _ in range(2):  # alternate the modules, twice over
                    for label, call in calls.items():
                        ms = median_ms(steps(call)[step], args.reps // 2)
                        figures[label].setdefault(step, []).append(ms)
            for label, f in figures.items():
                cells = " ".join(f"{statistics.mean(f[s]):{w}.3f}"
                                 for s, w in (("build", 8), ("+optimize", 10),
                                              ("+compute", 9)))
                layers, tasks = shape_of(calls[label]())
                kernels, ops = found[label]
                print(f"{op:18} {n:6} {label:>7} {layers:6} {tasks:5} {kernels:7} {ops:4} "
                      f"{cells}", flush=True)
    print(f"(layers: the call's graph layers; tasks: after dask.optimize; kernels: "
          f"numbakern calls of one compute; ops: other array operations of one compute; "
          f"then CPU ms, medians of {args.reps})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
