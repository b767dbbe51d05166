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
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay import first_difference, run_batchscope

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
