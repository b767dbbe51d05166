"""One click to present (issue 36, item 5): a presenter toggle on every page of the app, in a real browser.

Before: presenter mode was only the URL's ``?present=1``, and Metrics, Glossary, Playground and Quiz ignored it. On
each page at 1280x720: the toggle is in view; one click turns presenter mode on (the page's address gets
``?present=1``, the sidebar and header are gone, the page's type is larger, a player's frame plays in presenter
mode) and the toggle stays in view; one more click turns it off again. An address with ``?present=1`` opens in
presenter mode with the toggle on. Every wait is on the app's own signals (its status widget, the address, the
computed style). Screenshots go to artifacts/screenshots/toggle-*.png.
"""

from __future__ import annotations

import pytest
from conftest import RECORDED, ROOT

from batchscope.tools.app_server import streamlit_app

pytestmark = pytest.mark.app

SHOTS = ROOT / "artifacts" / "screenshots"
TIMEOUT_MS = 240_000  # a limit, not a wait (a first Playground visit loads the model on a loaded machine)
PAGES = ["", "compare?scenario=vllm-vs-sglang", "metrics", "playground", "trace", "quiz", "glossary"]
PLAYERS = {"", "compare?scenario=vllm-vs-sglang", "trace"}  # pages that embed the player

SIDEBAR_GONE = """() => { const s = document.querySelector('[data-testid="stSidebar"]');
  return !s || getComputedStyle(s).display === 'none'; }"""
SIDEBAR_SHOWN = """() => { const s = document.querySelector('[data-testid="stSidebar"]');
  return !!s && getComputedStyle(s).display !== 'none'; }"""
IDLE = "!document.querySelector('[data-testid=\"stStatusWidget\"]')"
PRESENT = "new URLSearchParams(location.search).get('present')"


@pytest.fixture(scope="module")
def server():
    with streamlit_app() as url:
        yield url


def opened(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.locator(".st-key-bs-present").wait_for()
    page.wait_for_function(IDLE)
    return page


def in_view(page) -> bool:
    box = page.locator(".st-key-bs-present label").bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2  # its middle, and nothing drawn over it
    on_top = page.evaluate("([x, y]) => !!document.elementFromPoint(x, y).closest('.st-key-bs-present')", [x, y])
    return box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= 1280 and box["y"] < 720 and on_top


def root_font_px(page) -> float:
    return page.evaluate("parseFloat(getComputedStyle(document.documentElement).fontSize)")


def player_presents(page) -> bool:
    return page.evaluate(
        """() => [...document.querySelectorAll('iframe')].some((f) => { try {
             return f.contentDocument.body.classList.contains('present'); } catch (e) { return false; } })"""
    )


@pytest.mark.parametrize("path", PAGES, ids=[p.split("?")[0] or "walkthrough" for p in PAGES])
def test_one_click_turns_presenter_mode_on_and_off_on_every_page(browser, server, path):
    page = opened(browser, f"{server}/{path}")
    assert page.evaluate(PRESENT) is None and page.evaluate(SIDEBAR_SHOWN) and in_view(page)
    base = root_font_px(page)
    page.locator(".st-key-bs-present label").click()
    page.wait_for_function(f"{PRESENT} === '1'")
    page.wait_for_function(SIDEBAR_GONE)
    page.wait_for_function(IDLE)
    assert page.locator('header[data-testid="stHeader"]').evaluate("(h) => getComputedStyle(h).display") == "none"
    assert root_font_px(page) >= 1.25 * base and in_view(page)
    if path in PLAYERS:
        page.wait_for_function(
            """() => [...document.querySelectorAll('iframe')].some((f) => { try {
                 const w = f.contentWindow; return w.bsPlayer && w.bsPlayer.state.complete
                   && f.contentDocument.body.classList.contains('present'); } catch (e) { return false; } })"""
        )
    name = path.split("?")[0] or "walkthrough"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"toggle-{name}-on.png"))
    assert page.locator('[data-testid="stException"]').count() == 0
    page.locator(".st-key-bs-present label").click()
    page.wait_for_function(f"{PRESENT} === null")
    page.wait_for_function(SIDEBAR_SHOWN)
    assert root_font_px(page) == base and in_view(page)
    page.close()


def test_an_address_with_present_opens_presenting_with_the_toggle_on(browser, server):
    page = opened(browser, f"{server}/glossary?present=1")
    page.wait_for_function(SIDEBAR_GONE)
    assert page.locator(".st-key-bs-present input").is_checked()
    page.close()


def test_a_bad_tour_in_the_apps_address_is_reported_in_its_player(browser, server):
    """The app's player reads ``?tour=`` from the page's address: a step past the end is one visible line in the
    frame, naming the parameter and the range (the longer run of vllm-vs-sglang, counted in its trace file)."""
    last = (
        max(
            sum('"type":"step"' in line.replace(" ", "") for line in (RECORDED / f"vllm-vs-sglang-{p}.jsonl").open())
            for p in ("continuous", "sglang")
        )
        - 1
    )
    page = opened(browser, f"{server}/compare?scenario=vllm-vs-sglang&tour=5:fine;999:too+late")
    frame = page.frame_locator("iframe").first
    line = frame.locator("#bs-tour-error")
    line.wait_for()
    text = line.inner_text()
    assert text.startswith("?tour=: step 999 is out of range") and f"from 0 to {last}" in text, text
    page.close()


def test_keys_step_the_player_right_after_the_switch_is_clicked(browser, server):
    """Found by a lecturer's trial: after a click on the switch the keyboard stayed on it, so the arrows did nothing
    and Space (a clicker's key) switched presenter mode off again. Now the arrow steps the player at once, and Space
    plays it while presenter mode stays on."""
    page = opened(browser, f"{server}/compare?scenario=vllm-vs-sglang&step=5")
    page.locator(".st-key-bs-present label").click()
    page.wait_for_function(f"{PRESENT} === '1'")
    page.wait_for_function(IDLE)
    ready = """() => [...document.querySelectorAll('iframe')].some((f) => { try { const w = f.contentWindow;
      return w.bsPlayer && w.bsPlayer.state.complete && f.contentDocument.body.classList.contains('present')
        && w.bsPlayer.state.drawn === STEP; } catch (e) { return false; } })"""
    page.wait_for_function(ready.replace("STEP", "5"))
    page.keyboard.press("ArrowRight")  # no click anywhere since the switch's
    page.wait_for_function(ready.replace("STEP", "6"))
    page.keyboard.press(" ")
    page.wait_for_function(
        """() => [...document.querySelectorAll('iframe')].some((f) => { try {
             return f.contentWindow.bsPlayer.state.playing; } catch (e) { return false; } })"""
    )
    assert page.evaluate(PRESENT) == "1" and page.locator(".st-key-bs-present input").is_checked()
    page.close()


@pytest.mark.parametrize("size", [(960, 540), (1280, 720)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("path", sorted(PLAYERS), ids=lambda p: p.split("?")[0] or "walkthrough")
def test_the_toggle_covers_no_control_of_the_player(browser, server, path, size):
    """In presenter mode the toggle sits over the player frame's top right corner: no button of the player's controls
    is under it (at 960x540 it covered 'details (i)' of the Compare page's controls)."""
    width, height = size
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{server}/{path}{'&' if '?' in path else '?'}present=1")
    page.locator(".st-key-bs-present").wait_for()
    page.wait_for_function(IDLE)
    frame = page.wait_for_selector("iframe").content_frame()
    frame.wait_for_function("window.bsPlayer && bsPlayer.state.complete")
    toggle = page.locator(".st-key-bs-present label").bounding_box()
    at = page.locator("iframe").first.bounding_box()
    buttons = frame.evaluate(
        """() => [...document.querySelectorAll('.bs-controls button')].filter((b) => b.offsetParent)
             .map((b) => { const r = b.getBoundingClientRect();
                           return [b.textContent, r.left, r.top, r.right, r.bottom]; })"""
    )
    assert buttons
    covered = [
        name
        for name, left, top, right, bottom in buttons
        if at["x"] + left < toggle["x"] + toggle["width"]
        and toggle["x"] < at["x"] + right
        and at["y"] + top < toggle["y"] + toggle["height"]
        and toggle["y"] < at["y"] + bottom
    ]
    assert covered == [], covered
    page.close()
