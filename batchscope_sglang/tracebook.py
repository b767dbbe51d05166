"""What the SGLang tracer knows between calls: the steps in flight, each request's row, table and history.

Standard library only: it reads SGLang 0.5.23's scheduler, batches and requests by attribute (``TracingScheduler``
passes itself in) and produces plain dicts in Batchscope's trace format, schema version 2 (``docs/trace-format.md``,
header ``source`` ``sglang``, ``policy`` ``sglang``). The calls follow SGLang's event loop
(sglang/srt/managers/scheduler.py, ``event_loop_normal`` / ``event_loop_overlap``)::

    _add_request_to_queue --> arrival            (a new request; a retracted one re-enters unseen)
    abort_request         --> aborting / aborted (a waiting request leaves the queue at once)
    get_next_batch_to_run --> scheduling / scheduled   (the step's record, all but its outputs)
        update_running_batch --> each retraction: the victim's K/V, the decode batch's need and the free tokens
    process_batch_result  --> processing / processed   (sampled tokens, finishes; the record is complete)

A step is one ``get_next_batch_to_run`` that returned a batch (or an idle one with news: an arrival, an abort).
With the overlap scheduler (SGLang's default) step k+1 is scheduled before step k's results are processed: each
result finds its step in order (SGLang processes results first in, first out), so records overlap in time and are
written in step order. What a record holds:

- ``decisions.batch``: ``kind`` (``extend`` for SGLang's EXTEND and MIXED forward modes, ``decode``, ``idle``),
  ``new_token_ratio`` (the tracker's value after the decision), ``decodes_waiting`` (the running batch an EXTEND
  batch leaves out) and, with ``--enable-mixed-chunk``, ``decodes_mixed`` (the batch's ``decoding_reqs``).
- ``scheduled``: the batch's requests in batch order; tokens and positions from the batch (``extend_lens``,
  ``prefix_lens``; a decode's position is its ``seq_lens`` less 1). ``slot`` is a row number the tracer assigns as
  Batchscope does (the lowest free one at admission, freed at finish or retraction).
- ``admitted``: batch members that were in the waiting queue; ``decisions.admissions`` with the radix-cache hit
  (``prefix_lens``), the output tokens SGLang's ``PrefillAdder`` charged (its ``_update_prefill_budget``), and
  ``output_ratio`` 1.0 for ``ignore_eos`` (SGLang charges such a request's remaining output whole).
- ``preempted`` / ``decisions.preemptions``: retractions (``ScheduleBatch.retract_decode``) in the order taken, with
  the K/V tokens each held, those freed (what the radix cache does not keep), the decode batch's need and the free
  tokens ``check_decode_mem`` met.
- ``decisions.head``: the condition that ended SGLang's admission (``batchscope_sglang.probe``) as Batchscope's
  limit (``STOP_LIMITS``); absent when SGLang's state does not say.
- ``kv``: the token pool (``block_size`` = SGLang's ``page_size``; block ids are SGLang's page ids minus 1, SGLang
  keeps slot 0 for padding), ``num_used_blocks`` = pool - free - evictable; tables as deltas read from
  ``req_to_token`` (``freed``; ``allocated``: new slots, or a whole table when SGLang rewrote a row, which a radix
  cache insert does when it finds tokens someone cached first).
- ``finished``: ``stop`` (an EOS token, a stop string or regex), ``length``, ``abort``; an aborted request carries
  what it took away (``aborted``): from the waiting queue before the step (``state`` ``waiting``, or ``preempted``
  once retracted), or, running, after the one more forward SGLang runs it with (``to_finish``: it is in the batch,
  keeps its token, and its K/V goes as a finish's, at the next step's ``kv.freed``).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from batchscope_sglang.probe import StopProbe

SUMMARY_BYTES_PER_REQUEST = 320  # room kept for a request's summary line entry, plus 8 per output token
RETRACT_RULE = "sglang_retract"
QUEUE_ORDER = {"fcfs": "arrival", "lpm": "longest_prefix", "priority": "priority"}
# The condition that ended SGLang's admission (``StopProbe.stop``) -> the limit the trace records for the head of the
# waiting queue (``batchscope.steplog.reasons``). None: nothing held the head at the prefill attempt; a head after the
# step was then retracted into the queue by the decode batch (``preempted_this_step``), or its limit is unknown.
STOP_LIMITS: dict[str, str | None] = {
    "batch_is_full": "sglang_batch_full",
    "no_row": "max_num_seqs",
    "budget_state OTHER": "token_budget",
    "add_one_req OTHER": "token_budget",
    "add_one_req OTHER after admitting": "token_budget",
    "add_one_req_ignore_eos OTHER": "token_budget",
    "add_one_req_ignore_eos OTHER after admitting": "token_budget",
    "add_one_req NO_TOKEN": "sglang_reserved_output",
    "add_one_req NO_TOKEN after admitting": "sglang_reserved_output",
    "add_one_req_ignore_eos NO_TOKEN": "sglang_fixed_length_run",
    "add_one_req_ignore_eos NO_TOKEN after admitting": "sglang_reserved_output",
    "queue_empty": None,
    "queue_done": None,
}
FINISH_REASONS = {"FINISH_LENGTH": "length", "FINISH_ABORT": "abort"}  # the rest (EOS, stop string, regex): stop


def finish_reason(req: Any) -> str:
    """The trace's word for SGLang's ``finished_reason`` class."""
    return FINISH_REASONS.get(type(req.finished_reason).__name__, "stop")


class TraceBook:
    def __init__(self, sched: Any, writer: Any, header: dict, prompt_ids: bool = False):
        self.sched, self.writer, self.prompt_ids = sched, writer, prompt_ids
        cfg = header["config"]
        self.page = int(cfg["block_size"])
        self.num_blocks = int(cfg["num_kv_blocks"])
        self.mixed = bool(cfg.get("enable_mixed_chunk"))
        self.order = QUEUE_ORDER.get(str(cfg["scheduling_policy"]), str(cfg["scheduling_policy"]))
        self.t0, self.wall0 = time.perf_counter(), time.time()
        self.step = 0
        self.requests: dict[str, dict] = {}  # request id -> its summary entry, in arrival order
        self.arrived: list[dict] = []  # since the last record
        self.finished: list[dict] = []  # finishes outside a batch's results (aborts), for the next record
        self.freed: list[str] = []  # tables released since the last record
        self.done: set[str] = set()
        self.rows: dict[str, int] = {}  # row holders (admission order) -> row
        self.live: dict[str, Any] = {}  # row holders -> SGLang's Req
        self.tables: dict[str, list[int]] = {}  # the last recorded table of each request holding one
        self.stale: set[str] = set()  # tables SGLang may have rewritten since they were read (radix-cache inserts)
        self.kv_high: dict[str, int] = {}  # request id -> most K/V tokens it held before a retraction
        self.reserved: dict[str, int] = {}  # this step's admissions -> output tokens the adder charged
        self.refusal: tuple[float, float] | None = None  # (need, left) of the adder's last failed memory check
        self.retractions: list[dict] = []  # this step's, in the order taken
        self.abort_seen: dict[str, int] = {}  # running request marked to finish by abort_request -> its outputs then
        self.pending: deque[dict] = deque()  # records not yet written, in step order
        self.in_flight: deque[tuple[dict, list[Any]]] = deque()  # (record, its batch's requests) awaiting results
        self.lens: dict[str, int] = {}
        self.last_idle: tuple | None = None  # the last idle record's news (arrivals, finishes, queue)
        self.summary_bytes = 200
        self.closed = False
        self.probe = StopProbe(sched)
        self._observe_adder(sched)
        writer.put(header)

    @property
    def active(self) -> bool:
        return not self.closed and self.writer.accepting

    def now(self) -> float:
        return max(0.0, time.perf_counter() - self.t0)

    # --- requests in and out --------------------------------------------------------------------------------------

    def arrival(self, req: Any) -> None:
        """``_add_request_to_queue`` took a new request (``req``: SGLang's ``Req``, its ``max_new_tokens`` as SGLang
        set it)."""
        if req.rid in self.requests:
            return
        sp = req.sampling_params
        top_k = int(getattr(sp, "top_k", -1) or -1)
        when = max(0.0, time.time() - self.wall0)
        spec: dict[str, Any] = {
            "request_id": req.rid,
            "num_prompt_tokens": len(req.origin_input_ids),
            "max_tokens": max(1, int(sp.max_new_tokens or 1)),
            "temperature": float(sp.temperature),
            "top_p": float(sp.top_p),
            "top_k": top_k if 0 < top_k < 1 << 30 else 0,  # SGLang's -1 / 1 << 30: off
            "seed": getattr(sp, "sampling_seed", None),
            "ignore_eos": bool(sp.ignore_eos),
            "arrival_time": when,
            "arrival_step": self.step,
            "priority": int(req.priority or 0),
        }
        if self.prompt_ids:
            spec["prompt_token_ids"] = [int(t) for t in req.origin_input_ids]
        self.arrived.append(spec)
        self.requests[req.rid] = {
            "request_id": req.rid,
            "output_token_ids": [],
            "finish_reason": None,
            "num_preemptions": 0,
            "num_dropped_tokens": 0,
            "num_recomputed_tokens": 0,
            "arrival_time": when,
            "first_scheduled_time": None,
            "first_token_time": None,
            "finish_time": None,
        }
        self.summary_bytes += SUMMARY_BYTES_PER_REQUEST + len(req.rid)

    def aborting(self) -> list[Any]:
        """Before ``abort_request``: the waiting queue, to see who leaves it."""
        return list(self.sched.waiting_queue)

    def aborted(self, waiting_before: list[Any]) -> None:
        """After ``abort_request``: the waiting requests it dropped end now (in the next record); the running ones
        it marked (``to_finish``) run one more forward and end with its results (``processed``)."""
        still = {id(r) for r in self.sched.waiting_queue}
        for req in waiting_before:
            if id(req) not in still and req.rid in self.requests and req.rid not in self.done:
                state = "preempted" if int(getattr(req, "retraction_count", 0) or 0) > 0 else "waiting"
                facts = {"state": state, "num_output_tokens": len(req.output_ids), "num_freed_blocks": 0}
                self.finished.append(self._finish(req.rid, "abort", self.now()) | {"aborted": facts})
        for rid, req in self.live.items():
            if getattr(req, "to_finish", None) is not None and rid not in self.abort_seen:
                self.abort_seen[rid] = len(req.output_ids)

    def _finish(self, rid: str, reason: str, when: float) -> dict:
        self.done.add(rid)
        self.rows.pop(rid, None)
        self.live.pop(rid, None)
        self.kv_high.pop(rid, None)
        if rid in self.tables:
            self.freed.append(rid)
        info = self.requests.get(rid)
        if info is not None:
            info["finish_reason"], info["finish_time"] = reason, when
        return {"request_id": rid, "reason": reason}

    # --- what SGLang's adder and decode batch decide --------------------------------------------------------------

    def _observe_adder(self, s: Any) -> None:
        """Note, on SGLang's own ``PrefillAdder`` (the probe's subclass), each admission's output charge and the
        numbers of a failed memory check."""
        book, base = self, s.get_prefill_adder_class()

        class BookedAdder(base):  # type: ignore[misc, valid-type]
            def _check_prefill_budget(self, req: Any, *args: Any, **kwargs: Any) -> Any:
                left = self.rem_total_tokens
                verdict = super()._check_prefill_budget(req, *args, **kwargs)
                book.refusal = None if verdict[0] else (float(kwargs.get("total_tokens", 0)), float(left))
                return verdict

            def _update_prefill_budget(self, prefix_len: int, extend: int, max_new_tokens: int, *a: Any, **k: Any):
                if self.can_run_list and not k.get("is_chunked_continuation"):
                    book.reserved[self.can_run_list[-1].rid] = int(max_new_tokens)
                return super()._update_prefill_budget(prefix_len, extend, max_new_tokens, *a, **k)

        s.get_prefill_adder_class = lambda: BookedAdder

    def deciding_decode(self, batch: Any) -> None:
        """Before ``update_running_batch``: wrap this batch's memory check and releases (on the instance) so each
        retraction keeps its numbers."""
        book, check, release = self, batch.check_decode_mem, batch.release_req
        need: list[tuple[int, int]] = []

        def check_decode_mem(*args: Any, **kwargs: Any) -> bool:
            fits = check(*args, **kwargs)
            if not need and not args and not kwargs:  # the whole batch's first check: its need, the free tokens
                need.append((int(batch.new_tokens_required_next_decode()), int(book._available())))
            return fits

        def release_req(idx: int, *args: Any, **kwargs: Any) -> Any:
            req = batch.reqs[idx]
            held = int(req.kv.kv_allocated_len)
            freed = held - int(req.kv.cache_protected_len)
            out = release(idx, *args, **kwargs)
            n, free = need[0] if need else (None, None)
            rec = {"request_id": req.rid, "rule": RETRACT_RULE, "num_dropped_tokens": held}
            rec["num_dropped_blocks"] = -(-held // book.page)
            if n is not None:
                rec["need"], rec["free"] = n, free
            rec["num_freed_tokens"] = freed
            book.retractions.append((rec, req))
            return out

        batch.check_decode_mem, batch.release_req = check_decode_mem, release_req

    def decided_decode(self, batch: Any) -> None:
        for name in ("check_decode_mem", "release_req"):
            batch.__dict__.pop(name, None)

    def _available(self) -> int:
        return int(self.sched.token_to_kv_pool_allocator.available_size())

    # --- a step ---------------------------------------------------------------------------------------------------

    def scheduling(self) -> tuple[float, set[int]]:
        """Before ``get_next_batch_to_run``: the start time and the waiting queue (admissions are its members)."""
        self.reserved, self.refusal, self.retractions = {}, None, []
        self.probe.begin(self.sched)
        return time.perf_counter(), {id(r) for r in self.sched.waiting_queue}

    def scheduled(self, batch: Any, running: Any, t_start: float, waiting_before: set[int]) -> None:
        """After ``get_next_batch_to_run`` (``batch``: the batch to run or None, ``running``: the running batch it
        returned): everything but what the forward pass returns."""
        s = self.sched
        self._sweep_finished()
        retracted = self._retracted()
        kind = "idle" if batch is None else "extend" if batch.forward_mode.is_extend() else "decode"
        reqs = list(batch.reqs) if batch is not None else []
        mixed = [r.rid for r in (getattr(batch, "decoding_reqs", None) or [])] if kind == "extend" else []
        admitted = [r for r in reqs if id(r) in waiting_before]
        for req in admitted:
            self.rows[req.rid] = next(i for i in range(len(self.rows) + 1) if i not in self.rows.values())
            self.live[req.rid] = req
        entries = self._entries(batch, kind, reqs, set(mixed), t_start)
        decisions = self._decisions(kind, running, mixed, [(r, e) for r, e in zip(reqs, entries) if r in admitted])
        waiting = [r.rid for r in s.waiting_queue]
        if batch is None:  # an idle loop: a record only when there is news (the server polls while idle)
            news = ([a["request_id"] for a in self.arrived], [f["request_id"] for f in self.finished], waiting)
            if news == self.last_idle or not (news[0] or news[1] or waiting):
                return
        self.last_idle = news if batch is None else None
        head = self._head(waiting, retracted)
        if head is not None:
            decisions["head"] = head
        record: dict[str, Any] = {
            "type": "step",
            "step": self.step,
            "t_start": max(0.0, t_start - self.t0),
            "t_end": max(0.0, t_start - self.t0),
            "arrived": self.arrived,
            "scheduled": entries,
            "num_batched_tokens": sum(e["num_tokens"] for e in entries),
            "sampled": [],
            "admitted": [r.rid for r in admitted],
            "finished": self.finished,
            "preempted": retracted,
            "waiting": waiting,
            "running": list(self.rows),
            "padding_slots": [],
            "num_prefix_hit_tokens": {a["request_id"]: a["num_prefix_hit_tokens"] for a in decisions["admissions"]},
            "kv": self._kv(reqs, kind, s.chunked_req),
            "decisions": decisions,
        }
        self.arrived, self.finished = [], []
        self.pending.append(record)
        self.step += 1
        if batch is None:
            record["done"] = True
            self._flush()
        else:
            self.in_flight.append((record, reqs))

    def _decisions(self, kind: str, running: Any, mixed: list[str], admitted: list[tuple[Any, dict]]) -> dict:
        """The step's decisions but its head: the batch SGLang formed, its admissions and retractions."""
        batch_record: dict[str, Any] = {
            "kind": kind,
            "new_token_ratio": float(self.sched.new_token_ratio_tracker.current),
            "decodes_waiting": [r.rid for r in running.reqs] if kind == "extend" else [],
        }
        if self.mixed:
            batch_record["decodes_mixed"] = mixed
        return {
            "admissions": [self._admission(r, e) for r, e in admitted],
            "preemptions": [rec for rec, _ in self.retractions],
            "batch": batch_record,
        }

    def _sweep_finished(self) -> None:
        """Row holders SGLang ended outside a batch's results (an aborted chunked request, a request retraction
        could not keep): their finish goes in this record, their table out of it."""
        for rid, req in list(self.live.items()):
            if req.finished() and rid not in self.done:
                reason = finish_reason(req)
                entry = self._finish(rid, reason, self.now())
                if reason == "abort":
                    entry["aborted"] = {
                        "state": "running",
                        "num_output_tokens": len(req.output_ids),
                        "num_freed_blocks": len(self.tables.get(rid, ())),
                    }
                self.finished.append(entry)

    def _retracted(self) -> list[str]:
        """This step's retractions: rows and tables go, the request is back in the queue."""
        out = []
        for rec, req in self.retractions:
            rid = req.rid
            out.append(rid)
            self.rows.pop(rid, None)
            self.live.pop(rid, None)
            self.kv_high[rid] = max(self.kv_high.get(rid, 0), rec["num_dropped_tokens"])
            if rid in self.tables:
                self.freed.append(rid)
            info = self.requests.get(rid)
            if info is not None:
                info["num_preemptions"] += 1
                info["num_dropped_tokens"] += rec["num_dropped_tokens"]
        return out

    def _entries(self, batch: Any, kind: str, reqs: list[Any], mixed: set[str], t_start: float) -> list[dict]:
        if batch is None:
            return []
        if kind == "extend":
            spans = list(zip(batch.prefix_lens, batch.extend_lens))
        else:
            spans = [(int(n) - 1, 1) for n in batch.seq_lens_cpu.tolist()]
        chunked = self.sched.chunked_req
        entries = []
        for req, (before, n) in zip(reqs, spans):
            rid, before, n = req.rid, int(before), int(n)
            samples = req is not chunked
            known = len(req.origin_input_ids) + len(req.output_ids)
            decode = (
                kind == "decode"
                or rid in mixed
                or (n == 1 and bool(req.output_ids) and samples and before + n == known)
            )
            again = max(0, min(before + n, self.kv_high.get(rid, 0)) - before)
            entries.append(
                {
                    "request_id": rid,
                    "kind": "decode" if decode else "prefill",
                    "num_tokens": n,
                    "num_computed_tokens": before,
                    "slot": self.rows.get(rid, 0),
                    "recompute": not decode and again > 0,
                }
            )
            info = self.requests.get(rid)
            if info is not None:
                info["num_recomputed_tokens"] += again if not decode else 0
                if info["first_scheduled_time"] is None:
                    info["first_scheduled_time"] = max(0.0, t_start - self.t0)
        return entries

    def _admission(self, req: Any, entry: dict) -> dict:
        rid, hit = req.rid, entry["num_computed_tokens"]
        high, known = self.kv_high.get(rid, 0), len(req.origin_input_ids) + len(req.output_ids)
        rec: dict[str, Any] = {
            "request_id": rid,
            "resumed": int(getattr(req, "retraction_count", 0) or 0) > 0,
            "num_prefix_hit_tokens": hit,
            "num_recompute_tokens": max(0, high - hit),
            "num_new_tokens": known - max(high, hit),
        }
        if rid in self.reserved:
            rec["num_reserved_output_tokens"] = self.reserved[rid]
        if req.sampling_params.ignore_eos:
            rec["output_ratio"] = 1.0
        return rec

    def _head(self, waiting: list[str], retracted: list[str]) -> dict | None:
        """The head of the queue after the step and the condition that ended SGLang's admission, where known."""
        if not waiting:
            return None
        stop = self.probe.stop
        limit = STOP_LIMITS.get(stop)
        if limit is None:
            if waiting[0] not in retracted:
                return None
            limit = "preempted_this_step"
        head: dict[str, Any] = {"request_id": waiting[0], "limit": limit}
        if limit in ("token_budget", "max_num_seqs"):
            head["need"], head["left"] = 1, 0
        elif limit == "sglang_reserved_output" and not stop.endswith("after admitting") and self.refusal:
            head["need"], head["left"] = -int(-self.refusal[0] // 1), int(self.refusal[1] // 1)
        head["order"] = self.order
        return head

    def _kv(self, reqs: list[Any], kind: str, chunked: Any) -> dict:
        """The pool during the step's forward pass: tables changed since the last record (read from SGLang's
        ``req_to_token`` in one gather), the slots in use."""
        s = self.sched
        freed, self.freed = list(dict.fromkeys(self.freed)), []
        for rid in freed:
            self.tables.pop(rid, None)
        stale = self.stale
        self.stale = {chunked.rid} if chunked is not None and chunked.rid in self.live else set()
        targets = {r.rid: r for r in reqs if r.rid in self.live}
        targets.update({rid: self.live[rid] for rid in stale if rid in self.live})
        spans, flat = [], []
        pool = s.req_to_token_pool.req_to_token
        width = int(pool.shape[1])
        for rid, req in targets.items():
            if not req.kv.holds_kv:
                continue
            start = 0 if rid in stale or rid not in self.tables else len(self.tables[rid]) * self.page
            end = int(req.kv.kv_allocated_len)
            base = int(req.kv.req_pool_idx) * width
            positions = range(start, end, self.page)
            spans.append((rid, start, len(positions)))
            flat.extend(base + p for p in positions)
        slots = pool.view(-1)[flat].tolist() if flat else []
        allocated: dict[str, list[int]] = {}
        k = 0
        for rid, start, n in spans:
            ids = [int(x) // self.page - 1 for x in slots[k : k + n]]
            k += n
            old = self.tables.get(rid)
            if start and old is not None:
                new = old + ids
            else:
                new = ids
            if old is not None and new[: len(old)] != old:  # SGLang rewrote the row: a whole new table
                freed.append(rid)
                old = None
            tail = new[len(old) :] if old is not None else new
            if tail:
                allocated[rid] = tail
            self.tables[rid] = new
        free = self._available() + int(s.tree_cache.evictable_size())
        size = int(s.token_to_kv_pool_allocator.size)
        return {
            "num_blocks": self.num_blocks,
            "block_size": self.page,
            "num_used_blocks": max(0, min(self.num_blocks, (size - free) // self.page)),
            "freed": freed,
            "allocated": allocated,
        }

    def processing(self, batch: Any) -> None:
        """Before ``process_batch_result``: the end of the step's forward pass; each request's outputs so far."""
        if not self.in_flight:
            return
        record, reqs = self.in_flight[0]
        record["t_end"] = max(record["t_start"], self.now())
        self.lens = {r.rid: len(r.output_ids) for r in reqs}

    def processed(self, batch: Any) -> None:
        """After ``process_batch_result``: the tokens sampled and who finished; the record is complete."""
        if not self.in_flight:
            return
        record, reqs = self.in_flight.popleft()
        for req in reqs:
            rid = req.rid
            new = [int(t) for t in req.output_ids[self.lens.get(rid, len(req.output_ids)) :]]
            record["sampled"] += [{"request_id": rid, "token_id": t} for t in new]
            info = self.requests.get(rid)
            if info is not None and new:
                info["output_token_ids"] += new
                self.summary_bytes += 8 * len(new)
                if info["first_token_time"] is None:
                    info["first_token_time"] = record["t_end"]
            if req.finished() and rid not in self.done and rid in self.requests:
                reason = finish_reason(req)
                entry = self._finish(rid, reason, record["t_end"])
                seen = self.abort_seen.pop(rid, None)
                if reason == "abort" and seen is not None:
                    entry["aborted"] = {
                        "state": "running",
                        "num_output_tokens": len(req.output_ids),
                        "num_freed_blocks": len(self.tables.get(rid, ())),
                        "to_finish": True,  # SGLang's Req.to_finish: it ran this step, kept its token, ended after
                    }
                record["finished"].append(entry)
        if record["decisions"]["batch"]["kind"] == "extend":  # their K/V entered the radix cache: rows may change
            mixed = set(record["decisions"]["batch"].get("decodes_mixed", ()))
            self.stale |= {r.rid for r in reqs if r.rid in self.live and r.rid not in mixed}
        record["done"] = True
        self._flush()

    def _flush(self) -> None:
        while self.pending and self.pending[0].get("done"):
            record = self.pending.popleft()
            record.pop("done", None)
            self.writer.put(record, reserve=self.summary_bytes)

    def close(self) -> None:
        """Write the steps still in flight (without their outputs), then the summary; stop the writer."""
        if self.closed:
            return
        self.closed = True
        for record in self.pending:
            record.pop("done", None)
            self.writer.put(record, reserve=self.summary_bytes)
        self.pending.clear()
        self.in_flight.clear()
        summary: dict[str, Any] = {"type": "summary", "requests": list(self.requests.values())}
        if self.writer.capped_at is not None:
            summary["truncated_at_step"] = self.writer.capped_at
        self.writer.close(summary)
