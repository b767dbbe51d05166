"""The short form of a step's narration: one line a hall can read in presenter mode, from the same facts.

``narrate`` (``batchscope.explain.narration``) tells a step in full: every chunk's token range, each eviction's cause
and comeback cost, the budget and the pool. Beside two or four runs on one projector that is too long to read; the
headline keeps what a step *did*, in the order the narration tells it, and nothing the narration does not say:

    Step 53: A and B decode. C is retracted. D waits: the pool cannot hold its prompt and estimated output.

Where even that is too long (four runs on a 960x540 screen) ``headline(view, step, short=True)`` keeps the events
alone, without their token counts and without why the head waits; the why is in the headline and the narration, one
key away:

    Step 53: A and B decode. C is retracted. D waits.

Its parts come from the step's facts (``batchscope.facts``: each request's work and the step's events, in the
engine's own words) and the head's recorded decision (``batchscope.steplog.decisions``, its limit in
``batchscope.steplog.reasons.LIMIT_SHORT``); the long form stays one key away in the player.
"""

from __future__ import annotations

from batchscope.explain.words import join, plural
from batchscope.facts import facts
from batchscope.steplog.decisions import decisions
from batchscope.steplog.reasons import LIMIT_SHORT
from batchscope.steplog.view import TraceView

MAX_NAMED = 4  # a headline names at most this many requests in a list, then counts the rest


def _names(view: TraceView, ids: list[str] | tuple[str, ...]) -> str:
    return join([view.label(r) for r in ids], MAX_NAMED)


def headline(view: TraceView, step: int, short: bool = False) -> str:
    """The headline of step position ``step`` (plain text, one to three short sentences): the work of the step
    (decodes, each admission and its prefill, prefill chunks, recomputes, speculative decodes, padding rows), the
    evictions and endings in the engine's words, and why the head of the queue waits. ``short``: the same events
    without token counts, draft counts or the why (``D waits.``, not said of a request evicted in the step), and no
    list of the other waiting requests (the queues show them)."""
    f = facts(view)
    sf = f.step(step)
    which = f"Step {sf.number}" if sf.idle_steps == 1 else f"Steps {sf.number}–{sf.number + sf.idle_steps - 1}"
    if sf.idle:
        return f"{which}: idle, nothing to run."
    reqs = f.requests(step)
    order = [s["request_id"] for s in view.steps[step]["scheduled"]]
    work = {rid: reqs[rid] for rid in order}
    hits = {a["request_id"]: a for a in decisions(view, step).get("admissions", [])}
    admitted = {e.request_id for e in sf.events if e.kind in ("admitted", "readmitted")}
    parts = []
    decodes = [r for r, w in work.items() if w.work == "decode"]
    if decodes:
        parts.append(f"{_names(view, decodes)} decode{'s' if len(decodes) == 1 else ''}")
    for again in (False, True):  # first admissions together, then comebacks after an eviction together
        ids = [r for r in work if r in admitted and (r in hits and hits[r]["resumed"]) == again]
        if ids:
            hit = sum(hits[r]["num_prefix_hit_tokens"] for r in ids if r in hits)
            kinds = {work[r].work for r in ids}
            now = sum(work[r].num_tokens for r in ids)
            what = _compute("recompute" if kinds == {"recompute"} else "prefill", now)
            redo = sum(hits[r]["num_recompute_tokens"] for r in ids if r in hits) if kinds == {"recompute"} else 0
            if redo > now:  # its first chunk: this step's tokens of the total its tour moment names
                what = f"recompute {now} of {plural(redo, 'token')}"
            be = "is" if len(ids) == 1 else "are"
            found = f"{hit} cached, " if hit else ""
            how = "" if short else f" ({found}{what})"
            parts.append(f"{_names(view, ids)} {be} admitted{' again' if again else ''}{how}")
    for rid, w in work.items():
        if w.work in ("prefill", "recompute") and rid not in admitted:
            did = f"{w.work}s" if short else _compute(w.work, w.num_tokens, verb=True)
            parts.append(f"{view.label(rid)} {did}")
        elif w.work == "speculative":
            kept = "" if w.num_accepted is None or short else f", {w.num_accepted} kept"
            drafts = "drafts" if short else plural(w.num_drafts, "draft")
            parts.append(f"{view.label(rid)} verifies {drafts}{kept}")
    padding = [r for r, w in work.items() if w.work == "padding"]
    if padding:
        parts.append(f"{plural(len(padding), 'padding row')}")
    sentences = [f"{which}: " + ("; ".join(parts) if parts else "nothing is scheduled") + "."]
    if sf.evicted:
        verb = f.words.verb.split()  # "is preempted" -> "are preempted" for several
        sentences.append(f"{_names(view, sf.evicted)} {verb[0] if len(sf.evicted) == 1 else 'are'} {verb[1]}.")
    ended = [e for e in sf.events if e.kind in ("finished", "aborted")]
    for kind in ("finished", "aborted"):
        ids = [e.request_id for e in ended if e.kind == kind]
        if ids:
            sentences.append(
                f"{_names(view, ids)} {'finishes' if len(ids) == 1 else 'finish'}."
                if kind == "finished"
                else f"{_names(view, ids)} {'is' if len(ids) == 1 else 'are'} aborted."
            )
    return " ".join(sentences + _waits(view, step, short))


def _waits(view: TraceView, step: int, short: bool) -> list[str]:
    """Who waits and why: the head's recorded limit (``short``: the head alone, and nothing of a request evicted in
    the step: its eviction says it), else the waiting requests (``short``: none; the queues show them)."""
    sf, head = facts(view).step(step), decisions(view, step).get("head")
    if head is not None and sf.waiting and not (short and head["request_id"] in sf.evicted):
        why = "" if short else ": " + LIMIT_SHORT.get(head["limit"], head["limit"]).replace("the head's", "its")
        return [f"{view.label(head['request_id'])} waits{why}."]
    return [f"Waiting: {_names(view, sf.waiting)}."] if sf.waiting and not short else []


def _compute(work: str, n: int, verb: bool = False) -> str:
    """``prefill 7 tokens`` / ``recompute 7 tokens`` (``verb``: ``prefills 7 tokens``)."""
    word = "prefill" if work == "prefill" else "recompute"
    return f"{word}{'s' if verb else ''} {plural(n, 'token')}"
