"""Differential harness: every public function against NumPy, on every forced path.

Each test is one *path*: a function with its path forced (a strategy from
``numbakern.strategies.every(...)``, ``lanes=``, or ``layout=``), so every path sees
every kind of draw, not only the shapes that select it. Hypothesis draws:

* dtypes: bool made of the bytes 0, 1, 2 and 255 (NumPy reads every non-zero byte
  as True), every int, float16/32/64, as each function takes them;
* shapes: 0-d, empty, rows of 1-4, 5-31, 32, warp multiples and longer rows, one
  column, many columns;
* layouts: C, F, transposed, reversed (negative strides), offset views,
  unaligned starts (one byte into the buffer);
* values: signed zeros, +-inf, NaN, subnormals, integer extremes.

Tolerances (stated per comparison): integers, indices, sorts, counts and max/min
exact (NaN equal to NaN; the sign of zero compared for prod and sorts, not for
max/min, where it follows the order of combining: README, "Where it differs"); sums and
means ``rtol`` of the dtype (float16 1e-2, float32 1e-5, float64 1e-12) plus an
``atol`` of ``n * eps * max|x|`` for the order of additions; softmax the same
``rtol`` with ``atol`` 1e-6 (float16 1e-3). Floats for sums are drawn up to 1e4 so
that no order overflows where another does not; products are drawn from values whose
products are exact in any order (+-1, +-0, +-inf, NaN). cumprod draws those and powers
of two whose running products overflow and underflow (exact until they do, so NumPy's
sequential loop and any tree agree bit for bit, special values included: a product
that overflowed and then meets a 0 is NaN, one that underflowed stays 0).

Functions and references: sum, prod, max, min, argmax, argmin, mean, cumsum,
cumprod, sort, argsort, bincount, histogram against NumPy; topk on each select
strategy against the first ``k`` of NumPy's stable argsort (descending, NaN first,
for the largest; ``sorted=False`` compared in index order); softmax, log_softmax against
float64 formulas; and, where each path draws its function from a group (a path per
function would not fit CI's time):

* reductions on each grid strategy (two groups a strategy, so that every block
  strategy meets every group and so does every grid) and on the row kernels
  (``lanes``; two kernels a group): nansum,
  nanprod, nanmax, nanmin, nanmean, nanargmax, nanargmin, any, all, count_nonzero,
  ptp, xor_sum, bitwise_and_sum, bitwise_or_sum (``np.bitwise_*.reduce``),
  max/min_with_indices (np.max/min with np.argmax/argmin), ``reduce`` with every
  built-in op name, against NumPy; logsumexp against a float64 form of SciPy's (+inf
  in a slice gives +inf, NaN NaN, no elements -inf); vector_norm of orders 2, inf,
  0 and -1.5 against ``np.linalg.vector_norm`` (float16 in float64, rounded once):
  axis None, an int or a tuple (NumPy's errors where it refuses one), ``keepdims``,
  ``initial=`` where taken;
* scans on each scan strategy and layout, ``exclusive``/``reverse`` drawn: nancumsum,
  nancumprod (NumPy), cummax/cummin (torch.cummax/cummin; ``reverse``, which torch
  lacks, by the total order the docstrings state: NaN first, then the value, ties to
  the larger index), logcumsumexp (torch.logcumsumexp in float64), associative_scan
  with each built-in op (NumPy's ``accumulate``; argmax/argmin as np.argmax's
  running pair, the first occurrence winning);
* ``where=`` (a drawn bool mask of ``x``'s shape, with length-1 axes, fewer
  dimensions, or 0-d) on two grid strategies: sum, prod, max, min, mean, any, all,
  nansum, nanmax, nanmean, var against NumPy's own ``where=`` (max, min, nanmax with
  ``initial=``, as NumPy requires); var ``rtol`` of the dtype plus ``atol`` ``8 n eps
  max|x|^2`` (finite values: Welford's one pass against NumPy's two);
* softmax_backward and log_softmax_backward on each layout (``fused`` drawn) against
  their float64 formulas; float16 rows past the registers of 32 threads (staged in
  shared memory: softmax, log_softmax, log_softmax_backward) against float64;
  cross_entropy on each block strategy against ``torch.nn.functional.cross_entropy`` and
  its autograd gradient in float64 (``ignore_index`` rows, label smoothing, every
  reduction);
* partition, argpartition (by NumPy's contract: the kth element np.sort's, none
  larger before, none smaller after, NaN largest), median, quantile, percentile and
  their NaN-skipping forms (NumPy on the float64 values of integers, ``_close``'s
  tolerance, NumPy's errors alike), one path per function with the sort strategy
  drawn;
* segmented_reduce (each built-in op but the logical ones), segmented_argmax and
  segmented_argmin on each grid strategy, a warp or a block per short segment and
  long ones split over blocks, drawn offsets with empty segments, against NumPy per
  segment; segmented_scan and
  scan_by_key (drawn int8 keys of 0-2, their runs the segments; each built-in op but
  the logical ones, ``exclusive``/``reverse`` drawn) on each scan
  strategy against NumPy's ``accumulate`` per segment, an exclusive segment starting
  at the op's identity; segmented_sort on each sort strategy, ``descending`` drawn,
  its keys and its permutation of ``np.arange`` against ``np.argsort(kind="stable")``
  per segment (descending: the stable order of the negated ranks; bools by their
  bytes, as ``np.sort``); histogram_counts on each
  histogram strategy against ``np.bincount`` of the values in range.

References read bool bytes as ``x != 0`` (numbakern's contract: every non-zero byte is
True). NumPy's warnings are ignored; where NumPy raises ValueError or TypeError,
numbakern must raise one of them.

Tolerances of the added functions: NaN-skipping, logical, bitwise, index and
max/min-like results exact (the sign of a zero max/min/ptp not compared: README);
nansum, nanmean, nancumsum, sum scans and vector norms of orders 2 and -1.5 as sums
above (orders inf and 0 exact); logsumexp and logcumsumexp
``rtol`` of the dtype plus ``atol`` ``8 eps (max|x| + log n + 1)``; the backward passes
``rtol`` of the dtype plus ``atol`` ``8 eps32 max|dy| (n + 1)`` (float16 adds its
own eps times that); cross_entropy ``rtol`` of the dtype plus ``atol`` ``64 eps`` of
the computing dtype (scaled by the loss's size for the loss; float16 gradients
``1e-3`` more), logits drawn in [-20, 20].

Scan paths: every scan strategy on ``layout="tiles"``; on ``layout="warp"`` (a warp
per row runs the block strategy's warp form, the grid unused) each block strategy once.
The other scans' groups: all three on each warp path, two on each tiles path (every
block strategy and every grid meets all three).

Profiles: ``ci`` (the default: 2 examples per path, derandomized, no deadline: the
draw Hypothesis makes first, the simplest, and one more; the 115 paths take about
25 s of CPU under the simulator) and ``nightly``
(``NUMBAKERN_HYPOTHESIS=nightly``: 60 examples per path; the 99 paths after softmax's,
about 7 minutes with ``-n 2``).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numbakern as nk
from numbakern.strategies import DecoupledLookback, RadixSelect, WarpShuffle, every

settings.register_profile(
    "nk-ci", max_examples=2, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "nk-nightly", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile(
    "nk-nightly" if os.environ.get("NUMBAKERN_HYPOTHESIS") == "nightly" else "nk-ci")

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]
RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}

SHAPES = st.one_of(
    st.just(()),  # 0-d
    st.sampled_from([(0,), (0, 3), (3, 0)]),  # empty
    st.integers(1, 4).map(lambda n: (n,)),
    st.integers(5, 31).map(lambda n: (n,)),
    st.sampled_from([(32,), (64,), (96,), (200,)]),
    st.tuples(st.integers(1, 40), st.just(1)),  # one column
    st.tuples(st.integers(1, 4), st.integers(1, 70)),  # short rows, many columns
    st.tuples(st.integers(1, 3), st.integers(30, 130)),  # longer rows
)


def _values(dtype, n, draw, kind):
    """``n`` values of ``dtype`` with the special ones mixed in."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array(draw(st.lists(st.sampled_from([0, 1, 2, 255]), min_size=n,
                                      max_size=n)), np.uint8).view(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (0, 20) if kind == "count" else (int(info.min), int(info.max))
        special = st.sampled_from([lo, hi, 0, 1]) if kind != "count" else st.just(0)
        small = st.integers(max(lo, -3), min(hi, 3))
        if kind == "prod":
            return np.array(draw(st.lists(small, min_size=n, max_size=n)), dtype)
        return np.array(draw(st.lists(st.one_of(st.integers(lo, hi), special, small),
                                      min_size=n, max_size=n)), dtype)
    finfo = np.finfo(dtype)
    tiny = float(finfo.smallest_subnormal)
    if kind == "prod":
        elems = st.sampled_from([1.0, -1.0, 0.0, -0.0, np.nan, np.inf])
    elif kind == "cumprod":  # two huge factors overflow, two tiny ones round to 0
        huge, small = (2.0 ** (finfo.maxexp // 2 + 1),
                       2.0 ** ((finfo.minexp - finfo.nmant) // 2 - 1))
        elems = st.sampled_from([1.0, -1.0, 2.0, 0.5, 0.0, -0.0, np.inf, -np.inf, np.nan,
                                 huge, -huge, small, -small])
    else:
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny] if kind != "finite" \
            else [0.0, -0.0, tiny, -tiny]
        elems = st.one_of(st.floats(-1e4, 1e4, width=16 if dtype == np.float16 else 64),
                          st.sampled_from(special))
    return np.array(draw(st.lists(elems, min_size=n, max_size=n)), np.float64).astype(dtype)


@st.composite
def arrays(draw, dtypes, kind="any", shapes=SHAPES):
    """An array of one of ``dtypes`` in one of the layouts."""
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(shapes)
    n = int(np.prod(shape))
    base = _values(dtype, n + 1, draw, kind)
    layout = draw(st.sampled_from(["C", "F", "T", "reversed", "offset", "unaligned"]))
    if layout == "offset":  # a view starting one element in
        return base[1:].reshape(shape)
    if layout == "unaligned":  # starting one byte into its buffer (NumPy allows it)
        raw = np.zeros(n * dtype.itemsize + 1, np.uint8)
        x = np.ndarray(shape, dtype, buffer=raw, offset=1)
        x[...] = base[:n].reshape(shape)
        return x
    x = base[:n].reshape(shape)
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "T" and x.ndim == 2:
        return np.ascontiguousarray(x.T).T
    if layout == "reversed" and x.ndim:
        return x[::-1] if x.ndim == 1 else x[::-1, ::-1]
    return x


def _axis(draw_axis, x):
    return None if x.ndim == 0 else draw_axis(st.sampled_from([None, *range(x.ndim)]))


def _same_exact(got, want, zero_sign=True):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.dtype.kind == "f":
        assert np.array_equal(got, want, equal_nan=True), (got, want)
        both = ~np.isnan(want) if zero_sign else np.zeros(want.shape, bool)
        assert np.array_equal(np.signbit(got[both]), np.signbit(want[both])), (got, want)
    else:
        assert np.array_equal(got, want), (got, want)


def _close(got, want, x, axis_len):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.dtype.kind != "f":
        assert np.array_equal(got, want), (got, want)
        return
    finite = np.abs(x[np.isfinite(x)]).astype(np.float64) if x.dtype.kind == "f" else \
        np.abs(x.astype(np.float64))
    scale = finite.max() if finite.size else 0.0
    atol = max(axis_len, 1) * np.finfo(want.dtype).eps * scale * 4
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=RTOL[want.dtype], atol=atol, equal_nan=True)


def _reject_or_raise(fn, *args, **kwargs):
    """NumPy's answer, or None when NumPy itself refuses (numbakern must then too)."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError):
        return None


# --- reductions, one path per grid strategy, and the axis kernels by lanes -------------

REDUCTIONS = {
    "sum": (nk.sum, np.sum, "any"), "prod": (nk.prod, np.prod, "prod"),
    "max": (nk.max, np.max, "any"), "min": (nk.min, np.min, "any"),
    "argmax": (nk.argmax, np.argmax, "any"), "argmin": (nk.argmin, np.argmin, "any"),
    "mean": (nk.mean, np.mean, "any"),
}
REDUCE_DTYPES = [np.bool_, *INTS, *FLOATS]


def _check_reduction(name, x, axis, **path):
    ours, numpys, _ = REDUCTIONS[name]
    if name.startswith("arg") and isinstance(axis, int) is False and axis is not None:
        axis = None
    with np.errstate(all="ignore"):
        want = _reject_or_raise(numpys, x, axis=axis)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            ours(x, axis=axis, **path)
        return
    got = ours(x, axis=axis, **path)
    if name in ("max", "min"):  # a zero's sign among +-0 follows the tree (README)
        _same_exact(got, want, zero_sign=False)
    elif name in ("argmax", "argmin", "prod"):
        _same_exact(got, want)
    else:
        n = x.size if axis is None else x.shape[axis]
        _close(got, want, x, n)


def _reduction_draw(data, dtypes=REDUCE_DTYPES):
    name = data.draw(st.sampled_from(sorted(REDUCTIONS)))
    x = data.draw(arrays(dtypes, REDUCTIONS[name][2]))
    axis = _axis(data.draw, x)
    if name == "mean" and x.dtype == np.bool_:
        pass
    return name, x, axis


@pytest.mark.parametrize("strategy", every("reduce", threads=32, blocks=2), ids=repr)
@PROFILE
@given(data=st.data())
def test_reductions_on_each_grid_strategy_agree_with_numpy(strategy, data):
    name, x, axis = _reduction_draw(data)
    _check_reduction(name, x, axis, strategy=strategy)


@pytest.mark.parametrize("lanes", [None, 32, 64])
@PROFILE
@given(data=st.data())
def test_axis_reductions_on_each_row_kernel_agree_with_numpy(lanes, data):
    name = data.draw(st.sampled_from(["sum", "max", "argmin", "mean"]))
    x = data.draw(arrays(REDUCE_DTYPES, REDUCTIONS[name][2],
                         shapes=st.tuples(st.integers(1, 4), st.integers(1, 70))))
    axis = data.draw(st.sampled_from([0, 1]))
    strategy = nk.TwoPass(block=nk.WarpShuffle(threads=64))
    _check_reduction(name, x, axis, strategy=strategy, lanes=lanes)


# --- where=: NumPy's mask, on two grid strategies -----------------------------------------

# name: (values kind, how compared, initial= needed); initial= is NumPy's rule for where=
WHERE_REDUCTIONS = {
    "sum": ("any", "close", False), "prod": ("prod", "exact", False),
    "max": ("any", "exact0", True), "min": ("any", "exact0", True),
    "mean": ("any", "close", False), "any": ("any", "exact", False),
    "all": ("any", "exact", False), "nansum": ("any", "close", False),
    "nanmax": ("any", "exact0", True), "nanmean": ("any", "close", False),
    "var": ("finite", "var", False),
}


@st.composite
def _masks(draw, shape):
    """A bool ``where=`` broadcastable to ``shape``: its own shape, length-1 axes in
    some places, fewer dimensions, or a 0-d bool."""
    form = draw(st.sampled_from(["full", "ones", "trailing", "scalar"]))
    if form == "scalar" or not shape:
        return np.bool_(draw(st.booleans()))
    if form == "ones":
        shape = tuple(n if draw(st.booleans()) else 1 for n in shape)
    elif form == "trailing":
        shape = shape[1:]
    n = int(np.prod(shape))
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool).reshape(shape)


def _check_where(name, x, axis, where, **path):
    kind, how, needs_initial = WHERE_REDUCTIONS[name]
    kwargs = {"where": where}
    if needs_initial:
        kwargs["initial"] = 0 if x.dtype.kind in "biu" else -1.5 if name != "min" else 1.5
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _reject_or_raise(getattr(np, name), _canon(x), axis=axis, **kwargs)
        if want is None:
            with pytest.raises((ValueError, TypeError)):
                getattr(nk, name)(x, axis=axis, **kwargs, **path)
            return
        got = getattr(nk, name)(x, axis=axis, **kwargs, **path)
    if how != "var":
        _compare(got, want, x, axis, how)
        return
    got, want = np.asarray(got), np.asarray(want)  # Welford's one pass, NumPy's two
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    scale = float(np.abs(x.astype(np.float64)).max()) if x.size else 0.0
    eps = np.finfo(want.dtype).eps
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=RTOL[want.dtype], atol=8 * max(x.size, 1) * eps * scale ** 2,
                               equal_nan=True)


@pytest.mark.parametrize("strategy", ["two_pass/warp_shuffle", "atomic_fold/shared_tree"])
@PROFILE
@given(data=st.data())
def test_where_reductions_agree_with_numpy(strategy, data):
    # atomic_fold folds no var state (16 bytes) where a row is split: not drawn there
    names = sorted(n for n in WHERE_REDUCTIONS if n != "var" or strategy.startswith("two"))
    name = data.draw(st.sampled_from(names))
    x = data.draw(arrays(REDUCE_DTYPES, WHERE_REDUCTIONS[name][0]))
    axis = _axis_kinds(data.draw, x, "tuple")
    _check_where(name, x, axis, data.draw(_masks(x.shape)), strategy=strategy)


# --- scans -------------------------------------------------------------------------------

SCAN_DTYPES = [np.bool_, *INTS, *FLOATS]


def _scan_paths():
    """(strategy, layout): every scan strategy on tiles; on warps (one per row, the
    block strategy's warp form, no grid at work: ``api/scans.py``) each block strategy
    once, not once per grid; and the look-back's vector tiles (16-byte loads and
    stores, narrow for int32 summed in int64: ``kernels/scan_tiles.py``), which need
    whole vectors of items a thread where the simulator's default is 2."""
    paths, warps = [], set()
    for strategy in every("scan", threads=32):
        paths.append((strategy, "tiles"))
        if strategy.block.name not in warps:
            warps.add(strategy.block.name)
            paths.append((strategy, "warp"))
    paths.append((DecoupledLookback(WarpShuffle(threads=32), items=4), "tiles"))
    return paths


SCAN_PATHS = _scan_paths()
SCAN_IDS = [f"{s!r}-{layout}" for s, layout in SCAN_PATHS]


@pytest.mark.parametrize("strategy,layout", SCAN_PATHS, ids=SCAN_IDS)
@PROFILE
@given(data=st.data())
def test_scans_on_each_strategy_and_layout_agree_with_numpy(strategy, layout, data):
    name = data.draw(st.sampled_from(["cumsum", "cumprod"]))
    x = data.draw(arrays(SCAN_DTYPES, "finite" if name == "cumsum" else "cumprod"))
    if name == "cumsum" and x.dtype == np.float16:
        # running sums stay under 65504: past it NumPy's float16 sum stays inf and
        # numbakern's (accumulated in float32) does not (README, "Where it differs")
        x = x / np.float16(256)
    axis = _axis(data.draw, x)
    ours, numpys = (nk.cumsum, np.cumsum) if name == "cumsum" else (nk.cumprod, np.cumprod)
    with np.errstate(all="ignore"):
        want = _reject_or_raise(numpys, x, axis=axis)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            ours(x, axis=axis, strategy=strategy, layout=layout)
        return
    got = ours(x, axis=axis, strategy=strategy, layout=layout)
    if name == "cumprod":
        _same_exact(got, want)
    else:
        _close(got, want, x, x.size)


# --- softmax -----------------------------------------------------------------------------


def _softmax64(x, axis, log):
    x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    with np.errstate(all="ignore"):
        z = x - m
        s = np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
        return z - s if log else np.exp(z - s)


@pytest.mark.parametrize("layout", ["warp", "block"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@PROFILE
@given(data=st.data())
def test_softmax_on_each_layout_agrees_with_float64(log, layout, data):
    x = data.draw(arrays(FLOATS, "finite",
                         shapes=st.tuples(st.integers(1, 4), st.integers(1, 70))))
    axis = data.draw(st.sampled_from([-1, 0]))
    fn = nk.log_softmax if log else nk.softmax
    got = np.asarray(fn(x, axis=axis, layout=layout))
    want = _softmax64(x, axis, log).astype(x.dtype)
    assert got.dtype == x.dtype and got.shape == x.shape
    atol = 1e-3 if x.dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=RTOL[x.dtype], atol=atol, equal_nan=True)


# Half rows longer than 32 threads hold in registers (32 x 32): staged in shared memory
# (rows whose layout allows 16-byte vectors; the tiled kernels the others).
@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "log_softmax_backward"])
@settings(PROFILE, suppress_health_check=[*PROFILE.suppress_health_check,
                                          HealthCheck.large_base_example])
@given(data=st.data())
def test_staged_half_rows_agree_with_float64(kind, data):
    x = data.draw(arrays([np.float16], "finite",
                         shapes=st.tuples(st.integers(1, 2), st.integers(1025, 1300))))
    if kind != "log_softmax_backward":
        got = getattr(nk, kind)(x, threads=32)
        want = _softmax64(x, -1, kind == "log_softmax").astype(x.dtype)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=RTOL[x.dtype], atol=1e-3)
        return
    y = _softmax64(x, -1, True).astype(np.float16)
    seed = data.draw(st.integers(0, 2**32 - 1))  # (a drawn list this long is too much data)
    dy = np.random.default_rng(seed).uniform(-4, 4, x.shape).astype(np.float16)
    got = nk.log_softmax_backward(y, dy, threads=32)
    d64 = dy.astype(np.float64)
    want = d64 - np.exp(y.astype(np.float64)) * d64.sum(-1, keepdims=True)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=RTOL[x.dtype],
                               atol=1e-2 * (1 + np.abs(d64).sum(-1).max()) * 2.0 ** -11)


# --- sorts -------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", every("sort", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_sorts_on_each_strategy_agree_with_numpys_stable_sort(strategy, data):
    x = data.draw(arrays([np.bool_, *INTS, *FLOATS], "any"))
    if x.ndim == 0:
        x = x.reshape(1)
    idx = nk.argsort(x, axis=-1, strategy=strategy)
    _same_exact(idx, np.argsort(x, axis=-1, kind="stable"))
    _same_exact(nk.sort(x, axis=-1, strategy=strategy), np.sort(x, axis=-1, kind="stable"))


def _topk_reference(x, k, axis, largest):
    """The first k of a stable argsort along axis (descending, NaN first, for the
    largest): ties to the lower index, the order topk states."""
    moved = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    if largest:
        n = moved.shape[-1]
        idx = n - 1 - np.argsort(moved[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    else:
        idx = np.argsort(moved, axis=-1, kind="stable")
    idx = idx[..., :k]
    vals = np.take_along_axis(moved, idx, axis=-1)
    if axis is None:
        return vals, idx
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


@pytest.mark.parametrize("strategy", every("select", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_topk_on_each_strategy_agrees_with_a_stable_argsort(strategy, data):
    x = data.draw(arrays([np.bool_, *INTS, *FLOATS], "any"))
    if x.ndim == 0:
        x = x.reshape(1)
    axis = _axis(data.draw, x)
    n = x.size if axis is None else x.shape[axis]
    k = data.draw(st.integers(0, min(n, strategy.max_k or n)))
    largest, in_order = data.draw(st.booleans()), data.draw(st.booleans())
    got = nk.topk(x, k, axis=axis, largest=largest, sorted=in_order, strategy=strategy)
    want = _topk_reference(x, k, axis, largest)  # bool bytes ordered as np.argsort does
    values, indices = np.asarray(got.values), np.asarray(got.indices)
    if not in_order:  # the same elements in the strategy's order: compare in index order
        along = -1 if axis is None else axis
        perm = np.argsort(indices, axis=along)
        values, indices = (np.take_along_axis(a, perm, along) for a in (values, indices))
        perm = np.argsort(want[1], axis=along)
        want = tuple(np.take_along_axis(a, perm, along) for a in want)
    _same_exact(indices, want[1])
    _same_exact(values, want[0])


# --- histograms --------------------------------------------------------------------------


SEGMENT_SCANS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
                 "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
                 "bitwise_xor": np.bitwise_xor}


@pytest.mark.parametrize("strategy", every("scan", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_segmented_scans_and_scans_by_key_on_each_strategy_agree_with_numpy(strategy, data):
    op = data.draw(st.sampled_from(list(SEGMENT_SCANS)))
    kind = {"sum": "finite", "prod": "prod"}.get(op, "any")
    x = data.draw(arrays(REDUCE_DTYPES, kind, shapes=st.integers(0, 150).map(lambda n: (n,))))
    if op == "sum" and x.dtype == np.float16:
        x = x / np.float16(256)  # as the cumsum path: running sums under 65504
    keys = None
    if data.draw(st.booleans()):  # scan_by_key: the runs of equal keys are the segments
        keys = np.array(data.draw(st.lists(st.integers(0, 2), min_size=len(x),
                                           max_size=len(x))), np.int8)
        offsets = np.r_[0, np.flatnonzero(keys[1:] != keys[:-1]) + 1, len(x)].astype(np.int64)
        offsets = offsets[:1] if len(x) == 0 else offsets
    else:
        offsets = data.draw(_offsets(len(x)))
    exclusive, reverse = data.draw(st.booleans()), data.draw(st.booleans())
    path = {"exclusive": exclusive, "reverse": reverse, "strategy": strategy}
    ufunc = SEGMENT_SCANS[op]

    def ours():
        if keys is None:
            return nk.segmented_scan(x, offsets, op, **path)
        return nk.scan_by_key(keys, x, op, **path)

    if op in ("sum", "prod"):
        dtype = (np.cumsum if op == "sum" else np.cumprod)(_canon(x[:0])).dtype
    else:
        dtype = x.dtype
    if op.startswith("bitwise") and x.dtype.kind == "f":
        with pytest.raises(TypeError):
            ours()
        return
    first = nk.ops.get(op).identity(dtype)  # where an exclusive segment starts
    parts = []
    with np.errstate(all="ignore"):
        for a, b in zip(offsets[:-1], offsets[1:]):
            seg = _canon(x)[a:b][::-1] if reverse else _canon(x)[a:b]
            run = ufunc.accumulate(seg, dtype=dtype) if seg.size else seg.astype(dtype)
            if exclusive and seg.size:
                run = np.concatenate([np.array([first], dtype), run[:-1]])
            parts.append(run[::-1] if reverse else run)
    want = np.concatenate(parts) if parts else np.zeros(0, dtype)
    got = ours()
    if op == "sum":
        _close(got, want, x, len(x))
    else:  # README: the sign of a zero max/min follows the combining order
        _same_exact(got, want, zero_sign=op not in ("max", "min"))


@pytest.mark.parametrize("strategy", every("sort", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_segmented_sorts_on_each_strategy_agree_with_numpys_stable_sort(strategy, data):
    x = data.draw(arrays([np.bool_, *INTS, *FLOATS], "any",
                         shapes=st.integers(0, 150).map(lambda n: (n,))))
    offsets = data.draw(_offsets(len(x)))
    descending = data.draw(st.booleans())
    order = []
    raw = x.view(np.uint8) if x.dtype == np.bool_ else x  # bools sort by their bytes, as
    for a, b in zip(offsets[:-1], offsets[1:]):           # np.sort and nk.sort do
        seg = raw[a:b]
        if descending:  # larger first, NaN first, equal values in input order
            _, rank = np.unique(seg, return_inverse=True)
            order.append(a + np.argsort(-rank.reshape(-1), kind="stable"))
        else:
            order.append(a + np.argsort(seg, kind="stable"))
    order = np.concatenate(order).astype(np.int64) if order else np.zeros(0, np.int64)
    keys, where = nk.segmented_sort(x, offsets, np.arange(len(x)), descending=descending,
                                    strategy=strategy)
    _same_exact(where, order)
    _same_exact(np.asarray(keys).view(raw.dtype), raw[order])


@pytest.mark.parametrize("strategy", every("histogram", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_counts_on_each_histogram_strategy_agree_with_numpy(strategy, data):
    x = data.draw(arrays([np.bool_, *INTS], "count",
                         shapes=st.integers(0, 150).map(lambda n: (n,))))
    minlength = data.draw(st.integers(0, 30))
    _same_exact(nk.bincount(x, minlength=minlength, strategy=strategy),
                np.bincount(x, minlength=minlength))
    y = data.draw(arrays([np.bool_, *FLOATS], "any"))
    bins = data.draw(st.integers(1, 40))
    hist, edges = nk.histogram(y, bins=bins, range=(-50.0, 50.0), strategy=strategy)
    finite = y[np.isfinite(y)] if y.dtype.kind == "f" else y.ravel()
    want_hist, want_edges = np.histogram(finite, bins=bins, range=(-50.0, 50.0))
    _same_exact(hist, want_hist)
    _same_exact(edges, want_edges)


# --- the other reductions: NaN-skipping, logical, bitwise, value-index, reduce(op) -------


def _canon(x):
    """``x`` with bool bytes made 0 or 1: the reference reads every non-zero byte as
    True (the contract), whatever NumPy's own loops do with the raw byte."""
    return (x.view(np.uint8) != 0) if x.dtype == np.bool_ else x


def _logsumexp64(x, axis=None, keepdims=False):
    """SciPy's logsumexp in float64 (SciPy is not a dependency): +inf in a slice gives
    +inf, NaN gives NaN, no elements or only -inf give -inf."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
        shift = np.where(np.isfinite(m), m, 0.0)
        s = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
    return s if keepdims else np.squeeze(s, axis=axis if axis is not None else None)


def _with_indices(values, indices):
    def ref(x, axis=None, keepdims=False):
        return values(x, axis=axis, keepdims=keepdims), indices(x, axis=axis, keepdims=keepdims)
    return ref


def _ptp(x, axis=None, keepdims=False):
    return np.ptp(x, axis=axis, keepdims=keepdims)


def _vector_norm(ord):
    """``(ours, reference)`` of the vector norm of order ``ord``: NumPy's, except
    that float16 input is taken in float64 and rounded once (numbakern squares and
    sums float16 in float32, where NumPy's float16 squares past 256 are inf)."""
    def ours(x, axis=None, **kw):
        return nk.vector_norm(x, axis=axis, ord=ord, **kw)

    def ref(x, axis=None, keepdims=False):
        wide = x.astype(np.float64) if x.dtype == np.float16 else x
        norm = np.linalg.vector_norm(wide, axis=axis, keepdims=keepdims, ord=ord)
        return np.asarray(norm).astype(np.float16) if x.dtype == np.float16 else norm

    return ours, ref


BUILTIN_REFS = {  # op name -> (NumPy reduction, values kind)
    "sum": (np.sum, "any"), "prod": (np.prod, "prod"), "max": (np.max, "any"),
    "min": (np.min, "any"), "bitwise_and": (np.bitwise_and.reduce, "any"),
    "bitwise_or": (np.bitwise_or.reduce, "any"), "bitwise_xor": (np.bitwise_xor.reduce, "any"),
    "any": (np.any, "any"), "all": (np.all, "any"), "count_nonzero": (np.count_nonzero, "any"),
    "nansum": (np.nansum, "any"), "nanprod": (np.nanprod, "prod"),
}

# name -> (ours, reference, values kind, comparison, takes initial=, axis kinds)
# comparison: "exact" (zero's sign too), "exact0" (zero's sign not compared: README,
# the sign of a zero max/min follows the combining order), "close" (sums, means),
# "lse" (logsumexp); axis kinds: "tuple" (None, an int or a tuple), "int" (None or int).
MORE_REDUCTIONS = {
    "nansum": (nk.nansum, np.nansum, "any", "close", True, "tuple"),
    "nanprod": (nk.nanprod, np.nanprod, "prod", "exact", True, "tuple"),
    "nanmax": (nk.nanmax, np.nanmax, "any", "exact0", False, "tuple"),
    "nanmin": (nk.nanmin, np.nanmin, "any", "exact0", False, "tuple"),
    "nanmean": (nk.nanmean, np.nanmean, "any", "close", False, "tuple"),
    "nanargmax": (nk.nanargmax, np.nanargmax, "any", "exact", False, "int"),
    "nanargmin": (nk.nanargmin, np.nanargmin, "any", "exact", False, "int"),
    "any": (nk.any, np.any, "any", "exact", False, "tuple"),
    "all": (nk.all, np.all, "any", "exact", False, "tuple"),
    "count_nonzero": (nk.count_nonzero, np.count_nonzero, "any", "exact", False, "tuple"),
    "logsumexp": (nk.logsumexp, _logsumexp64, "any", "lse", False, "tuple"),
    "ptp": (nk.ptp, _ptp, "any", "exact0", False, "tuple"),
    **{f"vector_norm:{o}": (*_vector_norm(o), "any", "exact" if o in (np.inf, 0) else
                            "close", False, "tuple") for o in (2, np.inf, 0, -1.5)},
    "xor_sum": (nk.xor_sum, np.bitwise_xor.reduce, "any", "exact", True, "tuple"),
    "bitwise_and_sum": (nk.bitwise_and_sum, np.bitwise_and.reduce, "any", "exact", True,
                        "tuple"),
    "bitwise_or_sum": (nk.bitwise_or_sum, np.bitwise_or.reduce, "any", "exact", True, "tuple"),
    "max_with_indices": (nk.max_with_indices, _with_indices(np.max, np.argmax), "any",
                         "exact0", False, "int"),
    "min_with_indices": (nk.min_with_indices, _with_indices(np.min, np.argmin), "any",
                         "exact0", False, "int"),
    **{f"reduce:{name}": (lambda x, axis=None, _n=name, **kw: nk.reduce(x, _n, axis=axis, **kw),
                          ref, kind, "close" if name in ("sum", "nansum") else
                          "exact0" if name in ("max", "min") else "exact",
                          # np.any/all/count_nonzero take no initial= (numbakern's reduce does)
                          name not in ("any", "all", "count_nonzero"), "tuple")
       for name, (ref, kind) in BUILTIN_REFS.items()},
}


def _initial(draw, x, name):
    """A value for ``initial=`` of ``x``'s accumulator (README: it must be one), or None."""
    if not draw(st.booleans()) or x.dtype == np.bool_:
        return None
    if x.dtype.kind == "f":
        if "bitwise" in name or "xor" in name:
            return None
        return draw(st.sampled_from([0.5, -2.0, 0.0]))
    info = np.iinfo(x.dtype)
    return draw(st.sampled_from([v for v in (0, 1, 3, -2, int(info.max)) if v >= info.min]))


def _axis_kinds(draw, x, kind):
    if x.ndim == 0:
        return None
    choices = [None, *range(x.ndim)]
    if kind == "tuple":
        choices += [tuple(range(x.ndim)), ()] + ([(1, 0)] if x.ndim == 2 else [])
    return draw(st.sampled_from(choices))


def _compare(got, want, x, axis, how):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        _compare(got[0], want[0], x, axis, how)
        _same_exact(got[1], want[1])
        return
    if how in ("exact", "exact0"):
        _same_exact(got, want, zero_sign=how == "exact")
        return
    axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    n = int(np.prod([x.shape[a] for a in axes]))
    if how == "close":
        _close(got, want, x, n)
        return
    got, want = np.asarray(got), np.asarray(want)  # logsumexp: float64 reference
    out_dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    assert got.dtype == out_dtype and got.shape == want.shape, (got, want)
    finite = np.abs(x[np.isfinite(x)]).astype(np.float64) if x.dtype.kind == "f" else \
        np.abs(x.astype(np.float64))
    scale = (finite.max() if finite.size else 0.0) + np.log(max(n, 1)) + 1
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=RTOL[out_dtype],
                               atol=8 * np.finfo(out_dtype).eps * scale, equal_nan=True)


def _check_more(name, x, axis, keepdims, initial, **path):
    ours, ref, _, how, _, _ = MORE_REDUCTIONS[name]
    kwargs = {"keepdims": keepdims} if keepdims else {}
    if initial is not None:
        kwargs["initial"] = initial
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _reject_or_raise(ref, _canon(x), axis=axis, **kwargs)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            ours(x, axis=axis, **kwargs, **path)
        return
    got = ours(x, axis=axis, **kwargs, **path)
    _compare(got, want, x, axis, how)


def _more_draw(data, name, shapes=SHAPES):
    _, _, kind, _, takes_initial, axis_kind = MORE_REDUCTIONS[name]
    x = data.draw(arrays(REDUCE_DTYPES, kind, shapes=shapes))
    axis = _axis_kinds(data.draw, x, axis_kind)
    keepdims = data.draw(st.booleans())
    initial = _initial(data.draw, x, name) if takes_initial else None
    return x, axis, keepdims, initial


# Each path draws its function from a group (a path per function would not fit CI's time)
REDUCTION_GROUPS = {
    "nan": ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanargmax", "nanargmin"],
    "logic_bitwise": ["any", "all", "count_nonzero", "xor_sum", "bitwise_and_sum",
                      "bitwise_or_sum"],
    "value": ["logsumexp", "ptp", "max_with_indices", "min_with_indices",
              *(f"vector_norm:{o}" for o in (2, np.inf, 0, -1.5))],
    "reduce": [f"reduce:{name}" for name in BUILTIN_REFS],
}
assert sorted(n for g in REDUCTION_GROUPS.values() for n in g) == sorted(MORE_REDUCTIONS)


def _reduction_group_paths():
    """(strategy, group): two groups a grid strategy, so that each block strategy meets
    every group (two under each grid) and each grid every group, in half the paths of
    the full product."""
    groups, paths = sorted(REDUCTION_GROUPS), []
    grids = sorted({type(s).__name__ for s in every("reduce", threads=32, blocks=2)})
    blocks = nk.strategies.available("block")
    for strategy in every("reduce", threads=32, blocks=2):
        k = blocks.index(strategy.block.name) + 2 * grids.index(type(strategy).__name__)
        paths += [(strategy, groups[k % 4]), (strategy, groups[(k + 1) % 4])]
    return paths


REDUCTION_GROUP_PATHS = _reduction_group_paths()


@pytest.mark.parametrize("strategy,group", REDUCTION_GROUP_PATHS,
                         ids=[f"{s!r}-{g}" for s, g in REDUCTION_GROUP_PATHS])
@PROFILE
@given(data=st.data())
def test_more_reductions_on_each_grid_strategy_agree_with_numpy(strategy, group, data):
    name = data.draw(st.sampled_from(REDUCTION_GROUPS[group]))
    x, axis, keepdims, initial = _more_draw(data, name)
    _check_more(name, x, axis, keepdims, initial, strategy=strategy)


# two of the row kernels a group, in turn: each kernel meets two or three of the groups
ROW_KERNEL_PATHS = [(lanes, group) for g, group in enumerate(sorted(REDUCTION_GROUPS))
                    for lanes in ((None, 32, 64)[g % 3], (None, 32, 64)[(g + 1) % 3])]


@pytest.mark.parametrize("lanes,group", ROW_KERNEL_PATHS)
@PROFILE
@given(data=st.data())
def test_more_axis_reductions_on_each_row_kernel_agree_with_numpy(lanes, group, data):
    name = data.draw(st.sampled_from(REDUCTION_GROUPS[group]))
    x, _, keepdims, initial = _more_draw(
        data, name, shapes=st.tuples(st.integers(1, 4), st.integers(1, 70)))
    axis = data.draw(st.sampled_from([0, 1]))
    strategy = nk.TwoPass(block=nk.WarpShuffle(threads=64))
    _check_more(name, x, axis, keepdims, initial, strategy=strategy, lanes=lanes)


# --- the other scans: NaN-skipping, running extremes, logcumsumexp, associative_scan -----


def _along(x, axis):
    """``x`` with the scanned axis last (flattened for ``axis=None``), and the way back."""
    if axis is None:
        return x.reshape(-1), lambda r: r
    return np.moveaxis(x, axis, -1), lambda r: np.moveaxis(r, -1, axis)


def _scan_ref(scan, x, axis, exclusive, reverse, identity):
    """``scan`` (a function of a last-axis array) with numbakern's ``exclusive`` (shift by
    one, ``identity`` first) and ``reverse`` (scan from the end)."""
    y, back = _along(x, axis)
    if reverse:
        y = y[..., ::-1]
    r = scan(y)
    if exclusive and r.shape[-1]:
        r = np.concatenate([np.full(r.shape[:-1] + (1,), identity, r.dtype), r[..., :-1]],
                           axis=-1)
    if reverse:
        r = r[..., ::-1]
    return back(r)


def _order_key(x):
    """``x`` as int64 or float64 with the same order (torch has no uint16/32/64 cummax)."""
    if x.dtype == np.uint64:
        return (x ^ np.uint64(1 << 63)).view(np.int64)
    return x.astype(np.float64 if x.dtype.kind == "f" else np.int64)


def _torch_cumext(direction):
    import torch

    def scan(y):
        fn = torch.cummax if direction == "max" else torch.cummin
        idx = fn(torch.from_numpy(np.array(_order_key(y))), dim=-1).indices.numpy()
        return np.take_along_axis(y, idx, axis=-1), idx
    return scan


def _pair_scan(y, direction, ties_left, exclusive, reverse, identity):
    """The running (value, index) pair along the last axis, indices along the axis in
    the input's own positions: NaN beats every number, then the larger (``direction``
    "max") or smaller value, then the smaller index (``ties_left``: np.argmax's first
    occurrence) or the larger (torch.cummax's latest). ``reverse``: element ``i``
    combines ``i..n-1``; ``exclusive``: it leaves itself out (``identity``, index
    2**63 - 1, where nothing is left)."""
    vals, idx = np.empty_like(y), np.zeros(y.shape, np.int64)
    n = y.shape[-1]
    isnan = np.isnan if y.dtype.kind == "f" else (lambda v: False)

    def better(a, b):  # a beats b (b may be None)
        if b is None:
            return True
        (va, ia), (vb, ib) = a, b
        na, nb = isnan(va), isnan(vb)
        if na != nb:
            return na
        if not na and va != vb:
            return va > vb if direction == "max" else va < vb
        return ia < ib if ties_left else ia > ib

    for row in np.ndindex(y.shape[:-1]):
        best = None
        order = range(n - 1, -1, -1) if reverse else range(n)
        for i in order:
            if exclusive:
                vals[row + (i,)], idx[row + (i,)] = best if best is not None else \
                    (identity, np.iinfo(np.int64).max)
            cand = (y[row + (i,)], i)
            if better(cand, best):
                best = cand
            if not exclusive:
                vals[row + (i,)], idx[row + (i,)] = best
    return vals, idx


def _ext_identity(dtype, direction):
    if dtype.kind == "f":
        return -np.inf if direction == "max" else np.inf
    if dtype == np.bool_:
        return direction != "max"
    info = np.iinfo(dtype)
    return info.min if direction == "max" else info.max


SCAN_OPS = {  # associative_scan's built-in ops -> (NumPy scan of the last axis, kind)
    "sum": (lambda y: np.cumsum(y, axis=-1), "finite"),
    "prod": (lambda y: np.cumprod(y, axis=-1), "cumprod"),
    "max": (lambda y: np.maximum.accumulate(y, axis=-1), "any"),
    "min": (lambda y: np.minimum.accumulate(y, axis=-1), "any"),
    "bitwise_and": (lambda y: np.bitwise_and.accumulate(y, axis=-1), "any"),
    "bitwise_or": (lambda y: np.bitwise_or.accumulate(y, axis=-1), "any"),
    "bitwise_xor": (lambda y: np.bitwise_xor.accumulate(y, axis=-1), "any"),
    "argmax": (None, "any"),  # _pair_scan, ties to the first occurrence
    "argmin": (None, "any"),
}
MORE_SCANS = ["nancumsum", "nancumprod", "cummax", "cummin", "logcumsumexp",
              *(f"associative_scan:{op}" for op in SCAN_OPS)]


def _scan_case(name, x, axis, exclusive, reverse):
    """(numbakern's keywords, the reference or None where NumPy/torch refuses, how to
    compare)."""
    pair_op = name in ("cummax", "cummin") or name.endswith(("argmax", "argmin"))
    kw = {"reverse": reverse}
    if name in ("nancumsum", "nancumprod") or name.startswith("associative_scan"):
        kw["exclusive"] = exclusive
    else:
        exclusive = False
    how = "close" if name in ("nancumsum", "associative_scan:sum") else \
        "lse" if name == "logcumsumexp" else \
        "exact0" if name in ("associative_scan:max", "associative_scan:min") else "exact"
    if x.ndim == 0 and axis is not None:
        return kw, None, how
    y, back = _along(_canon(x), axis)
    if pair_op:
        direction = name[-3:]
        if name in ("cummax", "cummin") and not reverse:  # torch.cummax/cummin themselves
            vals, idx = _torch_cumext(direction)(y)
        else:  # torch has no reverse (nor np.argmax a running form): the total order
            # numbakern's docstrings state, ties to the larger index for cummax/cummin
            vals, idx = _pair_scan(y, direction, name.startswith("associative"),
                                   exclusive, reverse, _ext_identity(x.dtype, direction))
        return kw, (back(vals), back(idx)), how
    if name == "logcumsumexp":
        if x.dtype.kind != "f":
            return kw, None, how
        import torch
        scan = lambda v: torch.logcumsumexp(torch.from_numpy(  # noqa: E731
            np.array(v, np.float64)), dim=-1).numpy()  # a copy: no negative strides
        ident = None
    elif name == "nancumsum":
        scan, ident = (lambda v: np.nancumsum(v, axis=-1)), 0
    elif name == "nancumprod":
        scan, ident = (lambda v: np.nancumprod(v, axis=-1)), 1
    else:
        op = name.split(":")[1]
        scan = SCAN_OPS[op][0]
        ident = {"sum": 0, "prod": 1, "bitwise_and": ~0, "bitwise_or": 0,
                 "bitwise_xor": 0}.get(op)
        if op in ("max", "min"):
            ident = _ext_identity(x.dtype, op)
    with np.errstate(all="ignore"):
        if ident is not None:
            try:
                probe = scan(y[..., :0])
            except (ValueError, TypeError):
                return kw, None, how
            ident = np.array(ident).astype(probe.dtype) if probe.dtype.kind != "b" else \
                np.bool_(ident)
        try:
            return kw, back(_scan_ref(scan, y, -1, exclusive, reverse, ident)), how
        except (ValueError, TypeError):
            return kw, None, how


def _scan_compare(got, want, x, how):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == 2, got
        _scan_compare(got[0], want[0], x, how)
        _same_exact(got[1], want[1])
        return
    if how == "close":
        _close(got, want, x, x.size)
    elif how == "lse":
        got = np.asarray(got)
        assert got.dtype == x.dtype and got.shape == want.shape, (got, want)
        finite = np.abs(x[np.isfinite(x)]).astype(np.float64)
        scale = (finite.max() if finite.size else 0.0) + np.log(max(x.size, 1)) + 1
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=RTOL[x.dtype],
                                   atol=8 * np.finfo(x.dtype).eps * scale, equal_nan=True)
    else:
        _same_exact(got, want, zero_sign=how == "exact")


SCAN_GROUPS = {
    "nan_lse": ["nancumsum", "nancumprod", "logcumsumexp"],
    "pairs": ["cummax", "cummin", "associative_scan:argmax", "associative_scan:argmin"],
    "associative": [f"associative_scan:{op}" for op in SCAN_OPS if not op.startswith("arg")],
}
assert sorted(n for g in SCAN_GROUPS.values() for n in g) == sorted(MORE_SCANS)


def _scan_group_paths():
    """(strategy, layout, group): on warps every group; on tiles two of the three
    groups a strategy, in turn, so that every block strategy meets every group (under
    one grid or the other) and so does every grid."""
    groups, paths = sorted(SCAN_GROUPS), []
    blocks = sorted({s.block.name for s, _ in SCAN_PATHS})
    grids = sorted({type(s).__name__ for s, _ in SCAN_PATHS})
    for strategy, layout in SCAN_PATHS:
        k = blocks.index(strategy.block.name) + grids.index(type(strategy).__name__)
        chosen = groups if layout == "warp" else [groups[k % 3], groups[(k + 1) % 3]]
        paths += [(strategy, layout, group) for group in chosen]
    return paths


SCAN_GROUP_PATHS = _scan_group_paths()


@pytest.mark.parametrize("strategy,layout,group", SCAN_GROUP_PATHS,
                         ids=[f"{s!r}-{lay}-{g}" for s, lay, g in SCAN_GROUP_PATHS])
@PROFILE
@given(data=st.data())
def test_more_scans_on_each_strategy_and_layout_agree_with_numpy(strategy, layout, group,
                                                                 data):
    name = data.draw(st.sampled_from(SCAN_GROUPS[group]))
    kind = SCAN_OPS[name.split(":")[1]][1] if ":" in name else \
        "cumprod" if name == "nancumprod" else "finite" if name == "nancumsum" else "any"
    x = data.draw(arrays(SCAN_DTYPES, kind))
    if name in ("nancumsum", "associative_scan:sum") and x.dtype == np.float16:
        x = x / np.float16(256)  # below float16's overflow: as test_scans_... above (README)
    if name == "nancumsum" and x.dtype.kind == "f" and x.size:  # NaN is what it skips
        x = x.copy()
        x.reshape(-1)[data.draw(st.integers(0, x.size - 1))] = np.nan
    axis = _axis(data.draw, x)
    exclusive, reverse = data.draw(st.booleans()), data.draw(st.booleans())
    kw, want, how = _scan_case(name, x, axis, exclusive, reverse)
    if ":" in name:
        ours = lambda x, **k: nk.associative_scan(x, name.split(":")[1], **k)  # noqa: E731
    else:
        ours = getattr(nk, name)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            ours(x, axis=axis, strategy=strategy, layout=layout, **kw)
        return
    got = ours(x, axis=axis, strategy=strategy, layout=layout, **kw)
    _scan_compare(got, want, x, how)


# --- softmax's backward passes, cross_entropy ---------------------------------------------


@pytest.mark.parametrize("layout", ["warp", "block"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax_backward", "log_softmax_backward"])
@PROFILE
@given(data=st.data())
def test_softmax_backward_on_each_layout_agrees_with_float64(log, layout, data):
    shapes = st.tuples(st.integers(1, 4), st.integers(1, 70))
    x = data.draw(arrays(FLOATS, "finite", shapes=shapes))
    dy = data.draw(arrays([x.dtype], "finite", shapes=st.just(x.shape))) / 1000
    axis = data.draw(st.sampled_from([-1, 0]))
    y = _softmax64(x, axis, log).astype(x.dtype)  # the forward output, rounded as stored
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    with np.errstate(all="ignore"):
        if log:  # dx = dy - exp(y) * sum(dy)
            want = dy64 - np.exp(y64) * np.sum(dy64, axis=axis, keepdims=True)
        else:  # dx = y * (dy - sum(y * dy))
            want = y64 * (dy64 - np.sum(y64 * dy64, axis=axis, keepdims=True))
    fused = data.draw(st.sampled_from([None, True, False]))
    fn = nk.log_softmax_backward if log else nk.softmax_backward
    got = np.asarray(fn(y, dy, axis=axis, layout=layout, fused=fused))
    assert got.dtype == x.dtype and got.shape == x.shape
    # float16/32 compute in float32: a row's sum of n terms up to max|dy| each
    scale = float(np.abs(dy64).max(initial=0.0)) * (1 + x.shape[axis])
    eps = np.finfo(np.float32 if x.dtype == np.float16 else x.dtype).eps
    atol = 8 * eps * scale + (np.finfo(np.float16).eps * scale if x.dtype == np.float16 else 0)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=RTOL[x.dtype], atol=atol)


@pytest.mark.parametrize("strategy", every("block", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_cross_entropy_on_each_block_strategy_agrees_with_torch(strategy, data):
    import torch
    import torch.nn.functional as F

    x = data.draw(arrays(FLOATS, "finite",
                         shapes=st.tuples(st.integers(1, 5), st.integers(1, 70))))
    x = (x / 500).astype(x.dtype)  # logits in [-20, 20]
    n, c = x.shape
    target = np.array(data.draw(st.lists(st.one_of(st.integers(0, c - 1), st.just(-100)),
                                         min_size=n, max_size=n)), np.int64)
    smoothing = data.draw(st.sampled_from([0.0, 0.1]))
    reduction = data.draw(st.sampled_from(["mean", "sum", "none"]))
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = F.cross_entropy(t, torch.from_numpy(target), ignore_index=-100,
                               label_smoothing=smoothing, reduction=reduction)
        loss.sum().backward()
    want, want_grad = loss.detach().numpy(), t.grad.numpy()
    got, grad = nk.cross_entropy(x, target, label_smoothing=smoothing, reduction=reduction,
                                 return_grad=True, strategy=strategy)
    got, grad = np.asarray(got), np.asarray(grad)
    assert got.dtype == x.dtype and got.shape == want.shape, (got, want)
    assert grad.dtype == x.dtype and grad.shape == x.shape
    # computed in float32 (float64 for float64), rounded to the logits' dtype; the logits
    # themselves are float16-rounded, so the reference sees the same inputs
    eps = np.finfo(np.float32 if x.dtype != np.float64 else np.float64).eps
    loss_atol = 64 * eps * (20 + np.log(c)) * (n if reduction == "sum" else 1)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=RTOL[x.dtype],
                               atol=loss_atol, equal_nan=True)
    np.testing.assert_allclose(grad.astype(np.float64), want_grad, rtol=RTOL[x.dtype],
                               atol=64 * eps + (1e-3 if x.dtype == np.float16 else 0),
                               equal_nan=True)


# --- segmented reductions and histogram_counts -------------------------------------------


@st.composite
def _offsets(draw, n):
    """``k + 1`` non-decreasing offsets in ``[0, n]``: empty segments included."""
    k = draw(st.integers(0, 8))
    return np.array(sorted(draw(st.lists(st.integers(0, n), min_size=k + 1,
                                         max_size=k + 1))), np.int64)


SEGMENT_OPS = ["sum", "prod", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor"]


@pytest.mark.parametrize("strategy", every("reduce", threads=64, blocks=2), ids=repr)
@PROFILE
@given(data=st.data())
def test_segmented_reductions_on_each_strategy_agree_with_numpy(strategy, data):
    name = data.draw(st.sampled_from(["segmented_reduce", "segmented_argmax",
                                      "segmented_argmin"]))
    op = data.draw(st.sampled_from(SEGMENT_OPS)) if name == "segmented_reduce" else None
    kind = "prod" if op == "prod" else "any"
    # past 256 elements a segment may outgrow a tile (64 threads * 4 under the
    # simulator) and be split over blocks
    x = data.draw(arrays(REDUCE_DTYPES, kind, shapes=st.integers(0, 320).map(lambda n: (n,))))
    offsets = data.draw(_offsets(len(x)))
    lanes = data.draw(st.sampled_from([None, 32, 64]))  # a warp or a block per short segment
    segments = [_canon(x)[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    path = {"strategy": strategy, "lanes": lanes}
    if name != "segmented_reduce":
        ref = np.argmax if name == "segmented_argmax" else np.argmin
        ours = nk.segmented_argmax if name == "segmented_argmax" else nk.segmented_argmin
        if any(len(s) == 0 for s in segments):  # NumPy's argmax of nothing raises
            with pytest.raises(ValueError):
                ours(x, offsets, **path)
            return
        _same_exact(ours(x, offsets, **path),
                    np.array([ref(s) for s in segments], np.int64).reshape(len(segments)))
        return
    initial = _initial(data.draw, x, op) if x.dtype != np.bool_ else None
    reducer = BUILTIN_REFS[op][0]
    kw = {} if initial is None else {"initial": initial}
    with np.errstate(all="ignore"):
        try:
            dtype = np.asarray(reducer(_canon(np.zeros(1, x.dtype)), **kw)).dtype
            want = [reducer(s, **kw) for s in segments]
        except (ValueError, TypeError):
            want = None
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            nk.segmented_reduce(x, offsets, op, initial=initial, **path)
        return
    want = np.array(want, dtype).reshape(len(segments))
    got = nk.segmented_reduce(x, offsets, op, initial=initial, **path)
    if op == "sum":
        _close(got, want, x, len(x))
    else:  # README: the sign of a zero max/min follows the combining order
        _same_exact(got, want, zero_sign=op not in ("max", "min"))


@pytest.mark.parametrize("strategy", every("histogram", threads=32), ids=repr)
@PROFILE
@given(data=st.data())
def test_histogram_counts_on_each_strategy_agree_with_numpy(strategy, data):
    x = data.draw(arrays([np.bool_, *INTS], data.draw(st.sampled_from(["count", "any"]))))
    num_bins = data.draw(st.integers(1, 30))
    v = _canon(x).ravel()
    inside = v[(v >= 0) & (v < num_bins)] if v.dtype != np.bool_ else v
    want = np.bincount(inside.astype(np.int64), minlength=num_bins)[:num_bins]
    _same_exact(nk.histogram_counts(x, num_bins, strategy=strategy), want.astype(np.int64))


# --- selection: one path per function, the sort strategy drawn -----------------------------

SELECTIONS = ["partition", "argpartition", "median", "nanmedian", "quantile", "nanquantile",
              "percentile", "nanpercentile"]


def _partition_contract(x, part, kth, axis):
    """``part`` holds ``x``'s elements along ``axis`` with every ``kth`` in its sorted
    place, none larger before it and none smaller after (NaN largest): NumPy's
    contract, not np.partition's arrangement of the rest (unspecified)."""
    if axis is None:
        x, axis = x.reshape(-1), -1
    assert part.shape == x.shape and part.dtype == x.dtype, (part, x)
    ps, ordered = np.moveaxis(part, axis, -1), np.sort(np.moveaxis(x, axis, -1), axis=-1)
    _same_exact(np.sort(ps, axis=-1), ordered, zero_sign=False)
    n = ps.shape[-1]
    floats = x.dtype.kind == "f"
    for k in kth if n else ():  # an empty axis takes any kth, as NumPy
        k %= n
        pivot = ps[..., k:k + 1]
        _same_exact(ps[..., k], ordered[..., k], zero_sign=False)
        with np.errstate(invalid="ignore"):
            before, after = ps[..., :k], ps[..., k + 1:]
            assert np.all((before <= pivot) | (np.isnan(pivot) if floats else False))
            assert np.all((after >= pivot) | (np.isnan(after) if floats else False))


def _sort_strategy(draw, slices: int, n: int):
    """A sort strategy for ``slices`` slices of ``n``: the radix sort for slices longer
    than the bitonic network takes, the bitonic network for many slices (the
    simulator's radix sort takes about a second a slice, and the sort's own path above
    runs it on every shape), either for the rest."""
    bitonic, radix = every("sort", threads=32)
    if n > bitonic.max_size:
        return radix
    if slices > 4:
        return bitonic
    return draw(st.sampled_from([bitonic, radix]))


#: medians' and quantiles' order statistics by radix select (8-bit digits: 256 bins a
#: simulated pass)
RADIX_SELECT = RadixSelect(threads=32, digit_bits=8)


def _quantile_draw(draw, name):
    if name in ("median", "nanmedian"):
        return ()
    qs = st.floats(0, 1) if "quantile" in name else st.floats(0, 100)
    return (draw(st.one_of(qs, st.lists(qs, min_size=1, max_size=3),
                           st.sampled_from([0, 1] if "quantile" in name else [0, 100])),
                 ),)


@pytest.mark.parametrize("name", SELECTIONS)
@PROFILE
@given(data=st.data())
def test_selection_on_a_drawn_sort_strategy_agrees_with_numpy(name, data):
    """Partition by its contract; medians and quantiles against NumPy on the float64
    values of integers (NumPy subtracts int8 in int8: README) within ``_close``'s
    tolerance (float16 is interpolated in float32 here, in float16 there), with
    NumPy's result dtype; NumPy's ValueError/TypeError/IndexError raised alike."""
    x = _canon(data.draw(arrays([np.bool_, *INTS, *FLOATS], "any")))
    ours, numpys = getattr(nk, name), getattr(np, name)
    if name.endswith("partition"):
        axis = None if x.ndim == 0 else data.draw(st.sampled_from([None, -1, 0]))
        n = x.size if axis is None else x.shape[axis]
        strategy = _sort_strategy(data.draw, x.size // max(n, 1), n)
        kth = [data.draw(st.integers(-n, n - 1)) for _ in range(2)] if n else [0]
        got = ours(x, kth, axis=axis, strategy=strategy)
        if name == "argpartition":
            flat = x.reshape(-1) if axis is None else x
            got = np.take_along_axis(flat, got, -1 if axis is None else axis)
        _partition_contract(x, got, kth, axis)
        return
    args = _quantile_draw(data.draw, name)
    axis = None if x.ndim == 0 else data.draw(st.sampled_from([None, 0, -1, tuple(range(x.ndim))]))
    slices = 1 if axis is None or x.ndim < 2 or axis == (0, 1) else x.shape[1 + axis]
    strategy = _sort_strategy(data.draw, slices, x.size // max(slices, 1))
    if slices <= 4:  # or by radix select (its simulated passes cost a second or so)
        strategy = data.draw(st.sampled_from([strategy, RADIX_SELECT]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with np.errstate(all="ignore"):
            try:
                want = np.asarray(numpys(x, *args, axis=axis))
                if x.dtype.kind in "iub" and want.dtype.kind == "f":
                    want = np.asarray(numpys(x.astype(want.dtype), *args, axis=axis))
            except (ValueError, TypeError, IndexError) as error:
                with pytest.raises(type(error)):
                    ours(x, *args, axis=axis, strategy=strategy)
                return
        got = ours(x, *args, axis=axis, strategy=strategy)
    n = x.size if axis is None else np.prod([x.shape[a] for a in np.atleast_1d(axis)])
    _close(got, want.astype(np.asarray(got).dtype) if name.startswith("nan") else want, x,
           2 if x.dtype != np.float16 else max(int(n), 2))
