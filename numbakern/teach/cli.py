"""The ``numbakern`` command: demonstrate, compare and explain the strategies.

    numbakern demo                          every operation, every strategy, checked
    numbakern compare sum -n 1e8            one operation: time, GB/s, vs the peers
    numbakern explain two_pass/shared_tree  how one strategy combines, step by step
    numbakern course                        the course's figures, every strategy drawn

``python -m numbakern`` is the same command. Bad arguments give one ``Error:`` line
and exit status 2; a failed check exits with status 1.
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings

import click
import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.text import Text

import numbakern

from numbakern import ops as _ops
from numbakern import strategies as _strategies
from numbakern.runtime.stacklevel import module_name

from . import compare as _compare
from .course import FAMILIES as COURSE_FAMILIES
from . import demo as _demo

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]
# Under the simulator every CUDA thread is an OS thread: ~30,000 elements a second.
SIMULATOR_MAX_ELEMENTS = 1 << 20


def _console() -> Console:
    # Wide enough for the tables when the output is a file or a pipe, not a terminal.
    return Console(width=None if sys.stdout.isatty() else 160, highlight=False)


class Shape(click.ParamType):
    """``N`` (``1000``, ``1e6``, ``2**20``) or ``ROWSxCOLS`` (``8192x50257``)."""

    name = "size"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            shape = tuple(self._count(part) for part in str(value).lower().split("x"))
        except ValueError:
            shape = ()
        if not 1 <= len(shape) <= 2 or min(shape) < 1:
            self.fail(f"{value!r} is not a size: give N (1000, 1e6, 2**20) or ROWSxCOLS "
                      "(8192x50257), each at least 1", param, ctx)
        return shape

    @staticmethod
    def _count(text: str) -> int:
        text = text.strip()
        if "**" in text:
            base, exp = text.split("**")
            return int(base) ** int(exp)
        number = float(text)
        if number != int(number):
            raise ValueError(text)
        return int(number)


SHAPE = Shape()


class OutputPath(click.Path):
    """A file to write, checked before any work: its folder must exist and be writable,
    and its suffix one of ``suffixes`` when given (so a slow run never ends in a
    traceback about the path or the format)."""

    def __init__(self, suffixes: tuple[str, ...] = ()):
        super().__init__(dir_okay=False)
        self.suffixes = suffixes

    def convert(self, value, param, ctx):
        if value == "-":  # click's name for stdout, where the tables go: refused
            self.fail("'-': give a file to write (the tables already go to stdout)",
                      param, ctx)
        path = super().convert(value, param, ctx)
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        if self.suffixes and suffix not in self.suffixes:
            self.fail(f"{value!r}: a figure is written as {', '.join(self.suffixes)}",
                      param, ctx)
        folder = os.path.dirname(os.path.abspath(os.fspath(path)))
        if not os.path.isdir(folder):
            self.fail(f"{value!r}: no folder {folder!r} to write it in", param, ctx)
        if not os.access(folder, os.W_OK):
            self.fail(f"{value!r}: the folder {folder!r} is not writable", param, ctx)
        self._try_writing_in(folder, value, param, ctx)
        return path

    def _try_writing_in(self, folder: str, value, param, ctx) -> None:
        """Make and remove a file of our own in ``folder``: some folders pass
        ``os.access`` and still take no new file (``/proc``). The user's path itself
        is not opened (a FIFO would block, a dangling link be followed)."""
        import tempfile

        try:
            with tempfile.NamedTemporaryFile(dir=folder):
                pass
        except OSError as exc:
            self.fail(f"{value!r}: cannot write in {folder!r} ({exc.strerror})", param, ctx)


OUTPUT = OutputPath()
FIGURE = OutputPath(suffixes=(".png", ".svg", ".pdf"))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(numbakern.__version__, prog_name="numbakern")
def cli():
    """numbakern: Numba-CUDA reductions with pluggable strategies.

    Runs on a GPU if there is one, else under Numba's CUDA simulator
    (NUMBAKERN_SIMULATOR=1 forces the simulator).
    """


# --- demo -----------------------------------------------------------------------------


@cli.command()
@click.option("--quick", is_flag=True,
              help="Smaller inputs under the simulator (a first look; the tests).")
@click.option("--repeat", default=10, show_default=True, type=click.IntRange(1, 1000),
              help="Timed calls per strategy on a GPU (the median is shown).")
def demo(quick, repeat):
    """Check every operation with every strategy against NumPy.

    Inputs: the textbook's worked example [3, 1, 4, 1, 5], the fused-softmax
    tutorial's 1823 x 781, and a batch of language-model logits (8192 x 50257; under
    the simulator smaller slices). On a GPU each is timed beside CuPy and PyTorch.
    Exit status 1 if any check fails.
    """
    console = _console()
    backend = numbakern.backend()
    console.print(f"[bold]backend[/bold]: {escape(str(backend))}")
    if backend.is_simulator:
        console.print("Under the simulator the large inputs run cut down (the table says "
                      "which shape ran) and nothing is timed.")
    results, unavailable = _with_progress(
        console, _demo.steps(), lambda advance: _demo.run(quick, repeat, advance))
    console.print(_demo.table(results, timed=not backend.is_simulator))
    if unavailable:
        console.print(f"[yellow]not available yet[/yellow] (numbakern has no such function): "
                      f"{', '.join(unavailable)}")
    failures = _demo.failed(results)
    if failures:
        for case, row in failures:
            console.print(f"[bold red]FAILED[/bold red] {case.op} on {case.input} with "
                          f"{row.strategy}: max |error| {row.max_error:.3g} {escape(row.note)}")
        sys.exit(1)
    checked = sum(row.ok is True for r in results for row in r.rows)
    console.print(f"[bold green]all {checked} checks passed[/bold green] on {backend.kind}")


def _with_progress(console, total: int, work):
    """Run ``work(advance)`` under a progress bar that ``advance(label)`` moves on."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting", total=total)
        started = [False]

        def advance(label: str) -> None:
            if started[0]:
                progress.advance(task)
            started[0] = True
            progress.update(task, description=label)

        return work(advance)


# --- compare --------------------------------------------------------------------------


def _kind_names(kinds: str) -> str:
    """``"biu"`` as ``"bool, signed integer or unsigned integer"``: the dtypes an
    operation takes."""
    names = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "float"}
    words = [names[k] for k in kinds]
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]


def _operation(name: str) -> _compare.Operation:
    op = _compare.OPERATIONS[name]
    if not op.available:
        raise click.BadParameter(f"{name} is not available in this numbakern yet",
                                 param_hint="'OP'")
    return op


def _variants(op, names) -> list:
    known = op.variants()
    if not names:
        return known
    labels = {v.label: v for v in known}
    # a block strategy's name alone: the default grid with it, as strategy= reads it
    names = [f"two_pass/{n}" if n not in labels and f"two_pass/{n}" in labels else n
             for n in names]
    names = list(dict.fromkeys(names))  # a strategy named twice runs once
    unknown = [n for n in names if n not in labels]
    if unknown:
        raise click.BadParameter(
            f"unknown strategy {unknown[0]!r} for {op.name}; choose from "
            f"{', '.join(labels)}", param_hint="'--strategy'")
    return [labels[n] for n in names]


#: how click names the size option in its errors (both its flags, as its own do)
_SIZE_HINT = "'-n' / '--size'"


def _extent(n: int) -> str:
    """An extent as an error shows it: whole up to 12 digits, else rounded."""
    return str(n) if n < 10**12 else f"{float(n):.3g}"


@cli.command(name="compare")
@click.argument("op_name", metavar="OP", type=click.Choice(list(_compare.OPERATIONS)))
@click.option("-n", "--size", type=SHAPE, default=None,
              help=f"N or ROWSxCOLS. {_compare.default_sizes()} cross_entropy: ROWS of "
                   f"COLS classes; topk: k={_compare.TOPK_K} (at most the axis' length) "
                   "along the last axis. causal_softmax: ROWS a multiple of COLS are "
                   "heads of COLS x COLS scores (65536x2048: 32 heads of 2048 keys); "
                   "other ROWS are one matrix of ROWS queries and COLS keys, its causal "
                   "limit aligned bottom-right.")
@click.option("--dtype", type=click.Choice(DTYPES), default=None,
              help="Default float32 (int32 for xor_sum and bincount: integers only).")
@click.option("-s", "--strategy", "strategies", multiple=True,
              help="A strategy to run (repeatable); default every one.")
@click.option("--axis", type=int, default=None,
              help="Axis of row-wise operations (softmax: -1 by default; "
                   "causal_softmax: the last only; cross_entropy, bincount and the "
                   "segmented functions take none).")
@click.option("--repeat", type=click.IntRange(1, 10000), default=None,
              help="Timed calls per strategy (median). Default 20; 3 under the simulator.")
@click.option("--json", "json_path", type=OUTPUT,
              help="Also write the results as JSON.")
@click.option("--png", "png_path", type=FIGURE,
              help="Also draw GB/s per strategy, under the copy bandwidth (matplotlib; "
                   ".png, .svg or .pdf).")
def compare_command(op_name, size, dtype, strategies, axis, repeat, json_path, png_path):
    """Time every strategy of one operation beside the installed peers.

    Peers, where installed and where they have the operation: CuPy, PyTorch,
    torch.compile (softmax, log_softmax), Triton's fused softmax (softmax) and
    cuda.compute (sum, max, min, cumsum, sort, segmented_reduce). Each strategy and
    peer is checked against NumPy first. The table gives the median time,
    GB/s (bytes read + written) and the fraction of the device's copy bandwidth.
    Under the simulator the times are CPU wall-clock, not GPU speed: no GB/s.
    """
    op = _operation(op_name)
    dtype = dtype or ("float32" if "f" in op.kinds else "int32")
    if np.dtype(dtype).kind not in op.kinds:
        raise click.BadParameter(f"compare {op.name} times {_kind_names(op.kinds)} input, "
                                 f"not {dtype}", param_hint="'--dtype'")
    variants = _variants(op, strategies)
    simulator = numbakern.backend().is_simulator
    shape = size or (op.simulator_shape if simulator else op.gpu_shape)
    if simulator and int(np.prod(shape)) > SIMULATOR_MAX_ELEMENTS:
        raise click.BadParameter(
            f"{'x'.join(map(_extent, shape))} is too large for the simulator (one OS thread per "
            f"CUDA thread): use at most {SIMULATOR_MAX_ELEMENTS:,} elements",
            param_hint=_SIZE_HINT)
    if png_path:
        _need_matplotlib("--png")
    if op.one_d and len(shape) > 1:
        raise click.BadParameter(f"{op.name} takes a 1-D input", param_hint=_SIZE_HINT)
    if op.two_d and len(shape) != 2:
        raise click.BadParameter(f"{op.name} takes a 2-D input: give ROWSxCOLS (queries x "
                                 "keys, or heads of COLS x COLS: see --help)",
                                 param_hint=_SIZE_HINT)
    if axis is not None and op.axes == "none":
        raise click.BadParameter(f"{op.name} takes no axis: leave --axis out",
                                 param_hint="'--axis'")
    if axis is not None and not -len(shape) <= axis < len(shape):
        raise click.BadParameter(
            f"axis {axis} is out of bounds for a {len(shape)}-D input of shape "
            f"{'x'.join(map(str, shape))}", param_hint="'--axis'")
    if op.axes == "last" and axis is not None:
        if axis % len(shape) != len(shape) - 1:
            raise click.BadParameter(
                f"{op.name} runs along the last axis only: give --axis -1 (or "
                f"{len(shape) - 1}), or leave it out", param_hint="'--axis'")
        axis = -1  # the keys, also where heads of scores are shaped 3-D
    kw = {"axis": -1 if op.name == "softmax" and axis is None else axis}
    kw = {k: v for k, v in kw.items() if v is not None}
    repeat = repeat or (3 if simulator else 20)
    console = _console()
    console.print(f"[bold]backend[/bold]: {escape(str(numbakern.backend()))}")
    if simulator:
        console.print("[yellow]simulator timings: the CPU runs every CUDA thread as an OS "
                      "thread, so these times are not GPU speed (no GB/s)[/yellow]")
    peers = [p for p in _compare.installed_peers() if p in op.peers]
    result = _with_progress(console, len(variants) + len(peers), lambda advance: _compare.compare(
        op, shape, dtype, variants, repeat, kw, advance))
    console.print(_compare.comparison_table(result))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result.as_dict(), f, indent=2, default=_json_default)
        console.print(f"wrote {json_path}")
    if png_path:
        _compare.comparison_figure(result, png_path)
        console.print(f"wrote {png_path}" + (" (the checks only: the simulator's times are "
                                             "nothing to plot)" if simulator else ""))
    if any(r.ok is False for r in result.rows):
        sys.exit(1)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {value!r}")


def _need_matplotlib(option: str) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.UsageError(f"{option} needs matplotlib: pip install 'numbakern[plot]'")


# --- explain --------------------------------------------------------------------------

#: ``--op`` names: the one-field built-ins, the functions whose states of several
#: fields ``trace.STATE_OPS`` records (var's (count, mean, M2), logsumexp's (max,
#: scaled sum)), and argmax and argmin (their (value, index) pairs: ``trace.ARG_OPS``)
_EXPLAIN_OPS = [name for name, o in _ops.BUILTIN.items() if o.fields == 1] + [
    "var", "logsumexp", "argmax", "argmin"]


#: what ``explain`` takes for every strategy of a family
_FAMILY_WORDS = {"all": "reduce", "scans": "scan", "histograms": "histogram",
                 "sorts": "sort", "softmax": "softmax", "selects": "select"}


def _strategy_names(value: str) -> list[str]:
    """``all`` (every reduction strategy), ``scans``, ``histograms``, ``sorts`` or
    ``softmax`` (every strategy of that family) or one name of those families; a
    block strategy's name alone is the default grid reduction with that block
    (``shared_tree``: ``two_pass/shared_tree``), a grid's or a softmax normalizer's
    name alone that with the default block (``atomic_fold``:
    ``atomic_fold/warp_shuffle``), as ``strategy=`` reads them."""
    if value in _strategies.available("block"):
        value = f"two_pass/{value}"
    grids = {name.split("/")[0] for family in ("reduce", "scan", "softmax")
             for name in _family(family)}
    if value in grids:  # a grid (or softmax normalizer) name alone: the default block
        value = f"{value}/{_strategies.resolve('block', None).name}"
    if value in _FAMILY_WORDS:
        return _family(_FAMILY_WORDS[value])
    known = [name for family in ("reduce", "scan", "histogram", "sort", "softmax", "select")
             for name in _family(family)]
    if value not in known:
        raise click.BadParameter(f"unknown strategy {value!r}; choose from "
                                 f"{', '.join(known)}, or every one of a family: "
                                 f"{', '.join(_FAMILY_WORDS)}", param_hint="'STRATEGY'")
    return [value]


def _family(family: str) -> list[str]:
    """The names ``explain`` takes for ``family``: the registry's, and for softmax
    each normalizer with each block strategy (``online/warp_shuffle``)."""
    if family == "softmax":
        from .softmax_trace import softmax_strategies

        return softmax_strategies()
    return _strategies.available(family)


def _is_scan(name: str) -> bool:
    return name in _strategies.available("scan")


def _explain_input(values, size, dtype) -> np.ndarray:
    """``--values`` as given, or ``size`` small random integers (exact in any dtype)."""
    if values is not None:
        try:
            numbers = [_number(v) for v in values.split(",")]
        except ValueError:
            raise click.BadParameter(f"{values!r} is not a comma-separated list of numbers",
                                     param_hint="'--values'") from None
        _check_representable(numbers, dtype)
        x = np.array(numbers, dtype=dtype if np.dtype(dtype).kind in "iu" else np.float64)
    else:
        x = np.random.default_rng(0).integers(0, 10, size).astype(np.float64)
    if x.size > 4096:
        raise click.BadParameter("explain records every combine: use at most 4096 elements",
                                 param_hint="'--values'")
    if np.dtype(dtype).kind == "b":
        return x != 0
    return x.astype(dtype)


def _number(text: str) -> int | float:
    """An int when the text is one (exact beyond 2**53), else a float."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _check_representable(numbers: list, dtype) -> None:
    """``--values`` must be ``dtype`` values: integers in range (no wrapping, compared
    exactly), floats that do not overflow (rounding to the nearest float is as NumPy)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        bad = [v for v in numbers if v not in (0, 1)]
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        whole = [isinstance(v, int) or (math.isfinite(v) and v.is_integer()) for v in numbers]
        bad = [v for v, w in zip(numbers, whole) if not w or not info.min <= int(v) <= info.max]
    else:
        with np.errstate(over="ignore"):
            bad = [v for v in numbers if math.isfinite(v) and not np.isfinite(dtype.type(v))]
    if bad:
        raise click.BadParameter(f"{bad[0]} is not a value of {dtype}",
                                 param_hint="'--values'")


@cli.command()
@click.argument("strategy", default="two_pass/warp_shuffle")
@click.option("--op", "op_name", type=click.Choice(_EXPLAIN_OPS), default="sum",
              show_default=True)
@click.option("-n", "--size", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Elements (small random integers).")
@click.option("--values", help="The input itself, e.g. 3,1,4,1,5 (instead of --size).")
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True,
              help="The input's dtype (histogram strategies: an integer dtype, int64 "
                   "when left out; a float one is refused; the bitwise ops: int32 when "
                   "left out).")
@click.option("--threads", type=click.IntRange(32, 256), default=32, show_default=True,
              help="Threads per block, a multiple of 32 (softmax: of the row's block).")
@click.option("--blocks", type=click.IntRange(1, 8), default=2, show_default=True,
              help="Blocks of the first launch (reduce_then_scan: chunks; "
                   "decoupled_lookback takes none: a block a tile).")
@click.option("--items", type=click.IntRange(1, 16), default=None,
              help="Scans: items per thread (a tile is threads x items elements; "
                   "default 2). Radix sort: keys per thread in a tile (default: "
                   "numbakern.sort's under the simulator).")
@click.option("--exclusive", is_flag=True, help="Scans: an exclusive scan.")
@click.option("--k", "k", type=click.IntRange(0, 4096), default=3, show_default=True,
              help="Selections (topk): how many to select (0: none, an empty answer, as "
                   f"topk and torch.topk); bitonic_select takes k <= "
                   f"{numbakern.BitonicSelect.DEFAULT_MAX_K}, radix_block_select k <= "
                   f"{numbakern.RadixBlockSelect.DEFAULT_CAPACITY}.")
@click.option("--smallest", is_flag=True, help="Selections: the k smallest.")
@click.option("--of", "of", type=click.Choice(["topk", "median", "partition"]),
              default="topk", show_default=True,
              help="radix_select: the selection shown: topk's, median's (the middle "
                   "ranks' keys) or partition's (the kth keys, then the split).")
@click.option("--kth", help="--of partition: the ranks, e.g. 1,5 (default the middle).")
@click.option("--bins", type=click.IntRange(1, 1024), default=None,
              help="Histograms: bins (values outside [0, bins) are not counted, and the "
                   "tree lists them); default the largest value + 1, so none is left out.")
@click.option("--shape", help="Reductions: a 2-D input of this shape, e.g. 6,40 (small "
                                "random integers, or --values in C order); without --axis "
                                "the whole array is reduced.")
@click.option("--axis", type=click.IntRange(-2, 1), default=None,
              help="Reductions, with --shape: reduce this axis (1: each row, 0: each "
                   "column); every output is recorded and proved, and the first line "
                   "says which kernel the planner chose (row or column).")
@click.option("--output", "output", type=click.IntRange(0), default=0, show_default=True,
              help="With --axis: the output whose tree is shown.")
@click.option("--limit", type=click.IntRange(1, 1024), default=6, show_default=True,
              help="Lines listed per step.")
@click.option("--figure", type=FIGURE,
              help="Draw the recording (.png, .svg or .pdf); with a whole family, {name} "
                   "in the path becomes each strategy's name.")
@click.option("--json", "json_path", type=OUTPUT,
              help="Write the counts as JSON.")
def explain(strategy, op_name, size, values, dtype, threads, blocks, items, exclusive,
            k, smallest, of, kth, bins, shape, axis, output, limit, figure, json_path):
    """Show how STRATEGY combines, recorded from the real kernels as they run.

    STRATEGY is a reduction's grid/block (two_pass/warp_shuffle,
    atomic_fold/shared_tree, ...; a block alone, shared_tree, is two_pass's), a scan's
    (decoupled_lookback/blelloch, reduce_then_scan/hillis_steele, ...), a histogram's
    (shared_privatized, ...), a sort's (bitonic, radix), a softmax's normalizer/block
    (online/warp_shuffle, max_then_sum/shared_tree, ...), a selection's (topk:
    radix_select shows which bucket each pass keeps; bitonic_select, sort_slice;
    radix_select --of median or --of partition: the middle ranks' or the kth keys'
    passes, then the median or the split into buckets), or
    every strategy of a family: all (reductions), scans, histograms, sorts, softmax or
    selects. A reduction along an axis (--shape R,C --axis 0 or 1) records the row or
    column kernel, shows one output's tree (--output) and proves every output. The
    kernels run
    under Numba's CUDA simulator (on a GPU machine explain runs itself again there),
    with every combine, shuffle, shared-memory slot, barrier, atomic and launch
    recorded: the tree lists, step by step, which thread combined which elements and
    through what, and ends with the proof (every element exactly once, NumPy's
    result) and the counts.
    """
    names = _strategy_names(strategy)
    if threads % 32:
        raise click.BadParameter(f"{threads} is not a multiple of 32", param_hint="'--threads'")
    if figure:
        _need_matplotlib("--figure")
        if len(names) > 1 and "{name}" not in figure:
            raise click.BadParameter("with a whole family (all, scans, ...), put {name} in "
                                     "the path", param_hint="'--figure'")
    from .trace import ARG_OPS, STATE_OPS

    state = STATE_OPS.get(op_name)
    arg = ARG_OPS.get(op_name)
    op = state.op if state else arg or _ops.get(op_name)
    kinds = state.kinds if state else op.kinds
    if "f" not in kinds and click.get_current_context().get_parameter_source("dtype") == \
            click.core.ParameterSource.DEFAULT:
        dtype = "int32"  # the bitwise ops: integers only, as compare's default
    if np.dtype(dtype).kind not in kinds:
        raise click.BadParameter(f"{op_name} does not take {dtype}", param_hint="'--dtype'")
    shown = _state_op_strategies(names, op_name) if state or arg else names
    left_out = len(shown) < len(names)
    names = shown
    from . import explain as _explain
    from .trace import trace_reduce

    family = _explained_family(names, of)
    ctx = click.get_current_context()
    _refuse_options_elsewhere(ctx, family, names)
    if values is not None and ctx.get_parameter_source("size") == \
            click.core.ParameterSource.COMMANDLINE:
        raise click.BadParameter("--values gives the input: leave --size out",
                                 param_hint=_SIZE_HINT)
    x = _explain_input(values, size, dtype)
    if shape is not None or axis is not None:
        x = _shaped(x, shape, ctx)
    if arg and axis is None:  # numbakern.argmax of a whole array: one row, in C order
        x, axis = x.reshape(1, -1), 1
    if axis is None and ctx.get_parameter_source("output") == \
            click.core.ParameterSource.COMMANDLINE:
        raise click.BadParameter("--output picks an output of a reduction along an axis: "
                                 "give --shape and --axis too", param_hint="'--output'")
    if axis is not None and state:
        raise click.BadParameter(f"--op {op_name} is recorded over a whole array; "
                                 "along an axis, explain takes one-field ops and "
                                 f"{', '.join(ARG_OPS)}", param_hint="'--op'")
    if not numbakern.backend().is_simulator:  # the arguments checked first: a usage
        _rerun_under_simulator()  # error is one line, on any machine
    console = _console()
    if left_out:  # a family, as explain sorts says what it leaves out
        console.print(f"atomic_fold/...: not shown for --op {op_name}, whose state of "
                      "several fields atomic_fold folds packed into one word or under a "
                      "lock, which the recording cannot follow")
    if axis is not None:
        summaries = _explain_axis(console, names, x, op_name if arg else op, axis, output,
                                  threads, blocks, limit, figure)
    elif family == "ranks":
        summaries = _explain_ranks(console, names, x, of, kth, threads, limit, figure)
    elif family == "select":
        summaries = _explain_selects(console, names, x, k, not smallest, threads, limit,
                                     figure)
    elif family == "sort":
        summaries = _explain_sorts(console, names, x, threads, items, limit, figure)
    elif family == "softmax":
        summaries = _explain_softmax(console, names, x, threads, limit, figure)
    elif family == "histogram":
        summaries = _explain_histograms(console, names, x, bins, threads, blocks, limit,
                                        figure)
    elif family == "scan":
        summaries = _explain_scans(console, names, x, op, threads, blocks, items, exclusive,
                                   limit, figure)
    else:
        summaries = _explain_each(
            console, names, figure,
            lambda name: trace_reduce(x, op_name if state else op, name, threads=threads,
                                      blocks=blocks),
            lambda trace: (_explain.tree(trace, limit), _explain.counts_table(trace)),
            _explain.draw, lambda trace: trace.exact_cover, _explain.LEGEND)
    _write_json(json_path, summaries)


def _explained_family(names: list[str], of: str) -> str:
    """Which of explain's families ``names`` belong to ("ranks": radix_select's
    median or partition)."""
    if of != "topk":
        return "ranks"
    for family in ("select", "sort", "histogram"):
        if all(name in _strategies.available(family) for name in names):
            return family
    if all(name in _family("softmax") for name in names):
        return "softmax"
    return "scan" if any(_is_scan(name) for name in names) else "reduce"


#: the options each family of explain reads beside the input's and the output's
_FAMILY_OPTIONS = {
    "ranks": {"of", "kth"}, "select": {"k", "smallest", "of"}, "sort": {"items"},
    "softmax": set(), "histogram": {"bins", "blocks"},
    "scan": {"op_name", "blocks", "items", "exclusive"},
    "reduce": {"op_name", "blocks", "shape", "axis", "output"},
}
_COMMON_OPTIONS = {"strategy", "size", "values", "dtype", "threads", "limit", "figure",
                   "json_path"}
#: a family's options only some of its strategies read: ``(family, option): (the
#: start of their names, what reads it)``
_READ_BY_SOME = {("scan", "blocks"): ("reduce_then_scan/", "reduce_then_scan's chunks"),
                 ("sort", "items"): ("radix", "radix sort's tiles")}


def _refuse_options_elsewhere(ctx, family: str, names: list[str]) -> None:
    """A usage error naming an option given on the command line that ``family``, or
    each of ``names`` in it, does not read (``explain radix --op max`` would
    otherwise show a plain sort, ``explain bitonic --items 2`` the same network)."""
    reads = _COMMON_OPTIONS | _FAMILY_OPTIONS[family]
    for param in ctx.command.params:
        given = ctx.get_parameter_source(param.name) == click.core.ParameterSource.COMMANDLINE
        if not given:
            continue
        flag = max(param.opts, key=len)
        if param.name not in reads:
            hint = " without --of partition" if (family, param.name) == ("select", "kth") \
                else ""
            raise click.UsageError(f"{flag} does not apply to {ctx.params['strategy']}{hint} "
                                   f"(explain's {family} strategies)")
        start, reader = _READ_BY_SOME.get((family, param.name), ("", ""))
        if not any(name.startswith(start) for name in names):
            raise click.UsageError(f"{flag} does not apply to {ctx.params['strategy']} "
                                   f"(only {reader} read it)")


def _shaped(x: np.ndarray, shape: str | None, ctx) -> np.ndarray:
    """``x`` (``--values`` or random integers) as the 2-D input ``--shape`` names, for
    ``--axis``, which needs one; ``--size`` (the random input's length) goes without
    it."""
    if shape is None:
        raise click.BadParameter("--axis reduces a 2-D input: give its --shape too, e.g. "
                                 "--shape 6,40", param_hint="'--axis'")
    try:
        rows, cols = (int(v) for v in shape.split(","))
    except ValueError:
        raise click.BadParameter(f"{shape!r} is not two comma-separated lengths, e.g. 6,40",
                                 param_hint="'--shape'") from None
    if rows < 1 or cols < 1:
        raise click.BadParameter(f"{shape}: each length must be at least 1",
                                 param_hint="'--shape'")
    if rows * cols > 4096:
        raise click.BadParameter(f"{shape} is {rows * cols} elements: explain records every "
                                 "combine, so at most 4096", param_hint="'--shape'")
    if ctx.get_parameter_source("size") == click.core.ParameterSource.COMMANDLINE:
        raise click.BadParameter("--shape gives the input's size: leave --size out",
                                 param_hint=_SIZE_HINT)
    if ctx.params.get("values") is None:
        return _explain_input(None, rows * cols, x.dtype).reshape(rows, cols)
    if x.size != rows * cols:
        raise click.BadParameter(f"--values holds {x.size} numbers, --shape {shape} needs "
                                 f"{rows * cols}", param_hint="'--values'")
    return x.reshape(rows, cols)


def _explain_axis(console, names, x, op, axis, output, threads, blocks, limit,
                  figure) -> list:
    """``explain --shape --axis``: for each strategy, the planner's layout, the tree of
    output ``output``, every output's proof beside NumPy's value, the launch's counts
    and the output's figure; exits 1 when a proof fails."""
    from . import explain as _explain
    from .axis_trace import trace_axis_reduce

    outputs = x.shape[1 - axis % 2]
    if output >= outputs:
        raise click.BadParameter(f"{output}: the outputs are 0 to {outputs - 1}",
                                 param_hint="'--output'")
    return _explain_each(
        console, names, figure,
        lambda name: trace_axis_reduce(x, axis, op, name, threads=threads, blocks=blocks),
        lambda trace: (Text(f"{trace.launch.strategy}: {trace.layout}", "bold"),
                       _explain.tree(trace.outputs[output], limit),
                       _explain.outputs_table(trace, limit, output),
                       _explain.counts_table(trace.outputs[output])),
        lambda trace, path: _explain.draw(trace.outputs[output], path),
        lambda trace: trace.exact, _explain.LEGEND)


def _state_op_strategies(names: list[str], op_name: str) -> list[str]:
    """The strategies ``--op var``, ``logsumexp``, ``argmax`` or ``argmin`` explains:
    reductions under two_pass (atomic_fold folds a state of several fields packed into
    one word or under a lock, if at all, which the recording cannot follow; ``all``
    leaves those out)."""
    if not all(name in _strategies.available("reduce") for name in names):
        raise click.BadParameter(f"--op {op_name} explains reduction strategies "
                                 "(two_pass/...): its state is a reduction's",
                                 param_hint="'--op'")
    kept = [name for name in names if not name.startswith("atomic_fold")]
    if not kept:
        raise click.BadParameter(f"--op {op_name} is recorded under two_pass strategies: "
                                 "atomic_fold folds a state of several fields packed into "
                                 "one word or under a lock, which the recording cannot "
                                 "follow", param_hint="'STRATEGY'")
    return kept


def _raised_outside_numbakern(exc: BaseException) -> bool:
    """Whether ``exc`` was raised in code outside numbakern's modules (a user's
    strategy, its device functions): an argument numbakern refused is raised inside."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and module_name(tb.tb_frame).split(".")[0] != "numbakern"


def _explain_each(console, names, figure, record, show, draw, proved, legend) -> list:
    """Record each strategy in ``names`` (``record(name)``), print what ``show(trace)``
    gives (renderables; None skipped), draw the figure, exit 1 when ``proved(trace)``
    is false; then the ``legend``. Returns the recordings' summaries."""
    from .trace import TraceError

    summaries = []
    for name in names:
        try:
            trace = record(name)
        except (TypeError, ValueError) as exc:
            if _raised_outside_numbakern(exc):  # a bug of the user's strategy: its traceback
                raise
            raise click.UsageError(str(exc).splitlines()[0]) from None
        except TraceError as exc:
            raise click.ClickException(
                f"{exc} (a strategy of your own? a barrier missing between a write to shared "
                f"memory and the reads of it, or a slot read before it is written, gives "
                f"this)") from exc
        for item in show(trace):
            if item is not None:
                console.print(item)
        summaries.append(trace.summary())
        if figure:
            path = figure.replace("{name}", name.replace("/", "__"))
            draw(trace, path)
            console.print(f"wrote {path}")
        if not proved(trace):
            sys.exit(1)
    if legend:
        console.print(Text(legend))
    return summaries


def _explain_scans(console, names, x, op, threads, blocks, items, exclusive, limit,
                   figure) -> list:
    """``explain`` for scan strategies: the tree, the counts, the block scan's work and
    depth beside the formulas, and the figure; exits 1 when a proof fails."""
    from . import explain_scan as _explain
    from .scan_trace import trace_scan

    return _explain_each(
        console, names, figure,
        lambda name: trace_scan(x, name, op=op, threads=threads, blocks=blocks, items=items,
                                exclusive=exclusive),
        lambda trace: (_explain.scan_tree(trace, limit), _explain.tile_states_table(trace),
                       _explain.scan_counts_table(trace),
                       _explain.work_depth_table(_explain.block_counts(trace))),
        _explain.draw_scan, lambda trace: trace.exact_cover and trace.matches_numpy,
        _explain.SCAN_LEGEND)


def _rerun_under_simulator(command: str = "explain") -> None:
    """On a GPU: run this same command line again in a new process under the
    simulator (the only place kernels can be watched; the backend is chosen once, at
    import) and exit with its status; a command not from the command line (a caller
    of :func:`main` with its own arguments) gets one line saying how instead."""
    import subprocess

    argv = sys.argv[1:]
    if command not in argv or os.environ.get("NUMBAKERN_SIMULATOR") == "1":
        raise click.ClickException(
            f"{command} watches the kernels run, which only Numba's CUDA simulator allows, "
            f"and this process runs on {numbakern.backend().device}. Run it as: "
            f"NUMBAKERN_SIMULATOR=1 numbakern {command} ...")
    click.echo(f"{command} records the kernels under Numba's CUDA simulator, not on "
               f"{numbakern.backend().device}: running it there (NUMBAKERN_SIMULATOR=1)",
               err=True)
    env = dict(os.environ, NUMBAKERN_SIMULATOR="1")
    sys.exit(subprocess.call([sys.executable, "-m", "numbakern", *argv], env=env))


def _write_json(path, summaries) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(summaries if len(summaries) > 1 else summaries[0], f, indent=2,
                      default=_json_default)


def _explain_sorts(console, names, x, threads, items, limit, figure) -> list:
    """``explain`` for sort strategies: the network or the passes, the proof line,
    the counts, work and depth beside the formulas, the figure; exits 1 when a proof
    fails."""
    from .explain_sort import (draw_sort, sort_counts_table, sort_legend, sort_tree,
                               sort_work_table)
    from .sort_trace import RECORDED, trace_sort

    if len(names) > 1:  # the family: a sort of one's own is left out, with a line
        for name in names:
            if name not in RECORDED:
                console.print(f"{name}: not shown, explain records the sorts "
                              f"{', '.join(RECORDED)} (run it through numbakern.sort)")
        names = [name for name in names if name in RECORDED]
    return _explain_each(
        console, names, figure, lambda name: trace_sort(x, name, threads=threads,
                                                        items=items),
        lambda trace: (sort_tree(trace, limit), sort_counts_table(trace),
                       sort_work_table(trace)),
        draw_sort, lambda trace: trace.exact, sort_legend(names))


def _explain_selects(console, names, x, k, largest, threads, limit, figure) -> list:
    """``explain`` for select strategies (topk): radix select's passes, the answer and
    the proof line, the figure; exits 1 when a proof fails."""
    from .explain_select import SELECT_LEGEND, draw_select, select_tree, trace_select

    if k > x.size:
        raise click.BadParameter(f"k must be from 0 to the number of values ({x.size}), "
                                 f"got {k}", param_hint="'--k'")
    names = _taking_k(console, names, x.size, k, threads)
    return _explain_each(
        console, names, figure,
        lambda name: trace_select(x, k, name, largest=largest, threads=threads),
        lambda trace: (select_tree(trace, limit),), draw_select, lambda trace: trace.exact,
        SELECT_LEGEND)


def _taking_k(console, names: list[str], n: int, k: int, threads: int) -> list[str]:
    """The strategies of ``names`` that take ``k`` of ``n`` values; a line says which
    of a family cannot (bitonic_select's ``k <= 256``), and a usage error naming
    ``--k`` says it where none can."""
    selectors = {name: _strategies.resolve("select", name, threads=threads)
                 for name in names}
    refused = [s for s in selectors.values() if not s.fits(n, k)]
    if len(refused) == len(names):
        limits = ", ".join(f"{s.name} takes k <= {s.max_k}" for s in refused)
        any_k = [name for name in _strategies.available("select")
                 if _strategies.resolve("select", name).max_k is None]
        raise click.BadParameter(f"{k} is more than the strategy takes ({limits}); "
                                 f"{' and '.join(any_k)} take any k", param_hint="'--k'")
    for selector in refused:
        console.print(f"{selector.name}: not shown, it takes k <= {selector.max_k} "
                      f"(--k {k})")
    return [name for name, s in selectors.items() if s not in refused]


def _explain_ranks(console, names, x, of, kth, threads, limit, figure) -> list:
    """``explain radix_select --of median|partition``: each rank's passes, the median
    or the split, the proof line; exits 1 when a proof fails."""
    from .explain_rank import RANK_LEGEND, rank_tree, trace_rank

    if names != ["radix_select"]:
        raise click.BadParameter(f"--of {of} is shown for radix_select (the select medians "
                                 "and partitions use)", param_hint="'STRATEGY'")
    if figure:
        raise click.BadParameter("--of median and --of partition draw no figure yet",
                                 param_hint="'--figure'")
    if kth is not None and of != "partition":
        raise click.BadParameter("--kth is partition's", param_hint="'--kth'")
    ranks = None
    if kth is not None:
        try:
            ranks = [int(v) for v in kth.split(",")]
        except ValueError:
            raise click.BadParameter(f"{kth!r} is not a list of ints, e.g. 1,5",
                                     param_hint="'--kth'") from None
        bad = [k for k in ranks if not -x.size <= k < x.size]
        if bad:
            raise click.BadParameter(f"{bad[0]} is out of bounds for {x.size} values: each "
                                     f"kth must be in [{-x.size}, {x.size - 1}]",
                                     param_hint="'--kth'")
    return _explain_each(
        console, names, figure,
        lambda name: trace_rank(x, of, ranks, threads=threads),
        lambda trace: (rank_tree(trace, limit),), None, lambda trace: trace.exact,
        RANK_LEGEND)


def _explain_softmax(console, names, x, threads, limit, figure) -> list:
    """``explain`` for softmax strategies: the threads' states, the reduces with their
    rescales, the proof line, the counts, the figure; exits 1 when a proof fails."""
    from .explain_softmax import (SOFTMAX_LEGEND, draw_softmax, softmax_counts_table,
                                  softmax_tree)
    from .softmax_trace import TOLERANCE, trace_softmax

    if x.dtype.name not in TOLERANCE:
        raise click.BadParameter("explain's softmax traces take float16, float32 or float64",
                                 param_hint="'--dtype'")
    return _explain_each(
        console, names, figure, lambda name: trace_softmax(x, name, threads=threads),
        lambda trace: (softmax_tree(trace, limit), softmax_counts_table(trace)),
        draw_softmax, lambda trace: trace.exact, SOFTMAX_LEGEND)


def _explain_histograms(console, names, x, bins, threads, blocks, limit, figure) -> list:
    """``explain`` for histogram strategies: each element's counting atomic, the folds,
    the proof line, the atomics per address and the figure; exits 1 when a proof
    fails."""
    from .hist_trace import contention_table, draw_histogram, histogram_tree, trace_histogram

    given = click.get_current_context().get_parameter_source("dtype")
    if x.dtype.kind == "f" and given == click.core.ParameterSource.COMMANDLINE:
        raise click.BadParameter(f"a histogram counts integers (as histogram_counts), not "
                                 f"{x.dtype}: give an integer dtype, or leave --dtype out "
                                 "(int64)", param_hint="'--dtype'")
    if not np.all(np.isfinite(x)) or not np.all(np.asarray(x) == np.round(x)):
        raise click.BadParameter("a histogram counts integers", param_hint="'--values'")
    if np.asarray(x).dtype.kind not in "iu":
        x = np.asarray(x).astype(np.int64)
    if bins is None:
        if np.min(x) < 0:  # bincount's contract; histogram_counts(x, bins) drops them
            raise click.BadParameter("without --bins, values of at least 0 (as "
                                     "numbakern.bincount); with --bins, values outside "
                                     "[0, bins) are listed as left out",
                                     param_hint="'--values'")
        if np.max(x) >= 1024:
            raise click.BadParameter("values from 0 to 1023 (the counters explain draws); "
                                     "pass smaller values, or --bins to count some of them",
                                     param_hint="'--values'")
        bins = max(1, int(np.max(x)) + 1)
    return _explain_each(
        console, names, figure,
        lambda name: trace_histogram(x, bins, name, threads=threads, blocks=blocks),
        lambda trace: (histogram_tree(trace, limit), contention_table(trace)),
        draw_histogram, lambda trace: trace.exact, None)


# --- course ---------------------------------------------------------------------------


@cli.command()
@click.option("--out", "folder", type=click.Path(file_okay=False, writable=True),
              default=os.path.join("docs", "course"), show_default=True,
              help="The folder the figures go to (made if missing; a relative path "
                   "from the current folder: run from a checkout to redraw its "
                   "docs/course).")
@click.option("-f", "--family", "families", multiple=True,
              type=click.Choice(COURSE_FAMILIES),
              help="Only these families (repeatable; axis: a sum along each axis, the "
                   "row and column kernels); default every one.")
def course(folder, families):
    """Draw the course's figures (docs/course.md): every strategy of every family,
    recorded under the simulator on a small input, one PNG each. Exits 1 if a
    recording fails its proof."""
    _need_matplotlib("course")
    if not numbakern.backend().is_simulator:
        _rerun_under_simulator("course")
    from .course import draw_course

    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(f"{folder!r}: cannot make the folder ({exc.strerror})",
                                 param_hint="'--out'") from None
    try:
        written = draw_course(folder, families or COURSE_FAMILIES,
                              progress=lambda path: click.echo(f"drawing {path}"))
    except RuntimeError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    click.echo(f"wrote {len(written)} figures to {folder}")


def main(argv=None) -> None:
    """The console script's entry point (``numbakern``)."""
    warnings.showwarning = _the_commands_own(warnings.showwarning)
    cli.main(args=argv, prog_name="numbakern")


def _the_commands_own(show):
    """``showwarning`` that prints a warning no user line called as the command's own,
    ``numbakern: SimulatorSlowWarning: ...``: one numbakern reports at ``sys:1`` (a
    command runs no user code), at the console script that started the command, or
    inside numbakern (NumPy's words on a trace's own arithmetic); any other through
    ``show``."""
    package = os.path.dirname(os.path.abspath(numbakern.__file__))
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else None

    def shown(message, category, filename, lineno, file=None, line=None):
        where = os.path.abspath(filename) if filename != "sys" else "sys"
        if where not in ("sys", script) and not where.startswith(package + os.sep):
            return show(message, category, filename, lineno, file, line)
        print(f"numbakern: {category.__name__}: {message}", file=file or sys.stderr)

    return shown
