"""The layout rules of docs/architecture.md, checked on the source tree: layers import only downwards, the visuals
and trace analysis load without torch, and no function grows past what a reader takes in at once. Files are cut by
concept, not by a line count: the 300-line file cap is retired (issue 32), the 60-line function cap stays."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

MAX_FUNCTION_LINES = 60

# The layers of the one package ``batchscope``, lowest first, and the concept packages in each. A package may import
# its own layer's packages and those of the layers it lists; nothing else of ours.
LAYERS = {
    "steplog": ("steplog",),
    "facts": ("facts",),
    "engine": ("engine", "scheduling", "sglang_family", "tgi_family", "trtllm_family", "model", "inputs", "cli"),
    "visuals": ("figures", "explain", "quiz", "glossary", "player", "compare"),
    "app": ("app",),
    "tools": ("bench", "tools"),
}
ALLOWED = {
    "steplog": set(),
    "facts": {"steplog"},
    "engine": {"steplog"},
    "visuals": {"steplog", "facts"},
    "app": {"engine", "steplog", "facts", "visuals"},
    "tools": {"engine", "steplog", "facts", "visuals"},
}
LAYER_OF = {package: layer for layer, packages in LAYERS.items() for package in packages}
PACKAGES = tuple(f"batchscope/{p}" for p in LAYER_OF)


# Import cycles inside a package that are known and owned by someone, by name: the group of modules that import each
# other, exactly. Each entry goes with its fix: test_known_import_cycles_still_exist fails while a stale one stays.
CYCLE_PACKAGES = (*PACKAGES, "batchscope_vllm", "batchscope_sglang")


def test_every_concept_package_has_a_layer():
    on_disk = {p.parent.name for p in (ROOT / "batchscope").glob("*/__init__.py")}
    assert on_disk == set(LAYER_OF), f"packages without a layer: {sorted(on_disk - set(LAYER_OF))}"


def _batchscope_imports(path: Path) -> set[str]:
    """The concept packages of ``batchscope`` that ``path`` imports (``batchscope.X...`` -> ``X``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if "." in node.module else [f"{node.module}.{a.name}" for a in node.names]
        out |= {n.split(".")[1] for n in names if n.startswith("batchscope.") and n.count(".") >= 1}
    return out


def _sources(package: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports anywhere in it (top level, in a function, under
    ``TYPE_CHECKING``), absolutely or relatively; ``from p import x`` imports ``p.x`` if it is a module, else ``p``."""
    name = _module_name(path, root)
    package = (name if path.name == "__init__.py" else name.rpartition(".")[0]).split(".")
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # ``from .. import x`` in package a.b.c: level 2 is a.b
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return (out & modules) - {name}


def _import_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    paths = _sources(package, root)
    modules = {_module_name(p, root) for p in paths}
    return {_module_name(p, root): _imported_modules(p, root, modules) for p in paths}


def _cycle_groups(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The groups of modules that import each other, directly or through others (strongly connected components of
    more than one module; a package has tens of modules, so following every module's imports is cheap)."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            new = graph[todo.pop()] - seen
            seen |= new
            todo += new
        reach[start] = seen
    return {frozenset({v} | {w for w in reach[v] if v in reach[w]}) for v in graph if v in reach[v]}


def _a_cycle(graph: dict[str, set[str]], group: frozenset[str]) -> str:
    """One shortest import cycle through the first module of ``group``, as ``a -> b -> a``."""
    start = min(group)
    paths, todo = {start: [start]}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & group):
            if w == start:
                return " -> ".join([*paths[v], start])
            if w not in paths:
                paths[w] = [*paths[v], w]
                todo.append(w)
    raise AssertionError(f"{sorted(group)} is not a cycle")


@pytest.mark.parametrize("package", CYCLE_PACKAGES)
def test_no_import_cycle_inside_a_package(package):
    """Two modules that import each other (even lazily, inside a function) share a piece that belongs to neither:
    it moves to a module both import."""
    graph = _import_graph(package)
    for group in sorted(_cycle_groups(graph), key=min):
        raise AssertionError(
            f"{package}/ has an import cycle: {_a_cycle(graph, group)} (modules in it: {', '.join(sorted(group))}); "
            "move what they share into a module both import"
        )


def test_the_cycle_check_sees_relative_and_function_level_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from .c import x\n")
    (pkg / "c.py").write_text("import pkg.a\nimport os\n")
    (pkg / "d.py").write_text("from pkg import a\n")
    graph = _import_graph("pkg", tmp_path)
    assert _cycle_groups(graph) == {frozenset({"pkg.a", "pkg.b", "pkg.c"})}
    assert _a_cycle(graph, frozenset({"pkg.a", "pkg.b", "pkg.c"})) == "pkg.a -> pkg.b -> pkg.c -> pkg.a"


@pytest.mark.parametrize("package", PACKAGES)
def test_layers_import_only_downwards(package):
    name = package.split("/")[1]
    layer = LAYER_OF[name]
    may = {p for other in ALLOWED[layer] | {layer} for p in LAYERS[other]}
    for path in _sources(package):
        bad = _batchscope_imports(path) - may
        assert not bad, (
            f"{path.relative_to(ROOT)} imports batchscope.{sorted(bad)}; the {layer} layer may import "
            f"{sorted(ALLOWED[layer] | {layer})}"
        )


def test_visuals_and_steplog_load_without_torch():
    code = (
        "import sys, batchscope.steplog.trace, batchscope.steplog.metrics, batchscope.steplog.view, "
        "batchscope.figures.slots, batchscope.figures.kv, batchscope.figures.budget, batchscope.figures.timeline, "
        "batchscope.explain.narration, batchscope.explain.stepinfo, batchscope.figures.metrics; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_apps_pages_load_without_torch():
    """Every page of the app, the Playground's scheduler knobs included, imports without PyTorch (about 1 s of the
    server's first page before); a live run loads it when it starts the model."""
    pages = ("walkthrough", "lockstep", "metrics", "playground", "trace", "quiz", "glossary")
    code = (
        "import sys; "
        + "; ".join(f"import batchscope.app.page_{p}" for p in pages)
        + "; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("package", PACKAGES)
def test_functions_stay_small(package):
    for path in _sources(package):
        text = path.read_text()
        rel = path.relative_to(ROOT)
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


def test_batchscope_sglang_imports_only_the_standard_library_and_sglang():
    """It runs in SGLang's own venv (``make test-sglang``): nothing of Batchscope's, torch or anything else; the one
    exception is the vLLM tracer's trace writer (one writer, one size cap for both tracers), itself standard library
    only (``test_the_shared_trace_writer_imports_only_the_standard_library``)."""
    allowed = set(sys.stdlib_module_names) | {"__future__", "sglang", "batchscope_sglang"}
    for path in _sources("batchscope_sglang"):
        modules = {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        }
        vllm = {m for m in modules if m.split(".")[0] == "batchscope_vllm"}
        writer = {"batchscope_vllm"} if vllm == {"batchscope_vllm.tracewriter"} else set()
        bad = _imports(path) - allowed - writer
        assert not bad, (
            f"{path.relative_to(ROOT)} imports {sorted(bad)}; batchscope_sglang may import the standard library and "
            "sglang"
        )


def test_the_shared_trace_writer_imports_only_the_standard_library():
    path = ROOT / "batchscope_vllm" / "tracewriter.py"
    assert not _imports(path) - set(sys.stdlib_module_names) - {"__future__"}


def test_batchscope_sglang_functions_stay_small():
    for path in _sources("batchscope_sglang") + _sources("tests_sglang"):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES, f"{path.relative_to(ROOT)}:{node.name}"
