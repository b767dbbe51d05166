"""The head-of-queue checklist against the seed story (hand-computed from the scenario) and the recorded decisions."""

from __future__ import annotations

from conftest import RECORDED

from batchscope.explain.checklist import checklist_text, head_checklist
from batchscope.steplog import trace
from batchscope.steplog.decisions import decisions
from batchscope.steplog.view import TraceView


def _view(name: str) -> TraceView:
    return TraceView(trace.read(RECORDED / f"{name}.jsonl"))


def test_d_waits_for_the_budget_then_for_a_row_in_the_seed_story():
    """seed-abcd: 3 rows, a 32-token budget. Step 1: B and C decode (2 tokens) and A prefills 30: the budget is used
    up, which vLLM's scheduler checks before the rows. Step 2: A's last chunk is 17 tokens, 19 used, but all 3 rows
    are taken. Step 3: C has finished, D is admitted: nobody waits."""
    view = _view("seed-abcd-continuous")
    step1 = head_checklist(view, 1)
    assert [(i["limit"], i["state"]) for i in step1] == [
        ("preempted_this_step", "passed"),
        ("token_budget", "binds"),
        ("max_num_seqs", "not reached"),
        ("kv_blocks_full_prompt", "not reached"),
    ]
    assert step1[1]["numbers"] == "needs 1 token, 0 left"
    step2 = {i["limit"]: i for i in head_checklist(view, 2)}
    assert step2["token_budget"]["numbers"] == "13 of 32 tokens left" and step2["token_budget"]["state"] == "passed"
    assert step2["max_num_seqs"]["state"] == "binds" and step2["max_num_seqs"]["numbers"] == "needs 1 row, 0 free"
    assert not head_checklist(view, 3)


def test_the_binding_item_is_the_recorded_limit_and_only_earlier_checks_passed():
    for path in sorted(RECORDED.glob("*.jsonl")):
        view = TraceView(trace.read(path))
        for k, st in enumerate(view.steps):
            items = head_checklist(view, k)
            assert bool(items) == bool(st["waiting"]), (path.name, k)
            if not items:
                continue
            states = [i["state"] for i in items]
            at = states.index("binds")
            assert states == ["passed"] * at + ["binds"] + ["not reached"] * (len(states) - at - 1)
            assert items[at]["limit"] == decisions(view, k)["head"]["limit"]
            assert checklist_text(view, k).startswith(f"Why {st['waiting'][0]} (head of the queue) waits")


def test_static_batch_binds_for_waiting_requests_and_a_full_batch_names_the_rows():
    view = _view("seed-abcd-static")
    assert [i["limit"] for i in head_checklist(view, 0) if i["binds"]] == ["max_num_seqs"]  # 3 rows, D is 4th
    assert [i["limit"] for i in head_checklist(view, 1) if i["binds"]] == ["static_batch_running"]


def test_sglang_checks_the_chunk_tokens_before_a_row_in_the_seed_story():
    """seed-abcd under SGLang: 3 rows, 32 chunk tokens. Step 1: B and C hold rows, A's row is its continuing chunk,
    which takes all 32 chunk tokens (24 + 32 of its 71); SGLang's loop stops at ``budget_state`` OTHER before its
    row check (scheduler.py:4207, :4226), so the rows, though all taken, are not reached. Step 2: A's last 15 tokens
    leave 17; then no row is left for D. No retraction check: SGLang retracts after its prefill attempt."""
    view = _view("seed-abcd-sglang")
    step1 = head_checklist(view, 1)
    assert [(i["limit"], i["state"], i["numbers"]) for i in step1] == [
        ("sglang_batch_full", "passed", ""),
        ("token_budget", "binds", "needs 1 token, 0 left"),
        ("max_num_seqs", "not reached", ""),
        ("sglang_reserved_output", "not reached", ""),
    ]
    step2 = {i["limit"]: (i["state"], i["numbers"]) for i in head_checklist(view, 2)}
    assert step2["token_budget"] == ("passed", "17 of 32 tokens left")
    assert step2["max_num_seqs"] == ("binds", "needs 1 row, 0 free")


def test_sglang_passed_checks_count_at_the_prefill_attempt():
    """A decode step spends none of SGLang's chunk tokens, and a request its decode batch retracts held a row when
    the prefill was tried. shared-prefix at step 30: C alone decodes, A3 needs 45 tokens of memory,
    43 left: the whole 64-token chunk was left, 1 of 3 rows used. vllm-vs-sglang step 53: C is retracted after the
    prefill attempt found the batch full; the head D's checklist has no retraction item."""
    step30 = {i["limit"]: (i["state"], i["numbers"]) for i in head_checklist(_view("shared-prefix-sglang"), 30)}
    assert step30["token_budget"] == ("passed", "64 of 64 tokens left")
    assert step30["max_num_seqs"] == ("passed", "1 / 3 rows used")
    head = _view("shared-prefix-sglang").steps[30]["decisions"]["head"]  # the record: what the checklist must say
    assert (head["request_id"], head["need"], head["left"]) == ("A3", 45, 35)
    assert step30["sglang_reserved_output"] == ("binds", "needs 45 tokens, 35 left")
    view = _view("vllm-vs-sglang-sglang")
    assert view.steps[53]["preempted"] == ["C"]
    assert [i["limit"] for i in head_checklist(view, 53)] == [
        "sglang_batch_full",
        "token_budget",
        "max_num_seqs",
        "sglang_reserved_output",
    ]
