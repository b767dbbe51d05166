"""How fast the Trace page opens a busy server's trace and plays it, in a real browser.

    .venv/bin/python -m batchscope.tools.trace_load                     # synthesizes the default trace, prints the
figures
    .venv/bin/python -m batchscope.tools.trace_load --trace my.jsonl.gz --steps 20 --out-json /tmp/load.json
    .venv/bin/python -m batchscope.tools.trace_load --baseline none       # this tree only, no comparison

Starts ``streamlit run batchscope/app/main.py`` as ``make app`` does, on a free loopback port
(``batchscope/tools/app_server.py``), opens the Trace page in
Debian's Chromium (Playwright, headless), uploads the trace and measures, in the browser player the page embeds:

- **load**: from handing the file to the uploader until the player has drawn step 0 with the vLLM provenance badge
  on the page (upload, parsing, validation of every record, packing the player's payload, first draw);
- **step change**: from a click on "step ▶" until the next step is drawn and painted, ``--steps`` times;
  **next event** the same for "event »"; the median and the worst are reported;
- **playback**: the rate the player really keeps at 30 and 60 steps/s (steps advanced / seconds, over 3 s), and
  any backward jump.

With ``--baseline REV`` (default ``BASELINE``, the commit before the msgspec reader) it measures that commit's tree
too (``git archive`` into a temporary folder; nothing is checked out), in the same run, and prints this tree's
figures as ratios to it: **open** (baseline load / this load: 3.0 means three times faster), **step change**
(baseline median / this median) and **reader** (``batchscope.steplog.trace.loads`` of the same bytes in a fresh
interpreter, seconds, without the browser: the part of the load the reader owns).

Without ``--trace`` it first writes ``scripts/synth_vllm_trace.py``'s default trace (2,000 requests, 5,000 steps, up
to 64 running, a 20,000-block pool) to a temporary ``.jsonl.gz``. A measurement, not a test: the figures depend on
the machine (this one: 2 shared cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from batchscope.tools.app_server import ROOT, launch_chromium, streamlit_app

BASELINE = "1d3006d2"  # the last commit with the strict Python reader (18.5 s to open the default trace)
# Seconds for batchscope.steplog.trace.loads of the bytes of a file, in a fresh interpreter whose first path is the
# tree's.
READER = (  # a tree from before the one package (2026-12-05) has a top-level ``steplog``
    "import sys,time\ntry:\n from batchscope.steplog import trace\nexcept ImportError:\n from steplog import trace\n"
    "d=open(sys.argv[1],'rb').read();t=time.perf_counter();trace.loads(d);print(time.perf_counter()-t)"
)

# Click a player button and resolve once the step it leads to is drawn and painted: [ms, step drawn].
CLICK = """async (id) => {
  const frame = () => new Promise((r) => requestAnimationFrame(r)), before = bsPlayer.state.drawn;
  const t0 = performance.now();
  document.getElementById(id).click();
  while (bsPlayer.state.drawn === before) await frame();
  await frame();
  return [performance.now() - t0, bsPlayer.state.drawn]; }"""
# Play at a speed for some seconds: [steps advanced, seconds, backward jumps].
PLAY = """async ([speed, seconds]) => {
  const s = document.getElementById('bs-speed'), el = document.getElementById('bs-step');
  s.value = String(speed); s.dispatchEvent(new Event('input', { bubbles: true }));
  const frame = () => new Promise((r) => requestAnimationFrame(r)), seen = [];
  document.getElementById('bs-play').click();
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000) { seen.push(+el.dataset.bsStep); await frame(); }
  const t1 = performance.now();
  document.getElementById('bs-play').click();
  let back = 0;
  for (let i = 1; i < seen.length; i++) if (seen[i] < seen[i - 1]) back++;
  return [seen[seen.length - 1] - seen[0], (t1 - t0) / 1000, back]; }"""


def _ms(xs: list[float]) -> dict:
    return {"median_ms": round(statistics.median(xs), 1), "max_ms": round(max(xs), 1)}


def reader_s(trace_path: Path, root: Path = ROOT) -> float:
    """Seconds ``root``'s ``batchscope.steplog.trace.loads`` takes for the bytes of ``trace_path`` (a fresh
    interpreter)."""
    out = subprocess.run([sys.executable, "-c", READER, str(trace_path)], cwd=root, check=True, capture_output=True)
    return float(out.stdout.split()[-1])


def export_tree(rev: str, into: Path) -> Path:
    """The tracked files of commit ``rev`` in ``into`` (``git archive``; the working tree is not touched)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(trace_path: Path, steps: int, root: Path = ROOT) -> dict:
    from playwright.sync_api import sync_playwright

    with streamlit_app(extra=("--server.maxUploadSize", "400"), root=root) as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1800})
        page.set_default_timeout(180_000)
        page.goto(f"{url}/trace")
        page.wait_for_selector("iframe")
        page.locator(".st-key-trace-choice").click()
        page.get_by_role("option", name="upload a file").click()
        t0 = time.perf_counter()
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(trace_path))
        page.get_by_text("server,").first.wait_for()
        frame = page.wait_for_selector("iframe").content_frame()
        frame.wait_for_function("window.bsPlayer && bsPlayer.state.drawn === 0")
        load = time.perf_counter() - t0
        changes = [frame.evaluate(CLICK, "bs-fwd")[0] for _ in range(steps)]
        events = [frame.evaluate(CLICK, "bs-next-event") for _ in range(3)]
        play = {}
        for speed in (30, 60):
            n, secs, back = frame.evaluate(PLAY, [speed, 3.0])
            play[f"{speed}_steps_per_s"] = {"rate": round(n / secs, 1), "backward_jumps": back}
        errors = page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count()
        browser.close()
    return {
        "trace": str(trace_path),
        "trace_bytes": trace_path.stat().st_size,
        "load_s": round(load, 2),
        "step_change": _ms(changes),
        "next_event": {**_ms([e[0] for e in events]), "steps": [e[1] for e in events]},
        "playback": play,
        "errors_on_page": errors,
        "load_average": round(os.getloadavg()[0], 2),
        "reader_s": round(reader_s(trace_path, root), 2),
    }


def compare(now: dict, before: dict) -> dict:
    """This tree's figures as ratios to the baseline's (above 1: this tree is faster)."""
    return {
        "open": round(before["load_s"] / now["load_s"], 2),
        "step_change": round(before["step_change"]["median_ms"] / now["step_change"]["median_ms"], 2),
        "reader": round(before["reader_s"] / now["reader_s"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, help="trace to upload (default: a fresh synthetic busy-server trace)")
    ap.add_argument("--steps", type=int, default=20, help="step changes to time (default 20)")
    ap.add_argument("--out-json", type=Path)
    ap.add_argument("--baseline", default=BASELINE, help=f"commit to compare with, or 'none' (default {BASELINE})")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace
        if path is None:
            path = Path(tmp) / "busy-server.jsonl.gz"
            subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "synth_vllm_trace.py"), "--out", str(path)], check=True
            )
        result = measure(path, args.steps)
        if args.baseline != "none":
            before = measure(path, args.steps, export_tree(args.baseline, Path(tmp) / "baseline"))
            result = {**result, "baseline": {"rev": args.baseline, **before}, "ratio": compare(result, before)}
    print(json.dumps(result, indent=2))
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["errors_on_page"] == 0 and result.get("baseline", {}).get("errors_on_page", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
