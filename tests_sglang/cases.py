"""Hand-made workloads for the SGLang differential, each built to show one rule (tokens; page_size 1)."""

from __future__ import annotations

from typing import Any

EOS = 2


def _req(rid: str, prompt: list[int], outputs: list[int], max_new: int | None = None, at: int = 0) -> dict:
    return {
        "request_id": rid,
        "prompt_token_ids": prompt,
        "max_new_tokens": max_new or len(outputs),
        "arrival_step": at,
        "output_token_ids": outputs,
    }


def retraction() -> dict[str, Any]:
    """Three 40-token answers in a 103-token pool: A and B are admitted at full cost, C a step later because the
    ratio discounts A's and B's remaining output by 30 %; together they outgrow the pool and decode retracts."""
    reqs = [_req("A", [11, 12], [7] * 40), _req("B", [21, 22], [7] * 40), _req("C", [31, 32], [7] * 40, at=1)]
    cfg = {"max_running_requests": 3, "chunked_prefill_size": 64, "pool_tokens": 103, "enable_prefix_cache": False}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}


def shared_prefixes(policy: str) -> dict[str, Any]:
    """A 40-token system prompt shared by three requests, and a stranger X, with 80 prefill tokens a step. FCFS
    admits S1 whole and S2 as a chunk that recomputes the shared prefix; LPM sends S2 behind X (it shares 40 tokens
    with S1, which computes them now), so X runs whole and S2 gets the 8 tokens left; S3, arriving later, hits the
    cached prefix."""
    system = list(range(100, 140))
    reqs = [
        _req("S1", [*system, 1, 3], [7, 7, 2], max_new=8),
        _req("S2", [*system, 4, 5, 6], [7, 2], max_new=8),
        _req("X", list(range(200, 230)), [7, 7, 7, 2], max_new=8),
        _req("S3", [*system, 3], [7, 7, 7, 7, 7], max_new=5, at=3),
    ]
    cfg = {"max_running_requests": 3, "chunked_prefill_size": 80, "pool_tokens": 400, "schedule_policy": policy}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}


def chunked() -> dict[str, Any]:
    """A 30-token prompt in chunks of 8 while a short request arrives: one chunked request at a time, its partial
    K/V cached between chunks (the newcomer hits its first chunk)."""
    reqs = [_req("A", list(range(50, 80)), [7, 7, 7]), _req("B", [*range(50, 58), 9], [7, 2], max_new=4, at=1)]
    cfg = {"max_running_requests": 2, "chunked_prefill_size": 8, "pool_tokens": 200}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}
