"""Where the glossary's memory and serving terms happen in a trace: ``finder(view) -> (step, what you see there)``
or ``None``, as in ``glossary_finders``: every place is found by a rule over the step log, never named.

KV bytes and GQA need the model's shape (``batchscope.figures.kv_memory``); memory-bound decode needs the steps' wall
times (``t_start`` / ``t_end``, through ``batchscope.steplog.step_cost``); head-of-line blocking reads the scheduler's
record of why the head of the queue waits (``batchscope.steplog.decisions``); vLLM's metrics come from
``batchscope.steplog.gauges``.
"""

from __future__ import annotations

import math
from functools import partial

from batchscope.figures.kv_memory import bytes_per_token, element_bytes, fmt_bytes, kv_bytes_per_token, model_shape
from batchscope.figures.pool import kv_tokens
from batchscope.glossary.term import Found
from batchscope.quiz.facts import known_tokens
from batchscope.steplog.decisions import decisions
from batchscope.steplog.gauges import KV_USAGE, PREEMPTIONS, RUNNING, WAITING, gauges
from batchscope.steplog.metric_names import family, name_of
from batchscope.steplog.step_cost import decode_by_batch, step_costs
from batchscope.steplog.view import TraceView

# the limits under which a smaller request behind the head could have been admitted (in the limit's unit), and
# what that request would need: blocks for its whole known sequence, or its whole prompt in tokens
HOL_LIMITS = {"kv_blocks": "block", "kv_blocks_full_prompt": "block", "chunked_prefill_off": "token"}


def kv_bytes(view: TraceView) -> Found:
    """The first step with blocks in use, priced in bytes: a block takes its whole size however full it is."""
    per_token = kv_bytes_per_token(view.header)
    if per_token is None:
        return None
    for k, st in enumerate(view.steps):
        n, bs = st["kv"]["num_used_blocks"], st["kv"]["block_size"]
        if n:
            total = n * bs * per_token
            return k, (
                f"{n} blocks in use × {bs} token slots × {per_token:,} bytes per token = {total:,} bytes "
                f"({fmt_bytes(total)}) of K/V"
            )
    return None


def unused_slots(view: TraceView, step: int) -> dict[str, tuple[int, int]]:
    """request_id -> (slots reserved but unused in its last block, tokens with K/V) after ``step``'s forward pass,
    for every request holding blocks: ``len(block table) × block_size - tokens with K/V``."""
    bs = view.steps[step]["kv"]["block_size"]
    held = kv_tokens(view, step)
    return {r: (len(t) * bs - held[r], held[r]) for r, t in view.block_tables(step).items() if t and r in held}


def fragmentation(view: TraceView) -> Found:
    """The first step where a request's last block is only partly filled."""
    for k in range(view.num_steps):
        waste = unused_slots(view, k)
        partial = [r for r, (u, _) in waste.items() if u > 0]
        if partial:
            r, bs = partial[0], view.steps[k]["kv"]["block_size"]
            u, n = waste[r]
            last = view.block_tables(k)[r][-1]
            total = sum(u for u, _ in waste.values())
            return k, (
                f"{r} holds K/V for {n} tokens, so its last block (block {last}) fills {bs - u} of its {bs} slots: "
                f"{u} reserved but unused; over all {len(waste)} requests holding blocks, {total} slots"
            )
    return None


def memory_bound(view: TraceView) -> Found:
    """The first decode-only step of the largest decode batch that is no slower than that batch's median, in a
    trace where, from the smallest decode batch to the largest (at least twice as many requests), the median step
    time grows by less than half the factor the tokens grow by. Times: ``t_end - t_start``, seconds."""
    costs = step_costs(view)
    by_batch = decode_by_batch(costs)
    if len(by_batch) < 2:
        return None
    few, many = min(by_batch), max(by_batch)
    t_few, t_many = by_batch[few]["median_s"], by_batch[many]["median_s"]
    if many < 2 * few or t_many / t_few > many / few / 2:
        return None
    c = next(c for c in costs if c["decode_only"] and c["tokens"] == many and c["seconds"] <= t_many)
    return c["step"], (
        f"{many} requests decode in {c['seconds'] * 1e3:.0f} ms; the median decode step takes "
        f"{t_few * 1e3:.0f} ms for {few} and {t_many * 1e3:.0f} ms for {many} tokens: {many / few:g}× the tokens "
        f"for {t_many / t_few:.2f}× the time"
    )


def gqa(view: TraceView) -> Found:
    """The first step where the pool is fullest, with its K/V priced with and without GQA."""
    shape, element = model_shape(view.header), element_bytes(view.header)
    if not (shape and element and view.num_steps) or shape.num_kv_heads >= shape.num_attention_heads:
        return None
    used = [st["kv"]["num_used_blocks"] for st in view.steps]
    k = used.index(max(used))
    slots = used[k] * view.steps[k]["kv"]["block_size"]
    grouped, full = bytes_per_token(shape, element), bytes_per_token(shape, element, shape.num_attention_heads)
    return k, (
        f"{used[k]} blocks ({slots} token slots) hold {fmt_bytes(slots * grouped)} of K/V with "
        f"{shape.num_kv_heads} KV heads; with one KV head per query head ({shape.num_attention_heads}) they would "
        f"take {fmt_bytes(slots * full)}, {shape.gqa_factor:g}×"
    )


def _would_fit(view: TraceView, k: int, rid: str, unit: str, left: int) -> bool:
    """Whether ``rid`` alone would pass the limit the head failed: its whole known sequence in free blocks (a
    prefix-cache hit could only lower that), or its whole prompt in the budget left."""
    need = known_tokens(view, k, rid)
    if unit == "block":
        need = math.ceil(need / view.steps[k]["kv"]["block_size"])
    return need <= left


def head_of_line(view: TraceView) -> Found:
    """The first step where the head waits on memory (or on a whole prompt with chunking off) while a request
    behind it, which would pass that check, waits too."""
    for k, st in enumerate(view.steps):
        head = decisions(view, k).get("head")
        if not head or head["limit"] not in HOL_LIMITS or head["request_id"] not in st["waiting"]:
            continue
        unit = HOL_LIMITS[head["limit"]]
        behind = st["waiting"][st["waiting"].index(head["request_id"]) + 1 :]
        fits = [r for r in behind if _would_fit(view, k, r, unit, head["left"])]
        if fits:
            return k, (
                f"{head['request_id']} heads the queue and needs {head['need']} {unit}s with {head['left']} left; "
                f"{fits[0]}, behind it, would fit but waits too"
            )
    return None


def vllm_metrics(view: TraceView) -> Found:
    """The first preemption, read as vLLM's gauges and counters would be after the step (``batchscope.steplog.gauges``:
    vLLM samples them once the step's finished requests are gone, and counts a preemption at the victim's next
    output); only in a trace of vLLM's family (``batchscope.steplog.metric_names.family``)."""
    k = next((k for k, st in enumerate(view.steps) if st["preempted"]), None)
    if k is None or family(view.header) != "vllm":
        return None
    g, kv = gauges(view), view.steps[k]["kv"]
    before = g[PREEMPTIONS][k - 1] if k else 0
    counted = next((j for j in range(k, view.num_steps) if g[PREEMPTIONS][j] > before), None)
    victim = view.steps[k]["preempted"][0]
    when = f"at step {counted}, {victim}'s next token" if counted is not None else f"never: {victim} outputs no more"
    name = partial(name_of, view.header)
    return k, (
        f"{victim} is preempted; after this step {name(RUNNING)} = {g[RUNNING][k]}, "
        f"{name(WAITING)} = {g[WAITING][k]} and {name(KV_USAGE)} = {g[KV_USAGE][k]:.2f} "
        f"({round(g[KV_USAGE][k] * kv['num_blocks'])} of {kv['num_blocks']} blocks); {name(PREEMPTIONS)} counts it "
        f"{when}"
    )
