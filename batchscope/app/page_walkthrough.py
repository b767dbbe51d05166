"""Walkthrough: a story one step at a time, narrated from the log: continuous batching (seed-abcd), SGLang's
scheduler against vLLM's (vllm-vs-sglang) or how much KV cache four engines reserve (four-engines); the stories are
``batchscope.explain.stories``."""

from __future__ import annotations

import streamlit as st

from batchscope.app.common import badge, recorded_view
from batchscope.app.web_player import web_player
from batchscope.explain.stories import STORIES


def _story() -> str:
    wanted = st.query_params.get("story")
    story = st.segmented_control(
        "Story",
        list(STORIES),
        default=wanted if wanted in STORIES else "seed-abcd",
        format_func=lambda s: STORIES[s].title,
        key="walk:story",
        help="which scenario to follow",
    )
    story = story or "seed-abcd"
    if story == "seed-abcd":
        st.query_params.pop("story", None)
    else:
        st.query_params["story"] = story
    return story


def page() -> None:
    st.title("Walkthrough: one scheduling loop, step by step")
    story = STORIES[_story()]
    st.markdown(story.intro)
    options = list(story.policies)
    wanted = st.query_params.get("policy")  # any other value of ?policy= opens the story's default
    policy = st.segmented_control(
        "Scheduler" if "sglang" in options else "Batching",
        options,
        default=wanted if wanted in options else options[0],
        format_func=lambda p: story.names[options.index(p)],
        key=f"walk:policy:{story.scenario}",
        help="the same requests under either",
    )
    policy = policy or options[0]
    st.query_params["policy"] = policy
    view = recorded_view(story.scenario, policy)
    badge(view)

    key = "walk" if story.scenario == "seed-abcd" else "walk2"
    web_player([view], f"{story.scenario} ({policy})", key=key, cost=True)
