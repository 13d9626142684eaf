"""bench/checks.py, the benchmark suites' result checks, and the suites' own check
builders, run with NumPy standing in for CuPy (the suites need a GPU; their checks'
logic does not): a check must fail a wrong result, not only pass a right one."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch):
    """The bench folder on ``sys.path``, as bench/conftest.py puts it for the suites."""
    monkeypatch.syspath_prepend(str(BENCH))
    import checks

    yield SimpleNamespace(checks=checks)
    for name in ("checks", "bench_segments", "bench_selection"):
        sys.modules.pop(name, None)


def test_the_suites_collect_as_the_readme_runs_them():
    """Found by a new user: ``pytest bench/`` stopped at its conftest's ``import
    peers`` (setup.cfg's --import-mode=importlib puts no folder on sys.path). The
    suites must collect (without a GPU each case then skips), from the checkout and
    from another folder with ``-c setup.cfg``, as bench/gpu_session.sh runs them."""
    root = BENCH.parent
    for cwd, config in ((root, []), (BENCH.parent.parent, ["-c", str(root / "setup.cfg"),
                                                            "--rootdir", str(root)])):
        done = subprocess.run([sys.executable, "-m", "pytest", *config, "--collect-only",
                               "-q", str(BENCH / "bench_reduce.py")], cwd=cwd,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "bench_reduce.py::" in done.stdout


def test_an_infinite_reference_is_matched_only_by_an_equal_result(bench):
    close = partial(bench.checks.assert_close, np)
    want = np.array([np.inf, -np.inf, 1.0])
    with np.errstate(invalid="ignore"):  # inf - inf, on the way
        close(np.array([np.inf, -np.inf, 1 + 1e-7]), want, rtol=1e-5)
        for got in ([0.0, -np.inf, 1.0], [-np.inf, 5.0, 1.0], [np.inf, np.inf, 1.0]):
            with pytest.raises(AssertionError, match="1e-05"):
                close(np.array(got), want, rtol=1e-5)
    with pytest.raises(AssertionError, match="not equal"):
        close(np.array([1, 2, 4]), np.array([1, 2, 3]))


def test_the_backward_references_are_the_formulas(bench):
    rng = np.random.default_rng(0)
    y, dy = rng.random((3, 5)), rng.standard_normal((3, 5))
    dx, magnitudes = bench.checks.softmax_backward(np, y, dy)
    np.testing.assert_allclose(dx, y * dy - y * (y * dy).sum(1, keepdims=True))
    assert (magnitudes >= np.abs(dx) * (1 - 1e-12)).all()
    dx, magnitudes = bench.checks.log_softmax_backward(np, np.log(y), dy)
    np.testing.assert_allclose(dx, dy - y * dy.sum(1, keepdims=True))
    assert (magnitudes >= np.abs(dx) * (1 - 1e-12)).all()


def test_an_unstable_segmented_sort_is_checked_in_its_values(bench):
    """Equal keys in either order pass; a value moved to another segment, or taken
    twice, fails."""
    import bench_segments as bs

    x = np.array([2, 1, 2, 1, 2, 0, 2, 2], np.float32)
    v = np.arange(x.size, dtype=np.int32)
    offsets = np.array([0, 4, 4, 8])
    segment = bs._segment_of(np, offsets, x.size)
    order = np.lexsort((x, segment))  # stable: by segment, then key
    stable = (x[order], v[order])
    check = bs._unstable_check(np, bench.checks.verifier(np), (x, v, offsets, 0),
                                 stable)
    check(stable)
    swapped = order.copy()
    swapped[[2, 3]] = swapped[[3, 2]]  # the two 2.0s of the first segment
    check((x[swapped], v[swapped]))
    across = order.copy()
    across[[3, 7]] = across[[7, 3]]  # a 2.0 of each segment traded
    with pytest.raises(AssertionError):
        check((x[across], v[across]))
    with pytest.raises(AssertionError, match="twice"):
        check((x[order], np.where(np.arange(8) == 1, order[0], order).astype(np.int32)))


def test_the_median_check_fails_the_lower_middle(bench):
    """A quantile's bound is a few ulps plus a sliver of the neighbours' gap: the
    lower middle (torch's median) is a whole half gap off and fails."""
    import bench_selection as sel

    s = np.sort(np.random.default_rng(1).standard_normal((64, 1000)).astype(np.float32))
    want, bound = sel._linear(np, s, 0.5, sel.EPS32, sel.EPS64)
    assert (np.abs(np.median(s, axis=-1) - want) <= bound).all()
    assert (np.abs(s[:, 499] - want) > bound).all()


def test_the_cumprod_check_takes_a_float32_scan_s_drift_and_fails_a_lost_tile(bench):
    """A float32 tiled scan (in-tile chains, then the tile prefixes chained) drifts
    past 1e-3 of the float64 one at 2**25 factors near 1 and passes; the same scan
    with one tile's product left out, or one tile counted twice, fails."""
    x = np.random.RandomState(0).uniform(0.999, 1.001, 1 << 25).astype(np.float32)
    want = np.cumprod(x, dtype=np.float64)
    inner = np.cumprod(x.reshape(-1, 4096), axis=1)
    prefix = np.cumprod(np.r_[np.float32(1), inner[:-1, -1]]).astype(np.float32)
    tiled = (inner * prefix[:, None]).ravel()
    assert np.abs(tiled / want - 1).max() > 1e-3  # the old bound failed it
    check = bench.checks.running_product_check(np, x, want)
    check(tiled)
    for broken in (np.r_[prefix[:5001], prefix[5001:] / inner[5000, -1]],  # one lost
                   np.r_[prefix[:5000], prefix[5000:] * inner[4999, -1]]):  # one twice
        with pytest.raises(AssertionError):
            check((inner * broken.astype(np.float32)[:, None]).ravel())
