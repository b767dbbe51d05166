"""The steps table: one row per step of a trace, what the scheduler did in it, as the Trace page lists it.

One place for its rows: the Trace page's full, sortable table (``batchscope.app.page_trace``) and the table inside the
browser player that follows the player's step (``playback.player_payload(table=True)``, drawn by ``web/steptable.js``)
both read ``step_row``. Every value comes from the step's record (``docs/trace-format.md``); nothing is re-derived.
"""

from __future__ import annotations

from batchscope.facts import eviction, facts
from batchscope.figures.packing import Interner
from batchscope.steplog.reasons import pool_unit
from batchscope.steplog.records import ScheduledRecord
from batchscope.steplog.view import TraceView

MAX_LISTED = 6  # request names per cell; a server's step schedules dozens of requests

# the last column counts the pool in its own unit: "KV blocks used", or "token slots used" in an SGLang trace
FIRST_COLUMNS = (
    "step",
    "t_end (s)",
    "batched tokens",
    "scheduled",
    "admitted",
    "finished",
    "aborted",
    "preempted",
    "waiting",
    "padding rows",
)
WORD_COLUMNS = (
    "scheduled",
    "admitted",
    "finished",
    "aborted",
    "preempted",
    "retracted",
)  # lists of requests: they wrap between names
CAPTION = "scheduled: request:kind and tokens (p = prefill chunk or recompute, d = decode), in batch order."


def columns(view: TraceView) -> tuple[str, ...]:
    """The table's column names; the pool's in its unit (``batchscope.steplog.reasons.pool_unit``), the evicted in
    the engine's word ("retracted" under SGLang, ``batchscope.facts.vocabulary``). "padding rows" only for a static
    batch's trace: only static batching has them (a column of zeros elsewhere, which pushed the table past the
    Trace page's width at 1280x720); "aborted" only for a trace with an abort."""
    left = {"padding rows"} if view.policy != "static" else set()
    left |= set() if facts(view).totals.num_aborted else {"aborted"}
    evicted = eviction(view.header).past
    first = tuple(evicted if c == "preempted" else c for c in FIRST_COLUMNS if c not in left)
    return (*first, f"{pool_unit(view.header)}s used")


def listed(view: TraceView, ids: list[str]) -> str:
    """The first ``MAX_LISTED`` requests' labels, then "+N" for the rest."""
    shown = ", ".join(view.label(r) for r in ids[:MAX_LISTED])
    return shown + (f" +{len(ids) - MAX_LISTED}" if len(ids) > MAX_LISTED else "")


def scheduled_cell(view: TraceView, scheduled: list[ScheduledRecord]) -> str:
    """ "A:p30, B:d1" (request, kind initial, tokens) in batch order; a batch of more than ``MAX_LISTED`` requests as
    "N requests: D d, P p"."""
    if len(scheduled) <= MAX_LISTED:
        return ", ".join(f"{view.label(x['request_id'])}:{x['kind'][0]}{x['num_tokens']}" for x in scheduled)
    decodes = sum(x["kind"] == "decode" for x in scheduled)
    return f"{len(scheduled)} requests: {decodes} d, {len(scheduled) - decodes} p"


def step_row(view: TraceView, k: int) -> dict:
    """Step ``k``'s row, keyed by ``columns(view)``: its end time (seconds since the run started, 4 decimals), the
    tokens it batched, who ran how, who was admitted, finished and preempted, how many waited, the static batch's
    padding rows (a static batch's trace only) and the pool's units (KV blocks, or an SGLang trace's token slots) in
    use after it.

    Raises IndexError if ``k`` is not a step of the trace."""
    s = view.steps[k]
    row = {
        "step": s["step"],
        "t_end (s)": round(s["t_end"], 4),
        "batched tokens": s["num_batched_tokens"],
        "scheduled": scheduled_cell(view, s["scheduled"]),
        "admitted": listed(view, s["admitted"]),
        "finished": listed(view, [f["request_id"] for f in s["finished"] if f["reason"] != "abort"]),
        "aborted": listed(view, [f["request_id"] for f in s["finished"] if f["reason"] == "abort"]),
        eviction(view.header).past: listed(view, s["preempted"]),
        "waiting": len(s["waiting"]),
        "padding rows": len(s["padding_slots"]),
        f"{pool_unit(view.header)}s used": s["kv"]["num_used_blocks"],
    }
    return {c: row[c] for c in columns(view)}


def steps_table_payload(view: TraceView, lo: int, hi: int, intern: Interner) -> dict:
    """The player's steps table over steps ``lo``..``hi`` (its span): ``{columns, caption, first, rows, words}``:
    row i is step ``first + i``'s cells as indices into the payload's table ``T`` (``intern``: a
    ``batchscope.figures.packing.Interner``); ``words``: the columns of request lists, which may wrap between names."""
    rows = [[intern(v) for v in step_row(view, k).values()] for k in range(lo, min(hi, view.num_steps - 1) + 1)]
    names = columns(view)
    words = [names.index(c) for c in WORD_COLUMNS if c in names]
    return {"columns": list(names), "caption": CAPTION, "first": lo, "rows": rows, "words": words}
