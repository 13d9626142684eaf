"""bfloat16 CUDA tensors through the reductions and scans on a real GPU (marked
`gpu`; skipped under the simulator): read in place (no ``CopyWarning``), results
bfloat16 CUDA tensors on the input's device (argmax: int64), with and without CuPy,
against a float64 reduction of the same bfloat16 values. The simulator's file,
tests/api/test_bfloat16_reductions.py, holds the full contract at small sizes.
"""

import warnings

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _check(got, want, magnitude):
    assert isinstance(got, torch.Tensor) and got.is_cuda and got.dtype == torch.bfloat16
    got, want = got.double().cpu(), want.cpu()
    bound = 2.0 ** -8 * want.abs() + 2.0 ** -20 * magnitude.cpu()
    assert bool(((got - want).abs() <= bound).all()), (got, want)


@pytest.mark.parametrize("shape", [(1,), (33,), (4097,), (1 << 22,), (96, 1000), (3, 257, 65)])
def test_bfloat16_cuda_tensors_are_reduced_in_place(shape, cupy_or_not):
    g = torch.Generator(device="cuda").manual_seed(len(shape) * 1000 + shape[-1])
    x = torch.randn(shape, device="cuda", generator=g).to(torch.bfloat16)
    x64 = x.double()
    axis = x.dim() - 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        total = nk.sum(x)
        rows = nk.sum(x, axis=axis)
        top = nk.max(x, axis=axis)
        where = nk.argmax(x, axis=axis)
        flat_where = nk.argmax(x)
        average = nk.mean(x, axis=axis)
        running = nk.cumsum(x, axis=axis)
    _check(total, x64.sum(), x64.abs().sum())
    _check(rows, x64.sum(axis), x64.abs().sum(axis))
    _check(top, x64.amax(axis), torch.zeros((), dtype=torch.float64))
    assert torch.equal(top, x.amax(axis))
    assert where.is_cuda and where.dtype == torch.int64
    assert torch.equal(where, torch.argmax(x64, axis))
    assert flat_where.item() == torch.argmax(x64).item()
    _check(average, x64.mean(axis), x64.abs().mean(axis))
    _check(running, x64.cumsum(axis), x64.abs().cumsum(axis))


def test_bfloat16_nan_and_strided_views(cupy_or_not):
    x = torch.randn(64, 300, device="cuda").to(torch.bfloat16)
    x[5, 17] = float("nan")
    x[9, 3] = float("nan")
    x[9, 250] = float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        top = nk.max(x, axis=1)
        where = nk.argmax(x, axis=1)
        view = nk.sum(x[::2, 1:], axis=1)
        columns = nk.cumsum(x.T, axis=1)
        scalar = nk.argmax(torch.tensor(2.5, device="cuda", dtype=torch.bfloat16))
    assert scalar.item() == 0 and scalar.dtype == torch.int64  # a 0-d input, as NumPy
    assert torch.isnan(top[5]) and torch.isnan(top[9]) and not torch.isnan(top[0])
    assert where[5].item() == 17 and where[9].item() == 3  # the first NaN, as NumPy
    x64 = x.double()
    _check(view, x64[::2, 1:].sum(1), x64[::2, 1:].abs().sum(1))
    finite = torch.nan_to_num(x64.T)
    ok = ~torch.isnan(x64.T.cumsum(1))
    _check(columns.masked_fill(~ok, 0), finite.cumsum(1).masked_fill(~ok, 0),
           finite.abs().cumsum(1))
    assert bool(torch.isnan(columns[~ok]).all())  # NaN from the first NaN on
    wide = nk.sum(x, axis=1, dtype=np.float32)  # dtype= honoured: float32, not rounded
    assert wide.dtype == torch.float32
    np.testing.assert_allclose(wide.cpu().numpy(), x64.sum(1).cpu().numpy(), rtol=1e-5,
                               atol=1e-4)
