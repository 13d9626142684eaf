"""``explain --op var`` and ``--op logsumexp``: states of several fields recorded from
the real kernels (var's Welford ``(count, mean, M2)``, three fields: int64, float64,
float64; logsumexp's online ``(max, sum of exp(x - max))``), shown field by field, and the
function's answer made from the result's state, against NumPy in float64.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numbakern.teach import explain
from numbakern.teach.cli import cli
from numbakern.teach.trace import trace_reduce

pytestmark = pytest.mark.skipif(not numbakern.backend().is_simulator,
                                reason="tracing runs under the simulator")

TWO_PASS = [s for s in numbakern.strategies.available() if s.startswith("two_pass")]


def _lse(x):
    x = np.asarray(x, np.float64)
    m = x.max()
    return m + np.log(np.exp(x - m).sum())


def _state(trace):
    return trace.nodes[trace.result].value


# every strategy over 2 blocks of two warps; the small grids (two one-warp blocks; one
# block with fewer elements than a warp) on the strategies in turn
@pytest.mark.parametrize("strategy, n, threads, blocks", [
    (strategy, *size) for i, strategy in enumerate(TWO_PASS)
    for size in [(130, 64, 2), [(70, 32, 2), (5, 32, 1)][i % 2]]])
def test_var_state_covers_every_element_once_and_gives_numpys_var(strategy, n, threads,
                                                                   blocks):
    x = np.random.default_rng(n).integers(0, 10, n).astype(np.float32)
    trace = trace_reduce(x, "var", strategy, threads=threads, blocks=blocks)
    assert trace.exact_cover and trace.total("joins") == n - 1
    assert trace.function == "var" and trace.op == "moments"
    assert trace.value.dtype == np.float32
    np.testing.assert_allclose(trace.value, np.var(x.astype(np.float64)), rtol=1e-6)
    count, mean, m2 = _state(trace)
    assert count == n
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(), rtol=1e-12)
    np.testing.assert_allclose(m2, n * np.var(x.astype(np.float64)), rtol=1e-12)


@pytest.mark.parametrize("strategy", TWO_PASS)
def test_logsumexp_state_gives_scipys_logsumexp(strategy):
    x = np.random.default_rng(3).standard_normal(70) * 20
    trace = trace_reduce(x, "logsumexp", strategy, threads=32, blocks=2)
    assert trace.exact_cover and trace.total("joins") == 69
    m, s = _state(trace)
    assert m == x.max()
    np.testing.assert_allclose(s, np.exp(x - x.max()).sum(), rtol=1e-12)
    np.testing.assert_allclose(trace.value, _lse(x), rtol=1e-12)
    assert trace.value == numbakern.logsumexp(x)


def test_integer_input_gives_float64_answers():
    x = np.arange(1, 11, dtype=np.int32)
    trace = trace_reduce(x, "var", "two_pass/shared_tree", threads=32, blocks=2)
    assert trace.value.dtype == np.float64 and trace.value == 8.25
    trace = trace_reduce(x, "logsumexp", "two_pass/warp_shuffle", threads=32, blocks=1)
    assert trace.value.dtype == np.float64
    np.testing.assert_allclose(trace.value, _lse(x), rtol=1e-12)


def test_tree_reads_each_state_field_by_field():
    x = np.arange(1, 11, dtype=np.float64)
    text = _render(explain.tree(trace_reduce(x, "var", "two_pass/warp_shuffle",
                                             threads=32, blocks=1), limit=40))
    assert "var (moments states) of 10 float64" in text
    assert "Chan, Golub and LeVeque" in text
    assert "(count 1, mean 1, M2 0)" in text  # element 0 as a state
    assert "(count 2, mean 1.5, M2 0.5)" in text  # [1, 2] merged
    assert "= (count 10, mean 5.5, M2 82.5) → var 8.25" in text
    text = _render(explain.tree(trace_reduce(np.array([0.0, 1.0, 3.0]), "logsumexp",
                                             "two_pass/warp_shuffle", threads=32,
                                             blocks=1), limit=40))
    assert "(max 0, sum of exp(x - max) 1)" in text
    assert f"→ logsumexp {_lse([0.0, 1.0, 3.0])}"[:22] in text


def test_atomic_fold_and_other_ops_are_refused():
    with pytest.raises(ValueError, match="two_pass"):
        trace_reduce(np.ones(40), "var", "atomic_fold/warp_shuffle")
    with pytest.raises(ValueError, match="one-field ops"):
        trace_reduce(np.ones(40), numbakern.ops.MINMAX)
    with pytest.raises(TypeError, match="var"):
        trace_reduce(np.ones(4, np.complex64), "var")


def _render(renderable) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200).print(renderable)
    return out.getvalue()


def test_cli_explain_op_var_and_logsumexp(tmp_path):
    runner = CliRunner()
    out = tmp_path / "var.json"
    result = runner.invoke(cli, ["explain", "--op", "var", "--values", "1,2,3,4,5,6,7,8,9,10",
                                 "--dtype", "float64", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "(count 10, mean 5.5, M2 82.5) → var 8.25" in result.output
    summary = json.loads(out.read_text())  # one strategy: one summary
    assert summary["function"] == "var" and summary["joins"] == 9
    result = runner.invoke(cli, ["explain", "all", "--op", "logsumexp", "-n", "40"])
    assert result.exit_code == 0, result.output
    assert "atomic_fold/warp_shuffle ·" not in result.output  # its two-field fold locks,
    assert "atomic_fold/...: not shown for --op logsumexp" in result.output  # and it says
    assert result.output.count("→ logsumexp") == len(TWO_PASS)


def test_cli_refusals():
    runner = CliRunner()
    result = runner.invoke(cli, ["explain", "atomic_fold/shared_tree", "--op", "var"])
    assert result.exit_code == 2 and "two_pass" in result.output
    result = runner.invoke(cli, ["explain", "scans", "--op", "logsumexp"])
    assert result.exit_code == 2 and "reduction strategies" in result.output


def test_cli_figure(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "var.png"
    result = CliRunner().invoke(cli, ["explain", "--op", "var", "-n", "20", "--figure",
                                      str(path)])
    assert result.exit_code == 0, result.output
    assert path.stat().st_size > 1000


@pytest.mark.parametrize("values", ["nan,1,2", "inf,1,2", "1,inf,-inf", "-inf,-inf",
                                    "-inf,2,nan"])
def test_logsumexp_of_special_values_is_numbakerns(values):
    """NaN in, NaN out; +inf gives +inf (its sum is inf - inf); -inf only when every
    element is -inf: what numbakern.logsumexp's finishing pass gives."""
    x = np.array([float(v) for v in values.split(",")], np.float32)
    trace = trace_reduce(x, "logsumexp", "two_pass/warp_shuffle")
    np.testing.assert_equal(trace.value, numbakern.logsumexp(x))


def test_cli_logsumexp_of_nan_is_nan():
    result = CliRunner().invoke(cli, ["explain", "--op", "logsumexp", "--values", "nan,1,2",
                                      "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "→ logsumexp nan ·" in result.output
