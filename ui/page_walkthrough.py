"""Walkthrough: the seed-abcd story, one step at a time, narrated from the log."""

from __future__ import annotations

import streamlit as st

from ui.common import badge, recorded_view
from ui.web_player import web_player

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
    options = ["continuous", "static"]
    wanted = st.query_params.get("policy")  # any other value of ?policy= opens the default
    policy = st.segmented_control(
        "Batching",
        options,
        default=wanted if wanted in options else "continuous",
        key="walk:policy",
        help="the same requests under either batching mode",
    )
    policy = policy or "continuous"
    st.query_params["policy"] = policy
    view = recorded_view("seed-abcd", policy)
    badge(view)

    web_player([view], f"seed-abcd ({policy})", key="walk")
