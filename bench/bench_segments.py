"""Segmented sums beside torch's ``segment_reduce`` and CCCL's ``cuda.compute``.

2^26 float32 values in segments of random lengths (uniform in [0, 2L] for a mean L of
64, 1024 and 16384): many short segments, the warp-per-segment case, to few long
ones, the block's. GB/s count the values read once (the offsets and results are
small beside them). Each peer's result is checked against numbakern's first.

    pytest bench/bench_segments.py --benchmark-json=segments.json
"""

import numpy as np
import pytest

import numbakern as nk

N = 1 << 26
MEANS = [64, 1024, 16384]


@pytest.fixture(scope="module", params=MEANS, ids=lambda m: f"mean{m}")
def case(request, cp):
    mean = request.param
    rng = np.random.default_rng(mean)
    lengths = rng.integers(0, 2 * mean + 1, N // mean + 1)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    offsets = offsets[offsets <= N]
    x = cp.random.default_rng(0).random(int(offsets[-1]), dtype=cp.float32)
    return x, cp.asarray(offsets.astype(np.int64)), mean


def _info(x, provider, mean):
    return dict(op="segmented_sum", provider=provider, shape=f"2^26/mean{mean}",
                dtype="float32")


def test_numbakern(case, measure):
    x, offsets, mean = case
    measure(lambda: nk.segmented_reduce(x, offsets), x.nbytes, **_info(x, "numbakern", mean))


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
    compute = pytest.importorskip("cuda.compute")
    x, offsets, mean = case
    out = cp.empty(offsets.size - 1, dtype=cp.float32)
    init = np.zeros((), dtype=np.float32)

    def run():
        compute.segmented_reduce(d_in=x, d_out=out, start_offsets_in=offsets[:-1],
                                 end_offsets_in=offsets[1:], op=compute.OpKind.PLUS,
                                 h_init=init, num_segments=offsets.size - 1)
        return out

    np.testing.assert_allclose(run().get(), nk.segmented_reduce(x, offsets).get(),
                               rtol=1e-4, atol=1e-3)
    measure(run, x.nbytes, **_info(x, "cuda.compute", mean))
