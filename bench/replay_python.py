"""The Python of a replayed torch-tensor call, measured on a machine with no GPU.

    NUMBAKERN_SIMULATOR=1 python bench/replay_python.py [--calls N] [--profile]

``bench/host_time.py`` times a repeated small call on a GPU: the Python numbakern
runs around its launches plus the launches themselves (~3.6 us each through CuPy's
binding of ``cuLaunchKernel``) and torch's allocator. This script measures the first
part without a GPU, so that a change to it can be judged anywhere:

* Each case is recorded once under the simulator on a Numba simulator array of the
  case's shape (the real recording code: its launches, allocations, result views).
* That recording is rewritten as a torch program (kind "torch": one step per launch,
  its parameter block and address patches as ``replay._gpu_step`` builds them) and
  entered in the table a CUDA-tensor call looks in, under the key the real code
  computes for the tensor.
* The tensor is a CPU tensor whose type says it is on CUDA (``is_cuda``,
  ``get_device()``, ``device``; torch functions on it run as on any CPU tensor).
  torch's device and stream queries are counted stubs (on the H200 host each costs
  ~1-3 us: ``torch.cuda.current_device`` runs Python, the raw ``torch._C`` calls do
  not), its CUDA allocations are CPU allocations (``torch.empty``), and the driver
  launch is a counted stub.

So what is timed is every Python line of a replayed call, the allocation and the
result's view included, with the device queries and launches free: a floor under
the H200's figure, not a prediction of it. Printed per case: microseconds per call
(this thread's CPU time, the best of ten blocks of ``--calls``/10 calls after a
warm-up: a shared machine's wall time would count other work), function calls per
call (a cProfile count, C functions included) and the stubs' calls per call.

The same script runs on the tree before and after a change: the program is entered in
the general table of the translated call (the public function's ``translated``, or
the one in ``dispatch``'s closure on an older tree), from which a tree with a tensor
table fills that on the first call.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import time
from collections import Counter

os.environ.setdefault("NUMBAKERN_SIMULATOR", "1")

import numbakern as nk  # noqa: E402  (first: it chooses the simulator)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

from numbakern.runtime import launch, replay  # noqa: E402

# name: (the timed call, shape). Whole reductions are recorded as their keepdims=True
# forms and replayed as 0-d results: under the simulator their scalar comes through the
# host (never replayed), on a GPU it is a view of the call's allocation.
CASES = {
    "sum": (lambda x, **k: nk.sum(x, **k), (1 << 10,)),
    "mean": (lambda x, **k: nk.mean(x, **k), (1 << 10,)),
    "max": (lambda x, **k: nk.max(x, **k), (1 << 10,)),
    "argmax": (lambda x, **k: nk.argmax(x, **k), (1 << 10,)),
    "var": (lambda x, **k: nk.var(x, **k), (1 << 10,)),
    "logsumexp": (lambda x, **k: nk.logsumexp(x, **k), (1 << 10,)),
    "cumsum": (lambda x: nk.cumsum(x), (1 << 10,)),
    "softmax (64, 16)": (lambda x: nk.softmax(x), (64, 16)),
    "sum, axis=1 (64, 16)": (lambda x: nk.sum(x, axis=1), (64, 16)),
}
SCALAR = {"sum", "mean", "max", "argmax", "var", "logsumexp"}

stubs: Counter = Counter()  # calls of each stub


class CudaLike(torch.Tensor):
    """A CPU tensor that says it lives on cuda:0 (torch functions see a plain tensor)."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    is_cuda = property(lambda self: True)
    is_cpu = property(lambda self: False)
    device = property(lambda self: torch.device("cuda", 0))

    def get_device(self):
        return 0


CudaLike.__module__ = "torch.fake_cuda"  # a torch type, as numbakern tells them


def _count(name, value):
    def stub(*args, **kwargs):
        stubs[name] += 1
        return value
    return stub


def _on_cpu(fn, name):
    def allocate(*args, device=None, **kwargs):
        stubs[name] += 1
        return fn(*args, **kwargs)
    return allocate


@contextlib.contextmanager
def fake_gpu():
    """torch's CUDA queries, CUDA allocations and the driver launch as counted stubs;
    numbakern's replay taking the GPU branch."""
    saved = []
    missing = object()

    def patch(owner, name, value):
        saved.append((owner, name, getattr(owner, name, missing)))
        setattr(owner, name, value)

    patch(torch.cuda, "current_device", _count("current_device", 0))
    patch(torch._C, "_cuda_getDevice", _count("_cuda_getDevice", 0))
    patch(torch._C, "_cuda_getCurrentRawStream", _count("raw_stream", 0))
    patch(torch, "empty", _on_cpu(torch.empty, "torch.empty"))
    patch(torch, "empty_strided", _on_cpu(torch.empty_strided, "torch.empty_strided"))
    patch(replay, "driver_launch", _count("driver_launch", None))
    for module in _simulator_flags():
        patch(module, "SIMULATOR", False)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is missing:  # torch._C of a CPU build has no CUDA queries
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _simulator_flags():
    """The modules whose ``SIMULATOR`` the replayed path reads."""
    import importlib

    names = ["numbakern.runtime.replay", "numbakern.api._interop", "numbakern.api._dispatch",
             "numbakern.runtime.tensor_table"]
    modules = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "SIMULATOR"):
            modules.append(module)
    return modules


# --- a simulator recording, rewritten as a torch one -----------------------------------


def _torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


def _params(spec, layout_patches: list, flat: list) -> None:
    """Numba's flattened ABI of one argument: an array is meminfo, parent, nitems,
    itemsize, data, shape..., strides...; a scalar one value."""
    if type(spec) is tuple:
        for member in spec:
            _params(member, layout_patches, flat)
        return
    if type(spec) is replay._ArraySpec:
        flat += [0, 0, int(np.prod(spec.shape)), spec.dtype.itemsize]
        layout_patches.append((len(flat), spec.source, spec.offset))
        flat += [0, *spec.shape, *spec.strides]
        return
    flat.append(0)


def _gpu_program(sim: replay.Program) -> replay.Program:
    steps = []
    for step in sim.steps:
        patches, flat = [], []
        for a in step.args:
            _params(a, patches, flat)
        values, pointers = launch.parameter_block(len(flat))
        values[:] = flat
        steps.append(replay._GpuStep(0, step.grid, step.block, values, pointers,
                                     tuple(patches), step.shared))
    return replay.Program("torch", sim.total, steps, _torch_result(sim.result))


def _torch_result(spec):
    if spec is None:
        return None
    if type(spec) is tuple:
        return tuple(_torch_result(s) for s in spec)
    return spec._replace(dtype=_torch_dtype(spec.dtype))


def _recorded(call, shape, scalar: bool) -> replay.Program:
    """The program the simulator records for ``call`` on a simulator array (a whole
    reduction's with keepdims, its result then made 0-d)."""
    h = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    before = Counter(replay.counts)
    call(cuda.to_device(h), **({"keepdims": True} if scalar else {}))
    recorded = Counter(replay.counts) - before
    if not recorded["recorded"]:
        raise RuntimeError(f"not recorded under the simulator: {dict(recorded)}")
    program = _last_program
    if scalar:
        program.result = program.result._replace(shape=(), strides=())
    return program


_last_program = None


def _catch_programs():
    """Keep the last program a recording makes (``Recording.program``)."""
    original = replay.Recording.program

    def program(self, result, *stream):  # a tree before streams were replayed: no stream
        global _last_program
        _last_program = original(self, result, *stream)
        return _last_program

    replay.Recording.program = program
    return original


def _enter(call, t, program) -> None:
    """Put ``program`` where a repeated ``call(t)`` looks for it, under the key the
    tree's own code computes (the general table of the translated call; a tree with
    a tensor table fills it from there on the first call)."""
    _translated_table(call)[_key_of(call, t)] = (program, [])


def _translated_table(call) -> dict:
    """The replay table of the translated call inside ``call``'s public function."""
    fn = getattr(nk, call.__code__.co_names[-1])  # lambda x: nk.NAME(x, ...)
    if hasattr(fn, "translated"):
        return fn.translated.replay_table
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
    return cells["translated"].cell_contents.replay_table


def _key_of(call, t):
    """The general replay key of ``call(t)``: caught as the translated call asks for it."""
    keys = []
    original = replay._signature

    def signature(args, kwargs, arrays, refs, objects):
        key = original(args, kwargs, arrays, refs, objects)
        keys.append(key)
        return key

    replay._signature = signature
    try:
        with contextlib.suppress(Exception):
            call(t)
    finally:
        replay._signature = original
    keys = [k for k in keys if k is not None]
    if not keys:
        raise RuntimeError("the call computed no replay key")
    return keys[0]


# --- measuring -------------------------------------------------------------------------


def _block_us(call, t, n: int) -> float:
    start = time.thread_time()  # CPU time: this machine's cores are shared
    for _ in range(n):
        call(t)
    return (time.thread_time() - start) / n * 1e6


def measure(name: str, call, shape, calls: int, profile: bool) -> dict:
    original = _catch_programs()
    try:
        sim = _recorded(call, shape, name in SCALAR)
    finally:
        replay.Recording.program = original
    t = torch.from_numpy(np.random.default_rng(1).standard_normal(shape)
                         .astype(np.float32)).as_subclass(CudaLike)
    with fake_gpu():
        _enter(call, t, _gpu_program(sim))
        before = replay.counts["replayed"]
        for _ in range(50):
            call(t)
        if replay.counts["replayed"] - before != 50:
            raise RuntimeError(f"{name}: the warm-up calls did not all replay")
        stubs.clear()
        us = min(_block_us(call, t, calls // 10) for _ in range(10))
        per_call = {k: v / (calls // 10 * 10) for k, v in stubs.items()}
        profiled = cProfile.Profile()
        profiled.enable()
        for _ in range(1000):
            call(t)
        profiled.disable()
    stats = pstats.Stats(profiled)
    if profile:
        print(f"--- {name}")
        stats.sort_stats("tottime").print_stats(25)
    # one call of the loop's lambda is the bench's own: not counted
    functions = stats.total_calls / 1000 - 1
    return {"us": us, "functions": functions, "launches": len(sim.steps), **per_call}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 25")
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    args = parser.parse_args()
    print(f"{'case':22} {'us/call':>8} {'calls/call':>10} {'launches':>8}  stubs per call")
    for name, (call, shape) in CASES.items():
        if args.cases and name not in args.cases:
            continue
        r = measure(name, call, shape, args.calls, args.profile)
        rest = ", ".join(f"{k} {v:g}" for k, v in sorted(r.items())
                         if k not in ("us", "functions", "launches"))
        print(f"{name:22} {r['us']:8.2f} {r['functions']:10.0f} {r['launches']:8d}  {rest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
