"""The Trace page's steps table inside the player, in a real browser: its marked row is the player's step as the
clock moves (keys, play), a click on a row moves the player there, the row's cells are that step's record (read
here from the trace file itself), and the marked row stays inside the table's own scroll box. No sleeps: every
wait is a condition polled by the browser."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_browser_player import open_file

from batchscope.app.common import TRACE_DIR
from batchscope.player.export import player_html
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

CURRENT = """() => {
  const tr = document.querySelector('#bs-table tr.bs-current'), box = document.querySelector('.bs-table-scroll');
  if (!tr) return null;
  const r = tr.getBoundingClientRect(), b = box.getBoundingClientRect();
  return {row: +tr.dataset.bsStep, clock: +document.getElementById('bs-step').dataset.bsStep,
          cells: [...tr.cells].map((c) => c.textContent), inside: r.top >= b.top - 1 && r.bottom <= b.bottom + 1,
          marked: document.querySelectorAll('#bs-table tr.bs-current').length,
          columns: [...document.querySelectorAll('#bs-table th')].map((th) => th.textContent)};
}"""


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return trace.read(TRACE_DIR / "preemption-continuous.jsonl")


@pytest.fixture(scope="module")
def table_file(tmp_path_factory, records) -> Path:
    path = tmp_path_factory.mktemp("table") / "preemption.html"
    path.write_text(player_html([TraceView(records)], "preemption", window=20, table=True), encoding="utf-8")
    return path


def at_step(page, k: int) -> dict:
    page.wait_for_function(f"+document.querySelector('#bs-table tr.bs-current')?.dataset.bsStep === {k}")
    return page.evaluate(CURRENT)


def test_the_marked_row_follows_the_player_and_a_click_moves_the_player(browser, table_file, records):
    steps = records[1:-1]
    page = open_file(browser, table_file, "?step=38", width=1280, height=720)
    now = at_step(page, 38)
    assert now["clock"] == 38 and now["marked"] == 1 and now["inside"], now
    assert now["columns"][:3] == ["step", "t_end (s)", "batched tokens"]
    for _ in range(2):
        page.keyboard.press("ArrowRight")
    now = at_step(page, 40)
    s = steps[40]  # the step that admits C: its record, not the table's own code
    assert now["clock"] == 40 and now["inside"], now
    assert now["cells"][0] == "40" and now["cells"][2] == str(s["num_batched_tokens"])
    assert now["cells"][-1] == str(s["kv"]["num_used_blocks"]) and now["cells"][7] == str(len(s["waiting"]))
    assert [x["num_tokens"] for x in s["scheduled"]] == [int(c.split(":")[1][1:]) for c in now["cells"][3].split(", ")]
    page.locator("#bs-table tr[data-bs-step='12']").click()
    now = at_step(page, 12)
    assert now["clock"] == 12 and now["inside"], now
    page.keyboard.press("End")
    now = at_step(page, len(steps) - 1)
    assert now["inside"] and now["marked"] == 1, now
    page.close()


def test_a_player_without_the_table_draws_none_and_presenter_mode_hides_it(browser, table_file, records, tmp_path):
    plain = tmp_path / "plain.html"
    plain.write_text(player_html([TraceView(records)], "preemption", window=20), encoding="utf-8")
    page = open_file(browser, plain, "", width=1280, height=720)
    assert page.evaluate("document.getElementById('bs-table').hidden && !document.querySelector('#bs-table tr')")
    page.close()
    page = open_file(browser, table_file, "?present=1", width=1280, height=720)
    assert page.evaluate("getComputedStyle(document.getElementById('bs-table')).display") == "none"
    page.close()


FITS = """() => { const box = document.querySelector('.bs-table-scroll');
  const cells = [...box.querySelectorAll('th, td')].filter((c) => c.scrollWidth > c.clientWidth + 1);
  const lines = (c) => { const r = document.createRange(); r.selectNodeContents(c);
    return new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size; };
  const broken = [...box.querySelectorAll('td:not(.bs-words)')].filter((c) => lines(c) > 1);
  return {box: box.scrollWidth <= box.clientWidth + 1, cells: cells.map((c) => c.textContent),
          broken: broken.slice(0, 5).map((c) => c.textContent)}; }"""


@pytest.mark.parametrize(("scenario", "policy", "step"), [("preemption", "continuous", 40), ("sixteen", "static", 105)])
def test_the_table_fits_its_frame_and_numbers_stay_on_one_line(browser, tmp_path, scenario, policy, step):
    """No column is cut off (no horizontal scrolling, no cell's text overflows) and no number breaks over two lines
    (the end times of a long run: 10.2042 s), in the app's frame beside its sidebar at 1280x720."""
    path = tmp_path / "t.html"
    view = TraceView(trace.read(TRACE_DIR / f"{scenario}-{policy}.jsonl"))
    path.write_text(player_html([view], scenario, window=20, table=True), encoding="utf-8")
    page = open_file(browser, path, f"?step={step}", width=820, height=720)
    at_step(page, step)
    assert page.evaluate(FITS) == {"box": True, "cells": [], "broken": []}
    page.close()
