"""Compare 2 to 4 runs of one workload (sides A, B, C, D): each setting that differs with each run's value, the
same-workload check of every run against A, the metrics strip with a column per run and its best sides, each run's
counters on one step clock, and the player's payload of up to four sides. Expected values are worked out by hand
or read from the raw trace lines and the README's figures (sixteen: static 1222 steps and 3123 padding slot-steps,
continuous 531), never from the code under test."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import RECORDED, recorded_path

from batchscope.compare.lockstep import runs_counters
from batchscope.compare.runs import (
    best_sides,
    config_diff,
    diff_lines,
    metrics_strip,
    metrics_table,
    same_workloads,
    settings_diff,
)
from batchscope.player.playback import player_payload, side_labels
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


def view(scenario: str, policy: str) -> TraceView:
    return TraceView(trace.read(recorded_path(scenario, policy)))


def raw_steps(scenario: str, policy: str) -> list[dict]:
    """The step records of a shipped trace, read as plain JSON lines."""
    lines = recorded_path(scenario, policy).read_text().splitlines()
    return [json.loads(x) for x in lines[1:-1]]


def variant(v: TraceView, **config) -> TraceView:
    records = copy.deepcopy(v.records)
    records[0]["config"].update(config)
    return TraceView(records)


@pytest.fixture(scope="module")
def sixteen() -> list[TraceView]:
    return [view("sixteen", p) for p in ("static", "continuous", "sglang")]


def test_settings_diff_lists_each_differing_setting_with_every_runs_value(sixteen):
    s, c, g = sixteen
    d = variant(c, max_num_seqs=8)
    # by hand from the headers: static and continuous differ only in batching; SGLang counts its pool in 1-token
    # slots (2048 x 1 = 128 x 16 token slots); D is continuous with 8 slots instead of 4
    assert settings_diff([s, c, g, d]) == [
        {"setting": "batching", "values": ["static", "continuous", "sglang", "continuous"]},
        {"setting": "block_size", "values": ["16", "16", "1", "16"]},
        {"setting": "max_num_seqs", "values": ["4", "4", "4", "8"]},
        {"setting": "num_kv_blocks", "values": ["128", "128", "2048", "128"]},
    ]
    assert diff_lines([c, g, d])[0] == "batching: A continuous · B sglang · C continuous"
    assert settings_diff([c, c, c]) == []
    mixed = variant(c, enable_mixed_chunk=True)  # recorded only when on: the others read "off"
    assert settings_diff([c, mixed, c]) == [{"setting": "enable_mixed_chunk", "values": ["off", "on", "off"]}]
    assert config_diff(s, c) == ["batching: static → continuous"]  # the two-run lines are unchanged


def test_same_workloads_checks_every_run_against_a_and_names_its_side(sixteen):
    s, c, g = sixteen
    assert same_workloads([s, c, g]) == (
        True,
        "same workload: 16 requests with the same prompts, max_tokens, sampling and arrivals",
    )
    other = copy.deepcopy(g.records)
    other[0]["requests"][2]["max_tokens"] = 12
    assert same_workloads([s, c, TraceView(other)]) == (False, "request S03: max_tokens 400 in A, 12 in C")
    ok, why = same_workloads([s, c, g, view("seed-abcd", "continuous")])
    assert not ok and why.startswith("different requests: only in A: S01") and "only in D: " in why
    with pytest.raises(ValueError, match="compare 2 to 4 runs, got 5"):
        same_workloads([s, c, g, s, c])
    with pytest.raises(ValueError, match="got 1"):
        same_workloads([s])


def test_best_sides_by_hand():
    assert best_sides([3, 1, 1, 2], lower=True) == ["B", "C"]
    assert best_sides([3, 1, 1, 2], lower=False) == ["A"]
    assert best_sides([2, 2, 2], lower=True) == []  # a tie of every run: none is best
    assert best_sides([1, None, 2], lower=True) == []  # a run that cannot tell: none is best
    assert best_sides([0.5, 0.25], lower=False) == ["A"]


def test_metrics_table_has_a_column_per_run_and_the_best_sides(sixteen):
    s, c, g = sixteen
    rows = {r["metric"]: r for r in metrics_table([s, c, g, c])}
    sglang_steps = len(raw_steps("sixteen", "sglang"))  # no idle step in sixteen: one record per step
    assert rows["steps"]["values"] == [1222, 531, sglang_steps, 531] and 531 < sglang_steps < 1222
    assert rows["steps"]["best"] == ["B", "D"]  # the least steps, twice
    assert rows["padding slot-steps"]["values"] == [3123, 0, 0, 0] and rows["padding slot-steps"]["best"] == [
        "B",
        "C",
        "D",
    ]
    assert (
        rows["evictions (preempt / retract / pause)"]["values"] == [0, 0, 0, 0]
        and rows["evictions (preempt / retract / pause)"]["best"] == []
    )
    assert rows["throughput"]["best"] == ["B", "D"]  # the same tokens in fewer steps: higher is better
    tokens = sum(len(st["sampled"]) for st in raw_steps("sixteen", "continuous"))
    assert rows["throughput"]["values"][1] == pytest.approx(tokens / 531)
    # the two-run strip reads the same figures
    two = {r["metric"]: r for r in metrics_strip(s, c)}
    assert (two["steps"]["a"], two["steps"]["b"], two["steps"]["better"]) == (1222, 531, "b")


def test_runs_counters_follow_the_clock_and_a_finished_run_holds_its_totals(sixteen):
    s, c, g = sixteen
    cards = {card["label"]: card["values"] for card in runs_counters([s, c, g])}
    assert list(cards) == [
        "steps each run needs (A · B · C)",
        "requests finished so far (A · B · C)",
        "requests preempted / retracted so far (A · B · C)",
        "padding slot-steps so far (A · B · C)",
        "prefix-cache hit tokens so far (A · B · C)",
    ]
    sglang_steps = len(raw_steps("sixteen", "sglang"))  # no idle step in sixteen: one record per step
    assert all(len(v) == 1222 for v in cards.values())  # the longest run's clock
    assert cards["steps each run needs (A · B · C)"][0] == f"1222 · 531 · {sglang_steps}"

    def finished(policy: str, k: int) -> int:
        return sum(len(st["finished"]) for st in raw_steps("sixteen", policy)[: k + 1])

    for k in (0, 100, 300, 530, 531, 900, 1221):  # B and C end before 600: they hold 16
        want = " · ".join(str(finished(p, k)) for p in ("static", "continuous", "sglang"))
        assert cards["requests finished so far (A · B · C)"][k] == want, k
    assert cards["requests finished so far (A · B · C)"][900].endswith("16 · 16")
    assert cards["padding slot-steps so far (A · B · C)"][-1] == "3123/3123 · 0 · 0"
    pads = sum(len(st["padding_slots"]) for st in raw_steps("sixteen", "static")[:301])
    assert cards["padding slot-steps so far (A · B · C)"][300] == f"{pads}/3123 · 0 · 0"
    assert cards["requests preempted / retracted so far (A · B · C)"][-1] == "0 · 0 · 0"
    pre = runs_counters([view("preemption", p) for p in ("static", "continuous", "sglang")])
    evicted = {c["label"]: c["values"][-1] for c in pre}["requests preempted / retracted so far (A · B · C)"]
    counts = [
        sum(len(st["preempted"]) for st in raw_steps("preemption", p)) for p in ("static", "continuous", "sglang")
    ]
    assert evicted == " · ".join(map(str, counts)) and counts[1] == 1  # README: one preemption under continuous


def test_the_payload_plays_up_to_four_sides_on_the_longest_runs_clock(sixteen):
    s, c, g = sixteen
    d = variant(c, max_num_seqs=8)
    assert side_labels([s, c]) == ["static", "continuous"]  # two runs of two policies: as before
    assert side_labels([s, c, g, d]) == ["A · static", "B · vLLM (continuous)", "C · SGLang", "D · vLLM (continuous)"]
    p = player_payload([s, c, g, d], "four", window=4, counters=runs_counters([s, c, g, d]))
    assert p["num_steps"] == 1222 and len(p["views"]) == 4
    assert [v["num_steps"] for v in p["views"]] == [1222, 531, g.num_steps, 531]
    assert [v["label"] for v in p["views"]][3] == "D · vLLM (continuous)"
    assert p["views"][1]["finished_note"] == "B · vLLM (continuous) finished at step 530; holding its final state."
    assert all(len(card["values"]) == 1222 for card in p["counters"])
    with pytest.raises(ValueError, match="1 to 4 traces"):
        player_payload([s, c, g, d, s], "five")


def test_every_shipped_scenario_with_three_runs_compares_them():
    """Each scenario recorded under static, continuous and sglang is one workload under all three."""
    scenarios = sorted({p.name.rsplit("-", 1)[0] for p in RECORDED.glob("*-sglang.jsonl")})
    assert scenarios
    for sc in scenarios:
        assert same_workloads([view(sc, p) for p in ("static", "continuous", "sglang")])[0], sc
