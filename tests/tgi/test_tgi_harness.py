"""The reference comparison can fail: one changed expected value, or one changed setting, is found and named by
case, step and field."""

from __future__ import annotations

import copy

from tgi_replay import compare, load, replay


def test_a_changed_block_id_is_found_and_named():
    case = load("t01-reserve-block")
    steps, summary = replay(case.config, case.workload)
    assert compare(case, steps, summary) == []
    wrong = copy.deepcopy(case)
    wrong.steps[12]["schedule"]["admitted"][0]["blocks"][0] = 99  # C was given [2, 7, 8]
    assert compare(wrong, steps, summary) == [
        "t01-reserve-block step 12.schedule.admitted[0].blocks[0]: actual 2, expected 99"
    ]


def test_a_changed_summary_value_and_a_missing_field_are_found():
    case = load("t06-prefix-bs1")
    steps, summary = replay(case.config, case.workload)
    wrong = copy.deepcopy(case)
    wrong.summary["requests"]["B"]["cache_len"] += 1
    del steps[3]["kv"]
    problems = compare(wrong, steps, summary)
    assert any(p.startswith("t06-prefix-bs1 summary.requests.B.cache_len: actual") for p in problems), problems
    assert any(p.startswith("t06-prefix-bs1 step 3.kv: missing") for p in problems), problems


def test_a_changed_setting_changes_the_schedule():
    case = load("t02-chunked-mixed")
    for key, value in (("max_batch_prefill_tokens", 33), ("block_size", 2), ("prefix_caching", False)):
        config = {**case.config, key: value}
        assert compare(case, *replay(config, case.workload)), f"{key}={value} went unnoticed"


def test_none_and_zero_and_false_are_told_apart():
    case = load("t01-reserve-block")
    steps, summary = replay(case.config, case.workload)
    wrong = copy.deepcopy(case)
    wrong.steps[0]["schedule"]["admitted"][0]["chunk_len"] = 0  # null in the reference
    wrong.steps[1]["scheduled"][0]["sampled"] = 1  # true in the reference
    assert len(compare(wrong, steps, summary)) == 2
