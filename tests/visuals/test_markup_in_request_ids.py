"""Markup in identifiers never becomes markup: a trace whose request ids are HTML or Markdown validates (they are
printable) and every figure, chip and caption shows them as text."""

from __future__ import annotations

import json

import pytest
from conftest import RECORDED
from streamlit.testing.v1 import AppTest

from batchscope.app.common import chips, md
from batchscope.figures.budget import budget_bar
from batchscope.figures.kv import block_map, kv_usage
from batchscope.figures.slots import slot_grid, slot_occupancy
from batchscope.figures.timeline import timeline
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

SEED = RECORDED / "seed-abcd-continuous.jsonl"
EVIL = {
    "A": '<img src="https://example.com/x.png">',
    "B": "[x](https://example.com/)",
    "C": "![i](https://example.com/i.png)",
    "D": '<a href="https://e.com">%{x}</a>',
}


def renamed(text: str) -> str:
    """The seed-abcd trace with every request id replaced by markup (consistently, in every record)."""
    records = [json.loads(line) for line in text.splitlines()]

    def walk(v):
        if isinstance(v, dict):
            return {EVIL.get(k, k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return EVIL.get(v, v) if isinstance(v, str) else v

    out = []
    for r in records:
        r = walk(r)
        if r["type"] == "header":
            for req in r["requests"]:
                req["prompt"] = "A"  # prompts mention no ids; keep them plain
        out.append(r)
    return "".join(json.dumps(r) + "\n" for r in out)


@pytest.fixture(scope="module")
def evil():
    return trace.loads(renamed(SEED.read_text()))


def test_markup_ids_validate_and_every_figure_shows_them_as_text(evil):
    view = TraceView(evil)
    for step in range(view.num_steps):
        for fig in (slot_grid(view, step), block_map(view, step), budget_bar(view, step)):
            text = fig.to_json()
            assert "<img" not in text and "<a href" not in text and "%{x}" not in text.replace("%{x}<", "")
    for fig in (timeline(view), slot_occupancy(view), kv_usage(view)):
        text = fig.to_json()
        assert "<img" not in text and "<a href" not in text
        assert "&lt;img src" in text  # the label of the id "<img src=...>", as text


def test_chips_and_markdown_escape_markup(evil):
    view = TraceView(evil)
    html = chips(view, view.request_ids)
    assert "<img" not in html and "&#60;img src=&#61;" not in html and "&#60;img src=" in html
    assert "[x](" not in html and "&#91;x&#93;&#40;https&#58;//example.com/&#41;" in html
    assert md("![i](https://example.com/i.png)") == "!\\[i\\](https://example.com/i.png)"
    assert md("<b>") == "\\<b\\>" and md("plain max_tokens (a): 1.") == "plain max_tokens (a): 1."


def test_the_trace_page_shows_markup_ids_as_text(evil):
    at = AppTest.from_string("from batchscope.app import page_trace\npage_trace.page()", default_timeout=120)
    at.session_state["playground:live-runs"] = {"continuous": evil}
    at.run()
    at.selectbox(key="trace:choice").set_value("live run: continuous").run()
    assert not at.exception, at.exception
    shown = " ".join(m.value for m in at.markdown)
    assert "<img" not in shown.replace("\\<img", "")  # chips: entities; narration: backslash escapes
    assert "](https://example.com/)" not in shown.replace("\\](https://example.com/)", "")
