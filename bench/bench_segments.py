"""Segmented sums, scans and sorts beside torch and CCCL's ``cuda.compute``.

2^26 float32 values in segments of random lengths (uniform in [0, 2L] for a mean L of
64, 1024, 16384 and 2^20): many short segments, a warp's each, to a few dozen long
ones, split into tiles over many blocks; and ``mixed``: one segment of half the
array among segments of 0 to 128 elements (the case a layout chosen from the mean
length alone gets wrong). GB/s count the values read once (the offsets and results
are small beside them); for scans and sorts, read once and written once.

Each result is checked before timing. The sums and scans read small integers
(``small_integers``; their speed does not depend on the values): every partial sum is
exact in float32, so each must equal the float64 reference (differences of the running
sum). The sorts read uniform float32 keys (a radix sort's speed depends on the keys'
spread) and must equal a stable sort by (segment, key) made of two ``cupy.argsort``:
keys and values exactly where the sort is stable; for CUB's (not stable) the keys
exactly and the values each element's position once, holding its key, in its segment.

* sums: ``torch.segment_reduce`` and ``cuda.compute.segmented_reduce``;
* scans (``segmented_scan``, inclusive sum): torch has none; its usual idiom is the
  peer, a whole-array ``cumsum`` minus each segment's exclusive prefix at its start,
  repeated over the segment (``repeat_interleave``). In float32 that idiom loses the
  segment's digits to the whole array's running sum (its error grows with the
  prefix, not the segment); on small integers it is exact;
* sorts (``segmented_sort``, keys and int32 values, ascending): torch's two stable
  sorts (by key, then by segment index: a lexsort, the same composition numbakern
  makes) and ``cuda.compute.segmented_sort`` (CUB's ``DeviceSegmentedSort``, not
  stable: keys and where each value went checked) where the installed
  ``cuda.compute`` has it.

    pytest bench/bench_segments.py --benchmark-json=segments.json
    pytest bench/bench_segments.py -k "not scan and not sort" \
        --benchmark-json=segsum.json   # the sums alone
"""

import numpy as np
import pytest

import numbakern as nk
from numbakern.teach.peers import cccl_segmented_sort, cccl_segmented_sum

N = 1 << 26
MEANS = [64, 1024, 16384, 1 << 20, "mixed"]


def _lengths(mean, rng):
    if mean == "mixed":  # half the array in one segment, the rest in short ones
        short = rng.integers(0, 129, N // 128 + 1)
        return np.concatenate([short[: short.size // 2], [N // 2], short[short.size // 2:]])
    return rng.integers(0, 2 * mean + 1, N // mean + 1)


@pytest.fixture(scope="module", params=MEANS, ids=lambda m: f"mean{m}")
def case(request, cp, small_integers):
    mean = request.param
    rng = np.random.default_rng(7 if mean == "mixed" else mean)
    offsets = np.concatenate([[0], np.cumsum(_lengths(mean, rng))])
    offsets = offsets[offsets <= N]
    x = small_integers(int(offsets[-1]))
    return x, cp.asarray(offsets.astype(np.int64)), mean


def _info(x, provider, mean, op="segmented_sum"):
    return dict(op=op, provider=provider, shape=f"2^26/mean{mean}", dtype="float32")


def _segment_of(cp, offsets, n):
    """Each of ``n`` elements' segment (the last offset at or before it)."""
    return cp.searchsorted(offsets, cp.arange(n), side="right") - 1


@pytest.fixture(scope="module")
def sums(case, cp, verify):
    """The check of segment sums: the float64 running sum's differences at the offsets."""
    x, offsets, _ = case
    running = cp.concatenate([cp.zeros(1), cp.cumsum(x, dtype=cp.float64)])
    return verify.agrees(running[offsets[1:]] - running[offsets[:-1]])


def test_numbakern(case, measure, sums):
    x, offsets, mean = case
    measure(lambda: nk.segmented_reduce(x, offsets), x.nbytes, check=sums,
            **_info(x, "numbakern", mean))


def test_numbakern_unchecked(case, measure, sums):
    """``check_offsets=False``: no report on the offsets, so no synchronisation (torch
    and cuda.compute check no offsets either)."""
    x, offsets, mean = case
    measure(lambda: nk.segmented_reduce(x, offsets, check_offsets=False), x.nbytes,
            check=sums, **_info(x, "numbakern unchecked", mean))


def test_numbakern_atomic_fold(case, measure, sums):
    """The runs of long segments folded by atomics (one launch fewer, float sums not
    bitwise reproducible; of small integers, exact)."""
    x, offsets, mean = case
    strategy = "atomic_fold/warp_shuffle"
    measure(lambda: nk.segmented_reduce(x, offsets, strategy=strategy), x.nbytes,
            check=sums, **_info(x, "numbakern atomic_fold", mean))


def test_torch_segment_reduce(case, measure, torch_cuda, sums):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    x, offsets, mean = case
    t, o = torch_cuda.as_tensor(x, device="cuda"), torch_cuda.as_tensor(offsets, device="cuda")
    measure(lambda: torch_cuda.segment_reduce(t, "sum", offsets=o), x.nbytes, check=sums,
            **_info(x, "torch", mean))


def test_cuda_compute(case, measure, sums):
    """CCCL's object API, built and its storage allocated once (``cccl_segmented_sum``)."""
    compute = pytest.importorskip("cuda.compute")
    x, offsets, mean = case
    measure(lambda: cccl_segmented_sum(compute, x, offsets), x.nbytes, check=sums,
            **_info(x, "cuda.compute", mean))


# --- segmented scans ------------------------------------------------------------------


def _torch_segmented_cumsum(torch, t, o):
    """torch's idiom: the whole cumsum minus each segment's exclusive prefix at its start."""
    n = t.shape[0]
    total = torch.cumsum(t, 0)
    before = (total - t)[o[:-1].clamp(max=max(n - 1, 0))]
    return total - torch.repeat_interleave(before, o[1:] - o[:-1], output_size=n)


@pytest.fixture(scope="module")
def scans(case, cp, verify):
    """The check of segmented inclusive sums: the float64 running sum less its value
    before each element's segment."""
    x, offsets, _ = case
    running = cp.cumsum(x, dtype=cp.float64)
    start = offsets[_segment_of(cp, offsets, x.size)]
    return verify.agrees(running - (running - x)[start])


def test_numbakern_scan(case, measure, scans):
    x, offsets, mean = case
    measure(lambda: nk.segmented_scan(x, offsets), 2 * x.nbytes, check=scans,
            **_info(x, "numbakern", mean, "segmented_cumsum"))


def test_torch_scan_idiom(case, measure, torch_cuda, scans):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    x, offsets, mean = case
    t, o = torch_cuda.as_tensor(x, device="cuda"), torch_cuda.as_tensor(offsets, device="cuda")
    measure(lambda: _torch_segmented_cumsum(torch_cuda, t, o), 2 * x.nbytes, check=scans,
            **_info(x, "torch", mean, "segmented_cumsum"))


# --- segmented sorts ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pairs(case, cp):
    """Uniform float32 keys in [0, 1) of the case's size, int32 values ``0 .. n-1``."""
    _, offsets, mean = case
    x = cp.random.default_rng(0).random(int(offsets[-1]), dtype=cp.float32)
    return x, cp.arange(x.size, dtype=cp.int32), offsets, mean


@pytest.fixture(scope="module")
def stable(pairs, cp):
    """(keys, values) sorted stably by segment, then key: two stable cupy.argsort."""
    x, v, offsets, _ = pairs
    by_key = cp.argsort(x)
    order = by_key[cp.argsort(_segment_of(cp, offsets, x.size)[by_key])]
    return x[order], v[order]


def test_numbakern_sort(pairs, measure, verify, stable):
    x, v, offsets, mean = pairs
    measure(lambda: nk.segmented_sort(x, offsets, v), 2 * (x.nbytes + v.nbytes),
            check=verify.agrees(stable), **_info(x, "numbakern", mean, "segmented_sort_pairs"))


def _torch_segmented_sort(torch, t, v, segment):
    _, by_key = torch.sort(t, stable=True)
    _, by_segment = torch.sort(segment[by_key], stable=True)
    order = by_key[by_segment]
    return t[order], v[order]


def test_torch_sort_twice(pairs, measure, torch_cuda, verify, stable):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    x, v, offsets, mean = pairs
    t, tv = (torch_cuda.as_tensor(a, device="cuda") for a in (x, v))
    o = torch_cuda.as_tensor(offsets, device="cuda")
    segment = torch_cuda.repeat_interleave(
        torch_cuda.arange(o.shape[0] - 1, device="cuda", dtype=torch_cuda.int32), o[1:] - o[:-1])
    measure(lambda: _torch_segmented_sort(torch_cuda, t, tv, segment),
            2 * (x.nbytes + v.nbytes), check=verify.agrees(stable),
            **_info(x, "torch", mean, "segmented_sort_pairs"))


def test_cuda_compute_sort(pairs, measure, cp, verify, stable):
    compute = pytest.importorskip("cuda.compute")
    if not hasattr(compute, "segmented_sort"):
        pytest.skip("this cuda.compute has no segmented_sort")
    x, v, offsets, mean = pairs

    def run():  # CCCL's object API, built and its storage allocated once
        return cccl_segmented_sort(compute, x, v, offsets)

    measure(run, 2 * (x.nbytes + v.nbytes), check=_unstable_check(cp, verify, pairs, stable),
            **_info(x, "cuda.compute", mean, "segmented_sort_pairs"))


def _unstable_check(cp, verify, pairs, stable):
    """The check of a sort of pairs that need not be stable (CUB's): the keys exactly,
    and the values (the elements' positions) each taken once, holding their keys, and
    from the segment they land in."""
    x, _, offsets, _ = pairs
    segment = _segment_of(cp, offsets, x.size)
    pair = verify.pair(x, stable[0])  # the keys; the values distinct, holding them

    def check(got):
        pair(got)
        verify.close(segment[verify.array(got[1])], segment)

    return check
