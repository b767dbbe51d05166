"""The figures drawn once with remembered margins (batchscope/player/web/margins.js) are the figures plotly.js draws
alone with its automargin, in Debian's Chromium from file://: the player's step views and request timelines, and the
Metrics page's charts.

Reference: the same page with ``BS.plot`` replaced by a plain ``Plotly.react``, so that every figure's margins are
the ones plotly.js's automargin settles on. A later visit (same browser, so the margins are remembered) must draw
every figure once, without automargin, and land on exactly those margins: in the normal and presenter modes, the
dark page, two window sizes, and a late step whose slot-grid labels have four digits; and the Metrics charts,
whose labels come from their data. No sleeps: each wait is a condition polled by the browser.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import recorded_pair

from batchscope.compare.lockstep import lockstep_counters
from batchscope.figures.figure_frame import figures_html
from batchscope.figures.metrics import kv_utilisation, latency_cdf, request_latency
from batchscope.player.export import WEB, player_html

pytestmark = pytest.mark.app

READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"
PLOTLY_ALONE = "BS.plot = (key, gd, data, layout) => Plotly.react(gd, data, layout, PLOT_CONFIG);"
FIGURES = """() => [...document.querySelectorAll('.bs-slots, .bs-budget, .bs-blocks, .bs-timeline')].map((gd) => {
  const s = gd._fullLayout._size;
  const automargin = gd.layout.margin.autoexpand !== false;
  return {kind: gd.className.split(' ')[1], size: [s.l, s.r, s.t, s.b], automargin};
})"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The sixteen pair's player, and the same page drawing every figure with plotly.js alone."""
    folder = tmp_path_factory.mktemp("margins")
    views = recorded_pair("sixteen")
    html = player_html(views, "sixteen", window=8, counters=lockstep_counters(*views))
    own = (WEB / "margins.js").read_text(encoding="utf-8")
    assert own in html
    out = {"remembered": folder / "remembered.html", "alone": folder / "alone.html"}
    out["remembered"].write_text(html, encoding="utf-8")
    out["alone"].write_text(html.replace(own, own + "\n" + PLOTLY_ALONE), encoding="utf-8")
    return out


def figures(context, path: Path, query: str) -> list[dict]:
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(path.as_uri() + query)
    page.wait_for_function(READY)
    out = page.evaluate(FIGURES)
    page.close()
    return out


@pytest.mark.parametrize(
    ("query", "width", "height"),
    [("", 1280, 720), ("?present=1&step=1000", 1280, 720), ("?theme=dark&step=300", 960, 540)],
)
def test_remembered_margins_are_plotly_own_and_spare_the_second_draw(browser, pages, query, width, height):
    size = {"viewport": {"width": width, "height": height}}
    alone = figures(browser.new_context(**size), pages["alone"], query)
    assert len(alone) == 8 and all(f["automargin"] for f in alone)  # 3 step views and the timeline, per side
    student = browser.new_context(**size)  # one browser: what the first visit learns, the second one uses
    first = figures(student, pages["remembered"], query)
    later = figures(student, pages["remembered"], query)
    student.close()
    assert first[0]["automargin"], "the first figure of a first visit is measured by plotly.js's automargin"
    steps = [f for f in later if f["kind"] != "bs-timeline"]  # a timeline's legend leaves fractional margins
    assert len(steps) == 6 and not any(f["automargin"] for f in steps), "a later visit draws each view once"
    for got in (first, later):
        assert [(f["kind"], f["size"]) for f in got] == [(f["kind"], f["size"]) for f in alone]


CHARTS = """() => [...document.querySelectorAll('.bs-chart')].map((gd) => {
  const s = gd._fullLayout._size;
  const m = gd.layout.margin;
  return {size: [s.l, s.r, s.t, s.b], automargin: m === undefined || m.autoexpand !== false};
})"""


def charts(context, path: Path) -> list[dict]:
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.bsDrawn === '3'")
    out = page.evaluate(CHARTS)
    page.close()
    return out


def test_metrics_charts_with_remembered_margins_are_plotly_own(browser, tmp_path):
    runs = {p: v.records for p, v in zip(("static", "continuous"), recorded_pair("sixteen"))}
    rows = [[request_latency(runs, "ttft_s"), latency_cdf(runs, "e2e_steps")], [kv_utilisation(runs)]]
    html = figures_html(rows, "Per-request latency and KV-cache use")
    own = (WEB / "margins.js").read_text(encoding="utf-8")
    assert own in html
    remembered, alone = tmp_path / "remembered.html", tmp_path / "alone.html"
    remembered.write_text(html, encoding="utf-8")
    plain = "BS.plot = (key, gd, data, layout, config) => Plotly.react(gd, data, layout, config);"
    alone.write_text(html.replace(own, own + "\n" + plain), encoding="utf-8")
    size = {"viewport": {"width": 1280, "height": 720}}
    reference = charts(browser.new_context(**size), alone)
    student = browser.new_context(**size)
    first, later = charts(student, remembered), charts(student, remembered)
    student.close()
    assert all(f["automargin"] for f in reference + first)
    assert not any(f["automargin"] for f in later), "a later visit draws each chart once, with margins it knows"
    assert [f["size"] for f in first] == [f["size"] for f in later] == [f["size"] for f in reference]
