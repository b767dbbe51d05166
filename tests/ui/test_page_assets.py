"""The app's players load plotly.js from the app's static files (one download a browser keeps) instead of a 4.6 MB
copy inlined in every page; the downloaded file and the exported one still carry it inline and play alone."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import ROOT, recorded_pair

from visuals.export import plotly_file, plotly_js, render
from visuals.playback import player_payload


def test_a_page_player_refers_to_plotly_and_the_file_carries_it():
    payload = player_payload(recorded_pair("seed-abcd"), "t")
    page, alone = render(payload, plotly_src="app/static/plotly-x.min.js"), render(payload)
    assert '<script src="app/static/plotly-x.min.js"></script>' in page and plotly_js() not in page
    assert plotly_js() in alone and "app/static" not in alone
    assert len(page) < len(alone) - 4_000_000


def test_the_static_copy_is_written_once_with_the_umask_and_served_where_streamlit_looks(tmp_path):
    from streamlit import file_util

    old = os.umask(0o022)
    try:
        name = plotly_file(tmp_path / "static")
    finally:
        os.umask(old)
    path = tmp_path / "static" / name
    assert path.read_text(encoding="utf-8") == plotly_js() and oct(path.stat().st_mode & 0o777) == "0o644"
    before = path.stat().st_mtime_ns
    assert plotly_file(tmp_path / "static") == name and path.stat().st_mtime_ns == before
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    server = config[config.index("[server]") :]
    assert re.search(r"(?m)^enableStaticServing = true$", server.split("\n[", 1)[0])
    from ui.web_player import STATIC

    assert Path(file_util.get_app_static_dir(str(ROOT / "app.py"))) == STATIC
