"""Helpers for the command-line tests: run ``python -m batchscope`` (in a subprocess from the repository's root, or in
process for ``metrics``), and check that a refusal is one clear line (exit 2, no traceback)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import ROOT

from batchscope.cli.main import main


def cli(*args, timeout=180):
    proc = subprocess.run(
        [sys.executable, "-m", "batchscope", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    return proc.returncode, proc.stdout, proc.stderr


def run_workload(tmp_path, line: dict, *flags):
    """Write ``line`` as a one-request workload and run it through the CLI."""
    wl = tmp_path / "w.jsonl"
    wl.write_text(json.dumps(line) + "\n")
    return cli("run", "--workload", str(wl), *flags, "--out", str(tmp_path / "t.jsonl"))


def run_warnings(err: str) -> list[str]:
    """The warnings of a run, less the one that says the machine was busy (``batchscope.steplog.timing``: it depends on
    the machine's load, not on the run)."""
    return [line for line in err.splitlines() if line.startswith("warning:") and "CPU contention" not in line]


def assert_clear_error(code, err, *needles):
    assert code == 2, err
    assert "Traceback" not in err
    last = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(last) == 1, err
    for n in needles:
        assert n in last[0], last[0]


def metrics_cli(capsys, *paths) -> tuple[str, dict[str, tuple[str, list[str]]]]:
    """``python -m batchscope metrics PATHS``: its first line, and ``{metric: (unit, [value per trace])}`` of the
    table's ``value`` rows."""
    assert main(["metrics", *map(str, paths)]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index("") + 2 :]  # below the blank line and the table's heading
    rows = {}
    for line in table:
        metric, stat, unit, *values = re.split(r"\s{2,}", line.strip())
        if stat == "value":
            rows[metric] = (unit, values)
    return lines[0], rows
