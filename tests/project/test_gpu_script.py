"""The GPU scripts cannot run here (no GPU): scripts/vllm-gpu-check.sh's and scripts/gpu-engine-check.sh's dry runs
print the commands they would run, both are shellcheck-clean, and the trace check passes on a trace the tracer
wrote."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "vllm-gpu-check.sh"


def dry_run(script, out) -> str:
    """What ``script --dry-run`` prints, with ``OUT`` set to ``out``."""
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out)}
    return subprocess.run(
        ["bash", str(script), "--dry-run"], env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_dry_run_prints_every_command_without_running_them(tmp_path):
    out = dry_run(SCRIPT, tmp_path / "out")
    for needle in (
        "pip install -q --no-deps .",
        "BATCHSCOPE_TRACE=",
        "vllm serve MODEL_DIR",
        "--scheduler-cls batchscope_vllm.tracer.TracingScheduler --no-async-scheduling",
        '--speculative-config {"method": "ngram", "num_speculative_tokens": 3',
        "scripts/openai_burst.py",
        "gpu_report.py trace",
        "batchscope run --scenario sixteen --device cuda",
        "batchscope bench --device cuda --rounds 1",
    ):
        assert needle in out, needle
    assert not (tmp_path / "out").exists()  # nothing ran


def test_shellcheck_clean():  # Debian's shellcheck: installed by `make test` (the sysdeps target)
    subprocess.run(["shellcheck", str(SCRIPT)], check=True)


def test_trace_check_passes_on_the_tracer_fixture():
    out = subprocess.run(
        [sys.executable, "scripts/gpu_report.py", "trace", "tests/data/vllm-seed-abcd.jsonl", "--expect-requests", "4"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert '"requests": 4' in out and "vLLM 0.33.0 server" in out


ENGINE_SCRIPT = ROOT / "scripts" / "gpu-engine-check.sh"


def test_engine_gpu_check_dry_run_and_shellcheck(tmp_path):
    """scripts/gpu-engine-check.sh (Batchscope's engine alone on a GPU, the shipped batchscope/assets/traces/gpu/ and
    batchscope/assets/bench-h200.json came from it): its dry run names every command, runs none, and it is
    shellcheck-clean."""
    out = dry_run(ENGINE_SCRIPT, tmp_path / "out")
    for scenario in ("sixteen", "seed-abcd"):
        for batching in ("continuous", "static"):
            assert (
                f"batchscope run --scenario {scenario} --batching {batching} --device cuda --dtype float32 --force "
                f"--out {tmp_path}/out/{scenario}-{batching}.jsonl" in out
            )
    assert "batchscope bench --device cuda --dtype float32 --rounds 1 --parity report" in out
    assert not (tmp_path / "out").exists()
    subprocess.run(["shellcheck", str(ENGINE_SCRIPT)], check=True)
