"""The engine loop: arrivals -> schedule -> forward + sample -> update -> step log, until every request ends.

    requests --> Scheduler.schedule() --> ModelRunner.execute() --> Scheduler.update() --> step record
                   ^  (token budget, free KV blocks)                                         |
                   +--------------------------- next step -------------------------------+

``LLMEngine.run`` returns the whole trace as a list of dicts (header, one per step, summary) in the format of
``docs/trace-format.md``. Times are seconds from the start of the run (``time.perf_counter``).
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol

from engine.block_manager import blocks_needed
from engine.config import EngineConfig
from engine.policies import make_scheduler
from engine.request import FieldError, Request
from engine.scheduler import SchedulerOutput
from engine.step_log import header_record, kv_record, step_record, summary_record
from steplog.records import StepRecord, TraceRecords

PRIORITY_RANGE = (-(2**63), 2**63 - 1)  # vLLM's priority is a 64-bit signed integer


class PriorityIgnoredWarning(UserWarning):
    """Requests carry a priority but the waiting queue is FCFS: the priorities change nothing."""


class Runner(Protocol):
    """What the engine needs from a model runner (the real ``ModelRunner`` or a test's fake)."""

    def execute(self, out: SchedulerOutput, block_tables: dict[str, list[int]]) -> dict[str, int]: ...

    def release(self, request_id: str) -> None: ...


class RequestError(ValueError):
    """A request that can never run under this configuration.

    Attributes: ``request_id``; ``field``, the setting that has to change (a request field such as ``max_tokens``
    or an engine knob such as ``num_kv_blocks``); ``value``; ``allowed``, the range that would do; ``minimum``, the
    smallest value of ``field`` that would do, where there is one. The message says all of it in one line.
    """

    def __init__(
        self,
        message: str,
        request_id: str | None = None,
        field: str | None = None,
        value: object = None,
        allowed: str | None = None,
        minimum: int | None = None,
    ):
        super().__init__(message)
        self.request_id, self.field, self.value, self.allowed = request_id, field, value, allowed
        self.minimum = minimum


def validate_request(req: Request, config: EngineConfig, max_model_len: int | None) -> None:
    """Reject up front what could never finish (no hang, no silent truncation).

    Raises:
        RequestError: empty prompt, bad sampling field, prompt + max_tokens beyond the model's context, a
            request whose K/V could not fit even alone in the whole pool, or (chunked prefill off) a prompt
            longer than the token budget.
    """
    where = f"request {req.request_id!r}"
    rid = req.request_id
    if req.num_prompt_tokens == 0:
        raise RequestError(f"{where}: the prompt is empty; give at least one token", rid, "prompt", "", ">= 1 token")
    try:
        req.sampling.validate(where)
    except FieldError as exc:
        raise RequestError(str(exc), rid, exc.field, exc.value, exc.allowed) from None
    _validate_priority(req, where)
    total = req.num_prompt_tokens + req.sampling.max_tokens
    if max_model_len is not None and total > max_model_len:
        raise RequestError(
            f"{where}: prompt ({req.num_prompt_tokens} tokens) + max_tokens ({req.sampling.max_tokens}) = {total} "
            f"exceeds the model's context of {max_model_len} tokens; max_tokens must be in "
            f"[1, {max_model_len - req.num_prompt_tokens}]",
            rid,
            "max_tokens",
            req.sampling.max_tokens,
            f"[1, {max_model_len - req.num_prompt_tokens}]",
        )
    need = blocks_needed(req.max_kv_tokens, config.block_size)
    if need > config.num_kv_blocks:
        raise RequestError(
            f"{where}: needs {need} KV blocks of {config.block_size} tokens for prompt {req.num_prompt_tokens} + "
            f"max_tokens {req.sampling.max_tokens} - 1 tokens (the last sampled token is never fed back, so it needs "
            f"no KV slot) but the whole pool has num_kv_blocks="
            f"{config.num_kv_blocks}; raise num_kv_blocks to >= {need} or lower max_tokens",
            rid,
            "num_kv_blocks",
            config.num_kv_blocks,
            f">= {need}",
            need,
        )
    if not config.enable_chunked_prefill and req.num_prompt_tokens > config.max_num_batched_tokens:
        raise RequestError(
            f"{where}: prompt of {req.num_prompt_tokens} tokens exceeds max_num_batched_tokens="
            f"{config.max_num_batched_tokens} with chunked prefill off; turn chunked prefill on or raise "
            f"max_num_batched_tokens to >= {req.num_prompt_tokens}",
            rid,
            "max_num_batched_tokens",
            config.max_num_batched_tokens,
            f">= {req.num_prompt_tokens}",
            req.num_prompt_tokens,
        )


def _validate_priority(req: Request, where: str) -> None:
    lo, hi = PRIORITY_RANGE
    p = req.priority
    if isinstance(p, bool) or not isinstance(p, int) or not lo <= p <= hi:
        allowed = "an integer in [-2**63, 2**63 - 1]"
        raise RequestError(
            f"{where}: priority={p!r} is out of range: {allowed}", req.request_id, "priority", p, allowed
        )


def priority_ignored_message(requests: list[Request], config: EngineConfig) -> str | None:
    """The warning for requests that carry a non-zero priority under the FCFS queue (None if there is none)."""
    given = [r.request_id for r in requests if r.priority != 0]
    if not given or config.scheduling_policy != "fcfs":
        return None
    return (
        f"priority is ignored with scheduling_policy='fcfs' (set on {len(given)} request(s), e.g. {given[0]!r}); "
        "use scheduling_policy='priority' (--scheduling-policy priority) to apply it"
    )


def warn_if_priority_ignored(requests: list[Request], config: EngineConfig) -> None:
    """One ``PriorityIgnoredWarning`` when requests carry a non-zero priority under the FCFS queue."""
    message = priority_ignored_message(requests, config)
    if message:
        warnings.warn(PriorityIgnoredWarning(message), stacklevel=3)


class LLMEngine:
    """Runs requests to completion on ``runner`` under ``config``, logging every step.

    Args:
        runner: executes a step (``ModelRunner`` on a real model, or a fake in scheduler tests).
        config: limits and policy; validated here.
        eos_token_ids: tokens that end a request with reason ``stop``.
        decode: token id -> text, for the log (``str`` of the id if omitted).
        max_model_len: the model's context length in tokens (``None``: unchecked).
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
    ):
        config.validate()
        self.runner, self.config = runner, config
        self.scheduler = make_scheduler(config, eos_token_ids)
        self.decode = decode or (lambda ids: " ".join(map(str, ids)))
        self.max_model_len = max_model_len
        self.meta = dict(meta or {})

    def run(
        self, requests: list[Request], on_step: Callable[[StepRecord], None] | None = None, seed: int = 0
    ) -> list[dict]:
        """Run ``requests`` (validated first: nothing runs if one is bad) and return the trace records.

        ``on_step`` is called with each step record as it is made (progress bars, live views).
        Raises:
            RequestError: see ``validate_request``; also on duplicate request ids.
        """
        ids = [r.request_id for r in requests]
        if len(set(ids)) != len(ids):
            repeated = sorted({i for i in ids if ids.count(i) > 1})
            raise RequestError(
                f"request_id must be unique; repeated: {repeated}", repeated[0], "request_id", repeated[0], "unique ids"
            )
        for req in requests:
            validate_request(req, self.config, self.max_model_len)
        warn_if_priority_ignored(requests, self.config)
        rng = random.Random(seed)
        for req in requests:  # unseeded sampled requests get a recorded seed, so every run can be replayed
            if req.sampling.temperature > 0 and req.sampling.seed is None:
                req.sampling = replace(req.sampling, seed=rng.randrange(2**31))
        pending = sorted(requests, key=lambda r: (r.arrival_step if r.arrival_step is not None else -1, r.arrival_time))
        records: TraceRecords = [
            header_record(self.config, self.meta, requests, set(self.scheduler.eos_token_ids), self.max_model_len)
        ]
        t0 = time.perf_counter()
        step = 0
        while pending or self.scheduler.has_unfinished():
            now = time.perf_counter() - t0
            # Scan all of ``pending``, not just its head: with both clocks in one workload, a request due on the
            # step clock must not wait behind one that is not yet due on the wall clock (or the reverse).
            arrived = [r for r in pending if self._arrived(r, now, step)]
            if arrived:
                pending = [r for r in pending if not any(r is a for a in arrived)]
            for req in arrived:  # in arrival order
                if req.arrival_step is not None:  # step-clock arrivals: record when it really arrived
                    req.arrival_time = now
                self.scheduler.add_request(req)
            # Idle with only wall-clock arrivals left: wait for the next one. (With step-clock arrivals left, an empty
            # step runs instead: the step clock must advance.)
            if not self.scheduler.has_unfinished() and all(r.arrival_step is None for r in pending):
                time.sleep(max(0.0, pending[0].arrival_time - now))
                continue
            record = self._step(step, t0)
            records.append(record)
            if on_step:
                on_step(record)
            step += 1
        records.append(summary_record(requests, self.scheduler.eos_token_ids, self.decode))
        return records

    @staticmethod
    def _arrived(req: Request, now: float, step: int) -> bool:
        return req.arrival_step <= step if req.arrival_step is not None else req.arrival_time <= now

    def _step(self, step: int, t0: float) -> StepRecord:
        sched = self.scheduler
        t_start = time.perf_counter() - t0
        out = sched.schedule()
        running = [r.request_id for r in sched.running]  # in the batch this step, admission order
        block_tables = {rid: list(t) for rid, t in sched.block_manager.block_tables.items()}
        kv = kv_record(sched, out, block_tables)
        sampled = self.runner.execute(out, block_tables)
        t_end = time.perf_counter() - t0
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
        return step_record(step, (t_start, t_end), sched, out, running, kv, sampled, finished, self.decode)
