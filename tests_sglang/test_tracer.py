"""The SGLang tracer (``batchscope_sglang.tracer``) installed in SGLang 0.5.23's real scheduler, driven model-free as
``batchscope_sglang.driver`` drives it (the same shell, arrivals through ``_add_request_to_queue``, the stand-in
result processor under ``process_batch_result``): its trace of the shipped scenarios' workloads and of hypothesis
workloads (the families of ``test_sglang_differential``) validates against the schema and equals Batchscope's own
SGLang-family trace of the same workload (``replay.run_engine_trace``) in every scheduling field: the batch kind
and ratio, who ran with how many tokens from which position in which row, what was sampled, admissions with their
radix-cache hits and reserved output, retractions with their K/V, the head of the queue and its limit, the queues,
the used token slots and each table's length, and the summary. The tables' slot ids are checked against the rows
SGLang held (``req_to_token``) step by step. Also: the size cap, gzip, the text option, a failing tracer never
disturbs SGLang, and the committed fixture tests/data/sglang-tracer.jsonl.

Run in SGLang's venv: ``make test-sglang``.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from pathlib import Path
from typing import Any

import cases
import pytest
from hypothesis import given
from replay import run_engine_trace
from sglang.srt.managers.scheduler import Scheduler
from test_sglang_differential import SETTINGS, retracting, workloads
from test_sglang_trace import scenario_workload

import batchscope_sglang.driver as driver
from batchscope.steplog.blocks import to_v1
from batchscope.steplog.schemacheck import compile_schema, explain
from batchscope_sglang import tracer
from batchscope_sglang.tracer import TracingMixin

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "batchscope" / "steplog" / "trace.schema.json").read_text())
FIXTURE = ROOT / "tests" / "data" / "sglang-tracer.jsonl"
SCENARIOS = ("seed-abcd", "shared-prefix", "preemption", "priority", "sixteen", "vllm-vs-sglang")
STEP_FIELDS = ("num_batched_tokens", "admitted", "preempted", "waiting", "running", "num_prefix_hit_tokens")
SCHED_FIELDS = ("request_id", "kind", "num_tokens", "num_computed_tokens", "slot", "recompute")
SUMMARY_FIELDS = ("output_token_ids", "finish_reason", "num_preemptions", "num_dropped_tokens", "num_recomputed_tokens")


BUILD, STAND_IN = driver.build_scheduler, driver._process  # the driver's own, before any test replaces them


class StandIn(Scheduler):
    """SGLang's scheduler with the driver's stand-in result processor (no model): ``result`` is each request's
    scripted outputs."""

    stand_in = staticmethod(STAND_IN)

    def process_batch_result(self, batch: Any, result: Any) -> Any:
        return self.stand_in(self, batch, result)


class ModelFreeTracing(TracingMixin, StandIn):
    """The tracer around it, as ``TracingScheduler`` wraps SGLang's own."""


def traced(workload: dict, path: Path, monkeypatch, **env: str) -> tuple[list, list[dict]]:
    """Run ``workload`` through ``driver.run_sglang`` (SGLang's request handling, aborts and scheduler, as the
    differential drives them) with the tracer installed at the driver's two seams: the scheduler it builds becomes a
    ``ModelFreeTracing`` (tracing started by hand: it is built without its constructor), and its stand-in result
    processor runs as that scheduler's ``process_batch_result``. (SGLang's tables at each batch, ``{request id:
    slot ids - 1}``; the trace written.)"""
    monkeypatch.setenv("BATCHSCOPE_TRACE", str(path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    build = BUILD
    made: list[Any] = []
    tables: list[dict] = []

    def build_traced(cfg: dict) -> Any:
        s = build(cfg)
        s.__class__ = ModelFreeTracing
        s.start_tracing()
        made.append(s)
        return s

    def process_traced(s: Any, batch: Any, outputs: Any) -> Any:
        tables.append(_rows(s, batch))
        return s.process_batch_result(batch, outputs)

    monkeypatch.setattr(driver, "build_scheduler", build_traced)
    monkeypatch.setattr(driver, "_process", process_traced)
    try:
        driver.run_sglang(workload)
    finally:
        for s in made:
            s.stop_tracing()
    return tables, read(path)


def _rows(s: Any, batch: Any) -> dict[str, list[int]]:
    """Each request's slots as SGLang's ``req_to_token`` holds them while ``batch`` runs (minus 1: SGLang keeps slot
    0 for padding): the batch's and the running batch's requests."""
    pool = s.req_to_token_pool.req_to_token
    reqs = {r.rid: r for r in [*s.running_batch.reqs, *batch.reqs]}
    return {
        rid: [int(x) - 1 for x in pool[r.kv.req_pool_idx, : r.kv.kv_allocated_len].tolist()]
        for rid, r in reqs.items()
        if r.kv.holds_kv and not r.finished()
    }


def read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    data = path.read_bytes()
    text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return [json.loads(line) for line in text.decode().splitlines() if line.strip()]


def schema_problems(records: list[dict]) -> list[str]:
    """Standard-library validation of a whole trace (the schema the app validates with)."""
    kinds = ["header"] + [f"step_v{records[0]['schema_version']}"] * (len(records) - 2) + ["summary"]
    checks = {k: compile_schema(SCHEMA, k) for k in set(kinds)}
    return [f"line {i}: {explain(SCHEMA, k, r)}" for i, (k, r) in enumerate(zip(kinds, records), 1) if not checks[k](r)]


def _head(head: dict | None, theirs: dict | None) -> Any:
    """A head record without the numbers the tracer leaves out (where SGLang's state does not give them)."""
    if head is None or theirs is None:
        return head
    return {k: v for k, v in head.items() if k in theirs}


def differences(engine: list[dict], trace: list[dict]) -> list[str]:
    """Every scheduling field of Batchscope's engine trace (version 1) and the tracer's (version 2), busy step by
    busy step (the engine skips idle steps, the tracer records none without news)."""
    ours = [st for st in engine[1:-1]]
    theirs = [st for st in to_v1(trace)[1:-1]]
    diffs = [] if len(ours) == len(theirs) else [f"steps: engine {len(ours)}, tracer {len(theirs)}"]
    for k, (b, v) in enumerate(zip(ours, theirs)):
        where = f"busy step {k} (engine step {b['step']})"
        diffs += [f"{where}: {f}: {b[f]} != {v[f]}" for f in STEP_FIELDS if b.get(f, {}) != v.get(f, {})]
        for key, fields in (("scheduled", SCHED_FIELDS), ("sampled", ("request_id", "token_id"))):
            x, y = [[s[f] for f in fields] for s in b[key]], [[s[f] for f in fields] for s in v[key]]
            if x != y:
                diffs.append(f"{where}: {key}: {x} != {y}")
        fin = (
            [[f["request_id"], f["reason"]] for f in b["finished"]],
            [[f["request_id"], f["reason"]] for f in v["finished"]],
        )
        if fin[0] != fin[1]:
            diffs.append(f"{where}: finished: {fin[0]} != {fin[1]}")
        bd, vd = b["decisions"], v["decisions"]
        for key in ("admissions", "preemptions"):
            if bd.get(key, []) != vd.get(key, []):
                diffs.append(f"{where}: decisions.{key}: {bd.get(key)} != {vd.get(key)}")
        if _head(bd.get("head"), vd.get("head")) != vd.get("head"):
            diffs.append(f"{where}: decisions.head: {bd.get('head')} != {vd.get('head')}")
        bb, vb = dict(bd["batch"]), dict(vd["batch"])
        if abs(bb.pop("new_token_ratio") - vb.pop("new_token_ratio")) > 1e-9 or bb != vb:
            diffs.append(f"{where}: decisions.batch: {bd['batch']} != {vd['batch']}")
        for f in ("num_used_blocks", "num_blocks"):
            if b["kv"][f] != v["kv"][f]:
                diffs.append(f"{where}: kv.{f}: {b['kv'][f]} != {v['kv'][f]}")
        lens = [{r: len(t) for r, t in st["kv"]["block_tables"].items()} for st in (b, v)]
        if lens[0] != lens[1]:
            diffs.append(f"{where}: table lengths: {lens[0]} != {lens[1]}")
    mine = {r["request_id"]: r for r in trace[-1]["requests"]}
    for r in engine[-1]["requests"]:
        diffs += [f"summary {r['request_id']}: {f}" for f in SUMMARY_FIELDS if r[f] != mine[r["request_id"]][f]]
    return diffs


def check(workload: dict, tmp_path: Path, monkeypatch) -> list[dict]:
    """The tracer's trace of ``workload``: valid, equal to the engine's, its tables SGLang's own."""
    rows, trace = traced(workload, tmp_path / "t.jsonl", monkeypatch)
    assert schema_problems(trace) == []
    assert trace[0]["source"] == "sglang" and trace[0]["policy"] == "sglang" and trace[0]["requests"] == []
    assert differences(run_engine_trace(workload), trace) == [], f"workload {workload}"
    assert [st["kv"]["block_tables"] for st in to_v1(trace)[1:-1]] == rows  # the slots SGLang held, step by step
    return trace


@pytest.mark.parametrize("name", SCENARIOS)
def test_shipped_scenarios(name, tmp_path, monkeypatch):
    trace = check(scenario_workload(name), tmp_path, monkeypatch)
    assert {st["decisions"]["batch"]["kind"] for st in trace[1:-1]} == {"extend", "decode"}


def test_cases(tmp_path, monkeypatch):
    trace = check(cases.retraction(), tmp_path, monkeypatch)
    assert any(st["preempted"] for st in trace[1:-1])
    for policy in ("fcfs", "lpm"):
        check(cases.shared_prefixes(policy), tmp_path, monkeypatch)
    check(cases.chunked(), tmp_path, monkeypatch)
    check(cases.ignore_eos_simulated_run(), tmp_path, monkeypatch)
    fixture = check(retraction_with_cache(), tmp_path, monkeypatch)
    assert any(st["preempted"] for st in fixture[1:-1])
    mixed = check(cases.mixed_chunk(), tmp_path, monkeypatch)
    assert mixed[0]["config"]["enable_mixed_chunk"] is True


@SETTINGS
@given(workload=workloads(cache=False))
def test_random_tight_memory(workload, tmp_path_factory):
    _random(workload, tmp_path_factory)


@SETTINGS
@given(workload=workloads(cache=True))
def test_random_shared_prefixes(workload, tmp_path_factory):
    _random(workload, tmp_path_factory)


@SETTINGS
@given(workload=retracting(cache=True))
def test_random_retraction_with_prefix_cache(workload, tmp_path_factory):
    _random(workload, tmp_path_factory)


@SETTINGS
@given(workload=workloads(cache=True, mixed=True))
def test_random_mixed_chunk(workload, tmp_path_factory):
    _random(workload, tmp_path_factory)


def _random(workload: dict, tmp_path_factory) -> None:
    with pytest.MonkeyPatch.context() as mp:
        check(workload, tmp_path_factory.mktemp("t"), mp)


def test_a_wrong_trace_fails(tmp_path, monkeypatch):
    """The comparison can fail: a tracer that forgets retractions differs at the first one."""
    workload = cases.retraction()
    _, trace = traced(workload, tmp_path / "t.jsonl", monkeypatch)
    for st in trace[1:-1]:
        st["preempted"] = []
    assert any("preempted" in d for d in differences(run_engine_trace(workload), trace))


def retraction_with_cache() -> dict[str, Any]:
    """The fixture's workload: two requests share a 6-token system prompt (the second hits it), a third arrives; the
    pool (42 token slots) cannot hold all three answers, so decode retracts one, which comes back with a radix hit."""
    system = [100, 101, 102, 103, 104, 105]
    reqs = [
        {"request_id": "A", "prompt_token_ids": [*system, 11], "max_new_tokens": 12, "arrival_step": 0},
        {"request_id": "B", "prompt_token_ids": [*system, 21], "max_new_tokens": 12, "arrival_step": 1},
        {"request_id": "C", "prompt_token_ids": [31, 32, 33], "max_new_tokens": 12, "arrival_step": 2},
    ]
    for r in reqs:
        r["output_token_ids"] = [7] * r["max_new_tokens"]
    cfg = {"max_running_requests": 3, "chunked_prefill_size": 16, "pool_tokens": 42, "enable_prefix_cache": True}
    return {"config": cfg, "requests": reqs, "eos_token_ids": [cases.EOS]}


TIMES = {"t_start", "t_end", "arrival_time", "first_scheduled_time", "first_token_time", "finish_time"}


def untimed(x: Any) -> Any:
    """A trace without its wall-clock times and run-specific header fields (model, date)."""
    if isinstance(x, dict):
        return {
            k: 0 if k in TIMES and v is not None else untimed(v) for k, v in x.items() if k not in ("model", "created")
        }
    return [untimed(v) for v in x] if isinstance(x, list) else x


def test_committed_fixture_is_what_the_tracer_writes(tmp_path, monkeypatch):
    """tests/data/sglang-tracer.jsonl (opened by the main suite on every page and export) is current: the retraction
    case with a shared prefix; ``BATCHSCOPE_UPDATE_FIXTURES=1`` rewrites it."""
    _, trace = traced(retraction_with_cache(), tmp_path / "t.jsonl", monkeypatch)
    if os.environ.get("BATCHSCOPE_UPDATE_FIXTURES"):
        trace[0]["model"] = "model-free: SGLang's scheduler driven by batchscope_sglang (no weights)"
        FIXTURE.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in trace))
    fixture = read(FIXTURE)
    assert any(st["preempted"] for st in fixture[1:-1]) and any(st["num_prefix_hit_tokens"] for st in fixture[1:-1])
    assert untimed(trace) == untimed(fixture), "re-run with BATCHSCOPE_UPDATE_FIXTURES=1"


def test_size_cap_stops_steps_with_one_message_and_keeps_a_valid_trace(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger=tracer.logger.name)
    path = tmp_path / "t.jsonl.gz"
    _, trace = traced(scenario_workload("sixteen"), path, monkeypatch, BATCHSCOPE_TRACE_MAX_MB="0.02")
    assert len(gzip.decompress(path.read_bytes())) <= 0.02 * 2**20 and schema_problems(trace) == []
    assert len(trace) > 2 and trace[-1]["truncated_at_step"] == len(trace) - 2
    assert sum("size cap" in r.getMessage() for r in caplog.records) == 1


def test_text_and_prompt_ids_only_on_request(tmp_path, monkeypatch):
    workload = scenario_workload("seed-abcd")
    _, plain = traced(workload, tmp_path / "a.jsonl", monkeypatch)
    assert plain[0]["record_text"] is False and "prompt_token_ids" not in plain[1]["arrived"][0]
    assert not any("text" in s for st in plain[1:-1] for s in st["sampled"])
    monkeypatch.setattr(tracer, "_decoder", lambda s: lambda ids: "".join(f"<{t}>" for t in ids))
    _, texts = traced(workload, tmp_path / "b.jsonl", monkeypatch, BATCHSCOPE_TRACE_TEXT="1")
    assert texts[0]["record_text"] is True and schema_problems(texts) == []
    first = next(st for st in texts[1:-1] if st["sampled"])["sampled"][0]
    assert first["text"] == f"<{first['token_id']}>" and "prompt" in texts[1]["arrived"][0]
    _, ids = traced(workload, tmp_path / "c.jsonl", monkeypatch, BATCHSCOPE_TRACE_PROMPT_IDS="1")
    by_id = {r["request_id"]: r["prompt_token_ids"] for r in workload["requests"]}
    assert {r["request_id"]: r["prompt_token_ids"] for st in ids[1:-1] for r in st["arrived"]} == by_id


def test_a_failing_tracer_never_disturbs_sglang(tmp_path, monkeypatch, caplog):
    workload = cases.retraction()
    caplog.set_level(logging.WARNING, logger=tracer.logger.name)
    expected, _ = traced(workload, tmp_path / "ok.jsonl", monkeypatch)
    rows, _ = traced(workload, tmp_path / "missing-dir" / "t.jsonl", monkeypatch)
    assert rows == expected and any("tracing disabled" in r.getMessage() for r in caplog.records)

    def boom(self, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr("batchscope_sglang.tracebook.TraceBook.processed", boom)
    rows, trace = traced(workload, tmp_path / "t.jsonl", monkeypatch)
    assert rows == expected and trace[0]["type"] == "header"
    assert sum("tracing stopped after an error" in r.getMessage() for r in caplog.records) == 1
