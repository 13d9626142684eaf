"""topk against a NumPy stable-argsort reference and torch.topk, under the simulator.

The reference: the first ``k`` of a stable argsort in the wanted order (descending
for the largest, NaN first; ascending for the smallest, NaN last), so ties go to
the lower index. Every strategy the registry lists for "select" runs each case.
"""

import numpy as np
import pytest

import numbakern as nk
from numbakern.strategies import (BitonicSelect, BitonicSort, RadixBlockSelect, RadixSelect,
                                  SortSlice, WarpPrivatized, every, resolve)
from numbakern.strategies.radix_select import digit_layout

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64]
STRATEGIES = every("select", threads=32)
RNG = np.random.default_rng(19)


def values(dtype, shape, rng=RNG, spread=None):
    """Random values of ``dtype`` with many ties; floats with NaN, +-inf, +-0.0."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        x[::3] = x[0]  # ties
        x[1::7] = info.max if dtype.kind == "u" else info.min
        return x.reshape(shape)
    x = rng.integers(-8, 8, n).astype(dtype) if spread is None else \
        (rng.standard_normal(n) * spread).astype(dtype)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, np.nan, -0.0, 0.0], dtype)
    m = min(n, len(special))
    x[rng.permutation(n)[:m]] = special[:m]
    return x.reshape(shape)


def order(x, largest):
    """Stable argsort along the last axis: descending (NaN first) or ascending."""
    if not largest:
        return np.argsort(x, axis=-1, kind="stable")
    n = x.shape[-1]
    return n - 1 - np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]


def reference(x, k, axis=-1, largest=True):
    moved = np.moveaxis(x, axis, -1)
    idx = order(moved, largest)[..., :k]
    vals = np.take_along_axis(moved, idx, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


def case_id(v):
    """A test id: a dtype's name, a strategy's, the direction of a topk."""
    if isinstance(v, bool):
        return "largest" if v else "smallest"
    if isinstance(v, type):
        return np.dtype(v).name
    return digits_name(v) if any(v is s for s in DIGIT_STRATEGIES) else v.name


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


def check(x, k, strategy, axis=-1, largest=True, sorted=True):
    got = nk.topk(x, k, axis=axis, largest=largest, sorted=sorted, strategy=strategy)
    want_v, want_i = reference(np.asarray(x), k, axis, largest)
    values_, indices = np.asarray(got.values), np.asarray(got.indices)
    assert indices.dtype == np.int64 and indices.shape == want_i.shape
    if not sorted:  # the same set; put both in index order
        perm = np.argsort(indices, axis=axis, kind="stable")
        indices = np.take_along_axis(indices, perm, axis)
        values_ = np.take_along_axis(values_, perm, axis)
        perm = np.argsort(want_i, axis=axis, kind="stable")
        want_i = np.take_along_axis(want_i, perm, axis)
        want_v = np.take_along_axis(want_v, perm, axis)
    np.testing.assert_array_equal(indices, want_i)
    assert same_bits(values_, want_v), (values_, want_v)
    return got


# each dtype under two strategies, each strategy under six dtypes (signed, unsigned
# and float among them), in turn; radix_select's 64-bit keys: test_every_key_width.
# Under one of its strategies a dtype's 6 largest, under the other its 44 smallest
# (each strategy gets both)
@pytest.mark.parametrize("dtype, strategy, largest", [
    (d, STRATEGIES[(i + j) % len(STRATEGIES)], j == 0)
    for i, d in enumerate(DTYPES) for j in (0, 1)],
    ids=case_id)
def test_every_dtype(dtype, strategy, largest):
    x = values(dtype, (2, 45))
    if largest:
        check(x, 6, strategy, largest=True)
    else:
        check(x, 45 - 1, strategy, largest=False)


ROW_LENGTHS = [1, 31, 32, 33, 127, 128, 129]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_row_lengths_around_warps_and_blocks(n, strategy):
    x = values(np.float32, (2, n))
    # k at 1 and n, or at 2 and n - 1, by turns: each end on each side of a warp and
    # of a block
    ends = (1, n) if ROW_LENGTHS.index(n) % 2 == 0 else (2, n - 1)
    for k in sorted(set(ends)):
        check(x, k, strategy, largest=bool(k % 2))


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_k_zero_and_empty_inputs(strategy):
    x = values(np.float32, (3, 5))
    got = nk.topk(x, 0, strategy=strategy)
    assert got.values.shape == (3, 0) and got.values.dtype == np.float32
    assert got.indices.shape == (3, 0) and got.indices.dtype == np.int64
    got = nk.topk(np.zeros((0, 5), np.int16), 3, strategy=strategy)
    assert got.values.shape == (0, 3) and got.values.dtype == np.int16
    assert nk.topk(np.zeros(0), 0).indices.shape == (0,)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nan_inf_and_signed_zeros(dtype, strategy):
    """NaN is the largest (first for largest=True, last for largest=False); -0.0 and
    +0.0 are equal, taken in index order with their own bits."""
    x = np.array([0.0, np.nan, -0.0, 1.0, -np.inf, np.inf, 0.0, np.nan, -0.0, -1.0], dtype)
    got = check(x, 4, strategy)
    np.testing.assert_array_equal(got.indices, [1, 7, 5, 3])
    got = check(x, 6, strategy, largest=False)
    np.testing.assert_array_equal(got.indices, [4, 9, 0, 2, 6, 8])
    assert same_bits(got.values[2:], np.array([0.0, -0.0, 0.0, -0.0], dtype))
    check(x, 10, strategy, largest=False)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_all_equal_takes_the_lowest_indices(strategy):
    x = np.full((2, 70), 3, np.int32)
    for largest in (True, False):
        got = check(x, 9, strategy, largest=largest)
        np.testing.assert_array_equal(got.indices, np.tile(np.arange(9), (2, 1)))


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_axes_and_layouts(strategy):
    x = values(np.float32, (3, 4, 5), spread=10.0)
    # one spelling of the axis each: topk moves it last before any strategy runs
    # (every spelling under the default: test_dim_is_torchs_name_for_axis)
    check(x, 3, strategy, axis=(0, 1, -1, -3)[STRATEGIES.index(strategy) % 4])
    check(x[:, ::2, 1:], 2, strategy, axis=1, largest=False)  # strided
    check(x.transpose(2, 0, 1), 4, strategy, axis=-1)  # Fortran-like
    got = nk.topk(x, 5, axis=None, strategy=strategy)
    want_v, want_i = reference(x.reshape(-1), 5)
    np.testing.assert_array_equal(got.indices, want_i)
    assert same_bits(got.values, want_v)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_unsorted_returns_the_same_elements(strategy):
    x = values(np.int16, (3, 60))
    got = check(x, 17, strategy, sorted=False)
    if isinstance(strategy, RadixSelect):  # its stated order: ascending index
        assert np.all(np.diff(got.indices, axis=-1) > 0)
    else:  # the others stay sorted
        np.testing.assert_array_equal(got.indices, reference(x, 17)[1])


def test_radix_select_long_row_over_several_blocks():
    """A row longer than one block's share: the gather's chunk offsets and ties across
    chunks (every key equal to the threshold, taken by lowest index)."""
    x = values(np.int32, (1100,))
    x[::2] = 77  # many ties at the threshold
    x[1::50] = 2**30
    strategy = RadixSelect(threads=32)
    check(x, 40, strategy)
    for k in (1, 600):
        check(x, k, strategy, sorted=False)


def test_radix_select_compacts_a_long_row_after_the_first_pass(monkeypatch):
    """One row: the keys at or below the first digit's bucket copied out in index order,
    the selection finished on them, the indices mapped back (ties at the threshold
    across the two chunks taken by lowest index; NaN, inf among the candidates)."""
    calls = []
    compacted = RadixSelect._compacted
    monkeypatch.setattr(RadixSelect, "_compacted",
                        lambda self, job, *a: calls.append(job.n) or compacted(self, job, *a))
    strategy = RadixSelect(threads=32, compact=0,
                           sort=BitonicSort(threads=32, max_size=512))
    x = values(np.float32, (1100,), spread=1000.0)
    x[::7] = 5000.0  # 158 ties in the first pass's bucket [4096, 8192)
    for k, sorted_ in ((1, True), (40, False), (161, True)):
        check(x, k, strategy, sorted=sorted_)
    assert calls and all(n == 1100 for n in calls)
    check(-x, 40, strategy, largest=False)
    check(x.astype(np.float64).reshape(2, 550), 30, strategy)  # two rows: not compacted
    calls.clear()
    y = np.full(1100, 77, np.int32)  # the first bucket holds most of the row: not compacted
    y[1::50] = 2**30
    check(y, 40, strategy)
    assert calls == []
    with pytest.raises(ValueError, match="compact"):
        RadixSelect(compact=-1)


def test_k_beyond_the_block_select():
    x = values(np.float32, (1, 280), spread=3.0)
    # the winners sorted by a bitonic network (the simulator's radix sort is slow)
    check(x, 260, RadixSelect(threads=32, sort=BitonicSort(threads=32, max_size=512)))
    with pytest.raises(ValueError, match="k=260"):
        nk.topk(x, 260, strategy="bitonic_select")
    check(x, 259, None, largest=False, sorted=False)  # the default: radix_block_select
    check(x, 9, SortSlice(threads=32))
    with pytest.raises(ValueError, match="k=9 is more than the bitonic_select"):
        nk.topk(x, 9, strategy=BitonicSelect(max_k=8))


def test_bitonic_select_on_rows_in_the_worst_order():
    """Ascending rows for the largest: every element beats the bar, a merge a round."""
    x = np.arange(300, dtype=np.float32).reshape(2, 150)
    check(x, 50, BitonicSelect(threads=32))
    check(x[:, ::-1].copy(), 50, BitonicSelect(threads=32), largest=False)


@pytest.mark.parametrize("threads, items", [(96, 1), (96, 4), (32, 3), (128, 3)])
def test_bitonic_select_rounds_of_any_size(threads, items):
    """``threads * items`` need not be a power of two: the buffer the bitonic network
    sorts is one (it ran past its shared arrays before), in the worst order too."""
    x = values(np.float32, (2, 129))
    for k in (1, 5, 33):
        check(x, k, BitonicSelect(threads=threads, items=items), largest=bool(k % 2))
    ascending = np.arange(260, dtype=np.int16).reshape(2, 130)
    check(ascending, 17, BitonicSelect(threads=threads, items=items))


def test_bitonic_select_counts_its_buffers_count_in_shared_memory():
    """k = 1024 of float64 at 256 threads and 4 items: the list and buffer are 49152
    bytes, the whole of a block's static shared memory, and the count's word past it
    (ptxas refuses the kernel): refused by name before any launch."""
    with pytest.raises(ValueError, match="needs 49156 bytes of shared memory for k=1024"):
        nk.topk(np.zeros((1, 1100)), 1024,
                strategy=BitonicSelect(threads=256, max_k=1024, items=4))


def test_default_strategy_by_k_and_row_length():
    assert resolve("select", None, n=50257, k=50).name == "radix_block_select"
    assert resolve("select", None, n=50257, k=2048).name == "radix_block_select"
    assert resolve("select", None, n=50257, k=2049).name == "radix_select"
    assert resolve("select", None, n=2**17 + 1, k=8).name == "radix_select"
    assert resolve("select", None, n=2**28, k=1024).name == "radix_select"
    assert resolve("select", None, n=2**28, k=8).name == "radix_select"
    assert nk.strategies.available("select") == ["radix_block_select", "bitonic_select",
                                                 "radix_select", "sort_slice"]


def test_bad_arguments():
    x = values(np.float32, (2, 10))
    for k in (-1, 11):
        with pytest.raises(ValueError, match="k must be from 0 to the length of the axis"):
            nk.topk(x, k)
    for k in (1.5, True, None):
        with pytest.raises(TypeError, match="k must be an int"):
            nk.topk(x, k)
    with pytest.raises(np.exceptions.AxisError):
        nk.topk(x, 1, axis=2)
    with pytest.raises(ValueError, match="unknown select strategy 'heap'"):
        nk.topk(x, 1, strategy="heap")
    with pytest.raises(TypeError, match="sort strategy"):
        nk.topk(x, 1, strategy=nk.RadixSort())
    with pytest.raises(TypeError, match="largest"):
        nk.topk(x, 1, largest="yes")
    with pytest.raises(TypeError, match="sorted"):
        nk.topk(x, 1, sorted=1)
    with pytest.raises(TypeError, match="dtype"):
        nk.topk(x.astype(np.complex64), 1)
    with pytest.raises(ValueError, match="k=257"):
        nk.topk(np.zeros(300), 257, strategy=BitonicSelect())
    with pytest.raises(ValueError, match="max_k"):
        BitonicSelect(max_k=300)
    with pytest.raises(ValueError, match="privatized"):
        RadixSelect(histogram="global_atomic")


# radix_block_select with a small candidate buffer: the refinement passes (the buffer
# overflows after the first digit) and the tie path (every bit decided, the equal keys
# still overflowing it) run on rows the simulator can afford.
SMALL_BUFFER = RadixBlockSelect(threads=32, capacity=8)
AGGREGATING = RadixBlockSelect(threads=32, capacity=8, aggregate=True)


@pytest.mark.parametrize("n", [1, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129])
def test_radix_block_select_refines_on_rows_around_warps_and_blocks(n):
    x = values(np.float32, (2, n), spread=100.0)  # distinct values: refinement passes
    y = values(np.float32, (2, n))  # integers -8..7: many ties past every bit
    ks = sorted({1, 2, 7, 8, n - 1, n} & set(range(1, min(n, 8) + 1)))
    for k in ks:
        check(x, k, SMALL_BUFFER, largest=bool(k % 2))
    for k in sorted({ks[0], ks[-1]}):  # the ties at the smallest and the largest k
        check(y, k, SMALL_BUFFER, largest=not k % 2, sorted=False)
        if n in (33, 129):  # a warp's keys of one bin counted together
            check(y, k, AGGREGATING, largest=bool(k % 2))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_radix_block_select_small_buffer_every_dtype(dtype):
    x = values(dtype, (2, 70))
    check(x, 8, SMALL_BUFFER, largest=True)
    check(x, 5, SMALL_BUFFER, largest=False)


def test_radix_block_select_ties_nan_zeros_and_infinities_past_the_buffer():
    """More equal keys at the threshold than the buffer holds: the lowest indices win,
    NaN first for the largest, -0.0 and +0.0 one key, -inf last."""
    x = np.array([-0.0, 0.0] * 20 + [np.nan, -np.inf, np.nan, np.inf] * 3, np.float32)
    got = check(x, 8, SMALL_BUFFER)
    np.testing.assert_array_equal(got.indices, [40, 42, 44, 46, 48, 50, 43, 47])
    got = check(x, 8, SMALL_BUFFER, largest=False)
    np.testing.assert_array_equal(got.indices, [41, 45, 49, 0, 1, 2, 3, 4])
    assert same_bits(got.values[3:], np.array([-0.0, 0.0, -0.0, 0.0, -0.0], np.float32))
    check(np.full((3, 100), -np.inf), 8, SMALL_BUFFER, sorted=False)


def test_radix_block_select_bad_arguments():
    x = values(np.float32, (2, 20))
    with pytest.raises(ValueError, match="k=9 is more than the radix_block_select"):
        nk.topk(x, 9, strategy=SMALL_BUFFER)
    for capacity in (0, 1, 12, 16384):
        with pytest.raises(ValueError, match="capacity must be a power of two"):
            RadixBlockSelect(capacity=capacity)
    with pytest.raises(TypeError, match="capacity"):
        RadixBlockSelect(capacity=8.0)
    with pytest.raises(ValueError, match="items"):
        RadixBlockSelect(items=0)
    with pytest.raises(TypeError, match="aggregate"):
        RadixBlockSelect(aggregate="yes")
    with pytest.raises(ValueError, match="shared memory"):
        nk.topk(x.astype(np.float64), 2, strategy=RadixBlockSelect(threads=32,
                                                                   capacity=8192))
    assert not RadixBlockSelect().fits(2**31, 1)


def test_radix_block_select_threads_follow_short_rows():
    """Unless ``threads`` is given: a warp per ``32 * items`` keys, two warps at least,
    the default at most."""
    class OnAGpu(RadixBlockSelect):  # the GPU's default (the simulator's is 32)
        DEFAULT_THREADS = 512

    auto = OnAGpu(items=8)
    assert auto.threads_for(50257) == 512
    assert auto.threads_for(100) == 64
    assert auto.threads_for(32 * 8 * 5 + 1) == 192
    assert RadixBlockSelect(threads=256).threads_for(100) == 256


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_torch_tensors_in_tensors_out_as_torch_topk(strategy):
    """Values equal torch.topk's exactly; indices too, on distinct values."""
    x = torch.randn(2, 97, dtype=torch.float64)
    x[0, 5] = float("nan")
    for largest in (True, False):
        got = nk.topk(x, 7, 1, largest=largest, strategy=strategy)
        want = torch.topk(x, 7, dim=1, largest=largest)
        assert type(got).__name__ == "TopK"
        assert isinstance(got.values, torch.Tensor) and isinstance(got.indices, torch.Tensor)
        assert got.indices.dtype == torch.int64
        torch.testing.assert_close(got.values, want.values, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(got.indices, want.indices)
    ties = torch.tensor([[1, 3, 3, 2, 3, 0]], dtype=torch.int32)
    got = nk.topk(ties, 2, strategy=strategy)
    assert torch.equal(got.values, torch.topk(ties, 2).values)
    assert torch.equal(got.indices, torch.tensor([[1, 2]]))  # ties: lower index first


def test_k_as_a_zero_d_integer_tensor_or_array_as_torch_takes_it():
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0])
    want = nk.topk(x, 2)
    for k in (np.array(2), torch.tensor(2)):
        got = nk.topk(x, k)
        assert np.array_equal(got.values, want.values)
        assert np.array_equal(got.indices, want.indices)
    with pytest.raises(TypeError, match="k must be an int"):
        nk.topk(x, np.array(2.0))


def test_dim_is_torchs_name_for_axis():
    import torch

    x = values(np.float32, (3, 4, 5))
    for dim in (0, 1, -1, -3):
        got, want = nk.topk(x, 2, dim=dim), torch.topk(torch.from_numpy(x), 2, dim=dim)
        ref_values, ref_indices = reference(x, 2, dim)
        assert same_bits(got.values, ref_values)
        # torch's ties are open: -0.0 and +0.0 may come in another order there
        np.testing.assert_array_equal(got.values, want.values.numpy())
        np.testing.assert_array_equal(got.indices, ref_indices)
    t = torch.from_numpy(x)
    got = nk.topk(t, 3, dim=1, largest=False)
    assert isinstance(got.values, torch.Tensor)
    np.testing.assert_array_equal(got.values.numpy(),
                                  torch.topk(t, 3, dim=1, largest=False).values.numpy())
    for axis in (-1, 0, None):  # an explicit axis=-1 is an axis given
        with pytest.raises(TypeError, match="not both"):
            nk.topk(x, 1, axis, dim=0)
        with pytest.raises(TypeError, match="not both"):
            nk.topk(x, 1, axis=axis, dim=0)
    with pytest.raises(np.exceptions.AxisError):
        nk.topk(x, 1, dim=3)


@pytest.mark.parametrize("k", [0, 1])
@pytest.mark.parametrize("largest", [True, False])
def test_zero_dim_input_as_torch(k, largest):
    import torch

    for value in (3.5, np.nan, -0.0, -np.inf):
        t = torch.tensor(value, dtype=torch.float64)
        want = torch.topk(t, k, largest=largest)
        for dim in (-1, 0):
            got = nk.topk(t, k, dim=dim, largest=largest)
            assert got.values.shape == want.values.shape == ()
            assert got.indices.dtype == want.indices.dtype and got.indices.item() == 0
            assert same_bits(got.values.numpy(), want.values.numpy())
        got = nk.topk(np.array(value, np.float32), k, largest=largest)
        assert isinstance(got.values, np.ndarray) and got.values.shape == ()
        assert got.values.dtype == np.float32 and got.indices.dtype == np.int64
        assert same_bits(got.values, np.float32(value)) and got.indices == 0
    # axis=None flattens, as for any input: shape (k,)
    assert nk.topk(np.array(7), k, axis=None).values.shape == (k,)
    big = nk.topk(np.array(2.5, ">f8"), k, largest=largest)  # byte order kept, as sort's
    assert big.values.dtype == np.dtype(">f8") and big.values == 2.5


def test_zero_dim_input_refusals():
    import torch

    x = np.array(2.0)
    for k in (2, -1):
        with pytest.raises(RuntimeError):
            torch.topk(torch.tensor(2.0), k)  # torch refuses these too
        with pytest.raises(ValueError, match="k must be 0 or 1 for a 0-d x"):
            nk.topk(x, k)
    with pytest.raises(TypeError, match="k must be an int"):
        nk.topk(x, 1.0)
    for axis in (1, -2):
        with pytest.raises(IndexError, match="0-d x"):  # AxisError, as torch's IndexError
            nk.topk(x, 1, axis=axis)


# --- radix_select's digit widths (digit_bits 8, 11 or 12) and its count fused into the digit
# passes (fuse_count): every key width, k at 1, 2, n-1 and n, ties across chunks, NaN and
# signed zeros, rows decided at different passes, rows around warp and block sizes.

#: 8- and 11-bit digits, the count fused or a pass of its own (the fused one on any
#: chunk: its automatic rule wants longer chunks than the simulator can afford), and
#: 12-bit digits with the count fused
DIGIT_STRATEGIES = [RadixSelect(threads=32, digit_bits=bits, fuse_count=fuse)
                    for bits in (8, 11) for fuse in (False, True)] + \
    [RadixSelect(threads=32, digit_bits=12, fuse_count=True)]


def digits_name(strategy):
    return f"d{strategy.digit_bits}{'-fused' if strategy.fuse_count else ''}"


@pytest.mark.parametrize("width, bits, layout", [
    (32, 11, [(21, 11), (10, 11), (0, 10)]),
    (32, 8, [(24, 8), (16, 8), (8, 8), (0, 8)]),
    (64, 11, [(53, 11), (42, 11), (31, 11), (20, 11), (9, 11), (0, 9)]),
    (32, 12, [(20, 12), (8, 12), (0, 8)]),
    (64, 12, [(52, 12), (40, 12), (28, 12), (16, 12), (4, 12), (0, 4)]),
    (64, 8, [(56 - 8 * p, 8) for p in range(8)]),
    (16, 11, [(5, 11), (0, 5)]),
    (8, 11, [(0, 8)]),
    (8, 8, [(0, 8)]),
])
def test_digit_layout(width, bits, layout):
    assert digit_layout(width, bits) == layout
    assert sum(b for _, b in layout) == width and max(b for _, b in layout) <= bits


KEY_DTYPES = [np.bool_, np.int8, np.float16, np.uint16, np.float32, np.int64, np.float64]


# Each key width under two digit strategies, each strategy under two or more widths, in
# turn (every pair was 35 cases: simulator time); under one of its two strategies a
# width's 6 largest, under the other its 44 smallest unsorted (each strategy gets both)
@pytest.mark.parametrize("dtype, strategy, largest", [
    (d, DIGIT_STRATEGIES[(i + j) % len(DIGIT_STRATEGIES)], j == 0)
    for i, d in enumerate(KEY_DTYPES) for j in (0, 2)], ids=case_id)
def test_every_key_width(dtype, strategy, largest):
    x = values(dtype, (2, 45))
    if largest:
        check(x, 6, strategy)
    else:
        check(x, 44, strategy, largest=False, sorted=False)


DIGIT_ROW_LENGTHS = [1, 31, 32, 33, 63, 64, 65, 127, 128, 129]


# each length under one of the 8- and 11-bit fused digits, by turns (both sides of
# a warp and of a block for each)
@pytest.mark.parametrize("n, strategy", [
    (n, DIGIT_STRATEGIES[1::2][i % 2]) for i, n in enumerate(DIGIT_ROW_LENGTHS)],
    ids=lambda v: str(v) if isinstance(v, int) else digits_name(v))
def test_row_lengths_and_k_at_the_ends(n, strategy):
    x = values(np.float32, (2, n), spread=100.0)
    # k at 1 and n, or at 2 and n - 1, two lengths each in turn (both pairs under
    # each strategy)
    ends = (1, n) if DIGIT_ROW_LENGTHS.index(n) // 2 % 2 == 0 else (2, n - 1)
    for k in sorted(set(ends)):
        check(x, k, strategy, largest=bool(k % 2), sorted=k != 2)


@pytest.fixture
def many_chunks(monkeypatch):
    """Rows over several blocks under the simulator (which fills its device with 2):
    8 blocks, each at least 4 keys a thread."""
    import numbakern.strategies.radix_select as radix

    monkeypatch.setattr(radix, "max_resident_blocks", lambda threads: 8)
    monkeypatch.setattr(radix, "ITEMS", 4)


# 8-bit digits counted apart and 11-bit fused (the default): the other widths' passes
# and counts are checked by the tests around this one (simulator time)
@pytest.mark.parametrize("strategy", DIGIT_STRATEGIES[::3], ids=digits_name)
def test_ties_across_chunks_and_rows_decided_at_different_passes(strategy, many_chunks):
    """Rows of 1100 keys, 4 blocks each (32 threads): row 0 has many keys equal to the
    threshold spread over the chunks (every pass runs; the fused counts come from the
    last); row 1 distinct values, decided before its last pass. One row: 8 blocks."""
    x = values(np.int32, (2, 1100))
    x[0, ::2] = 77
    x[0, 1::50] = 2**30
    x[1] = np.random.default_rng(5).permutation(1100) * 3001 - 1_000_000
    # each k one way, the other way under the other strategy (600 unsorted: the
    # simulator's radix sort of them is slow)
    first = DIGIT_STRATEGIES.index(strategy) == 0
    for k, largest in ((1, first), (40, not first), (600, first)):
        check(x, k, strategy, largest=largest, sorted=k == (40 if largest else 1))
    got = check(x[:1], 60, strategy, sorted=False)  # the flat case, one row
    assert np.all(np.diff(got.indices) > 0)  # unsorted: index order
    check(x[1:], 60, strategy, largest=False, sorted=False)


@pytest.mark.parametrize("chunks", [1, 31, 32, 33, 70])
def test_chunk_offsets_scan_over_several_rounds(chunks):
    """Step 4b: each row's chunk counts (below, equal) into exclusive offsets, a block a
    row in rounds of 32 chunks."""
    from numba import cuda

    from numbakern.kernels.sort_keys import build_to_key
    from numbakern.strategies.radix_select import _Kernels

    strategy = RadixSelect(threads=32)
    kern = _Kernels(32, strategy.counter, build_to_key(np.dtype(np.float32), True), 32,
                    2048)
    counts = RNG.integers(0, 1000, (3, chunks, 2)).astype(np.int64)
    offsets = cuda.to_device(counts.reshape(-1))
    kern.scan_chunks[3, 32](offsets, chunks)
    got = offsets.copy_to_host().reshape(3, chunks, 2)
    np.testing.assert_array_equal(got, np.cumsum(counts, axis=1) - counts)


@pytest.mark.parametrize("strategy", DIGIT_STRATEGIES, ids=digits_name)
def test_nan_inf_and_signed_zeros_over_several_chunks(strategy):
    x = values(np.float32, (1100,), spread=3.0)
    x[::97] = np.nan
    x[5::89] = -0.0
    x[7::83] = 0.0
    x[9::301] = np.inf
    # the NaNs and infinities, or those and some of the largest numbers, by turns
    check(x, (13, 30)[DIGIT_STRATEGIES.index(strategy) % 2], strategy)
    zeros = np.tile(np.float64([0.0, -0.0, 1.0, -0.0, np.nan, 0.0]), 100)
    got = check(zeros, 250, strategy, largest=False)  # the zeros in index order
    assert np.array_equal(np.signbit(got.values[:8]), np.signbit(zeros[[0, 1, 3, 5, 6, 7,
                                                                           9, 11]]))


def test_defaults_and_bad_arguments():
    assert RadixSelect().digit_bits == 11 and RadixSelect().fuse_count is None
    # per-warp counters of 8 warps hold 1536 bins: 8-bit digits, unless asked for 11
    assert RadixSelect(threads=256, histogram="warp_privatized").digit_bits == 8
    assert RadixSelect(threads=64, histogram=WarpPrivatized(threads=64)).digit_bits == 11
    with pytest.raises(ValueError, match=r"2048 bins.*: use a smaller digit_bits \(8\), "):
        RadixSelect(threads=256, histogram="warp_privatized", digit_bits=11)
    # 3 warps' counters of 4096 bins are 49152 bytes, the whole of it: the histogram
    # kernel's own word does not fit beside them (ptxas refused it at launch)
    with pytest.raises(ValueError, match=r"needs 49156 bytes of shared memory for 4096 bins"
                                         r".*: use a smaller digit_bits \(8 or 11\), fewer "):
        RadixSelect(threads=96, histogram="warp_privatized", digit_bits=12)
    assert RadixSelect(threads=96, histogram="warp_privatized").digit_bits == 11
    for bad in (9, 13, 16, 0):
        with pytest.raises(ValueError, match="digit_bits must be 8, 11 or 12"):
            RadixSelect(digit_bits=bad)
    for bad in ("11", 11.0, True):
        with pytest.raises(TypeError, match="digit_bits must be an int"):
            RadixSelect(digit_bits=bad)
    with pytest.raises(TypeError, match="fuse_count must be True or False"):
        RadixSelect(fuse_count=1)
    assert RadixSelect(digit_bits=8).key != RadixSelect().key
    assert RadixSelect(fuse_count=True).key != RadixSelect().key
    assert "digit_bits=8" in repr(RadixSelect(digit_bits=8))


def test_warp_privatized_counters_in_11_bit_digits():
    strategy = RadixSelect(threads=32, histogram=WarpPrivatized(threads=32), digit_bits=11,
                           fuse_count=True)
    x = values(np.float32, (3, 70), spread=10.0)
    check(x, 5, strategy)
    check(x, 69, strategy, largest=False, sorted=False)
    assert nk.topk(x, 0, strategy=strategy).values.shape == (3, 0)


def test_sort_slice_leaves_the_sorts_threads_to_the_sort(monkeypatch):
    """Without ``threads`` the sort takes its own default (the radix sort's tile shape
    by key width); with them, the sort takes them too."""
    from numbakern.strategies import sort_slice

    asked, real = [], sort_slice.resolve

    def spy(*args, **kwargs):
        asked.append(kwargs.get("threads"))
        return real(*args, **kwargs)

    monkeypatch.setattr(sort_slice, "resolve", spy)
    x = values(np.float32, (1, 40), spread=3.0)
    check(x, 5, SortSlice())
    check(x, 5, SortSlice(threads=64))
    assert asked == [None, 64]
    assert SortSlice().key != SortSlice(threads=SortSlice().threads).key


def test_radix_select_takes_a_histogram_objects_threads_where_it_gives_none():
    x = np.random.default_rng(4).standard_normal(300).astype(np.float32)
    s = nk.RadixSelect(histogram=nk.WarpPrivatized(threads=32))
    assert s.threads == 32
    assert nk.RadixSelect(histogram=nk.WarpPrivatized(threads=32), sort="bitonic") \
        .sorter.threads == 32  # a named sort of the winners takes them too
    values, indices = nk.topk(x, 5, strategy=s)
    np.testing.assert_array_equal(indices, np.argsort(-x, kind="stable")[:5])
    with pytest.raises(ValueError, match="the histogram strategy has 32 threads, the select 64"):
        nk.RadixSelect(threads=64, histogram=nk.WarpPrivatized(threads=32))
