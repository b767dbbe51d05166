"""Shared case e02 (../shared/cases/README.md): a full-prompt cache hit still computes its last token; hits under
the full-prompt admission rule.

(a) One slot, 16 blocks: A = CAP[:8] (exactly 2 blocks) runs first; B, the same 8 tokens, may hit at most
(8 - 1) // 4 = 1 block (a request must compute at least one token to sample: the hit never covers the last known
token, and only whole blocks are hit), so it hits 4, not 8, and computes 4; C = CAP[:9] hits (9 - 1) // 4 = 2 blocks
and computes 1 token, a prefill that samples. Hit rate (0 + 4 + 8) / (8 + 8 + 9) = 12/25.
(b) Two slots, 5 blocks: F = CAP[:12] arrives at step 1 while E = CAP[:8] decodes and holds 3 blocks; F's hit
[0, 1] is held by E (not free), so F misses 1 block, 1 <= 2 free, and is admitted (full-prompt rule net of the
hit); without the hit it would need 3 > 2 and wait. The schedules need no model (a model-free runner samples every
token); the outputs the case text gives are checked on SmolLM2.
The rule in general: tests/engine/test_prefix_cache_eviction_and_hits.py.
"""

from __future__ import annotations

import pytest
from clikit import metrics_cli
from conftest import CASES, case_workload, hf_greedy, step_records
from fakes import EOS, FakeRunner

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.llm import generate_trace
from batchscope.inputs.workload import read_workload, to_requests
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize

# the case's flags: --block-size 4 --max-num-batched-tokens 64, prefix caching and the full-prompt rule on
BASE = dict(block_size=4, max_num_batched_tokens=64, enable_prefix_caching=True, reserve_full_prompt=True)
CONFIG_A = dict(BASE, max_num_seqs=1, num_kv_blocks=16)
CONFIG_B = dict(BASE, max_num_seqs=2, num_kv_blocks=5)
CONFIGS = {"e02a": CONFIG_A, "e02b": CONFIG_B}


def run(name: str, **overrides) -> list[dict]:
    requests = to_requests(read_workload(CASES / f"{name}.jsonl"), tokenizer=None)
    records = LLMEngine(FakeRunner(), EngineConfig(**{**CONFIGS[name], **overrides}), eos_token_ids={EOS}).run(requests)
    trace.validate_records(records)
    return records


def scheduled(st: dict) -> list[tuple]:
    return [(s["request_id"], s["kind"], s["num_tokens"], s["num_computed_tokens"]) for s in st["scheduled"]]


def sampled_ids(st: dict) -> list[str]:
    return [s["request_id"] for s in st["sampled"]]


def check_e02a(steps: list[dict]) -> None:
    """The hand-computed schedule of (a), step by step (the case text's "Right behaviour")."""
    assert [st["admitted"] for st in steps] == [["A"], [], [], ["B"], [], [], ["C"], []]
    # A: steps 0-2, table [0, 1, 2]; frees 2 (2 tokens: no hash) to the front, 1 and 0 (hashed) to the back
    assert [st["kv"]["block_tables"] for st in steps[:3]] == [{"A": [0, 1]}, {"A": [0, 1, 2]}, {"A": [0, 1, 2]}]
    # B: 8 tokens known, a hit may cover 7: one block (4 tokens), not 2; it computes 4 at 4, in a new block 2 (block
    # 1 holds the same tokens but is past the limit): table [0, 2]
    assert steps[3]["num_prefix_hit_tokens"] == {"B": 4}
    assert scheduled(steps[3]) == [("B", "prefill", 4, 4)] and sampled_ids(steps[3]) == ["B"]
    assert steps[3]["kv"]["allocated"] == {"B": [2]} and steps[3]["kv"]["block_tables"] == {"B": [0, 2]}
    assert steps[3]["kv"]["cached_free_blocks"] == [1]  # A's block 1, not hit, still cached
    # C: 9 tokens, a hit may cover 8: blocks [0, 1] (block 1 the older of the two holding CAP[:8]; B's block 2 stays
    # cached and free); computes 1 token at 8, a prefill that samples, in a new block 3: table [0, 1, 3]
    assert steps[6]["num_prefix_hit_tokens"] == {"C": 8}
    assert scheduled(steps[6]) == [("C", "prefill", 1, 8)] and sampled_ids(steps[6]) == ["C"]
    assert steps[6]["kv"]["allocated"] == {"C": [3]} and steps[6]["kv"]["block_tables"] == {"C": [0, 1, 3]}
    assert steps[6]["kv"]["cached_free_blocks"] == [2]
    for st in steps:  # a hit is whole blocks and never the whole known sequence: every admission computes >= 1
        for rid, hit in st["num_prefix_hit_tokens"].items():
            first = next(s for s in st["scheduled"] if s["request_id"] == rid)
            assert hit % 4 == 0 and first["num_computed_tokens"] == hit and first["num_tokens"] >= 1


def check_e02b(steps: list[dict]) -> None:
    """The hand-computed step 1 of (b): E decodes at 8 and takes block 2 (3 used, 2 free); F is admitted with its
    hit held by E: computes 4 at 8 in one new block, counts {0: 2, 1: 2}, 4 used (shared blocks counted once)."""
    one = steps[1]
    assert one["admitted"] == ["F"] and one["num_prefix_hit_tokens"] == {"F": 8}
    assert scheduled(one) == [("E", "decode", 1, 8), ("F", "prefill", 4, 8)]
    assert one["kv"]["allocated"] == {"E": [2], "F": [3]}
    assert one["kv"]["block_tables"] == {"E": [0, 1, 2], "F": [0, 1, 3]}
    assert one["kv"]["ref_counts"] == {"0": 2, "1": 2} and one["kv"]["num_used_blocks"] == 4
    assert one["decisions"]["admissions"] == [
        {
            "request_id": "F",
            "resumed": False,
            "num_prefix_hit_tokens": 8,
            "num_recompute_tokens": 0,
            "num_new_tokens": 4,
        }
    ]
    assert "head" not in one["decisions"]  # nobody waits
    assert one["finished"] == [{"request_id": "F", "reason": "length"}]


def test_e02a_a_full_prompt_hit_leaves_the_last_token_to_compute():
    check_e02a(step_records(run("e02a")))


def test_e02a_hit_rate_is_12_of_25(capsys, tmp_path):
    records = run("e02a")
    s = summarize(records)
    assert (s["prefix_cache_queries"], s["prefix_cache_hits"]) == (25, 12)
    assert s["prefix_cache_hit_rate"] == pytest.approx(12 / 25)
    path = tmp_path / "e02a.jsonl"
    trace.write(records, path)
    _, rows = metrics_cli(capsys, path)
    assert rows["prefix_cache_queries"][1] == ["25"] and rows["prefix_cache_hits"][1] == ["12"]
    assert rows["prefix_cache_hit_rate"] == ("fraction", ["0.48"])


def test_e02b_the_admission_counts_the_hit_held_by_a_running_request():
    records = run("e02b")
    check_e02b(step_records(records))
    s = summarize(records)
    assert (s["prefix_cache_queries"], s["prefix_cache_hits"]) == (20, 8)


@pytest.mark.parametrize("caching", [True, False])
@pytest.mark.parametrize("num_kv_blocks", [4, 5, 6, 7])
def test_e02b_what_the_hit_changes_in_the_full_prompt_rule(num_kv_blocks, caching):
    """At step 1 E holds 3 blocks, so N - 3 are free. F's 12 tokens take 3 blocks; with caching its hit [0, 1] is
    held by E, so it misses 3 - 2 = 1; without, 3. Admitted at step 1 iff that fits the free blocks; otherwise it
    waits (head limit ``kv_blocks_full_prompt``) until E finishes at step 5 and is admitted at step 6 (the case's
    5 blocks without the hit: 3 > 2, F would wait)."""
    steps = step_records(run("e02b", num_kv_blocks=num_kv_blocks, enable_prefix_caching=caching))
    need, free = (1 if caching else 3), num_kv_blocks - 3
    admitted_at = next(st["step"] for st in steps if "F" in st["admitted"])
    assert admitted_at == (1 if need <= free else 6)
    if admitted_at == 6:
        assert steps[1]["decisions"]["head"] == {
            "request_id": "F",
            "limit": "kv_blocks_full_prompt",
            "need": need,
            "left": free,
            "order": "arrival",
        }
        assert steps[6]["num_prefix_hit_tokens"] == {"F": 0}  # only without caching: with it, F fits at step 1


@pytest.mark.real_model
def test_on_the_model_the_schedules_are_the_same_and_the_outputs_are_the_case_texts(smollm):
    """On SmolLM2: the same schedules, and A = B = [3575, 282, 4649] (" capital of France"), C [282, 4649], F [7268]
    (" Rome"): B, computing positions 4-7 over A's block 0, samples A's first token; C, computing position 8 over
    A's blocks 0 and 1, samples A's second. E, which the text does not give, is its reference."""
    outputs = {}
    for name, check in (("e02a", check_e02a), ("e02b", check_e02b)):
        records = generate_trace(smollm, case_workload(name), EngineConfig(**CONFIGS[name]))
        trace.validate_records(records)
        check(step_records(records))
        outputs.update({r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]})
    assert outputs["A"] == outputs["B"] == [3575, 282, 4649]
    assert outputs["C"] == [282, 4649] and outputs["F"] == [7268]
    e = next(s for s in case_workload("e02b") if s["request_id"] == "E")
    assert outputs["E"] == hf_greedy(smollm.model, e["prompt_token_ids"], e["max_tokens"])
