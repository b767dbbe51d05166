"""Streamlit glue for the browser player: one call embeds the self-contained player page (``batchscope.player.export``)
in a frame and offers it as a download.

Playback runs in the browser (no server rerun per step): the server builds the payload once per trace (cached)
and the frame animates it. The page URL's ``?step=`` and ``?speed=`` set where it starts and how fast it plays;
``?present=1`` is presenter mode; ``?tour=3:note;7:note`` a teacher's own key moments (``?tour=off``: none; else
the scenario's tour, ``batchscope.explain.moments``). When paused, the player writes its step back into the page URL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from batchscope.app.common import query_int
from batchscope.explain.moments import tour_for
from batchscope.figures.figure_frame import figures_html
from batchscope.inputs.workload import scenario_tour
from batchscope.player.export import packed_payload, plotly_file, render, url_number
from batchscope.player.playback import player_payload
from batchscope.steplog.view import TraceView

# Presenter mode (?present=1): the page is the player alone, edge to edge: no sidebar, header, title, intro, pickers
# or download button (every block of the page that does not hold the player's frame), and the frame as tall as the
# window (960x540 to 1920x1080 and beyond: the player fits its views to the frame, player.css), the page unscrolled.
TOGGLE_ROOM = 64  # px the player's controls leave free at the frame's right edge, under the presenter toggle
PRESENT_CSS = """<style>
[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl'], header[data-testid='stHeader'] {display: none}
[data-testid='stMainBlockContainer'] {padding: 0 4px !important; max-width: 100% !important}
[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'] {gap: 0 !important}
[data-testid='stMainBlockContainer'] iframe {display: block; height: 100vh !important}
[data-testid='stMainBlockContainer'] :has(> iframe) {height: 100vh !important}
[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'] > :not(:has(iframe)) {display: none !important}
[data-testid='stAppViewContainer'], [data-testid='stMain'] {overflow: hidden !important}
</style>"""


def content_key(views: list[TraceView]) -> str:
    """Identifies the traces (header and summary, which carry the creation time and every output)."""
    h = hashlib.sha256()
    for v in views:
        h.update(json.dumps([v.header, v.summary, v.num_steps], sort_keys=True, default=str).encode())
    return h.hexdigest()


@st.cache_data(show_spinner="Packing the trace for the player...", max_entries=16)
def cached_payload(
    key: str,
    _views: list[TraceView],
    title: str,
    window: int,
    _counters: list[dict] | Callable[[], list[dict]] | None,
    labels: tuple | None,
    span: tuple[int, int] | None,
    gauges: bool = False,
    table: bool = False,
    cost: bool = False,
) -> tuple[dict, str]:
    """The payload of ``_views`` and the same payload packed for the app's frame
    (``batchscope.player.export.packed_payload``), both built once per ``key`` (``content_key`` plus the options), with
    the tour of the traces' scenario (``batchscope.explain.moments.tour_for``: its moments found in these traces)."""
    tour = tour_for(_views, scenario_tour(_views[0].header.get("scenario")))
    labels_ = list(labels) if labels else None
    payload = player_payload(
        _views,
        title,
        window=window,
        counters=_counters() if callable(_counters) else _counters,
        labels=labels_,
        span=span,
        tour=tour,
        gauges=gauges,
        table=table,
        cost=cost,
    )
    return payload, packed_payload(payload)


STATIC = (
    Path(__file__).resolve().parent / "static"
)  # next to the app's script: served at app/static/ (enableStaticServing)


@st.cache_resource(show_spinner=False)
def static_plotly() -> str | None:
    """The address of plotly.js as the app serves it (``batchscope.player.export.plotly_file`` in ``static/``), relative
    to the page, so that the browser loads it once for every player of every visit instead of a 1.2 MB copy inlined in
    each; None (plotly.js inlined) if that folder cannot be written."""
    try:
        return f"app/static/{plotly_file(STATIC)}"
    except OSError:
        return None


def chart_html(rows: list[list], title: str) -> str:
    """The page of a chart frame: plotly figures in rows (``batchscope.figures.figure_frame.figures_html``: each row's
    figures side by side) with the plotly.js the players load, which the browser keeps compiled. Streamlit's own plotly
    element would load and run a bundle of its own on every visit (1.7-2.1 s on the Metrics page, measured). Built
    once where the figures do not change."""
    return figures_html(rows, title, plotly_src=static_plotly())


def chart_frame(html: str) -> None:
    """Draw a page of ``chart_html`` in a frame as tall as its content."""
    st.iframe(html, height="content")


def url_speed(default: float) -> float:
    """The URL's ``?speed=`` in steps per second (``batchscope.player.export.url_number``): clamped to [1, 120];
    ``default`` if absent or not a plain number (``nan``, ``inf``, ``abc``), so the page never receives a non-finite
    speed."""
    return url_number(st.query_params.get("speed"), default, 1.0, 120.0)


def web_player(
    views: list[TraceView],
    title: str,
    key: str,
    counters: list[dict] | Callable[[], list[dict]] | None = None,
    window: int = 12,
    initial: int | None = None,
    speed: float = 8,
    labels: list[str] | None = None,
    span: tuple[int, int] | None = None,
    gauges: bool = False,
    table: bool = False,
    cost: bool = False,
) -> None:
    """Embed the player for ``views`` (one trace, or 2 to 4 on one step clock) and a download button for the same page
    as a single HTML file. ``counters``: the cards over the views, or a function that makes them (called only when the
    payload is built, not on every visit); ``initial``: the first step (default: the URL's ``?step=``); ``labels``: each
    side's heading; ``span``: the steps packed (a long trace's, ``playback.player_payload``); ``gauges``: with vLLM's
    metrics over the steps under the views (``batchscope.figures.gauges``); ``table``: with the steps table of the first
    trace, which follows the player's step (``batchscope.figures.steps_table``); ``cost``: with the step-cost chart, a
    ring on the current step (``batchscope.figures.step_cost``)."""
    num_steps = max(v.num_steps for v in views)
    lo, hi = span or (0, num_steps - 1)
    ck = f"{content_key(views)}:{window}:{title}:{bool(counters)}:{gauges}:{table}:{cost}"
    labels_ = tuple(labels) if labels else None
    whole, packed = cached_payload(ck, views, title, window, counters, labels_, span, gauges, table, cost)
    payload = dict(whole)
    present = st.query_params.get("present") == "1"
    visit = dict(
        title=payload["title"],
        initial_step=query_int("step", lo, lo, hi) if initial is None else min(max(initial, lo), hi),
        speed=url_speed(speed),
        present=present,
    )
    if present:  # the presenter toggle (batchscope.app.main) sits over the frame's top right corner
        visit["host_corner"] = TOGGLE_ROOM
    payload.update(visit)
    if present:
        st.html(PRESENT_CSS)
    # the frame gets the packed payload and this visit's own fields over it; the download, the whole payload
    # presenter mode: PRESENT_CSS gives the frame the window's height (the 540 px here hold until the style applies)
    st.iframe(render(visit, plotly_src=static_plotly(), packed=packed), height=540 if present else "content")
    st.download_button(
        "Download this player as one HTML file",
        data=lambda: render(payload),  # plotly.js inlined: the file plays alone, offline
        file_name=f"{key}.html",
        mime="text/html",
        key=f"{key}:download",
        on_click="ignore",
        icon=":material/download:",
        help="plays offline from the file, with the same controls (?step=, ?speed=, ?present=1)",
    )
