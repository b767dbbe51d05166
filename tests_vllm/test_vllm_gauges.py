"""``batchscope.steplog.gauges`` against vLLM 0.33's own metrics: the tracing scheduler driven model-free
(``batchscope_vllm.driver``) with ``log_stats`` on, as a server runs it. After every step vLLM's
``Scheduler.make_stats()`` gives the ``SchedulerStats`` its Prometheus logger records (running, waiting, KV-cache
usage, prefix-cache queries and hits, fed here to vLLM's own ``CachingMetrics`` for the logger's hit rate), and the
step's ``EngineCoreOutput`` s go through vLLM's own ``IterationStats`` as its output processor sends them (the
preemption counter, the ``vllm:iteration_tokens_total`` observation). ``batchscope.steplog.gauges`` on the trace the
tracer wrote for the same run must give the same values at every step.

Run in vLLM's venv: ``.venv-vllm/bin/python -m pytest -p no:cacheprovider tests_vllm``.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from replay import run_batchscope, shipped_workload
from test_vllm_differential import EOS, cases
from vllm.v1.metrics.stats import CachingMetrics, IterationStats, LoRARequestStates, RequestStateStats

from batchscope.steplog import gauges as g
from batchscope.steplog.trace import read
from batchscope.steplog.view import TraceView
from batchscope_vllm.compare import workload_from_trace
from batchscope_vllm.driver import run_vllm
from batchscope_vllm.tracer import TracingScheduler

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("preemption", "shared-prefix", "seed-abcd", "priority")
RULES = {
    "caching": {"reserve_full_prompt": True, "enable_prefix_caching": True},
    "no-caching": {"reserve_full_prompt": False, "enable_prefix_caching": False},
}


class Reporting(TracingScheduler):
    """The tracing scheduler with ``log_stats`` on (a server's default); keeps what each ``update_from_output``
    returns to the frontend: the step's ``SchedulerStats`` and its outputs."""

    reports: ClassVar[list[tuple[Any, list[Any]]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "log_stats": True})

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        result = super().update_from_output(scheduler_output, model_runner_output)
        eco = result[0]  # make_stats() rides on the first client's outputs, made for it if there are none
        self.reports.append((eco.scheduler_stats, list(eco.outputs)))
        return result


def vllm_gauges(reports: list[tuple[Any, list[Any]]]) -> dict[str, list[Any]]:
    """The values vLLM's loggers record after each step, computed by vLLM's own classes from what it reported."""
    out: dict[str, list[Any]] = {name: [] for name in g.NAMES}
    window, lora, prefilling, stats = CachingMetrics(), LoRARequestStates(), set(), {}
    queries = hits = preemptions = 0
    for sched_stats, outputs in reports:
        out[g.RUNNING].append(sched_stats.num_running_reqs)
        out[g.WAITING].append(sched_stats.num_waiting_reqs + sched_stats.num_skipped_waiting_reqs)
        out[g.KV_USAGE].append(sched_stats.kv_cache_usage)
        queries += sched_stats.prefix_cache_stats.queries
        hits += sched_stats.prefix_cache_stats.hits
        window.observe(sched_stats.prefix_cache_stats)
        out[g.QUERIES].append(queries)
        out[g.HITS].append(hits)
        out[g.HIT_RATE].append(window.hit_rate)
        it = IterationStats() if outputs else None  # as AsyncLLM's output handler: none for a step without outputs
        for o in outputs:
            first = o.request_id not in prefilling
            prefilling.add(o.request_id)
            it.update_from_output(o, 0.0, first, stats.setdefault(o.request_id, RequestStateStats()), lora, None)
        preemptions += it.num_preempted_reqs if it else 0
        out[g.PREEMPTIONS].append(preemptions)
        out[g.ITERATION_TOKENS].append(it.prompt_token_stats.computed + it.num_generation_tokens if it else None)
    return out


def run_and_compare(workload: dict[str, Any]) -> dict[str, list[Any]]:
    """Drive ``workload`` through the reporting tracer; assert its trace's gauges equal vLLM's, step by step."""
    Reporting.reports = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "server.jsonl"
        run_vllm(workload, scheduler_cls=Reporting, trace=path)
        view = TraceView(read(path))
    want = vllm_gauges(Reporting.reports)
    got = g.gauges(view)
    for name in g.NAMES:
        assert len(got[name]) == len(want[name]), name
        for k, (a, b) in enumerate(zip(got[name], want[name], strict=True)):
            same = a == b if not isinstance(b, float) else a is not None and math.isclose(a, b, abs_tol=1e-12)
            assert same, f"{name} at step {k}: steplog says {a}, vLLM says {b}"
    return want


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_gauges_of_a_shipped_scenario_equal_vllms(scenario, rules):
    """A shipped scenario's requests and recorded tokens (Batchscope's run of them under ``rules``), on vLLM."""
    ours = run_batchscope(
        *shipped_workload(read(ROOT / "batchscope/assets/traces" / f"{scenario}-continuous.jsonl"), RULES[rules])
    )
    want = run_and_compare(workload_from_trace(ours))
    if scenario == "preemption":
        assert want[g.PREEMPTIONS][-1] > 0  # the counter was exercised
    if scenario == "shared-prefix" and rules == "caching":
        assert 0 < want[g.HITS][-1] < want[g.QUERIES][-1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=cases({}, aborts=True))
def test_gauges_of_random_workloads_with_aborts_equal_vllms(case):
    """Random workloads with aborts of waiting, running and preempted requests (an aborted request's outputs never
    reach the frontend: a preemption of a request aborted while preempted is never counted)."""
    run_and_compare(workload_from_trace(run_batchscope(case.requests, case.config, [EOS])))
