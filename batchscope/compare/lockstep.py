"""Counters on one step clock for the comparison page and its exported file: static vs continuous batching, and
vLLM's scheduler (continuous) vs SGLang's (sglang), the latter read from each step's decision records."""

from __future__ import annotations

from collections.abc import Callable

from batchscope.steplog.decisions import decisions
from batchscope.steplog.view import TraceView


def lockstep_counters(static: TraceView, continuous: TraceView) -> list[dict]:
    """Cards for the player (``playback.player_payload(counters=...)``): each ``{label, values, help}`` with one
    value per step of the shared clock. Steps of each policy, steps saved (or extra) for continuous, and the
    padding slot-steps static batching has wasted up to the step, out of its total."""
    num_steps = max(static.num_steps, continuous.num_steps)
    pads = [len(x["padding_slots"]) for x in static.steps]
    total = sum(pads)
    upto, running = [], 0
    for k in range(num_steps):
        running += pads[k] if k < len(pads) else 0
        upto.append(f"{running} / {total}")
    saved = static.num_steps - continuous.num_steps
    share = f" ({abs(saved) / static.num_steps:.0%} {'fewer' if saved >= 0 else 'more'})" if static.num_steps else ""
    const = lambda text: [text] * num_steps  # noqa: E731
    return [
        {"label": "static steps", "values": const(str(static.num_steps)), "help": "steps static batching needs"},
        {
            "label": "continuous steps",
            "values": const(str(continuous.num_steps)),
            "help": "steps continuous batching needs",
        },
        {
            "label": "steps saved by continuous" if saved >= 0 else "extra steps for continuous",
            "values": const(f"{abs(saved)}{share}"),
            "help": ""
            if saved >= 0
            else "here the KV pool, not the slots, limits concurrency, and preemption costs recompute",
        },
        {
            "label": "padding slot-steps wasted (static)",
            "values": upto,
            "help": "finished rows of a static batch that still run in the forward pass, up to this step / total",
        },
    ]


def _so_far(view: TraceView, num_steps: int, count: Callable[[int], int]) -> list[int]:
    """``count(k)`` summed over the steps of ``view`` up to each position of a shared clock of ``num_steps``."""
    out, total = [], 0
    for k in range(num_steps):
        total += count(k) if k < view.num_steps else 0
        out.append(total)
    return out


def _hits(view: TraceView, k: int) -> int:
    return sum(a["num_prefix_hit_tokens"] for a in decisions(view, k).get("admissions", []))


def _evictions(view: TraceView, k: int) -> int:
    return len(decisions(view, k).get("preemptions", []))


def family_counters(vllm: TraceView, sglang: TraceView) -> list[dict]:
    """Cards for vLLM's scheduler (a continuous trace) against SGLang's (an sglang trace) on one step clock, each
    ``{label, values, help}``, from the decision records: steps of each; decode rows that waited behind SGLang's
    prefill (EXTEND) batches so far; steps its queue's head was held by the output estimate so far; preemptions
    and retractions so far; prompt tokens found in the prefix cache so far by each."""
    num_steps = max(vllm.num_steps, sglang.num_steps)
    waited = _so_far(sglang, num_steps, lambda k: len(decisions(sglang, k).get("batch", {}).get("decodes_waiting", [])))
    held = _so_far(
        sglang,
        num_steps,
        lambda k: int(decisions(sglang, k).get("head", {}).get("limit") == "sglang_reserved_output"),
    )
    pre, ret = (
        _so_far(vllm, num_steps, lambda k: _evictions(vllm, k)),
        _so_far(sglang, num_steps, lambda k: _evictions(sglang, k)),
    )
    hit_v, hit_s = (
        _so_far(vllm, num_steps, lambda k: _hits(vllm, k)),
        _so_far(sglang, num_steps, lambda k: _hits(sglang, k)),
    )
    const = lambda text: [text] * num_steps  # noqa: E731
    return [
        {"label": "vLLM steps", "values": const(str(vllm.num_steps)), "help": "steps vLLM's scheduler needs"},
        {"label": "SGLang steps", "values": const(str(sglang.num_steps)), "help": "steps SGLang's scheduler needs"},
        {
            "label": "decodes waiting behind a prefill (SGLang)",
            "values": [f"{w} / {waited[-1]}" for w in waited],
            "help": "decode rows that skip a step while SGLang runs a prefill batch alone, so far / total",
        },
        {
            "label": "steps the head waits for its output estimate (SGLang)",
            "values": [f"{h} / {held[-1]}" for h in held],
            "help": "steps SGLang kept the head of the queue out: its prompt and whole output budget did not fit",
        },
        {
            "label": "preemptions (vLLM) · retractions (SGLang)",
            "values": [f"{p} · {r}" for p, r in zip(pre, ret)],
            "help": "running requests sent back to the queue so far",
        },
        {
            "label": "prefix-cache hit tokens (vLLM · SGLang)",
            "values": [f"{a} · {b}" for a, b in zip(hit_v, hit_s)],
            "help": "prompt tokens found in the cache so far: in whole KV blocks (vLLM), token by token (SGLang)",
        },
    ]
