"""The Quiz page's parts: the state at the start of a step (no narration of the step itself), the question and its
answer widget, the verdict with the explanation and "show me", and the session score."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from batchscope.app.common import chips, md
from batchscope.app.links import TITLES, step_link
from batchscope.app.web_player import web_player
from batchscope.figures.kv import block_map
from batchscope.figures.slots import slot_grid
from batchscope.quiz.deck import Question, history
from batchscope.quiz.facts import queue_at_start, running_at_start, start_state
from batchscope.steplog.view import TraceView

SCORE_KEY = "quiz:score"


def start_of_step(view: TraceView, step: int) -> None:
    """What a reader knows before ``step`` runs: the end state of ``step - 1`` (from the steps before ``step``
    only), the queue, and every request's progress."""
    st.subheader(f"Step {step} is about to run")
    q = {"Waiting (head first)": queue_at_start(view, step), "Running": running_at_start(view, step)}
    st.markdown(
        "".join(f"<div style='margin:2px 0'><b>{k}:</b> {chips(view, ids)}</div>" for k, ids in q.items()),
        unsafe_allow_html=True,
    )
    rows = pd.DataFrame(start_state(view, step)).rename(
        columns={"kv": "tokens with K/V", "outputs": "output tokens so far", "prompt": "prompt tokens"}
    )
    st.dataframe(rows, hide_index=True, width="stretch", height=min(38 + 35 * len(rows), 300))
    if step == 0:
        st.info("Nothing has run yet: the pool is empty and every arrived request is waiting.", icon=":material/info:")
        return
    past = history(view, step)
    left, right = st.columns([1.15, 1])
    left.plotly_chart(slot_grid(past, step - 1, window=8), key="quiz:slots", width="stretch")
    right.plotly_chart(block_map(past, step - 1), key="quiz:blocks", width="stretch")
    st.caption(
        f"Slots and KV blocks at the end of step {step - 1}: ✕ marks blocks released at its end (free when step "
        f"{step} starts); outlined blocks were allocated in step {step - 1}."
    )


def ask(q: Question, key: str):
    """The answer widget; returns what the user gave (``None`` until they answer)."""
    st.markdown(f"#### {md(q.text)}")
    if q.is_numeric:
        step = 0.01 if q.tolerance else 1.0
        return st.number_input("Your answer", value=None, step=step, key=key, placeholder="a number")
    return st.radio("Your answer", [c.label for c in q.choices], index=None, key=key)


def score() -> dict:
    return st.session_state.setdefault(SCORE_KEY, {"asked": 0, "right": 0, "streak": 0, "best": 0})


def record(right: bool) -> None:
    s = score()
    s["asked"] += 1
    s["right"] += int(right)
    s["streak"] = s["streak"] + 1 if right else 0
    s["best"] = max(s["best"], s["streak"])


def scoreboard() -> None:
    s = score()
    c = st.columns(3)
    c[0].metric("Score", f"{s['right']} / {s['asked']}")
    c[1].metric("Streak", s["streak"], help="right answers in a row")
    c[2].metric("Best streak", s["best"])


def verdict(view: TraceView, q: Question, given, right: bool) -> None:
    """Right or wrong, the right answer, the explanation from the log, and "show me"."""
    if right:
        st.success(f"Right: {md(q.answer_label)}", icon=":material/check_circle:")
    else:
        shown = given if isinstance(given, str) else f"{given:g}"
        st.error(f"Not quite: you said {md(shown)}; the answer is {md(q.answer_label)}.", icon=":material/cancel:")
    st.markdown(md(q.explanation))
    if q.target.page:
        step_link(q.target, f"Show me step {q.step} on the {TITLES[q.target.page]} page")
    else:
        with st.expander(f"Show me step {q.step}", icon=":material/visibility:"):
            # the player every page embeds, at the question's step: one renderer of a step, one legend
            web_player([view], view.header.get("scenario") or "quiz", key="quiz-showme", initial=q.step)
