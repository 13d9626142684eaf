"""Median, quantile and partition benchmarks beside PyTorch and CuPy (GPU only).

Run: ``pytest bench/bench_selection.py --benchmark-json=selection.json``. GB/s count
the input read once. numbakern's default finds the order statistics by radix select
(``numbakern`` cases; ``numbakern-sort`` is the sort path, ``strategy="radix"``;
``numbakern-select`` radix select named, ``strategy="radix_select"``).

Peers, and what they compute:

* ``torch.median`` returns the lower of the two middle values (NumPy and numbakern
  average them), and one dimension at a time; timed all the same, as the nearest peer.
* ``torch.quantile`` refuses to reduce more than 2^24 elements ("input tensor is too
  large"): the flat 2^28 case skips with that reason, as a measured fact about the
  peer; the rows run.
* ``cupy.median`` / ``cupy.quantile``, when CuPy is importable (the ``cp`` fixture
  needs it anyway).
* partition (``test_partition``, float32, flat 2^28 with ``kth = 2^27`` and the logits
  with ``kth = 50`` along the last axis; ``numbakern-sort`` is the full sort, the
  path before radix select): ``cupy.partition`` / ``cupy.argpartition`` (a sort, as
  cupy/cupy#7060 found); ``np.partition`` on the host (the input copied there first,
  outside the timing: the CPU's introselect, a yardstick); ``torch.kthvalue`` (the
  ``kth`` value alone, no partition: the least a peer computes) and ``torch.topk``
  of ``kth + 1`` (the smallest ``kth + 1``, the part of a partition before and at
  ``kth``). torch.topk's ``k`` of 2^27 + 1 takes its sort path.

Each result is checked before timing against ``cupy.sort`` of the same input (the
reference order statistics, exact): a partition's rows, sorted, equal the sort's, each
``kth`` element is the sort's, none before it larger, none after it smaller;
argpartition's indices are each row's positions once, and ``x`` taken at them is such a
partition; ``torch.kthvalue`` and ``torch.median`` give the sort's element (torch's
median the lower middle one) and an index holding it; ``torch.topk``'s values, sorted,
are the sort's smallest ``kth + 1``, at distinct indices holding them. Medians and
quantiles interpolate between the two neighbouring order statistics (NumPy's
``linear``): within 4 ulps of the result's dtype (float32 for the median, float64 for
a list of quantiles, NumPy's rule; float32 for torch, whose ``q`` must have the
input's dtype) of the larger neighbour, plus the neighbours' gap times the gap's own
rounding in the input's dtype (NumPy and CuPy subtract the float32 neighbours before
they widen: ``eps32``) and the rank's rounding (``eps * n``, the rank's dtype's
``eps``: float64 for numbakern and CuPy, a median's rank exact; float32 for torch,
whose rank of 0.9 * 50256 is off by up to 2e-3, a 2e-6 error on the logits' tails,
seen on an H100). A bound of whole gaps would pass a neighbouring order statistic:
at 2^28, ``eps32 * n`` is 32 of them. The inputs are seeded, so a failing case reruns
on its own data.
"""

import numpy as np
import pytest

import numbakern as nk

FLAT = 1 << 28
ROWS = (32768, 4096)
LOGITS = (8192, 50257)  # odd rows: one middle element a row
SHAPES = [(FLAT,), ROWS, LOGITS]
IDS = ["2^28", "32768x4096", "8192x50257"]
STRATEGY = {"numbakern": None, "numbakern-sort": "radix", "numbakern-select": "radix_select"}
QS = [0.1, 0.5, 0.9]
EPS32, EPS64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)


def _input(cp, shape):
    return cp.random.RandomState(0).standard_normal(shape, dtype=cp.float32)


def _torch(torch_cuda, x):
    if torch_cuda is None:
        pytest.skip("PyTorch with CUDA is not installed")
    return torch_cuda.as_tensor(x, device="cuda")


def _sorted(cp, x):
    """Each row of ``x`` sorted (a flat ``x``: the whole), by cupy.sort."""
    return cp.sort(x, axis=-1)


def _linear(cp, s, q: float, eps: float, rank_eps: float):
    """NumPy's ``linear`` quantile ``q`` of the sorted rows ``s``, in float64, and its
    bound (the module doc's; ``eps``: the result dtype's, ``rank_eps``: the rank's)."""
    n = s.shape[-1]
    rank = q * (n - 1)
    lo = int(rank)
    a, b = s[..., lo].astype(cp.float64), s[..., min(lo + 1, n - 1)].astype(cp.float64)
    want = a + (rank - lo) * (b - a)
    gap = cp.abs(b - a)
    return want, 4 * eps * cp.maximum(cp.abs(a), cp.abs(b)) + (EPS32 + rank_eps * n) * gap


def _interpolated(verify, cp, s, qs, eps, rank_eps):
    """The check of quantiles ``qs`` (a list: stacked first, as NumPy's; a float: one)."""
    if isinstance(qs, float):
        want, bound = _linear(cp, s, qs, eps, rank_eps)
    else:
        want, bound = (cp.stack(part) for part in
                       zip(*(_linear(cp, s, q, eps, rank_eps) for q in qs)))
    return verify.agrees(want, atol=bound)


def _order_stat(verify, x, s, k):
    """The check of torch's (values, indices) for rank ``k`` of each row: the sort's
    element, and ``x`` holding it at the index (a bare value for a whole flat array)."""
    def check(got):
        values, indices = got if isinstance(got, tuple) else (got, None)
        verify.close(values, s[..., k])
        if indices is not None:
            verify.close(verify.taken(x, indices[..., None])[..., 0], s[..., k])

    return check


def _partition(verify, cp, s, kths):
    """The check of a partition of the rows at ``kths`` (the module doc's)."""
    def check(got):
        got = verify.array(got)
        verify.close(_sorted(cp, got), s)
        for k in kths:
            verify.close(got[..., k], s[..., k])
            late = bool((got[..., :k].max(axis=-1) > s[..., k]).any())
            if late or bool((got[..., k + 1:].min(axis=-1) < s[..., k]).any()):
                raise AssertionError(f"not partitioned at {k}")

    return check


def _argpartition(verify, cp, x, s, kths):
    """The check of argpartition: distinct indices, ``x`` at them a partition."""
    partitioned = _partition(verify, cp, s, kths)

    def check(got):
        verify.distinct(got)
        partitioned(verify.taken(x, got))

    return check


def _smallest(verify, cp, x, s, k):
    """The check of torch.topk's smallest ``k`` (unsorted): their values, sorted, the
    sort's first ``k``; at distinct indices holding them."""
    def check(got):
        values, indices = got
        verify.close(_sorted(cp, verify.array(values)), s[..., :k])
        verify.distinct(indices)
        verify.close(verify.taken(x, indices), values)

    return check


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.parametrize("impl", [*STRATEGY, "torch", "cupy"])
def test_median(measure, cp, torch_cuda, verify, shape, impl):
    x = _input(cp, shape)
    axis = -1 if len(shape) > 1 else None
    s = _sorted(cp, x)
    check = _interpolated(verify, cp, s, 0.5, EPS32, EPS64)  # a float32 median
    if impl in STRATEGY:
        fn = lambda: nk.median(x, axis=axis, strategy=STRATEGY[impl])
    elif impl == "cupy":
        fn = lambda: cp.median(x, axis=axis)
    else:
        t = _torch(torch_cuda, x)
        fn = (lambda: torch_cuda.median(t, dim=-1)) if axis is not None else \
            (lambda: torch_cuda.median(t))
        check = _order_stat(verify, x, s, (s.shape[-1] - 1) // 2)  # the lower middle
    measure(fn, x.nbytes, check=check, op="median", impl=impl, shape=shape, dtype="float32")


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
@pytest.mark.parametrize("impl", [*STRATEGY, "torch", "cupy"])
def test_quantile(measure, cp, torch_cuda, verify, shape, impl):
    x = _input(cp, shape)
    axis = -1 if len(shape) > 1 else None
    s = _sorted(cp, x)
    eps = EPS32 if impl == "torch" else EPS64  # the result's dtype: a list of q, float64
    check = _interpolated(verify, cp, s, QS, eps, eps)
    del s  # the check keeps its columns
    if impl in STRATEGY:
        fn = lambda: nk.quantile(x, QS, axis=axis, strategy=STRATEGY[impl])
    elif impl == "cupy":
        fn = lambda: cp.quantile(x, cp.asarray(QS), axis=axis)
    else:
        t = _torch(torch_cuda, x)
        q = torch_cuda.tensor(QS, device="cuda")
        fn = (lambda: torch_cuda.quantile(t, q, dim=-1)) if axis is not None else \
            (lambda: torch_cuda.quantile(t, q))
        try:
            fn()
        except RuntimeError as error:  # "quantile() input tensor is too large"
            pytest.skip(f"torch.quantile refuses this input: {error}")
    measure(fn, x.nbytes, check=check, op="quantile", impl=impl, shape=shape,
            dtype="float32")


PARTITION_SHAPES = [(FLAT,), LOGITS]
PARTITION_IDS = ["2^28-kth2^27", "8192x50257-kth50"]


def _kth(shape) -> int:
    return shape[0] // 2 if len(shape) == 1 else 50


@pytest.mark.parametrize("shape", PARTITION_SHAPES, ids=PARTITION_IDS)
@pytest.mark.parametrize("impl", [*STRATEGY, "numbakern-arg", "numbakern-arg-sort", "cupy",
                                  "cupy-arg", "numpy", "torch.kthvalue", "torch.topk"])
def test_partition(measure, cp, torch_cuda, verify, shape, impl):
    x = _input(cp, shape)
    kth = _kth(shape)
    s = _sorted(cp, x)
    check = _partition(verify, cp, s, [kth])
    arg = {"numbakern-arg": None, "numbakern-arg-sort": "radix"}
    if impl in STRATEGY:
        fn = lambda: nk.partition(x, kth, axis=-1, strategy=STRATEGY[impl])
    elif impl in arg:
        fn = lambda: nk.argpartition(x, kth, axis=-1, strategy=arg[impl])
        check = _argpartition(verify, cp, x, s, [kth])
    elif impl == "cupy":
        fn = lambda: cp.partition(x, kth, axis=-1)
    elif impl == "cupy-arg":
        fn = lambda: cp.argpartition(x, kth, axis=-1)
        check = _argpartition(verify, cp, x, s, [kth])
    elif impl == "numpy":
        host = cp.asnumpy(x)
        fn = lambda: np.partition(host, kth, axis=-1)  # checked on the device
    else:
        t = _torch(torch_cuda, x)
        if impl == "torch.kthvalue":
            fn = lambda: torch_cuda.kthvalue(t, kth + 1, dim=-1)  # 1-based
            check = _order_stat(verify, x, s, kth)
        else:
            fn = lambda: torch_cuda.topk(t, kth + 1, dim=-1, largest=False, sorted=False)
            check = _smallest(verify, cp, x, s, kth + 1)
    measure(fn, x.nbytes, check=check, op="partition", impl=impl, shape=shape,
            dtype="float32")


@pytest.mark.parametrize("impl", [*STRATEGY, "numbakern-arg", "numbakern-arg-select",
                                  "cupy"])
def test_partition_two_kth(measure, cp, verify, impl):
    """Two ranks: radix select reads the row on each digit pass once a rank, so the
    default takes the sort past one (``selection.SELECT_MOST``); ``numbakern-select``
    and ``numbakern-arg-select`` time the selection that rule gives up."""
    x = _input(cp, (FLAT,))
    kth = [FLAT // 4, FLAT // 2]
    s = _sorted(cp, x)
    check = _partition(verify, cp, s, kth)
    arg = {"numbakern-arg": None, "numbakern-arg-select": "radix_select"}
    if impl in STRATEGY:
        fn = lambda: nk.partition(x, kth, strategy=STRATEGY[impl])
    elif impl in arg:
        fn = lambda: nk.argpartition(x, kth, strategy=arg[impl])
        check = _argpartition(verify, cp, x, s, kth)
    else:
        fn = lambda: cp.partition(x, kth)
    measure(fn, x.nbytes, check=check, op="partition2", impl=impl, shape=(FLAT,),
            dtype="float32")
