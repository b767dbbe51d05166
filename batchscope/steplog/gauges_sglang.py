"""SGLang 0.5.23's scheduler metrics after each step of an SGLang trace (header ``policy`` ``sglang``).

One value per step position (``TraceView.steps``), what SGLang's ``MetricsReporter``
(sglang/srt/managers/scheduler_components/metrics_reporter.py) puts in its ``SchedulerStats`` when it reports a
batch, once the batch's results are processed: ``report_prefill_stats`` for an EXTEND batch, ``report_decode_stats``
for a DECODE batch. (SGLang exports a decode batch's values only every 40th one, ``--decode-log-interval``; each
value here is the report the step's batch would make.) The keys are ``batchscope.steplog.gauges``'; the names and their
words, ``batchscope.steplog.metric_names.SGLANG``. Units: requests, token slots (page_size 1), tokens.

- ``running`` (``sglang:num_running_reqs``): an EXTEND batch reports ``PrefillStats.num_running_reqs``, the running
  batch it was formed beside (the decodes that waited or ran inside it with mixed chunks; not its new requests nor
  the chunked one); a DECODE batch its ``reqs``, after retraction, those finishing in it included.
- ``waiting`` (``sglang:num_queue_reqs``): the waiting queue after the step (a retracted request is back in it).
- ``kv_usage`` (``sglang:token_usage``): ``PoolStats.update_scheduler_stats``: ``round(used / pool, 2)`` with
  ``used = pool - available - evictable`` (pool_stats_observer.py, ``_get_token_info``): the slots the unfinished
  requests hold or lock once the step's results are processed (``_used_after``: cached tokens nobody locks count
  as free; a finished request's K/V is released into the radix cache, unlocked, before the report).
- ``hit_rate`` (``sglang:cache_hit_rate``): of an EXTEND batch, ``hit / (hit + input)`` over what its adder charged
  (``PrefillAdder._update_prefill_budget``): each new request's radix-cache hit and computed tokens, the continuing
  chunk's tokens, not the mixed decodes; requests retracted before (``retracted_stain``) left out of both; 0.0 if
  nothing is left. A DECODE batch does not set it: the gauge keeps the last prefill batch's (0.0 before any).
- ``preemptions`` (``sglang:num_retracted_requests_total``): retractions so far, counted as the decode batch is
  formed (``increment_retracted_reqs`` in ``update_running_batch``).
- ``step_tokens``: the step's increase of ``sglang:realtime_tokens_total``: an EXTEND batch adds the adder's computed
  tokens (``prefill_compute``; mixed decodes are in neither mode), a DECODE batch one per request (``decode``).
"""

from __future__ import annotations

from typing import Any

from batchscope.steplog.decisions import decisions
from batchscope.steplog.view import TraceView

SGLANG_KEYS = ("running", "waiting", "kv_usage", "hit_rate", "preemptions", "step_tokens")


def _used_after(view: TraceView, k: int, gone: set[str], extended: set[str]) -> int:
    """Token slots in use once step ``k``'s results are processed: those its unfinished requests hold or lock then
    (``num_used_blocks`` counts a slot while a request holds or locks it). A request of ``extended`` (it ran in the
    EXTEND batch, not as a mixed decode) that sampled has entered the radix cache (``checkpoint_kv_cache``): it
    holds what its next table held before that step's allocations, its copies of tokens someone cached first freed
    and their cached slots locked instead; the chunked request enters it at the next step's start
    (``stash_chunked_request``), after the report."""
    st, tables = view.steps[k], view.block_tables(k)
    nxt = view.block_tables(k + 1) if k + 1 < view.num_steps else {}
    new = view.steps[k + 1]["kv"].get("allocated", {}) if nxt else {}
    entered = extended & {s["request_id"] for s in st["sampled"]}
    held: set[int] = set()
    for rid, table in tables.items():
        if rid in gone:
            continue
        held |= set(nxt[rid]) - set(new.get(rid, ())) if rid in entered and rid in nxt else set(table)
    return len(held)


def _prefill_charge(view: TraceView, k: int, rows: list[Any], stained: set[str]) -> tuple[int, int, int]:
    """(computed tokens, effective hit tokens, effective computed tokens) the adder charged for ``rows``, the EXTEND
    batch's own rows of step ``k`` (a resumed request's one token counts, whatever its row's kind)."""
    hits = {a["request_id"]: a["num_prefix_hit_tokens"] for a in decisions(view, k).get("admissions", [])}
    fresh = [s for s in rows if s["request_id"] not in stained]
    return (
        sum(s["num_tokens"] for s in rows),
        sum(hits.get(s["request_id"], 0) for s in fresh),
        sum(s["num_tokens"] for s in fresh),
    )


def sglang_gauges(view: TraceView) -> dict[str, list[Any]]:
    """``{key: one value per step position}`` for every key of ``SGLANG_KEYS`` (the module docstring)."""
    out: dict[str, list[Any]] = {key: [] for key in SGLANG_KEYS}
    stained: set[str] = set()  # retracted in an earlier step
    rate, retracted = 0.0, 0
    for k, st in enumerate(view.steps):
        batch = decisions(view, k).get("batch", {})
        gone = {f["request_id"] for f in st["finished"]}
        pool = int(st["kv"]["num_blocks"])
        rows: list[Any] = []
        if batch.get("kind", "extend") == "extend":
            mixed = batch.get("decodes_mixed", [])
            rows = [s for s in st["scheduled"] if s["request_id"] not in mixed]
            running = len(batch.get("decodes_waiting", [])) + len(mixed)
            computed, hit, effective = _prefill_charge(view, k, rows, stained)
            rate = hit / (hit + effective) if hit + effective else 0.0
        else:
            running = computed = len(st["scheduled"])
        retracted += len(st["preempted"])
        stained |= set(st["preempted"])
        out["running"].append(running)
        out["waiting"].append(len(st["waiting"]))
        used = _used_after(view, k, gone, {s["request_id"] for s in rows})
        out["kv_usage"].append(round(used / pool, 2) if pool else 0.0)
        out["hit_rate"].append(rate)
        out["preemptions"].append(retracted)
        out["step_tokens"].append(computed)
    return out
