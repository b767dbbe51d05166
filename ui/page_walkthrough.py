"""Walkthrough: the seed-abcd story, one step at a time, narrated from the log."""

from __future__ import annotations

import streamlit as st

from ui.common import badge, query_int, recorded_view
from ui.panels import checklist_panel, narration, queue_panel, text_panel
from ui.player import player
from visuals.budget import budget_bar
from visuals.kv import block_map
from visuals.slots import slot_grid
from visuals.stepinfo import event_steps
from visuals.timeline import timeline

INTRO = """
An LLM server keeps a **queue** of requests and, before every model step, builds the next batch under two
limits: a **token budget** (`max_num_batched_tokens`) and the free **KV-cache blocks**. A new request first
**prefills** (all its prompt tokens in parallel, possibly split into chunks), then **decodes** one token per step.
With **continuous batching**, a request that finishes leaves at once and a waiting one takes its slot at the very
next step. Four requests, A to D, on three slots; press Play or step through. Everything below is read from the step
log of a real run.
"""


def page() -> None:
    st.title("Walkthrough: one scheduling loop, step by step")
    st.markdown(INTRO)
    policy = st.segmented_control(
        "Policy",
        ["continuous", "static"],
        default=st.query_params.get("policy", "continuous"),
        key="walk:policy",
        help="the same requests under either policy",
    )
    policy = policy or "continuous"
    st.query_params["policy"] = policy
    view = recorded_view("seed-abcd", policy)
    badge(view)

    def render(step: int) -> None:
        narration(view, step)
        left, right = st.columns([1.15, 1])
        with left:
            st.plotly_chart(slot_grid(view, step), key="walk:slots", width="stretch")
            st.plotly_chart(budget_bar(view, step), key="walk:budget", width="stretch")
        with right:
            st.plotly_chart(block_map(view, step, columns=8), key="walk:blocks", width="stretch")
            st.caption(
                "Outlined = allocated this step; ✕ = released at the end of this step; grey = free. "
                "Each block holds block_size tokens; the number is its fill."
            )
            queue_panel(view, step)
            checklist_panel(view, step)
        text_panel(view, step)
        st.plotly_chart(timeline(view, step), key="walk:timeline", width="stretch")

    player("walk", view.num_steps, event_steps(view), render, initial=query_int("step", 0, 0, view.num_steps - 1))
