"""Hand-made workloads (``cases``): each shows its rule in SGLang's own run, and Batchscope agrees on every step.
The last test changes one rule of Batchscope's scheduler and sees the comparison fail: the harness can fail."""

from __future__ import annotations

import cases
import pytest
from replay import first_difference, run_batchscope

import batchscope.sglang_family.scheduler as sched
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


def _admitted_at(records, rid):
    return next(r["step"] for r in records if rid in r["admitted"])


def test_an_ignore_eos_request_is_charged_its_whole_remaining_output():
    ours, theirs = _both(cases.ignore_eos_running())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    a_done = next(r["step"] for r in theirs if "A" in r["finished"])
    assert _admitted_at(theirs, "B") == a_done + 1
    plain = run_sglang(cases.ignore_eos_running(ignore_eos=False))
    assert _admitted_at(plain, "B") == 1  # at ratio 0.7 it fits at once


def test_an_ignore_eos_admission_without_prefix_cache_runs_the_batch_in_advance():
    ours, theirs = _both(cases.ignore_eos_simulated_run())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    assert _admitted_at(theirs, "B") == 10
    assert _admitted_at(run_sglang(cases.ignore_eos_simulated_run(prefix_cache=True)), "B") == 1


@pytest.mark.parametrize(
    "case, change",
    [
        (cases.ignore_eos_running, ("_ratio", lambda req, ratio: ratio)),
        (cases.ignore_eos_simulated_run, ("IGNORE_EOS_RESERVE_TOKENS", 0)),
    ],
)
def test_a_changed_ignore_eos_rule_fails(monkeypatch, case, change):
    """Charge ignore_eos at new_token_ratio, or keep no token per request in the simulated run: the comparison fails
    at B's admission step."""
    import batchscope.sglang_family.prefill_adder as adder

    workload = case()
    theirs = run_sglang(workload)
    monkeypatch.setattr(adder, *change)
    assert first_difference(run_batchscope(workload), theirs).startswith("step 1: ")


def test_mixed_chunk_decodes_inside_the_prefill_batch():
    """``cases.mixed_chunk``: with mixing SGLang runs C's chunks of 10 (12 less A's and B's decode tokens) with A and
    B decoding in the same EXTEND batch, and the batch is C, A, B afterwards; without, C's 12 + 8 run alone."""
    ours, theirs = _both(cases.mixed_chunk())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    assert [(r["kind"], r["run"], r["mixed"]) for r in theirs[2:5]] == [
        ("extend", [["C", 10], ["A", 1], ["B", 1]], ["A", "B"]),
        ("extend", [["C", 10], ["A", 1], ["B", 1]], ["A", "B"]),
        ("decode", [["C", 1], ["A", 1], ["B", 1]], []),
    ]
    assert theirs[3]["new_token_ratio"] == theirs[1]["new_token_ratio"]  # a mixed step does not decay it
    plain = run_sglang(cases.mixed_chunk(on=False))
    assert [(r["run"], r["mixed"]) for r in plain[2:5]] == [
        ([["C", 12]], []),
        ([["C", 8]], []),
        ([["A", 1], ["B", 1], ["C", 1]], []),
    ]


def test_a_changed_mixing_rule_fails(monkeypatch):
    """Mix the decodes without taking their chunk tokens from the adder: the comparison fails at C's first chunk."""
    import batchscope.sglang_family.prefill_adder as adder

    workload = cases.mixed_chunk()
    theirs = run_sglang(workload)
    init = adder.PrefillAdder.__init__
    monkeypatch.setattr(adder.PrefillAdder, "__init__", lambda self, *a: init(self, *a[:6], 0))
    assert first_difference(run_batchscope(workload), theirs).startswith("step 2: ")


def test_eviction_drops_whole_nodes_least_recently_used_first():
    """``cases.eviction``: C's 32 tokens evict A's output node and then its whole prompt node (5 tokens for 2
    asked); D still hits B's 5; E hits nothing and evicts C's whole prompt, the oldest leaf then (its docstring)."""
    ours, theirs = _both(cases.eviction())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    assert [r["cached_tokens"] for r in theirs] == [4, 5, 9, 10, 10 - 5 + 32, 37 + 1, 38 - 32 + 5]
    assert [r["evictable_tokens"] for r in theirs] == [0, 5, 5, 10, 37, 38, 11]  # one request at a time
    assert theirs[5]["prefix_hits"] == {"D": 5} and theirs[6]["prefix_hits"] == {"E": 0}


def _changed_evict(newest_first: bool, whole: bool):
    """``RadixCache.evict`` with one rule changed: the newest leaf first, or one token at a time."""

    def evict(self, num_tokens):
        freed = 0
        while freed < num_tokens:
            leaves = [n for n in self.nodes() if not n.children and n.lock == 0]
            if not leaves:
                break
            leaf = (max if newest_first else min)(leaves, key=lambda n: n.last_access)
            take = len(leaf.key) if whole else 1
            if take == len(leaf.key):
                del leaf.parent.children[leaf.key[0]]
            del leaf.key[-take:], leaf.value[-take:]
            self.size -= take
            freed += take
        return freed

    return evict


@pytest.mark.parametrize(
    "newest_first, whole, step",
    [
        (False, False, 4),  # A's [7] and one token of a: 2 freed, 3 fewer than SGLang's
        (True, True, 5),  # B's two nodes go instead of A's: D misses b + [7]
    ],
)
def test_a_changed_eviction_rule_fails(monkeypatch, newest_first, whole, step):
    """Evict one token at a time, or the most recently used leaf first: the comparison fails where it first shows."""
    from batchscope.sglang_family.radix_cache import RadixCache

    workload = cases.eviction()
    theirs = run_sglang(workload)
    monkeypatch.setattr(RadixCache, "evict", _changed_evict(newest_first, whole))
    assert first_difference(run_batchscope(workload), theirs).startswith(f"step {step}: ")


def test_fcfs_refreshes_the_waiting_prefixes_every_32nd_sort(monkeypatch):
    """``cases.waiting_prefix_refresh``: the refresh at step 34 makes eviction spare W's cached a (2 tokens evicted
    where 5 would be without it), and W hits it at step 36; with no refresh after the first the comparison fails
    at step 34."""
    import batchscope.sglang_family.policy as policy

    ours, theirs = _both(cases.waiting_prefix_refresh())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"
    # X's 30th chunk enters the cache as step 34 begins (+4), then its 31st evicts 2
    assert [r["cached_tokens"] for r in theirs[33:35]] == [126, 126 + 4 - 2]
    assert theirs[36]["prefix_hits"] == {"W": 4}
    monkeypatch.setattr(policy, "REFRESH_INTERVAL", 10**9)
    assert first_difference(run_batchscope(cases.waiting_prefix_refresh()), theirs).startswith("step 34: ")
