"""Segmented sums, scans and sorts beside torch and CCCL's ``cuda.compute``.

2^26 float32 values in segments of random lengths (uniform in [0, 2L] for a mean L of
64, 1024, 16384 and 2^20): many short segments, a warp's each, to a few dozen long
ones, split into tiles over many blocks; and ``mixed``: one segment of half the
array among segments of 0 to 128 elements (the case a layout chosen from the mean
length alone gets wrong). GB/s count the values read once (the offsets and results
are small beside them); for scans and sorts, read once and written once. Each peer's
result is checked against numbakern's first.

* sums: ``torch.segment_reduce`` and ``cuda.compute.segmented_reduce``;
* scans (``segmented_scan``, inclusive sum): torch has none; its usual idiom is the
  peer, a whole-array ``cumsum`` minus each segment's exclusive prefix at its start,
  repeated over the segment (``repeat_interleave``). In float32 that idiom loses the
  segment's digits to the whole array's running sum (its error grows with the
  prefix, not the segment), so it is checked in float64 and timed in float32;
* sorts (``segmented_sort``, keys and int32 values, ascending): torch's two stable
  sorts (by key, then by segment index: a lexsort, the same composition numbakern
  makes) and ``cuda.compute.segmented_sort`` (CUB's ``DeviceSegmentedSort``, not
  stable; keys compared) where the installed ``cuda.compute`` has it.

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
def case(request, cp):
    mean = request.param
    rng = np.random.default_rng(7 if mean == "mixed" else mean)
    offsets = np.concatenate([[0], np.cumsum(_lengths(mean, rng))])
    offsets = offsets[offsets <= N]
    x = cp.random.default_rng(0).random(int(offsets[-1]), dtype=cp.float32)
    return x, cp.asarray(offsets.astype(np.int64)), mean


def _info(x, provider, mean, op="segmented_sum"):
    return dict(op=op, provider=provider, shape=f"2^26/mean{mean}", dtype="float32")


def test_numbakern(case, measure):
    x, offsets, mean = case
    measure(lambda: nk.segmented_reduce(x, offsets), x.nbytes, **_info(x, "numbakern", mean))


def test_numbakern_unchecked(case, measure):
    """``check_offsets=False``: no report on the offsets, so no synchronisation (torch
    and cuda.compute check no offsets either)."""
    x, offsets, mean = case
    want = nk.segmented_reduce(x, offsets).get()
    np.testing.assert_array_equal(nk.segmented_reduce(x, offsets, check_offsets=False).get(),
                                  want)
    measure(lambda: nk.segmented_reduce(x, offsets, check_offsets=False), x.nbytes,
            **_info(x, "numbakern unchecked", mean))


def test_numbakern_atomic_fold(case, measure):
    """The runs of long segments folded by atomics (one launch fewer, float sums not
    bitwise reproducible)."""
    x, offsets, mean = case
    strategy = "atomic_fold/warp_shuffle"
    want = nk.segmented_reduce(x, offsets).get()
    np.testing.assert_allclose(nk.segmented_reduce(x, offsets, strategy=strategy).get(), want,
                               rtol=1e-4, atol=1e-3)
    measure(lambda: nk.segmented_reduce(x, offsets, strategy=strategy), x.nbytes,
            **_info(x, "numbakern atomic_fold", mean))


def test_torch_segment_reduce(case, measure, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    x, offsets, mean = case
    t, o = torch_cuda.as_tensor(x, device="cuda"), torch_cuda.as_tensor(offsets, device="cuda")
    got = torch_cuda.segment_reduce(t, "sum", offsets=o)
    np.testing.assert_allclose(got.cpu().numpy(), nk.segmented_reduce(x, offsets).get(),
                               rtol=1e-4, atol=1e-3)
    measure(lambda: torch_cuda.segment_reduce(t, "sum", offsets=o), x.nbytes,
            **_info(x, "torch", mean))


def test_cuda_compute(case, measure, cp):
    """CCCL's object API, built and its storage allocated once (``cccl_segmented_sum``)."""
    compute = pytest.importorskip("cuda.compute")
    x, offsets, mean = case
    np.testing.assert_allclose(cccl_segmented_sum(compute, x, offsets).get(),
                               nk.segmented_reduce(x, offsets).get(), rtol=1e-4, atol=1e-3)
    measure(lambda: cccl_segmented_sum(compute, x, offsets), x.nbytes,
            **_info(x, "cuda.compute", mean))


# --- segmented scans ------------------------------------------------------------------


def _torch_segmented_cumsum(torch, t, o):
    """torch's idiom: the whole cumsum minus each segment's exclusive prefix at its start."""
    n = t.shape[0]
    total = torch.cumsum(t, 0)
    before = (total - t)[o[:-1].clamp(max=max(n - 1, 0))]
    return total - torch.repeat_interleave(before, o[1:] - o[:-1], output_size=n)


def test_numbakern_scan(case, measure):
    x, offsets, mean = case
    measure(lambda: nk.segmented_scan(x, offsets), 2 * x.nbytes,
            **_info(x, "numbakern", mean, "segmented_cumsum"))


def test_torch_scan_idiom(case, measure, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    x, offsets, mean = case
    t, o = torch_cuda.as_tensor(x, device="cuda"), torch_cuda.as_tensor(offsets, device="cuda")
    want = _torch_segmented_cumsum(torch_cuda, t.double(), o)  # float64: the idiom exact
    np.testing.assert_allclose(nk.segmented_scan(x, offsets).get(), want.cpu().numpy(),
                               rtol=1e-4, atol=1e-2)
    measure(lambda: _torch_segmented_cumsum(torch_cuda, t, o), 2 * x.nbytes,
            **_info(x, "torch", mean, "segmented_cumsum"))


# --- segmented sorts ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pairs(case, cp):
    x, offsets, mean = case
    return x, cp.arange(x.size, dtype=cp.int32), offsets, mean


def test_numbakern_sort(pairs, measure):
    x, v, offsets, mean = pairs
    measure(lambda: nk.segmented_sort(x, offsets, v), 2 * (x.nbytes + v.nbytes),
            **_info(x, "numbakern", mean, "segmented_sort_pairs"))


def _torch_segmented_sort(torch, t, v, segment):
    _, by_key = torch.sort(t, stable=True)
    _, by_segment = torch.sort(segment[by_key], stable=True)
    order = by_key[by_segment]
    return t[order], v[order]


def test_torch_sort_twice(pairs, measure, torch_cuda, cp):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    x, v, offsets, mean = pairs
    t, tv = (torch_cuda.as_tensor(a, device="cuda") for a in (x, v))
    o = torch_cuda.as_tensor(offsets, device="cuda")
    segment = torch_cuda.repeat_interleave(
        torch_cuda.arange(o.shape[0] - 1, device="cuda", dtype=torch_cuda.int32), o[1:] - o[:-1])
    keys, values = _torch_segmented_sort(torch_cuda, t, tv, segment)
    ours_k, ours_v = nk.segmented_sort(x, offsets, v)
    assert bool(cp.array_equal(cp.asarray(keys), ours_k))
    assert bool(cp.array_equal(cp.asarray(values), ours_v))
    measure(lambda: _torch_segmented_sort(torch_cuda, t, tv, segment),
            2 * (x.nbytes + v.nbytes), **_info(x, "torch", mean, "segmented_sort_pairs"))


def test_cuda_compute_sort(pairs, measure, cp):
    compute = pytest.importorskip("cuda.compute")
    if not hasattr(compute, "segmented_sort"):
        pytest.skip("this cuda.compute has no segmented_sort")
    x, v, offsets, mean = pairs

    def run():  # CCCL's object API, built and its storage allocated once
        return cccl_segmented_sort(compute, x, v, offsets)[0]

    assert bool(cp.array_equal(run(), nk.segmented_sort(x, offsets)))
    measure(run, 2 * (x.nbytes + v.nbytes),
            **_info(x, "cuda.compute", mean, "segmented_sort_pairs"))
