"""Print pytest-benchmark results as a table: one line per case, event time and GB/s.

    python bench/table.py half.json [more.json ...]

Reads what bench/conftest.py's ``measure`` records in ``extra_info`` (``op``,
``provider``, ``shape``, ``dtype`` where a suite sets them, ``event_ms``, ``gbps``,
``copy_fraction``), sorted so that a case's providers sit together.
"""

from __future__ import annotations

import argparse
import json


def _text(value) -> str:
    """A field as a table shows it: a shape recorded as a list as ``4096x32768``."""
    return "x".join(map(str, value)) if isinstance(value, list) else str(value)


def rows(paths: list[str]) -> list[tuple]:
    out = []
    for path in paths:
        with open(path) as f:
            for bench in json.load(f)["benchmarks"]:
                info = bench.get("extra_info", {})
                if "event_ms" not in info:
                    continue
                case = tuple(_text(info.get(key, "")) for key in ("op", "shape", "dtype"))
                out.append((*case, info.get("provider", bench["name"]), info["event_ms"],
                            info.get("gbps", 0.0), info.get("copy_fraction", 0.0)))
    return sorted(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+")
    args = parser.parse_args(argv)
    print(f"{'op':22} {'shape':14} {'dtype':9} {'provider':28} {'ms':>8} {'GB/s':>7} copy")
    for op, shape, dtype, provider, ms, gbps, frac in rows(args.json):
        print(f"{op:22} {shape:14} {dtype:9} {provider:28} {ms:8.3f} {gbps:7.0f} {frac:4.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
