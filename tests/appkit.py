"""Helpers for the app's AppTest tests: open a page (with a URL query), click, read the browser player's payload
embedded in the page and the figures of its chart frames, wait for a live run to end."""

from __future__ import annotations

import time
from html.parser import HTMLParser

import pandas as pd
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


class _Tables(HTMLParser):
    """The rows of every ``<table>`` in some HTML, each row its cells' text (header cells included)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def small_tables(at) -> list[pd.DataFrame]:
    """The small tables the page draws as HTML (``batchscope.app.common.small_table``), in page order, each as a
    frame of its text (first row: the header), read back from the HTML the browser gets."""
    out = []
    for element in at.get("html"):
        parser = _Tables()
        parser.feed(element.proto.body)
        out += [pd.DataFrame(rows[1:], columns=rows[0]) for rows in parser.tables]
    return out


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
