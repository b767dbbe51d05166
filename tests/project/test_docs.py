"""Documented code runs: every ```python block of the README and docs/ (every page) runs from the repository's
root; every ``python -m batchscope`` command line in a ```bash block parses with the CLI's own parser; the JSON
examples of the trace format validate against the schema, and the workload example passes the workload reader."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest
from conftest import ROOT

from batchscope.steplog.trace import _validators

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(lang: str) -> list[tuple[str, int, str]]:
    """(file, relative to the repository, line of the block, code) of every fenced block in ``lang``."""
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
            out.append((path.relative_to(ROOT).as_posix(), text[: m.start()].count("\n") + 1, m.group(1)))
    return out


PYTHON = blocks("python")


def test_the_docs_have_python_examples():
    assert any(name == "docs/pages/metrics.md" for name, _, _ in PYTHON)  # latency figures in a notebook


@pytest.mark.parametrize("name,line,code", PYTHON, ids=[f"{n}:{ln}" for n, ln, _ in PYTHON])
def test_python_blocks_run(name, line, code):
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{name} line {line}:\n{proc.stderr[-2000:]}"


def _commands() -> list[tuple[str, int, list[str]]]:
    out = []
    for name, line, code in blocks("bash"):
        for command in code.replace("\\\n", " ").splitlines():
            command = command.split("#")[0].strip()
            found = re.search(r"-m batchscope(\s|$)", command)  # not -m batchscope_sglang.serve, another program
            if found:
                out.append((name, line, shlex.split(command[found.end() :])))
    return out


COMMANDS = _commands()


def declared_commands() -> list:
    """The ``batchscope.commands`` entry points pyproject.toml declares (an installed copy may predate them)."""
    from importlib.metadata import EntryPoint

    text = (ROOT / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."batchscope.commands"]', 1)[1].split("\n[", 1)[0]
    pairs = re.findall(r'^([\w-]+)\s*=\s*"([^"]+)"', section, re.MULTILINE)
    return [EntryPoint(name, value, "batchscope.commands") for name, value in pairs]


@pytest.mark.parametrize("name,line,argv", COMMANDS, ids=[f"{n}:{ln}:{' '.join(a)[:40]}" for n, ln, a in COMMANDS])
def test_documented_command_lines_parse(name, line, argv, monkeypatch):
    import batchscope.cli.main as cli
    from batchscope.cli.main import _parser

    monkeypatch.setattr(cli, "entry_points", lambda group: declared_commands())

    if argv == ["--version"]:
        return
    try:
        _parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{name} line {line}: `python -m batchscope {' '.join(argv)}` does not parse ({exc})")


def test_trace_format_examples_validate_against_the_schema():
    from batchscope.inputs.workload import parse_workload_text

    examples = [  # an example eliding parts ("...", "…") is an illustration, not a record
        json.loads(code) for name, _, code in blocks("json") if name == "docs/trace-format.md" and "..." not in code
    ]
    by_type = {e.get("type", "workload"): e for e in examples}
    assert set(by_type) == {"header", "step", "summary", "workload"}
    validators = _validators()
    for kind, schema in (("header", "header"), ("step", "step_v1"), ("summary", "summary")):
        errors = [e.message for e in validators[schema].iter_errors(by_type[kind])]
        assert not errors, (kind, errors)
    assert parse_workload_text(json.dumps(by_type["workload"]))[0]["request_id"] == "A"


def test_the_shared_prefix_words_name_the_requests_that_have_its_system_prompt():
    """The `shared-prefix` bullet of docs/scenarios.md and the scenario's own description name exactly the requests
    that start with the system prompt (A1, A2, A3 and B; C, the long request that fills the pool, has none), and
    neither says that every request has it."""
    scenario = json.loads((ROOT / "batchscope" / "inputs" / "scenarios" / "shared-prefix.json").read_text())
    system = {
        r["request_id"] for r in scenario["requests"] if any(m["role"] == "system" for m in r.get("messages", []))
    }
    others = {r["request_id"] for r in scenario["requests"]} - system
    assert system and others == {"C"}  # the scenario itself (its requests are not for this test to change)
    scenarios = (ROOT / "docs" / "scenarios.md").read_text()
    bullet = re.search(r"^- `shared-prefix`:(.*?)(?=^- |^$)", scenarios, re.DOTALL | re.MULTILINE).group(1)
    for name, text in (("scenarios.md", " ".join(bullet.split())), ("shared-prefix.json", scenario["description"])):
        assert not re.search(r"\bevery request\b", text, re.IGNORECASE), name
        named = re.search(r"((?:\w+, )*\w+ and \w+) start with the same system prompt", text)
        assert named and set(re.split(r", | and ", named.group(1))) == system, name
        for rid in others:
            assert re.search(rf"\b{rid}\b, with no system prompt", text), name
