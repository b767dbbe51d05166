"""The engine loop: arrivals -> schedule -> forward + sample -> update -> step log, until every request ends.

    requests --> Scheduler.schedule() --> ModelRunner.execute() --> Scheduler.update() --> step record
                   ^  (token budget, free KV blocks)                                         |
                   +--------------------------- next step -------------------------------+

``LLMEngine.run`` returns the whole trace as a list of dicts (header, one per step, summary) in the format of
``docs/trace-format.md``. Times are seconds from the start of the run (``time.perf_counter``).

Idle time costs nothing: when nothing is running or waiting and the next arrival is on the step clock, the clock
jumps to that step and the next step record says how many empty steps it skipped (``idle_steps_before``); with only
wall-clock arrivals left, the loop sleeps until the next one. A run can be stopped between steps (``should_stop``):
the trace then ends with a summary marked ``partial``. A request's abort reaches its scheduler once, before a step
is scheduled, when its ``abort_step`` is due or ``abort`` asked for it, and each family ends it as its engine does:
vLLM's at once (that step runs even with nothing left to schedule, as vLLM's engine core runs one to report a
finish, and its ``finished`` lists the abort); SGLang's at once if it waits or is the chunked request mid-prompt,
else after the step in which it next samples (``batchscope.sglang_family.scheduler``, rule 8).

On CPU the header also records ``cpu_share``: the process's CPU time during the steps over their wall time times
PyTorch's thread count (about 1 when the run had its cores to itself; ``batchscope.steplog.timing`` judges it).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol

from batchscope.engine.batching import make_scheduler
from batchscope.engine.config import EngineConfig
from batchscope.engine.request import Request
from batchscope.engine.step_log import header_record, kv_record, step_record, summary_record
from batchscope.engine.threads import torch_threads
from batchscope.engine.validation import RequestError, validate_request, warn_if_priority_ignored
from batchscope.model.detokenizer import IncrementalDetokenizer, is_partial
from batchscope.scheduling.scheduler import SchedulerOutput
from batchscope.steplog.reasons import LIMIT_NAMES, limit_numbers
from batchscope.steplog.records import (
    FinishedRecord,
    HeaderRecord,
    SampledRecord,
    StepRecord,
    SummaryRecord,
    TraceRecords,
)


class Runner(Protocol):
    """What the engine needs from a model runner (the real ``ModelRunner`` or a test's fake)."""

    def execute(self, out: SchedulerOutput, block_tables: dict[str, list[int]]) -> dict[str, list[int]]: ...

    def release(self, request_id: str) -> None: ...


class LLMEngine:
    """Runs requests to completion on ``runner`` under ``config``, logging every step.

    Args:
        runner: executes a step (``ModelRunner`` on a real model, or a fake in scheduler tests).
        config: limits and batching mode; validated here.
        eos_token_ids: tokens that end a request with reason ``stop``.
        decode: token id -> text, for the log (``str`` of the id if omitted).
        max_model_len: the model's context length in tokens (``None``: unchecked).
        vocab_size: the model's vocabulary size; prompt token ids must be below it (``None``: unchecked).
        meta: ``model``, ``device``, ``dtype`` and any extra header fields.
    """

    def __init__(
        self,
        runner: Runner,
        config: EngineConfig,
        eos_token_ids: Iterable[int] = (),
        decode: Callable[[list[int]], str] | None = None,
        max_model_len: int | None = None,
        meta: dict | None = None,
        vocab_size: int | None = None,
    ):
        self.runner, self.config = runner, config
        self.scheduler = make_scheduler(config, eos_token_ids)
        self.scheduler.max_model_len = max_model_len
        self.decode = decode or (lambda ids: " ".join(map(str, ids)))
        self.max_model_len, self.vocab_size = max_model_len, vocab_size
        self.detok: dict[str, IncrementalDetokenizer] = {}
        self.meta = dict(meta or {})
        self._cpu_s = 0.0  # process CPU time spent inside steps, this run
        self._abort_asked: list[str] = []  # ``abort`` calls not yet applied (taken before the next step)
        self._abort_lock = threading.Lock()
        self._arrived_ids: set[str] = set()  # requests handed to the scheduler, this run
        self._abort_sent: set[str] = set()  # requests whose abort the scheduler has had, this run (once each)

    def abort(self, request_id: str) -> None:
        """Abort ``request_id`` before the step ``run`` builds next, whatever its state, as a server aborts a request
        whose client went away (the Playground's Cancel of one request). The scheduler takes it as its engine does
        (vLLM's ``Scheduler.finish_requests(..., FINISHED_ABORTED)`` frees its blocks at once; SGLang's
        ``abort_request`` may only mark it to finish after its next step); the ``finished`` of the step it ends in
        lists it with reason ``abort``. Thread-safe. A request not yet arrived is aborted when it arrives; an id
        that has finished by then, or is unknown, is ignored (as vLLM ignores it), and so is a call made while no
        run is going (the next run starts afresh)."""
        with self._abort_lock:
            self._abort_asked.append(request_id)

    def run(
        self,
        requests: list[Request],
        on_step: Callable[[StepRecord], None] | None = None,
        seed: int | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> TraceRecords:
        """Run ``requests`` (validated first: nothing runs if one is bad) and return the trace records.

        Args:
            on_step: called with each step record as it is made (progress bars, live views).
            seed: draws the seeds of unseeded sampled requests (recorded in the header and per request, so a run
                replays); ``None`` draws a fresh one, so two unseeded runs sample differently.
            should_stop: asked before every step; ``True`` ends the run there with a summary marked ``partial``
                (unfinished requests have ``finish_reason`` null).
        Raises:
            RequestError: see ``validate_request``; also on duplicate request ids.
        """
        self._validate(requests)
        seed = self._seed_requests(requests, seed)
        eos = self.scheduler.eos_token_ids
        self.detok = {r.request_id: IncrementalDetokenizer(self.decode, eos) for r in requests}
        pending = sorted(requests, key=_arrival_order)
        records: TraceRecords = [self._header(requests, seed)]
        t0, self._cpu_s = time.perf_counter(), 0.0
        step = idle = 0
        stopped = False
        self._reset_aborts()
        while pending or self.scheduler.has_unfinished():
            if should_stop is not None and should_stop():
                stopped = True
                break
            now = time.perf_counter() - t0
            pending = self._admit_arrivals(pending, now, step)
            aborts = self._abort_due(requests, step, t0)
            if not self.scheduler.has_unfinished() and not aborts:  # idle: nothing to run until the next arrival
                self.scheduler.on_idle()  # (SGLang resets its new_token_ratio)
                due = [r.arrival_step for r in pending if r.arrival_step is not None]
                if due:  # on the step clock: jump to it, and record the gap once
                    idle += min(due) - step
                    step = min(due)
                else:  # on the wall clock: wait (in short slices if should_stop must be heard)
                    wait = max(0.0, pending[0].arrival_time - now)
                    time.sleep(min(0.1, wait) if should_stop else wait)
                continue
            record = self._step(step, t0)
            record["finished"][:0] = aborts  # they ended before this step was scheduled
            self._check_progress(record, pending, requests, step)
            if idle:
                record["idle_steps_before"], idle = idle, 0
            records.append(record)
            if on_step:
                on_step(record)
            step += 1
        self._record_cpu_share(records)
        records.append(self._summary(requests, partial=stopped))
        return records

    @staticmethod
    def _seed_requests(requests: list[Request], seed: int | None) -> int:
        """Unseeded sampled requests get a seed drawn from the run's ``seed`` (a fresh one if ``None``) and recorded,
        so every run can be replayed; returns the run's seed."""
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        rng = random.Random(seed)
        for req in requests:
            if req.sampling.temperature > 0 and req.sampling.seed is None:
                req.sampling = replace(req.sampling, seed=rng.randrange(2**31))
        return seed

    def _check_progress(self, record: StepRecord, pending: list[Request], requests: list[Request], step: int) -> None:
        """Raise ``EngineStalled`` (one line: the step, the head of the queue and its limit) if the run is stuck."""
        if self._stalled(record, pending, requests, step):
            raise EngineStalled(stall_message(record))

    def _stalled(self, record: StepRecord, pending: list[Request], requests: list[Request], step: int) -> bool:
        """True if ``record``'s step changed nothing and nothing can change the next one: no token scheduled, no
        preemption or retraction, no finish or abort, while requests wait; no arrival is due and no abort is asked
        or set for a later step. The scheduler is deterministic in its state, so every later step would be this one
        again (vLLM 0.33's scheduler loops so on some configs; ``EngineConfig.validate`` refuses those that it
        knows, and this catches any other)."""
        if record["scheduled"] or record["finished"] or record["preempted"]:
            return False
        if pending or self._abort_asked:
            return False
        return not any(r.abort_step is not None and r.abort_step > step and not r.is_finished for r in requests)

    def _record_cpu_share(self, records: TraceRecords) -> None:
        """Header ``cpu_share`` (CPU runs only: on a GPU the CPU mostly waits for the device)."""
        wall = sum(r["t_end"] - r["t_start"] for r in records if r["type"] == "step")
        if wall > 0 and str(self.meta.get("device", "cpu")).startswith("cpu"):
            records[0]["cpu_share"] = round(self._cpu_s / (wall * torch_threads()), 3)

    def _validate(self, requests: list[Request]) -> None:
        ids = [r.request_id for r in requests]
        if len(set(ids)) != len(ids):
            repeated = sorted({i for i in ids if ids.count(i) > 1})
            raise RequestError(
                f"request_id must be unique; repeated: {repeated}", repeated[0], "request_id", repeated[0], "unique ids"
            )
        for req in requests:
            validate_request(req, self.config, self.max_model_len, self.vocab_size)
        warn_if_priority_ignored(requests, self.config)

    def _admit_arrivals(self, pending: list[Request], now: float, step: int) -> list[Request]:
        """Hand the requests that have arrived by ``now`` / ``step`` to the scheduler; return the rest."""
        # Scan all of ``pending``, not just its head: with both clocks in one workload, a request due on the step
        # clock must not wait behind one that is not yet due on the wall clock (or the reverse).
        arrived = [r for r in pending if self._arrived(r, now, step)]
        for req in arrived:  # in arrival order
            if req.arrival_step is not None:  # step-clock arrivals: record when it really arrived
                req.arrival_time = now
            self.scheduler.add_request(req)
            self._arrived_ids.add(req.request_id)
        return [r for r in pending if not any(r is a for a in arrived)] if arrived else pending

    def _reset_aborts(self) -> None:
        """A new run: nothing has arrived, and a Cancel that came after the last run must not abort a request of
        this one."""
        self._arrived_ids, self._abort_sent = set(), set()
        with self._abort_lock:
            self._abort_asked = []

    def _abort_due(self, requests: list[Request], step: int, t0: float) -> list[FinishedRecord]:
        """Hand the scheduler, once each and in arrival order (ties in workload order), the aborts of the arrived
        requests whose ``abort_step`` is due (``abort`` calls set it to this step); returns the ``finished`` entries
        (``batchscope.steplog.records.AbortRecord`` under ``aborted``) of those that ended at once. The order decides
        the order their blocks go back to the free queue."""
        with self._abort_lock:
            asked, self._abort_asked = set(self._abort_asked), []
        out: list[FinishedRecord] = []
        for req in sorted(requests, key=_arrival_order):
            if req.request_id in asked and (req.abort_step is None or req.abort_step > step):
                req.abort_step = step
            if req.abort_step is None or req.abort_step > step or req.request_id not in self._arrived_ids:
                continue
            if req.request_id in self._abort_sent:
                continue
            self._abort_sent.add(req.request_id)
            facts = self.scheduler.abort(req)
            if facts is not None:
                req.finish_time = time.perf_counter() - t0
                self.runner.release(req.request_id)
                out.append({"request_id": req.request_id, "reason": "abort", "aborted": facts})
        return out

    @staticmethod
    def _arrived(req: Request, now: float, step: int) -> bool:
        return req.arrival_step <= step if req.arrival_step is not None else req.arrival_time <= now

    def _step(self, step: int, t0: float) -> StepRecord:
        sched = self.scheduler
        t_start, cpu_start = time.perf_counter() - t0, time.process_time()
        out = sched.schedule()
        running = [r.request_id for r in sched.running]  # in the batch this step, admission order
        block_tables = {rid: list(t) for rid, t in sched.block_manager.block_tables.items()}
        kv = kv_record(sched, out, block_tables)
        sampled = self.runner.execute(out, block_tables)
        t_end = time.perf_counter() - t0
        self._cpu_s += time.process_time() - cpu_start
        for s in out.scheduled:
            if s.request.first_scheduled_time is None:
                s.request.first_scheduled_time = t_start
        finished = sched.update(out, sampled)
        for s in out.scheduled:
            req = s.request
            if req.request_id in sampled and req.first_token_time is None:
                req.first_token_time = t_end
            if req.is_finished:
                req.finish_time = t_end
                self.runner.release(req.request_id)
        record = step_record(step, (t_start, t_end), sched, out, running, kv, sampled, finished, self.decode)
        record["sampled"] = self._sampled(record["sampled"], {rid for rid, _ in finished})
        return record

    def _sampled(self, sampled: list[SampledRecord], finished: set[str]) -> list[SampledRecord]:
        """Each sampled token plus ``partial`` (its text alone is part of a character) and ``text_delta``, what it
        adds to the request's output text (``batchscope.model.detokenizer``); a request's last token of a finishing step
        flushes its text."""
        last = {entry["request_id"]: i for i, entry in enumerate(sampled)}
        for i, entry in enumerate(sampled):
            rid = entry["request_id"]
            if is_partial(entry["text"]):
                entry["partial"] = True
            entry["text_delta"] = self.detok[rid].add(entry["token_id"], final=rid in finished and last[rid] == i)
        return sampled

    def _header(self, requests: list[Request], seed: int | None = None) -> HeaderRecord:
        eos = set(self.scheduler.eos_token_ids)
        record = header_record(self.config, self.meta, requests, eos, self.max_model_len)
        record["seed"] = seed
        return record

    def _summary(self, requests: list[Request], partial: bool = False) -> SummaryRecord:
        record = summary_record(requests, self.scheduler.eos_token_ids, self.decode)
        if partial:
            record["partial"] = True
        return record


class EngineStalled(RuntimeError):
    """A run that can make no more progress: a step scheduled nothing and changed nothing, and no arrival or abort
    is left that could change the next one. Raised instead of looping; the message names the step, the request at
    the head of the waiting queue and the limit that holds it (from the step's decision record)."""


def stall_message(record: StepRecord) -> str:
    """One line: which step made no progress, who waits and why (``decisions.head``, in ``batchscope.steplog.reasons``'
    words)."""
    head = record.get("decisions", {}).get("head")
    waiting = ", ".join(record.get("waiting", [])) or "none"
    if head is None:
        why = f"nothing is scheduled and no limit was recorded (waiting: {waiting})"
    else:
        numbers = limit_numbers(head)
        why = (
            f"{head['request_id']} waits at the head of the queue, held by the limit "
            f"{LIMIT_NAMES.get(head['limit'], head['limit'])}{f' ({numbers})' if numbers else ''}"
        )
    return (
        f"the run cannot make progress: step {record['step']} scheduled nothing and nothing is left to arrive or "
        f"be aborted, so every later step would repeat it; {why}. Change the config (a bigger "
        f"max_num_batched_tokens or num_kv_blocks, or fewer num_speculative_tokens)."
    )


def _arrival_order(req: Request) -> tuple[int, float]:
    """The order requests arrive in: by arrival step (the step clock), else by arrival time; ``sorted`` keeps the
    workload's order among ties."""
    return (req.arrival_step if req.arrival_step is not None else -1, req.arrival_time)
