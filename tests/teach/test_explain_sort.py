"""numbakern.teach.sort_trace and ``numbakern explain`` for sorts: every element ends
in one place and the output is NumPy's stable sort; the bitonic network makes
Batcher's count of compare-exchanges in his count of stages; the radix passes' digit
histograms and offsets are NumPy's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numbakern.teach.cli import cli
from numbakern.teach.explain_sort import sort_tree
from numbakern.teach.sort_trace import bitonic_formula, trace_sort

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

X = np.random.default_rng(3).integers(0, 40, 24).astype(np.uint16)


@simulator_only
@pytest.mark.parametrize("strategy", numbakern.strategies.available("sort"))
def test_every_element_ends_in_one_place_and_equals_numpy(strategy):
    trace = trace_sort(X, strategy, threads=32, items=1)
    assert np.array_equal(trace.out, np.sort(X, kind="stable"))
    assert trace.exact_once and trace.matches_numpy
    # the places say where each input element went: the stable argsort
    assert trace.placed == np.argsort(X, kind="stable").tolist()


@simulator_only
@pytest.mark.parametrize("n", [8, 12, 32])
def test_bitonic_makes_batchers_counts(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    trace = trace_sort(x, "bitonic", threads=32)
    size = 1 << (n - 1).bit_length()
    work, depth = bitonic_formula(size)
    lg = int(np.log2(size))
    assert trace.size == size
    assert len(trace.exchanges) == work == size // 2 * lg * (lg + 1) // 2
    assert len(trace.stages) == depth == lg * (lg + 1) // 2
    assert trace.counts["barriers"] == depth + 1  # and one after the row is loaded
    # every stage compares each place once, at the distance its (k, j) says
    for stage, (k, j) in enumerate(trace.stages, 1):
        pairs = [(c.i, c.partner) for c in trace.exchanges if c.stage == stage]
        assert sorted(p for pair in pairs for p in pair) == list(range(size))
        assert all(b == a ^ j for a, b in pairs)


@simulator_only
def test_radix_histograms_and_offsets_are_numpys():
    x = np.random.default_rng(5).integers(0, 2000, 40).astype(np.uint16)
    trace = trace_sort(x, "radix", threads=32, items=1)
    assert trace.exact and len(trace.passes) == 2
    for p in trace.passes:
        digits = (x.astype(np.int64) >> p.shift) & 255
        assert np.array_equal(p.counts, np.bincount(digits, minlength=256))
        assert np.array_equal(p.offsets, np.cumsum(p.counts) - p.counts)
        assert len(p.moves) == x.size and p.tiles == 2
    first = trace.passes[0]  # reads the input: each key goes to its digit's range
    digits = x.astype(np.int64) & 255
    assert all(first.digit_of(dst) == digits[src] for src, dst, _ in first.moves)


@simulator_only
def test_the_sort_proof_fails_on_a_lost_element():
    trace = trace_sort(X[:8], "bitonic", threads=32)
    trace.placed[0] = trace.placed[1]
    assert not trace.exact_once
    assert "NO" in str(sort_tree(trace).children[-1].label)


@simulator_only
def test_cli_explains_every_sort_with_figures(tmp_path):
    png, js = tmp_path / "{name}.png", tmp_path / "s.json"
    result = CliRunner().invoke(cli, ["explain", "sorts", "--values", "5,3,9,1,3,0,7",
                                      "--dtype", "int8", "--limit", "1", "--figure",
                                      str(png), "--json", str(js)])
    assert result.exit_code == 0, result.output
    assert result.output.count("equals NumPy's sort (stable): yes") == 2
    assert "work and depth" in result.output
    summaries = json.loads(js.read_text())
    assert [s["strategy"] for s in summaries] == numbakern.strategies.available("sort")
    assert summaries[0]["compare_exchanges"] == bitonic_formula(8)[0]
    assert summaries[1]["moves"] == 7  # int8: one pass
    from PIL import Image

    for name in numbakern.strategies.available("sort"):
        with Image.open(tmp_path / f"{name}.png") as im:
            assert im.format == "PNG" and im.size[0] > 100


@simulator_only
def test_explain_radix_runs_the_librarys_tile_and_explains_radix_alone(tmp_path):
    js = tmp_path / "radix.json"
    result = CliRunner().invoke(cli, ["explain", "radix", "-n", "16", "--json", str(js)])
    assert result.exit_code == 0, result.output
    items = numbakern.strategies.RadixSort(threads=32).tile_shape(4, 0)[1]  # float32 keys
    assert json.loads(js.read_text())["items"] == items
    assert f"32 threads per block · {items} keys per thread" in result.output
    assert "How to read this: radix: each pass" in result.output
    assert "bitonic" not in result.output
    assert trace_sort(X, "radix").items == \
        numbakern.strategies.RadixSort().tile_shape(X.dtype.itemsize, 0)[1]


@simulator_only
def test_radix_trace_reports_the_tile_a_long_row_runs(monkeypatch):
    """Past ``SIMULATOR_SHORT`` (lowered here to 32, so that a row of 64 keys is
    long) the sort takes 16 keys a thread; the trace says the tile it ran, not a short
    row's."""
    monkeypatch.setattr(numbakern.runtime.device, "SIMULATOR_SHORT", 32)
    x = np.random.default_rng(8).standard_normal(64).astype(np.float32)
    trace = trace_sort(x, "radix")
    assert trace.items == 16 and trace.matches_numpy and trace.exact_once


@simulator_only
def test_explain_sorts_reads_each_legend_in_the_order_shown():
    result = CliRunner().invoke(cli, ["explain", "sorts", "--values", "3,1,2"])
    assert result.exit_code == 0, result.output
    legend = result.output[result.output.index("How to read this:"):]
    assert 0 < legend.index("bitonic:") < legend.index("radix:")


@simulator_only
def test_bad_sort_input_names_the_argument():
    with pytest.raises(ValueError, match="x must be a non-empty 1-D"):
        trace_sort(np.ones((2, 2)), "bitonic")
    with pytest.raises(ValueError, match="strategy"):
        trace_sort(np.ones(4), "quick")


@simulator_only
@pytest.mark.parametrize("strategy", numbakern.strategies.available("sort"))
def test_the_sort_proof_compares_bits(strategy):
    x = np.array([3, 0.0, -0.0, np.nan, -1, -0.0], np.float16)
    trace = trace_sort(x, strategy, threads=32)
    assert trace.exact  # -0.0 and 0.0 in input order, as NumPy's stable sort
    assert np.array_equal(trace.out.view(np.uint16), np.sort(x, kind="stable").view(np.uint16))
    trace.out = trace.out.copy()
    trace.out[1], trace.out[2] = trace.out[2], trace.out[1]  # 0.0 and -0.0 swapped
    assert np.array_equal(trace.out, trace.expected, equal_nan=True)
    assert not trace.matches_numpy


@simulator_only
def test_counts_table_shows_the_work_of_the_sorts_kind():
    from rich.console import Console

    from numbakern.teach.explain_sort import sort_counts_table

    for strategy, shown, hidden in (("bitonic", "compare-exchanges", "moves"),
                                    ("radix", "moves", "compare-exchanges")):
        console = Console(width=200, record=True)
        console.print(sort_counts_table(trace_sort(X, strategy)))
        text = console.export_text()
        assert shown in text and hidden not in text, strategy


@simulator_only
@pytest.mark.parametrize("args", [["radix", "--op", "max"], ["bitonic", "--k", "2"],
                                  ["radix", "--exclusive"], ["bitonic", "--bins", "3"],
                                  ["radix", "--blocks", "3"], ["sorts", "--smallest"]])
def test_explain_refuses_options_a_sort_does_not_read(args):
    result = CliRunner().invoke(cli, ["explain", *args, "-n", "8"])
    assert result.exit_code == 2, result.output
    flag = args[1]
    assert f"{flag} does not apply to {args[0]}" in result.output


@simulator_only
def test_kth_without_of_partition_says_what_reads_it():
    result = CliRunner().invoke(cli, ["explain", "radix_select", "--kth", "1", "-n", "8"])
    assert result.exit_code == 2, result.output
    assert "--kth does not apply to radix_select without --of partition" in result.output


@simulator_only
@pytest.mark.parametrize("args, family", [(["bitonic", "--items", "2"], "sorts"),
                                          (["decoupled_lookback/warp_shuffle", "--blocks",
                                            "3"], "scans")])
def test_explain_refuses_options_only_other_strategies_of_the_family_read(args, family):
    """Radix sort's tiles read --items, reduce-then-scan's chunks --blocks: bitonic and
    decoupled look-back would drop them silently; their whole family takes them."""
    result = CliRunner().invoke(cli, ["explain", *args, "-n", "8"])
    assert result.exit_code == 2, result.output
    assert f"{args[1]} does not apply to {args[0]}" in result.stderr
    result = CliRunner().invoke(cli, ["explain", family, *args[1:], "-n", "8", "--limit", "1"])
    assert result.exit_code == 0, result.output
