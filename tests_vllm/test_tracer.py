"""The tracing scheduler, driven model-free through the calls vLLM's engine core makes (``batchscope_vllm.driver``):
its trace of the shipped seed-abcd, preemption and sixteen workloads validates against the schema (a standard-
library check: ``batchscope.steplog.schemacheck``) and equals Batchscope's own trace of the same workload in every
scheduling field. Also: block ids exactly as vLLM holds them, prefix-cache hits, asynchronous scheduling, the size cap,
gzip, the text option, data-parallel file names, and that a failing tracer never disturbs vLLM.

Run in vLLM's venv: ``.venv-vllm/bin/python -m pytest -p no:cacheprovider tests_vllm``.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from batchscope.steplog.blocks import to_v1
from batchscope.steplog.schemacheck import compile_schema, explain
from batchscope_vllm import tracer
from batchscope_vllm.compare import compare, workload_from_trace
from batchscope_vllm.driver import run_vllm
from batchscope_vllm.tracer import TracingScheduler
from batchscope_vllm.tracewriter import trace_path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "batchscope" / "steplog" / "trace.schema.json").read_text())
FIXTURE = ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl"
STEP_FIELDS = ("step", "num_batched_tokens", "admitted", "preempted", "waiting", "running", "padding_slots")
SCHED_FIELDS = ("request_id", "kind", "num_tokens", "num_computed_tokens", "slot", "recompute")


def read(path: Path) -> list[dict]:
    data = path.read_bytes()
    text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return [json.loads(line) for line in text.decode().splitlines() if line.strip()]


def schema_problems(records: list[dict]) -> list[str]:
    """Standard-library validation of a whole trace (the same schema the app validates with)."""
    kinds = ["header"] + [f"step_v{records[0]['schema_version']}"] * (len(records) - 2) + ["summary"]
    checks = {k: compile_schema(SCHEMA, k) for k in set(kinds)}
    out = [f"line {i}: {explain(SCHEMA, k, r)}" for i, (k, r) in enumerate(zip(kinds, records), 1) if not checks[k](r)]
    out += [
        f"line {i}: type {r.get('type')}" for i, (k, r) in enumerate(zip(kinds, records), 1) if k[:4] != r["type"][:4]
    ]
    return out


def traced(workload: dict, path: Path, monkeypatch, cls=TracingScheduler, **env: str) -> tuple[list, list[dict]]:
    """Drive ``cls`` through ``workload``; (the driver's step records, the trace the tracer wrote)."""
    monkeypatch.setenv("BATCHSCOPE_TRACE", str(path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    steps = run_vllm(workload, cls)
    return steps, read(path)


def shipped(name: str) -> tuple[list[dict], dict]:
    records = read(ROOT / "batchscope" / "assets" / "traces" / f"{name}-continuous.jsonl")
    workload = workload_from_trace(records)  # the config each trace was recorded under (vLLM's defaults)
    return records, workload


def scheduling_differences(bs: list[dict], vl: list[dict]) -> list[str]:
    """Every scheduling field of two traces, step by step (``compare`` plus queues, slots, kinds, tokens)."""
    diffs = compare(bs, to_v1(vl))
    for b, v in zip(bs[1:-1], vl[1:-1]):
        diffs += [f"step {b['step']}: {k}: {b[k]} != {v[k]}" for k in STEP_FIELDS if b[k] != v[k]]
        for key, fields in (("scheduled", SCHED_FIELDS), ("sampled", ("request_id", "token_id"))):
            if [[s[f] for f in fields] for s in b[key]] != [[s[f] for f in fields] for s in v[key]]:
                diffs.append(f"step {b['step']}: {key} differs")
        filled = {s["request_id"]: s["num_computed_tokens"] + s["num_tokens"] for s in v["scheduled"]}
        if b["kv"]["num_cached_tokens"] != filled:  # the tracer leaves it to readers to derive
            diffs.append(f"step {b['step']}: kv.num_cached_tokens differs")
    mine = {r["request_id"]: r for r in vl[-1]["requests"]}
    for r in bs[-1]["requests"]:
        fields = ("output_token_ids", "finish_reason", "num_preemptions", "num_recomputed_tokens")
        diffs += [f"summary {r['request_id']}: {f}" for f in fields if r[f] != mine[r["request_id"]][f]]
    return diffs


@pytest.mark.parametrize("name", ["seed-abcd", "preemption", "sixteen"])
def test_tracer_trace_validates_and_equals_batchscope(name, tmp_path, monkeypatch):
    records, workload = shipped(name)
    steps, trace = traced(workload, tmp_path / f"{name}.jsonl", monkeypatch)
    assert schema_problems(trace) == []
    assert trace[0]["source"] == "vllm" and trace[0]["schema_version"] == 2 and trace[0]["requests"] == []
    assert [r["request_id"] for st in trace[1:-1] for r in st["arrived"]] == [
        r["request_id"] for r in workload["requests"]
    ]
    assert scheduling_differences(records, trace) == []
    tables = [st["kv"]["block_tables"] for st in to_v1(trace)[1:-1]]
    assert tables == [st["block_tables"] for st in steps]  # the very block ids vLLM held, step by step


TIMES = {"t_start", "t_end", "arrival_time", "first_scheduled_time", "first_token_time", "finish_time"}


def untimed(x):
    """A trace without its wall-clock times and run-specific header fields (model folder, date)."""
    if isinstance(x, dict):
        return {
            k: 0 if k in TIMES and v is not None else untimed(v) for k, v in x.items() if k not in ("model", "created")
        }
    return [untimed(v) for v in x] if isinstance(x, list) else x


def test_committed_fixture_is_what_the_tracer_writes(tmp_path, monkeypatch):
    """tests/data/vllm-seed-abcd.jsonl (validated by the main venv's tests, opened in the app) is current;
    ``BATCHSCOPE_UPDATE_FIXTURES=1`` rewrites it."""
    _, workload = shipped("seed-abcd")
    _, trace = traced(workload, tmp_path / "t.jsonl", monkeypatch)
    if os.environ.get("BATCHSCOPE_UPDATE_FIXTURES"):
        trace[0]["model"] = "model-free: vLLM's scheduler driven by batchscope_vllm.driver (no weights)"
        FIXTURE.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in trace))
    fixture = read(FIXTURE)
    assert "decisions" in fixture[1]
    assert untimed(trace) == untimed(fixture), "re-run with BATCHSCOPE_UPDATE_FIXTURES=1"


def test_prefix_cache_hits_and_shared_blocks(tmp_path, monkeypatch):
    prompt = list(range(10, 19))  # 2 full blocks of 4 + 1
    reqs = [
        {"request_id": r, "prompt_token_ids": prompt, "max_tokens": 3, "ignore_eos": True, "arrival_step": s}
        for r, s in (("A", 0), ("B", 1))
    ]
    config = {
        "max_num_seqs": 2,
        "max_num_batched_tokens": 16,
        "block_size": 4,
        "num_kv_blocks": 8,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
        "max_model_len": 64,
    }
    workload = {"config": config, "eos_token_ids": [], "requests": reqs, "sampled": {"A": [7] * 3, "B": [7] * 3}}
    steps, trace = traced(workload, tmp_path / "t.jsonl", monkeypatch)
    assert schema_problems(trace) == []
    assert trace[2]["num_prefix_hit_tokens"] == {"B": 8} and trace[2]["kv"]["num_used_blocks"] == 4
    v1 = to_v1(trace)
    assert [st["kv"]["block_tables"] for st in v1[1:-1]] == [st["block_tables"] for st in steps]
    assert v1[2]["kv"]["block_tables"]["A"][:2] == v1[2]["kv"]["block_tables"]["B"][:2]


def test_size_cap_stops_steps_with_one_message_and_keeps_a_valid_trace(tmp_path, monkeypatch, caplog):
    _, workload = shipped("sixteen")
    monkeypatch.setattr(tracer.logger, "propagate", True)
    path = tmp_path / "t.jsonl.gz"
    _, trace = traced(workload, path, monkeypatch, BATCHSCOPE_TRACE_MAX_MB="0.05")
    text = gzip.decompress(path.read_bytes())
    assert len(text) <= 0.05 * 2**20 and schema_problems(trace) == []
    assert 0 < len(trace) - 2 < 531 and trace[-1]["truncated_at_step"] == len(trace) - 2
    assert sum("size cap" in r.getMessage() for r in caplog.records) == 1


def test_text_only_on_request(tmp_path, monkeypatch):
    _, workload = shipped("seed-abcd")
    _, plain = traced(workload, tmp_path / "a.jsonl", monkeypatch)
    assert not any("text" in s for st in plain[1:-1] for s in st["sampled"]) and plain[0]["record_text"] is False
    monkeypatch.setattr(tracer, "_decoder", lambda cfg: lambda ids: "".join(f"<{t}>" for t in ids))
    _, texts = traced(workload, tmp_path / "b.jsonl", monkeypatch, BATCHSCOPE_TRACE_TEXT="1")
    assert texts[0]["record_text"] is True and schema_problems(texts) == []
    assert texts[1]["sampled"][0]["text"] == f"<{texts[1]['sampled'][0]['token_id']}>"
    assert texts[-1]["requests"][0]["output_text"].startswith("<") and "prompt" in texts[1]["arrived"][0]
    assert "prompt_token_ids" not in plain[1]["arrived"][0]
    _, ids = traced(workload, tmp_path / "c.jsonl", monkeypatch, BATCHSCOPE_TRACE_PROMPT_IDS="1")
    by_id = {r["request_id"]: r["prompt_token_ids"] for r in workload["requests"]}
    assert {r["request_id"]: r["prompt_token_ids"] for st in ids[1:-1] for r in st["arrived"]} == by_id


def test_a_failing_tracer_never_disturbs_vllm(tmp_path, monkeypatch, caplog):
    _, workload = shipped("preemption")
    expected = run_vllm(workload)
    monkeypatch.setattr(tracer.logger, "propagate", True)
    monkeypatch.setenv("BATCHSCOPE_TRACE", str(tmp_path / "missing-dir" / "t.jsonl"))
    assert run_vllm(workload, TracingScheduler) == expected  # cannot open the file: disabled at start-up
    assert any("tracing disabled" in r.getMessage() for r in caplog.records)

    def boom(self, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr("batchscope_vllm.tracebook.TraceBook.updated", boom)
    monkeypatch.setenv("BATCHSCOPE_TRACE", str(tmp_path / "t.jsonl"))
    assert run_vllm(workload, TracingScheduler) == expected  # an error mid-run: tracing stops, vLLM goes on
    assert sum("tracing stopped after an error" in r.getMessage() for r in caplog.records) == 1


def test_data_parallel_rank_in_the_file_name():
    assert trace_path("/t/server.jsonl.gz", 1) == "/t/server.dp1.jsonl.gz"
    assert trace_path("/t/server.jsonl", 0) == "/t/server.dp0.jsonl"
    assert trace_path("/t/server", 3) == "/t/server.dp3"
    assert trace_path("/t/server.jsonl", None) == "/t/server.jsonl"


def test_data_parallel_rank_comes_from_the_parallel_config(monkeypatch):
    """vLLM resets a non-MoE rank's ``data_parallel_size`` to 1 and rank to 0 (``reconfigure_for_independent_dp_rank``)
    but keeps ``data_parallel_index`` and names the process ``EngineCore_DP<rank>``."""
    from types import SimpleNamespace as NS

    def cfg(size, rank, index):
        return NS(parallel_config=NS(data_parallel_size=size, data_parallel_rank=rank, data_parallel_index=index))

    assert tracer._rank(cfg(1, 0, 0)) is None
    assert tracer._rank(cfg(1, 0, 2)) == 2  # an independent (non-MoE) rank
    assert tracer._rank(cfg(4, 1, 1)) == 1  # MoE data parallelism keeps the sizes
    monkeypatch.setattr(tracer.multiprocessing, "current_process", lambda: NS(name="EngineCore_DP0"))
    assert tracer._rank(cfg(1, 0, 0)) == 0


def test_an_abort_is_a_finish_with_its_reason_and_frees_the_table(tmp_path, monkeypatch):
    reqs = [
        {"request_id": r, "prompt_token_ids": [5, 6], "max_tokens": 3, "ignore_eos": True, "arrival_step": 0}
        for r in "AB"
    ]
    config = {
        "max_num_seqs": 2,
        "max_num_batched_tokens": 8,
        "block_size": 2,
        "num_kv_blocks": 8,
        "enable_chunked_prefill": True,
        "max_model_len": 64,
    }
    workload = {"config": config, "eos_token_ids": [], "requests": reqs, "sampled": {"A": [7] * 3, "B": [7]}}
    _, trace = traced(workload, tmp_path / "t.jsonl", monkeypatch)  # B wants a 2nd token: the driver aborts it
    assert schema_problems(trace) == []
    assert [(f["request_id"], f["reason"]) for f in trace[2]["finished"]] == [("B", "abort")]
    assert trace[3]["kv"]["freed"] == ["B"] and "B" not in to_v1(trace)[3]["kv"]["block_tables"]
    assert {r["request_id"]: r["finish_reason"] for r in trace[-1]["requests"]} == {"A": "length", "B": "abort"}
