"""Measure how long the app's recorded pages take to show their first frame, on a first and a later visit.

Not a test: timings depend on the machine (compare figures of one run). Starts the app (``bench.app_server``) and,
for each page, opens it in a new browser page (a new Streamlit session) of Debian's headless Chromium and times from
the request to the first frame the player draws (its ``bsPlayer.state.drawn`` becoming a step; for the Metrics page,
its first chart drawn). The first visit after the server started builds the page's payloads, in a browser that has
loaded nothing yet; a later visit, a new session of a browser that came before, finds the payloads in the server's
shared cache (``st.cache_data``) and plotly.js in its own cache (the app serves it once, ``static/``). Target
(issue 20 part 5): the first frame of every recorded page within 3 s on a quiet 2-core machine, within 1 s on later
visits.

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
PLAYER_READY = "window.bsPlayer && bsPlayer.state.drawn >= 0"


def first_frame_s(context, url: str, timeout_ms: int = 180_000) -> float:
    """Seconds from the request to the first frame of the page's player (or its first chart), in a new page (a new
    Streamlit session) of the browser context ``context`` (its cache: what this browser loaded before)."""
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    t0 = time.perf_counter()
    page.goto(url)
    if "/metrics" in url:
        page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg")
    else:
        frame = page.wait_for_selector("iframe").content_frame()
        assert frame is not None
        frame.wait_for_function(PLAYER_READY, polling=50)
    seconds = time.perf_counter() - t0
    page.close()
    return seconds


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
        browser.close()
    worst_first, worst_later = max(r[1] for r in rows), max(r[2] for r in rows)
    print(f"worst first visit {worst_first:.2f} s (target 3 s), worst later visit {worst_later:.2f} s (target 1 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
