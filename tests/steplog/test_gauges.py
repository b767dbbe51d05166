"""vLLM's Prometheus metrics after each step (``batchscope.steplog.gauges``) on the Trace page's player, against values
computed here from the trace's raw JSON lines, and hand-computed anchors of the shipped stories. (Against vLLM's
own ``make_stats()`` and ``IterationStats``: tests_vllm/test_vllm_gauges.py.)"""

from __future__ import annotations

import json
import math

import pytest
from appkit import page, player_payload
from conftest import ROOT, step_records

from batchscope.app.common import TRACE_DIR
from batchscope.figures.gauges import series
from batchscope.player.playback import player_payload as build_payload
from batchscope.steplog import gauges as g
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


def raw(name: str) -> list[dict]:
    return [json.loads(line) for line in (TRACE_DIR / name).read_text().splitlines() if line.strip()]


def from_raw_lines(records: list[dict]) -> dict[str, list]:
    """The metrics by their definitions (vllm/v1/metrics), straight from the step lines of a version 1 trace, at
    every step of the clock (a step the engine skipped as idle: nothing queued, no block held)."""
    header, recorded = records[0], step_records(records)
    by_number = {st["step"]: st for st in recorded}
    kv = {"block_tables": {}, "num_blocks": recorded[0]["kv"]["num_blocks"]}
    idle = {"running": [], "waiting": [], "finished": [], "admitted": [], "preempted": [], "sampled": [], "kv": kv}
    steps = [by_number.get(n, idle) for n in range(recorded[-1]["step"] + 1)]
    prompt = {r["request_id"]: r["num_prompt_tokens"] for r in header["requests"]}
    out: dict[str, list] = {name: [] for name in g.NAMES}
    admitted_before, emitted, first_hit, pending = set(), set(), {}, {}
    queries = hits = preemptions = 0
    for st in steps:
        gone = {f["request_id"] for f in st["finished"]}
        out[g.RUNNING].append(len([r for r in st["running"] if r not in gone]))
        out[g.WAITING].append(len([r for r in st["waiting"] if r not in gone]))
        held = {b for r, t in st["kv"]["block_tables"].items() if r not in gone for b in t}
        out[g.KV_USAGE].append(len(held) / st["kv"]["num_blocks"])
        for rid in st["admitted"]:
            if rid not in admitted_before and header["config"].get("enable_prefix_caching"):
                queries += prompt[rid]
                hits += st["num_prefix_hit_tokens"].get(rid, 0)
                first_hit[rid] = st["num_prefix_hit_tokens"].get(rid, 0)
            admitted_before.add(rid)
        out[g.QUERIES].append(queries)
        out[g.HITS].append(hits)
        out[g.HIT_RATE].append(hits / queries if queries else 0.0)
        for rid in st["preempted"]:
            pending[rid] = pending.get(rid, 0) + 1
        tokens = len(st["sampled"])
        for rid in {s["request_id"] for s in st["sampled"]}:
            preemptions += pending.pop(rid, 0)
            if rid not in emitted:
                emitted.add(rid)
                tokens += prompt[rid] - first_hit.get(rid, 0)
        out[g.PREEMPTIONS].append(preemptions)
        out[g.ITERATION_TOKENS].append(tokens if st["sampled"] else None)
    return out


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x == y or (x is not None and y is not None and math.isclose(x, y)) for x, y in zip(a, b)
    )


@pytest.mark.app
@pytest.mark.parametrize("scenario", ["preemption", "shared-prefix", "seed-abcd"])
def test_the_trace_pages_player_carries_the_gauges_of_the_raw_lines(scenario):
    """The Trace page asks the player for the metrics; each drawn series is the raw lines' (scaled as labelled)."""
    p = player_payload(page("page_trace", scenario=scenario, policy="continuous"))
    (view,) = p["views"]
    want = from_raw_lines(raw(f"{scenario}-continuous.jsonl"))
    drawn = {tr["name"]: tr["y"] for tr in view["gauges"]["data"]}
    for name, label, _row, _color, scale in series(TraceView(trace.read(TRACE_DIR / f"{scenario}-continuous.jsonl"))):
        expect = [None if y is None else round(y * scale, 4) for y in want[name]]
        assert same(drawn[label], expect), name
    cursor = view["gauges"]["layout"]["shapes"][-1]
    assert (cursor["x0"], cursor["yref"], cursor["line"]["dash"]) == (0, "paper", "dot")


def test_hand_computed_anchors_of_the_preemption_and_seed_stories():
    """preemption: A, B, C (6, 6, 5 prompt tokens) admitted at step 0 in a 24-block pool with caching on; C is
    preempted at step 27 and samples again at step 40, which is when vLLM's frontend counts the preemption;
    D (6 tokens) is first admitted at step 41. seed-abcd: B (5) and C (3) prefill whole and sample at step 0; A
    (71 tokens) samples its first token at step 2, after three chunks."""
    got = g.gauges(TraceView(trace.read(TRACE_DIR / "preemption-continuous.jsonl")))
    assert got[g.ITERATION_TOKENS][0] == 6 + 6 + 5 + 3
    assert got[g.QUERIES][0] == 17 and got[g.QUERIES][40] == 17 and got[g.QUERIES][41] == 23  # a resume is not a query
    assert got[g.PREEMPTIONS][39] == 0 and got[g.PREEMPTIONS][40] == 1 and got[g.PREEMPTIONS][-1] == 1
    assert got[g.KV_USAGE][26] == 1.0 and (got[g.RUNNING][27], got[g.WAITING][27]) == (2, 2)  # C back in the queue
    assert got[g.ITERATION_TOKENS][40] == 1 and got[g.ITERATION_TOKENS][41] == 6 + 2  # C resumed, D's first token
    seed = g.gauges(TraceView(trace.read(TRACE_DIR / "seed-abcd-continuous.jsonl")))
    assert seed[g.ITERATION_TOKENS][:3] == [5 + 3 + 2, 2, 71 + 3]
    assert seed[g.RUNNING][-1] == 0 and seed[g.KV_USAGE][-1] == 0.0  # the last finish freed every block


def test_a_cut_short_trace_has_the_gauges_of_its_complete_steps():
    text = (TRACE_DIR / "preemption-continuous.jsonl").read_text()
    lines = text.splitlines(keepends=True)
    cut = "".join(lines[:31]) + lines[31][:40]  # header, 30 whole steps, and half a line
    full = g.gauges(TraceView(trace.loads(text)))
    short = g.gauges(TraceView(trace.loads(cut)))
    assert all(short[n] == full[n][:30] for n in g.NAMES)


def test_what_a_trace_cannot_tell_is_none():
    records = trace.read(TRACE_DIR / "shared-prefix-continuous.jsonl")
    header = {**records[0], "config": {**records[0]["config"], "async_scheduling": True}}
    view = TraceView([header, *records[1:]])
    got = g.gauges(view)
    assert {n: set(got[n]) for n in (g.RUNNING, g.WAITING, g.KV_USAGE)} == {
        n: {None} for n in (g.RUNNING, g.WAITING, g.KV_USAGE)
    }
    assert "async" in g.unknown_note(view) or "asynchronously" in g.unknown_note(view)
    bare = (
        [records[0]]
        + [
            {k: v for k, v in st.items() if k not in ("num_prefix_hit_tokens", "num_cached_tokens", "decisions")}
            for st in step_records(records)
        ]
        + [records[-1]]
    )
    old = g.gauges(TraceView(bare))
    assert set(old[g.QUERIES]) == {None} and set(old[g.HIT_RATE]) == {None}
    assert old[g.ITERATION_TOKENS][0] is None and old[g.RUNNING] == g.gauges(TraceView(records))[g.RUNNING]


def test_server_trace_and_the_player_without_gauges():
    view = TraceView(trace.read(ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl"))
    got = g.gauges(view)
    ours = g.gauges(TraceView(trace.read(TRACE_DIR / "seed-abcd-continuous.jsonl")))
    assert got[g.RUNNING] == ours[g.RUNNING] and got[g.ITERATION_TOKENS] == ours[g.ITERATION_TOKENS]  # one schedule
    assert build_payload([view], "t")["views"][0]["gauges"] is None  # only where a page asks for them
    assert build_payload([view], "t", gauges=True)["views"][0]["gauges"]["data"]
