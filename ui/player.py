"""Playback: one step value per page (``st.session_state[KEY:step]``) is the single source of truth.

The controls and the stage live in one ``st.fragment`` that reruns on a timer while playing, so animation does
not block the app and clicks during playback work. Rules that keep the picture honest (shared case c14):

- every element is created inside the fragment (no writes into containers made outside it), so reruns replace
  elements instead of adding copies;
- a seek (slider, buttons) marks the step as set by the user, and the next timer tick continues from there;
- figures are rebuilt from (trace, step) on every tick: no client-side plotly frames that could go stale;
- a full rerun (a knob changed elsewhere) keeps the step, clamped to the new trace's length.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

SPEEDS = (1, 2, 4, 8, 16)  # steps per second


def player(key: str, num_steps: int, events: list[int], render: Callable[[int], None], initial: int = 0) -> None:
    """Draw playback controls and ``render(step)``. ``events``: steps the event buttons jump between."""
    ss = st.session_state
    step_key, play_key, speed_key, manual_key = f"{key}:step", f"{key}:playing", f"{key}:speed", f"{key}:manual"
    if step_key not in ss:
        ss[step_key] = initial
    ss[step_key] = min(max(int(ss[step_key]), 0), num_steps - 1)
    ss.setdefault(play_key, False)
    ss.setdefault(speed_key, 2)

    def seek(to: int) -> None:
        ss[step_key] = min(max(to, 0), num_steps - 1)
        ss[manual_key] = True

    def mark_manual() -> None:
        ss[manual_key] = True

    playing, speed = ss[play_key], ss[speed_key]

    @st.fragment(run_every=1.0 / speed if playing else None)
    def stage() -> None:
        if ss[play_key] and not ss.pop(manual_key, False):
            if ss[step_key] < num_steps - 1:
                ss[step_key] += 1
            else:
                ss[play_key] = False
                st.rerun()  # full rerun: the timer stops
        ss.pop(manual_key, None)
        step = ss[step_key]
        nxt = next((e for e in events if e > step), None)
        prv = next((e for e in reversed(events) if e < step), None)
        c = st.columns([1, 1, 1.4, 1, 1, 1.6])
        c[0].button(
            "event",
            icon=":material/skip_previous:",
            key=f"{key}:prev-event",
            on_click=seek,
            args=(prv if prv is not None else 0,),
            disabled=prv is None,
            help="previous admission, finish or preemption",
            width="stretch",
        )
        c[1].button(
            "step",
            icon=":material/chevron_left:",
            key=f"{key}:back",
            on_click=seek,
            args=(step - 1,),
            disabled=step == 0,
            width="stretch",
        )
        if c[2].button(
            "Pause" if ss[play_key] else "Play",
            key=f"{key}:play",
            type="primary",
            width="stretch",
            icon=":material/pause:" if ss[play_key] else ":material/play_arrow:",
        ):
            ss[play_key] = not ss[play_key]
            if ss[play_key] and step >= num_steps - 1:
                ss[step_key] = 0
            ss[manual_key] = True
            st.rerun()
        c[3].button(
            "step",
            icon=":material/chevron_right:",
            key=f"{key}:fwd",
            on_click=seek,
            args=(step + 1,),
            disabled=step >= num_steps - 1,
            width="stretch",
        )
        c[4].button(
            "event",
            icon=":material/skip_next:",
            key=f"{key}:next-event",
            on_click=seek,
            args=(nxt if nxt is not None else step,),
            disabled=nxt is None,
            help="next admission, finish or preemption",
            width="stretch",
        )
        c[5].selectbox(
            "speed",
            SPEEDS,
            key=speed_key,
            label_visibility="collapsed",
            format_func=lambda v: f"{v} steps/s",
            help="playback speed",
        )
        if ss[speed_key] != speed and ss[play_key]:
            st.rerun()  # a new timer interval needs a full rerun
        st.slider(
            "step",
            0,
            max(num_steps - 1, 1),
            key=step_key,
            on_change=mark_manual,
            label_visibility="collapsed",
            disabled=num_steps <= 1,
        )
        st.query_params["step"] = str(ss[step_key])
        render(ss[step_key])

    stage()
