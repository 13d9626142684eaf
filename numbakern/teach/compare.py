"""The harness behind ``numbakern demo`` and ``numbakern compare``: check, then time.

As in llm.c's ``dev/cuda``, nothing is timed before it is checked: every strategy's
result is compared with a float64 NumPy reference first. Then, on a GPU, each call
is timed with CUDA events (the median of ``repeat``), beside the same operation in
each installed peer (:data:`PEERS`: CuPy, PyTorch eager, ``torch.compile``, the
Triton tutorial's fused softmax, CCCL's ``cuda.compute``; each where it has the
operation), and turned into GB/s (bytes of the input read plus the output written,
divided by the time) and a fraction of the device-to-device copy bandwidth measured
once per process (bytes read + written).

Under the simulator the same code runs with wall-clock times, which say nothing
about a GPU: callers label them so.

:data:`OPERATIONS` holds one :class:`Operation` per function: how to call it with
each strategy (its *variants*), its reference, its tolerance and its peers. An
operation numbakern does not have yet (``hasattr(numbakern, name)`` false) is
reported as not available rather than run.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import numpy as np

import numbakern

from numbakern import strategies as _strategies
from numbakern.teach import peers as _peers


@dataclass(frozen=True)
class Variant:
    """One way of running an operation: a label and the keyword arguments it adds."""

    label: str
    kwargs: dict = field(default_factory=dict)


def reduce_variants() -> list[Variant]:
    """Every grid/block strategy of the whole-array reductions."""
    return [Variant(name, {"strategy": name}) for name in _strategies.available()]


def softmax_variants() -> list[Variant]:
    """Softmax's normalizers, each with every block strategy (``numbakern.softmax``)."""
    out = []
    for block in _strategies.available("block"):
        out.append(Variant(f"max_then_sum/{block}", {"normalizer": "max_then_sum",
                                                     "max_strategy": block,
                                                     "sum_strategy": block}))
        out.append(Variant(f"online/{block}", {"normalizer": "online", "sum_strategy": block}))
    return out


def scan_variants() -> list[Variant]:
    """Every grid/block scan strategy (``numbakern.strategies.available_scans``)."""
    return [Variant(name, {"strategy": name}) for name in _strategies.available_scans()]


def sort_variants() -> list[Variant]:
    """The sort strategies: Onesweep radix sort (any row) and the bitonic network
    (rows of at most ``BitonicSort().max_size``)."""
    return [Variant(name, {"strategy": name}) for name in _strategies.available("sort")]


def select_variants() -> list[Variant]:
    """The select strategies of ``topk`` (``numbakern.strategies.available("select")``)."""
    return [Variant(name, {"strategy": name}) for name in _strategies.available("select")]


def histogram_variants() -> list[Variant]:
    """Every histogram strategy (``numbakern.strategies.available("histogram")``)."""
    return [Variant(name, {"strategy": name}) for name in _strategies.available("histogram")]


def _sort_skips(variant: Variant, shape: tuple, kw: dict) -> str | None:
    """Why ``variant`` cannot sort rows of this input (its strategy's ``fits``, a
    registered sort of one's own included), or None."""
    n = shape[kw.get("axis", -1)]
    strategy = _strategies.resolve("sort", variant.kwargs["strategy"], n=n)
    if strategy.fits(n):
        return None
    most = getattr(strategy, "max_size", None)
    return f"rows of {n} ({variant.label} " + \
        (f"takes at most {most})" if most is not None else "does not take them: its fits "
                                                           f"({n}) is False)")


def _median_variants() -> list[Variant]:
    """median's strategies: each sort's (sort the slice, read the middle) and radix
    select's (the middle ranks found by digit passes, no sort)."""
    return sort_variants() + [Variant("radix_select", {"strategy": "radix_select"})]


def _var_skips(variant: Variant, shape: tuple, kw: dict) -> str | None:
    """atomic_fold cannot fold var's state where an output's pieces meet (three fields,
    ``(count, mean, M2)``: it folds one or two), so it is not run for var."""
    if variant.label.startswith("atomic_fold"):
        return "atomic_fold folds no three-field (count, mean, M2) state: two_pass reduces var"
    return None


#: the k of ``compare topk`` and the demo: a language model sampler's top-k
TOPK_K = 50


def _select_skips(variant: Variant, shape: tuple, kw: dict) -> str | None:
    """Why ``variant`` cannot select from rows of this input, or None: a ``k`` past the
    strategy's ``max_k`` (its ``fits``, a registered select of one's own included); a
    whole long row in one block is not the case of bitonic_select or
    radix_block_select (it takes seconds on a GPU)."""
    n = shape[kw.get("axis", -1)]
    k = min(TOPK_K, n)
    strategy = _strategies.resolve("select", variant.kwargs.get("strategy"), n=n, k=k)
    if not strategy.fits(n, k):
        most = strategy.max_k
        return f"k={k} ({variant.label} takes k <= {most})" if most is not None and \
            k > most else f"rows of {n}, k={k} ({variant.label} does not fit them)"
    if variant.label in ("bitonic_select", "radix_block_select") and n > 1 << 20:
        return f"rows of {n} (a block per row: radix_select spreads a row over blocks)"
    return None


def _topk_values(x, axis=-1):
    """The ``TOPK_K`` largest along ``axis``, largest first, NaN first (as
    ``torch.topk``): the first of NumPy's stable descending order."""
    moved = np.moveaxis(np.asarray(x), axis, -1)
    n = moved.shape[-1]
    order = n - 1 - np.argsort(moved[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    picked = np.take_along_axis(moved, order[..., :min(TOPK_K, n)], axis=-1)
    return np.moveaxis(picked, -1, axis)


def _median_skips(variant: Variant, shape: tuple, kw: dict) -> str | None:
    """Why ``variant`` cannot sort the slices a median reads (every element without
    ``--axis``), or None."""
    if variant.label == "radix_select":  # takes any slice
        return None
    axis = kw.get("axis")
    return _sort_skips(variant, (int(np.prod(shape)),) if axis is None else shape, kw)


def _stable(fn):
    """NumPy's stable sort or argsort (the order numbakern's sorts give)."""
    def call(x, axis=-1):
        return fn(x, axis=axis, kind="stable")
    return call


def _logsumexp(x, axis=None):
    """log(sum(exp(x))) in float64 with the maximum taken out (SciPy's, without SciPy)."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out.reshape(np.max(x, axis=axis).shape)


# --- tolerances: computed once per input, then every strategy is held to them ----------


def exact(x, ref, dtype, kw):
    """No tolerance: the result must equal NumPy's (integers, max/min, indices)."""
    return None


def tree_bound(scale):
    """``4 eps(acc) scale + eps(result) |ref| + tiny(result)``, elementwise.

    The error bound of a tree reduction in the accumulator dtype (float16
    accumulates in float32) plus the final rounding, as tests/test_reductions.py;
    ``scale(x64, ref, kw)`` is the sum of magnitudes the error grows with. Integer
    results are exact.
    """

    def tolerance(x, ref, dtype, kw):
        if dtype.kind != "f":
            return None
        acc = np.float32 if x.dtype == np.float16 else x.dtype
        result = np.finfo(dtype)
        x64 = np.abs(x.astype(np.float64))
        return (4 * np.finfo(acc).eps * scale(x64, ref, kw) + result.eps * np.abs(ref)
                + result.smallest_subnormal)

    return tolerance


def mean_bound(x, ref, dtype, kw):
    """The sum's bound divided by the count (float input), or only the final rounding
    (bool and integer input: an exact integer sum, divided in float64)."""
    if x.dtype.kind in "biu":
        result = np.finfo(dtype)
        return result.eps * np.abs(ref) + result.smallest_subnormal
    return tree_bound(lambda a, ref, kw: a.mean(axis=kw.get("axis")))(x, ref, dtype, kw)


def allclose(x, ref, dtype, kw):
    """``allclose``'s default tolerance, ``1e-8 + 1e-5 |ref|`` (how the fused-softmax
    tutorial checks its 1823 x 781 result against ``torch.softmax``), widened to what
    the result dtype can hold: float16 rounds to ``eps/2 = 4.9e-4`` relative, and
    below its smallest normal to a subnormal step."""
    result = np.finfo(dtype)
    atol = max(1e-8, float(result.smallest_subnormal))
    return atol + max(1e-5, 2 * float(result.eps)) * np.abs(ref)


def log_softmax_bound(x, ref, dtype, kw):
    """:func:`allclose`'s tolerance plus the rounding of the difference
    ``(x - max) - log(sum)`` that numbakern (and torch) compute: a few units of the
    accumulator's eps (float32's for float16) times the magnitudes subtracted, and a
    few for the sum's ``exp``. (A log-probability near 0 comes from two terms near
    each other: ``1e-5 |ref|`` alone refused numbakern's and torch's results alike.)"""
    eps = np.finfo(np.float32 if x.dtype == np.float16 else x.dtype).eps
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(axis=kw.get("axis", -1), keepdims=True)
    subtracted = np.abs(shifted) + np.abs(shifted - ref)  # |x - max| + log(sum)
    return allclose(x, ref, dtype, kw) + 4 * eps * np.nan_to_num(subtracted + 2, nan=0.0)


def check(got, ref: np.ndarray, tol) -> tuple[bool, float]:
    """``(ok, max |got - ref|)``: equal (``tol`` None) or within ``tol`` elementwise;
    NaN where the reference has NaN counts as right."""
    got = np.asarray(got)
    if got.shape != ref.shape:
        return False, float("inf")
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    both_nan = np.isnan(err) & np.isnan(ref.astype(np.float64))
    err = np.where(both_nan, 0.0, err)
    ok = np.array_equal(got, ref, equal_nan=ref.dtype.kind == "f") if tol is None \
        else bool(np.all(err <= tol))  # a NaN error (got NaN, ref not) fails here
    return bool(ok), float(np.nan_to_num(err.max(), nan=np.inf)) if err.size else 0.0


def _softmax(x, axis=-1):
    """In ``x``'s precision (the harness passes float64 for the reference values)."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x, axis=-1):
    """``(x - max) - log(sum(exp(x - max)))``, as numbakern computes it."""
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _factors(a, ref, kw):
    """A running product of ``k`` factors, multiplied in any order, is off by at most
    ``(k - 1)`` unit roundoffs (``eps / 2``) relative: ``k |ref| / 8`` under
    :func:`tree_bound`'s ``4 eps`` (tight enough that a scan shifted by one element
    of ``1 +- 0.001`` fails)."""
    axis = kw.get("axis")
    if axis is None:  # NumPy's cumprod of the flattened input: 1-D
        k = np.arange(1, ref.size + 1)
    else:
        shape = [1] * ref.ndim
        shape[axis] = ref.shape[axis]
        k = np.arange(1, ref.shape[axis] + 1).reshape(shape)
    return np.abs(ref) * k / 8


def _product(a, ref, kw):
    """A product of ``k`` factors, as :func:`_factors`' running ones: ``k |ref| / 8``,
    ``k`` the factors of each output (the whole input, or its length along ``axis``;
    NumPy's own float32 product of 4096 factors near 1 is off by ~12 eps)."""
    axis = kw.get("axis")
    k = a.size if axis is None else a.shape[axis]
    return np.abs(ref) * max(k, 1) / 8


def _ufunc_reduce(name):
    return lambda x, axis=None: getattr(np, name).reduce(x, axis=axis)


# --- operations -----------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    """One numbakern function, as the harness runs it.

    Attributes:
        name: the function's name in ``numbakern`` (``"sum"``).
        reference: ``f(x, **kw)`` in NumPy: run on ``x`` as float64 (``exact``
            operations: on ``x`` itself) for the expected values.
        tolerance: ``f(x, ref, result_dtype, kw)`` -> allowed ``|got - ref|``
            (elementwise), or None for an exact match.
        variants: the strategies to run, as :class:`Variant` s.
        kinds: dtype kinds the operation takes (``"f"``: floats only).
        exact: the reference runs on ``x`` as is (max, argmax, bitwise).
        peers: ``{peer: f(module, x, **kw)}``, a peer of :data:`PEERS` to the call
            of it, given the module ``_module(peer)`` and the input as
            :func:`peer_input` makes it; raising where the input is not covered.
        skips: ``f(variant, shape, kw)`` -> why a variant cannot run on this input
            (reported, not run), or None.
        simulator_shape: the default input under the simulator.
        gpu_shape: the default input on a GPU.
        one_d: the operation takes 1-D input only (``bincount``).
        two_d: the operation takes 2-D input only (``causal_softmax``: its mask needs
            queries and keys).
        axes: the ``axis`` it takes: ``"any"`` axis of the input, the ``"last"``
            only (``causal_softmax``: its mask runs along the keys), or ``"none"``
            (the function has no ``axis``: ``cross_entropy``, ``bincount``, the
            segmented functions).
    """

    name: str
    reference: Callable
    tolerance: Callable
    variants: Callable[[], list[Variant]]
    kinds: str = "biuf"
    exact: bool = False
    peers: dict = field(default_factory=dict)
    skips: Callable | None = None
    simulator_shape: tuple = (4096,)
    gpu_shape: tuple = (1 << 26,)
    one_d: bool = False
    two_d: bool = False
    axes: str = "any"

    @property
    def available(self) -> bool:
        return hasattr(numbakern, self.name)

    def call(self, x, variant: Variant, kw: dict):
        return getattr(numbakern, self.name)(x, **kw, **variant.kwargs)

    def traffic(self, x: np.ndarray, got: np.ndarray) -> int:
        """Bytes the call reads and writes at the least: the input and the result
        (GB/s is these over the time)."""
        return int(x.nbytes + got.nbytes)

    def expected(self, x: np.ndarray, kw: dict) -> "Expected":
        """The reference values (float64 unless exact), NumPy's result dtype and the
        tolerance, computed once for all the strategies."""
        corner = x[(slice(0, 1),) * x.ndim]
        dtype = np.asarray(self.reference(corner, **kw)).dtype
        values = x if self.exact or x.dtype.kind != "f" else x.astype(np.float64)
        ref = np.asarray(self.reference(values, **kw))
        return Expected(ref, dtype, self.tolerance(x, ref, dtype, kw))


@dataclass(frozen=True)
class Expected:
    """What every strategy is held to: NumPy's values, its dtype, the tolerance."""

    values: np.ndarray
    dtype: np.dtype
    tolerance: Any  # an array (or scalar) of allowed |error|, or None: exact


def _axis_kw(name: str):
    """``kw`` for a peer that spells axis ``dim`` (torch) and wants it left out for None."""
    def convert(kw):
        axis = kw.get("axis")
        return {} if axis is None else {name: axis}
    return convert


_dim, _ax = _axis_kw("dim"), _axis_kw("axis")


def _peer(cupy_fn: Callable | None, torch_fn: Callable | None) -> dict:
    peers = {}
    if cupy_fn:
        peers["cupy"] = lambda cp, x, **kw: cupy_fn(cp, x, **_ax(kw))
    if torch_fn:
        peers["torch"] = lambda t, x, **kw: torch_fn(t, x, **_dim(kw))
    return peers


def _softmax_peers(log: bool) -> dict:
    """``torch.compile`` of torch's function, and (softmax only) Triton's fused softmax."""
    peers = {"torch.compile": lambda t, x, **kw: _peers.compiled_softmax(t, x, log=log,
                                                                          **_dim(kw))}
    if not log:
        peers["triton"] = lambda t, x, **kw: _peers.triton_softmax(t, x, **_dim(kw))
    return peers


def _cccl_reduce(op: str) -> dict:
    return {"cuda.compute": lambda c, x, **kw: _peers.cccl_reduce(c, x, op, **kw)}


def _class_targets(shape) -> np.ndarray:
    """Targets for a cross-entropy of rows of ``shape`` (1-D: one row): spread over
    the classes, the same for numbakern, the reference and the peers."""
    rows, classes = (1, shape[0]) if len(shape) == 1 else shape
    return (np.arange(rows, dtype=np.int64) * 7919) % max(classes, 1)


def _rows(x):
    return x.reshape(1, -1) if x.ndim == 1 else x


def _cross_entropy(x, **kw):
    """The mean cross-entropy of ``x``'s rows against :func:`_class_targets`."""
    rows = _rows(np.asarray(x))
    t = _class_targets(rows.shape)
    wide = rows.astype(np.float64)
    m = wide.max(axis=1)
    lse = m + np.log(np.exp(wide - m[:, None]).sum(axis=1))
    return np.asarray((lse - wide[np.arange(len(t)), t]).mean(), dtype=np.asarray(x).dtype)


@dataclass(frozen=True)
class CrossEntropy(Operation):
    """``numbakern.cross_entropy`` of the input's rows against fixed class targets
    (it takes a second array, which the other operations do not)."""

    def call(self, x, variant: Variant, kw: dict):
        rows = _rows(x)
        return numbakern.cross_entropy(rows, _class_targets(rows.shape), **variant.kwargs)


@dataclass(frozen=True)
class TopK(Operation):
    """``numbakern.topk(x, 50)`` along the last axis (or ``--axis``), its values
    checked (exactly: the indices of equal values may differ from a peer's, the
    values never do; the bytes counted are the input, the values and their int64
    indices, which every peer writes too)."""

    def traffic(self, x: np.ndarray, got: np.ndarray) -> int:
        return int(x.nbytes + got.nbytes + got.size * 8)

    def call(self, x, variant: Variant, kw: dict):
        axis = kw.get("axis", -1)
        k = min(TOPK_K, x.shape[axis])
        return numbakern.topk(x, k, axis=axis, **variant.kwargs).values


def _torch_topk(t, x, dim=-1):
    return t.topk(x, min(TOPK_K, x.shape[dim]), dim=dim).values


def _torch_cross_entropy(t, x, **kw):
    rows = _rows(x)
    target = t.as_tensor(_class_targets(tuple(rows.shape)), device=rows.device)
    return t.nn.functional.cross_entropy(rows, target)


ATTENTION_SCALE = 0.125  # 1/sqrt(64): attention's scale for heads of 64 dimensions


def _attention(x):
    """A 2-D ``(rows, keys)`` input whose rows are a multiple of its keys as square
    ``(heads, keys, keys)`` score matrices; any other input as it is, its last two
    axes ``(queries, keys)``."""
    if x.ndim == 2 and x.shape[0] % x.shape[1] == 0:
        return x.reshape(-1, x.shape[1], x.shape[1])
    return x


def _causal_keep(shape) -> np.ndarray:
    """The causal mask of ``(..., queries, keys)``, aligned bottom-right."""
    queries, keys = shape[-2:]
    return np.arange(keys) <= np.arange(queries)[:, None] + keys - queries


def _causal_softmax(x, **kw):
    """Softmax of ``x * ATTENTION_SCALE`` over the keys each query sees causally
    (:func:`_attention`'s shape); a row that sees no key is 0."""
    scores = _attention(np.asarray(x)) * ATTENTION_SCALE
    z = np.where(_causal_keep(scores.shape), scores, -np.inf)
    m = z.max(axis=-1, keepdims=True)
    e = np.exp(z - np.where(m == -np.inf, 0, m))
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s)


@dataclass(frozen=True)
class CausalSoftmax(Operation):
    """``numbakern.softmax(scores, causal=True, scale=1/8)`` of attention scores:
    the masked softmax of an attention without a flash kernel. Its torch peer is
    ``softmax(masked_fill(~causal, -inf))`` with fully masked rows 0
    (``nan_to_num``), as ``_safe_softmax`` gives them."""

    @property
    def available(self) -> bool:
        return hasattr(numbakern, "softmax")

    def call(self, x, variant: Variant, kw: dict):
        return numbakern.softmax(_attention(x), causal=True, scale=ATTENTION_SCALE, **kw,
                                 **variant.kwargs)


def _torch_causal_softmax(t, x, **kw):
    scores = _attention(x) * ATTENTION_SCALE
    keep = t.as_tensor(_causal_keep(tuple(scores.shape)), device=scores.device)
    return t.softmax(scores.masked_fill(~keep, -float("inf")), -1).nan_to_num(0.0)


@lru_cache(maxsize=8)
def segment_offsets(n: int) -> np.ndarray:
    """Offsets of segments over ``n`` elements, the same for numbakern, the reference
    and the peers: lengths from 0 (empty) to twice a mean of ``min(1024, n // 8)``, so
    warps and blocks both serve some. Built once per ``n`` and read-only: a timed call
    reads them, it does not draw them."""
    mean = max(1, min(1024, n // 8))
    lengths = np.random.default_rng(17).integers(0, 2 * mean + 1, n // mean + 2)
    offsets = np.minimum(np.concatenate([[0], np.cumsum(lengths)]), n)
    offsets = np.concatenate([offsets[offsets < n], [n]]).astype(np.int64)
    offsets.flags.writeable = False
    return offsets


@lru_cache(maxsize=8)
def _offsets_on_device(n: int, module: str, device: str = ""):
    """:func:`segment_offsets` on the device, in the array type ``module`` names (torch
    on ``device``): uploaded once, so a timed call holds the segmented kernels and the
    peers' only, as a caller whose offsets already live on the GPU."""
    offsets = segment_offsets(n)
    if module == "torch":
        return _module("torch").as_tensor(offsets.copy(), device=device)
    if module == "numba":
        from numba import cuda

        return cuda.to_device(offsets)
    return _module("cupy").asarray(offsets)


def _per_segment(fn, x) -> list:
    offsets = segment_offsets(len(x))
    return [fn(x[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]


def _segment_sums(x, **kw):
    sums = _per_segment(np.sum, x)
    return np.array(sums, dtype=np.sum(x[:0]).dtype)


def _segment_scans(x, **kw):
    return np.concatenate([np.cumsum(x[:0])] + _per_segment(np.cumsum, x))


def _segment_sorts(x, **kw):
    return np.concatenate([x[:0]] + _per_segment(lambda s: np.sort(s, kind="stable"), x))


def _segment_prefix_bound(x, ref, dtype, kw):
    """The tree bound of each running sum within its segment (``|a|`` summed)."""
    return tree_bound(lambda a, r, k: _segment_scans(np.abs(a)))(x, ref, dtype, kw)


@dataclass(frozen=True)
class Segmented(Operation):
    """``numbakern.<name>(x, offsets)`` over the fixed :func:`segment_offsets` of a
    1-D input (a second array, which the plain operations do not take)."""

    one_d: bool = True
    axes: str = "none"

    def traffic(self, x: np.ndarray, got: np.ndarray) -> int:
        """The input, the result and the offsets read."""
        return int(x.nbytes + got.nbytes + segment_offsets(len(x)).nbytes)

    def call(self, x, variant: Variant, kw: dict):
        module = type(x).__module__.split(".")[0]
        offsets = segment_offsets(len(x)) if module == "numpy" else \
            _offsets_on_device(len(x), module, str(getattr(x, "device", "")))
        return getattr(numbakern, self.name)(x, offsets, **variant.kwargs)


def _torch_segment_sum(t, x, **kw):
    offsets = _offsets_on_device(len(x), "torch", str(x.device))
    return t.segment_reduce(x, "sum", offsets=offsets, unsafe=True)


def _cccl_segment_sum(compute, x, **kw):
    offsets = _offsets_on_device(len(x), "cupy")
    return _peers.cccl_segmented_sum(compute, x, offsets)


def block_variants() -> list[Variant]:
    """Every block strategy, for the row kernels that take one (``strategy=``)."""
    return [Variant(name, {"strategy": name}) for name in _strategies.available("block")]


OPERATIONS: dict[str, Operation] = {
    o.name: o
    for o in [
        Operation("sum", np.sum, tree_bound(lambda a, ref, kw: a.sum(axis=kw.get("axis"))),
                  reduce_variants,
                  peers={**_peer(lambda cp, x, **k: cp.sum(x, **k),
                                 lambda t, x, **k: t.sum(x, **k)), **_cccl_reduce("sum")}),
        Operation("mean", np.mean, mean_bound, reduce_variants,
                  peers=_peer(lambda cp, x, **k: cp.mean(x, **k),
                              lambda t, x, **k: t.mean(x if x.is_floating_point()
                                                       else x.double(), **k))),
        Operation("max", np.max, exact, reduce_variants, exact=True,
                  peers={**_peer(lambda cp, x, **k: cp.max(x, **k),
                                 lambda t, x, **k: t.amax(x, **k)), **_cccl_reduce("max")}),
        Operation("min", np.min, exact, reduce_variants, exact=True,
                  peers={**_peer(lambda cp, x, **k: cp.min(x, **k),
                                 lambda t, x, **k: t.amin(x, **k)), **_cccl_reduce("min")}),
        Operation("prod", np.prod, tree_bound(_product), reduce_variants,
                  peers=_peer(lambda cp, x, **k: cp.prod(x, **k),
                              lambda t, x, **k: t.prod(x, **k))),
        Operation("xor_sum", _ufunc_reduce("bitwise_xor"), exact, reduce_variants,
                  kinds="biu", exact=True),
        Operation("nansum", np.nansum, tree_bound(lambda a, ref, kw: np.nansum(
                      a, axis=kw.get("axis"))), reduce_variants,
                  peers=_peer(lambda cp, x, **k: cp.nansum(x, **k),
                              lambda t, x, **k: t.nansum(x, **k))),
        Operation("nanmax", np.nanmax, exact, reduce_variants, exact=True,
                  peers=_peer(lambda cp, x, **k: cp.nanmax(x, **k), None)),
        Operation("any", np.any, exact, reduce_variants, exact=True,
                  peers=_peer(lambda cp, x, **k: cp.any(x, **k),
                              lambda t, x, **k: t.any(x, **k))),
        Operation("count_nonzero", np.count_nonzero, exact, reduce_variants, exact=True,
                  peers=_peer(lambda cp, x, **k: cp.count_nonzero(x, **k),
                              lambda t, x, **k: t.count_nonzero(x, **k))),
        Operation("ptp", np.ptp, exact, reduce_variants, exact=True, kinds="iuf",
                  peers=_peer(lambda cp, x, **k: cp.ptp(x, **k), None)),
        Operation("var", np.var, allclose, reduce_variants,
                  peers=_peer(lambda cp, x, **k: cp.var(x, **k),
                              lambda t, x, **k: t.var(x if x.is_floating_point()
                                                      else x.double(), correction=0, **k)),
                  skips=_var_skips),
        Operation("logsumexp", _logsumexp, allclose, reduce_variants, kinds="f",
                  peers=_peer(None, lambda t, x, **k: t.logsumexp(
                      x, **(k or {"dim": tuple(range(x.ndim))})))),
        Operation("argmax", np.argmax, exact, reduce_variants, exact=True,
                  peers=_peer(lambda cp, x, **k: cp.argmax(x, **k),
                              lambda t, x, **k: t.argmax(x, **k))),
        Operation("argmin", np.argmin, exact, reduce_variants, exact=True,
                  peers=_peer(lambda cp, x, **k: cp.argmin(x, **k),
                              lambda t, x, **k: t.argmin(x, **k))),
        Operation("cumsum", np.cumsum,
                  tree_bound(lambda a, ref, kw: np.cumsum(a, axis=kw.get("axis")).reshape(
                      ref.shape)), scan_variants,
                  peers={**_peer(lambda cp, x, **k: cp.cumsum(x, **k),
                                 lambda t, x, **k: t.cumsum(x.reshape(-1) if not k else x,
                                                            **(k or {"dim": 0}))),
                         "cuda.compute": _peers.cccl_cumsum}),
        Operation("cumprod", np.cumprod, tree_bound(_factors), scan_variants,
                  peers=_peer(lambda cp, x, **k: cp.cumprod(x, **k),
                              lambda t, x, **k: t.cumprod(x.reshape(-1) if not k else x,
                                                          **(k or {"dim": 0})))),
        Operation("softmax", _softmax, allclose, softmax_variants, kinds="f",
                  peers={**_peer(lambda cp, x, **k: _cupyx_softmax(x, **k),
                                 lambda t, x, **k: t.softmax(x, **k)),
                         **_softmax_peers(log=False)}),
        Operation("log_softmax", _log_softmax, log_softmax_bound, softmax_variants, kinds="f",
                  peers={**_peer(lambda cp, x, **k: _cupyx_softmax(x, log=True, **k),
                                 lambda t, x, **k: t.log_softmax(x, **k)),
                         **_softmax_peers(log=True)}),
        # without --axis, numbakern, NumPy and the peers sort along the last axis
        # (cuda.compute: of 1-D input only)
        Operation("sort", _stable(np.sort), exact, sort_variants, exact=True,
                  peers={**_peer(lambda cp, x, **k: cp.sort(x, **k),
                                 lambda t, x, **k: t.sort(x, stable=True, **k).values),
                         "cuda.compute": _peers.cccl_sort},
                  skips=_sort_skips, simulator_shape=(256,)),
        Operation("argsort", _stable(np.argsort), exact, sort_variants, exact=True,
                  peers=_peer(lambda cp, x, **k: cp.argsort(x, **k),
                              lambda t, x, **k: t.argsort(x, stable=True, **k)),
                  skips=_sort_skips, simulator_shape=(256,)),
        TopK("topk", _topk_values, exact, select_variants, exact=True,
             peers=_peer(None, _torch_topk), skips=_select_skips,
             simulator_shape=(4, 256), gpu_shape=(8192, 50257)),
        # a full sort of each slice (or radix select's passes), then the middle read
        # on the device; torch's median is the lower middle value, so its peer is
        # quantile(0.5), which refuses inputs of more than 2^24 elements (n/a)
        Operation("median", np.median, exact, _median_variants, exact=True,
                  peers=_peer(lambda cp, x, **k: cp.median(x, **k),
                              lambda t, x, **k: t.quantile(x, 0.5, **k)),
                  skips=_median_skips, simulator_shape=(256,)),
        Operation("bincount", np.bincount, exact, histogram_variants, kinds="iu", exact=True,
                  peers=_peer(lambda cp, x, **k: cp.bincount(x),
                              lambda t, x, **k: t.bincount(x)), one_d=True, axes="none"),
        Segmented("segmented_reduce", _segment_sums,
                  tree_bound(lambda a, ref, kw: _segment_sums(np.abs(a))), reduce_variants,
                  kinds="iuf", peers={"torch": _torch_segment_sum,
                                      "cuda.compute": _cccl_segment_sum}),
        Segmented("segmented_scan", _segment_scans, _segment_prefix_bound, scan_variants,
                  kinds="iuf"),
        Segmented("segmented_sort", _segment_sorts, exact, sort_variants, exact=True,
                  skips=_sort_skips, simulator_shape=(256,)),
        # a language model's rows, as topk's (the default 2**26 would be one row of
        # 2**26 classes, one block's work)
        CrossEntropy("cross_entropy", _cross_entropy, allclose, block_variants, kinds="f",
                     peers={"torch": _torch_cross_entropy}, simulator_shape=(64, 100),
                     gpu_shape=(8192, 50257), axes="none"),
        # 32 x 16 heads of 2048 x 2048 scores make 8 GB of float32; 32 heads hold the
        # same rows.
        CausalSoftmax("causal_softmax", _causal_softmax, allclose, softmax_variants,
                      kinds="f", peers={"torch": _torch_causal_softmax},
                      simulator_shape=(48, 24), gpu_shape=(65536, 2048), two_d=True,
                      axes="last"),
    ]
}


def default_sizes() -> str:
    """The default inputs of ``compare``, as its ``--size`` help states them: the
    common default, then each operation whose own differs, from the table itself."""
    base = Operation.__dataclass_fields__
    gpu, sim = base["gpu_shape"].default, base["simulator_shape"].default

    def text(shape):
        return "x".join("2**26" if n == 1 << 26 else str(n) for n in shape)

    own = {}
    for op in OPERATIONS.values():
        parts = ([f"{text(op.gpu_shape)} on a GPU"] if op.gpu_shape != gpu else []) + \
            ([f"{text(op.simulator_shape)} under the simulator"]
             if op.simulator_shape != sim else [])
        if parts:
            own.setdefault(", ".join(parts), []).append(op.name)
    others = "; ".join(f"{', '.join(names)}: {where}" for where, names in own.items())
    return f"Default {text(gpu)} on a GPU, {text(sim)} under the simulator ({others})."


def _cupyx_softmax(x, axis=-1, log=False):
    from cupyx.scipy.special import log_softmax, softmax

    return (log_softmax if log else softmax)(x, axis=axis)


def sample(op: Operation, shape, dtype, seed: int = 0) -> np.ndarray:
    """A reproducible input: normal floats (logit-like, std 3), small integers;
    values near 1 for products, so they neither overflow nor vanish."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if op.name in ("prod", "cumprod"):
            return rng.uniform(0.999, 1.001, shape).astype(dtype)
        return (3 * rng.standard_normal(shape, dtype=np.float32)).astype(dtype, copy=False)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if op.name == "bincount":  # non-negative values, 256 bins
        return rng.integers(0, min(256, np.iinfo(dtype).max + 1), shape).astype(dtype)
    low, high = (1, 3) if op.name in ("prod", "cumprod") else (-50, 51)
    info = np.iinfo(dtype)
    return rng.integers(max(low, info.min), min(high, info.max + 1), shape).astype(dtype)


# --- devices, peers, timing -------------------------------------------------------------


def on_gpu() -> bool:
    return not numbakern.backend().is_simulator


#: every peer, in the order the tables show them, to the library whose arrays its
#: functions read (:func:`peer_input`)
PEERS = {"cupy": "cupy", "torch": "torch", "torch.compile": "torch", "triton": "torch",
         "cuda.compute": "cupy"}


@lru_cache(maxsize=None)
def _module(name: str):
    """The module a peer's functions are given: CuPy, torch (for ``torch``,
    ``torch.compile`` and ``triton``) or ``cuda.compute``; None where the peer cannot
    run here. Imported on first call only, which compare makes on a GPU only."""
    try:
        if name == "cuda.compute":
            import cupy  # its input and output arrays
            from cuda import compute

            # a CPU-only install imports, but has no algorithms (no CUDA bindings)
            return compute if hasattr(compute, "reduce_into") else None
        if name == "cupy":
            import cupy

            return cupy
        import torch

        if name == "triton":
            import triton  # noqa: F401  (the fused softmax's compiler)
        if name == "torch.compile" and not hasattr(torch, "compile"):
            return None
        return torch if torch.cuda.is_available() else None
    except Exception:  # not installed, or installed without a usable CUDA
        return None


@lru_cache(maxsize=None)
def installed_peers() -> tuple[str, ...]:
    """The peers of :data:`PEERS` importable here with a usable GPU (none under the
    simulator: nothing of theirs is imported there)."""
    if not on_gpu():
        return ()
    return tuple(name for name in PEERS if _module(name) is not None)


def to_device(x: np.ndarray):
    """The input where numbakern and the peers read it: CuPy if installed, else a
    Numba device array; the NumPy array itself under the simulator."""
    if not on_gpu():
        return x
    cp = _module("cupy")
    if cp is not None:
        return cp.asarray(x)
    from numba import cuda

    return cuda.to_device(x)


def peer_input(name: str, x_dev):
    """The input as peer ``name`` reads it, sharing ``x_dev``'s memory: a torch CUDA
    tensor (torch, torch.compile, triton) or a CuPy array (cupy, cuda.compute)."""
    if PEERS[name] == "torch":
        return _module("torch").as_tensor(x_dev, device="cuda")
    return _module("cupy").asarray(x_dev)


def to_host(result) -> np.ndarray:
    """Any result (NumPy, CuPy, PyTorch, Numba or ``__cuda_array_interface__``) on the host."""
    if isinstance(result, (np.ndarray, np.generic, int, float, bool)):
        return np.asarray(result)
    module = type(result).__module__.split(".")[0]
    if module == "cupy":
        return result.get()
    if module == "torch":
        return result.detach().cpu().numpy()
    if hasattr(result, "copy_to_host"):
        return result.copy_to_host()
    from numba import cuda

    return cuda.as_cuda_array(result).copy_to_host()


def measure(fn: Callable[[], Any], repeat: int,
            before: Callable[[], Any] | None = None) -> float:
    """Median seconds per call: CUDA events on a GPU (after a warm-up call),
    wall-clock under the simulator; ``before``, where given, is queued ahead of each
    start event (untimed: work that keeps the GPU busy while ``fn`` is enqueued)."""
    if not on_gpu():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    from numba import cuda

    fn()
    cuda.synchronize()
    stream = cuda.default_stream()  # the legacy stream: ordered with CuPy's and torch's
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start, stop = cuda.event(), cuda.event()
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


_COPIES = 4  # copies between a pair of events (copy_gbps)


@lru_cache(maxsize=None)
def copy_gbps(nbytes: int = 1 << 30, repeat: int = 20) -> float:
    """Device-to-device copy bandwidth, bytes read + written per second / 1e9
    (measured once per process; under the simulator a host memcpy).

    The copies are queued on the timing events' stream (``cuMemcpyDtoDAsync``), four
    between a pair of events, behind one more copy queued before the start event: the
    GPU is busy with it while the host enqueues the timed ones (Numba's
    ``copy_to_device`` runs tens of microseconds of Python each), so no wait for the
    host falls between the events. Without that copy, one copy a pair read 2.37 TB/s
    on an H100 where CuPy's read 2.82, four a pair 2.86 where CuPy's four read 3.00
    (``bench/NOTES.md``)."""
    from numba import cuda

    n = nbytes if on_gpu() else 1 << 20
    src = cuda.device_array(n, dtype=np.uint8)
    dst = cuda.device_array(n, dtype=np.uint8)
    stream = cuda.default_stream()  # :func:`measure`'s; a stream makes the copy queued

    def copy():
        dst.copy_to_device(src, stream=stream)

    def copies():
        for _ in range(_COPIES):
            copy()

    return 2 * n * _COPIES / measure(copies, repeat, before=copy) / 1e9


# --- one measurement ---------------------------------------------------------------------


@dataclass
class Row:
    """One checked (and maybe timed) call: a strategy of numbakern, or a peer."""

    provider: str  # "numbakern" or a peer's name
    strategy: str  # the variant's label, or the peer's name
    ok: bool | None = None  # None: a peer that could not run
    max_error: float = float("nan")
    result: str = ""
    note: str = ""
    seconds: float | None = None
    nbytes: int = 0
    value: Any = None  # the result on the host

    @property
    def gbps(self) -> float | None:
        return None if not self.seconds else self.nbytes / self.seconds / 1e9

    def as_dict(self, copy: float | None = None, speed: bool = True) -> dict:
        """The row as JSON; ``speed`` False (simulator times): no GB/s."""
        d = {"provider": self.provider, "strategy": self.strategy, "ok": self.ok,
             "max_error": self.max_error, "result": self.result, "note": self.note,
             "seconds": self.seconds, "bytes": self.nbytes,
             "gbps": self.gbps if speed else None}
        if speed and copy and self.gbps:
            d["copy_fraction"] = self.gbps / copy
        return d


def describe(value: np.ndarray) -> str:
    """A result as a table cell: a scalar's value, a few elements' values (a table's
    narrow result column wraps one a line), else the shape and dtype."""
    value = np.asarray(value)
    if value.ndim == 0:
        v = value[()]
        return f"{v:.7g}" if value.dtype.kind == "f" else str(v)
    if value.size <= 4:
        return np.array2string(value, separator=" ", precision=4)
    return "x".join(map(str, value.shape)) + f" {value.dtype}"


def run_one(op: Operation, variant: Variant | None, x, x_dev, kw: dict, want: Expected,
            timed: bool, repeat: int, peer: str | None = None, rows=None) -> Row:
    """Check one strategy (or one peer) against the reference, then time it.

    ``rows``: indices of the rows ``want`` holds, when it was computed for a sample of
    them (a row-wise op on a large input); the result's other rows are not checked.
    """
    if peer is not None:
        def fn():
            return op.peers[peer](_module(peer), arg, **kw)

        row = Row(peer, peer)
    else:
        def fn():
            return op.call(x_dev, variant, kw)

        row = Row("numbakern", variant.label)
    try:
        arg = peer_input(peer, x_dev) if peer is not None else None
        got = to_host(fn())
        nbytes = op.traffic(x, got)
        got = got if rows is None else got[rows]
    except Exception as exc:  # a failure of numbakern's; a peer's is only reported
        said = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        row.ok = False if peer is None else None
        row.note = f"raised {said}" if peer is None else f"n/a: {peer} raised {said}"
        return row
    row.ok, row.max_error = check(got, want.values, want.tolerance)
    if peer is None and got.dtype != want.dtype:
        row.ok, row.note = False, f"dtype {got.dtype}, NumPy gives {want.dtype}"
    row.value, row.result = got, describe(got)
    row.nbytes = nbytes
    if timed and row.ok:
        row.seconds = measure(fn, repeat)
    return row


# --- numbakern compare ---------------------------------------------------------------------


@dataclass
class Comparison:
    """``numbakern compare``'s result: one operation, size and dtype, every strategy."""

    op: str
    shape: tuple
    dtype: str
    backend: str
    simulator: bool
    copy_gbps: float
    rows: list

    def as_dict(self) -> dict:
        return {"op": self.op, "shape": list(self.shape), "dtype": self.dtype,
                "backend": self.backend, "simulator": self.simulator,
                "timing": "wall clock under the simulator: meaningless for speed"
                if self.simulator else "CUDA events, median",
                "copy_gbps": None if self.simulator else self.copy_gbps,
                "rows": [r.as_dict(self.copy_gbps, not self.simulator) for r in self.rows]}


def compare(op: Operation, shape: tuple, dtype, variants: list[Variant], repeat: int,
            kw: dict | None = None, advance: Callable[[str], None] = lambda label: None
            ) -> Comparison:
    """Check then time ``op`` on one input with each variant, then each installed peer.

    ``advance(label)`` is called before each run (a progress bar's hook).
    """
    kw = kw or {}
    x = sample(op, shape, dtype)
    x_dev = to_device(x)
    want = op.expected(x, kw)
    rows = []
    for variant in variants:
        advance(variant.label)
        reason = op.skips(variant, tuple(shape), kw) if op.skips else None
        if reason:
            rows.append(Row("numbakern", variant.label, ok=None, note=f"n/a: {reason}"))
            continue
        rows.append(run_one(op, variant, x, x_dev, kw, want, True, repeat))
    for peer in installed_peers():
        if peer in op.peers:
            advance(peer)
            rows.append(run_one(op, None, x, x_dev, kw, want, True, repeat,
                                peer=peer))
    return Comparison(op.name, tuple(shape), str(np.dtype(dtype)), str(numbakern.backend()),
                      not on_gpu(), copy_gbps(), rows)


def comparison_table(c: Comparison):
    """A ``rich`` table: strategy, check, median time, and on a GPU the GB/s and the
    fraction of the copy bandwidth (the simulator's times measure Python threads, so
    no speed is derived from them there)."""
    from rich.table import Table

    shape = "x".join(map(str, c.shape))
    caption = None if c.simulator else (f"copy bandwidth (device to device, bytes read + "
                                        f"written): {gbps_text(c.copy_gbps)} GB/s")
    table = Table(title=f"{c.op} of {shape} {c.dtype}", caption=caption)
    columns = [("strategy", "left"), ("check", "left"), ("max |error|", "right"),
               ("median", "right")]
    if not c.simulator:
        columns += [("GB/s", "right"), ("of copy", "right")]
    for col, just in columns:
        # folded, never cut with an ellipsis: two strategies must not read alike. No
        # minimum width: rich keeps it when it narrows a table to the terminal, and then
        # crops the last columns.
        table.add_column(col, justify=just, overflow="fold")
    for r in c.rows:
        name = r.strategy if r.provider == "numbakern" else f"[dim]{r.strategy} (peer)[/dim]"
        cells = [name, _verdict(r), _error_text(r),
                 "" if r.seconds is None else _time_text(r.seconds)]
        if not c.simulator:
            cells += ["" if r.gbps is None else gbps_text(r.gbps),
                      "" if r.gbps is None else f"{r.gbps / c.copy_gbps:.0%}"]
        table.add_row(*cells)
    return table


def _verdict(r: Row) -> str:
    from rich.markup import escape

    if r.ok is None:
        return f"[yellow]{escape(r.note)}[/yellow]"
    if r.ok:
        return "[green]ok[/green]"
    return "[bold red]WRONG[/bold red]" + (f" ({escape(r.note)})" if r.note else "")


def _error_text(r: Row) -> str:
    return "" if r.ok is None or np.isnan(r.max_error) else f"{r.max_error:.2g}"


def gbps_text(gbps: float) -> str:
    return f"{gbps:,.0f}" if gbps >= 100 else f"{gbps:.3g}"


def _time_text(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def comparison_figure(c: Comparison, path: str) -> None:
    """Bars of GB/s per strategy and peer, with the copy bandwidth as the ceiling.

    Under the simulator, times measure Python threads, not a GPU, so no speed is
    drawn: the figure says so and lists what is meaningful there, each strategy's
    check against NumPy and its largest error.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if c.simulator:
        _checks_figure(c, path, plt)
        return
    rows = [r for r in c.rows if r.gbps]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4))
    colours = ["#1f77b4" if r.provider == "numbakern" else "#7f7f7f" for r in rows]
    ax.bar(range(len(rows)), [r.gbps for r in rows], color=colours)
    ax.axhline(c.copy_gbps, color="#d62728", ls="--", lw=1)
    ax.text(len(rows) - 0.5, c.copy_gbps, "copy bandwidth", color="#d62728", ha="right",
            va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)), [r.strategy for r in rows], rotation=20, ha="right",
                  fontsize=8)
    ax.set_ylabel("GB/s (bytes read + written / time)")
    shape = "x".join(map(str, c.shape))
    note = " (simulator: meaningless for speed)" if c.simulator else ""
    ax.set_title(f"{c.op} of {shape} {c.dtype}{note}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _checks_figure(c: Comparison, path: str, plt) -> None:
    """The simulator's figure: no speed, only each row's check and largest error."""
    lines = []
    for r in c.rows:
        verdict = "could not run" if r.ok is None else "ok" if r.ok else "WRONG"
        error = _error_text(r)
        lines.append(f"{r.strategy:<36} {verdict:<14} {'max |error| ' + error if error else ''}")
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.25 * len(lines)))
    ax.axis("off")
    shape = "x".join(map(str, c.shape))
    ax.set_title(f"{c.op} of {shape} {c.dtype}: nothing to plot for speed under the "
                 "simulator\n(it runs every CUDA thread as an OS thread; run on a GPU for "
                 "GB/s). The checks against NumPy:", fontsize=9)
    ax.text(0, 1, "\n".join(lines), family="monospace", fontsize=8, va="top",
            transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
