"""An SGLang trace's gauges are SGLang's, under SGLang's names (``batchscope.steplog.gauges_sglang``,
``batchscope.steplog.metric_names``): hand-computed anchors of the shipped stories, and the player's figure labels.
(Against SGLang's own pool observer and prefill stats on its scheduler: tests_sglang/test_sglang_gauges.py; the names
against its installed collector: tests_sglang/test_sglang_metric_names.py.)"""

from __future__ import annotations

from batchscope.app.common import TRACE_DIR
from batchscope.figures.gauges import gauge_figure
from batchscope.steplog import gauges as g
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView


def _view(name: str) -> TraceView:
    return TraceView(trace.read(TRACE_DIR / f"{name}.jsonl"))


def test_hand_computed_anchors_of_the_vllm_vs_sglang_story():
    """216 token slots, 32 chunk tokens. Step 0: A's first 32 of 44 prompt tokens (32 / 216 = 0.148). Step 1: A's last
    12 and B's 11 beyond its 31-token radix-cache hit: 31 / (31 + 23) of the batch hit; 55 slots used. Step 3: C hits
    32 and computes 11 (32 / 43), beside the running A and B. Step 52: 215 of 216 slots used (0.995 -> 1.0). Step 53:
    the decode batch of three does not fit, C is retracted: two decode, two wait (D, C), the counter moves."""
    got = g.gauges(_view("vllm-vs-sglang-sglang"))
    assert got["kv_usage"][:2] == [0.15, 0.25] and got["kv_usage"][52] == 1.0
    assert got["hit_rate"][0] == 0.0 and got["hit_rate"][1] == 31 / 54 and got["hit_rate"][3] == 32 / 43
    assert got["hit_rate"][2] == 31 / 54  # a decode batch keeps the last prefill batch's rate
    assert got["step_tokens"][:4] == [32, 23, 2, 11]
    assert [got["running"][k] for k in (1, 2, 3)] == [0, 2, 2]  # a prefill batch reports the running batch beside it
    assert (got["running"][53], got["waiting"][53], got["preemptions"][52], got["preemptions"][53]) == (2, 2, 0, 1)


def test_seed_abcd_reports_the_running_batch_beside_a_chunk():
    """Step 1: A's second chunk runs alone beside B and C (running 2), 64 of 256 slots (0.25); step 2 its last 15
    tokens; step 3 the three decode. At the end every slot is free."""
    got = g.gauges(_view("seed-abcd-sglang"))
    assert got["running"][:4] == [0, 2, 2, 3] and got["step_tokens"][:4] == [32, 32, 15, 3]
    assert got["kv_usage"][1] == 0.25 and got["kv_usage"][-1] == 0.0 and got["waiting"][:2] == [1, 1]


def test_the_figure_names_each_familys_metrics():
    sglang = gauge_figure(_view("seed-abcd-sglang"))
    labels = [tr.name for tr in sglang.data]
    assert labels == [
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage × 100",
        "sglang:cache_hit_rate × 100",
        "sglang:realtime_tokens_total (this step)",
        "sglang:num_retracted_requests_total (cumulative)",
    ]
    assert "SGLang's metrics" in sglang.layout.title.text and "vllm" not in sglang.layout.title.text
    assert "every 40th decode batch" in sglang.layout.title.text
    vllm = [tr.name for tr in gauge_figure(_view("seed-abcd-continuous")).data]
    assert vllm[0] == "vllm:num_requests_running" and not any(name.startswith("sglang:") for name in vllm)
