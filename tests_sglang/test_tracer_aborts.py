"""Aborts in the SGLang tracer's trace, as SGLang 0.5.23 handles them (its own ``abort_request``, driven by
``batchscope_sglang.driver`` with a workload's ``abort_step``): a waiting request leaves the queue at once (its finish
is in the next record, state ``waiting``, not in the batch); a running request is only marked to finish
(``Req.to_finish``): it runs one more forward with its batch, keeps the token it sampled and finishes after it
(``to_finish``), its table freed at the next step. Checked against SGLang's own step records (the driver's), not
against Batchscope's family."""

from __future__ import annotations

from test_tracer import schema_problems, traced

from batchscope.steplog.blocks import to_v1


def workload() -> dict:
    reqs = [
        {"request_id": "A", "prompt_token_ids": [11, 12, 13], "max_new_tokens": 8, "abort_step": 3},
        {"request_id": "W", "prompt_token_ids": [21, 22, 23], "max_new_tokens": 8, "arrival_step": 1, "abort_step": 2},
        {"request_id": "Z", "prompt_token_ids": [31, 32], "max_new_tokens": 8},
    ]
    for r in reqs:
        r["output_token_ids"] = [7] * r["max_new_tokens"]
    cfg = {"max_running_requests": 2, "chunked_prefill_size": 16, "pool_tokens": 64, "enable_prefix_cache": True}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [2]}


def test_aborts_follow_sglangs_rule(tmp_path, monkeypatch):
    _, trace = traced(workload(), tmp_path / "t.jsonl", monkeypatch)
    assert schema_problems(trace) == []
    steps = to_v1(trace)[1:-1]
    finished = {f["request_id"]: (k, f) for k, st in enumerate(steps) for f in st["finished"]}
    k, w = finished["W"]
    assert w["reason"] == "abort" and w["aborted"]["state"] == "waiting" and "to_finish" not in w["aborted"]
    assert "W" not in [s["request_id"] for s in steps[k]["scheduled"]]
    k, a = finished["A"]
    assert a["reason"] == "abort" and a["aborted"]["state"] == "running" and a["aborted"]["to_finish"] is True
    assert "A" in [s["request_id"] for s in steps[k]["scheduled"]]  # one more forward with its batch
    assert "A" in [s["request_id"] for s in steps[k]["sampled"]]  # and its token kept
    assert "A" in steps[k + 1]["kv"]["freed"] and "A" not in steps[k + 1]["kv"]["block_tables"]
    summary = {r["request_id"]: r for r in trace[-1]["requests"]}
    assert summary["A"]["finish_reason"] == "abort" and summary["Z"]["finish_reason"] == "length"
    assert len(summary["A"]["output_token_ids"]) == a["aborted"]["num_output_tokens"]
