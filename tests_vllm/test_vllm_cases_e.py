"""Shared cases e01 and e02 (../shared/cases/README.md) against vLLM 0.33.0's scheduler: the prefix cache's eviction
order (e01) and full-prompt hits under the full-prompt admission rule (e02a, e02b) agree on every step, and vLLM's
own prefix-cache counters are the case text's: 8 hits / 49 queried tokens, 12/25 and 8/20.

The workloads are the case files (tests/cases: plain token ids, ``ignore_eos``, ``max_tokens`` given) under the
case's flags (``--block-size 4 --max-num-batched-tokens 64``, prefix caching and the full-prompt rule on: vLLM's
defaults), and, as every shared case, under the other admission rule and without caching. Both schedulers sample
the tokens given here (``replay.ReplayRunner``): the case text's outputs where it gives them (A = B = [3575, 282,
4649], C [282, 4649], F [7268]); e01's and E's, which it does not give ("outputs = references"), are SmolLM2's
greedy tokens, recorded once (tests/shared_cases/test_case_e01.py and tests/shared_cases/test_case_e02.py check
the model's outputs against transformers ``generate``). No schedule here depends on their values: e01's single
tokens are never fed back, and E's fill only its block 2, which nobody looks up; the runs with stand-in tokens
(every output 7) show it.

vLLM's counters are its ``PrefixCacheStats``, which it keeps only with ``log_stats`` (on in a server):
``CountingScheduler`` turns it on and sums what ``make_stats`` hands out each step. The driver is not changed
(``run_vllm`` takes the scheduler class), and the counting run is compared step by step too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from replay import run_batchscope, run_both
from vllm.v1.core.sched.scheduler import Scheduler

from batchscope_vllm.compare import compare, first_difference, workload_from_trace
from batchscope_vllm.driver import run_vllm

CASES = Path(__file__).resolve().parents[1] / "tests" / "cases"  # copies of ../shared/cases
EOS, MAX_MODEL_LEN = [2], 8192  # SmolLM2's, as in cases.json
BASE = {
    "batching": "continuous",
    "block_size": 4,
    "max_num_batched_tokens": 64,
    "enable_chunked_prefill": True,
    "enable_prefix_caching": True,
    "reserve_full_prompt": True,
}
CONFIGS = {
    "e01": {**BASE, "max_num_seqs": 1, "num_kv_blocks": 6},
    "e02a": {**BASE, "max_num_seqs": 1, "num_kv_blocks": 16},
    "e02b": {**BASE, "max_num_seqs": 2, "num_kv_blocks": 5},
}
OUTPUTS = {
    "e01": {"B": [198], "A": [260], "X": [30], "A2": [198]},  # SmolLM2's (the text: "outputs = references")
    "e02a": {"A": [3575, 282, 4649], "B": [3575, 282, 4649], "C": [282, 4649]},  # the case text's
    "e02b": {"E": [3575, 282, 4649, 314, 7042, 30], "F": [7268]},  # F: the case text's; E: SmolLM2's
}
# vLLM's own counters, the case text: (hits, queries) in tokens, first admissions only
COUNTERS = {"e01": (8, 49), "e02a": (12, 25), "e02b": (8, 20)}


def requests(case: str, stand_in: bool = False) -> list[dict[str, Any]]:
    """The case file's requests with the tokens both schedulers sample (``stand_in``: every output token 7)."""
    specs = [json.loads(line) for line in (CASES / f"{case}.jsonl").read_text().splitlines() if line.strip()]
    for spec in specs:
        out = OUTPUTS[case][spec["request_id"]]
        assert len(out) == spec["max_tokens"]
        spec["output_token_ids"] = [7] * len(out) if stand_in else out
    return specs


class CountingScheduler(Scheduler):
    """vLLM's scheduler with ``log_stats`` on (as a server runs it), summing its prefix-cache counters over the run.

    vLLM records each admission's queried and hit tokens in ``KVCacheManager.prefix_cache_stats`` and hands them out
    (and resets them) in ``make_stats``, which ``update_from_output`` calls every step."""

    last: CountingScheduler | None = None

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, log_stats=True, **kwargs)
        self.totals = dict.fromkeys(("requests", "queries", "hits", "preempted_queries", "preempted_hits"), 0)
        CountingScheduler.last = self

    def make_stats(self, *args: Any, **kwargs: Any):
        stats = super().make_stats(*args, **kwargs)
        if stats is not None and stats.prefix_cache_stats is not None:
            for name in self.totals:
                self.totals[name] += getattr(stats.prefix_cache_stats, name)
        return stats


RULES = {  # as tests_vllm/test_vllm_cases.py runs every case; the case texts' flags are the first
    "full-prompt+caching": {"reserve_full_prompt": True, "enable_prefix_caching": True},
    "full-prompt": {"reserve_full_prompt": True, "enable_prefix_caching": False},
    "first-chunk+caching": {"reserve_full_prompt": False, "enable_prefix_caching": True},
    "first-chunk": {"reserve_full_prompt": False, "enable_prefix_caching": False},
}


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("case", list(CONFIGS))
def test_case_agrees_with_vllm_under_each_admission_rule_with_and_without_caching(case, rules):
    records, steps = run_both(requests(case), {**CONFIGS[case], **RULES[rules]}, EOS, MAX_MODEL_LEN)
    assert compare(records, steps) == [], first_difference(records, steps)


@pytest.mark.parametrize("stand_in", [False, True], ids=["given-tokens", "stand-in-tokens"])
@pytest.mark.parametrize("case", list(CONFIGS))
def test_case_agrees_with_vllm(case, stand_in):
    records, steps = run_both(requests(case, stand_in), CONFIGS[case], EOS, MAX_MODEL_LEN)
    assert compare(records, steps) == [], first_difference(records, steps)
    if stand_in:  # the same schedule as with the given tokens: their values do not matter here
        given, _ = run_both(requests(case), CONFIGS[case], EOS, MAX_MODEL_LEN)
        assert [{**st, "sampled": None, "t_start": 0, "t_end": 0} for st in records[1:-1]] == [
            {**st, "sampled": None, "t_start": 0, "t_end": 0} for st in given[1:-1]
        ]


@pytest.mark.parametrize("case", list(CONFIGS))
def test_vllms_own_prefix_cache_counters_are_the_case_texts(case):
    records = run_batchscope(requests(case), CONFIGS[case], EOS, MAX_MODEL_LEN)
    steps = run_vllm(workload_from_trace(records), CountingScheduler)
    assert compare(records, steps) == [], first_difference(records, steps)  # log_stats changes no decision
    totals = CountingScheduler.last.totals
    hits, queries = COUNTERS[case]
    assert (totals["hits"], totals["queries"]) == (hits, queries)
    assert totals["requests"] == len(requests(case))
    assert (totals["preempted_queries"], totals["preempted_hits"]) == (0, 0)
    # Batchscope's figures, from its step records: each admission's hit tokens and known (prompt) tokens
    admitted = {rid for st in records[1:-1] for rid in st["admitted"]}
    bs_hits = sum(n for st in records[1:-1] for n in st["num_prefix_hit_tokens"].values())
    bs_queries = sum(r["num_prompt_tokens"] for r in records[0]["requests"] if r["request_id"] in admitted)
    assert (bs_hits, bs_queries) == (hits, queries)


def test_vllms_steps_show_the_hand_computed_values():
    """The headline values of the case texts, read from vLLM's own step records."""
    _, e01 = run_both(requests("e01"), CONFIGS["e01"], EOS, MAX_MODEL_LEN)
    assert e01[2]["block_tables"] == {"X": [5, 1, 0, 4]} and e01[2]["evicted"] == [1, 0, 4]
    assert e01[2]["cached_free_blocks"] == [3, 2]
    assert e01[3]["num_prefix_hit_tokens"] == {"A2": 8} and e01[3]["block_tables"] == {"A2": [2, 3, 4, 0]}
    assert e01[3]["evicted"] == [0] and e01[3]["cached_free_blocks"] == [1, 5]
    _, e02a = run_both(requests("e02a"), CONFIGS["e02a"], EOS, MAX_MODEL_LEN)
    assert e02a[3]["num_prefix_hit_tokens"] == {"B": 4} and e02a[3]["block_tables"] == {"B": [0, 2]}
    assert e02a[6]["num_prefix_hit_tokens"] == {"C": 8} and e02a[6]["block_tables"] == {"C": [0, 1, 3]}
    assert e02a[6]["scheduled"] == [{"request_id": "C", "num_tokens": 1, "num_computed_tokens": 8}]
    _, e02b = run_both(requests("e02b"), CONFIGS["e02b"], EOS, MAX_MODEL_LEN)
    assert e02b[1]["admitted"] == ["F"] and e02b[1]["num_prefix_hit_tokens"] == {"F": 8}
    assert e02b[1]["ref_counts"] == {"0": 2, "1": 2} and e02b[1]["num_used_blocks"] == 4
