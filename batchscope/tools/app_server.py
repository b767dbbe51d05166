"""The app and a browser for measurements and browser tests: ``streamlit run batchscope/app/main.py`` on a free loopback
port, and Debian's Chromium driven by Playwright (never a downloaded browser). Standard library only, apart from
Playwright where a browser is launched.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
APP = "batchscope/app/main.py"  # the app's script, from the checkout's root
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_app(
    env: dict[str, str] | None = None,
    timeout_s: float = 90,
    extra: tuple[str, ...] = (),
    root: Path = ROOT,
    as_make_app: bool = False,
) -> Iterator[str]:
    """Run the app until the block ends; yields its URL once ``/_stcore/health`` answers ``ok`` (polled, at most
    ``timeout_s`` seconds). ``env``: added to this process's environment (offline Hugging Face always);
    ``extra``: more ``streamlit run`` options; ``root``: the tree whose app runs (another commit's, to
    compare); ``as_make_app``: started exactly as ``make app`` starts it, every setting from the tree's
    ``.streamlit/config.toml`` (only the port, the loopback address and headless are given), for measurements;
    otherwise the file watcher and usage statistics are off whatever the tree's config says (an older commit's).
    Raises RuntimeError with the end of the server's output if it does not start."""
    port = free_port()
    script = APP if (root / APP).exists() else "app.py"  # a commit from before the one package had a root app.py
    where = ["--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1"]
    quiet = [] if as_make_app else ["--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
    cmd = [sys.executable, "-m", "streamlit", "run", script, *where, *quiet, *extra]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            cmd, cwd=root, env={**os.environ, **OFFLINE, **(env or {})}, stdout=log, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                        break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"streamlit did not start: {log.read().decode(errors='replace')[-2000:]}")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def launch_chromium(playwright):
    """Debian's Chromium, headless (``apt-get install chromium``; AssertionError if it is missing)."""
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: apt-get install chromium"
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
