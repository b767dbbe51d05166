"""The SGLang family's sentences (``policy`` ``sglang``), from the step's ``decisions``: what SGLang's request handling
did to requests as they arrived (``RequestLimitRecord``: an output budget clipped, a prompt refused), the prefill-first
wait, the decodes that ran inside a prefill batch (``--enable-mixed-chunk``) and what each admission's estimate reserved
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
from batchscope.steplog.records import AdmissionRecord, PreemptionRecord, RequestLimitRecord
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
    limits = [request_limit(view, x) for x in d.get("request_limits", [])]
    return limits + out + [s for a in d.get("admissions", []) if (s := admission(a, ratio))]


def request_limit(view: TraceView, x: RequestLimitRecord) -> str:
    """ "SGLang cut R's max_tokens from 20 to 18: the pool holds 40 tokens ..." for a request SGLang's request
    handling clipped as it arrived, or the refusal of a prompt too long for the pool
    (``batchscope.sglang_family.request_handling``)."""
    rid, prompt, max_req_len = x["request_id"], x["num_prompt_tokens"], x["max_req_len"]
    if x["bound"] == "pool":
        holds = f"the pool holds {view.header['config']['num_kv_blocks']} tokens"
    else:
        holds = f"the model's context is {view.header.get('max_model_len')} tokens"
    most = f"a request may hold at most {max_req_len} tokens, min(context − 1, pool − 1)"
    if "error" in x:
        return (
            f"SGLang refused {rid} as it arrived ({prompt}-token prompt; {holds} and {most}): “{x['error']}” "
            "It does not drop the request: it swaps the prompt for a single token and marks it to finish, so "
            f"{rid} runs a one-token prefill when admitted and then ends with an abort."
        )
    return (
        f"SGLang cut {rid}'s max_tokens from {x['max_tokens']} to {x['max_new_tokens']} as it arrived: {holds} "
        f"({most}, so its output gets {max_req_len} − {prompt} − 1)."
    )


def stand_in(view: TraceView, step: int, rid: str) -> bool:
    """Whether ``rid`` runs, in ``step``, the one-token prompt SGLang swapped in for a prompt it refused: the step
    that runs it is the one it ends in, with the refusal's message on its abort."""
    return any(f["request_id"] == rid and "error" in f.get("aborted", {}) for f in view.steps[step]["finished"])


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
