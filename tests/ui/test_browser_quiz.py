"""Real browser on the Quiz and Glossary pages: answer one question right and one wrong, follow "show me" to the
Walkthrough at the step, and follow a glossary "see it" link to the Trace page at its step. The right answers are
computed here from the trace with ``batchscope.quiz.deck`` (deterministic given trace, step and seed)."""

from __future__ import annotations

import re

import pytest
from conftest import RECORDED
from test_browser_pages import open_page, player_frame

from batchscope.quiz.deck import question
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView
from batchscope.tools.app_server import streamlit_app

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def server():
    """The app on a free loopback port (no live runs here, so no model)."""
    with streamlit_app() as url:
        yield url


def answer(page, q, right: bool) -> None:
    """Answer ``q`` once the page shows it: until the rerun ends Streamlit keeps the last question's widget (maybe a
    radio group where this question wants a number), so the locators match only this question's kind of widget."""
    page.get_by_text(q.text).wait_for()
    if q.is_numeric:
        box = page.locator('[data-testid="stNumberInput"]').filter(has_text="Your answer").locator("input")
        box.fill(str(q.value if right else q.value + 1))
        box.press("Enter")
    else:
        label = next(c.label for c in q.choices if q.is_right(c.label) == right)
        group = page.locator('[data-testid="stRadio"]').filter(has_text="Your answer")
        group.get_by_text(label, exact=True).click()
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')")
    page.locator(".st-key-quiz-check button").click()


def test_quiz_right_then_wrong_then_show_me(browser, server):
    view = TraceView(trace.read(RECORDED / "seed-abcd-continuous.jsonl"))
    page = open_page(browser, server + "/?step=5", 2200)  # the Walkthrough, left at another step
    player_frame(page, step=5, min_charts=4).get_by_text("Step 5:").first.wait_for()
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Quiz", exact=True).click()
    page.get_by_text("is about to run").first.wait_for()
    page.locator(".st-key-quiz-how").get_by_text("choose").click()
    box = page.locator(".st-key-quiz-step input")
    box.fill("2")
    box.press("Enter")
    page.get_by_text("Step 2 is about to run").wait_for()
    answer(page, question(view, 2, 0), right=True)
    page.get_by_text("Right:").wait_for()
    page.get_by_text("Score").first.wait_for()
    page.locator(".st-key-quiz-next button").click()
    q = question(view, 2, 1)
    page.get_by_text(q.text).wait_for()
    answer(page, q, right=False)
    page.get_by_text(f"the answer is {q.answer_label}").wait_for()
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == "1 / 2"
    page.get_by_role("link", name="Show me step 2 on the Walkthrough page").click()
    page.wait_for_function("location.search.includes('step=2') && !location.pathname.includes('quiz')")
    player_frame(page, step=2, min_charts=4).get_by_text("Step 2: B and C decode").first.wait_for()
    page.close()


def test_glossary_renders_and_see_it_lands_on_its_step(browser, server):
    page = open_page(browser, server + "/glossary", 2400)
    page.get_by_text("Chunked prefill").first.wait_for()
    # the first of the terms seen in the preemption trace: Preemption (head-of-line blocking and vLLM's metrics follow)
    link = page.get_by_role("link", name=re.compile(r"^See it: preemption \(continuous\), step \d+")).first
    step = int(re.search(r"step (\d+)", link.inner_text()).group(1))
    link.click()
    page.wait_for_function(f"location.pathname.endsWith('/trace') && location.search.includes('step={step}')")
    frame = player_frame(page, step=step, min_charts=4)  # the Trace page's views play in the browser player
    frame.get_by_text(f"Step {step}: ").first.wait_for()
    frame.get_by_text("was preempted").first.wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
