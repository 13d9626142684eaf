"""Whole-array float32 sum: every strategy beside cupy.sum and torch.sum, same run.

GB/s count the bytes read (the input); the ceiling is the copy bandwidth measured in
the same session. Target (issue 3): the best strategy at 2**28 reaches 0.9x cupy.sum.
"""

import pytest

import numbakern as nk

SIZES = [1 << 20, 1 << 24, 1 << 28]


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"2^{n.bit_length() - 1}")
def data(request, cp):
    return cp.random.standard_normal(request.param, dtype=cp.float32)


@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_numbakern_sum(data, strategy, measure):
    measure(lambda: nk.sum(data, strategy=strategy), data.nbytes, provider=strategy,
            n=data.size)


def test_cupy_sum(data, measure):
    measure(lambda: data.sum(), data.nbytes, provider="cupy", n=data.size)


def test_torch_sum(data, measure, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(data, device="cuda")
    measure(lambda: t.sum(), data.nbytes, provider="torch", n=data.size)
