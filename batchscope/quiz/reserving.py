"""Quiz kinds of the engines that reserve KV memory when they admit a request, asked only of their traces: how many
blocks TGI's router gives a request at admission (its whole lifetime), and what runs in a TGI step while a new batch
waits beside a running one (prefilled alone while the running requests stall, joined in one forward, or a decode
forward only). TensorRT-LLM's pause is asked by the general kinds (``preempted``, ``recompute``), whose explanations
read the scheduler's own records."""

from __future__ import annotations

import random

from batchscope.explain.words import join, plural
from batchscope.quiz.facts import queue_at_start, running_at_start
from batchscope.quiz.scheduling import ask
from batchscope.quiz.types import Choice, Question, int_choices, make_choices
from batchscope.steplog.decisions import decisions
from batchscope.steplog.reasons import LIMIT_WHY
from batchscope.steplog.view import TraceView

ALONE, TOGETHER, DECODES = "prefill alone", "prefill and decodes together", "decodes only"


def lifetime_blocks(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """TGI: the blocks an admission takes at once, its prompt plus max_tokens − 1 tokens (cached blocks included)."""
    if view.policy != "tgi":
        return None
    admitted = [a for a in decisions(view, step).get("admissions", []) if "num_blocks" in a]
    if not admitted:
        return None
    a = admitted[rng.randrange(len(admitted))]
    rid, value = a["request_id"], a["num_blocks"]
    info = view.request_info[rid]
    plen, max_tokens, bs = info["num_prompt_tokens"], info["max_tokens"], view.header["config"]["block_size"]
    hit = a.get("num_prefix_hit_tokens", 0)
    text = (
        f"TGI admits {rid} in step {view.step_number(step)}: a prompt of {plural(plen, 'token')}, max_tokens "
        f"{max_tokens}, blocks of {bs} tokens{f', {hit} prompt tokens found in the prefix cache' if hit else ''}. "
        f"How many KV blocks does {rid}'s block table hold once it is admitted?"
    )
    cached = f" ({hit // bs} of them found in the prefix cache, shared)" if hit else ""
    why = (
        f"TGI's router allocates a request's whole lifetime at admission: its prompt plus max_tokens − 1 tokens, "
        f"⌈({plen} + {max_tokens} − 1) / {bs}⌉ = {value} blocks{cached}. It never asks for another block, so it is "
        f"never preempted; {plural(a.get('num_reserved_blocks', 0), 'block')} stay unwritten until its output "
        "reaches them."
    )
    wrong = [-(-plen // bs), -(-(plen + 1) // bs), value - hit // bs, -(-max_tokens // bs)]
    choices = int_choices(value, wrong, rng, "block", lo=1)
    return ask(view, step, "lifetime_blocks", text, value, why, choices=choices, subject=rid)


def tgi_batch(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """TGI: with requests running and others waiting, what runs in the step: a new batch prefilled alone (the running
    requests stall: prefill chunking off), the new batch's prompts joined to the running decodes in one forward
    (chunking on), or a decode forward only?"""
    if view.policy != "tgi":
        return None
    running, queue = running_at_start(view, step), queue_at_start(view, step)
    rows = view.steps[step]["scheduled"]
    if not running or not queue or {s["request_id"] for s in rows if s["kind"] == "prefill"} & set(running):
        return None  # asked only when every running request is past its prompt
    d = decisions(view, step)
    kinds = {s["kind"] for s in rows}
    value = ALONE if kinds == {"prefill"} else DECODES if kinds == {"decode"} else TOGETHER
    names = {
        ALONE: f"a new batch prefilled alone: {join(running)} {'waits' if len(running) == 1 else 'wait'}",
        TOGETHER: f"the new prompts and the decodes of {join(running)} in one forward",
        DECODES: f"one decode forward of {join(running)}; nobody is prefilled",
    }
    choices = make_choices(Choice(names[value], value), [Choice(names[v], v) for v in (ALONE, TOGETHER, DECODES)], rng)
    chunking = view.header["config"].get("enable_chunked_prefill", True)
    admitted = join(view.steps[step]["admitted"])
    if value == ALONE:
        why = (
            f"Prefill chunking is off: TGI prefills the new batch ({admitted}) in a forward of its own, and the "
            f"running requests ({join(d.get('batch', {}).get('decodes_waiting', running))}) wait this step."
        )
    elif value == TOGETHER:
        why = f"Prefill chunking is on: the new batch ({admitted}) joins the running one in a mixed forward."
    else:
        head = d.get("head", {})
        why = f"Nobody joins: {head.get('request_id', 'the head')} waits, {LIMIT_WHY.get(head.get('limit', ''), '')}."
    text = (
        f"TGI with prefill chunking {'on' if chunking else 'off'}. Step {view.step_number(step)} starts with "
        f"{join(running)} running and {join(queue)} waiting. What runs in this step?"
    )
    return ask(view, step, "tgi_batch", text, value, why, choices=choices)
