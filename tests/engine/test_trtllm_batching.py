"""The TensorRT-LLM family in the engine (``--batching trtllm``, ``batchscope.trtllm_family.batching``): NVIDIA's own
capacity-scheduler test expectations (``tests/reference/trtllm/capacity_scheduler.json``) replayed through the whole
engine loop where the engine can state the test (requests of plain prompts, arrivals and block reuse; not preset chunk
sizes, drafts, LoRA page limits, priorities or disaggregated requests); greedy outputs equal transformers
``generate`` under each capacity policy; the settings it cannot take fail in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import hf_greedy, step_records
from fakes import FakeRunner, shared_stems, stem_requests
from trtllm.trtllm_vectors import tokens_of

from batchscope.engine.batching import validate_config
from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.engine.validation import RequestError
from batchscope.model.runner import ModelRunner

DATA = json.loads(
    (Path(__file__).resolve().parents[1] / "reference" / "trtllm" / "capacity_scheduler.json").read_text()
)
STATED = {"tokens", "arrives_at", "insert", "lora_task_id"}  # request fields the engine's workload can state


def stated(test: dict) -> bool:
    """Whether the engine can run ``test`` as NVIDIA wrote it (no LoRA page limit that binds, nothing else special)."""
    fields = {k for r in test["requests"] for k in r} - {"id", "prompt_len", "max_new_tokens"}
    inserts = {r.get("insert", "append") for r in test["requests"]}
    binding_lora = test["setup"].get("peft_max_device_pages", 10**9) < 100
    return fields <= STATED and inserts <= {"append"} and not binding_lora and "encoder_decoder" not in test["setup"]


CASES = [(t["test"], p) for t in DATA["tests"] if stated(t) for p in t["policies"]]


def run_test(test: dict, policy: str) -> list[dict]:
    setup = test["setup"]
    cfg = EngineConfig(
        batching="trtllm",
        capacity_policy=policy.lower(),
        block_size=setup["tokens_per_block"],
        num_kv_blocks=setup["num_blocks"],
        max_num_seqs=setup["max_num_requests"],
        max_num_batched_tokens=65536,  # the capacity tests run no micro-batch stage: a budget that never binds
        enable_prefix_caching=setup["enable_block_reuse"],
    )
    requests = [
        Request(
            str(r["id"]),
            tokens_of(r.get("tokens"), r["prompt_len"], r["id"]),
            SamplingParams(max_tokens=r["max_new_tokens"], ignore_eos=True),
            arrival_step=r.get("arrives_at", 0),
        )
        for r in test["requests"]
    ]
    return step_records(LLMEngine(FakeRunner(), cfg).run(requests))


@pytest.mark.parametrize(("name", "policy"), CASES)
def test_the_engine_runs_nvidias_capacity_expectations(name, policy):
    """At every checked iteration the engine's forward runs exactly the requests NVIDIA's test schedules, the run
    takes its number of iterations, and each pause happens where the test pauses."""
    test = next(t for t in DATA["tests"] if t["test"] == name)
    steps = run_test(test, policy)
    test = {**test, **test.get("expected_by_policy", {}).get(policy, {})}  # where the policies differ
    assert len(steps) == test["total_iterations"], f"{name} {policy}: {len(steps)} steps"
    for expected in test["expected"]:
        want = {str(s["id"]) for s in expected["scheduled"]}
        for it in range(expected["it_begin"], min(expected["it_end"], len(steps))):
            got = {s["request_id"] for s in steps[it]["scheduled"]}
            assert got == want, f"{name} {policy}, iteration {it}: ran {sorted(got)}, NVIDIA's test {sorted(want)}"
    pauses = [(st["step"], p) for st in steps for p in st["preempted"]]
    assert pauses == [(p["iteration"], str(p["id"])) for p in test.get("pauses", [])]


def test_enough_of_nvidias_tests_are_replayed():
    assert len(CASES) >= 15, CASES


def test_settings_it_cannot_take_fail_in_one_line():
    with pytest.raises(ConfigError, match="capacity_policy='evict' is out of range: one of guaranteed_no_evict"):
        validate_config(EngineConfig(batching="trtllm", capacity_policy="evict"))
    with pytest.raises(ConfigError, match=r"chunk_unit_size=64 is out of range: <= max_num_batched_tokens=32"):
        validate_config(EngineConfig(batching="trtllm", chunk_unit_size=64, max_num_batched_tokens=32))
    cfg = EngineConfig(batching="trtllm", block_size=4, num_kv_blocks=4)
    with pytest.raises(RequestError, match=r"needs 5 KV blocks .* reserves prompt \+ max_tokens tokens to completion"):
        LLMEngine(FakeRunner(), cfg).run([Request("A", [5] * 10, SamplingParams(max_tokens=7))])


PARITY = {
    "no-evict": dict(capacity_policy="guaranteed_no_evict"),
    "max-utilization-pauses": dict(capacity_policy="max_utilization"),
    "static-batch": dict(capacity_policy="static_batch"),
    "equal-progress": dict(capacity_policy="max_utilization", context_chunking="equal_progress"),
}


@pytest.mark.parametrize("name", PARITY)
def test_greedy_matches_generate(tiny_model, name):
    """Chunked prompts, block reuse, reservations to completion and pauses (outputs folded into the prompt and
    computed again): each request's greedy tokens are ``generate``'s."""
    workload = shared_stems()
    cfg = EngineConfig(
        batching="trtllm", block_size=4, max_num_seqs=4, num_kv_blocks=12, max_num_batched_tokens=16, **PARITY[name]
    )
    reqs = stem_requests(workload)
    records = LLMEngine(ModelRunner(tiny_model, cfg), cfg).run(reqs)
    steps = step_records(records)
    outputs = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    assert [outputs[f"r{i}"] for i in range(len(workload))] == [hf_greedy(tiny_model, p, m) for p, m in workload]
    paused = [p for st in steps for p in st["decisions"]["preemptions"]]
    assert all(p["rule"] == "trtllm_pause" for p in paused)
    assert bool(paused) == (PARITY[name]["capacity_policy"] == "max_utilization"), paused
    assert sum(n for st in steps for n in st["num_prefix_hit_tokens"].values()) > 0  # reuse of the stem's blocks
