"""The TensorRT-LLM family's scheduling core: one ``schedule()`` per forward pass, the way ``PyExecutor`` runs its
``SimpleUnifiedScheduler`` (``tensorrt_llm/_torch/pyexecutor``): the capacity stage, then the micro-batch stage with
``max_num_requests = max_batch_size``, then the KV set-up of what was scheduled::

    active list --capacity--> fitting (+ paused) --micro-batch--> contexts (chunked) + generations --> ForwardPlan

Pauses (``MAX_UTILIZATION``) take effect at once: the paused request's blocks are released and its generated tokens
folded into its prompt; it keeps its place in the list and later recomputes prompt + output as a fresh context.

Prefix reuse is applied before the token budget is counted: a context on its first chunk starts at the end of its
reused blocks (``Admission.cache_len``), so the micro-batch stage charges only what the forward computes (TensorRT-LLM
charges ``prompt - estimated_reusable_tokens`` and shifts the chunk when the sequence is added; the vectors of that
path run on the stages directly, tests/trtllm). The first chunk sets up KV for the whole prompt, as ``addSequence``
does, so a block table may run ahead of the positions computed.

A request that can never run (its blocks exceed the pool, or, without chunking, its prompt exceeds
``max_num_tokens``) is listed in ``decision["never_fits"]`` and, at the head, reported with reason ``never_fits``;
when a call schedules nothing while requests remain, ``decision["stuck"]`` is true (no later call can differ): the
engine must abort. Defaults of TensorRT-LLM's PyTorch backend (``py_executor_creator``): chunk unit =
``tokens_per_block``, chunking ``FIRST_COME_FIRST_SERVED``, capacity ``GUARANTEED_NO_EVICT``; one chunk is capped at
``max_num_tokens``. Units: tokens, blocks, requests.
"""

from __future__ import annotations

from typing import Literal

from batchscope.scheduling.forward_plan import Admission, ForwardPlan, Pause, Work
from batchscope.trtllm_family.capacity import (
    GUARANTEED_NO_EVICT,
    MAX_UTILIZATION,
    STATIC_BATCH,
    CapacityResult,
    schedule_capacity,
)
from batchscope.trtllm_family.chunking import EQUAL_PROGRESS, FIRST_COME_FIRST_SERVED
from batchscope.trtllm_family.kv_blocks import KVBlockManager
from batchscope.trtllm_family.kv_budget import BlockBudget
from batchscope.trtllm_family.micro_batch import MicroBatch, MicroBatchConfig, schedule_micro_batch
from batchscope.trtllm_family.request import SeqState

CAPACITY_POLICIES = {
    "guaranteed_no_evict": GUARANTEED_NO_EVICT,
    "max_utilization": MAX_UTILIZATION,
    "static_batch": STATIC_BATCH,
}
CHUNKING_POLICIES = {"fcfs": FIRST_COME_FIRST_SERVED, "equal_progress": EQUAL_PROGRESS}


def _positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


class TrtllmCore:
    """TensorRT-LLM's in-flight batching over a block pool, driven one forward at a time."""

    def __init__(
        self,
        *,
        max_batch_size: int,
        max_num_tokens: int,
        tokens_per_block: int,
        num_blocks: int,
        capacity_policy: str,
        enable_chunked_context: bool,
        context_chunking: str,
        chunk_unit_size: int,
        enable_block_reuse: bool,
        max_num_tokens_per_seq: int | None = None,
    ) -> None:
        for name, value in (
            ("max_batch_size", max_batch_size),
            ("max_num_tokens", max_num_tokens),
            ("chunk_unit_size", chunk_unit_size),
        ):
            _positive(name, value)
        if capacity_policy not in CAPACITY_POLICIES:
            raise ValueError(f"capacity_policy must be one of {sorted(CAPACITY_POLICIES)}, got {capacity_policy!r}")
        if context_chunking not in CHUNKING_POLICIES:
            raise ValueError(f"context_chunking must be one of {sorted(CHUNKING_POLICIES)}, got {context_chunking!r}")
        self.policy = CAPACITY_POLICIES[capacity_policy]
        self.max_batch_size, self.max_num_tokens = max_batch_size, max_num_tokens
        self.max_num_tokens_per_seq = max_num_tokens_per_seq
        self.chunked = enable_chunked_context
        self.manager = KVBlockManager(num_blocks, tokens_per_block, enable_block_reuse)
        self.budget = BlockBudget(self.manager, window=max_num_tokens_per_seq)
        chunking = (CHUNKING_POLICIES[context_chunking], chunk_unit_size) if enable_chunked_context else None
        # The PyTorch backend caps one context chunk at max_num_tokens (its max_context_length).
        self.micro = MicroBatchConfig(max_batch_size, max_num_tokens, chunking, max_context_length=max_num_tokens)
        self._active: list[SeqState] = []
        self._reserved = 0

    # -- the engine's view -----------------------------------------------------------------------------------
    @property
    def running(self) -> list[str]:
        return [s.request_id for s in self._active if s.has_kv]

    @property
    def waiting(self) -> list[str]:
        return [s.request_id for s in self._active if not s.has_kv]

    @property
    def block_tables(self) -> dict[str, list[int]]:
        return {s.request_id: list(self.manager.tables[s.request_id]) for s in self._active if s.has_kv}

    def pool(self) -> dict:
        return {**self.manager.counts(), "reserved_blocks": self._reserved}

    def has_work(self) -> bool:
        return bool(self._active)

    def _find(self, request_id: str) -> SeqState | None:
        return next((s for s in self._active if s.request_id == request_id), None)

    def add_request(self, request_id: str, prompt_token_ids: list[int], max_new_tokens: int) -> None:
        """Append a request to the active list."""
        if self._find(request_id) is not None:
            raise ValueError(f"request_id {request_id!r} is already active")
        if not prompt_token_ids:
            raise ValueError(f"prompt_token_ids of {request_id!r} is empty")
        _positive("max_new_tokens", max_new_tokens)
        window = self.max_num_tokens_per_seq
        if window is not None and len(prompt_token_ids) + max_new_tokens > window:
            raise ValueError(
                f"prompt + max_new_tokens of {request_id!r} ({len(prompt_token_ids) + max_new_tokens}) "
                f"exceeds max_num_tokens_per_seq ({window}): sliding windows are not modelled"
            )
        self._active.append(SeqState(request_id, list(prompt_token_ids), max_new_tokens))

    def abort(self, request_id: str) -> str | None:
        """Drop a request: ``"running"`` (its blocks released), ``"waiting"``, or ``None`` if it is not active."""
        seq = self._find(request_id)
        if seq is None:
            return None
        self._active.remove(seq)
        if seq.has_kv:
            self.manager.release(request_id)
            return "running"
        return "waiting"

    # -- one forward ------------------------------------------------------------------------------------------
    def schedule(self) -> ForwardPlan:
        """Decide the next forward: capacity, pauses, reuse, micro-batch, KV set-up."""
        cap = schedule_capacity(self._active, self.policy, self.max_batch_size, self.budget)
        paused = [self._pause(seq) for seq in cap.paused]
        reused = self._apply_reuse(cap.scheduled)
        batch = schedule_micro_batch(cap.scheduled, self.micro)
        scheduled = {s.request_id for s in [*batch.contexts, *batch.generations]}
        for seq in cap.scheduled:
            if seq.request_id in reused and seq.request_id not in scheduled:
                seq.context_position = 0  # not this time: its reuse is looked up again next call
        admitted = self._set_up_kv(batch, reused)
        work = [self._context_work(s, batch.chunk_sizes[s.request_id]) for s in batch.contexts]
        work += [Work(s.request_id, 1, s.num_tokens - 1, True) for s in batch.generations]
        kind: Literal["prefill", "decode", "mixed"] = (
            "decode" if not batch.contexts else "prefill" if not batch.generations else "mixed"
        )
        plan = ForwardPlan(kind, work, admitted, [], paused)
        plan.decision = self._decision(cap, batch, work)
        plan.head = self._head(cap, batch, plan.decision)
        self._check(plan)
        return plan

    def _pause(self, seq: SeqState) -> Pause:
        freed = self.manager.release(seq.request_id)
        return Pause(seq.request_id, seq.fold_into_prompt(), freed)

    def _apply_reuse(self, fitting: list[SeqState]) -> dict[str, list[int]]:
        """First-chunk contexts start past their reused blocks (cost only what they compute)."""
        reused = {}
        for seq in fitting:
            if seq.is_first_chunk:
                reused[seq.request_id] = blocks = self.manager.match(seq.prompt)
                seq.context_position = len(blocks) * self.manager.tokens_per_block
                seq.estimated_reusable_tokens = 0
        return reused

    def _set_up_kv(self, batch: MicroBatch, reused: dict[str, list[int]]) -> list[Admission]:
        """Pin every admitted context's reused blocks first (so no allocation evicts them), then give each its
        prompt blocks and each generating request the block its next token needs."""
        starting = [s for s in batch.contexts if not s.has_kv]
        for seq in starting:
            self.manager.pin_reused(seq.request_id, reused[seq.request_id])
        admitted = []
        for seq in starting:
            self.manager.grow(seq.request_id, seq.kv_tokens_after_step())
            seq.has_kv = True
            chunk = batch.chunk_sizes[seq.request_id]
            table = self.manager.tables[seq.request_id]
            admitted.append(
                Admission(
                    seq.request_id,
                    seq.context_position,
                    len(table),
                    list(table),
                    chunk if chunk < seq.context_remaining else None,
                    self._to_completion_beyond_held(seq),
                )
            )
        for seq in batch.generations:
            self.manager.grow(seq.request_id, seq.kv_tokens_after_step())
        return admitted

    def _to_completion_beyond_held(self, seq: SeqState) -> int:
        if self.policy == MAX_UTILIZATION:
            return 0
        num_tokens = seq.prompt_len + seq.max_new_tokens
        if self.max_num_tokens_per_seq is not None:
            num_tokens = min(num_tokens, self.max_num_tokens_per_seq)
        return max(0, self.manager.blocks_for(num_tokens) - len(self.manager.tables[seq.request_id]))

    @staticmethod
    def _context_work(seq: SeqState, chunk: int) -> Work:
        return Work(seq.request_id, chunk, seq.context_position, seq.context_position + chunk == seq.prompt_len)

    def update(
        self, plan: ForwardPlan, sampled: dict[str, int], stopped: set[str] | frozenset[str] = frozenset()
    ) -> list[str]:
        """After the forward: advance every Work, append sampled tokens, finish and release; finished ids in batch
        order."""
        finished = []
        for work in plan.work:
            seq = self._find(work.request_id)
            if seq is None:
                continue  # aborted since the plan was made
            if seq.is_context:
                seq.context_position += work.num_tokens
                if seq.context_position == seq.prompt_len:
                    self.manager.store(seq.request_id, seq.prompt)
            if not work.samples:
                continue
            if work.request_id not in sampled:
                raise ValueError(f"sampled has no token for {work.request_id!r}, whose work samples")
            seq.output.append(sampled[work.request_id])
            if seq.num_generated >= seq.max_new_tokens or work.request_id in stopped:
                self._active.remove(seq)
                self.manager.release(seq.request_id)
                finished.append(seq.request_id)
        return finished

    # -- records and checks -------------------------------------------------------------------------------------
    def never_fits(self, seq: SeqState) -> dict | None:
        """Why ``seq`` can never be scheduled to completion, or ``None``."""
        if self.policy == MAX_UTILIZATION:
            peak = self.manager.blocks_for(seq.prompt_len + seq.max_new_tokens - 1)
        else:
            num_tokens = seq.prompt_len + seq.max_new_tokens
            if self.max_num_tokens_per_seq is not None:
                num_tokens = min(num_tokens, self.max_num_tokens_per_seq)
            peak = self.manager.blocks_for(num_tokens)
        if peak > self.manager.num_blocks:
            return {
                "reason": "never_fits",
                "limit": "num_blocks",
                "needed": peak,
                "num_blocks": self.manager.num_blocks,
            }
        if seq.is_context and seq.context_remaining > self.max_num_tokens:
            unit = self.micro.chunking[1] if self.micro.chunking else None
            if unit is None or unit > self.max_num_tokens:
                return {
                    "reason": "never_fits",
                    "limit": "max_num_tokens",
                    "needed": seq.context_remaining,
                    "max_num_tokens": self.max_num_tokens,
                }
        return None

    def _decision(self, cap: CapacityResult, batch: MicroBatch, work: list[Work]) -> dict:
        no_evict = self.policy != MAX_UTILIZATION
        self._reserved = sum(self._to_completion_beyond_held(s) for s in cap.scheduled if s.has_kv) if no_evict else 0
        return {
            "policy": self.policy,
            "free_blocks": cap.free_blocks,
            "reserved_blocks": dict(cap.reserved) if no_evict else {},
            "needed_blocks": dict(cap.needed),
            "capacity_scheduled": [s.request_id for s in cap.scheduled],
            "paused": [s.request_id for s in cap.paused],
            "skipped_for_reuse": [rid for rid, why in cap.why_not.items() if why["reason"] == "reuse_wait"],
            "max_num_tokens": self.max_num_tokens,
            "num_tokens": sum(w.num_tokens for w in work),
            "chunked": batch.chunked,
            "chunk_sizes": dict(batch.chunk_sizes),
            "micro_batch_stop": batch.stop,
            "never_fits": [s.request_id for s in self._active if self.never_fits(s) is not None],
            "stuck": not work and not cap.paused and bool(self._active),
        }

    def _head(self, cap: CapacityResult, batch: MicroBatch, decision: dict) -> dict | None:
        seq = next((s for s in self._active if not s.has_kv), None)
        if seq is None:
            return None
        why = self.never_fits(seq) or cap.why_not.get(seq.request_id)
        if why is not None and why["reason"] == "max_num_requests":  # the core runs max_num_requests = batch size
            why = {"reason": "max_batch_size", "max_batch_size": self.max_batch_size}
        if why is None:  # let through by the capacity stage, left out by the micro-batch stage
            why = dict(batch.stop) if batch.stop else {"reason": "max_num_tokens"}
            why.pop("request_id", None)
        head = {"request_id": seq.request_id, **why}
        if decision["stuck"]:
            head["stuck"] = True
        return head

    def _check(self, plan: ForwardPlan) -> None:
        assert len(plan.work) <= self.max_batch_size, "more requests than max_batch_size"
        assert sum(w.num_tokens for w in plan.work) <= self.max_num_tokens, "more tokens than max_num_tokens"
        for work in plan.work:
            table = self.manager.tables[work.request_id]
            assert len(table) * self.manager.tokens_per_block >= work.num_computed_tokens + work.num_tokens
