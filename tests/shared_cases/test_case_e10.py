"""Shared case e10 (../shared/cases/README.md): very long request ids.

vLLM 0.33 names a chat request "chatcmpl-" + the X-Request-Id header + "-" + 8 characters, and an n > 1 child "{i}_" +
that; xLLM caps ids at 256 bytes. ``e10-longid.jsonl`` (a tracer trace whose X-Request-Id is a 55-character W3C
traceparent) has ids of 73 characters and two children of 75: it opens, measures and exports; a trace's ids may be
1-256 printable characters, in the schema and in the reader alike; the app shows a short label (the part after the
prefix every id shares, a child's index in front) and the full id on hover. Workload files keep their 1-64.
"""

from __future__ import annotations

import json

import pytest
from clikit import cli
from conftest import CASES

from batchscope.inputs.spec import WorkloadError, parse_spec
from batchscope.steplog import trace
from batchscope.steplog.checks import MAX_ID_CHARS, WORKLOAD_ID_CHARS, request_id_problem
from batchscope.steplog.view import TraceView

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
IDS = [
    f"chatcmpl-{TRACEPARENT}-02-0c3a9e2b",
    f"chatcmpl-{TRACEPARENT}-00-5f0c3a9e",
    f"chatcmpl-{TRACEPARENT}-01-f0c3a9e2",
    f"0_chatcmpl-{TRACEPARENT}-03-3a9e2b7d",
    f"1_chatcmpl-{TRACEPARENT}-03-a9e2b7d4",
]


def test_the_long_id_trace_opens_with_its_five_requests():
    view = TraceView(trace.read(CASES / "e10-longid.jsonl"))
    assert view.request_ids == IDS and [len(r) for r in IDS] == [73, 73, 73, 75, 75]
    assert view.num_steps == 31 and view.cut_short is None


def test_long_ids_are_shortened_for_display_only():
    view = TraceView(trace.read(CASES / "e10-longid.jsonl"))
    # the shared prefix is "chatcmpl-" + the traceparent + "-"; a child keeps its index in front
    assert [view.label(r) for r in IDS] == ["02-0c3a9…", "00-5f0c3…", "01-f0c3a…", "0_03-3a9e2…", "1_03-a9e2b…"]
    assert view.summary["requests"][0]["request_id"] == IDS[0]  # the records keep the whole id


def test_metrics_and_html_read_it(tmp_path):
    code, out, err = cli("metrics", str(CASES / "e10-longid.jsonl"))
    assert code == 0, err
    assert out.splitlines()[0].endswith(": valid trace, continuous, 31 step records, 5 requests, complete")
    code, _, err = cli("html", str(CASES / "e10-longid.jsonl"), "--out", str(tmp_path / "e10.html"))
    assert code == 0, err
    assert all(r in (tmp_path / "e10.html").read_text() for r in IDS)  # the full ids travel for the hover


def test_schema_and_reader_agree_on_the_id_limit():
    schema = json.loads(trace.schema_text())["$defs"]["id"]
    assert (schema["minLength"], schema["maxLength"]) == (1, MAX_ID_CHARS) == (1, 256)
    assert request_id_problem("x" * 256) is None
    assert request_id_problem("x" * 257) == "must be 1-256 printable characters, got 257 characters"
    records = trace.read(CASES / "e10-longid.jsonl")
    text = trace.dumps(records)
    longest = text.replace(IDS[0], IDS[0] + "x" * (256 - len(IDS[0])))
    assert trace.loads(longest)[-1]["requests"][0]["request_id"] == IDS[0].ljust(256, "x")
    with pytest.raises(trace.TraceError) as info:
        trace.loads(text.replace(IDS[0], IDS[0] + "x" * (257 - len(IDS[0]))))
    assert str(info.value) == "line 2 (step), field arrived/0/request_id: 257 characters; must be 1-256"


def test_workload_ids_keep_their_limit():
    assert WORKLOAD_ID_CHARS == 64
    parse_spec({"prompt": "hi", "max_tokens": 1, "request_id": "x" * 64}, "w.jsonl line 1")
    with pytest.raises(WorkloadError, match="1-64 printable characters, got 65 characters"):
        parse_spec({"prompt": "hi", "max_tokens": 1, "request_id": "x" * 65}, "w.jsonl line 1")
