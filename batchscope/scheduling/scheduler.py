"""The scheduler: before every model step, decide which requests run and how many tokens each computes.

One rule serves prefill and decode (see ``batchscope.engine.request``): a scheduled request computes
``min(num_new_tokens, token budget left)`` tokens. Two limits bound a step, as in vLLM:

- the token budget ``max_num_batched_tokens`` (prefill-chunk tokens + decode tokens of the step), and
- the free KV blocks of the pool (a request must own ``ceil(tokens with K/V / block_size)`` blocks).

Continuous batching (iteration-level scheduling, Orca / vLLM V1):

1. Running requests first, in admission order: a decode gets 1 token, an unfinished prefill its next chunk.
   If a request needs a block and none is free, the most recently admitted running request (priority policy: the
   one with the largest ``(priority, arrival)``) is *preempted by recompute*: it gives back all its blocks and goes
   back to the waiting queue (FCFS: at its head), possibly the requester itself. Its K/V will be recomputed when it
   is re-admitted, minus what it finds in the prefix cache: that cost is logged.
2. If nobody was preempted this step, waiting requests are admitted in queue order (FCFS: arrival order; priority:
   smallest ``(priority, arrival)``; if the head does not fit, nobody behind it jumps the queue) while
   ``max_num_seqs``, the budget and free blocks allow. With chunked prefill a prompt larger than the budget left is
   split; without it, it waits for a step with room.
3. Admission checks memory as vLLM does (``reserve_full_prompt``, vLLM's ``scheduler_reserve_full_isl``, on by
   default): the free blocks must hold the request's *whole known sequence* (prompt + tokens generated before a
   preemption; vLLM caps it at the model's context, which validation already guarantees), net of its prefix-cache
   hit, not just its first chunk. Otherwise a request admitted with a small first chunk can run out of blocks
   mid-prompt and be preempted over and over (vllm#25538). With the rule off, only the first chunk must fit.
4. Prefix caching (``enable_prefix_caching``): an admitted request first adopts the blocks of its longest cached
   prefix (``batchscope.scheduling.block_manager``) and computes only the rest.
5. Speculative decoding (``num_speculative_tokens``, ``batchscope.engine.spec_decode``): a running decode is scheduled
with its
   n-gram drafts too, cut to the budget; after the forward the rejected drafts are rolled back. An admission with
   exactly one token to compute is padded to ``1 + num_speculative_tokens`` with placeholder drafts when decodes but
   no prefill run (vLLM keeps its decode batches uniform so), and waits if the padded size does not fit the budget.

Which waiting request is the head and who is the preemption victim is the waiting queue's policy
(``batchscope.scheduling.request_queue``); static batching is the subclass
``batchscope.scheduling.static_scheduler.StaticScheduler``.

Every decision is recorded where it is taken, in the output's decision records (``batchscope.steplog.records``, words
from ``batchscope.steplog.reasons``): each preemption with its victim, the request whose allocation failed, the queue's
victim rule and the K/V dropped; each admission with its tokens found in the prefix cache, recomputed and new; and the
limit that held the head of the queue back, with its numbers. Narration, checklist and quiz read those records.

``schedule()`` returns a ``SchedulerOutput`` that the model runner consumes; ``update()`` applies the sampled
tokens (vLLM's ``update_from_output``), and ``abort()`` ends requests from outside the step loop
(``finish_requests``). A request keeps its batch *row* (``0 .. max_num_seqs-1``, a row of the pictures' grid; the
trace calls it ``slot``) while admitted. (A KV-cache *slot* is something else: one token position of the pool.)
"""

from __future__ import annotations

from typing import cast

from batchscope.engine.config import EngineConfig
from batchscope.engine.ngram_proposer import PLACEHOLDER, NgramProposer
from batchscope.engine.request import FinishReason, Request, RequestStatus
from batchscope.scheduling.block_manager import BlockManager
from batchscope.scheduling.request_queue import QUEUES
from batchscope.scheduling.scheduler_output import ScheduledRequest, SchedulerOutput, admission_record
from batchscope.steplog.records import AbortRecord, AbortState, HeadWaitRecord, KVExtras, PreemptionRecord

__all__ = ["ScheduledRequest", "Scheduler", "SchedulerOutput"]


class Scheduler:
    """Continuous batching: holds the waiting queue, the running list, row assignment and the block manager.

    Subclasses change batch formation through three hooks: ``_admit_waiting`` (who joins this step),
    ``_release_row`` (what a finished request's row becomes) and ``_finish_output`` (rows added to the step).
    """

    def __init__(self, config: EngineConfig, eos_token_ids: set[int] | frozenset[int] = frozenset()):
        config.validate()
        self.config = config
        self.eos_token_ids = frozenset(eos_token_ids)
        self.block_manager = BlockManager(config.num_kv_blocks, config.block_size, config.enable_prefix_caching)
        self.waiting = QUEUES[config.scheduling_policy]()
        self.running: list[Request] = []  # admission order
        self.rows: dict[str, int] = {}  # request_id -> batch row, while admitted
        self.num_arrived = 0
        self.max_model_len: int | None = None  # the model's context (set by the engine; caps decodes with drafts)
        self.proposer = NgramProposer.from_config(config)  # None: speculative decoding off

    # -- queue -------------------------------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        """Add an arrived request to the waiting queue (``arrival_seq`` records the arrival order)."""
        request.status = RequestStatus.WAITING
        request.arrival_seq = self.num_arrived
        self.num_arrived += 1
        self.waiting.add(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # -- scheduling --------------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        """Decide this step: running requests first, then admissions. Checks the invariants before returning."""
        out = SchedulerOutput()
        self.block_manager.new_step()
        budget = self._schedule_running(out, self.config.max_num_batched_tokens)
        if not out.preempted_req_ids:
            self._admit_waiting(out, budget)
        elif self.waiting:  # after a preemption memory is known to be tight: admit nobody
            self._hold_head(out, "preempted_this_step")
        self._finish_output(out)
        self._check_invariants(out)
        return out

    def step_stats(self) -> KVExtras:
        """Extra KV facts for the step record (none for continuous batching)."""
        return {}

    def on_idle(self) -> None:
        """Told when a step has nothing to run or wait for (the engine skips it); nothing to do here."""

    def _num_tokens_to_schedule(self, req: Request, budget: int, num_computed: int | None = None) -> int:
        """Tokens ``req`` computes now (from ``num_computed``, default its own; given for an admission): all it
        lacks, or a budget-sized chunk (0 = must wait).

        With chunked prefill off a fresh prompt runs whole or waits (validated up front to fit the budget). A
        preempted request being admitted again also waits until its whole recompute fits the budget left, as in
        vLLM, unless it exceeds the whole budget (vLLM's config forbids such a small budget; here it would never
        resume): then it is split, and a running request continues its recompute chunk by chunk."""
        if num_computed is None and req.spec_token_ids:  # a decode with drafts: cut to the budget, never waits
            room = budget if self.max_model_len is None else min(budget, self.max_model_len - req.num_tokens)
            return max(0, min(1 + len(req.spec_token_ids), room))  # vLLM: positions stay below max_model_len - 1
        n = req.num_tokens - (req.num_computed_tokens if num_computed is None else num_computed)
        if n <= budget or self.config.enable_chunked_prefill:
            return min(n, budget)
        if req.num_preemptions == 0:
            return 0
        admitting = num_computed is not None
        return budget if not admitting or n > self.config.max_num_batched_tokens else 0

    def _schedule_running(self, out: SchedulerOutput, budget: int) -> int:
        """Running requests in order; a missing block preempts the queue's victim (see
        ``batchscope.scheduling.request_queue``)."""
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = self._num_tokens_to_schedule(req, budget)
            if n == 0:
                i += 1
                continue
            while not self.block_manager.can_allocate(req.request_id, req.num_computed_tokens + n):
                need = self.block_manager.num_blocks_to_allocate(req.request_id, req.num_computed_tokens + n)
                free = self.block_manager.num_free_blocks
                victim = self.waiting.preemption_victim(self.running)
                if self.running.index(victim) < i:  # priority: a victim scheduled earlier in this step
                    budget += self._unschedule(victim, out)
                    i -= 1
                self._preempt(victim, out, {"requester": req.request_id, "need": need, "free": free})
                if victim is req:
                    break
            if req.status == RequestStatus.PREEMPTED:
                if self.waiting.continue_after_self_preemption:
                    continue  # ``running[i]`` is now the next request
                break
            out.running_prefill |= req.is_prefill_chunk  # (a victim unscheduled later leaves it set, as in vLLM)
            self._schedule(req, n, out)
            budget -= n
            i += 1
        return budget

    def _unschedule(self, req: Request, out: SchedulerOutput) -> int:
        """Take back ``req``'s work of this step (it is about to be preempted); returns its tokens."""
        s = next(s for s in out.scheduled if s.request is req)
        out.scheduled.remove(s)
        out.allocated_blocks.pop(req.request_id, None)
        self.block_manager.cancel_step(req.request_id)
        return s.num_tokens

    def _admit_waiting(self, out: SchedulerOutput, budget: int) -> None:
        """Admit from the head of the queue while the budget, a row and free blocks allow; nobody overtakes. The
        first limit that holds the head is recorded (``out.head``)."""
        bm = self.block_manager
        ran_running = bool(out.scheduled)  # before any admission of this step
        while self.waiting:  # vLLM's order of checks: the budget, a free row, chunking, then KV blocks
            if budget <= 0:
                return self._hold_head(out, "token_budget", 1, 0)
            if len(self.running) >= self.config.max_num_seqs:
                return self._hold_head(out, "max_num_seqs", 1, 0)
            req = self.waiting.peek()
            hits = bm.find_cached_prefix(req)
            num_hit = len(hits) * self.config.block_size
            n = self._num_tokens_to_schedule(req, budget, num_hit)
            free = bm.num_free_blocks
            # the head waits, and so does everyone behind it
            if n == 0:
                return self._hold_head(out, "chunked_prefill_off", req.num_tokens - num_hit, budget)
            drafts = self._admission_padding(req, num_hit, out, ran_running)
            if drafts and 1 + len(drafts) > budget:  # vLLM prefers not to schedule it over scheduling it unpadded
                return self._hold_head(out, "token_budget", 1 + len(drafts), budget)
            n += len(drafts)
            if self.config.reserve_full_prompt and not bm.can_allocate(req.request_id, req.num_tokens, hits):
                need = bm.num_blocks_to_allocate(req.request_id, req.num_tokens, hits)
                return self._hold_head(out, "kv_blocks_full_prompt", need, free)
            if not bm.can_allocate(req.request_id, num_hit + n, hits):
                need = bm.num_blocks_to_allocate(req.request_id, num_hit + n, hits)
                return self._hold_head(out, "kv_blocks", need, free)
            self.waiting.pop()
            self._admit(req, out, hits)
            self._schedule(req, n, out, drafts)
            budget -= n

    def _admission_padding(self, req: Request, num_hit: int, out: SchedulerOutput, ran_running: bool) -> list[int]:
        """Placeholder drafts for an admission with exactly one token to compute, while decodes but no prefill chunk
        of a running request run this step (vLLM 0.33 pads it to the uniform ``1 + num_speculative_tokens`` of a
        speculative decode batch, if the positions stay within the model's context); else none."""
        if self.proposer is None or req.num_tokens - num_hit != 1 or out.running_prefill:
            return []
        k = self.proposer.k
        if not (ran_running or num_hit > 0) or (
            self.max_model_len is not None and num_hit + k + 2 > self.max_model_len
        ):
            return []
        return [PLACEHOLDER] * k

    def _hold_head(self, out: SchedulerOutput, limit: str, need: int | None = None, left: int | None = None) -> None:
        """Record why the head of the waiting queue is not admitted in this step (``batchscope.steplog.reasons``)."""
        head: HeadWaitRecord = {"request_id": self.waiting.peek().request_id, "limit": limit}
        if need is not None and left is not None:
            head["need"], head["left"] = need, left
        head["order"] = self.waiting.order
        out.head = head

    def _finish_output(self, out: SchedulerOutput) -> None:
        """Rows the step runs besides the scheduled ones (none for continuous batching)."""

    def _release_row(self, req: Request) -> None:
        """A finished request's row is free for the next admission at the very next step."""
        self.rows.pop(req.request_id)

    def _admit(self, req: Request, out: SchedulerOutput, hits: list[int]) -> None:
        """Move ``req`` to running, with its prefix-cache hit adopted: it starts computing after the hit."""
        used = set(self.rows.values())
        self.rows[req.request_id] = next(r for r in range(self.config.max_num_seqs) if r not in used)
        req.status = RequestStatus.RUNNING
        self.running.append(req)
        out.admitted_req_ids.append(req.request_id)
        hit = len(hits) * self.config.block_size
        out.admissions.append(admission_record(req, hit))
        req.num_computed_tokens = hit
        out.prefix_hit_tokens[req.request_id] = req.num_computed_tokens
        if hits:
            self.block_manager.allocate(req, req.num_computed_tokens, hits)

    def _schedule(self, req: Request, n: int, out: SchedulerOutput, drafts: list[int] | None = None) -> None:
        """``req`` computes ``n`` tokens this step: its blocks grow to hold them; of its drafts, those the ``n`` reach
        are verified (``drafts``: an admission's placeholders instead), and the rest dropped, as vLLM does."""
        new_blocks = self.block_manager.allocate(req, req.num_computed_tokens + n)
        if new_blocks:
            out.allocated_blocks[req.request_id] = new_blocks
        if drafts is None:
            drafts = req.spec_token_ids[: max(0, req.num_computed_tokens + n - req.num_tokens)]
            req.spec_token_ids = []  # new ones are proposed after the step (``update``)
        req.is_prefill_chunk = req.num_computed_tokens + n < req.num_tokens
        out.scheduled.append(ScheduledRequest(req, n, req.num_computed_tokens, self.rows[req.request_id], drafts))

    def _preempt(self, req: Request, out: SchedulerOutput, why: PreemptionRecord | dict) -> None:
        """Preempt by recompute: drop all K/V, back to the waiting queue (FCFS: at its head). ``why``: the
        requester whose allocation failed, the blocks it needed and the free ones (``PreemptionRecord``)."""
        self.running.remove(req)
        table = self.block_manager.free(req.request_id)
        self.rows.pop(req.request_id, None)
        record: PreemptionRecord = {
            "request_id": req.request_id,
            "rule": self.waiting.victim_rule,
            "num_dropped_tokens": req.num_computed_tokens,
            "num_dropped_blocks": len(table),
        }
        out.preemptions.append({**record, **why})
        req.num_kv_high = max(req.num_kv_high, req.num_computed_tokens)
        req.num_dropped_tokens += req.num_computed_tokens
        req.num_computed_tokens = 0
        req.spec_token_ids = []
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED
        self.waiting.prepend(req)
        out.preempted_req_ids.append(req.request_id)

    def _check_invariants(self, out: SchedulerOutput) -> None:
        assert out.num_batched_tokens <= self.config.max_num_batched_tokens, "token budget exceeded"
        assert len(self.running) <= self.config.max_num_seqs, "max_num_seqs exceeded"
        rows = [s.row for s in out.scheduled] + [p[0] for p in out.padding]
        assert len(set(rows)) == len(rows), "two requests share a batch row"
        self.block_manager.check_invariants()

    # -- after the forward pass (vLLM's ``update_from_output``) and aborts from outside the loop ------------

    def update(self, out: SchedulerOutput, sampled: dict[str, list[int]]) -> list[tuple[str, FinishReason]]:
        """Advance every scheduled request, append its sampled tokens (one, or with drafts the accepted ones and
        one more; rejected drafts are rolled back), finish and free, propose the next drafts. Returns who
        finished."""
        finished = []
        for s in out.scheduled:
            req = s.request
            req.num_computed_tokens += s.num_tokens
            req.num_recomputed_tokens += s.num_recomputed
            tokens = sampled.get(req.request_id)
            if not tokens:
                continue
            if s.draft_token_ids:  # vLLM's update_from_output: the rejected drafts' positions are computed again
                s.num_accepted = len(tokens) - 1
                req.num_computed_tokens -= len(s.draft_token_ids) - s.num_accepted
            reason = self._append(req, tokens)
            if reason is None and self.proposer is not None:  # drafts for its next step (vLLM: the runner's)
                req.spec_token_ids = self.proposer.propose(req.all_token_ids, self.max_model_len)
            if reason is not None:
                req.status, req.finish_reason = RequestStatus.FINISHED, reason
                self.running.remove(req)
                self.block_manager.free(req.request_id)
                self.block_manager.forget(req.request_id)
                self._release_row(req)
                finished.append((req.request_id, reason))
        return finished

    def abort(self, req: Request) -> AbortRecord | None:
        """Finish ``req`` from outside the step loop, as vLLM's ``Scheduler.finish_requests(ids, FINISHED_ABORTED)``
        does (vllm/v1/core/sched/scheduler.py): out of the running list or the waiting queue, its blocks freed (tail
        first, as at a finish), status finished with reason ``abort``. Returns what it took away
        (``batchscope.steplog.records.AbortRecord``: its state, tokens, table length), or None if it had
        finished."""
        if req.is_finished:
            return None
        state = cast(AbortState, req.status.value)  # waiting, running or preempted (unfinished)
        if req.status == RequestStatus.RUNNING:
            self.running.remove(req)
            self._release_row(req)
        else:
            self.waiting.remove(req)
        table = self.block_manager.free(req.request_id)
        self.block_manager.forget(req.request_id)
        req.status, req.finish_reason = RequestStatus.FINISHED, FinishReason.ABORT
        return {"state": state, "num_output_tokens": len(req.output_token_ids), "num_freed_blocks": len(table)}

    def _append(self, req: Request, tokens: list[int]) -> FinishReason | None:
        """Append ``tokens`` to ``req``'s output, stopping at the first that finishes it (the rest are dropped from
        ``tokens`` too, as vLLM's ``_update_request_with_output`` does); with speculation on, the blocks the accepted
        tokens filled enter the prefix cache now, as vLLM caches them after the step. Returns the finish reason."""
        reason = None
        for i, token in enumerate(tokens):
            req.output_token_ids.append(token)
            reason = self._finish_reason(req, token)
            if reason is not None:
                del tokens[i + 1 :]
                break
        if self.proposer is not None:
            self.block_manager.cache_computed(req)
        return reason

    def _finish_reason(self, req: Request, token: int) -> FinishReason | None:
        if token in self.eos_token_ids and not req.sampling.ignore_eos:
            return FinishReason.STOP
        if len(req.output_token_ids) >= req.sampling.max_tokens:
            return FinishReason.LENGTH
        return None
