"""Shared case e12 in Chromium: odd ``?step=`` and ``?speed=`` in the exported file and in the app.

The file is the case's own export, ``python -m batchscope html`` of the seed-abcd pair (22 steps) into a folder and a
name with spaces and ``#``, opened from ``file://``. Every value gives a working player (it drew its views, at the
step the table says, at a finite speed) and no page error; the player's own URL parser, run in the page over the
whole table of tests/ui/test_url_params.py, agrees with the Python one. Before: ``?step=3000000000`` opened the file at
step 0 and ``4294967297`` at step 1 (a 32-bit wrap), and the app's ``?speed=nan`` gave a blank player.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest
from conftest import RECORDED
from test_url_params import LAST, SPEEDS, STEPS

from batchscope.cli.main import main
from batchscope.tools.app_server import streamlit_app

pytestmark = pytest.mark.app

READY = "window.bsPlayer && bsPlayer.state.complete && document.querySelectorAll('.js-plotly-plot').length >= 4"


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("e12") / "dir with spaces" / "seed abcd #1.html"
    out.parent.mkdir()
    pair = [str(RECORDED / f"seed-abcd-{p}.jsonl") for p in ("static", "continuous")]
    assert main(["html", *pair, "--out", str(out)]) == 0
    return out


def query(step: str | None, speed: str | None) -> str:
    params = [(k, v) for k, v in (("step", step), ("speed", speed)) if v is not None]
    return "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote) if params else ""


def opened(browser, url: str):
    """The page at ``url`` once its player has drawn, and the page errors seen on the way."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return page, errors


def shown(frame) -> tuple[int, float]:
    """(the step the player shows, its speed in steps/s) once it has drawn its views."""
    frame.wait_for_function(READY)
    return int(frame.get_attribute("#bs-step", "data-bs-step")), frame.evaluate("bsPlayer.state.speed")


CASE_URLS = [  # (step, speed) as the case tried them, and what the player must show
    ("3000000000", "4", LAST, 4),
    ("4294967297", "0", LAST, 1),
    ("-1", "-5", 0, 1),
    ("999999", "nan", LAST, 8),
    ("abc", "abc", 0, 8),
    ("2.6", "1e9", 3, 120),
    (" 7", "0.5", 7, 1),
    ("1e400", None, LAST, 8),
    ("", "", 0, 8),
]


@pytest.mark.parametrize("step,speed,want_step,want_speed", CASE_URLS)
def test_the_exported_file_opens_every_odd_url_at_a_clamped_step(browser, exported, step, speed, want_step, want_speed):
    page, errors = opened(browser, exported.as_uri() + query(step, speed))
    assert shown(page) == (want_step, want_speed)
    assert errors == []
    page.close()


def test_the_files_url_parser_agrees_with_the_pythons_on_every_value(browser, exported):
    page, errors = opened(browser, exported.as_uri())
    shown(page)
    steps = page.evaluate(f"(vs) => vs.map((v) => bsPlayer.clamp(BS.urlNumber(v, 0, 0, {LAST})))", list(STEPS))
    speeds = page.evaluate("(vs) => vs.map((v) => BS.urlNumber(v, 8, 1, 120))", list(SPEEDS))
    assert dict(zip(STEPS, steps)) == STEPS and dict(zip(SPEEDS, speeds)) == SPEEDS
    assert errors == []
    page.close()


def test_a_payload_with_nan_is_what_made_the_player_blank(browser, exported, tmp_path):
    """The control: the same file with ``NaN`` written into its payload raises a page error and draws nothing, so
    the checks above would see the case's blank player."""
    broken = tmp_path / "nan.html"
    text = exported.read_text(encoding="utf-8")
    broken.write_text(text.replace('"speed":8.0', '"speed":NaN', 1), encoding="utf-8")
    page, errors = opened(browser, broken.as_uri())
    page.wait_for_function("document.readyState === 'complete'")
    assert errors and not page.evaluate("Boolean(window.bsPlayer)")
    page.close()


APP_URLS = [
    ("/compare?scenario=seed-abcd&speed=nan", LAST + 1, 0, 8),
    ("/compare?scenario=seed-abcd&speed=inf&step=3000000000", LAST + 1, LAST, 8),
    ("/compare?scenario=seed-abcd&speed=-inf&step=4294967297", LAST + 1, LAST, 8),
    ("/compare?scenario=seed-abcd&speed=1e9&step=2.6", LAST + 1, 3, 120),
    ("/?policy=bogus&present=yes&step=-5&speed=abc", 14, 0, 8),
]


@pytest.fixture(scope="module")
def app():
    with streamlit_app(timeout_s=180) as url:
        yield url


@pytest.mark.parametrize("path,num_steps,want_step,want_speed", APP_URLS, ids=[u[0] for u in APP_URLS])
def test_the_app_gives_a_working_player_for_every_odd_url(browser, app, path, num_steps, want_step, want_speed):
    page, errors = opened(browser, app + path)
    frame = page.wait_for_selector("iframe").content_frame()
    assert shown(frame) == (want_step, want_speed)
    assert frame.evaluate("bsPlayer.n") == num_steps
    assert page.locator('[data-testid="stException"]').count() == 0
    assert errors == []
    page.close()
