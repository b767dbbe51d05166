"""A teacher's ``?tour=`` with bad steps is reported on the page, never dropped silently (issue 36, item 4).

The exported player of seed-abcd's continuous run (14 steps: 0 to 13, read from the raw trace) opened from file://
in Chromium: a step past the end, a word for a step, or an entry without a note each make one visible line that
names ``?tour=`` and the allowed range; the good entries play (PageDown reaches them); a tour with no good entry
plays the run's own tour under the same line; a good tour shows no such line.
"""

from __future__ import annotations

import json

import pytest
from conftest import RECORDED

from batchscope.player.export import player_html
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

READY = "window.bsPlayer && bsPlayer.state.drawn >= 0 && bsPlayer.state.complete"
PATH = RECORDED / "seed-abcd-continuous.jsonl"
LAST = sum(1 for line in PATH.read_text().splitlines() if json.loads(line)["type"] == "step") - 1


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("tour") / "seed.html"
    view = TraceView(trace.read(PATH))
    out.write_text(player_html([view], "seed", tour=[{"step": 2, "note": "the run's own moment"}]), encoding="utf-8")
    return out


def opened(browser, path, query: str):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(path.as_uri() + query)
    page.wait_for_function(READY)
    return page, errors


@pytest.mark.parametrize(
    "tour,said,plays",
    [
        ("5:fine;99:too late", "step 99 is out of range", 5),
        ("abc:a word;5:fine", 'step "abc" is not a whole number', 5),
        ("-1:before;5:fine", "step -1 is out of range", 5),
        ("5:fine;7", '"7" is not step:note', 5),
        ("40:x", "step 40 is out of range", 2),  # no good entry: the run's own tour, still reported
    ],
)
def test_a_bad_tour_step_is_one_visible_line_naming_the_parameter_and_the_range(browser, exported, tour, said, plays):
    page, errors = opened(browser, exported, f"?step=0&tour={tour}")
    line = page.locator("#bs-tour-error")
    assert line.is_visible()
    text = line.inner_text()
    assert text.startswith("?tour=: ") and said in text and f"a whole number from 0 to {LAST}" in text, text
    assert "\n" not in text and line.bounding_box()["height"] < 60  # one line at 1280 px
    page.keyboard.press("PageDown")
    page.wait_for_function(f"bsPlayer.state.drawn === {plays}")
    assert not errors
    page.close()


def test_a_good_tour_shows_no_error_line(browser, exported):
    page, errors = opened(browser, exported, f"?step=0&tour=3:three;{LAST}:last")
    assert page.locator("#bs-tour-error").count() == 0
    page.keyboard.press("PageDown")
    page.wait_for_function("bsPlayer.state.drawn === 3")
    assert not errors
    page.close()


@pytest.mark.parametrize(
    "step,said,plays",
    [
        ("abc", '"abc" is not a number', 0),
        ("-5", "step -5 is out of range", 0),
        ("99", "step 99 is out of range", None),
    ],
)
def test_a_bad_step_is_one_visible_line_too(browser, exported, step, said, plays):
    """Found in a lecturer's trial: ``?step=abc`` and ``?step=-5`` opened step 0 without a word. The line names
    ``?step=``, the range (counted in the raw trace) and the step that plays instead (past the end: the last)."""
    page, errors = opened(browser, exported, f"?step={step}")
    plays = LAST if plays is None else plays
    line = page.locator("#bs-step-error")
    assert line.is_visible()
    text = line.inner_text()
    assert text == f"?step=: {said}: a step is a whole number from 0 to {LAST}; step {plays} plays.", text
    assert page.evaluate("bsPlayer.state.drawn") == plays and not errors
    page.close()


def test_a_good_step_shows_no_error_line(browser, exported):
    page, errors = opened(browser, exported, "?step=4")
    assert page.locator("#bs-step-error").count() == 0 and page.evaluate("bsPlayer.state.drawn") == 4 and not errors
    page.close()
