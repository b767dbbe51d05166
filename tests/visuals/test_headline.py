"""The headline (``batchscope.explain.headline``), presenter mode's short narration, says what the step's raw record
says: read here from the trace's JSON lines (conftest.recorded: no reader in between), never from the facts it is
built on. Every step of every shipped trace: it names each request the record shows decoding, admitted, evicted and
finished, the head of the queue when one waits, and stays short enough for a column of four runs."""

from __future__ import annotations

import re

import pytest
from conftest import RECORDED_TRACES, recorded

from batchscope.explain.headline import headline
from batchscope.explain.narration import narrate
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

WORDS = {"continuous": "preempted", "static": "preempted", "sglang": "retracted", "trtllm": "paused"}


@pytest.mark.parametrize("path", RECORDED_TRACES, ids=lambda p: p.stem)
def test_the_headline_names_what_the_record_shows(path):
    header, steps, _ = recorded(*path.stem.rsplit("-", 1))
    raw = {st["step"]: st for st in steps}  # the records by step number (the reader may add idle steps between)
    view = TraceView(trace.read(path))
    for k in range(len(view.steps)):
        said = headline(view, k)
        st = raw.get(view.steps[k]["step"])
        assert said.startswith(f"Step {view.steps[k]['step']}"), (k, said)
        assert len(said) <= 200 and len(said) <= max(len(narrate(view, k)), 60), (k, said)
        if st is None or st.get("idle"):
            continue
        for s in st["scheduled"]:
            assert s["request_id"] in said or "more" in said, (k, s["request_id"], said)
        for rid in st["preempted"]:
            assert f"{rid} " in said and WORDS.get(header["policy"], "preempted") in said, (k, said)
        for f in st["finished"]:
            assert f["request_id"] in said and ("finish" in said or "aborted" in said), (k, said)
        head = (st.get("decisions") or {}).get("head")
        if head and st["waiting"]:
            assert f"{head['request_id']} waits:" in said, (k, said)
        tokens = {s["request_id"]: s["num_tokens"] for s in st["scheduled"]}
        for a in (st.get("decisions") or {}).get("admissions", []):
            redo = a["num_recompute_tokens"] if a["resumed"] else 0
            if redo > tokens.get(a["request_id"], redo) and "admitted again" in said:
                # a comeback's first chunk: this step's tokens and the total its tour moment says it computes again
                assert f"recompute {tokens[a['request_id']]} of {redo} tokens" in said, (k, said)


@pytest.mark.parametrize("path", RECORDED_TRACES, ids=lambda p: p.stem)
def test_the_short_headline_keeps_the_events_without_counts_or_why(path):
    """``short=True`` (four runs on a 960x540 screen): the same requests named from the raw record (scheduled,
    evicted, finished, the head that waits, unless it was evicted in the step), no token or draft count, no why (one
    colon: the step's), never longer than the headline."""
    header, steps, _ = recorded(*path.stem.rsplit("-", 1))
    raw = {st["step"]: st for st in steps}
    view = TraceView(trace.read(path))
    for k in range(len(view.steps)):
        said, full = headline(view, k, short=True), headline(view, k)
        st = raw.get(view.steps[k]["step"])
        assert said.startswith(f"Step {view.steps[k]['step']}") and len(said) <= len(full), (k, said, full)
        assert said.count(":") == 1 and not re.search(r"\d+ (token|draft)|cached", said), (k, said)
        if st is None or st.get("idle"):
            continue
        for s in st["scheduled"]:
            assert s["request_id"] in said or "more" in said, (k, s["request_id"], said)
        for rid in st["preempted"]:
            assert f"{rid} " in said and WORDS.get(header["policy"], "preempted") in said, (k, said)
        for f in st["finished"]:
            assert f["request_id"] in said and ("finish" in said or "aborted" in said), (k, said)
        head = (st.get("decisions") or {}).get("head")
        if head and st["waiting"] and head["request_id"] not in st["preempted"]:
            assert f"{head['request_id']} waits." in said, (k, said)
