"""The teaching tables and figures read well at a terminal's 80 columns and in print:
strategy names are folded, never cut to look alike; explain's text and figure name
the same steps; the reduction figure stays a readable size; the simulator's compare
figure draws no speed."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from numbakern.teach import compare, demo
from numbakern.teach.compare import Comparison, Row

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

NAMES = ["two_pass/warp_shuffle", "two_pass/warp_privatized", "atomic_fold/warp_shuffle",
         "atomic_fold/shared_tree"]


def rendered(table, width=80) -> str:
    console = Console(width=width, file=io.StringIO(), highlight=False)
    console.print(table)
    return console.file.getvalue()


def first_column(text: str) -> str:
    """The first column's cells' fragments, top to bottom, joined."""
    cells = [line.split("│")[1].strip() for line in text.splitlines()
             if line.startswith("│") and line.count("│") > 2]
    return "".join(cells)


def rows():
    return [Row("numbakern", name, ok=True, max_error=0.0, result="14.0", seconds=0.25,
                nbytes=4000) for name in NAMES]


def test_compare_table_keeps_strategy_names_whole_at_80_columns():
    c = Comparison("sum", (1000,), "float32", "simulator", True, 30.0, rows())
    text = rendered(compare.comparison_table(c), width=60)
    assert "…" not in text
    assert first_column(text) == "".join(NAMES)


def test_demo_table_keeps_strategy_names_whole_at_80_columns():
    case = demo.Case("sum", "the worked example [3, 1, 4, 1, 5]", lambda quick: None)
    result = demo.CaseResult(case, (5,), rows())
    text = rendered(demo.table([result], timed=True))
    assert "…" not in text
    strategy = [line.split("│")[3].strip() for line in text.splitlines()
                if line.startswith("│") and line.count("│") > 4]
    assert "".join(strategy) == "".join(NAMES)


#: a long note the tables print: why var skips atomic_fold
LONG_NOTE = "n/a: atomic_fold folds no three-field (count, mean, M2) state: two_pass reduces var"


def with_long_note():
    return rows() + [Row("numbakern", "atomic_fold/shared_tree", ok=None, note=LONG_NOTE)]


def column(text: str, index: int) -> str:
    """Column ``index``'s cells' fragments, top to bottom, joined."""
    return "".join(line.split("│")[index + 1].strip() for line in text.splitlines()
                   if line.startswith("│") and line.count("│") > index + 1)


def assert_fits_and_keeps(text: str, check: int):
    table = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    # the console crops a table wider than itself: its right border goes
    assert all(line[-1] in "┓┃┩│┘" for line in table)
    assert "…" not in text
    assert "".join(column(text, check).split()).endswith("".join(LONG_NOTE.split()))


@pytest.mark.parametrize("width", [80, 50])
def test_compare_table_keeps_a_long_check_note(width):
    c = Comparison("var", (1000,), "float32", "gpu", False, 30.0, with_long_note())
    text = rendered(compare.comparison_table(c), width)
    assert_fits_and_keeps(text, check=1)
    if width == 80:
        assert set(LONG_NOTE.split()) <= set(text.split())


@pytest.mark.parametrize("timed", [False, True])
def test_demo_table_keeps_a_long_check_note_at_80_columns(timed):
    case = demo.Case("var", "a batch of language-model logits, 8192 x 50257",
                     lambda quick: None)
    result = demo.CaseResult(case, (64, 50257), with_long_note())
    text = rendered(demo.table([result], timed=timed))
    assert_fits_and_keeps(text, check=5)
    if not timed:  # the simulator's six columns leave the check whole words
        assert set(LONG_NOTE.split()) <= set(text.split())


def header(text: str) -> list[str]:
    """The table's column headers, the wrapped words of each joined."""
    lines = [line.split("┃")[1:-1] for line in text.splitlines() if line.startswith("┃")]
    return [" ".join(" ".join(cell.split()) for cell in cells).strip()
            for cells in zip(*lines)]


def test_simulator_compare_table_shows_no_speed():
    on_gpu = Comparison("sum", (1000,), "float32", "gpu", False, 30.0, rows())
    assert header(rendered(compare.comparison_table(on_gpu), width=120)) == \
        ["strategy", "check", "max |error|", "median", "GB/s", "of copy"]
    simulated = Comparison("sum", (1000,), "float32", "simulator", True, 30.0, rows())
    text = rendered(compare.comparison_table(simulated), width=120)
    assert header(text) == ["strategy", "check", "max |error|", "median"]
    assert "GB/s" not in text and "copy bandwidth" not in text
    assert "250.000 ms" in text  # the times stay, as times


def test_simulator_compare_figure_draws_no_speed(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    def no_bars(*args, **kwargs):
        raise AssertionError("bars of simulator GB/s drawn")

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", no_bars)
    png = tmp_path / "speed.png"
    compare.comparison_figure(Comparison("sum", (1000,), "float32", "simulator", True,
                                         30.0, rows()), str(png))
    assert png.read_bytes()[:4] == b"\x89PNG"


@simulator_only
def test_reduction_figure_width_and_labels_agree_with_the_text(tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    from numbakern.teach.explain import draw, row_labels, tree
    from numbakern.teach.trace import trace_reduce

    x = np.random.default_rng(1).integers(0, 10, 200).astype(np.float32)
    trace = trace_reduce(x, "sum", "atomic_fold/warp_shuffle", threads=64, blocks=3)
    png = tmp_path / "tree.png"
    draw(trace, str(png))
    with Image.open(png) as im:
        assert im.size[0] <= 1120
    text = rendered(tree(trace, 1), width=200)
    labels = row_labels(trace)[1:]
    assert labels and all(label.startswith("launch ") for label in labels)
    for label in labels:
        launch, title = label.split(" · ", 1)
        assert int(launch.split()[1]) in trace.combining_launches
        if not title.startswith("atomic"):
            assert f"{title}:" in text  # the text names the same step the same way
