"""The wheel installs `strategies/` as numbakern.strategies, never as a top-level
package, and its `numbakern` command starts without a deprecation warning."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_installs_strategies_inside_numbakern(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
    )
    (wheel,) = tmp_path.glob("numbakern-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"numbakern"}, top_level
    for lesson in ("warp_shuffle", "shared_tree", "two_pass", "atomic_fold"):
        assert f"numbakern/strategies/{lesson}.py" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    commands = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "numbakern = numbakern.teach.cli:main" in commands  # not the old module name
