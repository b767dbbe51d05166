"""How long the Playground's live run takes in the app, against the same runs from the command line.

    .venv/bin/python scripts/measure_live_run.py                 # the default model, the Playground's default knobs
    .venv/bin/python scripts/measure_live_run.py --model DIR --users 2 --post-script-gc
    .venv/bin/python scripts/measure_live_run.py --requests 4 --users 1 --other-page  # four requests
    .venv/bin/python scripts/measure_live_run.py --requests 4 --max-tokens 12 --users 1  # the seed's size

First the Playground's default settings (its knobs as first drawn, read with Streamlit's AppTest) are run in this
process with ``batchscope.engine.llm.generate_trace``, each run of the settings in turn, as the Playground's background
thread runs them: the **CLI** figure (wall seconds, and the engine's own mean step time from the trace). Then
``streamlit run app.py`` starts on a free loopback port (``batchscope/tools/app_server.py``) and ``--users`` browser
sessions (Debian's Chromium, headless) each press "Run live" at once, every session after the first with another
``seed`` so that no run is served from the run cache: the **app** figure is, per session, the seconds from its click
until its result's player is on the page. ``--requests N`` and ``--max-tokens N`` set the Playground's "Number of
requests" (default 6) and "Max / mean output tokens" (default 24) in both (the seed: 4 requests of at most 12
tokens). ``--other-page``: while the first session's run goes, another tab opens the Walkthrough and times its first
frame (as ``scripts/measure_page_load.py`` does), against the same page opened before the run: what a live run
costs the other pages (that tab's work slows the run too, so its app figure is not the one to compare). Live runs
are serialised by one lock, so with two users the second figure includes the first user's run. A measurement, not
a test: the figures depend on the machine and its load (compare the ratios of one run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure_page_load

from batchscope.tools.app_server import launch_chromium, streamlit_app

# the Playground's sliders that --requests and --max-tokens move: widget key -> settings key
SLIDERS = {"pg:n": "num_requests", "pg:maxtok": "max_tokens"}


def default_settings(sliders: dict[str, int] | None = None) -> dict:
    """The Playground's knobs as first drawn (``batchscope.app.page_playground.knobs``), read through AppTest;
    ``sliders``: values instead of the defaults (by widget key, ``SLIDERS``)."""
    from streamlit.testing.v1 import AppTest

    def grab() -> None:
        import streamlit as st

        from batchscope.app.page_playground import knobs

        st.session_state["bench:settings"] = knobs()[0]

    at = AppTest.from_function(grab, default_timeout=60)
    at.run()
    settings = at.session_state["bench:settings"]
    for key, value in (sliders or {}).items():
        settings[SLIDERS[key]] = value
    return settings


def cli_figures(model: str, sliders: dict[str, int] | None = None) -> tuple[float, float, int]:
    """(wall s, mean engine step s, steps) of the default settings' runs (``sliders`` moved), in this process."""
    from batchscope.app.playground_spec import run_configs
    from batchscope.app.playground_spec import validate as validate_settings
    from batchscope.engine.llm import generate_trace, model_limits
    from batchscope.engine.threads import use_threads
    from batchscope.model.models import load_model
    from batchscope.model.runner import pack_now

    use_threads()  # as the app does (batchscope/app/common.model_and_lock)
    loaded = load_model(model)
    pack_now(loaded.model)  # as the app does when it loads the model
    s = default_settings(sliders)
    msgs, _, specs = validate_settings(s, loaded.tokenizer, *model_limits(loaded))
    assert not msgs, msgs
    t0, steps = time.perf_counter(), []
    for config in run_configs(s).values():
        records = generate_trace(loaded, specs, config, scenario="playground")
        steps += [r["t_end"] - r["t_start"] for r in records[1:-1]]
    return time.perf_counter() - t0, statistics.fmean(steps), len(steps)


def set_slider(page, key: str, value: int) -> None:
    """Move the Playground's slider ``key`` (a range input) to ``value`` with its keys, as a keyboard user would,
    and wait for the rerun."""
    box = f".st-key-{key.replace(':', '-')} input[type='range']"
    thumb = page.locator(box)
    now = int(thumb.input_value())
    thumb.focus()
    for _ in range(abs(value - now)):
        thumb.press("ArrowRight" if value > now else "ArrowLeft")
    page.wait_for_function(f"document.querySelector(\"{box}\")?.value === '{value}'")
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')")


def app_figures(
    model: str,
    users: int,
    timeout_s: float,
    extra: tuple[str, ...] = (),
    sliders: dict[str, int] | None = None,
    other_page: bool = False,
) -> tuple[list[float], float | None, float | None]:
    """Seconds from each session's click on "Run live" to its result's player on the page; with ``other_page``, the
    Walkthrough's first frame (seconds from the request) opened before the runs and while the first one goes (None:
    not measured, or the run ended first). ``extra``: more ``streamlit run`` options; ``sliders``: the Playground's
    sliders moved (``SLIDERS``)."""
    from measure_page_load import first_frame_s
    from playwright.sync_api import sync_playwright

    with streamlit_app(env={"BATCHSCOPE_MODEL": model}, extra=extra) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        reader = browser.new_context(viewport={"width": 1280, "height": 720})  # a student on another page
        quiet = min(first_frame_s(reader, url + "/") for _ in range(3)) if other_page else None
        pages = []
        for i in range(users):
            page = browser.new_context(viewport={"width": 1600, "height": 1800}).new_page()
            page.set_default_timeout(timeout_s * 1000)
            page.goto(url + "/playground")
            page.locator(".st-key-pg-run button").wait_for()
            for key, value in (sliders or {}).items():
                set_slider(page, key, value)
            if i:  # another seed: a fresh run, not the first session's from the run cache
                seed = page.locator(".st-key-pg-seed input")
                seed.fill(str(i))
                seed.press("Enter")
                page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')")
            pages.append(page)
        clicks = []
        for page in pages:
            page.locator(".st-key-pg-run button").click()
            clicks.append(time.perf_counter())
        busy, measured = None, 0.0
        if other_page:
            started = "document.querySelector(\"[data-testid='stProgress']\") || document.querySelector('iframe')"
            pages[0].wait_for_function(started)  # the run's progress bar (or, a short run, its result already)
            busy = first_frame_s(reader, url + "/")
            measured = time.perf_counter()
        out = []
        for page, t0 in zip(pages, clicks):
            page.wait_for_selector("iframe")
            out.append(time.perf_counter() - t0)
        browser.close()
    return out, quiet, busy if busy is not None and measured < clicks[0] + out[0] else None


def main() -> None:
    from batchscope.model.models import DEFAULT_MODEL

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.environ.get("BATCHSCOPE_MODEL", DEFAULT_MODEL))
    ap.add_argument("--users", type=int, default=2, help="browser sessions that press Run live at once (1-4)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for each result")
    ap.add_argument("--requests", type=int, default=None, help="the Playground's number of requests (1-32)")
    ap.add_argument("--max-tokens", type=int, default=None, help="the Playground's max / mean output tokens (1-400)")
    ap.add_argument("--other-page", action="store_true", help="time the Walkthrough opened while the run goes")
    ap.add_argument(
        "--post-script-gc",
        action="store_true",
        help="Streamlit's default gc.collect after every script run (off in .streamlit/config.toml): the old figure",
    )
    args = ap.parse_args()
    if not 1 <= args.users <= 4:
        raise SystemExit(f"--users must be in [1, 4], got {args.users}")
    if args.requests is not None and not 1 <= args.requests <= 32:
        raise SystemExit(f"--requests must be in [1, 32], got {args.requests}")
    if args.max_tokens is not None and not 1 <= args.max_tokens <= 400:
        raise SystemExit(f"--max-tokens must be in [1, 400], got {args.max_tokens}")
    sliders = {k: v for k, v in (("pg:n", args.requests), ("pg:maxtok", args.max_tokens)) if v is not None}
    wall, step, n = cli_figures(args.model, sliders)
    print(f"CLI: {wall:.1f} s for {n} steps (engine step {step * 1000:.1f} ms mean)")
    for users in sorted({1, args.users}):
        got, quiet, busy = app_figures(
            args.model,
            users,
            args.timeout,
            ("--runner.postScriptGC", "true") if args.post_script_gc else (),
            sliders,
            args.other_page,
        )
        print(
            f"app, {users} user(s): " + ", ".join(f"{g:.1f} s" for g in got) + f" from click to player; first user "
            f"{got[0] / wall:.2f}x the CLI, last {got[-1] / (wall * users):.2f}x {users} CLI runs"
        )
        if quiet is not None:
            during = f"{busy:.2f} s while it ran" if busy is not None else "the run ended before it was drawn"
            print(f"  the Walkthrough's first frame: {quiet:.2f} s before the run, {during}")


if __name__ == "__main__":
    main()
