"""The one owner of per-session state that crosses pages: presenter mode, the Playground's last live run, and the run
in progress.

Pages read it through ``live_runs()`` and only the Playground writes it (``set_live_runs``), so no page depends on
another page's key names. (A page's own widget state stays with its widgets' keys; the player keeps the step.)
Streamlit forgets a widget's value after a run that did not draw it (any visit to another page): the Playground
keeps its knobs' values here (``save_knobs``) and gives them back to its widgets when it is drawn again
(``restore_knobs``). The run in progress (``live_job``) is a ``batchscope.app.live.LiveRun``: a background thread the
Playground polls, with Cancel.
"""

from __future__ import annotations

import streamlit as st

from batchscope.app.live import LiveRun

RUNS_KEY = "playground:live-runs"  # run label -> trace records of the last live run
SETTINGS_KEY = "playground:live-settings"  # the knobs (JSON) that run was made with
JOB_KEY = "playground:live-job"  # the LiveRun in progress (or ended and not yet collected)
KNOBS_KEY = "playground:knobs"  # widget key -> value: the Playground's knobs as last drawn
PRESENT_KEY = "present"  # presenter mode (the toggle on every page, batchscope.app.main), mirrored as ?present=1


def presenting() -> bool:
    """Whether this session is in presenter mode: the URL's ``?present=1`` when the session starts, then the
    toggle's value (``PRESENT_KEY``). Mirrored into the URL on every run (a page switch drops the query), so each
    page's player reads ``?present=1`` (``batchscope.app.web_player``) and a copied address opens presenting."""
    if PRESENT_KEY not in st.session_state:
        st.session_state[PRESENT_KEY] = st.query_params.get("present") == "1"
    on = bool(st.session_state[PRESENT_KEY])
    if on:
        st.query_params["present"] = "1"
    else:
        st.query_params.pop("present", None)
    return on


def live_runs() -> dict[str, list[dict]]:
    """The last live run of this session, ``{run label: trace records}`` (empty before the first run). A cancelled
    run's traces are partial (their summary says so)."""
    return st.session_state.get(RUNS_KEY) or {}


def live_settings() -> str | None:
    """The Playground settings (JSON text) of the last live run, or None."""
    return st.session_state.get(SETTINGS_KEY)


def set_live_runs(runs: dict[str, list[dict]], settings: str) -> None:
    """Keep a finished (or cancelled) live run and the settings it was made with."""
    st.session_state[RUNS_KEY] = runs
    st.session_state[SETTINGS_KEY] = settings


def live_job() -> LiveRun | None:
    """This session's live run in progress (or just ended and not yet collected by the Playground)."""
    return st.session_state.get(JOB_KEY)


def set_live_job(job: LiveRun | None) -> None:
    if job is None:
        st.session_state.pop(JOB_KEY, None)
    else:
        st.session_state[JOB_KEY] = job


def save_knobs(prefix: str, exclude: tuple[str, ...] = ()) -> None:
    """Keep the value of every widget whose key starts with ``prefix`` (but ``exclude``: buttons have none to keep),
    as drawn in this run, beside the values kept before (a knob not drawn now, such as run B's outside A vs B,
    keeps its last value)."""
    kept = st.session_state.setdefault(KNOBS_KEY, {})
    for key in list(st.session_state):
        if isinstance(key, str) and key.startswith(prefix) and key not in exclude:
            kept[key] = st.session_state[key]


def restore_knobs(prefix: str) -> None:
    """Give each kept knob (``save_knobs``) whose widget state Streamlit dropped its value back, before the widgets
    are drawn; a knob still in the session keeps the value it has."""
    for key, value in st.session_state.get(KNOBS_KEY, {}).items():
        if key.startswith(prefix) and key not in st.session_state:
            st.session_state[key] = value
