"""Measure how long the app's recorded pages take to show their first frame, on a first and a later visit.

Not a test: timings depend on the machine (compare figures of one run). Starts the app (``bench.app_server``) and,
for each page, opens it in a new browser page (a new Streamlit session) of Debian's headless Chromium and times from
the request to the first frame the player draws (its ``bs-first-frame`` performance mark; for the Metrics page, its
first chart drawn). The first visit after the server started builds the page's payloads, in a browser that has
loaded nothing yet; a later visit, a new session of a browser that came before, finds the payloads in the server's
shared cache (``st.cache_data``) and plotly.js in its own cache (the app serves it once, ``static/``). Last, in one
tab (as a lecture goes), it clicks from page to page in the sidebar and times each click to the new page's first
frame. Target (issue 20 part 5): the first frame of every recorded page within 3 s on a quiet 2-core machine, within
1 s on later visits.

Where the time of a new tab goes (measured on this 2-core machine): Streamlit's page and script run until the
player's frame exists, about 1.3 s; plotly.js's first run in a new process, about 1.0 s (a second run of the same
source in one process: about 30 ms, which is why a click within a tab is fast); the player's first draw, 0.3-0.6 s.

    .venv/bin/python scripts/measure_page_load.py [--visits 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGES = (
    ("Walkthrough", "/"),
    ("Compare runs: seed-abcd", "/compare?scenario=seed-abcd"),
    ("Compare runs: sixteen", "/compare?scenario=sixteen"),
    ("Compare runs: preemption", "/compare?scenario=preemption"),
    ("Trace: sixteen static", "/trace?scenario=sixteen&policy=static"),
    ("Trace: priority continuous", "/trace?scenario=priority&policy=continuous"),
    ("Metrics: sixteen", "/metrics?scenario=sixteen"),
)
PLAYER_READY = "performance.getEntriesByName('bs-first-frame').length > 0"  # the player's mark of its first frame
FRAME_AT = "performance.timeOrigin + performance.getEntriesByName('bs-first-frame')[0].startTime"


def player_frame_at(page) -> float:
    """The time (ms since the epoch, the browser's clock) the player in ``page``'s frame drew its first frame (the
    player's own ``bs-first-frame`` mark: polling from here would see it late while the frame's thread is busy)."""
    frame = page.wait_for_selector("iframe").content_frame()
    assert frame is not None
    frame.wait_for_function(PLAYER_READY, polling=50)
    return frame.evaluate(FRAME_AT)


def first_frame_s(context, url: str, timeout_ms: int = 180_000) -> float:
    """Seconds from the request (the page's navigation start) to the first frame of the page's player (or its first
    chart), in a new page (a new Streamlit session) of the browser context ``context`` (its cache: what this browser
    loaded before)."""
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    t0 = time.perf_counter()
    page.goto(url)
    if "/metrics" in url:
        page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg")
        seconds = time.perf_counter() - t0
    else:
        seconds = (player_frame_at(page) - page.evaluate("performance.timeOrigin")) / 1000
    page.close()
    return seconds


SIDEBAR = ("Compare runs", "Metrics", "Trace", "Walkthrough", "Compare runs", "Metrics", "Trace", "Walkthrough")


def in_tab_s(page, name: str) -> float:
    """Seconds from a click on ``name`` in the sidebar to the first frame of that page's player (or its first chart),
    in the tab the lecture is already in (the page's default trace). A frame of the same origin in the same tab finds
    plotly.js compiled already (V8 keeps code compiled for a source per process): a first run of plotly.min.js costs
    about 1 s here, a second one in the same process about 30 ms."""
    old = page.query_selector("iframe")
    t0 = time.perf_counter()
    clicked = page.evaluate("performance.timeOrigin + performance.now()")
    page.locator('[data-testid="stSidebarNav"]').get_by_text(name, exact=True).click()
    if name == "Metrics":
        page.wait_for_function("location.pathname.endsWith('/metrics')")
        page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg")
        return time.perf_counter() - t0
    fresh = "(old) => { const f = document.querySelector('iframe'); return f && f !== old; }"
    page.wait_for_function(fresh, arg=old)
    return (player_frame_at(page) - clicked) / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--visits", type=int, default=3, help="later visits per page (each a new session)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from bench.app_server import launch_chromium, streamlit_app

    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    with streamlit_app() as base, sync_playwright() as pw:
        browser = launch_chromium(pw)
        rows = []
        for name, path in PAGES:
            size = {"viewport": {"width": 1280, "height": 720}}
            first = first_frame_s(browser.new_context(**size), base + path)  # a new visitor, the server's first
            returning = browser.new_context(**size)  # a visitor coming back: its browser keeps plotly.js
            later = [first_frame_s(returning, base + path) for _ in range(args.visits)]
            rows.append((name, first, statistics.median(later)))
            print(f"{name:32s} first visit {first:6.2f} s   later visits (median of {args.visits}) "
                  f"{statistics.median(later):6.2f} s", flush=True)  # fmt: skip
        tab = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        tab.set_default_timeout(180_000)
        tab.goto(base + "/")
        player_frame_at(tab)
        for i, name in enumerate(SIDEBAR):
            when = "again" if i >= len(SIDEBAR) // 2 else "first"
            print(f"in one tab, {when}: {name:18s} {in_tab_s(tab, name):6.2f} s", flush=True)
        browser.close()
    worst_first, worst_later = max(r[1] for r in rows), max(r[2] for r in rows)
    print(f"worst first visit {worst_first:.2f} s (target 3 s), worst later visit {worst_later:.2f} s (target 1 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
