"""The layout rules of docs/architecture.md, checked on the source tree: layers import only downwards, the visuals
and trace analysis load without torch, and no module or function grows past what a reader takes in at once."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "steplog", "visuals", "ui", "bench")
MAX_FILE_LINES = 300
MAX_FUNCTION_LINES = 60

# who may import whom (top-level packages); a package not listed for a layer is forbidden to it
ALLOWED = {
    "steplog": set(),
    "engine": {"steplog"},
    "visuals": {"steplog"},
    "ui": {"engine", "steplog", "visuals"},
    "bench": {"engine", "steplog", "visuals"},
}


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_layers_import_only_downwards(package):
    for path in _sources(package):
        ours = _imports(path) & set(PACKAGES)
        bad = ours - ALLOWED[package] - {package}
        assert not bad, (
            f"{path.relative_to(ROOT)} imports {sorted(bad)}; {package}/ may import {sorted(ALLOWED[package])}"
        )


def test_visuals_and_steplog_load_without_torch():
    code = (
        "import sys, steplog.trace, steplog.metrics, steplog.view, visuals.slots, visuals.kv, visuals.budget, "
        "visuals.timeline, visuals.narration, visuals.stepinfo, visuals.metrics; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("package", PACKAGES)
def test_files_and_functions_stay_small(package):
    for path in _sources(package):
        text = path.read_text()
        rel = path.relative_to(ROOT)
        assert text.count("\n") <= MAX_FILE_LINES, f"{rel}: {text.count(chr(10))} lines > {MAX_FILE_LINES}"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                assert n <= MAX_FUNCTION_LINES, f"{rel}:{node.lineno} {node.name}() is {n} lines > {MAX_FUNCTION_LINES}"


def test_batchscope_vllm_imports_only_the_standard_library_and_vllm():
    """Installed next to vLLM with ``pip install --no-deps .``: it must not need Batchscope's torch, transformers or
    anything else vLLM's venv may lack."""
    allowed = set(sys.stdlib_module_names) | {"__future__", "vllm", "batchscope_vllm"}
    for path in _sources("batchscope_vllm"):
        bad = _imports(path) - allowed
        assert not bad, (
            f"{path.relative_to(ROOT)} imports {sorted(bad)}; batchscope_vllm may import the standard library and vllm"
        )
