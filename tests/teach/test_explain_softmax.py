"""numbakern.teach.softmax_trace and ``numbakern explain`` for softmax: each reduce
covers every element once, the output is NumPy's softmax to rounding, and the
online normalizer's rescales are the joins whose elements' maxima differ."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numbakern.teach.cli import cli
from numbakern.teach.explain_softmax import softmax_tree
from numbakern.teach.softmax_trace import numpy_softmax, softmax_strategies, trace_softmax

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

X = np.random.default_rng(11).integers(-20, 20, 48).astype(np.float32)


def test_every_normalizer_with_every_block_is_a_strategy():
    blocks = numbakern.strategies.available("block")
    assert softmax_strategies() == [f"{n}/{b}" for n in ("max_then_sum", "online")
                                    for b in blocks]


@simulator_only
@pytest.mark.parametrize("strategy", softmax_strategies())
def test_each_reduce_covers_every_element_once(strategy):
    trace = trace_softmax(X, strategy, threads=32)
    e = np.exp(X.astype(np.float64) - X.max())
    assert np.allclose(trace.y, e / e.sum(), rtol=1e-5, atol=0)
    assert trace.exact_cover and trace.matches_numpy
    ops = ["online_softmax"] if strategy.startswith("online") else ["max", "sum"]
    assert list(trace.results) == ops
    for op in ops:  # 32 threads hold elements: 31 joins
        assert len(trace.joins(op)) == 31
        covers = [trace.nodes[i].cover for (o, _), i in trace.own.items() if o == op]
        assert sorted(e for c in covers for e in c) == list(range(X.size))
    if "max" in ops:
        assert trace.nodes[trace.results["max"]].value[0] == X.max()
        assert np.isclose(trace.nodes[trace.results["sum"]].value[0], e.sum(), rtol=1e-5)


@simulator_only
@pytest.mark.parametrize("strategy", ["online/warp_shuffle", "online/shared_tree"])
def test_rescales_are_the_joins_whose_maxima_differ(strategy):
    trace = trace_softmax(X, strategy, threads=32)
    want = {j.id for j in trace.joins("online_softmax")
            if len({X[sorted(trace.nodes[a].cover)].max() for a in j.args}) > 1}
    assert {j.id for j in trace.rescales()} == want and want
    top = trace.nodes[trace.results["online_softmax"]].value
    assert top[0] == X.max() and np.isclose(top[1], np.exp(X - X.max()).sum(), rtol=1e-5)


@simulator_only
def test_a_tiled_row_is_recorded_too():
    x = np.random.default_rng(2).standard_normal(1100)  # beyond 32 a thread x 32 threads
    trace = trace_softmax(x, "online/warp_shuffle", threads=32)
    assert trace.per_thread == 0 and trace.exact
    assert np.allclose(trace.y, numpy_softmax(x), rtol=1e-12)


@simulator_only
def test_the_softmax_proof_fails_on_a_double_count():
    trace = trace_softmax(X[:8], "online/warp_shuffle", threads=32)
    trace.results["online_softmax"] = next(iter(trace.own.values()))  # t0's state alone
    assert not trace.exact_cover
    assert "NO" in str(softmax_tree(trace).children[-1].label)


@simulator_only
def test_cli_explains_every_softmax_with_figures(tmp_path):
    png, js = tmp_path / "{name}.png", tmp_path / "s.json"
    result = CliRunner().invoke(cli, ["explain", "softmax", "-n", "20", "--limit", "1",
                                      "--figure", str(png), "--json", str(js)])
    assert result.exit_code == 0, result.output
    assert result.output.count("equals NumPy's softmax to rounding: yes") == 8
    assert "rescale" in result.output
    summaries = json.loads(js.read_text())
    assert [s["strategy"] for s in summaries] == softmax_strategies()
    from PIL import Image

    for name in softmax_strategies():
        with Image.open(tmp_path / f"{name.replace('/', '__')}.png") as im:
            assert im.format == "PNG" and im.size[0] > 100
    bad = CliRunner().invoke(cli, ["explain", "online/warp_shuffle", "--dtype", "int32"])
    assert bad.exit_code == 2 and "'--dtype'" in bad.output


@simulator_only
@pytest.mark.parametrize("row", [[1.0, -np.inf, 3.0, np.nan], [-np.inf, -np.inf], [np.inf, 1.0]])
def test_rows_without_a_finite_normalizer_are_nan_as_numpys(row):
    x = np.array(row, np.float32)
    trace = trace_softmax(x, "online/warp_shuffle", threads=32)
    assert np.isnan(trace.y).all() and np.isnan(numpy_softmax(x)).all()
    assert trace.matches_numpy and trace.exact


@simulator_only
@pytest.mark.parametrize("strategy", ["online/warp_shuffle", "max_then_sum/shared_tree"])
def test_a_float16_row_is_recorded_as_numbakern_softmax_takes_it(strategy):
    """numbakern.softmax takes float16 (computing in float32); explain records it too,
    held to float16's rounding (its eps, 9.8e-4, relative)."""
    result = CliRunner().invoke(cli, ["explain", strategy, "--values", "3,1,4,1,5,9,2,6",
                                      "--dtype", "float16", "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "equals NumPy's softmax to rounding: yes" in " ".join(result.output.split())
    x = (3 * np.random.default_rng(5).standard_normal(300)).astype(np.float16)
    trace = trace_softmax(x, strategy, threads=64)
    assert trace.exact and trace.y.dtype == np.float16 and trace.max_error > 1e-5


def _tree_text(trace) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(softmax_tree(trace, limit=4))
    return console.export_text()


@simulator_only
@pytest.mark.parametrize("strategy, lines", [
    ("online/blelloch", [
        ("t0: [0] (shared slot 0, stored by t0) ⊕ [1] (shared slot 1, stored by t1) → "
         "(max 2, sum 1.368)"),
        ("t1: [2] (shared slot 2, stored by t2) ⊕ [3] (shared slot 3, stored by t3) → "
         "(max 4, sum 1.368)"),
        ("t0: [0-1] (shared slot 1, stored by t0) ⊕ [2-3] (shared slot 3, stored by t1) → "
         "(max 4, sum 1.553)")]),
    ("online/hillis_steele", [
        "t1: [0] (shared slot 0, stored by t0) ⊕ [1] → (max 2, sum 1.368)",
        "t3: [2] (shared slot 2, stored by t2) ⊕ [3] → (max 4, sum 1.368)",
        "t3: [0-1] (shared slot 33, stored by t1) ⊕ [2-3] → (max 4, sum 1.553)"]),
    ("online/warp_shuffle", [
        "t0: [0] ⊕ [1] (shuffle down 1 from lane 1) → (max 2, sum 1.368)"]),
])
def test_each_operand_is_followed_by_how_it_reached_the_thread(strategy, lines):
    """A bracket follows the operand it describes: Blelloch joins two states both
    read from shared memory (slot 0 holds [0], stored by t0; slot 1 holds [1]), and
    Hillis-Steele reads its left operand from shared memory and holds its right one
    in its own register (no bracket)."""
    text = _tree_text(trace_softmax(np.array([1, 2, 3, 4], np.float32), strategy))
    for line in lines:
        assert line in text, line


@simulator_only
@pytest.mark.parametrize("strategy", [s for s in softmax_strategies()
                                      if s.endswith(("blelloch", "hillis_steele",
                                                     "shared_tree"))])
def test_a_shared_slot_names_the_state_its_storer_put_there(strategy):
    """Every ``[a-b] (shared slot k, stored by tN)`` names elements that thread N's
    stored state covered: the bracket belongs to the operand before it."""
    import re

    from numbakern.teach.explain import cover_text

    trace = trace_softmax(X[:8], strategy, threads=32)
    stored = {(cover_text(n.cover), n.thread) for n in trace.nodes}
    found = re.findall(r"(\[[^\]]*\]) \(shared (?:memory )?slot \d+, stored by t(\d+)\)",
                       _tree_text(trace))
    assert found and all((cover, int(t)) in stored for cover, t in found), found


@simulator_only
def test_steps_count_idle_rounds_as_the_reduction_view_does():
    """A warp-shuffle block reduce of 8 states takes 5 rounds a warp reduce, twice (the
    warps' partials after the barrier): 10 steps in the softmax view as in the
    reduction view's, the rounds after the last join shown idle in one line."""
    from rich.console import Console

    from numbakern.teach.explain_softmax import softmax_counts_table
    from numbakern.teach.trace import trace_reduce

    console = Console(width=200, record=True)
    trace = trace_softmax(np.arange(8, dtype=np.float32), "online/warp_shuffle")
    console.print(softmax_tree(trace))
    console.print(softmax_counts_table(trace))
    text = console.export_text()
    assert "steps 4-10: idle combines only (with the identity)" in text
    table = text[text.index("counts: softmax"):]
    row = next(line for line in table.splitlines() if line.startswith("│"))
    assert [c.strip() for c in row.split("│")[1:4]] == ["1", "10", "7"]  # reduces, steps
    reduction = trace_reduce(np.arange(8, dtype=np.float32), "sum", "two_pass/warp_shuffle",
                             threads=32, blocks=1)
    assert [c.steps for c in reduction.blocks.values()] == [10]
