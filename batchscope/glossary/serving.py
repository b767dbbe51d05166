"""The glossary's terms about memory and running a server: KV-cache bytes, the last block's fragmentation,
memory-bound decode, GQA, head-of-line blocking, and what vLLM's production metrics measure. Each is a few
sentences of our own, with the figures of the shipped model taken from where they are kept
(``batchscope.figures.kv_memory`` for its shape, ``batchscope.figures.weight_floor`` for the weight-streaming floor
``engine bench`` measured), and a rule that finds it in a trace (``serving_finders``)."""

from __future__ import annotations

from batchscope.figures.kv_memory import DEFAULT_MODEL, MODEL_SHAPES, fmt_bytes, kv_bytes_per_token, per_token_sum
from batchscope.figures.weight_floor import weight_floor
from batchscope.glossary import serving_finders as sf
from batchscope.glossary.term import Term
from batchscope.steplog.metric_names import VLLM

_SHAPE = MODEL_SHAPES[DEFAULT_MODEL]
_HEADER = {"model": DEFAULT_MODEL, "dtype": "float32"}
_FLOOR = weight_floor(DEFAULT_MODEL, "float32", "cpu")
_FLOOR_TEXT = (
    f"Here: {_FLOOR['source']}, so no step on this CPU takes less than about {_FLOOR['seconds'] * 1e3:.0f} ms. "
    if _FLOOR
    else ""
)
_SIXTEEN_C, _PREEMPTION_C = ("sixteen", "continuous"), ("preemption", "continuous")

# vLLM 0.33's Prometheus names -> what each observes -> Batchscope's figure (``batchscope.steplog.metric_names``)
_GLOSSED = ("ttft", "itl", "tpot", "e2e", "queue_time", "running", "waiting", "kv_usage", "preemptions")
VLLM_METRICS = tuple(VLLM[key] for key in (*_GLOSSED, "prefix_queries", "prefix_hits"))

SERVING_TERMS = (
    Term(
        "kv_bytes",
        "KV-cache bytes per token",
        (
            "Each token in the cache keeps a key and a value vector for every layer and every KV head. For "
            f"{DEFAULT_MODEL} in float32 that is {per_token_sum(_HEADER)} "
            f"({fmt_bytes(kv_bytes_per_token(_HEADER) or 0)}) per token, so the "
            "memory given to the pool, divided by this, is how many tokens the server can hold at once."
        ),
        "bytes per token = 2 (K and V) × layers × KV heads × head_dim × bytes per element\n"
        "bytes per block = bytes per token × block_size",
        sf.kv_bytes,
    ),
    Term(
        "fragmentation",
        "Internal fragmentation (the last block)",
        (
            "Every block of a request is full except its last, whose slots past the last token are reserved for "
            "the request but hold nothing yet. Paging keeps this waste under one block per request, against a "
            "whole max_model_len when memory is reserved up front; a smaller block_size wastes less but makes "
            "longer block tables."
        ),
        "unused slots = len(block table) × block_size − tokens with K/V = (block_size − tokens mod block_size) mod "
        "block_size",
        sf.fragmentation,
    ),
    Term(
        "memory_bound",
        "Memory-bound decode",
        (
            "A decode step computes one token per request but reads every weight of the model once, however many "
            "rows it has, so at small batches its time is set by memory bandwidth, not arithmetic: more rows cost "
            f"little more. {_FLOOR_TEXT}Batching decodes is what turns that fixed cost into more tokens."
        ),
        "decode step time ≥ weight bytes / memory read bandwidth (whatever the batch, until compute catches up)",
        sf.memory_bound,
        (_SIXTEEN_C,),
    ),
    Term(
        "gqa",
        "Grouped-query attention (GQA)",
        (
            "Several query heads share one key/value head, so the cache stores K and V for the KV heads only. "
            f"{DEFAULT_MODEL} has {_SHAPE.num_attention_heads} query heads and {_SHAPE.num_kv_heads} KV heads: "
            f"its KV cache is {_SHAPE.gqa_factor:g}× smaller than with one KV head per query head (multi-head "
            f"attention), so the same memory holds {_SHAPE.gqa_factor:g}× the tokens."
        ),
        "KV size ∝ num_key_value_heads; saving = num_attention_heads / num_key_value_heads",
        sf.gqa,
    ),
    Term(
        "head_of_line",
        "Head-of-line blocking",
        (
            "Under FCFS the scheduler admits only from the head of the queue, so a request that cannot be admitted "
            "(too few free KV blocks for it, or, with chunked prefill off, a prompt longer than the budget left) "
            "holds back every request behind it, even a smaller one that would fit. Static batching has its own "
            "version: a finished request's row stays idle until the slowest member of its batch ends."
        ),
        "admitted = a prefix of the queue, head first; nobody behind a waiting head is admitted",
        sf.head_of_line,
        (_PREEMPTION_C,),
    ),
    Term(
        "vllm_metrics",
        "vLLM's production metrics",
        (
            "What a vLLM server exports for Prometheus on /metrics (the names of vLLM 0.33, "
            "vllm/v1/metrics/loggers.py), what each observes, and the figure Batchscope computes from a trace for "
            "it (the latencies on the Metrics page and in python -m batchscope metrics, the gauges and counters after "
            "each step under the Trace page's timeline). The latencies are histograms of seconds, so a dashboard "
            "shows their percentiles; kv_cache_usage_perc is a fraction despite its name, and leaves out vLLM's "
            "null block; the prefix-cache counters count first admissions only."
        ),
        "\n".join(f"{name}: {what} → {ours}" for name, what, ours in VLLM_METRICS),
        sf.vllm_metrics,
        (_PREEMPTION_C,),
    ),
)
