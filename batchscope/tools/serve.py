"""``batchscope app [--port 8501]``: the Streamlit app from an installed copy (a checkout runs ``make app``).

Streamlit runs the app's script, ``batchscope/app/main.py``, with the settings of the checkout's
``.streamlit/config.toml`` given as flags (an install has no such file): no usage statistics, no file watcher, the
player's plotly.js served from ``batchscope/app/static/``, uploads up to the trace reader's cap.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from batchscope.cli.common import HelpFormatter
from batchscope.steplog.trace import MAX_TRACE_BYTES

SCRIPT = Path(__file__).resolve().parents[1] / "app" / "main.py"


def streamlit_command(port: int, address: str) -> list[str]:
    """The ``streamlit run`` command line (argv) for the app on ``address:port``."""
    settings = {
        "browser.gatherUsageStats": "false",
        "global.disableWidgetStateDuplicationWarning": "true",
        "runner.postScriptGC": "false",
        "server.fileWatcherType": "none",
        "server.maxUploadSize": str(MAX_TRACE_BYTES // 2**20),
        "server.enableStaticServing": "true",
        "server.port": str(port),
        "server.address": address,
        "server.headless": "true",
    }
    return [sys.executable, "-m", "streamlit", "run", str(SCRIPT), *(f"--{k}={v}" for k, v in settings.items())]


def _serve(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65535:
        raise ValueError(f"--port: {args.port} is outside 1..65535")
    command = streamlit_command(args.port, args.address)
    print(f"Batchscope on http://{args.address}:{args.port} (Ctrl-C stops it)", file=sys.stderr)
    os.execv(command[0], command)  # the server replaces this process: its exit status is ours


def add_app(sub) -> None:
    """Add ``app`` to the command line's sub-commands (entry point ``batchscope.commands``)."""
    a = sub.add_parser(
        "app",
        help="run the Streamlit app from an installed copy",
        epilog="example:\n  batchscope app --port 8501",
        formatter_class=HelpFormatter,
    )
    a.add_argument("--port", type=int, default=8501, help="TCP port (default 8501)")
    a.add_argument("--address", default="localhost", help="address to listen on (default localhost)")
    a.set_defaults(handler=_serve)
