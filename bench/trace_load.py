"""How fast the Trace page opens a busy server's trace and changes step, in a real browser.

    .venv/bin/python -m bench.trace_load                     # synthesizes the default trace, prints the figures
    .venv/bin/python -m bench.trace_load --trace my.jsonl.gz --steps 5 --out-json /tmp/load.json

Starts ``streamlit run app.py`` on a free loopback port, opens the Trace page in Debian's Chromium (Playwright,
``--no-sandbox --disable-gpu --disable-background-networking``), uploads the trace and measures:

- **load**: from handing the file to the uploader until the page shows the vLLM provenance badge, the step-0
  narration and its figures, and Streamlit has stopped running (upload, parse, validation, first render);
- **step change**: from a click on "step >" (and on "next event") until the next step's narration and figures are
  drawn, repeated ``--steps`` times; the median and the worst are reported.

Without ``--trace`` it first writes ``scripts/synth_vllm_trace.py``'s default trace (2,000 requests, 5,000 steps, up
to 64 running, a 20,000-block pool) to a temporary ``.jsonl.gz``. A measurement, not a test: the figures depend on
the machine (this one: 2 shared cores).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
READY = (
    "!document.querySelector('[data-testid=\"stStatusWidget\"]') && "
    "document.querySelectorAll('.js-plotly-plot').length >= 3"
)


def start_app() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
           "--server.maxUploadSize", "400"]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("streamlit did not start")


def _wait_step(page, step: int) -> None:
    page.get_by_text(re.compile(rf"^Step {step}:")).first.wait_for()
    page.wait_for_function(READY)
    page.wait_for_function(
        f"[...document.querySelectorAll('.gtitle')].some(t => t.textContent.includes('at step {step}'))"
    )


def next_event(path: Path, after: int) -> int:
    """The step the "next event" button goes to from ``after``: an admission, a finish or a preemption."""
    from steplog import trace

    steps = trace.read(path)[1:-1]
    return next(s["step"] for s in steps[after + 1 :] if s["admitted"] or s["finished"] or s["preempted"])


def measure(trace_path: Path, steps: int) -> dict:
    from playwright.sync_api import sync_playwright

    proc, url = start_app()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            page = browser.new_page(viewport={"width": 1600, "height": 1800})
            page.set_default_timeout(120_000)
            page.goto(f"{url}/trace")
            page.wait_for_function(READY)
            page.locator(".st-key-trace-choice").click()
            page.get_by_role("option", name="upload a file").click()
            t0 = time.perf_counter()
            page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(trace_path))
            page.get_by_text("server,").first.wait_for()
            _wait_step(page, 0)
            load = time.perf_counter() - t0
            key = re.sub(r"[^A-Za-z0-9_-]", "-", f"trace:imported:{trace_path.name}")
            changes = []
            for k in range(1, steps + 1):
                t = time.perf_counter()
                page.locator(f".st-key-{key}-fwd button").first.click()
                _wait_step(page, k)
                changes.append(time.perf_counter() - t)
            target = next_event(trace_path, steps)
            t = time.perf_counter()
            page.locator(f".st-key-{key}-next-event button").first.click()
            _wait_step(page, target)
            jump = time.perf_counter() - t
            errors = page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {
        "trace": str(trace_path),
        "trace_bytes": trace_path.stat().st_size,
        "load_s": round(load, 2),
        "step_change_median_s": round(statistics.median(changes), 2),
        "step_change_max_s": round(max(changes), 2),
        "next_event_s": round(jump, 2),
        "errors_on_page": errors,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, help="trace to upload (default: a fresh synthetic busy-server trace)")
    ap.add_argument("--steps", type=int, default=5, help="step changes to time (default 5)")
    ap.add_argument("--out-json", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace
        if path is None:
            path = Path(tmp) / "busy-server.jsonl.gz"
            subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "synth_vllm_trace.py"), "--out", str(path)], check=True
            )
        result = measure(path, args.steps)
    print(json.dumps(result, indent=2))
    if args.out_json:
        args.out_json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["errors_on_page"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
