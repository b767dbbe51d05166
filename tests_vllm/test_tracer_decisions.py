"""The vLLM tracer's ``decisions`` equal Batchscope's own, step by step: the same requests and sampled tokens run
through Batchscope's scheduler (``replay.run_batchscope``) and through vLLM 0.33.0's scheduler traced by
``batchscope_vllm.tracer.TracingScheduler`` (``run_vllm(..., trace=path)``), and every field both write is compared:
each admission (prefix-hit, recompute and new tokens, resumed), each preemption (victim, rule, K/V tokens and blocks
dropped, requester, blocks needed, free blocks), the head of the waiting queue (limit, need, left, order), each
scheduled entry's ``recompute`` flag and the summary's ``num_preemptions``, ``num_dropped_tokens`` and
``num_recomputed_tokens``.

On: the shipped continuous scenarios under both admission rules with prefix caching on and off; hypothesis
workloads (``test_vllm_differential.cases``) with pools where only the largest request fits alone (preemption),
with chunked prefill off, and under the priority policy. In these model-free configs (no KV connector, no pause, no
``long_prefill_token_threshold``, no prefill deferral) the tracer knows every number, so the records must be equal
as dicts: a field only one side writes is a difference too. Where the tracer does leave something out (a
preemption outside ``schedule()``, a paused scheduler) a test below says so explicitly.

One rule difference found (chunked prefill off, a preempted request resuming with more tokens to recompute than the
budget left in the step) is pinned by ``test_known_difference_chunked_prefill_off_resume`` instead of hidden.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from replay import run_batchscope, shipped_workload
from test_tracer import schema_problems
from test_vllm_differential import EOS, OTHER, Case, blocks_for, cases
from vllm.v1.core.sched.interface import PauseState
from vllm.v1.outputs import ModelRunnerOutput

from batchscope_vllm.compare import first_difference, workload_from_trace
from batchscope_vllm.driver import _block_hasher, _make_request, main, make_scheduler, run_vllm
from batchscope_vllm.tracer import TracingScheduler

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "batchscope" / "assets" / "traces").glob("*-continuous.jsonl"))
RULES = {
    "full-prompt+caching": {"reserve_full_prompt": True, "enable_prefix_caching": True},
    "full-prompt": {"reserve_full_prompt": True, "enable_prefix_caching": False},
    "first-chunk+caching": {"reserve_full_prompt": False, "enable_prefix_caching": True},
    "first-chunk": {"reserve_full_prompt": False, "enable_prefix_caching": False},
}
NOTHING = {"admissions": [], "preemptions": []}  # an idle step (Batchscope skips it; vLLM's driver runs it)
SUMMARY_FIELDS = ("num_preemptions", "num_dropped_tokens", "num_recomputed_tokens")


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def vllm_trace(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the driver's step records, the tracer's trace) of vLLM's run of Batchscope's run ``records``: the same
    requests, arrivals and sampled tokens (``workload_from_trace``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        steps = run_vllm(workload_from_trace(records), trace=path)
        return steps, read(path)


def _differences(where: str, bs: Any, vl: Any) -> list[str]:
    """Field by field: dicts key by key (a key on one side only is a difference), lists item by item."""
    if isinstance(bs, dict) and isinstance(vl, dict):
        out = []
        for key in list(bs) + [k for k in vl if k not in bs]:
            if key not in vl:
                out.append(f"{where}.{key}: only in Batchscope ({bs[key]!r})")
            elif key not in bs:
                out.append(f"{where}.{key}: only in vLLM ({vl[key]!r})")
            else:
                out += _differences(f"{where}.{key}", bs[key], vl[key])
        return out
    if isinstance(bs, list) and isinstance(vl, list):
        if len(bs) != len(vl):
            return [f"{where}: Batchscope {bs!r}, vLLM {vl!r}"]
        return [d for i, (b, v) in enumerate(zip(bs, vl)) for d in _differences(f"{where}[{i}]", b, v)]
    return [] if bs == vl and type(bs) is type(vl) else [f"{where}: Batchscope {bs!r}, vLLM {vl!r}"]


def decision_differences(bs: list[dict], vl: list[dict]) -> list[str]:
    """Every difference between Batchscope's trace ``bs`` and the tracer's ``vl`` in ``decisions``, the
    ``recompute`` flags and the summary's preemption counts, step by step on the step clock (vLLM's driver runs the
    idle steps Batchscope skips: there the tracer must have decided nothing)."""
    by_step = {r["step"]: r for r in bs[1:-1]}
    diffs = []
    for v in vl[1:-1]:
        b = by_step.pop(v["step"], None)
        where = f"step {v['step']}"
        diffs += _differences(f"{where}: decisions", b["decisions"] if b else NOTHING, v.get("decisions"))
        flags = [(s["request_id"], s["recompute"]) for s in (b["scheduled"] if b else [])]
        diffs += _differences(f"{where}: recompute", flags, [(s["request_id"], s["recompute"]) for s in v["scheduled"]])
    diffs += [f"step {k}: only in Batchscope" for k in by_step]
    mine = {r["request_id"]: r for r in vl[-1]["requests"]}
    for r in bs[-1]["requests"]:
        theirs = {f: r[f] for f in SUMMARY_FIELDS}
        diffs += _differences(f"summary {r['request_id']}", theirs, {f: mine[r["request_id"]].get(f) for f in theirs})
    return diffs


def check_case(case: Case, tally: dict[str, int]) -> None:
    """Run ``case`` on both sides; the schedules agree (else decisions are not comparable) and so do the
    decisions. ``tally`` counts preemptions and head limits seen, so a test can show it was not vacuous."""
    records = run_batchscope(case.requests, case.config, [EOS])
    steps, trace = vllm_trace(records)
    verdict = first_difference(records, steps)
    assert verdict.startswith("agrees"), f"{verdict}\n{case}"
    diffs = decision_differences(records, trace)
    assert diffs == [], f"{diffs[:5]}\n{case}"
    for st_ in records[1:-1]:
        tally["preemptions"] = tally.get("preemptions", 0) + len(st_["decisions"]["preemptions"])
        if "head" in st_["decisions"]:
            limit = st_["decisions"]["head"]["limit"]
            tally[limit] = tally.get(limit, 0) + 1


def _needs(case: Case) -> list[int]:
    bs = case.config["block_size"]
    return [blocks_for(len(r["prompt_token_ids"]) + r["max_tokens"] - 1, bs) for r in case.requests]


def tiny_pool(case: Case) -> Case:
    """The pool where only the largest request just fits alone: preemptions are common."""
    return Case({**case.config, "num_kv_blocks": max(_needs(case))}, case.requests)


def tight_budget_roomy_pool(case: Case) -> Case:
    """For chunked prefill off: the budget is the longest prompt (Batchscope validates that each prompt fits it;
    vLLM would never admit a longer one), so prompts often wait for the budget left; the pool holds every request
    at once, so nobody is preempted (see ``test_known_difference_chunked_prefill_off_resume`` for why)."""
    budget = max(case.config["max_num_seqs"], *(len(r["prompt_token_ids"]) for r in case.requests))
    return Case({**case.config, "max_num_batched_tokens": budget, "num_kv_blocks": sum(_needs(case))}, case.requests)


def run_property(strategy, examples: int) -> dict[str, int]:
    tally: dict[str, int] = {}

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=strategy)
    def check(case: Case) -> None:
        check_case(case, tally)

    check()
    return tally


# -- the shipped scenarios ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_shipped_scenario_decisions_equal_batchscope(path, rules):
    records = run_batchscope(*shipped_workload(read(path), RULES[rules]))
    steps, trace = vllm_trace(records)
    assert first_difference(records, steps).startswith("agrees")
    assert schema_problems(trace) == []
    assert decision_differences(records, trace) == []
    decided = [st_["decisions"] for st_ in trace[1:-1]]
    if path.name.startswith(("preemption", "priority")):  # not vacuous: these scenarios preempt and make others wait
        assert any(d["preemptions"] and "requester" in d["preemptions"][0] for d in decided)
        assert any(d.get("head", {}).get("limit") == "preempted_this_step" for d in decided)
        assert any(a["resumed"] and a["num_recompute_tokens"] > 0 for d in decided for a in d["admissions"])


# -- hypothesis workloads ----------------------------------------------------------------------------------------------


def test_random_tiny_pools_every_rule_and_policy():
    """Preemption-heavy: both admission rules, caching on and off, FCFS and priority, chunked prefill on."""
    tally = run_property(cases({}).map(tiny_pool), 250)
    assert tally.get("preemptions", 0) >= 50, tally
    assert tally.get("kv_blocks", 0) and tally.get("kv_blocks_full_prompt", 0) and tally.get("max_num_seqs", 0)


def test_random_priority_policy_tiny_pools():
    tally = run_property(cases({"scheduling_policy": "priority"}).map(tiny_pool), 200)
    assert tally.get("preemptions", 0) >= 50 and tally.get("preempted_this_step", 0), tally


def test_random_chunked_prefill_off():
    tally = run_property(cases({"enable_chunked_prefill": False}).map(tight_budget_roomy_pool), 200)
    assert tally.get("chunked_prefill_off", 0) >= 5, tally
    assert tally.get("preemptions", 0) == 0, tally  # the pool holds everyone (see tight_budget_roomy_pool)


# -- a hand-computed case and deliberately wrong records ---------------------------------------------------------------


def hand_case() -> tuple[list[dict], dict]:
    """Block size 4, 4 blocks, 2 rows, budget 16, full-prompt admission, FCFS, no caching. A (8-token prompt) and
    B (4) are admitted at step 0; C (4) waits for a row. Step 1: A's decode takes the last free block, B's needs a
    2nd block and preempts B itself (the newest). Steps 2-4: resumed B needs 2 blocks for its 5 known tokens, 1 is
    free. Step 5: A finished; B resumes (4 tokens recomputed, 1 new) and C joins."""
    config = {
        "batching": "continuous",
        "max_num_seqs": 2,
        "max_num_batched_tokens": 16,
        "block_size": 4,
        "num_kv_blocks": 4,
        "enable_chunked_prefill": True,
        "reserve_full_prompt": True,
        "enable_prefix_caching": False,
        "scheduling_policy": "fcfs",
    }
    requests = [
        {
            "request_id": rid,
            "prompt_token_ids": list(range(10 + 10 * i, 10 + 10 * i + n)),
            "max_tokens": 5,
            "ignore_eos": True,
            "arrival_step": 0,
            "output_token_ids": [OTHER] * 5,
        }
        for i, (rid, n) in enumerate((("A", 8), ("B", 4), ("C", 4)))
    ]
    return requests, config


def admission(rid: str, hit: int, recompute: int, new: int, resumed: bool = False) -> dict:
    return {
        "request_id": rid,
        "resumed": resumed,
        "num_prefix_hit_tokens": hit,
        "num_recompute_tokens": recompute,
        "num_new_tokens": new,
    }


HAND_DECISIONS = [
    {
        "admissions": [admission("A", 0, 0, 8), admission("B", 0, 0, 4)],
        "preemptions": [],
        "head": {"request_id": "C", "limit": "max_num_seqs", "need": 1, "left": 0, "order": "arrival"},
    },
    {
        "admissions": [],
        "head": {"request_id": "B", "limit": "preempted_this_step", "order": "arrival"},
        "preemptions": [
            {
                "request_id": "B",
                "rule": "newest",
                "num_dropped_tokens": 4,
                "num_dropped_blocks": 1,
                "requester": "B",
                "need": 1,
                "free": 0,
            }
        ],
    },
    *[
        {
            "admissions": [],
            "preemptions": [],
            "head": {"request_id": "B", "limit": "kv_blocks_full_prompt", "need": 2, "left": 1, "order": "arrival"},
        }
    ]
    * 3,
    {"admissions": [admission("B", 0, 4, 1, resumed=True), admission("C", 0, 0, 4)], "preemptions": []},
]


def test_hand_computed_decisions():
    requests, config = hand_case()
    records = run_batchscope(requests, config, [EOS])
    _, trace = vllm_trace(records)
    assert [st_["decisions"] for st_ in trace[1:7]] == HAND_DECISIONS
    assert [st_["decisions"] for st_ in records[1:7]] == HAND_DECISIONS  # Batchscope's own, for the record
    assert [(s["request_id"], s["recompute"]) for s in trace[6]["scheduled"]] == [("B", True), ("C", False)]
    b = next(r for r in trace[-1]["requests"] if r["request_id"] == "B")
    assert (b["num_preemptions"], b["num_dropped_tokens"], b["num_recomputed_tokens"]) == (1, 4, 4)
    assert decision_differences(records, trace) == []


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda t: t[2]["decisions"]["preemptions"][0].update(need=2), "step 1: decisions.preemptions[0].need"),
        (lambda t: t[2]["decisions"]["preemptions"][0].pop("requester"), "step 1: decisions.preemptions[0].requester"),
        (lambda t: t[3]["decisions"]["head"].update(limit="kv_blocks"), "step 2: decisions.head.limit"),
        (lambda t: t[1]["decisions"].pop("head"), "step 0: decisions.head"),
        (lambda t: t[6]["decisions"]["admissions"].reverse(), "step 5: decisions.admissions["),
        (lambda t: t[6]["decisions"]["admissions"][0].update(num_new_tokens=0), "step 5: decisions.admissions[0]"),
        (lambda t: t[6]["decisions"]["admissions"][0].update(resumed=1), "step 5: decisions.admissions[0].resumed"),
        (lambda t: t[6]["scheduled"][0].update(recompute=False), "step 5: recompute"),
        (lambda t: t[-1]["requests"][1].update(num_dropped_tokens=0), "summary B.num_dropped_tokens"),
    ],
)
def test_a_wrong_record_is_caught(mutate, expected):
    requests, config = hand_case()
    records = run_batchscope(requests, config, [EOS])
    _, trace = vllm_trace(records)
    wrong = copy.deepcopy(trace)
    mutate(wrong)
    diffs = decision_differences(records, wrong)
    assert diffs and all(d.startswith(expected) for d in diffs), diffs


# -- what the tracer leaves out, and why -------------------------------------------------------------------------------


def drive(config: dict, requests: list[dict], path: Path, monkeypatch, between=None, steps: int = 6) -> list[dict]:
    """``TracingScheduler`` stepped by hand (as ``run_vllm`` does), calling ``between(sched, step)`` before each
    schedule(); every request samples ``OTHER``. Returns the trace."""
    monkeypatch.setenv("BATCHSCOPE_TRACE", str(path))
    sched = make_scheduler(config, TracingScheduler)
    for spec in requests:
        sched.add_request(_make_request(spec, [], float(len(sched.requests)), _block_hasher(config)))
    for step in range(steps):
        if between is not None:
            between(sched, step)
        out = sched.schedule()
        ids = list(out.num_scheduled_tokens)
        tokens = [[] if sched.requests[r].is_prefill_chunk else [OTHER] for r in ids]
        sched.update_from_output(
            out,
            ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)}, sampled_token_ids=tokens),
        )
    sched.shutdown()
    return read(path)


SMALL = {
    "max_num_seqs": 2,
    "max_num_batched_tokens": 16,
    "block_size": 4,
    "num_kv_blocks": 8,
    "enable_chunked_prefill": True,
    "enable_prefix_caching": False,
    "reserve_full_prompt": True,
    "scheduling_policy": "fcfs",
    "max_model_len": 64,
}
TWO = [{"request_id": r, "prompt_token_ids": [5, 6, 7], "max_tokens": 8, "ignore_eos": True} for r in "AB"]


def test_a_preemption_outside_schedule_has_no_decision_record(tmp_path, monkeypatch):
    """``reset_prefix_cache(reset_running_requests=True)`` preempts every running request between steps. The step
    lists them in ``preempted`` (and the summary counts them), but ``decisions.preemptions`` leaves them out: no
    victim rule chose them and no allocation failed, so neither ``rule`` (required) nor a requester is known."""

    def reset(sched, step):
        if step == 2:
            assert sched.reset_prefix_cache(reset_running_requests=True)

    trace = drive(SMALL, TWO, tmp_path / "t.jsonl", monkeypatch, reset)
    assert schema_problems(trace) == []
    st2 = trace[3]
    assert sorted(st2["preempted"]) == ["A", "B"] and st2["decisions"]["preemptions"] == []
    assert "head" not in st2["decisions"]  # both resumed at once: nobody waits
    assert [(a["request_id"], a["resumed"], a["num_recompute_tokens"]) for a in st2["decisions"]["admissions"]] == [
        ("A", True, 4),  # 3 prompt tokens + 1 output had K/V; recomputed now, plus the last sampled token (new)
        ("B", True, 4),
    ]
    assert {r["request_id"]: r["num_dropped_tokens"] for r in trace[-1]["requests"]} == {"A": 4, "B": 4}


def test_a_paused_scheduler_leaves_the_head_out(tmp_path, monkeypatch):
    """With vLLM paused (``PauseState.PAUSED_ALL``) nobody is scheduled and requests wait, but no scheduling limit
    holds them: ``decisions.head`` is left out rather than named after a limit that did not apply."""

    def pause(sched, step):
        sched.set_pause_state(PauseState.PAUSED_ALL if step in (1, 2) else PauseState.UNPAUSED)

    requests = [*TWO, {**TWO[0], "request_id": "C"}]
    trace = drive(SMALL, requests, tmp_path / "t.jsonl", monkeypatch, pause)
    assert schema_problems(trace) == []
    assert trace[1]["decisions"]["head"] == {
        "request_id": "C",
        "limit": "max_num_seqs",
        "need": 1,
        "left": 0,
        "order": "arrival",
    }
    for st_ in trace[2:4]:
        assert st_["scheduled"] == [] and st_["waiting"] == ["C"] and "head" not in st_["decisions"]
    assert trace[4]["decisions"]["head"]["limit"] == "max_num_seqs"


# -- a rule difference this test found, now fixed -----------------------------------------------------------------


def test_chunked_prefill_off_a_comeback_runs_whole_as_in_vllm():
    """With chunked prefill off, vLLM admits a waiting request only if all its tokens to compute fit in the budget
    left (``schedule()``: ``num_new_tokens > request_token_budget`` -> ``break``), resumed requests included.
    Batchscope used to let any resumed request take a budget-sized chunk; hypothesis found the two minimal cases
    below (case 1: Batchscope resumed R2 one step early with a 1-token chunk; case 2: same schedule, Batchscope said
    ``kv_blocks`` where vLLM stopped at ``chunked_prefill_off``). Now Batchscope splits a comeback only when it
    exceeds the whole budget (a budget vLLM's config refuses), and both cases agree in schedule and reasons."""
    off = {
        "batching": "continuous",
        "enable_chunked_prefill": False,
        "reserve_full_prompt": False,
        "enable_prefix_caching": False,
    }

    def req(rid, prompt, max_tokens, arrival=0, priority=0):
        return {
            "request_id": rid,
            "prompt_token_ids": prompt,
            "max_tokens": max_tokens,
            "ignore_eos": False,
            "arrival_step": arrival,
            "priority": priority,
            "output_token_ids": [OTHER] * max_tokens,
        }

    # case 1: budget 8; at step 4 R1 resumes with 7 tokens, 1 left; R2 (preempted at step 2) has 2 to compute
    config = {
        **off,
        "max_num_seqs": 3,
        "max_num_batched_tokens": 8,
        "block_size": 2,
        "num_kv_blocks": 5,
        "scheduling_policy": "fcfs",
    }
    requests = [req("R0", [3], 4), req("R1", [3] * 4, 4), req("R2", [3], 2, arrival=1), req("R3", [3], 1)]
    records = run_batchscope(requests, config, [EOS])
    steps, trace = vllm_trace(records)
    assert first_difference(records, steps).startswith("agrees on all")
    assert decision_differences(records, trace) == []
    bs4 = records[5]
    assert [(s["request_id"], s["num_tokens"]) for s in bs4["scheduled"]] == [("R1", 7)]
    assert bs4["decisions"]["head"] == {
        "request_id": "R2",
        "limit": "chunked_prefill_off",
        "need": 2,
        "left": 1,
        "order": "arrival",
    }

    # case 2 (priority): budget 7; at step 6 R0 resumes with 6 tokens, 1 left; R2 (preempted at step 3) has 4
    config = {
        **off,
        "max_num_seqs": 2,
        "max_num_batched_tokens": 7,
        "block_size": 1,
        "num_kv_blocks": 6,
        "scheduling_policy": "priority",
    }
    requests = [req("R0", [3], 6), req("R1", [3], 2, arrival=1, priority=-1), req("R2", [3], 4)]
    records = run_batchscope(requests, config, [EOS])
    steps, trace = vllm_trace(records)
    assert first_difference(records, steps).startswith("agrees on all")
    assert decision_differences(records, trace) == []
    assert records[7]["decisions"]["head"]["limit"] == "chunked_prefill_off"


# -- the driver --------------------------------------------------------------------------------------------------------


def test_run_vllm_writes_the_trace_it_is_given(tmp_path, monkeypatch):
    monkeypatch.delenv("BATCHSCOPE_TRACE", raising=False)
    requests, config = hand_case()
    workload = workload_from_trace(run_batchscope(requests, config, [EOS]))
    steps = run_vllm(workload, trace=tmp_path / "t.jsonl")
    assert "BATCHSCOPE_TRACE" not in os.environ  # set only while the scheduler starts
    trace = read(tmp_path / "t.jsonl")
    assert schema_problems(trace) == [] and len(trace) == len(steps) + 2 and run_vllm(workload) == steps
    (tmp_path / "w.json").write_text(json.dumps(workload))
    assert main([str(tmp_path / "w.json"), "--trace", str(tmp_path / "cli.jsonl")]) == 0
    assert [st_["decisions"] for st_ in read(tmp_path / "cli.jsonl")[1:-1]] == [st_["decisions"] for st_ in trace[1:-1]]


def test_a_failing_decision_hook_never_disturbs_vllm(tmp_path, monkeypatch, caplog):
    """An error while reading vLLM's state for the decisions stops tracing with one log line; vLLM's schedule is the
    one it makes untraced (the allocation probe stays in place and only passes values through)."""
    from batchscope_vllm import tracer

    requests, config = hand_case()
    workload = workload_from_trace(run_batchscope(requests, config, [EOS]))
    expected = run_vllm(workload)

    def boom(self, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr(tracer.logger, "propagate", True)
    monkeypatch.setattr("batchscope_vllm.tracebook.TraceBook._head", boom)
    assert run_vllm(workload, trace=tmp_path / "t.jsonl") == expected
    assert sum("tracing stopped after an error in scheduled" in r.getMessage() for r in caplog.records) == 1
