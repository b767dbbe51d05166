"""Random differential: Batchscope's scheduler (with a fake runner) and vLLM 0.33.0's real scheduler, same workload
and same sampled tokens, must agree on every step.

``differential(config_overrides)`` is the harness: hypothesis draws a workload (1-6 requests, prompts of 1-60
tokens, 1-30 output tokens, arrival steps 0-10, EOS at a random output position or never, ``ignore_eos`` on or
off) and a config (``max_num_seqs`` 1-4, a token budget from ``max_num_seqs`` to 64, ``block_size`` in
{1, 2, 4, 8, 16}, a pool from "the largest request just fits alone" to "everything fits at once", chunked
prefill on), runs it through ``LLMEngine(FakeRunner)`` and through ``run_vllm`` with the tokens Batchscope
sampled, and compares every step (``batchscope_vllm.compare``). vLLM refuses a budget below ``max_num_seqs``
(``SchedulerConfig.verify_max_model_len``), so the budget starts there.

``config_overrides`` go into vLLM's workload config, and into Batchscope's ``EngineConfig`` for the fields it
has: today ``differential({"reserve_full_prompt": True})`` runs vLLM's full-sequence admission rule against a
Batchscope that does not implement it (only the first-chunk rule is switched on as a test below). Once
``EngineConfig`` has a ``reserve_full_prompt`` field, add ``test_differential_reserve_full_prompt`` calling
``differential({"reserve_full_prompt": True})``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fakes import EOS, FakeRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchscope_vllm.compare import first_difference, workload_from_trace
from batchscope_vllm.driver import run_vllm
from engine.config import EngineConfig
from engine.engine import LLMEngine
from engine.request import Request, SamplingParams

BLOCK_SIZES = (1, 2, 4, 8, 16)


@dataclasses.dataclass
class Case:
    """One drawn workload: Batchscope ``EngineConfig`` fields, requests and each request's EOS position."""

    config: dict[str, Any]
    requests: list[dict[str, Any]]  # request_id, prompt_token_ids, max_tokens, ignore_eos, arrival_step
    natural_lengths: dict[str, int]  # request_id -> output position (1-based) where the fake runner samples EOS


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    max_num_seqs = draw(st.integers(1, 4))
    budget = draw(st.integers(max_num_seqs, 64))
    block_size = draw(st.sampled_from(BLOCK_SIZES))
    stem = draw(st.lists(st.integers(3, 9), max_size=60))  # shared prompt prefixes, for prefix-caching runs
    requests, natural = [], {}
    for i in range(draw(st.integers(1, 6))):
        rid = f"R{i}"
        shared = stem[: draw(st.integers(0, len(stem)))]
        prompt = (shared + draw(st.lists(st.integers(3, 9), min_size=1, max_size=60)))[:60]
        max_tokens = draw(st.integers(1, 30))
        eos_at = draw(st.none() | st.integers(1, max_tokens))
        if eos_at is not None:
            natural[rid] = eos_at
        requests.append(
            {
                "request_id": rid,
                "prompt_token_ids": prompt,
                "max_tokens": max_tokens,
                "ignore_eos": draw(st.booleans()),
                "arrival_step": draw(st.integers(0, 10)),
            }
        )
    needs = [blocks_for(len(r["prompt_token_ids"]) + r["max_tokens"] - 1, block_size) for r in requests]
    num_kv_blocks = draw(st.integers(max(needs), max(max(needs), sum(needs))))
    config = {
        "policy": "continuous",
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": budget,
        "block_size": block_size,
        "num_kv_blocks": num_kv_blocks,
        "enable_chunked_prefill": True,
    }
    return Case(config, requests, natural)


def run_both(case: Case, config_overrides: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """Batchscope's trace records and vLLM's step records for ``case``."""
    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    bs_config = EngineConfig(**case.config, **{k: v for k, v in config_overrides.items() if k in fields})
    requests = [
        Request(
            r["request_id"],
            list(r["prompt_token_ids"]),
            SamplingParams(max_tokens=r["max_tokens"], ignore_eos=r["ignore_eos"]),
            arrival_step=r["arrival_step"],
        )
        for r in case.requests
    ]
    records = LLMEngine(FakeRunner(case.natural_lengths), bs_config, eos_token_ids={EOS}).run(requests)
    workload = workload_from_trace(records)
    prompts = {r["request_id"]: r["prompt_token_ids"] for r in case.requests}
    for spec in workload["requests"]:  # the real prompts (they matter with prefix caching)
        spec["prompt_token_ids"] = list(prompts[spec["request_id"]])
    workload["eos_token_ids"] = [EOS]
    workload["config"].update({"enable_prefix_caching": False, "reserve_full_prompt": False, **config_overrides})
    return records, run_vllm(workload)


def differential(
    config_overrides: dict[str, Any], max_examples: int = 500, collect: bool = False
) -> list[tuple[Case, str]]:
    """Run ``max_examples`` random cases under ``config_overrides`` (see the module docstring).

    ``collect=False``: fail (hypothesis shrinks to a minimal case) on the first disagreement.
    ``collect=True``: never fail; return every disagreeing case with its first difference (no shrinking).
    """
    differing: list[tuple[Case, str]] = []

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        database=None if collect else settings.default.database,
    )
    @given(case=cases())
    def check(case: Case) -> None:
        records, steps = run_both(case, config_overrides)
        verdict = first_difference(records, steps)
        if verdict.startswith("agrees"):
            return
        if collect:
            differing.append((case, verdict))
        else:
            raise AssertionError(
                f"{verdict}\nconfig {case.config}\nrequests {case.requests}\nEOS at {case.natural_lengths}"
            )

    check()
    return differing


def test_differential_first_chunk_rule_no_prefix_caching():
    differential({"reserve_full_prompt": False, "enable_prefix_caching": False})
