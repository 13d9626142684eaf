"""bfloat16 read in place by the reductions, argmax/argmin and the scans
(``numbakern/api/_interop.py``'s ``WIDENED_BFLOAT16``; the kit's ``read`` widens each
element as it is loaded, ``numbakern/ops/state.py``).

NumPy arrays of ``ml_dtypes.bfloat16`` and torch CPU bfloat16 tensors, through every
reduce and scan strategy of the registry (small blocks, sizes around warp and block
boundaries), axis None/int/tuple, NaN/inf/-0.0. Each result is checked three ways:
no ``CopyWarning`` (an autouse filter turns one into an error), its type and dtype,
and its values: against a float64 reduction of the same bfloat16 values, within
one bfloat16 rounding of the result plus float32 accumulation error, and bit for bit
against the same call on a float32 copy of the input rounded to bfloat16 once (what
these functions gave before they read bfloat16 in place), where the strategy's
result does not depend on timing.
"""

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.api import _interop
from numbakern.core.arrays import BFloat16Input
from numbakern.runtime import replay
from numbakern.strategies import REGISTRY, DecoupledLookback, ReduceThenScan

ml_dtypes = pytest.importorskip("ml_dtypes")
torch = pytest.importorskip("torch")

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(17)
REDUCE = {s.label: s for s in nk.strategies.every("reduce", threads=32, blocks=2)}
EXACT_REDUCE = [name for name in REDUCE if name.startswith("two_pass")]  # no atomics
SIZES = [1, 31, 32, 33, 63, 64, 65, 127, 128, 129]


@pytest.fixture(autouse=True)
def no_copies():
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        yield


def _bf16(a) -> np.ndarray:
    return np.asarray(a, np.float32).astype(BF16)


def _torch(b: np.ndarray):
    return torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)


def _as64(r) -> np.ndarray:
    if isinstance(r, torch.Tensor):
        return r.double().numpy() if r.is_floating_point() else r.numpy()
    r = np.asarray(r)
    return r.astype(np.float64) if r.dtype == BF16 else r


def _close(got, ref, magnitude):
    """Within one bfloat16 rounding of ``ref`` plus float32 accumulation error
    (``magnitude``: the sum of the magnitudes combined into each result)."""
    got, ref = _as64(got), np.asarray(ref, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf
        ok = np.isnan(ref) | (got == ref) | \
            (np.abs(got - ref) <= 2.0 ** -8 * np.abs(ref) + 2.0 ** -20 * np.asarray(magnitude))
    assert ok.all(), (got[~ok], ref[~ok])


def _copied(fn, b: np.ndarray, *args, **kwargs):
    """``fn`` on a float32 copy of ``b``, floating results rounded to bfloat16 once."""
    r = fn(b.astype(np.float32), *args, **kwargs)
    rs = r if isinstance(r, tuple) else (r,)
    rs = tuple(np.asarray(v).astype(BF16) if np.asarray(v).dtype == np.float32 else
               np.asarray(v) for v in rs)
    return rs if isinstance(r, tuple) else rs[0]


def _same_bits(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        g = g.numpy() if isinstance(g, torch.Tensor) and g.dtype != torch.bfloat16 else g
        if isinstance(g, torch.Tensor):
            g = g.view(torch.int16).numpy().view(BF16)
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype == BF16:
            g, w = g.view(np.uint16), w.view(np.uint16)
            # NaN's payload is not promised; every other value bit for bit
            nan = (g & 0x7FFF) > 0x7F80
            np.testing.assert_array_equal(nan, (w & 0x7FFF) > 0x7F80)
            np.testing.assert_array_equal(g[~nan], w[~nan])
        else:
            np.testing.assert_array_equal(g, w)


def _data(shape, specials=False) -> np.ndarray:
    a = RNG.standard_normal(shape).astype(np.float32) * 4
    if specials and a.size > 4:
        flat = a.reshape(-1)
        flat[RNG.integers(0, a.size, 3)] = [np.inf, -np.inf, -0.0]
    return _bf16(a)


# --- the sets of functions ----------------------------------------------------------


def test_the_widened_functions_are_the_reductions_and_scans():
    assert _interop.WIDENED_BFLOAT16.isdisjoint(_interop.NATIVE_BFLOAT16)
    for name in _interop.WIDENED_BFLOAT16:
        assert getattr(nk, name).__module__ in ("numbakern.api.reductions",
                                                "numbakern.api.norms", "numbakern.api.scans")


# --- reductions: every strategy, sizes around the boundaries ------------------------


@pytest.mark.parametrize("strategy", sorted(REDUCE))
@pytest.mark.parametrize("n", [33, 129])
def test_reductions_under_every_strategy(strategy, n):
    b = _data(n, specials=True)
    x64, s = b.astype(np.float64), REDUCE[strategy]
    got = nk.sum(b, strategy=s)
    assert isinstance(got, np.generic) and got.dtype == BF16
    _close(got, x64.sum(), np.abs(x64[np.isfinite(x64)]).sum())
    for f, ref in ((nk.max, np.max), (nk.min, np.min)):
        got = f(b, strategy=s)
        assert got.dtype == BF16 and _as64(got) == ref(x64)
    assert nk.argmax(b, strategy=s) == np.argmax(x64)
    assert nk.argmin(b, strategy=s) == np.argmin(x64)
    if strategy in EXACT_REDUCE:
        _same_bits(nk.sum(b, strategy=s), _copied(nk.sum, b, strategy=s))


@pytest.mark.parametrize("n", SIZES)
def test_sizes_around_warp_and_block_boundaries(n):
    b = _data(n)
    x64, s = b.astype(np.float64), REDUCE["two_pass/warp_shuffle"]
    _close(nk.sum(b, strategy=s), x64.sum(), np.abs(x64).sum())
    _same_bits(nk.sum(b, strategy=s), _copied(nk.sum, b, strategy=s))
    _close(nk.mean(b, strategy=s), x64.mean(), np.abs(x64).mean())
    assert _as64(nk.max(b, strategy=s)) == x64.max()
    assert nk.argmax(b, strategy=s) == np.argmax(x64)
    two = _bf16(np.stack([b.astype(np.float32), -b.astype(np.float32)]))
    _same_bits(nk.max(two, axis=1, strategy=s), _bf16(np.max(two.astype(np.float32), 1)))
    np.testing.assert_array_equal(nk.argmin(two, axis=1, strategy=s),
                                  np.argmin(two.astype(np.float64), 1))


@pytest.mark.parametrize("ord", [2, 1, np.inf, 3])
def test_vector_norm_reads_bfloat16_as_the_float32_copy_does(ord):
    """The norm's root, folded into the store or taken apart, rounded once to bfloat16:
    the bits of the same call on a float32 copy rounded once."""
    b = _data((5, 40), specials=False)
    for strategy in ("two_pass/warp_shuffle", "atomic_fold/warp_shuffle"):
        for axis in (None, 1):
            got = nk.vector_norm(b, axis=axis, ord=ord, strategy=REDUCE[strategy])
            _same_bits(got, _copied(nk.vector_norm, b, axis=axis, ord=ord,
                                    strategy=REDUCE[strategy]))


AXES = [None, 0, 1, -1, (0, 2), (1, 2), (0, 1, 2)]  # -1 is the last axis, 2


# Every axis form on NumPy's bfloat16; torch's tensors (the same kernels, another way
# in and out) over the whole array, one axis and a tuple.
@pytest.mark.parametrize("axis, library", [(a, "numpy") for a in AXES] +
                         [(a, "torch") for a in (None, -1, (0, 2))])
def test_axes_and_result_types(axis, library):
    b = _data((3, 5, 34), specials=True)
    x = _torch(b) if library == "torch" else b
    x64 = b.astype(np.float64)
    finite = np.where(np.isfinite(x64), np.abs(x64), 0)
    checks = {
        nk.sum: (np.sum, finite.sum(axis)),
        nk.mean: (np.mean, finite.mean(axis)),
        nk.nansum: (np.nansum, finite.sum(axis)),
        nk.max: (np.max, 0), nk.min: (np.min, 0), nk.nanmax: (np.nanmax, 0),
        nk.ptp: (np.ptp, np.abs(x64).max(axis)),
    }
    for f, (ref, magnitude) in checks.items():
        got = f(x, axis=axis)
        if library == "torch":
            assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
        else:
            assert got.dtype == BF16
        with np.errstate(invalid="ignore"):
            _close(got, ref(x64, axis=axis), magnitude)
    got = nk.count_nonzero(x, axis=axis)
    np.testing.assert_array_equal(_as64(got), np.count_nonzero(x64, axis=axis))
    for f in (nk.any, nk.all):
        got = f(x, axis=axis)
        assert (got.dtype == torch.bool) if library == "torch" else (got.dtype == np.bool_)
        np.testing.assert_array_equal(_as64(got), getattr(np, f.__name__)(x64, axis=axis))
    if axis is None or isinstance(axis, int):
        for f, ref in ((nk.argmax, np.argmax), (nk.argmin, np.argmin)):
            got = f(x, axis=axis)
            assert (got.dtype == torch.int64) if library == "torch" else \
                (np.asarray(got).dtype == np.int64)
            np.testing.assert_array_equal(_as64(got), ref(x64, axis=axis))


@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
def test_moments_and_logsumexp(axis):
    b = _data((4, 3, 40))
    x64 = b.astype(np.float64)
    for f, ref in ((nk.var, np.var), (nk.std, np.std), (nk.nanvar, np.nanvar),
                   (nk.nanmean, np.nanmean)):
        got = f(b, axis=axis)
        assert np.asarray(got).dtype == BF16
        _close(got, ref(x64, axis=axis), 2.0 ** -10 * np.abs(ref(x64, axis=axis)))
    lse = np.log(np.exp(x64).sum(axis))
    got = nk.logsumexp(b, axis=axis)
    assert np.asarray(got).dtype == BF16
    _close(got, lse, 2.0 ** -10 * np.abs(lse))
    _same_bits(nk.var(b, axis=axis), _copied(nk.var, b, axis=axis))


def test_value_index_pairs_and_nan_forms():
    b = _data((5, 70))
    b[1, [7, 20]] = np.nan
    b[2, :] = np.nan
    x = _torch(b)
    x64 = b.astype(np.float64)
    values, indices = nk.max_with_indices(x, axis=1)
    assert values.dtype == torch.bfloat16 and indices.dtype == torch.int64
    np.testing.assert_array_equal(_as64(values), x64.max(1))
    np.testing.assert_array_equal(indices.numpy(), np.argmax(x64, 1))  # the first NaN
    values, indices = nk.min_with_indices(b, axis=0)
    np.testing.assert_array_equal(_as64(values), x64.min(0))
    np.testing.assert_array_equal(indices, np.argmin(x64, 0))
    rows = b[[0, 1, 3, 4]]
    np.testing.assert_array_equal(nk.nanargmax(rows, axis=1),
                                  np.nanargmax(rows.astype(np.float64), 1))
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        got = nk.nanmin(b, axis=1)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(_as64(got), np.nanmin(x64, 1))
    np.testing.assert_array_equal(_as64(nk.max(b, axis=1)), x64.max(1))  # NaN propagates


def test_signed_zeros_infinities_and_nan():
    b = _bf16([-0.0, 0.0, -np.inf, 3.0, np.inf, np.nan, 2.0])
    assert np.isnan(_as64(nk.max(b))) and np.isnan(_as64(nk.sum(b)))
    assert nk.argmax(b) == 5 == nk.argmin(b)
    head = b[:5]
    assert _as64(nk.max(head)) == np.inf and _as64(nk.min(head)) == -np.inf
    assert np.isnan(_as64(nk.sum(head)))  # inf + -inf
    zeros = _bf16([-0.0, -0.0, -0.0])
    _same_bits(nk.sum(zeros), _copied(nk.sum, zeros))
    _same_bits(nk.max(zeros), _bf16(-0.0))
    assert np.signbit(_as64(nk.max(zeros)))


def test_where_initial_and_dtype():
    b = _data((4, 50))
    x64 = b.astype(np.float64)
    mask = RNG.random((4, 50)) < 0.6
    got = nk.sum(b, axis=1, where=mask, initial=1.0)
    assert got.dtype == BF16
    _close(got, np.sum(x64, axis=1, where=mask, initial=1.0), np.abs(x64).sum(1))
    wide = nk.sum(b, axis=1, dtype=np.float64)
    assert wide.dtype == np.float64  # dtype= is honoured: not rounded
    np.testing.assert_allclose(wide, x64.sum(1), rtol=1e-12, atol=1e-12)
    f32 = nk.mean(_torch(b), dtype=torch.float32)
    assert f32.dtype == torch.float32
    np.testing.assert_allclose(f32.item(), x64.mean(), rtol=1e-6, atol=1e-6)
    assert nk.sum(b, dtype=ml_dtypes.bfloat16).dtype == BF16


def test_strided_views_and_zero_dimensional_input():
    base = _data((6, 66))
    for view in (base[:, ::2], base.T, base[1:, 3:]):
        x64 = view.astype(np.float64)
        _close(nk.sum(view, axis=0), x64.sum(0), np.abs(x64).sum(0))
        t = _torch(base)
        tview = t[:, ::2] if view.shape == (6, 33) else (t.T if view.shape == (66, 6)
                                                         else t[1:, 3:])
        got = nk.max(tview, axis=-1)
        np.testing.assert_array_equal(_as64(got), x64.max(-1))
    zero = _bf16(2.5).reshape(())
    assert nk.argmax(zero) == 0 and _as64(nk.sum(zero)) == 2.5


def test_empty_inputs():
    e = np.zeros((0, 3), BF16)
    got = nk.sum(e, axis=0)
    assert got.dtype == BF16 and (_as64(got) == 0).all()
    with pytest.raises(ValueError, match="empty"):
        nk.argmax(e, axis=0)
    with pytest.raises(ValueError):
        nk.max(e)
    assert nk.cumsum(e).dtype == BF16 and nk.cumsum(e).shape == (0,)


# --- scans -------------------------------------------------------------------------


def _scan_strategy(spec: str):
    grid, block = spec.split("/")
    blk = REGISTRY["block"][block](32)
    if grid == "reduce_then_scan":
        return ReduceThenScan(blk, blocks=3, items=2)
    return DecoupledLookback(blk, items=2)


SCANS = nk.strategies.available("scan")


@pytest.mark.parametrize("spec", SCANS)
@pytest.mark.parametrize("n", [33, 130])
def test_scans_under_every_strategy(spec, n):
    b = _data(n, specials=spec.endswith("warp_shuffle"))
    x64, s = b.astype(np.float64), _scan_strategy(spec)
    got = nk.cumsum(b, strategy=s, layout="tiles")
    assert got.dtype == BF16 and got.shape == (n,)
    finite = np.where(np.isfinite(x64), np.abs(x64), 0)
    with np.errstate(invalid="ignore"):
        _close(got, np.cumsum(x64), np.cumsum(finite))
    values, indices = nk.cummax(b, strategy=s, layout="tiles")
    assert values.dtype == BF16 and indices.dtype == np.int64
    np.testing.assert_array_equal(_as64(values), np.maximum.accumulate(x64))
    if spec.startswith("reduce_then_scan"):  # reproducible: the float32 copy's bits
        _same_bits(got, _copied(nk.cumsum, b, strategy=s, layout="tiles"))
        _same_bits((values, indices), _copied(nk.cummax, b, strategy=s, layout="tiles"))


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_scan_family_and_axes(library, axis):
    b = _data((3, 45)) / 4
    b[1, 5] = np.nan
    x = _torch(b) if library == "torch" else b
    x64 = b.astype(np.float64)
    flat = x64.reshape(-1) if axis is None else x64
    ax = 0 if axis is None else axis
    finite = np.where(np.isnan(flat), 0, np.abs(flat))
    calls = {
        nk.cumsum: (np.cumsum(flat, ax), np.cumsum(finite, ax)),
        nk.nancumsum: (np.nancumsum(flat, ax), np.cumsum(finite, ax)),
        nk.cumprod: (np.cumprod(flat, ax), 0),
    }
    for f, (ref, magnitude) in calls.items():
        got = f(x, axis=axis)
        assert (got.dtype == torch.bfloat16) if library == "torch" else got.dtype == BF16
        _close(got, ref, magnitude)
    values, indices = nk.cummin(x, axis=axis)
    ref_values = torch.cummin(torch.from_numpy(flat), dim=ax)
    np.testing.assert_array_equal(_as64(values), ref_values.values.numpy())
    np.testing.assert_array_equal(_as64(indices), ref_values.indices.numpy())
    got = nk.logcumsumexp(x, axis=axis)
    ref = torch.logcumsumexp(torch.from_numpy(flat), dim=ax).numpy()
    _close(got, ref, 2.0 ** -12 * np.abs(ref))
    got = nk.associative_scan(x, "max", axis=axis)
    np.testing.assert_array_equal(_as64(got), np.maximum.accumulate(flat, ax))


def test_scan_modes_and_dtype():
    b = _data(70)
    x64 = b.astype(np.float64)
    got = nk.cumsum(b, exclusive=True, reverse=True)
    ref = np.concatenate([np.cumsum(x64[::-1])[::-1][1:], [0.0]])
    _close(got, ref, np.cumsum(np.abs(x64)[::-1])[::-1])
    wide = nk.cumsum(b, dtype=np.float64)
    assert wide.dtype == np.float64
    np.testing.assert_allclose(wide, np.cumsum(x64), rtol=1e-12, atol=1e-12)
    prod = nk.nancumprod(_torch(b[:20] / 2), dtype=torch.float32)
    assert prod.dtype == torch.float32
    np.testing.assert_allclose(prod.numpy(), np.cumprod(x64[:20] / 2), rtol=1e-5)


# --- what is left on the copy path, and the copy path itself --------------------------


@pytest.mark.parametrize("strategy", nk.strategies.available("select"))
@pytest.mark.parametrize("largest, library", [(True, "numpy"), (False, "torch")])
def test_topk_selects_bfloat16_keys_in_place(strategy, largest, library):
    b = _data((3, 70), specials=True)
    b[0, 9] = np.nan
    x = _torch(b) if library == "torch" else b
    values, indices = nk.topk(x, 5, axis=1, largest=largest, strategy=strategy)
    want = torch.topk(_torch(b).float(), 5, dim=1, largest=largest)
    if library == "torch":
        assert values.dtype == torch.bfloat16 and indices.dtype == torch.int64
    else:
        assert values.dtype == BF16 and indices.dtype == np.int64
    np.testing.assert_array_equal(_as64(values), want.values.double().numpy())
    np.testing.assert_array_equal(np.take_along_axis(b.astype(np.float64), _as64(indices), 1),
                                  want.values.double().numpy())


def test_functions_without_bfloat16_kernels_still_say_they_copy():
    b = _data((3, 40))
    with pytest.warns(nk.CopyWarning, match="bfloat16"):
        got = nk.median(b, axis=1)
    assert got.dtype == BF16
    out = np.empty(3, BF16)
    with pytest.warns(nk.CopyWarning):  # a bfloat16 out= is written through float32
        assert nk.sum(b, axis=1, out=out) is out
    _same_bits(out, _copied(nk.sum, b, axis=1))


# --- replay: keyed by the bits, never confused with a uint16 input ----------------------


def _host(r):
    return np.asarray(r.copy_to_host() if hasattr(r, "copy_to_host") else r)


def test_device_bits_replay_and_are_not_taken_for_uint16():
    from numba import cuda

    b = _data((4, 75))
    bits = cuda.to_device(b.view(np.uint16))
    want = b.astype(np.float64).sum(1)
    before = replay.counts["replayed"]
    first = _host(nk.sum(BFloat16Input(bits), axis=1))
    second = _host(nk.sum(BFloat16Input(bits), axis=1))  # the same signature: replayed
    assert replay.counts["replayed"] == before + 1
    for r in (first, second):
        assert r.dtype == np.uint16  # bfloat16 bits, read as bfloat16 by the interop layer
        _same_bits(r.view(BF16), _copied(nk.sum, b, axis=1))
        bound = 2.0 ** -8 * np.abs(want) + 2.0 ** -20 * np.abs(b.astype(np.float64)).sum(1)
        assert (np.abs(r.view(BF16).astype(np.float64) - want) <= bound).all()
    # the same bits as the integers they are: another signature, another program
    as_uint16 = _host(nk.sum(bits, axis=1, dtype=np.float32))
    np.testing.assert_array_equal(as_uint16, b.view(np.uint16).astype(np.float32).sum(1))


@pytest.mark.parametrize("fn", [nk.sum, nk.max, nk.mean, nk.nansum, nk.prod],
                         ids=["sum", "max", "mean", "nansum", "prod"])
@pytest.mark.parametrize("axis", [None, 1])
def test_device_reductions_round_to_bfloat16_bits_in_a_kernel(fn, axis):
    """A float32 result of a bfloat16 device input comes back as the bits of its
    bfloat16 (rounded by a kernel, as the scans' values), so that a tensor call's
    result is a view of the call's own memory and the call replays; dtype= and out=
    results stay float32, and host input is rounded on the host (the interop layer)."""
    from numba import cuda

    b = _data((3, 70), specials=True)
    b[1, 5] = np.nan
    bits = BFloat16Input(cuda.to_device(b.view(np.uint16)))
    got = _host(fn(bits, axis=axis))
    assert got.dtype == np.uint16
    _same_bits(got.view(BF16), _copied(fn, b, axis=axis))
    if fn is not nk.max:  # (max takes no dtype=)
        assert _host(fn(bits, axis=axis, dtype=np.float32)).dtype == np.float32
    out = cuda.device_array(3, np.float32)
    assert fn(bits, axis=1, out=out) is out
    assert np.asarray(fn(BFloat16Input(b.view(np.uint16)), axis=axis)).dtype == np.float32


def test_device_bits_of_max_and_mean_replay():
    from numba import cuda

    b = _data((4, 75))
    bits = cuda.to_device(b.view(np.uint16))
    for fn in (nk.max, nk.mean):
        before = replay.counts["replayed"]
        first = _host(fn(BFloat16Input(bits), axis=1))
        second = _host(fn(BFloat16Input(bits), axis=1))
        assert replay.counts["replayed"] == before + 1
        for r in (first, second):
            assert r.dtype == np.uint16
            _same_bits(r.view(BF16), _copied(fn, b, axis=1))


def test_scans_write_bfloat16_bits_in_the_kernel():
    """A scan's values are rounded to bfloat16 as the kernel stores them (uint16 bits,
    read as bfloat16 by the interop layer), unless dtype=, out= or a later step
    (cumprod's settling, logcumsumexp) wants float32."""
    b = _data((2, 50))
    bits = BFloat16Input(b.view(np.uint16))
    got = nk.cumsum(bits, axis=1)
    assert got.dtype == np.uint16
    _same_bits(got.view(BF16), _copied(nk.cumsum, b, axis=1))
    values, indices = nk.cummin(bits, axis=1, reverse=True)
    assert values.dtype == np.uint16 and indices.dtype == np.int64
    _same_bits((values.view(BF16), indices), _copied(nk.cummin, b, axis=1, reverse=True))
    assert nk.cumsum(bits, axis=1, dtype=np.float32).dtype == np.float32
    assert nk.cumprod(bits, axis=1).dtype == np.float32
    assert nk.logcumsumexp(bits, axis=1).dtype == np.float32
    counts = _bf16(np.abs(b.astype(np.float32)) * 8)
    got = nk.cumsum(counts, axis=1, dtype=np.uint16)  # integers asked for: not bits
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, np.cumsum(counts.astype(np.float32), 1,
                                                 dtype=np.uint16))


@pytest.mark.parametrize("name", ["sum", "mean", "cumsum", "softmax", "log_softmax"])
def test_dtype_named_bfloat16_is_ml_dtypes_type_as_numpy_reads_the_name(name):
    """With ml_dtypes imported, NumPy reads ``dtype="bfloat16"`` as its type: so do the
    NumPy, torch and Dask forms."""
    x = np.arange(12.0).reshape(3, 4) / 7
    want = getattr(nk, name)(x, dtype=BF16)
    for given in (x, torch.from_numpy(x)):
        got = getattr(nk, name)(given, dtype="bfloat16")
        if isinstance(given, torch.Tensor):
            assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
            got = got.float().numpy()
        else:
            assert type(got) is type(want) and got.dtype == BF16
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    da = pytest.importorskip("dask.array")
    lazy = getattr(nk, name)(da.from_array(x, chunks=(3, 4)), dtype="bfloat16").compute()
    assert np.asarray(lazy).dtype == BF16
    np.testing.assert_array_equal(np.asarray(lazy, np.float32), np.asarray(want, np.float32))


def test_dtype_named_bfloat16_by_position_or_as_a_numpy_string():
    x = np.arange(12.0).reshape(3, 4) / 7
    want = nk.sum(x, dtype=BF16)
    da = pytest.importorskip("dask.array")
    lazy = da.from_array(x, chunks=(2, 3))
    for asked in ("bfloat16", np.str_("bfloat16")):
        for got in (nk.sum(x, None, asked), nk.sum(x, dtype=asked),
                    nk.sum(lazy, None, asked).compute(), nk.sum(lazy, dtype=asked).compute()):
            assert got.dtype == BF16 and float(got) == float(want)
    assert nk.sum(x, dtype=np.str_("float32")).dtype == np.float32  # learnt as no plain type
    assert nk.sum(x, dtype=np.str_("bfloat16")).dtype == BF16


@pytest.mark.parametrize("fn", sorted(_interop.CASTS_X))
def test_a_bfloat16_dtype_of_other_input_rounds_each_element_first(fn):
    """``dtype=bfloat16`` of float32, float64 or integer ``x``: each element is rounded
    to bfloat16 first, as NumPy's and torch's casts do (as ``dtype=float16`` reads each
    element rounded to float16), then computed in float32 and rounded once: the same
    bits as the call on ``x.astype(bfloat16)``, and NaN where an element rounds to inf
    (NumPy's answer), not the finite float32 sum."""
    run = getattr(nk, fn)
    extra = {"reduce": ("sum",), "associative_scan": ("sum",),
             "segmented_reduce": (np.array([0, 2, 5]),),
             "segmented_scan": (np.array([0, 2, 5]),)}.get(fn, ())
    xs = [np.float32([-0.159225017, 0.540845573, 0.214659125, 0.355372697, 1.7]),
          np.float64([1 / 3, 2 / 3, 1e-3, 255.5, 3.0]), np.int64([257, 1, 2, 3, 4])]
    for x in xs:
        call = (lambda a, **kw: run(np.zeros(5, np.int64) + 0 * np.asarray(a, np.int64),
                                    a, **kw)) \
            if fn == "scan_by_key" else (lambda a, **kw: run(a, *extra, **kw))
        got = call(x, dtype=ml_dtypes.bfloat16)  # (no copy warned: host input)
        with warnings.catch_warnings():  # (bfloat16 x of cumulative_sum: a float32 copy)
            warnings.simplefilter("ignore", nk.CopyWarning)
            want = call(x.astype(BF16))
        assert got.dtype == BF16, (fn, x.dtype)
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                      np.asarray(want).view(np.uint16), err_msg=fn)
        tensor = run(torch.zeros(5, dtype=torch.int64), torch.from_numpy(x),
                     dtype=torch.bfloat16) if fn == "scan_by_key" else \
            call(torch.from_numpy(x), dtype=torch.bfloat16)
        assert tensor.dtype == torch.bfloat16
        np.testing.assert_array_equal(tensor.view(torch.int16).numpy().view(np.uint16),
                                      np.asarray(want).view(np.uint16), err_msg=fn)
    if fn in ("sum", "nansum", "mean", "cumsum", "nancumsum"):  # (NumPy's nanmean
        # refuses a bfloat16 dtype: not a NumPy inexact type)
        big = np.float32([3.4e38, -3.4e38, 1.0])  # rounds to [inf, -inf, 1]
        with np.errstate(all="ignore"):
            want = getattr(np, fn)(big, dtype=ml_dtypes.bfloat16)
            got = run(big, dtype=ml_dtypes.bfloat16)
        np.testing.assert_array_equal(np.asarray(got, np.float32),
                                      np.asarray(want, np.float32))


F8 = ml_dtypes.float8_e5m2  # the float8 whose dtype says kind "f", as NumPy's floats do
OFFSETS = np.array([0, 1, 3])


@pytest.mark.parametrize("call", [
    lambda a: nk.sum(a), lambda a: nk.max(a), lambda a: nk.var(a), lambda a: nk.mean(a),
    lambda a: nk.argmax(a), lambda a: nk.cumsum(a), lambda a: nk.sort(a),
    lambda a: nk.median(a), lambda a: nk.quantile(a, 0.5), lambda a: nk.topk(a, 1),
    lambda a: nk.partition(a, 1), lambda a: nk.histogram(a), lambda a: nk.logsumexp(a),
    lambda a: nk.vector_norm(a), lambda a: nk.segmented_sort(a, OFFSETS),
    lambda a: nk.segmented_reduce(a, OFFSETS), lambda a: nk.softmax(a),
    lambda a: nk.histogram(np.ones(3), weights=a), lambda a: nk.reduce(a, "sum"),
    lambda a: nk.sum(np.ones(3), dtype=a.dtype), lambda a: nk.cumsum(np.ones(3), dtype=a.dtype),
    lambda a: nk.var(np.ones(3), dtype=a.dtype), lambda a: nk.nanmean(np.ones(3), dtype=a.dtype),
])
def test_float8_e5m2_is_refused_as_the_other_float8_types(call):
    """``ml_dtypes.float8_e5m2`` (kind "f", unlike the other float8 types) as input,
    weights or ``dtype=``: a ``TypeError`` naming it, not Numba's compile error nor a
    result computed in a dtype no kernel holds."""
    with pytest.raises(TypeError, match="float8_e5m2"):
        call(np.array([1, 2, -3], F8))


# device arrays of it: the simulator's hold any NumPy dtype
ON_DEVICE = pytest.mark.simulator


@pytest.mark.parametrize("call", [
    pytest.param(lambda a: nk.sort(cuda.to_device(a)), marks=ON_DEVICE),
    pytest.param(lambda a: nk.median(cuda.to_device(a)), marks=ON_DEVICE),
    pytest.param(lambda a: nk.topk(cuda.to_device(a), 1), marks=ON_DEVICE),
    pytest.param(lambda a: nk.sum(cuda.to_device(np.ones(3)),
                                  out=cuda.to_device(np.zeros((), a.dtype))), marks=ON_DEVICE),
    lambda a: nk.sum(np.ones(3), out=np.zeros((), a.dtype)),
    lambda a: nk.cumsum(np.ones((2, 3)), axis=1, out=np.zeros((2, 3), a.dtype)),
    lambda a: nk.var(np.ones(3), out=np.zeros((), a.dtype)),
    lambda a: nk.sum(np.ones(3), out=np.zeros((), ml_dtypes.complex32)),
])
def test_float8_e5m2_device_arrays_and_outs_are_refused(call):
    """A device array of it and an ``out=`` of it or of ``ml_dtypes.complex32`` (kind
    "c"): a ``TypeError`` naming the dtype."""
    with pytest.raises(TypeError, match="float8_e5m2|complex32"):
        call(np.array([1, 2, -3], F8))
