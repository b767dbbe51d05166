"""Every shared case (../shared/cases), in continuous mode, under both admission rules and with prefix caching on
and off: Batchscope's scheduler and vLLM 0.33.0's agree on every step.

The cases' prompts (SmolLM2 token ids, chat template applied) and their real outputs are in ``cases.json``,
recorded on the default model by ``scripts/record-case-tokens.py``; the output ids the case texts give are
authoritative and checked here first. Each case runs with the flags its text gives (c02: the control run with a
37-token budget; c08: runs a-c; c01: also the 64-token control).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay import run_both

from batchscope_vllm.compare import compare, first_difference

FIXTURE = json.loads((Path(__file__).resolve().parent / "cases.json").read_text())
RULES = {
    "full-prompt+caching": {"reserve_full_prompt": True, "enable_prefix_caching": True},  # vLLM's defaults
    "full-prompt": {"reserve_full_prompt": True, "enable_prefix_caching": False},
    "first-chunk+caching": {"reserve_full_prompt": False, "enable_prefix_caching": True},
    "first-chunk": {"reserve_full_prompt": False, "enable_prefix_caching": False},
}
RUNS = [(case, run) for case, c in FIXTURE["cases"].items() for run in c["runs"]]

MOON = [33, 30, 378, 8872, 314, 253, 18146, 1248, 338, 21837, 2591, 30]
COMPILER = [49, 25316, 314, 253, 3197, 1763, 338, 18419, 1205, 2909, 618, 3746, 2909, 30, 657, 506]
CAT = [49, 2644, 30, 2]
HAIKU = [504, 6147, 282, 260, 3426, 28, 253, 13879, 6122, 28, 198, 49, 9154, 303, 5082, 282]
# output ids as the case texts give them (prefixes where the text gives a prefix)
EXPECTED = {
    "c01": {"A": MOON[:8], "B": COMPILER[:8]},
    "c02": {"B": [282, 260, 970, 260, 1205, 3323, 41993, 357]},
    "c07": {"X": HAIKU, "Y": HAIKU, "Z": HAIKU},
    "c09": {"A": COMPILER, "B": MOON},
    "c10": {"R0": CAT, "L": MOON},
    "c12": {"g_top_p": COMPILER, "k_one": COMPILER, "greedy": COMPILER, "p_zero": COMPILER},
    "c13": {"cat": CAT},
    "d03": {"A": CAT, "B": MOON[:6]},
    "d06": {"CAT": CAT, "FR": [504, 3575, 282, 4649, 314, 7042, 30, 2], "SKY": [282, 260, 970]},
}


def test_recorded_outputs_are_the_case_texts():
    for case, expected in EXPECTED.items():
        outputs = {r["request_id"]: r["output_token_ids"] for r in FIXTURE["cases"][case]["requests"]}
        for rid, ids in expected.items():
            assert outputs[rid][: len(ids)] == ids, (case, rid)


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("case,run", RUNS, ids=[f"{c}-{r}" for c, r in RUNS])
def test_case_agrees_with_vllm(case, run, rules):
    spec = FIXTURE["cases"][case]
    config = {"batching": "continuous", **spec["runs"][run], **RULES[rules]}
    records, steps = run_both(spec["requests"], config, FIXTURE["eos_token_ids"], FIXTURE["max_model_len"])
    assert compare(records, steps) == [], first_difference(records, steps)


def test_c01_both_behaviours_of_the_case_text():
    """vLLM's default waits (20 steps, 0 preemptions, B first scheduled at step 10); the first-chunk rule without
    caching thrashes (B preempted twice, 26 recomputed tokens); both agree with vLLM (above)."""
    spec = FIXTURE["cases"]["c01"]
    eos, max_len = FIXTURE["eos_token_ids"], FIXTURE["max_model_len"]
    config = {"batching": "continuous", **spec["runs"]["a"]}
    records, _ = run_both(spec["requests"], {**config, **RULES["full-prompt"]}, eos, max_len)
    steps, summary = records[1:-1], {r["request_id"]: r for r in records[-1]["requests"]}
    first_b = min(st["step"] for st in steps for s in st["scheduled"] if s["request_id"] == "B")
    assert (len(steps), sum(len(st["preempted"]) for st in steps), first_b) == (20, 0, 10)
    records, _ = run_both(spec["requests"], {**config, **RULES["first-chunk"]}, eos, max_len)
    b = next(r for r in records[-1]["requests"] if r["request_id"] == "B")
    assert (len(records) - 2, b["num_preemptions"], b["num_recomputed_tokens"]) == (20, 2, 26)
    assert summary["A"]["num_preemptions"] == 0


def test_c07_identical_prompts_share_blocks_and_release_them():
    """Prefix caching on: Y, admitted right after X in step 0, finds X's 9 full blocks (36 of its 38 tokens) and Z
    too; the shared blocks show counts 2-3."""
    spec = FIXTURE["cases"]["c07"]
    config = {"batching": "continuous", **spec["runs"]["a"], **RULES["full-prompt+caching"]}
    records, _ = run_both(spec["requests"], config, FIXTURE["eos_token_ids"], FIXTURE["max_model_len"])
    steps = records[1:-1]
    assert steps[0]["num_prefix_hit_tokens"] == {"X": 0, "Y": 36}
    assert steps[1]["num_prefix_hit_tokens"] == {"Z": 36}
    assert max(n for st in steps for n in st["kv"]["ref_counts"].values()) == 3
    last = steps[-1]  # Z alone holds blocks (X's and Y's shared ones), and frees them at the end of the step
    assert last["finished"] == [{"request_id": "Z", "reason": "length"}]
    assert last["kv"]["num_used_blocks"] == len(last["kv"]["block_tables"]["Z"]) and not last["kv"]["ref_counts"]
