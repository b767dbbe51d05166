"""A plain (non-editable) install finds its package data through the package, not the source tree: from another
folder it lists the scenarios, validates a trace against the shipped schema, and has the tools' commands."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import RECORDED, ROOT

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli


def test_plain_install_works_from_another_folder(tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def run(*args: str) -> str:
        out = subprocess.run([sys.executable, *args], cwd=elsewhere, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert run("-c", "import engine; print(engine.__file__)").startswith(str(site))
    names = [line.split()[0] for line in run("-m", "engine", "scenarios").splitlines()]
    assert {"seed-abcd", "sixteen", "preemption"} <= set(names)
    trace = RECORDED / "seed-abcd-continuous.jsonl"
    code = f"from steplog import trace; print(len(trace.read({str(trace)!r})))"
    assert int(run("-c", code)) > 2
    assert "bench" in run("-m", "engine", "--help")
