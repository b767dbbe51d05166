"""Measure how long the app's recorded pages take to show their first frame, on a first and a later visit.

Not a test: timings depend on the machine (compare figures of one run). Starts the app (``batchscope.tools.app_server``)
and, for each page, opens it in a new browser page (a new Streamlit session) of Debian's headless Chromium and times
from the request to the first frame the player draws (its ``bs-first-frame`` performance mark: the step's views, before
the figures of the whole trace under them; for the Metrics page, its first chart drawn,
``batchscope.figures.figure_frame``). The first visit after the server started builds the page's payloads, in a browser
that has loaded nothing yet (a fresh profile). Later visits are new sessions of one browser with a profile on disk, as a
student's browser has: the payloads come from the server's shared cache (``st.cache_data``), plotly.js and Streamlit's
scripts from the browser's HTTP cache, and from about the third load on, their compiled code from Chromium's code cache
(which an in-memory, incognito profile does not keep). Last, in one tab (as a lecture goes), it clicks from page to page
in the sidebar and times each click to the new page's first frame. The app is started as ``make app`` starts it
(``streamlit run batchscope/app/main.py`` with the checkout's ``.streamlit/config.toml``, nothing overridden but the
port), so the figures are what a student of ``make app`` sees. Target (issue 20 part 5): the first frame of every
recorded page within 3 s on a quiet 2-core machine, within 1 s on later visits.

Where the time of a later visit goes (measured on this 2-core machine, 2026-12-04, with the basic plotly.js bundle):
Streamlit's page until the player's frame exists, 0.75-1.0 s (its scripts, the session, the widgets above the
player; ``--bare`` times a bare Streamlit page holding one small frame the same way: 0.57-0.74 s). Of that, a page
other than the default one (``/compare``, ``/trace``, ``/metrics``) pays 0.1-0.15 s more before its session opens:
Streamlit 1.67's frontend first asks ``/compare/_stcore/health``, which its server answers 404 on purpose, waits its
minimum retry delay (100 ms) and then asks ``/_stcore/health`` (measured 2026-12-04, from the page's DOMContentLoaded to
its session's WebSocket: 75-100 ms on ``/``, 170-210 ms on ``/compare`` and ``/trace``). In the player's
frame, plotly.js's run 0.06-0.15 s from Chromium's code cache, inflating and parsing the payload 0.03-0.05 s, and the
first draw 0.3-0.5 s (the slot grid, token budget and block map of each side; the first plotly.js draw of a page
costs about twice a later one). Since then (the same evening) each of those figures is drawn once, with the margins
automargin chose for its layout before (``batchscope/player/web/margins.js``), not twice: the sixteen pair's six plots
0.23-0.25 s; and later that night, with no label drawn too small to read and no blank block labels, 0.18-0.19 s. The
frame shares the page's main thread (a srcdoc frame is of the page's origin), so whatever the page renders after the
frame, the frame waits for. A copy of plotly.js served with a fresh
``Last-Modified`` is asked for again on every visit and run without its compiled code (about 1 s more):
``batchscope.player.export.plotly_file`` dates it.

    .venv/bin/python scripts/measure_page_load.py [--visits 5] [--root OTHER_TREE]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
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
    ("Compare runs: four engines", "/compare?scenario=four-engines&pair=engines"),
)
PLAYER_READY = "performance.getEntriesByName('bs-first-frame').length > 0"  # the player's mark of its first frame
FRAME_AT = "performance.timeOrigin + performance.getEntriesByName('bs-first-frame')[0].startTime"


def player_frame_at(page) -> float:
    """The time (ms since the epoch, the browser's clock) the player in ``page``'s first frame drew its first frame
    (the player's own ``bs-first-frame`` mark, which the Metrics page's first chart frame sets when its first chart is
    drawn: polling from here would see it late while the frame's thread is busy)."""
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
    page.goto(url)
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
    clicked = page.evaluate("performance.timeOrigin + performance.now()")
    page.locator('[data-testid="stSidebarNav"]').get_by_text(name, exact=True).click()
    fresh = "(old) => { const f = document.querySelector('iframe'); return f && f !== old; }"
    page.wait_for_function(fresh, arg=old)
    return (player_frame_at(page) - clicked) / 1000


BARE_APP = """import streamlit as st
def bare():
    st.title("Bare")
    st.iframe("<p>frame</p><script>performance.mark('bs-first-frame')</script>", height=60)
st.navigation([st.Page(bare, title="Bare", default=True), st.Page(bare, title="Sub", url_path="sub")]).run()
"""


def bare(visits: int, size: dict) -> int:
    """The same first and later visits of a bare Streamlit page holding one small frame that marks itself drawn, at
    ``/`` and at a page's sub-path (``/sub``, as ``/compare``: Streamlit's frontend asks that path's health first and
    is answered 404): the floor under every page of the app, what Streamlit alone costs on this machine."""
    from playwright.sync_api import sync_playwright

    from batchscope.tools.app_server import CHROMIUM, CHROMIUM_ARGS, launch_chromium, streamlit_app

    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as profile:
        (Path(folder) / "app.py").write_text(BARE_APP, encoding="utf-8")
        with streamlit_app(root=Path(folder)) as base, sync_playwright() as pw:
            for name, path in (("bare Streamlit page", "/"), ("bare page at a sub-path", "/sub")):
                first = first_frame_s(launch_chromium(pw).new_context(**size), base + path)
                student = pw.chromium.launch_persistent_context(
                    profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, **size
                )
                later = [first_frame_s(student, base + path) for _ in range(max(3, visits))]
                student.close()
                runs = " ".join(f"{x:.2f}" for x in later)
                print(
                    f"{name:28s} first visit {first:5.2f} s   later visits {runs} s"
                    f"   (median of the last 3: {statistics.median(later[-3:]):.2f} s)"
                )
    return 0


def shipped_setting(root: Path, name: str) -> str:
    """The value ``root``'s ``.streamlit/config.toml`` gives ``name`` (any section), or "Streamlit's default"."""
    config = root / ".streamlit" / "config.toml"
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    found = re.search(rf"^{name}\s*=\s*(.+)$", text, flags=re.MULTILINE)
    return found.group(1).strip() if found else "Streamlit's default"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--visits", type=int, default=5, help="later visits per page (each a new session), at least 3")
    ap.add_argument("--root", type=Path, default=ROOT, help="the tree whose app runs (another commit's, to compare)")
    ap.add_argument("--bare", action="store_true", help="time a bare Streamlit page with one small frame instead")
    ap.add_argument("--only", default="", help="only the pages whose name holds this text (e.g. 'four engines')")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from batchscope.tools.app_server import APP, CHROMIUM, CHROMIUM_ARGS, launch_chromium, streamlit_app

    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    watcher = shipped_setting(args.root, "fileWatcherType")
    print(f"started as `make app` starts it: streamlit run {APP} with the tree's .streamlit/config.toml")
    print(f"  (its file watcher: {watcher})")
    size = {"viewport": {"width": 1280, "height": 720}}
    if args.bare:
        return bare(args.visits, size)
    with (
        streamlit_app(root=args.root, as_make_app=True) as base,
        sync_playwright() as pw,
        tempfile.TemporaryDirectory() as profile,
    ):
        browser = launch_chromium(pw)
        # a student's browser: a profile on disk, whose caches (HTTP, compiled code) outlive a tab
        student = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, **size
        )
        rows = []
        for name, path in [p for p in PAGES if args.only.lower() in p[0].lower()]:
            first = first_frame_s(browser.new_context(**size), base + path)  # a new visitor, the server's first
            later = [first_frame_s(student, base + path) for _ in range(max(3, args.visits))]
            settled = statistics.median(later[-3:])
            rows.append((name, first, settled))
            print(
                f"{name:28s} first visit {first:5.2f} s   later visits {' '.join(f'{x:.2f}' for x in later)} s"
                f"   (median of the last 3: {settled:.2f} s)",
                flush=True,
            )
        student.close()
        tab = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        tab.set_default_timeout(180_000)
        tab.goto(base + "/")
        player_frame_at(tab)
        for i, name in enumerate(SIDEBAR if not args.only else ()):
            when = "again" if i >= len(SIDEBAR) // 2 else "first"
            print(f"in one tab, {when}: {name:18s} {in_tab_s(tab, name):6.2f} s", flush=True)
        browser.close()
    worst_first, worst_later = max(r[1] for r in rows), max(r[2] for r in rows)
    print(f"worst first visit {worst_first:.2f} s (target 3 s), worst later visit {worst_later:.2f} s (target 1 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
