"""Prefix-cache hit rate of a trace, with vLLM's definition (``PrefixCacheStats`` in vllm/v1/metrics/stats.py).

At each admission a request *queries* the cache with its known tokens (its prompt; after a preemption, prompt + the
tokens it had generated) and *hits* the tokens found there (``num_prefix_hit_tokens`` of the step record). vLLM's
hit rate is hits / queries over first admissions; re-admissions after a preemption are counted apart
(``preempted_*``), since they mostly find their own blocks again.
"""

from __future__ import annotations

from batchscope.steplog.decisions import decisions
from batchscope.steplog.view import TraceView


def prefix_cache_stats(records: list[dict]) -> dict:
    """``prefix_cache_queries`` / ``prefix_cache_hits`` (tokens, first admissions), ``prefix_cache_hit_rate``
    (hits / queries, 0..1; ``None`` without queries or for a trace recorded without hit counts), and
    ``preempted_prefix_cache_queries`` / ``preempted_prefix_cache_hits`` (tokens, re-admissions).

    Read from each step's admission records (``batchscope.steplog.decisions``: recorded, or inferred from the log), so a
    version 2 trace, whose requests are declared in the steps where they arrive, counts like a version 1 one."""
    view = TraceView(records)
    recorded = any(
        "num_prefix_hit_tokens" in st or "num_cached_tokens" in st or "decisions" in st for st in view.recorded_steps
    )
    totals = dict.fromkeys(("queries", "hits", "preempted_queries", "preempted_hits"), 0)
    for k in range(view.num_steps):
        for a in decisions(view, k).get("admissions", []):
            prefix = "preempted_" if a["resumed"] else ""
            totals[prefix + "queries"] += a["num_prefix_hit_tokens"] + a["num_recompute_tokens"] + a["num_new_tokens"]
            totals[prefix + "hits"] += a["num_prefix_hit_tokens"]
    rate = totals["hits"] / totals["queries"] if recorded and totals["queries"] else None
    return {
        "prefix_cache_queries": totals["queries"] if recorded else None,
        "prefix_cache_hits": totals["hits"] if recorded else None,
        "prefix_cache_hit_rate": rate,
        "preempted_prefix_cache_queries": totals["preempted_queries"] if recorded else None,
        "preempted_prefix_cache_hits": totals["preempted_hits"] if recorded else None,
    }
