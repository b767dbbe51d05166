"""SGLang at the edges (reference cases f01, f02, f03 of ../shared/cases/README.md, and more of each kind): requests
go through SGLang 0.5.23's own request handling (``handle_generate_request``: the output budget clipped to the pool,
a prompt too long refused) and aborts through its own ``abort_request`` (``batchscope_sglang.driver``). SGLang's run
shows the case's stated values, Batchscope's SGLang-family core agrees on every step (``replay.run_batchscope``), and
so does the trace of Batchscope's engine (``replay.run_engine_trace``). The ``changed`` tests put back the rule
Batchscope had before (vLLM's abort, the chunk in flight cached) and see the comparison fail where the case shows."""

from __future__ import annotations

import cases
import pytest
from replay import compare_trace, first_difference, run_batchscope, run_engine_trace

import batchscope.sglang_family.scheduler as sched
from batchscope_sglang.driver import run_sglang


def _agrees(workload, engine: bool = True) -> list[dict]:
    """SGLang's records for ``workload``, after checking Batchscope's core (and its engine's trace) against them."""
    theirs = run_sglang(workload)
    assert first_difference(run_batchscope(workload), theirs) == f"agrees on all {len(theirs)} steps"
    if engine:
        assert compare_trace(run_engine_trace(workload), theirs).startswith("agrees")
    return theirs


def _ran(records, rid):
    return [r["step"] for r in records if any(x == rid for x, _ in r["run"])]


def test_f01_the_output_budget_is_clipped_to_the_pool():
    theirs = _agrees(cases.f01())
    assert theirs[0]["limits"] == {"R": [18, None]}  # min(20, 39 - 20 - 1), then min(18, 40 - 20 - 2)
    assert [r["kind"] for r in theirs] == ["extend"] + ["decode"] * 17
    assert theirs[-1]["finish_reasons"] == {"R": "length"} and len(theirs) == 18


@pytest.mark.parametrize("prompt, refused", [(33, False), (34, True), (39, True)])
def test_f01_a_prompt_at_max_req_input_len_is_refused_with_an_abort(prompt, refused):
    """``max_req_input_len`` = 39 - 5 = 34: a 33-token prompt runs (its output clipped to 39 - 33 - 1 = 5); one of
    34 tokens or more is refused: SGLang runs a one-token stand-in prefill and ends it with an abort, 1 step."""
    theirs = _agrees(cases.f01(prompt))
    granted, error = theirs[0]["limits"]["R"]
    if not refused:
        assert (granted, error, len(theirs)) == (5, None, 5)
        return
    assert error.startswith(f"Input length ({prompt} tokens) exceeds the maximum allowed length (34 tokens)")
    assert theirs[0]["run"] == [["R", 1]] and theirs[0]["finish_reasons"] == {"R": "abort"} and len(theirs) == 1


def test_a_refused_request_takes_its_row_and_budget_for_a_step():
    """R (34 tokens, refused) and Q (33, clipped to 5) arrive together in f01's pool: R's stand-in is charged 1 + 1
    + its clipped 4 output tokens, so Q does not fit beside it and waits a step. The stand-in's token (id 0) enters
    the radix cache as a finished request's K/V, so Q, whose prompt starts with id 0, finds it there."""
    workload = cases.f01(34)
    workload["requests"].append({**workload["requests"][0], "request_id": "Q", "prompt_token_ids": list(range(33))})
    theirs = _agrees(workload)
    assert [r["run"] for r in theirs[:2]] == [[["R", 1]], [["Q", 32]]] and theirs[1]["prefix_hits"] == {"Q": 1}


def test_the_context_length_clips_when_it_is_smaller_than_the_pool():
    """A model context of 30 tokens in a 200-token pool: ``max_req_len`` 29, so a 20-token prompt asking 10 (the
    tokenizer manager lets prompt + max_new_tokens = the context through) gets 29 - 20 - 1 = 8: two tokens short."""
    workload = cases.f01()
    workload["config"].update(pool_tokens=200, context_len=30)
    workload["requests"][0]["max_new_tokens"] = 10
    theirs = _agrees(workload)
    assert theirs[0]["limits"] == {"R": [8, None]} and len(theirs) == 8


def test_an_unset_max_new_tokens_gets_what_the_empty_pool_holds():
    workload = cases.f01()
    workload["requests"][0]["max_new_tokens"] = None  # SGLang: 2**30, clipped
    theirs = _agrees(workload, engine=False)  # the engine's max_tokens is always set
    assert theirs[0]["limits"] == {"R": [18, None]}


def test_an_ignore_eos_request_clipped_without_the_prefix_cache_is_never_admitted():
    """SGLang's clip leaves pool - prompt - 2 = 18, but its simulated fixed-length run wants 1 more token free: R
    waits forever, in SGLang and in Batchscope (the engine refuses it up front: tests/engine/test_sglang_edges)."""
    workload = cases.f01()
    workload["config"]["enable_prefix_cache"] = False
    theirs = run_sglang(workload, max_steps=6)
    assert first_difference(run_batchscope(workload, max_steps=6), theirs) == "agrees on all 6 steps"
    assert {r["kind"] for r in theirs} == {"idle"} and theirs[-1]["head"]["stop"] == "add_one_req_ignore_eos NO_TOKEN"


def test_f02_a_running_request_runs_one_more_decode_and_is_cached():
    theirs = _agrees(cases.f02())
    assert theirs[3]["run"] == [["A", 1], ["B", 1]] and theirs[3]["finish_reasons"] == {"A": "abort"}
    assert theirs[3]["cached_tokens"] == 12 + 2  # A's 8 computed tokens: its prompt was cached, 2 more now
    assert _ran(theirs, "A") == [0, 2, 3] and len(theirs) == 5


def test_an_abort_behind_a_prefill_waits_for_the_next_decode():
    theirs = _agrees(cases.abort_behind_a_prefill())
    assert [r["kind"] for r in theirs[3:5]] == ["extend", "decode"]
    assert theirs[4]["finish_reasons"]["A"] == "abort" and _ran(theirs, "A")[-1] == 4


def test_f03_only_the_stashed_chunk_of_an_aborted_prompt_stays_cached():
    theirs = _agrees(cases.f03())
    assert theirs[2]["kind"] == "idle" and theirs[2]["aborted"] == ["X"] and theirs[2]["cached_tokens"] == 8
    assert theirs[3]["prefix_hits"] == {"Y": 8} and theirs[3]["run"] == [["Y", 8]] and theirs[4]["run"] == [["Y", 4]]
    assert len(theirs) == 5


def test_an_abort_at_the_first_chunk_leaves_nothing_cached():
    workload = cases.f03()
    workload["requests"][0]["abort_step"] = 1
    theirs = _agrees(workload)
    assert theirs[1]["aborted"] == ["X"] and theirs[1]["cached_tokens"] == 0


def test_aborts_of_waiting_retracted_and_finished_requests():
    """C, retracted at step 34, is aborted from the queue at step 35 (it holds no K/V); a waiting request aborted as
    it arrives never runs; an abort after a request finished changes nothing."""
    theirs = _agrees(cases.abort_after_retraction())
    assert cases.RETRACTED in theirs[cases.RETRACTED_AT]["retracted"]
    assert theirs[cases.RETRACTED_AT + 1]["aborted"] == [cases.RETRACTED]
    workload = cases.f02()
    workload["requests"][1]["abort_step"] = 1  # B, as it arrives
    workload["requests"][0]["abort_step"] = 40  # A, long after it finished
    theirs = _agrees(workload)
    assert theirs[1]["aborted"] == ["B"] and _ran(theirs, "B") == []
    assert theirs[-1]["finish_reasons"] == {"A": "length"}


def test_vllms_abort_rule_fails_the_comparison(monkeypatch):
    """End a running request before the step, as vLLM does (Batchscope's rule before): f02 differs at step 3."""
    workload = cases.f02()
    theirs = run_sglang(workload)
    abort = sched.SGLangScheduler.abort

    def vllm_abort(self, req):
        if abort(self, req) == "to_finish":
            req.finished, req.finish_reason = True, "abort"
            self.memory.release(req)
            self.running = [r for r in self.running if r is not req]
            return "waiting"
        return None

    monkeypatch.setattr(sched.SGLangScheduler, "abort", vllm_abort)
    assert first_difference(run_batchscope(workload), theirs).startswith("step 3: ")


def test_caching_the_chunk_in_flight_fails_the_comparison(monkeypatch):
    """Cache the aborted chunked request's last chunk (a finish's release, Batchscope's rule before): f03 differs at
    step 2, where the cache holds 16 tokens instead of 8."""
    from batchscope.sglang_family.state import Memory

    workload = cases.f03()
    theirs = run_sglang(workload)
    monkeypatch.setattr(Memory, "discard", Memory.release)
    assert first_difference(run_batchscope(workload), theirs).startswith("step 2: cached_tokens differs")


def test_refusing_up_front_fails_the_comparison(monkeypatch):
    """Clip nothing (Batchscope's rule before, which refused such a request instead): f01 differs at step 0."""
    import batchscope.sglang_family.request_handling as handling

    workload = cases.f01()
    theirs = run_sglang(workload)
    monkeypatch.setattr(handling, "clip_max_new_tokens", lambda limits, n, asked: asked)
    assert first_difference(run_batchscope(workload), theirs).startswith("step 0: ")
