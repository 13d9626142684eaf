"""A user's three-field op on a real GPU (marked `gpu`; skipped under the simulator):
the generated N-field kit (tuple-of-arrays handles, shared and inlined local storage,
look-back words) compiles for the device and agrees with NumPy at sizes past a tile,
under every reduce and scan strategy the registry lists."""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu


@nk.op(identity=(np.inf, -np.inf, 0.0), fields=3, map=lambda v, i: (v, v, v))
def min_max_sum(a0, a1, a2, b0, b1, b2):
    lo = a0 if a0 < b0 else b0
    hi = a1 if a1 > b1 else b1
    return lo, hi, a2 + b2


def _data(shape):
    return np.random.default_rng(0).integers(-1000, 1000, size=shape).astype(np.float64)


@pytest.mark.parametrize("strategy", [s for s in nk.strategies.every("reduce")
                                      if not isinstance(s, nk.AtomicFold)], ids=repr)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reduce_three_fields(strategy, axis):
    x = _data((3000, 1001))
    lo, hi, total = nk.reduce(x, min_max_sum, axis=axis, strategy=strategy)
    np.testing.assert_array_equal(lo, x.min(axis=axis))
    np.testing.assert_array_equal(hi, x.max(axis=axis))
    np.testing.assert_array_equal(total, x.sum(axis=axis))  # integers: exact in float64


@pytest.mark.parametrize("strategy", nk.strategies.every("scan"), ids=repr)
@pytest.mark.parametrize("shape,axis", [(((1 << 22) + 7,), None), ((300, 5001), 1),
                                        ((64, 20), 1)])
def test_associative_scan_three_fields(strategy, shape, axis):
    x = _data(shape)
    lo, hi, total = nk.associative_scan(x, min_max_sum, axis=axis, strategy=strategy)
    ax = -1
    np.testing.assert_array_equal(lo, np.minimum.accumulate(x, axis=ax))
    np.testing.assert_array_equal(hi, np.maximum.accumulate(x, axis=ax))
    np.testing.assert_array_equal(total, np.cumsum(x, axis=ax))


def test_var_three_fields_every_strategy_on_device_input():
    cp = pytest.importorskip("cupy")
    h = np.random.default_rng(1).standard_normal((1 << 20) + 3) * 3 + 1e4
    x = cp.asarray(h)
    for strategy in nk.strategies.every("reduce"):
        if isinstance(strategy, nk.AtomicFold):
            continue
        np.testing.assert_allclose(float(nk.var(x, strategy=strategy)), h.var(), rtol=1e-9)


@nk.op(identity=0.0, map=lambda v, i: v * i)
def index_weighted_sum(a, b):
    return a + b


@pytest.mark.parametrize("strategy", [None, *nk.strategies.every("scan")], ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_users_map_gets_each_elements_index_at_gpu_sizes(strategy, dtype):
    """A map that reads its index gets np.argmax's index in reduce (rows, columns,
    the whole array) and the position along the axis in a scan, whose default tile
    reads 16-byte vectors where the map reads none."""
    x = np.random.default_rng(2).integers(0, 4, size=(257, 4099)).astype(dtype)
    rows, cols = np.indices(x.shape)
    exact = x.astype(np.float64)
    if strategy is None:  # the reductions once
        for axis, index in ((None, rows * x.shape[1] + cols), (0, rows), (1, cols)):
            np.testing.assert_array_equal(
                nk.reduce(exact, index_weighted_sum, axis=axis),
                np.sum(exact * index, axis=axis))
    got = nk.associative_scan(x, index_weighted_sum, axis=1, dtype=np.float64,
                              strategy=strategy)
    np.testing.assert_array_equal(got, np.cumsum(exact * cols, axis=1))
