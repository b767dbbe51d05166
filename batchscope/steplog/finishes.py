"""How a request ended, for the metrics: finished (``stop``, ``length``, ...) or aborted, and when, by vLLM 0.33's
definitions (``vllm/v1/metrics/stats.py``, ``vllm/v1/engine/output_processor.py``, ``vllm/v1/metrics/loggers.py``).

- A request's **end** on the step clock (step ``k`` starts at time ``k`` and ends at ``k + 1``): a finish at the
  end of the step that lists it (the one that sampled its last token); an abort made before step ``k`` was
  scheduled at ``k``; one made while step ``k`` ran (``during_step``), or one SGLang only marked to finish that ran
  step ``k`` (``to_finish``), at ``k + 1``. E2E runs to that end, so an
  aborted request's E2E is to the abort (vLLM: ``e2e_latency`` is the time since arrival when it is reported).
- TPOT is vLLM's ``mean_time_per_output_token``: (last token - first token) / (output tokens - 1), the decode
  time between the first and the last token, not the time to the abort.
- vLLM observes TTFT (``vllm:time_to_first_token_seconds``) and each inter-token gap when the token comes, whatever
  happens later, so an aborted request that had sampled counts there, and one aborted before its first token has
  no TTFT. Its frontend reports a request it aborts (client gone, timeout) to no finished-request figure: not in
  ``vllm:request_success_total``, nor in the E2E, queue, TPOT histograms (``abort_requests`` never calls
  ``_update_stats_from_finished``). So the aggregates of ``FINISHED_ONLY`` leave aborted requests out, and they are
  counted apart (``num_aborted``). A stop string is the exception a trace cannot see: vLLM's frontend counts it as
  a ``stop`` finish but ends it by aborting it in the engine core, so its scheduler (and a trace) sees an abort.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FINISHED_ONLY = ("queue_time", "e2e", "tpot")  # aggregated over finished requests only, as vLLM's histograms


def aborted_before(entry: Mapping[str, Any]) -> bool:
    """A ``finished`` entry of an abort made before its step was scheduled (``batchscope.steplog.records.AbortRecord``):
    the request is not in the step's batch and its blocks are already out of the step's tables. An abort of an older
    trace (no ``aborted`` record) is taken as a finish at the step's end, as those traces drew it, and so is SGLang's
    abort of a running request (``to_finish``: it ran the step and ended at its end)."""
    aborted = entry.get("aborted")
    if entry["reason"] != "abort" or aborted is None:
        return False
    return not aborted.get("during_step", False) and not aborted.get("to_finish", False)


def end_steps(steps: list[dict]) -> dict[str, int]:
    """request_id -> the end of each request that ended within ``steps``, on the step clock (see above)."""
    return {f["request_id"]: st["step"] + (0 if aborted_before(f) else 1) for st in steps for f in st["finished"]}


def in_aggregate(metric: str, request: dict) -> bool:
    """Whether ``request``'s figure ``metric`` (a ``batchscope.steplog.metrics.LATENCY_METRICS`` name) enters the run's
    distribution: not a finished-request figure of an aborted request."""
    return not (request.get("finish_reason") == "abort" and metric.rsplit("_", 1)[0] in FINISHED_ONLY)


def counts(requests: list[dict]) -> dict[str, int]:
    """``num_finished`` (ended with any reason but ``abort``: vLLM's ``vllm:request_success_total``) and
    ``num_aborted`` (reason ``abort``) of ``batchscope.steplog.metrics.request_metrics``' rows; the rest were still
    running when the trace ended."""
    reasons = [r.get("finish_reason") for r in requests]
    return {
        "num_finished": sum(r is not None and r != "abort" for r in reasons),
        "num_aborted": reasons.count("abort"),
    }
