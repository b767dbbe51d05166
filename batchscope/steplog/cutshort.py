"""A trace cut short: its writer stopped before the summary line (a server crashed, was killed, or is still writing).

The reader (``batchscope.steplog.trace.loads``) keeps every complete step and gives the trace the summary it would have
had at that point, as a size cap does (``truncated_at_step``: the first step not recorded; requests still running have
``finish_reason`` null), marked ``cut_short`` so that nothing presents it as complete. This module says how that
summary is made and what the app and the command line say about it (``cut_short_note``); nothing else decides
either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NO_SUMMARY = "no_summary"  # the value of the summary's ``cut_short``: the trace ended without its summary line


def cut_short_summary(header: dict, steps: list[dict], requests: list[dict]) -> dict:
    """The summary of a header and its complete steps (already checked against the schema): every declared request
    (``requests``: ``batchscope.steplog.view.declared_requests``) with the tokens the steps sampled, its finish if a
    step finished it (else ``finish_reason`` and ``finish_time`` null), its preemptions, and its times as the writer
    stamps them (first scheduled: the ``t_start`` of its first scheduled step; first token and finish: the ``t_end``
    of the step that sampled or finished it).

    ``num_dropped_tokens`` is left out, so the metrics take a preempted request's dropped and recomputed tokens from
    the log (``batchscope.steplog.decisions.dropped_and_recomputed``)."""
    out: dict[str, dict[str, Any]] = {}
    for r in requests:
        out.setdefault(r["request_id"], _blank(r, header, steps))
    for st in steps:
        for s in st["scheduled"]:
            if s["request_id"] in out and out[s["request_id"]]["first_scheduled_time"] is None:
                out[s["request_id"]]["first_scheduled_time"] = st["t_start"]
        for s in st["sampled"]:
            if s["request_id"] in out:
                r = out[s["request_id"]]
                r["output_token_ids"].append(s["token_id"])
                r["first_token_time"] = r["first_token_time"] if r["first_token_time"] is not None else st["t_end"]
        for rid in st["preempted"]:
            if rid in out:
                out[rid]["num_preemptions"] += 1
        for f in st["finished"]:
            if f["request_id"] in out and out[f["request_id"]]["finish_reason"] is None:
                out[f["request_id"]].update(finish_reason=f["reason"], finish_time=st["t_end"])
    at_step = steps[-1]["step"] + 1 if steps else 0
    return {"type": "summary", "requests": list(out.values()), "truncated_at_step": at_step, "cut_short": NO_SUMMARY}


def _blank(spec: dict, header: dict, steps: list[dict]) -> dict[str, Any]:
    """A request's summary entry before any step: nothing sampled, not finished. A version 1 request that arrives on
    the step clock (``arrival_step``) arrived, on the wall clock, by the start of that step (the header holds the
    workload's value there); a server's trace stamps the arrival in ``arrived``."""
    arrival = spec["arrival_time"]
    if header.get("schema_version", 1) == 1 and spec.get("arrival_step") is not None:
        due = [st["t_start"] for st in steps if st["step"] >= spec["arrival_step"]]
        arrival = due[0] if due else (steps[-1]["t_end"] if steps else arrival)
    return {
        "request_id": spec["request_id"],
        "output_token_ids": [],
        "finish_reason": None,
        "num_preemptions": 0,
        "num_recomputed_tokens": 0,
        "arrival_time": arrival,
        "first_scheduled_time": None,
        "first_token_time": None,
        "finish_time": None,
    }


def cut_short_note(summary: Mapping[str, Any]) -> str | None:
    """One line for a trace whose steps stop early, ``None`` for a complete one: "cut short at step 6: ..." (no
    summary line: the reader made it) or "truncated at step 6: ..." (the tracer's size cap)."""
    at = summary.get("truncated_at_step")
    if at is None:
        return None
    if summary.get("cut_short") != NO_SUMMARY:
        return (
            f"truncated at step {at}: the tracer's size cap stopped the step records there (the steps before are "
            "shown and measured; the summary holds the rest)"
        )
    running = sum(r["finish_reason"] is None for r in summary["requests"])
    return (
        f"cut short at step {at}: the trace has no summary line, the server did not shut down (the complete steps are "
        f"shown; {running} request(s) still running have no finish)"
    )
