"""Batchscope: see how an LLM serving engine schedules requests, static vs continuous batching, from real runs.

Thin glue: traces come from ``engine`` (recorded in assets/traces/ or run live), figures from ``visuals``.
Run with ``streamlit run app.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import streamlit as st

from engine import trace
from engine.config import EngineConfig
from engine.workload import list_scenarios, load_scenario
from visuals.kv import block_map, kv_usage
from visuals.slots import slot_occupancy
from visuals.timeline import timeline
from visuals.tracemodel import TraceView

TRACE_DIR = Path(__file__).resolve().parent / "assets" / "traces"
POLICIES = ("static", "continuous")

st.set_page_config(page_title="Batchscope", layout="wide")


@st.cache_data(show_spinner=False)
def recorded_trace(scenario: str, policy: str) -> list[dict]:
    return trace.read(TRACE_DIR / f"{scenario}-{policy}.jsonl")


@st.cache_resource(show_spinner="Loading SmolLM2-135M-Instruct (first time: ~20 s to convert the GGUF file)...")
def model_and_lock():
    """The default model, loaded once per process and shared read-only; the lock serialises live runs."""
    from engine.models import load_model

    return load_model(), threading.Lock()


def live_traces(scenario: str) -> dict[str, list[dict]]:
    from engine.llm import generate_trace

    loaded, lock = model_and_lock()
    sc = load_scenario(scenario)
    out = {}
    with lock:
        for policy in POLICIES:
            bar = st.progress(0.0, text=f"{policy}: starting")
            done = 0

            def on_step(rec, bar=bar, policy=policy):
                nonlocal done
                done += len(rec["finished"])
                bar.progress(done / len(sc["requests"]), text=f"{policy}: step {rec['step']}, "
                                                               f"{done}/{len(sc['requests'])} requests finished")

            config = EngineConfig(**{**sc.get("config", {}), "policy": policy})
            out[policy] = generate_trace(loaded, sc["requests"], config, scenario=scenario, on_step=on_step)
            bar.empty()
    return out


st.title("Batchscope: static vs continuous batching")
st.caption("Every picture below is drawn from the step log of a real run of a small inference engine "
           "(paged KV cache, token budget, chunked prefill) on SmolLM2-135M-Instruct.")

with st.sidebar:
    scenarios = list_scenarios()
    names = list(scenarios)
    wanted = st.query_params.get("scenario")  # shareable links: ?scenario=sixteen&step=120
    scenario = st.selectbox("Scenario", names, index=names.index(wanted) if wanted in names else 0,
                            format_func=lambda s: f"{s}: {scenarios[s][:60]}...")
    st.caption(load_scenario(scenario)["description"])
    if st.button("Run live on the default model", help="Runs the scenario under both policies on this machine"):
        st.session_state[f"live:{scenario}"] = live_traces(scenario)
    live = st.session_state.get(f"live:{scenario}")
    source = "live" if live else "recorded"
    if live and st.button("Back to the recorded traces"):
        del st.session_state[f"live:{scenario}"]
        st.rerun()

records = live if live else {p: recorded_trace(scenario, p) for p in POLICIES}
views = {p: TraceView(records[p]) for p in POLICIES}
num_steps = max(v.num_steps for v in views.values())

badge = "Live run" if source == "live" else "Recorded"
st.info(f"**{badge}** · " + " | ".join(f"{p}: {views[p].provenance()}" for p in POLICIES))

try:
    initial = min(max(int(st.query_params.get("step", 0)), 0), num_steps - 1)
except ValueError:
    initial = 0
step = st.slider("Step (drives both sides)", 0, num_steps - 1, initial, key=f"step:{scenario}")
st.query_params.update(scenario=scenario, step=str(step))

cols = st.columns(2)
for col, policy in zip(cols, POLICIES):
    view = views[policy]
    shown = min(step, view.num_steps - 1)  # the side that finished first holds its final state
    with col:
        st.subheader(policy.capitalize())
        pad = sum(len(s["padding_slots"]) for s in view.steps)
        c1, c2, c3 = st.columns(3)
        c1.metric("steps", view.num_steps)
        c2.metric("padding slot-steps", pad)
        c3.metric("preemptions", sum(len(s["preempted"]) for s in view.steps))
        if step >= view.num_steps:
            st.success(f"{policy} finished at step {view.num_steps - 1}; showing its final state.")
        st.plotly_chart(slot_occupancy(view, shown, num_steps), key=f"slots-{policy}")
        st.plotly_chart(kv_usage(view, shown, num_steps), key=f"kv-{policy}")
        st.plotly_chart(block_map(view, shown), key=f"blocks-{policy}")
        st.plotly_chart(timeline(view, shown, num_steps), key=f"timeline-{policy}")
