"""The SGLang family's sentences (``policy`` ``sglang``), from the step's ``decisions``: the prefill-first wait, the
decodes that ran inside a prefill batch (``--enable-mixed-chunk``) and what each admission's estimate reserved
(``batchscope.steplog.records.BatchRecord``, ``AdmissionRecord``), and retractions (``PreemptionRecord`` with rule
``sglang_retract``) with the rule that chose them and what their comeback costs; the words are
``batchscope.steplog.reasons``'.

``batchscope.explain.narration`` asks ``batch_sentences(view, step)`` for the step's batch decision and
``retraction(view, step, p)`` for each preemption record (None for another scheduler's)."""

from __future__ import annotations

from batchscope.explain.narration_finish import comeback_clause, handed_on_sentence
from batchscope.explain.words import join
from batchscope.steplog.decisions import decisions
from batchscope.steplog.metric_names import family
from batchscope.steplog.reasons import (
    FIXED_LENGTH,
    MIXED_CHUNK,
    PREFILL_FIRST,
    RADIX_HIT,
    RESERVED_OUTPUT,
    RETRACTION_CAUSE,
    VICTIM_RULES,
)
from batchscope.steplog.records import AdmissionRecord, PreemptionRecord
from batchscope.steplog.view import TraceView


def batch_sentences(view: TraceView, step: int) -> list[str]:
    """SGLang's batch decision of ``step`` in sentences: the decodes that wait behind the prefill (EXTEND) batch or
    run inside it (``decodes_mixed``), then what each admission's estimate charged (``admission``). Empty for a
    step of any other scheduler."""
    if family(view.header) != "sglang":
        return []
    d = decisions(view, step)
    batch = d.get("batch", {})
    waits, mixed = batch.get("decodes_waiting", []), batch.get("decodes_mixed", [])
    out = []
    if waits:
        whose = "decode of {} waits" if len(waits) == 1 else "decodes of {} wait"
        out.append(f"The {whose.format(join(waits))} this step: {PREFILL_FIRST}.")
    if mixed:
        whose = "decode of {} runs" if len(mixed) == 1 else "decodes of {} run"
        out.append(f"The {whose.format(join(mixed))} inside the prefill batch: {MIXED_CHUNK}.")
    ratio = batch.get("new_token_ratio")
    return out + [s for a in d.get("admissions", []) if (s := admission(a, ratio))]


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
    if a.get("output_ratio") == 1.0:
        text += f"; while it runs, SGLang counts its remaining output whole (ratio 1.0): {FIXED_LENGTH}"
    text += "."
    return text


def retraction(view: TraceView, step: int, p: PreemptionRecord) -> str | None:
    """ "C is retracted: ... (92 tokens of K/V: 49 freed, 43 kept in the radix cache); when it is admitted again at
    step 66, 43 of those tokens are found in the radix cache and 49 are recomputed. C was picked by SGLang's
    retraction order: ..." for a retraction record of ``step``; None for any other preemption."""
    if p["rule"] != "sglang_retract":
        return None
    rid, need, free = p["request_id"], p.get("need", 0), p.get("free", 0)
    dropped = p["num_dropped_tokens"]
    freed = p.get("num_freed_tokens", dropped)
    kept = f": {freed} freed, {dropped - freed} kept in the radix cache" if dropped - freed else ""
    text = (
        f"{rid} is retracted: {RETRACTION_CAUSE} ({need} tokens needed, {free} free), so it goes back to the waiting "
        f"queue ({dropped} tokens of K/V{kept})"
    )
    clause = comeback_clause(view, step, rid, dropped, "radix cache")
    text += f"; {clause}" if clause else ""
    return text + f". {rid} was picked by {VICTIM_RULES[p['rule']]}." + handed_on_sentence(view, step, rid)
