"""mean, var, std, the nan-forms and logsumexp of device input, their finish folded into the
reduction's storing pass (numbakern/kernels/finishes.py): the answers NumPy's, the
bits those of the finish done apart, every reduce strategy, and a repeated call that
replays as one launch where a sum is one.

Under the simulator a block is 64 threads of 8 loads: 512 elements are one block
(one launch), 1000 and 1500 two and three (a second pass, which then finishes).
Tolerances: float32 results against float64 NumPy, rtol 1e-5 and atol 1e-6 (means)
or 1e-5 (variances); float16 rtol 2e-3; float64 (integer input) rtol 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest

import numbakern as nk
from numba import cuda
from numbakern.api.reductions import moments
from numbakern.runtime import replay, simcost
from numbakern.runtime.device import SIMULATOR
from numbakern.strategies import available

rng = np.random.default_rng(23)

FUNCTIONS = {
    "mean": (nk.mean, np.mean),
    "var": (nk.var, np.var),
    "std": (nk.std, np.std),
    "nanmean": (nk.nanmean, np.nanmean),
    "nanvar": (nk.nanvar, np.nanvar),
    "nanstd": (nk.nanstd, np.nanstd),
}


def _data(shape, dtype=np.float32):
    return (rng.standard_normal(shape) * 3 + 1).astype(dtype)


def _check(name, h, tol=1e-5, strategy=None, **kw):
    fn, ref = FUNCTIONS[name]
    got = fn(cuda.to_device(h), strategy=strategy, **kw).copy_to_host()
    want = ref(h.astype(np.float64), **kw)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129, 512, 1000, 1500])
@pytest.mark.parametrize("name", ["mean", "var", "nanstd"])  # each finish; the rest below
def test_sizes_around_warp_block_and_grid_boundaries(name, n):
    h = _data(n)
    if name.startswith("nan") and n > 2:
        h[::7] = np.nan
    got = _check(name, h)
    assert got.dtype == np.float32


@pytest.mark.parametrize("strategy", available("reduce"))
@pytest.mark.parametrize("name", ["mean", "var", "nanstd"])
def test_every_strategy_whole_array_and_axes(name, strategy):
    if name != "mean" and strategy.startswith("atomic_fold"):
        with pytest.raises(ValueError, match="3 fields"):  # no atomic for 3 fields
            FUNCTIONS[name][0](cuda.to_device(_data(40)), strategy=strategy)
        return
    _check(name, _data(1000), strategy=strategy)  # two blocks: a second pass
    _check(name, _data((40, 33)), axis=0, strategy=strategy)  # column partials
    _check(name, _data((2, 600)), axis=1, strategy=strategy)  # row partials: 2 pieces a row


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_axis_forms(name):
    _check(name, _data((8, 16)), axis=1)  # a warp per row, two blocks striding the rows
    _check(name, _data((64, 4)), axis=1)  # tiny rows: a thread per row
    _check(name, _data((9, 70)), axis=0, keepdims=True)
    _check(name, _data((4, 5, 6)), axis=(0, 2))
    _check(name, _data((4, 5, 6)), axis=None, keepdims=True)


def test_the_folded_mean_has_the_bits_of_the_sum_divided_apart():
    for n in [33, 512, 1000, 1500]:
        h = _data(n)
        x = cuda.to_device(h)
        total = nk.sum(x).copy_to_host()  # the same reduction, stored as a state
        want = np.float32(np.float64(total) / n)
        assert nk.mean(x).copy_to_host().tobytes() == np.asarray(want).tobytes()


# The whole array over two blocks (a second pass), column and row kernels; ddof only
# enters the finish's division, so each path takes two of the three, var one and std
# the next, and each ddof meets two paths.
DDOFS = [0, 1, 2.5]


@pytest.mark.parametrize("turn, shape, axis", [(0, (1000,), None), (1, (40, 33), 0),
                                               (2, (8, 16), 1)])
def test_the_folded_variance_has_the_bits_of_the_moments_finished_apart(turn, shape, axis):
    x = cuda.to_device(_data(shape))
    count, mean, m2 = (a.copy_to_host().astype(np.float64) for a in moments(x, axis=axis))
    var_ddof, std_ddof = DDOFS[turn], DDOFS[(turn + 1) % 3]
    got = nk.var(x, axis=axis, ddof=var_ddof).copy_to_host()
    var = (m2 / (count - var_ddof)).reshape(got.shape)
    assert np.array_equal(got, var.astype(np.float32))
    got = nk.std(x, axis=axis, ddof=std_ddof).copy_to_host()
    var = (m2 / (count - std_ddof)).reshape(got.shape)
    assert np.array_equal(got, np.sqrt(var).astype(np.float32))


def test_dtypes_as_numpy():
    ints = rng.integers(-50, 50, 1000).astype(np.int32)
    got = nk.mean(cuda.to_device(ints)).copy_to_host()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ints.mean(), rtol=1e-12)
    got = nk.var(cuda.to_device(ints), ddof=1).copy_to_host()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ints.var(ddof=1), rtol=1e-12)
    half = _data(1000, np.float16)  # accumulated in float32, as NumPy's
    got = nk.mean(cuda.to_device(half)).copy_to_host()
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, np.mean(half), rtol=2e-3)
    got = nk.mean(cuda.to_device(_data(100)), dtype=np.float64).copy_to_host()
    assert got.dtype == np.float64


def test_special_values_as_numpy():
    h = _data(300)
    h[5] = np.inf
    assert np.isnan(nk.var(cuda.to_device(h)).copy_to_host())  # inf - inf
    assert np.isinf(nk.mean(cuda.to_device(h)).copy_to_host())
    h[7] = np.nan
    assert np.isnan(nk.mean(cuda.to_device(h)).copy_to_host())
    constant = np.full((4, 3), 2.0, np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(  # ddof = count: M2 / 0, NaN for a constant slice
            nk.var(cuda.to_device(constant), axis=1, ddof=3).copy_to_host(),
            constant.var(axis=1, ddof=3))
        np.testing.assert_array_equal(
            nk.var(cuda.to_device(_data((4, 3))), axis=1, ddof=3).copy_to_host(),
            np.full(4, np.inf, np.float32))
    nans = np.full((3, 4), np.nan, np.float32)
    assert np.isnan(nk.nanmean(cuda.to_device(nans), axis=1).copy_to_host()).all()
    assert np.isnan(nk.nanvar(cuda.to_device(nans), axis=0).copy_to_host()).all()


def test_empty_input_and_out():
    empty = cuda.to_device(np.zeros((0, 4), np.float32))
    got = nk.mean(empty, axis=0).copy_to_host()  # no elements: NaN (not folded)
    assert got.shape == (4,) and np.isnan(got).all()
    assert nk.mean(empty, axis=1).copy_to_host().shape == (0,)
    h = _data((40, 33))
    for name in ["mean", "var", "nanstd"]:
        fn, ref = FUNCTIONS[name]
        out = cuda.device_array(33, np.float32)
        assert fn(cuda.to_device(h), axis=0, out=out) is out
        np.testing.assert_allclose(out.copy_to_host(), ref(h.astype(np.float64), axis=0),
                                   rtol=1e-5, atol=1e-5)


def _replayed_launches(call, x):
    """Launches a replayed call of ``call(x)`` makes (the second call), counted at the
    simulator's one door to a kernel (``simcost.guarded``)."""
    call(x)  # recorded
    counted = []
    guarded = simcost.guarded

    def counting(*args):
        counted.append(args[0])
        return guarded(*args)

    before = replay.counts["replayed"]
    simcost.guarded = counting
    try:
        result = call(x)
    finally:
        simcost.guarded = guarded
    assert replay.counts["replayed"] == before + 1
    return len(counted), result


@pytest.mark.skipif(not SIMULATOR, reason="counts launches at the simulator's door")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("shape, axis", [((500,), None), ((8, 16), 1), ((9, 70), 0)])
def test_a_repeated_call_replays_as_one_launch(name, shape, axis):
    fn, ref = FUNCTIONS[name]
    h = _data(shape)
    launches, result = _replayed_launches(lambda x: fn(x, axis=axis), cuda.to_device(h))
    assert launches == 1
    np.testing.assert_allclose(result.copy_to_host(), ref(h.astype(np.float64), axis=axis),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not SIMULATOR, reason="counts launches at the simulator's door")
@pytest.mark.parametrize("name", ["mean", "var"])
def test_a_two_block_call_replays_as_many_launches_as_the_sum(name):
    x = cuda.to_device(_data(1000))
    # keepdims: the simulator's 0-d sum is a host scalar, which never replays
    ours, _ = _replayed_launches(lambda a: FUNCTIONS[name][0](a, keepdims=True), x)
    sums, _ = _replayed_launches(lambda a: nk.sum(a, keepdims=True), x)
    assert ours == sums == 2


def test_where_on_device_counts_each_outputs_own_elements():
    h = _data((40, 33))
    mask = rng.random((40, 33)) < 0.6
    mask[:, 3] = False  # an output that keeps nothing: NaN
    for name in ["mean", "var", "nanmean", "nanstd"]:
        fn, ref = FUNCTIONS[name]
        got = fn(cuda.to_device(h), axis=0, where=cuda.to_device(mask)).copy_to_host()
        with np.errstate(divide="ignore", invalid="ignore"), \
                pytest.warns(RuntimeWarning):
            want = ref(h.astype(np.float64), axis=0, where=mask)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert np.isnan(got[3])


def test_the_folded_logsumexp_has_the_bits_of_the_states_finished_apart():
    # one block, one, two and three (a second pass) under the simulator; whole arrays,
    # columns and rows; a slice holding +inf, one holding NaN, one of only -inf
    from numbakern.kernels.elementwise import log_sum_exp_into
    from numbakern.strategies.online_softmax import ONLINE_SOFTMAX

    cases = [(_data(n), None) for n in (33, 512, 1000, 1500)]
    rows = _data((4, 70))
    rows[1, 3], rows[2, 9], rows[3] = np.inf, np.nan, -np.inf
    cases += [(rows, 1), (_data((40, 33)), 0)]
    for h, axis in cases:
        x = cuda.to_device(h)
        m, s = (cuda.to_device(np.ascontiguousarray(a.copy_to_host()).reshape(-1))
                for a in nk.reduce(x, ONLINE_SOFTMAX, axis=axis))
        want = cuda.device_array(m.shape[0], np.float32)
        log_sum_exp_into(m, s, want, cuda.default_stream())
        got = nk.logsumexp(x, axis=axis).copy_to_host()
        assert got.tobytes() == want.copy_to_host().tobytes(), (h.shape, axis)


@pytest.mark.parametrize("shape, axis", [((500,), None), ((8, 16), 1), ((9, 70), 0),
                                         ((1000,), None)])
def test_a_repeated_logsumexp_replays_as_many_launches_as_its_states(shape, axis):
    # the finish adds no launch to the reduction of the (max, sum) states (keepdims: the
    # simulator's 0-d results are host scalars, which never replay)
    from numbakern.strategies.online_softmax import ONLINE_SOFTMAX

    h = _data(shape).astype(np.float64)
    x = cuda.to_device(h)
    ours, result = _replayed_launches(
        lambda a: nk.logsumexp(a, axis=axis, keepdims=True), x)
    states, _ = _replayed_launches(
        lambda a: nk.reduce(a, ONLINE_SOFTMAX, axis=axis, keepdims=True), x)
    assert ours == states
    big = h.max(axis=axis, keepdims=True)
    want = big + np.log(np.exp(h - big).sum(axis=axis, keepdims=True))
    np.testing.assert_allclose(result.copy_to_host(), want, rtol=1e-12)
