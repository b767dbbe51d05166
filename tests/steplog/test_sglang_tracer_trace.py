"""A trace the SGLang tracer wrote (tests/data/sglang-tracer.jsonl: SGLang 0.5.23's scheduler, model-free, a shared
prefix and a retraction; kept current by tests_sglang/test_tracer.py) reads as any trace does: it validates with
jsonschema, names its server in the badge, is measured with SGLang's metric names (``sglang:*``, not vLLM's), and
opens on the Trace, Metrics and Compare pages and in every export (metrics, perfetto, html, frames)."""

from __future__ import annotations

import json

import pytest
from clikit import cli
from conftest import ROOT

from batchscope.steplog import trace
from batchscope.steplog.gauges import gauges, keys
from batchscope.steplog.gauges_sglang import SGLANG_KEYS
from batchscope.steplog.metric_names import name_of
from batchscope.steplog.view import TraceView

FIXTURE = ROOT / "tests" / "data" / "sglang-tracer.jsonl"


def test_the_tracer_fixture_validates_and_names_its_server():
    records = trace.read(FIXTURE)
    assert records[0]["source"] == "sglang" and records[0]["policy"] == "sglang" and records[0]["requests"] == []
    view = TraceView(records)
    assert view.request_ids == ["A", "B", "C"]  # declared by the steps' "arrived"
    assert view.provenance().startswith("SGLang 0.5.23 server, model-free")


def test_sglang_metrics_by_sglangs_names():
    """The gauges are SGLang's: running, queue, token usage, hit rate, retractions, step tokens, one per step; the
    retraction the fixture holds is counted where the trace records it."""
    view = TraceView(trace.read(FIXTURE))
    assert keys(view) == SGLANG_KEYS
    assert name_of(view.header, "running") == "sglang:num_running_reqs"
    assert name_of(view.header, "preemptions") == "sglang:num_retracted_requests_total"
    series = gauges(view)
    assert all(len(series[k]) == view.num_steps for k in SGLANG_KEYS)
    retracted = [k for k, st in enumerate(view.steps) if st["preempted"]]
    assert retracted and series["preemptions"][retracted[0]] == 1 and series["preemptions"][retracted[0] - 1] == 0
    assert any(rate > 0 for rate in series["hit_rate"])  # B hits A's system prompt


@pytest.mark.cli
def test_metrics_perfetto_and_html_exports(tmp_path):
    code, _, err = cli("metrics", str(FIXTURE))
    assert code == 0, err
    assert "Traceback" not in err
    code, _, err = cli("perfetto", str(FIXTURE), "--out", str(tmp_path / "t.json"))
    assert code == 0, err
    events = json.loads((tmp_path / "t.json").read_text())
    assert events["traceEvents"]
    code, _, err = cli("html", str(FIXTURE), "--out", str(tmp_path / "t.html"))
    assert code == 0, err
    assert "SGLang 0.5.23 server" in (tmp_path / "t.html").read_text()


@pytest.mark.app
def test_frames_export(tmp_path):
    code, _, err = cli("frames", str(FIXTURE), "--steps", "0,8", "--out", str(tmp_path / "stills"), timeout=600)
    assert code == 0, err
    assert len(list((tmp_path / "stills").glob("*.png"))) == 2


@pytest.mark.app
def test_opens_on_the_trace_metrics_and_compare_pages():
    """Loaded as a run of the session (the way an upload or a live run reaches the pages): no exception, the Trace
    page's caption names SGLang's metrics."""
    from appkit import player_payload
    from streamlit.testing.v1 import AppTest

    records = trace.read(FIXTURE)
    for page, params in (("page_trace", {"live": "server"}), ("page_metrics", {}), ("page_lockstep", {})):
        at = AppTest.from_string(f"from batchscope.app import {page}\n{page}.page()", default_timeout=120)
        at.session_state["playground:live-runs"] = {"server": records, "server again": records}
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception, (page, at.exception)
        if page == "page_trace":
            assert player_payload(at)["num_steps"] == len(records) - 2
            assert any("sglang:num_running_reqs" in c.value for c in at.caption)
