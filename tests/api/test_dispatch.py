"""The public functions' door (numbakern/api/_dispatch.py): which arguments pass as
they are, and which go to Dask or to the translation of foreign arrays."""

from __future__ import annotations

import numpy as np
import pytest

import numbakern as nk
from numbakern.api import _dispatch


def test_plain_arguments_pass_as_they_are():
    for a in (1, 2.5, None, "sum", (0, 1), [0], np.arange(3.0), np.dtype(np.float32),
              np.float32):
        assert _dispatch._plain(a)
    assert np.ndarray not in _dispatch._PLAIN  # arrays are decided by their dtype


def test_bfloat16_torch_and_dask_arguments_are_not_plain():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    bf16 = np.ones(3, ml_dtypes.bfloat16)
    for a in (bf16, bf16.dtype, torch.ones(3), torch.float32, da.ones(3)):
        assert not _dispatch._plain(a)
    assert _dispatch._plain(np.ones(3, np.float16))  # the same type, another dtype


def test_leading_arguments_are_taken_by_their_own_names():
    """Every public function takes its arrays by the names its signature gives them,
    as keywords too, the first one included (the wrappers around it name it ``x``)."""
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((4, 7))
    y = nk.softmax(logits)
    dy = rng.standard_normal((4, 7))
    want = nk.softmax_backward(y, dy)
    np.testing.assert_array_equal(nk.softmax_backward(y=y, dy=dy), want)
    np.testing.assert_array_equal(nk.softmax_backward(dy=dy, y=y), want)
    np.testing.assert_array_equal(nk.softmax_backward(y, dy=dy), want)
    np.testing.assert_array_equal(nk.log_softmax_backward(y=np.log(y), dy=dy),
                                  nk.log_softmax_backward(np.log(y), dy))
    target = np.array([0, 3, 6, 1])
    assert nk.cross_entropy(logits=logits, target=target) == nk.cross_entropy(logits, target)
    keys, values = np.array([1, 1, 2, 2, 2]), np.arange(5.0)
    want = nk.scan_by_key(keys, values)
    for got in (nk.scan_by_key(keys=keys, x=values), nk.scan_by_key(keys, x=values),
                nk.scan_by_key(x=values, keys=keys)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(nk.segmented_sort(keys=np.array([3, 1, 2]),
                                                    offsets=np.array([0, 3])), [1, 2, 3])
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'y'"):
        nk.softmax_backward(dy=dy)


def test_initial_and_where_are_taken_by_position_as_numpys():
    """NumPy's sum, prod, max, min and their nan forms take (axis, [dtype,] out,
    keepdims, initial, where) by position; so do numbakern's."""
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]])
    mask = x > 0
    for name in ("sum", "prod", "nansum", "nanprod"):
        want = getattr(np, name)(x, 1, None, None, False, 2.0, mask)
        np.testing.assert_array_equal(getattr(nk, name)(x, 1, None, None, False, 2.0, mask),
                                      want)
    for name in ("max", "min", "nanmax", "nanmin"):
        want = getattr(np, name)(x, 1, None, False, 2.0, mask)
        np.testing.assert_array_equal(getattr(nk, name)(x, 1, None, False, 2.0, mask), want)


def test_torch_named_functions_take_dim_for_axis():
    """softmax and its kin, cummax, cummin and logcumsumexp take torch's dim= as axis=,
    as topk does; both given is a TypeError naming the function."""
    x = np.random.default_rng(5).standard_normal((3, 4))
    dy = np.ones_like(x)
    for name in ("softmax", "log_softmax", "cummax", "cummin", "logcumsumexp"):
        fn = getattr(nk, name)
        for axis in (0, 1, -1):
            got, want = fn(x, dim=axis), fn(x, axis=axis)
            for g, w in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                np.testing.assert_array_equal(g, w)
        with pytest.raises(TypeError, match=f"{name}: give the axis as axis= or as"):
            fn(x, axis=0, dim=0)
    for name in ("cummax", "cummin", "logcumsumexp"):  # a given None is given, too
        with pytest.raises(TypeError, match=f"{name}: give the axis as axis= or as"):
            getattr(nk, name)(x, axis=None, dim=1)
        got = getattr(nk, name)(x)  # the default: flattened
        assert np.shape(got if name == "logcumsumexp" else got.values) == (x.size,)
    y = nk.softmax(x, dim=0)
    for name in ("softmax_backward", "log_softmax_backward"):
        fn = getattr(nk, name)
        np.testing.assert_array_equal(fn(y, dy, dim=0), fn(y, dy, axis=0))
        with pytest.raises(TypeError, match=f"{name}: give the axis"):
            fn(y, dy, -1, dim=0)


def test_cross_entropy_takes_torchs_weight_third():
    logits = np.random.default_rng(9).standard_normal((5, 4))
    target, weight = np.array([0, 3, 1, 1, 2]), np.array([1.0, 2.0, 0.5, 3.0])
    assert nk.cross_entropy(logits, target, weight) == \
        nk.cross_entropy(logits, target, weight=weight)


def test_values_out_of_int64_input_is_a_values_out():
    """nanmax of int64 input into a float out is NumPy's cast of the values; the index
    rule (any integer out) is for index outs alone."""
    x = np.array([[3, 1, 2], [5, 4, 6]], np.int64)
    for name in ("nanmax", "nanmin"):
        want = getattr(np, name)(x, axis=1, out=np.zeros(2))
        np.testing.assert_array_equal(getattr(nk, name)(x, axis=1, out=np.zeros(2)), want)
        with pytest.raises(TypeError, match="same_kind"):
            getattr(nk, name)(x, axis=1, out=np.zeros(2, np.uint8))


def test_logcumsumexp_writes_a_host_out():
    x = np.array([[0.0, 1.0, 2.0, 3.0], [5.0, -1.0, 0.5, 2.0]])
    out = np.zeros_like(x)
    assert nk.logcumsumexp(x, 1, out=out) is out
    np.testing.assert_allclose(out, np.logaddexp.accumulate(x, axis=1), rtol=1e-14)
