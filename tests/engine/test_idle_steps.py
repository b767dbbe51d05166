"""Idle time costs nothing: an arrival at step 10**9 is reached by one jump, recorded once, and the trace still
measures and draws; idle steps on the step clock are skipped, not slept."""

from __future__ import annotations

import time

import pytest
from conftest import step_records
from fakes import EOS, FakeRunner, make_request

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.explain.narration import narrate
from batchscope.figures.budget import budget_bar
from batchscope.figures.kv import block_map
from batchscope.figures.slots import slot_grid
from batchscope.figures.timeline import timeline
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize
from batchscope.steplog.view import TraceView


def test_an_arrival_at_step_a_billion_costs_nothing_and_draws():
    reqs = [make_request("A", 3, 2, arrival_step=0), make_request("B", 3, 2, arrival_step=10**9)]
    t = time.monotonic()
    records = LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8), eos_token_ids={EOS}).run(reqs)
    assert time.monotonic() - t < 2
    trace.validate_records(records)
    steps = step_records(records)
    assert [st["step"] for st in steps] == [0, 1, 10**9, 10**9 + 1]
    assert steps[2]["idle_steps_before"] == 10**9 - 2
    s = summarize(records)
    assert s["num_steps"] == 10**9 + 2 and s["output_throughput_tok_step"] == pytest.approx(4 / (10**9 + 2))
    view = TraceView(records)
    assert view.num_steps == 5  # the idle steps 2 .. 10**9 - 1 as one record, not a billion
    assert narrate(view, 2).startswith("Steps 2–999999999: idle.")
    for i in range(view.num_steps):
        slot_grid(view, i, window=8)
        block_map(view, i)
        budget_bar(view, i)
    fig = timeline(view)
    assert list(fig.layout.xaxis.ticktext)[-1] == str(10**9 + 1)


def test_idle_on_the_step_clock_is_skipped_not_slept_even_with_a_wall_clock_request_later():
    a = make_request("A", 3, 2, arrival_step=None)
    a.arrival_time = 0.3
    b = make_request("B", 3, 2, arrival_step=50)
    records = LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8), eos_token_ids={EOS}).run([a, b])
    trace.validate_records(records)
    assert [st["step"] for st in step_records(records)][:2] == [50, 51]  # B first: idle steps cost no time
