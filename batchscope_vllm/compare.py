"""Turn a Batchscope trace into a workload for ``batchscope_vllm.driver``, and compare the two runs step by step.

Standard library only: runs in Batchscope's virtual environment and in vLLM's. Traces are read with ``json``
(``docs/trace-format.md``; no schema validation here).

    records = [json.loads(line) for line in open("batchscope/assets/traces/seed-abcd-continuous.jsonl")]
    workload = workload_from_trace(records)        # -> run_vllm(workload) in vLLM's venv
    print(first_difference(records, vllm_steps))   # "agrees on all 14 steps" or "step k: ..."
"""

from __future__ import annotations

from typing import Any

# Config fields that traces recorded before these knobs existed lack, with the behaviour those traces had.
CONFIG_DEFAULTS: dict[str, Any] = {
    "enable_prefix_caching": False,
    "reserve_full_prompt": False,  # the first-chunk admission rule
    "scheduling_policy": "fcfs",
}
SYNTHETIC_TOKEN_BASE = 1_000_000  # synthesized prompt ids start here, far from any real EOS id


def _split(records: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    header = next(r for r in records if r.get("type") == "header")
    steps = [r for r in records if r.get("type") == "step"]
    summary: dict[str, Any] = next((r for r in records if r.get("type") == "summary"), {"requests": []})
    return header, steps, summary


IDLE_STEP: dict[str, Any] = {"scheduled": [], "admitted": [], "preempted": [], "finished": [], "kv": {}}


def _steps(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Step records of a whole trace (records with ``type``), or the list itself (driver output), one per step of
    the step clock: Batchscope skips idle steps (nothing to run until a later arrival) and records how many before
    the next step (``idle_steps_before``); the driver runs them, so they come back here as empty steps."""
    out: list[dict[str, Any]] = []
    for r in records:
        if r.get("type", "step") == "step":
            out += [IDLE_STEP] * int(r.get("idle_steps_before", 0))
            out.append(r)
    return out


def workload_from_trace(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Build ``run_vllm``'s workload from a Batchscope trace (header, steps, summary records).

    - ``config``: the header's ``config``; fields old traces lack default to ``CONFIG_DEFAULTS`` (no prefix
      caching, the first-chunk admission rule, FCFS). ``max_model_len``: the header's (top level or in
      ``config``) if recorded, else the largest of every prompt + ``max_tokens`` and the token budget: it never
      binds (vLLM clamps a chunk to ``max_model_len - 1`` and stops at it), and it keeps vLLM from warning
      that the budget exceeds ``max_num_seqs * max_model_len``.
    - ``eos_token_ids``: the header's ``eos_token_ids`` if recorded; else inferred from the summary as the last
      output token of every request that finished with reason ``stop`` (sorted; empty if none did).
    - ``requests``: one per header request, sorted into arrival order. A request's ``arrival_step`` is the first
      step whose ``scheduled`` or ``waiting`` list holds it (wall-clock arrivals included), else the header's
      ``arrival_step``, else 0; ties keep Batchscope's order (wall-clock arrivals before step-clock ones, then
      ``arrival_time``, then header order). ``prompt_token_ids`` come from the header when recorded; otherwise
      they are **synthesized**: ``num_prompt_tokens`` ids, distinct within and across requests (consecutive
      integers from ``SYNTHETIC_TOKEN_BASE``). That is exact for scheduling without prefix caching, which never
      reads token values; with prefix caching it means "no two prompts share a prefix".
    - ``abort_step``: a request the trace aborted before a step was scheduled (a ``finished`` entry with reason
      ``abort`` and its ``aborted`` facts, not ``during_step``) is aborted before that step.
    - ``sampled``: each request's ``output_token_ids`` from the summary.
    """
    header, steps, summary = _split(records)
    config = {**CONFIG_DEFAULTS, **header["config"]}
    first_seen: dict[str, int] = {}
    for st in steps:
        for rid in [s["request_id"] for s in st.get("scheduled", [])] + list(st.get("waiting", [])):
            first_seen.setdefault(rid, st["step"])
    outputs = {r["request_id"]: r for r in summary["requests"]}
    abort_steps = {
        f["request_id"]: st["step"]
        for st in steps
        for f in st.get("finished", [])
        if f.get("reason") == "abort" and "aborted" in f and not f["aborted"].get("during_step")
    }

    specs = []
    next_token = SYNTHETIC_TOKEN_BASE
    for index, r in enumerate(header["requests"]):
        rid = r["request_id"]
        prompt = r.get("prompt_token_ids")
        if prompt is None:
            prompt = list(range(next_token, next_token + r["num_prompt_tokens"]))
            next_token += r["num_prompt_tokens"]
        arrival = first_seen.get(rid, r.get("arrival_step") if r.get("arrival_step") is not None else 0)
        clock_key = -1 if r.get("arrival_step") is None else r["arrival_step"]  # Batchscope's pending-list order
        specs.append(
            (
                (arrival, clock_key, r.get("arrival_time") or 0.0, index),
                {
                    "request_id": rid,
                    "prompt_token_ids": list(prompt),
                    "max_tokens": r["max_tokens"],
                    "ignore_eos": bool(r.get("ignore_eos", False)),
                    "arrival_step": arrival,
                    "priority": int(r.get("priority", 0)),
                    **({"abort_step": abort_steps[rid]} if rid in abort_steps else {}),
                },
            )
        )
    requests = [spec for _, spec in sorted(specs, key=lambda item: item[0])]
    config.setdefault(
        "max_model_len",
        header.get("max_model_len")
        or max([len(s["prompt_token_ids"]) + s["max_tokens"] for s in requests] + [config["max_num_batched_tokens"]]),
    )
    eos = header.get("eos_token_ids")
    if eos is None:
        eos = sorted(
            {
                o["output_token_ids"][-1]
                for o in outputs.values()
                if o.get("finish_reason") == "stop" and o.get("output_token_ids")
            }
        )
    return {
        "config": config,
        "eos_token_ids": list(eos),
        "requests": requests,
        "sampled": {rid: list(o.get("output_token_ids", [])) for rid, o in outputs.items()},
    }


def _view(step: dict[str, Any]) -> dict[str, Any]:
    """The compared facts of one step, from a Batchscope step record or a driver record.

    Batchscope keeps the pool's facts under ``kv``, the driver at top level; the names are the same. Facts a record
    lacks are ``None`` and not compared (traces recorded before prefix caching have no ``ref_counts``,
    ``cached_free_blocks``, ``evicted`` or ``num_prefix_hit_tokens``, and handed out block ids lowest first, so
    their block ids are not compared either: only blocks per request). Batchscope's ``kv.num_cached_tokens``
    (tokens holding K/V after the step) is another thing and is never compared.
    """
    kv = step.get("kv", {})

    def pool(name: str) -> Any:
        return step.get(name, kv.get(name))

    tables = pool("block_tables") or {}
    new_format = pool("ref_counts") is not None
    return {
        "scheduled": {s["request_id"]: (s["num_tokens"], s["num_computed_tokens"]) for s in step.get("scheduled", [])},
        "order": [s["request_id"] for s in step.get("scheduled", [])],
        "drafts": {
            s["request_id"]: s["draft_token_ids"] for s in step.get("scheduled", []) if s.get("draft_token_ids")
        },
        "admitted": set(step.get("admitted", [])),
        "preempted": list(step.get("preempted", [])),
        "finished": {(f["request_id"], f["reason"]) for f in step.get("finished", [])},
        "blocks": {rid: len(t) for rid, t in tables.items()},
        "block_ids": {rid: list(t) for rid, t in tables.items()} if new_format else None,
        "num_used_blocks": pool("num_used_blocks"),
        "num_prefix_hit_tokens": step.get("num_prefix_hit_tokens"),
        "ref_counts": pool("ref_counts"),
        "cached_free_blocks": pool("cached_free_blocks"),
        "evicted": pool("evicted"),
    }


def _dict_diff(what: str, bs: dict, vl: dict, fmt) -> str | None:
    if bs == vl:
        return None
    parts = []
    for key in sorted(set(bs) | set(vl), key=str):
        if key not in vl:
            parts.append(f"{key} only in Batchscope ({fmt(bs[key])})")
        elif key not in bs:
            parts.append(f"{key} only in vLLM ({fmt(vl[key])})")
        elif bs[key] != vl[key]:
            parts.append(f"{key}: Batchscope {fmt(bs[key])}, vLLM {fmt(vl[key])}")
    return f"{what} differs: " + "; ".join(parts)


def _fmt_sched(v: tuple[int, int]) -> str:
    return f"{v[0]} tokens from {v[1]}"


def _plain(what: str, b: Any, v: Any) -> str | None:
    """``what differs: ...`` when both records have the fact and it differs."""
    if b is None or v is None or b == v:
        return None
    return f"{what} differs: Batchscope {b}, vLLM {v}"


def _step_differences(bs: dict[str, Any], vl: dict[str, Any]) -> list[str]:
    b, v = _view(bs), _view(vl)
    out = [
        _dict_diff("scheduled", b["scheduled"], v["scheduled"], _fmt_sched),
        None
        if b["scheduled"] != v["scheduled"] or b["order"] == v["order"]
        else f"batch order differs: Batchscope {b['order']}, vLLM {v['order']}",
        _dict_diff("draft tokens", b["drafts"], v["drafts"], str),
        _plain("admitted", sorted(b["admitted"]), sorted(v["admitted"])),
        _plain("preempted", b["preempted"], v["preempted"]),
        _plain("finished", sorted(b["finished"]), sorted(v["finished"])),
        _dict_diff("num_prefix_hit_tokens", b["num_prefix_hit_tokens"], v["num_prefix_hit_tokens"], str)
        if None not in (b["num_prefix_hit_tokens"], v["num_prefix_hit_tokens"])
        else None,
        _dict_diff("blocks per request", b["blocks"], v["blocks"], str),
        _dict_diff("block ids", b["block_ids"], v["block_ids"], str)
        if b["blocks"] == v["blocks"] and None not in (b["block_ids"], v["block_ids"])
        else None,
        _plain("num_used_blocks", b["num_used_blocks"], v["num_used_blocks"]),
        _plain("ref_counts", b["ref_counts"], v["ref_counts"]),
        _plain("cached_free_blocks", b["cached_free_blocks"], v["cached_free_blocks"]),
        _plain("evicted", b["evicted"], v["evicted"]),
    ]
    return [d for d in out if d]


def compare(bs_steps: list[dict[str, Any]], vllm_steps: list[dict[str, Any]]) -> list[str]:
    """Human-readable differences between a Batchscope run and a vLLM run, first differing step first.

    ``bs_steps``: Batchscope step records (a whole trace is fine: header and summary are skipped).
    ``vllm_steps``: ``run_vllm``'s records. Steps are matched by position. Per step: scheduled (request ->
    tokens and computed tokens before the step; and, when those agree, the batch order), the draft token ids of
    each speculative decode (n-gram drafts; -1 a placeholder), admitted (as a set),
    preempted (in order), finished (request and reason), prefix-cache hit tokens per admitted request, blocks per
    request and (when those agree) the block ids of every table, ``num_used_blocks``, reference counts, the cached
    free blocks in eviction order, and the evicted blocks; each fact only when both records have it (see
    ``_view``). Differing step counts are reported last. An empty list means the runs agree on every step.
    """
    bs, vl = _steps(bs_steps), _steps(vllm_steps)
    diffs = [f"step {i}: {d}" for i, (b, v) in enumerate(zip(bs, vl)) for d in _step_differences(b, v)]
    if len(bs) != len(vl):
        longer = "Batchscope" if len(bs) > len(vl) else "vLLM"
        first, last = min(len(bs), len(vl)), max(len(bs), len(vl)) - 1
        span = f"step {first}" if first == last else f"steps {first}..{last}"
        diffs.append(f"step {first}: only {longer} runs {span} (Batchscope ran {len(bs)} steps, vLLM {len(vl)})")
    return diffs


def first_difference(bs_steps: list[dict[str, Any]], vllm_steps: list[dict[str, Any]]) -> str:
    """``"agrees on all N steps"`` or the first line of ``compare`` (``"step k: ..."``)."""
    diffs = compare(bs_steps, vllm_steps)
    return diffs[0] if diffs else f"agrees on all {len(_steps(bs_steps))} steps"
