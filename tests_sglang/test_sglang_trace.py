"""The trace Batchscope's engine writes under ``--batching sglang`` (model-free: a scripted runner) against SGLang
0.5.23's own scheduler on the same workload and tokens, step by step: the batch kind, who runs with how many tokens,
admissions and their prefix hits, retractions, the chunked request, new_token_ratio (to 1e-9) and who finishes, all
read from the trace (``replay.trace_steps``). Workloads: the hand-made cases, the shipped scenarios (their prompts,
budgets, arrivals and the real model's recorded outputs), and hypothesis draws of the families of
``test_sglang_differential`` (``ignore_eos`` requests among them; the retraction family also with the prefix cache
on, where it evicts)."""

from __future__ import annotations

import json
from pathlib import Path

import cases
import pytest
from hypothesis import given
from replay import compare_trace, run_engine_trace
from test_sglang_differential import SETTINGS, retracting, workloads

from batchscope_sglang.driver import run_sglang

RECORDED = Path(__file__).resolve().parents[1] / "batchscope" / "assets" / "traces"
SCENARIOS = ("seed-abcd", "shared-prefix", "preemption", "priority", "sixteen", "vllm-vs-sglang")
SHIPPED = sorted(RECORDED.glob("*-sglang.jsonl"))  # the engine's SGLang traces, recorded on the model


def _check(workload: dict) -> list[dict]:
    records, theirs = run_engine_trace(workload), run_sglang(workload)
    verdict = compare_trace(records, theirs)
    assert verdict.startswith("agrees"), f"{verdict}\nworkload {workload}"
    return records


def scenario_workload(name: str) -> dict:
    """A shipped scenario as an SGLang workload: its recorded trace's requests and outputs, its pool as tokens."""
    lines = [json.loads(x) for x in (RECORDED / f"{name}-continuous.jsonl").read_text().splitlines() if x.strip()]
    header, summary = lines[0], lines[-1]
    cfg = header["config"]
    outputs = {r["request_id"]: r["output_token_ids"] for r in summary["requests"]}
    requests = [
        {
            "request_id": r["request_id"],
            "prompt_token_ids": r["prompt_token_ids"],
            "max_new_tokens": r["max_tokens"],
            "arrival_step": r["arrival_step"] or 0,
            "output_token_ids": outputs[r["request_id"]],
            "ignore_eos": bool(r.get("ignore_eos")),
        }
        for r in header["requests"]
    ]
    config = {
        "max_running_requests": cfg["max_num_seqs"],
        "chunked_prefill_size": cfg["max_num_batched_tokens"],
        "pool_tokens": cfg["num_kv_blocks"] * cfg["block_size"],
        "schedule_policy": "fcfs",
        "enable_prefix_cache": cfg["enable_prefix_caching"],
    }
    return {"config": config, "requests": requests, "eos_token_ids": header["eos_token_ids"]}


def recorded_workload(records: list[dict]) -> dict:
    """An SGLang trace's own workload: its requests (``ignore_eos`` too), the outputs it sampled, its token pool."""
    header, summary = records[0], records[-1]
    cfg = header["config"]
    outputs = {r["request_id"]: r["output_token_ids"] for r in summary["requests"]}
    requests = [
        {
            "request_id": r["request_id"],
            "prompt_token_ids": r["prompt_token_ids"],
            "max_new_tokens": r["max_tokens"],
            "arrival_step": r["arrival_step"] or 0,
            "output_token_ids": outputs[r["request_id"]],
            "ignore_eos": bool(r.get("ignore_eos")),
        }
        for r in header["requests"]
    ]
    config = {
        "max_running_requests": cfg["max_num_seqs"],
        "chunked_prefill_size": cfg["max_num_batched_tokens"],
        "pool_tokens": cfg["num_kv_blocks"] * cfg["block_size"],
        "schedule_policy": cfg["scheduling_policy"],
        "enable_prefix_cache": cfg["enable_prefix_caching"],
    }
    return {"config": config, "requests": requests, "eos_token_ids": header["eos_token_ids"]}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_recorded_sglang_traces_are_sglangs_own_schedule(path):
    """Each shipped ``*-sglang.jsonl``, as recorded on the model, step by step against SGLang's scheduler fed the
    same requests (with their ``ignore_eos``) and the tokens the trace sampled: so the pages that show it show what
    SGLang 0.5.23 would have decided."""
    records = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    verdict = compare_trace(records, run_sglang(recorded_workload(records)))
    assert verdict.startswith("agrees"), verdict


def test_cases():
    records = _check(cases.retraction())
    assert any(st["preempted"] for st in records if st["type"] == "step")
    for policy in ("fcfs", "lpm"):
        _check(cases.shared_prefixes(policy))
    _check(cases.chunked())


def test_ignore_eos_in_the_decision_records():
    """An ignore_eos admission says its remaining output is charged at ratio 1.0, and the head held by the simulated
    run of ``cases.ignore_eos_simulated_run`` names that rule with its numbers (20 tokens free after B's prompt + 1,
    2 x 9 + 2 to stay above)."""
    steps = [r for r in _check(cases.ignore_eos_simulated_run()) if r["type"] == "step"]
    assert steps[0]["decisions"]["admissions"][0]["output_ratio"] == 1.0
    head = steps[1]["decisions"]["head"]
    assert (head["request_id"], head["limit"], head["need"], head["left"]) == ("B", "sglang_fixed_length_run", 20, 20)
    plain = [r for r in _check(cases.ignore_eos_running(ignore_eos=False)) if r["type"] == "step"]
    assert "output_ratio" not in plain[0]["decisions"]["admissions"][0]


@pytest.mark.parametrize("name", SCENARIOS)
def test_shipped_scenarios(name):
    records = _check(scenario_workload(name))
    kinds = {st["decisions"]["batch"]["kind"] for st in records if st["type"] == "step"}
    assert kinds == {"extend", "decode"}


def test_mixed_chunk_in_the_trace():
    """With ``enable_mixed_chunk`` the trace's batch record lists the decodes that ran inside the EXTEND batch (and
    none waiting), its header says the option is on; off, the field is absent."""
    records = _check(cases.mixed_chunk())
    assert records[0]["config"]["enable_mixed_chunk"] is True
    batches = [st["decisions"]["batch"] for st in records if st["type"] == "step"]
    assert [(b["kind"], b["decodes_mixed"], b["decodes_waiting"]) for b in batches[2:4]] == [
        ("extend", ["A", "B"], []),
        ("extend", ["A", "B"], []),
    ]
    plain = _check(cases.mixed_chunk(on=False))
    assert "enable_mixed_chunk" not in plain[0]["config"]
    assert all("decodes_mixed" not in st["decisions"]["batch"] for st in plain if st["type"] == "step")


@SETTINGS
@given(workload=workloads(cache=False, mixed=True))
def test_trace_mixed_chunk_tight_memory(workload):
    _check(workload)


@SETTINGS
@given(workload=workloads(cache=True, mixed=True))
def test_trace_mixed_chunk_shared_prefixes(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=False, mixed=True))
def test_trace_mixed_chunk_retraction(workload):
    _check(workload)


@SETTINGS
@given(workload=workloads(cache=False))
def test_trace_tight_memory(workload):
    _check(workload)


@SETTINGS
@given(workload=workloads(cache=True))
def test_trace_shared_prefixes(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=False))
def test_trace_retraction(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=True))
def test_trace_retraction_with_prefix_cache(workload):
    """The engine's radix cache evicts whole nodes, and its slots follow (``batchscope.sglang_family.slots``)."""
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=True, mixed=True))
def test_trace_mixed_chunk_retraction_with_prefix_cache(workload):
    _check(workload)


def test_a_changed_rule_fails_on_the_trace(monkeypatch):
    """Reverse the retraction order in the core: the trace's comparison fails at the retraction step."""
    import batchscope.sglang_family.scheduler as sched

    workload = cases.retraction()
    theirs = run_sglang(workload)
    keep_order = sched._keep_order
    monkeypatch.setattr(sched, "_keep_order", lambda running: keep_order(running)[::-1])
    assert compare_trace(run_engine_trace(workload), theirs).startswith("step ")
