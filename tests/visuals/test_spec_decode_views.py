"""What the views draw and say of speculative decoding, checked against a hand-computed run (a scripted model:
prompt 1 2 3 4 1 2, 3 drafts, n-grams of 2-3): step 1 verifies [4 1 2], all kept (+1: 4 tokens); step 2 verifies
[4 1 2], 1 kept, and max_tokens 6 ends the request after its first token."""

from __future__ import annotations

import json

import pytest
from fakes import ScriptedModel

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.explain.narration import narrate
from batchscope.figures.budget import budget_segments
from batchscope.figures.slots import grid_title
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

SCRIPT = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8]


@pytest.fixture(scope="module")
def view() -> TraceView:
    cfg = EngineConfig(num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=3, block_size=4)
    records = LLMEngine(ScriptedModel(SCRIPT), cfg).run([Request("A", SCRIPT[:6], SamplingParams(max_tokens=6))])
    return TraceView(trace.loads("\n".join(map(json.dumps, records))))


def test_the_budget_bar_shows_the_drafts_apart(view):
    segs = [(s["kind"], s["num_tokens"], s["label"]) for s in budget_segments(view, 1)]
    assert segs == [
        ("decode", 1, "A decode"),
        ("speculative", 3, "A drafts (3 of 3 accepted)"),
        ("unused", 60, "unused"),
    ]
    assert [s["label"] for s in budget_segments(view, 2)][1] == "A drafts (1 of 3 accepted)"


def test_the_slot_grid_marks_speculative_cells(view):
    assert [c.kind for k in range(view.num_steps) for c in view.cells_at(k)] == [
        "prefill",
        "speculative",
        "speculative",
    ]
    assert view.cells_at(1)[0].token_text == "4123"  # every token the step yielded
    assert "· drafts" in grid_title(view, 1)


def test_narration_says_what_verification_kept(view):
    assert "A decodes with 3 draft tokens: all accepted, so it gains 4 tokens" in narrate(view, 1)
    two = narrate(view, 2)
    assert "A decodes with 3 draft tokens: 1 accepted, 2 rejected, so it gains 1 token (the request ends there)" in two
    assert "A hit max_tokens" in two
