"""The prefix-cache figures where people look: ``python -m batchscope metrics`` and the Metrics page show vLLM's
queried and hit tokens, the hit rate and the re-admission figures (with units; "n/a" for a trace that records no
hit counts), checked against values worked out by hand from the recorded traces' admissions. Also: the CLI counts
a version 2 trace's requests (declared in the steps where they arrive) as the pages do."""

from __future__ import annotations

import json

import pytest
from appkit import page
from clikit import metrics_cli
from conftest import RECORDED, ROOT, step_records

from batchscope.steplog import trace

PREFIX_ROWS = (
    "prefix_cache_queries",
    "prefix_cache_hits",
    "prefix_cache_hit_rate",
    "preempted_prefix_cache_queries",
    "preempted_prefix_cache_hits",
)

# By hand, from batchscope/assets/traces/shared-prefix-*.jsonl (block size 8): the prompts are A1 38, B 39, A2 83, C 35
# and A3 115 tokens, each looked up once at its admission, so both runs query 38 + 39 + 83 + 35 + 115 = 310 tokens.
# Continuous (admissions at steps 0, 0, 14, 16, 30): B finds the system prompt's 3 full blocks that A1 registered in
# the same step (24), A2 finds A1's 4 full prompt blocks (32), C (no system prompt) nothing, A3 A2's 10 (80):
# 24 + 32 + 0 + 80 = 136 hits, 136 / 310 = 0.4387. Static: B is formed into A1's batch, whose members cannot hit
# each other's blocks (0), the rest as above: 32 + 80 = 112 hits, 112 / 310 = 0.3613. No preemption: 0 and 0.
SHARED_PREFIX = {
    "continuous": {"prefix_cache_queries": 310, "prefix_cache_hits": 136, "prefix_cache_hit_rate": 136 / 310},
    "static": {"prefix_cache_queries": 310, "prefix_cache_hits": 112, "prefix_cache_hit_rate": 112 / 310},
}


def test_engine_metrics_shows_the_prefix_cache_figures_worked_out_by_hand(capsys):
    paths = [RECORDED / f"shared-prefix-{p}.jsonl" for p in ("static", "continuous")]
    _, rows = metrics_cli(capsys, *paths)
    for i, policy in enumerate(("static", "continuous")):
        want = SHARED_PREFIX[policy]
        assert rows["prefix_cache_queries"][0] == "tokens" and rows["prefix_cache_hits"][0] == "tokens"
        assert int(rows["prefix_cache_queries"][1][i]) == want["prefix_cache_queries"]
        assert int(rows["prefix_cache_hits"][1][i]) == want["prefix_cache_hits"]
        assert rows["prefix_cache_hit_rate"][0] == "fraction"
        assert float(rows["prefix_cache_hit_rate"][1][i]) == pytest.approx(want["prefix_cache_hit_rate"], abs=5e-5)
        assert rows["preempted_prefix_cache_queries"][1][i] == rows["preempted_prefix_cache_hits"][1][i] == "0"


def test_engine_metrics_counts_re_admissions_apart(capsys):
    """By hand, from batchscope/assets/traces/priority-continuous.jsonl (block size 4): the first admissions of L1 (6
    prompt tokens), L2 (6), H (11) and L3 (5) find nothing: 28 queried, 0 hit, rate 0. L2, preempted at step 30 with 35
    tokens of K/V (prompt 6 + 29 of its 30 sampled tokens: 8 full blocks and 3 tokens), is admitted again at step
    36 and looks up all 36 known tokens apart: H took its 8th full block (block 4) at step 34, so it finds 7 (28
    tokens), recomputes 35 - 28 = 7 and computes 1 new."""
    _, rows = metrics_cli(capsys, RECORDED / "priority-continuous.jsonl")
    got = {name: rows[name][1][0] for name in (*PREFIX_ROWS, "num_dropped_tokens", "num_recomputed_tokens")}
    assert got == {
        "prefix_cache_queries": "28",
        "prefix_cache_hits": "0",
        "prefix_cache_hit_rate": "0",
        "preempted_prefix_cache_queries": "36",
        "preempted_prefix_cache_hits": "28",
        "num_dropped_tokens": "35",
        "num_recomputed_tokens": "7",
    }
    assert {rows[name][0] for name in (*PREFIX_ROWS[:2], *PREFIX_ROWS[3:])} == {"tokens"}


def without_hit_counts(records: list[dict]) -> list[dict]:
    """The trace as recorded before steps carried hit counts (no decision records, no ``num_prefix_hit_tokens``)."""
    out = json.loads(json.dumps(records))
    for st in step_records(out):
        for field in ("decisions", "num_prefix_hit_tokens", "num_cached_tokens"):
            st.pop(field, None)
    return out


def test_a_trace_without_hit_counts_says_n_a(capsys, tmp_path):
    old = tmp_path / "old.jsonl"
    trace.write(without_hit_counts(trace.read(RECORDED / "shared-prefix-continuous.jsonl")), old)
    _, rows = metrics_cli(capsys, old)
    assert {name: rows[name][1] for name in PREFIX_ROWS} == {name: ["n/a"] for name in PREFIX_ROWS}


def test_engine_metrics_counts_the_requests_a_version_2_trace_declares_in_its_steps(capsys):
    """tests/data/vllm-seed-abcd.jsonl (the vLLM tracer, version 2) lists no request in its header: A, B, C and D
    are declared in the steps where they arrive (``arrived``), and the first line counts them, as TraceView does."""
    first, _ = metrics_cli(capsys, ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl")
    assert ", 14 step records, 4 requests, complete" in first


@pytest.mark.app
def test_metrics_page_shows_the_prefix_cache_figures():
    at = page("page_metrics", scenario="shared-prefix")
    cards: dict[str, list[str]] = {}
    for m in at.metric:
        cards.setdefault(m.label, []).append(m.value)
    assert cards["prefix hit rate"] == ["36.1%", "43.9%"]  # static, continuous: 112 / 310, 136 / 310
    assert cards["prefix hits"] == ["112 / 310 tok", "136 / 310 tok"]
    assert cards["hits on resume"] == ["0 / 0 tok", "0 / 0 tok"]
    assert not at.dataframe  # "All figures" folded: its table is built when opened
    at.session_state["metrics:all-figures"] = True
    at.run()
    table = at.dataframe[0].value.set_index("metric")
    # a column with an "n/a" (a figure no run can tell) is text
    assert [str(x) for x in table.loc["prefix_cache_hits", ["unit", "static", "continuous"]]] == [
        "tokens",
        "112",
        "136",
    ]


@pytest.mark.app
def test_metrics_page_says_n_a_where_a_trace_records_no_hit_counts():
    from streamlit.testing.v1 import AppTest

    runs = {p: without_hit_counts(trace.read(RECORDED / f"priority-{p}.jsonl")) for p in ("static", "continuous")}
    at = AppTest.from_string("from batchscope.app import page_metrics\npage_metrics.page()", default_timeout=120)
    at.session_state["playground:live-runs"] = runs
    at.query_params["scenario"] = "last playground run"
    at.run()
    assert not at.exception, at.exception
    cards = {(m.label, m.value) for m in at.metric if m.label in ("prefix hit rate", "prefix hits", "hits on resume")}
    assert cards == {("prefix hit rate", "n/a"), ("prefix hits", "n/a"), ("hits on resume", "n/a")}
    at.session_state["metrics:all-figures"] = True  # issue 32: the table said "None" where the cards say "n/a"
    at.run()
    table = at.dataframe[0].value.set_index("metric")
    assert list(table.loc["prefix_cache_hits", ["static", "continuous"]]) == ["n/a", "n/a"]
    assert "None" not in table.astype(str).to_string()
