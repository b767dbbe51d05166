"""Glossary: each term of LLM serving in a few sentences, its formula, and a "see it" link to the step of a recorded
trace where it happens (found in the trace by ``batchscope.glossary.entries``), plus TTFT / TPOT / ITL / E2E worked on
one real request of a trace you pick."""

from __future__ import annotations

import streamlit as st

from batchscope.app.common import badge, md, recorded_policies, recorded_view
from batchscope.app.links import step_link
from batchscope.app.page_trace import choose_trace
from batchscope.glossary.entries import SeeIt, entries, worked_example
from batchscope.glossary.finders import example_request
from batchscope.glossary.terms import Term
from batchscope.inputs.workload import list_scenarios
from batchscope.steplog.view import TraceView

INTRO = """
The words of LLM serving, each shown happening in a real run: **see it** opens the step of a recorded trace where
the term can be watched (found by a rule over the trace's log, so it follows the data). Latency terms are worked
out on a real request at the bottom of the page.
"""


@st.cache_resource(show_spinner=False)
def _see_it_places() -> list[tuple[Term, SeeIt | None]]:
    views = {(sc, p): recorded_view(sc, p) for sc in list_scenarios() for p in recorded_policies(sc)}
    return entries(views)


def _term(term: Term, where: SeeIt | None) -> None:
    with st.container(border=True, key=f"gloss-{term.key}"):
        st.markdown(f"**{term.name}**: {term.text}")
        if term.formula:
            st.code(term.formula, language=None, wrap_lines=True)  # long lines wrap: nothing hidden at 1280x720
        if where is None:
            st.caption("No shipped trace shows this yet (it needs a trace that records it).")
            return
        # a link's label stays on one line and is cut at the box's edge: what the step shows goes under it, wrapped
        step_link(where.target, f"See it: {where.scenario} ({where.policy}), step {where.step}")
        st.caption(md(where.what))


def _worked_example() -> None:
    st.header("TTFT, TPOT, ITL and E2E on one request")
    st.caption("On the step clock step k starts at time k and ends at k + 1; a token's time is the end of its step.")
    records, source, name = choose_trace(prefix="gloss", follow_url=False)
    view = TraceView(records)
    view.source, view.filename = source, name
    badge(view)
    default = example_request(view)
    ids = view.request_ids
    rid = st.selectbox(
        "Request",
        ids,
        index=ids.index(default["request_id"]) if default else 0,
        key="gloss:request",
        help="the default is the request that waited longest for its first token",
    )
    ex = worked_example(view, rid)
    if ex is None:
        st.info(f"{md(rid)} produced no token in this trace.")
        return
    st.markdown(
        f"**{md(ex['request_id'])}** arrived before step {ex['arrival_step']}, sampled its first token in step "
        f"{ex['first_token_step']} and its last in step {ex['finish_step']} ({ex['num_output_tokens']} output tokens)."
    )
    for line in ex["lines"]:
        st.markdown(f"- {md(line)}")


def page() -> None:
    st.title("Glossary")
    st.markdown(INTRO)
    for term, where in _see_it_places():
        _term(term, where)
    _worked_example()
