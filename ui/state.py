"""The one owner of the session state that several pages share: the Playground's live run and its result.

Streamlit keeps ``st.session_state`` per browser session. The Playground writes its last result here; the Trace and
Metrics pages read it ("live run" traces). Keys are private to this module, so a page never depends on another
page's spelling of a key. Per-page widget state (knobs, the player's step) stays with its page.
"""

from __future__ import annotations

import streamlit as st

from ui.live import LiveRun

_RESULT, _SETTINGS, _JOB = "pg:result", "pg:result-settings", "pg:job"


def live_result() -> dict[str, list[dict]]:
    """The last live run of this session: policy -> trace records (``{}`` if none). A cancelled run's traces are
    partial (their summary says so)."""
    return st.session_state.get(_RESULT) or {}


def live_result_settings() -> str | None:
    """The settings (JSON text) the last live result was made with."""
    return st.session_state.get(_SETTINGS)


def set_live_result(result: dict[str, list[dict]], settings_key: str) -> None:
    st.session_state[_RESULT] = result
    st.session_state[_SETTINGS] = settings_key


def live_job() -> LiveRun | None:
    """This session's live run in progress (or just ended and not yet collected)."""
    return st.session_state.get(_JOB)


def set_live_job(job: LiveRun | None) -> None:
    if job is None:
        st.session_state.pop(_JOB, None)
    else:
        st.session_state[_JOB] = job
