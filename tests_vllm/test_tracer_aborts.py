"""Aborts in the tracer's trace, against vLLM 0.33's own state: the tracing scheduler driven model-free
(``batchscope_vllm.driver``), each abort made through vLLM's ``Scheduler.finish_requests`` as the engine core makes
it. A watching subclass reads what vLLM holds just before each abort (the request's status, its output tokens, its
block table) and what its block pool got back; the trace's ``finished[].aborted`` must say the same, in the step
the abort came before, with the request in that step's ``kv.freed``.

Run in vLLM's venv: ``.venv-vllm/bin/python -m pytest -p no:cacheprovider tests_vllm``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from replay import run_batchscope
from test_tracer import read, schema_problems
from test_vllm_differential import EOS, cases

from batchscope.steplog.blocks import to_v1
from batchscope_vllm.compare import workload_from_trace
from batchscope_vllm.driver import run_vllm
from batchscope_vllm.tracer import TracingScheduler

STATES = {"WAITING": "waiting", "RUNNING": "running", "PREEMPTED": "preempted"}  # vLLM's status -> the trace's


class Watching(TracingScheduler):
    """vLLM's tracing scheduler that notes, around each ``finish_requests`` call of one request, vLLM's own view:
    status, output tokens, table length and the blocks its pool got back (blocks shared through the prefix cache
    stay with their other holders)."""

    seen: ClassVar[dict[str, dict[str, Any]]] = {}

    def finish_requests(self, request_ids: Any, finished_status: Any) -> Any:
        req = self.requests.get(request_ids) if isinstance(request_ids, str) else None
        pool = self.kv_cache_manager.block_pool
        free = pool.get_num_free_blocks()
        table = [b for b in self.kv_cache_manager.get_block_ids(request_ids)[0] if b > 0] if req else []
        view = None if req is None else (req.status.name, len(req.output_token_ids), len(table))
        others = {
            b
            for rid, r in self.requests.items()
            if rid != request_ids and not r.is_finished()
            for b in self.kv_cache_manager.get_block_ids(rid)[0]
        }
        out = super().finish_requests(request_ids, finished_status)
        if view is not None:
            returned = pool.get_num_free_blocks() - free
            Watching.seen[request_ids] = {"view": view, "returned": returned, "unshared": len(set(table) - others)}
        return out


def traced(workload: dict, path, monkeypatch) -> list[dict]:
    monkeypatch.setenv("BATCHSCOPE_TRACE", str(path))
    Watching.seen = {}
    run_vllm(workload, Watching)
    return read(path)


def aborts(trace: list[dict]) -> dict[str, tuple[int, dict]]:
    """request_id -> (step number, ``aborted`` facts) of every abort in the trace."""
    return {f["request_id"]: (st["step"], f["aborted"]) for st in trace[1:-1] for f in st["finished"] if "aborted" in f}


CONFIG = {
    "max_num_seqs": 2,
    "max_num_batched_tokens": 16,
    "block_size": 4,
    "num_kv_blocks": 6,
    "enable_chunked_prefill": True,
    "max_model_len": 64,
}


def workload(abort_steps: dict[str, int], sampled: dict[str, int] | None = None) -> dict:
    """A and B (8-token prompts, 12 tokens each) run together until B is preempted at step 5 (the pool of 6 blocks
    is full); W (4 tokens) waits behind them for a row until step 12."""
    reqs = [
        {
            "request_id": rid,
            "prompt_token_ids": list(range(base, base + n)),
            "max_tokens": m,
            "ignore_eos": True,
            "arrival_step": 0,
            **({"abort_step": abort_steps[rid]} if rid in abort_steps else {}),
        }
        for rid, base, n, m in (("A", 10, 8, 12), ("B", 20, 8, 12), ("W", 30, 4, 2))
    ]
    lengths = {"A": 12, "B": 12, "W": 2, **(sampled or {})}
    return {
        "config": CONFIG,
        "eos_token_ids": [],
        "requests": reqs,
        "sampled": {r: [7] * n for r, n in lengths.items()},
    }


def test_an_abort_in_every_state_is_recorded_as_vllm_held_it(tmp_path, monkeypatch):
    """W aborted while waiting (before step 3), B while preempted (step 7; preempted at step 5 after 5 tokens), A
    while running (step 9, after 9 tokens, holding 4 blocks): hand-known states, tokens and blocks, and vLLM's."""
    trace = traced(workload({"W": 3, "B": 7, "A": 9}), tmp_path / "t.jsonl", monkeypatch)
    assert schema_problems(trace) == []
    got = aborts(trace)
    assert got == {
        "W": (3, {"state": "waiting", "num_output_tokens": 0, "num_freed_blocks": 0}),
        "B": (7, {"state": "preempted", "num_output_tokens": 5, "num_freed_blocks": 0}),
        "A": (9, {"state": "running", "num_output_tokens": 9, "num_freed_blocks": 4}),
    }
    for rid, (_, facts) in got.items():
        status, tokens, blocks = Watching.seen[rid]["view"]
        assert (STATES[status], tokens, blocks) == (
            facts["state"],
            facts["num_output_tokens"],
            facts["num_freed_blocks"],
        )
        assert Watching.seen[rid]["returned"] == facts["num_freed_blocks"]  # nothing shared: all went back
    tables = [st["kv"]["block_tables"] for st in to_v1(trace)[1:-1]]
    assert trace[10]["kv"]["freed"] == ["A"] and len(tables[8]["A"]) == 4 and "A" not in tables[9]
    assert "A" not in [s["request_id"] for s in trace[10]["scheduled"]]  # aborted before step 9 was scheduled
    summary = {r["request_id"]: r for r in trace[-1]["requests"]}
    assert [summary[r]["finish_reason"] for r in "ABW"] == ["abort"] * 3
    assert len(summary["A"]["output_token_ids"]) == 9 and summary["W"]["first_scheduled_time"] is None


def test_an_abort_while_a_step_runs_is_marked_during_step(tmp_path, monkeypatch):
    """The driver aborts A between schedule() and update_from_output() of step 3, when A wants a 4th token it was
    not given (vLLM's engine core processes aborts there too): ``during_step``, A in step 3's batch, freed at 4."""
    trace = traced(workload({}, {"A": 3}), tmp_path / "t.jsonl", monkeypatch)
    assert schema_problems(trace) == []
    step, facts = aborts(trace)["A"]
    assert (step, facts) == (
        3,
        {"state": "running", "num_output_tokens": 3, "num_freed_blocks": 3, "during_step": True},
    )
    assert "A" in [s["request_id"] for s in trace[4]["scheduled"]] and trace[5]["kv"]["freed"] == ["A"]


def test_a_replay_of_a_traced_abort_aborts_before_the_same_step(tmp_path, monkeypatch):
    """``workload_from_trace`` turns a Batchscope trace's aborts back into abort steps."""
    reqs = [dict(r, output_token_ids=[7] * r["max_tokens"]) for r in workload({"W": 3, "B": 7, "A": 9})["requests"]]
    config = {**{k: v for k, v in CONFIG.items() if k != "max_model_len"}, "batching": "continuous"}
    records = run_batchscope(reqs, config, [])
    assert {r["request_id"]: r.get("abort_step") for r in workload_from_trace(records)["requests"]} == {
        "A": 9,
        "B": 7,
        "W": 3,
    }


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(case=cases({}, aborts=True))
def test_random_aborts_are_recorded_as_vllm_held_them(case, tmp_path_factory, monkeypatch):
    """Random workloads with abort steps (the differential's; prefix caching on and off, both queue orders): every
    abort in the trace is where vLLM's ``finish_requests`` took it, with vLLM's state, tokens and table, and the
    pool got back exactly the table's blocks that no other request shares."""
    records = run_batchscope(case.requests, case.config, [EOS])
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    trace = traced(workload_from_trace(records), path, monkeypatch)
    assert schema_problems(trace) == []
    got = aborts(trace)
    assert set(got) == set(Watching.seen)
    v1 = to_v1(trace)[1:-1]
    for rid, (step, facts) in got.items():
        status, tokens, blocks = Watching.seen[rid]["view"]
        assert (STATES.get(status, "waiting"), tokens, blocks) == (
            facts["state"],
            facts["num_output_tokens"],
            facts["num_freed_blocks"],
        )
        k = next(i for i, st in enumerate(v1) if st["step"] == step)
        before = v1[k - 1]["kv"]["block_tables"] if k else {}
        assert len(before.get(rid, ())) == facts["num_freed_blocks"]
        assert Watching.seen[rid]["returned"] == Watching.seen[rid]["unshared"]
        assert rid not in v1[k]["kv"]["block_tables"] and (rid in v1[k]["kv"]["freed"]) == bool(before.get(rid))
