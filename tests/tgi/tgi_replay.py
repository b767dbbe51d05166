"""Replays a TGI reference case (tests/reference/tgi/, see shared/reference/tgi/README.md) through ``TgiCore`` and
writes every step in the reference's own record shape, so a test can compare the two field by field.

The step clock of the reference: ``arrival_step: t`` queues a request before step t is scheduled; when nothing runs
and nothing waits the clock jumps to the next arrival, and that step carries ``idle_steps_before``. Every sampled
token is the same id (token values are never looked at); nobody stops early.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from batchscope.tgi_family.core import TgiCore

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "tgi"
CASES = sorted(p.name.removesuffix(".config.json") for p in REFERENCE.glob("*.config.json"))
SETTINGS = (
    "max_batch_prefill_tokens",
    "max_batch_total_tokens",
    "max_batch_size",
    "block_size",
    "waiting_served_ratio",
    "max_waiting_tokens",
    "prefix_caching",
    "prefill_chunking",
)
SAMPLED_TOKEN = 7


@dataclass
class Case:
    name: str
    config: dict
    workload: list[dict]
    expected: list[dict]  # header, steps..., summary

    @property
    def steps(self) -> list[dict]:
        return self.expected[1:-1]

    @property
    def summary(self) -> dict:
        return self.expected[-1]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load(name: str) -> Case:
    config = json.loads((REFERENCE / f"{name}.config.json").read_text())
    workload = _jsonl(REFERENCE / f"{name}.workload.jsonl")
    return Case(name, config, workload, _jsonl(REFERENCE / f"{name}.expected.jsonl"))


def make_core(config: dict) -> TgiCore:
    return TgiCore(**{k: config[k] for k in SETTINGS})


def replay(config: dict, workload: list[dict], max_steps: int = 100_000) -> tuple[list[dict], dict]:
    """Drive a core through ``workload`` on the reference's step clock: (step records, summary record)."""
    core = make_core(config)
    prompts = {r["request_id"]: r["prompt_token_ids"] for r in workload}
    pending = sorted(workload, key=lambda r: r["arrival_step"])  # stable: file order within a step
    steps: list[dict] = []
    summary = {r["request_id"]: _summary_entry(r) for r in workload}
    step = 0
    while pending or core.has_work():
        assert step < max_steps, f"no end after {max_steps} steps"
        record: dict = {"type": "step", "step": step}
        if not core.has_work() and pending[0]["arrival_step"] > step:
            record["idle_steps_before"] = pending[0]["arrival_step"] - step
            step = record["step"] = pending[0]["arrival_step"]
        record["arrived"] = [r["request_id"] for r in pending if r["arrival_step"] <= step]
        for r in [r for r in pending if r["arrival_step"] <= step]:
            core.add_request(r["request_id"], r["prompt_token_ids"], r["max_tokens"])
            pending.remove(r)
        _step(core, record, prompts, summary)
        steps.append(record)
        step += 1
    return steps, {"type": "summary", "num_steps": step, "num_requests": len(workload), "requests": summary}


def _summary_entry(r: dict) -> dict:
    return {
        "arrival_step": r["arrival_step"],
        "prompt_len": len(r["prompt_token_ids"]),
        "max_new_tokens": r["max_tokens"],
        "admitted_step": None,
        "cache_len": None,
        "first_chunk_len": None,
        "num_blocks": None,
        "first_token_step": None,
        "finished_step": None,
    }


def _step(core: TgiCore, record: dict, prompts: dict[str, list[int]], summary: dict) -> None:
    """Schedule one forward, record it as the reference does, apply it."""
    plan = core.schedule()
    tables = core.block_tables
    record.update(call="prefill" if plan.admitted else "decode", kind=plan.kind, schedule=plan.decision)
    record["scheduled"] = [
        {
            "request_id": w.request_id,
            "phase": "prompt" if w.num_computed_tokens < len(prompts[w.request_id]) else "decode",
            "num_tokens": w.num_tokens,
            "num_computed_tokens": w.num_computed_tokens,
            "sampled": w.samples,
        }
        for w in plan.work
    ]
    record.update(num_batched_tokens=sum(w.num_tokens for w in plan.work), stalled=plan.stalled)
    record["kv"] = core.pool()
    for a in plan.admitted:
        summary[a.request_id].update(
            admitted_step=record["step"], cache_len=a.cache_len, first_chunk_len=a.chunk_len, num_blocks=a.num_blocks
        )
    for w in plan.work:
        if w.samples and summary[w.request_id]["first_token_step"] is None:
            summary[w.request_id]["first_token_step"] = record["step"]
    finished = core.update(plan, {w.request_id: SAMPLED_TOKEN for w in plan.work if w.samples})
    record.update(finished=finished, waiting=core.waiting)
    for rid in finished:
        summary[rid]["finished_step"] = record["step"]
    if finished:
        assert [f["num_blocks"] for f in core.last_freed] == [len(tables[r]) for r in finished]
        record.update(kv=record["kv"], freed=core.last_freed, kv_after=core.pool())


def differences(actual: object, expected: object, where: str) -> list[str]:
    """Every place where ``actual`` differs from ``expected``, as ``where.field[i]...: actual X, expected Y``."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in [*expected, *(k for k in actual if k not in expected)]:
            if key not in actual or key not in expected:
                side = "missing" if key not in actual else "unexpected"
                out.append(f"{where}.{key}: {side} (expected {expected.get(key)!r}, actual {actual.get(key)!r})")
            else:
                out += differences(actual[key], expected[key], f"{where}.{key}")
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [d for i, (a, e) in enumerate(zip(actual, expected)) for d in differences(a, e, f"{where}[{i}]")]
    if type(actual) is not type(expected) or actual != expected:  # 1 != True, 0 != None
        return [f"{where}: actual {actual!r}, expected {expected!r}"]
    return []


def compare(case: Case, steps: list[dict], summary: dict) -> list[str]:
    """All differences between a replay and the case's expected records, each naming the case, step and field."""
    out = []
    for i, expected in enumerate(case.steps):
        actual = steps[i] if i < len(steps) else {}
        out += differences(actual, expected, f"{case.name} step {expected['step']}")
    if len(steps) > len(case.steps):
        extra = steps[len(case.steps)]["step"]
        out.append(f"{case.name}: {len(steps) - len(case.steps)} steps more than expected, from step {extra}")
    out += differences(summary, case.summary, f"{case.name} summary")
    return out
