"""The app runs with one set of settings however it is started: ``make app`` (Streamlit reads the checkout's
``.streamlit/config.toml``), ``batchscope app`` from an install (no such file: the same settings as flags,
``batchscope.tools.serve.streamlit_command``) and the page-load measurement (``scripts/measure_page_load.py``, which
starts it as ``make app`` does). Above all no file watcher: Streamlit's walks the whole tree, venvs included, and made
every page about 4x slower on a 2-core machine (issue 36)."""

from __future__ import annotations

import tomllib
from conftest import ROOT

from batchscope.tools.serve import streamlit_command


def shipped() -> dict[str, str]:
    """``section.name`` → value as a flag would carry it, from the checkout's config file."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    return {f"{section}.{k}": str(v).lower() for section, table in config.items() for k, v in table.items()}


def test_make_app_watches_no_file():
    assert shipped()["server.fileWatcherType"] == "none"


def test_an_installed_app_runs_with_the_checkouts_settings():
    flags = dict(arg[2:].split("=", 1) for arg in streamlit_command(8501, "localhost") if arg.startswith("--"))
    for name in ("server.port", "server.address", "server.headless"):  # where it listens: not a setting of the app
        flags.pop(name)
    assert {k: v.lower() for k, v in flags.items()} == shipped()


def test_the_measurement_starts_the_app_as_make_app_does():
    make_app = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "streamlit run" in line)
    script = (ROOT / "scripts" / "measure_page_load.py").read_text()
    assert make_app.split()[-1] == "batchscope/app/main.py" and "as_make_app=True" in script
