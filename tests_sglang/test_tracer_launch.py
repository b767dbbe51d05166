"""The launcher (``python -m batchscope_sglang.serve``) installs the tracer the way SGLang 0.5.23 installs plugins: in a
fresh process, as a spawned scheduler process is, ``run_traced_scheduler_process`` registers ``TracingScheduler``
with SGLang's hook registry and SGLang's own ``load_plugins()`` (the first line of its ``run_scheduler_process``)
makes it the class ``run_scheduler_process`` builds. SGLang's ``launch_server`` takes the function by that name.
Standard library and SGLang only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A scheduler process in miniature: SGLang's run_scheduler_process replaced by one that runs its first line
# (load_plugins) and reports which class the module's ``Scheduler`` name then holds (SGLang's registry rebinds every
# module's reference to the replaced class, so the original is found in the class's bases).
PROBE = """
import batchscope_sglang.driver  # the CPU stubs SGLang's imports need here
import sglang.srt.managers.scheduler as m
from sglang.srt.plugins import load_plugins
def fake_run_scheduler_process(*args, **kwargs):
    load_plugins()
    return m.Scheduler
m.run_scheduler_process = fake_run_scheduler_process
from batchscope_sglang.serve import run_traced_scheduler_process
cls = run_traced_scheduler_process("args")
bases = [f"{c.__module__}.{c.__name__}" for c in cls.__mro__]
print(cls.__module__, cls.__name__, "sglang.srt.managers.scheduler.Scheduler" in bases)
"""


def test_scheduler_process_builds_the_tracing_scheduler():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=300
    ).stdout
    assert out.strip().splitlines()[-1] == "batchscope_sglang.tracer TracingScheduler True"


def test_launch_server_takes_the_scheduler_process_function():
    """Read from SGLang's source (importing its HTTP server needs uvloop, which the model-free venv leaves out)."""
    import ast

    import sglang

    source = Path(sglang.__file__).parent / "srt" / "entrypoints" / "http_server.py"
    (fn,) = [n for n in ast.parse(source.read_text()).body if getattr(n, "name", "") == "launch_server"]
    assert "run_scheduler_process_func" in [a.arg for a in fn.args.args]


def test_the_launcher_wants_a_trace_path(monkeypatch, capsys):
    from batchscope_sglang import serve

    monkeypatch.delenv("BATCHSCOPE_TRACE", raising=False)
    assert serve.main(["--model-path", "x"]) == 2
    assert "set BATCHSCOPE_TRACE" in capsys.readouterr().out
