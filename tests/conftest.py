"""Shared test set-up: the `gpu` marker skips unless a real CUDA GPU runs."""

import pytest

import numbakern


def pytest_collection_modifyitems(config, items):
    if not numbakern.backend().is_simulator:
        return
    skip = pytest.mark.skip(reason="needs a real CUDA GPU; the simulator runs here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"numbakern backend: {numbakern.backend()}"
