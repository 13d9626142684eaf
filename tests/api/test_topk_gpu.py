"""topk at scale on a real GPU against torch.topk on the GPU (skipped under the simulator).

Values must equal torch's exactly; indices must be valid: distinct within a row, and
pointing at the values returned (torch leaves the order of ties open, numbakern
takes the lower index first, so indices are compared only as valid, and against a
stable argsort where the data has ties).
"""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu

STRATEGIES = nk.strategies.available("select")


def assert_valid(torch, x, got, want, k, dim=-1):
    """got's values are torch's; got's indices distinct and pointing at its values."""
    assert isinstance(got.values, torch.Tensor) and got.values.device.type == "cuda"
    assert got.indices.dtype == torch.int64 and got.values.shape == want.values.shape
    assert torch.equal(got.values, want.values)
    assert torch.equal(torch.gather(x, dim, got.indices), got.values)
    ordered = torch.sort(got.indices, dim=dim).values
    assert bool((ordered.diff(dim=dim) > 0).all()) if k > 1 else True


def test_whole_array_2_28_k_1024(torch):
    x = torch.randn(1 << 28, device="cuda")
    for strategy in ("radix_select", None, nk.RadixSelect(compact=0)):  # not compacted, is
        got = nk.topk(x, 1024, strategy=strategy)
        assert_valid(torch, x, got, torch.topk(x, 1024), 1024)
    got = nk.topk(x, 1024, largest=False, sorted=False)
    want = torch.topk(x, 1024, largest=False)
    assert torch.equal(torch.sort(got.values).values, torch.sort(want.values).values)
    assert bool((got.indices.diff() > 0).all())  # radix_select unsorted: index order


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("k", [1, 8, 50, 256])
def test_logits_rows_8192_x_50257(torch, strategy, k):
    x = torch.randn(8192, 50257, device="cuda")
    got = nk.topk(x, k, strategy=strategy)
    assert_valid(torch, x, got, torch.topk(x, k), k)
    got = nk.topk(x.half(), k, largest=False, strategy=strategy)
    assert_valid(torch, x.half(), got, torch.topk(x.half(), k, largest=False), k)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "int64",
                                   "float16", "float32", "float64"])
def test_every_dtype_with_ties_against_a_stable_argsort(torch, strategy, dtype):
    rng = np.random.default_rng(0)
    if np.dtype(dtype).kind == "f":
        host = (rng.standard_normal((64, 3001)) * 20).astype(dtype)
    else:  # few distinct values: ties everywhere
        host = rng.integers(-40, 40, (64, 3001)).astype(dtype)
    if host.dtype.kind == "f":
        host[:, ::101] = np.nan
        host[:, ::97] = -0.0
        host[:, 1::89] = np.inf
    x = torch.from_numpy(host).cuda()
    for k in (1, 50, 256, 3001):
        if not nk.strategies.resolve("select", strategy).fits(host.shape[1], k):
            continue
        got = nk.topk(x, k, strategy=strategy)
        n = host.shape[1]
        idx = n - 1 - np.argsort(host[:, ::-1], axis=-1, kind="stable")[:, ::-1][:, :k]
        assert np.array_equal(got.indices.cpu().numpy(), idx)
        want = np.take_along_axis(host, idx, -1)
        assert np.array_equal(got.values.cpu().numpy().view(f"u{host.itemsize}"),
                              want.view(f"u{host.itemsize}"))


@pytest.mark.parametrize("strategy", [None, "compacted"])
def test_flat_row_compaction_with_ties_at_the_threshold(torch, strategy):
    """2^22 keys, one row: the first digit's bucket [2, 8) holds ~100 000 keys, the
    1000th largest is one of 4 195 ties at 3.5: the lowest indices win."""
    if strategy == "compacted":
        strategy = nk.RadixSelect(compact=1 << 20)
    _check_flat_ties(torch, strategy, seed=2)


def _check_flat_ties(torch, strategy, seed: int):
    """The top 1000 of 2^22 normal float32 keys with every 1000th set to 3.5 (ties at
    the threshold), sorted and in index order, exact against a stable argsort."""
    host = np.random.default_rng(seed).standard_normal(1 << 22).astype(np.float32)
    host[::1000] = 3.5
    x = torch.from_numpy(host).cuda()
    want = np.argsort(-host, kind="stable")[:1000]
    got = nk.topk(x, 1000, strategy=strategy)
    assert np.array_equal(got.indices.cpu().numpy(), want)
    assert np.array_equal(got.values.cpu().numpy(), host[want])
    got = nk.topk(x, 1000, sorted=False, strategy=strategy)
    assert np.array_equal(got.indices.cpu().numpy(), np.sort(want))  # index order


RADIX_VARIANTS = {**{f"d{bits}{'-fused' if fuse else ''}": (bits, fuse)
                     for bits in (8, 11) for fuse in (False, True)}, "d12": (12, None)}


@pytest.mark.parametrize("variant", sorted(RADIX_VARIANTS))
def test_radix_select_digit_widths_and_fused_count(torch, variant):
    """radix_select in 8-, 11- and 12-bit digits, its count a pass of its own or fused
    into the digit passes: a flat row of 2^22 with 4 195 ties at the threshold, rows of
    3001 with ties everywhere (16-, 32- and 64-bit keys), exact against a stable
    argsort."""
    bits, fuse = RADIX_VARIANTS[variant]
    strategy = nk.RadixSelect(digit_bits=bits, fuse_count=fuse)
    _check_flat_ties(torch, strategy, seed=3)
    rng = np.random.default_rng(3)
    for dtype in ("int16", "float32", "int64", "float64"):
        rows = rng.integers(-40, 40, (64, 3001)).astype(dtype)
        x = torch.from_numpy(rows).cuda()
        for k in (1, 2, 257, 3000, 3001):
            got = nk.topk(x, k, largest=False, strategy=strategy)
            idx = np.argsort(rows, axis=-1, kind="stable")[:, :k]
            assert np.array_equal(got.indices.cpu().numpy(), idx)


@pytest.mark.parametrize("capacity", [16, 2048])
def test_radix_block_select_refinement_and_ties_past_its_buffer(torch, capacity):
    """A small buffer forces the refinement passes (distinct values) and the tie path
    (a row of few values); rows around block multiples; k up to the buffer."""
    rng = np.random.default_rng(1)
    strategy = nk.RadixBlockSelect(capacity=capacity)
    for n in (1, 511, 512, 513, 4097, 50257):
        for host in (rng.standard_normal((33, n)).astype(np.float32),
                     rng.integers(-3, 3, (33, n)).astype(np.float32)):
            for k in sorted({min(n, 2), 1, min(n, capacity) - 1, min(n, capacity)} - {0}):
                x = torch.from_numpy(host).cuda()
                for largest in (True, False):
                    got = nk.topk(x, k, largest=largest, strategy=strategy)
                    o = np.argsort(-host if largest else host, axis=-1, kind="stable")[:, :k]
                    assert np.array_equal(got.indices.cpu().numpy(), o)
                    assert np.array_equal(got.values.cpu().numpy(),
                                          np.take_along_axis(host, o, -1))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_middle_axis_and_strided_input(torch, strategy):
    x = torch.randn(16, 4099, 8, device="cuda")
    got = nk.topk(x, 33, 1, strategy=strategy)
    assert_valid(torch, x, got, torch.topk(x, 33, dim=1), 33, dim=1)
    y = x[:, ::3, 2]
    got = nk.topk(y, 7, strategy=strategy)
    assert_valid(torch, y, got, torch.topk(y, 7), 7)


def test_cupy_in_cupy_out():
    cp = pytest.importorskip("cupy")
    x = cp.random.standard_normal((300, 5000), dtype=cp.float32)
    got = nk.topk(x, 10)
    assert isinstance(got.values, cp.ndarray) and isinstance(got.indices, cp.ndarray)
    want = -cp.sort(-x, axis=1)[:, :10]
    assert bool(cp.array_equal(got.values, want))
