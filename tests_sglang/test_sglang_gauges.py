"""``batchscope.steplog.gauges`` on an SGLang trace against what SGLang 0.5.23's own code reports after each batch: its
pool observer's ``PoolStats.update_scheduler_stats`` (``sglang:token_usage``), the batch's ``PrefillStats`` (running
requests, and the hit and computed tokens ``report_prefill_stats`` turns into ``sglang:cache_hit_rate`` and the
``prefill_compute`` tokens), the decode batch's requests, the waiting queue, and the retraction count
``update_running_batch`` leaves for the reporter. Read off SGLang's scheduler (``run_sglang(observe=...)``) on the
same workloads and tokens as the engine's trace: the shipped SGLang scenarios and hypothesis draws."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from replay import run_engine_trace
from test_sglang_differential import SETTINGS, retracting, workloads
from test_sglang_trace import SHIPPED, recorded_workload

from batchscope.steplog import gauges as g
from batchscope.steplog.view import TraceView
from batchscope_sglang.driver import DEFAULT_CONFIG, run_sglang


class Reports:
    """What SGLang's ``MetricsReporter`` would put in its ``SchedulerStats`` for each batch (idle steps skipped)."""

    def __init__(self, pool_tokens: int):
        self.pool_tokens = pool_tokens
        self.out: dict[str, list[Any]] = {key: [] for key in g.SGLANG_KEYS}
        self.rate, self.retracted = 0.0, 0

    def __call__(self, s: Any, batch: Any, rec: dict) -> None:
        from sglang.srt.managers.scheduler_components.pool_stats_observer import SchedulerPoolStatsObserver

        observer = SchedulerPoolStatsObserver(
            tree_cache=s.tree_cache,
            token_to_kv_pool_allocator=s.token_to_kv_pool_allocator,
            req_to_token_pool=s.req_to_token_pool,
            session_controller=None,
            hisparse_coordinator=None,
            is_hybrid_swa=False,
            is_hybrid_ssm=False,
            enable_hisparse=False,
            full_tokens_per_layer=None,
            swa_tokens_per_layer=None,
            max_total_num_tokens=self.pool_tokens,
        )
        stats = SimpleNamespace()
        observer.get_pool_stats().update_scheduler_stats(stats)
        if batch.forward_mode.is_extend():  # report_prefill_stats (metrics_reporter.py:826-836, 860, 902)
            p = batch.prefill_stats
            hit = p.log_hit_tokens - p.reprocessed_log_hit_tokens
            total = p.log_input_tokens - p.reprocessed_log_input_tokens + hit
            self.rate = hit / total if total > 0 else 0.0
            running, tokens = p.num_running_reqs.total, p.log_input_tokens + p.log_replay_tokens
        else:  # report_decode_stats: the decode batch (a merged EXTEND batch keeps its stale prefill_stats)
            running = tokens = len(batch.reqs)
        self.retracted += s.metrics_reporter.num_retracted_reqs  # set by update_running_batch, reset by the report
        s.metrics_reporter.num_retracted_reqs = 0
        for key, value in zip(
            g.SGLANG_KEYS, (running, len(s.waiting_queue), stats.token_usage, self.rate, self.retracted, tokens)
        ):
            self.out[key].append(value)


def _check(workload: dict) -> dict[str, list[Any]]:
    cfg = {**DEFAULT_CONFIG, **workload.get("config", {})}
    reports = Reports(cfg["pool_tokens"])
    run_sglang(workload, observe=reports)
    view = TraceView(run_engine_trace(workload))
    got = g.gauges(view)
    assert set(g.keys(view)) == set(g.SGLANG_KEYS)
    ran = [k for k, st in enumerate(view.steps) if not st.get("idle")]  # SGLang reports after each batch only
    for key in g.SGLANG_KEYS:
        assert [got[key][k] for k in ran] == pytest.approx(reports.out[key]), (key, workload)
    return got


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_gauges_of_the_shipped_sglang_scenarios_are_sglangs(path):
    records = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    _check(recorded_workload(records))


def test_the_counters_and_the_hit_rate_are_exercised():
    """shared-prefix hits the radix cache; vllm-vs-sglang retracts C at step 53 (the counter moves)."""
    by_name = {p.stem: p for p in SHIPPED}
    for name, key in (("shared-prefix-sglang", "hit_rate"), ("vllm-vs-sglang-sglang", "preemptions")):
        records = [json.loads(x) for x in by_name[name].read_text().splitlines() if x.strip()]
        assert max(_check(recorded_workload(records))[key]) > 0, name


@SETTINGS
@given(workload=workloads(cache=True))
def test_gauges_with_shared_prefixes(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=True))
def test_gauges_with_retraction(workload):
    _check(workload)


@SETTINGS
@given(workload=workloads(cache=False, mixed=True))
def test_gauges_with_mixed_chunks(workload):
    _check(workload)


@SETTINGS
@given(workload=retracting(cache=True, mixed=True))
def test_gauges_with_mixed_chunks_and_retraction(workload):
    _check(workload)
