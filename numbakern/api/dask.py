"""numbakern on Dask arrays: lazy Dask arrays whose chunks numbakern's kernels compute.

The public functions (``numbakern.sum`` and the others named in ``__all__``) come
here when given a ``dask.array.Array`` (``numbakern/api/_dispatch.py``); this module
is imported only then, and it alone imports Dask. Each function takes the same
arguments as its NumPy/CuPy form, plus Dask's own (``split_every=`` for reductions,
``method=`` for scans), and returns a lazy ``dask.array.Array``; argument errors are
raised at once, not at compute. Refused: ``out=`` and ``stream=`` (``TypeError``: the
result is lazy, and each chunk's call runs on its thread's current stream) and a
``where=`` mask (``NotImplementedError``). Chunks may be NumPy arrays (each chunk is
copied to the device, or run under the simulator) or CuPy arrays (stays on the GPU;
the result's ``_meta`` is a CuPy array). ``strategy=`` reaches every chunk's kernel.

How each family maps onto Dask (README, "Design", "Dask arrays"):

* Reductions (sum, prod, max, min, the bitwise ones, ``reduce`` with any one-field
  op): ``dask.array.reduction`` with numbakern's ``reduce`` as chunk, combine and
  aggregate; partials stay in the op's accumulator dtype (float32 for float16) and
  the aggregate casts to the result dtype. A non-commutative op reducing several
  axes has every reduced axis but the first rechunked whole, so that the partials
  are combined in the C order of the elements. ``mean``: the sum, then a division by
  the count, as :func:`numbakern.mean`; ``average``: two such sums (of ``x * w`` and
  of ``w``), then their quotient. A reduction of every axis whose blocks fit
  one aggregate (up to 32 blocks when no ``split_every`` is set) is built as two
  layers of plain tasks (:func:`_aggregated`): the same calls as
  ``dask.array.reduction``'s graph, built in a fifth of its time.
* var, std, nanvar, nanstd, nanmean: each chunk's Welford ``(count, mean, M2)`` in
  one pass, merged across chunks (Chan, Golub and LeVeque), finished as NumPy. With
  NumPy 2's ``mean=``: each chunk's count and sum of squared deviations from its
  block of the given mean (two passes over the chunk), summed across chunks.
  nanmax, nanmin, logsumexp: the function over each chunk, then over the partials.
* argmax, argmin, max/min_with_indices, nanargmax, nanargmin: one
  ``max_with_indices`` (nanargmax's state) per chunk, its indices made global from
  the chunk's offsets (a graph built as Dask's own ``arg_reduction`` builds its);
  partials ``(values, indices)`` cross chunks as pairs and are combined with NumPy's
  rules (NaN wins, then the larger value, then the first index;
  ``tie_break_left=False``: the last; nanargmax: a NaN counts as -inf, and a chunk's
  slice of nothing but NaN crosses as NaN at its first index); argmax's aggregate returns the
  indices alone. Over the whole array (one value a chunk) one aggregate takes up to
  32 chunks when ``split_every`` is not given.
* Scans: each chunk scanned along the axis once, by a scan kernel that starts from
  the chunk's carry, read on the device (``numbakern.api.scans.scan_with_carry``:
  no host synchronisation, no second pass). ``method="sequential"``: a chain, each
  chunk's carry the last element of the previous chunk's scan (one read and one
  write an element, as one call); ``"blelloch"``: each chunk's total by a reduce,
  the totals' inclusive prefixes by a tree of depth ``2 log2`` of the number of
  chunks, then the carried scans side by side (1.5x the traffic, parallel). Carries
  are states, combined by the op without its element map. The carry is always the
  left operand, so any one-field op works, a non-commutative one included. Where
  the kernels cannot take a carry (float products; a grid strategy whose
  ``takes_carry`` is false), the chunks' totals, read off their scans, become
  carries by the same chain or tree, each combined into its chunk by the array
  library's ufunc for a built-in op (``np.add``, ...: one elementwise pass), else
  by a two-row ``numbakern.reduce``. ``reverse`` scans the reversed array;
  ``exclusive`` scans each chunk exclusively and carries the totals.
* softmax, log_softmax: along an axis held in one chunk, ``numbakern.softmax`` per
  chunk (one layer of plain tasks); along a chunked axis, a reduction to the online
  ``(max, sum)`` state of each row (``strategies/online_softmax.py``'s combine, on
  whole arrays), then a normalising map ``exp(x - max) / sum`` (``x - max -
  log(sum)``).
* histogram, bincount: per-chunk counts (int64) or weights' sums (float64) summed;
  a histogram's density divided lazily; ``histogram`` without
  ``range`` and ``bincount`` compute ``min``/``max`` first (as NumPy must).

Determinism: with the same chunks and ``split_every`` (and the same ``method`` for
scans), the graph is the same tree of the same calls, so a deterministic strategy
gives the same bits run to run, on any scheduler and any number of workers. The
bits may differ from one numbakern call on the whole array: the partials of a
float reduction are summed in a different tree, and a scan's carries enter at the
chunks' edges where one call's enter at its tiles' (the bits are the same where
rows are scanned a warp each and the chunk edges fall at multiples of 32, with
``"sequential"``). Integer results, max/min, argmax and the bitwise ops are exact
and equal to a single call. A float result that is NaN is a NaN whose sign bit and
payload are not specified: they may change with the chunks, as NumPy's own
``np.sum`` gives the NaN its pairwise order meets first, and a GPU's arithmetic
gives its canonical NaN where a CPU (the simulator) keeps an operand's.

Chunk calls run side by side on Dask's threaded scheduler, under the simulator too
(each simulated launch has its own thread state: ``numbakern/runtime/simulator.py``).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import itertools
import math
import numbers
from typing import NamedTuple

import dask.array as da
import numpy as np
from dask import config as dask_config
from dask import core as dask_core
from dask.array.core import _concatenate2  # as dask.array's own tree reduction
from dask.array.reductions import _tree_reduce  # as dask.array's own arg_reduction
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.blockwise import Blockwise, fuse_roots, optimize_blockwise
from dask.core import flatten
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
from dask.optimization import cull
from dask.utils import ensure_dict

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.ops import norms as _norms
from numbakern.api.reductions import MaxWithIndices, MinWithIndices
from numbakern.api.scans import cumprod_dtype, cumsum_dtype, cumulative_axis
from numbakern.core.arrays import native_order
from numbakern.core.axes import (FLAT, LAST, axis_or_dim, check_flag, flat_axis_of_0d,
                                  keepdims_or_keepdim, normalize_axes, normalize_axis,
                                  result_shape)
from numbakern.core.deliver import retupled
from numbakern.runtime.checks import check_keepdims
from numbakern.runtime.stacklevel import numpy_fp_error, numpys_words, quiet_numpy_errors, warn


def _nk():
    import numbakern

    return numbakern


# --- checks -----------------------------------------------------------------------


def through_float32(fn, x, args: tuple, kwargs: dict):
    """``fn`` (one of this module's functions) of a Dask array ``x`` of bfloat16
    (``ml_dtypes``) chunks, or with ``dtype=`` bfloat16, as the NumPy forms compute
    them: as float32 input (or with ``dtype=float32``), floating results rounded to
    bfloat16 once (unless ``dtype=`` names another dtype; for bfloat16 ``x``,
    ``dtype=bfloat16`` is that rounding; for NumPy chunks of another real dtype, a
    function of ``CASTS_X`` first rounds them to bfloat16). Each bfloat16 chunk is
    widened to a float32 copy as it is computed (exact; Dask's chunks are on the host,
    copied to the device anyway), so every function here takes bfloat16."""
    import inspect

    from numbakern.api._interop import CASTS_X, numpy_bfloat16

    widened = np.dtype(x.dtype).name == "bfloat16"
    bound = inspect.signature(fn).bind_partial(x, *args, **kwargs)
    asked = bound.arguments.get("dtype")
    if asked is not None and "bfloat16" in str(asked):
        if not widened and fn.__name__ in CASTS_X and np.dtype(x.dtype).kind in "biuf" \
                and type(x._meta).__module__.startswith("numpy"):
            # each element rounded to bfloat16 first, as the NumPy forms' cast
            x, widened = x.astype(numpy_bfloat16(f"{fn.__name__}: dtype=bfloat16")), True
        bound.arguments["dtype"] = None if widened else np.dtype(np.float32)
        asked = None
    bound.arguments["x"] = _widened(x)
    try:
        result = fn(*bound.args, **bound.kwargs)
    except TypeError as e:
        if "float32" not in str(e) or not widened:
            raise
        from numbakern.api._interop import bfloat16_refused

        raise bfloat16_refused(fn.__name__, e) from e
    if asked is not None:
        return result
    return _rounded(result, numpy_bfloat16(f"{fn.__name__} to bfloat16"))


def asks_bfloat16(x, args: tuple, kwargs: dict) -> bool:
    """Whether a call of a Dask ``x`` goes :func:`through_float32`: ``x`` of bfloat16,
    or ``dtype=`` bfloat16 (by keyword, or a dtype among the positionals)."""
    def is_dtype(a) -> bool:
        if isinstance(a, str):  # NumPy's name of ml_dtypes' type
            return a == "bfloat16"
        return isinstance(a, (type, np.dtype)) or (type(a).__module__ == "torch"
                                                   and type(a).__name__ == "dtype")

    dtypes = [kwargs.get("dtype"), *(a for a in args if is_dtype(a))]
    return np.dtype(x.dtype).name == "bfloat16" or \
        builtins.any("bfloat16" in str(d) for d in dtypes)


def _rounded(result, bfloat16):
    """float32 results (a tuple's too) as ``bfloat16``, lazily for Dask arrays."""
    if isinstance(result, tuple):
        return retupled(result, [_rounded(r, bfloat16) for r in result])
    if np.dtype(getattr(result, "dtype", "O")) == np.float32:
        return result.astype(bfloat16)
    return result


def _check_dask(x, name: str, arg: str = "x"):
    """``x`` checked for ``numbakern.{name}``: a Dask array of known chunk sizes, in
    native byte order (a big-endian one converted chunk by chunk, as the NumPy forms
    convert host arrays: the chunk kernels read little-endian words)."""
    if not isinstance(x, da.Array):
        raise TypeError(f"numbakern.{name}: expected a dask.array.Array, got "
                        f"{type(x).__name__}")
    if builtins.any(math.isnan(c) for cs in x.chunks for c in cs):  # any: this module's
        raise ValueError(f"numbakern.{name}: the Dask array has unknown chunk sizes; call "
                         f"{arg}.compute_chunk_sizes() first")
    return native_order(x)


def _check_split_every(split_every, name: str) -> None:
    """Raise unless ``split_every`` (or, where it is None, Dask's config value, which
    Dask's tree reads then) is None, an int >= 2 or a dict of axis -> int >= 2: a tree
    that combines fewer than 2 blocks at a time is no reduction (Dask's own takes 1 in
    a dict and gives wrong sums; -1 fails deep in Dask)."""
    where = "split_every"
    if split_every is None:
        split_every, where = dask_config.get("split_every", None), \
            "split_every (from Dask's config)"
        if split_every is None:
            return
    values = split_every.values() if isinstance(split_every, dict) else [split_every]
    allowed = "None, an int >= 2 or a dict of axis -> int >= 2 (how many blocks a tree " \
              "step combines along the axis)"
    for v in values:
        if not isinstance(v, numbers.Integral):
            raise TypeError(f"numbakern.{name}: {where} must be {allowed}, got "
                            f"{split_every!r}")
        if v < 2:
            raise ValueError(f"numbakern.{name}: {where} must be {allowed}, got "
                             f"{split_every!r}")


def _refuse_out(out, name: str) -> None:
    if out is not None:
        raise TypeError(f"numbakern.{name}: out= is not supported for Dask arrays (the "
                        "result is a lazy Dask array; use da.store to write it)")


def _meta(x, ndim: int, dtype):
    return meta_from_array(x._meta, ndim=ndim, dtype=dtype)


def _op_ref(op: _ops.Op):
    """A built-in op by name (resolved again on a worker), a user's op as itself
    (cloudpickle carries its functions to the workers)."""
    return op.name if _ops.BUILTIN.get(op.name) is op else op


def _op(ref) -> _ops.Op:
    return _ops.get(ref)


# --- reductions --------------------------------------------------------------------


def _reduce_chunk(x, axis=None, keepdims=False, *, ref, acc, strategy, lanes, partial=True,
                  initial=None, result=None, **_):
    """``numbakern.reduce`` of one chunk in ``acc`` (``partial``: a chunk or combine
    step, whose empty input yields an empty partial for ops without an identity: 0
    along each reduced axis the input has no elements on, 1 along the others, as the
    partials of its neighbours along them, so that the partials of a row of blocks
    join). ``initial``: NumPy's, given to the aggregate only, so that it joins each
    slice once. ``result``: the aggregate's dtype, cast to once at the end (float16's
    partials stay float32 until then, as one call's running sum does; a ``dtype=``
    of float16 would round each partial first)."""
    op = _op(ref)
    n = math.prod(x.shape[a] for a in axis)
    if n == 0 and partial and isinstance(op.empty, str) and op.empty == "raise":
        shape = tuple(builtins.min(s, 1) if a in axis else s for a, s in enumerate(x.shape))
        return np.empty_like(x, shape=shape, dtype=acc)
    out = _nk().reduce(x, op, axis=axis, dtype=acc, keepdims=keepdims,
                       strategy=strategy, lanes=lanes, initial=initial)
    if result is None or out.dtype == result:
        return out
    return _aggregate_cast(out, result, x, axis, keepdims, initial)


def _aggregate_cast(out, result, partials, axis, keepdims, initial):
    """``out``, the float32 aggregate of ``partials``, cast to ``result`` (float16): on
    the host an infinite result of a slice whose partials (and ``initial``) are all
    finite is NumPy's "overflow encountered in reduce", as one call's (NumPy's float16
    loop overflows while it adds or multiplies; here the float32 aggregate may have
    overflowed, or its cast)."""
    with np.errstate(over="ignore"):
        cast = out.astype(result)
    if isinstance(out, (np.ndarray, np.generic)):
        finite = np.isfinite(partials).all(axis=axis, keepdims=keepdims)
        if initial is not None:
            finite &= bool(np.isfinite(initial))
        if (np.isinf(cast) & finite).any():
            numpy_fp_error("over", "overflow encountered in reduce")
    return cast


def _reduction(x, op: _ops.Op, name: str, axis, dtype, keepdims, split_every, strategy,
               lanes, out, partials: _ops.Op | None = None, initial=None):
    """``op`` over each chunk, then ``partials`` (default: ``op`` without its element
    map, :func:`_on_states`) over the partial results, which are states, not elements
    (``count_nonzero``'s counts are summed, not counted again). ``initial``: NumPy's,
    checked at once, joined to each slice by the aggregate."""
    x = _check_dask(x, name)
    _refuse_out(out, name)
    _check_split_every(split_every, name)
    keepdims = check_keepdims(keepdims)
    result = op.result_dtype_for(x.dtype, dtype, None if name == "reduce" else name)
    from numbakern.api.reductions import _grid, _initial, initial_loop  # the checks, at once

    _grid(op, strategy)
    axes = normalize_axes(axis, x.ndim)
    _check_index_in_one_chunk(x, op, axes, name)
    if not op.commutative and len(axes) > 1:
        x = x.rechunk({a: -1 for a in axes[1:]})
    acc = _ops.accumulator_dtype(result)
    if initial is not None:
        initial = _initial(initial, acc, name, initial_loop(x, dtype, result))
    x = _float16_elements(x, result)
    ref, meet = _op_ref(op), _op_ref(partials or _on_states(op))
    chunk = functools.partial(_reduce_chunk, ref=ref, acc=acc, strategy=strategy, lanes=lanes)
    combine = functools.partial(_reduce_chunk, ref=meet, acc=acc, strategy=strategy,
                                lanes=lanes)
    aggregate = functools.partial(_reduce_chunk, ref=meet, acc=acc, strategy=strategy,
                                  lanes=lanes, partial=False, initial=initial, result=result)
    ndim = len(result_shape(x.shape, axes, keepdims))
    if _one_aggregate(x, axes, split_every):
        partials = _per_block(x, functools.partial(chunk, axis=axes, keepdims=True), name)
        return _aggregated(partials, aggregate, axes, keepdims, name,
                           _meta(x, ndim, result), concatenate=True)
    return da.reduction(x, chunk, aggregate, combine=combine, axis=axes,
                        keepdims=keepdims, dtype=result, split_every=split_every,
                        meta=_meta(x, ndim, result), concatenate=True)


# --- whole-array reductions in two plain layers ------------------------------------------
#
# A reduction of every axis whose blocks all fit one aggregate (Dask's tree of depth 1)
# is built here as two layers of plain tasks, each block's partial and one aggregate,
# instead of through ``dask.array.reduction``: the same calls on the same values in the
# same order (so the same bits), without the blockwise layer's meta inference and
# tokenising, which cost more per graph than a whole-array call on 16 GiB takes to run
# 20% of (bench/NOTES.md, "Dask graphs in two plain layers").


# split_every when split_every=None and each chunk gives one value: one aggregate over
# up to this many chunks (a few array operations on a few values) rather than Dask's
# tree of 4 (a task and its operations for every 4)
_FLAT_SPLIT_EVERY = 32


def _one_aggregate(x, axes: tuple, split_every) -> bool:
    """Whether ``axes`` are all of ``x``'s and its blocks take one aggregate: up to
    ``_FLAT_SPLIT_EVERY`` blocks when neither ``split_every`` nor Dask's config sets
    one (each block's partial is one value, and a tree of combines would cost a task
    and its launches for every few of them), else where Dask's tree at that
    ``split_every`` (``dask.array.reduction``'s rule) is one aggregate over every
    block."""
    if not axes or len(axes) != x.ndim:
        return False
    split = split_every or dask_config.get("split_every", None)  # a user's default too
    if split is None:
        return math.prod(x.numblocks) <= _FLAT_SPLIT_EVERY
    if isinstance(split, dict):
        per = {a: split.get(a, 2) for a in axes}
    else:
        per = dict.fromkeys(axes, builtins.max(int(split ** (1 / len(axes))), 2))
    return builtins.all(per[a] >= 2 and x.numblocks[a] <= per[a] for a in axes)


def _plain(v) -> bool:
    """Whether ``repr(v)`` names ``v``'s value exactly and only it: strings, numbers,
    None, dtypes and NumPy scalar types, tuples of them."""
    if v is None or isinstance(v, (str, int, float, np.dtype)):
        return True
    if isinstance(v, type):
        return issubclass(v, np.generic)
    return isinstance(v, tuple) and builtins.all(_plain(e) for e in v)


def _name_of(v) -> str:
    """A string that names ``v`` (a chunk function: a ``functools.partial`` of one
    of this module's functions, or any value) as ``dask.base.tokenize`` would tell it
    apart from others, built from ``repr`` where that is exact: tokenizing a partial
    pickles its function (~100 us a call, the larger part of building a graph)."""
    if isinstance(v, functools.partial) and getattr(v.func, "__module__", None) == \
            __name__ and "<" not in v.func.__qualname__:
        args = [_name_of(a) for a in v.args]
        kwargs = [f"{k}={_name_of(a)}" for k, a in sorted(v.keywords.items())]
        return f"{v.func.__qualname__}({', '.join(args + kwargs)})"
    if isinstance(v, dict) and builtins.all(isinstance(k, str) for k in v):
        return "{" + ", ".join(f"{k!r}: {_name_of(v[k])}" for k in sorted(v)) + "}"
    return repr(v) if _plain(v) else f"tokenize:{tokenize(v)}"


def _token(*parts) -> str:
    """A deterministic token of ``parts`` (layer names): the same parts, the same
    token; different chunk functions or inputs, different tokens."""
    text = "\x00".join(_name_of(p) for p in parts)
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


class _Blocks(NamedTuple):
    """A layer of one task a block of ``numblocks``, its graph (the input's layers and
    it) not yet made a Dask array: the aggregate after it makes the only array built
    (``dask.array.Array``'s constructor costs as much as building the layer)."""

    graph: HighLevelGraph
    name: str
    numblocks: tuple

    def keys(self, axis: int = 0, index: tuple = ()) -> list:
        """The layer's keys nested as ``dask.array.Array.__dask_keys__`` nests them."""
        if axis == len(self.numblocks):
            return (self.name, *index)
        return [self.keys(axis + 1, index + (i,)) for i in range(self.numblocks[axis])]


def _per_block(x, fn, name: str) -> _Blocks:
    """``fn(block)`` for each block of ``x`` (one value a block along every axis)."""
    layer = f"{name}-chunk-{_token(x.name, fn)}"
    dsk = {(layer, *k): (fn, (x.name, *k))
           for k in itertools.product(*(range(n) for n in x.numblocks))}
    graph = HighLevelGraph.from_collections(layer, dsk, dependencies=[x])
    return _Blocks(graph, layer, x.numblocks)


def _aggregated(partials: _Blocks, aggregate, axes: tuple, keepdims: bool, name: str, meta,
                concatenate: bool):
    """One task: ``aggregate`` of every block of ``partials`` (as one array joined by
    Dask's ``_concatenate2``, or as the nested list of blocks), called as
    ``dask.array.reduction``'s last step calls it."""
    fn = functools.partial(aggregate, axis=axes, keepdims=keepdims)
    layer = f"{name}-aggregate-{_token(partials.name, fn, concatenate)}"
    nested = partials.keys()
    task = (fn, (functools.partial(_concatenate2, axes=list(axes)), nested)
            if concatenate else nested)
    ndim = len(partials.numblocks) if keepdims else 0
    graph = HighLevelGraph({**partials.graph.layers,
                            layer: MaterializedLayer({(layer,) + (0,) * ndim: task})},
                           {**partials.graph.dependencies, layer: {partials.name}})
    return da.Array(graph, layer, ((1,),) * ndim, meta=meta)


def sum(x, axis=None, dtype=None, out=None, keepdims=False, initial=None,  # noqa: A001
        where=True, *, split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.sum` of a Dask array (module docstring). Raises as the
    NumPy form does, at once for argument errors; ``TypeError`` for ``out=``."""
    _refuse_where(where, "sum")
    return _reduction(x, _ops.SUM, "sum", axis, dtype, keepdims, split_every, strategy,
                      lanes, out, initial=initial)


def prod(x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True, *,
         split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.prod` of a Dask array."""
    _refuse_where(where, "prod")
    return _reduction(x, _ops.PROD, "prod", axis, dtype, keepdims, split_every, strategy,
                      lanes, out, initial=initial)


def max(x, axis=None, out=None, keepdims=False, initial=None, where=True, *,  # noqa: A001
        split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.max` of a Dask array (no elements: ``ValueError`` at
    compute, as NumPy)."""
    _refuse_where(where, "max")
    return _reduction(x, _ops.MAX, "max", axis, None, keepdims, split_every, strategy,
                      lanes, out, initial=initial)


def min(x, axis=None, out=None, keepdims=False, initial=None, where=True, *,  # noqa: A001
        split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.min` of a Dask array."""
    _refuse_where(where, "min")
    return _reduction(x, _ops.MIN, "min", axis, None, keepdims, split_every, strategy,
                      lanes, out, initial=initial)


def xor_sum(x, axis=None, out=None, keepdims=False, *, split_every=None, strategy=None,
            lanes=None, stream=None, initial=None, where=True):
    """Lazy :func:`numbakern.xor_sum` of a Dask array."""
    _refuse_where(where, "xor_sum")
    return _reduction(x, _ops.BITWISE_XOR, "xor_sum", axis, None, keepdims, split_every,
                      strategy, lanes, out, initial=initial)


def bitwise_and_sum(x, axis=None, out=None, keepdims=False, *, split_every=None,
                    strategy=None, lanes=None, stream=None, initial=None, where=True):
    """Lazy :func:`numbakern.bitwise_and_sum` of a Dask array."""
    _refuse_where(where, "bitwise_and_sum")
    return _reduction(x, _ops.BITWISE_AND, "bitwise_and_sum", axis, None, keepdims,
                      split_every, strategy, lanes, out, initial=initial)


def bitwise_or_sum(x, axis=None, out=None, keepdims=False, *, split_every=None,
                   strategy=None, lanes=None, stream=None, initial=None, where=True):
    """Lazy :func:`numbakern.bitwise_or_sum` of a Dask array."""
    _refuse_where(where, "bitwise_or_sum")
    return _reduction(x, _ops.BITWISE_OR, "bitwise_or_sum", axis, None, keepdims,
                      split_every, strategy, lanes, out, initial=initial)


def reduce(x, op, axis=None, dtype=None, out=None, keepdims=False, *, split_every=None,
           strategy=None, lanes=None, stream=None, initial=None, where=True):
    """Lazy :func:`numbakern.reduce` of a Dask array with a one-field op (a user's
    :class:`numbakern.Op` is pickled to distributed workers)."""
    _refuse_where(where, "reduce")
    op = _ops.get(op)
    if op.fields != 1:
        raise TypeError(f"{op.name} has {op.fields} fields; reduce takes one-field ops "
                        "(argmax/argmin and max_with_indices/min_with_indices for pairs)")
    return _reduction(x, op, "reduce", axis, dtype, keepdims, split_every, strategy, lanes,
                      out, initial=initial)


def nansum(x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True, *,
           split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.nansum` of a Dask array (each chunk skips its NaN; the
    partial sums add as a sum does)."""
    _refuse_where(where, "nansum")
    return _reduction(x, _ops.NANSUM, "nansum", axis, dtype, keepdims, split_every,
                      strategy, lanes, out, partials=_ops.SUM, initial=initial)


def nanprod(x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True, *,
            split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.nanprod` of a Dask array."""
    _refuse_where(where, "nanprod")
    return _reduction(x, _ops.NANPROD, "nanprod", axis, dtype, keepdims, split_every,
                      strategy, lanes, out, partials=_ops.PROD, initial=initial)


def any(x, axis=None, out=None, keepdims=False, *, split_every=None,  # noqa: A001
        strategy=None, lanes=None, stream=None, where=True):
    """Lazy :func:`numbakern.any` of a Dask array."""
    _refuse_where(where, "any")
    return _reduction(x, _ops.ANY, "any", axis, None, keepdims, split_every, strategy,
                      lanes, out)


def all(x, axis=None, out=None, keepdims=False, *, split_every=None,  # noqa: A001
        strategy=None, lanes=None, stream=None, where=True):
    """Lazy :func:`numbakern.all` of a Dask array."""
    _refuse_where(where, "all")
    return _reduction(x, _ops.ALL, "all", axis, None, keepdims, split_every, strategy,
                      lanes, out)


def count_nonzero(x, axis=None, *, keepdims=False, split_every=None, strategy=None,
                  lanes=None, stream=None):
    """Lazy :func:`numbakern.count_nonzero` of a Dask array: each chunk's count, the
    counts summed (a 0-d Dask array for ``axis=None``, where NumPy gives an int)."""
    return _reduction(x, _ops.COUNT_NONZERO, "count_nonzero", axis, None, keepdims,
                      split_every, strategy, lanes, None, partials=_ops.SUM)


def mean(x, axis=None, dtype=None, out=None, keepdims=False, *, split_every=None,
         strategy=None, lanes=None, stream=None, where=True):
    """Lazy :func:`numbakern.mean` of a Dask array: the sum in NumPy's accumulator
    dtype, divided by the count in float64, cast to NumPy's result dtype."""
    _refuse_where(where, "mean")
    return _mean(x, "mean", axis, dtype, keepdims, split_every, strategy, lanes, out)


def _mean(x, name: str, axis, dtype, keepdims, split_every, strategy, lanes, out):
    from numbakern.api.reductions import _no_axis_of_0d

    x = _check_dask(x, name)
    _no_axis_of_0d(x, axis)  # nanmean's too: of integers, NumPy's nanmean is its mean
    in_dtype = np.dtype(x.dtype)
    acc, result = _ops.numpy_mean_dtypes(in_dtype, dtype)
    total = _reduction(x, _ops.SUM, name, axis, acc, keepdims, split_every, strategy,
                       lanes, out)
    count = math.prod(x.shape[a] for a in normalize_axes(axis, x.ndim))
    if count == 0:  # NaN, with the NumPy form's words at compute, by the first block
        from numbakern.api.reductions import _numpy_sum_dtype, _scalar_division

        scalar = _scalar_division(x, axis, keepdims, None, _numpy_sum_dtype(in_dtype, dtype))
        return total.map_blocks(functools.partial(_mean_of_nothing, scalar=scalar,
                                                  outputs=total.size),
                                dtype=result, meta=_meta(x, total.ndim, result))
    return (total.astype(np.float64) / np.float64(count)).astype(result)


def average(x, axis=None, weights=None, returned=False, *, keepdims=False,
            split_every=None, strategy=None, stream=None):
    """Lazy :func:`numbakern.average` of a Dask array: ``sum(x * w) / sum(w)``, the two
    sums numbakern's (chunk by chunk, then across chunks), the products and the
    broadcast weights Dask's element-wise work on the chunks (a NumPy or Dask
    ``weights``, laid along ``axis`` as NumPy's rule says). Shapes and dtypes are
    checked as the graph is built; weights of a slice summing to zero raise NumPy's
    ``ZeroDivisionError`` at compute (for a result of no elements, where NumPy still
    sums the weights along ``axis``, that sum is computed now). Without weights:
    :func:`mean` (and its counts)."""
    from numbakern.api.average import (WEIGHTS_SUM_TO_ZERO, given_axes, result_dtype,
                                       weights_along)

    x = _check_dask(x, "average")
    keepdims = check_keepdims(keepdims)
    returned = check_flag(returned, "returned")
    given = given_axes(axis, x.ndim)
    axes = None if given is None else normalize_axes(given, x.ndim)
    reduce = dict(axis=axes, keepdims=keepdims, split_every=split_every, strategy=strategy)
    if weights is None:
        avg = mean(x, **reduce)
        count = math.prod(x.shape) / math.prod(avg.shape)  # NumPy's: raises for no avg
        if not returned:
            return avg
        return avg, avg.map_blocks(_filled, count=count, dtype=avg.dtype)
    w = _check_dask(weights if isinstance(weights, da.Array) else
                    da.from_array(_like_chunks(x, weights)), "average")
    result = result_dtype(np.dtype(x.dtype), w)
    along = weights_along(tuple(x.shape), tuple(w.shape), given)
    kept = result_shape(x.shape, normalize_axes(axes, x.ndim), keepdims)
    if along is not None and not math.prod(kept):
        if sum(w).compute() == 0:  # NumPy's check, before any slice is summed
            raise ZeroDivisionError(WEIGHTS_SUM_TO_ZERO)
    if along is not None:  # NumPy's: the weights' axes in x's order, length 1 elsewhere
        w = w.transpose(tuple(np.argsort(along).tolist())).reshape(
            tuple(n if a in along else 1 for a, n in enumerate(x.shape)))
    w = w.astype(result).rechunk(tuple((1,) if n == 1 else c  # x's chunks, where not broadcast
                                    for n, c in zip(w.shape, x.chunks)))
    w = da.broadcast_to(w, x.shape, chunks=x.chunks)
    sums, scale = sum(x.astype(result) * w, **reduce), sum(w, **reduce)
    scale = scale.map_blocks(_weights_not_zero, dtype=result)
    avg = (sums / scale).astype(result)
    return (avg, scale.astype(result)) if returned else avg


def _filled(block, *, count):
    """A block of ``count``s (or NaN) as the block (a 0-d block's a scalar, as
    NumPy's)."""
    filled = np.full_like(block, count)
    return filled[()] if np.ndim(block) == 0 else filled


def _like_chunks(x, a):
    """A host array ``a`` in the library of ``x``'s chunks (CuPy's or NumPy's), for
    element-wise work with them."""
    a = np.asarray(a)
    if type(x._meta).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy.asarray(a)
    return a


def _weights_not_zero(block):
    from numbakern.api.average import WEIGHTS_SUM_TO_ZERO

    if (block == 0).any():
        raise ZeroDivisionError(WEIGHTS_SUM_TO_ZERO)
    return block


def _mean_of_nothing(block, *, scalar: bool, outputs: int, block_info=None):
    from numbakern.api.reductions import _warn_mean_of_nothing

    if not builtins.any((block_info or {}).get(None, {}).get("chunk-location", ())):
        if outputs:
            _warn_mean_of_nothing(scalar)
        else:  # no outputs: no division
            warn("Mean of empty slice")
    return _filled(block, count=np.nan)


def _self_chunk(x, axis=None, keepdims=False, *, name, acc, fill, kwargs, partial=True,
                nothing=False, **_):
    """``numbakern.<name>`` of one chunk or of partials (quiet where a partial's
    warning would be premature: a chunk of nothing but NaN is no all-NaN slice), in
    ``acc``; a chunk of no elements gives ``fill``, the reduction's identity (the
    aggregate of a slice of ``nothing`` raises as NumPy's, for ``fill=None``)."""
    if not partial and nothing and fill is None:
        raise ValueError(f"zero-size array to reduction operation {_ops.ufunc_name(name)} "
                         "which has no identity")
    if math.prod(x.shape[a] for a in axis) == 0:
        shape = tuple(1 if a in axis else s for a, s in enumerate(x.shape))
        filled = np.full_like(x, _identity_of(name, acc) if fill is None else fill,
                              shape=shape, dtype=acc)
        return filled if keepdims else filled.reshape(
            tuple(s for a, s in enumerate(shape) if a not in axis))
    with quiet_numpy_errors() if partial else contextlib.nullcontext():
        r = getattr(_nk(), name)(x, axis=axis, keepdims=keepdims, **kwargs)
    return r.astype(acc, copy=False)


def _identity_of(name: str, dtype):
    """What a chunk of no elements gives nanmax (nanmin): NaN, or the dtype's least
    (greatest) value, which every element beats."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return name == "nanmin"
    info = np.iinfo(dtype)
    return info.min if name == "nanmax" else info.max


def _self_reduction(x, name: str, result, axis, keepdims, split_every, kwargs: dict,
                    acc=None, fill=None, initial=None):
    """``numbakern.<name>`` over each chunk, then over the partial results, for the
    reductions whose partials are the same reduction's results (nanmax of nanmaxes,
    logsumexp of logsumexps); partials in ``acc`` (default ``result``); ``fill``: the
    result of no elements (None: nanmax's rules, :func:`_identity_of`, and an error
    for a slice of nothing, unless NumPy's ``initial`` stands in for it: given to the
    aggregate only)."""
    _check_split_every(split_every, name)
    keepdims = check_keepdims(keepdims)
    axes = normalize_axes(axis, x.ndim)
    acc = result if acc is None else acc
    chunk = functools.partial(_self_chunk, name=name, acc=acc, fill=fill, kwargs=kwargs)
    nothing = math.prod(x.shape[a] for a in axes) == 0 and initial is None
    last = kwargs if initial is None else {**kwargs, "initial": initial}
    aggregate = functools.partial(_self_chunk, name=name, acc=result, fill=fill,
                                  kwargs=last, partial=False, nothing=nothing)
    ndim = len(result_shape(x.shape, axes, keepdims))
    return da.reduction(x, chunk, aggregate, combine=chunk, axis=axes, keepdims=keepdims,
                        dtype=result, split_every=split_every,
                        meta=_meta(x, ndim, result), concatenate=True)


def nanmax(x, axis=None, out=None, keepdims=False, initial=None, where=True, *,
           split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.nanmax` of a Dask array: each chunk's nanmax, then the
    nanmax of those (NumPy's all-NaN warning once, for the whole slice)."""
    _refuse_where(where, "nanmax")
    return _nan_extreme(x, "nanmax", axis, out, keepdims, split_every, strategy, lanes,
                        initial)


def nanmin(x, axis=None, out=None, keepdims=False, initial=None, where=True, *,
           split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.nanmin` of a Dask array."""
    _refuse_where(where, "nanmin")
    return _nan_extreme(x, "nanmin", axis, out, keepdims, split_every, strategy, lanes,
                        initial)


def _nan_extreme(x, name, axis, out, keepdims, split_every, strategy, lanes, initial):
    x = _check_dask(x, name)
    _refuse_out(out, name)
    _ops.MAX.check_dtype(np.dtype(x.dtype))
    if initial is not None:
        from numbakern.api.reductions import _initial

        initial = _initial(initial, _ops.accumulator_dtype(x.dtype), name)
    return _self_reduction(x, name, np.dtype(x.dtype), axis, keepdims, split_every,
                           dict(strategy=strategy, lanes=lanes), initial=initial)


def logsumexp(x, axis=None, b=None, keepdims=False, return_sign=False, *, split_every=None,
              strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.logsumexp` of a Dask array: each chunk's logsumexp (its
    online ``(max, sum)`` state, finished), then the logsumexp of those, which is the
    whole slice's (float16 partials kept in float32). ``b=``/``return_sign=``: as the
    NumPy form, not taken."""
    x = _check_dask(x, "logsumexp")
    if b is not None or return_sign:
        raise TypeError("logsumexp: b= and return_sign= (SciPy's) are not supported")
    result = _ops.numpy_mean_dtypes(np.dtype(x.dtype), None)[1]
    return _self_reduction(x, "logsumexp", result, axis, keepdims, split_every,
                           dict(strategy=strategy, lanes=lanes),
                           acc=_ops.accumulator_dtype(result), fill=-np.inf)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2, split_every=None,
                strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.vector_norm` of a Dask array: each chunk's sum of
    ``x * x`` (or of ``|x|`` or ``|x| ** p``, its count of non-zeros, its largest or
    smallest ``|x|``) in the accumulator dtype, the partials summed (or compared)
    across chunks, then the root in float64, cast to the result dtype, as the NumPy
    form's (so a float16 sum of squares never passes float16's range)."""
    from numbakern.api.norms import _norm_plan, root_exponent
    from numbakern.api.reductions import _no_axis_of_0d

    x = _check_dask(x, "vector_norm")
    op, p = _norm_plan(ord)
    _no_axis_of_0d(x, axis)  # as the NumPy form
    result = op.result_dtype_for(x.dtype, caller="vector_norm")
    acc = _ops.accumulator_dtype(result)
    summed = op not in (_norms.MAX_ABS, _norms.MIN_ABS)  # |x| of a partial is itself
    total = _reduction(x, op, "vector_norm", axis, acc, keepdims, split_every, strategy,
                       lanes, None, partials=_ops.SUM if summed else None)
    if p is None:
        return total.astype(result)
    return total.map_blocks(_root_block, root_exponent(p, result), result, dtype=result,
                            meta=_meta(total, total.ndim, result))


def _root_block(total, exponent: float, result):
    """A block of sums' vector norms: ``sqrt`` (exponent 0.5) or the power, in float64,
    NumPy's special values without its warnings (as the NumPy form's kernel)."""
    wide = total.astype(np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        root = np.sqrt(wide) if exponent == 0.5 else np.power(wide, exponent)  # (** 0: 1)
    return root.astype(result)


def ptp(x, axis=None, out=None, keepdims=False, *, split_every=None, strategy=None,
        lanes=None, stream=None):
    """Lazy :func:`numbakern.ptp` of a Dask array: ``max - min`` (two reductions,
    so two reads of each chunk; integer differences wrap as NumPy's)."""
    from numbakern.api.reductions import PTP_OF_BOOL

    _refuse_out(out, "ptp")
    _check_split_every(split_every, "ptp")
    x = _check_dask(x, "ptp")
    kw = dict(axis=axis, keepdims=keepdims, split_every=split_every, strategy=strategy,
              lanes=lanes)
    if not math.prod(x.shape[a] for a in normalize_axes(axis, x.ndim)):
        return max(x, **kw)  # raises at compute, in NumPy's ptp's words (its maximum)
    if np.dtype(x.dtype).kind == "b":
        raise TypeError(PTP_OF_BOOL)
    return np.subtract(max(x, **kw), min(x, **kw))  # (a ufunc: no scalar overflow warning)


# --- partials as dicts of fields (moments, softmax states) ---------------------------


def _concat(nested, axes):
    if not isinstance(nested, list):
        return nested
    parts = [_concat(n, axes[1:]) for n in nested]
    return np.concatenate(parts, axis=axes[0]) if len(parts) > 1 else parts[0]


def _deep(nested, key):
    if isinstance(nested, list):
        return [_deep(n, key) for n in nested]
    return nested[key]


def _field(key, pair):
    return pair[key]


def _identity_chunk(pair, axis=None, keepdims=True, **_):
    return pair


# --- moments: nanmean, var, std and their nan forms ----------------------------------


def _moments_chunk(skip_nan, strategy, lanes, axes, x):
    """One chunk's Welford ``{"n", "mean", "m2"}`` along ``axes`` (kept as 1)."""
    from numbakern.api.reductions import moments

    n, mean, m2 = moments(x, axes, skip_nan=skip_nan, strategy=strategy, lanes=lanes)
    return {"n": n, "mean": mean, "m2": m2}


def _nan_sum_count_chunk(_skip_nan, strategy, lanes, axes, x):
    """One chunk's moments' form for ``nanmean``: the count of its non-NaN elements
    and their sum over it (no M2), as the single-array ``nanmean`` sums: an
    infinity stays one, where Welford's running mean meets ``inf - inf`` (NaN)."""
    nk = _nk()
    summed = nk.nansum(x, axes, dtype=np.float64, keepdims=True, strategy=strategy,
                       lanes=lanes)
    n = nk.count_nonzero(x == x, axes, keepdims=True)  # NaN is the one x != x
    mean = np.where(n > 0, summed / np.maximum(n, 1), 0.0)
    return {"n": n, "mean": mean}  # no M2, whose merge would meet inf - inf


def _moments_merge(parts, axis=None, keepdims=True, **_):
    """Chan, Golub and LeVeque's merge of the partials along ``axis``: counts add,
    the mean is the count-weighted mean, and M2 (where the partials have one) gains
    each partial's count times its mean's squared distance from the whole's (empty
    partials weigh nothing)."""
    axis = list(axis)
    n, mean = (_concat(_deep(parts, k), axis) for k in ("n", "mean"))
    total = n.sum(axis=tuple(axis), keepdims=True)
    mu = (n * mean).sum(axis=tuple(axis), keepdims=True) / np.maximum(total, 1)
    merged = {"n": total, "mean": mu}
    if "m2" in _leaf(parts):
        m2 = _concat(_deep(parts, "m2"), axis)
        spread = (n * (mean - mu) ** 2).sum(axis=tuple(axis), keepdims=True)
        merged["m2"] = m2.sum(axis=tuple(axis), keepdims=True) + spread
    return merged


def _leaf(nested):
    while isinstance(nested, list):
        nested = nested[0]
    return nested


def _moments_finish(parts, axis=None, keepdims=False, *, finish, result, **_):
    merged = _moments_merge(parts, axis)
    return _finished(finish, axis, keepdims, result, merged["n"], merged["mean"],
                     merged.get("m2"))


def _finished(finish, axis, keepdims: bool, result, n, mean, m2):
    """``finish(n, mean, m2)`` of the merged states (reduced ``axis`` kept as 1) in
    the result's shape and dtype ``result``. A whole-array result is finished from
    scalars, as NumPy's forms divide them (its words: "... in scalar divide")."""
    shape = n.shape if keepdims else tuple(s for a, s in enumerate(n.shape) if a not in axis)
    n, mean, m2 = (None if v is None else v.reshape(shape)[()] for v in (n, mean, m2))
    return _as_numpy_does(finish(n, mean, m2).astype(result))


def _moment_reduction(x, name: str, axis, dtype, keepdims, split_every, strategy, lanes,
                      out, skip_nan: bool, finish, chunk=_moments_chunk):
    """``finish(count, mean, M2)`` of the merged Welford states of each slice
    (``chunk``: how a chunk's are found)."""
    x = _check_dask(x, name)
    _refuse_out(out, name)
    _check_split_every(split_every, name)
    keepdims = check_keepdims(keepdims)
    op = _ops.NAN_MOMENTS if skip_nan else _ops.MOMENTS
    op.check_dtype(np.dtype(x.dtype), "x of dtype", name)
    from numbakern.api.reductions import _grid, check_float_dtype

    check_float_dtype(dtype, name)
    _grid(op, strategy)
    result = _ops.numpy_mean_dtypes(np.dtype(x.dtype), dtype)[1]
    axes = normalize_axes(axis, x.ndim)
    # (dict partials through map_blocks with a stated meta, as argmax's: Dask would
    # otherwise call the chunk function on an empty meta to guess the partials' type)
    chunks = tuple((1,) * len(c) if a in axes else c for a, c in enumerate(x.chunks))
    partials = x.map_blocks(functools.partial(chunk, skip_nan, strategy, lanes, axes),
                            chunks=chunks, dtype=np.float64, meta=_meta(x, x.ndim, np.float64))
    aggregate = functools.partial(_moments_finish, finish=finish, result=result)
    ndim = len(result_shape(x.shape, axes, keepdims))
    return da.reduction(partials, _identity_chunk, aggregate, combine=_moments_merge,
                        axis=axes, keepdims=keepdims, dtype=result, split_every=split_every,
                        concatenate=False, meta=_meta(x, ndim, result))


def _warn_where(mask, message: str) -> None:
    if bool(mask.any()):
        warn(message)


def _variance_of(ddof, root: bool, message: str, skip_nan: bool = False):
    """``finish(count, mean, M2)``: NumPy's variance (``M2 / max(count - ddof, 0)``,
    with NumPy's words for a division by zero; NaN where that is not positive for
    the NaN-skipping forms, ``skip_nan``, whose NumPy form says nothing of it)."""
    def finish(n, mean, m2):
        left = n - ddof
        _warn_where(left <= 0, message)
        if skip_nan:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(left > 0, m2 / np.maximum(left, 0), np.nan)
        else:
            with numpys_words():
                v = m2 / np.maximum(left, 0)
        return np.sqrt(v) if root else v

    return finish


def _deviations_chunk(skip_nan, strategy, lanes, axes, x, mean):
    """One chunk's ``{"n", "s"}``: its count and sum of squared deviations from the
    given ``mean`` (its block, kept axes as the chunk's, reduced axes 1)."""
    from numbakern.api.reductions import deviation_sums

    n, s = deviation_sums(x, mean, axes, skip_nan=skip_nan, strategy=strategy, lanes=lanes)
    return {"n": n, "s": s}


def _deviations_merge(parts, axis=None, keepdims=True, **_):
    axis = tuple(axis)
    n, s = (_concat(_deep(parts, k), list(axis)) for k in ("n", "s"))
    return {"n": n.sum(axis=axis, keepdims=True), "s": s.sum(axis=axis, keepdims=True)}


def _deviations_finish(parts, axis=None, keepdims=False, *, finish, result, **_):
    merged = _deviations_merge(parts, axis)
    return _finished(finish, axis, keepdims, result, merged["n"], None, merged["s"])


def _from_mean(x, name: str, mean, axis, dtype, keepdims, split_every, strategy, lanes,
               out, skip_nan: bool, finish):
    """var/std/nanvar/nanstd with NumPy 2's ``mean=`` (a NumPy or Dask array, or a
    number, broadcasting to the keepdims shape): each chunk's count and sum of squared
    deviations from its block of ``mean`` (:func:`numbakern.api.reductions.deviation_sums`,
    numbakern's kernels), summed across chunks (float64), then ``finish``."""
    from numbakern.api.reductions import _given_mean, check_float_dtype, drop_leading_ones

    x = _check_dask(x, name)
    _refuse_out(out, name)
    _check_split_every(split_every, name)
    keepdims = check_keepdims(keepdims)
    _ops.NAN_MOMENTS.check_dtype(np.dtype(x.dtype), "x of dtype", name)
    check_float_dtype(dtype, name)
    axes = normalize_axes(axis, x.ndim)
    kept = result_shape(x.shape, axes, True)
    scalar = axis is None and not (keepdims or skip_nan)  # as the NumPy form's
    lazy = mean if isinstance(mean, da.Array) else da.asarray(
        _given_mean(mean, kept, name, scalar))
    if scalar:
        lazy = drop_leading_ones(lazy, len(kept))
    _given_mean(np.empty_like(lazy._meta, shape=lazy.shape), kept, name)  # its checks
    result = _ops.numpy_mean_dtypes(np.dtype(x.dtype), dtype)[1]
    if dtype is None and not skip_nan:  # x - mean's dtype, as the NumPy form's
        result = np.result_type(result, mean if isinstance(mean, (int, float)) else
                                lazy.dtype)
        result = result if result.kind == "f" else np.dtype(np.float64)
    lazy = da.broadcast_to(lazy.reshape((1,) * (x.ndim - lazy.ndim) + lazy.shape), kept)
    # (its reduced axes one block of 1, which every chunk of x along them reads)
    lazy = lazy.rechunk(tuple((1,) if a in axes else c for a, c in enumerate(x.chunks)))
    index = tuple(range(x.ndim))
    partials = da.blockwise(functools.partial(_deviations_chunk, skip_nan, strategy, lanes,
                                              axes), index, x, index, lazy, index,
                            adjust_chunks={a: 1 for a in axes}, dtype=np.float64,
                            meta=_meta(x, x.ndim, np.float64), align_arrays=False)
    aggregate = functools.partial(_deviations_finish, finish=finish, result=result)
    ndim = len(result_shape(x.shape, axes, keepdims))
    return da.reduction(partials, _identity_chunk, aggregate, combine=_deviations_merge,
                        axis=axes, keepdims=keepdims, dtype=result, split_every=split_every,
                        concatenate=False, meta=_meta(x, ndim, result))


def _mean_of(n, mean, m2):
    _warn_where(n == 0, "Mean of empty slice")
    return np.where(n > 0, mean, np.nan)


def _checked_ddof(ddof, correction, name: str):
    """``ddof`` by the NumPy forms' rules: ``correction=`` taken, then checked."""
    from numbakern.api.reductions import check_ddof, with_correction

    return check_ddof(with_correction(ddof, correction), name)


def nanmean(x, axis=None, dtype=None, out=None, keepdims=False, *, split_every=None,
            strategy=None, lanes=None, stream=None, where=True):
    """Lazy :func:`numbakern.nanmean` of a Dask array: each chunk's count and sum of
    its non-NaN elements, merged (float64) across chunks as a count-weighted mean; an
    all-NaN slice is NaN with NumPy's warning, at compute. Integer and bool input
    holds no NaN: :func:`mean`'s graph, as NumPy's ``nanmean`` is its ``mean`` there
    (an integer ``dtype=`` taken too)."""
    _refuse_where(where, "nanmean")
    x = _check_dask(x, "nanmean")
    if np.dtype(x.dtype).kind in "biu":
        return _mean(x, "nanmean", axis, dtype, keepdims, split_every, strategy, lanes,
                     out)
    x = _float16_elements(x, dtype if dtype is not None else x.dtype)
    return _moment_reduction(x, "nanmean", axis, dtype, keepdims, split_every, strategy,
                             lanes, out, True, _mean_of, _nan_sum_count_chunk)


def _float16_elements(x, result):
    """``x`` with each element cast to float16 where ``result`` is float16 and ``x``
    wider (NumPy's cast of a float16 ``dtype=``, which the eager forms make as they
    read each element: ``numbakern/kernels/float16.py``), else ``x``; the cast quiet,
    as a chunk's own warnings are."""
    from numbakern.kernels.float16 import read_for

    if read_for(x.dtype, result) is None:
        return x
    return x.map_blocks(_as_float16, dtype=np.float16)


def _as_float16(block):
    with np.errstate(over="ignore"):
        return block.astype(np.float16)


def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, split_every=None,
        strategy=None, lanes=None, stream=None, where=True, correction=None, mean=None):
    """Lazy :func:`numbakern.var` of a Dask array: each chunk's Welford ``(count, mean,
    M2)`` in one pass, merged across chunks by Chan et al.'s formula (float64), then
    ``M2 / max(count - ddof, 0)`` as NumPy. ``mean=`` (NumPy 2's; a NumPy or Dask
    array or a number): :func:`_from_mean`."""
    return _variance(x, "var", False, False, axis, dtype, out, ddof, correction, keepdims,
                     split_every, strategy, lanes, where, mean)


def std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, split_every=None,
        strategy=None, lanes=None, stream=None, where=True, correction=None, mean=None):
    """Lazy :func:`numbakern.std` of a Dask array: the square root of :func:`var`'s."""
    return _variance(x, "std", True, False, axis, dtype, out, ddof, correction, keepdims,
                     split_every, strategy, lanes, where, mean)


def nanvar(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, split_every=None,
           strategy=None, lanes=None, stream=None, where=True, correction=None, mean=None):
    """Lazy :func:`numbakern.nanvar` of a Dask array (NaN elements count nothing)."""
    return _variance(x, "nanvar", False, True, axis, dtype, out, ddof, correction, keepdims,
                     split_every, strategy, lanes, where, mean)


def nanstd(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, split_every=None,
           strategy=None, lanes=None, stream=None, where=True, correction=None, mean=None):
    """Lazy :func:`numbakern.nanstd` of a Dask array."""
    return _variance(x, "nanstd", True, True, axis, dtype, out, ddof, correction, keepdims,
                     split_every, strategy, lanes, where, mean)


def _variance(x, name: str, root: bool, skip_nan: bool, axis, dtype, out, ddof, correction,
              keepdims, split_every, strategy, lanes, where, mean):
    """var, std and their nan forms. Where ``count - ddof <= 0`` the nan forms of float
    input give NaN (NumPy's nanvar), the others ``M2 / 0``; integer and bool input
    holds no NaN, and NumPy's nanvar is its var there."""
    _refuse_where(where, name)
    ddof = _checked_ddof(ddof, correction, name)
    nan_rule = skip_nan and np.dtype(x.dtype).kind == "f"
    if not nan_rule:  # NumPy's var and std (nanvar and nanstd of integers are those)
        from numbakern.api.reductions import _no_axis_of_0d

        _no_axis_of_0d(x, axis)
    finish = _variance_of(ddof, root, "Degrees of freedom <= 0 for slice" +
                          ("." if nan_rule else ""), nan_rule)
    if mean is not None:
        return _from_mean(x, name, mean, axis, dtype, keepdims, split_every, strategy,
                          lanes, out, skip_nan, finish)
    return _moment_reduction(x, name, axis, dtype, keepdims, split_every, strategy, lanes,
                             out, skip_nan, finish)


# --- argmax and friends -----------------------------------------------------------------
# The graph is built as dask.array's own ``arg_reduction`` builds its (a chunk layer of
# plain tasks, each given its chunk's offsets computed once from ``x.chunks``, then
# Dask's tree of combines): no ``map_blocks`` layers with ``block_info`` dicts, no
# blockwise identity layer, no layers to split pairs after the tree (argmax's
# aggregate returns the indices themselves). Legacy Dask collections only, as the
# rest of this module (``array.query-planning`` unset or False, Dask's default).

_LAST = np.iinfo(np.int64).max  # loses every index tie under tie_break_left


def _runs(chunk: tuple, offsets: tuple, shape: tuple):
    """A chunk's flat index as the array's: ``(sizes, strides, base)`` such that the
    array's flat index is ``base + sum(digit_k * strides[k])``, the digits being the
    chunk's flat index in the mixed radix ``sizes``. Axes the chunk spans whole merge
    with the next (a row chunk of full rows is one run: the index plus its offset);
    axes of extent 1 carry no digit."""
    stride, base, sizes, strides = 1, 0, [], []
    for c, o, s in zip(reversed(chunk), reversed(offsets), reversed(shape)):
        base += o * stride
        if c != 1:
            if sizes and strides[0] * sizes[0] == stride:  # contiguous with the run
                sizes[0] *= c
            else:
                sizes.insert(0, c)
                strides.insert(0, stride)
        stride *= s
    return sizes, strides, base


def _global_flat(i, chunk: tuple, offsets: tuple, shape: tuple):
    """The chunk's flat indices ``i`` (an int64 array) as the array's, in as few array
    operations as the chunk's layout allows (one for a chunk of whole rows)."""
    sizes, strides, base = _runs(chunk, offsets, shape)
    if not sizes:  # a chunk of one element
        return np.full_like(i, base)
    total, rest = None, i
    for k, stride in enumerate(strides):
        inner = math.prod(sizes[k + 1:])
        digit = rest // inner if inner > 1 else rest
        rest = rest % inner if inner > 1 else None
        term = digit * stride if stride != 1 else digit
        total = term if total is None else total + term
    return total + base if base else total


def _arg_chunk(direction, tie_break_left, skip_nan, strategy, lanes, axis, x, where):
    """One chunk's ``(values, global int64 indices)``. ``axis`` None: the whole chunk,
    both of shape (1,), ``where`` the chunk's offsets and the array's shape; else along
    ``axis``, the chunk's shape with 1 there, ``where`` the chunk's offset along it. A
    chunk with no elements offers nothing: partials of size 0 along the reduced axis,
    which the combine's concatenation drops. ``skip_nan`` (nanargmax, nanargmin): a
    NaN counts as -inf (+inf); a slice of nothing but NaN offers NaN at its first
    index (:func:`_nan_pairs`)."""
    if x.size == 0:
        shape = (0,) if axis is None else tuple(
            0 if a == axis else s for a, s in enumerate(x.shape))
        return (np.empty_like(x, shape=shape),
                np.empty_like(x, shape=shape, dtype=_ops.INDEX_DTYPE))
    if skip_nan:
        v, i = _nan_pairs(x, direction, axis, strategy, lanes)
    else:
        fn = _nk().max_with_indices if direction == "max" else _nk().min_with_indices
        v, i = fn(x, axis=axis, keepdims=True, tie_break_left=tie_break_left,
                  strategy=strategy, lanes=lanes)
    if axis is None:
        offsets, shape = where
        return v.reshape(1), _global_flat(i.reshape(1), x.shape, offsets, shape)
    return v, (i + where if where else i)


def _nan_pairs(x, direction: str, axis, strategy, lanes):
    """The NaN-skipping ``(values, indices)`` of one chunk (keepdims): numbakern's
    nanargmax state, whose code flags a slice of nothing but NaN; such a slice's value
    becomes NaN (its index is its first element's)."""
    from numbakern.api.reductions import _arg

    v, code = _arg(x, direction, axis, True, True, (None, None), True, strategy, None,
                   lanes, skip_nan=True)
    if v.dtype.kind != "f":
        return v, code
    all_nan = (code & _ops.ALL_NAN) != 0
    return np.where(all_nan, np.nan, v), code & _ops.INDEX_BITS


def _leaves(nested) -> list:
    if isinstance(nested, list):
        return [leaf for n in nested for leaf in _leaves(n)]
    return [nested]


def _winner(v, i, axis: int, direction: str, tie_break_left: bool, skip_nan: bool):
    """The winning ``(value, index)`` along ``axis`` (kept as 1) of candidates ``v``
    and their indices ``i``: NaN first, then the larger (argmin: smaller) value, then
    the smaller index (``tie_break_left=False``: the larger). Six array operations
    (four for integers): max and min return NaN wherever a NaN is (NumPy's and
    CuPy's, documented), and then the NaNs are the tied candidates. ``skip_nan``: a
    NaN (a chunk's slice of nothing but NaN) counts as -inf (+inf) at its index, and
    the value is NaN only where every candidate is."""
    if skip_nan and v.dtype.kind == "f":
        return _nan_winner(v, i, axis, direction)
    best = v.max(axis=axis, keepdims=True) if direction == "max" else \
        v.min(axis=axis, keepdims=True)
    tied = v == best
    if v.dtype.kind == "f":
        tied = tied | np.isnan(v)
    if tie_break_left:
        return best, np.where(tied, i, _LAST).min(axis=axis, keepdims=True)
    return best, np.where(tied, i, -1).max(axis=axis, keepdims=True)


def _nan_winner(v, i, axis: int, direction: str):
    nan = np.isnan(v)
    seen = np.where(nan, -np.inf if direction == "max" else np.inf, v)
    best = seen.max(axis=axis, keepdims=True) if direction == "max" else \
        seen.min(axis=axis, keepdims=True)
    first = np.where(seen == best, i, _LAST).min(axis=axis, keepdims=True)
    return np.where(nan.all(axis=axis, keepdims=True), np.nan, best), first


def _arg_combine(parts, axis=None, keepdims=False, *, direction, tie_break_left, flat,
                 skip_nan=False, final=False, values=True, empty=False, **_):
    """The winners of the partials ``parts`` (Dask's nested lists of ``(values,
    indices)`` pairs) along the reduced axes. ``final``: the aggregate, which raises
    for an array with nothing along the reduced axes (NumPy's error), shapes the result
    (``keepdims``) and returns the indices only unless ``values``."""
    if final and empty:
        raise ValueError(f"attempt to get arg{direction} of an empty sequence")
    pairs = _leaves(parts)
    ax = 0 if flat else axis[0]
    v, i = pairs[0] if len(pairs) == 1 else (
        np.concatenate([p[0] for p in pairs], axis=ax),
        np.concatenate([p[1] for p in pairs], axis=ax))
    if v.shape[ax] > 1:
        v, i = _winner(v, i, ax, direction, tie_break_left, skip_nan)
    elif v.shape[ax] == 0 and final:  # no rows here (the slices have elements)
        shape = tuple(1 if a == ax else s for a, s in enumerate(v.shape))
        v, i = np.empty_like(v, shape=shape), np.empty_like(i, shape=shape)
    if final:
        if skip_nan and v.dtype.kind == "f" and bool(np.isnan(v).any()):
            raise ValueError("All-NaN slice encountered")
        if flat:
            shape = (1,) * len(axis) if keepdims else ()
        else:
            shape = v.shape if keepdims else v.shape[:ax] + v.shape[ax + 1:]
        v, i = v.reshape(shape), i.reshape(shape)
        return (v, i) if values else _as_numpy_does(i)
    return v, i


def _arg_partials(x, fn, axes: tuple, flat: bool) -> _Blocks:
    """The chunk layer: ``fn(chunk, where)`` for each chunk, ``where`` from the
    cumulative sums of ``x.chunks`` (as Dask's ``arg_reduction``). Named by its
    arguments alone, so that argmax and max_with_indices of one array share it."""
    name = f"arg-chunk-{_token(x.name, fn, axes)}"
    starts = [tuple(itertools.accumulate(c[:-1], initial=0)) for c in x.chunks]
    dsk = {}
    for k in itertools.product(*(range(n) for n in x.numblocks)):
        offsets = tuple(s[b] for s, b in zip(starts, k))
        where = (offsets, x.shape) if flat else offsets[axes[0]]
        dsk[(name, *k)] = (fn, (x.name, *k), where)
    return _Blocks(HighLevelGraph.from_collections(name, dsk, dependencies=[x]), name,
                   x.numblocks)


def _as_numpy_does(value):
    """A 0-d NumPy result as the scalar NumPy's reductions give (and dask.array's
    compute); CuPy's 0-d arrays stay arrays, as CuPy's reductions give them."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _field_of(pair, index: int):
    return _as_numpy_does(pair[index])


def _picked(pairs, index: int, meta):
    """One field of an array whose blocks are pairs: a layer of plain tasks, each
    taking its block's field."""
    name = f"{('values', 'indices')[index]}-{_token(pairs.name, index)}"
    dsk = {(name, *key[1:]): (_field_of, key, index)
           for key in dask_core.flatten(pairs.__dask_keys__())}
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[pairs])
    return da.Array(graph, name, pairs.chunks, meta=meta)


def _arg(x, direction: str, name: str, axis, keepdims, tie_break_left, split_every,
         strategy, lanes, values: bool, skip_nan: bool = False):
    """argmax/argmin (``values`` False: the lazy indices) or max/min_with_indices
    (``(values, indices)``); ``skip_nan``: nanargmax/nanargmin."""
    x = _check_dask(x, name)
    _check_split_every(split_every, name)
    keepdims = check_keepdims(keepdims)
    tie_break_left = check_flag(tie_break_left, "tie_break_left")
    op = _ops.arg_op(direction, tie_break_left)
    op.check_dtype(x.dtype)
    from numbakern.api.reductions import _grid

    _grid(op, strategy)
    if x.ndim == 0:
        x, keepdims = x.reshape(1), False
    axes = tuple(range(x.ndim)) if axis is None else (normalize_axis(axis, x.ndim),)
    flat = len(axes) == x.ndim  # one value a chunk (axis None, or a 1-D array)
    if flat and split_every is None:  # tiny partials: one aggregate over many chunks
        split_every = _FLAT_SPLIT_EVERY
    chunk = functools.partial(_arg_chunk, direction, tie_break_left, skip_nan, strategy,
                              lanes, None if flat else axes[0])
    partials = _arg_partials(x, chunk, axes, flat)
    combine = functools.partial(_arg_combine, direction=direction,
                                tie_break_left=tie_break_left, flat=flat, skip_nan=skip_nan)
    empty = builtins.any(x.shape[a] == 0 for a in axes)
    aggregate = functools.partial(combine, final=True, values=values, empty=empty)
    ndim = len(result_shape(x.shape, axes, keepdims))
    indices_meta = _meta(x, ndim, _ops.INDEX_DTYPE)
    if _one_aggregate(x, axes, split_every):
        result = _aggregated(partials, aggregate, axes, keepdims, name, indices_meta,
                             concatenate=False)
    else:
        chunks = tuple((1,) * len(c) if a in axes else c for a, c in enumerate(x.chunks))
        partials = da.Array(partials.graph, partials.name, chunks,
                            meta=_meta(x, x.ndim, _ops.INDEX_DTYPE))
        result = _tree_reduce(partials, aggregate, axes, keepdims, _ops.INDEX_DTYPE,
                              split_every, combine, name=name, concatenate=False)
    if not values:
        result._meta = indices_meta
        return result
    return _picked(result, 0, _meta(x, ndim, x.dtype)), _picked(result, 1, indices_meta)


def argmax(x, axis=None, out=None, *, keepdims=False, tie_break_left=True,
           split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.argmax` of a Dask array: global int64 indices, NumPy's
    answer across chunk edges (first occurrence; NaN wins)."""
    _refuse_out(out, "argmax")
    return _arg(x, "max", "argmax", axis, keepdims, tie_break_left, split_every, strategy,
                lanes, values=False)


def argmin(x, axis=None, out=None, *, keepdims=False, tie_break_left=True,
           split_every=None, strategy=None, lanes=None, stream=None):
    """Lazy :func:`numbakern.argmin` of a Dask array."""
    _refuse_out(out, "argmin")
    return _arg(x, "min", "argmin", axis, keepdims, tie_break_left, split_every, strategy,
                lanes, values=False)


def nanargmax(x, axis=None, out=None, *, keepdims=False, split_every=None, strategy=None,
              lanes=None, stream=None):
    """Lazy :func:`numbakern.nanargmax` of a Dask array: a NaN counts as -inf at its own
    index, across chunk edges too; a slice of nothing but NaN raises NumPy's
    ``ValueError`` ("All-NaN slice encountered") at compute time."""
    _refuse_out(out, "nanargmax")
    return _arg(x, "max", "nanargmax", axis, keepdims, True, split_every, strategy, lanes,
                values=False, skip_nan=True)


def nanargmin(x, axis=None, out=None, *, keepdims=False, split_every=None, strategy=None,
              lanes=None, stream=None):
    """Lazy :func:`numbakern.nanargmin` of a Dask array (a NaN counts as +inf)."""
    _refuse_out(out, "nanargmin")
    return _arg(x, "min", "nanargmin", axis, keepdims, True, split_every, strategy, lanes,
                values=False, skip_nan=True)


def max_with_indices(x, axis=FLAT, *, dim=None, keepdims=False, keepdim=None,
                     tie_break_left=True, out=None, split_every=None, strategy=None,
                     lanes=None, stream=None):
    """Lazy ``(values, indices)`` of :func:`numbakern.max_with_indices`, its named
    tuple of two Dask arrays from one pass over each chunk (compute them together
    with ``dask.compute(values, indices)`` to read the data once)."""
    _refuse_out(out, "max_with_indices")
    axis = axis_or_dim(axis, dim, "max_with_indices", FLAT)
    keepdims = keepdims_or_keepdim(keepdims, keepdim, "max_with_indices")
    return MaxWithIndices(*_arg(x, "max", "max_with_indices", axis, keepdims, tie_break_left,
                            split_every, strategy, lanes, values=True))


def min_with_indices(x, axis=FLAT, *, dim=None, keepdims=False, keepdim=None,
                     tie_break_left=True, out=None, split_every=None, strategy=None,
                     lanes=None, stream=None):
    """Lazy ``(values, indices)`` of :func:`numbakern.min_with_indices`."""
    _refuse_out(out, "min_with_indices")
    axis = axis_or_dim(axis, dim, "min_with_indices", FLAT)
    keepdims = keepdims_or_keepdim(keepdims, keepdim, "min_with_indices")
    return MinWithIndices(*_arg(x, "min", "min_with_indices", axis, keepdims, tie_break_left,
                            split_every, strategy, lanes, values=True))


# --- scans ---------------------------------------------------------------------------

SCAN_METHODS = ("sequential", "blelloch")


def _scan_chunk(x, *, ref, result, axis, exclusive, strategy, layout):
    return _nk().associative_scan(x, _op(ref), axis=axis, exclusive=exclusive,
                                  dtype=result, strategy=strategy, layout=layout)


def _carried_chunk(x, carry, *, ref, result, axis, exclusive, strategy, layout):
    """The chunk's scan started from ``carry`` (the combine of every element before
    the chunk), read by the kernel on the device: one pass over the chunk."""
    from numbakern.api.scans import scan_with_carry

    return scan_with_carry(x, _op(ref), carry, axis=axis, exclusive=exclusive, dtype=result,
                           strategy=strategy, layout=layout)


def _last(ndim: int, axis: int) -> tuple:
    return tuple(slice(-1, None) if a == axis else slice(None) for a in range(ndim))


def _through_chunk(scanned, x, *, ref, result, axis, exclusive, strategy, layout):
    """The combine of everything up to the chunk's end (kept as length 1 along
    ``axis``), read off its scan, so no second pass over the chunk: an inclusive
    scan's last element (a contiguous copy: the chunk's scan need not outlive it);
    an exclusive scan's, carried into a scan of the chunk's last element (which maps
    the element, not the carry: a NaN total of ``nansum`` stays NaN)."""
    last = _last(x.ndim, axis)
    if not exclusive:
        return scanned[last].copy()
    return _carried_chunk(x[last], scanned[last].copy(), ref=ref, result=result, axis=axis,
                          exclusive=False, strategy=strategy, layout=layout)


def _reduced_chunk(x, *, ref, result, axis):
    """The chunk's total along ``axis`` (kept as length 1): one read of the chunk. A
    float sum folds from -0.0 (float addition's identity), not from NumPy's +0.0 as a
    sum reduction does (``np.add.reduce`` of -0.0s is +0.0), so that a chunk of -0.0s
    carries -0.0, as its scan's last element would."""
    op = _op(ref)
    if result.kind == "f" and (op is _ops.SUM or op is _ops.NANSUM):
        op = _from_negative_zero(op)
    return _nk().reduce(x, op, axis=axis, dtype=result, keepdims=True)


@functools.lru_cache(maxsize=None)
def _from_negative_zero(op: _ops.Op) -> _ops.Op:
    import dataclasses

    return dataclasses.replace(op, identity=-0.0, _device={})


def _total_chunk(scanned, x, *, ref, result, axis, exclusive):
    """The chunk's total along ``axis`` (kept as length 1), read off its scan: the
    scan's last element (an exclusive scan's combined with the chunk's last element,
    mapped as the op maps an element), so no second pass over the chunk. Never asked
    of an empty chunk."""
    last = _last(x.ndim, axis)
    total = scanned[last].copy()  # not a view: the chunk's scan need not outlive it
    if exclusive:
        total = _pair(total, _reduced_chunk(x[last], ref=ref, result=result, axis=axis),
                      ref=ref, result=result)
    return total


# A built-in op's carry is applied by the array library's own ufunc: one elementwise
# pass (NumPy's or CuPy's) where a reduce over the two stacked would copy both and
# reduce a two-row column (bench/NOTES.md: 0.13-0.18x of one cumsum on 16 GiB).
_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
           "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
           "bitwise_xor": np.bitwise_xor}


@functools.lru_cache(maxsize=None)
def _on_states(op: _ops.Op) -> _ops.Op:
    """``op`` without its element map: what combines two states (a ``count_nonzero``
    of counts adds them, where the map would count them as one each)."""
    if op.map is None:
        return op
    import dataclasses

    return dataclasses.replace(op, map=None, _device={})


def _pair(a, b, *, ref, result):
    """``a (+) b`` elementwise, both states (``a`` the earlier, broadcast): a built-in
    op's ufunc, else a reduce over the two stacked by the op without its map (any
    one-field op, in order)."""
    ufunc = _UFUNCS.get(ref) if isinstance(ref, str) else None
    if ufunc is not None:
        return ufunc(a, b, dtype=result)
    both = np.stack([np.broadcast_to(a, b.shape), b])
    return _nk().reduce(both, _on_states(_op(ref)), axis=0, dtype=result)


def _without_empty_chunks(x):
    """``x`` with no zero-size chunk (an empty array: one chunk an axis): Dask's
    reversing slice and ``reshape(-1)`` mishandle them (a reversed ``(1, 0, 1)`` axis
    comes out empty; a flattening fails at compute, or is refused)."""
    if x.size == 0:
        chunks = tuple((n,) for n in x.shape)
    else:
        chunks = tuple(tuple(c for c in cs if c) for cs in x.chunks)
    return x if chunks == x.chunks else x.rechunk(chunks)


def _check_index_in_one_chunk(x, op: _ops.Op, axes, name: str, what: str = "reduced",
                              reverse: bool = False) -> None:
    """``TypeError`` where a user's map reads its element's index (``op.reads_index``)
    and ``axes`` (the ``what`` ones) span several chunks: a chunk's kernel counts from
    the chunk's own start, not the array's; or the scan is ``reverse``: its chunks are
    scanned flipped, so each would count from its end."""
    if not op.reads_index:
        return
    if reverse:
        raise TypeError(f"numbakern.{name}: {op.name}'s map reads its element's index, "
                        "which a reverse scan of a Dask array's flipped chunks would "
                        "count from the end: scan it forward, or give the op a map that "
                        "ignores the index")
    if builtins.any(x.numblocks[a] > 1 for a in axes):
        whole = ", ".join(f"{a}: -1" for a in axes)
        raise TypeError(f"numbakern.{name}: {op.name}'s map reads its element's index, "
                        f"which a chunk counts from its own start: rechunk the {what} "
                        f"axes into one chunk (x.rechunk({{{whole}}})) or give the op a map "
                        "that ignores the index")


def _scan(x, op: _ops.Op, name: str, axis, dtype, exclusive, reverse, method, strategy,
          layout, rule):
    x = _check_dask(x, name)
    if op.fields != 1:
        raise TypeError(f"numbakern.{name}: Dask arrays are scanned with one-field ops; "
                        f"{op.name} has {op.fields} fields")
    op.check_dtype(x.dtype, caller=name)
    exclusive, reverse = check_flag(exclusive, "exclusive"), check_flag(reverse, "reverse")
    if method not in SCAN_METHODS:
        raise ValueError(f"numbakern.{name}: method must be one of {SCAN_METHODS}, got "
                         f"{method!r}")
    if dtype is not None:
        op.check_dtype(_ops._as_dtype(dtype), "dtype=", name)
    result = np.dtype((rule or op.result_dtype)(np.dtype(x.dtype), dtype))
    _strategies.resolve("scan", strategy)
    from numbakern.api.scans import takes_carry
    from numbakern.kernels.scan_rows import check_layout

    check_layout(layout)
    x = _without_empty_chunks(x)
    axis = flat_axis_of_0d(axis, x.ndim)
    if axis is not None:
        axis = normalize_axis(axis, x.ndim)
    _check_index_in_one_chunk(x, op, range(x.ndim) if axis is None else (axis,), name,
                              "scanned", reverse)
    if axis is None:  # the flattened array, in C order, as NumPy
        x, axis = x.reshape(-1), 0
    flip = tuple(slice(None, None, -1) if a == axis else slice(None) for a in range(x.ndim))
    if reverse:
        x = x[flip]
    ref = _op_ref(op)
    options = dict(ref=ref, result=result, axis=axis)
    kernel = dict(options, exclusive=exclusive, strategy=strategy, layout=layout)
    scan = functools.partial(_scan_chunk, **kernel)
    meta = _meta(x, x.ndim, result)
    if takes_carry(op, result, strategy, layout):
        # the carry enters each chunk's scan kernel: one read and one write an element
        through = (functools.partial(_through_chunk, **kernel) if method == "sequential"
                   else functools.partial(_reduced_chunk, **options))
        local = _carried_graph(x, axis, scan, functools.partial(_carried_chunk, **kernel),
                               through, functools.partial(_pair, ref=ref, result=result),
                               method, name, meta)
    else:
        # float products (their special values are settled in a second scan) and
        # strategies that read no carry: each chunk's scan, then its carry's own pass
        total = functools.partial(_total_chunk, **options, exclusive=exclusive)
        local = _scan_graph(x, axis, scan, total, functools.partial(_pair, ref=ref,
                                                                    result=result),
                            method, name, meta)
    return local[flip] if reverse else local


def _rows_along(x, axis: int):
    """Each row of blocks along ``axis``: ``at(k)``, block ``k``'s index in it."""
    others = (range(n) if a != axis else (0,) for a, n in enumerate(x.numblocks))
    for row in itertools.product(*others):
        yield lambda k, row=row: tuple(k if a == axis else i for a, i in enumerate(row))


def _carried_graph(x, axis: int, scan, scan_from, through, pair, method: str, name: str,
                   meta):
    """``x`` scanned along ``axis`` as one layer of plain tasks, each block scanned
    once, from its carry (``scan_from(block, carry)``); the first block with elements
    by ``scan``. ``"sequential"``: a chain, block ``k``'s carry read off the scan of
    the block with elements before it (``through(scanned, block)``: its last
    element, a slice), so the blocks are scanned one after another, each one read
    and written once. ``"blelloch"``: each block's total (``through(block)``, a
    reduction: one more read), inclusive prefixes of the totals by a tree of
    ``pair``, then every block's scan at once. Empty blocks carry nothing (an
    identity would turn a carried -0.0 into +0.0). Each row of blocks along the other
    axes is its own chain or tree."""
    token = tokenize(x.name, scan, scan_from, through, pair, method)
    out, totals, carries = (f"{name}-{token}", f"{name}-total-{token}",
                            f"{name}-carry-{token}")
    dsk: dict = {}
    combine = _combiner(dsk, carries, pair)
    sizes = x.chunks[axis]
    for at in _rows_along(x, axis):
        full = [k for k, size in enumerate(sizes) if size]
        later = set(full[1:])
        for k in range(len(sizes)):
            if k not in later:
                dsk[(out, *at(k))] = (scan, (x.name, *at(k)))
        if method == "sequential":
            for p, k in zip(full, full[1:]):
                dsk[(totals, *at(p))] = (through, (out, *at(p)), (x.name, *at(p)))
                dsk[(out, *at(k))] = (scan_from, (x.name, *at(k)), (totals, *at(p)))
            continue
        t = []
        for p in full[:-1]:  # the last block's total carries into no block
            dsk[(totals, *at(p))] = (through, (x.name, *at(p)))
            t.append((totals, *at(p)))
        inclusive = _tree(t, combine) if t else []
        for j, k in enumerate(full[1:]):
            dsk[(out, *at(k))] = (scan_from, (x.name, *at(k)), inclusive[j])
    graph = HighLevelGraph.from_collections(out, dsk, dependencies=[x])
    return da.Array(graph, out, x.chunks, meta=meta)


def _combiner(dsk: dict, name: str, pair):
    """``combine(a, b)``: adds the task ``pair(a, b)`` to ``dsk`` under a new key
    ``(name, i)`` and returns that key (the carries of a chain or a tree)."""
    made = itertools.count()

    def combine(a, b):
        key = (name, next(made))
        dsk[key] = (pair, a, b)
        return key

    return combine


def _scan_graph(x, axis: int, scan, total, pair, method: str, name: str, meta):
    """``x`` scanned along ``axis`` as one layer of plain tasks: each block scanned
    (``scan``); along ``axis``, the blocks' totals (``total(scanned, block)``, read
    off each scan) made inclusive carries by a chain or a tree (``pair(earlier,
    later)``), and block ``k``'s carry ``k - 1`` combined into its scan (``pair``): a
    second pass over the block, for what :func:`_carried_graph` cannot take.
    Each row of blocks along the other axes is its own chain."""
    token = tokenize(x.name, scan, total, pair, method)
    out, totals, carries, locals_ = (f"{name}-{token}", f"{name}-total-{token}",
                                     f"{name}-carry-{token}", f"{name}-local-{token}")
    dsk: dict = {}
    combine = _combiner(dsk, carries, pair)
    sizes = x.chunks[axis]
    for at in _rows_along(x, axis):
        t, later = [], []  # the totals; the blocks after one with elements
        for k, size in enumerate(sizes):
            scanned = (locals_ if t else out, *at(k))  # no carry yet: the scan is it
            dsk[scanned] = (scan, (x.name, *at(k)))
            if t:
                later.append((k, len(t)))
            # an empty block carries nothing (its identity would turn a carried -0.0
            # into +0.0), and the last block's total carries into no block
            if size and k < len(sizes) - 1:
                dsk[(totals, *at(k))] = (total, scanned, (x.name, *at(k)))
                t.append((totals, *at(k)))
        if not later:
            continue
        inclusive = _chain(t, combine) if method == "sequential" else _tree(t, combine)
        for k, carried in later:
            dsk[(out, *at(k))] = (pair, inclusive[carried - 1], (locals_, *at(k)))
    graph = HighLevelGraph.from_collections(out, dsk, dependencies=[x])
    return da.Array(graph, out, x.chunks, meta=meta)


def _chain(t: list, combine) -> list:
    """Inclusive prefixes of ``t``, one after another."""
    out = [t[0]]
    for item in t[1:]:
        out.append(combine(out[-1], item))
    return out


def _tree(t: list, combine) -> list:
    """Inclusive prefixes of ``t`` by a tree (Blelloch's up and down sweeps): depth
    ``2 log2(len(t))``, ``2 len(t)`` combines."""
    if len(t) == 1:
        return list(t)
    pairs = [combine(t[2 * j], t[2 * j + 1]) for j in range(len(t) // 2)]
    odd = _tree(pairs, combine)  # odd[j]: t[0] .. t[2j + 1]
    out = []
    for k in range(len(t)):
        if k == 0:
            out.append(t[0])
        elif k % 2 == 1:
            out.append(odd[k // 2])
        else:
            out.append(combine(odd[k // 2 - 1], t[k]))
    return out


def _numpy_scan(x, op: _ops.Op, name: str, rule, axis, dtype, out, exclusive, reverse,
                method, strategy, layout):
    """A scan NumPy names (cumsum and its kin): ``out=`` refused, the result dtype
    NumPy's (``rule``)."""
    _refuse_out(out, name)
    return _scan(x, op, name, axis, dtype, exclusive, reverse, method, strategy, layout, rule)


def cumsum(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
           method="sequential", strategy=None, layout="auto", stream=None):
    """Lazy :func:`numbakern.cumsum` of a Dask array. ``method``: how the chunks'
    carries are made, ``"sequential"`` (a chain, as Dask's default: each chunk's scan
    starts from the previous one's last element, one read and one write an element)
    or ``"blelloch"`` (each chunk reduced, a tree over the totals, then the chunks
    scanned side by side: one more read); both keep ``dtype`` and the input's
    ``_meta`` kind.

    Raises: as :func:`numbakern.cumsum`; ``ValueError`` for another ``method``,
    ``TypeError`` for ``out=``.
    """
    return _numpy_scan(x, _ops.SUM, "cumsum", cumsum_dtype, axis, dtype, out, exclusive,
                       reverse, method, strategy, layout)


def cumprod(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
            method="sequential", strategy=None, layout="auto", stream=None):
    """Lazy :func:`numbakern.cumprod` of a Dask array (``method`` as :func:`cumsum`)."""
    return _numpy_scan(x, _ops.PROD, "cumprod", cumprod_dtype, axis, dtype, out, exclusive,
                       reverse, method, strategy, layout)


def nancumsum(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
              method="sequential", strategy=None, layout="auto", stream=None):
    """Lazy :func:`numbakern.nancumsum` of a Dask array (``method`` as :func:`cumsum`:
    a NaN enters every chunk's scan and total as 0)."""
    return _numpy_scan(x, _ops.NANSUM, "nancumsum", cumsum_dtype, axis, dtype, out,
                       exclusive, reverse, method, strategy, layout)


def nancumprod(x, axis=None, dtype=None, out=None, *, exclusive=False, reverse=False,
               method="sequential", strategy=None, layout="auto", stream=None):
    """Lazy :func:`numbakern.nancumprod` of a Dask array (``method`` as :func:`cumsum`:
    a NaN enters every chunk's scan and total as 1)."""
    return _numpy_scan(x, _ops.NANPROD, "nancumprod", cumprod_dtype, axis, dtype, out,
                       exclusive, reverse, method, strategy, layout)


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False,
                   method="sequential", strategy=None, layout="auto", stream=None):
    """Lazy :func:`numbakern.cumulative_sum` of a Dask array (NumPy 2's
    ``np.cumulative_sum``, which ``dask.array`` lacks): :func:`cumsum`, ``axis``
    required for more than one dimension; ``include_initial`` puts a block of 0
    first along ``axis``."""
    return _cumulative(x, "cumulative_sum", cumsum, 0, axis, dtype, out, include_initial,
                       method, strategy, layout)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False,
                    method="sequential", strategy=None, layout="auto", stream=None):
    """Lazy :func:`numbakern.cumulative_prod` of a Dask array (``include_initial``:
    a block of 1 first); as :func:`cumulative_sum`."""
    return _cumulative(x, "cumulative_prod", cumprod, 1, axis, dtype, out, include_initial,
                       method, strategy, layout)


def _cumulative(x, name: str, scan, empty, axis, dtype, out, include_initial, method,
                strategy, layout):
    x = _check_dask(x, name)
    _refuse_out(out, name)
    include_initial = check_flag(include_initial, "include_initial")
    x, axis = cumulative_axis(x, axis, name)
    axis = normalize_axis(axis, x.ndim)
    scanned = scan(x, axis=axis, dtype=dtype, method=method, strategy=strategy,
                   layout=layout)
    if not include_initial:
        return scanned
    chunks = tuple((1,) if a == axis else c for a, c in enumerate(scanned.chunks))
    first = da.full_like(scanned, empty, shape=tuple(map(builtins.sum, chunks)),
                         chunks=chunks)
    return da.concatenate([first, scanned], axis=axis)


def associative_scan(x, op, axis=None, *, reverse=False, exclusive=False, dtype=None,
                     out=None, method="sequential", strategy=None, layout="auto",
                     stream=None):
    """Lazy :func:`numbakern.associative_scan` of a Dask array with a one-field op (a
    non-commutative one keeps its order: a chunk's carry is always the left operand).

    Raises: as :func:`numbakern.associative_scan`; ``TypeError`` for a two-field op
    (``"argmax"``/``"argmin"``) or ``out=``; ``ValueError`` for another ``method``.
    """
    _refuse_out(out, "associative_scan")
    if isinstance(op, str) and op in ("argmax", "argmin"):
        op = _ops.arg_op(op[3:])
    return _scan(x, _ops.get(op), "associative_scan", axis, dtype, exclusive, reverse, method,
                 strategy, layout, None)


# --- softmax -------------------------------------------------------------------------

_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _softmax_chunk(x, *, kind, axis, options):
    fn = _nk().softmax if kind == "softmax" else _nk().log_softmax
    return fn(x, axis=axis, **options)


def _state_chunk(x, *, axis, acc):
    """One chunk's online softmax state per row: ``{"m": max, "s": sum exp(x - m)}``
    (``strategies/online_softmax.py``); a row of nothing but -inf is ``(-inf, n)``,
    an empty chunk ``(-inf, 0)``."""
    (a,) = axis
    shape = tuple(1 if d == a else n for d, n in enumerate(x.shape))
    if x.shape[a] == 0:
        return {"m": np.full_like(x, -np.inf, shape=shape, dtype=acc),
                "s": np.zeros_like(x, shape=shape, dtype=acc)}
    with np.errstate(invalid="ignore"):
        m = _nk().max(x, axis=a, keepdims=True).astype(acc)
        shifted = np.where(m == -np.inf, np.zeros_like(m), x.astype(acc) - m)
        s = _nk().sum(np.exp(shifted), axis=a, keepdims=True, dtype=acc)
    return {"m": m, "s": s}


def _state_combine(states, axis=None, keepdims=True, **_):
    """The states along ``axis`` combined: the largest maximum (NaN propagating), each
    sum rescaled to it (both maxima -inf: the sums add)."""
    m = _concat(_deep(states, "m"), list(axis))
    s = _concat(_deep(states, "s"), list(axis))
    top = m.max(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        scale = np.where(top == -np.inf, np.ones_like(m), np.exp(m - top))
    return {"m": top, "s": (s * scale).sum(axis=axis, keepdims=True)}


def _check_float(x, cast_hint: bool = True) -> None:
    """A float ``x``; the message names ``dtype=``'s cast where it would help."""
    if np.dtype(x.dtype) not in _FLOATS:
        hint = " (an integer or bool one with a float dtype=)" if cast_hint else ""
        raise TypeError(f"x must be float16, bfloat16, float32 or float64{hint}, got "
                        f"dtype {x.dtype}")


def _softmax(x, kind: str, axis, options: dict):
    x = _check_dask(x, kind)
    _refuse_out(options.pop("out"), kind)
    _check_float(x)
    from numbakern.api.softmax import _axis, _plan

    axis = _axis(axis, x.ndim)  # a 0-d x: a row of its one element, in its one chunk
    # the keywords checked now, as the row kernels would (no kernel runs here)
    _plan(kind, builtins.max((x.shape or (1,))[axis], 1), x.dtype, options["normalizer"],
          options["layout"], options["fused"], options["threads"], options["max_strategy"],
          options["sum_strategy"])
    meta = _meta(x, x.ndim, x.dtype)
    if x.ndim == 0 or x.numblocks[axis] == 1:  # each row in one chunk: the row kernels
        return _each_block(x, functools.partial(_softmax_chunk, kind=kind, axis=axis,
                                                options=options), kind, meta)
    acc = _ops.accumulator_dtype(x.dtype)
    chunks = tuple((1,) * x.numblocks[a] if a == axis else c for a, c in enumerate(x.chunks))
    states = x.map_blocks(functools.partial(_state_chunk, axis=(axis,), acc=acc),
                          chunks=chunks, dtype=acc, meta=_meta(x, x.ndim, acc))
    state = da.reduction(states, _identity_chunk, _state_combine, combine=_state_combine,
                         axis=(axis,), keepdims=True, dtype=acc, concatenate=False,
                         meta=_meta(x, x.ndim, acc))
    m = state.map_blocks(functools.partial(_field, "m"), dtype=acc,
                         meta=_meta(x, x.ndim, acc))
    s = state.map_blocks(functools.partial(_field, "s"), dtype=acc,
                         meta=_meta(x, x.ndim, acc))
    return da.map_blocks(functools.partial(_normalise, kind=kind, acc=acc), x, m, s,
                         dtype=x.dtype, meta=meta)


def _each_block(x, fn, name: str, meta):
    """``fn(block)`` for each block of ``x``, a block of the same shape: one layer of
    plain tasks, ``map_blocks``'s graph without its blockwise layer (whose
    tokenising of ``fn`` and of its arguments cost more than a whole-array call on
    16 GiB takes to run 20% of: bench/NOTES.md)."""
    layer = f"{name}-{_token(x.name, fn)}"
    dsk = {(layer, *k): (fn, (x.name, *k))
           for k in itertools.product(*(range(n) for n in x.numblocks))}
    graph = HighLevelGraph.from_collections(layer, dsk, dependencies=[x])
    return da.Array(graph, layer, x.chunks, meta=meta)


def _normalise(x, m, s, *, kind, acc):
    """One chunk of the result from its rows' ``(max, sum)``; rows of NaN, +inf or
    nothing but -inf come out NaN."""
    with np.errstate(invalid="ignore"):
        shifted = x.astype(acc) - m
        out = np.exp(shifted) / s if kind == "softmax" else shifted - np.log(s)
    return out.astype(x.dtype)


def _refuse_where(where, name: str) -> None:
    """``NotImplementedError`` for NumPy's ``where=`` mask (a mask chunked as the input
    is not built for Dask arrays); the default ``True`` passes."""
    if where is not True:
        raise NotImplementedError(f"numbakern.{name} of a Dask array does not take "
                                  "where=; pass NumPy, CuPy or torch input for a masked "
                                  "reduction, or apply the mask with dask.array.where")


def _refuse_keeping(kind: str, mask, causal, scale) -> None:
    """``NotImplementedError`` naming the first of ``mask=``, ``causal=``, ``scale=``
    given (their kernels run on whole rows of one chunk, with a mask chunked alike:
    not built for Dask arrays)."""
    given = [name for name, v in (("mask", mask), ("causal", causal), ("scale", scale))
             if v is not None and v is not False]
    if given:
        raise NotImplementedError(f"numbakern.{kind} of a Dask array does not take "
                                  f"{given[0]}=; pass NumPy, CuPy or torch input for "
                                  f"masked, causal or scaled rows")


def _as_dtype(x, dtype):
    """``x`` cast lazily to ``dtype=`` (checked as :func:`numbakern.softmax` checks it),
    as ``torch.softmax(x, dtype=)`` casts before computing; ``x`` itself for None. A
    float, integer or bool ``x``, as the NumPy form takes with ``dtype=``."""
    if dtype is None:
        return x
    from numbakern.api.softmax import _result_dtype

    x = _check_dask(x, "softmax")
    if np.dtype(x.dtype).kind not in "biu":
        _check_float(x, cast_hint=False)
    return x.astype(_result_dtype(dtype))


def softmax(x, axis=LAST, *, dim=None, mask=None, causal=False, scale=None, max_strategy=None,
            sum_strategy=None, normalizer="auto", layout="auto", fused=None, threads=None,
            out=None, stream=None, dtype=None):
    """Lazy :func:`numbakern.softmax` of a Dask array along ``axis``.

    Rows held in one chunk (``axis`` not chunked): numbakern's row kernel per chunk,
    with every keyword as :func:`numbakern.softmax`. Rows split across chunks: each
    chunk's online ``(max, sum)`` state per row (numbakern's ``max`` and ``sum``;
    the keywords are checked, at this call, but choose no kernel), the states
    combined across chunks, then
    ``exp(x - max) / sum`` as a Dask elementwise map (computed in float32 for
    float16). Rows holding NaN or +inf, and rows of nothing but -inf, are NaN.

    ``dtype=``: each chunk cast to it first (as ``torch.softmax``: integers and bools
    too), then as above.

    Raises: as :func:`numbakern.softmax`; ``TypeError`` for ``out=``;
    ``NotImplementedError`` for ``mask=``, ``causal=`` or ``scale=`` (not taken for
    Dask arrays: compute the masked rows with NumPy, CuPy or torch input).
    """
    _refuse_keeping("softmax", mask, causal, scale)
    return _softmax(_as_dtype(x, dtype), "softmax", axis_or_dim(axis, dim, "softmax"), dict(
        max_strategy=max_strategy, sum_strategy=sum_strategy, normalizer=normalizer,
        layout=layout, fused=fused, threads=threads, out=out))


def log_softmax(x, axis=LAST, *, dim=None, mask=None, causal=False, scale=None, max_strategy=None,
                sum_strategy=None, normalizer="auto", layout="auto", fused=None,
                threads=None, out=None, stream=None, dtype=None):
    """Lazy :func:`numbakern.log_softmax` of a Dask array: as :func:`softmax`, the map
    ``(x - max) - log(sum)``."""
    _refuse_keeping("log_softmax", mask, causal, scale)
    axis = axis_or_dim(axis, dim, "log_softmax")
    return _softmax(_as_dtype(x, dtype), "log_softmax", axis, dict(
        max_strategy=max_strategy, sum_strategy=sum_strategy, normalizer=normalizer,
        layout=layout, fused=fused, threads=threads, out=out))


# --- histogram and bincount ------------------------------------------------------------


def _counts_chunk(x, *, bins, range_, strategy):
    if range_ is None and np.ndim(bins) == 0:  # bincount's
        return _nk().histogram_counts(x.reshape(-1), bins, strategy=strategy)
    return _nk().histogram(x.reshape(-1), bins, range=range_, strategy=strategy)[0]


def _summed_counts(x, bins, range_, strategy):
    """Each chunk's int64 counts, summed by numbakern's sum: a Dask array of ``bins``
    bins (an int: equal-width ones over ``range_``, or bincount's where ``range_`` is
    None; or an array of edges)."""
    count = functools.partial(_counts_chunk, bins=bins, range_=range_, strategy=strategy)
    return _summed_parts(count, _bin_count(bins), np.int64, x)


def _bin_count(bins) -> int:
    """How many bins ``bins`` makes: an int, or an array of edges."""
    return int(bins) if np.ndim(bins) == 0 else int(np.maximum(0, bins.shape[0] - 1))


def _summed_parts(chunk, bins: int, dtype, x, *others):
    """``chunk(block, *other_blocks)`` of each chunk of ``x`` and the same chunk of
    each of ``others`` (Dask arrays in ``x``'s chunks), each ``(bins,)`` of ``dtype``,
    summed by numbakern's sum."""
    import dask

    meta = _meta(x, 1, dtype)
    blocks = zip(*(a.to_delayed().reshape(-1) for a in (x, *others)))
    parts = [da.from_delayed(dask.delayed(chunk)(*arrays), shape=(bins,), dtype=dtype,
                             meta=meta)
             for arrays in blocks]
    return sum(da.stack(parts), axis=0)


def histogram(x, bins=10, range=None, density=None, weights=None, *,  # noqa: A002
              strategy=None, stream=None):
    """Lazy :func:`numbakern.histogram` of a Dask array: ``(hist, edges)``, ``hist`` a
    Dask array of ``(bins,)``: each chunk's int64 counts, summed; with ``weights`` (a
    NumPy or Dask array of ``x``'s shape, taken in ``x``'s chunks) each chunk's sums
    (float64, or int64/uint64 for integer weights, as the NumPy form's), summed, then
    cast to the weights' dtype (NumPy casts each 65536 elements' sums and adds them in
    that dtype: float16 weights may differ);
    ``density`` divides lazily as NumPy's. ``edges``: the ``bins + 1`` edges NumPy
    computes, or the edges given as ``bins`` (an array of the chunks' kind).

    With an int ``bins`` and no ``range`` the edges need ``x``'s minimum and maximum:
    they are computed now (as NumPy must), by numbakern's min and max over the
    chunks; pass ``range`` (or the edges) to keep everything lazy.

    Raises: as :func:`numbakern.histogram` (an automatic range that is not finite:
    ``ValueError``, raised by this call).
    """
    import dask

    from numbakern.api.histogram import check_not_ragged

    x = _check_dask(x, "histogram")
    check_not_ragged(bins)
    order = _sums_dtype(weights, x, bins)
    w = None if weights is None else _weights_like(weights, x, "histogram")
    if np.ndim(bins) != 0:  # edges: range= ignored, as NumPy ignores it
        from numbakern.api.histogram import given_edges

        bins, range = given_edges(bins, w, stream), None
    elif range is None and x.size:
        from numbakern.api.histogram import finite_range, values_dtype

        value_dtype = values_dtype(x.dtype)
        y = _widened(x)  # bfloat16's extremes found in float32, which holds them exactly
        range = finite_range(*(value_dtype.type(v.item())
                               for v in dask.compute(min(y), max(y))))
    empty = x._meta.reshape(-1)[:0]
    _, edges = _nk().histogram(empty, bins, range=range, strategy=strategy)
    range_ = None if np.ndim(bins) != 0 else range if range is not None else (0, 1)
    bins = bins if np.ndim(bins) != 0 else int(bins)
    if w is None:
        hist = _summed_counts(x, bins, range_, strategy)
    else:  # each chunk's sums a bin (weights_accumulator's dtype), summed, then cast
        from numbakern.api.histogram import weighted_bins, weights_accumulator

        chunk = functools.partial(weighted_bins, bins=bins, range_=range_,
                                  strategy=strategy)
        hist = _summed_parts(chunk, _bin_count(bins), weights_accumulator(w.dtype), x,
                             _widened(w)).astype(order or w.dtype)
    if density:
        widths = da.from_array(np.diff(edges).astype(float), chunks=-1)
        hist = hist / widths / hist.sum()
    return hist, edges


def bincount(x, weights=None, minlength=0, *, strategy=None, stream=None):
    """Lazy :func:`numbakern.bincount` of a 1-D Dask array of non-negative ints: each
    chunk's counts (or float64 sums of its ``weights``: a NumPy or Dask array of
    ``x``'s shape, taken in ``x``'s chunks), summed. The result's length needs ``x``'s
    maximum, computed now (with its minimum, to refuse negatives) by numbakern over
    the chunks.

    Raises: as :func:`numbakern.bincount` (a negative value: ``ValueError``, raised by
    this call).
    """
    import dask

    x = _check_dask(x, "bincount")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {tuple(x.shape)}")
    from numbakern.api.histogram import bincount_length

    w = None if weights is None else _weights_like(weights, x, "bincount")
    _nk().bincount(x._meta.reshape(-1)[:0], None, minlength, strategy=strategy)
    bins = int(minlength)
    if x.size:
        lo, hi = dask.compute(min(x), max(x))
        lo, hi = lo.item(), hi.item()  # NumPy scalars or CuPy 0-d arrays
        if np.dtype(x.dtype).kind == "i" and lo < 0:
            raise ValueError("'x' argument must have no negative elements")
        bins = bincount_length(int(hi), bins)
    if bins == 0 or not x.size:  # int64 zeros, weights or not, as NumPy's
        return da.zeros(bins, dtype=np.int64, chunks=builtins.max(bins, 1),
                        meta=_meta(x, 1, np.int64))
    if w is not None:  # each chunk's float64 sums a bin, summed
        chunk = functools.partial(_weighted_chunk, bins=bins, strategy=strategy)
        return _summed_parts(chunk, bins, np.float64, x, _widened(w))
    return _summed_counts(x, bins, None, strategy)


def _sums_dtype(weights, x, bins):
    """The weights' own dtype where NumPy keeps it, a big-endian one's byte order too:
    equal bins (an int ``bins``) of NumPy chunks; else None (the native dtype)."""
    dtype = getattr(weights, "dtype", None)
    if not isinstance(dtype, np.dtype) or dtype.isnative or np.ndim(bins) != 0:
        return None
    return dtype if isinstance(x._meta, np.ndarray) else None


def _weights_like(weights, x, name: str):
    """``weights`` (a NumPy or Dask array) checked as :func:`numbakern.bincount` and
    :func:`numbakern.histogram` (``name``) check them, as a Dask array in ``x``'s
    chunks."""
    from numbakern.api.histogram import _weights_of

    if not isinstance(weights, da.Array):  # checked first: Dask holds no object dtype
        weights = _like_chunks(x, weights)
        _weights_of(_shaped_like(weights), _shaped_like(x), name)
        weights = da.from_array(weights)
    w = _check_dask(weights, name, "weights")
    _weights_of(_shaped_like(w), _shaped_like(x), name)
    return w.rechunk(x.chunks)


def _widened(a):
    """A Dask array as the chunk kernels read it: bfloat16 (``ml_dtypes``) widened to
    float32 (exact), as the NumPy forms' float32 copy; any other dtype as it is. (A
    weighted histogram's sums still take the weights' own dtype.)"""
    return a.astype(np.float32) if np.dtype(a.dtype).name == "bfloat16" else a


def _shaped_like(a):
    """A zero-memory NumPy stand-in of ``a``'s shape and dtype (bfloat16's float32, as
    the kernels read it), for eager checks."""
    dtype = np.dtype(a.dtype)
    return np.broadcast_to(np.zeros((), np.float32 if dtype.name == "bfloat16" else dtype),
                           a.shape)


def _weighted_chunk(x, w, *, bins, strategy):
    if not x.size:
        return np.zeros_like(w, shape=(bins,), dtype=np.float64)
    return _nk().bincount(x, w, bins, strategy=strategy)



# --- the lazy results' graph optimiser ----------------------------------------------------
#
# dask.array's optimiser ends with a linear fusion that turns each chain of tasks into
# one task running a subgraph, ordered again when it runs, and culls layer by layer.
# On a graph of a few large GPU chunks that costs more host time than it saves
# (bench/NOTES.md, "Dask's optimiser on numbakern's graphs"), so numbakern's results
# carry their own: dask.array's blockwise and root fusion where there are blockwise
# layers to fuse, then a cull of the plain task dictionary (a slice of a large input
# still computes only the chunks it needs), and the linear fusion only where the
# user's config asks for it.


def optimize(dsk, keys, **_):
    """Optimise the graph of a numbakern lazy result for computing ``keys``: as
    ``dask.array.optimize`` less its linear fusion, which runs only when Dask's config
    sets ``optimization.fuse.active`` to ``True``. Dask calls it (a result's
    ``__dask_optimize__``) once a compute, on the graph of every numbakern result in
    the call; returns the culled task dictionary."""
    if dask_config.get("optimization.fuse.active", None) is True:
        return da.optimization.optimize(dsk, keys)
    keys = list(flatten(keys)) if isinstance(keys, (list, set)) else [keys]
    if isinstance(dsk, HighLevelGraph) and \
            builtins.sum(isinstance(v, Blockwise) for v in dsk.layers.values()) > 1:
        dsk = fuse_roots(optimize_blockwise(dsk, keys=keys), keys=keys)
    return cull(ensure_dict(dsk), keys)[0]


def optimized(result):
    """``result`` (a Dask array, or a tuple of them) with :func:`optimize` as its
    graph optimiser; what every function here returns to the caller."""
    if isinstance(result, tuple):
        return retupled(result, [optimized(r) for r in result])
    if isinstance(result, da.Array):
        result.__dask_optimize__ = optimize
    return result


__all__ = ["all", "any", "argmax", "average", "argmin", "associative_scan", "bincount",
           "bitwise_and_sum", "bitwise_or_sum", "count_nonzero", "cumprod", "cumsum",
           "cumulative_prod", "cumulative_sum",
           "histogram", "log_softmax", "logsumexp", "max", "max_with_indices", "mean", "min",
           "min_with_indices", "nanargmax", "nanargmin", "nancumprod", "nancumsum", "nanmax",
           "nanmean", "nanmin", "nanprod", "nanstd", "nansum", "nanvar", "prod", "ptp",
           "reduce", "softmax", "std", "sum", "var", "vector_norm", "xor_sum"]
