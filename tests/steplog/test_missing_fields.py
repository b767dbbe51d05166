"""A trace that lacks a field says so and never contradicts itself (issue 33): a server traced before drafts were
recorded schedules a decode of 4 tokens that yields 2, with no ``draft_token_ids``. The reader infers 3 drafts and
1 accepted (``batchscope.steplog.spec_decode.infer_drafts``), marks them inferred, and every view tells the same story
as for the same workload traced with its drafts, apart from the word "inferred".

The reference is the engine's own trace of the workload *with* its drafts (recorded by the scheduler as it
scheduled them); the trace under test is that file with the draft fields removed, as an older tracer wrote it.
"""

from __future__ import annotations

import copy
import json

import pytest
from fakes import ScriptedModel

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.explain.narration import narrate
from batchscope.figures.budget import budget_segments
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize
from batchscope.steplog.perfetto import trace_events
from batchscope.steplog.spec_decode import num_drafts
from batchscope.steplog.view import TraceView

PATTERN = [3, 4, 5, 6] * 12


@pytest.fixture(scope="module")
def with_drafts() -> list[dict]:
    """Two requests over a repeating pattern (drafts mostly right), k = 3: speculative decodes on most steps."""
    cfg = EngineConfig(num_speculative_tokens=3, prompt_lookup_min=1, prompt_lookup_max=3, block_size=4)
    requests = [
        Request("A", PATTERN[:6], SamplingParams(max_tokens=24, ignore_eos=True)),
        Request("B", PATTERN[1:9], SamplingParams(max_tokens=9, ignore_eos=True), arrival_step=1),
    ]
    return trace.loads(trace.dumps(LLMEngine(ScriptedModel(PATTERN), cfg).run(requests)))


def strip_drafts(records: list[dict], kind: str = "decode") -> list[dict]:
    """The trace as a tracer that did not record drafts writes it: no ids, no acceptances, no speculative config;
    ``kind``: what it called such an entry (a tracer unaware of drafts may call 4 tokens a prefill)."""
    out = copy.deepcopy(records)
    out[0]["config"].pop("speculative_config", None)
    for st in out[1:-1]:
        for s in st["scheduled"]:
            if s.pop("draft_token_ids", None):
                s["kind"] = kind
            s.pop("num_accepted_tokens", None)
    return out


@pytest.mark.parametrize("kind", ["decode", "prefill"])
def test_drafts_are_inferred_and_marked(with_drafts, kind):
    """Every speculative entry gets back its draft count; its acceptances equal the recorded ones wherever the
    request goes on after the step (a request that stops among its drafts yields fewer: a lower bound there)."""
    stripped = trace.loads(trace.dumps(strip_drafts(with_drafts, kind)))
    speculative = 0
    for st, got in zip(with_drafts[1:-1], stripped[1:-1]):
        ending = {f["request_id"] for f in st["finished"]}
        for s, g in zip(st["scheduled"], got["scheduled"]):
            assert num_drafts(g) == num_drafts(s)
            assert g["kind"] == s["kind"]
            if not num_drafts(s):
                assert "drafts_inferred" not in g
                continue
            speculative += 1
            assert g["drafts_inferred"] is True
            if s["request_id"] in ending:
                assert g["num_accepted_tokens"] <= s["num_accepted_tokens"]
            else:
                assert g["num_accepted_tokens"] == s["num_accepted_tokens"]
    assert speculative >= 5  # not vacuous


def test_metrics_count_the_inferred_drafts(with_drafts):
    """``engine metrics`` reported ``num_drafts 0`` for such a trace; it now reports the drafts."""
    want, got = summarize(with_drafts), summarize(trace.loads(trace.dumps(strip_drafts(with_drafts))))
    assert got["num_drafts"] == want["num_drafts"] > 0
    assert got["num_draft_tokens"] == want["num_draft_tokens"]
    assert 0 < got["num_accepted_tokens"] <= want["num_accepted_tokens"]


def test_the_narration_is_the_same_apart_from_inferred(with_drafts):
    """Step by step the narration reads the same, but for "(inferred: ...)" and, where the request stops, the
    verdict the trace cannot give; never "decodes 1 token" for a decode of 4."""
    original = TraceView(with_drafts)
    inferred = TraceView(trace.loads(trace.dumps(strip_drafts(with_drafts))))
    marker = " (inferred: the trace does not record drafts)"
    compared = 0
    for k in range(original.num_steps):
        want, got = narrate(original, k), narrate(inferred, k)
        if marker not in got:
            assert got == want
            continue
        if not original.steps[k]["finished"]:
            assert got.replace(marker, "") == want
            compared += 1
        else:
            assert "(the request ends there)" in got
    assert compared >= 3
    assert all("decodes 1 token" not in narrate(inferred, k) or k == 0 for k in range(inferred.num_steps))


def test_budget_bar_and_perfetto_show_the_drafts(with_drafts):
    """The budget bar splits a decode of 4 into 1 token and 3 drafts; the Perfetto slice of a speculative decode
    lists every token the step sampled (it named only the last one), and says the drafts were inferred."""
    view = TraceView(trace.loads(trace.dumps(strip_drafts(with_drafts))))
    original = TraceView(with_drafts)
    for k in range(view.num_steps):
        assert [x["num_tokens"] for x in budget_segments(view, k)] == [
            x["num_tokens"] for x in budget_segments(original, k)
        ]
    slices = [e for e in trace_events(view)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "speculative"]
    assert slices and all(e["args"]["drafts_inferred"] for e in slices)
    step_tokens = {
        (st["step"], rid): [x["token_id"] for x in st["sampled"] if x["request_id"] == rid]
        for st in with_drafts[1:-1]
        for rid in {x["request_id"] for x in st["sampled"]}
    }
    assert any(len(e["args"]["sampled_token_ids"]) > 1 for e in slices)
    for e in slices:
        assert e["args"]["sampled_token_ids"] == step_tokens[(e["args"]["step"], e["name"])]
    assert json.loads(json.dumps(trace_events(original)))  # the recorded trace exports as before
