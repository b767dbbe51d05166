"""Prefix-cache hit rate of a trace, with vLLM's definition (``PrefixCacheStats`` in vllm/v1/metrics/stats.py).

At each admission a request *queries* the cache with its known tokens (its prompt; after a preemption, prompt + the
tokens it had generated) and *hits* the tokens found there (``num_prefix_hit_tokens`` of the step record). vLLM's
hit rate is hits / queries over first admissions; re-admissions after a preemption are counted apart
(``preempted_*``), since they mostly find their own blocks again.
"""

from __future__ import annotations


def prefix_cache_stats(records: list[dict]) -> dict:
    """``prefix_cache_queries`` / ``prefix_cache_hits`` (tokens, first admissions), ``prefix_cache_hit_rate``
    (hits / queries, 0..1; ``None`` without queries or for a trace recorded without hit counts), and
    ``preempted_prefix_cache_queries`` / ``preempted_prefix_cache_hits`` (tokens, re-admissions)."""
    header, steps = records[0], records[1:-1]
    prompts = {r["request_id"]: r["num_prompt_tokens"] for r in header["requests"]}
    sampled: dict[str, int] = {}
    admitted: set[str] = set()
    totals = dict.fromkeys(("queries", "hits", "preempted_queries", "preempted_hits"), 0)
    recorded = any("num_prefix_hit_tokens" in st for st in steps)
    for st in steps:
        for rid, hit in st.get("num_prefix_hit_tokens", {}).items():
            prefix = "preempted_" if rid in admitted else ""
            totals[prefix + "queries"] += prompts[rid] + sampled.get(rid, 0)
            totals[prefix + "hits"] += hit
            admitted.add(rid)
        for s in st["sampled"]:
            sampled[s["request_id"]] = sampled.get(s["request_id"], 0) + 1
    rate = totals["hits"] / totals["queries"] if recorded and totals["queries"] else None
    return {
        "prefix_cache_queries": totals["queries"] if recorded else None,
        "prefix_cache_hits": totals["hits"] if recorded else None,
        "prefix_cache_hit_rate": rate,
        "preempted_prefix_cache_queries": totals["preempted_queries"] if recorded else None,
        "preempted_prefix_cache_hits": totals["preempted_hits"] if recorded else None,
    }
