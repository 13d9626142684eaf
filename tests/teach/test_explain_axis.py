"""``numbakern.teach.axis_trace`` and ``numbakern explain --shape --axis``: a reduction
along an axis recorded from the row and column kernels, every output proved (its
elements exactly once, NumPy's value), one output's tree shown."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numbakern.teach import axis_trace, explain
from numbakern.teach.axis_trace import trace_axis_reduce
from numbakern.teach.cli import cli
from numbakern.teach.trace import trace_reduce

simulator_only = pytest.mark.simulator  # tracing runs under the simulator


def ints(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).integers(0, 10, shape).astype(dtype)


# rows (the row kernel); columns that are not whole 16-byte vectors (the scalar column
# kernel, a group of threads a column); eight float32 columns (the vector column
# kernel, four adjacent outputs a thread)
@simulator_only
@pytest.mark.parametrize("strategy", numbakern.strategies.available())
@pytest.mark.parametrize("shape, axis, kernel", [((3, 33), 1, "row kernel"),
                                                 ((33, 3), 0, "column kernel"),
                                                 ((20, 8), -2, "4 adjacent outputs")])
def test_every_output_is_proved_under_every_strategy(strategy, shape, axis, kernel):
    x = ints(shape)
    trace = trace_axis_reduce(x, axis, "sum", strategy)
    assert kernel in trace.layout
    assert len(trace.outputs) == x.shape[1 - axis % 2]
    n = x.shape[axis]
    for k, out in enumerate(trace.outputs):
        assert out.nodes[out.result].cover == frozenset(range(n)), (strategy, k)
        assert out.exact_cover and out.value == x.sum(axis=axis)[k]
        assert out.total("joins") == n - 1  # the output's own counts, not its block's
    assert trace.exact
    assert trace.launch.total("joins") == len(trace.outputs) * (n - 1)


@simulator_only
def test_an_outputs_tree_names_its_own_elements():
    x = ints((5, 40), seed=1)
    trace = trace_axis_reduce(x, 1, "max", "two_pass/shared_tree")
    text = _text(explain.tree(trace.outputs[3], limit=64))
    assert "output 3 = x[3, :]" in text and "x[3, 0]" in text
    assert not any(f"x[{k}, " in text for k in (0, 1, 2, 4))
    assert f"result [0-39] = {x[3].max()}" in text
    columns = trace_axis_reduce(x, 0, "sum", "two_pass/warp_shuffle")
    text = _text(explain.tree(columns.outputs[7], limit=64))
    assert "x[:, 7]" in text and "x[4, 7]" in text and "x[4, 6]" not in text


@simulator_only
def test_elements_name_the_vector_load_that_brought_them():
    # the vector column kernel: a thread's adjacent outputs in one 16-byte load
    columns = trace_axis_reduce(ints((6, 8)), 0, "sum", "two_pass/warp_shuffle")
    text = _text(explain.tree(columns.outputs[6], limit=64))
    assert "x[2, 6] in a 16-byte load of x[2, 4:8]" in text
    wide = trace_axis_reduce(ints((6, 8), dtype=np.float64), 0, "sum", "two_pass/warp_shuffle")
    assert "x[2, 6] in a 16-byte load of x[2, 6:8]" in _text(explain.tree(wide.outputs[6]))
    # rows that start 16-byte aligned: whole vectors; rows of 33 do not, nor columns
    # that are not whole vectors: each element a load of its own
    rows = trace_axis_reduce(ints((3, 32)), 1, "sum", "two_pass/warp_shuffle")
    text = _text(explain.tree(rows.outputs[1], limit=64))
    assert "x[1, 6] in a 16-byte load of x[1, 4:8]" in text
    for shape, axis in [((3, 33), 1), ((33, 3), 0)]:
        alone = trace_axis_reduce(ints(shape), axis, "sum", "two_pass/warp_shuffle")
        assert "byte load" not in _text(explain.tree(alone.outputs[1], limit=64))
    tiny = trace_axis_reduce(ints((5, 2)), 1, "sum", "two_pass/warp_shuffle")
    assert "x[3, 1] in an 8-byte load of x[3, 0:2]" in _text(explain.tree(tiny.outputs[3]))


@simulator_only
def test_an_outputs_figure_draws_its_own_blocks(tmp_path):
    rows = trace_axis_reduce(ints((3, 72)), 1, "sum", "two_pass/warp_shuffle", blocks=2)
    assert rows.launch.launches[0][1] == 2  # the launch had two blocks
    assert [explain.drawn_blocks(out) for out in rows.outputs] == [[0], [1], [0]]
    explain.draw(rows.outputs[1], str(tmp_path / "row.png"))
    assert (tmp_path / "row.png").stat().st_size > 0
    whole = trace_reduce(ints(200), "sum", "two_pass/warp_shuffle", blocks=2)
    assert explain.drawn_blocks(whole) == [0, 1]  # a whole array: every block


def _text(renderable) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


@simulator_only
def test_explain_axis_command(tmp_path):
    out = tmp_path / "counts.json"
    result = CliRunner().invoke(cli, ["explain", "two_pass/shared_tree", "--shape", "4,33",
                                      "--axis", "0", "--output", "2", "--op", "max",
                                      "--dtype", "int32", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "column kernel" in result.output and "output 2 = x[:, 2]" in result.output
    assert "every element exactly once: yes" in result.output
    assert "agree with NumPy: yes" in result.output
    counts = json.loads(out.read_text())  # one strategy: its summary alone
    assert counts["strategy"] == "two_pass/shared_tree"
    assert counts["axis"] == 0 and counts["shape"] == [4, 33] and counts["exact_cover"]
    assert len(counts["values"]) == 33 and counts["values"] == counts["numpy"]
    assert "x[:, 2]" in result.output  # the shown output's row, within --limit or not
    shown = CliRunner().invoke(cli, ["explain", "--shape", "4,33", "--axis", "0",
                                     "--output", "30", "--limit", "2"])
    assert ("│ x[:, 30] │" in shown.output
            and "x[:, 29]" not in shown.output.split("every output")[1])


@simulator_only
def test_explain_axis_figure(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "column.png"
    result = CliRunner().invoke(cli, ["explain", "--shape", "20,8", "--axis", "0",
                                      "--output", "5", "--figure", str(png)])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@simulator_only
def test_a_wrong_value_fails_the_proof(monkeypatch):
    real = axis_trace._reference
    monkeypatch.setattr(axis_trace, "_reference", lambda *a: real(*a) + 1)
    result = CliRunner().invoke(cli, ["explain", "--shape", "3,8", "--axis", "1"])
    assert result.exit_code == 1
    assert "agree with NumPy: NO" in result.output


@simulator_only
@pytest.mark.parametrize("args, hint", [
    (["--axis", "1"], "--shape"),
    (["--shape", "4,8", "--axis", "1", "--size", "32"], "--size"),
    (["--shape", "4", "--axis", "1"], "two comma-separated lengths"),
    (["--shape", "100,100", "--axis", "0"], "4096"),
    (["--shape", "2,3", "--values", "1,2,3", "--axis", "0"], "needs 6"),
    (["--shape", "2,3", "--axis", "0", "--output", "3"], "the outputs are 0 to 2"),
    (["--shape", "2,3", "--output", "1"], "give --shape and --axis"),
    (["--shape", "0,3", "--axis", "0"], "at least 1"),
    (["--shape", "2,3", "--axis", "0", "--op", "var"], "one-field ops and argmax, argmin"),
    (["decoupled_lookback/blelloch", "--shape", "2,3", "--axis", "0"], "does not apply"),
])
def test_bad_axis_options_are_named(args, hint):
    result = CliRunner().invoke(cli, ["explain", *args])
    assert result.exit_code == 2, result.output
    assert hint in result.output


@simulator_only
def test_a_shape_alone_reduces_the_whole_array():
    result = CliRunner().invoke(cli, ["explain", "--shape", "2,3", "--values", "1,2,3,4,5,6"])
    assert result.exit_code == 0, result.output
    assert "result [0-5] = 21" in result.output


@simulator_only
def test_trace_refuses_what_it_cannot_record():
    with pytest.raises(ValueError, match="2-D"):
        trace_axis_reduce(np.ones(5), 0)
    with pytest.raises(ValueError, match="axis must be 0 or 1"):
        trace_axis_reduce(np.ones((2, 2)), 2)


@simulator_only
@pytest.mark.parametrize("shape, axis, blocks, words", [
    ((33, 3), 1, 2, "one thread an output"),  # short rows: the column kernel, a thread each
    ((33, 4), 1, 2, "tiny_rows: 1 block(s) x 64 threads"),  # rows of one vector
    ((9, 5), 0, 2, "(--blocks 2: more than the outputs fill)"),
    ((128, 2), 0, 4, "pieces of 64 elements, combined by two_pass"),
    ((9, 5), 0, 1, "4 threads an output, its i-th taking elements i, i + 4"),
])
def test_the_first_line_says_what_the_planner_chose(shape, axis, blocks, words):
    trace = trace_axis_reduce(ints(shape), axis, "sum", "two_pass/warp_shuffle",
                              blocks=blocks)
    assert words in trace.layout, trace.layout


@simulator_only
def test_writes_name_partials_and_the_output():
    cut = trace_axis_reduce(ints((128, 2)), 0, "sum", "two_pass/warp_shuffle", blocks=4)
    text = _text(explain.tree(cut.outputs[1], limit=64))
    assert "to partials[" in text and "to out[1] in global memory" in text
    whole = CliRunner().invoke(cli, ["explain", "two_pass/shared_tree", "--values",
                                     "3,1,4,1,5", "--blocks", "1"])
    assert "writes [0-4] = 14 to out[0] in global memory" in whole.output


TWO_PASS = [s for s in numbakern.strategies.available() if s.startswith("two_pass")]


# argmax and argmin: (value, index) pairs, ties to the first index, NaN the largest
@simulator_only
@pytest.mark.parametrize("strategy", TWO_PASS)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_and_argmin_pairs_along_an_axis(strategy, name):
    x = ints((6, 33), seed=2)  # values 0-9: ties in every row and column
    x[2, 17] = np.nan
    for axis in (0, 1):
        trace = trace_axis_reduce(x, axis, name, strategy)
        want = getattr(np, name)(x, axis=axis)
        assert [t.value for t in trace.outputs] == list(want), (axis, strategy)
        assert trace.exact
    text = _text(explain.tree(trace.outputs[0], limit=64))
    assert f"→ {name} {want[0]}" in text and "at " in text


@simulator_only
def test_whole_array_argmax_is_one_row():
    result = CliRunner().invoke(cli, ["explain", "--op", "argmax", "--values",
                                      "3,1,4,1,5,9,2,6,5,3,5,9", "--dtype", "int32"])
    assert result.exit_code == 0, result.output
    assert "row kernel" in result.output
    assert "result [0-11] = (max 9, at 5) → argmax 5" in result.output


@simulator_only
def test_argmax_is_not_recorded_under_atomic_fold():
    with pytest.raises(ValueError, match="two_pass"):
        trace_axis_reduce(ints((2, 8)), 1, "argmax", "atomic_fold/warp_shuffle")
    result = CliRunner().invoke(cli, ["explain", "atomic_fold/shared_tree", "--op",
                                      "argmax", "--shape", "2,8", "--axis", "1"])
    assert result.exit_code == 2 and "two_pass" in result.output


# A block walks its rows one after another: each row's tree starts at its own thread
# reduce, with its share of the block's barriers (the one after a row included);
# columns side by side share theirs: 1 + log2(4 threads an output).
@simulator_only
def test_each_outputs_counts_are_its_own():
    rows = trace_axis_reduce(ints((8, 40)), 1, "sum", "two_pass/warp_shuffle")
    work = {(c.steps, c.barriers, c.joins, c.shared_loads, c.shared_stores)
            for out in rows.outputs for c in out.blocks.values()}
    assert work == {(10, 2, 39, 1, 1)}
    assert "thread reduce: elements loaded" in _text(explain.tree(rows.outputs[7], 2))
    columns = trace_axis_reduce(ints((40, 6)), 0, "sum", "two_pass/warp_shuffle")
    assert "4 threads an output" in columns.layout
    assert {c.barriers for out in columns.outputs for c in out.blocks.values()} == {3}
