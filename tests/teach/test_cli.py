"""The ``numbakern`` command: demo, compare, and its errors (click's CliRunner)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import numbakern
from numba import cuda
from numbakern.strategies.protocols import reduce_from_scan
from numbakern.teach import demo as demo_module
from numbakern.teach.cli import cli
from numbakern.teach.compare import OPERATIONS

SIMULATOR = numbakern.backend().is_simulator
simulator_only = pytest.mark.simulator  # sizes chosen for the simulator


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


@simulator_only
def test_demo_quick_checks_every_available_operation():
    result = invoke("demo", "--quick")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "backend: simulator" in out
    assert "worked example [3, 1, 4, 1, 5]" in out and " 14 " in out
    for name in numbakern.strategies.available():
        assert name in out
    missing = [o for o in OPERATIONS.values() if not o.available
               and any(c.op == o.name for c in demo_module.CASES)]
    if missing:
        line = next(l for l in out.splitlines() if l.startswith("not available yet"))
        assert all(o.name in line for o in missing)
    assert "WRONG" not in out and "all " in out and "checks passed" in out


@simulator_only
def test_demo_exits_nonzero_when_a_check_fails(monkeypatch):
    wrong = demo_module.Case("sum", "worked example, misquoted", demo_module._worked, expect=15)
    monkeypatch.setattr(demo_module, "CASES", [wrong])
    result = invoke("demo", "--quick")
    assert result.exit_code == 1
    assert "FAILED sum on worked example, misquoted" in result.output
    assert "the chapter says 15" in result.output


@simulator_only
def test_demo_counts_an_exception_as_a_failure(monkeypatch):
    def broken(x, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(demo_module, "CASES", demo_module.CASES[:1])
    monkeypatch.setattr(numbakern, "sum", broken)
    result = invoke("demo", "--quick")
    assert result.exit_code == 1
    assert "raised TypeError: a bug" in result.output


@simulator_only
def test_demo_checks_a_sample_of_rows_and_catches_a_wrong_one(monkeypatch):
    x = np.random.default_rng(3).standard_normal((9, 40)).astype(np.float32)
    case = demo_module.Case("argmax", "nine rows", lambda quick: x, {"axis": -1}, sample=3)
    monkeypatch.setattr(demo_module, "CASES", [case])
    monkeypatch.setattr(demo_module, "installed_peers", lambda: [])
    results, _ = demo_module.run(quick=True)
    assert results[0].checked_rows == 3 and not demo_module.failed(results)
    right = numbakern.argmax

    def off_in_last_row(a, **kw):  # row 8 is one of the three checked (0, 4, 8)
        got = np.array(right(a, **kw))
        got[-1] += 1
        return got

    monkeypatch.setattr(numbakern, "argmax", off_in_last_row)
    results, _ = demo_module.run(quick=True)
    assert len(demo_module.failed(results)) == len(results[0].rows)


@simulator_only
def test_compare_json(tmp_path):
    out = tmp_path / "sum.json"
    result = invoke("compare", "sum", "-n", "300", "--repeat", "1", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "these times are not GPU speed (no GB/s)" in result.output
    table = [line for line in result.output.splitlines() if line[:1] in "┃│"]
    assert table and not any("GB/s" in line or "of copy" in line for line in table)
    data = json.loads(out.read_text())
    assert data["op"] == "sum" and data["shape"] == [300] and data["simulator"]
    assert [r["strategy"] for r in data["rows"]] == numbakern.strategies.available()
    for row in data["rows"]:
        assert row["ok"] is True and row["seconds"] > 0 and row["bytes"] == 300 * 4 + 4
        assert row["gbps"] is None and "copy_fraction" not in row  # simulator time
    assert data["copy_gbps"] is None


@simulator_only
def test_compare_named_strategies_dtype_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "max.png"
    result = invoke("compare", "max", "-n", "3x50", "--dtype", "int16", "-s",
                    "two_pass/shared_tree", "-s", "atomic_fold/warp_shuffle", "--repeat", "1",
                    "--png", str(png))
    assert result.exit_code == 0, result.output
    assert "max of 3x50 int16" in result.output
    assert "two_pass/warp_shuffle" not in result.output
    assert png.read_bytes()[:4] == b"\x89PNG"


@simulator_only
def test_compare_causal_softmax_of_attention_heads(monkeypatch):
    # 2 heads of 12 x 12 scores, two strategies; then a softmax that ignores the causal
    # mask is caught by the check.
    args = ("compare", "causal_softmax", "-n", "24x12", "--repeat", "1",
            "-s", "online/warp_shuffle", "-s", "max_then_sum/blelloch")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "causal_softmax of 24x12" in result.output and "WRONG" not in result.output
    unmasked = numbakern.softmax
    monkeypatch.setattr(numbakern, "softmax",
                        lambda x, causal, **kw: unmasked(x, **kw))
    result = invoke(*args[:8])  # its first strategy alone shows it
    assert result.exit_code == 1 and "WRONG" in result.output


@simulator_only
def test_compare_softmax_float16_within_its_precision():
    """float16 softmax is held to what float16 holds, not float32's 1e-5 (found by a
    fresh-user trial: every strategy showed WRONG)."""
    result = invoke("compare", "softmax", "-n", "3x50", "--dtype", "float16", "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert "WRONG" not in result.output


@pytest.mark.parametrize("args,where", [
    (["compare", "nosuchop"], "'OP'"),
    (["compare", "sum", "-s", "two_pass/no_such_block"], "'--strategy'"),
    (["compare", "sum", "-n", "0"], "'--size'"),
    (["compare", "sum", "-n", "12x"], "'--size'"),
    (["compare", "sum", "-n", "1.5"], "'--size'"),
    (["compare", "sum", "-n", str(2**1000)], "'-n' / '--size': 1.07e+301 is too large"),
    (["compare", "xor_sum", "--dtype", "float32"], "'--dtype'"),
    (["compare", "sum", "-n", "3x100", "--axis", "5"], "'--axis'"),
    (["compare", "sum", "-n", "300", "--axis", "1"], "'--axis'"),
    (["explain", "no_such_strategy"], "'STRATEGY'"),
    (["explain", "--values", "3,x"], "'--values'"),
    (["explain", "--threads", "48"], "'--threads'"),
    (["explain", "--op", "bitwise_xor", "--dtype", "float32"], "'--dtype'"),
    (["compare", "logsumexp", "--dtype", "int8"], "compare logsumexp times float input"),
    (["explain", "all", "--figure", "one.png"], "'--figure'"),
    (["explain", "--values", "300,5", "--dtype", "int8"], "'--values'"),  # would wrap
    (["explain", "--values", "1.5,2", "--dtype", "int32"], "'--values'"),
    (["explain", "--values", "-1", "--dtype", "uint8"], "'--values'"),
    (["explain", "--values", "9223372036854775808", "--dtype", "int64"], "'--values'"),
    (["explain", "--values", "inf", "--dtype", "int32"], "'--values'"),
    (["explain", "--values", "nan", "--dtype", "int32"], "'--values'"),
    (["explain", "--values", "1e6", "--dtype", "float16"], "'--values'"),  # overflows
    (["explain", "--values", ""], "'--values'"),
    (["explain", "--json", "/no/such/folder/a.json"], "'--json'"),
    (["explain", "--figure", "/no/such/folder/a.png"], "'--figure'"),
    (["compare", "sum", "--json", "/no/such/folder/a.json"], "'--json'"),
    (["compare", "sum", "--png", "/no/such/folder/a.png"], "'--png'"),
    (["explain", "--figure", "tree.txt"], "'--figure'"),  # a format matplotlib lacks
    (["compare", "sum", "--png", "speed.txt"], "'--png'"),
])
def test_bad_arguments_are_one_error_line(args, where):
    result = invoke(*args)
    assert result.exit_code == 2
    errors = [l for l in result.output.splitlines() if l.startswith("Error:")]
    assert len(errors) == 1 and where in errors[0], result.output
    assert "Traceback" not in result.output


@simulator_only
def test_explain_picks_int32_for_a_bitwise_op_and_says_what_a_family_leaves_out():
    """Found by a new user: ``explain --op bitwise_and`` failed on its own default
    dtype (float32), where compare's default for xor_sum is int32; and ``explain all
    --op var`` left atomic_fold out without a word, where ``explain sorts`` says."""
    result = invoke("explain", "two_pass/warp_shuffle", "--op", "bitwise_and", "-n", "8")
    assert result.exit_code == 0, result.output
    assert "bitwise_and of 8 int32" in result.output
    result = invoke("explain", "all", "--op", "var", "-n", "8")
    assert result.exit_code == 0, result.output
    assert "atomic_fold/...: not shown for --op var" in result.output
    assert "two_pass/blelloch · var" in result.output


def test_a_backend_error_is_one_line_from_the_command():
    for command in (["-m", "numbakern", "--help"], ["-c", "import numbakern"]):
        r = subprocess.run([sys.executable, *command], capture_output=True, text=True,
                           env={**os.environ, "NUMBAKERN_SIMULATOR": "bogus"}, timeout=120)
        assert r.returncode != 0
        if command[0] == "-m":  # the command's user gets one line
            assert r.stderr.strip() == ("Error: NUMBAKERN_SIMULATOR must be 0 or 1 (or "
                                        "true/false, yes/no), got 'bogus'")
        else:  # a program importing numbakern gets the exception
            assert "BackendError" in r.stderr


@simulator_only
def test_compare_refuses_a_size_the_simulator_cannot_run():
    result = invoke("compare", "sum", "-n", "2**30")
    assert result.exit_code == 2 and "too large for the simulator" in result.output


def test_unavailable_operation_is_a_usage_error():
    missing = [o.name for o in OPERATIONS.values() if not o.available]
    if not missing:
        pytest.skip("every operation is available")
    result = invoke("compare", missing[0])
    assert result.exit_code == 2 and "not available in this numbakern yet" in result.output


def test_version():  # `python -m numbakern` itself: the subprocess test of compare below
    result = invoke("--version")
    assert result.exit_code == 0 and numbakern.__version__ in result.output


@pytest.mark.gpu
def test_compare_on_the_gpu_times_against_the_copy_bandwidth(tmp_path):
    out = tmp_path / "sum.json"
    result = invoke("compare", "sum", "-n", "2**26", "--repeat", "5", "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert not data["simulator"] and data["copy_gbps"] > 100
    rows = {r["strategy"]: r for r in data["rows"]}
    for name in numbakern.strategies.available():
        assert rows[name]["ok"] and 0 < rows[name]["copy_fraction"] < 1.5
    for peer in ("cupy", "torch"):
        if peer in rows:
            assert rows[peer]["ok"] and rows[peer]["gbps"] > 0


def test_check_holds_results_to_the_reference():
    from numbakern.teach.compare import OPERATIONS, check

    ref = np.array([1.0, np.nan, 3.0])
    assert check(np.array([1.0, np.nan, 3.0], np.float32), ref, None) == (True, 0.0)
    assert check(np.array([1.0, 2.0, 3.0]), ref, None)[0] is False
    assert check(np.array([1.0, np.nan, 3.5]), ref, 0.6) == (True, 0.5)
    assert check(np.array([1.0, np.nan, 3.5]), ref, 0.4) == (False, 0.5)
    assert check(np.array([1.0, 1.0, 3.0]), np.array([1.0, 2.0, 3.0]), 5.0)[0]
    assert check(np.array([np.nan, 1.0, 3.0]), np.array([1.0, 1.0, 3.0]), 5.0)[0] is False
    assert check(np.array([1, 2]), np.array([1, 2, 3]), None) == (False, float("inf"))
    # the sum bound grows with sum |x|; integer results have none
    x = np.array([1e8, 1.0, -1e8], np.float32)
    want = OPERATIONS["sum"].expected(x, {})
    assert want.dtype == np.float32 and 0 < want.tolerance < 1e2
    assert OPERATIONS["sum"].expected(np.arange(4), {}).tolerance is None


@simulator_only
@pytest.mark.parametrize("args", [["argmin", "-n", "3x40", "--axis", "1", "--dtype", "int16"],
                                  ["cumprod", "-n", "70"],
                                  ["cumprod", "-n", "2x40", "--axis", "1", "--dtype",
                                   "float16"],
                                  ["log_softmax", "-n", "3x40", "--dtype", "float16"]])
def test_compare_argmin_cumprod_log_softmax(args):
    result = invoke("compare", *args, "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert " ok " in result.output and "WRONG" not in result.output


@simulator_only
def test_compare_sorts_against_numpys_stable_order(tmp_path):
    out = tmp_path / "sort.json"
    result = invoke("compare", "sort", "--repeat", "1", "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["shape"] == [256]  # the simulator's default for sorts
    assert {r["strategy"]: r["ok"] for r in data["rows"]} == {"radix": True, "bitonic": True}
    # one column of 257 int8 (one radix pass): the shortest row bitonic does not take
    result = invoke("compare", "argsort", "-n", "257x1", "--axis", "0", "--dtype", "int8",
                    "--repeat", "1")
    assert result.exit_code == 0, result.output  # bitonic is n/a for rows of 257, not WRONG
    assert "n/a: rows of 257 (bitonic takes at most 256)" in result.output
    assert "WRONG" not in result.output


@simulator_only
def test_compare_median_against_numpy(tmp_path):
    out = tmp_path / "median.json"
    # the default size (256) is test_compare_sorts_against_numpys_stable_order's
    result = invoke("compare", "median", "-n", "40", "--repeat", "1", "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert {r["strategy"]: r["ok"] for r in data["rows"] if r["strategy"] in
            ("radix", "bitonic", "radix_select")} == {"radix": True, "bitonic": True,
                                                      "radix_select": True}
    result = invoke("compare", "median", "-n", "257", "--dtype", "int8", "--repeat", "1",
                    "-s", "bitonic")
    assert result.exit_code == 0, result.output  # bitonic n/a for 257 elements, not WRONG
    assert "n/a: rows of 257 (bitonic takes at most 256)" in result.output
    assert "WRONG" not in result.output


@simulator_only
@pytest.mark.parametrize("args", [["-n", "500"], ["-n", "4x70", "--axis", "1", "--dtype",
                                                  "int16"], ["-n", "300", "--dtype", "float16"]])
def test_compare_mean(args):
    result = invoke("compare", "mean", *args, "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert result.output.count(" ok ") == len(numbakern.strategies.available())


def test_mean_bound_catches_a_wrong_count():
    from numbakern.teach.compare import OPERATIONS, check, sample

    op = OPERATIONS["mean"]
    x = sample(op, (1000,), np.float32)
    want = op.expected(x, {})
    assert check(np.float32(x.astype(np.float64).sum() / 1000), want.values, want.tolerance)[0]
    assert not check(np.float32(x.astype(np.float64).sum() / 999), want.values,
                     want.tolerance)[0]


@simulator_only
def test_compare_bincount_of_every_histogram_strategy():
    result = invoke("compare", "bincount", "-n", "300", "--repeat", "1")  # int32 by default
    assert result.exit_code == 0, result.output
    assert "bincount of 300 int32" in result.output
    assert result.output.count(" ok ") == len(numbakern.strategies.REGISTRY["histogram"])
    result = invoke("compare", "bincount", "-n", "3x4")
    assert result.exit_code == 2 and "bincount takes a 1-D input" in result.output


def test_sort_comparison_catches_an_unstable_argsort():
    from numbakern.teach.compare import OPERATIONS, check

    x = np.array([2, 1, 2, 1], np.int8)
    want = OPERATIONS["argsort"].expected(x, {})
    assert check(np.array([1, 3, 0, 2]), want.values, want.tolerance)[0]
    assert not check(np.array([3, 1, 0, 2]), want.values, want.tolerance)[0]


def test_cumprod_bound_catches_a_shifted_scan():
    from numbakern.teach.compare import OPERATIONS, check, sample

    op = OPERATIONS["cumprod"]
    x = sample(op, (2000,), np.float32)
    want = op.expected(x, {})
    right = np.cumprod(x, dtype=np.float32)
    assert check(right, want.values, want.tolerance)[0]
    shifted = np.concatenate([[1.0], right[:-1]]).astype(np.float32)  # exclusive
    assert not check(shifted, want.values, want.tolerance)[0]


def test_prod_bound_grows_with_the_factors_and_catches_a_missing_one():
    """NumPy's own float32 product of 4096 factors near 1 is off by ~12 eps from the
    float64 one (a fresh-eyes trial: `compare prod` showed every strategy WRONG); one
    factor of ``1 +- 0.001`` left out still fails."""
    from numbakern.teach.compare import OPERATIONS, check, sample

    op = OPERATIONS["prod"]
    for shape, kw in (((4096,), {}), ((3, 2000), {"axis": 1}), ((2000, 3), {"axis": 0})):
        x = sample(op, shape, np.float32)
        want = op.expected(x, kw)
        right = np.prod(x, dtype=np.float32, **kw)
        assert check(right, want.values, want.tolerance)[0]
        short = np.prod(x[1:] if not kw else x[:, 1:] if kw["axis"] else x[1:],
                        dtype=np.float32, **kw)
        assert not check(short, want.values, want.tolerance)[0]


def test_compare_prod_of_257_factors_is_right_on_every_strategy():
    result = invoke("compare", "prod", "-n", "257", "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert "WRONG" not in result.output


def test_shape_parser():
    from numbakern.teach.cli import SHAPE

    assert SHAPE.convert("1e3", None, None) == (1000,)
    assert SHAPE.convert("2**4x7", None, None) == (16, 7)
    assert SHAPE.convert("8192x50257", None, None) == (8192, 50257)
    with pytest.raises(Exception):
        SHAPE.convert("1x2x3", None, None)
    assert np.prod(SHAPE.convert("8192X50257", None, None)) == 8192 * 50257


def test_bench_plot(tmp_path):
    """bench/plot.py draws pytest-benchmark JSON as bench/conftest.py records it."""
    pytest.importorskip("matplotlib")
    records = [
        {"fullname": f"bench/bench_reduce.py::test_x[{n}-{p}]",
         "extra_info": {"provider": p, "n": n, "bytes": 4 * n, "gbps": g * n / (n + 2**20),
                        "copy_gbps": 4180.0}}
        for n in (2**20, 2**24, 2**28)
        for p, g in (("two_pass/warp_shuffle", 3500), ("cupy", 4000), ("torch", 3900))
    ]
    data = tmp_path / "bench.json"
    data.write_text(json.dumps({"benchmarks": records + [{"fullname": "x", "extra_info": {}}]}))
    plot = Path(__file__).resolve().parents[2] / "bench" / "plot.py"
    done = subprocess.run([sys.executable, str(plot), str(data), "-o", str(tmp_path / "b.png")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"benchmarks": []}))
    done = subprocess.run([sys.executable, str(plot), str(empty)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "no benchmark" in done.stderr
    done = subprocess.run([sys.executable, str(plot), str(data), "-o", str(tmp_path / "b.txt")],
                          capture_output=True, text=True, timeout=120)  # matplotlib lacks it
    assert done.returncode == 2 and "matplotlib saves no .txt" in done.stderr
    assert "Traceback" not in done.stderr


def test_bench_peers_without_cupy_is_one_error_line():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the table would run")
    peers = Path(__file__).resolve().parents[2] / "bench" / "peers.py"
    done = subprocess.run([sys.executable, str(peers), "--quick"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "needs CuPy on a GPU host" in done.stderr
    assert "Traceback" not in done.stderr


def test_bench_plot_reads_impl_and_draws_every_peer_as_a_peer(tmp_path):
    """The sort and selection suites name their provider ``impl``; cuda.compute and
    torch.compile are peers (dashed), not strategies."""
    spec = importlib.util.spec_from_file_location(
        "bench_plot", Path(__file__).resolve().parents[2] / "bench" / "plot.py")
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    records = [{"fullname": f"bench/bench_sort.py::test_sort[{p}-{d}]",
                "extra_info": {"impl": p, "n": 8, "bytes": 32, "gbps": g, "dtype": d}}
               for p in ("numbakern", "cuda.compute") for d, g in (("float32", 1.0),
                                                                   ("uint32", 2.0))]
    data = tmp_path / "sort.json"
    data.write_text(json.dumps({"benchmarks": records}))
    got = plot.series(plot.load([str(data)]))
    assert got["sort"] == {f"{p} {d}": [(32, g)] for p in ("numbakern", "cuda.compute")
                           for d, g in (("float32", 1.0), ("uint32", 2.0))}
    one = [r for r in records if r["extra_info"]["dtype"] == "float32"]
    data.write_text(json.dumps({"benchmarks": one}))  # one dtype: no dtype in the names
    assert set(plot.series(plot.load([str(data)]))["sort"]) == {"numbakern", "cuda.compute"}
    peers = ["cuda.compute", "torch.compile", "triton", "cupyx", "numpy", "cupy-arg",
             "torch.kthvalue", "torch.topk uint32"]
    assert all(map(plot.is_peer, peers))
    ours = ["numbakern", "numbakern-arg-select", "numbakern/auto", "radix_select/compact",
            *(s for family in numbakern.strategies.FAMILIES
              for s in numbakern.strategies.available(family))]
    assert not any(map(plot.is_peer, ours))


@simulator_only
def test_compare_cross_entropy_checks_every_block_strategy():
    from numbakern.strategies import available

    result = invoke("compare", "cross_entropy", "-n", "2x40", "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert result.output.count(" ok ") == len(available("block"))
    assert "WRONG" not in result.output


@simulator_only
def test_compare_topk_checks_every_select_strategy(tmp_path):
    out = tmp_path / "topk.json"
    result = invoke("compare", "topk", "-n", "2x80", "--dtype", "int16", "--repeat", "1",
                    "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert {r["strategy"]: r["ok"] for r in data["rows"]} == \
        {name: True for name in numbakern.strategies.available("select")}


def test_topk_comparison_holds_the_values_to_the_largest_first():
    from numbakern.teach.compare import OPERATIONS, check

    x = np.array([[3.0, np.nan, 1.0, 7.0]], np.float32)
    want = OPERATIONS["topk"].expected(x, {})
    assert check(np.array([[np.nan, 7, 3, 1]], np.float32), want.values, want.tolerance)[0]
    assert not check(np.array([[7, 3, 1, np.nan]], np.float32), want.values,
                     want.tolerance)[0]


@simulator_only
def test_compare_simulator_warning_points_at_the_caller(monkeypatch):
    import warnings

    from numbakern.runtime.simcost import SimulatorSlowWarning

    monkeypatch.setenv("NUMBAKERN_SIM_WARN_SECONDS", "0")  # every launch warns
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = invoke("compare", "sum", "-n", "64", "--repeat", "1", "-s",
                        "two_pass/warp_shuffle")
    assert result.exit_code == 0, result.output
    slow = [w for w in caught if issubclass(w.category, SimulatorSlowWarning)]
    assert slow and all(w.filename == __file__ for w in slow), \
        {(w.filename, w.lineno) for w in slow}


@simulator_only
def test_compare_from_the_command_line_warns_at_no_numbakern_line():
    # python -m numbakern: no user code calls the kernels; the command's own warning,
    # not a line inside numbakern or click (nor Python's "sys:1")
    env = dict(os.environ, NUMBAKERN_SIM_WARN_SECONDS="0")
    done = subprocess.run(
        [sys.executable, "-W", "always::UserWarning", "-m", "numbakern", "compare", "sum",
         "-n", "64", "--repeat", "1", "-s", "two_pass/warp_shuffle"],
        capture_output=True, text=True, env=env, timeout=120,
        cwd=Path(numbakern.__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    lines = [l for l in done.stderr.splitlines() if "SimulatorSlowWarning" in l]
    assert lines and all(l.startswith("numbakern: SimulatorSlowWarning: kernel ")
                         for l in lines), lines


def test_compare_help_states_each_default_size_the_command_uses():
    import re

    result = invoke("compare", "--help")
    assert result.exit_code == 0, result.output
    text = re.sub(r"\s+", " ", result.output)

    def x(shape):
        return "x".join("2**26" if n == 1 << 26 else str(n) for n in shape)

    assert "Default 2**26 on a GPU, 4096 under the simulator" in text
    for name in ("topk", "cross_entropy"):
        op = OPERATIONS[name]
        assert f"{name}: {x(op.gpu_shape)} on a GPU, {x(op.simulator_shape)} under the " \
               f"simulator" in text
        assert len(op.gpu_shape) == len(op.simulator_shape) == 2  # rows of classes
    for name in ("sort", "argsort", "median"):
        assert OPERATIONS[name].simulator_shape == (256,) and name in text.split("256")[0]
    from numbakern.teach.compare import TOPK_K

    assert f"topk: k={TOPK_K}" in text


@pytest.mark.parametrize("args", [["compare", "sum", "-n", "8", "--json", "-"],
                                  ["explain", "shared_tree", "--json", "-"]])
def test_output_paths_are_files_not_stdout(args):
    result = invoke(*args)
    assert result.exit_code == 2 and "give a file to write" in result.output, result.output


def test_compare_causal_softmax_of_1d_input_is_a_usage_error():
    """A causal mask needs queries and keys: a 1-D input has no queries."""
    result = invoke("compare", "causal_softmax", "-n", "64")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "'--size'" in result.stderr and "ROWSxCOLS" in result.stderr


@simulator_only
def test_compare_causal_softmax_takes_the_last_axis_only():
    """Its mask runs along the keys: another axis is a usage error, not 8 WRONG rows."""
    result = invoke("compare", "causal_softmax", "--axis", "0")
    assert result.exit_code == 2, result.output
    assert "'--axis'" in result.stderr and "last axis" in result.stderr
    for axis in ("1", "-1"):  # the keys of 8 x 4 scores (two heads of 4 x 4)
        result = invoke("compare", "causal_softmax", "-n", "8x4", "--axis", axis,
                        "-s", "online/warp_shuffle", "--repeat", "1")
        assert result.exit_code == 0 and " ok " in result.output, result.output


@pytest.mark.parametrize("op", ["cross_entropy", "bincount", "segmented_reduce",
                                "segmented_scan", "segmented_sort"])
def test_compare_axis_of_an_operation_without_one_is_a_usage_error(op):
    """cross_entropy reduces each row's classes, bincount and the segmented functions
    read the whole 1-D input: none takes an axis, so --axis is not silently dropped."""
    result = invoke("compare", op, "--axis", "0")
    assert result.exit_code == 2, result.output
    assert "'--axis'" in result.stderr and f"{op} takes no axis" in result.stderr


class _SlotBlock(numbakern.strategies.BlockStrategy):
    """A student's block scan through shared slots; ``fault`` breaks it one way."""

    name = "slot_scan"
    needs_commutative = False
    fault = None

    def temp_slots(self):
        return self.threads

    def barriers(self):
        return 2

    def build_reduce(self, kit):
        return reduce_from_scan(self.build_scan(kit))

    def build_scan(self, kit):
        """Thread 0 folds the threads' states in order, then each reads its own."""
        combine, identity, store, load = kit.combine, kit.identity, kit.store, kit.load
        last, fault = self.threads - 1, self.fault

        @cuda.jit(device=True)
        def block_scan(s, t0, t1):
            tid = cuda.threadIdx.x
            if fault == "typo":
                store(t0, t1, s)  # a slot argument left out
            else:
                if fault == "no barrier" and tid > 0:
                    for _ in range(2000):  # slow stores: thread 0 reads before them,
                        s = combine(s, identity())  # not only when the race allows
                store(t0, t1, tid, s)
            if fault != "no barrier":
                cuda.syncthreads()
            if tid == 0:
                for i in range(last):
                    store(t0, t1, i + 1, combine(load(t0, t1, i), load(t0, t1, i + 1)))
            cuda.syncthreads()
            exc = load(t0, t1, tid - 1) if tid > 0 else identity()
            return load(t0, t1, tid), exc, load(t0, t1, last)

        return block_scan


@simulator_only
@pytest.mark.parametrize("fault", ["typo", "no barrier"])
def test_a_students_broken_strategy_is_reported_as_its_own_error(fault):
    """A bug in a strategy of the user's keeps its traceback (not a usage error naming
    numbakern's arguments); a read of a slot nothing wrote says what may cause it."""
    name = f"slot_scan_{fault.replace(' ', '_')}"  # its own name: kernels are cached by it
    broken = type("Broken", (_SlotBlock,), {"name": name, "fault": fault})
    numbakern.strategies.register(broken)
    try:
        result = invoke("explain", f"two_pass/{name}", "--values", "3,1,4")
    finally:
        numbakern.strategies.unregister(broken)
    assert result.exit_code == 1, result.output
    if fault == "typo":
        assert isinstance(result.exception, TypeError)
        assert "missing 1 required positional argument" in str(result.exception)
    else:
        assert "a barrier missing" in result.output + result.stderr


@simulator_only
def test_explain_refuses_a_sort_it_cannot_record_naming_the_ones_it_can():
    from numbakern.teach.sort_trace import trace_sort

    with pytest.raises(ValueError, match=r"strategy: explain records the sorts "
                                         r"\['bitonic', 'radix'\], got 'no_such_sort'"):
        trace_sort([3, 1, 2], "no_such_sort")


@simulator_only
def test_explain_refuses_a_sort_of_ones_own_naming_the_two_it_records():
    """Found by a fresh-user trial: the legend was looked up before the refusal
    (a KeyError)."""
    from numbakern.strategies import BitonicSort

    own = type("Own", (BitonicSort,), {"name": "own_sort"})
    numbakern.strategies.register(own)
    try:
        result = invoke("explain", "own_sort", "--values", "3,1,2")
    finally:
        numbakern.strategies.unregister(own)
    assert result.exit_code == 2, result.output
    assert "explain records the sorts ['bitonic', 'radix']" in result.output + result.stderr


@simulator_only
def test_compare_takes_a_sort_of_ones_own_at_its_fits():
    """A registered sort whose ``fits`` refuses the rows is n/a, as bitonic past 256
    (found by a fresh-user trial: it was reported WRONG, exit 1)."""
    from numbakern.strategies import BitonicSort

    own = type("Own", (BitonicSort,), {"name": "own_short_sort"})
    numbakern.strategies.register(own)
    try:
        result = invoke("compare", "argsort", "-n", "300", "-s", "own_short_sort",
                        "--repeat", "1")
    finally:
        numbakern.strategies.unregister(own)
    assert result.exit_code == 0, result.output
    assert "n/a: rows of 300 (own_short_sort takes at most 256)" in result.output
    assert "WRONG" not in result.output


@simulator_only
@pytest.mark.parametrize("args, nbytes", [
    (["topk", "-n", "4x256"], 4 * 256 * 4 + 4 * 50 * (4 + 8)),  # values and int64 indices
    (["segmented_reduce", "-n", "1000"], None),  # the input, the sums, the offsets
])
def test_compare_counts_every_array_a_call_reads_and_writes(tmp_path, args, nbytes):
    from numbakern.teach.compare import segment_offsets

    out = tmp_path / "c.json"
    result = invoke("compare", *args, "--repeat", "1", "--json", str(out))
    assert result.exit_code == 0, result.output
    if nbytes is None:
        offsets = segment_offsets(1000)
        nbytes = 1000 * 4 + (len(offsets) - 1) * 4 + offsets.nbytes
    assert {row["bytes"] for row in json.loads(out.read_text())["rows"]} == {nbytes}


def test_compare_draws_segment_offsets_once_outside_the_timed_calls():
    """The segmented rows time the kernels, not the offsets' drawing and upload (on an
    H100 a 2^26 segmented sum's row showed 1 ms for nk and torch alike: the host's
    random lengths, cumsum and upload of 65k offsets in each timed call)."""
    from numbakern.teach.compare import OPERATIONS, segment_offsets

    offsets = segment_offsets(1000)
    assert segment_offsets(1000) is offsets and not offsets.flags.writeable
    assert offsets[0] == 0 and offsets[-1] == 1000 and np.all(np.diff(offsets) >= 0)
    x = np.arange(1000, dtype=np.float32)
    op = OPERATIONS["segmented_reduce"]
    got = op.call(x, op.variants()[0], {})
    np.testing.assert_allclose(got, np.add.reduceat(x, offsets[:-1]) * (
        np.diff(offsets) > 0), rtol=1e-6)
    from numba import cuda

    from numbakern.teach.compare import _offsets_on_device

    _offsets_on_device.cache_clear()
    device_x = cuda.to_device(x)
    for _ in range(3):  # device input: the offsets uploaded by the first call only
        np.testing.assert_allclose(op.call(device_x, op.variants()[0], {}).copy_to_host(),
                                   got, rtol=1e-6)
    info = _offsets_on_device.cache_info()
    assert (info.misses, info.hits) == (1, 2)


@simulator_only
def test_compare_reads_a_block_strategys_name_as_strategy_does():
    """``-s warp_shuffle`` is two_pass/warp_shuffle, as ``nk.sum(strategy=...)`` and
    explain read it (found by a fresh-user trial: refused)."""
    result = invoke("compare", "sum", "-n", "100", "-s", "warp_shuffle", "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert "two_pass/warp_shuffle" in result.output and "ok" in result.output


@pytest.mark.parametrize("args", [["explain", "--values", "1,2", "--json", "/proc/x.json"],
                                  ["explain", "--values", "1,2", "--figure", "/proc/x.png"],
                                  ["compare", "sum", "-n", "8", "--png", "/proc/x.png"]])
def test_a_path_no_file_can_be_made_in_is_a_usage_error_before_any_work(args):
    """``/proc`` passes ``os.access(W_OK)`` as root (another user is told it is not
    writable) and takes no new file: the path is tried before the work, not met as a
    traceback after it."""
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    result = invoke(*args)
    said = "cannot write in '/proc'" if os.access("/proc", os.W_OK) else "is not writable"
    assert result.exit_code == 2 and said in result.output, result.output


def test_a_fifo_or_a_dangling_link_to_write_is_neither_opened_nor_removed(tmp_path):
    """The check of an output path writes a file of its own: a FIFO named by --json
    does not block the check, a dangling link is neither followed nor removed."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifo, link = tmp_path / "fifo", tmp_path / "link.json"
    os.mkfifo(fifo)
    link.symlink_to(tmp_path / "target.json")
    from numbakern.teach.cli import OUTPUT

    for path in (fifo, link):
        assert OUTPUT.convert(str(path), None, None) == str(path)
    assert link.is_symlink() and not (tmp_path / "target.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link.json"]


def test_course_into_a_folder_that_cannot_be_made_is_a_usage_error(tmp_path):
    (tmp_path / "f").write_text("")
    result = invoke("course", "-f", "sort", "--out", str(tmp_path / "f" / "sub"))
    assert result.exit_code == 2 and "cannot make the folder" in result.output, result.output


@simulator_only
@pytest.mark.parametrize("grid, full", [("atomic_fold", "atomic_fold/warp_shuffle"),
                                        ("reduce_then_scan", "reduce_then_scan/warp_shuffle"),
                                        ("online", "online/warp_shuffle")])
def test_explain_reads_a_grids_name_alone_as_strategy_does(grid, full):
    result = invoke("explain", grid, "-n", "8")
    assert result.exit_code == 0, result.output
    assert f"{full} ·" in result.output.splitlines()[0], result.output[:200]


@simulator_only
def test_the_console_scripts_warnings_are_the_commands_own():
    """The ``numbakern`` script (not ``python -m``): a warning reported at its frame
    printed as the command's, not as ``.../bin/numbakern:8: ...``."""
    script = Path(sys.executable).parent / "numbakern"
    if not script.exists():
        pytest.skip("no numbakern console script beside this Python")
    env = dict(os.environ, NUMBAKERN_SIM_WARN_SECONDS="0")
    done = subprocess.run(
        [sys.executable, "-W", "always::UserWarning", str(script), "compare", "sum",
         "-n", "64", "--repeat", "1", "-s", "two_pass/warp_shuffle"],
        capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [l for l in done.stderr.splitlines() if "SimulatorSlowWarning" in l]
    assert lines and all(l.startswith("numbakern: SimulatorSlowWarning: kernel ")
                         for l in lines), lines
