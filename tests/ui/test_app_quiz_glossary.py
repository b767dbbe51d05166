"""The Quiz and Glossary pages under Streamlit's AppTest, and the Trace page following a link's query."""

from __future__ import annotations

import pytest
from appkit import page, player_payload
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.app


def links(at) -> list:
    return [el.proto for el in at.get("page_link")]


def answer_widget(at):
    radios = [r for r in at.radio if (r.key or "").startswith("quiz:answer")]
    return radios[0] if radios else next(n for n in at.number_input if (n.key or "").startswith("quiz:answer"))


def test_quiz_scores_a_right_and_a_wrong_answer_and_links_to_the_step():
    at = page("page_quiz")
    at.radio(key="quiz:how").set_value("choose").run()
    at.number_input(key="quiz:step").set_value(2).run()
    assert any(m.value.startswith("#### ") for m in at.markdown)
    assert not any("Step 2:" in m.value for m in at.markdown)  # no narration of the asked step before answering
    for attempt in ("wrong", "right"):
        w = answer_widget(at)
        q = at.session_state["quiz:last"]
        if hasattr(w, "options"):
            w.set_value(next(o for o in w.options if q.is_right(o) == (attempt == "right"))).run()
        else:
            w.set_value(q.value if attempt == "right" else q.value + 1).run()
        at.button(key="quiz:check").click().run()
        assert not at.exception, at.exception
        assert at.success if attempt == "right" else at.error, attempt
        link = links(at)[-1]
        assert link.page == "walkthrough" and "step=2" in link.query_string
        at.button(key="quiz:next").click().run()
    score = at.session_state["quiz:score"]
    assert (score["asked"], score["right"], score["streak"]) == (2, 1, 1)


def test_drill_walks_the_trace_one_step_at_a_time():
    at = page("page_quiz")
    at.segmented_control(key="quiz:mode").set_value("Drill").run()
    assert at.session_state["quiz:last"].step == 0
    at.button(key="quiz:next").click().run()
    assert at.session_state["quiz:last"].step == 1


def test_glossary_lists_every_term_with_a_see_it_link():
    at = page("page_glossary")
    labels = [link.label for link in links(at)]
    assert len(labels) == 38  # every term, prefix caching, SGLang's six and the seven of TGI and TensorRT-LLM
    assert any(lb.startswith("See it: preemption (continuous), step 27") for lb in labels)
    assert any(lb.startswith("See it: shared-prefix (continuous), step 0") for lb in labels)
    assert any("TPOT = (E2E − TTFT) / (n − 1) = (11 − 4) / (8 − 1)" in m.value for m in at.markdown)


def test_trace_page_opens_the_linked_scenario_at_the_linked_step():
    at = page("page_trace", scenario="preemption", policy="continuous", step="27")
    assert at.selectbox(key="trace:choice").value == "recorded: preemption / continuous"
    p = player_payload(at)
    assert p["initial_step"] == 27 and [v["policy"] for v in p["views"]] == ["continuous"]


def test_trace_page_opens_the_live_run_a_quiz_links_to():
    from batchscope.app.common import TRACE_DIR
    from batchscope.app.state import RUNS_KEY
    from batchscope.steplog import trace

    at = AppTest.from_string("from batchscope.app import page_trace\npage_trace.page()", default_timeout=120)
    at.session_state[RUNS_KEY] = {"static": trace.read(TRACE_DIR / "seed-abcd-static.jsonl")}
    at.query_params["live"] = "static"
    at.query_params["step"] = "5"
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="trace:choice").value == "live run: static"
    p = player_payload(at)
    assert p["initial_step"] == 5 and [v["policy"] for v in p["views"]] == ["static"]


def test_presenter_mode_puts_the_question_and_the_figures_higher():
    """Presenter mode (``?present=1``) leaves out the Quiz's intro and the run's badge, and the Metrics page's
    definitions, so that the question and the figures reach a 1280x720 screen (the question was below it); the
    definitions stay in the page's normal mode and on each card's help."""
    from batchscope.app.page_quiz import INTRO

    quiz, presenting = page("page_quiz"), page("page_quiz", present="1")
    first = INTRO.strip()[:40]
    assert any(first in m.value for m in quiz.markdown)
    assert not any(first in m.value for m in presenting.markdown)
    assert any(m.value.startswith("#### ") for m in presenting.markdown)  # the question is asked
    metrics, shown = page("page_metrics", scenario="seed-abcd"), page("page_metrics", scenario="seed-abcd", present="1")
    defined = "computed from the traces with vLLM's definitions"
    assert any(defined in m.value for m in metrics.markdown)
    assert not any(defined in m.value for m in shown.markdown)
    assert [(m.label, m.value) for m in shown.metric] == [(m.label, m.value) for m in metrics.metric]
