"""Key moments of SGLang's scheduler (``batchscope.explain.moments``), from the step's decision records:

- ``prefill_first``: a prefill (EXTEND) batch runs alone while running requests' decodes wait (``batch``);
- ``reserved_output``: the head of the queue is held because the pool cannot hold its prompt plus its output
  estimate beside the running requests' (``head.limit`` ``sglang_reserved_output``), the first step of each hold;
- ``retraction``: the decode batch outgrew the pool and a request went back to the queue (rule ``sglang_retract``);
- TGI's ``stall``: with prefill chunking off, a new batch is prefilled alone while the running requests' decodes wait
  (the same ``batch.decodes_waiting`` record, TGI's router).
"""

from __future__ import annotations

from typing import Any

from batchscope.explain.words import join
from batchscope.steplog.decisions import decisions
from batchscope.steplog.reasons import limit_numbers
from batchscope.steplog.view import TraceView

RETRACT = "sglang_retract"


def _names(view: TraceView, ids: list[str]) -> str:
    return join([view.label(r) for r in ids])


def _held(view: TraceView, k: int) -> dict[str, Any] | None:
    head = decisions(view, k).get("head")
    return dict(head) if head and head["limit"] == "sglang_reserved_output" else None


def sglang_moments(view: TraceView, k: int) -> list[dict[str, Any]]:
    """The SGLang moments of step position ``k`` as ``(kind, request, note)`` dicts (``batchscope.explain.moments._m``'s
    fields but ``step`` and ``policy``)."""
    d, out = decisions(view, k), []
    waits = d.get("batch", {}).get("decodes_waiting", [])
    run = [s["request_id"] for s in view.steps[k]["scheduled"]]
    if waits and run and view.policy == "tgi":
        note = (
            f"TGI prefills the new batch of {_names(view, run)} alone: the decode{'s' if len(waits) > 1 else ''} of "
            f"{_names(view, waits)} stall{'' if len(waits) > 1 else 's'} a step (prefill chunking off)."
        )
        out.append({"kind": "stall", "request": run[0], "note": note})
    elif waits and run:
        note = (
            f"Prefill first: SGLang runs the prefill batch of {_names(view, run)} alone; the decode"
            f"{'s' if len(waits) > 1 else ''} of {_names(view, waits)} wait{'' if len(waits) > 1 else 's'} a step."
        )
        out.append({"kind": "prefill_first", "request": run[0], "note": note})
    head = _held(view, k)
    if head and not (k and (before := _held(view, k - 1)) and before["request_id"] == head["request_id"]):
        numbers = limit_numbers(head)
        note = (
            f"{view.label(head['request_id'])} waits: the pool cannot hold its prompt plus its whole output budget "
            f"beside the running requests' estimated remaining output{f' ({numbers})' if numbers else ''}."
        )
        out.append({"kind": "reserved_output", "request": head["request_id"], "note": note})
    for p in d.get("preemptions", []):
        if p["rule"] == RETRACT:
            freed = p.get("num_freed_tokens", p["num_dropped_tokens"])
            kept = p["num_dropped_tokens"] - freed
            note = (
                f"{view.label(p['request_id'])} is retracted: the decode batch outgrew the pool; it goes back to the "
                f"queue, {freed} of its tokens freed{f', {kept} kept in the radix cache' if kept else ''}."
            )
            out.append({"kind": "retraction", "request": p["request_id"], "note": note})
    return out
