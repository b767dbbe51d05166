"""The metrics a server of each engine family exports, by the names it exports them under: one table per family.

A trace's family is its header's ``policy``: ``sglang`` traces are SGLang's (0.5.23, the gauges of
``SchedulerMetricsCollector`` in sglang/srt/observability/metrics_collector.py, set by the scheduler's
``MetricsReporter``); every other trace (static, continuous, a vLLM server's) is vLLM's (0.33,
vllm/v1/metrics/loggers.py). ``batchscope.steplog.gauges`` computes the values per step under the keys below, in the
family's own definition; the player's gauges and the glossary read the names and words from here.

Each entry: key -> (the exported name, what it observes, Batchscope's figure for it). The tables are plain
literals, so that ``tests_sglang/test_sglang_metric_names.py`` can read them without importing the project and
check every ``sglang:`` name, and its kind, against SGLang's installed source.
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

FAMILIES: dict[str, dict[str, tuple[str, str, str]]] = {"vllm": VLLM, "sglang": SGLANG}

# What the gauges figure shows, per family, and when the server exports those values (None: after every step)
TITLES = {
    "vllm": "vLLM's metrics as the server would export them after each step",
    "sglang": "SGLang's metrics as its scheduler reports them after each step",
}
CADENCE = {
    "vllm": None,
    "sglang": "SGLang exports them at each prefill batch and every 40th decode batch (--decode-log-interval)",
}


def family(header: Mapping[str, Any]) -> str:
    """``sglang`` for a trace of SGLang's scheduler (the ``sglang`` batching mode, or a trace an SGLang server wrote:
    header ``source``), else ``vllm`` (static, continuous and speculative batching follow vLLM's scheduler)."""
    return "sglang" if header.get("policy") == "sglang" or header.get("source") == "sglang" else "vllm"


def name_of(header: Mapping[str, Any], key: str) -> str:
    """The exported name of metric ``key`` for the trace's family."""
    return FAMILIES[family(header)][key][0]
