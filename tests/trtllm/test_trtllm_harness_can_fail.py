"""The vector harnesses can fail: a mutated expectation (one number off) is detected, for each kind of vector."""

from __future__ import annotations

import copy

import test_trtllm_capacity_vectors as capacity
import test_trtllm_micro_batch_vectors as micro
from trtllm_vectors import load, run_capacity, run_chunking, run_micro_batch


def _test(data: dict, name: str) -> dict:
    return copy.deepcopy(next(t for t in data["tests"] if t["test"].endswith("." + name)))


def test_a_mutated_capacity_expectation_is_detected():
    test = _test(capacity.DATA, "SimpleDoesntFitMaxUtilization")
    run = run_capacity(test, "MAX_UTILIZATION")
    assert capacity.mismatches(run, test, "MAX_UTILIZATION") == []
    test["pauses"][0]["resumes_at"] = 81  # one iteration late
    found = capacity.mismatches(run, test, "MAX_UTILIZATION")
    assert len(found) == 1 and found[0].startswith("pauses ")
    test = _test(capacity.DATA, "DelayDuplicateRequest")
    test["expected_by_policy"]["STATIC_BATCH"]["expected"][0]["scheduled"].pop()  # request 2 not at once
    assert capacity.mismatches(run_capacity(test, "STATIC_BATCH"), test, "STATIC_BATCH")


def test_a_mutated_reuse_count_is_detected():
    test = _test(capacity.DATA, "DelayFiveRequestsComplicated")
    test["other_checks"] = ["reused blocks at the end: 2"]
    assert capacity.mismatches(run_capacity(test, "MAX_UTILIZATION"), test, "MAX_UTILIZATION") == [
        "reused blocks 3, expected 'reused blocks at the end: 2'"
    ]


def test_a_mutated_micro_batch_expectation_is_detected():
    test = _test(micro.DATA, "SimpleNoOverlapMaxNumTokens")
    records = run_micro_batch(test)
    assert micro.mismatches(records, test) == []
    test["expected_after_iteration"][3]["after"]["context_position"]["1"] = 12  # as if it got 7, not 5
    assert micro.mismatches(records, test) == ["it 3: request 1 context_position 10 != 12"]


def test_a_mutated_chunking_expectation_is_detected():
    test = _test(load("context_chunking.json"), "FrontPriority")
    positions, _ = run_chunking(test, "EQUAL_PROGRESS")
    assert positions == test["positions_after_iteration"]["EQUAL_PROGRESS"]
    assert positions != [[15, 0], [25, 5], [25, 20], [25, 25]]  # the FCFS schedule is not equal progress
