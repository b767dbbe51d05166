"""Helpers for the app's AppTest tests: open a page (with a URL query), click, read the browser player's payload
embedded in the page and the figures of its chart frames, wait for a live run to end."""

from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from batchscope.figures.figure_frame import read_figures
from batchscope.player.export import read_payload


def page(name: str, **query) -> AppTest:
    at = AppTest.from_string(f"from batchscope.app import {name}\n{name}.page()", default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def click(at, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def player_payload(at) -> dict:
    """The payload of the browser player embedded in the page (its frame's packed trace and this visit's fields)."""
    (frame,) = at.get("iframe")
    return read_payload(frame.proto.srcdoc)


def frame_figures(at) -> list[list[dict]]:
    """The plotly figures of each chart frame on the page (``batchscope.figures.figure_frame``), in page order."""
    return [read_figures(f.proto.srcdoc) for f in at.get("iframe") if 'id="bs-figures"' in f.proto.srcdoc]


def wait_for_live_run(at, timeout: float = 180) -> AppTest:
    """Rerun the page until this session's live run (a background thread) has ended and been collected."""
    deadline = time.monotonic() + timeout
    while "playground:live-job" in at.session_state:
        assert time.monotonic() < deadline, "the live run did not end"
        time.sleep(0.3)
        at.run()
        assert not at.exception, at.exception
    return at
