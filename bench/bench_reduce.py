"""Whole-array float32 sum: every strategy beside cupy.sum and torch.sum, same run.

GB/s count the bytes read (the input); the ceiling is the copy bandwidth measured in
the same session. Target (issue 3): the best strategy at 2**28 reaches 0.9x cupy.sum.
The input is small integers (``small_integers``; a sum's speed does not depend on the
values): every order of summing them is exact, so each result is checked to equal the
float64 sum.
"""

import pytest

import numbakern as nk

SIZES = [1 << 20, 1 << 24, 1 << 28]


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"2^{n.bit_length() - 1}")
def data(request, small_integers):
    return small_integers(request.param)


@pytest.fixture(scope="module")
def exact_sum(data, cp, verify):
    """The check: equal to the float64 sum (exact in any order)."""
    return verify.agrees(data.sum(dtype=cp.float64))


@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_numbakern_sum(data, strategy, measure, exact_sum):
    measure(lambda: nk.sum(data, strategy=strategy), data.nbytes, check=exact_sum,
            provider=strategy, n=data.size)


def test_cupy_sum(data, measure, exact_sum):
    measure(lambda: data.sum(), data.nbytes, check=exact_sum, provider="cupy", n=data.size)


def test_torch_sum(data, measure, torch_cuda, exact_sum):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(data, device="cuda")
    measure(lambda: t.sum(), data.nbytes, check=exact_sum, provider="torch", n=data.size)
