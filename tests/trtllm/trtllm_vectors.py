"""The loops NVIDIA's TensorRT-LLM scheduler unit tests simulate (tests/reference/trtllm/README.md), driving the
stages of ``batchscope.trtllm_family`` directly: the capacity loop (checks before anything advances, advance in
increasing id order, pauses folding generated tokens into the prompt), the micro-batch loop (micro-batch slots
round robin, checks after) and the chunk-sizing loop. Each runner returns what the vectors check, so a test compares
it with NVIDIA's numbers (and a mutated expectation must fail)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from batchscope.trtllm_family.capacity import PeftLimit, schedule_capacity
from batchscope.trtllm_family.chunking import chunk_sizes, fit_draft_tokens
from batchscope.trtllm_family.kv_blocks import KVBlockManager
from batchscope.trtllm_family.kv_budget import BlockBudget
from batchscope.trtllm_family.micro_batch import MicroBatchConfig, schedule_micro_batch
from batchscope.trtllm_family.request import DEFAULT_PRIORITY, SeqState

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "trtllm"
MAX_ITERATIONS = 2000  # every vector ends far sooner; a runaway loop fails instead of spinning


def load(name: str) -> dict:
    return json.loads((REFERENCE / name).read_text())


def tokens_of(spec: dict | None, prompt_len: int, rid: int) -> list[int]:
    """A request's prompt token ids (``iota``, ``constant``, ``concat``); without a spec, ids of its own."""
    if spec is None:
        return [1_000_000 * (rid + 1) + i for i in range(prompt_len)]
    if spec["kind"] == "iota":
        return list(range(spec["start"], spec["start"] + spec["length"]))
    if spec["kind"] == "constant":
        return [spec["value"]] * spec["length"]
    if spec["kind"] == "concat":
        return [t for part in spec["parts"] for t in tokens_of(part, 0, rid)]
    raise ValueError(f"unknown token spec {spec}")


def seq_from(spec: dict) -> SeqState:
    """A capacity or micro-batch test request as a fresh context (or a disaggregated-generation request)."""
    rid = spec["id"]
    return SeqState(
        request_id=str(rid),
        prompt=tokens_of(spec.get("tokens"), spec["prompt_len"], rid),
        max_new_tokens=spec["max_new_tokens"],
        num_draft_tokens=spec.get("num_draft_tokens", 0),
        beam_width=spec.get("beam_width", 1),
        lora_task_id=spec.get("lora_task_id"),
        priority=spec.get("priority", DEFAULT_PRIORITY),
        disagg_init=spec.get("initial_state") == "DISAGG_GENERATION_INIT",
        context_chunk_size=spec.get("context_chunk_size"),
        estimated_reusable_tokens=spec.get("estimated_reusable_tokens", 0),
    )


def insert_by_priority(active: list[SeqState], seq: SeqState) -> None:
    """Place ``seq`` after every request of higher or equal priority."""
    at = next((i for i, other in enumerate(active) if other.priority < seq.priority), len(active))
    active.insert(at, seq)


def emit(seq: SeqState) -> None:
    """One generated token (a value of the request's own, so folded prompts never collide with test prompts)."""
    seq.output.append(-(1_000_000 * (int(seq.request_id) + 1) + seq.num_folded + seq.num_generated))


def state_of(seq: SeqState) -> dict:
    return {
        "max_new_tokens": seq.max_new_tokens,
        "prompt_len": seq.prompt_len,
        "num_generated": seq.num_generated,
        "context_position": seq.context_position,
    }


@dataclass
class CapacityRun:
    """Per iteration: active ids, scheduled ids, disaggregated-init ids, every active request's state before it."""

    active_ids: list[list[int]] = field(default_factory=list)
    scheduled: list[set[int]] = field(default_factory=list)
    disagg: list[set[int]] = field(default_factory=list)
    states: list[dict[int, dict]] = field(default_factory=list)
    pauses: list[dict] = field(default_factory=list)
    total_iterations: int = 0
    reused_blocks: int = 0


class CapacityLoop:
    """The capacity tests' loop on a real block manager."""

    def __init__(self, test: dict, policy: str) -> None:
        setup = test["setup"]
        self.setup, self.policy = setup, policy
        self.manager = KVBlockManager(setup["num_blocks"], setup["tokens_per_block"], setup["enable_block_reuse"])
        self.budget = BlockBudget(self.manager, window=setup["max_num_tokens_per_seq"])
        pages = setup.get("peft_pages_per_task")
        self.peft = PeftLimit(pages, setup["peft_max_device_pages"]) if pages is not None else None
        self.specs = test["requests"]
        self.active: list[SeqState] = []
        self.run = CapacityRun()

    def arrive(self, it: int) -> None:
        for spec in self.specs:
            if spec.get("arrives_at", 0) == it:
                seq = seq_from(spec)
                if spec.get("insert") == "by_priority":
                    insert_by_priority(self.active, seq)
                else:
                    self.active.append(seq)

    def advance_context(self, seq: SeqState) -> None:
        tpb = self.manager.tokens_per_block
        if not seq.has_kv:
            reused = self.manager.match(seq.prompt)
            self.manager.pin_reused(seq.request_id, reused)
            self.manager.grow(seq.request_id, seq.prompt_len + seq.num_draft_tokens)
            seq.has_kv, seq.context_position = True, len(reused) * tpb
        end = seq.context_position + (seq.context_chunk_size or seq.prompt_len)
        seq.context_position = end // tpb * tpb if end < seq.prompt_len else seq.prompt_len
        if seq.context_position == seq.prompt_len:
            self.manager.store(seq.request_id, seq.prompt)
            emit(seq)

    def iteration(self, it: int) -> None:
        run = self.run
        run.active_ids.append([int(s.request_id) for s in self.active])
        run.states.append({int(s.request_id): state_of(s) for s in self.active})
        result = schedule_capacity(self.active, self.policy, self.setup["max_num_requests"], self.budget, self.peft)
        run.scheduled.append({int(s.request_id) for s in result.scheduled})
        run.disagg.append({int(s.request_id) for s in result.disagg_init})
        for seq in result.paused:
            self.manager.release(seq.request_id)
            folded = seq.fold_into_prompt(self.setup["max_input_len"])
            run.pauses.append(
                {
                    "iteration": it,
                    "id": int(seq.request_id),
                    "generated_before_pause": folded,
                    "resumes_as": {"prompt_len": seq.prompt_len, "max_new_tokens": seq.max_new_tokens},
                }
            )
        for seq in result.disagg_init:
            self.manager.grow(seq.request_id, seq.prompt_len + seq.num_draft_tokens)
            seq.disagg_init, seq.has_kv, seq.context_position = False, True, seq.prompt_len
            emit(seq)
        for seq in sorted(result.scheduled, key=lambda s: int(s.request_id)):
            if seq.is_context:
                self.advance_context(seq)
            else:
                self.manager.grow(seq.request_id, seq.kv_tokens_after_step())
                emit(seq)
        for seq in [*result.scheduled, *result.disagg_init]:
            if seq.num_generated >= seq.max_new_tokens:
                self.manager.release(seq.request_id)
                self.active.remove(seq)
        self.manager.check()


def run_capacity(test: dict, policy: str) -> CapacityRun:
    loop = CapacityLoop(test, policy)
    last_arrival = max(spec.get("arrives_at", 0) for spec in test["requests"])
    it = 0
    while it <= last_arrival or loop.active:
        assert it < MAX_ITERATIONS, f"{test['test']} under {policy} does not end"
        loop.arrive(it)
        loop.iteration(it)
        it += 1
    loop.run.total_iterations = it
    loop.run.reused_blocks = loop.manager.num_reused_blocks
    return loop.run


def run_micro_batch(test: dict) -> list[dict]:
    """The micro-batch tests' loop: per iteration the scheduled ids (sorted) and, per scheduled request, its state
    after the iteration."""
    setup = test["setup"]
    chunking = setup.get("chunking")
    config = MicroBatchConfig(
        max_batch_size=setup["max_batch_size"],
        max_num_tokens=setup.get("max_num_tokens"),
        chunking=(chunking["policy"], chunking["chunk_unit_size"]) if chunking else None,
        max_context_length=setup.get("max_context_length"),
    )
    active = [seq_from(spec) for spec in test["requests"]]
    slots: list[set[str]] = [set() for _ in range(setup["num_micro_batches"])]
    records = []
    for it in range(test["iterations_run"]):
        slot = it % len(slots)
        slots[slot] = set()
        inflight = set().union(*slots)
        batch = schedule_micro_batch(active, config, inflight)
        scheduled = [*batch.contexts, *batch.generations]
        slots[slot] = {s.request_id for s in scheduled}
        for seq in batch.contexts:
            seq.num_draft_tokens = batch.drafts_kept[seq.request_id]
            seq.context_position += batch.chunk_sizes[seq.request_id]
            seq.has_kv = True
            if not seq.is_context:
                emit(seq)
        for seq in batch.generations:
            emit(seq)
        for seq in scheduled:
            if seq.num_generated >= seq.max_new_tokens:
                active.remove(seq)
        if test["test"].endswith(".GenDraftTokensMaxNumTokens") and it == 0:
            for seq in active:
                seq.num_draft_tokens = 63
        records.append(
            {
                "scheduled_ids": sorted(int(s.request_id) for s in scheduled),
                "after": {
                    int(s.request_id): {
                        "num_generated": s.num_generated,
                        "context_position": s.context_position,
                        "num_draft_tokens": s.num_draft_tokens,
                    }
                    for s in scheduled
                },
            }
        )
    return records


def run_chunking(test: dict, policy: str) -> tuple[list[list[int]], list[int]]:
    """The chunk-sizing loop: every context with prompt left gets a chunk, then all advance. Returns the positions
    after each listed iteration and the drafts left at the end."""
    lengths = test["context_lengths"]
    drafts = test.get("draft_lengths", [0] * len(lengths))
    seqs = [SeqState(str(i), [0] * n, 1, num_draft_tokens=d) for i, (n, d) in enumerate(zip(lengths, drafts))]
    unit, capacity, max_len = test["chunk_unit_size"], test["ctx_tokens_capacity"], test["max_context_length"]
    positions = []
    for _ in test["positions_after_iteration"][policy]:
        contexts = [s for s in seqs if s.is_context]
        sizes = chunk_sizes(contexts, policy, unit, capacity, max_len)
        kept = fit_draft_tokens(contexts, sizes, unit, capacity, max_len)
        for seq, size, k in zip(contexts, sizes, kept):
            seq.num_draft_tokens = k
            seq.context_position += size
            seq.has_kv = seq.has_kv or size > 0
        positions.append([s.context_position for s in seqs])
    return positions, [s.num_draft_tokens for s in seqs]
