"""Small element-wise kernels: fill a device array, cast one into another, divide.

Reductions need them around the real work: atomic folds start from the op's identity
in every output slot (``fill``), and results in the accumulator dtype become the
result dtype on the device when no array library is there to do it (``cast_into``).
Both are grid-strided one-element-per-thread loops.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda, float64, from_dtype, int64

from numbakern.kernels.bfloat16 import widen
from numbakern.ops.norms import root_of
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import SIMULATOR, ceil_div
from numbakern.runtime.launch import launch
from numbakern.runtime.views import c_contiguous, device_view, flat, lowest_span, reinterpreted

THREADS = 64 if SIMULATOR else 256
_WORD = np.dtype(np.uint64)
# The simulator runs every thread as an OS thread: two blocks exercise the grid stride.
MAX_BLOCKS = 2 if SIMULATOR else 4096


def grid_for(n: int) -> int:
    """Blocks for an element-wise launch over ``n`` elements."""
    return max(1, min(ceil_div(int(n), THREADS), MAX_BLOCKS))


@cuda.jit
def _fill(a, m, first, rest):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < a.shape[0]:
        a[i] = first if i < m else rest
        i += step


@cuda.jit
def _put(words, n, w0, w1, w2, w3, w4, w5, w6, w7):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < words.shape[0]:
        words[i] = (w0, w1, w2, w3, w4, w5, w6, w7)[i % n]
        i += step


@cuda.jit
def _cast(src, dst):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < src.shape[0]:
        dst[i] = src[i]
        i += step


@cuda.jit
def _cast_strided(src, dst, first, shape, steps):
    # dst: the view's memory from its lowest element; element i of src (C order over
    # shape) goes to first + sum(idx[d] * steps[d]), steps in elements, of any sign.
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < src.shape[0]:
        rest, at = i, first
        for d in range(len(shape) - 1, -1, -1):
            at += rest % shape[d] * steps[d]
            rest //= shape[d]
        dst[at] = src[i]
        i += step


@cuda.jit
def _divide(src, dst, count):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < src.shape[0]:
        dst[i] = float64(src[i]) / count  # the store casts, as NumPy's unsafe cast
        i += step


@cuda.jit
def _log_sum_exp(m, s, dst):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < m.shape[0]:
        # +inf dominates (its sum is inf - inf, NaN); a NaN maximum stays NaN
        dst[i] = m[i] if m[i] == math.inf else m[i] + math.log(s[i])
        i += step


@cuda.jit
def _root(src, dst, exponent):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < src.shape[0]:
        dst[i] = root_of(float64(src[i]), exponent)
        i += step


@cuda.jit
def _nan_where(values, marks, marker):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < values.shape[0]:
        if marks[i] & marker:
            values[i] = math.nan
        i += step


@cuda.jit
def _divide_by(src, counts, dst):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < src.shape[0]:
        dst[i] = float64(src[i]) / float64(counts[i]) if counts[i] else math.nan
        i += step


def _scalar(value, dtype: np.dtype):
    """``value`` as a kernel argument for an array of ``dtype``: a NumPy scalar of that
    dtype (integers travel as int64 bit patterns on a GPU, which the store narrows
    back; floats as float64; bools as integers, which the launcher requires)."""
    if dtype.kind == "b":
        return int(bool(value))
    return np.asarray(value).astype(dtype)[()]


def fill(arr, value, stream, m: int | None = None, rest=None) -> None:
    """Set a 1-D device array to ``value`` (its first ``m`` elements; ``rest`` after)."""
    dtype = np.dtype(arr.dtype)
    n = int(arr.shape[0])
    m = n if m is None else m
    rest = value if rest is None else rest
    launch(_fill, grid_for(n), THREADS, stream, arr, m, _scalar(value, dtype),
           _scalar(rest, dtype))


#: 8-byte words that :func:`put` carries in its launch's parameters
PUT_WORDS = 8


def put(words, host: np.ndarray, stream) -> None:
    """Write the bytes of a small host array (at most :data:`PUT_WORDS` 8-byte words)
    into int64 device ``words``, repeated to fill them (a whole number of times), by
    one launch whose parameters carry them: unlike a host-to-device copy, a launch is
    what a recorded call replays (``runtime/replay.py``), so a call that holds an
    ``initial=``, a few flags or each row's ranks on the device still replays."""
    raw = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
    padded = np.zeros(PUT_WORDS * 8, np.uint8)
    padded[:raw.size] = raw
    launch(_put, grid_for(words.shape[0]), THREADS, stream, words, ceil_div(raw.size, 8),
           *padded.view(np.int64))


def zeros(workspace, k: int, dtype):
    """A zeroed 1-D device array of ``k`` elements (counters, status flags, head flags).

    The zeros are written as 8-byte words whatever ``dtype`` is: a fill of one-byte
    elements stores a byte per thread and step (2^26 head flags: 48 us on an H200, 1.3
    TB/s), words store eight (what a driver memset does). Not a ``cudaMemsetAsync``:
    a memset bypasses ``launch``, so a recorded call (``runtime/replay.py``) would
    replay without it."""
    dtype = np.dtype(dtype)
    words = workspace.empty(max(1, ceil_div(int(k) * dtype.itemsize, 8)), _WORD)
    fill(words, 0, workspace.stream)
    return reinterpreted(words, dtype, k)


def divide_into(src, dst, count: int, stream) -> None:
    """``dst[i] = dst.dtype(float64(src[i]) / count)`` (1-D arrays of one length): a
    mean from a sum, divided as NumPy's ``mean`` divides (in float64, then cast)."""
    launch(_divide, grid_for(src.shape[0]), THREADS, stream, src, dst, float(count))


def log_sum_exp_into(m, s, dst, stream) -> None:
    """``dst[i] = m[i] + log(s[i])`` (``+inf`` where ``m[i]`` is): ``log(sum(exp(x)))``
    from the online softmax's ``(max, sum of exp(x - max))`` state of each output."""
    launch(_log_sum_exp, grid_for(m.shape[0]), THREADS, stream, m, s, dst)


def root_into(src, dst, exponent: float, stream) -> None:
    """``dst[i] = root_of(float64(src[i]), exponent)`` (1-D arrays of one length): a
    vector norm from its sum of squares or powers, in float64, then the store's cast."""
    launch(_root, grid_for(src.shape[0]), THREADS, stream, src, dst, float(exponent))


def subtract_into(a, b, dst, stream, first=None) -> None:
    """``dst[i] = a[i] - b[i]`` in ``dst``'s dtype (1-D arrays of one length; ``a`` and
    ``b`` may hold their values in wider words, as an atomic fold's results do): each
    operand is cast first, so integers wrap as NumPy's subtract does. ``first``: a
    dtype ``a`` is cast to before that (``np.ptp`` with ``out=`` stores its maximum
    in ``out``'s dtype, then subtracts)."""
    kernel = _subtracter(np.dtype(dst.dtype), np.dtype(first or dst.dtype))
    launch(kernel, grid_for(a.shape[0]), THREADS, stream, a, b, dst)


@functools.lru_cache(maxsize=None)
def _subtracter(dtype: np.dtype, first: np.dtype):
    t, f = from_dtype(dtype), from_dtype(first)

    @cuda.jit
    def subtract(a, b, dst):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < a.shape[0]:
            dst[i] = t(f(a[i])) - t(b[i])
            i += step

    return subtract


def nan_where(values, marks, marker: int, stream) -> None:
    """``values[i] = NaN`` where ``marks[i]`` has a bit of ``marker`` set (1-D arrays of
    one length)."""
    launch(_nan_where, grid_for(values.shape[0]), THREADS, stream, values, marks, int(marker))


def divide_by_into(src, counts, dst, stream) -> None:
    """``dst[i] = src[i] / counts[i]`` in float64, cast to ``dst``'s dtype; NaN where a
    count is 0 (1-D arrays of one length): a mean of the elements counted."""
    launch(_divide_by, grid_for(src.shape[0]), THREADS, stream, src, counts, dst)


@functools.lru_cache(maxsize=None)
def _divider(root: bool, skip_nan: bool):
    """``divide(m2, dof)``: a variance (or its root) from the sum of squared
    deviations and the degrees of freedom, NumPy's values where ``dof <= 0``."""

    @cuda.jit(device=True)
    def divide(m2, dof):
        if dof > 0:
            v = m2 / dof
        elif skip_nan or not m2 > 0 or dof != dof:  # NumPy: nanvar NaN; var M2/0, inf
            v = math.nan  # or NaN; a NaN ddof's M2/NaN
        else:
            v = math.inf
        return math.sqrt(v) if root else v

    return divide


@functools.lru_cache(maxsize=None)
def variance_of(root: bool, skip_nan: bool):
    """``variance(count, mean, m2, ddof)``: a variance (its root for ``root``) from a
    ``(count, mean, M2)`` state, as :func:`variance_into` gives it; the device
    function of that kernel and of the reduce kernels' folded finish
    (``kernels/finishes.py``), so both give the same bits."""
    divide = _divider(root, skip_nan)

    @cuda.jit(device=True)
    def variance(count, mean, m2, ddof):
        # A slice holding inf or NaN: NumPy's deviations x - mean take inf - inf
        # or NaN, so its variance is NaN. Welford's M2 never forms them (a lone
        # element's M2 is 0), so the mean decides.
        return math.nan if mean - mean != 0.0 else divide(m2, float64(count) - ddof)

    return variance


@functools.lru_cache(maxsize=None)
def _variancer(root: bool, skip_nan: bool):
    variance_at = variance_of(root, skip_nan)

    @cuda.jit
    def variance(counts, means, m2s, dst, ddof):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < dst.shape[0]:
            dst[i] = variance_at(counts[i], means[i], m2s[i], ddof)
            i += step

    return variance


def variance_into(counts, means, m2s, dst, ddof: float, root: bool, skip_nan: bool,
                  stream) -> None:
    """``dst[i] = M2 / (count - ddof)`` (its square root for ``root``) from the three
    fields of ``ops.MOMENTS`` states (1-D arrays of one length): where ``count - ddof <= 0``,
    NumPy's values, ``M2 / 0`` for ``var`` (inf, or NaN for M2 = 0) and NaN for
    ``nanvar`` (``skip_nan``)."""
    launch(_variancer(bool(root), bool(skip_nan)), grid_for(dst.shape[0]), THREADS, stream,
           counts, means, m2s, dst, float(ddof))


def cast_into(src, dst, stream) -> None:
    """``dst[i] = src[i]`` with a C cast (1-D arrays of one length)."""
    launch(_cast, grid_for(src.shape[0]), THREADS, stream, src, dst)


def cast_into_view(src, dst, stream) -> None:
    """``dst[idx] = src[i]`` with a C cast, ``i`` the C-order place of ``idx``: ``src``
    1-D, ``dst`` any device array of ``src``'s size (Numba, CuPy, ``__cuda_array_interface__``)
    in any layout whose elements are apart and whose strides are multiples of its item
    size (a transposed, sliced or reversed ``out``), written in place; a C-contiguous
    one by :func:`cast_into`."""
    if c_contiguous(dst):
        cast_into(src, flat(dst), stream)
        return
    view = device_view(dst)
    span, first = lowest_span(view)
    size = np.dtype(view.dtype).itemsize
    launch(_cast_strided, grid_for(src.shape[0]), THREADS, stream, src, span, first,
           tuple(map(int, view.shape)), tuple(s // size for s in view.strides))


def fold_first_into(kit, states: tuple, first: tuple, stream) -> None:
    """``states[i] = combine(first, states[i])`` for every state of the 1-D field arrays
    ``states`` (``first``: one state in 1-element arrays of the same dtypes): a
    reduction's ``initial`` value, put before its elements as NumPy puts it."""
    key = ("fold_first", kit, device_key())
    kernel = cached(key, lambda: _build_fold_first(kit))
    launch(kernel, grid_for(states[0].shape[0]), THREADS, stream, *states, *first)


def _build_fold_first(kit):
    combine, load, store = kit.combine, kit.load, kit.store

    @cuda.jit
    def fold_first(s0, s1, f0, f1):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < s0.shape[0]:
            store(s0, s1, i, combine(load(f0, f1, 0), load(s0, s1, i)))
            i += step

    return fold_first


@cuda.jit
def _gather(src, index, dst):
    i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
    step = int64(cuda.gridDim.x) * cuda.blockDim.x
    while i < dst.shape[0]:
        dst[i] = src[index[i]]
        i += step


def gather_into(src, index, dst, stream) -> None:
    """``dst[i] = src[index[i]]`` (1-D arrays; ``index`` and ``dst`` of one length,
    every index in range: the caller's to ensure)."""
    launch(_gather, grid_for(dst.shape[0]), THREADS, stream, src, index, dst)


INVALID, OVERFLOW = range(2)  # the slots of a flags array: NumPy's floating-point errors


def pairing_dims(shape: tuple, strides: list) -> np.ndarray:
    """The ``(ndim, 3)`` int64 rows that pair each element of an array of ``shape``
    (C order) with one of another array (:func:`squared_deviations_into`'s mean,
    :func:`weighted_into`'s weights): each axis's extent, its C-order multiplier, and
    the other array's element stride along it (``strides``; 0 where it broadcasts).
    A 0-d array is one row of one element."""
    mults = [math.prod(shape[a + 1:]) for a in range(len(shape))]
    rows = [(n, mults[a], strides[a]) for a, n in enumerate(shape)] or [(1, 1, 0)]
    return np.array(rows, np.int64)


def squared_deviations_into(x, mean, dims, dst, flags, skip_nan: bool, widened: bool,
                            stream) -> None:
    """``dst[i] = (x[i] - mean[j]) ** 2`` in float64, ``j`` the element of ``mean``
    that NumPy's broadcasting pairs with element ``i`` of ``x``: a variance's squared
    deviations from a given mean (``np.var(x, mean=m)``'s first pass).

    Args:
        x: 1-D device array, the input's elements in C order (bfloat16 bits for
            ``widened``, read as the float32 they mean).
        mean: 1-D device array, the mean's elements in C order (any real dtype).
        dims: ``(ndim, 3)`` int64 device array, one row per axis of ``x``: its extent,
            its C-order multiplier in ``x`` and the mean's element stride along it (0
            where the mean broadcasts).
        dst: 1-D float64 device array of ``x``'s size.
        flags: 1-D int32 device array of 2 zeros: ``flags[INVALID]`` set where a
            deviation is NaN from operands that are not (``inf - inf``),
            ``flags[OVERFLOW]`` where its square overflows: NumPy's warnings.
        skip_nan: NaN elements of ``x`` give 0 (nanvar's: they count nothing).
    """
    key = ("squared_deviations", np.dtype(x.dtype).str, np.dtype(mean.dtype).str,
           bool(skip_nan), bool(widened), device_key())
    kernel = cached(key, lambda: _build_squared_deviations(bool(skip_nan), bool(widened)))
    launch(kernel, grid_for(dst.shape[0]), THREADS, stream, x, mean, dims, dst, flags)


@cuda.jit(device=True)
def _as_is(v):
    return v


def _build_squared_deviations(skip_nan: bool, widened: bool):
    read = widen if widened else _as_is  # bfloat16 bits as the float32 they mean

    @cuda.jit
    def squared_deviations(x, mean, dims, dst, flags):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < dst.shape[0]:
            j = int64(0)
            for a in range(dims.shape[0]):  # the broadcast mean element of x[i]
                j += ((i // dims[a, 1]) % dims[a, 0]) * dims[a, 2]
            v = float64(read(x[i]))
            m = float64(mean[j])
            if skip_nan and math.isnan(v):
                dst[i] = 0.0
            else:
                d = v - m
                if math.isnan(d) and not (math.isnan(v) or math.isnan(m)):
                    flags[INVALID] = 1
                s = d * d
                if math.isinf(s) and not math.isinf(d):
                    flags[OVERFLOW] = 1
                dst[i] = s
            i += step

    return squared_deviations


#: the slots past INVALID and OVERFLOW of a weighted mean's flags: which values its
#: two sums meet (NumPy's warnings of a sum depend on whether its inputs held them)
PRODUCT_NAN, PRODUCT_INF, WEIGHT_NAN, WEIGHT_INF = range(2, 6)

#: float16's rounding threshold: a product this large or more is stored as inf
_HALF_OVERFLOW = 65520.0


def weighted_into(x, w, dims, products, weights, flags, stream) -> None:
    """``products[i] = x[i] * w[j]`` and ``weights[i] = w[j]`` in the outputs' dtype
    (a float16 product computed in float32, then rounded once, as NumPy's float16
    multiply rounds it), ``j`` the element of ``w`` that NumPy's ``average`` pairs with
    element ``i`` of ``x``: a weighted mean's two sums, over the same slices, read
    from these.

    Args:
        x: 1-D device array, the input's elements in C order.
        w: 1-D device array, the weights' elements in C order (any real dtype).
        dims: :func:`pairing_dims`' rows (the weights' element stride along each axis
            of ``x``, 0 where they broadcast), as an int64 device array.
        products, weights: 1-D device arrays of ``x``'s size, of one float dtype.
        flags: 1-D int32 device array of 6 zeros: ``flags[INVALID]`` set where a
            product is NaN from operands that are not (``inf * 0``), ``flags[OVERFLOW]``
            where it is infinite from finite ones (NumPy's multiply's warnings);
            ``PRODUCT_NAN``, ``PRODUCT_INF``, ``WEIGHT_NAN``, ``WEIGHT_INF`` where a
            product or a weight is NaN or infinite.
    """
    dtype = np.dtype(products.dtype)
    key = ("weighted", np.dtype(x.dtype).str, np.dtype(w.dtype).str, dtype.str,
           device_key())
    kernel = cached(key, lambda: _build_weighted(dtype))
    limit = _HALF_OVERFLOW if dtype == np.float16 else math.inf
    launch(kernel, grid_for(products.shape[0]), THREADS, stream, x, w, dims, products,
           weights, flags, limit)


def _build_weighted(dtype: np.dtype):
    as_float = from_dtype(np.dtype(np.float32) if dtype == np.float16 else dtype)

    @cuda.jit
    def weighted(x, w, dims, products, weights, flags, limit):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < products.shape[0]:
            j = int64(0)
            for a in range(dims.shape[0]):  # the broadcast weight of x[i]
                j += ((i // dims[a, 1]) % dims[a, 0]) * dims[a, 2]
            v = as_float(x[i])
            u = as_float(w[j])
            p = v * u
            infinite = math.isinf(p) or abs(p) >= limit  # as stored
            if math.isnan(p):
                flags[PRODUCT_NAN] = 1
                if not (math.isnan(v) or math.isnan(u)):
                    flags[INVALID] = 1
            if infinite:
                flags[PRODUCT_INF] = 1
                if not (math.isinf(v) or math.isinf(u)):
                    flags[OVERFLOW] = 1
            if math.isnan(u):
                flags[WEIGHT_NAN] = 1
            if math.isinf(u) or abs(u) >= limit:
                flags[WEIGHT_INF] = 1
            products[i] = p
            weights[i] = u
            i += step

    return weighted


@functools.lru_cache(maxsize=None)
def _summed_variancer(root: bool, skip_nan: bool):
    divide = _divider(root, skip_nan)

    @cuda.jit
    def variance(sums, counts, dst, ddof):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < dst.shape[0]:
            dof = float64(counts[i]) - ddof
            dst[i] = divide(sums[i], dof)
            i += step

    return variance


def summed_variance_into(sums, counts, dst, ddof: float, root: bool, skip_nan: bool,
                         stream) -> None:
    """``dst[i] = sums[i] / (counts[i] - ddof)`` (its square root for ``root``): a
    variance from each output's sum of squared deviations; where ``count - ddof <= 0``
    NumPy's values, ``sum / 0`` for ``var`` (inf, or NaN for 0) and NaN for
    ``nanvar`` (``skip_nan``)."""
    launch(_summed_variancer(bool(root), bool(skip_nan)), grid_for(dst.shape[0]), THREADS,
           stream, sums, counts, dst, float(ddof))
