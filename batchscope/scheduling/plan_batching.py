"""A model-free scheduling core in the engine's step loop: the TGI and TensorRT-LLM families (``--batching tgi``,
``--batching trtllm``).

A core (``batchscope.tgi_family.core.TgiCore``, ``batchscope.trtllm_family.core.TrtllmCore``) keeps its engine's
rules on request ids and token counts and answers each step with a ``ForwardPlan``
(``batchscope.scheduling.forward_plan``). This adapter is the whole mapping onto the engine:

- **The forward**: each ``Work`` becomes a ``ScheduledRequest`` (its tokens from its K/V position); the core's block
  ids are the runner's block table, so the model reads and writes the very blocks the core handed out.
- **Admissions** are recorded with their prefix-cache hit (``cache_len``), the blocks given and those set aside
  beyond them (``num_reserved_blocks``: TGI allocates a request's whole lifetime at admission, TensorRT-LLM's
  no-evict policy sets its blocks to completion aside).
- **A pause** (TensorRT-LLM ``MAX_UTILIZATION``) is a preemption with the rule ``trtllm_pause``: the request's K/V is
  dropped, its outputs stay, and it computes prompt and outputs again when it resumes.
- **Stalled** requests (TGI without prefill chunking: a new batch is prefilled alone) are the batch record's
  ``decodes_waiting``; the family's own record of its scheduling call is ``decisions.scheduling_call``.
- **Batch rows** (the trace's ``slot``): held from admission to finish or pause, the lowest free row first.

Sampling stays the engine's: the adapter tells the core which requests sampled an end-of-sequence token
(``stopped``) and the core finishes them early.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from batchscope.engine.config import EngineConfig
from batchscope.engine.request import FinishReason, Request, RequestStatus
from batchscope.scheduling.forward_plan import Admission, ForwardPlan, Pause
from batchscope.scheduling.scheduler_output import ScheduledRequest, SchedulerOutput, admission_record
from batchscope.steplog.records import AbortRecord, AbortState, HeadWaitRecord, KVExtras

PAUSE_RULE = "trtllm_pause"  # the last started request (``batchscope.steplog.reasons.VICTIM_RULES``)


class Core(Protocol):
    """What the adapter needs of a scheduling core (the contract of ``batchscope.scheduling.forward_plan``)."""

    @property
    def running(self) -> list[str]: ...

    @property
    def waiting(self) -> list[str]: ...

    @property
    def block_tables(self) -> dict[str, list[int]]: ...

    def add_request(self, request_id: str, prompt_token_ids: list[int], max_new_tokens: int) -> None: ...

    def has_work(self) -> bool: ...

    def schedule(self) -> ForwardPlan: ...

    def update(self, plan: ForwardPlan, sampled: dict[str, int], stopped: set[str] = ...) -> list[str]: ...

    def abort(self, request_id: str) -> str | None: ...

    def pool(self) -> dict: ...


def flat_call(decision: dict | None) -> dict | None:
    """A core's record of its scheduling call as the step log keeps it: numbers, names and lists of ids, a nested
    record's fields one level up (``batch.size`` -> ``batch_size``). Lists of records (admissions, allocator calls)
    and the head are left out: the step's ``admissions`` and ``head`` say them in the log's own words."""
    if decision is None:
        return None
    out: dict[str, Any] = {}
    for key, value in decision.items():
        if isinstance(value, dict) and key != "head":
            out.update({f"{key}_{k}": v for k, v in value.items() if _plain(v)})
        elif _plain(value):
            out[key] = value
    return out


def _plain(value: object) -> bool:
    """A number, a name, a flag, null, or a list of numbers and names."""
    if isinstance(value, list):
        return all(isinstance(v, (int, str)) for v in value)
    return value is None or isinstance(value, (int, float, str, bool))


class CoreTables:
    """What the step log reads of a block manager (``batchscope.engine.step_log.kv_record``), over a core."""

    def __init__(self, core: Core):
        self.core = core
        self.block_tables: dict[str, list[int]] = {}
        self.pool = self

    @property
    def num_used_blocks(self) -> int:
        """Blocks in the requests' tables (a TGI request's whole reservation included, a shared block once); cached
        blocks nobody's table holds count as free, as in vLLM."""
        return len({b for table in self.block_tables.values() for b in table})

    def ref_counts(self) -> dict[int, int]:
        """Blocks in more than one table (a shared cached prefix) -> how many."""
        counts: dict[int, int] = {}
        for table in self.block_tables.values():
            for b in table:
                counts[b] = counts.get(b, 0) + 1
        return {b: n for b, n in counts.items() if n > 1}

    def cached_free_blocks(self) -> list[int]:
        """Free blocks that keep a cached prefix, in the order they would be reclaimed (if the core says)."""
        listed = getattr(self.core, "cached_free_blocks", None)
        return list(listed()) if listed is not None else []

    def take_evicted(self) -> list[int]:
        taken = getattr(self.core, "take_evicted", None)
        return list(taken()) if taken is not None else []


class PlanBatching:
    """The engine-facing scheduler over a core (the methods ``batchscope.engine.engine.LLMEngine`` calls).

    Subclasses build the core from an ``EngineConfig`` (``make_core``) and name the family's limits
    (``HEAD_LIMITS``: the core's reason -> ``batchscope.steplog.reasons`` limit)."""

    HEAD_LIMITS: dict[str, str] = {}
    NUMBERS: dict[str, str] = {}  # the core's head numbers -> the step log's ``need`` / ``left``

    def __init__(self, config: EngineConfig, eos_token_ids: frozenset[int] = frozenset()):
        self.config, self.eos_token_ids = config, frozenset(eos_token_ids)
        self.max_model_len: int | None = None  # set by the engine (these families never schedule drafts)
        self.core = self.make_core(config)
        self.block_manager = CoreTables(self.core)
        self.requests: dict[str, Request] = {}
        self.rows: dict[str, int] = {}
        self.last: ForwardPlan | None = None
        self.kv_tokens: dict[str, int] = {}  # request -> K/V tokens written by the end of this step's forward

    def make_core(self, config: EngineConfig) -> Core:
        raise NotImplementedError

    @property
    def running(self) -> list[Request]:
        """Requests holding a batch row, in the core's batch order."""
        return [self.requests[rid] for rid in self.core.running if rid in self.rows]

    @property
    def waiting(self) -> list[Request]:
        return [self.requests[rid] for rid in self.core.waiting]

    def add_request(self, request: Request) -> None:
        request.status, request.arrival_seq = RequestStatus.WAITING, len(self.requests)
        self.requests[request.request_id] = request
        self.core.add_request(request.request_id, list(request.prompt_token_ids), request.sampling.max_tokens)

    def has_unfinished(self) -> bool:
        return self.core.has_work()

    def step_stats(self) -> KVExtras:
        """The K/V each request holding blocks has written by the end of this step's forward (not only the scheduled
        ones': a TGI request's reservation outruns its tokens, and a stalled one writes nothing), and the blocks set
        aside beyond those held (TensorRT-LLM's no-evict reservation), counted with the used ones as a static
        batch's are."""
        stats: KVExtras = {"num_cached_tokens": dict(self.kv_tokens)}
        reserved = int(self.core.pool().get("reserved_blocks", 0))
        if reserved:
            stats["num_reserved_blocks"] = self.block_manager.num_used_blocks + reserved
        return stats

    def on_idle(self) -> None:
        """Nothing runs or waits: the core needs no telling (its next call is an idle server's)."""

    def schedule(self) -> SchedulerOutput:
        plan = self.last = self.core.schedule()
        before = {rid: list(t) for rid, t in self.block_manager.block_tables.items()}
        out = SchedulerOutput()
        for pause in plan.paused:
            self._paused(self.requests[pause.request_id], out, pause)
        for admission in plan.admitted:
            self._admit(self.requests[admission.request_id], out, admission)
        tables = {rid: list(t) for rid, t in self.core.block_tables.items() if rid in self.rows}
        for work in plan.work:
            req = self.requests[work.request_id]
            s = ScheduledRequest(req, work.num_tokens, work.num_computed_tokens, self.rows[work.request_id])
            assert s.samples == work.samples, f"{work.request_id}: the core and the request disagree on sampling"
            out.scheduled.append(s)
            new = [b for b in tables[work.request_id] if b not in before.get(work.request_id, ())]
            if new:
                out.allocated_blocks[work.request_id] = new
        out.batch = {"kind": plan.kind, "decodes_waiting": list(plan.stalled)}
        out.scheduling_call = flat_call(plan.decision)
        out.running_prefill = any(
            s.kind == "prefill" and s.request.request_id not in out.admitted_req_ids for s in out.scheduled
        )
        out.head = self._head(plan.head)
        self.block_manager.block_tables = tables
        self.kv_tokens = {rid: self.requests[rid].num_computed_tokens for rid in tables}
        self.kv_tokens.update({s.request.request_id: s.num_computed_tokens + s.num_tokens for s in out.scheduled})
        return out

    def _admit(self, req: Request, out: SchedulerOutput, admission: Admission) -> None:
        used = set(self.rows.values())
        self.rows[req.request_id] = next(r for r in range(len(used) + 1) if r not in used)
        req.status = RequestStatus.RUNNING
        out.admitted_req_ids.append(req.request_id)
        out.prefix_hit_tokens[req.request_id] = admission.cache_len
        record = admission_record(req, admission.cache_len)
        record["num_blocks"] = admission.num_blocks
        if admission.reserved_blocks:
            record["num_reserved_blocks"] = admission.reserved_blocks
        out.admissions.append(record)
        req.num_computed_tokens = admission.cache_len

    def _paused(self, req: Request, out: SchedulerOutput, pause: Pause) -> None:
        """A pause: back to the queue (the core put it there), its row free, its K/V dropped, its outputs kept."""
        dropped = req.num_computed_tokens
        self.rows.pop(req.request_id)
        out.preempted_req_ids.append(req.request_id)
        out.preemptions.append(
            {
                "request_id": req.request_id,
                "rule": PAUSE_RULE,
                "num_dropped_tokens": dropped,
                "num_dropped_blocks": pause.num_freed_blocks,
            }
        )
        req.num_kv_high = max(req.num_kv_high, dropped)
        req.num_dropped_tokens += dropped
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = RequestStatus.PREEMPTED

    def _head(self, head: dict | None) -> HeadWaitRecord | None:
        """The core's head in the step log's words: its limit (``HEAD_LIMITS``), what it needed and what was left."""
        if head is None:
            return None
        record: dict[str, Any] = {"request_id": head["request_id"], "limit": self.HEAD_LIMITS[head["reason"]]}
        for key, name in self.NUMBERS.items():
            if key in head:
                record[name] = head[key]
        record["order"] = "arrival"
        return cast(HeadWaitRecord, record)

    def update(self, out: SchedulerOutput, sampled: dict[str, list[int]]) -> list[tuple[str, FinishReason]]:
        """Apply the step's sampled tokens (one per sampling request: no drafts here) to the requests and the core.
        Returns who finished, in batch order."""
        assert self.last is not None
        one = {rid: tokens[0] for rid, tokens in sampled.items() if tokens}
        stopped = {
            rid for rid, t in one.items() if t in self.eos_token_ids and not self.requests[rid].sampling.ignore_eos
        }
        done = set(self.core.update(self.last, one, stopped))
        finished = []
        for s in out.scheduled:
            req = s.request
            req.num_computed_tokens = s.num_computed_tokens + s.num_tokens
            req.num_recomputed_tokens += s.num_recomputed
            if req.request_id in one:
                req.output_token_ids.append(one[req.request_id])
            if req.request_id in done:
                req.status = RequestStatus.FINISHED
                req.finish_reason = FinishReason.STOP if req.request_id in stopped else FinishReason.LENGTH
                self.rows.pop(req.request_id)
                self.block_manager.block_tables.pop(req.request_id, None)
                finished.append((req.request_id, req.finish_reason))
        return finished

    def abort(self, req: Request) -> AbortRecord | None:
        """End ``req`` between steps (the core frees its blocks)."""
        if req.is_finished:
            return None
        state = cast(AbortState, req.status.value)
        held = len(self.block_manager.block_tables.get(req.request_id, ()))
        if self.core.abort(req.request_id) is None:
            return None
        self.rows.pop(req.request_id, None)
        self.block_manager.block_tables.pop(req.request_id, None)
        req.status, req.finish_reason = RequestStatus.FINISHED, FinishReason.ABORT
        return {"state": state, "num_output_tokens": len(req.output_token_ids), "num_freed_blocks": held}
