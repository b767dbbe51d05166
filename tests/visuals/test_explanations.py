"""Every sentence that explains a step names only rules the step's scheduler has, and tells a preemption's cost as
the run paid it: over every step of every shipped trace (and their workloads re-run under the other queue order),
the narration, the teaching beats, the checklist and every quiz explanation."""

from __future__ import annotations

import pytest
from conftest import RECORDED_TRACES
from fakes import rerun

from batchscope.explain.beats import BEAT_TEXT, story_beats
from batchscope.explain.checklist import checklist_text
from batchscope.explain.narration import narrate
from batchscope.quiz.deck import questions
from batchscope.steplog import trace
from batchscope.steplog.decisions import comeback, decisions
from batchscope.steplog.reasons import QUEUE_ORDERS, VICTIM_RULES, queue_order
from batchscope.steplog.view import TraceView

QUIZ_EVERY = {"sixteen-static": 37, "sixteen-continuous": 17}  # long traces: the quiz on every n-th step


def _views():
    for path in RECORDED_TRACES:
        yield path.stem, TraceView(trace.read(path))
    other = {"fcfs": "priority", "priority": "fcfs"}
    for name in ("priority-continuous", "preemption-continuous"):
        path = next(p for p in RECORDED_TRACES if p.stem == name)
        policy = trace.read(path)[0]["config"]["scheduling_policy"]
        yield f"{name} under {other[policy]}", TraceView(rerun(path, scheduling_policy=other[policy]))


VIEWS = list(_views())


def _texts(name: str, view: TraceView, k: int) -> list[str]:
    out = [narrate(view, k), checklist_text(view, k)]
    out += [BEAT_TEXT[b] for b in story_beats(view).get(k, [])]
    if k % QUIZ_EVERY.get(name, 1) == 0:
        out += [q.explanation for q in questions(view, k, seed=k)]
    return out


@pytest.mark.parametrize(("name", "view"), VIEWS, ids=[n for n, _ in VIEWS])
def test_explanations_name_only_the_rules_the_step_used(name, view):
    order = queue_order(view.header)
    foreign_orders = [text for key, text in QUEUE_ORDERS.items() if key != order]
    named = set()
    for k in range(view.num_steps):
        rules = {p["rule"] for p in decisions(view, k).get("preemptions", [])}
        foreign_rules = [text for key, text in VICTIM_RULES.items() if key not in rules]
        for text in _texts(name, view, k):
            for phrase in foreign_orders:
                assert phrase not in text, (name, k, phrase, text)
            for phrase in foreign_rules:
                assert phrase not in text, (name, k, phrase, text)
            assert "has done the least work" not in text  # vLLM simply takes the last running request
            named |= {key for key in rules if VICTIM_RULES[key] in text}
    used = {p["rule"] for k in range(view.num_steps) for p in decisions(view, k).get("preemptions", [])}
    assert named == used, (name, named, used)  # the rule that did choose is named where it chose


@pytest.mark.parametrize(("name", "view"), VIEWS, ids=[n for n, _ in VIEWS])
def test_a_preemption_is_never_said_to_recompute_what_the_cache_gives_back(name, view):
    for k in range(view.num_steps):
        for p in decisions(view, k).get("preemptions", []):
            back = comeback(view, k, p["request_id"])
            text = narrate(view, k)
            assert f"({p['num_dropped_tokens']} token" in text
            if back is None:
                continue
            _, a = back
            if a["num_prefix_hit_tokens"]:
                assert f"{min(a['num_prefix_hit_tokens'], p['num_dropped_tokens'])} of those tokens are found" in text
                assert f"all {p['num_dropped_tokens']} are recomputed" not in text
            else:
                assert f"all {p['num_dropped_tokens']} are recomputed" in text


@pytest.mark.parametrize(("name", "view"), VIEWS, ids=[n for n, _ in VIEWS])
def test_a_first_token_is_never_called_the_next_one(name, view):
    for k in range(view.num_steps):
        text = narrate(view, k)
        prefills = {s["request_id"] for s in view.steps[k]["scheduled"] if s["kind"] == "prefill"}
        for s in view.steps[k]["sampled"]:
            if s["request_id"] not in prefills:
                continue
            clause = _clause(text, view.label(s["request_id"]))
            first = view.num_sampled_before(s["request_id"], k) == 0
            assert ("samples its first token" if first else "samples its next token") in clause, (name, k, clause)


def _clause(text: str, label: str) -> str:
    """The phrase of the step's work sentence about ``label`` (phrases are separated by '; ')."""
    sentences = text.split(". ")  # not "Step 13 was idle: ...", the sentence of an idle gap before the step
    work = next(s for s in sentences if s.startswith("Step ") and ": " in s and " idle: " not in s)
    return next((part for part in work.split("; ") if f"{label} " in part), "")
