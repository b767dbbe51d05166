"""A trace as Chrome trace-event JSON, for ``ui.perfetto.dev`` and ``chrome://tracing`` (``python -m batchscope
perfetto``).

The Trace Event Format (Google's "Trace Event Format" document) is a JSON object whose ``traceEvents`` list holds
events of a phase ``ph``, timestamps ``ts`` in microseconds. What a step log becomes:

    process "batch rows"            one thread per batch row (``slot``), as the slot grid draws them
      thread "slot 0"               |A prefill 24|A prefill 30|A prefill 17|A decode|A decode| ...   ph "X"
      thread "slot 1"               |B prefill 5 |B decode    |B decode    |B decode| ...
    process "scheduler"
      counters                      KV blocks used, waiting, running, tokens scheduled, one value per step   ph "C"
      thread "admissions"           admit D ◆                                                              ph "i"
      thread "preemptions"          preempt L2 ◆ (the decision record's rule, requester, K/V dropped)
      thread "finishes"             finish C (length) ◆
      thread "aborts"               abort X ◆

- **Slices** (``X``, complete events): one per request per step it is scheduled in, on its row, named by its
  request id; the category ``cat`` is the cell's kind as the views draw it (``TraceView.cells_at``): ``prefill``,
  ``decode``, ``recompute`` (a prefill redoing K/V that a preemption dropped), ``speculative`` (a decode that
  verifies draft tokens too) and ``padding`` for a finished member of a static batch that still runs its row.
  ``args``: the step number, ``num_tokens``, the positions computed (``start_position`` .. ``end_position`` - 1,
  from ``num_computed_tokens``), every token sampled in the step (``sampled_token_ids``: one for a decode, the
  accepted drafts + 1 for a speculative one) and their text, and for drafts ``num_draft_tokens``,
  ``draft_token_ids`` (where recorded) and ``num_accepted_tokens`` (``drafts_inferred`` where the reader inferred
  them, ``batchscope.steplog.spec_decode.infer_drafts``).
- **Counters** (``C``), at each step's start, holding through the step: ``kv.num_used_blocks``, the lengths of
  ``waiting`` and ``running``, and ``num_batched_tokens``.
- **Instants** (``i``, thread scope): admissions and preemptions at the step's start (where the scheduler decides),
  with the decision record (``batchscope.steplog.decisions``: recorded, or inferred from the log for older traces, and
then
  said so); finishes at the step's end, where the summary stamps a request's ``finish_time``; aborts
  (``finished[].reason`` ``abort``) there too, or at the step's start where the abort record says it came before
  the step was scheduled, with that record (state, tokens sampled, blocks freed) where the trace has one.
- **Metadata** (``M``): process and thread names and their order; the file's ``otherData`` and the rows' process
  label say which time axis was used.

Time axis. A trace's ``t_start`` / ``t_end`` are seconds from the start of the run (``docs/trace-format.md``);
they become microseconds, kept to the nanosecond. Those times are used when every step has a duration and no two
steps overlap; otherwise (every step at one instant, or a server's asynchronous scheduling with two steps in
flight, which would overlap a row's slices) the step clock is used: step ``n`` occupies ``[n, n + 1)`` ms, so an
idle stretch (``idle_steps_before``) shows as a gap, as it does on the metrics' step clock.

Pure: ``trace_events`` reads a ``TraceView`` (``batchscope.steplog.trace.read``) and returns plain data; nothing here
reparses a file or writes one.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, cast

from batchscope.steplog.decisions import decisions
from batchscope.steplog.finishes import aborted_before
from batchscope.steplog.reasons import VICTIM_RULES
from batchscope.steplog.spec_decode import num_drafts
from batchscope.steplog.view import TraceView

# cat of a slice -> what it means (written into the file's otherData, so a reader of the JSON finds it there too)
CATEGORIES = {
    "prefill": "a prompt chunk: num_tokens positions from start_position get their K/V",
    "decode": "the request's last sampled token goes through the model (one token)",
    "recompute": "a prefill that computes again K/V a preemption dropped",
    "speculative": "a decode that verifies speculative draft tokens in the same forward (args: drafts, accepted)",
    "padding": "a finished member of a static batch that still runs its row (wasted compute)",
}
EVENT_TRACKS = ("admissions", "preemptions", "finishes", "aborts")  # threads of the scheduler process, in order
ROWS_PID, SCHEDULER_PID = 1, 2
STEP_CLOCK_US = 1000  # one step of the step clock: 1 ms
ABORT_NOTE = "aborted from outside the scheduler: a client gone, a timeout or a stop string (the trace cannot tell)"


@dataclass(frozen=True)
class TimeAxis:
    """Where a step lies on the file's time line. ``kind``: ``recorded`` (the trace's own step times) or ``step_clock``
    (1 ms per step); ``note``: one line saying which, and why for the step clock."""

    kind: str
    note: str

    def span(self, st: Any) -> tuple[int, int]:
        """``(start, end)`` of step record ``st`` in nanoseconds (the file says ``ts`` in microseconds: ``_us``)."""
        if self.kind == "step_clock":
            return st["step"] * STEP_CLOCK_US * 1000, (st["step"] + 1) * STEP_CLOCK_US * 1000
        return _ns(st["t_start"]), _ns(st["t_end"])


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _us(ns: int) -> float | int:
    """Nanoseconds as the file's microseconds: an integer where exact, else a decimal with 3 places."""
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


def time_axis(view: TraceView) -> TimeAxis:
    """The trace's own step times if they can carry the slices (every step lasts > 0 ns, and starts no earlier
    than the previous one ended), else the step clock, saying why."""
    steps = [st for st in view.steps if not st.get("idle")]  # the file's own steps: idle ones stay gaps
    if not any(_ns(st["t_end"]) > _ns(st["t_start"]) for st in steps):
        why = "the trace records no step durations"
    elif any(_ns(st["t_end"]) <= _ns(st["t_start"]) for st in steps):
        why = "some steps have no duration (t_end = t_start)"
    elif any(_ns(b["t_start"]) < _ns(a["t_end"]) for a, b in itertools.pairwise(steps)):
        why = "its steps overlap in time (asynchronous scheduling: two steps in flight)"
    else:
        return TimeAxis("recorded", "recorded step times (the trace's t_start / t_end, from the start of the run)")
    return TimeAxis("step_clock", f"step clock, 1 ms per step: {why}")


def trace_events(view: TraceView, title: str = "") -> dict[str, Any]:
    """The Chrome trace-event JSON object of ``view``: ``{"traceEvents": [...], "displayTimeUnit": "ms",
    "otherData": {...}}``. ``title`` names the run in the process names (default: the scenario or file name)."""
    axis = time_axis(view)
    title = title or view.header.get("scenario") or view.filename or "trace"
    rows = sorted({c.slot for k in range(view.num_steps) for c in view.cells_at(k)})
    first_event_tid = view.header["config"]["max_num_seqs"] + 1  # tids unique across both processes
    event_tid = {name: first_event_tid + i for i, name in enumerate(EVENT_TRACKS)}

    events: list[dict[str, Any]] = _metadata(view, title, axis, rows, event_tid)
    for k, st in enumerate(view.steps):
        if st.get("idle"):  # an idle step the view put back on the clock: a gap on either time line
            continue
        start, end = axis.span(st)
        scheduled = {s["request_id"]: s for s in st["scheduled"]}
        sampled: dict[str, list] = {}
        for x in st["sampled"]:  # a speculative decode samples several tokens in one step
            sampled.setdefault(x["request_id"], []).append(x)
        for cell in view.cells_at(k):
            events.append(_slice(cell, st, scheduled.get(cell.request_id), sampled.get(cell.request_id), start, end))
        for name, value in (
            ("KV blocks", {"used": st["kv"]["num_used_blocks"]}),
            ("waiting", {"requests": len(st["waiting"])}),
            ("running", {"requests": len(st["running"])}),
            ("tokens", {"scheduled": st["num_batched_tokens"]}),
        ):
            events.append({"name": name, "ph": "C", "ts": _us(start), "pid": SCHEDULER_PID, "args": value})
        d = decisions(view, k) if st["admitted"] or st["preempted"] else {}
        how = "inferred from the log" if d.get("inferred") else "recorded"
        admissions = {a["request_id"]: a for a in d.get("admissions", [])}
        for rid in st["admitted"]:
            args = {"request_id": rid, "step": st["step"], **_admission_args(admissions.get(rid), how)}
            if rid in scheduled:
                args["slot"] = scheduled[rid]["slot"]
            events.append(_instant(f"admit {rid}", start, event_tid["admissions"], args))
        victims = {p["request_id"]: p for p in d.get("preemptions", [])}
        for rid in st["preempted"]:
            args = {"request_id": rid, "step": st["step"], **_preemption_args(victims.get(rid), how)}
            events.append(_instant(f"preempt {rid}", start, event_tid["preemptions"], args))
        for f in st["finished"]:
            rid, reason = f["request_id"], f["reason"]
            args = {"request_id": rid, "step": st["step"], "finish_reason": reason}
            if reason == "abort":  # with its record (state, tokens, blocks) where the trace has one
                record: dict[str, Any] = cast(dict, f).get("aborted") or {}  # absent in older traces
                at = start if aborted_before(f) else end
                args.update(record, note=ABORT_NOTE)
                events.append(_instant(f"abort {rid}", at, event_tid["aborts"], args))
            else:
                events.append(_instant(f"finish {rid} ({reason})", end, event_tid["finishes"], args))
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": _other_data(view, title, axis)}


def dumps(doc: dict[str, Any]) -> str:
    """The JSON text of ``trace_events``' object (strict JSON: no ``NaN``; one event per line, for ``grep``)."""

    def one(obj: Any) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    rest = one({k: v for k, v in doc.items() if k != "traceEvents"})
    return '{"traceEvents":[\n' + ",\n".join(map(one, doc["traceEvents"])) + "\n]," + rest[1:] + "\n"


def _slice(cell: Any, st: Any, sched: Any, sampled: Any, start: int, end: int) -> dict[str, Any]:
    """The complete event of one ``TraceView`` cell (a scheduled request, or a static batch's padding row)."""
    args: dict[str, Any] = {"step": st["step"], "slot": cell.slot}
    if sched is not None:
        c0, n = sched["num_computed_tokens"], sched["num_tokens"]
        args.update(num_tokens=n, start_position=c0, end_position=c0 + n)
        if num_drafts(sched):
            args["num_draft_tokens"] = num_drafts(sched)
            if sched.get("draft_token_ids"):
                args["draft_token_ids"] = sched["draft_token_ids"]
            args["num_accepted_tokens"] = sched.get("num_accepted_tokens")
            if sched.get("drafts_inferred"):
                args["drafts_inferred"] = True
    if sampled:
        args["sampled_token_ids"] = [x["token_id"] for x in sampled]
        if all("text" in x for x in sampled):
            args["sampled_text"] = "".join(x["text"] for x in sampled)
    return {
        "name": cell.request_id,
        "cat": cell.kind,
        "ph": "X",
        "ts": _us(start),
        "dur": _us(end - start),
        "pid": ROWS_PID,
        "tid": cell.slot + 1,  # tid 0 is the idle thread to Perfetto
        "args": args,
    }


def _instant(name: str, ts: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "i", "s": "t", "ts": _us(ts), "pid": SCHEDULER_PID, "tid": tid, "args": args}


def _admission_args(a: Any, how: str) -> dict[str, Any]:
    if a is None:
        return {}
    keys = ("resumed", "num_prefix_hit_tokens", "num_recompute_tokens", "num_new_tokens")
    return {**{key: a[key] for key in keys}, "decision": how}


def _preemption_args(p: Any, how: str) -> dict[str, Any]:
    """The decision record of one preemption, with its reason in words (absent when the trace has none: a server's
    preemption outside ``schedule()``)."""
    if p is None:
        return {}
    reason = f"victim: {VICTIM_RULES.get(p['rule'], p['rule'])}"
    if "requester" in p:
        asked = "itself" if p["requester"] == p["request_id"] else p["requester"]
        reason += f"; {asked} needed {p.get('need', '?')} KV block(s), {p.get('free', '?')} free"
    keys = ("rule", "requester", "need", "free", "num_dropped_tokens", "num_dropped_blocks")
    return {"reason": reason, **{key: p[key] for key in keys if key in p}, "decision": how}


def _metadata(view: TraceView, title: str, axis: TimeAxis, rows: list[int], event_tid: dict[str, int]) -> list:
    """Names and order of the processes and threads, and the time axis as the rows' label."""

    def meta(name: str, pid: int, args: dict[str, Any], tid: int | None = None) -> dict[str, Any]:
        return {"name": name, "ph": "M", "pid": pid, **({} if tid is None else {"tid": tid}), "args": args}

    out = [
        meta("process_name", ROWS_PID, {"name": f"batch rows: {title} ({view.policy})"}),
        meta("process_sort_index", ROWS_PID, {"sort_index": 0}),
        meta("process_labels", ROWS_PID, {"labels": f"time axis: {axis.note}"}),
        meta("process_name", SCHEDULER_PID, {"name": f"scheduler: {title} ({view.policy})"}),
        meta("process_sort_index", SCHEDULER_PID, {"sort_index": 1}),
    ]
    for slot in rows:
        out.append(meta("thread_name", ROWS_PID, {"name": f"slot {slot}"}, slot + 1))
        out.append(meta("thread_sort_index", ROWS_PID, {"sort_index": slot}, slot + 1))
    for i, (name, tid) in enumerate(event_tid.items()):
        out.append(meta("thread_name", SCHEDULER_PID, {"name": name}, tid))
        out.append(meta("thread_sort_index", SCHEDULER_PID, {"sort_index": i}, tid))
    return out


def _other_data(view: TraceView, title: str, axis: TimeAxis) -> dict[str, Any]:
    h = view.header
    return {
        "generator": "batchscope (python -m batchscope perfetto)",
        "title": title,
        "source": view.provenance(),
        "engine": view.engine,
        "policy": view.policy,
        "schema_version": h.get("schema_version", 1),
        "config": h["config"],
        "num_steps": view.num_steps,
        "num_requests": len(view.request_ids),
        "time_axis": axis.kind,
        "time_axis_note": axis.note,
        "trace_state": view.cut_short or ("partial (stopped early)" if view.partial else "complete"),
        "categories": CATEGORIES,
    }
