"""Counters on one step clock for the comparison page and its exported file: static vs continuous batching, and
vLLM's scheduler (continuous) vs SGLang's (sglang), the latter read from each step's decision records; for 3 or 4
runs (sides A, B, C, D), one card per figure with each run's value."""

from __future__ import annotations

from batchscope.compare.runs import SIDES
from batchscope.facts import eviction, facts
from batchscope.steplog.view import TraceView


def _at(view: TraceView, num_steps: int, field: str) -> list[int]:
    """Counter ``field`` of ``view``'s facts at each position of a shared clock of ``num_steps`` (a run that has
    ended holds its totals)."""
    counters = facts(view).counters
    return [getattr(counters[min(k, len(counters) - 1)], field) for k in range(num_steps)]


def lockstep_counters(static: TraceView, continuous: TraceView) -> list[dict]:
    """Cards for the player (``playback.player_payload(counters=...)``): each ``{label, values, help}`` with one
    value per step of the shared clock, from each run's facts (``batchscope.facts``: the definitions of Metrics).
    Steps of each policy (idle steps included), steps saved (or extra) for continuous, and the padding slot-steps
    static batching has wasted up to the step, out of its total."""
    num_steps = max(static.num_steps, continuous.num_steps)
    n_static, n_continuous = facts(static).num_steps, facts(continuous).num_steps
    pads = _at(static, num_steps, "padding_slot_steps")
    saved = n_static - n_continuous
    share = f" ({abs(saved) / n_static:.0%} {'fewer' if saved >= 0 else 'more'})" if n_static else ""
    const = lambda text: [text] * num_steps  # noqa: E731
    return [
        {"label": "static steps", "values": const(str(n_static)), "help": "steps static batching needs"},
        {"label": "continuous steps", "values": const(str(n_continuous)), "help": "steps continuous batching needs"},
        {
            "label": "steps saved by continuous" if saved >= 0 else "extra steps for continuous",
            "values": const(f"{abs(saved)}{share}"),
            "help": ""
            if saved >= 0
            else "here the KV pool, not the slots, limits concurrency, and preemption costs recompute",
        },
        {
            "label": "padding slot-steps wasted (static)",
            "values": [f"{p} / {pads[-1]}" for p in pads],
            "help": "finished rows of a static batch that still run in the forward pass, up to this step / total",
        },
    ]


def family_counters(vllm: TraceView, sglang: TraceView) -> list[dict]:
    """Cards for vLLM's scheduler (a continuous trace) against SGLang's (an sglang trace) on one step clock, each
    ``{label, values, help}``, from each run's facts (``batchscope.facts.Counters``, Metrics' definitions): steps
    of each; decode rows that waited behind SGLang's prefill (EXTEND) batches so far; steps a request waited at the
    head of SGLang's queue so far, and how many of them for its output estimate; preemptions and retractions so far;
    prompt tokens found in the prefix cache at first admissions so far (Metrics' ``prefix_cache_hits``), with the
    re-admissions' hits apart."""
    num_steps = max(vllm.num_steps, sglang.num_steps)
    waited = _at(sglang, num_steps, "decodes_waiting")
    held, estimate = _at(sglang, num_steps, "head_wait_steps"), _at(sglang, num_steps, "estimate_wait_steps")
    pre, ret = _at(vllm, num_steps, "num_evictions"), _at(sglang, num_steps, "num_evictions")
    hit_v, hit_s = _at(vllm, num_steps, "prefix_cache_hits"), _at(sglang, num_steps, "prefix_cache_hits")
    again_v = _at(vllm, num_steps, "preempted_prefix_cache_hits")
    again_s = _at(sglang, num_steps, "preempted_prefix_cache_hits")
    const = lambda text: [text] * num_steps  # noqa: E731
    return [
        {"label": "vLLM steps", "values": const(str(facts(vllm).num_steps)), "help": "steps vLLM's scheduler needs"},
        {
            "label": "SGLang steps",
            "values": const(str(facts(sglang).num_steps)),
            "help": "steps SGLang's scheduler needs",
        },
        {
            "label": "decodes waiting behind a prefill (SGLang)",
            "values": [f"{w} / {waited[-1]}" for w in waited],
            "help": "decode rows that skip a step while SGLang runs a prefill batch alone, so far / total",
        },
        {
            "label": "steps the head waits (SGLang) · for its output estimate",
            "values": [f"{h} · {e}" for h, e in zip(held, estimate)],
            "help": "steps that ended with a request waiting at the head of SGLang's queue, so far · of them, those "
            "where its prompt and output estimate did not fit the free token slots",
        },
        {
            "label": "preemptions (vLLM) · retractions (SGLang)",
            "values": [f"{p} · {r}" for p, r in zip(pre, ret)],
            "help": "running requests sent back to the queue so far",
        },
        {
            "label": "prefix-cache hit tokens (vLLM · SGLang)",
            "values": [
                f"{a} · {b}" + (f" (re-admissions {c} · {d})" if c or d else "")
                for a, b, c, d in zip(hit_v, hit_s, again_v, again_s)
            ],
            "help": "prompt tokens found in the cache at first admissions so far, as Metrics counts them: in whole "
            "KV blocks (vLLM), token by token (SGLang); in brackets, those found again by requests re-admitted "
            "after a preemption or retraction",
        },
    ]


def _per_side(columns: list[list[int]], totals: bool) -> list[str]:
    """One string per step of the clock: each run's value in side order, ``"3 · 5 · 5"``; with ``totals``, a run's
    value over its run's total where that total is not 0 (``"814/3123 · 0 · 0"``)."""
    return [
        " · ".join(f"{x}/{col[-1]}" if totals and col[-1] else str(x) for x, col in zip(row, columns))
        for row in zip(*columns)
    ]


def runs_counters(views: list[TraceView]) -> list[dict]:
    """Cards for 2 to 4 runs of one workload on one step clock (sides A, B, C, D in the order of ``views``), each
    ``{label, values, help}`` with one value per step, each run's value in side order (the label names the sides:
    "requests finished so far (A · B · C)"), from each run's facts (``batchscope.facts.Counters``, the definitions of
    Metrics): the steps each run needs; requests finished so far; evictions so far, in each engine's word
    (preempted, retracted, paused); and, where any run has them, padding slot-steps (so far / total) and prompt
    tokens found in the prefix cache at first admissions so far. A run that has ended holds its totals."""
    num_steps = max(v.num_steps for v in views)
    sides = f" ({' · '.join(SIDES[: len(views)])})"
    col = lambda field: [_at(v, num_steps, field) for v in views]  # noqa: E731
    words = " / ".join(dict.fromkeys(eviction(v.header).past for v in views))
    needs = " · ".join(str(facts(v).num_steps) for v in views)
    cards = [
        {"label": "steps each run needs" + sides, "values": [needs] * num_steps, "help": "idle steps included"},
        {
            "label": "requests finished so far" + sides,
            "values": _per_side(col("num_finished"), totals=False),
            "help": "requests that ended with a finish by the end of the step",
        },
        {
            "label": f"requests {words} so far" + sides,
            "values": _per_side(col("num_evictions"), totals=False),
            "help": "running requests sent back to the queue without their K/V, so far",
        },
    ]
    optional = (
        ("padding_slot_steps", "padding slot-steps", True, "finished rows of a static batch still run, so far / total"),
        ("prefix_cache_hits", "prefix-cache hit tokens", False, "prompt tokens found in the cache at first admissions"),
    )
    for field, label, totals, help_ in optional:
        values = col(field)
        if any(c[-1] for c in values):
            cards.append({"label": f"{label} so far{sides}", "values": _per_side(values, totals), "help": help_})
    return cards
