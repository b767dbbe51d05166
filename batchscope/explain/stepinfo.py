"""Facts about one step of a trace, derived from the log alone: queues, text so far, blocks freed, events.

Everything here is a pure function of (trace, step); narration and the app panels are built on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from batchscope.steplog.finishes import aborted_before
from batchscope.steplog.view import TraceView

EVENT_KINDS = ("admitted", "finished", "preempted")


def queues(view: TraceView, step: int) -> dict[str, list[str]]:
    """Request lists at ``step``: waiting (arrived, queue order), running (in the batch), finished (by the end of
    this step), preempted (in this step), and not_arrived."""
    st = view.steps[step]
    return {
        "waiting": list(st["waiting"]),
        "running": list(st["running"]),
        "finished": view.finished_by(step),
        "preempted": list(st["preempted"]),
        "not_arrived": view.not_arrived(step),  # first seen in a queue after this step (or never)
    }


def request_status(view: TraceView, step: int) -> dict[str, str]:
    """Each request's state at ``step`` for the text table: not arrived, waiting, running or finished ("" if none
    applies, e.g. preempted in this step)."""
    q = queues(view, step)
    status = {
        **{r: "not arrived" for r in q["not_arrived"]},
        **{r: "waiting" for r in q["waiting"]},
        **{r: "running" for r in q["running"]},
        **{r: "finished" for r in q["finished"]},
    }
    return {rid: status.get(rid, "") for rid in view.request_ids}


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


def freed_blocks(view: TraceView, step: int) -> dict[str, dict[str, list[int]]]:
    """Blocks released around ``step``: ``{"finished": {rid: blocks}, "preempted": {rid: blocks}, "aborted":
    {rid: blocks}}``.

    A finished request frees its blocks at the end of the step it finishes in (they are still in this step's
    tables); a preempted request lost its blocks while this step was scheduled, and a request aborted before the
    step was scheduled (``batchscope.steplog.finishes.aborted_before``) before that: both were in the previous step's.
    """
    st = view.steps[step]
    tables = view.block_tables(step)
    before = {f["request_id"] for f in st["finished"] if aborted_before(f)}
    prev = view.block_tables(step - 1) if step > 0 and (st["preempted"] or before) else {}
    return {
        "finished": {
            f["request_id"]: list(tables.get(f["request_id"], ()))
            for f in st["finished"]
            if f["request_id"] not in before
        },
        "preempted": {rid: list(prev.get(rid, ())) for rid in st["preempted"]},
        "aborted": {rid: list(prev.get(rid, ())) for rid in before},
    }


def held_after(view: TraceView, step: int) -> set[int]:
    """Blocks that requests still running after ``step`` hold (a shared block outlives a finished holder)."""
    done = {f["request_id"] for f in view.steps[step]["finished"]}
    return {b for rid, blocks in view.block_tables(step).items() if rid not in done for b in blocks}


def held_at_abort(view: TraceView, step: int) -> set[int]:
    """Blocks other requests still hold after the aborts made before ``step`` was scheduled: the previous step's
    tables without the requests that finished at its end or were aborted before this step."""
    if step == 0:
        return set()
    gone = {f["request_id"] for f in view.steps[step - 1]["finished"]}
    gone |= {f["request_id"] for f in view.steps[step]["finished"] if aborted_before(f)}
    return {b for rid, blocks in view.block_tables(step - 1).items() if rid not in gone for b in blocks}


@dataclass(frozen=True)
class Release:
    """What one ending request (a finish or an abort) gives back, each block counted once: ``alone`` (blocks only
    it held), ``shared`` (blocks it held with the earlier enders ``shared_with``, which left them to it), ``later``
    (blocks a later ender in the same release also holds: released there, its ``later_with``), ``kept`` (blocks a
    request still running holds). Released by it: ``alone + shared``."""

    alone: int
    shared: int
    shared_with: tuple[str, ...]
    later: int
    later_with: tuple[str, ...]
    kept: int


def releases(view: TraceView, step: int) -> dict[str, Release]:
    """Each request that ends around ``step`` -> its ``Release``, in ``finished`` order: the requests aborted
    before the step was scheduled give their blocks back together, against the blocks others held then
    (``held_at_abort``); those that finish in the step together, at its end (``held_after``). A block that several
    of them hold is released once, by the last of them to end (in ``finished`` order), so the numbers add up to
    the blocks that go back to the pool."""
    freed, ended = freed_blocks(view, step), view.steps[step]["finished"]
    out: dict[str, Release] = {}
    for group, kept in ((freed["aborted"], held_at_abort), (freed["finished"], held_after)):
        if not group:
            continue
        held, order = kept(view, step), [f["request_id"] for f in ended if f["request_id"] in group]
        for i, rid in enumerate(order):
            mine = set(group[rid])
            gone = mine - held
            later = {r: gone & set(group[r]) for r in order[i + 1 :]}
            earlier = {r: gone & set(group[r]) for r in order[:i]}
            deferred = set().union(*later.values())
            shared = set().union(*earlier.values()) - deferred
            out[rid] = Release(
                alone=len(gone - deferred - shared),
                shared=len(shared),
                shared_with=tuple(r for r, b in earlier.items() if b & shared),
                later=len(deferred),
                later_with=tuple(r for r, b in later.items() if b),
                kept=len(mine & held),
            )
    return out


def event_steps(view: TraceView) -> list[int]:
    """Step positions (as the player and every figure index steps; ``view.step_number`` labels them) where
    something happens to membership: an admission, a finish or a preemption."""
    if "event_steps" not in view.memo:
        view.memo["event_steps"] = [
            k for k, st in enumerate(view.steps) if st["admitted"] or st["finished"] or st["preempted"]
        ]
    return view.memo["event_steps"]
