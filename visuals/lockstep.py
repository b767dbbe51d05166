"""Counters for static vs continuous on one step clock (the comparison page and its exported file)."""

from __future__ import annotations

from steplog.view import TraceView


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
