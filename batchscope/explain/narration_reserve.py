"""The sentences of the two families that reserve memory when they admit (``policy`` ``tgi`` and ``trtllm``), from the
step's ``decisions`` (``batchscope.scheduling.plan_batching`` writes them where the core decided):

- TGI's router allocates a request's whole lifetime of blocks at admission (prompt + max_tokens - 1 tokens, less its
  cached prefix) and never preempts; without prefill chunking a new batch is prefilled alone and the running requests
  *stall* (``batch.decodes_waiting``).
- TensorRT-LLM's capacity scheduler sets each request's blocks to completion aside (``GUARANTEED_NO_EVICT``, the
  default) or takes only the next step's and *pauses* the last started request when they run out
  (``MAX_UTILIZATION``, rule ``trtllm_pause``): the paused request's outputs are folded into its prompt and computed
  again when it resumes.

``batchscope.explain.narration`` asks ``batch_sentences(view, step)`` for the step's batch decision and
``pause(view, step, p)`` for each preemption record (None for another scheduler's)."""

from __future__ import annotations

from batchscope.explain.narration_finish import comeback_clause
from batchscope.explain.words import join, plural
from batchscope.steplog.decisions import decisions
from batchscope.steplog.records import AdmissionRecord, PreemptionRecord
from batchscope.steplog.view import TraceView

RESERVING = ("tgi", "trtllm")


def batch_sentences(view: TraceView, step: int) -> list[str]:
    """TGI's stalls and each admission's reservation at ``step``, in sentences; empty for any other scheduler."""
    if view.policy not in RESERVING:
        return []
    d = decisions(view, step)
    stalled = d.get("batch", {}).get("decodes_waiting", [])
    out = []
    if stalled:
        whose = "decode of {} stalls" if len(stalled) == 1 else "decodes of {} stall"
        out.append(
            f"The {whose.format(join(stalled))} this step: without prefill chunking TGI prefills the new batch alone, "
            "then runs one decode forward of everybody."
        )
    bs = view.header["config"]["block_size"]
    return out + [s for a in d.get("admissions", []) if (s := admission(view, a, bs))]


def admission(view: TraceView, a: AdmissionRecord, block_size: int) -> str | None:
    """What one admission set aside: TGI's whole lifetime of blocks, TensorRT-LLM's blocks to completion."""
    rid = a["request_id"]
    if "num_blocks" not in a:
        return None
    hit = a["num_prefix_hit_tokens"]
    cached = f", less the {plural(hit, 'token')} found in the prefix cache" if hit else ""
    if view.policy == "tgi":
        spec = view.request_info.get(rid)
        prompt, max_tokens = (spec["num_prompt_tokens"], spec["max_tokens"]) if spec else (None, None)
        tokens = f" for prompt {prompt} + max_tokens {max_tokens} − 1 tokens" if prompt is not None else ""
        return (
            f"TGI allocates {rid}'s whole lifetime at admission: {plural(a['num_blocks'], 'block')} of {block_size} "
            f"tokens{tokens}{cached}; it will never need another block, and never be preempted."
        )
    reserved = a.get("num_reserved_blocks", 0)
    aside = (
        f"; {plural(reserved, 'more block')} are set aside for its output until it completes (GUARANTEED_NO_EVICT)"
        if reserved
        else ""
    )
    return f"TensorRT-LLM gives {rid} {plural(a['num_blocks'], 'block')} for its prompt{cached}{aside}."


def pause(view: TraceView, step: int, p: PreemptionRecord) -> str | None:
    """ "C is paused: ..." for a TensorRT-LLM pause record of ``step``; None for any other preemption."""
    if p["rule"] != "trtllm_pause":
        return None
    rid, dropped = p["request_id"], p["num_dropped_tokens"]
    text = (
        f"{rid} is paused: under MAX_UTILIZATION TensorRT-LLM admits while the pool holds the next step's blocks, "
        f"and when it does not, it pauses the last started request, {rid}. Its "
        f"{plural(p['num_dropped_blocks'], 'block')} ({plural(dropped, 'token')} of K/V) go back to the pool; its "
        "output so far is folded into its prompt"
    )
    clause = comeback_clause(view, step, rid, dropped, "prefix cache")
    text += f"; {clause}" if clause else ""
    return text + "."
