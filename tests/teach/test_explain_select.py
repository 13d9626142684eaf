"""``numbakern explain radix_select``: the passes recorded from the real kernels."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
import numbakern as nk
from numbakern.strategies import RadixSelect
from numbakern.teach.cli import cli
from numbakern.teach.explain_select import trace_select

pytestmark = pytest.mark.skipif(not numbakern.backend().is_simulator,
                                reason="tracing runs under the simulator")

X = np.array([5, 300, 70000, 300, 2, 70001, 300, 9], np.uint32)


def test_radix_select_records_the_bucket_each_pass_keeps():
    """Pass p keeps the bucket holding the k-th key's digit p (from the top): here the
    3rd largest is 300 (0x0000012c; keys complemented for the largest), in 11-bit
    digits (11, 11, 10 bits) by default."""
    trace = trace_select(X, 3)
    assert trace.exact and trace.indices.tolist() == [5, 2, 1]
    assert [p["bits"] for p in trace.passes] == [(31, 21), (20, 10), (9, 0)]
    rows = [p["rows"][0] for p in trace.passes]
    assert [r["bucket"] for r in rows] == [(~300 >> 21) & 0x7FF, (~300 >> 10) & 0x7FF,
                                           ~300 & 0x3FF]
    assert [r["below"] for r in rows] == [0, 2, 0]
    assert [r["in_bucket"] for r in rows] == [8, 6, 3]
    assert rows[1]["counts"] == {0x7FF - (70000 >> 10): 2, 0x7FF: 6}  # 7000x, the others
    assert max(rows[2]["counts"]) < 1 << 10  # the last digit: 10 bits


def test_radix_select_in_8_bit_digits_records_four_passes():
    trace = trace_select(X, 3, RadixSelect(threads=32, digit_bits=8))
    assert trace.exact and trace.indices.tolist() == [5, 2, 1]
    assert [p["bits"] for p in trace.passes] == [(31, 24), (23, 16), (15, 8), (7, 0)]
    rows = [p["rows"][0] for p in trace.passes]
    assert [r["bucket"] for r in rows] == [(~300 >> s) & 0xFF for s in (24, 16, 8, 0)]
    assert [r["below"] for r in rows] == [0, 2, 0, 0]
    assert [r["in_bucket"] for r in rows] == [8, 6, 3, 3]
    assert rows[1]["counts"] == {0xFE: 2, 0xFF: 6}  # 7000x's digit, then the others'


def test_radix_select_in_12_bit_digits_decides_24_bits_in_two_passes():
    x = np.array([5, 300, 70000, 300, 2, 70001, 300, 9, 1 << 20, 3 << 20], np.float32)
    trace = trace_select(x, 4, RadixSelect(threads=32, digit_bits=12))
    assert trace.exact
    assert [p["bits"] for p in trace.passes] == [(31, 20), (19, 8), (7, 0)]
    assert max(trace.passes[0]["rows"][0]["counts"]) < 1 << 12


@pytest.mark.parametrize("dtype, bits", [
    (np.uint8, [(7, 0)]), (np.int16, [(15, 5), (4, 0)]),
    (np.float64, [(63, 53), (52, 42), (41, 31), (30, 20), (19, 9), (8, 0)])])
def test_radix_select_digit_layout_of_each_key_width(dtype, bits):
    x = np.array([5, 3, 9, 3, 1, 7, 3, 0], dtype)
    trace = trace_select(x, 4)
    assert trace.exact
    assert [p["bits"] for p in trace.passes][:len(bits)] == bits
    assert len(trace.passes) == len(bits)


def test_a_row_stops_when_its_bucket_holds_exactly_the_keys_needed():
    trace = trace_select(X, 2)
    second = trace.passes[1]["rows"][0]
    assert (second["bucket"], second["below"], second["in_bucket"]) == \
        (0x7FF - (70000 >> 10), 0, 2)  # the two of 0x0001xxxx: both win
    assert trace.passes[2]["rows"][0] is None
    assert trace.exact
    result = CliRunner().invoke(cli, ["explain", "radix_select", "--values",
                                      ",".join(map(str, X)), "--k", "2", "--dtype", "uint32"])
    assert result.exit_code == 0, result.output
    assert "pass 3: bits 9-0 · not run" in result.output
    assert "the top 22 of 32 key bits decided" in result.output


@pytest.mark.parametrize("strategy", ["bitonic_select", "sort_slice"])
def test_the_other_strategies_record_no_passes(strategy):
    trace = trace_select(X, 3, strategy, largest=False)
    assert trace.passes == [] and trace.exact


def test_explain_shows_the_passes_and_the_proof():
    result = CliRunner().invoke(cli, ["explain", "radix_select", "--values",
                                      "3,1,4,1,5,9,2,6", "--k", "3", "--dtype", "int32"])
    assert result.exit_code == 0, result.output
    assert "pass 1: bits 31-21" in result.output and "pass 3: bits 9-0" in result.output
    assert "keeps bucket" in result.output
    assert "proof: equals the first 3 of NumPy's stable argsort" in result.output
    assert ": yes" in result.output
    result = CliRunner().invoke(cli, ["explain", "radix_select", "--values", "1,2",
                                      "--k", "3"])
    assert result.exit_code != 0 and "k must be from 0" in result.output


@pytest.mark.parametrize("strategy", ["radix_select", "bitonic_select", "sort_slice"])
def test_k_zero_selects_nothing_as_topk_and_torch(strategy, tmp_path):
    import torch

    x = np.array([3, 1, 4, 1, 5], np.int32)
    trace = trace_select(x, 0, strategy)
    want = torch.topk(torch.from_numpy(x), 0)
    ours = nk.topk(x, 0, strategy=strategy)
    assert trace.values.shape == trace.indices.shape == ours.indices.shape == \
        tuple(want.indices.shape) == (0,)
    assert trace.passes == [] and trace.exact
    out = tmp_path / "k0.json"
    result = CliRunner().invoke(cli, ["explain", strategy, "--values", "3,1,4,1,5", "--k",
                                      "0", "--dtype", "int32", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "the answer, empty (k=0" in result.output
    assert ": yes" in result.output
    with pytest.raises(ValueError, match="k must be from 0 to the number of values"):
        trace_select(x, -1, strategy)


def test_explain_draws_a_selection(tmp_path):
    """The course's figure of a selection, from explain --figure too."""
    path = tmp_path / "{name}.png"
    result = CliRunner().invoke(cli, ["explain", "selects", "--values", "3,1,4,1,5,9,2,6",
                                      "--k", "3", "--figure", str(path), "--limit", "1"])
    assert result.exit_code == 0, result.output
    from PIL import Image

    for name in numbakern.strategies.available("select"):
        with Image.open(tmp_path / f"{name}.png") as im:
            assert im.format == "PNG"


def test_a_k_past_a_strategys_limit_skips_it_in_a_family_and_names_k_alone():
    """``explain selects --k 257``: bitonic_select (k <= 256) is left out with a line
    saying why and the others are shown and proved; one strategy that cannot take k is
    a usage error naming --k, not the Python API's strategy= advice."""
    values = ",".join(str(v % 97) for v in range(300))
    result = CliRunner().invoke(cli, ["explain", "selects", "--values", values, "--k",
                                      "257", "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "bitonic_select: not shown, it takes k <= 256 (--k 257)" in result.output
    for name in ("radix_block_select", "radix_select", "sort_slice"):
        assert f"{name} · the 257 largest of 300" in result.output
    assert result.output.count(": yes") == 3
    result = CliRunner().invoke(cli, ["explain", "bitonic_select", "--values", values,
                                      "--k", "257"])
    assert result.exit_code == 2
    assert "Invalid value for '--k': 257 is more than the strategy takes " \
           "(bitonic_select takes k <= 256)" in result.output
    assert "strategy=" not in result.output
