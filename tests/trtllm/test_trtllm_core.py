"""``TrtllmCore`` on small hand-made workloads: what a plan says (admissions with reused blocks, chunks, pauses,
the head and why), and how a request that can never run, or a faithful no-evict deadlock, is reported."""

from __future__ import annotations

import pytest

from batchscope.trtllm_family.core import TrtllmCore


def core(**overrides) -> TrtllmCore:
    config = {
        "max_batch_size": 4,
        "max_num_tokens": 64,
        "tokens_per_block": 4,
        "num_blocks": 32,
        "capacity_policy": "guaranteed_no_evict",
        "enable_chunked_context": False,
        "context_chunking": "fcfs",
        "chunk_unit_size": 8,
        "enable_block_reuse": True,
    }
    return TrtllmCore(**(config | overrides))


def forward(c: TrtllmCore, stopped: frozenset[str] = frozenset()):
    plan = c.schedule()
    return plan, c.update(plan, {w.request_id: 5 for w in plan.work if w.samples}, set(stopped))


def test_a_duplicate_prompt_waits_one_step_then_reuses_the_stored_blocks():
    c = core()
    prompt = list(range(10))
    c.add_request("a", prompt, 3)
    c.add_request("b", prompt, 3)
    plan, _ = forward(c)
    assert [w.request_id for w in plan.work] == ["a"]
    assert plan.head == {"request_id": "b", "reason": "reuse_wait"}
    a_blocks = c.block_tables["a"]
    plan, _ = forward(c)
    (admission,) = plan.admitted
    assert admission.request_id == "b" and admission.cache_len == 8  # (10 - 1) // 4 = 2 stored blocks
    assert admission.blocks[:2] == a_blocks[:2] and admission.blocks[2] not in a_blocks
    assert admission.reserved_blocks == 1  # 13 tokens to completion = 4 blocks, 3 held
    assert [(w.request_id, w.num_tokens, w.num_computed_tokens, w.samples) for w in plan.work] == [
        ("b", 2, 8, True),
        ("a", 1, 10, True),
    ]
    assert plan.kind == "mixed"


def test_a_paused_request_recomputes_its_tokens_and_finishes_with_all_of_them():
    c = core(capacity_policy="max_utilization", num_blocks=6, enable_block_reuse=False)
    c.add_request("a", [1] * 8, 12)
    c.add_request("b", [2] * 8, 12)
    got = {"a": 0, "b": 0}
    pauses = []
    while c.has_work():
        plan, _ = forward(c)
        got.update({w.request_id: got[w.request_id] + 1 for w in plan.work if w.samples})
        pauses += plan.paused
        if plan.paused:
            assert c.waiting == ["b"] and plan.head["request_id"] == "b"
    assert [p.request_id for p in pauses] == ["b"] and pauses[0].num_generated == 5
    assert pauses[0].num_freed_blocks == 3
    assert got == {"a": 12, "b": 12}


def test_static_batch_starts_no_request_while_one_generates():
    c = core(capacity_policy="static_batch")
    c.add_request("a", [1, 2, 3], 4)
    forward(c)
    c.add_request("b", [4, 5, 6], 1)
    plan, _ = forward(c)
    assert [w.request_id for w in plan.work] == ["a"] and plan.kind == "decode"
    assert plan.head == {"request_id": "b", "reason": "static_batch_running", "num_running": 1}


def test_a_chunked_prompt_is_admitted_with_its_first_chunk():
    c = core(enable_chunked_context=True, max_num_tokens=8, chunk_unit_size=4)
    c.add_request("a", list(range(20)), 2)
    plan, _ = forward(c)
    assert plan.admitted[0].chunk_len == 8 and plan.kind == "prefill"
    assert [(w.num_tokens, w.num_computed_tokens, w.samples) for w in plan.work] == [(8, 0, False)]
    assert c.running == ["a"] and len(c.block_tables["a"]) == 5  # the whole prompt's blocks, as addSequence does


def test_an_early_stop_and_an_abort():
    c = core()
    c.add_request("a", [1, 2], 5)
    c.add_request("b", [3, 4], 5)
    _, finished = forward(c, stopped=frozenset({"a"}))
    assert finished == ["a"]
    assert c.abort("b") == "running" and c.abort("b") is None and not c.has_work()
    assert c.pool()["used_blocks"] == 0


@pytest.mark.parametrize(
    ("overrides", "limit"),
    [({"max_num_tokens": 8}, "max_num_tokens"), ({"num_blocks": 4}, "num_blocks")],
)
def test_a_request_that_can_never_run_is_reported(overrides, limit):
    c = core(**overrides)
    c.add_request("a", list(range(12)), 8)
    plan = c.schedule()
    assert plan.work == [] and plan.decision["stuck"] and plan.decision["never_fits"] == ["a"]
    assert plan.head["reason"] == "never_fits" and plan.head["limit"] == limit and plan.head["stuck"]


def test_the_no_evict_rules_can_deadlock_and_the_core_says_so():
    """TensorRT-LLM keeps only *generating* requests in the first no-evict pass: a context mid-prompt is re-checked
    behind the waiting requests ahead of it. Here B starts while A waits to reuse C's blocks; then A does not fit
    beside B's prompt blocks and ends the walk, so B never runs again: no call can schedule anything."""
    c = core(
        tokens_per_block=1,
        num_blocks=16,
        max_num_tokens=4,
        max_batch_size=3,
        enable_chunked_context=True,
        context_chunking="equal_progress",
        chunk_unit_size=1,
    )
    c.add_request("C", [1, 2, 3, 4], 3)
    c.add_request("A", [1, 2, 3, 4, 5, 6], 3)
    c.add_request("B", [9] * 8, 1)
    for _ in range(4):
        forward(c)
    plan = c.schedule()
    assert plan.work == [] and plan.decision["stuck"]
    assert plan.head == {
        "request_id": "A",
        "reason": "kv_blocks_to_completion",
        "needed": 9,
        "available": 8,
        "stuck": True,
    }
    assert c.running == ["B"] and plan.decision["never_fits"] == []


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="capacity_policy"):
        core(capacity_policy="fifo")
    with pytest.raises(ValueError, match="max_num_tokens_per_seq"):
        core(max_num_tokens_per_seq=10).add_request("a", [1] * 8, 4)
    c = core()
    c.add_request("a", [1], 1)
    with pytest.raises(ValueError, match="already active"):
        c.add_request("a", [1], 1)
