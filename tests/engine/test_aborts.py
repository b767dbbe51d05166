"""Aborts in Batchscope's own engine: a workload's ``abort_step`` and ``LLMEngine.abort``, what the trace records,
the metrics by vLLM 0.33's definitions and the narration. Values are hand-computed from the workload below (the
step-by-step agreement with vLLM 0.33's scheduler is ``tests_vllm/test_vllm_differential.py``)."""

from __future__ import annotations

import pytest
from conftest import step_records

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.engine.validation import RequestError, validate_request
from batchscope.explain.narration import narrate
from batchscope.inputs.spec import WorkloadError
from batchscope.inputs.workload import parse_workload_text
from batchscope.steplog import metrics
from batchscope.steplog.report import metrics_table
from batchscope.steplog.trace import validate_records
from batchscope.steplog.view import TraceView

CONFIG = EngineConfig(
    batching="continuous",
    max_num_seqs=2,
    max_num_batched_tokens=16,
    block_size=4,
    num_kv_blocks=8,
    enable_chunked_prefill=True,
)


class Sevens:
    """A fake model: every sampling request gets token 7."""

    def __init__(self) -> None:
        self.released: list[str] = []

    def execute(self, out, block_tables) -> dict[str, list[int]]:
        return {s.request.request_id: [7] for s in out.scheduled if s.samples}

    def release(self, request_id: str) -> None:
        self.released.append(request_id)


def workload() -> list[Request]:
    """A (10-token prompt) runs from step 0 and is aborted before step 3 after 3 tokens; B (10 tokens) gets the
    budget's last 6 at step 0 and is aborted before step 1 holding 2 blocks; C is aborted at its arrival, waiting;
    D (4 tokens, 2 to make) arrives at step 1 and finishes at step 2."""

    def req(rid: str, n: int, m: int, arrival: int, abort: int | None) -> Request:
        ids = list(range(10 * (ord(rid) - 60), 10 * (ord(rid) - 60) + n))
        return Request(rid, ids, SamplingParams(max_tokens=m, ignore_eos=True), arrival_step=arrival, abort_step=abort)

    return [req("A", 10, 5, 0, 3), req("B", 10, 5, 0, 1), req("C", 2, 3, 0, 0), req("D", 4, 2, 1, None)]


@pytest.fixture
def run():
    runner = Sevens()
    records = LLMEngine(runner, CONFIG).run(workload())
    return records, runner


def test_abort_steps_end_requests_in_each_state_before_the_step(run):
    records, runner = run
    validate_records(records)
    steps = step_records(records)
    assert [[(s["request_id"], s["num_tokens"]) for s in st["scheduled"]] for st in steps] == [
        [("A", 10), ("B", 6)],
        [("A", 1), ("D", 4)],
        [("A", 1), ("D", 1)],
        [],
    ]
    assert [st["finished"] for st in steps] == [
        [
            {
                "request_id": "C",
                "reason": "abort",
                "aborted": {"state": "waiting", "num_output_tokens": 0, "num_freed_blocks": 0},
            }
        ],
        [
            {
                "request_id": "B",
                "reason": "abort",
                "aborted": {"state": "running", "num_output_tokens": 0, "num_freed_blocks": 2},
            }
        ],
        [{"request_id": "D", "reason": "length"}],
        [
            {
                "request_id": "A",
                "reason": "abort",
                "aborted": {"state": "running", "num_output_tokens": 3, "num_freed_blocks": 3},
            }
        ],
    ]
    assert steps[0]["kv"]["block_tables"]["B"] == [3, 4] and "B" not in steps[1]["kv"]["block_tables"]
    assert steps[3]["kv"]["block_tables"] == {} and steps[3]["kv"]["num_used_blocks"] == 0
    summary = {r["request_id"]: r for r in records[-1]["requests"]}
    assert [summary[r]["finish_reason"] for r in "ABCD"] == ["abort", "abort", "abort", "length"]
    assert summary["A"]["output_token_ids"] == [7, 7, 7] and summary["C"]["first_scheduled_time"] is None
    assert summary["A"]["finish_time"] <= steps[3]["t_start"]  # the abort came before step 3
    assert {r["request_id"]: r.get("abort_step") for r in records[0]["requests"]} == {"A": 3, "B": 1, "C": 0, "D": None}
    assert sorted(runner.released) == ["A", "B", "C", "D"]


def test_metrics_of_aborted_requests_follow_vllm(run):
    """Hand times: step k runs from k to k + 0.5; A was aborted at 2.75, B at 0.75, C at 0; D arrived at 1.0."""
    records, _ = run
    for st in step_records(records):
        st["t_start"], st["t_end"] = float(st["step"]), st["step"] + 0.5
    times = {
        "A": (0.0, 0.0, 0.5, 2.75),
        "B": (0.0, 0.0, None, 0.75),
        "C": (0.0, None, None, 0.0),
        "D": (1.0, 1.0, 1.5, 2.5),
    }
    for r in records[-1]["requests"]:
        keys = ("arrival_time", "first_scheduled_time", "first_token_time", "finish_time")
        r.update(zip(keys, times[r["request_id"]]))
    validate_records(records)
    m = {r["request_id"]: r for r in metrics.request_metrics(records)}
    # A: E2E to the abort, TPOT between its first and last token (0.5 and 2.5: vLLM's decode time), not to the abort
    assert (m["A"]["ttft_s"], m["A"]["e2e_s"], m["A"]["tpot_s"], m["A"]["itl_s"]) == (0.5, 2.75, 1.0, [1.0, 1.0])
    assert (m["A"]["ttft_steps"], m["A"]["e2e_steps"], m["A"]["tpot_steps"]) == (1, 3, 1.0)  # aborted at time 3
    # B: aborted before its first token: no TTFT, no TPOT; E2E to the abort (before step 1: 1 step)
    assert (m["B"]["ttft_s"], m["B"]["tpot_s"], m["B"]["e2e_s"], m["B"]["e2e_steps"]) == (None, None, 0.75, 1)
    assert (m["C"]["queue_time_s"], m["C"]["e2e_s"], m["C"]["e2e_steps"]) == (None, 0.0, 0)
    assert (m["D"]["ttft_s"], m["D"]["e2e_s"], m["D"]["tpot_s"], m["D"]["e2e_steps"]) == (0.5, 1.5, 1.0, 2)
    s = metrics.summarize(records)
    assert (s["num_requests"], s["num_finished"], s["num_aborted"]) == (4, 1, 3)
    # vLLM's histograms: TTFT and ITL whenever a token came (A's too); E2E, queue time and TPOT of finished ones
    assert (s["ttft_s"]["count"], s["ttft_s"]["mean"]) == (2, 0.5)
    assert (s["itl_s"]["count"], s["itl_s"]["mean"]) == (3, 1.0)
    assert [s[k]["count"] for k in ("e2e_s", "queue_time_s", "tpot_s", "e2e_steps")] == [1, 1, 1, 1]
    assert (s["e2e_s"]["mean"], s["e2e_steps"]["mean"]) == (1.5, 2.0)
    assert s["total_output_tokens"] == 5
    rows = {line.split()[0]: line.split() for line in metrics_table({"t": records}).splitlines()}
    assert rows["num_aborted"][1:] == ["value", "requests", "3"] and rows["num_finished"][-1] == "1"


def test_narration_says_who_aborted_when_and_what_went(run):
    records, _ = run
    view = TraceView(records)
    assert (
        "B was aborted at step 1 by the workload (its abort_step), before this step was scheduled, while running, "
        "before its first token; its 2 KV blocks went back to the pool." in narrate(view, 1)
    )
    assert (
        "C was aborted at step 0 by the workload (its abort_step), before this step was scheduled, while "
        "waiting, never admitted; it held no KV blocks." in narrate(view, 0)
    )
    assert "after 3 output tokens; its 3 KV blocks went back" in narrate(view, 3)
    assert "0/8 KV blocks in use during the step." in narrate(view, 3)  # nothing left to release after the step


def test_a_server_abort_names_no_cause_the_trace_cannot_know(run):
    records, _ = run
    records[0]["source"] = "vllm"
    text = narrate(TraceView(records), 3)
    assert "A was aborted by the frontend (client gone, timeout or a stop string: the trace cannot tell which)" in text
    assert "workload" not in text and "client went away" not in text


def test_cancel_aborts_before_the_next_step_and_ignores_finished_or_unknown_ids():
    """``LLMEngine.abort`` from a step callback (as the Playground's Cancel, from another thread): B is cancelled
    after step 0, D (not yet arrived) on its arrival at step 1; D's own id again and an unknown id change nothing."""
    engine = LLMEngine(Sevens(), CONFIG)
    reqs = [r for r in workload() if r.request_id in "BD"]
    for r in reqs:
        r.abort_step = None

    def cancel(record) -> None:
        if record["step"] == 0:
            for rid in ("B", "D", "nobody"):
                engine.abort(rid)

    records = engine.run(reqs, on_step=cancel)
    validate_records(records)
    finished = [
        (st["step"], f["request_id"], f["aborted"]["state"]) for st in step_records(records) for f in st["finished"]
    ]
    assert finished == [(1, "B", "running"), (1, "D", "waiting")]
    assert len(records) == 4  # header, steps 0 and 1, summary
    assert "B was cancelled at step 1 (LLMEngine.abort" in narrate(TraceView(records), 1)
    engine.abort("B")  # between runs: forgotten, so the next run with the same id is not touched
    fresh = [r for r in workload() if r.request_id == "B"]
    fresh[0].abort_step = None
    again = engine.run(fresh)
    assert [f["reason"] for st in step_records(again) for f in st["finished"]] == ["length"]


@pytest.mark.parametrize(
    ("value", "got"), [(-1, "-1"), (2**31, "2147483648"), (1.5, "1.5"), (True, "True"), ("3", "'3'")]
)
def test_abort_step_out_of_range_is_refused_in_one_line(value, got):
    line = f'{{"prompt_token_ids": [1, 2], "max_tokens": 2, "abort_step": {__import__("json").dumps(value)}}}'
    with pytest.raises(WorkloadError) as err:
        parse_workload_text(line, "w.jsonl")
    assert str(err.value) == (
        f"w.jsonl line 1, field 'abort_step': must be an integer step in [0, 2**31 - 1], got {got}"
    )


def test_abort_step_of_a_request_built_in_python_is_range_checked():
    req = Request("A", [1, 2], SamplingParams(max_tokens=2), abort_step=-1)
    with pytest.raises(
        RequestError, match=r"^request 'A': abort_step=-1 is out of range: an integer in \[0, 2\*\*31 - 1\]$"
    ):
        validate_request(req, CONFIG, None)
