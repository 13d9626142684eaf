"""Shared pieces of the GPU benchmarks: skip without a GPU, the copy-bandwidth ceiling,
CUDA-event timing, the GB/s figures every benchmark records in ``extra_info``, and the
check of each timed result.

Run on a GPU host:  ``pytest bench/ --benchmark-json=bench.json``.
Two times are recorded for each case: pytest-benchmark's wall time of a call followed
by a device synchronisation (what a Python caller waits), and the median of CUDA-event
timings of the same call (``extra_info["event_ms"]``). GB/s use the event time.

Before it is timed, every case's first result goes to its ``check`` (``measure``'s
keyword, required): a wrong result fails the case, naming the implementation, the case
and the largest error, and is never timed. The suites hold each result to a reference
(``verify.agrees``): exactly for integers, indices and sorts, and for float sums and
scans of ``small_integers`` (every order of summing them is exact); float results that
cannot be exact within a bound each suite states, relative to a float64 reference where
one can be had. The comparison runs on the device, a block of rows at a time (results
reach several GB): CuPy arrays, torch tensors and Numba device arrays alike.
"""

from __future__ import annotations

import math
import sys
from functools import partial
from types import SimpleNamespace

import pytest

import numbakern
from numbakern.teach import compare
from numbakern.teach.peers import give_back_memory

# bench/peers.py, a script beside this file (pytest puts this folder on sys.path)
import peers  # noqa: E402

#: elements compared at a time: float64 temporaries of 128 MiB
CHUNK = 1 << 24


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def device_array(cp, a):
    """``a`` as an array of ``cp`` (CuPy; NumPy in a test of these helpers), on the
    device without a copy: CuPy and Numba device arrays (``__cuda_array_interface__``)
    and torch tensors, detached; bfloat16, which CuPy lacks, widened to float32 by torch
    (a copy: :func:`assert_close` widens a chunk at a time)."""
    if hasattr(a, "detach"):
        a = a.detach()
        if str(a.dtype) == "torch.bfloat16":
            a = a.float()
    return cp.asarray(a)


def _off(cp, got, want, rtol, atol, exact: bool):
    """(how many elements of ``got`` are off ``want``, the largest ``|got - want|`` among
    them) as device scalars: an element is right if equal, NaN where ``want`` is NaN,
    or (``exact`` False) within ``atol + rtol * |want|``, in float64."""
    ok = got == want
    if got.dtype.kind == "f" and want.dtype.kind == "f":
        ok |= cp.isnan(got) & cp.isnan(want)
    err = cp.abs(cp.subtract(got, want, dtype=cp.float64))
    if not exact:
        ok |= err <= atol + rtol * cp.abs(want.astype(cp.float64))
    return cp.count_nonzero(~ok), cp.where(ok, 0.0, err).max()


def _rows(a):
    """``a`` with at least one axis (a 0-d result as one element), of its own kind:
    CuPy, NumPy, Numba or torch (whose chunks are widened one at a time)."""
    return a.reshape(1) if len(a.shape) == 0 else a


def _dtype_name(a) -> str:
    """``a``'s dtype by name, a torch tensor's as a NumPy-style array's."""
    return str(a.dtype).removeprefix("torch.")


def assert_close(cp, got, want, rtol=0.0, atol=0.0, same_dtype=False) -> None:
    """Raise AssertionError unless ``got`` has ``want``'s shape (and dtype, with
    ``same_dtype``: a reference of the result's own dtype) and each element is right by
    :func:`_off` (``rtol = atol = 0``: equal, integers compared exactly; NaN matches
    only NaN). ``atol`` may be an array broadcasting to ``want`` (a bound per element).
    Tuples, such as (values, indices), compare part by part. On the device,
    :data:`CHUNK` elements at a time."""
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            raise AssertionError(f"a {type(got).__name__}, not {len(want)} results")
        for i, (g, w) in enumerate(zip(got, want)):
            try:
                assert_close(cp, g, w, rtol, atol, same_dtype)
            except AssertionError as exc:
                raise AssertionError(f"result {i}: {exc}") from None
        return
    if same_dtype and _dtype_name(got) != _dtype_name(want):  # before bfloat16 widens
        raise AssertionError(f"dtype {_dtype_name(got)}, the reference's {_dtype_name(want)}")
    got, want = (a if hasattr(a, "shape") else device_array(cp, a) for a in (got, want))
    if tuple(got.shape) != tuple(want.shape):
        raise AssertionError(f"shape {tuple(got.shape)}, the reference's {tuple(want.shape)}")
    size = math.prod(want.shape)
    if not size:
        return
    scalar = isinstance(atol, (int, float))
    exact = not rtol and scalar and not atol
    bound = "equal" if exact else \
        f"within {rtol:.3g} * |want| + {f'{atol:.3g}' if scalar else 'a bound each'}"
    got, want = _rows(got), _rows(want)
    atol = cp.broadcast_to(device_array(cp, atol), tuple(want.shape))  # a view
    step = max(1, CHUNK // max(1, math.prod(want.shape[1:])))  # rows a chunk
    bad, worst = 0, 0.0
    for i in range(0, want.shape[0], step):  # each chunk made a CuPy array on its own
        g, w = (device_array(cp, a[i:i + step]) for a in (got, want))
        n, e = _off(cp, g, w, rtol, atol[i:i + step], exact)
        bad, worst = bad + n, cp.maximum(worst, e)  # NaN kept
    if int(bad):
        raise AssertionError(f"{int(bad)} of {size} elements not {bound}; "
                             f"max |error| {float(worst):.4g}")


def taken(cp, x, indices):
    """``x``'s elements at ``indices`` along the last axis; AssertionError if an index
    is outside the axis."""
    idx = device_array(cp, indices)
    if idx.size and bool(((idx < 0) | (idx >= x.shape[-1])).any()):
        raise AssertionError("an index outside the axis")
    return cp.take_along_axis(x, idx, axis=-1)


def assert_distinct(cp, indices) -> None:
    """AssertionError if a row of ``indices`` (the last axis) holds an index twice."""
    s = cp.sort(device_array(cp, indices), axis=-1)
    if bool((s[..., 1:] == s[..., :-1]).any()):
        raise AssertionError("an index taken twice in a row")


def _memory(cp) -> str:
    """The device's free memory and what CuPy's pool and torch's allocator hold."""
    free, total = cp.cuda.runtime.memGetInfo()
    held = f"CuPy's pool {cp.get_default_memory_pool().total_bytes() / 2**30:.1f}"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        held += f", torch's {torch.cuda.memory_reserved() / 2**30:.1f}"
    return f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB free; {held} GiB held"


def _first_result(cp, fn, check, who: str, case: str):
    """``fn()`` checked: the case fails, naming ``who``, if ``fn`` raises, if the check
    cannot run (both with the device's memory, the usual cause in a long run), or if
    the result is wrong (``check``'s AssertionError)."""
    try:
        result = fn()
    except Exception as exc:
        pytest.fail(f"{who} raised in {case}: {exc!r}; {_memory(cp)}", pytrace=False)
    try:
        check(result)
    except AssertionError as exc:
        pytest.fail(f"{who} is wrong in {case}: {exc or 'wrong'}", pytrace=False)
    except Exception as exc:
        pytest.fail(f"the check of {who} could not run in {case}: {exc!r}; {_memory(cp)}",
                    pytrace=False)


def pair_check(cp, x, want):
    """The check of a (values, indices) pair of rows of ``x`` (a sort's, a top-k's):
    the values ``want`` exactly, the indices distinct in each row and holding them."""
    def check(got):
        values, indices = got
        assert_close(cp, values, want)
        assert_distinct(cp, indices)
        assert_close(cp, taken(cp, x, indices), want)

    return check


@pytest.fixture(autouse=True)
def _memory_given_back():
    """After each case, the device memory the pools keep goes back to the driver
    (``numbakern.teach.peers.give_back_memory``): the suites' module-scoped inputs and
    references stay, the pools' leftovers of earlier cases do not."""
    yield
    give_back_memory()


@pytest.fixture(scope="session")
def cp():
    """CuPy, or skip: the benchmarks need a real GPU and CuPy to make inputs."""
    if numbakern.backend().is_simulator:
        pytest.skip("benchmarks need a real CUDA GPU")
    cupy = _cupy()
    if cupy is None:
        pytest.skip("benchmarks need CuPy")
    return cupy


@pytest.fixture(scope="session")
def verify(cp):
    """The checks on the device: ``verify.agrees(want, rtol=0, atol=0,
    same_dtype=False)`` makes a ``check`` for ``measure`` (the result against ``want``
    by :func:`assert_close`); ``verify.pair(x, want)`` the check of a (values,
    indices) pair whose indices may order equal values either way (:func:`pair_check`);
    ``verify.close(got, want, rtol=0, atol=0)`` asserts at once; ``verify.taken(x,
    indices)`` and ``verify.distinct(indices)`` for indices (:func:`taken`,
    :func:`assert_distinct`); ``verify.array(a)`` is :func:`device_array`."""
    close = partial(assert_close, cp)
    return SimpleNamespace(
        close=close, agrees=lambda want, rtol=0.0, atol=0.0, same_dtype=False: (
            lambda got: close(got, want, rtol, atol, same_dtype)),
        pair=partial(pair_check, cp), taken=partial(taken, cp),
        distinct=partial(assert_distinct, cp), array=partial(device_array, cp))


@pytest.fixture(scope="session")
def small_integers(cp):
    """``small_integers(shape, dtype="float32")``: ``bench/peers.py``'s, integers in
    [-8, 8] whose sums and scans are exact in any order."""
    return partial(peers.small_integers, cp)


@pytest.fixture(scope="session")
def torch_cuda():
    """PyTorch with CUDA, or None (a peer that is compared only when installed)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


@pytest.fixture(scope="session")
def copy_gbps(cp) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second / 1e9), as
    ``numbakern compare`` measures it: the one ceiling for both."""
    return compare.copy_gbps()


@pytest.fixture
def measure(cp, copy_gbps, benchmark, request):
    """``measure(fn, nbytes, check=..., **info)``: call ``fn`` once and pass its result
    to ``check`` (which raises AssertionError if it is wrong: the case fails, untimed);
    then benchmark ``fn`` (synchronised) and record event time, GB/s and the fraction
    of copy bandwidth in ``extra_info``."""

    def run(fn, nbytes: int, *, check, **info):
        who = info.get("provider", info.get("impl", "the implementation"))
        _first_result(cp, fn, check, who, request.node.name)

        def synced():
            out = fn()
            cp.cuda.Device().synchronize()
            return out

        benchmark.pedantic(synced, rounds=20, iterations=1, warmup_rounds=2)
        ms = compare.measure(fn, repeat=30) * 1e3  # CUDA events, median
        gbps = nbytes / ms / 1e6
        benchmark.extra_info.update(
            info, event_ms=ms, bytes=nbytes, gbps=gbps, copy_gbps=copy_gbps,
            copy_fraction=gbps / copy_gbps,
        )
        return gbps

    return run
