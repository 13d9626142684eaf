"""Old module names keep working for now, each with a DeprecationWarning naming where
its contents went (numbakern/_moved.py holds the map)."""

import importlib
import sys

import pytest

import numbakern as nk


@pytest.mark.parametrize("old", sorted(nk._moved.MOVED))
def test_every_old_module_imports_with_a_warning(old):
    with pytest.warns(DeprecationWarning, match=f"numbakern.{old} moved to numbakern."):
        module = importlib.import_module(f"numbakern.{old}")
    assert "Moved: see numbakern." in module.__doc__


@pytest.fixture(autouse=True)
def fresh():
    """Each test imports the old modules afresh (an import warns the first time)."""
    for old in nk._moved.MOVED:
        sys.modules.pop(f"numbakern.{old}", None)


def test_old_names_find_their_new_homes():
    with pytest.warns(DeprecationWarning):
        from numbakern.reductions import sum as old_sum
        from numbakern.strategy import BlockStrategy, GridStrategy, _check_threads
        from numbakern.arrays import CopyWarning, _to_device
        from numbakern.scan_tiles import ScanGrid, ScanJob
    assert old_sum is nk.sum and CopyWarning is nk.CopyWarning
    assert BlockStrategy is nk.strategies.BlockStrategy and issubclass(nk.TwoPass, GridStrategy)
    assert ScanGrid is nk.strategies.GridScan and _check_threads(64) == 64
    assert ScanJob.__module__ == "numbakern.core.jobs" and callable(_to_device)
    with pytest.raises(AttributeError, match="it moved to numbakern.core.axes"):
        importlib.import_module("numbakern.axes").no_such_name


def test_old_modules_are_attributes_and_leave_the_functions_alone():
    with pytest.warns(DeprecationWarning):
        assert nk.axes.AxisError is nk.AxisError
        importlib.import_module("numbakern.softmax")
        importlib.import_module("numbakern.sort")
    assert nk.softmax.__module__ == "numbakern.api.softmax"  # still the function
    assert nk.sort.__module__ == "numbakern.api.sort"
    with pytest.warns(DeprecationWarning, match="numbakern.kernels.state_kit moved"):
        assert nk.kernels.state_kit is nk.ops.state.state_kit


def test_the_public_warp_module_is_not_deprecated(recwarn):
    import numbakern.warp

    assert numbakern.warp is nk.runtime.warp and callable(numbakern.warp.shfl_idx)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
