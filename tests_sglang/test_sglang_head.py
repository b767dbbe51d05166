"""Why the head of the queue waits, against the condition that ended SGLang 0.5.23's own prefill admission
(``batchscope_sglang.probe``, read off its scheduler in every differential run: ``replay.STOP_LIMITS``). Here the
hand-computed steps: seed-abcd's, where every row is taken but the chunk tokens run out first; an admission by the
fixed-length run that spends the memory; and a changed rule that the comparison catches."""

from __future__ import annotations

import json

from replay import STOP_LIMITS, first_difference, run_batchscope, sglang_head
from test_sglang_trace import RECORDED, recorded_workload

from batchscope.steplog.reasons import checks
from batchscope_sglang.driver import run_sglang


def _seed_abcd() -> dict:
    lines = (RECORDED / "seed-abcd-sglang.jsonl").read_text().splitlines()
    return recorded_workload([json.loads(x) for x in lines if x.strip()])


def test_seed_abcd_head_waits_for_the_chunk_tokens_then_for_a_row():
    """3 rows, 32 chunk tokens; B (5), C (3) and A (71) arrive with D (7). Step 0: B, C and A's first 24 tokens
    fill the chunk: A's admission leaves ``budget_state`` OTHER. Step 1: B and C hold rows, A's continuing chunk
    holds the third and takes all 32 chunk tokens: the loop stops at ``budget_state`` OTHER (scheduler.py:4207)
    before its row check (:4226). Step 2: A's last 15 tokens leave 17 chunk tokens, and the row check finds none
    left. Then the batch is marked full until C finishes."""
    theirs = run_sglang(_seed_abcd())
    assert [r["run"] for r in theirs[:3]] == [[["B", 5], ["C", 3], ["A", 24]], [["A", 32]], [["A", 15]]]
    stops = [r["head"]["stop"] for r in theirs[:5]]
    assert stops == [
        "add_one_req OTHER after admitting",
        "budget_state OTHER",
        "no_row",
        "batch_is_full",
        "batch_is_full",
    ]
    assert [sglang_head(r)["limit"] for r in theirs[:3]] == ["token_budget", "token_budget", "max_num_seqs"]
    ours = run_batchscope(_seed_abcd())
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"


def test_checking_a_row_before_the_chunk_tokens_fails_at_seed_abcd_step_1(monkeypatch):
    """The changed rule: the engine's loop checks the rows before the chunk tokens; at step 1 it then says D waits
    for a row, where SGLang stopped for the tokens."""
    import batchscope.sglang_family.scheduler as sched

    admit = sched.SGLangScheduler._admit

    def rows_first(self, adder, step, held):
        if self.waiting and len(adder.can_run) >= self._rows_left(held):
            self.batch_is_full, self.held = True, ("max_num_seqs", 1, 0)
            return
        admit(self, adder, step, held)

    theirs = run_sglang(_seed_abcd())
    monkeypatch.setattr(sched.SGLangScheduler, "_admit", rows_first)
    assert first_difference(run_batchscope(_seed_abcd()), theirs).startswith("step 1: head differs")


def test_memory_spent_by_a_fixed_length_admission_holds_the_next_for_the_output_estimate():
    """Prefix cache off, 2 rows, 4 chunk tokens, a 37-token pool, three 1-token prompts with 24 output tokens, R1
        ignore_eos. Step 0 admits R0 (1 + 24 + 1 < 37), and R1's simulated run does not fit (33 free tokens less R0's
    24 x 0.7 over 2 rows leave under 1 per row). Step 1 admits R1
        by the fixed-length run, and the adder's ``budget_state`` after it is NO_TOKEN (schedule_policy.py:1383): R2
        is held because the memory after the estimates is spent, not by a run of its own."""
    common = {"max_new_tokens": 24, "arrival_step": 0, "output_token_ids": [7] * 24}
    workload = {
        "config": {
            "max_running_requests": 2,
            "chunked_prefill_size": 4,
            "pool_tokens": 37,
            "enable_prefix_cache": False,
        },
        "requests": [
            {"request_id": f"R{i}", "prompt_token_ids": [3], "ignore_eos": i == 1, **common} for i in range(3)
        ],
        "eos_token_ids": [2],
    }
    theirs = run_sglang(workload)
    assert [r["head"]["stop"] for r in theirs[:2]] == [
        "add_one_req_ignore_eos NO_TOKEN",
        "add_one_req_ignore_eos NO_TOKEN after admitting",
    ]
    ours = run_batchscope(workload)
    assert [h["limit"] for h in (r["head"] for r in ours[:2])] == ["sglang_fixed_length_run", "sglang_reserved_output"]
    assert first_difference(ours, theirs) == f"agrees on all {len(theirs)} steps"


def test_every_stop_names_a_limit_of_sglangs_checks():
    header = {"policy": "sglang", "config": {"enable_prefix_caching": False}}
    assert {v for v in STOP_LIMITS.values() if v} == set(checks(header)) | {"sglang_batch_full"}
