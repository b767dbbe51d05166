"""A plain (non-editable) install is one package of ours, ``batchscope``, plus the two integrations that run inside
vLLM's and SGLang's venvs, and finds its data through the package, not the source tree: from another folder it lists
the scenarios, validates a trace against the shipped schema, has the tools' commands, runs the app's pages and
writes the static site."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import RECORDED, ROOT

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli


def test_plain_install_works_from_another_folder(tmp_path):
    site, source = tmp_path / "site", tmp_path / "source"
    # the checkout's files alone: a build/ folder left by an older layout would be installed with them
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in tracked.splitlines():
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(source)],
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

    ours = sorted(p.name for p in site.iterdir() if not p.name.endswith((".dist-info", ".egg-info", "bin")))
    assert ours == ["batchscope", "batchscope_sglang", "batchscope_vllm"], ours
    assert sorted(p.name for p in (site / "bin").iterdir()) == ["batchscope"]  # the console script
    assert run("-c", "import batchscope; print(batchscope.__file__)").startswith(str(site))
    names = [line.split()[0] for line in run("-m", "batchscope", "scenarios").splitlines()]
    assert {"seed-abcd", "sixteen", "preemption"} <= set(names)
    trace = RECORDED / "seed-abcd-continuous.jsonl"
    code = f"from batchscope.steplog import trace; print(len(trace.read({str(trace)!r})))"
    assert int(run("-c", code)) > 2
    commands = run("-m", "batchscope", "--help")
    assert all(c in commands for c in ("bench", "html", "site", "app")), commands
    # the app's pages from the installed copy (its shipped traces are package data)
    app = site / "batchscope" / "app" / "main.py"
    code = (
        "from streamlit.testing.v1 import AppTest; "
        f"at = AppTest.from_file({str(app)!r}, default_timeout=120).run(); "
        "assert not at.exception, [e.message for e in at.exception]; print(len(at.markdown))"
    )
    assert int(run("-c", code)) > 0
    run("-m", "batchscope", "site", "--out", str(tmp_path / "site-out"))
    assert (tmp_path / "site-out" / "index.html").exists()
