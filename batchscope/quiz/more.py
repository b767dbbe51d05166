"""Quiz kinds about a step's use of the machine, the queue and latency: unused token budget, static padding rows,
prefix-cache hits (only in traces that record them), the waiting queue's order under the priority policy, and one
request's TTFT / TPOT / E2E on the step clock (``batchscope.steplog.metrics``: step ``k`` starts at time ``k`` and ends
at ``k + 1``)."""

from __future__ import annotations

import random

from batchscope.explain.words import join, plural
from batchscope.quiz.facts import known_tokens, prefix_hits, prompt_lengths, queue_at_start, running_at_start
from batchscope.quiz.scheduling import ask
from batchscope.quiz.types import Choice, Question, fmt_number, int_choices, make_choices
from batchscope.steplog.metrics import request_metrics
from batchscope.steplog.reasons import queue_order as order_of
from batchscope.steplog.view import TraceView


def unused_budget(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Budget tokens left unused (a number to type)."""
    st = view.steps[step]
    if not st["scheduled"]:
        return None
    budget = view.header["config"]["max_num_batched_tokens"]
    value = budget - st["num_batched_tokens"]
    decodes = sum(s["num_tokens"] for s in st["scheduled"] if s["kind"] == "decode")
    prefill = st["num_batched_tokens"] - decodes
    why = f"max_num_batched_tokens - (decode tokens + prefill tokens) = {budget} - ({decodes} + {prefill}) = {value}."
    text = f"The token budget is {budget}. How many budget tokens are left unused in step {view.step_number(step)}?"
    return ask(view, step, "unused_budget", text, value, why)


def padding(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Static batching: finished members of the batch that still run a padding row."""
    st = view.steps[step]
    static = "num_reserved_blocks" in st["kv"]  # the static scheduler records its worst-case reservation
    if not static or len(st["running"]) + len(st["padding_slots"]) < 2:
        return None
    value = len(st["padding_slots"])
    size = len(st["running"]) + value
    slots = view.header["config"]["max_num_seqs"]
    finishing = len(st["finished"])
    pads = [p["request_id"] for p in st["padding_slots"]]
    if pads:
        why = (
            f"{join(pads)} finished in an earlier step but keep{'s' if len(pads) == 1 else ''} a row until the "
            f"slowest member of the batch ends: {plural(value, 'padding row')}."
        )
    else:
        why = "No member of this batch finished in an earlier step, so no row is padding yet."
    if finishing:
        why += " A request that finishes at the end of this step still computes in it: it is not padding yet."
    text = (
        f"A static batch of {size} requests runs on {slots} slots. "
        f"How many padding rows run in step {view.step_number(step)}?"
    )
    wrong = [value + finishing, slots - size, size - len(running_at_start(view, step))]
    choices = int_choices(value, [w for w in wrong if w <= slots], rng, "row", lo=0)
    choices = tuple(c for c in choices if c.value <= slots) or choices
    return ask(view, step, "padding", text, value, why, choices=choices)


def prefix_hit(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """How many of X's known tokens come from the prefix cache (only in traces that record hits, with caching on)."""
    hits = prefix_hits(view, step)
    if not hits or view.header["config"].get("enable_prefix_caching") is False:
        return None
    positive = [r for r, h in hits.items() if h > 0]
    rid = sorted(positive or hits)[rng.randrange(len(positive or hits))]
    value = hits[rid]
    prompt, known = prompt_lengths(view)[rid], known_tokens(view, step, rid)
    what = f"{prompt} prompt tokens" if known == prompt else f"{known} known tokens: prompt and outputs so far"
    bs = view.header["config"]["block_size"]
    sched = next((s for s in view.steps[step]["scheduled"] if s["request_id"] == rid), None)
    computed = f" and computes {sched['num_tokens']} tokens in this step" if sched else ""
    why = (
        f"Only full blocks of {bs} tokens are cached, each found by a hash chained over the blocks before it, and "
        f"the last known token is always computed so that a token can be sampled: {rid} finds {value} of its "
        f"{what} ({value // bs} blocks) in the cache{computed}."
    )
    text = f"{rid} ({what}) is admitted in step {view.step_number(step)}. How many come from the prefix cache?"
    wrong = [0, known, (known - 1) // bs * bs, known // bs * bs, value + bs, value - bs, known - 1]
    choices = int_choices(value, [w for w in wrong if w <= known], rng, "token", lo=0)
    return ask(view, step, "prefix_hit", text, value, why, choices=choices, subject=rid)


def queue_order(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Priority policy: in which order the scheduler takes the waiting requests (smallest (priority, arrival))."""
    queue = queue_at_start(view, step)
    reqs = {r["request_id"]: (r.get("priority", 0), i) for i, r in enumerate(view.header["requests"])}
    if order_of(view.header) != "priority" or len({reqs[r][0] for r in queue}) < 2:
        return None
    value = tuple(queue)
    arrival = tuple(sorted(queue, key=lambda r: reqs[r][1]))
    wrong = [arrival, tuple(sorted(queue, key=lambda r: (-reqs[r][0], reqs[r][1])))]
    wrong += [tuple(sorted(queue, key=lambda r: (reqs[r][0], -reqs[r][1]))), tuple(reversed(arrival))]
    choices = make_choices(Choice(", then ".join(value), value), [Choice(", then ".join(w), w) for w in wrong], rng)
    listed = ", ".join(f"{r} (priority {reqs[r][0]})" for r in arrival)
    why = (
        f"Under the priority policy the waiting queue is ordered by (priority, arrival): the smallest priority value"
        f" first, ties in arrival order. So the head is {value[0]}; a request preempted later is put back by the "
        "same rule, and the victim is the running request with the largest (priority, arrival)."
    )
    text = (
        f"scheduling_policy is priority (lower value runs first). When step {view.step_number(step)} starts, "
        f"{listed} are waiting, "
        "listed in arrival order. In which order does the scheduler consider them?"
    )
    return ask(view, step, "queue_order", text, value, why, choices=choices)


_METRICS: dict[int, tuple[list[dict], dict[str, dict]]] = {}


def _metrics(view: TraceView) -> dict[str, dict]:
    """``request_metrics`` by request id, computed once per trace (a drill asks about every step)."""
    hit = _METRICS.get(id(view.records))
    if hit is not None and hit[0] is view.records:
        return hit[1]
    if len(_METRICS) > 8:
        _METRICS.clear()
    by_id = {m["request_id"]: m for m in request_metrics(view.records)}
    _METRICS[id(view.records)] = (view.records, by_id)
    return by_id


CLOCK = "(the step clock: step k starts at time k and ends at k + 1)"


def ttft(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """TTFT in steps of a request whose first token is sampled in this step."""
    subjects = [m for m in _metrics(view).values() if m["first_token_step"] == step and m["ttft_steps"] is not None]
    if not subjects:
        return None
    m = subjects[rng.randrange(len(subjects))]
    rid, a, value = m["request_id"], m["arrival_step"], m["ttft_steps"]
    why = f"TTFT = first token - arrival = (end of step {step}) - (start of step {a}) = {step + 1} - {a} = {value}."
    text = (
        f"{rid} arrived before step {a} and samples its first token at the end of step {step}. "
        f"What is its TTFT in steps {CLOCK}?"
    )
    wrong = [value - 1, step + 1, m["queue_time_steps"], value + 1]
    choices = int_choices(value, [w for w in wrong if w is not None], rng, "step", lo=1)
    return ask(view, step, "ttft", text, value, why, choices=choices, subject=rid)


def _finishing(view: TraceView, step: int, min_tokens: int) -> list[dict]:
    return [
        m
        for m in _metrics(view).values()
        if m["finish_step"] == step and m["e2e_steps"] is not None and m["num_output_tokens"] >= min_tokens
    ]


def e2e(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """E2E latency in steps of a request whose last token is sampled in this step."""
    subjects = _finishing(view, step, 1)
    if not subjects:
        return None
    m = subjects[rng.randrange(len(subjects))]
    rid, a, value = m["request_id"], m["arrival_step"], m["e2e_steps"]
    why = f"E2E = last token - arrival = (end of step {step}) - (start of step {a}) = {step + 1} - {a} = {value}."
    text = (
        f"{rid} arrived before step {a} and samples its last token at the end of step {step}. "
        f"What is its end-to-end latency in steps {CLOCK}?"
    )
    wrong = [value - 1, step + 1, value - m["ttft_steps"], value + 1]
    choices = int_choices(value, wrong, rng, "step", lo=1)
    return ask(view, step, "e2e", text, value, why, choices=choices, subject=rid)


def tpot(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """TPOT in steps (a number to type, two decimals) of a request that finishes in this step."""
    subjects = _finishing(view, step, 2)
    if not subjects:
        return None
    m = subjects[rng.randrange(len(subjects))]
    rid, n, value = m["request_id"], m["num_output_tokens"], m["tpot_steps"]
    first = m["first_token_step"]
    why = (
        f"TPOT = (E2E - TTFT) / (output tokens - 1) = (last token - first token) / (n - 1) = "
        f"({step + 1} - {first + 1}) / ({n} - 1) = {fmt_number(value)}."
    )
    text = (
        f"{rid} sampled its first token at the end of step {first} and its last at the end of step {step}, "
        f"{n} output tokens in all. What is its TPOT in steps (two decimals)?"
    )
    return ask(view, step, "tpot", text, value, why, subject=rid, tolerance=0.005)
