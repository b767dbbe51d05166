"""The test bounds (the repository's root ``conftest.py``) fail a runaway instead of letting it take the machine down:
a hypothesis example that spins, a test that grows its memory without end and a test that never returns each fail
on their own with the bound named, the falsifying example printed and the one command that reruns it, while a
good test beside them passes. Run in a child pytest on a copy of the root conftest, with small bounds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.cli

RUNAWAYS = """
from hypothesis import given, settings, strategies as st


@settings(max_examples=5, deadline=None, database=None)
@given(st.integers(0, 10))
def test_an_example_spins(n):
    while n > 3:
        pass


def test_never_returns():
    while True:
        pass


def test_good():
    assert sum(range(4)) == 6
"""

GROWS = """
def test_memory_grows():
    held = []
    while True:
        held.append(b"x" * 20_000_000)  # written, so resident (a zeroed bytearray may not be)


def test_good():
    assert sum(range(4)) == 6
"""


def _run_child(tmp_path, source: str, **bounds: str) -> str:
    """Run ``source`` as a test file in a child pytest under the root conftest with the given bounds; its stdout."""
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_runaways.py").write_text(source)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "test_runaways.py"],
        cwd=tmp_path,
        env=dict(os.environ, **bounds),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.stdout


def test_runaways_fail_alone_with_their_example_and_a_rerun_command(tmp_path):
    out = _run_child(tmp_path, RUNAWAYS, BATCHSCOPE_EXAMPLE_SECONDS="1", BATCHSCOPE_TEST_SECONDS="2")
    assert "2 failed, 1 passed" in out, out[-3000:]
    assert "one example of test_runaways.py::test_an_example_spins ran past its time bound" in out
    assert "n=4" in out  # the shrunk falsifying example
    assert "test_runaways.py::test_never_returns ran past its time bound" in out
    rerun = re.search(
        r"-m pytest -p no:cacheprovider test_runaways.py::test_an_example_spins --hypothesis-seed=(\d+)", out
    )
    assert rerun is not None, out[-3000:]


def test_a_test_that_grows_without_end_fails_on_the_memory_bound(tmp_path):
    # a generous time bound: the memory bound must stop it however slowly a loaded machine hands out pages
    out = _run_child(tmp_path, GROWS, BATCHSCOPE_TEST_SECONDS="240", BATCHSCOPE_TEST_MAX_GROWTH_GB="0.5")
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "test_runaways.py::test_memory_grows grew the process by" in out and "over the bound of 0.5 GiB" in out
