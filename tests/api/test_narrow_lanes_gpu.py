"""Inputs of 1- and 2-byte elements on a real GPU (marked `gpu`; skipped under the
simulator, which slices arrays instead of emitting vector loads).

Their 16-byte vector loads are loaded as four 32-bit words and each lane is cut out
of its word in registers (``numbakern/kernels/vector.py``): the argmax tests put each
row's one maximum at another lane of its vector, so a lane taken from the wrong half
or byte of a word gives a wrong index. And half-precision results made after the
kernels (a float16 sum's float32 accumulator cast to float16, a bfloat16 input's
float32 result rounded to bfloat16 bits) must let the call replay
(``numbakern/runtime/replay.py``): each is a kernel into a recorded allocation, not
CuPy's ``astype`` or torch's ``.to``.
"""

import numpy as np
import pytest

import numbakern as nk
from numbakern.runtime import replay

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

NARROW = ["int8", "uint8", "int16", "uint16", "float16"]
rng = np.random.default_rng(11)


def _rows(dtype, rows: int, cols: int) -> np.ndarray:
    """Small values (no overflow, exact float16 sums of few of them) with row ``r``'s
    one maximum at column ``r % cols``: every lane position of a vector, in turn."""
    low = 0 if np.dtype(dtype).kind == "u" else -8
    h = rng.integers(low, 8, (rows, cols)).astype(dtype)
    h[np.arange(rows), np.arange(rows) % cols] = 100
    return h


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("cols", [16, 48, 1000, 8192])
def test_row_argmax_max_and_sum_read_every_lane_in_its_place(dtype, cols):
    h = _rows(dtype, 96, cols)
    x = cupy.asarray(h)
    assert np.array_equal(cupy.asnumpy(nk.argmax(x, axis=1)), np.argmax(h, axis=1))
    assert np.array_equal(cupy.asnumpy(nk.max(x, axis=1)), np.max(h, axis=1))
    want = h.astype(np.float64).sum(axis=1)
    got = cupy.asnumpy(nk.sum(x, axis=1)).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == "float16" else 0)


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("n", [15, 16, 17, 4095, 1 << 20])
def test_whole_array_sum_and_argmax_read_every_lane(dtype, n):
    h = _rows(dtype, 1, n)[0]
    h[n // 3] = 101  # the one maximum, at a lane position that changes with n
    x = cupy.asarray(h)
    assert int(nk.argmax(x)) == n // 3
    want = h.astype(np.float64).sum()
    np.testing.assert_allclose(float(nk.sum(x, dtype=np.float64)), want, rtol=0)


@pytest.mark.parametrize("call", [lambda x: nk.sum(x), lambda x: nk.sum(x, axis=1),
                                  lambda x: nk.max(x, axis=1)],
                         ids=["sum", "sum rows", "max rows"])
def test_float16_results_cast_after_the_kernels_replay(call):
    results, before = [], replay.counts["replayed"]
    for _ in range(3):
        h = rng.standard_normal((72, 1000)).astype(np.float16)  # a shape of its own
        results.append((call(cupy.asarray(h)), call(h)))
    assert replay.counts["replayed"] - before == 2
    for got, want in results:
        assert got.dtype == np.float16
        np.testing.assert_allclose(cupy.asnumpy(got).astype(np.float64),
                                   np.asarray(want, np.float64), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("call", [lambda x: nk.sum(x), lambda x: nk.sum(x, axis=1),
                                  lambda x: nk.mean(x, axis=1), lambda x: nk.max(x, axis=1)],
                         ids=["sum", "sum rows", "mean rows", "max rows"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_tensor_reductions_replay_whole(call, dtype):
    """A reduction of a half-precision CUDA tensor replays from the tensor itself:
    its result (float16 cast by a kernel, bfloat16 rounded to bits by one) is a view
    of the call's own memory."""
    torch = pytest.importorskip("torch")
    before = replay.counts["replayed"]
    for _ in range(3):
        x = torch.randn(56, 1000, device="cuda").to(getattr(torch, dtype))  # its own shape
        got = call(x)
        assert got.dtype == x.dtype and got.is_cuda
        want = call(x.double().cpu().numpy())
        torch.testing.assert_close(got.double().cpu(), torch.as_tensor(want).double(),
                                   rtol=1e-2, atol=5e-2)
    assert replay.counts["replayed"] - before == 2
