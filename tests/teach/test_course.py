"""docs/course.md: every strategy of every family has its section and its figure (a
PNG in docs/course/), ``numbakern course`` draws them, and the page's commands and
its first exercise (a new block strategy, explained) run as written."""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from numba import cuda

import numbakern
from numbakern.strategies import BlockStrategy, register, unregister
from numbakern.teach.cli import cli
from numbakern.teach.course import FAMILIES, figure_name, strategies

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "course.md").read_text()


def test_the_course_has_every_strategy_and_its_figure():
    from PIL import Image

    total = 0
    for family in FAMILIES:
        for name in strategies(family):
            assert f"\n### {name}\n" in PAGE, name
            link = f"course/{figure_name(family, name)}"
            assert f"]({link})" in PAGE, link
            path = ROOT / "docs" / link
            with Image.open(path) as im:
                assert im.format == "PNG" and im.size[0] >= 300
            total += path.stat().st_size
    assert total < 1_000_000  # small enough to keep in the repository


def test_the_course_is_linked_from_the_readme():
    assert "](docs/course.md)" in (ROOT / "README.md").read_text()


@simulator_only
def test_course_draws_a_family(tmp_path):
    result = CliRunner().invoke(cli, ["course", "--out", str(tmp_path), "-f", "histogram"])
    assert result.exit_code == 0, result.output
    from PIL import Image

    for name in strategies("histogram"):
        with Image.open(tmp_path / figure_name("histogram", name)) as im:
            assert im.format == "PNG"
    assert "wrote 3 figures" in result.output


@simulator_only
def test_the_course_commands_run_as_written(tmp_path, monkeypatch):
    """The page's commands but the full ``numbakern course`` (two minutes; the test
    above and ``--family sort`` here run the same code)."""
    block = re.search(r"```\n(numbakern course.*?)```", PAGE, re.S).group(1)
    commands = [line.split("  #")[0] for line in block.splitlines()]
    monkeypatch.chdir(tmp_path)
    ran = 0
    for command in commands:
        args = shlex.split(command)[1:]
        if args == ["course"]:
            continue
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (command, result.output)
        ran += 1
    assert ran == 2
    assert (tmp_path / "docs" / "course" / figure_name("sort", "radix")).exists()


class Sequential(BlockStrategy):
    """Thread 0 folds every thread's state in thread order, through shared memory."""

    name = "my_block"
    needs_commutative = False
    after = 1  # the lane thread 0 folds in after its own

    def temp_slots(self) -> int:
        return self.threads

    def barriers(self) -> int:
        return 2

    def build_reduce(self, kit):
        combine, store, load = kit.combine, kit.store, kit.load
        threads, after = self.threads, self.after

        @cuda.jit(device=True)
        def block_reduce(s, t0, t1):
            tid = cuda.threadIdx.x
            store(t0, t1, tid, s)
            cuda.syncthreads()
            if tid == 0:
                acc = load(t0, t1, 0)
                for i in range(after, threads):
                    acc = combine(acc, load(t0, t1, i))
                store(t0, t1, 0, acc)
            cuda.syncthreads()
            return load(t0, t1, 0)

        return block_reduce


@simulator_only
def test_exercise_one_a_new_block_is_explained():
    register(Sequential)
    try:
        code = textwrap.dedent(re.search(r"```python\n(.*?) *```", PAGE, re.S).group(1))
        runner = CliRunner()
        with runner.isolation() as (out, _, _):
            exec(compile(code, "docs/course.md", "exec"), {})  # noqa: S102 (the page's own code)
        text = out.getvalue().decode()
        assert "two_pass/my_block" in text and "every element exactly once: yes" in text
        result = runner.invoke(cli, ["explain", "online/my_block", "-n", "20", "--limit", "1"])
        assert result.exit_code == 0, result.output
        assert "online_softmax covers every element exactly once: yes" in result.output
        assert "online/my_block" in strategies("softmax")
    finally:
        unregister(Sequential)
    assert "online/my_block" not in strategies("softmax")
    np.testing.assert_equal(numbakern.strategies.available("block"),
                            ["warp_shuffle", "shared_tree", "hillis_steele", "blelloch"])


class Twice(Sequential):
    """The course's second exercise: thread 0 folds its own state in twice."""

    name = "twice"
    after = 0


@simulator_only
def test_exercise_two_a_broken_block_is_caught_by_the_proof_and_the_counts():
    register(Twice)
    try:
        result = CliRunner().invoke(cli, ["explain", "two_pass/twice", "--values",
                                          "3,1,4,1,5", "--threads", "32"])
    finally:
        unregister(Twice)
    assert result.exit_code == 1, result.output  # a failed proof fails the command
    assert "every element exactly once: NO" in result.output
    assert re.search(r"joins total \d+ ≠ n - 1 = 4", result.output), result.output


@simulator_only
def test_course_draws_the_selections(tmp_path):
    """The select family (topk's strategies) is a family of the course like the others:
    each strategy recorded, proved and drawn (radix_select with its digit passes)."""
    assert "select" in FAMILIES
    assert strategies("select") == numbakern.strategies.available("select")
    result = CliRunner().invoke(cli, ["course", "--out", str(tmp_path), "-f", "select"])
    assert result.exit_code == 0, result.output
    from PIL import Image

    for name in strategies("select"):
        with Image.open(tmp_path / figure_name("select", name)) as im:
            assert im.format == "PNG" and im.size[0] >= 300
    assert f"wrote {len(strategies('select'))} figures" in result.output


@simulator_only
@pytest.mark.parametrize("family", ["reduce", "scan", "softmax"])
def test_figures_draw_states_in_an_order_the_threads_timing_cannot_change(family):
    """The recorded order of states follows how the simulator's threads interleaved
    (each recording numbers them its own way); the figures draw them in
    :func:`drawing_order`, the same states in the same order every recording, so that
    the course's PNGs are the same bytes every run."""
    from numbakern.teach.figures import drawing_order

    x = np.random.default_rng(24).integers(0, 10, 40).astype(np.float32)

    def record():
        if family == "reduce":
            from numbakern.teach.trace import trace_reduce

            return trace_reduce(x, "sum", "two_pass/warp_shuffle", threads=32, blocks=2)
        if family == "scan":
            from numbakern.teach.scan_trace import trace_scan

            return trace_scan(x, "reduce_then_scan/hillis_steele", threads=32, items=1,
                              blocks=2)
        from numbakern.teach.softmax_trace import trace_softmax

        return trace_softmax(x, "online/shared_tree", threads=32)

    def drawn(trace):  # what a figure shows of each combine, in drawing order
        combines = [n for n in trace.nodes if n.kind == "combine"]
        return [(n.launch, n.step, n.block, n.thread, sorted(n.cover),
                 [sorted(trace.nodes[a].cover) for a in n.args])
                for n in drawing_order(combines)]

    first = drawn(record())
    assert len(first) >= 16
    for _ in range(3):
        assert drawn(record()) == first


def test_the_courses_input_gives_its_quoted_counts(tmp_path):
    """The page's commands for seeing a recording in text, run as written (``$V``
    its values), give the counts the page quotes for them: shared_tree's 39 joins
    and 135 combines, decoupled look-back's 6 atomics and 7 barriers."""
    block = re.search(r"```\n(V=.*?)```", PAGE, re.S).group(1).splitlines()
    values = block[0].split("=", 1)[1]
    counts = []
    for i, command in enumerate(block[1:]):
        path = tmp_path / f"{i}.json"
        args = shlex.split(command.replace("$V", values))[1:] + ["--json", str(path)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (command, result.output)
        counts.append(json.loads(path.read_text()))
    assert (counts[0]["joins"], counts[0]["combines"]) == (39, 135)
    assert (counts[1]["atomics"], counts[1]["barriers"], counts[1]["joins"]) == (6, 7, 189)
    assert "135 combines run" in PAGE and "6 atomics here" in PAGE
    assert "warp_shuffle's 7, the same 189 joins" in PAGE
