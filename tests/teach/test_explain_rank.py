"""``numbakern explain radix_select --of median|partition``: the rank selections'
passes and the split, recorded from the real kernels of median and partition."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numbakern.teach.cli import cli
from numbakern.teach.explain_rank import trace_rank

pytestmark = pytest.mark.skipif(not numbakern.backend().is_simulator,
                                reason="tracing runs under the simulator")

X = np.array([5, 300, 70000, 300, 2, 70001, 300, 9], np.uint32)


def test_median_records_the_lower_middle_ranks_passes():
    """n = 8: ranks 4 and 5 (1-based); radix select finds rank 4's key, 300, in 11-bit
    digits (11, 11, 10 bits, ascending keys: uint32's own bits); the upper rank is
    never selected (its rows are None)."""
    trace = trace_rank(X, "median")
    assert trace.exact and trace.result == 300.0 and trace.kth == [3]
    assert [p["bits"] for p in trace.passes] == [(31, 21), (20, 10), (9, 0)]
    lower = [p["rows"][0] for p in trace.passes]
    assert [r["bucket"] for r in lower] == [0, 0, 300]
    assert [r["below"] for r in lower] == [0, 0, 3]  # 2, 5 and 9 are smaller
    assert [r["in_bucket"] for r in lower] == [8, 6, 3]  # 7000x leave in pass 2
    assert lower[1]["counts"] == {0: 6, 70000 >> 10: 2}
    assert all(p["rows"][1] is None for p in trace.passes)


def test_median_of_odd_count_and_nan():
    trace = trace_rank(np.array([4.0, -1.0, 7.0], np.float64), "median")
    assert trace.exact and trace.result == 4.0 and trace.kth == [1]
    assert len(trace.passes) == 6  # 64-bit keys: 6 digits
    trace = trace_rank(np.array([4.0, np.nan, 7.0, 1.0], np.float32), "median")
    assert trace.exact and np.isnan(trace.result)


def test_partition_records_each_kth_and_the_split():
    trace = trace_rank(X, "partition", [1, 6, -2])  # -2 is 6 again: one selection
    assert trace.exact and trace.kth == [1, 6]
    assert [len(p["rows"]) for p in trace.passes] == [2, 2, 2]
    assert [p["rows"][1]["in_bucket"] for p in trace.passes] == [8, 2, 1]  # 70000
    assert trace.buckets == [1, 1, 4, 1, 1]  # <5 | 5 | 9 and the 300s | 70000 | 70001
    assert trace.result.tolist() == [2, 5, 300, 300, 300, 9, 70000, 70001]  # input order


def test_partition_errors():
    with pytest.raises(ValueError, match="kth"):
        trace_rank(X, "partition", [8])
    with pytest.raises(ValueError, match="kind"):
        trace_rank(X, "quantile")


def test_cli_shows_median_and_partition(tmp_path):
    result = CliRunner().invoke(cli, ["explain", "radix_select", "--of", "median",
                                      "--values", "5,300,70000,300,2,70001,300,9",
                                      "--dtype", "uint32"])
    assert result.exit_code == 0, result.output
    assert "rank 4 (kth 3)" in result.output and "proof: equals np.median: yes" in \
        result.output
    path = tmp_path / "partition.json"
    result = CliRunner().invoke(cli, ["explain", "radix_select", "--of", "partition",
                                      "--values", "3,1,4,1,5,9,2,6", "--dtype", "int32",
                                      "--kth", "1,5", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert "the split: 5 buckets" in result.output and "a permutation of x: yes" in \
        result.output
    summary = json.loads(path.read_text())
    assert summary["buckets"] == [0, 2, 3, 1, 2] and summary["ranks"] == [1, 5]
    assert summary["result"] == [1, 1, 3, 4, 2, 5, 9, 6]


@pytest.mark.parametrize("args, message", [
    (["bitonic_select", "--of", "median"], "radix_select"),
    (["radix_select", "--of", "median", "--kth", "1"], "partition's"),
    (["radix_select", "--of", "partition", "--kth", "a"], "list of ints"),
    (["radix_select", "--of", "partition", "--kth", "9"],
     "Invalid value for '--kth': 9 is out of bounds for 5 values"),
])
def test_cli_refuses(args, message):
    result = CliRunner().invoke(cli, ["explain", *args, "--values", "3,1,4,1,5"])
    assert result.exit_code == 2 and message in result.output, result.output
