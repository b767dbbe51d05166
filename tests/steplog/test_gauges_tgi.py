"""A TGI trace's gauges are TGI's router metrics, in TGI's definitions (``gauges.tgi_gauges``): recomputed
here from the raw JSON lines of the shipped runs without the recorded scheduling call (the batch is what ran and did
not finish; a new batch is who joins the running list; the loop's iterations follow from those, as
backends/v3/src/backend.rs runs them at db931fcf), plus hand-computed anchors of the four-engines story."""

from __future__ import annotations

import json

import pytest
from appkit import page, player_payload
from conftest import step_records

from batchscope.app.common import TRACE_DIR
from batchscope.figures.gauges import gauge_figure, series
from batchscope.steplog import gauges as g
from batchscope.steplog import trace
from batchscope.steplog.metric_names import TGI, family
from batchscope.steplog.view import TraceView

RUNS = ("four-engines-tgi", "four-engines-tgi_no_chunking")


def raw(name: str) -> list[dict]:
    return [json.loads(line) for line in (TRACE_DIR / f"{name}.jsonl").read_text().splitlines() if line.strip()]


def from_raw_lines(records: list[dict]) -> dict[str, list]:
    """TGI's gauges while each step runs, from the step lines. ``tgi_batch_current_size`` is set at the top of each
    loop iteration to the batch the last forward left; an iteration that added a new batch runs one more forward
    (the decode) without coming back to the top; an emptied batch ends the loop and sets 0."""
    header, steps = records[0], step_records(records)
    block_size = header["config"]["block_size"]
    out: dict[str, list] = {}
    size = max_tokens = None
    concat = prefills = decodes = 0
    joined_loop = False  # the step before added a new batch to a running one: this forward is its decode
    for k, st in enumerate(steps):
        before = steps[k - 1] if k else None
        gone = {f["request_id"] for f in before["finished"]} if before else set()
        left = [r for r in before["running"] if r not in gone] if before else []
        new = [r for r in st["running"] if not before or r not in before["running"]]
        if before is not None and not left:  # the loop ended: reset, and an idle server prefills its first batch
            size = max_tokens = 0
        elif left and not joined_loop:  # the top of an iteration
            size = len(left)
            max_tokens = sum(len(before["kv"]["block_tables"][r]) for r in left) * block_size
        joined_loop = bool(new) and bool(left)
        concat, prefills, decodes = concat + joined_loop, prefills + bool(new), decodes + (not new)
        arrived = {r["request_id"] for r in header["requests"] if r["arrival_step"] <= st["step"]}
        ran = {r for s in steps[: k + 1] for r in s["running"]}
        ran |= {f["request_id"] for s in steps[: k + 1] for f in s["finished"] if f["request_id"] not in st["running"]}
        for key, value in (
            ("running", size),
            ("waiting", len(arrived - ran)),
            ("batch_max_tokens", max_tokens),
            ("max_total_tokens", header["config"]["num_kv_blocks"] * block_size),
            ("next_batch_size", len(new) or None),
            ("concat", concat),
            ("prefill_calls", prefills),
            ("decode_calls", decodes),
        ):
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.parametrize("name", RUNS)
def test_the_gauges_are_the_raw_lines_by_tgis_definitions(name):
    records = raw(name)
    view = TraceView(trace.read(TRACE_DIR / f"{name}.jsonl"))
    assert [view.step_number(k) for k in range(view.num_steps)] == [st["step"] for st in step_records(records)]
    assert family(view.header) == "tgi" and g.keys(view) == tuple(from_raw_lines(records))
    got, want = g.gauges(view), from_raw_lines(records)
    for key in g.keys(view):
        assert got[key] == want[key], key


def test_hand_computed_anchors_of_the_four_engines_story():
    """216 tokens (27 blocks of 8). A (44 + 64 tokens: 14 blocks, 112 tokens) runs alone; the gauge is not set before
    the idle server's first prefill (step 0). A finishes at step 64: the loop sets 0 (step 65, the idle server
    prefills B and C: 14 + 13 blocks, 216 tokens, a token budget of 0). C finishes at 124; at 125 D joins B
    (concatenated, chunking on), and the decode at 126 runs without the loop's top: the gauge still says 1; at 127 it
    reads B and D, (14 + 9) x 8 = 184 tokens. Without chunking D is prefilled alone at 124 (B stalls), and 125 lags
    the same way."""
    got = g.gauges(TraceView(trace.read(TRACE_DIR / "four-engines-tgi.jsonl")))
    assert got["running"][:2] == [None, 1] and got["batch_max_tokens"][1] == 112
    assert (got["running"][65], got["batch_max_tokens"][65], got["next_batch_size"][65]) == (0, 0, 2)
    assert (got["running"][66], got["batch_max_tokens"][66]) == (2, 216)
    assert got["running"][124:128] == [2, 1, 1, 2] and got["batch_max_tokens"][127] == 184
    assert (got["concat"][-1], got["prefill_calls"][-1], got["waiting"][6], got["waiting"][125]) == (1, 3, 3, 0)
    flat = g.gauges(TraceView(trace.read(TRACE_DIR / "four-engines-tgi_no_chunking.jsonl")))
    assert flat["running"][123:127] == [2, 1, 1, 2] and flat["next_batch_size"][124] == 1


def test_the_figure_names_tgis_metrics():
    fig = gauge_figure(TraceView(trace.read(TRACE_DIR / "four-engines-tgi.jsonl")))
    labels = [tr.name for tr in fig.data]
    assert labels[:2] == ["tgi_batch_current_size", "tgi_queue_size"]
    assert all(label.startswith("tgi_") for label in labels) and "TGI's router metrics" in fig.layout.title.text
    assert {label.split(" ")[0] for label in labels} <= {name for name, _what, _ours in TGI.values()}


@pytest.mark.app
def test_the_trace_pages_player_draws_them_under_their_names():
    """The Trace page's player carries the raw lines' series, each under the name the engine exports it with."""
    (view,) = player_payload(page("page_trace", scenario="four-engines", policy="tgi"))["views"]
    drawn = {tr["name"]: tr["y"] for tr in view["gauges"]["data"]}
    want = from_raw_lines(raw("four-engines-tgi"))
    for key, label, _row, _color, scale in series(TraceView(trace.read(TRACE_DIR / "four-engines-tgi.jsonl"))):
        assert drawn[label] == [None if y is None else round(y * scale, 4) for y in want[key]], key
