"""scripts/sglang-gpu-check.sh cannot run here (no GPU): its dry run prints every command (the launcher with
BATCHSCOPE_TRACE, a small token pool for a retraction, the burst with aborts, the shared-prefix client, the trace
check) and runs none, and it is shellcheck-clean."""

from __future__ import annotations

import subprocess

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "sglang-gpu-check.sh"


def test_dry_run_prints_every_command_without_running_them(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")}
    out = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"], env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    for needle in (
        "pip install -q sglang==0.5.23",
        "pip install -q --no-deps .",
        "BATCHSCOPE_TRACE=",
        "-m batchscope_sglang.serve --model-path MODEL_DIR",
        "--max-total-tokens 4000",
        "scripts/openai_burst.py",
        "Question {i}: what is a page table?",
        "gpu_report.py trace",
        "the trace should hold a retraction, an abort and radix-cache hits",
        "batchscope metrics",
    ):
        assert needle in out, needle
    assert not (tmp_path / "out").exists()  # nothing ran


def test_shellcheck_clean():  # Debian's shellcheck: installed by `make test` (the sysdeps target)
    subprocess.run(["shellcheck", str(SCRIPT)], check=True)
