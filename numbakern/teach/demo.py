"""``numbakern demo``: every operation, every strategy, checked on real-shaped input.

The demo is a table of *cases*: one operation on one input. Three kinds of input:

* the seed chapters' worked example, ``[3, 1, 4, 1, 5]``: its sum is 14 and its
  cumsum ``[3, 4, 8, 9, 14]`` (the chapters' own answers are checked as well as
  NumPy's);
* the fused-softmax tutorial's 1823 x 781 float32 input (normal values), checked
  with ``allclose``'s default tolerance as the tutorial does;
* a language model's batch of logits, 8192 x 50257 float32 (GPT-2's vocabulary):
  the softmax, its normaliser (logsumexp) and the greedy next token (argmax) of every
  row, and whole-array reductions;
* attention scores, batch x heads x queries x keys (4 x 16 x 512 x 512): their
  causal softmax scaled by 1/8, as an attention without a flash kernel computes it.

Under the simulator, which runs each CUDA thread as an OS thread, the large inputs
are cut down (``quick``: further still) so that the demo ends in about a minute; the
table says which shape ran. An operation numbakern does not have yet is
listed as not available instead of run. Every result is checked against NumPy
(float64) by :mod:`numbakern.teach.compare` (the row-wise cases on the GPU's full logits: 64
evenly spaced rows, the table says so; a float64 reference of all 8192 rows would
take tens of seconds per strategy); on a GPU each is also timed beside CuPy and
PyTorch eager where installed (:data:`DEMO_PEERS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from .compare import OPERATIONS, Row, installed_peers, on_gpu, run_one, to_device

WORKED = np.array([3, 1, 4, 1, 5])
TUTORIAL = (1823, 781)
LOGITS = (8192, 50257)
ATTENTION = (4, 16, 512, 512)  # batch x heads x queries x keys
#: the peers the demo times: the eager ones. ``compare``'s compiling peers
#: (``torch.compile``, Triton, ``cuda.compute``) spend tens of seconds on a first call.
DEMO_PEERS = ("cupy", "torch")


@dataclass(frozen=True)
class Case:
    """One operation on one input.

    Attributes:
        op: a key of :data:`numbakern.teach.compare.OPERATIONS`.
        input: what the input is, in words.
        make: ``make(quick) -> np.ndarray``: the input (smaller under the simulator).
        kw: keyword arguments of the call and of the reference (``axis``).
        expect: the answer a seed document states, checked beside NumPy's.
        sample: for a row-wise op, check this many rows (evenly spaced, the first and
            last among them) when the input has more; None checks every element.
    """

    op: str
    input: str
    make: Callable[[bool], np.ndarray]
    kw: dict = field(default_factory=dict)
    expect: Any = None
    sample: int | None = None


def _worked(quick: bool) -> np.ndarray:
    return WORKED.copy()


def _matrix(shape, simulator, quick, scale=1.0, seed=0):
    """Normal values of ``shape`` on a GPU; of shape ``simulator`` (``quick``) under the
    simulator, sized so that each case's strategies run in seconds there."""

    def make(quick_run: bool) -> np.ndarray:
        run = shape if on_gpu() else quick if quick_run else simulator
        return _normal(run, scale, seed)

    return make


@lru_cache(maxsize=4)
def _normal(shape, scale, seed) -> np.ndarray:
    """One array per (shape, scale, seed): cases on the same input share it."""
    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    x *= np.float32(scale)
    x.flags.writeable = False
    return x


_tutorial = _matrix(TUTORIAL, simulator=(16, 781), quick=(2, 781))
_logits = _matrix(LOGITS, simulator=(2, 50257), quick=(1, 4096), scale=3.0, seed=1)
# A scan's tiles cost the simulator far more per element than a reduction's loads.
_logits_scan = _matrix(LOGITS, simulator=(2, 2048), quick=(1, 512), scale=3.0, seed=1)
# Rows that sort_slice's bitonic sort takes in one block under the simulator.
_logits_topk = _matrix(LOGITS, simulator=(4, 256), quick=(1, 256), scale=3.0, seed=1)
# Fewer queries than keys under the simulator: the causal mask's bottom-right alignment.
_scores = _matrix(ATTENTION, simulator=(1, 2, 12, 40), quick=(1, 1, 4, 10), scale=3.0,
                  seed=2)

# Packed variable-length sequences (a ragged batch): one 1-D array and its offsets.
_packed = _matrix((1 << 26,), simulator=(4096,), quick=(512,), seed=3)

CASES = [
    Case("sum", "worked example [3, 1, 4, 1, 5]", _worked, expect=14),
    Case("cumsum", "worked example [3, 1, 4, 1, 5]", _worked, expect=[3, 4, 8, 9, 14]),
    Case("max", "worked example [3, 1, 4, 1, 5]", _worked, expect=5),
    Case("argmax", "worked example [3, 1, 4, 1, 5]", _worked, expect=4),
    Case("min", "worked example [3, 1, 4, 1, 5]", _worked, expect=1),
    Case("prod", "worked example [3, 1, 4, 1, 5]", _worked, expect=60),
    Case("xor_sum", "worked example [3, 1, 4, 1, 5]", _worked, expect=2),
    Case("var", "worked example [3, 1, 4, 1, 5]", _worked),
    Case("softmax", "fused-softmax tutorial 1823 x 781, rows", _tutorial, {"axis": -1}),
    # A float64 NumPy reference of every row of the GPU's 8192 x 50257 takes tens of
    # seconds per strategy on one CPU core; 64 rows check the same kernels.
    Case("softmax", "LM logits 8192 x 50257, rows", _logits, {"axis": -1}, sample=64),
    Case("argmax", "LM logits 8192 x 50257, greedy token per row", _logits, {"axis": -1},
         sample=64),
    Case("cumsum", "LM logits 8192 x 50257, rows", _logits_scan, {"axis": -1}, sample=64),
    Case("logsumexp", "LM logits 8192 x 50257, rows (softmax's normaliser)", _logits,
         {"axis": -1}, sample=64),
    Case("topk", "LM logits 8192 x 50257, top 50 per row", _logits_topk, {"axis": -1},
         sample=64),
    Case("sum", "LM logits 8192 x 50257, all", _logits),
    Case("max", "LM logits 8192 x 50257, all", _logits),
    Case("cross_entropy", "LM logits 8192 x 50257, mean loss", _logits_scan),
    Case("segmented_reduce", "packed sequences, sum of each",
         _packed),
    Case("causal_softmax", "attention scores 4 x 16 x 512 x 512 (batch x heads x "
         "queries x keys), causal, scale 1/8", _scores),
]


@dataclass
class CaseResult:
    case: Case
    shape: tuple
    rows: list  # of compare.Row
    checked_rows: int = 0  # rows of the input checked, when a sample (else 0: all)


def _sample(case: Case, x: np.ndarray):
    """Row indices to check, or None for the whole result."""
    if case.sample is None or x.ndim < 2 or x.shape[0] <= case.sample:
        return None
    return np.unique(np.linspace(0, x.shape[0] - 1, case.sample).astype(np.int64))


def run(quick: bool = False, repeat: int = 10,
        advance: Callable[[str], None] = lambda label: None) -> tuple[list, list]:
    """Run every available case with every strategy (and, on a GPU, every peer).

    Returns ``(results, unavailable)``: a :class:`CaseResult` per case run, and the
    names of the operations numbakern does not have yet.
    """
    results, unavailable = [], []
    inputs: dict = {}
    for case in CASES:
        op = OPERATIONS[case.op]
        if not op.available:
            if case.op not in unavailable:
                unavailable.append(case.op)
            continue
        x = case.make(quick)
        if id(x) not in inputs:
            inputs[id(x)] = (x, to_device(x))
        x, x_dev = inputs[id(x)]
        sample = _sample(case, x)
        want = op.expected(x if sample is None else x[sample], case.kw)
        rows = []
        for variant in op.variants():
            advance(f"{case.op} · {case.input} · {variant.label}")
            reason = op.skips(variant, tuple(x.shape), case.kw) if op.skips else None
            if reason:  # reported, not run (var under atomic_fold)
                rows.append(Row("numbakern", variant.label, ok=None, note=f"n/a: {reason}"))
                continue
            row = run_one(op, variant, x, x_dev, case.kw, want, on_gpu(), repeat,
                          rows=sample)
            rows.append(_with_expectation(row, case))
        for peer in _peers():
            if peer in op.peers:
                advance(f"{case.op} · {case.input} · {peer}")
                rows.append(run_one(op, None, x, x_dev, case.kw, want, True, repeat,
                                    peer=peer, rows=sample))
        results.append(CaseResult(case, x.shape, rows, 0 if sample is None else len(sample)))
    return results, unavailable


def _with_expectation(row: Row, case: Case) -> Row:
    """Also hold the result to the answer the seed document states."""
    if case.expect is not None and row.ok and not np.array_equal(row.value, case.expect):
        row.ok, row.note = False, f"the chapter says {case.expect}"
    return row


def _peers() -> tuple:
    return tuple(p for p in installed_peers() if p in DEMO_PEERS)


def steps() -> int:
    """How many runs :func:`run` will make (for a progress bar)."""
    total = 0
    for case in CASES:
        op = OPERATIONS[case.op]
        if op.available:
            total += len(op.variants()) + sum(p in op.peers for p in _peers())
    return total


def failed(results) -> list[tuple]:
    """``(case, row)`` of every wrong result."""
    return [(r.case, row) for r in results for row in r.rows if row.ok is False]


#: the result column's widest: a glance at the answer (the check says if it is right)
RESULT_WIDTH = 18


def table(results, timed: bool):
    """The demo's ``rich`` table: a section per case, a row per strategy and peer."""
    from rich.markup import escape
    from rich.table import Table

    from .compare import _error_text, _time_text, _verdict, gbps_text

    t = Table(title="numbakern demo: every operation, every strategy, checked against NumPy")
    columns = [("input", "left"), ("op", "left"), ("strategy", "left"),
               ("result", "right"), ("max |error|", "right"), ("check", "left")]
    if timed:
        columns += [("time", "right"), ("GB/s", "right")]
    for col, just in columns:
        # folded, never cut with an ellipsis: two strategies must not read alike. No
        # minimum widths: rich keeps them when it narrows a table to the terminal, and
        # then crops the last columns (the check) at 80 columns. A result array wraps
        # early, so the input, the strategy and the check keep their width.
        t.add_column(col, justify=just, overflow="fold",
                     max_width=RESULT_WIDTH if col == "result" else None)
    for r in results:
        shape = "x".join(map(str, r.shape))
        for i, row in enumerate(r.rows):
            peer = row.provider != "numbakern"
            ran = f"ran: {shape}" + (f", checked {r.checked_rows} rows" if r.checked_rows
                                     else "")
            cells = [f"{r.case.input}\n[dim]{ran}[/dim]" if i == 0 else "",
                     r.case.op if i == 0 else "",
                     f"[dim]{row.strategy} (peer)[/dim]" if peer else row.strategy,
                     escape(row.result), _error_text(row), _verdict(row)]
            if timed:
                cells += ["" if row.seconds is None else _time_text(row.seconds),
                          "" if row.gbps is None else gbps_text(row.gbps)]
            t.add_row(*cells)
        t.add_section()
    return t
