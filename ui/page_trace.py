"""Trace: load a trace file (validated, size-capped, plain JSON only), export the current one, read it raw."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.workload import list_scenarios
from steplog import trace
from steplog.view import TraceView
from ui.common import badge, md, query_int, recorded_records
from ui.panels import narration, step_panel
from ui.player import player
from ui.state import live_runs
from visuals.stepinfo import event_steps


def steps_table(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "step": s["step"],
                "t_end (s)": round(s["t_end"], 4),
                "batched tokens": s["num_batched_tokens"],
                "scheduled": ", ".join(f"{x['request_id']}:{x['kind'][0]}{x['num_tokens']}" for x in s["scheduled"]),
                "admitted": ", ".join(s["admitted"]),
                "finished": ", ".join(f["request_id"] for f in s["finished"]),
                "preempted": ", ".join(s["preempted"]),
                "waiting": len(s["waiting"]),
                "padding rows": len(s["padding_slots"]),
                "KV blocks used": s["kv"]["num_used_blocks"],
            }
            for s in records[1:-1]
        ]
    )


def _linked_option(options: list[str]) -> int:
    """The option a link asked for (``?scenario=..&policy=..`` or ``?live=policy``), else the first."""
    q = st.query_params
    wanted = f"live run: {q['live']}" if "live" in q else f"recorded: {q.get('scenario')} / {q.get('policy')}"
    return options.index(wanted) if wanted in options else 0


def choose_trace(prefix: str = "trace", follow_url: bool = True) -> tuple[list[dict], str, str]:
    """(records, source, name) of the trace the user picked: recorded, the last live run, or an uploaded file.

    ``prefix`` keys the widgets (other pages reuse this picker); with ``follow_url`` the URL's ``scenario`` and
    ``policy`` (or ``live``) choose the default and the choice is written back, so the page can be linked to."""
    names = sorted(list_scenarios(), key=lambda n: n != "seed-abcd")  # the walkthrough's story first
    options = [f"recorded: {sc} / {p}" for sc in names for p in ("continuous", "static")]
    live = live_runs()
    options += [f"live run: {p}" for p in live]
    options.append("upload a file…")
    index = _linked_option(options) if follow_url else 0
    choice = st.selectbox("Trace", options, index=index, key=f"{prefix}:choice")
    if follow_url:
        for name in ("scenario", "policy", "live"):
            st.query_params.pop(name, None)
    if choice.startswith("recorded"):
        sc, p = choice.split(": ", 1)[1].split(" / ")
        if follow_url:
            st.query_params.update(scenario=sc, policy=p)
        return recorded_records(sc, p), "recorded", f"{sc}-{p}.jsonl"
    if choice.startswith("live"):
        if follow_url:
            st.query_params["live"] = choice.split(": ", 1)[1]
        return live[choice.split(": ", 1)[1]], "live", ""
    up = st.file_uploader(
        f"Batchscope trace (.jsonl, at most {trace.MAX_TRACE_BYTES // 2**20} MB)",
        type=["jsonl", "json"],
        key=f"{prefix}:upload",
    )
    if up is None:
        st.stop()
    if up.size > trace.MAX_TRACE_BYTES:
        st.error(f"{md(up.name)} is {up.size / 1e6:.1f} MB; the limit is {trace.MAX_TRACE_BYTES / 1e6:.0f} MB.")
        st.stop()
    try:
        records = trace.loads(up.getvalue())
    except trace.TraceError as exc:
        st.error(f"{md(up.name)} is not a valid Batchscope trace: {md(exc)}", icon=":material/error:")
        st.stop()
    return records, "imported", up.name


def page() -> None:
    st.title("Trace")
    st.markdown(
        "The step log behind every picture: JSON Lines, one header, one line per step, one summary "
        "(documented in `docs/trace-format.md`, schema in `steplog/trace.schema.json`)."
    )
    records, source, name = choose_trace()
    view = TraceView(records)
    view.source, view.filename = source, name
    badge(view)
    st.download_button(
        "Export this trace (.jsonl)",
        trace.dumps(records),
        file_name=name or "trace.jsonl",
        mime="application/jsonl",
        key="trace:export",
    )
    with st.expander("Header", expanded=False):
        st.json(records[0])
    st.dataframe(steps_table(records), hide_index=True, width="stretch", height=260)
    st.caption("scheduled: request:kind and tokens (p = prefill chunk or recompute, d = decode), in batch order.")

    def render(step: int) -> None:
        narration(view, step)
        step_panel(view, step, key="trace:panel", window=20)
        with st.expander(f"Raw record of step {step}"):
            st.json(view.steps[step])

    initial = query_int("step", 0, 0, view.num_steps - 1)
    player(f"trace:{source}:{name}", view.num_steps, event_steps(view), render, initial=initial)
