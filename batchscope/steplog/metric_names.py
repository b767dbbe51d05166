"""The metrics a server of each engine family exports, by the names it exports them under: one table per family.

A trace's family (``family``) is its header's ``policy``: ``sglang`` traces are SGLang's (0.5.23, the gauges of
``SchedulerMetricsCollector`` in sglang/srt/observability/metrics_collector.py, set by the scheduler's
``MetricsReporter``); ``tgi`` traces are TGI v3's (its router's ``metrics::gauge!/counter!/histogram!`` calls, commit
db931fcf); ``trtllm`` traces are TensorRT-LLM's (the ``IterationStats`` its PyTorch executor fills, which
``trtllm-serve`` returns on ``/metrics`` and its ``MetricsCollector`` exports for Prometheus); every other trace
(static, continuous, speculative, a vLLM server's) is vLLM's (0.33, vllm/v1/metrics/loggers.py).
``batchscope.steplog.gauges`` computes the values per step under the keys below, in the family's own definition; the
player's gauges, the Trace page and the glossary read the names and words from here.

Each entry: key -> (the exported name, what it observes, Batchscope's figure for it). The tables are plain
literals, so that ``tests_sglang/test_sglang_metric_names.py`` can read them without importing the project and
check every ``sglang:`` name, and its kind, against SGLang's installed source. TGI and TensorRT-LLM cannot be
installed here: ``tests/steplog/test_metric_names_sources.py`` pins their names to the source lines they were read at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VLLM: dict[str, tuple[str, str, str]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "histogram, one value per request", "TTFT = first token − arrival"),
    "itl": ("vllm:inter_token_latency_seconds", "histogram, one value per output token after the first", "ITL gaps"),
    "tpot": ("vllm:request_time_per_output_token_seconds", "histogram, one value per request", "TPOT"),
    "e2e": ("vllm:e2e_request_latency_seconds", "histogram, one value per finished request", "E2E = finish − arrival"),
    "queue_time": ("vllm:request_queue_time_seconds", "histogram, time queued before first scheduled", "queue time"),
    "running": ("vllm:num_requests_running", "gauge after each step, admitted and not finished", "the step's running"),
    "waiting": ("vllm:num_requests_waiting", "gauge after each step, fresh and preempted", "the step's waiting queue"),
    "kv_usage": (
        "vllm:kv_cache_usage_perc",
        "gauge, a fraction 0..1: 1 − free / (num_gpu_blocks − 1)",
        "KV blocks in use / pool",
    ),
    "preemptions": ("vllm:num_preemptions", "counter, counted at the victim's next output", "preemptions"),
    "prefix_queries": (
        "vllm:prefix_cache_queries",
        "counter, tokens looked up at first admissions",
        "prefix-cache queried tokens",
    ),
    "prefix_hits": ("vllm:prefix_cache_hits", "counter, of those, tokens found", "prefix-cache hit tokens"),
    "hit_rate": (
        "prefix-cache hit rate (vLLM's log line)",
        "not a Prometheus metric: hits / queries over the last 1000 first admissions",
        "the log line's rate",
    ),
    "step_tokens": (
        "vllm:iteration_tokens_total",
        "histogram, one value per step with outputs: the tokens sampled plus each first output's uncached prompt",
        "the step's observation",
    ),
}

SGLANG: dict[str, tuple[str, str, str]] = {
    "running": (
        "sglang:num_running_reqs",
        "gauge, a prefill batch's report: the running batch it was formed beside (its own requests not merged yet); "
        "a decode batch's: its requests, those finishing in it too",
        "the step's running batch",
    ),
    "waiting": (
        "sglang:num_queue_reqs",
        "gauge, the waiting queue after the step, retracted requests included",
        "the step's waiting queue",
    ),
    "kv_usage": (
        "sglang:token_usage",
        "gauge, used token slots / the pool, to 2 decimals: used = pool − free − evictable (cached tokens no running "
        "request locks count as free), after the step's finished requests released theirs",
        "token slots in use / pool",
    ),
    "hit_rate": (
        "sglang:cache_hit_rate",
        "gauge of the last prefill batch: radix-cache hit tokens / (hit + computed tokens) of its new requests and "
        "chunks, leaving out requests retracted before; a decode batch keeps it",
        "the last prefill batch's rate",
    ),
    "preemptions": (
        "sglang:num_retracted_requests_total",
        "counter, counted when the decode batch retracts the request",
        "retractions",
    ),
    "step_tokens": (
        "sglang:realtime_tokens_total",
        "counter by mode; a step adds prefill_compute (the prefill batch's computed tokens, mixed decodes not "
        "counted) or decode (one per request of a decode batch)",
        "the step's increase",
    ),
}

# TGI v3, huggingface/text-generation-inference at db931fcf (the reference data's commit, ../shared/reference/tgi):
# backends/v3/src/backend.rs (batching_task, prefill, decode), backends/v3/src/queue.rs (queue_task, next_batch),
# backends/v3/src/lib.rs (start-up), router/src/server.rs (each successful request). A label in braces names the
# series of a labelled metric.
TGI: dict[str, tuple[str, str, str]] = {
    "running": (
        "tgi_batch_current_size",
        "gauge, set at the top of each batching-loop iteration to the running batch's size as the shard returned it "
        "(finished requests gone), before the queue is asked; not set for the decode forward that follows a new "
        "batch's prefill; 0 once the batch empties",
        "the router's running batch",
    ),
    "waiting": (
        "tgi_queue_size",
        "gauge, the router queue's length: +1 at each arrival, set to the length after each batch-building call",
        "the waiting queue",
    ),
    "batch_max_tokens": (
        "tgi_batch_current_max_tokens",
        "gauge, set with tgi_batch_current_size: the running batch's max_tokens, its block tables' length × block "
        "size (a shared prefix block counted once per request); the token budget is max_batch_total_tokens − this",
        "KV tokens the running batch holds",
    ),
    "max_total_tokens": (
        "tgi_batch_max_total_tokens",
        "gauge, set once at start-up: max_batch_total_tokens (here num_kv_blocks × block_size)",
        "the KV pool in tokens",
    ),
    "next_batch_size": (
        "tgi_batch_next_size",
        "histogram, one observation per batch the queue builds: the new batch's size",
        "requests admitted in the step",
    ),
    "concat": (
        "tgi_batch_concat",
        'counter by reason ("backpressure" under a minimum batch size, "chunking", "wait_exceeded"), +1 for each new '
        "batch added to a running one",
        "new batches joined to a running one",
    ),
    "prefill_calls": (
        'tgi_batch_inference_count{method="prefill"}',
        "counter, +1 per prefill call to the shard (an idle server's first batch, each new batch)",
        "prefill forwards",
    ),
    "decode_calls": (
        'tgi_batch_inference_count{method="decode"}',
        "counter, +1 per decode call to the shard",
        "decode forwards",
    ),
    "queue_time": (
        "tgi_request_queue_duration",
        "histogram of seconds, one value per successful request: batched − queued",
        "queue time",
    ),
    "e2e": ("tgi_request_duration", "histogram of seconds, one value per successful request", "E2E"),
    "tpot": (
        "tgi_request_mean_time_per_token_duration",
        "histogram of seconds, one value per successful request: inference time / generated tokens",
        "TPOT (TGI divides by every generated token)",
    ),
    "generated_tokens": (
        "tgi_request_generated_tokens",
        "histogram, one value per successful request",
        "output tokens",
    ),
}

# TensorRT-LLM (NVIDIA/TensorRT-LLM, each file as stored; the repository is too large to fetch whole): the JSON fields
# are cpp/include/tensorrt_llm/executor/types.h (a98a9061: IterationStats, KvCacheStats, InflightBatchingStats); the
# PyTorch executor fills them in tensorrt_llm/_torch/pyexecutor/py_executor.py (9521caf4: _get_init_iter_stats,
# _update_iter_stats, _executor_loop); trtllm-serve's MetricsCollector (tensorrt_llm/metrics/collector.py, 050f80de:
# log_iteration_stats) exports each under the Prometheus name shown, from the field after the arrow.
TRTLLM: dict[str, tuple[str, str, str]] = {
    "running": (
        "trtllm_num_requests_running",
        "gauge ← numActiveRequests: the executor's active list at the iteration's start, once new requests are "
        "fetched into it: scheduled or not, paused included (TensorRT-LLM's 'active', not 'running')",
        "the active list",
    ),
    "waiting": (
        "trtllm_num_requests_waiting",
        "gauge ← numQueuedRequests: the request queue at the iteration's end, requests not fetched because the "
        "active list is full (max_num_active_requests = max_batch_size × pipeline stages)",
        "requests outside the active list",
    ),
    "kv_usage": (
        "trtllm_kv_cache_utilization",
        "gauge ← kvCacheStats usedNumBlocks / maxNumBlocks, read after the iteration's finished requests released "
        "their blocks (reusable cached blocks count as free)",
        "KV blocks in use / pool",
    ),
    "kv_used_blocks": ("trtllm_kv_cache_used_blocks", "gauge ← kvCacheStats.usedNumBlocks", "KV blocks in use"),
    "scheduled": (
        "trtllm_num_scheduled_requests",
        "gauge ← inflightBatchingStats.numScheduledRequests: context + generation requests of the iteration's batch",
        "the step's batch",
    ),
    "context_requests": (
        "trtllm_num_context_requests",
        "gauge ← inflightBatchingStats.numContextRequests: requests computing prompt tokens (a chunk, or a resumed "
        "request's prompt and output)",
        "the step's prefills",
    ),
    "generation_requests": (
        "trtllm_num_generation_requests",
        "gauge ← inflightBatchingStats.numGenRequests: requests decoding one token",
        "the step's decodes",
    ),
    "paused": (
        "trtllm_num_paused_requests",
        "gauge ← inflightBatchingStats.numPausedRequests: the requests this iteration's capacity scheduler paused "
        "(MAX_UTILIZATION); not cumulative",
        "the step's pauses",
    ),
    "context_tokens": (
        "trtllm_total_context_tokens",
        "gauge ← inflightBatchingStats.numCtxTokens: the context tokens the iteration's forward computes (its "
        "chunks; reused blocks are not computed)",
        "the step's prefill tokens",
    ),
    "completed": (
        "trtllm_num_requests_completed_total",
        "counter ← numCompletedRequests, the requests that finished in each iteration",
        "finished requests",
    ),
    "ttft": (
        "trtllm_time_to_first_token_seconds",
        "histogram of seconds, one value per finished request (with return_perf_metrics)",
        "TTFT",
    ),
    "e2e": ("trtllm_e2e_request_latency_seconds", "histogram of seconds, one value per finished request", "E2E"),
    "queue_time": (
        "trtllm_request_queue_time_seconds",
        "histogram of seconds, one value per finished request: its time in the WAITING phase",
        "queue time",
    ),
}

FAMILIES: dict[str, dict[str, tuple[str, str, str]]] = {"vllm": VLLM, "sglang": SGLANG, "tgi": TGI, "trtllm": TRTLLM}

# What the gauges figure shows, per family, and when the server exports those values (None: after every step)
TITLES = {
    "vllm": "vLLM's metrics as the server would export them after each step",
    "sglang": "SGLang's metrics as its scheduler reports them after each step",
    "tgi": "TGI's router metrics as they stand while each step runs",
    "trtllm": "TensorRT-LLM's iteration statistics of each step",
}
CADENCE = {
    "vllm": None,
    "sglang": "SGLang exports them at each prefill batch and every 40th decode batch (--decode-log-interval)",
    "tgi": "TGI sets its batch gauges only where its loop schedules: after a new batch they lag one step",
    "trtllm": "TensorRT-LLM records them per iteration with enable_iter_perf_stats (overlap scheduler off)",
}


def family(header: Mapping[str, Any]) -> str:
    """``sglang`` for a trace of SGLang's scheduler (the ``sglang`` batching mode, or a trace an SGLang server wrote:
    header ``source``), ``tgi`` / ``trtllm`` for those batching modes, else ``vllm`` (static, continuous and
    speculative batching follow vLLM's scheduler)."""
    if header.get("policy") == "sglang" or header.get("source") == "sglang":
        return "sglang"
    return header["policy"] if header.get("policy") in ("tgi", "trtllm") else "vllm"


def name_of(header: Mapping[str, Any], key: str) -> str:
    """The exported name of metric ``key`` for the trace's family."""
    return FAMILIES[family(header)][key][0]
