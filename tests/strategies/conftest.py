"""Fixtures of the strategy tests."""

import pytest

from numbakern.strategies import decoupled_lookback


@pytest.fixture
def chosen(monkeypatch):
    """The ``Vectors`` (or None) of each look-back kernel asked for, in order: the
    tile path a scan took, read from the kernel's cache key."""
    seen = []
    real = decoupled_lookback.cached

    def spy(key, build):
        if key[0] == "decoupled_lookback":
            seen.append(key[6])
        return real(key, build)

    monkeypatch.setattr(decoupled_lookback, "cached", spy)
    return seen
