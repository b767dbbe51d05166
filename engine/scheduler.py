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

Which waiting request is the head and who is the preemption victim is the waiting queue's policy
(``engine.request_queue``); static batching is the subclass ``engine.static_scheduler.StaticScheduler``.

``schedule()`` returns a ``SchedulerOutput`` that the model runner consumes; ``update()`` applies the sampled
tokens. A request keeps its batch *row* (``0 .. max_num_seqs-1``, a row of the pictures' grid; the trace calls it
``slot``) while admitted. (A KV-cache *slot* is something else: one token position of the pool.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.request import FinishReason, Request, RequestStatus
from engine.request_queue import QUEUES
from steplog.records import KVExtras


@dataclass
class ScheduledRequest:
    """One request's work in a step: ``num_tokens`` tokens starting at position ``num_computed_tokens``."""

    request: Request
    num_tokens: int
    num_computed_tokens: int  # before this step
    row: int  # batch row (the trace's ``slot``)
    kind: Literal["prefill", "decode"] = field(
        init=False
    )  # "decode": computing exactly the last sampled token; else "prefill"
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
    padding: list[tuple[int, str]] = field(default_factory=list)  # (row, request_id) of finished static members
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
    """Continuous batching: holds the waiting queue, the running list, row assignment and the block manager.

    Subclasses change batch formation through three hooks: ``_admit_waiting`` (who joins this step),
    ``_release_row`` (what a finished request's row becomes) and ``_finish_output`` (rows added to the step).
    """

    def __init__(self, config: EngineConfig, eos_token_ids: set[int] | frozenset[int] = frozenset()):
        config.validate()
        self.config = config
        self.eos_token_ids = frozenset(eos_token_ids)
        self.block_manager = BlockManager(config.num_kv_blocks, config.block_size)
        self.waiting = QUEUES[config.scheduling_policy]()
        self.running: list[Request] = []  # admission order
        self.rows: dict[str, int] = {}  # request_id -> batch row, while admitted

    # -- queue -------------------------------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        """Append an arrived request to the waiting queue (arrival order)."""
        request.status = RequestStatus.WAITING
        self.waiting.add(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # -- scheduling --------------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        """Decide this step: running requests first, then admissions. Checks the invariants before returning."""
        out = SchedulerOutput()
        budget = self._schedule_running(out, self.config.max_num_batched_tokens)
        if not out.preempted_req_ids:  # after a preemption memory is known to be tight: admit nobody
            self._admit_waiting(out, budget)
        self._finish_output(out)
        self._check_invariants(out)
        return out

    def step_stats(self) -> KVExtras:
        """Extra KV facts for the step record (none for continuous batching)."""
        return {}

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
                victim = self.waiting.preemption_victim(self.running)  # FCFS: never one already scheduled
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
        """Admit from the head of the queue while a row, the budget and free blocks allow; nobody overtakes."""
        while self.waiting and len(self.running) < self.config.max_num_seqs and budget > 0:
            req = self.waiting.peek()
            n = self._num_tokens_to_schedule(req, budget)
            if n == 0 or not self.block_manager.can_allocate(req.request_id, n):
                break  # the head waits, and so does everyone behind it
            self.waiting.pop()
            self._admit(req, out)
            self._schedule(req, n, out)
            budget -= n

    def _finish_output(self, out: SchedulerOutput) -> None:
        """Rows the step runs besides the scheduled ones (none for continuous batching)."""

    def _release_row(self, req: Request) -> None:
        """A finished request's row is free for the next admission at the very next step."""
        self.rows.pop(req.request_id)

    def _admit(self, req: Request, out: SchedulerOutput) -> None:
        used = set(self.rows.values())
        self.rows[req.request_id] = next(r for r in range(self.config.max_num_seqs) if r not in used)
        req.status = RequestStatus.RUNNING
        self.running.append(req)
        out.admitted_req_ids.append(req.request_id)

    def _schedule(self, req: Request, n: int, out: SchedulerOutput) -> None:
        new_blocks = self.block_manager.allocate(req.request_id, req.num_computed_tokens + n)
        if new_blocks:
            out.allocated_blocks[req.request_id] = new_blocks
        out.scheduled.append(ScheduledRequest(req, n, req.num_computed_tokens, self.rows[req.request_id]))

    def _preempt(self, req: Request, out: SchedulerOutput) -> None:
        """Preempt by recompute: drop all K/V, back to the waiting queue (FCFS: at its head)."""
        self.running.remove(req)
        self.block_manager.free(req.request_id)
        self.rows.pop(req.request_id, None)
        req.num_recomputed_tokens += req.num_computed_tokens
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED
        self.waiting.prepend(req)
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
                self._release_row(req)
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
        rows = [s.row for s in out.scheduled] + [p[0] for p in out.padding]
        assert len(set(rows)) == len(rows), "two requests share a batch row"
        self.block_manager.check_invariants()
