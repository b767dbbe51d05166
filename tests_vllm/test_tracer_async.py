"""Asynchronous scheduling (vLLM's default): step k+1 is scheduled before step k's tokens return. Driven
model-free the way vLLM's engine core does it (``EngineCore.step_with_batch_queue`` with two batches in flight),
``TracingAsyncScheduler``'s trace is still correct: it validates, every request's sampled tokens are the ones the
fake forward pass returned, in order, each request finishes once, and at every step the block tables rebuilt from
the trace's deltas are exactly the ones vLLM's KV cache manager holds.
"""

from __future__ import annotations

import itertools
from collections import deque

import pytest
from test_tracer import read, schema_problems, shipped
from vllm.v1.outputs import ModelRunnerOutput

from batchscope.steplog.blocks import to_v1
from batchscope_vllm.driver import _block_hasher, _make_request, make_scheduler
from batchscope_vllm.tracer import TracingAsyncScheduler

FILLER = 7  # the token of a step vLLM already scheduled for a request that has since finished (then discarded)


def run_async(workload: dict) -> tuple[list[dict], dict[str, list[int]]]:
    """Drive ``TracingAsyncScheduler`` with two steps in flight; (vLLM's tables after each schedule(), outputs)."""
    config = {**workload["config"], "async_scheduling": True}
    sched = make_scheduler(config, TracingAsyncScheduler)
    hasher, eos = _block_hasher(config), list(workload["eos_token_ids"])
    pending, requests, given = list(workload["requests"]), {}, {}
    in_flight: deque = deque()
    tables, step = [], 0
    while pending or sched.has_requests() or in_flight:
        for spec in [s for s in pending if s["arrival_step"] <= step]:
            pending.remove(spec)
            requests[spec["request_id"]] = req = _make_request(spec, eos, float(len(requests)), hasher)
            sched.add_request(req)
        if sched.has_requests():
            out = sched.schedule()
            tables.append({r: [b - 1 for b in sched.kv_cache_manager.get_block_ids(r)[0]] for r in sched.requests})
            tokens = []
            for rid in out.num_scheduled_tokens:  # the fake forward pass: decided now, returned later
                if sched.requests[rid].is_prefill_chunk:
                    tokens.append([])
                    continue
                k = given.get(rid, 0)
                todo = workload["sampled"][rid]
                tokens.append([todo[k] if k < len(todo) else FILLER])
                given[rid] = k + 1
            in_flight.append((out, tokens))
            step += 1
            if len(in_flight) < 2 and (pending or sched.has_requests()):
                continue
        out, tokens = in_flight.popleft()
        ids = list(out.num_scheduled_tokens)
        sched.update_from_output(
            out,
            ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)}, sampled_token_ids=tokens),
        )
    sched.shutdown()
    return [{r: t for r, t in tab.items() if t} for tab in tables], {
        r: list(q.output_token_ids) for r, q in requests.items()
    }


@pytest.mark.parametrize("name", ["seed-abcd", "preemption", "sixteen"])
def test_async_scheduling_gives_a_correct_trace(name, tmp_path, monkeypatch):
    records, workload = shipped(name)
    monkeypatch.setenv("BATCHSCOPE_TRACE", str(tmp_path / "t.jsonl"))
    tables, outputs = run_async(workload)
    trace = read(tmp_path / "t.jsonl")
    assert schema_problems(trace) == [] and trace[0]["config"]["async_scheduling"] is True
    sampled: dict[str, list[int]] = {}
    for st in trace[1:-1]:
        for s in st["sampled"]:
            sampled.setdefault(s["request_id"], []).append(s["token_id"])
    assert sampled == outputs == {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    finished = [f["request_id"] for st in trace[1:-1] for f in st["finished"]]
    assert sorted(finished) == sorted(outputs)  # each request finishes exactly once
    reasons = {f["request_id"]: f["reason"] for st in trace[1:-1] for f in st["finished"]}
    assert reasons == {r["request_id"]: r["finish_reason"] for r in records[-1]["requests"]}
    assert [st["kv"]["block_tables"] for st in to_v1(trace)[1:-1]] == tables
    # What async scheduling really does, visible in the trace: a request that stops on EOS at step k was already
    # scheduled at step k + 1 (a decode that yields no token); one that hits max_tokens was not.
    wasted = {
        s["request_id"]
        for prev, st in itertools.pairwise(trace[1:-1])
        for s in st["scheduled"]
        if s["request_id"] in {f["request_id"] for f in prev["finished"]}
    }
    assert wasted == {r for r, why in reasons.items() if why == "stop"}
