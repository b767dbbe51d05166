"""What the narration says about the cache: a preempted request's later chunks count against the tokens its
comeback's admission said it recomputes (the prefix cache held the rest), the evictions a step's allocations made
(``kv.evicted``, in the pool's unit), and "an 8-token chunk". Expected numbers come from the shipped vllm-vs-sglang
traces' records and the scenario worked by hand (see tests/visuals/test_vllm_vs_sglang.py), never from the
narration code."""

from __future__ import annotations

import copy

import pytest
from conftest import RECORDED

from batchscope.explain.narration import narrate
from batchscope.explain.words import article
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


def view(policy: str) -> TraceView:
    return TraceView(trace.read(RECORDED / f"vllm-vs-sglang-{policy}.jsonl"))


def _chunks(v: TraceView, rid: str, steps: range) -> list[tuple[int, int]]:
    return [
        (s["num_computed_tokens"], s["num_tokens"])
        for k in steps
        for s in v.steps[k]["scheduled"]
        if s["request_id"] == rid
    ]


def test_vllm_comeback_chunks_count_against_the_tokens_the_cache_did_not_hold():
    """vLLM: C (preempted with 87 tokens of K/V) comes back at step 65 with 48 tokens (6 blocks of 8) in the prefix
    cache: 39 to recompute and 1 never computed (its last sampled token). Step 65 computes 32 of them (48→80), so
    the 8-token chunk of step 66 recomputes the last 39 - 32 = 7 and computes 1 for the first time."""
    v = view("continuous")
    a = next(a for a in v.steps[65]["decisions"]["admissions"] if a["request_id"] == "C")
    hand = (a["num_prefix_hit_tokens"], a["num_recompute_tokens"], a["num_new_tokens"])
    assert a["resumed"] and hand == (48, 39, 1) and _chunks(v, "C", range(65, 67)) == [(48, 32), (80, 8)]
    assert 32 + 7 == 39
    text = narrate(v, 66)
    assert (
        "C continues after its preemption: an 8-token chunk (80→88) that recomputes the last 7 of the 39 dropped "
        "tokens the prefix cache did not hold and computes 1 token for the first time and samples its next token"
        in text
    )
    assert "of the 87" not in text


def test_sglang_comeback_chunks_count_against_the_tokens_the_radix_cache_did_not_hold():
    """SGLang: C, retracted with 92 tokens of K/V, comes back at step 66 with its 43-token prompt in the radix cache:
    49 to recompute, 1 new. Chunks 43→47 (4), 47→79 (32: 4 + 32 = 36 of 49, 13 to go), 79→93 (the last 13 + 1)."""
    v = view("sglang")
    a = next(a for a in v.steps[66]["decisions"]["admissions"] if a["request_id"] == "C")
    assert (a["num_prefix_hit_tokens"], a["num_recompute_tokens"], a["num_new_tokens"]) == (43, 49, 1)
    assert _chunks(v, "C", range(66, 69)) == [(43, 4), (47, 32), (79, 14)]
    assert 49 - 4 - 32 == 13 and 13 + 1 == 14
    assert (
        "C continues after its retraction: a 32-token chunk (47→79) that recomputes 32 more of the 49 dropped tokens "
        "the radix cache did not hold (13 still to recompute)." in narrate(v, 67)
    )
    assert (
        "C continues after its retraction: a 14-token chunk (79→93) that recomputes the last 13 of the 49 dropped "
        "tokens the radix cache did not hold and computes 1 token for the first time and samples its next token."
        in narrate(v, 68)
    )


def test_a_comeback_without_a_cache_hit_counts_against_all_it_dropped():
    """vLLM: D comes back at step 66 with nothing cached: 51 to recompute; 24 at step 66, the last 27 at step 67."""
    v = view("continuous")
    a = next(a for a in v.steps[66]["decisions"]["admissions"] if a["request_id"] == "D")
    assert (a["num_prefix_hit_tokens"], a["num_recompute_tokens"]) == (0, 51)
    assert _chunks(v, "D", range(66, 68)) == [(0, 24), (24, 28)] and 24 + 27 == 51
    assert (
        "D continues after its preemption: a 28-token chunk (24→52) that recomputes the last 27 of the 51 tokens "
        "whose K/V the preemption dropped and computes 1 token for the first time" in narrate(v, 67)
    )


@pytest.mark.parametrize(
    ("policy", "k", "sentence"),
    [
        (
            "sglang",
            66,
            "To make room, 63 cached token slots were evicted from the radix cache (whole unlocked leaves, least "
            "recently used first).",
        ),
        ("sglang", 73, "To make room, 11 cached token slots were evicted from the radix cache"),
        ("continuous", 64, "To make room, 1 cached KV block was evicted from the prefix cache (least recently used"),
    ],
)
def test_a_step_that_evicts_cached_entries_says_so_in_the_pool_unit(policy, k, sentence):
    """The step's ``kv.evicted`` entries. vLLM at step 64 gives B's decode block 17, the front of the cached free
    blocks, and evicts exactly what it hands out. SGLang evicts whole unlocked leaves of its radix tree (as its
    RadixCache does; tests_sglang proves the engine's eviction against it), so it may free more than the step needs:
    at step 66 it admits D (28 slots) and C's first chunk (4), 32 slots, with only 24 free, and evicts a 63-slot
    leaf that the finishes of A and B left in the cache; the step's allocation takes from what it freed."""
    v = view(policy)
    kv, before = v.steps[k]["kv"], v.steps[k - 1]["kv"]
    allocated = {b for blocks in kv["allocated"].values() for b in blocks}
    assert len(kv["evicted"]) == int(sentence.split()[3])
    if policy == "continuous":
        assert set(kv["evicted"]) <= allocated
        assert kv["evicted"] == [17] and before["cached_free_blocks"][0] == 17
    else:
        free = before["num_blocks"] - before["num_used_blocks"] - len(before["cached_free_blocks"])
        assert len(allocated) > free and allocated & set(kv["evicted"])
    assert sentence in narrate(v, k)


def test_no_eviction_no_sentence_and_a_recorded_policy_is_named():
    """SGLang's step 65 evicts nothing; an SGLang header that records ``radix_eviction_policy`` lfu says so."""
    v = view("sglang")
    assert v.steps[65]["kv"]["evicted"] == [] and "evicted" not in narrate(v, 65)
    records = copy.deepcopy(trace.read(RECORDED / "vllm-vs-sglang-sglang.jsonl"))
    records[0]["config"]["radix_eviction_policy"] = "lfu"
    assert "evicted from the radix cache (whole unlocked leaves, least frequently used first)." in narrate(
        TraceView(records), 66
    )


@pytest.mark.parametrize(
    ("n", "word"),
    [
        (1, "a"),
        (7, "a"),
        (8, "an"),
        (11, "an"),
        (18, "an"),
        (17, "a"),
        (80, "an"),
        (89, "an"),
        (90, "a"),
        (100, "a"),
        (118, "a"),
        (180, "a"),
        (800, "an"),
        (8000, "an"),
        (11000, "an"),
        (18000, "an"),
        (1100, "a"),
    ],
)
def test_the_article_follows_the_number_read_aloud(n, word):
    """eight, eleven, eighteen, eighty..., eight hundred, eleven thousand: "an"; one hundred eighteen: "a"."""
    assert article(n) == word
