"""Speculative decoding's metrics against hand-computed values, with vLLM's definitions: ITL is one gap per step that
yielded tokens (vLLM's ``inter_token_latency``), TPOT stays (last token - first token) / (n - 1), and the draft
counters and rates are those of ``vllm:spec_decode_*``."""

from __future__ import annotations

import pytest
from fakes import ScriptedModel

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.steplog.metrics import request_metrics, summarize

SCRIPT = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8]


@pytest.fixture(scope="module")
def records():
    """Prompt 1 2 3 4 1 2, max_tokens 6, k = 3, n-grams of 2-3 tokens:
    step 0 samples 3; step 1 verifies [4 1 2]: all kept + 3 (4 tokens); step 2 verifies [4 1 2] against 4 5: 4 kept,
    1 rejected, and the 6th token (4) ends it at max_tokens (5 dropped)."""
    cfg = EngineConfig(num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=3, block_size=4)
    return LLMEngine(ScriptedModel(SCRIPT), cfg).run([Request("A", SCRIPT[:6], SamplingParams(max_tokens=6))])


def test_the_schedule_is_the_hand_computed_one(records):
    assert [[t["token_id"] for t in st["sampled"]] for st in records[1:-1]] == [[3], [4, 1, 2, 3], [4]]
    assert [s.get("num_accepted_tokens") for st in records[1:-1] for s in st["scheduled"]] == [None, 3, 1]


def test_itl_is_per_step_and_tpot_per_token(records):
    (m,) = request_metrics(records)
    assert m["token_steps"] == [0, 1, 1, 1, 1, 2]
    assert m["itl_steps"] == [1, 1]  # steps 0 -> 1 -> 2; no zero gaps inside step 1
    assert m["tpot_steps"] == pytest.approx(2 / 5)  # (3 - 1) / (6 - 1)
    assert m["ttft_steps"] == 1 and m["e2e_steps"] == 3


def test_draft_counters_and_rates(records):
    (m,) = request_metrics(records)
    assert (m["num_drafts"], m["num_draft_tokens"], m["num_accepted_tokens"]) == (2, 6, 4)
    assert m["acceptance_rate"] == pytest.approx(4 / 6)
    assert m["mean_acceptance_length"] == pytest.approx(1 + 4 / 2)
    s = summarize(records)
    assert (s["num_drafts"], s["num_draft_tokens"], s["num_accepted_tokens"]) == (2, 6, 4)
    assert s["itl_steps"]["count"] == 2 and s["itl_steps"]["mean"] == 1


def test_without_speculation_the_rates_are_none():
    cfg = EngineConfig(block_size=4)
    recs = LLMEngine(ScriptedModel(SCRIPT), cfg).run([Request("A", SCRIPT[:6], SamplingParams(max_tokens=3))])
    s = summarize(recs)
    assert s["num_draft_tokens"] == 0 and s["acceptance_rate"] is None and s["mean_acceptance_length"] is None
    assert request_metrics(recs)[0]["itl_steps"] == [1, 1]
