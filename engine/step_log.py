"""The step log's writer: the header, step and summary records of a run (``steplog.records``), built from the
scheduler's decisions. The format is documented in ``docs/trace-format.md``; units are tokens, blocks and seconds
from the start of the run."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import cast

from engine.config import EngineConfig
from engine.request import FinishReason, Request
from engine.scheduler import Scheduler, SchedulerOutput
from steplog.records import ConfigRecord, HeaderRecord, KVExtras, StepRecord, SummaryRecord
from steplog.trace import SCHEMA_VERSION


def step_record(
    step: int,
    t_start: float,
    t_end: float,
    out: SchedulerOutput,
    sampled: dict[str, int],
    finished: list[tuple[str, FinishReason]],
    sched: Scheduler,
    running: list[str],
    block_tables: dict[str, list[int]],
    stats: KVExtras,
    decode: Callable[[list[int]], str],
) -> StepRecord:
    """One step: ``out`` as scheduled, the tokens ``sampled``, who ``finished``; ``running``, ``block_tables`` and
    ``stats`` as they were when the forward ran (before finished requests left and freed their blocks)."""
    return {
        "type": "step",
        "step": step,
        "t_start": t_start,
        "t_end": t_end,
        "scheduled": [
            {
                "request_id": s.request.request_id,
                "kind": s.kind,
                "num_tokens": s.num_tokens,
                "num_computed_tokens": s.num_computed_tokens,
                "slot": s.row,
                "recompute": s.recompute,
            }
            for s in out.scheduled
        ],
        "num_batched_tokens": out.num_batched_tokens,
        "sampled": [{"request_id": rid, "token_id": tok, "text": decode([tok])} for rid, tok in sampled.items()],
        "admitted": out.admitted_req_ids,
        "finished": [{"request_id": rid, "reason": reason.value} for rid, reason in finished],
        "preempted": out.preempted_req_ids,
        "waiting": [r.request_id for r in sched.waiting],
        "running": running,
        "padding_slots": [{"slot": row, "request_id": rid} for row, rid in out.padding],
        "kv": {
            "num_blocks": sched.config.num_kv_blocks,
            "block_size": sched.config.block_size,
            "num_used_blocks": sum(len(t) for t in block_tables.values()),
            "block_tables": block_tables,
            "num_cached_tokens": {s.request.request_id: s.num_computed_tokens + s.num_tokens for s in out.scheduled},
            "allocated": out.allocated_blocks,
            **stats,
        },
    }


def header_record(config: EngineConfig, meta: dict, requests: list[Request]) -> HeaderRecord:
    """The first line: model, device, policy, limits and every request (in the order given)."""
    return {
        "type": "header",
        "schema_version": SCHEMA_VERSION,
        "model": meta.get("model", "unknown"),
        "device": meta.get("device", "cpu"),
        "dtype": meta.get("dtype", "float32"),
        "policy": config.policy,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "scenario": meta.get("scenario"),
        "config": cast(ConfigRecord, config.header_dict()),
        "requests": [
            {
                "request_id": r.request_id,
                "prompt": r.prompt,
                "num_prompt_tokens": r.num_prompt_tokens,
                "max_tokens": r.sampling.max_tokens,
                "temperature": r.sampling.temperature,
                "top_p": r.sampling.top_p,
                "top_k": r.sampling.top_k,
                "seed": r.sampling.seed,
                "ignore_eos": r.sampling.ignore_eos,
                "arrival_time": r.arrival_time,
                "arrival_step": r.arrival_step,
            }
            for r in requests
        ],
    }


def summary_record(
    requests: list[Request], decode: Callable[[list[int]], str], eos_token_ids: frozenset[int]
) -> SummaryRecord:
    """The last line: each request's output, finish reason, preemptions and timestamps."""
    return {
        "type": "summary",
        "requests": [
            {
                "request_id": r.request_id,
                "output_text": decode([t for t in r.output_token_ids if t not in eos_token_ids]),
                "output_token_ids": r.output_token_ids,
                "finish_reason": r.finish_reason.value if r.finish_reason else None,
                "num_preemptions": r.num_preemptions,
                "num_recomputed_tokens": r.num_recomputed_tokens,
                "arrival_time": r.arrival_time,
                "first_scheduled_time": r.first_scheduled_time,
                "first_token_time": r.first_token_time,
                "finish_time": r.finish_time,
            }
            for r in requests
        ],
    }
