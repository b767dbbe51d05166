"""The exported player in a real browser (Debian's Chromium through Playwright), opened from file://.

No request leaves the file; playback only moves forward and moves; ``?step=`` lands on the step, where both sides
draw exactly the Python figures of that step; the keyboard steps; a seek during playback continues from the seek
(shared case c14); the side that finishes first holds; presenter mode fits 1280x720. No sleeps: every wait is a
condition polled by the browser.
"""

from __future__ import annotations

import html
import itertools
import json
import re
from pathlib import Path

import pytest
from conftest import recorded_pair

from batchscope.compare.lockstep import lockstep_counters
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import event_steps
from batchscope.figures.budget import budget_bar
from batchscope.figures.kv import block_map
from batchscope.figures.slots import slot_grid
from batchscope.player.export import player_html

pytestmark = pytest.mark.app

WINDOW = 8
READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"
# the block map as one trace again: its cells (views.js BS.blockTraces) with each block's label (" " where it has
# none) from the labels trace, which holds the labelled blocks keyed by block number
ONE_BLOCK_TRACE = """(gd) => { const [cells, labels] = gd.data, text = cells.x.map(() => " ");
  labels.ids.forEach((id, j) => { text[+id] = labels.text[j]; });
  return Object.assign({}, cells, {text}); }"""
RECORD = """() => { window.__steps = []; const el = document.getElementById('bs-step');
  const f = () => { window.__steps.push(+el.dataset.bsStep); if (!window.__stop) requestAnimationFrame(f); };
  requestAnimationFrame(f); }"""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("player")
    out = {}
    for scenario in ("sixteen", "seed-abcd"):
        views = recorded_pair(scenario)
        out[scenario] = folder / f"{scenario}.html"
        out[scenario].write_text(
            player_html(views, scenario, window=WINDOW, counters=lockstep_counters(*views)), encoding="utf-8"
        )
    return out


def open_file(browser, path: Path, query: str = "", width: int = 1600, height: int = 1000):
    """Open the file with every request intercepted: file:// ones go through, any other is counted and refused."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(60_000)
    page.outside = []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            page.outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri() + query)
    page.wait_for_function(READY)
    return page


def step_of(page) -> int:
    return int(page.get_attribute("#bs-step", "data-bs-step"))


def wait_step(page, cond: str) -> None:
    """Wait until ``cond`` (JavaScript, about the shown step ``k``) holds."""
    page.wait_for_function(
        f"(() => {{ const k = +document.getElementById('bs-step').dataset.bsStep; return {cond}; }})()"
    )


def test_plays_from_file_with_no_request_and_only_forward(browser, files):
    page = open_file(browser, files["sixteen"])
    page.evaluate(
        "(v) => { const s = document.getElementById('bs-speed'); s.value = String(v);"
        " s.dispatchEvent(new Event('input')); }",
        60,
    )
    page.evaluate(RECORD)
    page.click("#bs-play")
    wait_step(page, "k >= 150")
    page.click("#bs-play")  # pause
    page.evaluate("window.__stop = true")
    steps = page.evaluate("window.__steps")
    assert steps[0] == 0 and steps[-1] >= 150
    assert all(b >= a for a, b in itertools.pairwise(steps)), "the step went backwards"
    assert len(set(steps)) > 10  # it moved through many frames, not in one jump
    assert page.outside == [], f"the exported file asked the network for {page.outside[:3]}"
    page.close()


def blank_labels(data: list[dict], name: str) -> list[dict]:
    """The block map as the player draws it: an empty label becomes " " (views.js drawBlocks: plotly.js loses
    track of empty text nodes across redraws)."""
    if name != "blocks":
        return data
    return [{**t, "text": [x or " " for x in t["text"]]} for t in data]


def test_step_param_lands_there_and_both_sides_draw_the_python_figures(browser, files):
    page = open_file(browser, files["sixteen"], "?step=37")
    assert step_of(page) == 37
    views = recorded_pair("sixteen")
    for i, view in enumerate(views):
        got = page.evaluate(
            """([i, one]) => { const s = bsPlayer.sides[i].dom, pick = (gd, kind) => ({
            data: (kind === "blocks" ? [eval(one)(gd)] : gd.data).map((t) => ({name: t.name, x: t.x, base: t.base,
              y: t.y, text: t.text, hovertext: t.hovertext, customdata: t.customdata, color: t.marker.color})),
            title: s.titles[kind].textContent, range: gd.layout.xaxis.range});
          return {head: s.head.textContent, narration: s.narration.textContent,
                  slots: pick(s.slots, "slots"), budget: pick(s.budget, "budget"),
                  blocks: pick(s.blocks, "blocks")}; }""",
            [i, ONE_BLOCK_TRACE],
        )
        assert got["head"] == f"{view.policy.capitalize()} · step 37"
        assert got["narration"] == narrate(view, 37)
        for name, fig in (
            ("slots", slot_grid(view, 37, WINDOW)),
            ("budget", budget_bar(view, 37)),
            ("blocks", block_map(view, 37)),
        ):
            want = json.loads(fig.to_json())
            assert got[name]["title"] == html.unescape(want["layout"]["title"]["text"])  # as HTML text above
            drawn = [{k: v for k, v in t.items() if v is not None} for t in got[name]["data"]]
            wanted = [
                {
                    k: v
                    for k, v in dict(
                        name=t.get("name"),
                        x=t.get("x"),
                        base=t.get("base"),
                        y=t.get("y"),
                        text=t.get("text"),
                        hovertext=t.get("hovertext"),
                        customdata=t.get("customdata"),
                        color=t["marker"].get("color"),
                    ).items()
                    if v is not None
                }
                for t in blank_labels(want["data"], name)
            ]
            # a bar's label too small to read at this width is not drawn (tests/ui/test_browser_cell_names.py)
            for got_t, want_t in zip(drawn, wanted):
                if name != "blocks" and "text" not in got_t:
                    want_t.pop("text", None)
            assert drawn == wanted, (view.policy, name)
        assert got["slots"]["range"] == json.loads(slot_grid(view, 37, WINDOW).to_json())["layout"]["xaxis"]["range"]
    page.close()


def test_keyboard_steps_and_event_buttons_jump_to_events(browser, files):
    page = open_file(browser, files["sixteen"], "?step=37")
    page.keyboard.press("ArrowRight")
    wait_step(page, "k === 38")
    page.keyboard.press("ArrowLeft")
    wait_step(page, "k === 37")
    page.keyboard.press("End")
    wait_step(page, "k === 1221")
    page.keyboard.press("Home")
    wait_step(page, "k === 0")
    events = sorted(set(event_steps(recorded_pair("sixteen")[0])) | set(event_steps(recorded_pair("sixteen")[1])))
    page.click("#bs-next-event")
    wait_step(page, f"k === {next(e for e in events if e > 0)}")
    page.keyboard.press(" ")
    page.wait_for_function("bsPlayer.state.playing")
    page.keyboard.press(" ")
    page.wait_for_function("!bsPlayer.state.playing")
    page.close()


def test_a_seek_during_playback_continues_from_the_seek_c14(browser, files):
    page = open_file(browser, files["seed-abcd"])
    charts = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
    page.evaluate(
        "(v) => { const s = document.getElementById('bs-speed'); s.value = String(v);"
        " s.dispatchEvent(new Event('input')); }",
        4,
    )
    page.click("#bs-play")
    wait_step(page, "k >= 5")
    page.click("#bs-play")  # pause
    page.evaluate(
        "(k) => { const s = document.getElementById('bs-scrub'); s.value = String(k);"
        " s.dispatchEvent(new Event('input')); }",
        3,
    )
    wait_step(page, "k === 3")
    heads = page.evaluate("bsPlayer.sides.map((s) => s.dom.head.textContent)")
    assert heads == ["Static · step 3", "Continuous · step 3"]
    page.evaluate(RECORD)
    page.click("#bs-play")
    wait_step(page, "k >= 5")
    page.click("#bs-play")
    page.evaluate("window.__stop = true")
    steps = page.evaluate("window.__steps")
    assert steps[0] == 3 and all(b >= a for a, b in itertools.pairwise(steps)) and 4 in steps
    assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") == charts  # nothing accumulates
    page.close()


def test_a_seek_while_playing_continues_at_the_chosen_speed_from_the_seek(browser, files):
    page = open_file(browser, files["sixteen"])
    page.evaluate(
        "(v) => { const s = document.getElementById('bs-speed'); s.value = String(v);"
        " s.dispatchEvent(new Event('input')); }",
        8,
    )
    page.click("#bs-play")
    wait_step(page, "k >= 2")
    page.evaluate(
        "(k) => { const s = document.getElementById('bs-scrub'); s.value = String(k);"
        " s.dispatchEvent(new Event('input')); }",
        600,
    )
    page.evaluate(RECORD)
    # 8 steps/s from step 600: three more steps take about 0.4 s (a clock that ignored the seek would need ~75 s)
    page.wait_for_function("+document.getElementById('bs-step').dataset.bsStep >= 603", timeout=5_000)
    page.evaluate("window.__stop = true; bsPlayer.pause()")
    steps = page.evaluate("window.__steps")
    assert steps[0] >= 600 and all(b >= a for a, b in itertools.pairwise(steps))
    page.close()


def test_the_side_that_finishes_first_holds_its_final_state(browser, files):
    page = open_file(browser, files["sixteen"], "?step=1000")
    side = page.evaluate(
        "(() => { const s = bsPlayer.sides[1].dom; return {head: s.head.textContent, "
        "note: s.note.hidden ? '' : s.note.textContent}; })()"
    )
    assert side == {
        "head": "Continuous · step 530",
        "note": "continuous finished at step 530; holding its final state.",
    }
    page.close()


@pytest.mark.parametrize("scenario", ["sixteen", "seed-abcd"])
def test_presenter_mode_fits_a_1280x720_projector(browser, files, scenario):
    """The controls and the figures are on the first screen (the block map at least begins there); the narration,
    which grows to its whole sentence (issue 20: never clipped), may continue below them."""
    page = open_file(browser, files[scenario], "?present=1&step=300", width=1280, height=720)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 1280
    tops = page.evaluate(
        "[...document.querySelectorAll('.bs-slots, .bs-budget, .bs-blocks')].map((e) => "
        "[e.className, e.getBoundingClientRect().top, e.getBoundingClientRect().bottom])"
    )
    assert all(top < 720 and ("bs-blocks" in name or bottom <= 720) for name, top, bottom in tops), tops
    assert page.is_visible("#bs-play") and page.is_visible("#bs-next-event")
    assert not page.is_visible("#bs-scrub") and not page.is_visible("#bs-speed")
    page.close()


WHITESPACE_CASES = {  # hand-written: what a reader must see
    " ": "␣",
    " Paris": "␣Paris",
    "Paris is ": "Paris is␣",
    "a  b": "a␣␣b",
    "a b": "a b",
    "one\ntwo": "one⏎two",
    "x\r\ny\rz": "x⏎y⏎z",
    "\tcode": "⇥code",
    "\n\n": "⏎⏎",
    "": "",
}


def test_whitespace_tokens_are_visible_in_the_text_so_far(browser, files):
    """A sampled space or newline never looks like nothing: the player and the Python text table mark it the same
    way (batchscope.explain.stepinfo.visible_whitespace), and seed-abcd's C, whose first token is a space, shows ␣ at
    step 0."""
    from batchscope.explain.stepinfo import text_so_far, visible_whitespace

    assert {s: visible_whitespace(s) for s in WHITESPACE_CASES} == WHITESPACE_CASES
    page = open_file(browser, files["seed-abcd"], "?step=0")
    got = page.evaluate("(cases) => cases.map((s) => BS.visibleWhitespace(s))", list(WHITESPACE_CASES))
    assert got == list(WHITESPACE_CASES.values())
    view = recorded_pair("seed-abcd")[1]
    assert text_so_far(view, 0)["C"] == " "  # the fact the check below relies on, from the trace
    side = 1  # continuous
    page.evaluate("(i) => { const d = bsPlayer.sides[i].dom.details; d.open = true; }", side)
    row = view.request_ids.index("C")
    page.wait_for_function("([i, r]) => bsPlayer.sides[i].dom.rows[r].text.textContent === '␣'", arg=[side, row])
    page.close()


def test_block_ids_are_in_the_cells_when_there_is_room_and_always_on_hover(browser, files):
    """Wide: a held cell carries its block id (the Python figure's text, compared above). Narrow (two sides in 900
    px): cells shrink to their grid cell in the same 16 columns, a cell with an owner drops its id line, an empty
    cell at the start of a row keeps it, and every hover still names the block."""
    page = open_file(browser, files["seed-abcd"], "?step=5", width=900)
    got = page.evaluate(
        """(one) => { const t = eval(one)(bsPlayer.sides[1].dom.blocks);
          return {x: t.x, text: t.text, hover: t.hovertext, size: t.marker.size}; }""",
        ONE_BLOCK_TRACE,
    )
    assert got["size"] < 30 and max(got["x"]) == 15
    for b, (text, hover) in enumerate(zip(got["text"], got["hover"])):
        assert hover.startswith(f"block {b}:")
        assert not ("<br>" in text and text.startswith("<span")), text  # an owner's label: no room for the id
        if text.startswith("<span"):
            assert text == f"<span style='font-size:7px;color:#444'>{b}</span>" and b % 16 == 0
    assert any("<br>" in t for t in got["text"]) and any(t.startswith("<span") for t in got["text"])
    page.close()


# each block's label as drawn (" " where none is): every text node of the map, at the block whose cell is at its
# position on the plot
DRAWN_BLOCK_LABELS = """() => { const gd = bsPlayer.sides[1].dom.blocks, fl = gd._fullLayout, cells = gd.data[0];
  const at = (x, y) => `${Math.round(fl.xaxis.l2p(x))},${Math.round(fl.yaxis.l2p(y))}`;
  const block = new Map(cells.x.map((x, b) => [at(x, cells.y[b]), b])), out = cells.x.map(() => " ");
  for (const e of gd.querySelectorAll('.textpoint text')) {
    const b = block.get(`${Math.round(+e.getAttribute('x'))},${Math.round(+e.getAttribute('y'))}`);
    if (b === undefined || out[b] !== " ") return "a label off its block, or two on one: " + e.textContent;
    out[b] = e.textContent;
  }
  return out; }"""


def test_block_labels_survive_stepping_through_a_trace(browser, files):
    """Stepping one step at a time (each step a plotly react of the map), every block keeps its label: at the last
    step of seed-abcd block 12 reads A's, as the Python map does (plotly.js used to drop it after empty labels)."""
    page = open_file(browser, files["seed-abcd"], "?step=0", width=1600, height=900)
    view = recorded_pair("seed-abcd")[1]
    for k in range(1, view.num_steps):
        page.click("#bs-fwd")
        wait_step(page, f"k === {k} && bsPlayer.state.drawn === {k}")
        texts = page.evaluate(DRAWN_BLOCK_LABELS)
        want = [re.sub(r"<[^>]+>", "", x).replace("&lt;", "<") or " " for x in block_map(view, k).data[0].text]
        assert texts == want, k
    page.close()


AFTER_RESIZE = """() => { window.__after = undefined;
  window.addEventListener('resize', () => { window.__after = bsPlayer.state.drawn; }, { once: true }); }"""


def test_a_taller_frame_keeps_its_frame_and_a_wider_one_redraws(browser, files):
    """The app sizes the player's frame to its content once it has drawn: a change of height alone must not redraw
    every view (it did, once per resize: two more full draws of both sides on each Compare page load); a change of
    width must (the plots fill the width). The player's own resize listener runs first, so ``drawn`` read in a
    later listener of the same event says whether it asked for a redraw (-1)."""
    page = open_file(browser, files["sixteen"], "?step=40", width=1280, height=720)
    assert page.evaluate("performance.getEntriesByName('bs-first-frame').length") == 1
    for size, redraws in (({"width": 1280, "height": 1400}, False), ({"width": 1000, "height": 1400}, True)):
        page.evaluate(AFTER_RESIZE)
        page.set_viewport_size(size)
        page.wait_for_function("window.__after !== undefined")
        assert (page.evaluate("window.__after") == -1) == redraws, size
        page.wait_for_function(READY)
    page.close()
