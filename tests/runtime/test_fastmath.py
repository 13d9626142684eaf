"""``exp2_ftz``, ``max_nan`` and the float32 row ``exp`` built on them, run in a kernel
(PTX on a GPU, their Python versions under the simulator) against float64 NumPy."""

import numpy as np
import pytest
from numba import cuda

import numbakern
from numbakern.kernels.softmax_rows import squared_exp
from numbakern.runtime.fastmath import exp2_ftz, max_nan

SIMULATOR = numbakern.backend().is_simulator
BACKENDS = [pytest.param("simulator", marks=pytest.mark.skipif(not SIMULATOR,
                                                               reason="simulator run")),
            pytest.param("gpu", marks=pytest.mark.gpu)]
ULP = 2.0 ** -23
SMALLEST = 2.0 ** -149  # float32's least subnormal


@cuda.jit
def _apply(a, b, e2, mx, ex):
    i = cuda.grid(1)
    if i < a.size:
        e2[i] = exp2_ftz(a[i])
        mx[i] = max_nan(a[i], b[i])
        ex[i] = squared_exp(a[i])


def _run(a, b):
    outs = [np.empty_like(a) for _ in range(3)]
    _apply[-(-a.size // 64), 64](a, b, *outs)
    return outs


def _inputs():
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, 1.0, -1.0, -126.0, -126.5, -149.0, -252.0, -260.0, 127.0,
               np.inf, -np.inf, np.nan]
    a = np.concatenate([special, rng.uniform(-110, 10, 115)]).astype(np.float32)
    b = np.concatenate([[np.nan, 0.0, -0.0, 0.0, 5.0, -np.inf, np.inf, 1.0, np.nan, 0.0,
                         1.0, np.nan, 2.0], rng.uniform(-110, 10, 115)]).astype(np.float32)
    return a, b


@pytest.mark.parametrize("backend", BACKENDS)
def test_exp2_ftz_is_two_to_the_t_flushing_results_under_2_to_minus_126(backend):
    a, b = _inputs()
    got = _run(a, b)[0].astype(np.float64)
    want = np.exp2(a.astype(np.float64))
    normal = (want >= 2.0 ** -126) & (want < 2.0 ** 128)
    np.testing.assert_allclose(got[normal], want[normal], rtol=4 * ULP)
    assert np.all(got[(want < 2.0 ** -126) & ~np.isnan(want)] == 0)
    assert np.isnan(got[np.isnan(a)]).all() and got[a == np.inf] == np.inf


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_nan_is_nan_when_either_is_and_takes_plus_zero_over_minus_zero(backend):
    a, b = _inputs()
    got = _run(a, b)[1]
    either_nan = np.isnan(a) | np.isnan(b)
    assert np.isnan(got[either_nan]).all()
    np.testing.assert_array_equal(got[~either_nan], np.maximum(a, b)[~either_nan])
    zeros = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
    assert zeros.any() and not np.signbit(got[zeros]).any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_row_exp_within_its_documented_ulps_subnormals_kept(backend):
    """``row_exp``'s float32 exp: within ``6 + 1.2 |x|`` units in the last place of
    the float64 exp, for every argument a softmax gives it (x <= 0), subnormal
    results included (to within one least subnormal)."""
    a, b = _inputs()
    every = _run(a, b)[2].astype(np.float64)
    x = a.astype(np.float64)
    finite = np.isfinite(x) & (x <= 0)
    got, want = every[finite], np.exp(x[finite])
    bound = (6 + 1.2 * np.abs(x[finite])) * ULP * want + SMALLEST
    assert np.all(np.abs(got - want) <= bound)
    assert (got[(x[finite] < -87.4) & (x[finite] > -103)] > 0).all()  # subnormals kept
    assert every[x == -np.inf] == 0 and np.isnan(every[np.isnan(x)]).all()


def test_row_max_is_max_nan_for_float32_from_sm_80_and_the_combine_otherwise(monkeypatch):
    from numbakern.kernels import softmax_rows
    from numbakern.ops import MAX

    monkeypatch.setattr(softmax_rows, "SIMULATOR", False)
    for capability, float32_max in [((9, 0), max_nan), ((8, 0), max_nan),
                                    ((7, 5), MAX.device_combine())]:
        monkeypatch.setattr(softmax_rows, "_capability", lambda c=capability: c)
        assert softmax_rows.row_max(np.float32) is float32_max
        assert softmax_rows.row_max(np.float64) is MAX.device_combine()
