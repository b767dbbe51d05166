"""The TGI and TensorRT-LLM tables of ``batchscope.steplog.metric_names`` against the engines' own source, pinned here
as read (neither engine can be installed on these machines; SGLang's and vLLM's tables are checked against their
installed packages in tests_sglang/ and tests_vllm/). Every name a table gives must be one the engine registers,
with the kind the engine gives it; TensorRT-LLM's must also name the ``IterationStats`` field it is exported from."""

from __future__ import annotations

import re

import pytest

from batchscope.app.common import TRACE_DIR
from batchscope.steplog import trace
from batchscope.steplog.metric_names import TGI, TRTLLM, family

# huggingface/text-generation-inference at db931fcf42da018a3657580c64bf2720f167f9ab: every metrics::gauge!,
# counter! and histogram! call of the v3 backend and the router (git grep 'metrics::\(gauge\|counter\|histogram\)!'),
# name -> (kind, where it is first set or recorded)
TGI_SOURCE = {
    "tgi_batch_current_size": ("gauge", "backends/v3/src/backend.rs:170"),  # and :290, set to 0
    "tgi_batch_current_max_tokens": ("gauge", "backends/v3/src/backend.rs:171"),  # and :291
    "tgi_batch_concat": ("counter", "backends/v3/src/backend.rs:210"),  # :214, :216; label reason
    "tgi_batch_inference_count": ("counter", "backends/v3/src/backend.rs:305"),  # method prefill; :349 decode
    "tgi_batch_concat_duration": ("histogram", "backends/v3/src/backend.rs:317"),
    "tgi_batch_forward_duration": ("histogram", "backends/v3/src/backend.rs:320"),
    "tgi_batch_decode_duration": ("histogram", "backends/v3/src/backend.rs:322"),
    "tgi_batch_filter_duration": ("histogram", "backends/v3/src/backend.rs:324"),
    "tgi_batch_inference_duration": ("histogram", "backends/v3/src/backend.rs:326"),
    "tgi_batch_inference_success": ("counter", "backends/v3/src/backend.rs:328"),
    "tgi_batch_inference_failure": ("counter", "backends/v3/src/backend.rs:335"),
    "tgi_request_failure": ("counter", "backends/v3/src/backend.rs:439"),
    "tgi_request_skipped_tokens": ("histogram", "backends/v3/src/backend.rs:480"),
    "tgi_batch_max_total_tokens": ("gauge", "backends/v3/src/lib.rs:138"),
    "tgi_queue_size": ("gauge", "backends/v3/src/queue.rs:143"),  # increment at append; :158 set after next_batch
    "tgi_batch_next_size": ("histogram", "backends/v3/src/queue.rs:501"),
    "tgi_request_count": ("counter", "router/src/server.rs:203"),
    "tgi_request_success": ("counter", "router/src/server.rs:415"),
    "tgi_request_duration": ("histogram", "router/src/server.rs:416"),
    "tgi_request_validation_duration": ("histogram", "router/src/server.rs:417"),
    "tgi_request_queue_duration": ("histogram", "router/src/server.rs:418"),
    "tgi_request_inference_duration": ("histogram", "router/src/server.rs:419"),
    "tgi_request_mean_time_per_token_duration": ("histogram", "router/src/server.rs:420"),
    "tgi_request_generated_tokens": ("histogram", "router/src/server.rs:422"),
    "tgi_request_input_length": ("histogram", "router/src/validation.rs:192"),
    "tgi_request_max_new_tokens": ("histogram", "router/src/validation.rs:433"),
}
TGI_LABELS = {"tgi_batch_inference_count": {"method": {"prefill", "decode"}}}  # backend.rs:305, :349

# NVIDIA/TensorRT-LLM, read through the stored index (the repository is too large to fetch here, and the index gives
# no line numbers, so each entry names the function): trtllm-serve's MetricsCollector in
# tensorrt_llm/metrics/collector.py at 050f80def8df236e326949c8bd9dee10fd896a83, name -> (kind, the IterationStats
# field log_iteration_stats sets it from, or None for a per-request metric of log_request_metrics_dict)
TRTLLM_SOURCE = {
    "trtllm_num_requests_running": ("gauge", "numActiveRequests"),
    "trtllm_num_requests_waiting": ("gauge", "numQueuedRequests"),
    "trtllm_num_requests_completed_total": ("counter", "numCompletedRequests"),
    "trtllm_max_num_active_requests": ("gauge", "maxNumActiveRequests"),
    "trtllm_kv_cache_utilization": ("gauge", "usedNumBlocks"),  # usedNumBlocks / maxNumBlocks
    "trtllm_kv_cache_max_blocks": ("gauge", "maxNumBlocks"),
    "trtllm_kv_cache_free_blocks": ("gauge", "freeNumBlocks"),
    "trtllm_kv_cache_used_blocks": ("gauge", "usedNumBlocks"),
    "trtllm_kv_cache_hit_rate": ("gauge", "cacheHitRate"),
    "trtllm_num_context_requests": ("gauge", "numContextRequests"),
    "trtllm_num_generation_requests": ("gauge", "numGenRequests"),
    "trtllm_num_paused_requests": ("gauge", "numPausedRequests"),
    "trtllm_num_scheduled_requests": ("gauge", "numScheduledRequests"),
    "trtllm_total_context_tokens": ("gauge", "numCtxTokens"),
    "trtllm_time_to_first_token_seconds": ("histogram", None),
    "trtllm_e2e_request_latency_seconds": ("histogram", None),
    "trtllm_request_queue_time_seconds": ("histogram", None),
}
# cpp/include/tensorrt_llm/executor/types.h at a98a9061d72f6fd39f5d055ebdd2c6878a100e2c: the fields of the structs the
# JSON of /metrics is written from (IterationStats' own, KvCacheStats, InflightBatchingStats)
TRTLLM_FIELDS = {
    "IterationStats": {
        "timestamp", "iter", "iterLatencyMS", "newActiveRequestsQueueLatencyMS", "numNewActiveRequests",
        "numActiveRequests", "numQueuedRequests", "numCompletedRequests", "maxNumActiveRequests",
        "maxBatchSizeStatic", "maxBatchSizeTunerRecommended", "maxBatchSizeRuntime", "maxNumTokensStatic",
        "maxNumTokensTunerRecommended", "maxNumTokensRuntime", "gpuMemUsage", "cpuMemUsage", "pinnedMemUsage",
        "kvCacheStats", "crossKvCacheStats", "staticBatchingStats", "inflightBatchingStats",
    },
    "KvCacheStats": {
        "maxNumBlocks", "freeNumBlocks", "usedNumBlocks", "tokensPerBlock", "allocTotalBlocks", "allocNewBlocks",
        "reusedBlocks", "missedBlocks", "cacheHitRate",
    },
    "InflightBatchingStats": {
        "numScheduledRequests", "numContextRequests", "numGenRequests", "numPausedRequests", "numCtxTokens",
        "microBatchId", "avgNumDecodedTokensPerIter",
    },
}  # fmt: skip


def _name_and_labels(exported: str) -> tuple[str, dict[str, str]]:
    """``'tgi_x{method="prefill"}'`` -> ``('tgi_x', {'method': 'prefill'})``."""
    base, _, labels = exported.partition("{")
    return base, dict(re.findall(r'(\w+)="([^"]*)"', labels))


@pytest.mark.parametrize("key", list(TGI))
def test_every_tgi_name_is_one_tgi_registers_with_its_kind(key):
    exported, what, _ours = TGI[key]
    name, labels = _name_and_labels(exported)
    assert name in TGI_SOURCE, f"{name} is not registered by TGI at db931fcf"
    assert what.split(" ")[0].rstrip(",") == TGI_SOURCE[name][0], (name, what)
    for label, value in labels.items():
        assert value in TGI_LABELS[name][label], (name, label, value)


@pytest.mark.parametrize("key", list(TRTLLM))
def test_every_trtllm_name_is_one_trtllm_serve_exports_from_its_field(key):
    exported, what, _ours = TRTLLM[key]
    assert exported in TRTLLM_SOURCE, f"{exported} is not exported by trtllm-serve's MetricsCollector"
    kind, field = TRTLLM_SOURCE[exported]
    assert what.split(" ")[0].rstrip(",") == kind, (exported, what)
    named = re.findall(r"← ([\w. /]+?)(?::|,|$| \()", what)
    if field is None:
        assert not named
        return
    (source,) = named
    fields = set(re.findall(r"[a-z]\w*", source))
    assert field in fields, (exported, source)
    known = set().union(*TRTLLM_FIELDS.values())
    assert fields <= known, fields - known


@pytest.mark.parametrize(
    ("run", "kin"),
    [
        ("tgi", "tgi"),
        ("tgi_no_chunking", "tgi"),
        ("trtllm", "trtllm"),
        ("trtllm_max_utilization", "trtllm"),
        ("continuous", "vllm"),
        ("static", "vllm"),
        ("sglang", "sglang"),
    ],
)
def test_each_shipped_run_is_read_in_its_engines_family(run, kin):
    assert family(trace.read(TRACE_DIR / f"four-engines-{run}.jsonl")[0]) == kin
