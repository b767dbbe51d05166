"""The fact model's counters against independent readings: Metrics (``batchscope.steplog.metrics.summarize``, its own
pass over the records) and counts made here from the raw JSON lines, for every shipped trace."""

from __future__ import annotations

import json

import pytest
from conftest import RECORDED_TRACES, parts

from batchscope.facts import facts
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize
from batchscope.steplog.view import TraceView


@pytest.fixture(scope="module", params=RECORDED_TRACES, ids=[p.stem for p in RECORDED_TRACES])
def shipped(request):
    raw = parts([json.loads(line) for line in request.param.read_text().splitlines()])
    return raw, TraceView(trace.read(request.param))


def test_run_totals_equal_metrics(shipped):
    raw, view = shipped
    totals, m = facts(view).totals, summarize(view.records)
    assert facts(view).num_steps == m["num_steps"] == raw.steps[-1]["step"] + 1
    assert totals.num_evictions == m["num_preemptions"]
    assert totals.prefix_cache_hits == (m["prefix_cache_hits"] or 0)
    assert totals.preempted_prefix_cache_hits == (m["preempted_prefix_cache_hits"] or 0)
    assert totals.padding_slot_steps == m["padding_slot_steps"]
    assert (totals.num_finished, totals.num_aborted) == (m["num_finished"], m["num_aborted"])
    assert totals.output_tokens == sum(len(st["sampled"]) for st in raw.steps)


def test_counters_follow_the_raw_records_step_by_step(shipped):
    """At the end of step n of the clock: evictions, padding rows, head waits (a request left waiting) so far."""
    raw, view = shipped
    by_number = {st["step"]: st for st in raw.steps}
    evictions = pads = waits = 0
    for n in range(raw.steps[-1]["step"] + 1):
        st = by_number.get(n)  # None: an idle step the engine skipped
        if st is not None:
            evictions += len(st["preempted"])
            pads += len(st["padding_slots"])
            waits += bool(st["waiting"])
        c = facts(view).counters[n]
        assert (c.num_steps, c.num_evictions, c.padding_slot_steps) == (n + 1, evictions, pads), n
        if view.policy != "static":  # a static batch's head record exists only while a batch runs
            assert c.head_wait_steps == waits, n
