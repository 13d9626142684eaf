"""NumPy's ``where=`` on the reductions, against NumPy: masked-out elements load as the
op's identity in every kernel (``numbakern/kernels/axis_reduce.py``'s masked loads),
under every reduce strategy, along any axes, with broadcast and strided masks.

Tolerances: sums of float64 rtol 1e-12 (the tree's order differs from NumPy's pairwise
one), float32 rtol 1e-5, float16 rtol 1e-2 and atol 1e-4 (numbakern accumulates in
float32; NumPy's float16 products round each step, to subnormals); integers, bools,
max and min exactly.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime.device import SIMULATOR

REDUCE = nk.strategies.every("reduce", threads=32, blocks=2)
PLAIN = ["sum", "prod", "nansum", "nanprod", "any", "all", "mean", "nanmean", "var", "std",
         "nanvar", "nanstd"]
NEED_INITIAL = ["max", "min", "nanmax", "nanmin"]  # no identity: where= needs initial=
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 1e-2}


def _data(shape, dtype=np.float64, seed=0, nan=False):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, 4, shape).astype(dtype)
    x = (rng.standard_normal(shape) * 0.5 + 1.0).astype(dtype)  # prod stays finite
    if nan:
        x.flat[::7] = np.nan
    return x


def _mask(shape, seed=1, p=0.6):
    return np.random.default_rng(seed).random(shape) < p


def _kwargs(name, x):
    return {"initial": (np.inf if name.endswith("min") else -np.inf)
            if x.dtype.kind == "f" else 0} if name in NEED_INITIAL else {}


def _check(name, x, where, strategy=None, lanes=None, **kw):
    kw = {**_kwargs(name, x), **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = getattr(np, name)(x, where=where, **kw)
        got = getattr(nk, name)(x, where=where, strategy=strategy, lanes=lanes, **kw)
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if want.dtype.kind in "biu" or name in NEED_INITIAL:
        np.testing.assert_array_equal(got, want)
    else:
        atol = 1e-4 if want.dtype == np.float16 else 1e-12  # float16 prods: subnormals
        np.testing.assert_allclose(got, want, rtol=RTOL.get(want.dtype, 1e-12), atol=atol,
                                   equal_nan=True)


AXIS_FORMS = [(None, False), (-1, True), (1, False), ((0, 2), True), ((0, 1, 2), False)]


@pytest.mark.parametrize("name", PLAIN + NEED_INITIAL)
def test_every_function_over_axes_and_keepdims(name):
    """Three of the five axis forms a function, in turn: each form meets nine or ten
    of the sixteen functions."""
    x = _data((3, 4, 33), nan=name.startswith("nan"))
    where = _mask(x.shape)
    k = (PLAIN + NEED_INITIAL).index(name)
    for j in range(3):
        axis, keepdims = AXIS_FORMS[(k + j) % len(AXIS_FORMS)]
        _check(name, x, where, axis=axis, keepdims=keepdims)


BROADCAST = ["sum", "all", "mean", "nanmean", "var", "min", "nanmax"]


@pytest.mark.parametrize("name", BROADCAST)
def test_broadcast_masks(name):
    """Each mask form along one axis a function, the axes taken in turn across the
    functions: every (function, axis) and every (mask, axis) pair meets."""
    x = _data((6, 40), nan=name.startswith("nan"))
    axes = (None, 0, 1)
    for k, where in enumerate((_mask((6, 1)), _mask((1, 40)), _mask(40), np.True_,
                               np.False_, np.array(True), [[True, False] * 20])):
        _check(name, x, where, axis=axes[(k + BROADCAST.index(name)) % 3])


DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32,
          np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes(dtype):
    """Every function on every dtype, along all axes or the rows in turn (each
    function meets both on every other dtype)."""
    x = _data((5, 37), dtype)
    where = _mask((5, 37))
    for k, name in enumerate(("sum", "prod", "any", "all", "mean", "var", "max", "min")):
        if dtype == np.bool_ and name in ("max", "min"):
            continue
        _check(name, x, where, axis=(None, 1)[(k + DTYPES.index(dtype)) % 2])
    if np.dtype(dtype).kind == "f":
        for name in ("nansum", "nanmean", "nanvar", "nanmax"):
            _check(name, _data((5, 37), dtype, nan=True), where, axis=0)


@pytest.mark.parametrize("strategy", REDUCE, ids=repr)
def test_every_reduce_strategy(strategy):
    x = _data((3, 70))
    where = _mask(x.shape)
    # every kernel (whole array, rows, columns) at least once a strategy, and every
    # function along every axis over the strategies
    axes, shift = (None, 0, 1), REDUCE.index(strategy)
    for k, name in enumerate(("sum", "max", "mean", "any", "nanmax")):
        _check(name, x, where, strategy=strategy, axis=axes[(k + shift) % 3])
    for axis in (None, 0, 1):  # var's pieces fold differently along each
        try:
            _check("var", x, where, strategy=strategy, axis=axis, ddof=1)
        except ValueError as error:  # no atomic moves (mean, M2), where pieces must fold
            assert isinstance(strategy, nk.AtomicFold) and "cannot fold" in str(error)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 63, 64, 65, 127, 128, 129])
def test_sizes_around_warp_and_block_boundaries(n):
    x = _data((3, n), seed=n)
    where = _mask(x.shape, seed=n)
    for lanes, axis in ((None, None), (32, 1), (None, 1)):
        _check("sum", x, where, axis=axis, lanes=lanes)
    _check("min", x, where, axis=1, lanes=32 if n % 2 else None)  # each row kernel
    _check("sum", x.T, where.T, axis=0)  # the column kernel
    _check("mean", x.T, where.T, axis=0)


def _two_axes(k):
    """Two of the axis forms None, 0 and 1, the ``k``-th pair in turn."""
    return (None, 0, 1)[k % 3], (None, 0, 1)[(k + 1) % 3]


def test_ints_and_bools_exactly():
    x = _data((7, 45), np.int64)
    where = _mask(x.shape)
    for k, (name, kw) in enumerate((("sum", {}), ("prod", {}), ("max", {"initial": -100}),
                                    ("min", {"initial": 100}), ("any", {}))):
        for axis in _two_axes(k):
            _check(name, x, where, axis=axis, **kw)
    for axis in _two_axes(5):
        _check("all", x != 0, where, axis=axis)


def test_initial_with_where():
    x = _data((5, 40))
    where = _mask(x.shape)
    where[2] = False
    for k, (name, initial) in enumerate((("sum", 2.5), ("prod", -2.0), ("nansum", 1.0),
                                         ("max", 1.25),  # above some slices' maxima
                                         ("nanmin", 0.75))):
        for axis in _two_axes(k):
            _check(name, x, where, axis=axis, initial=initial)
    xi = _data((5, 40), np.int16)
    _check("sum", xi, where, axis=1, initial=7)
    _check("min", xi, where, axis=1, initial=2)


def test_bitwise_and_a_users_op():
    x = _data((4, 50), np.int32)
    where = _mask(x.shape)
    for axis in (None, 1):
        np.testing.assert_array_equal(nk.xor_sum(x, axis, where=where),
                                      np.bitwise_xor.reduce(x, axis, where=where))
        np.testing.assert_array_equal(nk.bitwise_and_sum(x, axis, where=where),
                                      np.bitwise_and.reduce(x, axis, where=where))
        np.testing.assert_array_equal(nk.bitwise_or_sum(x, axis, where=where),
                                      np.bitwise_or.reduce(x, axis, where=where))


@nk.op(identity=0.0, commutative=False)
def last_nonzero(a, b):
    return b if b != 0 else a


def test_non_commutative_op_keeps_element_order():
    x = _data((3, 70)) + 5.0  # no zeros
    where = _mask(x.shape)
    for axis in (None, 1, 0):
        got = nk.reduce(x, last_nonzero, axis=axis, where=where)
        moved = np.moveaxis(x, 0, -1) if axis == 0 else x
        kept = np.moveaxis(where, 0, -1) if axis == 0 else where
        if axis is None:
            want = x.ravel()[np.flatnonzero(where.ravel())[-1]]
        else:
            want = [row[k][-1] if k.any() else 0.0 for row, k in zip(moved, kept)]
        np.testing.assert_array_equal(got, want)


def test_strided_inputs_and_masks():
    base = _data((8, 90))
    x = base[::-2, 3::2]  # reversed and gapped
    axes = (None, 0, 1)  # each mask along every axis, each function along every axis
    for k, where in enumerate((_mask((90, 8)).T[::-2, 3::2], _mask((4, 1))[::-1],
                               np.broadcast_to(_mask((1, 44)), (4, 44)))):
        _check("sum", x, where, axis=axes[k])
        _check("var", x, where, axis=axes[(k + 1) % 3])
        _check("max", x, where, axis=axes[(k + 2) % 3], initial=0.0)
    f = np.asfortranarray(_data((33, 40)))
    _check("sum", f, _mask((33, 40)), axis=1)
    _check("mean", f, np.asfortranarray(_mask((33, 40))), axis=0)


def test_a_layout_that_does_not_collapse_is_copied_with_a_warning_on_the_device_only():
    """A device input and mask laid out again are a CopyWarning each; NumPy ones go to
    the device anyway, laid out on the way, unwarned (the contract's Arrays)."""
    x = _data((2, 3, 4, 5, 6))
    where = _mask((3, 1, 5, 1))
    want = np.sum(x, axis=(0, 2, 4), where=where)
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        np.testing.assert_allclose(nk.sum(x, axis=(0, 2, 4), where=where), want, rtol=1e-12)
        f = np.asfortranarray(x)
        np.testing.assert_allclose(nk.sum(f, where=f > 0), np.sum(f, where=f > 0),
                                   rtol=1e-12)
    with pytest.warns(nk.CopyWarning) as caught:
        got = nk.sum(cuda.to_device(x), axis=(0, 2, 4), where=cuda.to_device(where))
    assert any("where= mask of shape (3, 1, 5, 1)" in str(w.message) for w in caught)
    host = got.copy_to_host() if hasattr(got, "copy_to_host") else got
    np.testing.assert_allclose(host, want, rtol=1e-12)


def test_all_false_slices():
    x = _data((3, 20))
    where = np.ones(x.shape, bool)
    where[1] = False
    np.testing.assert_array_equal(nk.sum(x, axis=1, where=where)[1], 0.0)
    np.testing.assert_array_equal(nk.prod(x, axis=1, where=where)[1], 1.0)
    assert nk.max(x, axis=1, where=where, initial=-7.0)[1] == -7.0
    assert nk.nanmax(x, axis=1, where=where, initial=-7.0)[1] == -7.0
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(nk.mean(x, axis=1, where=where)[1])
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        assert np.isnan(nk.nanmean(x, axis=1, where=where)[1])
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        assert np.isnan(nk.var(x, axis=1, where=where)[1])
    with warnings.catch_warnings():  # no warning where every slice keeps enough
        warnings.simplefilter("error")
        nk.mean(x, axis=0, where=where)
        nk.var(x, axis=0, where=where)
        nk.nanmax(np.full((2, 3), np.nan), axis=1, initial=0.0)  # initial stands in


def test_a_device_mean_of_nothing_in_an_integer_dtype_is_the_hardwares_cast():
    """NaN cast to an integer dtype= is C's undefined cast: the simulator's store
    converts a float64 NaN as a GPU's ``cvt`` does, to the dtype's least value (NumPy's
    on x86 too); on a GPU the compiler folds the kernel's constant NaN (0 on an H100)."""
    from numba import cuda

    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    where = np.zeros(x.shape, bool)
    where[0, 1] = True
    for dtype in (np.int64, np.int32):
        got = nk.mean(cuda.to_device(x), axis=1, where=cuda.to_device(where), dtype=dtype)
        got = got.copy_to_host()
        assert got.dtype == dtype and got.shape == (2,) and got[0] == 1
        if SIMULATOR:
            assert got[1] == np.iinfo(dtype).min
        empty = nk.mean(cuda.to_device(np.zeros((2, 0), np.float32)), axis=1, dtype=dtype)
        assert empty.copy_to_host().dtype == dtype  # no where=: the same store


def test_nanmax_initial_without_where():
    x = np.array([[np.nan, 1.0, -2.0], [np.nan, np.nan, np.nan]])
    for initial in (-5.0, 5.0):
        np.testing.assert_array_equal(nk.nanmax(x, axis=1, initial=initial),
                                      np.nanmax(x, axis=1, initial=initial))
        np.testing.assert_array_equal(nk.nanmin(x, axis=1, initial=initial),
                                      np.nanmin(x, axis=1, initial=initial))
    np.testing.assert_array_equal(nk.nanmax(np.ones((0, 3)), axis=0, initial=2.0),
                                  np.nanmax(np.ones((0, 3)), axis=0, initial=2.0))
    # a NaN initial is skipped as the NaN elements are (np.fmax's): the all-NaN row is
    # NaN with NumPy's warning, the other row its largest number
    for name in ("nanmax", "nanmin"):
        with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
            got = getattr(nk, name)(x, axis=1, initial=np.nan)
        with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
            want = getattr(np, name)(x, axis=1, initial=np.nan)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["nanmax", "nanmin"])
def test_a_nan_initial_warns_for_empty_slices_as_numpy(name):
    """np.nanmax warns "All-NaN slice encountered" wherever its result is NaN: an empty
    slice with a NaN initial as an all-NaN or masked-out one; a number initial, none."""
    empty = np.ones((0, 3))
    for x, kwargs in ((empty, dict(axis=0)), (empty, dict(axis=None)),
                      (empty.astype(np.float32), dict(axis=(0,), keepdims=True)),
                      (empty, dict(axis=0, where=False)),
                      (np.ones((2, 3)), dict(axis=1, where=False))):
        for initial in (np.nan, np.float32(np.nan)):
            with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
                got = getattr(nk, name)(x, initial=initial, **kwargs)
            with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
                want = getattr(np, name)(x, initial=initial, **kwargs)
            np.testing.assert_array_equal(got, want)
            assert np.shape(got) == np.shape(want)
            assert np.asarray(got).dtype == np.asarray(want).dtype
    out = np.zeros(3)
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        assert getattr(nk, name)(empty, axis=0, initial=np.nan, out=out) is out
    assert np.isnan(out).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing reduced into no slice; a number stands in
        assert getattr(nk, name)(empty, axis=1, initial=np.nan).shape == (0,)
        np.testing.assert_array_equal(getattr(nk, name)(empty, axis=0, initial=1.0),
                                      getattr(np, name)(empty, axis=0, initial=1.0))


def test_empty_inputs():
    for shape, axis in (((0, 4), 0), ((0, 4), 1), ((0,), None)):
        x = np.ones(shape)
        where = np.ones(shape, bool)
        for name in ("sum", "prod", "any", "all"):
            _check(name, x, where, axis=axis)
        _check("max", x, where, axis=axis, initial=1.5)
        _check("mean", x, where, axis=axis)


def test_zero_dimensional():
    x = np.float64(2.5)
    for where in (np.True_, np.False_):
        _check("sum", x, where)
        _check("max", x, where, initial=0.0)
        _check("mean", x, where)


def test_errors():
    x = _data((3, 4))
    for bad in (np.ones((3, 4), np.int8), np.ones(4), None, 1):
        with pytest.raises(TypeError, match="where"):
            nk.sum(x, where=bad)
    for name in ("sum", "mean", "var", "nanmean", "any"):
        with pytest.raises(ValueError, match="where of shape"):
            getattr(nk, name)(x, where=np.ones((4, 3), bool))
    with pytest.raises(ValueError, match="where of shape"):
        nk.sum(x, where=np.ones((1, 3, 4), bool))  # NumPy: more dimensions than x
    for name, ufunc in (("max", "maximum"), ("min", "minimum"), ("nanmax", "fmax"),
                        ("nanmin", "fmin")):
        for where in (np.ones((3, 4), bool), np.True_):  # NumPy: any where but True
            with pytest.raises(ValueError, match=f"'{ufunc}' does not have an identity"):
                getattr(nk, name)(x, where=where)
    assert nk.max(x, where=True) == x.max()  # the Python True: NumPy's default
    with pytest.raises(ValueError, match="'maximum'"):
        nk.nanmax(x.astype(np.int32), axis=0, where=np.ones(4, bool))


def test_torch_tensors_and_masks():
    torch = pytest.importorskip("torch")
    x = _data((5, 40))
    where = _mask((5, 40))
    tx, tw = torch.from_numpy(x), torch.from_numpy(where)
    for name in ("sum", "mean", "var", "any"):
        got = getattr(nk, name)(tx, axis=1, where=tw)
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), getattr(np, name)(x, axis=1, where=where),
                                   rtol=1e-12)
    got = nk.max(tx, where=torch.from_numpy(where[:1]), initial=-1.0)
    assert isinstance(got, torch.Tensor)
    assert got.item() == np.max(x, where=where[:1], initial=-1.0)
    np.testing.assert_allclose(nk.sum(x, axis=0, where=tw), np.sum(x, axis=0, where=where))
    with pytest.raises(TypeError, match="where"):
        nk.sum(tx, where=tw.to(torch.int8))


def test_dask_refuses_where():
    da = pytest.importorskip("dask.array")
    x = da.from_array(_data((4, 8)), chunks=2)
    with pytest.raises(NotImplementedError, match="where="):
        nk.sum(x, where=np.ones((4, 8), bool))
    assert float(nk.sum(x, where=True).compute(scheduler="sync")) == pytest.approx(
        float(np.sum(_data((4, 8)))))


def test_out_and_device_masks_replayed_with_new_contents():
    from numba import cuda

    x = _data((6, 40))
    out = np.empty(6)
    where = _mask(x.shape)
    assert nk.sum(x, axis=1, where=where, out=out) is out
    np.testing.assert_allclose(out, np.sum(x, axis=1, where=where), rtol=1e-12)
    from numbakern.runtime import replay

    dx = cuda.to_device(x)
    before = replay.counts["replayed"]
    for seed in (1, 2, 3):  # one signature: later calls replay the recorded launches
        mask = _mask(x.shape, seed=seed)
        got = nk.sum(dx, axis=1, where=cuda.to_device(mask)).copy_to_host()
        np.testing.assert_allclose(got, np.sum(x, axis=1, where=mask), rtol=1e-12)
        got = nk.max(dx, where=cuda.to_device(mask[:1]), initial=-9.0).copy_to_host()
        assert got == np.max(x, where=mask[:1], initial=-9.0)
    # the sums' later calls replayed, the new masks' addresses patched in (max uploads
    # its initial value, so it is never replayed)
    assert replay.counts["replayed"] >= before + 2
