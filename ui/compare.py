"""Static vs continuous on one step clock: the shared stage of the lockstep and playground pages."""

from __future__ import annotations

import streamlit as st

from steplog.view import TraceView
from ui.common import badge
from ui.panels import narration, step_panel
from ui.player import player
from visuals.stepinfo import event_steps
from visuals.timeline import timeline


def counters(views: dict[str, TraceView], step: int) -> None:
    s, c = views["static"], views["continuous"]
    pad_total = sum(len(x["padding_slots"]) for x in s.steps)
    pad_now = sum(len(x["padding_slots"]) for x in s.steps[: step + 1])
    m = st.columns(4)
    m[0].metric("static steps", s.num_steps)
    m[1].metric("continuous steps", c.num_steps)
    saved = s.num_steps - c.num_steps
    if saved >= 0:
        m[2].metric("steps saved by continuous", saved, f"{saved / s.num_steps:.0%} fewer" if s.num_steps else None)
    else:
        m[2].metric(
            "extra steps for continuous",
            -saved,
            f"{-saved / s.num_steps:.0%} more",
            delta_color="inverse",
            help="here the KV pool, not the slots, limits concurrency, and preemption costs recompute",
        )
    m[3].metric(
        "padding slot-steps wasted (static)",
        f"{pad_now} / {pad_total}",
        help="finished rows of a static batch that still run in the forward pass, up to this step / total",
    )


def compare(views: dict[str, TraceView], key: str, initial: int = 0) -> None:
    """Both policies side by side, driven by one step; same colour per request on both sides."""
    num_steps = max(v.num_steps for v in views.values())
    events = sorted(set(event_steps(views["static"])) | set(event_steps(views["continuous"])))
    for v in views.values():
        badge(v)

    def render(step: int) -> None:
        counters(views, step)
        cols = st.columns(2)
        for col, policy in zip(cols, ("static", "continuous")):
            view = views[policy]
            with col:
                st.subheader(f"{policy.capitalize()} · step {min(step, view.num_steps - 1)}")
                narration(view, min(step, view.num_steps - 1), beats=False)
                step_panel(view, step, key=f"{key}:{policy}", window=8, compact=True)
                st.plotly_chart(
                    timeline(view, min(step, view.num_steps - 1), num_steps),
                    key=f"{key}:{policy}:timeline",
                    width="stretch",
                )

    player(key, num_steps, events, render, initial=initial)
