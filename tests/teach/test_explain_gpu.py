"""``numbakern explain`` on a GPU machine: it runs the same command again under the
simulator (where kernels can be watched), or says in one line how to."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

import numbakern
from numbakern.runtime.backend import Backend
from numbakern.teach import cli as cli_module

GPU = Backend("cuda", "NVIDIA H200", (9, 0), "a GPU answered")
ARGS = ["explain", "bitonic", "--values", "3,1,2", "--dtype", "int8"]


def test_explain_on_a_gpu_reruns_itself_under_the_simulator(monkeypatch):
    calls = []
    monkeypatch.setattr(numbakern, "backend", lambda: GPU)
    monkeypatch.setattr(sys, "argv", ["numbakern", *ARGS])
    monkeypatch.delenv("NUMBAKERN_SIMULATOR", raising=False)
    monkeypatch.setattr(subprocess, "call", lambda argv, env: calls.append((argv, env)) or 3)
    result = CliRunner().invoke(cli_module.cli, ARGS)
    assert result.exit_code == 3  # the rerun's status
    (argv, env), = calls
    assert argv == [sys.executable, "-m", "numbakern", *ARGS]
    assert env["NUMBAKERN_SIMULATOR"] == "1"
    assert "running it there (NUMBAKERN_SIMULATOR=1)" in result.output


def test_explain_on_a_gpu_called_in_process_says_how(monkeypatch):
    monkeypatch.setattr(numbakern, "backend", lambda: GPU)
    monkeypatch.setattr(sys, "argv", ["pytest"])
    result = CliRunner().invoke(cli_module.cli, ARGS)
    assert result.exit_code == 1
    assert "Run it as: NUMBAKERN_SIMULATOR=1 numbakern explain" in result.output
    assert len(result.output.strip().splitlines()) == 1
