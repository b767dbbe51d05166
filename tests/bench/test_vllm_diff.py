"""``python -m batchscope vllm-diff``: a recorded trace replayed through vLLM's own scheduler (in vLLM's venv, made by
``make test-vllm``, which ``make test`` runs first), the verdict printed, and a clear error without the venv."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from conftest import RECORDED

from batchscope.tools.vllm_diff import ROOT, VLLM_PYTHON_ENV, add_vllm_diff, vllm_python

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli

TRACE = RECORDED / "seed-abcd-continuous.jsonl"
VLLM = Path(os.environ.get(VLLM_PYTHON_ENV) or ROOT / ".venv-vllm" / "bin" / "python")


def vllm_diff(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_vllm_diff(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["vllm-diff", *argv, "--vllm-python", str(VLLM)])
    return args.handler(args)


def test_missing_vllm_venv_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="run `make test-vllm` once to create it"):
        vllm_python(str(tmp_path / "no-venv" / "bin" / "python"))


def test_a_shipped_trace_agrees_and_a_changed_one_does_not(tmp_path, capsys):
    assert vllm_diff("--trace", str(TRACE)) == 0
    steps = len(TRACE.read_text().splitlines()) - 2
    assert capsys.readouterr().out.splitlines()[0] == f"agrees on all {steps} steps"
    records = [json.loads(line) for line in TRACE.read_text().splitlines()]
    records[3]["scheduled"][-1]["num_tokens"] -= 1  # step 2: one token fewer than Batchscope really scheduled
    changed = tmp_path / "changed.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert vllm_diff("--trace", str(changed)) == 1
    assert capsys.readouterr().out.startswith("step 2: scheduled differs")
