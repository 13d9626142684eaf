"""Segmented sorts (numbakern/api/segment_sort.py) against ``np.sort(kind="stable")``
per segment: every dtype the sort takes, NaN and -0.0 where NumPy puts them (bits
compared), values carried, descending as torch's stable descending sort, both sort
strategies, host and device offsets, bad offsets."""

import numpy as np
import pytest
import torch
from numba import cuda

import numbakern as nk

LENGTHS = [0, 1, 31, 32, 33, 0, 5, 2, 0]
RNG = np.random.default_rng(23)


def offsets_of(lengths, start=0):
    return np.concatenate([[start], start + np.cumsum(lengths)]).astype(np.int64)


def reference_order(keys, offsets, descending=False):
    """The stable order of each segment, as indices into ``keys``: NumPy's order, or
    for ``descending`` the reversed order of values with equal ones in input order."""
    order = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        seg = keys[a:b]
        if descending:  # rank the distinct values (NaNs one value, -0.0 == 0.0), flip
            _, rank = np.unique(seg, return_inverse=True)
            local = np.argsort(-rank.reshape(-1), kind="stable")
        else:
            local = np.argsort(seg, kind="stable")
        order.append(a + local)
    return np.concatenate(order) if order else np.zeros(0, np.int64)


def bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.itemsize}") if a.dtype != np.bool_ else a


def check(keys, offsets, values=None, descending=False, **kw):
    order = reference_order(keys, offsets, descending)
    got = nk.segmented_sort(keys, offsets, values, descending=descending, **kw)
    if values is None:
        got_keys = got
    else:
        got_keys, got_values = got
        np.testing.assert_array_equal(bits(got_values), bits(values[order]))
    assert got_keys.dtype == keys.dtype
    np.testing.assert_array_equal(bits(got_keys), bits(keys[order]))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64", "float16",
                                   "float32", "float64"])
def test_every_dtype_with_values(dtype):
    n = sum(LENGTHS)
    keys = (RNG.integers(-4, 5, n) * 7).astype(dtype)
    if keys.dtype.kind == "f":
        keys[::9] = np.nan
        keys[1::7] = -0.0
        keys[2::13] = -np.inf
    check(keys, offsets_of(LENGTHS), RNG.standard_normal(n).astype(np.float32))


def test_descending_is_torchs_stable_descending():
    keys = RNG.integers(0, 4, sum(LENGTHS)).astype(np.float32)
    keys[::5] = np.nan
    keys[1::6] = -0.0
    check(keys, offsets_of(LENGTHS), np.arange(keys.size), descending=True)
    t = torch.from_numpy(keys[1:32].copy())
    want = torch.sort(t, descending=True, stable=True)
    got = nk.segmented_sort(t, torch.tensor([0, 31]), torch.arange(31), descending=True)
    assert torch.equal(got[1], want.indices)


@pytest.mark.parametrize("strategy", ["bitonic", "radix"])
def test_both_strategies_many_segments(strategy):
    """300 segments need 16-bit segment indices (two radix passes)."""
    lengths = RNG.integers(0, 2, 300)
    offsets = offsets_of(lengths)
    keys = RNG.integers(0, 3, offsets[-1]).astype(np.int16)
    check(keys, offsets, np.arange(keys.size), strategy=strategy)


def test_one_segment_and_single_elements():
    keys = RNG.standard_normal(200)
    check(keys, np.array([0, 200]))
    check(keys, np.arange(201))


def test_big_endian_keys_and_values_keep_their_byte_order():
    """Results of ``keys``' and ``values``' dtypes, byte order and all, as
    ``np.sort`` keeps a big-endian array's (an empty span too)."""
    keys = np.array([3.0, -1.0, 2.0, 9.0, np.nan, 7.0], ">f8")
    values = np.arange(6, dtype=">i4")
    for offsets in ([0, 3, 6], [2, 2]):
        got_keys, got_values = nk.segmented_sort(keys, np.array(offsets), values)
        assert (got_keys.dtype.str, got_values.dtype.str) == (">f8", ">i4")
        lo, hi = offsets[0], offsets[-1]
        want = np.concatenate([np.sort(keys[a:b], kind="stable")
                               for a, b in zip(offsets[:-1], offsets[1:])])
        np.testing.assert_array_equal(got_keys, want[: hi - lo])
        order = np.concatenate([a + np.argsort(keys[a:b], kind="stable")
                                for a, b in zip(offsets[:-1], offsets[1:])])
        np.testing.assert_array_equal(got_values, values[order.astype(int)])
    assert nk.segmented_sort(keys.astype("<f8"), np.array([0, 6])).dtype.str == "<f8"
    torch = pytest.importorskip("torch")  # torch keys: tensors back, native
    got_keys, got_values = nk.segmented_sort(torch.tensor([3, 1, 2, 0]), np.array([0, 2, 4]),
                                             np.arange(4, dtype=">f4"))
    assert got_keys.tolist() == [1, 3, 0, 2] and got_values.tolist() == [1.0, 0.0, 3.0, 2.0]
    got_keys, got_values = nk.segmented_sort(cuda.to_device(np.array([3.0, 1.0])),
                                             np.array([0, 2]), np.arange(2, dtype=">f4"))
    assert got_values.copy_to_host().tolist() == [1.0, 0.0]  # a device array, as the keys


def test_the_result_covers_the_span_of_the_offsets():
    keys = np.array([9, 8, 7, 6, 5, 4, 3])
    np.testing.assert_array_equal(nk.segmented_sort(keys, np.array([1, 4, 6])),
                                  [6, 7, 8, 4, 5])
    assert nk.segmented_sort(keys, np.array([3])).shape == (0,)
    k, v = nk.segmented_sort(keys, np.array([2, 2]), keys * 1.5)
    assert k.shape == v.shape == (0,) and v.dtype == np.float64


def test_device_keys_and_offsets():
    keys = RNG.integers(0, 50, sum(LENGTHS)).astype(np.int32)
    offsets = offsets_of(LENGTHS)
    got = nk.segmented_sort(cuda.to_device(keys), cuda.to_device(offsets.astype(np.int32)))
    np.testing.assert_array_equal(got.copy_to_host(), keys[reference_order(keys, offsets)])
    with pytest.raises(ValueError, match=r"\(the length of keys\), but segment 1 runs"):
        nk.segmented_sort(keys, cuda.to_device(np.array([0, 5, 3, 20])))
    with pytest.raises(ValueError, match=r"\(the length of keys\), got 0 .. 1000000"):
        nk.segmented_sort(keys, cuda.to_device(np.array([0, 5, 10**6])))


def test_torch_tensors_in_tensors_out():
    keys = torch.tensor([3.0, 1.0, 2.0, 0.5, -1.0])
    k, v = nk.segmented_sort(keys, torch.tensor([0, 3, 5]), torch.arange(5))
    assert k.tolist() == [1.0, 2.0, 3.0, -1.0, 0.5] and v.tolist() == [1, 2, 0, 4, 3]


@pytest.mark.parametrize("offsets, match", [
    ([0, 3, 2, 10], r"offsets must not decrease, but offsets\[2\] = 2"),
    ([0, 11], r"offsets must lie in \[0, 10\] \(the length of keys\)"),
])
def test_bad_offsets_are_refused_by_name(offsets, match):
    with pytest.raises(ValueError, match=match):
        nk.segmented_sort(np.arange(10), np.array(offsets))


def test_bad_arguments():
    with pytest.raises(ValueError, match="keys must be 1-D"):
        nk.segmented_sort(np.zeros((2, 3)), np.array([0, 1]))
    with pytest.raises(ValueError, match="values must have the keys' length 10"):
        nk.segmented_sort(np.zeros(10), np.array([0, 10]), np.zeros(9))
    with pytest.raises(TypeError, match="keys must have a bool, integer or float"):
        nk.segmented_sort(np.zeros(3, complex), np.array([0, 3]))
    with pytest.raises(TypeError, match="values must have"):
        nk.segmented_sort(np.zeros(3), np.array([0, 3]), np.zeros(3, "U2"))
    with pytest.raises(TypeError, match="descending"):
        nk.segmented_sort(np.zeros(3), np.array([0, 3]), descending=1)
    with pytest.raises(TypeError, match="keys must be a 1-D array, got NoneType"):
        nk.segmented_sort(None, np.array([0, 1]))
    with pytest.raises(TypeError, match="values must be a 1-D array, got str"):
        nk.segmented_sort(np.zeros(2), np.array([0, 2]), values="ab")
    # bitonic sorts the whole span in one block: 257 keys of short segments say so
    keys = np.arange(257, dtype=np.float32)[::-1].copy()
    with pytest.raises(ValueError, match="does not take rows of 257 keys, and it sorts "
                                         "the span of all the segments as one row"):
        nk.segmented_sort(keys, np.array([0, 31, 32, 33, 65, 129, 257]),
                          strategy=nk.BitonicSort(max_size=256))  # (a GPU's takes more)
