"""Why the head of the waiting queue did or did not get in: the scheduler's checks, in its order, with the numbers.

For the first request still waiting after step ``k`` was scheduled, ``head_checklist`` lists the limits the
scheduler checks before admitting a request (``batchscope.steplog.reasons.checks``: the order depends on the trace's
scheduler), and marks the one that stopped it, as the scheduler recorded it (``batchscope.steplog.decisions``; inferred
from the log for traces without records). Checks before it passed; the scheduler stops at the first that fails, so the
ones after it were not reached. Units: tokens, blocks, rows.
"""

from __future__ import annotations

from batchscope.explain.words import plural
from batchscope.facts import facts
from batchscope.steplog.decisions import decisions
from batchscope.steplog.reasons import LIMIT_NAMES, LIMIT_WHY, QUEUE_ORDERS, at_the_check, checks, limit_numbers
from batchscope.steplog.records import HeadWaitRecord
from batchscope.steplog.view import TraceView


def head_checklist(view: TraceView, step: int) -> list[dict]:
    """The checks for the head of the waiting queue at ``step``: ``[{"limit", "name", "numbers", "state", "binds",
    "why"}]`` with ``state`` one of ``passed``, ``binds``, ``not reached``. Empty when nobody waits."""
    head = decisions(view, step).get("head")
    if head is None:
        return []
    order = checks(view.header)
    if head["limit"] not in order:  # not one of the checks (SGLang's head retracted in its step, after them): alone
        order = [head["limit"]]
    at = order.index(head["limit"])
    items = []
    for i, limit in enumerate(order):
        state = "passed" if i < at else "binds" if i == at else "not reached"
        numbers = _numbers(view, step, limit, head) if state != "not reached" else ""
        items.append(
            {
                "limit": limit,
                "name": LIMIT_NAMES.get(limit, limit),
                "numbers": numbers,
                "state": state,
                "binds": state == "binds",
                "why": LIMIT_WHY.get(limit, limit),
            }
        )
    return items


def _numbers(view: TraceView, step: int, limit: str, head: HeadWaitRecord) -> str:
    """The log's numbers for one check: the recorded ones for the binding limit; for a passed one the rows and tokens
    when the scheduler checked the head (``batchscope.steplog.reasons.at_the_check``)."""
    st, cfg = view.steps[step], view.header["config"]
    if limit == head["limit"] and limit_numbers(head):
        return limit_numbers(head)
    rows, left = at_the_check(view.header, st, head["limit"])
    if limit == "preempted_this_step":
        return f"{len(st['preempted'])} preempted"
    if limit == "token_budget":
        return f"{left} of {cfg['max_num_batched_tokens']} tokens left"
    if limit == "max_num_seqs":
        return f"{rows} / {cfg['max_num_seqs']} rows used"
    if limit == "static_batch_running":
        running = facts(view).step(step).running  # the members in this step's forward pass, as the narration says
        return (
            f"{plural(len(running), 'member')} still running" if limit == head["limit"] else "the last batch has ended"
        )
    return ""


def checklist_text(view: TraceView, step: int) -> str:
    """The checklist in one line for the player, e.g. ``Why D (head of the queue) waits: ... ✗ binds · ...``."""
    items = head_checklist(view, step)
    if not items:
        return ""
    head = decisions(view, step).get("head") or {"request_id": view.steps[step]["waiting"][0]}
    marks = {"passed": "✓", "binds": "✗ binds", "not reached": "(not reached)"}
    parts = [f"{i['name']}: {i['numbers'] + ' ' if i['numbers'] else ''}{marks[i['state']]}" for i in items]
    inferred = " (inferred from the log)" if decisions(view, step).get("inferred") else ""
    return f"Why {view.label(head['request_id'])} (head of the queue) waits{inferred}: " + " · ".join(parts)


def binding_reason(view: TraceView, step: int) -> str:
    """Why the head waits at ``step``, in words (the narration's sentence after "Waiting: ..."), e.g. ``D waits
    because every batch row (max_num_seqs) is taken by a running request: needs 1 row, 0 free``."""
    d = decisions(view, step)
    head = d.get("head")
    if head is None:  # a server's tracer could not tell (a paused scheduler)
        return ""
    numbers = limit_numbers(head)
    why = f"{view.label(head['request_id'])} waits because {LIMIT_WHY.get(head['limit'], head['limit'])}"
    why += f": {numbers}" if numbers else ""
    if len(view.steps[step]["waiting"]) > 1:
        order = QUEUE_ORDERS.get(head.get("order", "arrival"), head.get("order", ""))
        why += f"; the others wait behind it ({order}: nobody overtakes the head)"
    return why + (" (reason inferred from the log)" if d.get("inferred") else "")
