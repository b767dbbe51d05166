"""The docs site and the README, checked as a reader would meet them.

- The site (``mkdocs.yml``, ``docs/``) builds in strict mode, in-process and offline: any warning (a broken link or
  anchor, a page left out of the nav) fails, and no built page loads anything from the network. The generated
  command-line reference names every flag of every command (``scripts/cli_reference.py``, an MkDocs hook).
- Every relative link and anchor of ``README.md`` resolves (GitHub's anchors), and the checker fails on a broken one.
- ``docs/architecture.md`` lists every module of the three packages, and only those; ``docs/testing.md``'s test map
  lists every test folder.
- Figures the docs quote equal the files they were measured into: the benchmark's and the contention's tables
  (``batchscope/assets/*.md``), the variance sweep (``sweep.json``), the four engines' table (the shipped traces,
  through ``scripts/four_engines.py``) and the vLLM-vs-SGLang table's dates (the traces' headers, in
  ``tests/facts/test_findings.py``).

Not marked ``cli``: the build runs in this process in a few seconds, so ``make test-fast`` catches a broken link on
every edit.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import re
import runpy
import unicodedata
from pathlib import Path

import pytest
from conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
PACKAGES = ("batchscope", "batchscope_vllm", "batchscope_sglang")


# -- the site builds strictly and offline ------------------------------------------------------------------------


def build_site(config_file: Path, out: Path) -> list[str]:
    """Build the site of ``config_file`` as ``make docs`` does (strict) into ``out``, in this process; the warnings
    it logged (a strict build aborts on the first batch of them)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                records.append(record.getMessage())

    handler = Collect()
    logging.getLogger("mkdocs").addHandler(handler)
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # Material's end-of-life notice, not a warning
            build(load_config(str(config_file), strict=True, site_dir=str(out)))
    except Exception as exc:  # mkdocs' Abort in strict mode, or a hook's error
        records.append(f"the build stopped: {exc}")
    finally:
        logging.getLogger("mkdocs").removeHandler(handler)
    return records


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built as ``make docs`` builds it, into a temporary folder; any warning fails, each one named."""
    out = tmp_path_factory.mktemp("site")
    warnings = build_site(ROOT / "mkdocs.yml", out)
    assert not warnings, "\n".join(warnings)
    return out


def test_the_docs_build_in_strict_mode(site):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    for page in ("index.html", "tour.html", "cli-reference.html", "architecture.html", "fidelity/index.html"):
        assert page in pages


EXTERNAL = re.compile(
    r"""<(?:link|script|img|iframe|source)\b[^>]*?\b(?:href|src)=["']?(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//|@import\s+["']?(?:https?:)?//""",
    re.IGNORECASE,
)


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    """The strict build can fail: a copy of the docs with one link to a missing page and one to a missing anchor."""
    import shutil

    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "cli_reference.py", tmp_path / "scripts")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path)
    with (tmp_path / "docs" / "tour.md").open("a") as tour:
        tour.write("\n[gone](no-such-page.md) and [no anchor](index.md#no-such-heading)\n")
    warnings = "\n".join(build_site(tmp_path / "mkdocs.yml", tmp_path / "site"))
    assert "no-such-page.md" in warnings and "no-such-heading" in warnings and "stopped" in warnings


def test_no_built_page_loads_anything_from_the_network(site):
    """Fonts, scripts, styles and images all come from the site itself (``theme.font: false``; no social or privacy
    plugin), so the docs open offline from ``file://``. A plain hyperlink (``<a href="https://...">``) is no load."""
    loads = {
        path.relative_to(site).as_posix(): EXTERNAL.findall(path.read_text(errors="replace"))
        for path in site.rglob("*")
        if path.suffix in (".html", ".css", ".js")
    }
    assert not {k: v for k, v in loads.items() if v}
    assert EXTERNAL.search('<link rel="stylesheet" href="https://fonts.googleapis.com/css">')  # the check can fail


def test_the_cli_reference_names_every_flag_of_every_command(site):
    """Every sub-command and every option string of ``batchscope``'s parsers (the tools' entry points included)
    is on the generated page, read from the parsers here, not from the hook."""
    from batchscope.cli.main import _parser

    html = (site / "cli-reference.html").read_text()
    parser = _parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(sub.choices) >= 10
    for name, command in sub.choices.items():
        assert f'id="batchscope-{name}"' in html, name
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help") and action.help != argparse.SUPPRESS:
                    assert f"<code>{flag}</code>" in html, f"batchscope {name} {flag}"


# -- README: every relative link and anchor resolves -------------------------------------------------------------

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: its text (inline code and links reduced to their text),
    lower-cased, without punctuation other than ``-`` and ``_``, each space a ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFC", text.replace("`", "").replace("*", "")).strip().lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, outside code blocks (GitHub numbers a repeated one ``-1``, ...)."""
    seen: dict[str, int] = {}
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.DOTALL | re.MULTILINE)
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE):
        slug = github_anchor(heading)
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown file whose file or anchor does not exist (outside code blocks)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.DOTALL | re.MULTILINE)
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    return broken


def test_every_relative_link_and_anchor_of_the_readme_resolves():
    assert not broken_links(README)
    assert LINK.findall(README.read_text()), "the README links into the docs"


def test_the_link_check_fails_on_a_broken_link_or_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Two commands\n\n## A `code` heading, with punctuation!\n\n[ok](#two-commands) [ok](#a-code-heading-with-"
        "punctuation) [bad](#three-commands) ![img](missing.png) [bad](page.md#nowhere) [ok](https://example.org)\n"
    )
    assert broken_links(page) == [
        "#three-commands: no heading with the anchor #three-commands",
        "missing.png: no file " + str(tmp_path / "missing.png"),
        "page.md#nowhere: no heading with the anchor #nowhere",
    ]


def test_the_readme_fits_a_screen_or_two():
    """Issue 36: a README of at most ~150 lines; the rest lives in the docs site."""
    assert len(README.read_text().splitlines()) <= 160


# -- architecture and test map: nothing missing ------------------------------------------------------------------


def test_the_architecture_lists_every_module_by_concept():
    """``docs/architecture.md``'s "Every module, by concept": one table per package folder, a row per module. A
    module added without its row, or a row whose module is gone, fails here."""
    text = (DOCS / "architecture.md").read_text().split("## Every module, by concept", 1)[1]
    listed = set()
    for folder, table in re.findall(r"^### `([\w/]+)/`[^\n]*\n(.*?)(?=^### |\Z)", text, re.DOTALL | re.MULTILINE):
        listed |= {f"{folder}/{name}" for name in re.findall(r"^\| `([\w.]+\.py)` \|", table, re.MULTILINE)}
    modules = {
        p.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if p.name != "__init__.py"
    }
    missing = sorted(modules - listed)
    assert not missing, f"add a row (module, what it holds) to docs/architecture.md's table of its folder: {missing}"
    assert not listed - modules, f"rows of docs/architecture.md naming no module: {sorted(listed - modules)}"


def test_the_test_map_lists_every_test_folder():
    table = (DOCS / "testing.md").read_text().split("## The test map", 1)[1]
    listed = set(re.findall(r"^\| `tests/(\w+)/` \|", table, re.MULTILINE))
    folders = {p.parent.name for p in (ROOT / "tests").glob("*/test_*.py")}
    assert folders == listed


# -- figures quoted against their files of record ----------------------------------------------------------------


def table_rows(markdown: str) -> list[str]:
    return [line.strip() for line in markdown.splitlines() if line.strip().startswith("|")]


def tables(markdown: str) -> list[list[str]]:
    """The Markdown tables of a text, each as its rows."""
    blocks = re.findall(r"(?:^[ \t]*\|.*\n?)+", markdown, re.MULTILINE)
    return [table_rows(block) for block in blocks]


@pytest.mark.parametrize("asset,quoted_tables", [("bench.md", 2), ("contention.md", 1)])
def test_the_measured_tables_equal_their_files(asset, quoted_tables):
    """Every row of the first tables of the measurement's own report (the benchmark's rows and its decode steps; the
    contention) is on the page, as printed; the benchmark's targets are quoted in prose."""
    report = tables((ROOT / "batchscope" / "assets" / asset).read_text())[:quoted_tables]
    quoted = set(table_rows((DOCS / "measurements" / "engine.md").read_text()))
    assert len(report) == quoted_tables
    assert not [row for table in report for row in table if row not in quoted]


def test_the_sweep_table_equals_sweep_json():
    sweep = json.loads((ROOT / "batchscope" / "assets" / "sweep.json").read_text())
    quoted = set(table_rows((DOCS / "measurements" / "engine.md").read_text()))
    for level in sweep["levels"]:
        static, continuous = level["static"], level["continuous"]
        row = (
            f"| {level['sigma']:g} | {level['spread']['max']} | {level['spread']['cv']:.2f} | "
            f"{static['tok_per_s']:.1f} | {continuous['tok_per_s']:.1f} | {level['ratio_s']:.2f} | "
            f"{static['num_steps']} | {continuous['num_steps']} | {level['ratio_steps']:.2f} |"
        )
        assert row in quoted, row


def test_the_four_engines_table_equals_the_script():
    """``scripts/four_engines.py`` reads the shipped traces with ``batchscope.steplog.metrics``; its table is the
    one the docs print."""
    script = runpy.run_path(str(ROOT / "scripts" / "four_engines.py"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        script["main"]()
    quoted = set(table_rows((DOCS / "engines-compared.md").read_text()))
    printed = table_rows(out.getvalue())
    assert len(printed) == 10 and not [r for r in printed if r not in quoted]


# -- the course site carries the docs ----------------------------------------------------------------------------


def test_every_link_of_the_built_site_opens_from_file(site):
    """``use_directory_urls: false``: every relative ``href``/``src`` of a built page names a file of the site, so it
    opens from ``file://`` (a folder URL such as ``tour/`` would not). ``404.html`` is a web server's page, with
    absolute links by design."""
    missing = []
    for path in set(site.rglob("*.html")) - {site / "404.html"}:
        for target in re.findall(r"""\b(?:href|src)="([^"#?]+)[^"]*\"""", path.read_text()):
            if not re.match(r"^[a-z][a-z0-9+.-]*:|^//", target) and not (path.parent / target).is_file():
                missing.append(f"{path.relative_to(site)} -> {target}")
    assert not missing, missing[:20]


def test_the_course_site_links_the_docs_copied_beside_it(site, tmp_path):
    """``batchscope site --docs build/docs``: the docs land in the site's ``docs/`` and its pages link them; without
    ``--docs`` no page links a docs folder that is not there."""
    from batchscope.tools.static_site import copy_docs, index_page

    copy_docs(site, tmp_path)
    linked = re.findall(r'href="(docs/[^"]+)"', index_page({"seed-abcd": "four requests"}, docs=True))
    assert linked == ["docs/index.html"] and all((tmp_path / target).is_file() for target in linked)
    assert "docs/" not in index_page({"seed-abcd": "four requests"})
