"""Files Batchscope writes can be read by whoever the user's umask lets read them (issue 21, part 3).

Atomic writes go through a temporary file and a rename; ``tempfile.mkstemp`` made that file 0600, so a trace of
``run --out`` or a player of ``html --out`` copied to a course web folder could not be served. Now every atomic
write gets 0666 less the umask, as ``open`` would give: 0644 under umask 022, 0640 under 027, 0600 under 077, also
when ``--force`` replaces a file, and no temporary file is left behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RECORDED, ROOT

from batchscope.cli.main import main
from batchscope.steplog.trace import write_bytes_atomic

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli

UMASKS = {0o022: 0o644, 0o027: 0o640, 0o077: 0o600}


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", sorted(UMASKS), ids=oct)
def test_an_atomic_write_keeps_the_users_umask(tmp_path, mask):
    out = tmp_path / "t.jsonl"
    with umask(mask):
        write_bytes_atomic(b"one", out)
        assert mode(out) == UMASKS[mask]
        out.chmod(0o600)
        write_bytes_atomic(b"two", out)  # a replaced file: the umask's mode again
    assert (mode(out), out.read_bytes()) == (UMASKS[mask], b"two")
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]  # no temporary file left


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=oct)
def test_html_out_gets_the_umasks_mode(tmp_path, mask):
    out = tmp_path / "pair.html"
    pair = [str(RECORDED / f"seed-abcd-{p}.jsonl") for p in ("static", "continuous")]
    with umask(mask):
        assert main(["html", *pair, "--out", str(out)]) == 0
    assert mode(out) == UMASKS[mask]


@pytest.mark.real_model
@pytest.mark.parametrize("mask", [0o022, 0o027], ids=oct)
def test_run_out_gets_the_umasks_mode(tmp_path, mask):
    out = tmp_path / "t.jsonl"
    cmd = [sys.executable, "-m", "batchscope", "run", "--scenario", "seed-abcd", "--num-requests", "1", "--max-tokens"]
    proc = subprocess.run(
        [*cmd, "2", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300, umask=mask
    )
    assert proc.returncode == 0, proc.stderr
    assert mode(out) == UMASKS[mask]
