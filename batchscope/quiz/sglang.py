"""Quiz kinds of SGLang's scheduler, asked only of traces whose steps record SGLang's batch decision
(``decisions.batch``): which batch runs (prefill first) and how much output an admission reserves."""

from __future__ import annotations

import random

from batchscope.explain.words import join
from batchscope.quiz.facts import queue_at_start, running_at_start
from batchscope.quiz.scheduling import ask
from batchscope.quiz.types import Choice, Question, int_choices, make_choices
from batchscope.steplog.decisions import decisions
from batchscope.steplog.metric_names import family
from batchscope.steplog.reasons import LIMIT_SHORT, PREFILL_FIRST, RESERVED_OUTPUT
from batchscope.steplog.view import TraceView

ALONE, TOGETHER, DECODES = "prefill alone", "prefill and decodes together", "decodes only"


def batch_kind(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """With requests running and others waiting to prefill: does the step run the prefill alone (the decodes
    wait), the prefill and the decodes in one forward (vLLM's way), or only the decodes?"""
    batch = decisions(view, step).get("batch") if family(view.header) == "sglang" else None
    running, queue = running_at_start(view, step), queue_at_start(view, step)
    prefilling = {s["request_id"] for s in view.steps[step]["scheduled"] if s["kind"] == "prefill"}
    if batch is None or batch["kind"] == "idle" or not running or not queue or prefilling & set(running):
        return None  # asked only when every running request is past its prompt (no chunked request in flight)
    value = ALONE if batch["kind"] == "extend" else DECODES
    names = {
        ALONE: f"a prefill batch alone: {join(running)} wait",
        TOGETHER: f"the prefill and the decodes of {join(running)} in one forward",
        DECODES: f"one decode batch of {join(running)}; nobody is prefilled",
    }
    choices = make_choices(Choice(names[value], value), [Choice(names[v], v) for v in (TOGETHER, ALONE, DECODES)], rng)
    if value == ALONE:
        why = f"{PREFILL_FIRST}: it formed one, so the decodes of {join(batch['decodes_waiting'])} wait this step."
    else:
        limit = decisions(view, step).get("head", {}).get("limit", "")
        why = (
            f"No prefill batch could be formed ({LIMIT_SHORT.get(limit, 'nobody could be admitted')}), so SGLang runs "
            "one decode batch of every running request; it does not mix prefill and decode by default."
        )
    text = (
        f"Step {view.step_number(step)} starts with {join(running)} running and {join(queue)} waiting. SGLang's "
        "scheduler: what runs in this step?"
    )
    return ask(view, step, "batch_kind", text, value, why, choices=choices)


def reserved_output(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """How many output tokens SGLang's admission reserves for a request it admits in this step."""
    admitted = [a for a in decisions(view, step).get("admissions", []) if "num_reserved_output_tokens" in a]
    if not admitted:
        return None
    a = admitted[rng.randrange(len(admitted))]
    rid, value = a["request_id"], a["num_reserved_output_tokens"]
    info = view.request_info.get(rid)
    max_tokens, plen = (info["max_tokens"], info["num_prompt_tokens"]) if info else (value, 0)
    ratio = decisions(view, step).get("batch", {}).get("new_token_ratio", 0.0)
    if value:
        why = f"SGLang's estimate: {RESERVED_OUTPUT}. {rid} is new to the batch: min({max_tokens}, 4096) = {value}."
    else:
        why = f"{rid}'s tokens are computed in chunks, and SGLang reserves its output only with the last chunk: 0."
    text = (
        f"{rid} (max_tokens {max_tokens}) is admitted in step {view.step_number(step)}. How many output tokens does "
        "SGLang's admission reserve for it?"
    )
    wrong = [max_tokens, int(max_tokens * ratio), 0, plen, max_tokens - 1]
    choices = int_choices(value, wrong, rng, "token")
    return ask(view, step, "reserved_output", text, value, why, choices=choices, subject=rid)
