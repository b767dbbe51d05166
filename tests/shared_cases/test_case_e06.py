"""Shared case e06 (../shared/cases/README.md): negative and huge priorities, and priority given under FCFS.

Under the priority policy the requests run lowest first with no clamping (-2**63 and 2**63 - 1 are the ends, ties by
arrival); under FCFS they run in file order and one warning says the priorities are ignored; a priority outside the
64-bit signed range, a float, a string or a boolean is refused before the model loads, in one line naming the line,
the field and the range; a trace holding -2**63 round-trips and `metrics` reads it. The order needs no model: the
scheduler's rule is what is tested (a model-free runner samples every token).
"""

from __future__ import annotations

import time

import pytest
from clikit import assert_clear_error, cli
from conftest import CASES, step_records
from fakes import EOS, FakeRunner

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.validation import PriorityIgnoredWarning, priority_ignored_message
from batchscope.inputs.workload import read_workload, to_requests
from batchscope.steplog import trace

CONFIG = dict(max_num_seqs=1, num_kv_blocks=32, block_size=4, max_num_batched_tokens=64)


def run(policy: str) -> list[dict]:
    requests = to_requests(read_workload(CASES / "e06.jsonl"), tokenizer=None)
    config = EngineConfig(**CONFIG, scheduling_policy=policy)
    return LLMEngine(FakeRunner(), config, eos_token_ids={EOS}).run(requests)


def test_priority_policy_runs_lowest_first_without_clamping_ties_by_arrival():
    records = run("priority")
    assert [st["admitted"] for st in step_records(records)] == [["P2"], ["P6"], ["P4"], ["P3"], ["P5"], ["P1"]]


def test_fcfs_runs_in_file_order_and_says_once_that_priorities_are_ignored():
    with pytest.warns(PriorityIgnoredWarning) as warned:
        records = run("fcfs")
    assert len(warned) == 1
    assert [st["admitted"] for st in step_records(records)] == [[f"P{i}"] for i in range(1, 7)]
    requests = to_requests(read_workload(CASES / "e06.jsonl"), tokenizer=None)
    assert priority_ignored_message(requests, EngineConfig(**CONFIG)) == (
        "priority is ignored with scheduling_policy='fcfs' (set on 5 request(s), e.g. 'P1'); use "
        "scheduling_policy='priority' (--scheduling-policy priority) to apply it"
    )


def test_a_trace_holding_the_64_bit_ends_round_trips_and_metrics_reads_it(tmp_path):
    records = run("priority")
    path = tmp_path / "e06.jsonl"
    trace.write(records, path)
    priorities = [r["priority"] for r in trace.read(path)[0]["requests"]]
    assert priorities == [2**63 - 1, -(2**63), 0, -1, 1, -(2**63)]
    code, out, err = cli("metrics", str(path))
    assert code == 0 and "valid trace" in out, err


@pytest.mark.parametrize(
    "name,got",
    [
        ("over", "9223372036854775808"),
        ("under", "-9223372036854775809"),
        ("float", "1.5"),
        ("str", "'1'"),
        ("bool", "True"),
        ("floatint", "1.0"),
    ],
)
def test_a_priority_outside_the_64_bit_range_or_not_an_integer_is_refused_before_the_model_loads(tmp_path, name, got):
    t = time.monotonic()
    code, _, err = cli("run", "--workload", str(CASES / f"e06-{name}.jsonl"), "--out", str(tmp_path / "t.jsonl"))
    assert_clear_error(code, err, f"e06-{name}.jsonl line 1, field 'priority'", "[-2**63, 2**63 - 1]", f"got {got}")
    assert time.monotonic() - t < 20  # refused with the workload, before torch and the model load
    assert not (tmp_path / "t.jsonl").exists()
