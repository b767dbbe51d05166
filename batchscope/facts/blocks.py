"""Which KV blocks each ending or evicted request gives back in a step, and who takes them at once.

A finished request frees its blocks at the end of the step it finishes in (they are still in that step's tables);
a preempted (retracted) request lost its blocks while the step was scheduled, and a request aborted before the step
was scheduled (``batchscope.steplog.finishes.aborted_before``) before that: both were in the previous step's tables,
and the scheduler may hand such a block at once to a request of the same step (``handed_on``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchscope.steplog.finishes import aborted_before
from batchscope.steplog.metric_names import family
from batchscope.steplog.view import TraceView


def released_before(st: Any, entry: Any) -> bool:
    """Whether the request of ``finished`` entry ``entry`` of step record ``st`` gave its blocks back before the
    step was scheduled: an abort made then (``batchscope.steplog.finishes.aborted_before``), or a version 2 record
    that frees its table itself (``kv.freed``: a server's tracer may list a finish in the record that frees it, and
    its blocks may already be handed on in that record)."""
    return aborted_before(entry) or entry["request_id"] in st["kv"].get("freed", ())


def freed_blocks(view: TraceView, step: int) -> dict[str, dict[str, list[int]]]:
    """Blocks released around ``step``: ``{"finished": {rid: blocks}, "preempted": {rid: blocks}, "aborted":
    {rid: blocks}}``.

    A finished request frees its blocks at the end of the step it finishes in (they are still in this step's
    tables); a preempted request lost its blocks while this step was scheduled, and a request released before the
    step was scheduled (``released_before``) before that: both were in the previous step's. The last group is
    named ``aborted``: an abort before the step, or a finish whose table this very record frees (a server's trace).
    """
    st = view.steps[step]
    tables = view.block_tables(step)
    before = {f["request_id"] for f in st["finished"] if released_before(st, f)}
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
    gone |= {f["request_id"] for f in view.steps[step]["finished"] if released_before(view.steps[step], f)}
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


def handed_on(view: TraceView, step: int) -> dict[str, dict[str, list[int]]]:
    """Blocks freed while ``step`` was scheduled (a preemption, an abort before the step) that another request
    newly holds in the same step: ``{freed from: {taken by: blocks}}``, empty where none was taken at once. A block
    the other request already held (a shared prefix, kept in the cache) was not given back, and is not listed."""
    freed = freed_blocks(view, step)
    gone = {**freed["preempted"], **freed["aborted"]}
    if not gone:
        return {}
    before = view.block_tables(step - 1) if step > 0 else {}
    out: dict[str, dict[str, list[int]]] = {}
    for rid, blocks in view.block_tables(step).items():
        new = set(blocks) - set(before.get(rid, ()))
        for victim, lost in gone.items():
            taken = [b for b in lost if b in new and rid != victim]
            if taken:
                out.setdefault(victim, {})[rid] = taken
    return out


def given_back(view: TraceView, step: int) -> dict[int, str]:
    """Block -> the request an eviction (preemption, retraction) took it from in ``step``, for the blocks it gave
    back: free now, or taken at once by another request (``handed_on``); not those another request held already
    (a shared prefix), nor those SGLang's radix tree keeps after a retraction (its cached free slots)."""
    evicted = freed_blocks(view, step)["preempted"]
    if not evicted:
        return {}
    held = {b for blocks in view.block_tables(step).values() for b in blocks}
    taken = {b for takers in handed_on(view, step).values() for blocks in takers.values() for b in blocks}
    kept = set(view.steps[step]["kv"].get("cached_free_blocks", ())) if family(view.header) == "sglang" else set()
    back = {b: rid for rid, blocks in evicted.items() for b in blocks if b not in held or b in taken}
    return {b: rid for b, rid in back.items() if b not in kept}
