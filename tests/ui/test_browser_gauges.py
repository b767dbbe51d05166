"""vLLM's metrics in the player (the Trace page's gauges), in a real browser: the cursor stands on the current
step's bar of ``vllm:iteration_tokens_total`` and moves with the step; labels are legible at 1280x720 and presenter
mode hides the figure. No sleeps: every wait is a condition polled by the browser."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_browser_player import open_file

from batchscope.app.common import TRACE_DIR
from batchscope.player.export import player_html
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

# the cursor's centre and the centre of the tokens bar of the shown step, in page pixels
WHERE = """() => {
  const box = document.querySelector('.bs-gauges'), line = box.querySelector('.bs-cursor');
  const r = line.getBoundingClientRect(), k = +document.getElementById('bs-step').dataset.bsStep;
  const bars = box.querySelectorAll('.barlayer .trace .point');
  const b = bars[k].getBoundingClientRect();
  return {k, cursor: r.left + r.width / 2, bar: b.left + b.width / 2, n: bars.length};
}"""


@pytest.fixture(scope="module")
def gauges_file(tmp_path_factory) -> Path:
    view = TraceView(trace.read(TRACE_DIR / "preemption-continuous.jsonl"))
    path = tmp_path_factory.mktemp("gauges") / "preemption.html"
    path.write_text(player_html([view], "preemption", window=20, gauges=True), encoding="utf-8")
    return path


def test_the_gauges_cursor_moves_with_the_step(browser, gauges_file):
    page = open_file(browser, gauges_file, "?step=10", width=1280, height=720)
    page.wait_for_function("document.querySelector('.bs-gauges .bs-cursor').style.left !== ''")
    first = page.evaluate(WHERE)
    assert first["k"] == 10 and first["n"] == 81
    assert abs(first["cursor"] - first["bar"]) < 1.5, first
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    page.wait_for_function("+document.getElementById('bs-step').dataset.bsStep === 15")
    after = page.evaluate(WHERE)
    assert abs(after["cursor"] - after["bar"]) < 1.5 and after["cursor"] > first["cursor"] + 10, (first, after)
    sizes = page.evaluate(
        "() => [...document.querySelectorAll('.bs-gauges .xtick text, .bs-gauges .ytick text, .bs-gauges .legendtext')]"
        ".map((t) => parseFloat(getComputedStyle(t).fontSize))"
    )
    assert sizes and min(sizes) >= 12
    width = page.evaluate("document.querySelector('.bs-gauges .main-svg').getBoundingClientRect().right")
    assert width <= 1280
    page.close()


def test_presenter_mode_hides_the_gauges(browser, gauges_file):
    page = open_file(browser, gauges_file, "?present=1", width=1280, height=720)
    assert page.evaluate("getComputedStyle(document.querySelector('.bs-gauges')).display") == "none"
    page.close()
