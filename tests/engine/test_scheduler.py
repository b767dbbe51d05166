"""Scheduler tests with a fake runner (no model): hand-computed schedules and invariants.

Prompt lengths match the SmolLM2 chat-template lengths of the shared reference cases (Moon 37, compiler 36 tokens),
so the expected schedules are the cases' "vLLM-V1 rules" values, computed by hand there, not by this code.
"""

from __future__ import annotations

import pytest
from fakes import make_request, run_fake, table


def step_of(steps, rid, key):
    return [st["step"] for st in steps if any((x if isinstance(x, str) else x["request_id"]) == rid for x in st[key])]


C01 = dict(block_size=4, num_kv_blocks=14, max_num_batched_tokens=16, max_num_seqs=2)


def test_c01_full_prompt_admission_waits_instead_of_thrashing():
    """vLLM's default (``reserve_full_prompt``): B is admitted only when its whole prompt fits, after A finishes.
    Case text: A prefills 16 + 16 + 5 in steps 0-2 and decodes to step 9; B prefills 16 + 16 + 4 in steps 10-12 and
    finishes at step 19; 20 steps, 0 preemptions."""
    reqs = [make_request("A", 37, 8), make_request("B", 36, 8)]
    steps, _, _ = run_fake(reqs, **C01)
    assert len(steps) == 20 and not any(st["preempted"] for st in steps)
    assert [n for st in table(steps)[:3] for _, _, n in st] == [16, 16, 5]
    assert step_of(steps, "A", "finished") == [9] and step_of(steps, "B", "admitted") == [10]
    assert [n for st in table(steps)[10:13] for _, _, n in st] == [16, 16, 4]
    assert step_of(steps, "B", "finished") == [19]


def test_c01_preemption_by_recompute_matches_hand_schedule():
    """The first-chunk rule (``reserve_full_prompt=False``), without prefix caching, as the case text computes it."""
    reqs = [make_request("A", 37, 8), make_request("B", 36, 8)]
    steps, summary, _ = run_fake(reqs, **C01, reserve_full_prompt=False, enable_prefix_caching=False)
    assert len(steps) == 20
    assert table(steps)[2] == [("A", "prefill", 5), ("B", "prefill", 11)]
    assert step_of(steps, "B", "preempted") == [3, 5]
    assert table(steps)[4] == [("A", "decode", 1), ("B", "prefill", 15)]
    assert step_of(steps, "A", "finished") == [9] and step_of(steps, "B", "finished") == [19]
    assert [n for st in table(steps)[10:13] for _, _, n in st] == [16, 16, 4]
    assert (summary["B"]["num_preemptions"], summary["B"]["num_recomputed_tokens"]) == (2, 26)
    assert summary["A"]["num_preemptions"] == 0
    assert all(s["recompute"] for st in steps[4:5] for s in st["scheduled"] if s["request_id"] == "B")


def test_c01_with_big_budget_has_no_preemption():
    for rule in (True, False):
        reqs = [make_request("A", 37, 8), make_request("B", 36, 8)]
        steps, summary, _ = run_fake(reqs, **{**C01, "max_num_batched_tokens": 64}, reserve_full_prompt=rule)
        assert len(steps) == 16 and summary["B"]["num_preemptions"] == 0


def test_c09_mixed_step_prefill_next_to_decode():
    reqs = [make_request("A", 36, 24), make_request("B", 37, 12, arrival_step=6)]
    steps, _, _ = run_fake(reqs, max_num_batched_tokens=16, block_size=4, num_kv_blocks=32, max_num_seqs=2)
    assert table(steps)[6:9] == [[("A", "decode", 1), ("B", "prefill", n)] for n in (15, 15, 7)]
    assert [s["request_id"] for s in steps[8]["sampled"]] == ["A", "B"]
    assert step_of(steps, "B", "finished") == [19] and step_of(steps, "A", "finished") == [25]


def test_c10_strict_fcfs_no_skip_ahead():
    # SmolLM2 token counts: R0 = cat (37), L = Moon (37), S1..S3 plain prompts (5, 5, 6)
    reqs = [make_request("R0", 37, 8), make_request("L", 37, 12)] + [
        make_request(f"S{i}", n, 8) for i, n in ((1, 5), (2, 5), (3, 6))
    ]
    steps, summary, _ = run_fake(
        reqs, {"R0": 4}, block_size=4, num_kv_blocks=16, max_num_batched_tokens=64, max_num_seqs=4
    )
    assert all(st["scheduled"] and {s["request_id"] for s in st["scheduled"]} == {"R0"} for st in steps[:4])
    assert steps[4]["admitted"] == ["L", "S1", "S2", "S3"]
    assert step_of(steps, "S3", "preempted")[0] == 7 and step_of(steps, "S2", "preempted")[0] == 8
    assert summary["L"]["num_preemptions"] == 0
    assert step_of(steps, "L", "finished") == [15]
    assert [step_of(steps, r, "finished")[0] for r in ("S1", "S2", "S3")] == [11, 15, 20]


def test_seed_abcd_story():
    from batchscope.inputs.workload import load_scenario

    sc = load_scenario("seed-abcd")
    lengths = {"B": 5, "C": 3, "A": 71, "D": 7}  # SmolLM2 token counts of the scenario's prompts
    reqs = [
        make_request(s["request_id"], lengths[s["request_id"]], s["max_tokens"], ignore_eos=True)
        for s in sc["requests"]
    ]
    steps, _, _ = run_fake(reqs, **sc["config"])
    x = next(st["step"] for st in steps if any(f["request_id"] == "C" for f in st["finished"]))
    kinds = {s["request_id"]: s["kind"] for s in steps[x]["scheduled"]}
    assert kinds == {"A": "prefill", "B": "decode", "C": "decode"}
    assert steps[x + 1]["admitted"] == ["D"] and "D" in steps[x]["waiting"]
    assert {s["request_id"] for s in steps[x + 2]["scheduled"]} == {"A", "D"}
    slot_c = next(s["slot"] for s in steps[x]["scheduled"] if s["request_id"] == "C")
    assert next(s["slot"] for s in steps[x + 1]["scheduled"] if s["request_id"] == "D") == slot_c


def test_static_batch_waits_for_slowest_and_logs_padding():
    # 4 requests, 2 slots: batch {a, b} then {c, d}; a stops after 2 tokens, b runs 6.
    reqs = [make_request(r, 4, 6) for r in "abcd"]
    steps, _summary, _ = run_fake(
        reqs,
        {"a": 2, "c": 3},
        batching="static",
        max_num_seqs=2,
        max_num_batched_tokens=64,
        block_size=4,
        num_kv_blocks=16,
    )
    # batch 1: steps 0-5 (b's 6 tokens); a finishes at step 1 and pads steps 2..5; batch 2 starts at step 6
    assert step_of(steps, "a", "finished") == [1] and step_of(steps, "b", "finished") == [5]
    assert [st["step"] for st in steps if st["padding_slots"] and st["padding_slots"][0]["request_id"] == "a"] == [
        2,
        3,
        4,
        5,
    ]
    assert steps[6]["admitted"] == ["c", "d"]
    assert len(steps) == 12
    # continuous on the same workload: c is admitted the step after a finishes
    steps_c, _, _ = run_fake(
        [make_request(r, 4, 6) for r in "abcd"],
        {"a": 2, "c": 3},
        max_num_seqs=2,
        max_num_batched_tokens=64,
        block_size=4,
        num_kv_blocks=16,
    )
    assert steps_c[2]["admitted"] == ["c"] and len(steps_c) < len(steps)
    assert all(not st["padding_slots"] for st in steps_c)


def test_chunking_off_waits_for_room_instead_of_splitting():
    reqs = [make_request("a", 10, 3), make_request("b", 10, 3)]
    steps, _, _ = run_fake(
        reqs, max_num_batched_tokens=12, enable_chunked_prefill=False, max_num_seqs=2, block_size=4, num_kv_blocks=16
    )
    assert table(steps)[0] == [("a", "prefill", 10)]
    assert table(steps)[1] == [("a", "decode", 1), ("b", "prefill", 10)]


@pytest.mark.parametrize(
    "field,value",
    [
        ("num_kv_blocks", 0),
        ("max_num_batched_tokens", 0),
        ("block_size", 0),
        ("max_num_seqs", 0),
        ("batching", "fifo"),
        ("scheduling_policy", "lifo"),
    ],
)
def test_bad_config_names_field_and_range(field, value):
    from batchscope.engine.batching import validate_config
    from batchscope.engine.config import EngineConfig

    with pytest.raises(ValueError, match=field):
        validate_config(EngineConfig(**{field: value}))
    if field != "batching":  # the batching registry is above the config: only validate_config knows its names
        with pytest.raises(ValueError, match=field):
            EngineConfig(**{field: value}).validate()


def test_request_that_cannot_fit_alone_is_rejected_up_front():
    from batchscope.engine.engine import RequestError

    with pytest.raises(RequestError, match=r"num_kv_blocks=4.*>= 5"):
        run_fake([make_request("big", 15, 6)], block_size=4, num_kv_blocks=4)
    with pytest.raises(RequestError, match="max_num_batched_tokens=8"):
        run_fake([make_request("long", 9, 1)], max_num_batched_tokens=8, enable_chunked_prefill=False)
    with pytest.raises(RequestError, match="empty"):
        run_fake([make_request("empty", 0, 1)])


def test_priority_late_request_overtakes_the_queue():
    """One slot, priority policy: A and B (priority 1) arrive first, C (priority 0) at step 1. By hand: A runs
    steps 0-1 (prompt 4, 2 tokens), then C (lower value first) in steps 2-3, then B in steps 4-5; FCFS: A, B, C."""
    import warnings

    from batchscope.engine.validation import PriorityIgnoredWarning

    for policy, order in (("priority", ["A", "C", "B"]), ("fcfs", ["A", "B", "C"])):
        reqs = [make_request("A", 4, 2, priority=1), make_request("B", 4, 2, priority=1)]
        reqs.append(make_request("C", 4, 2, arrival_step=1))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            steps, _, _ = run_fake(reqs, max_num_seqs=1, block_size=4, num_kv_blocks=8, scheduling_policy=policy)
        ignored = [w for w in caught if issubclass(w.category, PriorityIgnoredWarning)]
        assert len(ignored) == (policy == "fcfs"), ignored  # FCFS says once that the priorities are ignored
        assert [a for st in steps for a in st["admitted"]] == order
        assert [st["step"] for st in steps if st["admitted"]] == [0, 2, 4]


def test_priority_victim_already_scheduled_is_taken_back():
    """vLLM's priority preemption: the victim is the running request with the largest (priority, arrival), even
    one scheduled earlier in the step, whose work is then taken back. By hand (block size 2, 5 blocks, budget 4):
    step 0 L prefills 3 (blocks 0, 1); step 1 L decodes, H (priority 0) is admitted (blocks 2, 3); step 2 L takes
    block 4; step 3 L's decode is scheduled, then H needs a block and none is free: L (priority 1) is preempted and
    un-scheduled, its blocks go back tail first ([4, 1, 0]) and H takes block 4."""
    reqs = [make_request("L", 3, 7, priority=1, ignore_eos=True), make_request("H", 3, 5, arrival_step=1)]
    steps, summary, _ = run_fake(
        reqs, max_num_seqs=2, max_num_batched_tokens=4, block_size=2, num_kv_blocks=5, scheduling_policy="priority"
    )
    assert table(steps)[1] == [("L", "decode", 1), ("H", "prefill", 3)]
    assert table(steps)[3] == [("H", "decode", 1)] and steps[3]["preempted"] == ["L"]
    assert steps[3]["num_batched_tokens"] == 1 and steps[3]["kv"]["block_tables"] == {"H": [2, 3, 4]}
    assert steps[3]["kv"]["evicted"] == [4] and steps[3]["kv"]["cached_free_blocks"] == [1, 0]
    assert summary["L"]["num_preemptions"] == 1 and summary["H"]["num_preemptions"] == 0


def test_static_batch_reserves_its_worst_case_net_of_prefix_cache_hits():
    """By hand (block size 4, 6 blocks, static): P (12-token prompt T, 1 token) runs alone and leaves T's 3 full
    blocks cached. Q and R (T + 1 token, 4 tokens each: worst case 16 tokens = 4 blocks) arrive at step 1. With the
    cache each finds T's 3 blocks and needs 1 more: 1 + 1 + 3 shared = 5 <= 6, one batch. Without it 4 + 4 > 6:
    two batches."""
    from batchscope.engine.request import Request, SamplingParams

    def run(caching: bool):
        t = list(range(100, 112))
        reqs = [Request("P", t, SamplingParams(max_tokens=1), arrival_step=0)]
        reqs += [Request(r, [*t, 7], SamplingParams(max_tokens=4, ignore_eos=True), arrival_step=1) for r in "QR"]
        cfg = dict(batching="static", max_num_seqs=2, max_num_batched_tokens=64, block_size=4, num_kv_blocks=6)
        return run_fake(reqs, **cfg, enable_prefix_caching=caching)[0]

    steps = run(True)
    assert steps[1]["admitted"] == ["Q", "R"] and steps[1]["num_prefix_hit_tokens"] == {"Q": 12, "R": 12}
    assert steps[1]["kv"]["num_reserved_blocks"] == 5 and not any(st["preempted"] for st in steps)
    assert len(steps) == 5
    steps = run(False)
    assert [st["admitted"] for st in steps if st["admitted"]] == [["P"], ["Q"], ["R"]]


def test_priority_outside_64_bits_is_refused_before_any_step():
    from batchscope.engine.engine import RequestError

    for bad in (2**63, -(2**63) - 1, 1.5, True):
        with pytest.raises(RequestError, match=r"priority=.* is out of range: an integer in \[-2\*\*63, 2\*\*63 - 1\]"):
            run_fake([make_request("x", 3, 1, priority=bad)], scheduling_policy="priority")


def test_every_shipped_scenario_passes_the_workload_checks():
    """`make traces` loads each scenario through the same checks as a user's workload file (a scenario once gave
    both arrival clocks and could not be re-recorded)."""
    from batchscope.inputs.workload import list_scenarios, load_scenario

    names = list(list_scenarios())
    assert {"seed-abcd", "sixteen", "preemption", "shared-prefix", "priority"} <= set(names)
    for name in names:
        assert load_scenario(name)["requests"]
