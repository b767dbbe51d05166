"""The SGLang scheduling family in the engine's step loop (``--batching sglang``):
``batchscope.sglang_family.scheduler`` decides, this adapter turns its decision into the engine's ``SchedulerOutput``
and applies the sampled tokens back.

The rules stay in the core (``batchscope.sglang_family.scheduler``, ``batchscope.sglang_family.prefill_adder``,
``batchscope.sglang_family.radix_cache``, ``batchscope.sglang_family.policy``; proven against SGLang 0.5.23 in
``tests_sglang``); here only the mapping:

- **Memory**: SGLang's ``page_size`` 1 is the engine's paged pool with ``block_size`` 1 (``page_size_one`` maps a
  config of ``num_kv_blocks`` blocks of ``block_size`` tokens onto the same number of token slots). A block table
  is a request's token slots (``batchscope.sglang_family.slots``): its radix-cache path, then its own new tokens. A
prefix hit
  is the request's cached prefix: it starts computing after it, as a vLLM-style hit does.
- **Settings** (SGLang's ``ServerArgs`` name <- ``EngineConfig`` name): ``max_running_requests`` <-
  ``max_num_seqs``, ``chunked_prefill_size`` <- ``max_num_batched_tokens``, the token pool <- ``num_kv_blocks``
  (``block_size`` 1), ``schedule_policy`` <- ``scheduling_policy`` (``fcfs`` or ``lpm``), ``disable_radix_cache``
  <- not ``enable_prefix_caching``, ``enable_mixed_chunk`` <- ``enable_mixed_chunk``. Chunked prefill must be on;
  ``reserve_full_prompt`` does not apply.
- **A step**: an EXTEND batch (prefill-first: it runs alone, the running requests' decodes wait; with mixed chunks
  they decode inside it, after its members) or a DECODE batch of every running request. A retraction is recorded as
  a preemption (the request is back in the queue and recomputes what the cache does not keep) with the rule
  ``sglang_retract`` and the tokens freed.
- **Batch rows** (the trace's ``slot``): held from admission to finish or retraction, by the running requests, the
  EXTEND batch's members and the chunked request (SGLang's ``max_running_requests`` counts the same).

- **Arrival** (SGLang's request handling, ``batchscope.sglang_family.request_handling``): the request runs with the
  ``max_new_tokens`` SGLang grants it (its ``max_tokens`` clipped to the pool or the context); a prompt SGLang
  refuses has its prompt swapped for SGLang's one-token stand-in (the runner computes that token, as SGLang's
  forward does) and ends with an abort when that prefill samples. Both are recorded as ``request_limits``.
- **Abort** (``abort``, SGLang's ``abort_request``): a waiting or retracted request and the chunked request
  mid-prompt end before the step (the step's ``finished`` lists them with their ``aborted`` record); any other running
  request is marked to finish, runs on with its batch, and ends after the step in which it next samples, with that
  token, its ``aborted`` record marked ``to_finish`` and its K/V cached as a finish's.

Decision records (``batchscope.steplog.records``): ``request_limits``, ``batch`` (kind, ``new_token_ratio``, the decodes
that wait, and with mixed chunks on the decodes that ran inside the EXTEND batch), admissions with
``num_reserved_output_tokens`` (and ``output_ratio`` 1.0 for an ``ignore_eos`` request, whose remaining output later
admissions charge whole), retractions, and the head's limit (``batchscope.steplog.reasons``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.engine.request import FinishReason, Request, RequestStatus
from batchscope.scheduling.scheduler_output import ScheduledRequest, SchedulerOutput, admission_record
from batchscope.sglang_family.policy import POLICIES
from batchscope.sglang_family.request_handling import RequestLimits
from batchscope.sglang_family.scheduler import SGLangScheduler, SglStep
from batchscope.sglang_family.slots import SlotMemory
from batchscope.sglang_family.state import SglRequest
from batchscope.steplog.records import AbortRecord, AbortState, KVExtras, RequestLimitRecord

RETRACT_RULE = (
    "sglang_retract"  # fewest output tokens, then longest prompt (``batchscope.steplog.reasons.VICTIM_RULES``)
)
QUEUE_ORDER = {"fcfs": "arrival", "lpm": "longest_prefix"}  # ``batchscope.steplog.reasons.QUEUE_ORDERS``


def page_size_one(config: EngineConfig) -> EngineConfig:
    """The same pool as token slots: ``block_size`` 1, ``num_kv_blocks`` = blocks x block_size (SGLang's page 1)."""
    return replace(config, block_size=1, num_kv_blocks=config.num_kv_blocks * config.block_size)


def validate_sglang(config: EngineConfig) -> None:
    """``ConfigError`` for the first setting the SGLang family cannot take (then the usual ranges)."""
    config.validate(queues=POLICIES)
    if config.block_size != 1:
        raise ConfigError("block_size", config.block_size, "1 under batching sglang (SGLang's page_size 1)")
    if not config.enable_chunked_prefill:
        raise ConfigError("enable_chunked_prefill", False, "true under batching sglang (chunked_prefill_size)")
    if config.num_kv_blocks < 2:  # TpModelWorker: max_req_len = pool - 1 must be > 0, or SGLang does not start
        raise ConfigError("num_kv_blocks", config.num_kv_blocks, ">= 2 token slots under batching sglang")
    if config.enable_mixed_chunk and config.max_num_batched_tokens <= config.max_num_seqs:
        allowed = (
            f"> max_num_seqs={config.max_num_seqs} with enable_mixed_chunk (each mixed decode takes a chunk token)"
        )
        raise ConfigError("max_num_batched_tokens", config.max_num_batched_tokens, allowed)


class SlotTables:
    """What the step log reads of a block manager (``batchscope.engine.step_log.kv_record``), over ``SlotMemory``."""

    def __init__(self, memory: SlotMemory):
        self.memory = memory
        self.block_tables: dict[str, list[int]] = {}
        self.pool = self

    @property
    def num_used_blocks(self) -> int:
        """Slots held by requests or by locked cache tokens (evictable cached ones count as free, as in vLLM)."""
        return self.memory.pool_tokens - self.memory.free - self.memory.cache.evictable

    def ref_counts(self) -> dict[int, int]:
        """Slots in more than one table (a shared cached prefix) -> how many."""
        counts: dict[int, int] = {}
        for table in self.block_tables.values():
            for s in table:
                counts[s] = counts.get(s, 0) + 1
        return {s: n for s, n in counts.items() if n > 1}

    def cached_free_blocks(self) -> list[int]:
        return self.memory.evictable_slots()

    def take_evicted(self) -> list[int]:
        return self.memory.take_evicted()


class SGLangBatching:
    """The engine-facing scheduler of the SGLang family (the methods ``batchscope.engine.engine.LLMEngine`` calls)."""

    def __init__(self, config: EngineConfig, eos_token_ids: frozenset[int] = frozenset()):
        validate_sglang(config)
        self.config, self.eos_token_ids = config, frozenset(eos_token_ids)
        self.max_model_len: int | None = None  # set by the engine (this family never schedules drafts)
        self.memory = SlotMemory(config.num_kv_blocks, config.enable_prefix_caching)
        self.core = SGLangScheduler(
            config.max_num_seqs,
            config.max_num_batched_tokens,
            config.num_kv_blocks,
            config.scheduling_policy,
            config.enable_prefix_caching,
            self.memory,
            config.enable_mixed_chunk,
        )
        self.block_manager = SlotTables(self.memory)
        self.requests: dict[str, Request] = {}
        self.sgl: dict[str, SglRequest] = {}
        self.running: list[Request] = []  # requests holding a batch row, in admission order
        self.rows: dict[str, int] = {}
        self.last: SglStep | None = None
        self.limit_records: list[RequestLimitRecord] = []  # handled since the last step (its ``request_limits``)
        self.abort_states: dict[str, AbortState] = {}  # marked to finish -> its state when the abort came

    @property
    def waiting(self) -> list[Request]:
        """The waiting queue in SGLang's order (as last sorted by the policy)."""
        return [self.requests[r.request_id] for r in self.core.waiting]

    def add_request(self, request: Request) -> None:
        """SGLang's request handling (``SGLangScheduler.handle_request``), then the waiting queue. A clip or a
        refusal is recorded for the next step (``request_limits``); a refused request's prompt becomes SGLang's
        one-token stand-in, which is what the runner computes for it."""
        request.status, request.arrival_seq = RequestStatus.WAITING, len(self.requests)
        sp = request.sampling
        sgl = SglRequest(request.request_id, list(request.prompt_token_ids), sp.max_tokens, self.eos_token_ids)
        sgl.ignore_eos = sp.ignore_eos
        self.requests[request.request_id], self.sgl[request.request_id] = request, sgl
        self.core.limits = limits = RequestLimits(self.config.num_kv_blocks, self.max_model_len)
        handled = self.core.handle_request(sgl, sp.max_tokens)
        if handled.max_new_tokens == sp.max_tokens and handled.error is None:
            return
        record: RequestLimitRecord = {
            "request_id": request.request_id,
            "num_prompt_tokens": request.num_prompt_tokens,
            "max_tokens": sp.max_tokens,
            "max_new_tokens": handled.max_new_tokens,
            "max_req_len": limits.max_req_len,
            "bound": limits.bound,
        }
        if handled.error is not None:
            record["error"] = handled.error
            request.prompt_token_ids = list(sgl.prompt_token_ids)
            self.abort_states[request.request_id] = "waiting"
        self.limit_records.append(record)

    def has_unfinished(self) -> bool:
        return bool(self.core.waiting or self.running)

    def step_stats(self) -> KVExtras:
        return {}

    def on_idle(self) -> None:
        """Nothing runs or waits this step: SGLang's idle step resets new_token_ratio (``Scheduler.on_idle``)."""
        self.core.update(SglStep("idle"), {})

    def schedule(self) -> SchedulerOutput:
        step = self.last = self.core.schedule()
        out = SchedulerOutput()
        for rid, dropped, freed in step.retractions:
            self._retracted(self.requests[rid], out, dropped, freed, step.retract_need)
        for rid in step.admitted:
            self._admit(self.requests[rid], out, step)
        for sgl, n in step.run:
            req = self.requests[sgl.request_id]
            out.scheduled.append(ScheduledRequest(req, n, sgl.kv_len - n, self.rows[sgl.request_id]))
            out.allocated_blocks[sgl.request_id] = self.memory.own[sgl][-n:]
        waits = [r.request_id for r in self.core.running] if step.kind == "extend" else []
        out.batch = {"kind": step.kind, "new_token_ratio": self.core.ratio, "decodes_waiting": waits}
        if self.config.enable_mixed_chunk:
            out.batch["decodes_mixed"] = step.mixed
        self._hold_head(out)
        self.block_manager.block_tables = {rid: self.memory.table(self.sgl[rid]) for rid in self.rows}
        out.request_limits, self.limit_records = self.limit_records, []
        return out

    def _admit(self, req: Request, out: SchedulerOutput, step: SglStep) -> None:
        used = set(self.rows.values())
        self.rows[req.request_id] = next(r for r in range(self.config.max_num_seqs) if r not in used)
        req.status = RequestStatus.RUNNING
        self.running.append(req)
        hit = step.prefix_hits[req.request_id]
        out.admitted_req_ids.append(req.request_id)
        out.prefix_hit_tokens[req.request_id] = hit
        record = admission_record(req, hit)
        record["num_reserved_output_tokens"] = step.reserved[req.request_id]
        if req.sampling.ignore_eos:  # SGLang charges a fixed length's remaining output whole while it runs
            record["output_ratio"] = 1.0
        out.admissions.append(record)
        req.num_computed_tokens = hit

    def _retracted(self, req: Request, out: SchedulerOutput, dropped: int, freed: int, need: tuple[int, int]) -> None:
        """A retraction: back to the queue (the core put it there), its row free, its K/V minus the cache gone."""
        self.running.remove(req)
        self.rows.pop(req.request_id)
        out.preempted_req_ids.append(req.request_id)
        out.preemptions.append(
            {
                "request_id": req.request_id,
                "rule": RETRACT_RULE,
                "num_dropped_tokens": dropped,
                "num_dropped_blocks": dropped,
                "need": need[0],
                "free": need[1],
                "num_freed_tokens": freed,
            }
        )
        req.num_kv_high = max(req.num_kv_high, dropped)
        req.num_dropped_tokens += dropped
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED

    def _hold_head(self, out: SchedulerOutput) -> None:
        """Why the head of the queue stays out: the core's limit, or a retraction this very step."""
        if not self.core.waiting:
            return
        limit, need, left = self.core.held or ("preempted_this_step", None, None)
        out.head = {"request_id": self.core.waiting[0].request_id, "limit": limit}
        if need is not None and left is not None:
            out.head["need"], out.head["left"] = need, left
        out.head["order"] = QUEUE_ORDER[self.config.scheduling_policy]

    def update(self, out: SchedulerOutput, sampled: dict[str, list[int]]) -> list[tuple[str, FinishReason]]:
        """Apply the step's sampled tokens (one per request that samples: no speculation in this family): the core's
        state, then the engine's requests. Returns who finished."""
        assert self.last is not None
        one = {rid: tokens[0] for rid, tokens in sampled.items() if tokens}
        done = set(self.core.update(self.last, one))
        finished = []
        for s in out.scheduled:
            req = s.request
            req.num_computed_tokens = s.num_computed_tokens + s.num_tokens
            req.num_recomputed_tokens += s.num_recomputed
            token = one.get(req.request_id)
            if token is not None:
                req.output_token_ids.append(token)
            if req.request_id in done:
                req.status = RequestStatus.FINISHED
                req.finish_reason = FinishReason(self.sgl[req.request_id].finish_reason)
                if req.finish_reason is FinishReason.ABORT:
                    out.aborted[req.request_id] = self._ended_by_abort(req)
                self._leave(req)
                finished.append((req.request_id, req.finish_reason))
        return finished

    def _ended_by_abort(self, req: Request) -> AbortRecord:
        """The record of a request marked to finish that ended in this step: its state when the abort came, the
        tokens it sampled (this step's included), its table during the step (its K/V now cached as a finish's)."""
        record: AbortRecord = {
            "state": self.abort_states.pop(req.request_id),
            "num_output_tokens": len(req.output_token_ids),
            "num_freed_blocks": len(self.block_manager.block_tables.get(req.request_id, ())),
            "to_finish": True,
        }
        error = self.sgl[req.request_id].error
        if error is not None:
            record["error"] = error
        return record

    def _leave(self, req: Request) -> None:
        self.running.remove(req)
        self.rows.pop(req.request_id)
        self.block_manager.block_tables.pop(req.request_id, None)

    def abort(self, req: Request) -> AbortRecord | None:
        """An abort between steps, as SGLang's ``abort_request`` takes it (``SGLangScheduler.abort``): the record of a
        request that ends now (waiting, retracted, or the chunked one mid-prompt, whose chunk in flight is freed);
        None for one that had finished, or one only marked to finish (its record comes with the step it ends in)."""
        if req.is_finished:
            return None
        state = cast(AbortState, req.status.value)
        held = len(self.memory.table(self.sgl[req.request_id])) if req.request_id in self.rows else 0
        how = self.core.abort(self.sgl[req.request_id])
        if how is None:
            return None
        if how == "to_finish":
            self.abort_states.setdefault(req.request_id, state)
            return None
        if how == "chunked":
            self._leave(req)
        self.abort_states.pop(req.request_id, None)
        req.status, req.finish_reason = RequestStatus.FINISHED, FinishReason.ABORT
        return {"state": state, "num_output_tokens": len(req.output_token_ids), "num_freed_blocks": held}
