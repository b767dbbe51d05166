"""What the tracing scheduler knows between calls: the step being built, each request's slot and history.

Standard library only: it reads vLLM's scheduler and requests by attribute (``TracingScheduler`` passes itself in)
and produces plain dicts in Batchscope's trace format, schema version 2 (``docs/trace-format.md``). The calls
mirror vLLM's engine core: ``arrival`` (``add_request``), ``preempted`` (``_preempt_request``, before the
blocks go), ``scheduled`` (after ``schedule()``), ``before_update`` / ``updated`` (around
``update_from_output()``), ``aborted`` (``finish_requests``) and ``close`` (shutdown). A step record is complete
after its update; with asynchronous scheduling two steps are in flight and each update finds its own step by the
``SchedulerOutput`` it was given.

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
        self.done: set[str] = set()
        self.tables: set[str] = set()  # requests holding a block table
        self.slots: dict[str, int] = {}
        self.in_flight: dict[int, tuple[dict, dict, dict]] = {}  # id(SchedulerOutput) -> (record, requests, lens)
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
            "num_recomputed_tokens": 0,
            "arrival_time": spec["arrival_time"],
            "first_scheduled_time": None,
            "first_token_time": None,
            "finish_time": None,
        }
        self.summary_bytes += SUMMARY_BYTES_PER_REQUEST + len(req.request_id)

    def preempted_now(self, req: Any) -> None:
        self.preempted.append(req.request_id)
        info = self.requests.get(req.request_id)
        if info is not None:
            info["num_preemptions"] += 1
            info["num_recomputed_tokens"] += int(req.num_computed_tokens)
        self.slots.pop(req.request_id, None)

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
            entries.append(
                {
                    "request_id": rid,
                    "kind": kind,
                    "num_tokens": n,
                    "num_computed_tokens": before,
                    "slot": self._slot(rid),
                    "recompute": kind == "prefill" and req.num_preemptions > 0,
                }
            )
            info = self.requests.get(rid)
            if info is not None and info["first_scheduled_time"] is None:
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
            "num_cached_tokens": {
                e["request_id"]: e["num_computed_tokens"] for e in entries if e["request_id"] in admitted
            },
            "kv": kv,
        }
        self.arrived, self.preempted = [], []
        self.in_flight[id(out)] = (record, reqs, {})
        self.step += 1

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
        info = self.requests.get(rid)
        if info is not None:
            info["finish_reason"], info["finish_time"] = reason, when
        return {"request_id": rid, "reason": reason}

    def aborted_now(self, requests: list) -> None:
        """Requests finished from outside the step loop (client aborts): listed in the next completed step."""
        for req in requests:
            if req.request_id not in self.done:
                self.aborted.append(self._finish(req, self.now()))

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
