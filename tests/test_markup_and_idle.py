"""Markup in identifiers never becomes markup: a trace whose request ids are HTML or Markdown validates (they are
printable) and every figure, chip and caption shows them as text. And idle time costs nothing: an arrival at step
10**9 is reached by one jump, recorded once, and the trace still measures and draws."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fakes import EOS, FakeRunner, make_request
from streamlit.testing.v1 import AppTest

from engine.config import EngineConfig
from engine.engine import LLMEngine
from steplog import trace
from steplog.metrics import summarize
from steplog.view import TraceView
from ui.common import chips, md
from visuals.budget import budget_bar
from visuals.kv import block_map, kv_usage
from visuals.narration import narrate
from visuals.slots import slot_grid, slot_occupancy
from visuals.timeline import timeline

SEED = Path(__file__).resolve().parents[1] / "assets" / "traces" / "seed-abcd-continuous.jsonl"
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
        assert "&lt;img src=" in text


def test_chips_and_markdown_escape_markup(evil):
    view = TraceView(evil)
    html = chips(view, view.request_ids)
    assert "<img" not in html and "&#60;img src=&#61;" not in html and "&#60;img src=" in html
    assert "[x](" not in html and "&#91;x&#93;&#40;https&#58;//example.com/&#41;" in html
    assert md("![i](https://example.com/i.png)") == "!\\[i\\](https://example.com/i.png)"
    assert md("<b>") == "\\<b\\>" and md("plain max_tokens (a): 1.") == "plain max_tokens (a): 1."


def test_the_trace_page_shows_markup_ids_as_text(evil):
    at = AppTest.from_string("from ui import page_trace\npage_trace.page()", default_timeout=120)
    at.session_state["playground:live-runs"] = {"continuous": evil}
    at.run()
    at.selectbox(key="trace:choice").set_value("live run: continuous").run()
    assert not at.exception, at.exception
    shown = " ".join(m.value for m in at.markdown)
    assert "<img" not in shown.replace("\\<img", "")  # chips: entities; narration: backslash escapes
    assert "](https://example.com/)" not in shown.replace("\\](https://example.com/)", "")


def test_an_arrival_at_step_a_billion_costs_nothing_and_draws():
    reqs = [make_request("A", 3, 2, arrival_step=0), make_request("B", 3, 2, arrival_step=10**9)]
    t = time.monotonic()
    records = LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8), eos_token_ids={EOS}).run(reqs)
    assert time.monotonic() - t < 2
    trace.validate_records(records)
    steps = records[1:-1]
    assert [st["step"] for st in steps] == [0, 1, 10**9, 10**9 + 1]
    assert steps[2]["idle_steps_before"] == 10**9 - 2
    s = summarize(records)
    assert s["num_steps"] == 10**9 + 2 and s["output_throughput_tok_step"] == pytest.approx(4 / (10**9 + 2))
    view = TraceView(records)
    assert "Steps 2–999999999 were idle" in narrate(view, 2)
    for i in range(view.num_steps):
        slot_grid(view, i, window=8)
        block_map(view, i)
        budget_bar(view, i)
    fig = timeline(view)
    assert list(fig.layout.xaxis.ticktext)[-1] == str(10**9 + 1)


def test_idle_on_the_step_clock_is_skipped_not_slept_even_with_a_wall_clock_request_later():
    a = make_request("A", 3, 2, arrival_step=None)
    a.arrival_time = 0.3
    b = make_request("B", 3, 2, arrival_step=50)
    records = LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8), eos_token_ids={EOS}).run([a, b])
    trace.validate_records(records)
    assert [st["step"] for st in records[1:-1]][:2] == [50, 51]  # B first: idle steps cost no time


def test_the_browser_player_grows_text_by_the_recorded_deltas_and_skips_idle_steps():
    """The player's text table (its payload) equals ``text_so_far`` at every step: multi-byte characters appear
    whole (``text_delta``), and a trace with skipped idle steps is indexed by position."""
    from test_playback import decode_text

    from visuals.playback import player_payload
    from visuals.stepinfo import text_so_far

    records = json.loads(json.dumps(trace.read(SEED)))
    for st in records[1:-1]:  # every token is one byte of an emoji: three make a character
        for s in st["sampled"]:
            s["text"], s["partial"] = "\ufffd", True
    for r in records[-1]["requests"]:
        n = len(r["output_token_ids"])
        r["output_text"] = "🌱" * (n // 3) + "\ufffd" * (n % 3)
        deltas = [("🌱" if k % 3 == 2 else "") for k in range(n)]
        if n % 3:
            deltas[-1] = "\ufffd" * (n % 3)  # the flush at the end: an unfinished character
        it = iter(deltas)
        for st in records[1:-1]:
            for s in st["sampled"]:
                if s["request_id"] == r["request_id"]:
                    s["text_delta"] = next(it)
    view = TraceView(trace.loads("".join(json.dumps(r) + "\n" for r in records)))
    v = player_payload([view], "deltas")["views"][0]
    for k in range(view.num_steps):
        assert [decode_text(v, i, k) for i in range(len(view.request_ids))] == list(text_so_far(view, k).values())
    gap = [make_request("A", 3, 2, arrival_step=0), make_request("B", 3, 2, arrival_step=40)]
    idle = TraceView(LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8), eos_token_ids={EOS}).run(gap))
    v = player_payload([idle], "idle")["views"][0]
    for k in range(idle.num_steps):
        assert [decode_text(v, i, k) for i in range(2)] == list(text_so_far(idle, k).values())
