"""The shipped continuous traces, replayed through vLLM 0.33.0's real scheduler, agree on every step: as recorded
(with the config in their header: vLLM's defaults unless the scenario says otherwise), and re-run by Batchscope's
scheduler with their recorded tokens under both admission rules with prefix caching on and off. Also: the driver's
and the comparison's own behaviour on small hand-made workloads. Run in vLLM's venv:
``.venv-vllm/bin/python -m pytest tests_vllm``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from replay import run_both, shipped_workload

from batchscope_vllm.compare import SYNTHETIC_TOKEN_BASE, compare, first_difference, workload_from_trace
from batchscope_vllm.driver import main, run_vllm

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "batchscope" / "assets" / "traces").glob("*-continuous.jsonl"))


def read_trace(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


RULES = {
    "full-prompt+caching": {"reserve_full_prompt": True, "enable_prefix_caching": True},
    "full-prompt": {"reserve_full_prompt": True, "enable_prefix_caching": False},
    "first-chunk+caching": {"reserve_full_prompt": False, "enable_prefix_caching": True},
    "first-chunk": {"reserve_full_prompt": False, "enable_prefix_caching": False},
}


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_shipped_trace_agrees_with_vllm(path):
    records = read_trace(path)
    steps = run_vllm(workload_from_trace(records))
    assert compare(records, steps) == [], first_difference(records, steps)
    assert first_difference(records, steps) == f"agrees on all {records[-2]['step'] + 1} steps"  # idle steps too


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_shipped_scenario_agrees_with_vllm_under_every_rule(path, rules):
    """The trace's requests and recorded tokens, re-run by Batchscope's scheduler under ``rules``, against vLLM."""
    records, steps = run_both(*shipped_workload(read_trace(path), RULES[rules]))
    assert compare(records, steps) == [], first_difference(records, steps)


def test_there_are_continuous_traces_with_prompt_ids():
    assert {p.name for p in TRACES} >= {
        f"{name}-continuous.jsonl" for name in ("seed-abcd", "preemption", "sixteen", "shared-prefix", "priority")
    }
    assert all("prompt_token_ids" in r for p in TRACES for r in read_trace(p)[0]["requests"])


def config(**overrides) -> dict:
    base = {
        "max_num_seqs": 2,
        "max_num_batched_tokens": 8,
        "block_size": 4,
        "num_kv_blocks": 8,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": False,
        "reserve_full_prompt": False,
        "scheduling_policy": "fcfs",
        "max_model_len": 64,
    }
    return {**base, **overrides}


def test_empty_steps_before_the_first_arrival_and_hand_computed_schedule():
    workload = {
        "config": config(),
        "eos_token_ids": [2],
        "requests": [
            {
                "request_id": "A",
                "prompt_token_ids": list(range(10, 20)),
                "max_tokens": 3,
                "ignore_eos": False,
                "arrival_step": 2,
            }
        ],
        "sampled": {"A": [7, 2, 7]},
    }
    steps = run_vllm(workload)
    # 2 empty steps; 10-token prompt in chunks of 8 + 2 (samples 7); decode samples EOS 2 -> stop.
    assert [
        [(s["request_id"], s["num_tokens"], s["num_computed_tokens"]) for s in st["scheduled"]] for st in steps
    ] == [[], [], [("A", 8, 0)], [("A", 2, 8)], [("A", 1, 10)]]
    assert steps[2]["admitted"] == ["A"] and steps[2]["num_prefix_hit_tokens"] == {"A": 0}
    assert steps[2]["block_tables"] == {"A": [0, 1]} and steps[2]["num_used_blocks"] == 2
    assert steps[3]["block_tables"] == {"A": [0, 1, 2]}
    assert steps[4]["finished"] == [{"request_id": "A", "reason": "stop"}]
    assert [st["step"] for st in steps] == [0, 1, 2, 3, 4]


def test_ignore_eos_runs_to_max_tokens_and_exhausted_samples_abort():
    reqs = [
        {"request_id": "A", "prompt_token_ids": [5], "max_tokens": 3, "ignore_eos": True, "arrival_step": 0},
        {"request_id": "B", "prompt_token_ids": [6], "max_tokens": 3, "ignore_eos": False, "arrival_step": 0},
    ]
    steps = run_vllm(
        {"config": config(), "eos_token_ids": [2], "requests": reqs, "sampled": {"A": [2, 2, 2], "B": [7]}}
    )
    finished = [(f["request_id"], f["reason"], st["step"]) for st in steps for f in st["finished"]]
    assert finished == [("B", "abort", 1), ("A", "length", 2)]


def test_preemption_is_recorded_in_order_and_the_victim_resumes():
    # Two requests on a 3-block pool of 2-token blocks: the newest (B) is preempted when A needs a block.
    reqs = [
        {"request_id": r, "prompt_token_ids": [5, 6], "max_tokens": 4, "ignore_eos": True, "arrival_step": 0}
        for r in "AB"
    ]
    steps = run_vllm(
        {
            "config": config(block_size=2, num_kv_blocks=3),
            "eos_token_ids": [],
            "requests": reqs,
            "sampled": {"A": [7] * 4, "B": [7] * 4},
        }
    )
    preempted = [(st["step"], st["preempted"]) for st in steps if st["preempted"]]
    assert preempted and preempted[0][1] == ["B"]
    resumed = next(st for st in steps if st["step"] > preempted[0][0] and "B" in st["admitted"])
    assert resumed["scheduled"][-1]["num_computed_tokens"] == 0  # recompute from scratch
    assert all(st["num_used_blocks"] <= 3 for st in steps)


def test_workload_from_trace_synthesizes_prompts_and_infers_eos():
    """An old trace (no prompt ids, no EOS ids, no new config fields) still replays, as it was recorded."""
    records = read_trace(ROOT / "batchscope" / "assets" / "traces" / "sixteen-continuous.jsonl")
    for r in records[0]["requests"]:
        del r["prompt_token_ids"]
    for key in ("eos_token_ids", "max_model_len"):
        del records[0][key]
    for key in ("enable_prefix_caching", "reserve_full_prompt", "scheduling_policy"):
        del records[0]["config"][key]
    workload = workload_from_trace(records)
    prompts = [r["prompt_token_ids"] for r in workload["requests"]]
    flat = [t for p in prompts for t in p]
    assert len(flat) == len(set(flat)) and min(flat) == SYNTHETIC_TOKEN_BASE
    assert [len(p) for p in prompts] == [r["num_prompt_tokens"] for r in records[0]["requests"]]
    assert workload["eos_token_ids"] == [2]
    assert workload["config"]["enable_prefix_caching"] is False
    assert workload["config"]["scheduling_policy"] == "fcfs"


def test_compare_reports_the_first_differing_step():
    records = read_trace(ROOT / "batchscope" / "assets" / "traces" / "seed-abcd-continuous.jsonl")
    steps = run_vllm(workload_from_trace(records))
    changed = copy.deepcopy(records)
    changed[3]["scheduled"][0]["num_tokens"] += 1  # step 2
    changed[4]["scheduled"].reverse()  # step 3
    changed[5]["kv"]["block_tables"]["A"].append(99)  # step 4
    changed[6]["kv"]["num_used_blocks"] += 1  # step 5
    diffs = compare(changed, steps)
    assert diffs[0].startswith("step 2: scheduled differs: B: Batchscope 2 tokens from 6, vLLM 1 tokens from 6")
    assert diffs[1].startswith("step 3: batch order differs: Batchscope ['D', ")
    assert diffs[2] == "step 4: blocks per request differs: A: Batchscope 11, vLLM 10"
    assert diffs[3].startswith("step 5: num_used_blocks differs")
    assert first_difference(records, steps[:-1]).startswith("step 13: only Batchscope runs step 13")


def test_cli_prints_json_lines(tmp_path, capsys):
    """``python -m batchscope_vllm.driver w.json`` runs ``main`` (called in-process: a new process would spend
    ~10 s importing vLLM again)."""
    workload = {
        "config": config(),
        "eos_token_ids": [2],
        "requests": [
            {"request_id": "A", "prompt_token_ids": [5, 6], "max_tokens": 1, "ignore_eos": False, "arrival_step": 0}
        ],
        "sampled": {"A": [7]},
    }
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    assert main([str(path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["finished"] for line in lines] == [[{"request_id": "A", "reason": "length"}]]
    assert main([]) == 2


def test_prefix_cache_hit_counts_full_blocks_and_shared_blocks_count_once():
    prompt = list(range(10, 19))  # 9 tokens = 2 full blocks of 4 + 1
    reqs = [
        {"request_id": "A", "prompt_token_ids": prompt, "max_tokens": 3, "ignore_eos": True, "arrival_step": 0},
        {"request_id": "B", "prompt_token_ids": prompt, "max_tokens": 2, "ignore_eos": True, "arrival_step": 1},
    ]
    steps = run_vllm(
        {
            "config": config(max_num_batched_tokens=16, enable_prefix_caching=True),
            "eos_token_ids": [],
            "requests": reqs,
            "sampled": {"A": [7] * 3, "B": [7] * 2},
        }
    )
    assert steps[1]["num_prefix_hit_tokens"] == {"B": 8}
    assert steps[1]["scheduled"][-1] == {"request_id": "B", "num_tokens": 1, "num_computed_tokens": 8}
    tables = steps[1]["block_tables"]
    assert tables["A"][:2] == tables["B"][:2] and tables["A"][2] != tables["B"][2]
    assert steps[1]["num_used_blocks"] == 4


def test_priority_policy_admits_the_lowest_priority_value_first():
    reqs = [
        {
            "request_id": r,
            "prompt_token_ids": [5],
            "max_tokens": 1,
            "ignore_eos": True,
            "arrival_step": 0,
            "priority": p,
        }
        for r, p in [("A", 2), ("B", 0), ("C", 1)]
    ]
    steps = run_vllm(
        {
            "config": config(max_num_seqs=1, scheduling_policy="priority"),
            "eos_token_ids": [],
            "requests": reqs,
            "sampled": {r: [7] for r in "ABC"},
        }
    )
    assert [st["admitted"] for st in steps] == [["B"], ["C"], ["A"]]
