"""Quiz: predict the next step of a real trace. The state at the start of a step, a question whose answer is in
that step's log, then the verdict, the explanation and "show me"; a session score, and a drill that walks a whole
trace one question per step. Questions come from ``batchscope.quiz.deck`` (pure functions of the trace)."""

from __future__ import annotations

import streamlit as st

from batchscope.app.common import badge
from batchscope.app.page_trace import choose_trace
from batchscope.app.quiz_panels import ask, record, scoreboard, start_of_step, verdict
from batchscope.app.state import presenting
from batchscope.quiz.deck import question, random_step
from batchscope.quiz.kinds import KIND_TITLES
from batchscope.steplog.view import TraceView

INTRO = """
Predict what the scheduler does next. Each question shows the state when a step **starts** (the end of the
step before) and asks about something the log of that step records: who is admitted, how many tokens a request
computes, how many KV blocks are in use afterwards, who is preempted or finishes, and more. Every question and
answer comes from the trace, so a live run or an imported file gives its own questions.
"""
MODES = ("One question", "Drill")


def _advance(mode: str, num_steps: int) -> None:
    ss = st.session_state
    ss["quiz:seed"] = ss.get("quiz:seed", 0) + 1
    if mode == "Drill":
        ss["quiz:drill"] = min(ss.get("quiz:drill", 0) + 1, num_steps)


def _pick_step(view: TraceView, mode: str, seed: int) -> int | None:
    ss = st.session_state
    if mode == "Drill":
        st.caption("The drill walks the trace from step 0, one question per step.")
        if ss.get("quiz:drill-trace") != ss["quiz:trace"]:  # another trace: start its drill from step 0
            ss["quiz:drill-trace"], ss["quiz:drill"] = ss["quiz:trace"], 0
        step = ss.setdefault("quiz:drill", 0)
        if step >= view.num_steps:
            return None
        st.progress(step / view.num_steps, text=f"Step {step} of {view.num_steps - 1}")
        return step
    how = st.radio("Step", ["random", "choose"], horizontal=True, key="quiz:how")
    if how == "random":
        return random_step(view, f"{ss.get('quiz:trace')}:{seed}")
    return int(st.number_input("Step number", 0, view.num_steps - 1, 0, key="quiz:step"))


def page() -> None:
    st.title("Quiz: predict the next step")
    present = presenting()  # presenter mode: the question on the screen, not below the intro and the run's badge
    if not present:
        st.markdown(INTRO)
    ss = st.session_state
    top = st.columns([2, 1])
    with top[0]:
        records, source, name = choose_trace(prefix="quiz", follow_url=False)
    view = TraceView(records)
    view.source, view.filename = source, name
    ss["quiz:trace"] = f"{source}:{name}:{view.policy}"
    mode = top[1].segmented_control("Mode", MODES, default=MODES[0], key="quiz:mode") or MODES[0]
    if not present:
        badge(view)
    scoreboard()
    seed = ss.setdefault("quiz:seed", 0)
    step = _pick_step(view, mode, seed)
    if step is None:
        st.success("Drill complete: every step of this trace has had its question.", icon=":material/flag:")
        if st.button("Restart the drill", key="quiz:restart"):
            ss["quiz:drill"] = 0
            st.rerun()
        return
    q = question(view, step, seed)
    if q is None:
        st.info(f"Nothing to ask about step {step}.")
    else:
        _quiz(view, q, mode, seed)
    st.button("Next question", key="quiz:next", type="primary", on_click=_advance, args=(mode, view.num_steps))


def _quiz(view, q, mode: str, seed: int) -> None:
    """The start state, the question and, once answered, the verdict (scored once per question)."""
    ss = st.session_state
    ss["quiz:last"] = q  # the question on screen (tests read it)
    start_of_step(view, q.step)
    st.caption(f"Question kind: {KIND_TITLES[q.kind]}")
    qid = f"{ss['quiz:trace']}|{mode}|{q.step}|{seed}|{q.kind}"
    given = ask(q, key=f"quiz:answer:{qid}")
    answers = ss.setdefault("quiz:answers", {})
    if qid not in answers and st.button("Check", key="quiz:check"):
        if given is None:
            st.warning("Pick or type an answer first.")
        else:
            answers[qid] = (given, q.is_right(given))
            record(answers[qid][1])
            st.rerun()  # the scoreboard above shows the new score
    if qid in answers:
        verdict(view, q, *answers[qid])
