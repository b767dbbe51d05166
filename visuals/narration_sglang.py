"""The SGLang family's sentences (``policy`` ``sglang``), from the step's ``decisions``: the prefill-first wait and
what each admission's estimate reserved (``steplog.records.BatchRecord``, ``AdmissionRecord``), and retractions
(``PreemptionRecord`` with rule ``sglang_retract``); the words are ``steplog.reasons``'."""

from __future__ import annotations

from steplog.decisions import decisions
from steplog.reasons import PREFILL_FIRST, RADIX_HIT, RESERVED_OUTPUT, RETRACTION_CAUSE, VICTIM_RULES
from steplog.records import AdmissionRecord, PreemptionRecord
from steplog.view import TraceView


def _names(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]


def batch_sentences(view: TraceView, step: int) -> list[str]:
    """SGLang's batch decision of ``step`` in sentences: the decodes that wait behind the prefill (EXTEND) batch,
    then what each admission's estimate charged (``admission``). Empty for a step of any other scheduler."""
    d = decisions(view, step)
    waits = d.get("batch", {}).get("decodes_waiting", [])
    out = []
    if waits:
        whose = "decode of {} waits" if len(waits) == 1 else "decodes of {} wait"
        out.append(f"The {whose.format(_names(waits))} this step: {PREFILL_FIRST}.")
    ratio = d.get("batch", {}).get("new_token_ratio")
    return out + [s for a in d.get("admissions", []) if (s := admission(a, ratio))]


# The name ``visuals.narration`` imports (it says the wait first; the admissions' estimates follow it).
prefill_first = batch_sentences


def admission(a: AdmissionRecord, ratio: float | None) -> str | None:
    """ "D's admission reserves 40 output tokens ...": the output estimate SGLang charged an admitted request (None
    for a record without one: another scheduler's), and a token-granular radix-cache hit."""
    if "num_reserved_output_tokens" not in a:
        return None
    rid, reserved, hit = a["request_id"], a["num_reserved_output_tokens"], a["num_prefix_hit_tokens"]
    if reserved:
        at = f" {ratio:.3f}" if ratio is not None else ""
        text = f"SGLang's admission reserves {reserved} output tokens for {rid} (its estimate: {RESERVED_OUTPUT}{at})"
    else:
        text = f"{rid} computes in chunks, so SGLang reserves no output for it until its last one"
    if hit:
        text += f"; its {hit} cached tokens are {RADIX_HIT}"
    text += "."
    return text


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
