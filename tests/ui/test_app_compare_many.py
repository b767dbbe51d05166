"""The Compare runs page with 3 or 4 runs of one workload (``?runs=``): the pickers of sides A to D start from the
scenario's pair and its other recorded runs, the page says what differs with each run's value and shows the
metrics strip with a column per run and its best sides, a badge per side, and the player plays every run on one
step clock with each run's counters; a run of another workload is refused naming its side. Two runs stay as they
were (no ``runs`` in the URL, the pair's own counters)."""

from __future__ import annotations

import pytest
from appkit import page, player_payload, small_tables

pytestmark = pytest.mark.app


def test_three_runs_of_a_scenario_play_on_one_clock_with_a_column_each():
    at = page("page_lockstep", scenario="sixteen", runs="3", step="300")
    assert [s.value for s in at.selectbox] == ["sixteen / static", "sixteen / continuous", "sixteen / sglang"]
    assert (at.query_params["runs"], at.query_params["c"]) == ("3", "sixteen / sglang")
    settings, strip = small_tables(at)
    assert list(settings.columns) == ["setting", "A", "B", "C"]
    assert settings.set_index("setting").loc["batching"].tolist() == ["static", "continuous", "sglang"]
    steps = strip.set_index("metric").loc["steps"]
    assert (steps["A"], steps["B"], steps["best"]) == ("1222", "531", "B")  # README: 1222 and 531 steps
    assert strip.set_index("metric").loc["evictions (preempt / retract / pause)", "best"] == "tie"
    assert [c.value.split(" · ")[0] for c in at.caption[:3]] == [f":material/verified: **{s}**" for s in "ABC"]
    p = player_payload(at)
    assert [v["label"] for v in p["views"]] == ["A · static", "B · vLLM (continuous)", "C · SGLang"]
    assert p["num_steps"] == 1222 and p["initial_step"] == 300
    cards = {c["label"]: p["T"][c["values"][1221]] for c in p["counters"]}
    assert cards["padding slot-steps so far (A · B · C)"] == "3123/3123 · 0 · 0"
    assert cards["requests finished so far (A · B · C)"] == "16 · 16 · 16"


def test_four_runs_start_from_the_pair_then_the_scenarios_other_runs():
    at = page("page_lockstep", scenario="vllm-vs-sglang", runs="4")
    want = ["continuous", "sglang", "static", "continuous"]  # the pair, static, then the pair's first again
    assert [s.value for s in at.selectbox] == [f"vllm-vs-sglang / {p}" for p in want]
    assert [v["policy"] for v in player_payload(at)["views"]] == want


def test_a_run_of_another_workload_is_refused_naming_its_side():
    at = page("page_lockstep", runs="3", a="seed-abcd / static", b="seed-abcd / continuous", c="sixteen / static")
    (error,) = at.error
    assert "not of one workload" in error.value and "only in C: S01" in error.value
    assert not at.get("iframe")


def test_two_runs_are_the_pair_as_before():
    at = page("page_lockstep", scenario="seed-abcd")
    assert "runs" not in at.query_params and "c" not in at.query_params
    p = player_payload(at)
    assert [v["label"] for v in p["views"]] == ["static", "continuous"]
    assert "static steps" in [c["label"] for c in p["counters"]]


def test_four_engines_start_from_each_engines_own_scheduler():
    """vLLM, SGLang, TGI and TensorRT-LLM: not a variant of one engine's settings (TGI without chunking, TensorRT-LLM's
    MAX_UTILIZATION) before another engine."""
    at = page("page_lockstep", scenario="four-engines", runs="4")
    assert [v["policy"] for v in player_payload(at)["views"]] == ["continuous", "sglang", "tgi", "trtllm"]


def test_the_speculative_scenario_opens_on_its_drafts():
    """Found in a lecturer's trial: spec-decode opened on static vs continuous, so none of its tour's draft moments
    showed; it opens on vLLM with and without speculative decoding."""
    at = page("page_lockstep", scenario="spec-decode")
    p = player_payload(at)
    assert [v["label"] for v in p["views"]] == ["A · continuous", "B · continuous + speculative decoding"]
    assert any("draft" in m["note"] for m in p["tour"])


def test_a_pairs_metrics_strip_reads_as_its_table():
    """The pair's strip (``small_table``): each run's figure, B − A and the better side, as docs/engines-compared.md
    gives TensorRT-LLM's two capacity policies on four-engines (125 and 84 steps, 0 and 2 evictions)."""
    at = page("page_lockstep", scenario="four-engines", pair="capacity")
    (strip,) = small_tables(at)
    assert list(strip.columns) == ["metric", "unit", "A", "B", "B − A", "better"]
    steps = strip.set_index("metric").loc["steps"]
    assert (steps["A"], steps["B"], steps["B − A"], steps["better"]) == ("125", "84", "-41", "B")


def test_runs_alone_picks_the_shipped_set_of_that_many_runs():
    """``?runs=4`` on four-engines (the link the Walkthrough and the docs give) plays the four engines and the Pair
    picker says so ("four engines", not "vLLM vs SGLang" over four sides); the URL then names the pair."""
    at = page("page_lockstep", scenario="four-engines", runs="4")
    scenario, pair, runs = (b.value for b in at.get("button_group"))  # the Scenario, Pair and Runs pickers
    assert (scenario, pair, runs, at.query_params["pair"]) == ("four-engines", "engines", 4, "engines")
    assert [v["policy"] for v in player_payload(at)["views"]] == ["continuous", "sglang", "tgi", "trtllm"]
    assert "runs" not in at.query_params  # four is the pair's own number
