"""The Playground's "A vs B" runs: the same workload under two sets of scheduler settings. The settings logic is
checked against hand-written configs; a live run (real model) checks that both runs ran the same requests with the
settings asked for, produced the same greedy text, and open on the Compare runs page."""

from __future__ import annotations

import pytest
from appkit import click, page, player_payload, wait_for_live_run
from conftest import step_records
from streamlit.testing.v1 import AppTest

from batchscope.app.playground_spec import RUN_A, RUN_B, RUN_MODES, b_differs, build_specs, run_configs
from batchscope.engine.config import EngineConfig

BASE = {
    "prompt_set": "short completions",
    "num_requests": 3,
    "lengths": "forced, equal",
    "max_tokens": 5,
    "spread": 0.0,
    "arrivals": "all at once",
    "rate": 0.5,
    "temperature": 0.0,
    "top_p": 1.0,
    "top_k": 0,
    "seed": 0,
    "batching": "continuous",
    "max_num_seqs": 4,
    "max_num_batched_tokens": 64,
    "enable_chunked_prefill": True,
    "num_kv_blocks": 64,
    "block_size": 16,
    "enable_prefix_caching": True,
    "reserve_full_prompt": True,
}


def test_run_modes_give_the_runs_and_configs_asked_for():
    both = run_configs({**BASE, "runs": RUN_MODES[0]})
    assert list(both) == ["static", "continuous"] and both["static"] == EngineConfig(batching="static")
    assert list(run_configs({**BASE, "runs": RUN_MODES[2]})) == ["static"]
    b = {**{k: BASE[k] for k in BASE if k in EngineConfig.__dataclass_fields__}, "max_num_seqs": 2}
    b["enable_prefix_caching"] = False
    ab = {**BASE, "runs": RUN_MODES[3], "b": b}
    configs = run_configs(ab)
    assert list(configs) == [RUN_A, RUN_B]
    assert configs[RUN_A] == EngineConfig()
    assert configs[RUN_B] == EngineConfig(max_num_seqs=2, enable_prefix_caching=False)
    assert b_differs(ab) == ["enable_prefix_caching: on → off", "max_num_seqs: 4 → 2"]  # config_diff's order
    assert b_differs({**ab, "b": {**b, "batching": "static"}})[0] == "batching: continuous → static"
    assert b_differs({**ab, "b": {**b, "max_num_seqs": 4, "enable_prefix_caching": True}}) == []
    assert b_differs({**BASE, "runs": RUN_MODES[0]}) == []  # no run B outside the A vs B mode


def test_a_vs_b_uses_one_workload_for_both_runs():
    specs = build_specs({**BASE, "runs": RUN_MODES[3]})
    assert [s["request_id"] for s in specs] == ["R01", "R02", "R03"]
    assert [s["prompt"] for s in specs] == ["The capital of France is", "Water boils at", "Once upon a time"]
    assert all(s["max_tokens"] == 5 and s["ignore_eos"] for s in specs)


@pytest.mark.app
@pytest.mark.real_model
def test_playground_a_vs_b_runs_both_settings_and_opens_on_the_compare_page():
    at = page("page_playground")
    at.selectbox(key="pg:prompts").set_value("short completions").run()
    at.slider(key="pg:n").set_value(4).run()
    at.selectbox(key="pg:lengths").set_value("forced, equal").run()
    at.slider(key="pg:maxtok").set_value(6).run()
    at.selectbox(key="pg:runs").set_value(RUN_MODES[3]).run()
    assert at.button(key="pg:run").disabled  # B is still a copy of A: nothing to compare
    assert any("same settings" in i.value for i in at.info)
    at.slider(key="pg:b:seqs").set_value(2).run()
    at.toggle(key="pg:b:chunked").set_value(False).run()
    assert not at.button(key="pg:run").disabled, [e.value for e in at.error]
    click(at, "pg:run")
    wait_for_live_run(at)
    runs = at.session_state["playground:live-runs"]
    assert list(runs) == [RUN_A, RUN_B]
    conf = {label: records[0]["config"] for label, records in runs.items()}
    assert (conf[RUN_A]["max_num_seqs"], conf[RUN_B]["max_num_seqs"]) == (4, 2)
    assert (conf[RUN_A]["enable_chunked_prefill"], conf[RUN_B]["enable_chunked_prefill"]) == (True, False)
    # greedy text does not depend on scheduling: the same tokens per request under both settings
    tokens = {
        label: {r["request_id"]: r["output_token_ids"] for r in rec[-1]["requests"]} for label, rec in runs.items()
    }
    assert tokens[RUN_A] == tokens[RUN_B] and all(len(t) == 6 for t in tokens[RUN_A].values())
    # with 2 slots, at most 2 requests run in any step of B; A runs all 4 at once
    width = {label: max(len(s["scheduled"]) for s in step_records(rec)) for label, rec in runs.items()}
    assert width == {RUN_A: 4, RUN_B: 2}
    text = " ".join(m.value for m in at.markdown)
    assert "max\\_num\\_seqs: 4 → 2" in text or "max_num_seqs: 4 → 2" in text
    assert len(player_payload(at)["views"]) == 2
    assert [e for e in at.get("page_link") if "Compare runs" in e.proto.label]
    # the Compare runs page, in the same session, finds the pair by the link's query
    cmp = AppTest.from_string("from batchscope.app import page_lockstep\npage_lockstep.page()", default_timeout=120)
    cmp.session_state["playground:live-runs"] = runs
    cmp.query_params.update(a=f"playground live run / {RUN_A}", b=f"playground live run / {RUN_B}")
    cmp.run()
    assert not cmp.exception and not cmp.error
    assert len(player_payload(cmp)["views"]) == 2
    assert "4 → 2" in " ".join(m.value for m in cmp.markdown)


@pytest.mark.app
@pytest.mark.real_model
def test_run_b_says_it_no_longer_follows_a_and_copies_a_again_on_request():
    at = page("page_playground")
    at.selectbox(key="pg:runs").set_value(RUN_MODES[3]).run()
    assert at.slider(key="pg:b:seqs").value == 4  # a copy of A when A vs B is chosen
    at.slider(key="pg:seqs").set_value(6).run()
    at.toggle(key="pg:chunked").set_value(False).run()
    at.selectbox(key="pg:batching").set_value("static").run()
    assert at.slider(key="pg:b:seqs").value == 4 and at.toggle(key="pg:b:chunked").value  # B did not follow A
    text = " ".join(m.value for m in at.markdown)
    assert "a later change to run A does not change B" in text  # and the page says so, next to B's knobs
    assert "B differs from A in:** batching: static → continuous; enable_chunked_prefill: off → on" in text
    click(at, "pg:b:copy")
    b = (at.selectbox(key="pg:b:batching").value, at.slider(key="pg:b:seqs").value, at.toggle(key="pg:b:chunked").value)
    assert b == ("static", 6, False)
    assert "B differs from A in:** nothing yet" in " ".join(m.value for m in at.markdown)
    assert at.button(key="pg:run").disabled  # the same settings twice: nothing to compare
