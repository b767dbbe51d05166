"""What the JSON Schema cannot say about a trace: the records agree with each other and with time.

A trace that passes these checks can be measured and drawn: every number is finite, time never runs backwards,
every request named anywhere is a declared request (in the header, or, in version 2, in a step's ``arrived``),
every slot and block exists, and the summary's tokens are the tokens the steps sampled. Each check names the line
(1-based, as in the file) and the field.

    header (line 1) --ids--> steps (lines 2..n-1) --tokens, times--> summary (line n)

Batchscope's engine (version 1) writes exact ``perf_counter`` times, so its steps never overlap. A vLLM server's
trace (version 2) may overlap steps (``async_scheduling``), stamps arrivals on another clock, and can end with
requests still running or with its step records cut at a size cap (``truncated_at_step``); those rules are relaxed
there, the others hold for both.
"""

from __future__ import annotations

import itertools

from batchscope.steplog.strict_json import non_finite_path

# A trace's request ids are opaque, as long as servers make them: vLLM's are "chatcmpl-" + the X-Request-Id header +
# "-" + 8 characters ("{i}_" before that for an n > 1 child), xLLM caps them at 256 bytes. Workload files (our own
# engine's input) keep to WORKLOAD_ID_CHARS.
MAX_ID_CHARS = 256
WORKLOAD_ID_CHARS = 64
# The limits of Batchscope's engine, which writes version 1: defined here, where its traces are checked, and imported
# by the engine as ``batchscope.engine.config.LIMITS`` (steplog imports nothing of ours). The schema allows larger
# values for servers' traces (version 2).
V1_LIMITS = {
    "max_num_seqs": (1, 256),
    "max_num_batched_tokens": (1, 65536),
    "block_size": (1, 1024),
    "num_kv_blocks": (1, 100_000),
}


class CheckError(ValueError):
    """One inconsistency; the message names the line and the field."""


def request_id_problem(value: object, limit: int = MAX_ID_CHARS) -> str | None:
    """Why ``value`` is not a valid request id (``None`` if it is): a string of 1-``limit`` printable characters
    (``MAX_ID_CHARS`` in a trace, ``WORKLOAD_ID_CHARS`` in a workload)."""
    if not isinstance(value, str):
        return f"must be a string of 1-{limit} printable characters, got {type(value).__name__}"
    if not 1 <= len(value) <= limit:
        return f"must be 1-{limit} printable characters, got {len(value)} characters"
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        return f"must be printable characters only; {value[:20]!r} holds {bad!r}"
    return None


def check_records(records: list[dict], finite: bool = False) -> None:
    """Raise ``CheckError`` on the first inconsistency (records already passed the schema). ``finite``: every number
    is known to be finite (a decoder refused the others), so the records are not walked for them."""
    for i, rec in enumerate(() if finite else records, start=1):
        path = non_finite_path(rec)
        if path:
            raise CheckError(f"line {i}, field {path}: numbers must be finite (NaN and Infinity are not JSON)")
    header, steps, summary = records[0], records[1:-1], records[-1]
    if not steps:
        raise CheckError(f"line {len(records)}: the trace has no step records (at least one step is needed to draw it)")
    strict = header.get("schema_version", 1) == 1
    if strict:
        _check_limits(header["config"])
    ids = _declare([(1, f"requests/{k}", r) for k, r in enumerate(header["requests"])], set())
    _check_steps(header, steps, ids, strict)
    _check_summary(summary, steps, ids, len(records), strict)


def _check_limits(config: dict) -> None:
    for name, (lo, hi) in V1_LIMITS.items():
        if not lo <= config[name] <= hi:
            raise CheckError(f"line 1, field config/{name}: {config[name]} is out of range [{lo}, {hi}]")


def _declare(requests: list[tuple[int, str, dict]], ids: set[str]) -> set[str]:
    """Add the declared requests' ids to ``ids`` (each valid and new); ``requests``: (line, field, request)."""
    for line, field, r in requests:
        rid = r["request_id"]
        problem = request_id_problem(rid)
        if problem:
            raise CheckError(f"line {line}, field {field}/request_id: {problem}")
        if rid in ids:
            raise CheckError(f"line {line}, field {field}/request_id: {rid!r} appears twice; ids must be unique")
        ids.add(rid)
    return ids


def _step_ids(st: dict) -> list[tuple[str, str]]:
    """(field, request_id) for every request a step names."""
    kv = st["kv"]
    out = [("scheduled", s["request_id"]) for s in st["scheduled"]]
    out += [("sampled", s["request_id"]) for s in st["sampled"]]
    out += [("finished", f["request_id"]) for f in st["finished"]]
    out += [("padding_slots", p["request_id"]) for p in st["padding_slots"]]
    out += [(name, rid) for name in ("admitted", "preempted", "waiting", "running") for rid in st[name]]
    out += [("num_cached_tokens", rid) for rid in st.get("num_cached_tokens") or {}]
    out += [("kv/freed", rid) for rid in kv.get("freed", [])]
    out += [
        (f"kv/{name}", rid) for name in ("block_tables", "num_cached_tokens", "allocated") for rid in kv.get(name, {})
    ]
    return out


def _check_steps(header: dict, steps: list[dict], ids: set[str], strict: bool) -> None:
    cfg = header["config"]
    overlap = not strict and bool(cfg.get("async_scheduling"))  # a server may schedule step k+1 before k ends
    prev_end, prev_step = None, -1
    for line, st in enumerate(steps, start=2):
        where = f"line {line} (step {st['step']})"
        expected = prev_step + 1 + st.get("idle_steps_before", 0)
        if st["step"] != expected:
            raise CheckError(f"{where}, field step: expected {expected} (the previous step + 1 + idle_steps_before)")
        if st["t_end"] < st["t_start"]:
            raise CheckError(f"{where}, field t_end: {st['t_end']} is before t_start {st['t_start']}")
        if prev_end is not None and st["t_start"] < prev_end and not overlap:
            raise CheckError(f"{where}, field t_start: {st['t_start']} is before the previous step's t_end {prev_end}")
        prev_end, prev_step = st["t_end"], st["step"]
        _declare([(line, f"arrived/{k}", r) for k, r in enumerate(st.get("arrived", []))], ids)
        for field, rid in _step_ids(st):
            if rid not in ids:
                raise CheckError(f"{where}, field {field}: request {rid!r} was never declared (header or arrived)")
        slots = [s["slot"] for s in st["scheduled"]] + [p["slot"] for p in st["padding_slots"]]
        if any(s >= cfg["max_num_seqs"] for s in slots):
            raise CheckError(f"{where}, field scheduled/slot: slots must be in [0, {cfg['max_num_seqs'] - 1}]")
        if st["num_batched_tokens"] > cfg["max_num_batched_tokens"]:
            raise CheckError(
                f"{where}, field num_batched_tokens: {st['num_batched_tokens']} exceeds max_num_batched_tokens "
                f"{cfg['max_num_batched_tokens']}"
            )
        _check_blocks(st["kv"], where)
        if "decisions" in st:
            _check_decisions(st, where, strict)


def _check_decisions(st: dict, where: str, strict: bool) -> None:
    """The decision records explain this very step: its admissions in order, its preemptions in order, and a head
    record naming the first request still waiting. Batchscope's own engine (``strict``) records every preemption and
    a head whenever someone waits; a server's tracer leaves out what its engine's state cannot tell (a preemption
    outside the scheduler's step, a paused scheduler's head)."""
    d = st["decisions"]
    admitted = [r["request_id"] for r in d.get("admissions", [])]
    if admitted != list(st["admitted"]):
        raise CheckError(
            f"{where}, field decisions/admissions: names {admitted}, but the step admitted {st['admitted']}"
        )
    preempted = [r["request_id"] for r in d.get("preemptions", [])]
    left = iter(st["preempted"])
    if (preempted != list(st["preempted"])) if strict else not all(p in left for p in preempted):
        raise CheckError(
            f"{where}, field decisions/preemptions: names {preempted}, but the step preempted {st['preempted']}"
        )
    head = d.get("head")
    first = st["waiting"][:1]
    if (head is not None and [head["request_id"]] != first) or (strict and head is None and first):
        got = "none" if head is None else repr(head["request_id"])
        raise CheckError(f"{where}, field decisions/head: {got}, but the first still waiting is {first}")


def _check_blocks(kv: dict, where: str) -> None:
    n = kv["num_blocks"]
    if kv["num_used_blocks"] > n:
        raise CheckError(f"{where}, field kv/num_used_blocks: {kv['num_used_blocks']} exceeds num_blocks {n}")
    for name in ("block_tables", "allocated"):
        for rid, blocks in kv.get(name, {}).items():
            if any(b >= n for b in blocks):
                raise CheckError(f"{where}, field kv/{name}/{rid}: block ids must be in [0, {n - 1}]")


def _sampled_and_finished(steps: list[dict]) -> tuple[dict[str, list[int]], dict[str, str]]:
    sampled: dict[str, list[int]] = {}
    finished: dict[str, str] = {}
    for line, st in enumerate(steps, start=2):
        for s in st["sampled"]:
            sampled.setdefault(s["request_id"], []).append(s["token_id"])
        for f in st["finished"]:
            if f["request_id"] in finished:
                raise CheckError(f"line {line}: request {f['request_id']!r} finishes twice")
            finished[f["request_id"]] = f["reason"]
    return sampled, finished


def _check_summary(summary: dict, steps: list[dict], ids: set[str], line: int, strict: bool) -> None:
    sampled, finished = _sampled_and_finished(steps)
    cut = "truncated_at_step" in summary  # the steps stop early: the summary may know more than they do
    seen: set[str] = set()
    last_end = steps[-1]["t_end"]
    for k, r in enumerate(summary["requests"]):
        rid, where = r["request_id"], f"line {line}, field requests/{k}"
        if rid not in ids or rid in seen:
            raise CheckError(f"{where}/request_id: {rid!r} is not a declared request, or appears twice")
        seen.add(rid)
        tokens, outputs = sampled.get(rid, []), r["output_token_ids"]
        if (outputs[: len(tokens)] if cut else outputs) != tokens:
            raise CheckError(f"{where}/output_token_ids: not the tokens the steps sampled for {rid!r}")
        if r["finish_reason"] != finished.get(rid) and not (cut and rid not in finished):
            raise CheckError(f"{where}/finish_reason: {r['finish_reason']!r}, but the steps say {finished.get(rid)!r}")
        if strict and r["finish_reason"] is None and not (summary.get("partial") or summary.get("cut_short")):
            raise CheckError(f"{where}/finish_reason: {rid!r} never finished, and the summary is not marked partial")
        _check_times(r, where, None if cut else last_end, strict)
    if seen != ids:
        raise CheckError(f"line {line}, field requests: missing {sorted(ids - seen)[:5]}")


def _check_times(r: dict, where: str, last_end: float | None, strict: bool) -> None:
    """arrival <= first scheduled <= first token <= finish <= end of the last step (each where known; a server's
    arrival is stamped on another clock than its steps, so it is left out there)."""
    if (r["first_token_time"] is None) != (not r["output_token_ids"]):
        raise CheckError(f"{where}/first_token_time: must be set exactly when the request has output tokens")
    if (r["finish_time"] is None) != (r["finish_reason"] is None):
        raise CheckError(f"{where}/finish_time: must be set exactly when the request finished")
    names = ("arrival_time",) * strict + ("first_scheduled_time", "first_token_time", "finish_time")
    chain = [(name, r[name]) for name in names if r.get(name) is not None]
    for (a, ta), (b, tb) in itertools.pairwise(chain):
        if tb < ta:
            raise CheckError(f"{where}/{b}: {tb} is before {a} {ta}")
    if last_end is not None and len(chain) > 1 and chain[-1][1] > last_end:
        raise CheckError(f"{where}/{chain[-1][0]}: {chain[-1][1]} is after the last step's t_end {last_end}")
