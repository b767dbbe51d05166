"""The SGLang family's sentences (``policy`` ``sglang``): the prefill-first wait and retractions, from the step's
``decisions`` (``steplog.records.BatchRecord``, retractions as ``PreemptionRecord`` with rule ``sglang_retract``);
the words are ``steplog.reasons``'."""

from __future__ import annotations

from steplog.decisions import decisions
from steplog.reasons import PREFILL_FIRST, RETRACTION_CAUSE, VICTIM_RULES
from steplog.records import PreemptionRecord
from steplog.view import TraceView


def _names(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]


def prefill_first(view: TraceView, step: int) -> list[str]:
    """The sentence "The decodes of A and B wait this step: ..." when an EXTEND batch ran while others decode."""
    waits = decisions(view, step).get("batch", {}).get("decodes_waiting", [])
    if not waits:
        return []
    whose = "decode of {} waits" if len(waits) == 1 else "decodes of {} wait"
    return [f"The {whose.format(_names(waits))} this step: {PREFILL_FIRST}."]


def retraction(p: PreemptionRecord) -> str | None:
    """The sentence "X is retracted: ..." for a retraction record (None for any other preemption)."""
    if p["rule"] != "sglang_retract":
        return None
    need, free = p.get("need", 0), p.get("free", 0)
    freed = p.get("num_freed_tokens", p["num_dropped_tokens"])
    kept = p["num_dropped_tokens"] - freed
    cache = f", {kept} stay in the radix cache" if kept else ""
    return (
        f"{p['request_id']} is retracted: {RETRACTION_CAUSE} ({need} tokens needed, {free} free); "
        f"{VICTIM_RULES[p['rule']]}. {freed} tokens of its K/V are freed{cache}; it goes back to the waiting queue."
    )
