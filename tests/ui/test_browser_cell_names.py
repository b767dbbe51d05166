"""The slot grid's cell names and the token budget's segment labels are drawn where plotly.js draws them legibly,
and only there (batchscope/player/web/views.js ``BS.legibleNames``), in Debian's Chromium from file://.

plotly.js shrinks a bar's inside label to fit its bar: on the Trace page's 41-step window the cells are about 9 px
wide at 1280x720 and every name came out 2-3 px tall, marks nobody could read; a 1-token budget segment's name
came out under 3 px. Reference: the same page with ``BS.legibleNames`` replaced by the identity, so that plotly.js
alone draws every label at the size it fits. The player must draw only plotly.js's own labels, at their place and
size, none under 7 px, and every one plotly.js draws at 7 px or more (within half a pixel of that line the player's
estimate may go either way): on the long window at four screen sizes (none of its cells' names legible at the two
smaller ones, all at the two larger ones) and on the Compare page's short window (all kept). No sleeps: each wait
is a condition polled by the browser.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import recorded_pair

from batchscope.figures.slots import grid_cells, grid_range
from batchscope.player.export import WEB, player_html

pytestmark = pytest.mark.app

READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"
NAMES_ALONE = "BS.legibleNames = (data) => data;"
LEAST_PX = 7  # views.js CELL_NAME_MIN
# the player estimates a name's width on a canvas and its cell's before plotly.js draws (on a first visit, without
# the margins it will find): a name plotly.js draws within this band around LEAST_PX may go either way
BAND = 0.5
# every name drawn in a slot grid: its text, where it is (px, rounded) and the size it is drawn at (its font size
# times the scale plotly.js gave it to fit its cell)
NAMES = """() => [...document.querySelectorAll('.bs-slots text.bartext, .bs-budget text.bartext')]
  .filter((t) => t.textContent.trim()).map((t) => { const r = t.getBoundingClientRect();
    return [t.closest('.bs-slots') ? 'slots' : 'budget', t.textContent, Math.round(r.x + r.width / 2),
            Math.round(r.y + r.height / 2),
            Math.round(parseFloat(getComputedStyle(t).fontSize) * t.getCTM().a * 100) / 100]; })"""


# the slot grid's names of runs (views.js BS.runNames): the text trace's points and its text nodes' sizes
RUNS = """() => { const gd = document.querySelector('.bs-slots'), t = gd.data.find((d) => d.name === 'names');
  const nodes = [...gd.querySelectorAll('.textpoint text')];
  return {x: t ? t.x : [], y: t ? t.y : [], text: t ? t.text : [], n: nodes.length,
          sizes: [...new Set(nodes.map((e) => getComputedStyle(e).fontSize))]}; }"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The Trace page's player of sixteen / static (a 41-step window), the Compare page's sixteen pair (17 steps),
    and each with plotly.js alone fitting every name."""
    folder = tmp_path_factory.mktemp("names")
    static, continuous = recorded_pair("sixteen")
    own = (WEB / "views.js").read_text(encoding="utf-8")
    out = {}
    for name, html in (
        ("trace", player_html([static], "sixteen / static", window=20)),
        ("pair", player_html([static, continuous], "sixteen", window=8)),
    ):
        assert own in html
        out[name] = folder / f"{name}.html"
        out[name].write_text(html, encoding="utf-8")
        out[f"{name}-alone"] = folder / f"{name}-alone.html"
        out[f"{name}-alone"].write_text(html.replace(own, own + "\n" + NAMES_ALONE), encoding="utf-8")
    return out


def names(browser, path: Path, step: int, width: int, height: int, what: str = NAMES):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(60_000)
    page.goto(f"{path.as_uri()}?step={step}")
    page.wait_for_function(READY)
    out = page.evaluate(what)
    page.close()
    return sorted(out) if isinstance(out, list) else out


@pytest.mark.parametrize(
    ("page", "step", "width", "height", "legible"),
    [
        ("trace", 20, 1280, 720, False),  # the long window at 1280x720: 5 px names, none drawn
        ("trace", 150, 1500, 900, False),  # 6.5 px
        ("trace", 150, 1640, 900, True),  # 7.6 px
        ("trace", 150, 1920, 1080, True),  # 9.6 px
        ("pair", 40, 1280, 720, True),  # the Compare page's 17 steps a side: 8 px
        ("pair", 3, 1920, 1080, True),
    ],
)
def test_cell_names_are_plotly_own_where_legible_and_absent_elsewhere(
    browser, pages, page, step, width, height, legible
):
    alone = names(browser, pages[f"{page}-alone"], step, width, height)
    got = names(browser, pages[page], step, width, height)
    assert alone, "plotly.js alone draws a name in every cell"
    drawn = {tuple(n) for n in got}
    assert drawn <= {tuple(n) for n in alone}, "a name drawn is plotly.js's own, at its place and size"
    assert all(n[4] >= LEAST_PX - BAND for n in got), "no name is drawn too small to read"
    assert all(tuple(n) in drawn for n in alone if n[4] >= LEAST_PX + BAND), "every legible name is drawn"
    slots = [n for n in got if n[0] == "slots"]
    if legible:
        assert slots == [n for n in alone if n[0] == "slots"]
    else:
        assert not slots and all(n[4] < LEAST_PX for n in alone if n[0] == "slots")
    # the token budget: the free room's count is drawn; plotly.js alone drew each 1-token decode segment's name at
    # 0.2-2.3 px, and those are not
    assert any(n[0] == "budget" for n in got) and any(n[0] == "budget" and n[4] < 3 for n in alone)


def runs(step: int, window: int) -> dict[tuple[str, str, float], int]:
    """Independently of the player: each run of one request's consecutive cells in a slot of sixteen / static's grid
    at ``step`` (its padding rows a run of their own), as (name, slot, middle step) -> its number of cells."""
    view = recorded_pair("sixteen")[0]
    out: list[list] = []
    for c in sorted(grid_cells(view, *grid_range(view, step, window)), key=lambda c: (c.slot, c.step)):
        key = (view.label(c.request_id), f"slot {c.slot}", c.kind == "padding")
        if out and out[-1][0] == key and out[-1][2] == c.step - 1:
            out[-1][2] = c.step
        else:
            out.append([key, c.step, c.step])
    return {(name, slot, (a + b) / 2): b - a + 1 for (name, slot, _), a, b in out}


@pytest.mark.parametrize(("step", "width", "height"), [(20, 1280, 720), (150, 1500, 900), (600, 1280, 720)])
def test_cells_too_narrow_for_a_name_each_get_one_per_run(browser, pages, step, width, height):
    """Where no cell can hold its name, a run of a request's cells in a slot carries it once, at its middle, at the
    cells' 10 px: every run of 5 cells or more (45 px at the least), never a single cell (9-12 px)."""
    got = names(browser, pages["trace"], step, width, height, RUNS)
    assert got["n"] == len(got["text"]) > 0 and got["sizes"] == ["10px"]
    named = set(zip(got["text"], got["y"], got["x"]))
    cells = runs(step, 20)
    assert named <= set(cells), "each name is at the middle of a run of its own request's cells"
    assert all(run in named for run, n in cells.items() if n >= 5), "every run of 5 cells or more is named"
    assert not any(cells[run] == 1 for run in named), "a single cell is too narrow for a name"
    assert names(browser, pages["pair"], 40, 1280, 720, RUNS)["n"] == 0, "cells that hold their names need no more"
