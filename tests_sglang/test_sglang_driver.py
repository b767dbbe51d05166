"""The driver itself: it refuses any SGLang but 0.5.23, and SGLang's own run shows the rules the differential
relies on (prefill first, the ratio's defaults)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cases

from batchscope_sglang.driver import run_sglang

ROOT = Path(__file__).resolve().parents[1]


def test_refuses_another_sglang_version(tmp_path):
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text('__version__ = "0.5.22"\n')
    code = "import batchscope_sglang.driver"
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode != 0
    assert "drives sglang==0.5.23 exactly" in out.stderr and "found sglang 0.5.22" in out.stderr


def test_sglang_runs_prefill_first_and_decays_the_ratio():
    """While C is prefilled at step 1, A and B (running) wait; decode steps then lower the ratio from 0.7 by
    (0.7 - 0.7 * 0.14) / 600 each."""
    records = run_sglang(cases.retraction())
    assert [r["kind"] for r in records[:3]] == ["extend", "extend", "decode"]
    assert records[1]["run"] == [["C", 2]]
    assert records[1]["new_token_ratio"] == 0.7
    assert abs(records[2]["new_token_ratio"] - (0.7 - 0.7 * 0.86 / 600)) < 1e-12
