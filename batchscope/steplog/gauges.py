"""vLLM 0.33's Prometheus metrics as a server would have exported them after each step of a trace (an SGLang trace
gets SGLang's own: ``batchscope.steplog.gauges_sglang``; the names of both: ``batchscope.steplog.metric_names``).

One value per step position (``TraceView.steps``), read after the step, where vLLM reads it: its engine core calls
``Scheduler.make_stats()`` at the end of ``update_from_output`` (vllm/v1/core/sched/scheduler.py), after the
step's finished requests have left the queues and freed their blocks, and the frontend's ``PrometheusStatLogger``
(vllm/v1/metrics/loggers.py) records those ``SchedulerStats`` with the ``IterationStats`` of the same step's outputs
(vllm/v1/metrics/stats.py). Names are vLLM's:

- ``vllm:num_requests_running``: ``len(scheduler.running)``, requests admitted and not finished (requests).
- ``vllm:num_requests_waiting``: the waiting queues (fresh and preempted requests), requests.
- ``vllm:kv_cache_usage_perc``: ``BlockPool.get_usage()``, ``1 - free / (num_gpu_blocks - 1)``: a fraction (1 means
  100 percent, despite the name). Cached-but-free blocks sit in the free queue, so they count as free; the ``- 1``
  leaves out vLLM's null block, which a trace's ``kv.num_blocks`` already excludes.
- ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``: cumulative counters, tokens. A request's first
  admission queries its known tokens and hits the prefix-cache hit tokens (``KVCacheManager.record_prefix_cache_
  stats``); a re-admission after a preemption is not counted here, nor is anything with prefix caching off.
- ``prefix cache hit rate``: not a Prometheus metric; the rate vLLM's ``LoggingStatLogger`` prints
  (``CachingMetrics``, stats.py): hits / queries over the most recent 1000 first admissions (steps without
  admissions leave it as it was; 0.0 before any query, as vLLM says). A Grafana panel's rate is the counters'.
- ``vllm:num_preemptions``: cumulative count of preemptions. vLLM counts a preemption when its ``PREEMPTED`` event
  reaches the frontend, which is with the request's next output (its next sampled token after resuming); a
  request aborted while preempted never delivers it, and it is never counted.
- ``vllm:iteration_tokens_total``: the histogram's observation of the step (tokens), ``prompt_token_stats.computed
  + num_generation_tokens``: the tokens sampled in the step plus, for each request whose first output is in the
  step, its prompt less its prefix-cache hit at first admission (the whole prompt at once, not the chunk; so not
  ``num_batched_tokens``). None for a step without any output: vLLM makes no ``IterationStats`` then.

None where the trace cannot tell: the queue, usage and prefix-cache values of a server's trace recorded with
``async_scheduling`` (vLLM reads them after it has already scheduled the next step), and the prefix-cache values
(and the iteration tokens of a first output) of a trace recorded with prefix caching on but without hit counts.
A ``reset_prefix_cache`` call (which restarts the logger's window) is not in any trace.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from batchscope.steplog.decisions import decisions
from batchscope.steplog.gauges_sglang import SGLANG_KEYS, sglang_gauges
from batchscope.steplog.metric_names import family
from batchscope.steplog.view import TraceView

# The series' keys: the same for every family, each the key of its name in ``batchscope.steplog.metric_names``' table
RUNNING, WAITING, KV_USAGE = "running", "waiting", "kv_usage"
QUERIES, HITS, HIT_RATE = "prefix_queries", "prefix_hits", "hit_rate"
PREEMPTIONS, ITERATION_TOKENS = "preemptions", "step_tokens"
NAMES = (RUNNING, WAITING, KV_USAGE, QUERIES, HITS, HIT_RATE, PREEMPTIONS, ITERATION_TOKENS)  # vLLM's family
HIT_RATE_WINDOW = 1000  # CachingMetrics(max_recent_requests=1000), vllm/v1/metrics/stats.py

Series = list[Any]  # one value per step position: int, float or None


class _HitWindow:
    """vLLM's ``CachingMetrics``: (requests, queries, hits) of the recent steps, the oldest dropped while more than
    ``HIT_RATE_WINDOW`` requests remain (the latest step always kept)."""

    def __init__(self) -> None:
        self.queue: deque[tuple[int, int, int]] = deque()
        self.requests = self.queries = self.hits = 0

    def observe(self, requests: int, queries: int, hits: int) -> float:
        if requests:
            self.queue.append((requests, queries, hits))
            self.requests, self.queries, self.hits = self.requests + requests, self.queries + queries, self.hits + hits
            while len(self.queue) > 1 and self.requests > HIT_RATE_WINDOW:
                r, q, h = self.queue.popleft()
                self.requests, self.queries, self.hits = self.requests - r, self.queries - q, self.hits - h
        return self.hits / self.queries if self.queries else 0.0


def _hits_recorded(view: TraceView) -> bool:
    """Whether the trace says how many tokens each admission found in the prefix cache."""
    return any("num_prefix_hit_tokens" in st or "num_cached_tokens" in st or "decisions" in st for st in view.steps)


def _kv_usage(view: TraceView, k: int, gone: set[str]) -> float:
    """Blocks in use after step ``k`` (its pool less the blocks only its finished requests held) / the pool."""
    kv = view.steps[k]["kv"]
    used = kv["num_used_blocks"]
    if gone:
        tables = view.block_tables(k)
        kept = {b for r, t in tables.items() if r not in gone for b in t}
        used -= len({b for r in gone for b in tables.get(r, ())} - kept)
    return used / kv["num_blocks"] if kv["num_blocks"] else 0.0


def _scheduler_state(view: TraceView, out: dict[str, Series]) -> None:
    """Running, waiting and KV-cache usage after each step (None throughout for an asynchronous server)."""
    unknown = bool(view.header["config"].get("async_scheduling"))
    for k, st in enumerate(view.steps):
        gone = {f["request_id"] for f in st["finished"]}
        out[RUNNING].append(None if unknown else sum(r not in gone for r in st["running"]))
        out[WAITING].append(None if unknown else sum(r not in gone for r in st["waiting"]))
        out[KV_USAGE].append(None if unknown else _kv_usage(view, k, gone))


def _first_admission_hits(view: TraceView, k: int, caching: bool) -> list[tuple[str, int, int]]:
    """``(request, queried tokens, hit tokens)`` of each first (not resumed) admission of step ``k``."""
    if not caching:
        return []
    return [
        (
            a["request_id"],
            a["num_prefix_hit_tokens"] + a["num_recompute_tokens"] + a["num_new_tokens"],
            a["num_prefix_hit_tokens"],
        )
        for a in decisions(view, k).get("admissions", [])
        if not a["resumed"]
    ]


def _counters(view: TraceView, out: dict[str, Series]) -> None:
    """The prefix-cache counters and hit rate, the preemption counter and each step's iteration tokens."""
    caching = bool(view.header["config"].get("enable_prefix_caching"))
    known = _hits_recorded(view) or not caching
    window, queries, hits, preemptions = _HitWindow(), 0, 0, 0
    first_hit: dict[str, int] = {}
    pending: dict[str, int] = {}  # preemptions whose event waits for the request's next output
    emitted: set[str] = set()
    for k, st in enumerate(view.steps):
        admitted = _first_admission_hits(view, k, caching)
        for rid, q, h in admitted:
            first_hit.setdefault(rid, h)
            queries, hits = queries + q, hits + h
        rate = window.observe(len(admitted), sum(q for _, q, _ in admitted), sum(h for _, _, h in admitted))
        out[QUERIES].append(queries if known else None)
        out[HITS].append(hits if known else None)
        out[HIT_RATE].append(rate if known else None)
        for rid in st["preempted"]:
            pending[rid] = pending.get(rid, 0) + 1
        outputs = dict.fromkeys(s["request_id"] for s in st["sampled"])
        prompt_tokens: int | None = 0
        for rid in outputs:
            preemptions += pending.pop(rid, 0)
            if rid not in emitted:
                emitted.add(rid)
                num_prompt = view.request_info[rid]["num_prompt_tokens"]
                prompt_tokens = (
                    None if prompt_tokens is None or not known else prompt_tokens + num_prompt - first_hit.get(rid, 0)
                )
        out[PREEMPTIONS].append(preemptions)
        out[ITERATION_TOKENS].append(
            None if not outputs or prompt_tokens is None else prompt_tokens + len(st["sampled"])
        )


def gauges(view: TraceView) -> dict[str, Series]:
    """``{key: one value per step position}`` for every key of ``keys(view)`` (see the module docstring for each
    definition and unit; an SGLang trace's: ``batchscope.steplog.gauges_sglang``), computed once per view
    (``view.memo``)."""
    if "gauges" not in view.memo:
        if family(view.header) == "sglang":
            view.memo["gauges"] = sglang_gauges(view)
            return view.memo["gauges"]
        out: dict[str, Series] = {name: [] for name in NAMES}
        _scheduler_state(view, out)
        _counters(view, out)
        view.memo["gauges"] = out
    return view.memo["gauges"]


def keys(view: TraceView) -> tuple[str, ...]:
    """The series ``gauges(view)`` has: the keys of the family's table that are per-step series."""
    return SGLANG_KEYS if family(view.header) == "sglang" else NAMES


def unknown_note(view: TraceView) -> str | None:
    """One line saying which values this trace cannot tell, or None when it tells them all."""
    notes = []
    if view.header["config"].get("async_scheduling"):
        notes.append(
            "running, waiting and KV-cache usage: the server scheduled asynchronously, and vLLM reads them "
            "after it has already scheduled the next step"
        )
    if view.header["config"].get("enable_prefix_caching") and not _hits_recorded(view):
        notes.append("prefix-cache values: the trace has no hit counts")
    return "; ".join(notes) or None
