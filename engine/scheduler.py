"""The scheduler: before every model step, decide which requests run and how many tokens each computes.

One rule serves prefill and decode (see ``engine.request``): a scheduled request computes
``min(num_new_tokens, token budget left)`` tokens. Two limits bound a step, as in vLLM:

- the token budget ``max_num_batched_tokens`` (prefill-chunk tokens + decode tokens of the step), and
- the free KV blocks of the pool (a request must own ``ceil(tokens with K/V / block_size)`` blocks).

Continuous batching (iteration-level scheduling, Orca / vLLM V1):

1. Running requests first, in admission order: a decode gets 1 token, an unfinished prefill its next chunk.
   If a request needs a block and none is free, the most recently admitted running request is *preempted by
   recompute*: it gives back all its blocks and goes to the head of the waiting queue (possibly the requester
   itself). Its K/V will be recomputed when it is re-admitted: that cost is logged.
2. If nobody was preempted this step, waiting requests are admitted in arrival order (strict FCFS: if the head
   does not fit, nobody behind it jumps the queue) while ``max_num_seqs``, the budget and free blocks allow.
   With chunked prefill a prompt larger than the budget left is split; without it, it waits for a step with room.

Static batching, same engine and limits: a batch of up to ``max_num_seqs`` requests is formed only when the
previous batch has completely finished, reserving the KV blocks each member could need (prompt + max_tokens),
so it never preempts. Finished members keep their slot and run as *padding rows* until the slowest member ends,
as a fixed-shape batch does: they cost forward-pass work and are logged as padding.

``schedule()`` returns a ``SchedulerOutput`` that the model runner consumes; ``update()`` applies the sampled
tokens. Slots (``0 .. max_num_seqs-1``) name the rows of the pictures: a request keeps its slot while admitted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.block_manager import BlockManager, blocks_needed
from engine.config import EngineConfig
from engine.request import FinishReason, Request, RequestStatus


@dataclass
class ScheduledRequest:
    """One request's work in a step: ``num_tokens`` tokens starting at position ``num_computed_tokens``."""

    request: Request
    num_tokens: int
    num_computed_tokens: int  # before this step
    slot: int
    kind: str = field(init=False)  # "decode": computing exactly the last sampled token; else "prefill"
    samples: bool = field(init=False)  # this step reaches the end of the known tokens, so a token is sampled
    recompute: bool = field(init=False)  # a prefill that redoes K/V dropped by a preemption

    def __post_init__(self):
        req = self.request
        self.samples = self.num_computed_tokens + self.num_tokens == req.num_tokens
        is_decode = self.num_tokens == 1 and bool(req.output_token_ids) and self.samples
        self.kind = "decode" if is_decode else "prefill"
        self.recompute = self.kind == "prefill" and req.num_preemptions > 0


@dataclass
class SchedulerOutput:
    """What one step runs: scheduled work in batch order, plus padding rows (static batching only)."""

    scheduled: list[ScheduledRequest] = field(default_factory=list)
    padding: list[tuple[int, str]] = field(default_factory=list)  # (slot, request_id) of finished static members
    admitted_req_ids: list[str] = field(default_factory=list)
    preempted_req_ids: list[str] = field(default_factory=list)
    allocated_blocks: dict[str, list[int]] = field(default_factory=dict)

    @property
    def num_batched_tokens(self) -> int:
        return sum(s.num_tokens for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled and not self.padding


class Scheduler:
    """Holds the waiting queue, the running list, slot assignment and the block manager."""

    def __init__(self, config: EngineConfig, eos_token_ids: set[int] | frozenset[int] = frozenset()):
        config.validate()
        self.config = config
        self.eos_token_ids = frozenset(eos_token_ids)
        self.block_manager = BlockManager(config.num_kv_blocks, config.block_size)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # admission order; static: unfinished members of the current batch
        self.slots: dict[str, int] = {}  # request_id -> slot, while admitted (static: until the batch ends)
        self.batch: list[Request] = []  # static only: members of the current batch, finished ones included

    # -- queue -------------------------------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        """Append an arrived request to the waiting queue (arrival order)."""
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # -- scheduling --------------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.config.max_num_batched_tokens
        if self.config.policy == "static":
            if not self.running:
                self._end_batch()
                self._form_static_batch(out)
        budget = self._schedule_running(out, budget)
        if self.config.policy == "continuous" and not out.preempted_req_ids:
            self._admit_waiting(out, budget)
        if self.config.policy == "static":
            out.padding = [(self.slots[r.request_id], r.request_id) for r in self.batch if r.is_finished]
        self._check_invariants(out)
        return out

    def _num_tokens_to_schedule(self, req: Request, budget: int) -> int:
        """Tokens ``req`` computes now: all it lacks, or a budget-sized chunk (0 = must wait)."""
        n = req.num_new_tokens
        if n <= budget:
            return n
        # Chunking off applies to fresh prompts (validated up front to fit the budget); a resumed request's
        # recompute (prompt + outputs) may exceed the budget and is split anyway, or it could never resume.
        may_chunk = self.config.enable_chunked_prefill or req.num_computed_tokens > 0 or req.num_preemptions > 0
        return budget if may_chunk else 0

    def _schedule_running(self, out: SchedulerOutput, budget: int) -> int:
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = self._num_tokens_to_schedule(req, budget)
            if n == 0:
                i += 1
                continue
            while not self.block_manager.can_allocate(req.request_id, req.num_computed_tokens + n):
                victim = self.running[-1]  # most recently admitted; never one already scheduled this step
                self._preempt(victim, out)
                if victim is req:
                    break
            if req.status == RequestStatus.PREEMPTED:
                break
            self._schedule(req, n, out)
            budget -= n
            i += 1
        return budget

    def _admit_waiting(self, out: SchedulerOutput, budget: int) -> None:
        while self.waiting and len(self.running) < self.config.max_num_seqs and budget > 0:
            req = self.waiting[0]
            n = self._num_tokens_to_schedule(req, budget)
            if n == 0 or not self.block_manager.can_allocate(req.request_id, n):
                break  # strict FCFS: nobody overtakes the head of the queue
            self.waiting.popleft()
            self._admit(req, out)
            self._schedule(req, n, out)
            budget -= n

    def _form_static_batch(self, out: SchedulerOutput) -> None:
        reserved = 0
        while self.waiting and len(self.batch) < self.config.max_num_seqs:
            req = self.waiting[0]
            need = blocks_needed(req.max_kv_tokens, self.config.block_size)
            if reserved + need > self.config.num_kv_blocks:
                break
            reserved += need
            self.waiting.popleft()
            self._admit(req, out)
            self.batch.append(req)

    @property
    def num_reserved_blocks(self) -> int:
        """Static only: worst-case blocks (prompt + max_tokens - 1 tokens) reserved for the unfinished members."""
        return sum(blocks_needed(r.max_kv_tokens, self.config.block_size) for r in self.batch if not r.is_finished)

    def _end_batch(self) -> None:
        for req in self.batch:
            self.slots.pop(req.request_id, None)
        self.batch = []

    def _admit(self, req: Request, out: SchedulerOutput) -> None:
        used = set(self.slots.values())
        self.slots[req.request_id] = next(s for s in range(self.config.max_num_seqs) if s not in used)
        req.status = RequestStatus.RUNNING
        self.running.append(req)
        out.admitted_req_ids.append(req.request_id)

    def _schedule(self, req: Request, n: int, out: SchedulerOutput) -> None:
        new_blocks = self.block_manager.allocate(req.request_id, req.num_computed_tokens + n)
        if new_blocks:
            out.allocated_blocks[req.request_id] = new_blocks
        out.scheduled.append(ScheduledRequest(req, n, req.num_computed_tokens, self.slots[req.request_id]))

    def _preempt(self, req: Request, out: SchedulerOutput) -> None:
        """Preempt by recompute: drop all K/V, back to the head of the waiting queue."""
        self.running.remove(req)
        self.block_manager.free(req.request_id)
        self.slots.pop(req.request_id, None)
        req.num_recomputed_tokens += req.num_computed_tokens
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED
        self.waiting.appendleft(req)
        out.preempted_req_ids.append(req.request_id)

    # -- after the forward pass ----------------------------------------------------------------------------
    def update(self, out: SchedulerOutput, sampled: dict[str, int]) -> list[tuple[str, FinishReason]]:
        """Advance every scheduled request, append sampled tokens, finish and free. Returns who finished."""
        finished = []
        for s in out.scheduled:
            req = s.request
            req.num_computed_tokens += s.num_tokens
            token = sampled.get(req.request_id)
            if token is None:
                continue
            req.output_token_ids.append(token)
            reason = self._finish_reason(req, token)
            if reason is not None:
                req.status, req.finish_reason = RequestStatus.FINISHED, reason
                self.running.remove(req)
                self.block_manager.free(req.request_id)
                if self.config.policy == "continuous":
                    self.slots.pop(req.request_id)
                finished.append((req.request_id, reason))
        return finished

    def _finish_reason(self, req: Request, token: int) -> FinishReason | None:
        if token in self.eos_token_ids and not req.sampling.ignore_eos:
            return FinishReason.STOP
        if len(req.output_token_ids) >= req.sampling.max_tokens:
            return FinishReason.LENGTH
        return None

    def _check_invariants(self, out: SchedulerOutput) -> None:
        assert out.num_batched_tokens <= self.config.max_num_batched_tokens, "token budget exceeded"
        assert len(self.running) <= self.config.max_num_seqs, "max_num_seqs exceeded"
        assert len({s.slot for s in out.scheduled} | {p[0] for p in out.padding}) == len(out.scheduled) + len(
            out.padding
        ), "two rows share a slot"
        self.block_manager.check_invariants()
