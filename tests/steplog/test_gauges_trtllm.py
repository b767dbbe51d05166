"""A TensorRT-LLM trace's gauges are its executor's iteration statistics (``gauges.trtllm_gauges``):
recomputed here from the raw JSON lines of the shipped runs by other fields than the module reads (arrivals from the
header, finishes from the summary's output tokens, the pool's own used count, the capacity scheduler's record of its
pauses, the step's batched tokens), as ``_executor_loop`` / ``_update_iter_stats`` fill them (py_executor.py at
9521caf4), plus hand-computed anchors of the MAX_UTILIZATION pauses."""

from __future__ import annotations

import json
import math

import pytest
from appkit import page, player_payload
from conftest import step_records

from batchscope.app.common import TRACE_DIR
from batchscope.figures.gauges import gauge_figure, series
from batchscope.steplog import gauges as g
from batchscope.steplog import trace
from batchscope.steplog.metric_names import TRTLLM, family
from batchscope.steplog.view import TraceView

RUNS = ("four-engines-trtllm", "four-engines-trtllm_max_utilization")


def raw(name: str) -> list[dict]:
    return [json.loads(line) for line in (TRACE_DIR / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def decodes(row: dict, known: int) -> bool:
    """A generation row computes one token, the last one sampled, of a request that has ``known`` tokens; anything
    else computes prompt (a chunk, or a paused request's prompt and output again)."""
    return row["num_tokens"] == 1 and row["num_computed_tokens"] == known - 1 and known > 0


def from_raw_lines(records: list[dict]) -> dict[str, list]:
    """``IterationStats`` of each step: the active list is the first max_num_seqs requests that arrived and had not
    finished before the step (fetched first come, first served); blocks in use after the step are the pool's count
    less the blocks only the step's finished requests held; the context tokens are the batch's tokens less one per
    generation request."""
    header, steps, summary = records[0], step_records(records), records[-1]
    cap, out = header["config"]["max_num_seqs"], {}
    num_outputs = {r["request_id"]: len(r["output_token_ids"]) for r in summary["requests"]}
    prompt = {r["request_id"]: r["num_prompt_tokens"] for r in header["requests"]}
    sampled: dict[str, int] = {}
    finished_by: set[str] = set()  # before this step
    for st in steps:
        before = dict(sampled)
        arrived = [r["request_id"] for r in header["requests"] if r["arrival_step"] <= st["step"]]
        active = [r for r in arrived if r not in finished_by]
        for s in st["sampled"]:
            sampled[s["request_id"]] = sampled.get(s["request_id"], 0) + 1
        done = {r for r, n in sampled.items() if n == num_outputs[r]} - finished_by
        tables = st["kv"]["block_tables"]
        kept = {b for r in tables if r not in done for b in tables[r]}
        only_done = {b for r in done for b in tables.get(r, ())} - kept
        used = st["kv"]["num_used_blocks"] - len(only_done)
        gens = [s for s in st["scheduled"] if decodes(s, prompt[s["request_id"]] + before.get(s["request_id"], 0))]
        for key, value in (
            ("running", min(cap, len(active))),
            ("waiting", max(0, len(active) - cap)),
            ("kv_usage", used / st["kv"]["num_blocks"]),
            ("kv_used_blocks", used),
            ("scheduled", len(st["scheduled"])),
            ("context_requests", len(st["scheduled"]) - len(gens)),
            ("generation_requests", len(gens)),
            ("paused", len(st["decisions"]["scheduling_call"]["paused"])),
            ("context_tokens", st["num_batched_tokens"] - len(gens)),
            ("completed", len(finished_by | done)),
        ):
            out.setdefault(key, []).append(value)
        finished_by |= done
    return out


@pytest.mark.parametrize("name", RUNS)
def test_the_gauges_are_the_raw_lines_by_trtllms_definitions(name):
    records = raw(name)
    view = TraceView(trace.read(TRACE_DIR / f"{name}.jsonl"))
    assert [view.step_number(k) for k in range(view.num_steps)] == [st["step"] for st in step_records(records)]
    assert family(view.header) == "trtllm" and g.keys(view) == tuple(from_raw_lines(records))
    got, want = g.gauges(view), from_raw_lines(records)
    for key in g.keys(view):
        assert all(math.isclose(a, b) for a, b in zip(got[key], want[key], strict=True)), key
    assert g.unknown_note(view) is None


def test_hand_computed_anchors_of_the_pauses():
    """MAX_UTILIZATION, 27 blocks: at step 30 D is paused (its 7 blocks go back) while A, B and C decode; 21 blocks
    stay in use (A 10, B 9, C 9, sharing 3 + 1 prefix blocks). At step 49 C is paused the same way. The gauge counts
    the iteration's pauses only: 1 at those steps, 0 around them. All four are active throughout (4 = max_num_seqs),
    none queued; every request finishes."""
    got = g.gauges(TraceView(trace.read(TRACE_DIR / "four-engines-trtllm_max_utilization.jsonl")))
    assert (got["paused"][29], got["paused"][30], got["paused"][31], got["paused"][49]) == (0, 1, 0, 1)
    assert (got["kv_used_blocks"][30], got["kv_usage"][30]) == (21, 21 / 27)
    assert (got["running"][30], got["waiting"][30]) == (4, 0)
    assert (got["scheduled"][30], got["generation_requests"][30]) == (3, 3)
    assert got["context_tokens"][:3] == [32, 12, 18] and got["completed"][-1] == 4 and got["kv_usage"][-1] == 0.0


def test_a_request_beyond_the_active_list_is_not_known():
    """With max_num_seqs 3, TensorRT-LLM's active list holds A, B and C and its queue D (step 31, after D's pause);
    a step that runs all four schedules one TensorRT-LLM would still hold in its queue: the active list and the
    queue are unknown there, and the figure says so."""
    records = raw("four-engines-trtllm_max_utilization")
    cap = max(len(st["running"]) for st in step_records(records)) - 1  # 3: A, B, C and D ran together
    records[0] = {**records[0], "config": {**records[0]["config"], "max_num_seqs": cap}}
    view = TraceView(records)
    got = g.gauges(view)
    step = next(k for k, st in enumerate(view.steps) if len(st["running"]) > cap)
    assert got["running"][step] is None and got["waiting"][step] is None and got["scheduled"][step] == cap + 1
    assert (got["running"][0], got["waiting"][0]) == (2, 0) and "max_num_seqs" in (g.unknown_note(view) or "")
    assert view.steps[31]["waiting"] == ["D"] and (got["running"][31], got["waiting"][31]) == (cap, 1)  # D paused
    assert "not known" in gauge_figure(view).layout.title.text


def test_the_figure_names_trtllms_metrics():
    fig = gauge_figure(TraceView(trace.read(TRACE_DIR / "four-engines-trtllm_max_utilization.jsonl")))
    labels = [tr.name for tr in fig.data]
    assert labels[:2] == ["trtllm_num_requests_running", "trtllm_num_requests_waiting"]
    assert all(label.startswith("trtllm_") for label in labels) and "TensorRT-LLM" in fig.layout.title.text
    assert {label.split(" ")[0] for label in labels} <= {name for name, _what, _ours in TRTLLM.values()}


@pytest.mark.app
def test_the_trace_pages_player_draws_them_under_their_names():
    """The Trace page's player carries the raw lines' series, each under the name the engine exports it with."""
    (view,) = player_payload(page("page_trace", scenario="four-engines", policy="trtllm_max_utilization"))["views"]
    drawn = {tr["name"]: tr["y"] for tr in view["gauges"]["data"]}
    want = from_raw_lines(raw("four-engines-trtllm_max_utilization"))
    shipped = TraceView(trace.read(TRACE_DIR / "four-engines-trtllm_max_utilization.jsonl"))
    for key, label, _row, _color, scale in series(shipped):
        assert drawn[label] == [None if y is None else round(y * scale, 4) for y in want[key]], key
