"""numbakern.teach.hist_trace and ``numbakern explain`` for histograms: every
counted element reaches its bin once, through the atomics the recording ties to it."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numbakern.teach.cli import cli
from numbakern.teach.hist_trace import _check, trace_histogram

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

X = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4] * 3 + [12, -1])


@simulator_only
@pytest.mark.parametrize("strategy", numbakern.strategies.available("histogram"))
def test_every_counted_element_reaches_its_bin_once(strategy):
    trace = trace_histogram(X, 10, strategy, threads=32, blocks=2)
    assert trace.exact and not trace.problems
    inside = X[(X >= 0) & (X < 10)]
    assert np.array_equal(trace.out, np.bincount(inside, minlength=10))
    counting = [a for a in trace.atomics if a.element >= 0]
    assert sorted(a.element for a in counting) == [i for i, v in enumerate(X) if 0 <= v < 10]
    hits = trace.contention()
    if strategy == "global_atomic":  # one global atomic per element: contention = count
        assert {slot: k for (_, _, slot), k in hits.items()} == {
            b: int(c) for b, c in enumerate(np.bincount(inside, minlength=10)) if c}
    else:  # one global atomic per block and non-empty bin
        folds = [a for a in trace.atomics if a.where == "global"]
        assert all(a.element < 0 for a in folds) and len(folds) <= 2 * 10
        assert sum(a.value for a in folds) == inside.size


@simulator_only
def test_the_histogram_proof_fails_on_a_lost_element():
    trace = trace_histogram(X, 10, "shared_privatized", threads=32, blocks=2)
    lost = next(a for a in trace.atomics if a.element >= 0)
    trace.atomics.remove(lost)
    assert _check(trace, privatized=True)


@simulator_only
def test_cli_explains_a_histogram(tmp_path):
    png, js = tmp_path / "{name}.png", tmp_path / "h.json"
    result = CliRunner().invoke(cli, ["explain", "histograms", "--values",
                                      "3,1,4,1,5,9,2,6", "--bins", "10", "--limit", "2",
                                      "--figure", str(png), "--json", str(js)])
    assert result.exit_code == 0, result.output
    assert "equals NumPy's bincount: yes" in result.output
    assert "atomics per address" in result.output
    import json

    from PIL import Image

    summaries = json.loads(js.read_text())
    assert [s["strategy"] for s in summaries] == numbakern.strategies.available("histogram")
    assert all(s["exact"] and s["out"][1] == 2 for s in summaries)
    for name in numbakern.strategies.available("histogram"):
        with Image.open(tmp_path / f"{name}.png") as im:
            assert im.format == "PNG"
    bad = CliRunner().invoke(cli, ["explain", "global_atomic", "--values", "1.5,2"])
    assert bad.exit_code == 2 and "'--values'" in bad.output


@simulator_only
def test_bad_histogram_input_names_the_argument():
    with pytest.raises(TypeError, match="x must hold integers"):
        trace_histogram(np.ones(4), 4)
    with pytest.raises(ValueError, match="bins"):
        trace_histogram(np.ones(4, np.int64), 0)


@simulator_only
def test_negative_values_with_bins_are_left_out_as_histogram_counts_leaves_them():
    """numbakern.histogram_counts(x, bins) counts [0, bins) and drops the rest, negative
    values too; without --bins explain counts as bincount, which refuses them."""
    result = CliRunner().invoke(cli, ["explain", "shared_privatized", "--values=-1,2,3",
                                      "--bins", "4"])
    assert result.exit_code == 0, result.output
    assert "left out: 1 element(s) outside [0, 4), as histogram_counts leaves them: " \
        "x[0]" in result.output
    assert "out = [0, 0, 1, 1]" in result.output
    want = numbakern.histogram_counts(np.array([-1, 2, 3]), 4)
    assert want.tolist() == [0, 0, 1, 1]
    result = CliRunner().invoke(cli, ["explain", "shared_privatized", "--values=-1,2,3"])
    assert result.exit_code == 2 and "--bins" in result.stderr


@simulator_only
def test_a_float_dtype_for_a_histogram_is_a_usage_error():
    """histogram_counts and bincount take integers: a float --dtype was counted as
    int64 without a word (its bytes too); left out, the values are int64."""
    result = CliRunner().invoke(cli, ["explain", "global_atomic", "--values", "3,1",
                                      "--dtype", "float32"])
    assert result.exit_code == 2, result.output
    assert "'--dtype'" in result.stderr and "integer" in result.stderr
    result = CliRunner().invoke(cli, ["explain", "global_atomic", "--values", "3,1"])
    assert result.exit_code == 0, result.output


@simulator_only
def test_what_the_tree_and_the_table_cut_is_marked():
    """More than 16 bins: the proof line's counts end in an ellipsis; more addresses
    than the table's rows: a last row of ``…`` and the caption says how many are
    shown."""
    from rich.console import Console

    from numbakern.teach.hist_trace import contention_table, histogram_tree

    trace = trace_histogram(np.arange(20), 20, "global_atomic", threads=32, blocks=1)
    console = Console(width=400, record=True)
    console.print(histogram_tree(trace))
    console.print(contention_table(trace, top=8))
    text = console.export_text()
    assert "out = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, …]" in text
    assert "20 addresses (8 shown); the busiest took 1 atomic" in text
    table = text[text.index("atomics per address"):]
    rows = [line for line in table.splitlines() if line.startswith("│")]
    assert len(rows) == 9 and rows[-1].split("│")[1].strip() == "…"
