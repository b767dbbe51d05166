"""Hand-made workloads (``cases``): each shows its rule in SGLang's own run, and Batchscope agrees on every step.
The last test changes one rule of Batchscope's scheduler and sees the comparison fail: the harness can fail."""

from __future__ import annotations

import cases
import pytest
from replay import first_difference, run_batchscope

import engine.sglang_scheduler as sched
from batchscope_sglang.driver import run_sglang


def _both(workload):
    theirs = run_sglang(workload)
    return run_batchscope(workload), theirs


def test_retraction_in_a_tiny_pool():
    ours, theirs = _both(cases.retraction())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    retractions = [r for r in theirs if r["retracted"]]
    assert retractions, "the case must make SGLang retract"
    assert all(r["kind"] == "decode" for r in retractions)
    after = theirs[theirs.index(retractions[0]) + 1]
    assert after["new_token_ratio"] > 0.7  # the estimate after a retraction, not the decayed ratio


@pytest.mark.parametrize("policy", ["fcfs", "lpm"])
def test_shared_prefixes(policy):
    ours, theirs = _both(cases.shared_prefixes(policy))
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    assert any(n == 40 for r in theirs for n in r["prefix_hits"].values())
    first = [rid for rid, _ in theirs[0]["run"]]
    assert first == (["S1", "S2"] if policy == "fcfs" else ["S1", "X", "S2"])


def test_one_chunked_request_and_its_cached_chunk():
    ours, theirs = _both(cases.chunked())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    assert theirs[0]["chunked"] == "A"
    assert {"B": 8} in [r["prefix_hits"] for r in theirs]


def test_a_changed_rule_fails(monkeypatch):
    """Retract from the other end of SGLang's keep order (the most output, shortest prompt, earliest in the
    batch first): the comparison fails at the retraction."""
    workload = cases.retraction()
    theirs = run_sglang(workload)
    step = next(r["step"] for r in theirs if r["retracted"])
    keep_order = sched._keep_order
    monkeypatch.setattr(sched, "_keep_order", lambda running: keep_order(running)[::-1])
    assert first_difference(run_batchscope(workload), theirs).startswith(f"step {step}: ")
