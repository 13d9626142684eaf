"""Plot pytest-benchmark results: GB/s against size, one line per strategy and peer.

    pytest bench/ --benchmark-json=bench.json       # on a GPU host
    python bench/plot.py bench.json -o bench.png    # anywhere with matplotlib

Reads what bench/conftest.py's ``measure`` records in each benchmark's
``extra_info``: ``provider`` (a strategy or a peer; ``impl`` in the suites that name
it so), ``bytes`` (moved per call), ``gbps`` and ``copy_gbps``; ``op`` when a suite
sets it, else the suite's file name (``bench_reduce.py`` -> ``reduce``). One panel
per op; the device-to-device copy bandwidth measured in the same session is drawn as
the ceiling (``--ceiling`` overrides it). Several JSON files are merged.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PEERS = ("cupy", "cupyx", "torch", "torch.compile", "triton", "cuda.compute", "numpy")


def is_peer(provider: str) -> bool:
    """Whether a series is a peer's: its first word one of :data:`PEERS`, or a variant
    of one named after it (``torch.kthvalue``, ``cupy-arg``)."""
    name = provider.split()[0]
    return name in PEERS or re.split(r"[.-]", name)[0] in PEERS


def load(paths: list[str]) -> list[dict]:
    """Every benchmark record of the files that has GB/s in its ``extra_info``."""
    records = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for bench in data.get("benchmarks", []):
            info = bench.get("extra_info", {})
            provider = info.get("provider", info.get("impl"))
            if "gbps" in info and provider is not None:
                records.append({**info, "provider": provider,
                                "op": info.get("op") or _suite(bench)})
    return records


def _suite(bench: dict) -> str:
    """``bench/bench_reduce.py::test_x[...]`` -> ``reduce``."""
    stem = Path(bench.get("fullname", "bench").split("::")[0]).stem
    return stem.removeprefix("bench_")


_APART = ("dtype", "data")  # what else, where it varies within an op, makes its own line


def series(records: list[dict]) -> dict:
    """``{op: {line: [(bytes, gbps), ...] sorted}}``; a line is a provider, followed by
    its ``dtype`` and ``data`` where those vary within the op (a sort of float32 keys and
    one of uint32 keys are two lines)."""
    varying = defaultdict(set)
    for r in records:
        for k in _APART:
            varying[r["op"], k].add(r.get(k))
    out: dict = defaultdict(lambda: defaultdict(list))
    for r in records:
        line = " ".join([r["provider"], *(str(r.get(k)) for k in _APART
                                          if len(varying[r["op"], k]) > 1)])
        out[r["op"]][line].append((r.get("bytes", r.get("n")), r["gbps"]))
    return {op: {p: sorted(v) for p, v in by.items()} for op, by in out.items()}


def ceiling(records: list[dict], override: float | None) -> float | None:
    """The copy bandwidth: ``override``, else the median ``copy_gbps`` recorded."""
    if override is not None:
        return override
    copies = [r["copy_gbps"] for r in records if "copy_gbps" in r]
    return statistics.median(copies) if copies else None


def plot(records: list[dict], out: str, ceiling_gbps: float | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_op = series(records)
    fig, axes = plt.subplots(1, len(by_op), figsize=(6.5 * len(by_op), 4.5), squeeze=False)
    for ax, (op, providers) in zip(axes[0], sorted(by_op.items())):
        for provider, points in sorted(providers.items(),
                                       key=lambda kv: is_peer(kv[0])):
            xs, ys = zip(*points)
            peer = is_peer(provider)
            ax.plot(xs, ys, ls="--" if peer else "-", marker="s" if peer else "o", ms=4,
                    lw=1.5, label=provider + (" (peer)" if peer else ""))
        limit = ceiling(records if len(by_op) == 1 else
                        [r for r in records if r["op"] == op], ceiling_gbps)
        top = max(y for points in providers.values() for _, y in points)
        if limit:
            ax.axhline(limit, color="black", lw=1, ls=":")
            ax.text(0.01, limit, f"copy bandwidth {limit:,.0f} GB/s", va="bottom", fontsize=8,
                    transform=ax.get_yaxis_transform())
            top = max(top, limit)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes moved per call")
        ax.set_ylabel("GB/s")
        ax.set_title(op)
        ax.set_ylim(0, 1.1 * top)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _formats() -> set:
    """The file formats matplotlib saves here (its backends'), by suffix."""
    from matplotlib.figure import Figure

    return set(Figure().canvas.get_supported_filetypes())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="pytest-benchmark JSON file(s)")
    parser.add_argument("-o", "--output", help="figure path (.png, .svg, .pdf or another "
                        "format matplotlib saves); default: the first JSON file's name "
                        "with .png")
    parser.add_argument("--op", action="append", help="only this op (repeatable)")
    parser.add_argument("--ceiling", type=float, help="copy bandwidth to draw, GB/s")
    args = parser.parse_args(argv)
    suffix = Path(args.output or "x.png").suffix.lower().lstrip(".")
    if suffix and suffix not in _formats():
        parser.error(f"-o/--output: matplotlib saves no .{suffix}: pick one of "
                     f"{', '.join(sorted(_formats()))}")
    missing = [path for path in args.json if not Path(path).is_file()]
    if missing:  # pytest-benchmark writes none when every benchmark skipped (no GPU)
        parser.error(f"no such file: {missing[0]} (pytest-benchmark writes its JSON only "
                     "when a benchmark ran: on a GPU host)")
    records = load(args.json)
    if args.op:
        records = [r for r in records if r["op"] in args.op]
    if not records:
        parser.error("no benchmark in the file(s) records gbps and provider in extra_info")
    out = args.output or str(Path(args.json[0]).with_suffix(".png"))
    plot(records, out, args.ceiling)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
