"""``numbakern explain`` bugs of issue #24, each shown on the smallest input: scans of
the mapped ops checked against NumPy's, histograms that leave no value out unasked,
and an exclusive scan's shift told apart from Blelloch's down-sweep."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from numbakern.teach.cli import cli
from numbakern.teach.explain_scan import block_steps, loaded_by, step_phase
from numbakern.teach.scan_trace import trace_scan

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

X = np.array([3, 0, 4, np.nan, 5, 0, 2, 6], np.float32)
REFERENCE = {
    "nansum": lambda x: np.nancumsum(x),
    "nanprod": lambda x: np.nancumprod(x),
    "any": lambda x: np.logical_or.accumulate(x != 0),
    "all": lambda x: np.logical_and.accumulate(x != 0),
    "count_nonzero": lambda x: np.cumsum(x != 0),
}


@simulator_only
@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_scans_of_mapped_ops_equal_numpys(op):
    trace = trace_scan(X, "decoupled_lookback/warp_shuffle", op=op, threads=32, items=1)
    want = REFERENCE[op](X)
    assert np.array_equal(trace.values, want.astype(trace.values.dtype))
    assert trace.matches_numpy and trace.exact_cover


@simulator_only
def test_cli_scan_of_nansum_proves_yes():
    result = CliRunner().invoke(cli, ["explain", "decoupled_lookback/warp_shuffle", "--op",
                                      "nansum", "--values", "1,nan,2,3", "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "equals NumPy's nancumsum to rounding" in result.output
    assert ": yes (max 0·Σ|x| so far)" in result.output


@simulator_only
@pytest.mark.parametrize("op", ["count_nonzero", "any", "max", "prod", "bitwise_or"])
def test_a_scans_proof_names_a_numpy_function_that_exists(op):
    from numbakern.teach.scan_trace import NUMPY_SCANS

    result = CliRunner().invoke(cli, ["explain", "decoupled_lookback/warp_shuffle", "--op",
                                      op, "--values", "1,0,2,3", "--dtype", "int32",
                                      "--limit", "1"])
    assert result.exit_code == 0, result.output
    name = NUMPY_SCANS[op][0]
    assert f"equals NumPy's {name}" in result.output
    function = name.split(" ")[0].split(".")
    assert callable(getattr(getattr(np, function[0]), *function[1:]) if len(function) == 2
                    else getattr(np, function[0]))


@simulator_only
def test_histogram_bins_default_to_the_largest_value_plus_one():
    result = CliRunner().invoke(cli, ["explain", "global_atomic", "--values", "8,9,1,9"])
    assert result.exit_code == 0, result.output
    assert "out = [0, 1, 0, 0, 0, 0, 0, 0, 1, 2]" in result.output
    assert "left out" not in result.output


@simulator_only
@pytest.mark.parametrize("values, op", [("1,nan,3", "sum"), ("1e30,1e30,0,2", "prod")])
def test_a_scan_whose_output_holds_nan_proves_yes(values, op):
    """NaN in NumPy's result and in the recorded one are equal (a cumsum past a NaN; a
    float32 product that overflowed, then met a 0)."""
    result = CliRunner().invoke(cli, ["explain", "decoupled_lookback/warp_shuffle", "--op",
                                      op, "--values", values, "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert ": yes" in result.output


@simulator_only
@pytest.mark.parametrize("values", ["3,100000", "-1,2,3"])
def test_histogram_values_beyond_what_it_draws_are_refused(values):
    result = CliRunner().invoke(cli, ["explain", "global_atomic", "--values", values])
    assert result.exit_code == 2 and "--values" in result.output


@simulator_only
def test_histogram_says_which_values_it_left_out():
    result = CliRunner().invoke(cli, ["explain", "global_atomic", "--values", "8,9,1,9",
                                      "--bins", "8"])
    assert result.exit_code == 0, result.output
    assert "left out: 3 element(s) outside [0, 8)" in result.output
    assert "x[0], x[1], x[3]" in result.output


@simulator_only
@pytest.mark.parametrize("strategy, phases", [
    ("decoupled_lookback/warp_shuffle", {"exclusive shift"}),
    ("decoupled_lookback/blelloch", {"down-sweep", "exclusive shift"}),
])
def test_the_exclusive_shift_is_no_down_sweep(strategy, phases):
    x = np.arange(1, 21, dtype=np.int64)
    trace = trace_scan(x, strategy, threads=32, exclusive=True)
    steps, loaded = block_steps(trace), loaded_by(trace)
    found = set()
    for key, rounds in steps.items():
        clears = [c for c in trace.clears if (c[0], c[1]) == key]
        found |= {step_phase(trace, s, rounds[s], clears, loaded.get(key, set()), rounds)
                  for s in rounds}
    assert found - {"", "carry-in"} == phases


@simulator_only
def test_histogram_counts_its_bytes():
    from numbakern.teach.hist_trace import trace_histogram

    x = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32)
    moved = trace_histogram(x, 10, "global_atomic", threads=32).bytes_moved()
    # each element read once (4 bytes), each counted by one int64 read-modify-write
    assert moved == {"global read": 32, "global atomics": 8 * 16, "shared atomics": 0}
    moved = trace_histogram(x, 10, "shared_privatized", threads=32).summary()["bytes"]
    assert moved["shared atomics"] > 0 and moved["global atomics"] == 16 * 7  # 7 bins


def test_an_atomic_fold_after_a_scans_idle_round_is_titled_the_fold():
    """Blelloch's reduce folds its total by an atomic in the round of its down-sweep's
    last idle combines (no barrier between): the fold is in the result and titled so,
    the idle combines listed apart."""
    result = CliRunner().invoke(cli, ["explain", "atomic_fold/blelloch", "-n", "40"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    folds = [i for i, line in enumerate(lines) if "atomic fold: global atomic" in line]
    assert len(folds) == 2  # one a block
    assert not any("not in the result: global atomic" in line for line in lines)
    assert all("idle combines" in lines[i - 1] for i in folds)
