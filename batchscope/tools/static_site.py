"""``python -m batchscope site --out DIR``: a static site for a course page, with no server and no network request.

``index.html`` lists the shipped scenarios; ``SCENARIO.html`` is each one's recorded runs on one step clock (static and
continuous; vLLM's scheduler and SGLang's for ``vllm-vs-sglang``: ``batchscope.explain.stories.default_pair``), the
self-contained player of ``html`` (plotly.js and the data inlined, the scenario's tour of key moments, presenter
mode with ``?present=1``); ``glossary.html`` is the app's glossary, each term with its "see it" link to the step of
a player where it happens (``batchscope.glossary.entries``). With ``--all-runs``, ``SCENARIO-all.html`` plays every
run recorded for a scenario that has 3 or 4 (static, continuous, sglang, ...: sides A, B, C, D) on one step clock,
linked from its card. With ``--docs DIR`` (a docs site ``make docs`` built, ``build/docs``), the docs are copied into
``docs/`` beside the players and every page's top bar links them, so the course site and its explanations travel
together (the docs are built with ``use_directory_urls: false``, so they too open from ``file://``). Every page
opens from ``file://`` or any static web space; links are relative.
"""

from __future__ import annotations

import shutil
import sys
from html import escape
from pathlib import Path

TRACES = (
    Path(__file__).resolve().parents[1] / "assets" / "traces"
)  # the shipped traces, recorded on SmolLM2 (scripts/record-traces.sh)

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>
body {{ font: 17px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2430; margin: 0 auto;
  max-width: 60rem; padding: 1rem 1.5rem 3rem; }} h1 {{ font-size: 1.7rem; margin: 0.5rem 0; }} a {{ color: #0b5cad; }}
nav {{ margin: 0.5rem 0 1rem; }} .card {{ border: 1px solid #d9dce3; border-radius: 8px; padding: 0.6rem 1rem; margin:
0.7rem 0; }} .card h2 {{ font-size: 1.2rem; margin: 0 0 0.3rem; }} .muted {{ color: #5b6170; }} pre {{ background:
#f6f7f9; padding: 0.4rem 0.7rem; border-radius: 6px; white-space: pre-wrap; }}
</style></head><body>
<nav><a href="index.html">Scenarios</a> · <a href="glossary.html">Glossary</a>{docs_link}</nav>
<h1>{title}</h1>
{body}
</body></html>
"""

INTRO = (
    "Each page replays a real run of a small LLM serving engine (SmolLM2-135M-Instruct on a CPU), step by step: "
    "who runs in each batch row, the token budget of the step, the KV-cache blocks, the queues, and a sentence on "
    "what the scheduler did and why. Static batching (left) keeps a batch until its slowest member ends; continuous "
    "batching (right) admits a waiting request the step after another one finishes. Keys: space plays, ← → step, "
    "PageDown / PageUp jump between the key moments of the tour, Home / End. Add ?present=1 to a page's address "
    "for presenter mode (large type for a hall)."
)


def add_site(sub) -> None:
    """Entry point: the ``site`` command."""
    s = sub.add_parser(
        "site",
        help="write a static site (index, one player per scenario, the glossary) for a course page",
        epilog="example:\n  python -m batchscope site --out course-site",
    )
    s.add_argument("--out", required=True, help="the folder to write (refused if it holds files, unless --force)")
    s.add_argument("--force", action="store_true", help="overwrite the site's files in an existing --out folder")
    s.add_argument(
        "--all-runs",
        action="store_true",
        help="also SCENARIO-all.html: every run recorded for a scenario with 3 or 4 of them, on one step clock",
    )
    s.add_argument(
        "--docs",
        metavar="DIR",
        help="a built docs site (make docs: build/docs) to copy into the site's docs/ and link from every page",
    )
    s.set_defaults(handler=_site)


def _site(args) -> int:
    from batchscope.inputs.workload import list_scenarios

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise ValueError(f"--out {out}: the folder is not empty; add --force to overwrite the site's files")
    if args.docs and not (Path(args.docs) / "index.html").is_file():
        raise ValueError(f"--docs {args.docs}: no index.html there; build the docs first (make docs: build/docs)")
    from batchscope.explain.stories import default_pair

    listed = list_scenarios().items()
    scenarios = {sc: text for sc, text in listed if all(_trace(sc, p).exists() for p in default_pair(sc))}
    every = {sc: runs for sc in scenarios if len(runs := recorded_runs(sc)) > 2} if args.all_runs else {}
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for sc in scenarios:
        total += _write(out / f"{sc}.html", _player(sc))
    for sc, runs in every.items():
        total += _write(out / f"{sc}-all.html", _player(sc, runs))
    docs = bool(args.docs)
    if docs:
        copy_docs(Path(args.docs), out)
    total += _write(out / "glossary.html", glossary_page(list(scenarios), docs=docs))
    total += _write(out / "index.html", index_page(scenarios, list(every), docs=docs))
    pages = len(scenarios) + len(every) + 2
    print(f"wrote {pages} pages to {out} ({total / 1e6:.1f} MB); open {out / 'index.html'}", file=sys.stderr)
    return 0


def copy_docs(built: Path, out: Path) -> None:
    """The built docs site ``built`` copied into ``out/docs/`` (what was there before is replaced)."""
    if (out / "docs").exists():
        shutil.rmtree(out / "docs")
    shutil.copytree(built, out / "docs")


def page(title: str, body: str, docs: bool = False) -> str:
    """A page of the site: ``body`` under the top bar (scenarios, glossary, and the docs where ``docs``)."""
    link = ' · <a href="docs/index.html">Documentation</a>' if docs else ""
    return PAGE.format(title=title, body=body, docs_link=link)


def recorded_runs(scenario: str) -> tuple[str, ...]:
    """The runs of ``scenario`` its all-runs page plays (sides A to D): every run recorded for it, at most 4, in the
    order the app's Compare page starts from (``batchscope.explain.stories.default_runs``: for four-engines vLLM,
    SGLang, TGI and TensorRT-LLM)."""
    from batchscope.explain.stories import default_pair, default_runs

    named = (path.name.removeprefix(f"{scenario}-").removesuffix(".jsonl") for path in TRACES.glob(f"{scenario}-*"))
    recorded = tuple(sorted(p for p in named if "-" not in p))  # another scenario's name may start with this one's
    return tuple(default_runs(default_pair(scenario), recorded, min(4, len(recorded))))


def _trace(scenario: str, policy: str) -> Path:
    return TRACES / f"{scenario}-{policy}.jsonl"


def _write(path: Path, text: str) -> int:
    from batchscope.steplog import trace

    trace.write_text_atomic(text, path)
    return len(text.encode())


def _player(scenario: str, policies: tuple[str, ...] | None = None) -> str:
    """The player page of ``scenario``'s runs under ``policies`` (default: its pair, ``default_pair``)."""
    from batchscope.explain.stories import default_pair
    from batchscope.tools.html_export import player_page

    html, _, _ = player_page([str(_trace(scenario, p)) for p in policies or default_pair(scenario)])
    return html


def index_page(scenarios: dict[str, str], every: list[str] | None = None, docs: bool = False) -> str:
    """The site's front page: what it shows, and a card per scenario linking to its player (and presenter mode), and
    to its page of every recorded run where ``every`` names it (``--all-runs``); the docs in the top bar where
    ``docs`` (copied beside it by ``--docs``)."""

    def all_runs(sc: str) -> str:
        if sc not in (every or []):
            return ""
        return f' · <a href="{escape(sc)}-all.html">all {len(recorded_runs(sc))} runs on one clock</a>'

    cards = "".join(
        f'<div class="card"><h2><a href="{escape(sc)}.html">{escape(sc)}</a></h2><div>{escape(text)}</div>'
        f'<div class="muted"><a href="{escape(sc)}.html?present=1">presenter mode</a>{all_runs(sc)}</div></div>'
        for sc, text in scenarios.items()
    )
    return page("Batchscope: how an LLM server schedules requests", f"<p>{escape(INTRO)}</p>{cards}", docs)


def glossary_page(scenarios: list[str], docs: bool = False) -> str:
    """The glossary (``batchscope.glossary.entries.entries`` over the shipped traces): each term, its formula, and a
    link to the step of the scenario's player where it happens."""
    from batchscope.explain.stories import default_pair
    from batchscope.glossary.entries import entries
    from batchscope.steplog import trace
    from batchscope.steplog.view import TraceView

    # the traces each scenario's page plays, so that every "see it" opens a player that shows it
    views = {(sc, p): TraceView(trace.read(_trace(sc, p))) for sc in scenarios for p in default_pair(sc)}
    parts = []
    for term, where in entries(views):
        formula = f"<pre>{escape(term.formula)}</pre>" if term.formula else ""
        if where is None:
            see = '<div class="muted">No shipped trace shows this yet.</div>'
        else:
            href = f"{escape(where.scenario)}.html?step={where.step}"
            see = (
                f'<div><a class="see-it" href="{href}">See it: {escape(where.scenario)} ({escape(where.policy)}), '
                f"step {where.step}</a>: {escape(where.what)}</div>"
            )
        parts.append(
            f'<div class="card" id="{escape(term.key)}"><h2>{escape(term.name)}</h2><div>'
            f"{escape(term.text)}</div>{formula}{see}</div>"
        )
    return page("Glossary of LLM serving", "".join(parts), docs)
