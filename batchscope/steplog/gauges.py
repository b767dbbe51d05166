"""A server's metrics after each step of a trace, in its engine family's own definition: vLLM 0.33's Prometheus
metrics (static, continuous, speculative and vLLM-server traces), TGI v3's router gauges and counters and
TensorRT-LLM's iteration statistics (below); SGLang's in ``batchscope.steplog.gauges_sglang``. The names of all four:
``batchscope.steplog.metric_names``.

**vLLM.** One value per step position (``TraceView.steps``), read after the step, where vLLM reads it: its engine core
calls ``Scheduler.make_stats()`` at the end of ``update_from_output`` (vllm/v1/core/sched/scheduler.py), after the
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

**TGI.** TGI sets its gauges at points of its batching loop (``batching_task``, backends/v3/src/backend.rs, commit
db931fcf), not once per forward pass, so each value here is the one a scrape would read during step ``k``'s forward,
after that step's scheduling call (names and words: ``batchscope.steplog.metric_names.TGI``). Units: requests, tokens,
calls.

- ``running`` (``tgi_batch_current_size``): set at the top of each loop iteration to the running batch's ``size`` as
  the shard returned it (finished requests filtered out), before the queue is asked (backend.rs:170). A step whose
  forward had no scheduling call (the decode that follows a new batch's prefill) keeps the value set before the
  step before it; an idle server's first batch reads 0 (the loop set it to 0 when the last batch emptied,
  backend.rs:290), or nothing before any batch ran (None: the gauge is not exported until first set).
- ``batch_max_tokens`` (``tgi_batch_current_max_tokens``): set beside it (backend.rs:171), the batch's
  ``max_tokens`` (block tables × block size); same steps, same lags.
- ``max_total_tokens`` (``tgi_batch_max_total_tokens``): ``max_batch_total_tokens``, the pool in tokens
  (``num_kv_blocks`` × ``block_size``; backends/v3/src/lib.rs:138).
- ``waiting`` (``tgi_queue_size``): the queue's length: +1 per arrival (queue.rs:143), set to the length after every
  batch-building call (queue.rs:158), so always the queue after the step's scheduling: ``waiting``.
- ``next_batch_size`` (``tgi_batch_next_size``): the histogram's observation of the step (queue.rs:501), the size
  of the batch the queue built (its requests admitted), None when no batch was built.
- ``concat`` (``tgi_batch_concat``, all reasons summed): cumulative count of new batches added to a running batch
  (backend.rs:210-216); an idle server's first batch is not one.
- ``prefill_calls`` / ``decode_calls`` (``tgi_batch_inference_count`` by method): cumulative forwards of each kind
  (backend.rs:305, 349): a prefill call for each new batch (with chunking it carries the running batch with it), a
  decode call otherwise.

Left out, because a step log cannot tell them: the latency histograms (``tgi_batch_*_duration``, the request
durations; the step log has Batchscope's own clock, not TGI's), ``tgi_request_skipped_tokens`` (speculation),
``tgi_request_failure`` and the request counters (HTTP-side). TGI drops a cancelled request from its queue only at
the next batch-building call (queue.rs:282); Batchscope's queue drops it at once, so ``tgi_queue_size`` can read one
less than TGI's would until then.

**TensorRT-LLM.** One value per step position (one executor iteration: one forward pass), as the PyTorch executor's
``_executor_loop`` (overlap scheduler off) fills its ``IterationStats``: ``_get_init_iter_stats`` at the iteration's
start, once new requests are fetched; ``_update_iter_stats`` at its end, after the finished requests left the active
list and released their blocks (tensorrt_llm/_torch/pyexecutor/py_executor.py, 9521caf4). The fields are those of
cpp/include/tensorrt_llm/executor/types.h; ``trtllm-serve`` returns them as JSON on ``/metrics`` and exports each as the
Prometheus metric of ``batchscope.steplog.metric_names.TRTLLM`` (tensorrt_llm/metrics/collector.py,
``log_iteration_stats``). Units: requests, blocks, tokens.

- ``running`` (``numActiveRequests``): the executor's active list at the iteration's start. TensorRT-LLM fetches
  requests from its queue into that list, first come first served, up to ``max_num_active_requests`` (max batch
  size × pipeline stages: ``max_num_seqs`` here, one GPU), and a request leaves it only when it finishes: so the
  list is the first ``max_num_seqs`` unfinished arrived requests, scheduled or not, paused ones included.
- ``waiting`` (``numQueuedRequests``): the request queue at the iteration's end: the unfinished arrived requests
  the active list had no room for.
- ``kv_usage`` (``usedNumBlocks / maxNumBlocks``) and ``kv_used_blocks`` (``usedNumBlocks``): blocks the unfinished
  requests' tables hold after the iteration (a paused request released its blocks when paused; with block reuse a
  finished request's blocks stay cached but free, as in TensorRT-LLM's pool).
- ``scheduled`` / ``context_requests`` / ``generation_requests`` (``inflightBatchingStats``): the iteration's batch,
  its context rows (a prompt chunk, or a resumed request's prompt and output) and its generation rows.
- ``paused`` (``numPausedRequests``): the requests this iteration's capacity scheduler paused (``MAX_UTILIZATION``);
  a gauge of the iteration, not a running count.
- ``context_tokens`` (``numCtxTokens``): the context tokens the forward computes (reused blocks are not computed).
- ``completed``: the running total of ``numCompletedRequests`` (``trtllm_num_requests_completed_total``), the
  requests finished (aborts included: TensorRT-LLM answers a cancelled request as finished).

None where the trace contradicts that active list: a step that scheduled, or let keep its blocks, a request outside
the first ``max_num_seqs`` (Batchscope's core keeps every arrived request in its list, and TensorRT-LLM could not
have run that step), for ``running`` and ``waiting``.

Left out, because a step log cannot give them truthfully: ``kvCacheStats`` ``reusedBlocks`` / ``missedBlocks`` /
``cacheHitRate`` (TensorRT-LLM counts them per block inside its block manager, partial reuse included; the trace has
hit tokens per admission), ``iterLatencyMS`` and the memory fields (another machine's clock and memory),
``avgNumDecodedTokensPerIter`` (the PyTorch executor sets 0), the speculative-decoding stats, and the per-request
latency histograms (Batchscope's Metrics page measures those on its own clock).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from batchscope.steplog.decisions import decisions
from batchscope.steplog.gauges_sglang import SGLANG_KEYS, sglang_gauges
from batchscope.steplog.metric_names import family
from batchscope.steplog.view import TraceView

# The series' keys, each the key of its name in the family's table of ``batchscope.steplog.metric_names``; the families
# share ``running`` and ``waiting``, each with its own definition
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


# -- TGI ---------------------------------------------------------------------------------------------------------------


TGI_KEYS = (
    "running",
    "waiting",
    "batch_max_tokens",
    "max_total_tokens",
    "next_batch_size",
    "concat",
    "prefill_calls",
    "decode_calls",
)


def tgi_gauges(view: TraceView) -> dict[str, list[Any]]:
    """``{key: one value per step position}`` for every key of ``TGI_KEYS`` (the module docstring)."""
    out: dict[str, list[Any]] = {key: [] for key in TGI_KEYS}
    config = view.header["config"]
    size: int | None = None
    max_tokens: int | None = None
    concat = prefills = decodes = 0
    for st in view.steps:
        call = st.get("decisions", {}).get("scheduling_call")
        in_loop = call is not None and "batch_size" in call  # the loop's call; an idle server's has "batch": None
        if call is not None and in_loop:
            size, max_tokens = call["batch_size"], call["batch_max_tokens"]
        elif call is not None and size is not None:  # an idle server: the last batch emptied and reset them
            size = max_tokens = 0
        new_batch = len(st["admitted"])
        concat += bool(new_batch and in_loop)
        prefills += bool(new_batch)
        decodes += not new_batch
        out["running"].append(size)
        out["waiting"].append(len(st["waiting"]))
        out["batch_max_tokens"].append(max_tokens)
        out["max_total_tokens"].append(config["num_kv_blocks"] * config["block_size"])
        out["next_batch_size"].append(new_batch or None)
        out["concat"].append(concat)
        out["prefill_calls"].append(prefills)
        out["decode_calls"].append(decodes)
    return out


# -- TensorRT-LLM ------------------------------------------------------------------------------------------------------


TRTLLM_KEYS = (
    "running",
    "waiting",
    "kv_usage",
    "kv_used_blocks",
    "scheduled",
    "context_requests",
    "generation_requests",
    "paused",
    "context_tokens",
    "completed",
)


def _arrival_order(view: TraceView) -> list[str]:
    """The requests in the order they arrived (the step each is first seen, then the header's order): the order
    TensorRT-LLM's queue hands them to the active list."""
    pos = {r: i for i, r in enumerate(view.request_ids)}
    seen = view.first_seen
    return sorted(seen, key=lambda r: (seen[r], pos.get(r, len(pos))))


def _active_list(view: TraceView, k: int, order: list[str]) -> tuple[int, int] | None:
    """(active, queued) at step ``k``: the first ``max_num_seqs`` of the unfinished arrived requests, in arrival
    order, and the rest; None if the step ran or kept blocks for a request outside that list."""
    st = view.steps[k]
    present = set(st["running"]) | set(st["waiting"])
    arrived = [r for r in order if r in present]
    cap = int(view.header["config"]["max_num_seqs"])
    busy = {s["request_id"] for s in st["scheduled"]} | set(st["kv"]["block_tables"])
    if busy - set(arrived[:cap]):
        return None
    return min(cap, len(arrived)), len(arrived) - min(cap, len(arrived))


def trtllm_gauges(view: TraceView) -> dict[str, list[Any]]:
    """``{key: one value per step position}`` for every key of ``TRTLLM_KEYS`` (the module docstring)."""
    out: dict[str, list[Any]] = {key: [] for key in TRTLLM_KEYS}
    order, completed = _arrival_order(view), 0
    for k, st in enumerate(view.steps):
        lists = _active_list(view, k, order)
        gone = {f["request_id"] for f in st["finished"]}
        tables = st["kv"]["block_tables"]
        used = len({b for r, t in tables.items() if r not in gone for b in t})
        pool = st["kv"]["num_blocks"]
        contexts = [s for s in st["scheduled"] if s["kind"] == "prefill"]
        completed += len(gone)
        out["running"].append(None if lists is None else lists[0])
        out["waiting"].append(None if lists is None else lists[1])
        out["kv_usage"].append(used / pool if pool else 0.0)
        out["kv_used_blocks"].append(used)
        out["scheduled"].append(len(st["scheduled"]))
        out["context_requests"].append(len(contexts))
        out["generation_requests"].append(len(st["scheduled"]) - len(contexts))
        out["paused"].append(len(st["preempted"]))
        out["context_tokens"].append(sum(s["num_tokens"] for s in contexts))
        out["completed"].append(completed)
    return out


# The families besides vLLM: their keys and the function that computes them
_OTHERS: dict[str, tuple[tuple[str, ...], Callable[[TraceView], dict[str, Series]]]] = {
    "sglang": (SGLANG_KEYS, sglang_gauges),
    "tgi": (TGI_KEYS, tgi_gauges),
    "trtllm": (TRTLLM_KEYS, trtllm_gauges),
}


def gauges(view: TraceView) -> dict[str, Series]:
    """``{key: one value per step position}`` for every key of ``keys(view)`` (see the module docstring for each
    definition and unit; another family's: its own module), computed once per view (``view.memo``)."""
    if "gauges" not in view.memo:
        if family(view.header) in _OTHERS:
            view.memo["gauges"] = _OTHERS[family(view.header)][1](view)
            return view.memo["gauges"]
        out: dict[str, Series] = {name: [] for name in NAMES}
        _scheduler_state(view, out)
        _counters(view, out)
        view.memo["gauges"] = out
    return view.memo["gauges"]


def keys(view: TraceView) -> tuple[str, ...]:
    """The series ``gauges(view)`` has: the keys of the family's table that are per-step series."""
    kin = family(view.header)
    return _OTHERS[kin][0] if kin in _OTHERS else NAMES


def unknown_note(view: TraceView) -> str | None:
    """One line saying which values this trace cannot tell, or None when it tells them all."""
    kin = family(view.header)
    if kin == "trtllm":
        unknown = gauges(view)[RUNNING].count(None)
        return (
            f"the active list and the queue at {unknown} steps that ran a request beyond the first max_num_seqs, "
            "which TensorRT-LLM would still hold in its queue"
            if unknown
            else None
        )
    if kin == "tgi":
        return None
    notes = []
    if view.header["config"].get("async_scheduling"):
        notes.append(
            "running, waiting and KV-cache usage: the server scheduled asynchronously, and vLLM reads them "
            "after it has already scheduled the next step"
        )
    if view.header["config"].get("enable_prefix_caching") and not _hits_recorded(view):
        notes.append("prefix-cache values: the trace has no hit counts")
    return "; ".join(notes) or None
