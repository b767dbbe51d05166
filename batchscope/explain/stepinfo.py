"""Facts about one step of a trace, derived from the log alone: queues, text so far, events (the blocks each ending
request gives back: ``batchscope.facts.blocks``).

Everything here is a pure function of (trace, step); narration and the app panels are built on it.
"""

from __future__ import annotations

import re

from batchscope.facts import facts
from batchscope.steplog.view import TraceView

EVENT_KINDS = ("admitted", "finished", "preempted")


def queues(view: TraceView, step: int) -> dict[str, list[str]]:
    """Request lists at ``step``, from its facts (``batchscope.facts``): waiting (arrived, queue order), running
    (in the batch), finished and aborted (by the end of this step, in ending order), preempted (sent back in this
    step: a retraction under SGLang), and not_arrived."""
    f = facts(view).step(step)
    return {
        "waiting": list(f.waiting),
        "running": list(f.running),
        "finished": list(f.finished),
        "aborted": list(f.aborted),
        "preempted": list(f.evicted),
        "not_arrived": list(f.not_arrived),  # first seen in a queue after this step (or never)
    }


def request_status(view: TraceView, step: int) -> dict[str, str]:
    """Each request's state at ``step`` for the text table (``batchscope.facts.Facts.state``): not arrived,
    waiting, running, preempted (retracted, under SGLang) in this step, finished or aborted ("" where the step lists
    it nowhere)."""
    return facts(view).state(step)


def text_so_far(view: TraceView, step: int) -> dict[str, str]:
    """Each request's generated text up to and including ``step``.

    The engine records, per sampled token, ``text_delta``: what the token adds to the output once decoded together
    with its neighbours (incremental detokenization), so a character split over several byte-level tokens appears
    whole, when its last byte arrives, never as ``�``; at the request's last step the text equals the summary's
    ``output_text``. Traces written before that field existed fall back to joining each token decoded alone.
    """
    out = {rid: "" for rid in view.request_ids}
    for st in view.steps[: step + 1]:
        for s in st["sampled"]:
            out[s["request_id"]] += s.get("text_delta", s.get("text", ""))
    return out


_SPACES = re.compile(" +")


def visible_whitespace(text: str) -> str:
    """``text`` with the whitespace a reader would miss made visible, so a sampled space or newline token never
    looks like nothing: newline (``\\n``, ``\\r\\n``, ``\\r``) → ⏎, tab → ⇥, and spaces that are invisible
    in running text (at the start, at the end, or two and more in a row) → ␣ each. A single space between words
    stays a space, so the text still reads as text. (The browser player's ``BS.visibleWhitespace`` is the same
    rule, checked on the same cases in tests/ui/test_browser_player.py.)"""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "⏎").replace("\t", "⇥")

    def mark(m: re.Match[str]) -> str:
        run = m.group(0)
        hidden = len(run) > 1 or m.start() == 0 or m.end() == len(text)
        return "␣" * len(run) if hidden else run

    return _SPACES.sub(mark, text)


def event_steps(view: TraceView) -> list[int]:
    """Step positions (as the player and every figure index steps; ``view.step_number`` labels them) where
    something happens to membership: an admission, a finish or a preemption."""
    if "event_steps" not in view.memo:
        view.memo["event_steps"] = [
            k for k, st in enumerate(view.steps) if st["admitted"] or st["finished"] or st["preempted"]
        ]
    return view.memo["event_steps"]
