"""The Playground's knobs keep their values, as its intro says, also across a visit to another page: Streamlit
drops the state of every widget a run does not draw, and a visit to the Metrics page is such a run."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from batchscope.app.playground_spec import RUN_MODES

pytestmark = [pytest.mark.app, pytest.mark.real_model]

# the app's navigation in miniature: one page drawn per run, as st.navigation does (AppTest cannot switch to the
# app's callable pages), so the Playground's widgets are not drawn while the Metrics page is shown
NAV = """
import streamlit as st
from batchscope.app import page_metrics, page_playground
(page_playground if st.session_state.get("nav", "playground") == "playground" else page_metrics).page()
"""

# widget key -> (kind, a value other than the default)
CHANGED = {
    "pg:prompts": ("selectbox", "short completions"),
    "pg:n": ("slider", 9),
    "pg:lengths": ("selectbox", "forced, equal"),
    "pg:maxtok": ("slider", 40),
    "pg:arrivals": ("selectbox", "Poisson, in steps (reproducible)"),
    "pg:rate": ("slider", 1.5),
    "pg:runs": ("selectbox", RUN_MODES[3]),
    "pg:batching": ("selectbox", "static"),
    "pg:seqs": ("slider", 6),
    "pg:budget": ("number_input", 128),
    "pg:chunked": ("toggle", False),
    "pg:blocks": ("number_input", 40),
    "pg:prefix": ("toggle", False),
    "pg:mixed": ("toggle", True),
    "pg:drafts": ("number_input", 2),
    "pg:ngram": ("slider", (2, 4)),
    "pg:temp": ("slider", 0.7),
    "pg:topk": ("number_input", 20),
    "pg:seed": ("number_input", 7),
    "pg:b:seqs": ("slider", 2),
    "pg:b:fullprompt": ("toggle", False),
}


def widget(at: AppTest, key: str):
    return getattr(at, CHANGED[key][0])(key=key)


def visit(at: AppTest, name: str) -> AppTest:
    at.session_state["nav"] = name
    at.run()
    assert not at.exception, at.exception
    return at


def test_knobs_keep_their_values_after_a_visit_to_another_page():
    at = AppTest.from_string(NAV, default_timeout=120)
    at.run()
    for key, (_, value) in CHANGED.items():
        widget(at, key).set_value(value).run()
        assert not at.exception, at.exception
    assert {key: widget(at, key).value for key in CHANGED} == {key: v for key, (_, v) in CHANGED.items()}
    visit(at, "metrics")
    assert at.title[0].value == "Metrics" and not at.slider  # the Playground's widgets are gone from this run
    visit(at, "playground")
    assert {key: widget(at, key).value for key in CHANGED} == {key: v for key, (_, v) in CHANGED.items()}
    assert "B differs from A in:** batching: static → continuous" in " ".join(m.value for m in at.markdown)


def test_run_bs_knobs_keep_their_values_while_another_mode_is_shown():
    at = AppTest.from_string(NAV, default_timeout=120)
    at.run()
    at.selectbox(key="pg:runs").set_value(RUN_MODES[3]).run()
    at.slider(key="pg:b:seqs").set_value(2).run()
    at.selectbox(key="pg:runs").set_value(RUN_MODES[1]).run()  # run B's knobs are not drawn now
    assert not at.slider(key="pg:seqs").disabled and "pg:b:seqs" not in [s.key for s in at.slider]
    at.selectbox(key="pg:runs").set_value(RUN_MODES[3]).run()
    assert not at.exception, at.exception
    assert at.slider(key="pg:b:seqs").value == 2


def test_draft_tokens_need_continuous_batching():
    """Drafts asked for a static run: a one-line message at the knob names the field and the way out; with
    continuous batching only, none."""
    at = AppTest.from_string(NAV, default_timeout=120)
    at.run()
    at.number_input(key="pg:drafts").set_value(3).run()
    assert not at.exception, at.exception
    texts = " ".join(e.value for e in at.error)
    assert "num_speculative_tokens=3 needs continuous batching" in texts
    at.selectbox(key="pg:runs").set_value(RUN_MODES[1]).run()
    assert "num_speculative_tokens" not in " ".join(e.value for e in at.error)


def test_mixed_chunks_need_sglangs_scheduler():
    """SGLang's --enable-mixed-chunk asked for a vLLM-style run: a one-line message at the knob says which batching
    takes it and Run live is off; with run A under SGLang's scheduler (A vs B), only run B's (a copy of A's toggle
    under continuous batching) until it is turned off."""
    at = AppTest.from_string(NAV, default_timeout=120)
    at.run()
    at.toggle(key="pg:mixed").set_value(True).run()
    assert not at.exception, at.exception
    texts = " ".join(e.value for e in at.error)
    assert texts.count("Mixed chunks are SGLang's --enable-mixed-chunk and need SGLang's scheduler") == 1, texts
    assert "--batching" not in texts  # the page has no such option; it names the Runs setting that takes them
    at.selectbox(key="pg:runs").set_value(RUN_MODES[2]).run()  # static only: the same, no other mode named
    assert "Mixed chunks are SGLang's" in " ".join(e.value for e in at.error)
    assert at.button(key="pg:run").disabled
    at.selectbox(key="pg:runs").set_value(RUN_MODES[3]).run()
    at.selectbox(key="pg:batching").set_value("sglang").run()
    errors = " ".join(e.value for e in at.error)  # run B copied A's toggle, under continuous batching
    assert "Run B: Mixed chunks are SGLang's" in errors and "Run A" not in errors
    at.toggle(key="pg:b:mixed").set_value(False).run()
    assert "enable_mixed_chunk" not in " ".join(e.value for e in at.error), [e.value for e in at.error]


def test_the_engines_rules_between_fields_are_checked_before_running():
    """A rule the engine checks across fields (SGLang's scheduler needs chunked prefill) is said at the knob before
    Run live, not as a failed run."""
    at = AppTest.from_string(NAV, default_timeout=120)
    at.run()
    at.selectbox(key="pg:runs").set_value(RUN_MODES[3]).run()
    at.selectbox(key="pg:batching").set_value("sglang").run()
    at.toggle(key="pg:chunked").set_value(False).run()
    assert not at.exception, at.exception
    errors = " ".join(e.value for e in at.error)
    assert "enable_chunked_prefill=False is out of range: true under batching sglang" in errors, errors
    assert at.button(key="pg:run").disabled
