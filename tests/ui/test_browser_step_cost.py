"""The step-cost chart in the Walkthrough's player, in a real browser: the ring stands on the plotted point of the
current step and moves with the clock, and the line under the chart gives that step's tokens and milliseconds as
the trace records them (num_batched_tokens, t_end - t_start). No sleeps: every wait is a condition polled by the
browser."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_browser_player import open_file

from batchscope.app.common import TRACE_DIR
from batchscope.player.export import player_html
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

# the ring's centre, and the centre of the n-th point of the chart's first trace (decode-only steps), in page pixels
WHERE = """(n) => {
  const ring = document.querySelector('.bs-cost-ring'), r = ring.getBoundingClientRect();
  const pts = document.querySelectorAll('.bs-cost .scatterlayer .trace:first-child .point');
  const p = pts[n].getBoundingClientRect();
  return {step: +ring.dataset.bsStep, ring: [r.left + r.width / 2, r.top + r.height / 2],
          point: [p.left + p.width / 2, p.top + p.height / 2], hidden: ring.hidden,
          line: document.querySelector('.bs-cost-now').textContent};
}"""


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return trace.read(TRACE_DIR / "sixteen-continuous.jsonl")


@pytest.fixture(scope="module")
def cost_file(tmp_path_factory, records) -> Path:
    path = tmp_path_factory.mktemp("cost") / "sixteen.html"
    path.write_text(player_html([TraceView(records)], "sixteen", cost=True), encoding="utf-8")
    return path


def test_the_ring_stands_on_the_current_steps_point_and_moves_with_it(browser, cost_file, records):
    steps = records[1:-1]
    decode_only = [
        k for k, s in enumerate(steps) if s["scheduled"] and all(x["kind"] == "decode" for x in s["scheduled"])
    ]
    page = open_file(browser, cost_file, "?step=100", width=1280, height=720)
    for k in (100, 101):
        page.wait_for_function(f"document.querySelector('.bs-cost-ring').dataset.bsStep === '{k}'")
        got = page.evaluate(WHERE, decode_only.index(k))
        s = steps[k]
        ms = (s["t_end"] - s["t_start"]) * 1e3
        assert got["line"] == f"step {k}: {s['num_batched_tokens']} tokens computed in {ms:.1f} ms", got
        assert not got["hidden"] and all(abs(a - b) < 1.5 for a, b in zip(got["ring"], got["point"])), got
        page.keyboard.press("ArrowRight")
    page.close()


def test_the_chart_is_only_where_asked_for_and_presenter_mode_hides_it(browser, cost_file, records, tmp_path):
    plain = tmp_path / "plain.html"
    plain.write_text(player_html([TraceView(records)], "sixteen"), encoding="utf-8")
    page = open_file(browser, plain, "", width=1280, height=720)
    assert page.evaluate("document.querySelector('.bs-fig-cost') === null")
    page.close()
    page = open_file(browser, cost_file, "?present=1", width=1280, height=720)
    assert page.evaluate("getComputedStyle(document.querySelector('.bs-fig-cost')).display") == "none"
    page.close()
