"""Random differential: Batchscope's scheduler (with a replay runner) and vLLM 0.33.0's real scheduler, same
workload and same sampled tokens, must agree on every step.

``differential(config_overrides)`` is the harness: hypothesis draws a workload (1-6 requests; prompts of 1-60
tokens built from one of a few *shared stems* plus a tail of their own, over a 7-token vocabulary, so that prefixes
are shared and prefix caching matters; 1-30 output tokens; arrival steps 0-10; EOS at a random output position or
never; ``ignore_eos`` on or off; priorities -2..2) and a config (``max_num_seqs`` 1-4, a token budget from
``max_num_seqs`` to 64, ``block_size`` in {1, 2, 4, 8, 16}, a pool from "the largest request just fits alone" to
"everything fits at once", chunked prefill on, both admission rules, prefix caching on and off, FCFS and priority),
runs it through ``LLMEngine(ReplayRunner)`` and through ``run_vllm`` with the same tokens, and compares every step
(``batchscope_vllm.compare``: scheduled tokens, batch order, admissions, preemptions, finishes, prefix-cache hits,
block ids, reference counts, cached free blocks, evictions). vLLM refuses a budget below ``max_num_seqs``
(``SchedulerConfig.verify_max_model_len``), so the budget starts there. Chunked prefill stays on: with it off, vLLM
never resumes a preempted request whose recompute exceeds the budget (Batchscope splits it; see README, Fidelity).

``config_overrides`` pin config fields (e.g. ``{"enable_prefix_caching": False}``) instead of drawing them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay import run_both

from batchscope_vllm.compare import first_difference

BLOCK_SIZES = (1, 2, 4, 8, 16)
EOS = 2
OTHER = 7  # the token sampled when not EOS


@dataclasses.dataclass
class Case:
    """One drawn workload: Batchscope ``EngineConfig`` fields and requests (with their output tokens)."""

    config: dict[str, Any]
    requests: list[dict[str, Any]]  # request_id, prompt_token_ids, max_tokens, ignore_eos, arrival_step, priority,
    #                                 output_token_ids


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


@st.composite
def cases(draw: st.DrawFn, overrides: dict[str, Any]) -> Case:
    max_num_seqs = draw(st.integers(1, 4))
    budget = draw(st.integers(max_num_seqs, 64))
    block_size = draw(st.sampled_from(BLOCK_SIZES))
    stems = draw(st.lists(st.lists(st.integers(3, 9), max_size=48), min_size=1, max_size=3))
    requests = []
    for i in range(draw(st.integers(1, 6))):
        stem = draw(st.sampled_from(stems))
        shared = stem[: draw(st.just(len(stem)) | st.integers(0, len(stem)))]  # often the whole stem
        prompt = (shared + draw(st.lists(st.integers(3, 9), min_size=1, max_size=30)))[:60]
        max_tokens = draw(st.integers(1, 30))
        eos_at = draw(st.none() | st.integers(1, max_tokens))
        ignore_eos = draw(st.booleans())
        length = max_tokens if eos_at is None or ignore_eos else eos_at
        requests.append(
            {
                "request_id": f"R{i}",
                "prompt_token_ids": prompt,
                "max_tokens": max_tokens,
                "ignore_eos": ignore_eos,
                "arrival_step": draw(st.integers(0, 10)),
                "priority": draw(st.integers(-2, 2)),
                "output_token_ids": [EOS if k + 1 == eos_at else OTHER for k in range(length)],
            }
        )
    needs = [blocks_for(len(r["prompt_token_ids"]) + r["max_tokens"] - 1, block_size) for r in requests]
    config = {
        "batching": "continuous",
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": budget,
        "block_size": block_size,
        "num_kv_blocks": draw(st.integers(max(needs), max(max(needs), sum(needs)))),
        "enable_chunked_prefill": True,
        "reserve_full_prompt": draw(st.booleans()),
        "enable_prefix_caching": draw(st.booleans()),
        "scheduling_policy": draw(st.sampled_from(["fcfs", "priority"])),
        **overrides,
    }
    return Case(config, requests)


def differential(
    config_overrides: dict[str, Any], max_examples: int = 500, collect: bool = False
) -> tuple[int, list[tuple[Case, str]]]:
    """Run ``max_examples`` random cases with ``config_overrides`` (see the module docstring).

    ``collect=False``: fail (hypothesis shrinks to a minimal case) on the first disagreement.
    ``collect=True``: never fail; return (examples run, every disagreeing case with its first difference).
    """
    differing: list[tuple[Case, str]] = []
    ran = [0]

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        database=None if collect else settings.default.database,
    )
    @given(case=cases(config_overrides))
    def check(case: Case) -> None:
        ran[0] += 1
        records, steps = run_both(case.requests, case.config, [EOS])
        verdict = first_difference(records, steps)
        if verdict.startswith("agrees"):
            return
        if collect:
            differing.append((case, verdict))
        else:
            raise AssertionError(f"{verdict}\nconfig {case.config}\nrequests {case.requests}")

    check()
    return ran[0], differing


def test_differential_every_rule_and_policy():
    """1000 random workloads, configs drawn over both admission rules, prefix caching on and off, FCFS and
    priority: every step agrees."""
    ran, _ = differential({}, max_examples=1000)
    assert ran >= 1000


def test_differential_counts_examples_and_reports_disagreements():
    """The harness is not vacuous: a Batchscope run compared with vLLM under another admission rule disagrees."""
    case = Case(
        {
            "batching": "continuous",
            "max_num_seqs": 2,
            "max_num_batched_tokens": 16,
            "block_size": 4,
            "num_kv_blocks": 14,
            "enable_chunked_prefill": True,
            "reserve_full_prompt": False,
            "enable_prefix_caching": False,
        },
        [
            {
                "request_id": "A",
                "prompt_token_ids": list(range(100, 137)),
                "max_tokens": 8,
                "ignore_eos": True,
                "arrival_step": 0,
                "output_token_ids": [OTHER] * 8,
            },
            {
                "request_id": "B",
                "prompt_token_ids": list(range(200, 236)),
                "max_tokens": 8,
                "ignore_eos": True,
                "arrival_step": 0,
                "output_token_ids": [OTHER] * 8,
            },
        ],
    )
    records, steps = run_both(case.requests, case.config, [EOS])
    assert first_difference(records, steps) == "agrees on all 20 steps"
    from batchscope_vllm.compare import workload_from_trace
    from batchscope_vllm.driver import run_vllm

    workload = workload_from_trace(records)
    workload["config"]["reserve_full_prompt"] = True  # vLLM's default rule against Batchscope's first-chunk run
    assert first_difference(records, run_vllm(workload)).startswith("step 2: scheduled differs")
