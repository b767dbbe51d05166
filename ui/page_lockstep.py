"""Static vs continuous: the same requests under both policies, in lockstep."""

from __future__ import annotations

import streamlit as st

from engine.workload import list_scenarios
from ui.common import POLICIES, query_int, recorded_view
from ui.compare import compare

INTRO = """
The same requests, the same model, the same limits: on the left a **static** batch is formed only when the
previous one has completely finished, so a finished request's row idles as **padding** (grey, ✕) until the
slowest member ends. On the right, **continuous** batching hands a finished request's slot and KV blocks to the
next waiting request at the very next step. Both sides share one step clock.
"""


def page() -> None:
    st.title("Static vs continuous batching")
    st.markdown(INTRO)
    names = list(list_scenarios())
    wanted = st.query_params.get("scenario", "sixteen")
    scenario = st.selectbox("Scenario", names, index=names.index(wanted) if wanted in names else 0, key="lock:scenario")
    st.query_params["scenario"] = scenario
    views = {p: recorded_view(scenario, p) for p in POLICIES}
    num_steps = max(v.num_steps for v in views.values())
    compare(views, key=f"lock:{scenario}", initial=query_int("step", 0, 0, num_steps - 1))
