"""A user's op of three fields through reduce and associative_scan, against NumPy, under
every block and grid strategy the registry lists: the state kit moves all N fields
through shuffles, shared memory, partials, look-back words and outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import numbakern as nk

REDUCE = nk.strategies.every("reduce", threads=32, blocks=2)
SCAN = nk.strategies.every("scan", threads=32)


@nk.op(identity=(np.inf, -np.inf, 0.0), fields=3, map=lambda v, i: (v, v, v))
def min_max_sum(a0, a1, a2, b0, b1, b2):
    lo = a0 if a0 < b0 else b0
    hi = a1 if a1 > b1 else b1
    return lo, hi, a2 + b2


def _welford(a0, a1, a2, b0, b1, b2):  # (count, mean, M2), Chan et al.'s merge
    n = a0 + b0
    if n == 0:
        return n, 0.0, 0.0
    delta = b1 - a1
    share = b0 / n
    return n, a1 + delta * share, a2 + b2 + delta * delta * a0 * share


#: an integer count field beside two float fields
WELFORD = nk.Op("welford", _welford, (0, 0.0, 0.0), fields=3, map=lambda v, i: (1, v, 0.0))


def _data(shape, seed=0):
    return np.random.default_rng(seed).integers(-50, 50, size=shape).astype(np.float64)


def _numpy_min_max_sum(x, axis):
    return x.min(axis=axis), x.max(axis=axis), x.sum(axis=axis)


@pytest.mark.parametrize("axis", [None, 1])
@pytest.mark.parametrize("strategy", REDUCE, ids=repr)
def test_reduce_three_fields_every_strategy(strategy, axis):
    x = _data((3, 45))
    if isinstance(strategy, nk.AtomicFold):  # refused at every size (one block too)
        for y in (np.arange(3.0), np.arange(10_000.0)):
            with pytest.raises(ValueError, match="atomic_fold cannot fold min_max_sum's "
                                                 "state of 3 fields"):
                nk.reduce(y, min_max_sum, strategy=strategy)
        return
    got = nk.reduce(x, min_max_sum, axis=axis, strategy=strategy)
    assert isinstance(got, tuple) and len(got) == 3
    for g, want in zip(got, _numpy_min_max_sum(x, axis)):
        assert np.asarray(g).dtype == np.float64
        np.testing.assert_array_equal(g, want)
    n, mean, m2 = nk.reduce(x, WELFORD, axis=axis, strategy=strategy)
    assert np.asarray(n).dtype == np.int64
    np.testing.assert_array_equal(n, np.full(np.shape(n), x.size // (3 if axis else 1)))
    np.testing.assert_allclose(mean, x.mean(axis=axis), rtol=1e-12)
    np.testing.assert_allclose(m2 / n, x.var(axis=axis), rtol=1e-12)


@pytest.mark.parametrize("axis", [None, 1])
@pytest.mark.parametrize("strategy", SCAN, ids=repr)
def test_associative_scan_three_fields_every_strategy(strategy, axis):
    x = _data((2, 70), seed=1)
    lo, hi, total = nk.associative_scan(x, min_max_sum, axis=axis, strategy=strategy)
    flat = x if axis is not None else x.ravel()
    ax = -1
    np.testing.assert_array_equal(lo, np.minimum.accumulate(flat, axis=ax))
    np.testing.assert_array_equal(hi, np.maximum.accumulate(flat, axis=ax))
    np.testing.assert_array_equal(total, np.cumsum(flat, axis=ax))
    n, mean, m2 = nk.associative_scan(x, WELFORD, axis=axis, strategy=strategy)
    counts = np.cumsum(np.ones_like(flat), axis=ax)
    np.testing.assert_array_equal(n, counts)
    np.testing.assert_allclose(mean, np.cumsum(flat, axis=ax) / counts, rtol=1e-12)
    squares = np.cumsum(flat ** 2, axis=ax) - np.cumsum(flat, axis=ax) ** 2 / counts
    np.testing.assert_allclose(m2, squares, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 65])
def test_three_fields_around_warp_sizes_and_exclusive(n):
    x = _data(n, seed=n)
    got = nk.reduce(x, min_max_sum)
    assert [float(g) for g in got] == [x.min(), x.max(), x.sum()]
    lo, hi, total = nk.associative_scan(x, min_max_sum, exclusive=True)
    np.testing.assert_array_equal(total, np.concatenate([[0.0], np.cumsum(x)[:-1]]))
    assert lo[0] == np.inf and hi[0] == -np.inf


def test_field_dtypes_come_from_the_identity_never_integer_for_a_float():
    got = nk.reduce(np.arange(5, dtype=np.int32), min_max_sum)
    assert [np.asarray(g).dtype for g in got] == [np.float64] * 3
    assert [float(g) for g in got] == [0.0, 4.0, 10.0]


def test_empty_and_bad_arguments():
    lo, hi, total = nk.reduce(np.zeros((2, 0)), min_max_sum, axis=1)
    assert lo.tolist() == [np.inf] * 2 and total.tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="out= and initial="):
        nk.reduce(np.ones(3), min_max_sum, initial=0.0)
    with pytest.raises(ValueError, match="fields must be an integer >= 1"):
        nk.Op("none", lambda: 0, 0, fields=0)
    with pytest.raises(TypeError, match=r"combine must take 6 arguments \(a0, a1, a2, b0, "
                                        r"b1, b2\), got 4"):
        nk.Op("short", lambda a0, a1, b0, b1: (a0, a1), (0, 0, 0), fields=3,
              map=lambda v, i: (v, v, v))
    with pytest.raises(ValueError, match=r"identity gives 2 field\(s\), the op has 3"):
        nk.Op("two", min_max_sum.combine, (0.0, 1.0), fields=3, map=lambda v, i: (v, v, v))
    pair = (np.zeros(3), np.zeros(3))
    with pytest.raises(TypeError, match=r"out must be a tuple of 3 arrays for this op"):
        nk.associative_scan(np.ones(3), min_max_sum, out=pair)
    with pytest.raises(TypeError, match=r"got the class <class 'numbakern.ops.Op'>"):
        nk.reduce(np.ones(3), nk.Op)
    with pytest.raises(TypeError, match=r"got the function <function _welford"):
        nk.reduce(np.ones(3), _welford)


@nk.op(identity=(-np.inf, 0.0), fields=2, map=lambda v, i: (v, 1.0))
def max_sumexp(a0, a1, b0, b1):
    m = a0 if a0 > b0 else b0
    if m == -np.inf:
        return m, a1 + b1
    return m, a1 * math.exp(a0 - m) + b1 * math.exp(b0 - m)


@pytest.mark.parametrize("strategy", ["two_pass/warp_shuffle", "atomic_fold/warp_shuffle"])
def test_reduce_takes_a_two_field_user_op(strategy):
    x = np.random.default_rng(2).standard_normal((3, 40))
    m, s = nk.reduce(x, max_sumexp, axis=1, strategy=strategy)
    np.testing.assert_array_equal(m, x.max(axis=1))
    np.testing.assert_allclose(m + np.log(s), np.logaddexp.reduce(x, axis=1), rtol=1e-12)


@nk.op(identity=(-math.inf, 0), fields=2, map=lambda v, i: (v, i),
       state_dtypes=(np.float64, np.int64), commutative=False)
def first_argmax(a0, a1, b0, b1):
    return (b0, b1) if b0 > a0 else (a0, a1)


@nk.op(identity=0.0, map=lambda v, i: v * i)
def index_weighted_sum(a, b):
    return a + b


def _c_order_index(shape, axes):
    """Each element's C-order index among ``axes``, as an array of ``shape``."""
    grids = np.indices(shape)
    index = np.zeros(shape, np.int64)
    for a in sorted(axes):
        index = index * shape[a] + grids[a]
    return index


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("strategy", REDUCE, ids=repr)
def test_a_users_map_gets_each_elements_index_among_the_reduced_axes(strategy, axis):
    """Found by a fresh-eyes helper: along an axis a user's map was given index 0 for
    every element (the whole-array path gave it the flat index), so an argmax built as
    an op found index 0 everywhere. The index is np.argmax's: the C-order position
    among the reduced axes, whatever the input's memory order."""
    shape = (3, 4, 5)
    x = np.random.default_rng(3).permutation(60).astype(np.float64).reshape(shape)
    axes = range(3) if axis is None else np.atleast_1d(axis) % 3
    index = _c_order_index(shape, tuple(axes))
    for y in (x, np.asfortranarray(x), x[::-1, :, ::-1].copy()[::-1, :, ::-1]):
        np.testing.assert_array_equal(  # (values permuted: a wrong index shows)
            nk.reduce(y, index_weighted_sum, axis=axis, strategy=strategy),
            np.sum(x * index, axis=axis))
        if strategy.needs_commutative or strategy.block.needs_commutative:
            continue  # (refuses a non-commutative op, and atomic_fold a pair)
        moved = np.moveaxis(y, tuple(axes), tuple(range(-len(axes), 0)))
        want = np.argmax(moved.reshape(*moved.shape[:3 - len(axes)], -1), axis=-1)
        np.testing.assert_array_equal(nk.reduce(y, first_argmax, axis=axis,
                                                strategy=strategy)[1], want)


def test_a_three_field_scan_with_finish_writes_one_output():
    """``finish(s0, s1, s2)`` turns each prefix state into one value (the running range
    here), stored in one output array."""
    ranged = nk.Op("running_range", min_max_sum.combine, (np.inf, -np.inf, 0.0), fields=3,
                   map=lambda v, i: (v, v, v), finish=lambda lo, hi, total: hi - lo)
    x = _data(70, seed=4)
    got = nk.associative_scan(x, ranged)
    assert not isinstance(got, tuple) and got.dtype == np.float64
    np.testing.assert_array_equal(got, np.maximum.accumulate(x) - np.minimum.accumulate(x))


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
def test_an_empty_three_field_scan_gives_three_arrays(shape):
    got = nk.associative_scan(np.zeros(shape), min_max_sum, axis=-1)
    assert isinstance(got, tuple) and len(got) == 3
    assert all(g.shape == shape and g.dtype == np.float64 for g in got)
