"""Measure the browser player on the sixteen pair (static 1222 steps vs continuous 531) in headless Chromium.

Not a test: timings depend on the machine. Prints, for each chosen speed (steps per second), the effective rate
(a least-squares line through the shown step against time), its ratio to the chosen speed, frames drawn per
second, median draw time and backward jumps; the time to play all the steps at the top speed; and the scrubber's
redraw latency (from the input event to the frame after the one that drew the new step, i.e. once it is painted),
for a drag (small moves) and for jumps (far moves, which also turn the slot grid's page).

    .venv/bin/python scripts/measure_playback.py            # the exported HTML file, from file://
    .venv/bin/python scripts/measure_playback.py --app      # the Static vs continuous page of the app

Targets (issue 11): rate within 10 % of the chosen speed from 1 to 30 steps/s; top speed >= 60 steps/s (1222
steps in under 30 s); scrub redraw < 100 ms; zero backward jumps.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPEEDS = (1, 2, 4, 8, 16, 30, 60, 120)

# Logs (time, data-bs-step, last draw ms, draws so far) on every animation frame until the next RECORD or STOP.
RECORD = """() => { const log = window.__bsLog = [], id = window.__bsRec = (window.__bsRec || 0) + 1;
  const el = document.getElementById('bs-step');
  const f = (t) => { if (window.__bsRec !== id) return;
                     log.push([t, +el.dataset.bsStep, bsPlayer.stats.lastDrawMs, bsPlayer.stats.frames]);
                     requestAnimationFrame(f); };
  requestAnimationFrame(f); }"""
STOP = "window.__bsRec = (window.__bsRec || 0) + 1"

SCRUB = """async (k) => {
  const s = document.getElementById('bs-scrub'), el = document.getElementById('bs-step');
  const frame = () => new Promise((r) => requestAnimationFrame(r));
  const t0 = performance.now();
  s.value = String(k); s.dispatchEvent(new Event('input', { bubbles: true }));
  while (el.dataset.bsStep !== String(k)) await frame();
  await frame();  // the frame that drew step k has been painted
  return performance.now() - t0; }"""


def export_file(folder: Path) -> Path:
    from batchscope.compare.lockstep import lockstep_counters
    from batchscope.player.export import player_html
    from batchscope.steplog import trace
    from batchscope.steplog.view import TraceView

    pair = [
        TraceView(trace.read(ROOT / "batchscope" / "assets" / "traces" / f"sixteen-{p}.jsonl"))
        for p in ("static", "continuous")
    ]
    path = folder / "sixteen.html"
    path.write_text(player_html(pair, "sixteen", window=8, counters=lockstep_counters(*pair)), encoding="utf-8")
    print(f"exported {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return path


def slope(points: list[tuple[float, int]]) -> float:
    """Least-squares steps per second through (ms, step) points: a constant display lag does not bias it."""
    n = len(points)
    mt, ms = sum(t for t, _ in points) / n, sum(s for _, s in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 1000 * sum((t - mt) * (s - ms) for t, s in points) / var if var else 0.0


def ready_at_zero(target, speed: int) -> None:
    """Paused at step 0 with the speed slider at ``speed``, recording every frame (``RECORD``)."""
    target.evaluate("bsPlayer.pause(); bsPlayer.seek(0)")
    target.evaluate(
        "(v) => { const s = document.getElementById('bs-speed'); s.value = String(v);"
        " s.dispatchEvent(new Event('input', { bubbles: true })); }",
        speed,
    )
    target.evaluate(RECORD)


def play_at(target, speed: int, seconds: float) -> dict:
    """Play from step 0 at ``speed`` for ``seconds``. Rate: the slope of the shown step against time, over every
    frame from the first change of ``data-bs-step`` to the last one."""
    ready_at_zero(target, speed)
    target.evaluate("document.getElementById('bs-play').click()")
    time.sleep(seconds)
    log = target.evaluate("window.__bsLog")
    target.evaluate("bsPlayer.pause(); " + STOP)
    steps = [s for _, s, _, _ in log]
    moving = [i for i in range(1, len(steps)) if steps[i] != steps[i - 1]]
    playing = [(t, s) for t, s, _, _ in log[moving[0] : moving[-1] + 1]] if len(moving) > 1 else []
    rate = slope(playing) if playing else 0.0
    span_s = (log[-1][0] - log[0][0]) / 1000
    draws = log[-1][3] - log[0][3]
    return {
        "speed": speed,
        "rate": rate,
        "ratio": rate / speed,
        "fps": draws / span_s if span_s else 0,
        "draw_ms": statistics.median(d for _, _, d, _ in log),
        "backward": sum(b < a for a, b in itertools.pairwise(steps)),
        "first": steps[0],
        "last": steps[-1],
    }


def play_all(target, speed: int, last: int) -> tuple[float, int]:
    """Seconds from Play at step 0 to the last step at ``speed``, and backward jumps on the way."""
    ready_at_zero(target, speed)
    t0 = target.evaluate("performance.now()")
    target.evaluate("document.getElementById('bs-play').click()")
    target.wait_for_function(f"document.getElementById('bs-step').dataset.bsStep === '{last}'", timeout=120_000)
    t1 = target.evaluate("performance.now()")
    steps = [s for _, s, _, _ in target.evaluate("window.__bsLog")]
    target.evaluate(STOP)
    return (t1 - t0) / 1000, sum(b < a for a, b in itertools.pairwise(steps))


def scrub(target, positions: list[int]) -> list[float]:
    return [target.evaluate(SCRUB, k) for k in positions]


def summary(ms: list[float]) -> str:
    ms = sorted(ms)
    return f"median {statistics.median(ms):.1f} ms, p90 {ms[int(0.9 * (len(ms) - 1))]:.1f} ms, max {ms[-1]:.1f} ms"


def measure(target, num_steps: int, seconds: float) -> bool:
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'speed':>6} {'rate':>8} {'ratio':>6} {'fps':>5} {'draw ms':>8} {'backward':>8}")
    ok = True
    for speed in SPEEDS:
        r = play_at(target, speed, max(seconds, 6 / speed + 2))  # at least 6 steps at the slow speeds
        print(
            f"{speed:>6} {r['rate']:>8.2f} {r['ratio']:>6.3f} {r['fps']:>5.1f} {r['draw_ms']:>8.1f} {r['backward']:>8}"
        )
        ok &= r["backward"] == 0 and (speed > 30 or abs(r["ratio"] - 1) <= 0.10)
    secs, back = play_all(target, SPEEDS[-1], num_steps - 1)
    print(
        f"all {num_steps} steps at {SPEEDS[-1]} steps/s: {secs:.2f} s ({(num_steps - 1) / secs:.1f} steps/s), "
        f"{back} backward jumps"
    )
    ok &= back == 0 and (num_steps - 1) / secs >= 60
    target.evaluate("bsPlayer.pause()")
    drag = scrub(target, list(range(300, 420, 3)))
    jumps = scrub(target, [17, 900, 240, 1100, 530, 60, 777, 1221, 0, 640])
    print(f"scrub drag (40 moves of 3 steps): {summary(drag)}")
    print(f"scrub jumps (10 far moves):       {summary(jumps)}")
    ok &= max(drag) < 100 and statistics.median(jumps) < 100
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("targets met" if ok else "TARGETS MISSED")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", action="store_true", help="measure the app's Static vs continuous page instead")
    ap.add_argument("--seconds", type=float, default=3.0, help="play time per speed (at least 6 steps' worth)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from batchscope.tools.app_server import launch_chromium, streamlit_app

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(90_000)
        ready = "window.bsPlayer && bsPlayer.state.drawn >= 0"
        if args.app:
            with streamlit_app() as url:
                page.goto(f"{url}/compare?scenario=sixteen&step=0")
                target = page.wait_for_selector("iframe").content_frame()
                target.wait_for_function(ready)
                print(f"app page {url}/compare?scenario=sixteen (player in its frame)")
                ok = measure(target, 1222, args.seconds)
        else:
            page.goto(export_file(Path(tmp)).as_uri())
            page.wait_for_function(ready)
            ok = measure(page, 1222, args.seconds)
        browser.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
