"""The step log's writer: one header, one record per step, one summary (types in ``batchscope.steplog.records``).

Built here from the engine's objects so that ``batchscope.engine.engine`` reads as the loop it is. Every field is
documented in ``docs/trace-format.md`` and pinned by ``batchscope/steplog/trace.schema.json``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import cast

from batchscope.engine.batching import EngineScheduler
from batchscope.engine.config import EngineConfig
from batchscope.engine.request import FinishReason, Request
from batchscope.scheduling.scheduler import ScheduledRequest, SchedulerOutput
from batchscope.steplog.records import (
    ConfigRecord,
    DecisionsRecord,
    FinishedRecord,
    HeaderRecord,
    KVRecord,
    RequestSpecRecord,
    ScheduledRecord,
    StepRecord,
    SummaryRecord,
)
from batchscope.steplog.trace import SCHEMA_VERSION


def header_record(
    config: EngineConfig, meta: dict, requests: list[Request], eos: set[int], max_len: int | None
) -> HeaderRecord:
    """Line 1: the model, the config (queue policy included), every request with its prompt token ids."""
    header: HeaderRecord = {
        "type": "header",
        "schema_version": SCHEMA_VERSION,
        "model": meta.get("model", "unknown"),
        "device": meta.get("device", "cpu"),
        "dtype": meta.get("dtype", "float32"),
        "policy": config.batching,  # the trace keeps its field name (docs/trace-format.md)
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "scenario": meta.get("scenario"),
        "config": cast(ConfigRecord, config.header_dict()),
        "eos_token_ids": sorted(eos),
        "max_model_len": max_len,
        "requests": [_request_spec(r) for r in requests],
    }
    if meta.get("device_name"):
        header["device_name"] = meta["device_name"]
    return header


def _request_spec(r: Request) -> RequestSpecRecord:
    """A header's request: the workload's fields, its prompt token ids."""
    spec: RequestSpecRecord = {
        "request_id": r.request_id,
        "prompt": r.prompt,
        "num_prompt_tokens": r.num_prompt_tokens,
        "prompt_token_ids": list(r.prompt_token_ids),
        "max_tokens": r.sampling.max_tokens,
        "temperature": r.sampling.temperature,
        "top_p": r.sampling.top_p,
        "top_k": r.sampling.top_k,
        "seed": r.sampling.seed,
        "ignore_eos": r.sampling.ignore_eos,
        "priority": r.priority,
        "arrival_time": r.arrival_time,
        "arrival_step": r.arrival_step,
    }
    if r.abort_step is not None:
        spec["abort_step"] = r.abort_step
    return spec


def kv_record(sched: EngineScheduler, out: SchedulerOutput, block_tables: dict[str, list[int]]) -> KVRecord:
    """The pool during the step's forward pass: tables, reference counts, cached free blocks, evictions."""
    bm = sched.block_manager
    config = sched.config
    return {
        "num_blocks": config.num_kv_blocks,
        "block_size": config.block_size,
        "num_used_blocks": bm.num_used_blocks,
        "block_tables": block_tables,
        "num_cached_tokens": {s.request.request_id: s.num_computed_tokens + s.num_tokens for s in out.scheduled},
        "allocated": out.allocated_blocks,
        "ref_counts": {str(b): n for b, n in bm.ref_counts().items()},
        "cached_free_blocks": bm.pool.cached_free_blocks(),
        "evicted": bm.pool.take_evicted(),
        **sched.step_stats(),
    }


def step_record(
    step: int,
    times: tuple[float, float],
    sched: EngineScheduler,
    out: SchedulerOutput,
    running: list[str],
    kv: KVRecord,
    sampled: dict[str, list[int]],
    finished: list[tuple[str, FinishReason]],
    decode: Callable[[list[int]], str],
) -> StepRecord:
    """One step: who ran and how, what was sampled, admitted (with prefix-cache hits), preempted, finished."""
    return {
        "type": "step",
        "step": step,
        "t_start": times[0],
        "t_end": times[1],
        "scheduled": [scheduled_record(s) for s in out.scheduled],
        "num_batched_tokens": out.num_batched_tokens,
        "sampled": [
            {"request_id": rid, "token_id": tok, "text": decode([tok])} for rid, toks in sampled.items() for tok in toks
        ],
        "admitted": out.admitted_req_ids,
        "num_prefix_hit_tokens": out.prefix_hit_tokens,
        "finished": [finished_record(rid, reason, out) for rid, reason in finished],
        "preempted": out.preempted_req_ids,
        "waiting": [r.request_id for r in sched.waiting],
        "running": running,
        "padding_slots": [{"slot": row, "request_id": rid} for row, rid in out.padding],
        "kv": kv,
        "decisions": decisions_record(out),
    }


def finished_record(rid: str, reason: FinishReason, out: SchedulerOutput) -> FinishedRecord:
    """A request that ended in the step; one that ends by an abort marked earlier carries its ``aborted`` record."""
    record: FinishedRecord = {"request_id": rid, "reason": reason.value}
    if rid in out.aborted:
        record["aborted"] = out.aborted[rid]
    return record


def scheduled_record(s: ScheduledRequest) -> ScheduledRecord:
    """One request's work in the step; with drafts, which were scheduled and how many verification kept."""
    record: ScheduledRecord = {
        "request_id": s.request.request_id,
        "kind": s.kind,
        "num_tokens": s.num_tokens,
        "num_computed_tokens": s.num_computed_tokens,
        "slot": s.row,
        "recompute": s.recompute,
    }
    if s.draft_token_ids:
        record["draft_token_ids"] = list(s.draft_token_ids)
        if s.num_accepted is not None:
            record["num_accepted_tokens"] = s.num_accepted
    return record


def decisions_record(out: SchedulerOutput) -> DecisionsRecord:
    """Why the step looks as it does, as the scheduler recorded it where it decided (``batchscope.steplog.reasons``)."""
    record: DecisionsRecord = {"admissions": out.admissions, "preemptions": out.preemptions}
    if out.request_limits:
        record["request_limits"] = out.request_limits
    if out.head is not None:
        record["head"] = out.head
    if out.batch is not None:
        record["batch"] = out.batch
    if out.scheduling_call is not None:
        record["scheduling_call"] = out.scheduling_call
    return record


def summary_record(requests: list[Request], eos: frozenset[int], decode: Callable[[list[int]], str]) -> SummaryRecord:
    """The last line: every request's output and timing."""
    return {
        "type": "summary",
        "requests": [
            {
                "request_id": r.request_id,
                "output_text": decode([t for t in r.output_token_ids if t not in eos]),
                "output_token_ids": r.output_token_ids,
                "finish_reason": r.finish_reason.value if r.finish_reason else None,
                "num_preemptions": r.num_preemptions,
                "num_dropped_tokens": r.num_dropped_tokens,
                "num_recomputed_tokens": r.num_recomputed_tokens,
                "arrival_time": r.arrival_time,
                "first_scheduled_time": r.first_scheduled_time,
                "first_token_time": r.first_token_time,
                "finish_time": r.finish_time,
            }
            for r in requests
        ],
    }
