"""Quiz kinds about one scheduling decision: who is admitted (or why the head waits), how many tokens a request
computes, KV blocks in use afterwards, whether a request samples, who is preempted and what it will recompute,
who finishes and what they release. Each function returns ``None`` where its question makes no sense."""

from __future__ import annotations

import random
from typing import Any

from batchscope.explain.narration import narrate
from batchscope.explain.words import article, join, plural
from batchscope.quiz.facts import (
    head_limit,
    known_tokens,
    limit_is_false,
    prompt_lengths,
    queue_at_start,
    released_blocks,
    running_at_start,
    used_blocks_after,
)
from batchscope.quiz.types import Choice, Question, int_choices, make_choices, show_me
from batchscope.steplog.decisions import comeback, decisions
from batchscope.steplog.reasons import LIMIT_SHORT, LIMIT_WHY, QUEUE_ORDERS, VICTIM_RULES, checks, queue_order
from batchscope.steplog.records import PreemptionRecord
from batchscope.steplog.view import TraceView


def ask(view: TraceView, step: int, kind: str, text: str, value, why: str, **kw) -> Question:
    """A question whose explanation is the reason plus the step's narration (the log of the step)."""
    explanation = f"{why} From the log: {narrate(view, step)}"
    return Question(kind, step, text, value, explanation, show_me(view, step), **kw)


def _admission_label(value: tuple) -> str:
    if value and value[0] is None:
        return f"nobody: {LIMIT_SHORT.get(value[1], value[1])}"
    return join(value)


def _limits(view: TraceView) -> tuple[str, ...]:
    """The limits that can stop the head under this trace's scheduler, in its order of checks."""
    return tuple(checks(view.header))


def admitted(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Who is admitted from the queue, or nobody and which limit stops the head."""
    queue = queue_at_start(view, step)
    if not queue:
        return None
    adm = tuple(view.steps[step]["admitted"])
    limit = head_limit(view, step)
    value = adm if adm else (None, limit)
    wrong: list[tuple] = []
    if adm:
        wrong += [tuple(queue[: len(adm) + 1]), tuple(queue[: len(adm) - 1])]
        wrong += [(None, lim) for lim in _limits(view)[-2:]]
    else:
        wrong.append(tuple(queue[:1]))
        wrong += [(None, lim) for lim in _limits(view) if lim != limit and limit_is_false(view, step, lim)]
    if len(queue) > 1:
        wrong.append((queue[1],))  # the second in line jumping the head: FCFS never does that
    right = Choice(_admission_label(value), value)
    choices = make_choices(right, [Choice(_admission_label(w), w) for w in wrong if w], rng)
    if adm:
        order = QUEUE_ORDERS[queue_order(view.header)]
        why = (
            f"{join(adm)} {'is' if len(adm) == 1 else 'are'} admitted: the scheduler takes requests from the head "
            f"of the queue ({order}) while the token budget, a slot and free KV blocks allow; nobody overtakes the "
            "head."
        )
        head = decisions(view, step).get("head")
        if head is not None:
            why += f" Then {head['request_id']} waits: {LIMIT_WHY.get(head['limit'], head['limit'])}."
    else:
        why = f"Nobody: {LIMIT_WHY.get(limit or '', 'the log does not say why')}."
    text = (
        f"Step {view.step_number(step)} starts with {join(queue)} waiting (head first). "
        f"Who is admitted in step {view.step_number(step)}?"
    )
    return ask(view, step, "admitted", text, value, why, choices=choices)


def _pick(rows: list[Any], rng: random.Random) -> Any:
    return rows[rng.randrange(len(rows))]


def num_tokens(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """How many tokens request X computes: a prefill chunk (limited by the budget left) or 1 for a decode."""
    sched = view.steps[step]["scheduled"]
    if not sched:
        return None
    prefills = [s for s in sched if s["kind"] == "prefill"]
    s = _pick(prefills or sched, rng)
    rid, n, c = s["request_id"], s["num_tokens"], s["num_computed_tokens"]
    budget = view.header["config"]["max_num_batched_tokens"]
    before = sum(x["num_tokens"] for x in sched[: sched.index(s)])
    lacks = known_tokens(view, step, rid) - c
    if s["kind"] == "decode":
        why = f"{rid} decodes: it computes exactly its last sampled token, 1 token."
    elif n < lacks:
        why = (
            f"{rid} lacks {lacks} tokens of K/V, but only {budget - before} of the {budget} budget tokens were "
            f"left after the rows scheduled before it, so it gets {article(n)} {n}-token chunk (positions "
            f"{c}..{c + n - 1})."
        )
    else:
        why = f"{rid} lacks {lacks} tokens of K/V and all of them fit the {budget - before} budget tokens left."
    text = f"How many tokens does {rid} compute in step {view.step_number(step)}?"
    choices = int_choices(n, [lacks, 1, n - 1, n + 1, budget], rng, "token", lo=1)
    return ask(view, step, "num_tokens", text, n, why, choices=choices, subject=rid)


def kv_blocks(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """KV blocks in use at the end of the step, after finished requests release theirs."""
    st = view.steps[step]
    released = sum(len(b) for b in released_blocks(view, step).values())
    allocated = sum(len(b) for b in st["kv"].get("allocated", {}).values())
    if not (allocated or released or st["preempted"]):
        return None  # nothing changes: not worth asking
    value = used_blocks_after(view, step)
    during = st["kv"]["num_used_blocks"]
    before = used_blocks_after(view, step - 1) if step else 0
    why = (
        f"During the forward pass {during} blocks hold K/V ({plural(allocated, 'block')} allocated in this step"
        + (f", {len(st['preempted'])} request(s) preempted" if st["preempted"] else "")
        + f"); finishing requests then release {plural(released, 'block')}: {during} - {released} = {value}."
        + (" A block shared through the prefix cache counts once." if st["kv"].get("ref_counts") else "")
    )
    text = (
        f"How many KV blocks are in use at the end of step {view.step_number(step)}, once "
        f"any request that finishes has released "
        f"its blocks? (Pool: {st['kv']['num_blocks']} blocks of {st['kv']['block_size']} tokens.)"
    )
    choices = int_choices(value, [during, before, value + allocated], rng, "block", lo=0)
    return ask(view, step, "kv_blocks", text, value, why, choices=choices)


def samples(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Does X (a prefill chunk or a recompute) sample a token at the end of the step?"""
    prefills = [s for s in view.steps[step]["scheduled"] if s["kind"] == "prefill"]
    if not prefills:
        return None
    s = _pick(prefills, rng)
    rid, n, c = s["request_id"], s["num_tokens"], s["num_computed_tokens"]
    known = known_tokens(view, step, rid)
    value = c + n == known
    if value:
        why = f"{rid} computes positions {c}..{c + n - 1}, reaching the end of its {known} known tokens: it samples."
    else:
        why = (
            f"{rid} computes positions {c}..{c + n - 1} of its {known} known tokens; a chunk that stops short of "
            "the end samples nothing (its logits would predict a token the prompt already has)."
        )
    choices = make_choices(Choice("yes", True), [Choice("no", False)], rng)
    text = f"Does {rid} sample a token at the end of step {view.step_number(step)}?"
    return ask(view, step, "samples", text, value, why, choices=choices, subject=rid)


def preempted(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Which running request gives back its blocks when the pool runs out."""
    st = view.steps[step]
    if not st["preempted"]:
        return None
    value = tuple(st["preempted"])
    running = running_at_start(view, step)
    wrong = [(r,) for r in running if (r,) != value] + [()]

    def label(v: tuple) -> str:
        return join(v) if v else "nobody"

    choices = make_choices(Choice(label(value), value), [Choice(label(w), w) for w in wrong], rng)
    why = " ".join(_victim_why(p) for p in decisions(view, step).get("preemptions", []))
    text = (
        f"Step {view.step_number(step)} starts with {join(running)} running. Which "
        f"request is preempted in step {view.step_number(step)}?"
    )
    return ask(view, step, "preempted", text, value, why, choices=choices)


def _victim_why(p: PreemptionRecord) -> str:
    """One preemption as the scheduler recorded it: who needed a block, the victim rule, the K/V dropped."""
    who = p.get("requester")
    need = (
        f"{who} needed {plural(p['need'], 'KV block')} with {p['free']} free"
        if "need" in p
        else "a running request needed a KV block and none was free"
    )
    rule = VICTIM_RULES.get(p["rule"], p["rule"])
    pick = f"{who} is itself {rule}" if who == p["request_id"] else f"the victim is {rule}: {p['request_id']}"
    return (
        f"{need}; {pick}. It gives back all its blocks ({plural(p['num_dropped_tokens'], 'token')} of K/V) and "
        "returns to the waiting queue."
    )


def recompute(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """How many tokens of K/V the preempted request loses (what its comeback must compute again, minus what it
    then finds in the prefix cache)."""
    preemptions = decisions(view, step).get("preemptions", [])
    if not preemptions:
        return None
    p = preemptions[rng.randrange(len(preemptions))]
    rid, value = p["request_id"], p["num_dropped_tokens"]
    prompt = prompt_lengths(view)[rid]
    held = f"{min(value, prompt)} prompt tokens" + (f" and {value - prompt} output tokens" if value > prompt else "")
    why = (
        f"When step {view.step_number(step)} started, {rid} held K/V for {value} tokens "
        f"({held}). Preemption by recompute drops them all."
    )
    back = comeback(view, step, rid)
    if back is not None:
        k, a = back
        hit = min(a["num_prefix_hit_tokens"], value)
        why += (
            f" It is admitted again at step {view.step_number(k)}: {hit} of them are then found in the prefix cache "
            f"and {a['num_recompute_tokens']} are recomputed, with {plural(a['num_new_tokens'], 'token')} that "
            "never had K/V."
        )
    text = f"{rid} is preempted in step {view.step_number(step)}. How many tokens of K/V does it lose?"
    return ask(view, step, "recompute", text, value, why, subject=rid)


def finished(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Which requests finish at the end of the step, and how many blocks they release."""
    st = view.steps[step]
    if not st["finished"]:
        return None
    freed = released_blocks(view, step)
    ids = tuple(f["request_id"] for f in st["finished"])
    count = len({b for blocks in freed.values() for b in blocks})  # a block two finishing requests shared: once
    value = (ids, count)
    tables = view.block_tables(step)
    held = sum(len(tables.get(r, [])) for r in ids)  # counting shared blocks too: a plausible mistake
    others = [s["request_id"] for s in st["scheduled"] if s["request_id"] not in ids]
    wrong = [(ids, held), (ids, count + 1), (ids, count - 1)] + [((r,), len(tables.get(r, []))) for r in others]
    wrong += [((*ids, r), count + len(tables.get(r, []))) for r in others[:1]]

    def label(v: tuple) -> str:
        return f"{join(v[0])}, releasing {plural(v[1], 'block')}"

    choices = make_choices(Choice(label(value), value), [Choice(label(w), w) for w in wrong if w[1] >= 0], rng)
    reasons = {"stop": "emitted EOS", "length": "reached max_tokens"}
    why = " ".join(
        f"{f['request_id']} {reasons.get(f['reason'], f['reason'])} and releases "
        f"{plural(len(freed[f['request_id']]), 'block')}."
        for f in st["finished"]
    )
    if held != count:
        why += (
            f" Their tables list {plural(held, 'block')}, but a block shared through the prefix cache is freed only"
            " when its last holder releases it (its reference count drops to 0), and it counts once."
        )
    text = (
        f"Which requests finish at the end of step {view.step_number(step)}, and how many "
        f"KV blocks do they release in all?"
    )
    return ask(view, step, "finished", text, value, why, choices=choices)
