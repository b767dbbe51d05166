"""The one owner of per-session state that crosses pages: the Playground's last live run, and the run in progress.

Pages read it through ``live_runs()`` and only the Playground writes it (``set_live_runs``), so no page depends on
another page's key names. (A page's own widget state stays with its widgets' keys; the player keeps the step.)
The run in progress (``live_job``) is a ``ui.live.LiveRun``: a background thread the Playground polls, with Cancel.
"""

from __future__ import annotations

import streamlit as st

from ui.live import LiveRun

RUNS_KEY = "playground:live-runs"  # run label -> trace records of the last live run
SETTINGS_KEY = "playground:live-settings"  # the knobs (JSON) that run was made with
JOB_KEY = "playground:live-job"  # the LiveRun in progress (or ended and not yet collected)


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
