"""Compare two runs of one workload in lockstep: static vs continuous by default, or any two traces of the same
requests (recorded under other settings, the Playground's live runs) on one step clock."""

from __future__ import annotations

import streamlit as st

from engine.workload import list_scenarios
from steplog.view import TraceView
from ui.common import POLICIES, md, query_int, recorded_view
from ui.compare import compare, compare_pair
from ui.page_trace import upload_trace
from ui.state import live_runs
from visuals.compare_runs import config_diff, same_workload

INTRO = """
The same requests, the same model, the same limits: a **static** batch is formed only when the previous one has
completely finished, so a finished request's row idles as **padding** (grey, ✕) until the slowest member ends;
**continuous** batching hands a finished request's slot and KV blocks to the next waiting request at the very next
step. Run A plays on the left, run B on the right, on one step clock (by default A is static, B continuous). Pick
any other two runs of one workload below (a Playground run, or an uploaded trace such as your vLLM server's,
against a recorded one) to see what a setting changes.
"""


UPLOAD = "upload a file…"


def _runs() -> dict[str, TraceView]:
    """Every run the page can compare: the recorded traces (scenario / policy) and this session's live runs."""
    out = {f"{s} / {p}": recorded_view(s, p) for s in list_scenarios() for p in POLICIES}
    for label, records in live_runs().items():
        out[f"playground live run / {label}"] = TraceView(records, source="live")
    return out


def _pick(label: str, options: list[str], default: str, key: str) -> str:
    wanted = st.query_params.get(key, default)
    return st.selectbox(label, options, index=options.index(wanted) if wanted in options else 0, key=f"lock:{key}")


def page() -> None:
    st.title("Compare two runs: static vs continuous batching, and any other pair")
    st.markdown(INTRO)
    runs = _runs()
    names = list(runs)
    scenario = st.query_params.get("scenario", "sixteen")
    names.append(UPLOAD)
    left, right = st.columns(2)
    picked: dict[str, str] = {}
    chosen: dict[str, TraceView | None] = {}
    for col, side, default in ((left, "a", f"{scenario} / static"), (right, "b", f"{scenario} / continuous")):
        with col:
            picked[side] = _pick(f"Run {side.upper()}", names, default, side)
            chosen[side] = runs.get(picked[side])
            if picked[side] == UPLOAD and (uploaded := upload_trace(f"lock:{side}")) is not None:
                chosen[side] = TraceView(uploaded[0], source="imported", filename=uploaded[1])
    a, b = picked["a"], picked["b"]
    st.query_params.update(a=a, b=b)
    va, vb = chosen["a"], chosen["b"]
    if va is None or vb is None:
        st.info("Upload the trace to compare (a Batchscope trace or one from the vLLM tracer).")
        return
    ok, why = same_workload(va, vb)
    if not ok:
        st.error(f"These two runs are not of one workload, so a step-by-step comparison would mislead: {md(why)}")
        return
    num_steps = max(va.num_steps, vb.num_steps)
    initial = query_int("step", 0, 0, num_steps - 1)
    if {va.policy, vb.policy} == {"static", "continuous"} and va.policy != vb.policy and not config_diff(va, vb)[1:]:
        views = {va.policy: va, vb.policy: vb}
        compare(views, key=f"lock:{a}:{b}", initial=initial)
    else:
        compare_pair(va, vb, key=f"lock:{a}:{b}", initial=initial)
