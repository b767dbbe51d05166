"""The Walkthrough's stories tell what their traces show: each run a story names ships, and each claim the "how much
to reserve" story makes of an engine holds in that engine's recorded run, read here from the raw step lines (not
with the fact model or the narration)."""

from __future__ import annotations

import pytest
from conftest import RECORDED, step_records

from batchscope.explain.stories import RESERVING, STORIES
from batchscope.steplog import trace


def steps_of(scenario: str, policy: str) -> list[dict]:
    return step_records(trace.read(RECORDED / f"{scenario}-{policy}.jsonl"))


@pytest.mark.parametrize("story", STORIES.values(), ids=list(STORIES))
def test_every_run_a_story_names_ships(story):
    assert len(story.policies) == len(story.names)
    for policy in story.policies:
        assert (RECORDED / f"{story.scenario}-{policy}.jsonl").exists(), policy


def evicted(steps: list[dict]) -> list[str]:
    return [r for st in steps for r in st["preempted"]]


def stalls(steps: list[dict]) -> list[int]:
    """Steps that run prompts only while a request already past its prompt is running and not scheduled."""
    out, started = [], set()
    for st in steps:
        rows = {s["request_id"]: s["kind"] for s in st["scheduled"]}
        if rows and set(rows.values()) == {"prefill"} and (set(st["running"]) & started) - set(rows):
            out.append(st["step"])
        started |= {r for r, kind in rows.items() if kind == "decode"}
    return out


def unwritten_at_admission(steps: list[dict], block_size: int) -> int:
    """Blocks a request holds past what its computed tokens need, the step it is admitted (reserved, unwritten)."""
    most = 0
    for st in steps:
        for s in st["scheduled"]:
            if s["request_id"] in st["admitted"]:
                held = len(st["kv"]["block_tables"][s["request_id"]])
                most = max(most, held - -(-(s["num_computed_tokens"] + s["num_tokens"]) // block_size))
    return most


def test_how_much_to_reserve_tells_each_engine_as_its_run_shows():
    runs = {p: steps_of(RESERVING.scenario, p) for p in RESERVING.policies}
    block_size = trace.read(RECORDED / "four-engines-tgi.jsonl")[0]["config"]["block_size"]
    # vLLM preempts, TensorRT-LLM's MAX_UTILIZATION pauses, SGLang retracts: each evicts at least once
    for policy in ("continuous", "trtllm_max_utilization", "sglang"):
        assert evicted(runs[policy]), policy
    # GUARANTEED_NO_EVICT and TGI never evict; TGI holds unwritten blocks from admission on
    for policy in ("trtllm", "tgi", "tgi_no_chunking"):
        assert not evicted(runs[policy]), policy
    assert unwritten_at_admission(runs["tgi"], block_size) > 0
    assert unwritten_at_admission(runs["continuous"], block_size) == 0  # vLLM: the next step's tokens only
    # without prefill chunking TGI prefills a new batch alone while a running request waits; with it, never
    assert stalls(runs["tgi_no_chunking"]) and not stalls(runs["tgi"])
    # the head waits sooner under no-evict than under vLLM: its first request other than the first starts later
    first = {p: min(st["step"] for st in steps if st["admitted"] and st["step"] > 0) for p, steps in runs.items()}
    assert first["trtllm"] > first["continuous"] and first["tgi"] > first["continuous"]
