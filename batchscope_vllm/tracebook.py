"""What the tracing scheduler knows between calls: the step being built, each request's slot and history.

Standard library only: it reads vLLM's scheduler and requests by attribute (``TracingScheduler`` passes itself in)
and produces plain dicts in Batchscope's trace format, schema version 2 (``docs/trace-format.md``). The calls
mirror vLLM's engine core: ``arrival`` (``add_request``), ``preempted`` (``_preempt_request``, before the
blocks go), ``scheduled`` (after ``schedule()``), ``before_update`` / ``updated`` (around
``update_from_output()``), ``aborted`` (``finish_requests``) and ``close`` (shutdown). A step record is complete
after its update; with asynchronous scheduling two steps are in flight and each update finds its own step by the
``SchedulerOutput`` it was given.

Each step also carries ``decisions`` (``batchscope.steplog.records.DecisionsRecord``), read from vLLM's own state where
it decides: the admissions (tokens found in the prefix cache, recomputed and new, from each admitted request's computed
tokens and the most tokens it ever held K/V for), the preemptions (from ``_preempt_request``, before the blocks go:
victim, its K/V and table; the requester, the blocks it needed and the free ones from the allocation that failed
just before, which ``TracingScheduler`` captures by wrapping ``kv_cache_manager.allocate_slots`` and the
coordinator's ``get_num_blocks_to_allocate``) and, when someone still waits, the limit that held the head of the
waiting queue in vLLM's order of checks (a preemption in the step, the token budget left, ``max_num_running_reqs``,
its failed allocation, the whole-prompt budget check with chunked prefill off). What vLLM's state cannot tell is
left out, never guessed: a preemption outside ``schedule()`` (``reset_prefix_cache``) has no record (no victim rule
chose it), a preemption without a failed allocation just before has no requester, need or free, and the head has no
record when no known limit explains it (a paused scheduler, a KV connector, a request skipped for stale output).

Block ids are vLLM's minus 1 (vLLM keeps block 0 as a null block; ``num_kv_blocks`` excludes it), and block tables
are those of the first KV-cache group. ``kv.allocated`` comes from the block ids vLLM sends its workers in the
``SchedulerOutput`` (a new or resumed request's whole table, a running request's new blocks), ``kv.freed`` from its
finished and preempted requests: no table is copied per step.
"""

from __future__ import annotations

import time
from typing import Any

SUMMARY_BYTES_PER_REQUEST = 320  # room kept for a request's summary line entry, plus 8 per output token


class TraceBook:
    def __init__(self, sched: Any, writer: Any, header: dict, prompt_ids: bool = False):
        self.sched, self.writer, self.prompt_ids = sched, writer, prompt_ids
        self.t0 = time.perf_counter()
        self.wall0 = time.time()
        self.num_kv_blocks = int(header["config"]["num_kv_blocks"])
        self.step = 0
        self.requests: dict[str, dict] = {}  # request_id -> its summary entry (in arrival order)
        self.arrived: list[dict] = []  # since the last schedule()
        self.preempted: list[str] = []  # since the last schedule(), in order
        self.aborted: list[dict] = []  # finishes from outside (aborts), for the next completed step
        self.abort_facts: dict[str, dict] = {}  # request_id -> its state, tokens and blocks, just before an abort
        self.done: set[str] = set()
        self.tables: set[str] = set()  # requests holding a block table
        self.slots: dict[str, int] = {}
        self.in_flight: dict[int, tuple[dict, dict, dict]] = {}  # id(SchedulerOutput) -> (record, requests, lens)
        # decisions: the probe ``TracingScheduler`` wires into the KV cache manager (``.failed``: the last failed
        # allocation of the step, (request, allocate_slots kwargs, (full-sequence check?, blocks to allocate) or
        # None, free blocks)), each preempted request's most tokens with K/V, and what this schedule() decided
        self.probe: Any = None
        self.kv_high: dict[str, int] = {}  # request_id -> most tokens it held K/V for (preempted requests only)
        self.in_schedule = False
        self.step_preemptions: list[dict] = []
        self.step_preempted = False
        self.lookup: tuple[str, int] | None = None  # (request_id, local prefix-cache hit tokens) of the last lookup
        self.may_defer_prefills = False
        priority = str(header["config"].get("scheduling_policy")) == "priority"
        self.victim_rule = "lowest_priority" if priority else "newest"  # vLLM: max (priority, arrival) / running.pop()
        self.queue_order = "priority" if priority else "arrival"
        self.summary_bytes = 200
        self.closed = False
        writer.put(header)

    @property
    def active(self) -> bool:
        return not self.closed and self.writer.accepting

    def now(self) -> float:
        return max(0.0, time.perf_counter() - self.t0)

    def arrival(self, req: Any) -> None:
        params = getattr(req, "sampling_params", None)
        top_k = int(getattr(params, "top_k", 0) or 0)
        spec = {
            "request_id": req.request_id,
            "num_prompt_tokens": int(req.num_prompt_tokens),
            "max_tokens": max(1, int(req.max_tokens)),
            "temperature": float(getattr(params, "temperature", 1.0) or 0.0),
            "top_p": float(getattr(params, "top_p", 1.0)),
            "top_k": max(0, top_k),
            "seed": getattr(params, "seed", None),
            "ignore_eos": bool(getattr(params, "ignore_eos", False)),
            "arrival_time": max(0.0, float(req.arrival_time) - self.wall0),
            "arrival_step": self.step,
            "priority": int(req.priority),
        }
        if self.prompt_ids:  # BATCHSCOPE_TRACE_PROMPT_IDS=1: lets batchscope_vllm.compare replay prefix caching
            spec["prompt_token_ids"] = [int(t) for t in (req.prompt_token_ids or ())]
        self.arrived.append(spec)
        self.requests[req.request_id] = {
            "request_id": req.request_id,
            "output_token_ids": [],
            "finish_reason": None,
            "num_preemptions": 0,
            "num_dropped_tokens": 0,
            "num_recomputed_tokens": 0,
            "arrival_time": spec["arrival_time"],
            "first_scheduled_time": None,
            "first_token_time": None,
            "finish_time": None,
        }
        self.summary_bytes += SUMMARY_BYTES_PER_REQUEST + len(req.request_id)

    def scheduling(self, may_defer_prefills: bool = False) -> None:
        """Before ``schedule()``: a new step's decisions begin. ``may_defer_prefills``: vLLM may hold prefills back
        in this step (data-parallel throttling, ``prefill_schedule_interval``), a check this tracer cannot see."""
        self.in_schedule, self.step_preemptions, self.step_preempted, self.lookup = True, [], False, None
        self.may_defer_prefills = may_defer_prefills
        if self.probe is not None:
            self.probe.failed = None

    def prefix_lookup(self, req: Any, num_hit: int) -> None:
        """vLLM looked up ``req``'s prefix-cache hit while admitting (``_get_local_prefix_cache_hit``)."""
        self.lookup = (req.request_id, int(num_hit))

    def _failed_allocation(self) -> tuple[str, dict] | None:
        """(request id, ``{need, left, full}``) of the last allocation that failed in this step, or None. ``need``
        and ``left`` are what ``allocate_slots`` compared: blocks to allocate (+ the watermark it adds for a waiting
        request) and free blocks (- the blocks it reserves for in-flight loads); absent if it never counted."""
        failed = self.probe.failed if self.probe is not None else None
        if failed is None:
            return None
        req, kwargs, counted, free = failed
        numbers: dict[str, Any] = {"full": None if counted is None else bool(counted[0])}  # None: which check?
        if counted is not None:
            kvm = self.sched.kv_cache_manager
            waiting = str(getattr(req.status, "name", "")) in ("WAITING", "PREEMPTED")
            watermark = int(getattr(kvm, "watermark_blocks", 0) or 0) if kwargs.get("has_scheduled_reqs", True) else 0
            reserved = 0 if numbers["full"] else int(kwargs.get("reserved_blocks", 0) or 0)
            numbers["need"] = int(counted[1]) + (watermark if waiting else 0)
            numbers["left"] = int(free) - reserved
        return req.request_id, numbers

    def preempted_now(self, req: Any) -> None:
        rid = req.request_id
        dropped = int(req.num_computed_tokens)
        self.preempted.append(rid)
        info = self.requests.get(rid)
        if info is not None:
            info["num_preemptions"] += 1
            info["num_dropped_tokens"] += dropped
        self.kv_high[rid] = max(self.kv_high.get(rid, 0), dropped)
        self.slots.pop(rid, None)
        if not self.in_schedule:  # e.g. reset_prefix_cache preempting everyone: no victim rule chose it
            return
        self.step_preempted = True
        ids = self.sched.kv_cache_manager.get_block_ids(rid)
        record: dict[str, Any] = {
            "request_id": rid,
            "rule": self.victim_rule,
            "num_dropped_tokens": dropped,
            "num_dropped_blocks": sum(1 for b in (ids[0] if ids else ()) if b > 0),  # vLLM's null block 0 is no block
        }
        failed = self._failed_allocation()
        if failed is not None:  # the allocation that failed just before this preemption: its requester's
            record["requester"] = failed[0]
            if "need" in failed[1]:
                record["need"], record["free"] = failed[1]["need"], failed[1]["left"]
            self.probe.failed = None  # each preemption follows its own failed allocation
        self.step_preemptions.append(record)

    def _slot(self, rid: str) -> int:
        if rid not in self.slots:
            used = set(self.slots.values())
            self.slots[rid] = next(i for i in range(len(used) + 1) if i not in used)
        return self.slots[rid]

    def _scheduled(self, out: Any, t_start: float) -> tuple[list[dict], dict]:
        reqs, entries = {}, []
        spec = out.scheduled_spec_decode_tokens
        for rid, n in out.num_scheduled_tokens.items():
            req = self.sched.requests[rid]
            reqs[rid] = req
            before = int(req.num_computed_tokens) - n
            samples = not req.is_prefill_chunk  # the step reaches the end of the known tokens: one is sampled
            decode = n - len(spec.get(rid, ())) == 1 and samples and before >= req.num_prompt_tokens
            kind = "decode" if decode else "prefill"
            high = self.kv_high.get(rid, 0)
            again = max(0, min(before + n, high) - before)  # tokens of the chunk below the K/V a preemption dropped
            entries.append(
                {
                    "request_id": rid,
                    "kind": kind,
                    "num_tokens": n,
                    "num_computed_tokens": before,
                    "slot": self._slot(rid),
                    "recompute": kind == "prefill" and again > 0,
                }
                | ({"draft_token_ids": [int(t) for t in spec[rid]]} if spec.get(rid) else {})
            )
            info = self.requests.get(rid)
            if info is not None:
                info["num_recomputed_tokens"] += again
                if info["first_scheduled_time"] is None:
                    info["first_scheduled_time"] = t_start
        return entries, reqs

    def _kv(self, out: Any) -> dict:
        freed = sorted(r for r in set(out.finished_req_ids) | set(self.preempted) if r in self.tables)
        self.tables.difference_update(freed)
        allocated: dict[str, list[int]] = {}
        cached = out.scheduled_cached_reqs
        changes = [(nr.req_id, nr.block_ids, True) for nr in out.scheduled_new_reqs]
        changes += [(r, b, r in cached.resumed_req_ids) for r, b in zip(cached.req_ids, cached.new_block_ids)]
        for rid, block_ids, whole in changes:
            if whole and rid in self.tables:  # a whole new table replaces the old one
                self.tables.discard(rid)
                freed.append(rid)
            ids = [b - 1 for b in (block_ids[0] if block_ids else ()) if b > 0]
            if ids:
                allocated[rid] = ids
                self.tables.add(rid)
        free = self.sched.kv_cache_manager.block_pool.get_num_free_blocks()
        return {
            "num_blocks": self.num_kv_blocks,
            "block_size": int(self.sched.block_size),
            "num_used_blocks": max(0, self.num_kv_blocks - free),
            "freed": freed,
            "allocated": allocated,
        }

    def scheduled(self, out: Any, t_start: float) -> None:
        """After ``schedule()``: everything but what the forward pass returns."""
        entries, reqs = self._scheduled(out, max(0.0, t_start - self.t0))
        admitted = {nr.req_id for nr in out.scheduled_new_reqs} | set(out.scheduled_cached_reqs.resumed_req_ids)
        kv = self._kv(out)  # no kv.num_cached_tokens: the reader derives each fill from "scheduled"
        record = {
            "type": "step",
            "step": self.step,
            "t_start": max(0.0, t_start - self.t0),
            "t_end": max(0.0, t_start - self.t0),
            "arrived": self.arrived,
            "scheduled": entries,
            "num_batched_tokens": int(out.total_num_scheduled_tokens),
            "sampled": [],
            "admitted": [e["request_id"] for e in entries if e["request_id"] in admitted],
            "finished": [],
            "preempted": self.preempted,
            "waiting": self._waiting(),
            "running": [r.request_id for r in self.sched.running],
            "padding_slots": [],
            "num_prefix_hit_tokens": {
                e["request_id"]: e["num_computed_tokens"] for e in entries if e["request_id"] in admitted
            },
            "kv": kv,
            "decisions": self._decisions(out, entries, admitted),
        }
        self.arrived, self.preempted = [], []
        self.in_flight[id(out)] = (record, reqs, {})
        self.step += 1

    def _decisions(self, out: Any, entries: list[dict], admitted: set[str]) -> dict:
        """This step's ``decisions``, from vLLM's state right after ``schedule()``."""
        self.in_schedule = False
        admissions = []
        for e in entries:  # vLLM's batch order: running requests, then admissions in the order they were admitted
            rid = e["request_id"]
            if rid not in admitted:
                continue
            req = self.sched.requests[rid]
            hit, high, known = e["num_computed_tokens"], self.kv_high.get(rid, 0), int(req.num_tokens)
            admissions.append(
                {
                    "request_id": rid,
                    "resumed": int(req.num_preemptions) > 0,
                    "num_prefix_hit_tokens": hit,
                    "num_recompute_tokens": max(0, high - hit),
                    "num_new_tokens": known - max(high, hit),
                }
            )
        record: dict[str, Any] = {"admissions": admissions, "preemptions": self.step_preemptions}
        head = self._head(out)
        if head is not None:
            record["head"] = head
        self.step_preemptions = []
        return record

    def _head(self, out: Any) -> dict | None:
        """Why the head of vLLM's waiting queue (requests holding KV blocks first, as vLLM drains them) was not
        admitted: the first limit that held it, in the order ``Scheduler.schedule()`` checks them; None if nobody
        waits or no known limit explains it."""
        s = self.sched
        holding = getattr(s, "kv_holding_waiting", None)
        queue = holding if holding else s.waiting
        if not queue:
            return None
        if str(getattr(getattr(s, "_pause_state", None), "name", "UNPAUSED")) != "UNPAUSED":
            return None  # paused: no scheduling limit holds it
        req = queue.peek_request()
        rid = req.request_id
        head: dict[str, Any] = {"request_id": rid}
        left = int(s.max_num_scheduled_tokens) - int(out.total_num_scheduled_tokens)
        running = len(s.running) + int(getattr(s, "num_waiting_for_streaming_input", 0) or 0)
        failed = self._failed_allocation()
        if self.step_preempted:  # vLLM: ``if not preempted_reqs`` guards the whole waiting loop
            head["limit"] = "preempted_this_step"
        elif left <= 0:  # ``while token_budget > 0``
            head.update(limit="token_budget", need=1, left=0)
        elif running >= int(getattr(s, "max_num_active_reqs", s.max_num_running_reqs)):
            head.update(limit="max_num_seqs", need=1, left=0)
        elif failed is not None and failed[0] == rid:  # its allocate_slots returned None: ``break``
            if failed[1]["full"] is None:
                return None  # it never counted blocks: neither KV check is known to have failed
            head["limit"] = "kv_blocks_full_prompt" if failed[1]["full"] else "kv_blocks"
            if "need" in failed[1]:
                head["need"], head["left"] = failed[1]["need"], failed[1]["left"]
        elif (
            not s.scheduler_config.enable_chunked_prefill
            and not s.scheduler_config.long_prefill_token_threshold  # it would cut the tokens the check compares
            and not self.may_defer_prefills  # a deferral is checked before it and would look the same
            and self.lookup is not None
            and self.lookup[0] == rid
        ):
            need = int(req.num_tokens) - self.lookup[1]  # what it must compute beyond its prefix-cache hit
            if need <= left:
                return None  # the whole-prompt check did not stop it: something this tracer does not know did
            head.update(limit="chunked_prefill_off", need=need, left=left)
        else:
            return None
        head["order"] = self.queue_order
        return head

    def _waiting(self) -> list[str]:
        s = self.sched
        ids = [r.request_id for r in getattr(s, "kv_holding_waiting", ())] + [r.request_id for r in s.waiting]
        seen = set(ids)
        return ids + [r.request_id for r in getattr(s, "deferred_waiting", ()) if r.request_id not in seen]

    def before_update(self, out: Any, t_end: float) -> None:
        entry = self.in_flight.get(id(out))
        if entry is not None:
            record, reqs, lens = entry
            record["t_end"] = max(record["t_start"], t_end - self.t0)
            lens.update({rid: len(req.output_token_ids) for rid, req in reqs.items()})

    def updated(self, out: Any) -> None:
        """After ``update_from_output()``: the tokens sampled and the requests that finished; the record is done."""
        entry = self.in_flight.pop(id(out), None)
        if entry is None:
            return
        record, reqs, lens = entry
        for entry in record["scheduled"]:  # speculative decoding: update_from_output rolled the rejected drafts back
            drafts = entry.get("draft_token_ids")
            req = reqs.get(entry["request_id"])
            if drafts and req is not None and not getattr(out, "num_invalid_spec_tokens", None):
                rejected = entry["num_computed_tokens"] + entry["num_tokens"] - int(req.num_computed_tokens)
                entry["num_accepted_tokens"] = max(0, min(len(drafts), len(drafts) - rejected))
        for rid, req in reqs.items():
            new = list(req.output_token_ids[lens.get(rid, len(req.output_token_ids)) :])
            record["sampled"] += [{"request_id": rid, "token_id": int(t)} for t in new]
            info = self.requests.get(rid)
            if info is not None and new:
                info["output_token_ids"] += [int(t) for t in new]
                self.summary_bytes += 8 * len(new)
                if info["first_token_time"] is None:
                    info["first_token_time"] = record["t_end"]
            if req.is_finished() and rid not in self.done:
                record["finished"].append(self._finish(req, record["t_end"]))
        record["finished"] += self.aborted
        self.aborted = []
        self.writer.put(record, reserve=self.summary_bytes)

    def _finish(self, req: Any, when: float) -> dict:
        rid = req.request_id
        reason = str(req.get_finished_reason())
        self.done.add(rid)
        self.slots.pop(rid, None)
        self.kv_high.pop(rid, None)
        info = self.requests.get(rid)
        if info is not None:
            info["finish_reason"], info["finish_time"] = reason, when
        return {"request_id": rid, "reason": reason}

    def aborting(self, request_ids: Any) -> None:
        """Before vLLM's ``finish_requests`` (``request_ids``: one id, a list, or None for all): each request's
        state, sampled tokens and block table, while vLLM still has them (it then sets the finished status and
        frees the blocks). vLLM's statuses map to three states: ``RUNNING``, ``PREEMPTED`` (in the waiting queue
        without K/V), any other unfinished one (``WAITING``, ``WAITING_FOR_*``) waiting."""
        s = self.sched
        ids = (
            s.requests.keys() if request_ids is None else [request_ids] if isinstance(request_ids, str) else request_ids
        )
        self.abort_facts = {}
        for rid in ids:
            req = s.requests.get(rid)
            if req is None or req.is_finished():
                continue
            status = str(getattr(req.status, "name", ""))
            table = s.kv_cache_manager.get_block_ids(rid)
            facts: dict[str, Any] = {
                "state": {"RUNNING": "running", "PREEMPTED": "preempted"}.get(status, "waiting"),
                "num_output_tokens": len(req.output_token_ids),
                "num_freed_blocks": sum(1 for b in (table[0] if table else ()) if b > 0),  # not vLLM's null block
            }
            if self.in_flight:  # between schedule() and update_from_output(): that step's work is discarded
                facts["during_step"] = True
            self.abort_facts[rid] = facts

    def aborted_now(self, requests: list) -> None:
        """Requests finished from outside the step loop (client aborts, stop strings, timeouts): listed in the
        ``finished`` of the step in flight, or of the next step when none is (``aborted``: ``aborting``'s facts)."""
        for req in requests:
            if req.request_id not in self.done:
                entry = self._finish(req, self.now())
                facts = self.abort_facts.get(req.request_id)
                if facts is not None and entry["reason"] == "abort":
                    entry["aborted"] = facts
                self.aborted.append(entry)
        self.abort_facts = {}

    def close(self) -> None:
        """Flush the steps still in flight (without their tokens), then the summary; stop the writer."""
        if self.closed:
            return
        self.closed = True
        for record, _, _ in list(self.in_flight.values()):
            self.writer.put(record, reserve=self.summary_bytes)
        self.in_flight.clear()
        summary: dict[str, Any] = {"type": "summary", "requests": list(self.requests.values())}
        if self.writer.capped_at is not None:
            summary["truncated_at_step"] = self.writer.capped_at
        self.writer.close(summary)
