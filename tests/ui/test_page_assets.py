"""The app's players load plotly.js from the app's static files (one download a browser keeps, and keeps fresh)
instead of a copy inlined in every page; the downloaded file and the exported one still carry it inline and play
alone. The bundle is plotly.js's basic one, of the version the ``plotly`` Python package bundles."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import ROOT, recorded_pair

from batchscope.player.export import PLOTLY_BUNDLE, PLOTLY_RELEASED, PLOTLY_TRACES, plotly_file, plotly_js, render
from batchscope.player.playback import player_payload


def test_a_page_player_refers_to_plotly_and_the_file_carries_it():
    payload = player_payload(recorded_pair("seed-abcd"), "t")
    page, alone = render(payload, plotly_src="app/static/plotly-x.min.js"), render(payload)
    assert '<script src="app/static/plotly-x.min.js"></script>' in page and plotly_js() not in page
    assert plotly_js() in alone and "app/static" not in alone
    assert len(page) < len(alone) - 1_000_000


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
    # dated as released, not as written: a browser keeps it fresh for a tenth of its age without asking again
    assert path.stat().st_mtime == PLOTLY_RELEASED
    os.utime(path, None)  # touched (a copy of the tree, a restore): dated again
    assert plotly_file(tmp_path / "static") == name and path.stat().st_mtime == PLOTLY_RELEASED
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    server = config[config.index("[server]") :]
    assert re.search(r"(?m)^enableStaticServing = true$", server.split("\n[", 1)[0])
    from batchscope.app.web_player import STATIC

    assert Path(file_util.get_app_static_dir(str(ROOT / "batchscope" / "app" / "main.py"))) == STATIC


def test_the_bundle_is_the_plotly_js_that_plotly_py_writes_its_figures_for():
    """The vendored bundle's own header names its kind and version; plotly.py's bundled plotly.js is the reference
    (an upgrade of plotly.py that moves plotly.js fails here until the bundle follows)."""
    from plotly.offline import get_plotlyjs_version

    head = PLOTLY_BUNDLE.read_text(encoding="utf-8")[:200]
    assert f"plotly.js (basic - minified) v{get_plotlyjs_version()}" in head
    assert PLOTLY_BUNDLE.name == f"plotly-basic-{get_plotlyjs_version()}.min.js"
    modules = set(re.findall(r'moduleType:"trace",name:"(\w+)"', plotly_js()))
    assert modules == PLOTLY_TRACES
    assert (PLOTLY_BUNDLE.parent / "LICENSE-plotly.js.txt").read_text(encoding="utf-8").startswith("MIT License")
