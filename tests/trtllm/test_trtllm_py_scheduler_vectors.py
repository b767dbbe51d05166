"""Every case of NVIDIA's ``test_py_scheduler.py`` (tests/reference/trtllm/py_scheduler_single_step.json): the
Python port's micro-batch walk, chunk sizing (FCFS, EQUAL_PROGRESS with reusable tokens, FORCE_CHUNK over
iterations), the capacity policies against a mock KV manager with fixed block counts, and one two-stage call."""

from __future__ import annotations

import pytest
from trtllm_vectors import load

from batchscope.trtllm_family.capacity import PeftLimit, schedule_capacity
from batchscope.trtllm_family.chunking import chunk_sizes
from batchscope.trtllm_family.micro_batch import MicroBatchConfig, schedule_micro_batch
from batchscope.trtllm_family.request import SeqState

DATA = load("py_scheduler_single_step.json")
DEFAULTS = DATA["request_defaults"]


class MockBudget:
    """The tests' mock KV manager: every request needs ``blocks_per_request`` blocks (to completion and for one
    step); the free count never changes; no reuse."""

    reuse_enabled = False

    def __init__(self, num_free_blocks: int, blocks_per_request: int) -> None:
        self.free, self.per_request = num_free_blocks, blocks_per_request

    def start(self) -> None:
        self.freed = 0

    def free_blocks(self) -> int:
        return self.free + self.freed

    def blocks_to_completion(self, seq: SeqState) -> int:
        return self.per_request

    def blocks_one_step(self, seq: SeqState) -> int:
        return self.per_request

    def first_new_block(self, seq: SeqState) -> None:
        return None

    def reusable_tokens(self, seq: SeqState) -> int:
        return 0

    def take(self, seq: SeqState) -> None:
        pass

    def pause(self, seq: SeqState) -> int:
        self.freed += self.per_request
        return self.per_request


def seq(spec: dict) -> SeqState:
    """A request built directly in its state (CONTEXT_INIT at position 0, or GENERATION_IN_PROGRESS)."""
    prompt_len = spec.get("prompt_len", DEFAULTS["prompt_len"])
    generating = spec["state"] == "GENERATION_IN_PROGRESS"
    return SeqState(
        request_id=str(spec["id"]),
        prompt=list(range(prompt_len)),
        max_new_tokens=DEFAULTS["max_new_tokens"],
        output=[0] if generating else [],
        context_position=prompt_len if generating else 0,
        has_kv=generating,
        num_draft_tokens=spec.get("num_draft_tokens", 0),
        beam_width=spec.get("beam_width", DEFAULTS["beam_width"]),
        lora_task_id=spec.get("lora_task_id"),
        estimated_reusable_tokens=spec.get("estimated_reusable_tokens", 0),
    )


def micro_config(scheduler: dict) -> MicroBatchConfig:
    chunking = scheduler.get("chunking")
    return MicroBatchConfig(
        max_batch_size=scheduler.get("max_batch_size", 64),
        max_num_tokens=scheduler.get("max_num_tokens"),
        chunking=(chunking["policy"], chunking["chunk_unit_size"]) if chunking else None,
        max_context_length=scheduler.get("max_num_tokens"),  # the Python port caps a chunk at max_num_tokens
    )


def check_micro(requests: list[SeqState], batch, exp: dict) -> None:
    ctx = [int(s.request_id) for s in batch.contexts]
    gen = [int(s.request_id) for s in batch.generations]
    checks = {
        "context_ids": ctx,
        "generation_ids": gen,
        "context_ids_set": sorted(ctx),
        "generation_ids_set": sorted(gen),
        "num_context": len(ctx),
        "num_generation": len(gen),
    }
    for key, value in exp.items():
        if key == "chunk_size":
            assert {rid: batch.chunk_sizes.get(rid, 0) for rid in value} == value
        elif key == "chunk_size_at_most":
            assert all(batch.chunk_sizes.get(rid, 0) <= most for rid, most in value.items())
        else:
            assert checks[key] == value, key


def run_micro(test: dict) -> None:
    config = micro_config(test["scheduler"])
    for call in test.get("calls", [test]):
        requests = [seq(r) for r in call["requests"]]
        inflight = {str(i) for i in call.get("inflight_ids", [])}
        check_micro(requests, schedule_micro_batch(requests, config, inflight), call["expected"])


def run_force_chunk(test: dict) -> None:
    """FORCE_CHUNK's chunk sizing alone, with the case's capacity (one call, or iterations until done)."""
    unit, capacity = test["scheduler"]["chunking"]["chunk_unit_size"], test["capacity"]
    requests = [seq(r) for r in test["requests"]]
    exp = test["expected"]
    if "chunk_size" in exp:
        sizes = chunk_sizes(requests, "FORCE_CHUNK", unit, capacity, None)
        assert {s.request_id: size for s, size in zip(requests, sizes)} == exp["chunk_size"]
        return
    positions = []
    for _ in exp["positions_after_iteration"]:
        contexts = [s for s in requests if s.is_context]
        for s, size in zip(contexts, chunk_sizes(contexts, "FORCE_CHUNK", unit, capacity, None)):
            s.context_position += size
            s.has_kv = s.has_kv or size > 0
        positions.append([s.context_position for s in requests])
    assert positions == exp["positions_after_iteration"]


def run_capacity(test: dict) -> None:
    cap = test["capacity"]
    peft = cap.get("mock_peft")
    result = schedule_capacity(
        [seq(r) for r in test["requests"]],
        cap["policy"],
        cap["max_num_requests"],
        MockBudget(**cap["mock_kv"]),
        PeftLimit(peft["pages_per_request"], peft["max_pages"]) if peft else None,
    )
    fitting = [int(s.request_id) for s in result.scheduled]
    checks = {
        "fitting_ids": fitting,
        "fitting_ids_set": sorted(fitting),
        "num_fitting": len(fitting),
        "num_paused": len(result.paused),
    }
    for key, value in test["expected"].items():
        assert checks[key] == value, key


def run_unified(test: dict) -> None:
    cfg = test["unified"]
    requests = [seq(r) for r in test["requests"]]
    result = schedule_capacity(requests, cfg["policy"], cfg["max_batch_size"], MockBudget(**cfg["mock_kv"]))
    config = micro_config({"max_batch_size": cfg["max_batch_size"], "max_num_tokens": cfg["max_num_tokens"]})
    check_micro(requests, schedule_micro_batch(result.scheduled, config), test["expected"])


def run_case(test: dict) -> None:
    if "unified" in test:
        run_unified(test)
    elif "capacity" in test and isinstance(test["capacity"], dict):
        run_capacity(test)
    elif (
        test["scheduler"].get("chunking", {})
        and test["scheduler"]["chunking"]["policy"] == "FORCE_CHUNK"
        and ("max_num_tokens" not in test["scheduler"])
    ):
        run_force_chunk(test)
    else:
        run_micro(test)


@pytest.mark.parametrize("test", DATA["tests"], ids=lambda t: t["test"])
def test_py_scheduler_case(test):
    run_case(test)


def test_every_py_scheduler_case_is_run():
    assert len(DATA["tests"]) == 31
