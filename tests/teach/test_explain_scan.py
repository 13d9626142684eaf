"""numbakern.teach.scan_trace and ``numbakern explain`` for scans.

Every scan strategy's recording must prove each output covers exactly its prefix and
equals NumPy's; the block scans' work and depth must equal the formulas where they
are exact; the grid scans' published states must be the prefixes they claim.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numbakern.teach.cli import cli
from numbakern.teach.explain_scan import (published, scan_counts_table, scan_tree,
                                         tile_states_table)
from numbakern.teach.scan_trace import STATUS_NAMES, textbook, trace_block_scan, trace_scan

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

X70 = np.random.default_rng(7).integers(0, 10, 70).astype(np.int64)


@simulator_only
@pytest.mark.parametrize("strategy", numbakern.strategies.available("scan"))
def test_every_output_covers_its_prefix_and_equals_numpy(strategy):
    trace = trace_scan(X70, strategy, threads=32, items=1, blocks=2)
    assert np.array_equal(trace.values, np.cumsum(X70))
    assert trace.exact_cover and trace.matches_numpy
    for i in (0, 31, 32, 69):
        assert trace.nodes[trace.outputs[i]].cover == frozenset(range(i + 1))


@simulator_only
@pytest.mark.parametrize("strategy", ["decoupled_lookback/hillis_steele",
                                      "reduce_then_scan/warp_shuffle"])
def test_exclusive_outputs_cover_elements_before_them(strategy):
    x = np.arange(1, 41, dtype=np.int64)
    trace = trace_scan(x, strategy, threads=32, items=1, blocks=2, exclusive=True)
    assert trace.exact_cover
    assert np.array_equal(trace.values, np.concatenate([[0], np.cumsum(x)[:-1]]))
    assert trace.nodes[trace.outputs[0]].empty


@simulator_only
def test_the_proof_fails_on_a_wrong_output():
    trace = trace_scan(X70[:40], "decoupled_lookback/warp_shuffle", threads=32, items=1)
    assert trace.exact_cover
    trace.outputs[5] = trace.outputs[6]  # output 5 claims elements 0..6
    assert not trace.output_exact(5) and not trace.exact_cover
    assert "NO" in str(scan_tree(trace).children[-1].label)


@simulator_only
def test_decoupled_lookback_publishes_prefixes_and_reads_back():
    trace = trace_scan(X70, "decoupled_lookback/blelloch", threads=32, items=1)
    tile = trace.tile
    tiles = -(-X70.size // tile)
    publishes = [e for e in trace.atomics if e.name == "exch" and e.array == "st"]
    by_tile = {}
    for e in publishes:
        by_tile.setdefault(e.index, []).append(STATUS_NAMES[e.args[-1]])
    # tile 0 publishes P at once; later tiles A, then P after their look-back
    assert by_tile == {0: ["P"], **{k: ["A", "P"] for k in range(1, tiles)}}
    for k in range(tiles):
        end = min((k + 1) * tile, X70.size)
        assert trace.nodes[published(trace, "P", k)].cover == frozenset(range(end))
        if k:
            assert trace.nodes[published(trace, "A", k)].cover == frozenset(
                range(k * tile, end))
    reads = [e for e in trace.atomics if e.name == "or_" and e.array in ("v1", "w1")]
    assert len(reads) == sum(range(tiles))  # tile k: lanes reading tiles 0..k-1
    table = tile_states_table(trace)
    assert table is not None and table.row_count == len(publishes) + len(reads)


@simulator_only
def test_reduce_then_scan_chunk_totals_and_carries():
    trace = trace_scan(X70, "reduce_then_scan/hillis_steele", threads=32, items=1, blocks=2)
    assert [name for name, *_ in trace.launches] == ["totals_kernel", "scan_kernel",
                                                     "scan_kernel"]
    totals = {s.index: trace.nodes[s.node].cover for s in trace.stores
              if s.array == "tot0"}
    carries = {s.index: trace.nodes[s.node].cover for s in trace.stores
               if s.array == "car0"}
    assert totals == {0: frozenset(range(64)), 1: frozenset(range(64, 70))}
    assert carries == {0: frozenset(), 1: frozenset(range(64))}


@simulator_only
@pytest.mark.parametrize("block", ["hillis_steele", "blelloch", "warp_shuffle"])
@pytest.mark.parametrize("p", [32, 64])
def test_block_scan_work_and_depth_equal_the_formulas(block, p):
    counts = trace_block_scan(block, p)
    formula = textbook(block, p)
    assert counts.exact
    assert getattr(counts, formula.counted) == formula.work
    assert counts.depth == formula.depth
    if block == "hillis_steele":  # the textbook's p log2 p, less the idle lanes
        assert counts.work == p * int(np.log2(p)) - (p - 1)
    if block == "blelloch":  # up-sweep p - 1, down-sweep p - 1 - log2 p, inclusive p - 1
        assert counts.work == 3 * (p - 1) - int(np.log2(p))


@simulator_only
def test_the_look_back_carry_is_shuffled_from_the_lane_that_read_it():
    # lane 31 reads the earlier tile's status, and shfl_idx(s, 31) hands it to t0: the
    # value was made by another block's t0, which is no lane of this warp
    result = CliRunner().invoke(cli, ["explain", "decoupled_lookback/hillis_steele", "-n",
                                      "70", "--dtype", "int64", "--items", "1"])
    assert result.exit_code == 0, result.output
    assert "lane 31 reads tile 0" in result.output
    assert "(shuffle idx 31 from lane 31)" in result.output
    assert "from lane 0)" not in result.output


def test_source_lane_follows_cudas_shuffle_rule():
    from numbakern.teach.trace import source_lane

    assert [source_lane("down", 4, lane) for lane in (0, 27, 28, 31)] == [4, 31, 28, 31]
    assert [source_lane("up", 1, lane) for lane in (0, 1, 31)] == [0, 0, 30]
    assert [source_lane("idx", 31, lane) for lane in (0, 31)] == [31, 31]


@simulator_only
def test_cli_explains_a_scan_with_figure_and_json(tmp_path):
    png, js = tmp_path / "scan.png", tmp_path / "scan.json"
    result = CliRunner().invoke(cli, ["explain", "decoupled_lookback/blelloch", "--values",
                                      "3,1,4,1,5", "--dtype", "int64", "--figure", str(png),
                                      "--json", str(js)])
    assert result.exit_code == 0, result.output
    assert "down-sweep" in result.output and "work and depth" in result.output
    assert "equals NumPy's cumsum: yes" in result.output
    summary = json.loads(js.read_text())
    assert summary["exact_cover"] and summary["matches_numpy"] and summary["n"] == 5
    from PIL import Image

    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] > 100


@simulator_only
def test_cli_exclusive_scan_and_items():
    result = CliRunner().invoke(cli, ["explain", "reduce_then_scan/warp_shuffle", "-n", "40",
                                      "--items", "1", "--exclusive", "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "covers exactly elements 0..i - 1 (exclusive)" in result.output


@simulator_only
def test_bad_scan_input_names_the_argument():
    with pytest.raises(ValueError, match="x must be 1-D"):
        trace_scan(np.ones((2, 3)), "decoupled_lookback/warp_shuffle")
    with pytest.raises(ValueError, match="op"):
        trace_scan(np.ones(3), "decoupled_lookback/warp_shuffle", op="argmax")
    with pytest.raises(ValueError):
        trace_scan(np.ones(3), "no_such/strategy")
    with pytest.raises(ValueError, match="block"):
        trace_block_scan("shared_tree", 32)


@simulator_only
def test_readme_explain_examples_run_as_written(tmp_path, monkeypatch):
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    commands = re.findall(r"^numbakern (explain [^\n#]*)", readme, flags=re.M)
    assert any("decoupled_lookback" in c for c in commands)
    monkeypatch.chdir(tmp_path)  # where --figure files go
    for command in commands:
        result = CliRunner().invoke(cli, shlex.split(command))
        assert result.exit_code == 0, (command, result.output)
        assert ("yes · equals NumPy's" in result.output
                or "every element exactly once: yes" in result.output
                or re.search(r"proof: equals the first \d+ of NumPy's .*: yes", result.output)
                or re.search(r"proof: at each kth np.sort's element.*: yes", result.output))


TENTHS = "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.1,1.3,1.7"


@simulator_only
def test_a_float_scan_equals_numpys_to_rounding_and_says_its_tolerance():
    """The tree adds in another order than NumPy's running sum: float32 outputs differ
    in the last bits, which is rounding, not a wrong answer (exit 0, the tolerance
    stated); a value off by more is still NO, and integers are compared exactly."""
    result = CliRunner().invoke(cli, ["explain", "decoupled_lookback/warp_shuffle",
                                      "--values", TENTHS, "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "equals NumPy's cumsum to rounding (|error| ≤ n·eps·Σ|x| so far" in result.output
    assert ": yes (max" in result.output
    x = np.array(TENTHS.split(","), np.float32)
    trace = trace_scan(x, "decoupled_lookback/warp_shuffle", threads=32, items=1)
    assert not np.array_equal(trace.values, np.cumsum(x)) and trace.matches_numpy
    trace.values[5] += 1e-3  # a wrong output, far beyond rounding
    assert not trace.matches_numpy
    exact = trace_scan(np.arange(1, 9), "decoupled_lookback/warp_shuffle", threads=32)
    exact.values[5] += 1
    assert exact.tolerance is None and not exact.matches_numpy


def test_a_strategy_without_a_known_formula_claims_none():
    """A user's block scan: the work-and-depth table leaves the formula columns empty
    rather than show warp_shuffle's."""
    formula = textbook("my_own_scan", 64)
    assert formula.work is None and formula.depth is None and formula.work_text == ""


@simulator_only
def test_blellochs_whole_up_sweep_is_shown_with_the_joins_in_no_output():
    """The up-sweep's right spine ([6-7], [4-7], [0-7]) holds only the tile's total,
    which no output of the last tile is built from: it is listed, marked, and its
    round of nothing else is not numbered; the down-sweep keeps its step numbers."""
    trace = trace_scan(np.arange(1, 9, dtype=np.int64), "decoupled_lookback/blelloch",
                       threads=32, items=1)
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(scan_tree(trace, limit=10))
    text = console.export_text()
    for line in ("→ [6-7] = 15 · in no output", "→ [4-7] = 26 · in no output",
                 "→ [0-7] = 36 · in no output", "step 1: 3 join(s) and 1 in no output",
                 "1 join(s) in no output (the tile's total only)",
                 "step 3 (down-sweep): 1 join(s)", "step 5: 7 join(s) (and 7 repeat(s)"):
        assert line in text, line
    assert "step 6" not in text


def _rendered(renderable) -> str:
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(renderable)
    return console.export_text()


def _rows(text: str) -> dict:
    """``{"launch/block": [cells]}`` of a rendered scan counts table."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 10 and cells[0].replace("/", "").isdigit():
            rows[cells[0]] = cells
    return rows


def _global_column(text: str) -> dict:
    """``{"launch/block": "loads/stores"}``: the table's global memory column."""
    return {key: cells[8] for key, cells in _rows(text).items()}


@simulator_only
def test_each_block_counts_its_output_writes_as_global_stores():
    """A block writes its own tile's outputs to global memory: the table's stores count
    them (decoupled look-back, 70 elements in tiles of 32: 32, 32, 6), and their sum is
    the bytes line's global written (70 int64 outputs: 560 bytes)."""
    text = _rendered(scan_counts_table(trace_scan(
        X70, "decoupled_lookback/hillis_steele", threads=32, items=1)))
    assert _global_column(text) == {"2/0": "32/32", "2/1": "32/32", "2/2": "6/6"}
    assert "global written 560," in text
    eight = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int64)
    text = _rendered(scan_counts_table(trace_scan(eight, "decoupled_lookback/blelloch")))
    assert _global_column(text) == {"1/0": "8/8"} and "global written 64," in text


@simulator_only
@pytest.mark.parametrize("strategy", numbakern.strategies.available("scan"))
@pytest.mark.parametrize("exclusive", [False, True])
def test_every_output_is_one_global_store(strategy, exclusive):
    trace = trace_scan(X70, strategy, threads=32, items=1, blocks=2, exclusive=exclusive)
    assert trace.total("global_stores") == X70.size + len(trace.stores)
    assert trace.bytes_moved()["global written"] == (X70.size + len(trace.stores)) * 8


@simulator_only
def test_reduce_then_scan_counts_outputs_beside_its_totals_and_carries():
    """Launch 1 stores each chunk's total, launch 2 each chunk's carry, launch 3 the
    outputs of its chunk (64 and 6 of them): 2 + 2 + 70 stores of 8 bytes."""
    trace = trace_scan(X70, "reduce_then_scan/hillis_steele", threads=32, items=1, blocks=2)
    text = _rendered(scan_counts_table(trace))
    stores = {k: v.split("/")[1] for k, v in _global_column(text).items()}
    assert stores == {"1/0": "1", "1/1": "1", "2/0": "2", "3/0": "64", "3/1": "6"}
    assert "global written 592," in text


@simulator_only
@pytest.mark.parametrize("strategy, combines, rounds, shared", [
    ("decoupled_lookback/blelloch", 182, "14 barrier(s)", "318/287"),
    ("reduce_then_scan/blelloch", 182, "15 barrier(s)", "318/287"),
    ("decoupled_lookback/warp_shuffle", 352, "3 barrier(s), shuffle steps per warp w0: 13",
     "130/161"),
])
def test_a_block_without_joins_says_what_it_did(strategy, combines, rounds, shared):
    """One element: no join anywhere, yet the block ran its block scan on identity
    states through shared memory and wrote its output; the tree says so, with the
    counts table's numbers, instead of claiming the launch moved no state."""
    trace = trace_scan(np.array([7], np.int64), strategy)
    text = " ".join(_rendered(scan_tree(trace)).split())
    assert "combines and moves no state" not in text
    assert "launch 1: " in text and "block 0" in text
    assert (f"no joins (it loaded 1 input element): {combines} combines ran, each with the "
            f"identity, {rounds} · shared ld/st {shared} · local ld/st 64/96 · global ld/st "
            "1/1") in text
    row = _rows(_rendered(scan_counts_table(trace)))["1/0"]
    assert [row[5], row[6], row[7], row[8], row[4]] == [str(combines), shared, "64/96",
                                                        "1/1", "0"]


@simulator_only
def test_a_float16_scans_outputs_are_counted_at_two_bytes():
    """The outputs are float16 (2 bytes), the states float32 (4): the bytes written
    count each at its own size (found by a reviewer: every store at the state's)."""
    trace = trace_scan(np.array([1, 2, 3], np.float16), "decoupled_lookback/blelloch")
    assert trace.state_bytes == 4 and trace.output_bytes == 2
    outputs = trace.total("global_stores") - len(trace.stores)
    assert outputs == 3
    assert trace.bytes_moved()["global written"] == 3 * 2 + len(trace.stores) * 4
