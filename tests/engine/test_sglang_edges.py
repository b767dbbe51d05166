"""SGLang at the pool's edge and its aborts in Batchscope's engine (``--batching sglang``): reference cases f01, f02,
f03 (../shared/cases/README.md, values from SGLang 0.5.23's own scheduler; tests_sglang/test_sglang_edges.py drives
it), their traces, facts and narration, and more of each kind. With the real model the outputs are transformers
``generate``'s; the schedules are the cases' stated ones. vLLM's family keeps vLLM's rule (an abort ends a request
before the step)."""

from __future__ import annotations

import pytest
from conftest import case_workload, hf_greedy, step_records
from fakes import make_request, run_fake

from batchscope.engine.config import EngineConfig
from batchscope.engine.llm import generate_trace
from batchscope.engine.request import Request, SamplingParams
from batchscope.explain.narration import narrate
from batchscope.facts import facts
from batchscope.facts.vocabulary import ABORTED
from batchscope.steplog import trace
from batchscope.steplog.metrics import summarize
from batchscope.steplog.view import TraceView

CONFIGS = {
    "f01": dict(num_kv_blocks=40, max_num_batched_tokens=64),
    "f02": dict(num_kv_blocks=64, max_num_batched_tokens=64),
    "f03": dict(num_kv_blocks=64, max_num_batched_tokens=8),
}


def case_requests(name: str, batching: str = "sglang") -> tuple[list[Request], dict]:
    reqs = [
        Request(
            s["request_id"],
            s["prompt_token_ids"],
            SamplingParams(max_tokens=s["max_tokens"], ignore_eos=s["ignore_eos"]),
            arrival_step=s.get("arrival_step", 0),
            abort_step=s.get("abort_step"),
        )
        for s in case_workload(name)
    ]
    return reqs, dict(batching=batching, block_size=1, max_num_seqs=4, **CONFIGS[name])


def run_case(name: str, batching: str = "sglang", extra: list[Request] = ()):
    reqs, config = case_requests(name, batching)
    *_, records = run_fake([*reqs, *extra], **config)
    trace.validate_records(records)
    return records


def summary(records) -> dict[str, tuple[int, str]]:
    return {r["request_id"]: (len(r["output_token_ids"]), r["finish_reason"]) for r in records[-1]["requests"]}


def test_f01_sglang_clips_max_tokens_to_the_pool_and_says_so():
    records = run_case("f01")
    steps = step_records(records)
    assert summary(records) == {"R": (18, "length")} and len(steps) == 18
    assert steps[0]["decisions"]["request_limits"] == [
        {"request_id": "R", "num_prompt_tokens": 20, "max_tokens": 20, "max_new_tokens": 18, "max_req_len": 39,
         "bound": "pool"}
    ]  # fmt: skip
    assert steps[0]["decisions"]["admissions"][0]["num_reserved_output_tokens"] == 18
    text = narrate(TraceView(records), 0)
    assert "SGLang cut R's max_tokens from 20 to 18 as it arrived: the pool holds 40 tokens" in text


def test_f01_a_prompt_at_max_req_input_len_ends_with_sglangs_abort():
    """34 tokens in the 40-token pool: SGLang refuses it (no Batchscope error), runs its one-token stand-in prompt
    and ends it with an abort in that step; Q (33 tokens, clipped to 5) waits behind it one step."""
    r = Request("R", list(range(100, 134)), SamplingParams(max_tokens=20, ignore_eos=True), arrival_step=0)
    q = Request("Q", list(range(200, 233)), SamplingParams(max_tokens=20, ignore_eos=True), arrival_step=0)
    *_, records = run_fake([r, q], batching="sglang", block_size=1, max_num_seqs=4, **CONFIGS["f01"])
    trace.validate_records(records)
    steps = step_records(records)
    assert [(s["request_id"], s["num_tokens"]) for s in steps[0]["scheduled"]] == [("R", 1)]
    (end,) = steps[0]["finished"]
    assert end["reason"] == "abort" and end["aborted"]["to_finish"] and end["aborted"]["state"] == "waiting"
    assert end["aborted"]["error"].startswith("Input length (34 tokens) exceeds the maximum allowed length (34 tokens)")
    assert summary(records) == {"R": (1, "abort"), "Q": (5, "length")}
    assert steps[1]["admitted"] == ["Q"]
    text = narrate(TraceView(records), 0)
    assert "SGLang refused R as it arrived" in text and "R is admitted with the one-token prompt SGLang" in text
    assert "R ends with SGLang's abort of its refused prompt after its one-token prefill" in text


def test_f02_sglang_runs_an_aborted_running_request_one_more_decode():
    records = run_case("f02")
    steps = step_records(records)
    assert summary(records) == {"A": (3, "abort"), "B": (4, "length")} and len(steps) == 5
    assert [s["request_id"] for s in steps[3]["scheduled"]] == ["A", "B"]
    assert steps[3]["finished"] == [
        {
            "request_id": "A",
            "reason": "abort",
            "aborted": {"state": "running", "num_output_tokens": 3, "num_freed_blocks": 8, "to_finish": True},
        }
    ]
    view = TraceView(records)
    f = facts(view)
    assert f.step(3).aborted == ("A",) and f.end_word("A") == ABORTED and f.requests(3)["A"].state == ABORTED
    assert f.requests(2)["A"].state != ABORTED  # still running the step before
    assert summarize(records)["num_aborted"] == 1
    text = narrate(view, 3)
    assert "SGLang only marks a running request to finish, so A ran this step with its batch" in text
    assert "with 3 output tokens" in text


def test_f02_under_vllms_rule_the_request_leaves_before_the_step():
    records = run_case("f02", batching="continuous")
    assert summary(records)["A"] == (3, "abort")  # no prefill-first: A decoded beside B at step 1
    assert "A" not in [s["request_id"] for s in step_records(records)[3]["scheduled"]]


def test_f03_the_chunk_in_flight_is_not_cached():
    records = run_case("f03")
    steps = step_records(records)
    assert len(steps) == 5 and steps[2]["scheduled"] == []
    assert steps[2]["finished"][0]["aborted"] == {"state": "running", "num_output_tokens": 0, "num_freed_blocks": 16}
    assert steps[3]["num_prefix_hit_tokens"] == {"Y": 8}
    assert [s["num_tokens"] for st in steps[3:] for s in st["scheduled"]] == [8, 4]


def test_an_abort_behind_a_prefill_batch_ends_after_the_next_decode():
    a = make_request("A", 2, 10, ignore_eos=True)
    a.abort_step = 3
    b = make_request("B", 3, 3, arrival_step=3, ignore_eos=True)
    *_, records = run_fake([a, b], batching="sglang", block_size=1, num_kv_blocks=200, max_num_seqs=2)
    steps = step_records(records)
    assert steps[3]["decisions"]["batch"]["decodes_waiting"] == ["A"] and steps[3]["finished"] == []
    assert steps[4]["finished"][0]["request_id"] == "A" and summary(records)["A"] == (4, "abort")


def test_an_aborted_retracted_request_leaves_the_queue_at_once():
    """Three 40-token answers in a 103-token pool (tests_sglang/cases.retraction): C is retracted at step 34 and
    aborted before step 35, from the queue, without K/V: state ``preempted``, nothing freed (SGLang's run of the same
    workload: tests_sglang/test_sglang_edges.py)."""
    reqs = [make_request(r, 2, 40, arrival_step=int(r == "C")) for r in "ABC"]
    reqs[2].abort_step = 35
    *_, records = run_fake(reqs, batching="sglang", block_size=1, num_kv_blocks=103, max_num_seqs=3,
                           enable_prefix_caching=False)  # fmt: skip
    steps = step_records(records)
    assert "C" in steps[34]["preempted"]
    # its 33 tokens (one a step from its admission at step 1 to step 33) stay its output: a retraction keeps them
    assert steps[35]["finished"][0]["aborted"] == {"state": "preempted", "num_output_tokens": 33, "num_freed_blocks": 0}


@pytest.mark.real_model
@pytest.mark.parametrize("name", ["f01", "f02", "f03"])
def test_f_cases_on_smollm2(smollm, name):
    """The cases' schedules with the real model, and every output equal to ``generate`` for its length."""
    specs = case_workload(name)
    records = generate_trace(smollm, specs, EngineConfig(batching="sglang", block_size=1, max_num_seqs=4,
                                                         **CONFIGS[name]))  # fmt: skip
    trace.validate_records(records)
    got = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    expected = {"f01": {"R": 18}, "f02": {"A": 3, "B": 4}, "f03": {"X": 0, "Y": 1}}[name]
    assert {rid: len(ids) for rid, ids in got.items()} == expected
    for s in (s for s in specs if expected[s["request_id"]]):
        assert got[s["request_id"]] == hf_greedy(smollm.model, s["prompt_token_ids"], expected[s["request_id"]])
    assert len(step_records(records)) == {"f01": 18, "f02": 5, "f03": 5}[name]
