"""Trace metrics as pandas tables, for a notebook: ``requests_frame`` (one row per request), ``summary_frame``
(several runs side by side). The numbers come from ``batchscope.steplog.metrics``."""

from __future__ import annotations

import pandas as pd

from batchscope.steplog.metrics import LATENCY_METRICS, request_metrics, summarize


def requests_frame(records: list[dict]) -> pd.DataFrame:
    """``request_metrics`` as a DataFrame indexed by ``request_id`` (for notebooks: ``trace -> DataFrame``).

    Columns ending in ``_s`` are seconds, in ``_steps`` steps; ``itl_*``, ``token_times_s`` and ``token_steps``
    hold lists; missing values (TPOT of a one-token request) are ``NaN``.
    """
    return pd.DataFrame(request_metrics(records)).set_index("request_id")


def summary_frame(runs: dict[str, list[dict]]) -> pd.DataFrame:
    """Side-by-side aggregates of several runs (e.g. ``{"static": trace, "continuous": trace}``).

    One row per figure with columns ``metric``, ``stat`` (mean/p50/p90/p99, or ``value``), ``unit``
    (``requests``, ``s``, ``steps``, ``tokens/s``, ``requests/s``, ``tokens/step``, ``requests/step``, ``fraction``,
    ``tokens``, ``rows``, ``events``), then one column per run label. The prefix-cache rows (``prefix_cache_queries``,
    ``prefix_cache_hits``, ``prefix_cache_hit_rate``, ``preempted_prefix_cache_*``) are ``None`` for a trace that
    records no hit counts.
    """
    units = {
        "num_finished": "requests",  # ended with stop, length, ... (request_success); see batchscope.steplog.finishes
        "num_aborted": "requests",
        "duration_s": "s",
        "num_steps": "steps",
        "total_output_tokens": "tokens",
        "output_throughput_tok_s": "tokens/s",
        "request_throughput_req_s": "requests/s",
        "output_throughput_tok_step": "tokens/step",
        "request_throughput_req_step": "requests/step",
        "slot_utilisation": "fraction",
        "padding_slot_steps": "rows",
        "kv_utilisation_mean": "fraction",
        "kv_utilisation_max": "fraction",
        "num_preemptions": "events",
        "num_dropped_tokens": "tokens",
        "num_recomputed_tokens": "tokens",
        # vLLM's prefix-cache figures: tokens queried / hit at first admissions, then at re-admissions after a
        # preemption; None ("n/a") for a trace that records no hit counts
        "prefix_cache_queries": "tokens",
        "prefix_cache_hits": "tokens",
        "prefix_cache_hit_rate": "fraction",
        "preempted_prefix_cache_queries": "tokens",
        "preempted_prefix_cache_hits": "tokens",
        # speculative decoding (batchscope.steplog.spec_decode, vLLM's spec_decode counters): 0 and None without it
        "num_drafts": "drafts",
        "num_draft_tokens": "tokens",
        "num_accepted_tokens": "tokens",
        "acceptance_rate": "fraction",
        "mean_acceptance_length": "tokens/draft",
    }
    sums = {label: summarize(recs) for label, recs in runs.items()}
    rows = []
    for name, unit in units.items():
        rows.append({"metric": name, "stat": "value", "unit": unit, **{k: s[name] for k, s in sums.items()}})
    for name, (unit, _) in LATENCY_METRICS.items():
        for stat in ("mean", "p50", "p90", "p99"):
            rows.append({"metric": name, "stat": stat, "unit": unit, **{k: s[name][stat] for k, s in sums.items()}})
    return pd.DataFrame(rows)
