"""Differential: Batchscope's SGLang-style scheduler (``batchscope.sglang_family.scheduler``) and SGLang 0.5.23's real
scheduler (``batchscope_sglang.driver``), same workload and same sampled tokens, must agree on every step: the batch
kind, who runs with how many tokens (in batch order), admissions, prefix-hit lengths, retractions, the chunked
request, the new-token ratio (to 1e-9) and who finishes.

Hypothesis draws small workloads in three families, each inside what is proven (see README, SGLang's scheduler):

- **tight memory, no prefix cache**: 1-6 requests, pools from "the largest request just fits" up, chunks of 4-64
  tokens, so that admission by estimated output holds requests back and prompts are chunked;
- **shared prefixes, prefix cache on**: prompts built from a few shared stems, FCFS or LPM, in pools from one that
  evicts often to one that never evicts (about a third of the workloads evict);
- **retraction**, with the prefix cache off and again on: long outputs beside short prompts, in a pool of one to
  two requests' whole run: the ratio lets admission over-commit and decode then retracts (about one workload in
  nine); with the cache on nearly every workload evicts, at admission, in decode and after a retraction.

Each record also carries the radix cache's size and its evictable part after the step (``cached_tokens``,
``evictable_tokens``), so an eviction that drops other tokens than SGLang's shows at its own step.

Each request may carry ``ignore_eos`` (it then runs past the EOS it samples): SGLang charges its remaining output at
ratio 1.0 while it runs, and with the prefix cache off judges its admission by a simulated fixed-length run
(``PrefillAdder.add_one_req_ignore_eos``).

Each family runs again with ``--enable-mixed-chunk`` (SGLang's ``enable_mixed_chunk=True`` in its server arguments):
the running decodes join an EXTEND batch when the pool holds them.

Every workload must also run to its end in SGLang (a workload nothing can admit would agree vacuously).

Requests reach SGLang through its own request handling and aborts through its own ``abort_request``
(``batchscope_sglang.driver``); the last family puts requests at the pool's edge (clipped, refused) and aborts about
half of them at random steps (``at_the_edges``), and checks Batchscope's engine trace of them too.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay import compare_trace, first_difference, run_batchscope, run_engine_trace

from batchscope_sglang.driver import run_sglang

EOS = 2
OTHER = 7


@st.composite
def workloads(draw: st.DrawFn, cache: bool, mixed: bool = False) -> dict[str, Any]:
    stems = draw(st.lists(st.lists(st.integers(3, 9), min_size=0, max_size=40), min_size=1, max_size=3))
    requests = []
    for i in range(draw(st.integers(1, 6))):
        stem = draw(st.sampled_from(stems)) if cache else []
        prompt = (stem + draw(st.lists(st.integers(3, 9), min_size=1, max_size=24)))[:50]
        max_new = draw(st.integers(1, 24))
        eos_at = draw(st.none() | st.integers(1, max_new))
        ignore_eos = draw(st.booleans())  # then it runs to max_new, past the EOS it samples
        length = max_new if eos_at is None or ignore_eos else eos_at
        outputs = [EOS if k + 1 == eos_at else OTHER for k in range(length)]
        requests.append(
            {
                "request_id": f"R{i}",
                "prompt_token_ids": prompt,
                "max_new_tokens": max_new,
                "arrival_step": draw(st.integers(0, 8)),
                "output_token_ids": outputs,
                "ignore_eos": ignore_eos,
            }
        )
    largest = max(len(r["prompt_token_ids"]) + r["max_new_tokens"] for r in requests)
    total = sum(len(r["prompt_token_ids"]) + r["max_new_tokens"] for r in requests)
    # admission needs prompt + max_new_tokens + 1 < the pool (an ignore_eos one's simulated run alone: 2 more than
    # that); with the cache on, from pools that evict often to pools that never do
    pool = draw(st.integers(largest + 3, total + 64)) if cache else draw(st.integers(largest + 3, largest + 60))
    rows = draw(st.integers(1, 4))
    config = {
        "max_running_requests": rows,
        "chunked_prefill_size": draw(st.integers(rows + 1 if mixed else 4, 64)),
        "pool_tokens": pool,
        "schedule_policy": draw(st.sampled_from(["fcfs", "lpm"])) if cache else "fcfs",
        "enable_prefix_cache": cache,
        "enable_mixed_chunk": mixed,
    }
    return {"config": config, "requests": requests, "eos_token_ids": [EOS]}


@st.composite
def retracting(draw: st.DrawFn, cache: bool, mixed: bool = False) -> dict[str, Any]:
    """Long outputs beside short prompts in a pool that holds one request's whole run but not everyone's: the
    ratio lets admission over-commit, and decode then runs out (retraction)."""
    requests = []
    for i in range(draw(st.integers(3, 6))):
        max_new = draw(st.integers(24, 60))
        requests.append(
            {
                "request_id": f"R{i}",
                "prompt_token_ids": draw(st.lists(st.integers(3, 9), min_size=1, max_size=10)),
                "max_new_tokens": max_new,
                "arrival_step": draw(st.integers(0, 12)),
                "output_token_ids": [OTHER] * max_new,
                "ignore_eos": draw(st.booleans()),
            }
        )
    sizes = [len(r["prompt_token_ids"]) + r["max_new_tokens"] for r in requests]
    rows = draw(st.integers(2, 5))
    config = {
        "max_running_requests": rows,
        "chunked_prefill_size": draw(st.integers(rows + 1 if mixed else 4, 64)),
        "pool_tokens": draw(st.integers(max(sizes) + 3, max(sizes) * 2)),
        "schedule_policy": "fcfs",
        "enable_prefix_cache": cache,
        "enable_mixed_chunk": mixed,
    }
    return {"config": config, "requests": requests, "eos_token_ids": [EOS]}


def _check(workload: dict[str, Any]) -> None:
    theirs = run_sglang(workload)
    verdict = first_difference(run_batchscope(workload), theirs)
    assert verdict.startswith("agrees"), f"{verdict}\nworkload {workload}"
    finished = {rid for r in theirs for rid in r["finished"]}
    assert finished == {r["request_id"] for r in workload["requests"]}, "a workload must run to the end"


EXAMPLES = int(os.environ.get("SGLANG_DIFF_EXAMPLES", "150"))  # per test
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


@SETTINGS
@given(workload=workloads(cache=False))
def test_tight_memory_without_prefix_cache(workload):
    _check(workload)


@SETTINGS
@given(workload=workloads(cache=True))
def test_shared_prefixes_with_prefix_cache(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=False))
def test_retraction_without_prefix_cache(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=True))
def test_retraction_with_prefix_cache(workload):
    """Where the cache evicts: whole nodes, least recently accessed first (``batchscope.sglang_family.radix_cache``)."""
    _check(workload)


# The same families with --enable-mixed-chunk (chunks longer than the rows: each mixed decode takes a chunk
# token, and SGLang's adder is not meant to start with none left; the engine refuses that setting).
@SETTINGS
@given(workload=workloads(cache=False, mixed=True))
def test_mixed_chunk_tight_memory(workload):
    _check(workload)


@SETTINGS
@given(workload=workloads(cache=True, mixed=True))
def test_mixed_chunk_shared_prefixes(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=False, mixed=True))
def test_mixed_chunk_retraction(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=True, mixed=True))
def test_mixed_chunk_retraction_with_prefix_cache(workload):
    _check(workload)


# Requests at the pool's edge and aborts, through SGLang's request handling and its abort_request (the driver sends
# each request as the tokenizer manager's message and each abort as an AbortReq): prompts from one token to past
# ``max_req_input_len`` (refused: a one-token stand-in, then an abort), outputs up to past the pool or unset (clipped
# by ``init_req_max_new_tokens``), a model context below the pool now and then (its bound clips instead), and about
# half the requests aborted at a random step: waiting, mid-chunk, running (marked to finish), retracted or finished.
@st.composite
def at_the_edges(draw: st.DrawFn, cache: bool, mixed: bool = False, unset: bool = True) -> dict[str, Any]:
    pool = draw(st.integers(12, 80))
    stems = draw(st.lists(st.lists(st.integers(3, 9), min_size=1, max_size=pool), min_size=1, max_size=2))
    requests = []
    for i in range(draw(st.integers(1, 5))):
        prompt = (draw(st.sampled_from(stems)) + draw(st.lists(st.integers(3, 9), max_size=pool)))[: pool + 4]
        prompt = prompt or [3]
        max_new = draw(st.none() | st.integers(1, pool)) if unset else draw(st.integers(1, pool))
        length = max_new or pool
        eos_at = draw(st.none() | st.integers(1, length))
        # without the prefix cache an ignore_eos request clipped to the pool is never admitted (SGLang waits forever;
        # tests/engine/test_sglang_edges.py), so those run without it
        ignore_eos = cache and draw(st.booleans())
        arrival = draw(st.integers(0, 6))
        requests.append(
            {
                "request_id": f"R{i}",
                "prompt_token_ids": prompt,
                "max_new_tokens": max_new,
                "arrival_step": arrival,
                "output_token_ids": [EOS if k + 1 == eos_at else OTHER for k in range(length)],
                "ignore_eos": ignore_eos,
                "abort_step": draw(st.none() | st.integers(arrival, arrival + 3) | st.integers(arrival, arrival + 20)),
            }
        )
    rows = draw(st.integers(1, 4))
    config = {
        "max_running_requests": rows,
        "chunked_prefill_size": draw(st.integers(rows + 1 if mixed else 2, 48)),
        "pool_tokens": pool,
        "schedule_policy": draw(st.sampled_from(["fcfs", "lpm"])) if cache else "fcfs",
        "enable_prefix_cache": cache,
        "enable_mixed_chunk": mixed,
        "context_len": draw(st.none() | st.integers(pool // 2, pool + 8)),
    }
    if config["context_len"] is not None:  # SGLang's tokenizer manager refuses (HTTP 400) what passes the context
        requests = [r for r in requests if _fits_context(r, config["context_len"])] or requests[:0]
    return {"config": config, "requests": requests, "eos_token_ids": [EOS]}


def _fits_context(r: dict[str, Any], context_len: int) -> bool:
    n, m = len(r["prompt_token_ids"]), r["max_new_tokens"]
    return n < context_len and (m is None or n + m <= context_len)


def _check_edges(workload: dict[str, Any], engine: bool = False) -> None:
    if not workload["requests"]:
        return
    theirs = run_sglang(workload)
    verdict = first_difference(run_batchscope(workload), theirs)
    assert verdict.startswith("agrees"), f"{verdict}\nworkload {workload}"
    ended = {rid for r in theirs for rid in r["finished"] + r["aborted"]}
    assert ended == {r["request_id"] for r in workload["requests"]}, "a workload must run to the end"
    if engine:
        verdict = compare_trace(run_engine_trace(workload), theirs)
        assert verdict.startswith("agrees"), f"engine trace: {verdict}\nworkload {workload}"


@SETTINGS
@given(workload=at_the_edges(cache=False))
def test_edges_and_aborts_without_prefix_cache(workload):
    _check_edges(workload)


@SETTINGS
@given(workload=at_the_edges(cache=True))
def test_edges_and_aborts_with_prefix_cache(workload):
    _check_edges(workload)


@SETTINGS
@given(workload=at_the_edges(cache=True, mixed=True))
def test_edges_and_aborts_with_mixed_chunks(workload):
    _check_edges(workload)


@settings(
    max_examples=max(EXAMPLES // 3, 1), deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(workload=at_the_edges(cache=True, unset=False))
def test_edges_and_aborts_in_the_engines_trace(workload):
    """The same through Batchscope's engine (its trace, read back): the clips, refusals and aborts it records."""
    _check_edges(workload, engine=True)


@st.composite
def with_aborts(draw: st.DrawFn, workload: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """``workload`` with about half its requests aborted at a random step of their run: the retracting families'
    aborts reach requests while they are retracted, or marked to finish and then retracted (SGLang keeps the mark:
    the request ends at its next sample, after its recompute)."""
    out = draw(workload)
    for r in out["requests"]:
        r["abort_step"] = draw(st.none() | st.integers(r["arrival_step"], r["arrival_step"] + 80))
    return out


@SETTINGS
@given(workload=with_aborts(retracting(cache=False)))
def test_aborts_while_retracting_without_prefix_cache(workload):
    _check_edges(workload)


@SETTINGS
@given(workload=with_aborts(retracting(cache=True, mixed=True)))
def test_aborts_while_retracting_with_prefix_cache_and_mixed_chunks(workload):
    _check_edges(workload)
