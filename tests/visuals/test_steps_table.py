"""The steps table's rows (``batchscope.figures.steps_table``), read against the trace's own records: who ran with how
many tokens, who was admitted and finished, the queue and the pool, the pool counted in its own unit (an SGLang trace's
token slots), and a long batch summarised by kind."""

from __future__ import annotations

import pytest
from conftest import recorded_path

from batchscope.figures.packing import Interner
from batchscope.figures.steps_table import columns, scheduled_cell, step_row, steps_table_payload
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


@pytest.mark.parametrize(
    ("scenario", "policy", "unit"),
    [("seed-abcd", "continuous", "KV blocks used"), ("vllm-vs-sglang", "sglang", "token slots used")],
)
def test_each_row_is_its_steps_record_and_the_pool_is_named_in_its_unit(scenario, policy, unit):
    records = trace.read(recorded_path(scenario, policy))
    view = TraceView(records)
    assert columns(view)[-1] == unit
    for k, st in enumerate(records[1:-1]):
        row = step_row(view, k)
        assert list(row) == list(columns(view))
        assert (row["step"], row["batched tokens"], row[unit]) == (
            st["step"],
            st["num_batched_tokens"],
            st["kv"]["num_used_blocks"],
        )
        assert row["waiting"] == len(st["waiting"]) and row["admitted"] == ", ".join(st["admitted"])
        if len(st["scheduled"]) <= 6:
            cells = [c.split(":") for c in row["scheduled"].split(", ")] if st["scheduled"] else []
            assert [(r, kind[0], int(kind[1:])) for r, kind in cells] == [
                (s["request_id"], s["kind"][0], s["num_tokens"]) for s in st["scheduled"]
            ]


def test_a_batch_of_more_than_six_is_counted_by_kind():
    view = TraceView(trace.read(recorded_path("seed-abcd", "continuous")))
    batch = [{"request_id": "A", "kind": "decode", "num_tokens": 1}] * 5 + [
        {"request_id": "B", "kind": "prefill", "num_tokens": 8}
    ] * 3
    assert scheduled_cell(view, batch) == "8 requests: 5 d, 3 p"
    assert scheduled_cell(view, batch[4:6]) == "A:d1, B:p8"


def test_the_payload_holds_the_span_only():
    view = TraceView(trace.read(recorded_path("preemption", "continuous")))
    intern = Interner()
    p = steps_table_payload(view, 10, 19, intern)
    assert p["first"] == 10 and len(p["rows"]) == 10
    assert [intern.table[i] for i in p["rows"][0]] == list(step_row(view, 10).values())


@pytest.mark.parametrize(("policy", "padding"), [("static", True), ("continuous", False), ("sglang", False)])
def test_padding_rows_are_a_column_only_where_static_batching_pads(policy, padding):
    """A static batch's trace counts each step's padding rows (its records' ``padding_slots``); a continuous or
    SGLang trace has none, and a column of zeros only pushed the table past the page's width."""
    records = trace.read(recorded_path("sixteen", policy))
    view = TraceView(records)
    assert ("padding rows" in columns(view)) == padding
    if padding:
        pads = [len(st["padding_slots"]) for st in records[1:-1]]
        assert any(pads) and [step_row(view, k)["padding rows"] for k in range(view.num_steps)] == pads
    else:
        assert not any(st["padding_slots"] for st in records[1:-1])
