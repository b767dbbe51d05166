"""A frame of plotly figures (``batchscope.figures.figure_frame``, the Metrics page's charts): it carries each figure's
data as plotly itself serialises it, lays rows out side by side, refuses an empty row, and in a real browser draws every
figure from file:// with no outside request, at the height its layout asks for."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from batchscope.figures.figure_frame import figures_html, read_figures


def _figures() -> list[go.Figure]:
    a = go.Figure(go.Bar(x=["A", "B", "C"], y=[3, 1, 2], name="static"))
    b = go.Figure(go.Scatter(x=[0, 1, 2], y=[0.0, 0.5, 1.0], name="cdf"))
    c = go.Figure(go.Scatter(x=[0, 1], y=[0.25, 0.75], name="kv"), layout=dict(height=300))
    return [a, b, c]


def test_the_frame_carries_each_figure_as_plotly_serialises_it():
    a, b, c = _figures()
    got = read_figures(figures_html([[a, b], [c]], "charts", plotly_src="static/plotly.min.js"))
    assert len(got) == 3
    for fig, sent in zip((a, b, c), got):
        want = json.loads(fig.to_json())  # plotly's own serialisation is the reference
        assert sent["data"] == want["data"]
        assert "template" not in sent["layout"]  # the theme goes once per frame, not per figure
        assert {k: v for k, v in want["layout"].items() if k != "template"} == sent["layout"]


def test_an_empty_row_or_no_row_is_refused():
    a, _, _ = _figures()
    for rows in ([], [[a], []]):
        with pytest.raises(ValueError, match="rows: at least one row"):
            figures_html(rows, "charts")


def test_a_title_and_an_address_are_escaped():
    a, _, _ = _figures()
    page = figures_html([[a]], 'A <b>"x"</b>', plotly_src='p.js?a=1&b="2"')
    assert "<b>" not in page and "&lt;b&gt;" in page
    assert 'src="p.js?a=1&amp;b=&quot;2&quot;"' in page


@pytest.mark.app
def test_the_frame_draws_every_figure_offline_in_rows(browser, tmp_path):
    a, b, c = _figures()
    path = tmp_path / "charts.html"
    path.write_text(figures_html([[a, b], [c]], "charts"), encoding="utf-8")  # plotly.js inlined
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    outside: list[str] = []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.bsDrawn === '3'")
    boxes = page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot')].map(d => { const r = d.getBoundingClientRect();"
        " return [r.x, r.y, r.width, r.height]; })"
    )
    assert len(boxes) == 3
    (ax, ay, aw, ah), (bx, by, bw, _), (cx, cy, cw, chh) = boxes
    assert ay == by and bx > ax + aw - 1 and abs(aw - bw) <= 1  # the first row: side by side, equal widths
    assert cy >= ay + ah and cx == ax and cw > aw + bw  # the second row: below, the whole width
    assert (ah, chh) == (450, 300)  # plotly's default height, and the height the layout asks for
    bars = page.evaluate("document.querySelectorAll('.js-plotly-plot')[0].querySelectorAll('.point').length")
    assert bars == 3
    assert page.evaluate("performance.getEntriesByName('bs-first-frame').length") == 1
    assert outside == []
    page.close()
