"""Run one workload through Batchscope's SGLang-style scheduler (``batchscope.sglang_family.scheduler``), logging every
step in the record format of ``batchscope_sglang.driver`` so the two compare field by field.

The workload: ``config`` (max_running_requests, chunked_prefill_size, pool_tokens, schedule_policy,
enable_prefix_cache, enable_mixed_chunk, optional context_len), ``requests`` (request_id, prompt_token_ids,
max_new_tokens (None: unset), arrival_step, output_token_ids, optional ignore_eos and abort_step) and
``eos_token_ids``. Each request samples its ``output_token_ids`` in order, as the driver's stand-in model does; it
goes through the request handling as it arrives (``SGLangScheduler.handle_request``) and is aborted once, before its
``abort_step`` (or as it arrives, if later), as the driver sends SGLang an ``AbortReq``.
"""

from __future__ import annotations

from typing import Any

from batchscope.sglang_family.scheduler import SGLangScheduler
from batchscope.sglang_family.state import SglRequest
from batchscope.steplog.finishes import aborted_before
from batchscope_sglang.driver import DEFAULT_CONFIG
from batchscope_sglang.shell import MAX_CONTEXT
from batchscope_sglang.tracebook import STOP_LIMITS  # SGLang's stop condition -> the head's limit, one table

AFTER_STEP = ("cached_tokens", "evictable_tokens")  # the radix cache's sizes (tokens) once the step is over

RETRACTED_HEAD = "preempted_this_step"  # the trace's limit for a head the step's decode retracted into the queue


def sglang_head(rec: dict, retracted: str | None = None) -> dict | None:
    """SGLang's head after a step, its stop condition as Batchscope's limit (``retracted`` for None)."""
    head = rec["head"]
    if head is None:
        return None
    if head["stop"] not in STOP_LIMITS:
        raise AssertionError(f"step {rec['step']}: SGLang stopped admission for {head['stop']!r}, not in STOP_LIMITS")
    return {"request_id": head["request_id"], "limit": STOP_LIMITS[head["stop"]] or retracted}


def run_batchscope(workload: dict[str, Any], max_steps: int = 10_000) -> list[dict]:
    """Batchscope's step records for ``workload`` (the driver's fields, see ``batchscope_sglang.driver._record`` and
    ``run_sglang``)."""
    cfg = {**DEFAULT_CONFIG, **workload.get("config", {})}
    eos = frozenset(workload.get("eos_token_ids", []))
    pending = sorted(workload["requests"], key=lambda r: r.get("arrival_step", 0))
    outputs = {r["request_id"]: list(r["output_token_ids"]) for r in pending}
    aborts = {r["request_id"]: r["abort_step"] for r in pending if r.get("abort_step") is not None}
    s = SGLangScheduler(
        cfg["max_running_requests"],
        cfg["chunked_prefill_size"],
        cfg["pool_tokens"],
        cfg["schedule_policy"],
        cfg["enable_prefix_cache"],
        mixed_chunk=cfg["enable_mixed_chunk"],
        context_len=cfg.get("context_len") or MAX_CONTEXT,
    )
    unfinished = {r["request_id"] for r in pending}
    arrived: dict[str, SglRequest] = {}
    records: list[dict] = []
    step = 0
    while unfinished and step < max_steps:
        limits = _arrive(s, pending, step, eos, arrived)
        aborted = []
        for rid in [rid for rid in arrived if aborts.get(rid, step + 1) <= step]:
            del aborts[rid]
            if s.abort(arrived[rid]) in ("waiting", "chunked"):
                aborted.append(rid)
        unfinished -= set(aborted)
        out = s.schedule()
        rec: dict[str, Any] = {
            "step": step,
            "kind": out.kind,
            "run": [[r.request_id, n] for r, n in out.run],
            "admitted": out.admitted,
            "prefix_hits": out.prefix_hits,
            "mixed": out.mixed,
            "retracted": out.retracted,
            "chunked": s.chunked.request_id if s.chunked is not None else None,
            "new_token_ratio": s.ratio,
            "limits": limits,
            "aborted": sorted(aborted),
            "head": {"request_id": s.waiting[0].request_id, "limit": s.held[0] if s.held else None}
            if s.waiting
            else None,
        }
        sampled = {r.request_id: outputs[r.request_id][len(r.output_token_ids)] for r, _ in out.run}
        rec["finished"] = s.update(out, sampled)
        rec["finish_reasons"] = {rid: arrived[rid].finish_reason for rid in rec["finished"]}
        rec["cached_tokens"], rec["evictable_tokens"] = s.memory.cache.size, s.memory.cache.evictable
        unfinished -= set(rec["finished"])
        records.append(rec)
        step += 1
    return records


def _arrive(
    s: SGLangScheduler, pending: list[dict], step: int, eos: frozenset, arrived: dict[str, SglRequest]
) -> dict[str, list]:
    """The requests of ``pending`` that arrive by ``step``, through the family's request handling (SGLang's limits):
    request id -> [max_new_tokens it set, its refusal] for those it clipped or refused."""
    limits: dict[str, list] = {}
    while pending and pending[0].get("arrival_step", 0) <= step:
        r = pending.pop(0)
        req = SglRequest(r["request_id"], list(r["prompt_token_ids"]), 0, eos)
        req.ignore_eos = bool(r.get("ignore_eos"))
        handled = s.handle_request(req, r["max_new_tokens"])
        if handled.max_new_tokens != r["max_new_tokens"] or handled.error is not None:
            limits[req.request_id] = [handled.max_new_tokens, handled.error]
        arrived[req.request_id] = req
    return limits


def first_difference(ours: list[dict], theirs: list[dict], retracted: str | None = None) -> str:
    """``"agrees on all N steps"`` or the first step and field that differ (the ratio to 1e-9); SGLang's head
    compares as Batchscope's limit (``sglang_head``)."""
    for a, b in zip(ours, theirs):
        b = {**b, "head": sglang_head(b, retracted)}
        for key in b:
            x, y = a.get(key), b[key]
            same = abs(x - y) < 1e-9 if key == "new_token_ratio" else x == y
            if not same:
                return f"step {b['step']}: {key} differs: batchscope {x!r}, sglang {y!r}"
    if len(ours) != len(theirs):
        return f"step count differs: batchscope {len(ours)}, sglang {len(theirs)}"
    return f"agrees on all {len(theirs)} steps"


def run_engine_trace(workload: dict[str, Any]) -> list[dict]:
    """The trace Batchscope's engine writes for ``workload`` under ``--batching sglang``
    (``batchscope.sglang_family.batching``), with a stand-in runner that samples each request's ``output_token_ids`` in
    order, and its ``abort_step``; all records, header first. ``max_new_tokens`` must be set (the engine's
    ``max_tokens``)."""
    from batchscope.engine.config import EngineConfig
    from batchscope.engine.engine import LLMEngine
    from batchscope.engine.request import Request, SamplingParams

    cfg = {**DEFAULT_CONFIG, **workload.get("config", {})}
    config = EngineConfig(
        batching="sglang",
        max_num_seqs=cfg["max_running_requests"],
        max_num_batched_tokens=cfg["chunked_prefill_size"],
        block_size=1,
        num_kv_blocks=cfg["pool_tokens"],
        scheduling_policy=cfg["schedule_policy"],
        enable_prefix_caching=cfg["enable_prefix_cache"],
        enable_mixed_chunk=cfg["enable_mixed_chunk"],
    )
    outputs = {r["request_id"]: list(r["output_token_ids"]) for r in workload["requests"]}
    requests = [
        Request(
            r["request_id"],
            list(r["prompt_token_ids"]),
            SamplingParams(max_tokens=r["max_new_tokens"], ignore_eos=bool(r.get("ignore_eos"))),
            arrival_step=r.get("arrival_step", 0),
            abort_step=r.get("abort_step"),
        )
        for r in workload["requests"]
    ]
    eos = workload.get("eos_token_ids", [])
    context_len = cfg.get("context_len")  # the model's (the engine's max_model_len): SGLang's max_req_len bound
    return LLMEngine(_Scripted(outputs), config, eos_token_ids=eos, max_model_len=context_len).run(requests)


class _Scripted:
    """A runner without a model: each request that samples gets its next scripted token."""

    def __init__(self, outputs: dict[str, list[int]]):
        self.outputs = outputs

    def execute(self, out: Any, block_tables: dict[str, list[int]]) -> dict[str, list[int]]:
        return {
            s.request.request_id: [self.outputs[s.request.request_id][len(s.request.output_token_ids)]]
            for s in out.scheduled
            if s.samples
        }

    def release(self, request_id: str) -> None:
        pass


def trace_steps(records: list[dict]) -> list[dict]:
    """A trace's steps in the driver's record fields (``batchscope_sglang.driver._record``), read from what the trace
    says: the batch kind and ratio (``decisions.batch``), who ran with how many tokens, admissions with their prefix
    hits, retractions (``preempted``), the chunked request (the one that ran without sampling), who finished in the
    step and why, who was aborted before it (``finished`` entries released before the step) and the request
    handling's clips and refusals (``decisions.request_limits``)."""
    out = []
    for st in (r for r in records if r["type"] == "step"):
        sampled = {s["request_id"] for s in st["sampled"]}
        cut = [s["request_id"] for s in st["scheduled"] if s["request_id"] not in sampled]
        batch = st["decisions"]["batch"]
        ended = [f for f in st["finished"] if not aborted_before(f)]
        limits = st["decisions"].get("request_limits", [])
        out.append(
            {
                "kind": batch["kind"],
                "run": [[s["request_id"], s["num_tokens"]] for s in st["scheduled"]],
                "admitted": st["admitted"],
                "prefix_hits": st["num_prefix_hit_tokens"],
                "mixed": batch.get("decodes_mixed", []),
                "retracted": sorted(st["preempted"]),
                "chunked": cut[0] if cut else None,
                "new_token_ratio": batch["new_token_ratio"],
                "finished": [f["request_id"] for f in ended],
                "finish_reasons": {f["request_id"]: f["reason"] for f in ended},
                "aborted": sorted(f["request_id"] for f in st["finished"] if aborted_before(f)),
                "limits": {x["request_id"]: [x["max_new_tokens"], x.get("error")] for x in limits},
                "head": _head(st["decisions"].get("head")),
            }
        )
    return out


def compare_trace(records: list[dict], theirs: list[dict]) -> str:
    """``first_difference`` of a Batchscope trace and SGLang's records, on the steps that run a batch or end an abort
    (the engine skips other idle steps; SGLang's reset of the ratio on them shows in the ratio of the next step)."""
    ours = [{**r, "step": k} for k, r in enumerate(trace_steps(records))]
    # the cache's sizes after each step are not in the trace (its pool is the one during the forward pass)
    busy = [
        {**{f: v for f, v in r.items() if f not in AFTER_STEP}, "step": k}
        for k, r in enumerate(r for r in theirs if r["kind"] != "idle" or r["aborted"])
    ]
    return first_difference(ours, busy, RETRACTED_HEAD)


def _head(head: dict | None) -> dict | None:
    return None if head is None else {"request_id": head["request_id"], "limit": head["limit"]}
