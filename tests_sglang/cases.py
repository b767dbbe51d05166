"""Hand-made workloads for the SGLang differential, each built to show one rule (tokens; page_size 1)."""

from __future__ import annotations

import json
from pathlib import Path
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


def ignore_eos_running(ignore_eos: bool = True) -> dict[str, Any]:
    """A (2-token prompt, 40 tokens forced with ignore_eos) runs; B (2 + 40) arrives at step 1 in an 80-token pool.
    SGLang charges A's remaining 39 tokens whole (ratio 1.0, not 0.7): 2 + 40 + 1 = 43 is not below
    80 - 2 - 39 = 39, and it stays so while A decodes (each token moves one from A's estimate to its K/V), so B
    waits until A finishes. Without ignore_eos A's 39 count as 27.3 and B joins at step 1."""
    a = _req("A", [11, 12], [7, 2] * 20)
    a["ignore_eos"] = ignore_eos
    reqs = [a, _req("B", [21, 22], [7] * 40, at=1)]
    cfg = {"max_running_requests": 2, "chunked_prefill_size": 64, "pool_tokens": 80}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}


def ignore_eos_simulated_run(prefix_cache: bool = False) -> dict[str, Any]:
    """Prefix cache off, A and B (2-token prompts, 10 tokens each with ignore_eos; B arrives at step 1) in a 25-token
    pool: SGLang judges B by a simulated run (``add_one_req_ignore_eos``). At step 1 the free tokens after B's
    2 + 1 are 25 - 2 - 3 = 20; A (9 left) finishes first, and until then both write 9 each: 20 - 18 = 2 is not above
    1 per request, so B is refused, the running batch is marked full and B joins only after A finishes (step 10).
    With the prefix cache on the estimate rule judges B and admits it at step 1: 2 + 10 + 1 = 13 < 25 - 2 - 9."""
    reqs = [_req("A", [11, 12], [7] * 10), _req("B", [21, 22], [7] * 10, at=1)]
    for r in reqs:
        r["ignore_eos"] = True
    cfg = {
        "max_running_requests": 2,
        "chunked_prefill_size": 64,
        "pool_tokens": 25,
        "enable_prefix_cache": prefix_cache,
    }
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}


def mixed_chunk(on: bool = True) -> dict[str, Any]:
    """``--enable-mixed-chunk``: A and B run; C (a 20-token prompt, chunks of 12) arrives at step 2. Mixed, the adder
    keeps 2 of the 12 chunk tokens for A's and B's decodes: C computes 10 tokens at step 2 with A and B decoding in
    the same batch, then its last 10 at step 3, and the batch is C, A, B from then on. Without mixing C computes 12
    then 8 while A and B wait, and the batch is A, B, C."""
    reqs = [
        _req("A", [11, 12, 13], [7] * 8),
        _req("B", [21, 22], [7] * 6),
        _req("C", list(range(40, 60)), [7] * 4, at=2),
    ]
    cfg = {"max_running_requests": 3, "chunked_prefill_size": 12, "pool_tokens": 200, "enable_mixed_chunk": on}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}


def eviction() -> dict[str, Any]:
    """Whole-node LRU eviction in a 40-token pool, one request at a time (FCFS, all waiting from step 0). A and B
    (4-token prompts a, b, output 7 then EOS) finish and leave a + [7] and b + [7] cached, each split at its prompt's
    end into a 4-token node and a 1-token one (A's last accessed first). C (32 new tokens) needs 32 with 30 free:
    eviction drops A's [7] (1 token, the oldest leaf), still short, then A's whole a (4 tokens, now a leaf, as old):
    5 freed for 2 asked. D = b + [7, 16] still hits 5 (B's path). E = a + [15] hits nothing; its 5 tokens need 3
    more than the 2 free, and the oldest unlocked leaf is then C's 32-token prompt (D's [16] is newer)."""
    a, b = [11, 12, 13, 14], [21, 22, 23, 24]
    reqs = [
        _req("A", a, [7, 2]),
        _req("B", b, [7, 2]),
        _req("C", list(range(31, 63)), [2]),
        _req("D", [*b, 7, 16], [2]),
        _req("E", [*a, 15], [2]),
    ]
    cfg = {"max_running_requests": 1, "chunked_prefill_size": 64, "pool_tokens": 40}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}


def waiting_prefix_refresh() -> dict[str, Any]:
    """FCFS refreshes the cached prefixes of the waiting requests on its first sort and every 32nd after. A and B
    finish as in ``eviction`` (A's a + [7] older than B's b + [7]); X (125 tokens, chunks of 4, one row; SGLang's
    request handling refuses 126 or more in this pool) and W =
    a + [15] arrive at step 4, and W waits while X's chunks fill the 132-token pool. The queue is sorted at step 0
    (A admitted), 2 (B) and then once per chunk of X from step 4 (the decode steps, their row taken, try none): the
    32nd sort after the first is at step 34, X's 31st chunk, and refreshes W's cached a. That chunk is 2 tokens
    short: eviction drops A's [7], then B's [7] (a is newer now), 2 for 2. X's last chunk (1 token) evicts b whole
    (older than a); W then hits a (4). Without the refresh, a would go right after A's [7]: 5 evicted at step 34."""
    a, b = [11, 12, 13, 14], [21, 22, 23, 24]
    reqs = [
        _req("A", a, [7, 2]),
        _req("B", b, [7, 2]),
        _req("X", list(range(100, 225)), [2], at=4),
        _req("W", [*a, 15], [2], at=4),
    ]
    cfg = {"max_running_requests": 1, "chunked_prefill_size": 4, "pool_tokens": 132}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [EOS]}


CASES = Path(__file__).resolve().parents[1] / "tests" / "cases"  # copies of ../shared/cases (see its README)


def shared_case(name: str, **config: Any) -> dict[str, Any]:
    """Reference case ``name`` (f01, f02, f03: SGLang at the pool's edge and its aborts) as a workload: its requests
    (``ignore_eos``, each sampling token 7 up to its ``max_tokens``) under ``config`` (the case's flags)."""
    lines = (CASES / f"{name}.jsonl").read_text().splitlines()
    reqs = []
    for spec in (json.loads(line) for line in lines if line.strip()):
        r = _req(spec["request_id"], spec["prompt_token_ids"], [7] * spec["max_tokens"], at=spec.get("arrival_step", 0))
        r["ignore_eos"] = spec.get("ignore_eos", False)
        if "abort_step" in spec:
            r["abort_step"] = spec["abort_step"]
        reqs.append(r)
    return {"config": {"max_running_requests": 4, **config}, "requests": reqs, "eos_token_ids": [EOS]}


def f01(prompt_tokens: int = 20) -> dict[str, Any]:
    """f01: R (``prompt_tokens`` ids, max_tokens 20) in a 40-token pool, chunks of 64: ``max_req_len`` 39, so SGLang
    clips max_new_tokens to 39 - 20 - 1 = 18; a prompt of 34 (``max_req_input_len``) or more is refused."""
    workload = shared_case("f01", pool_tokens=40, chunked_prefill_size=64)
    workload["requests"][0]["prompt_token_ids"] = list(range(100, 100 + prompt_tokens))
    return workload


def f02() -> dict[str, Any]:
    """f02: A (6 ids, 10 tokens) aborted before step 3 while it decodes beside B (6 ids, 4 tokens, from step 1)."""
    return shared_case("f02", pool_tokens=64, chunked_prefill_size=64)


def f03() -> dict[str, Any]:
    """f03: X (20 ids, chunks of 8) aborted before step 2, mid-prompt; Y (the same ids) arrives at step 3."""
    return shared_case("f03", pool_tokens=64, chunked_prefill_size=8)


def abort_behind_a_prefill() -> dict[str, Any]:
    """A decodes alone; the abort comes before step 3, when B arrives: step 3 is B's EXTEND batch (prefill first,
    A's decode waits), so A is only marked to finish then and ends after the DECODE of step 4, with 4 tokens."""
    reqs = [_req("A", [11, 12], [7] * 10), _req("B", [21, 22, 23], [7] * 3, at=3)]
    reqs[0]["abort_step"] = 3
    return {"config": {"max_running_requests": 2, "pool_tokens": 200}, "requests": reqs, "eos_token_ids": [EOS]}


def abort_after_retraction() -> dict[str, Any]:
    """``retraction`` with its retracted request aborted before the next step: it waits in the queue without K/V,
    so the abort ends it at once (state ``preempted`` in the engine's trace); the others run on."""
    workload = retraction()
    for r in workload["requests"]:
        r["abort_step"] = RETRACTED_AT + 1 if r["request_id"] == RETRACTED else None
    return workload


RETRACTED, RETRACTED_AT = "C", 34  # ``retraction``: the request SGLang retracts and the step (test_sglang_edges)
