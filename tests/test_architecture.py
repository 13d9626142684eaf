"""The layers hold: import-linter's contracts (setup.cfg) on the source tree, and
each strategy file standing alone.

Calls run one way: teach -> api -> core -> strategies -> kernels -> ops -> runtime
(README, "The layers"). A strategy file imports the protocols and the registry of its
package, never another strategy, so a new one is one file plus one registry line.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import numbakern

ROOT = Path(__file__).resolve().parents[1]
SHARED = {"__init__", "protocols", "registry"}


def test_import_contracts_hold():
    # From the source tree, as a contributor runs it: numbakern/strategies links to
    # the top-level strategies/, so the linter reads the same files that import.
    pytest.importorskip("importlinter", reason="import-linter is a dev extra")
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache", "--config", str(ROOT / "setup.cfg")],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken" in result.stdout, result.stdout


def _strategy_imports(path: Path) -> set:
    """The sibling modules of ``strategies/`` that a strategy file imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y, from . import x
                found |= {node.module} if node.module else {a.name for a in node.names}
            elif node.module and node.module.startswith("numbakern.strategies."):
                found.add(node.module.split(".")[2])
    return found


def test_each_strategy_file_stands_alone():
    files = sorted((ROOT / "strategies").glob("*.py"))
    assert len(files) > len(SHARED)
    for path in files:
        if path.stem not in SHARED:
            assert _strategy_imports(path) <= {"protocols", "registry"}, path.name


def test_every_strategy_file_is_registered():
    """A strategy file's classes of a family are in that family's registry (the one
    line beside the file), so every layout of the family uses them."""
    from numbakern.strategies import REGISTRY
    from numbakern.strategies.protocols import Strategy

    registered = {cls for family in REGISTRY.values() for cls in family.values()}
    for path in sorted((ROOT / "strategies").glob("*.py")):
        if path.stem in SHARED:
            continue
        module = __import__(f"numbakern.strategies.{path.stem}", fromlist=["_"])
        own = [v for v in vars(module).values() if isinstance(v, type)
               and issubclass(v, Strategy) and v.__module__ == module.__name__]
        assert all(cls in registered for cls in own), (path.name, own)


def test_the_top_level_is_public_names_only():
    """``numbakern`` holds public names; its modules live in the layers' folders."""
    files = {p.name for p in (ROOT / "numbakern").glob("*.py")}
    assert files == {"__init__.py", "__main__.py", "_moved.py"}, files
    assert all(not name.startswith("_") or name in ("__version__",) or
               name.startswith("__") for name in numbakern.__all__)
