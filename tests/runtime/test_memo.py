"""Cached argument checking (numbakern/runtime/memo.py) never caches its way past a check."""

from __future__ import annotations

import numpy as np
import pytest

import numbakern as nk
from numbakern.runtime.memo import planner


def test_results_are_cached_and_errors_are_raised_every_time():
    calls = []

    @planner
    def plan(flag, axes):
        calls.append((flag, axes))
        if type(flag) is not bool:
            raise TypeError("flag must be True or False")
        return flag, axes

    assert plan(True, (1,)) == plan(True, (1,)) == (True, (1,))
    assert len(calls) == 1
    for _ in range(2):  # 1 == True and hashes alike: the types keep them apart
        with pytest.raises(TypeError, match="True or False"):
            plan(1, (1,))
    assert plan(True, [1]) == (True, [1])  # unhashable: planned, not cached
    assert plan(True, [1]) == (True, [1]) and len(calls) == 5


def test_a_cached_call_still_refuses_a_bad_flag_or_axis():
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(nk.cumsum(x, exclusive=True), [0, 0, 1, 3, 6])
    with pytest.raises(TypeError, match="exclusive must be True or False"):
        nk.cumsum(x, exclusive=1)
    assert nk.sum(x, axis=0) == 10
    with pytest.raises(np.exceptions.AxisError):
        nk.sum(x, axis=1)
    assert nk.sum(x, axis=(0,)) == 10  # cached; (False,) equals (0,) and hashes alike
    with pytest.raises(TypeError, match="axis must be"):
        nk.sum(x, axis=(False,))


def test_a_cached_plan_runs_the_callers_own_strategy_object():
    # Two strategy objects with equal keys share a cached plan; each call must still
    # run the object it was given (a subclass may carry settings outside its key).
    from numbakern.strategies import DecoupledLookback, TwoPass, WarpShuffle

    seen = []

    class Tagged(TwoPass):
        def __init__(self, tag):
            super().__init__(WarpShuffle(32), blocks=2)
            self.tag = tag

        def reduce(self, job):
            seen.append(self.tag)
            return super().reduce(job)

    class TaggedScan(DecoupledLookback):
        def __init__(self, tag):
            super().__init__(WarpShuffle(32))
            self.tag = tag

        def scan(self, job):
            seen.append(self.tag)
            return super().scan(job)

    x = np.arange(100, dtype=np.float32)
    for tag in ("a", "b"):
        assert nk.sum(x, strategy=Tagged(tag)) == 4950
        assert nk.cumsum(x, strategy=TaggedScan(tag), layout="tiles")[-1] == 4950
    assert seen == ["a", "a", "b", "b"]
