"""What the quiz needs to know about one step, read from the log alone: the state when the step *starts*, why the
head of the queue waits, blocks released, prefix-cache hits. Pure functions of (trace, step); no Streamlit.

A step record describes the step's scheduling decision and its forward pass (``docs/trace-format.md``), so the state
at the start of step ``k`` is the end state of step ``k - 1``:

    step k-1 record          | start of step k            | step k record
    running, kv (forward)    | k-1's running minus its    | scheduled, admitted, preempted,
    finished (at its end)    | finished; k's queue before | finished, kv ...
                             | admissions                 |
"""

from __future__ import annotations

from batchscope.steplog.decisions import decisions
from batchscope.steplog.log_state import running_at_start as running_at_start  # the quiz panels read it here
from batchscope.steplog.reasons import checks
from batchscope.steplog.view import TraceView

# Where a step record says how many tokens each request admitted in it found in the prefix cache
# (``{request_id: hit tokens}``, docs/trace-format.md): ``num_prefix_hit_tokens`` in version 1 (Batchscope's
# engine), the top-level ``num_cached_tokens`` in version 2 (the vLLM tracer; version 1 keeps its ``num_cached_tokens``
# inside ``kv``). Traces without either have no prefix-cache facts.
PREFIX_HIT_FIELDS = ("num_prefix_hit_tokens", "num_cached_tokens")


def queue_at_start(view: TraceView, step: int) -> list[str]:
    """The waiting queue before ``step`` was scheduled, head first: this step's admissions (taken from the head in
    order), then those still waiting. Requests preempted during this step joined the queue later and are left out.
    """
    st = view.steps[step]
    preempted = set(st["preempted"])
    return [r for r in st["admitted"] + st["waiting"] if r not in preempted]


def outputs_before(view: TraceView, step: int) -> dict[str, int]:
    """request_id -> output tokens sampled before ``step`` (0 for requests that have none)."""
    out = dict.fromkeys(view.request_ids, 0)
    for st in view.steps[:step]:
        for s in st["sampled"]:
            out[s["request_id"]] = out.get(s["request_id"], 0) + 1
    return out


def prompt_lengths(view: TraceView) -> dict[str, int]:
    return {r["request_id"]: r["num_prompt_tokens"] for r in view.header["requests"]}


def known_tokens(view: TraceView, step: int, request_id: str) -> int:
    """Tokens ``request_id`` knows when ``step`` starts: its prompt plus every output token sampled so far."""
    return prompt_lengths(view)[request_id] + outputs_before(view, step)[request_id]


def kv_tokens_at_start(view: TraceView, step: int) -> dict[str, int]:
    """request_id -> tokens holding K/V when ``step`` starts, for the running requests: where their last scheduled
    work ended (a request the budget skipped in the previous step keeps what it had)."""
    held: dict[str, int] = {}
    for st in view.steps[:step]:
        for rid in st["preempted"]:
            held.pop(rid, None)
        for s in st["scheduled"]:
            held[s["request_id"]] = s["num_computed_tokens"] + s["num_tokens"]
    return {r: held.get(r, 0) for r in running_at_start(view, step)}


def start_state(view: TraceView, step: int) -> list[dict]:
    """One row per request as ``step`` starts: ``request_id``, ``status`` (running / waiting / finished / not
    arrived), ``prompt`` and ``kv`` (tokens), ``outputs`` (tokens sampled so far), ``max_tokens``."""
    running, queue = running_at_start(view, step), queue_at_start(view, step)
    finished = {f["request_id"] for st in view.steps[:step] for f in st["finished"]}
    outs, kv = outputs_before(view, step), kv_tokens_at_start(view, step)
    rows = []
    for r in view.header["requests"]:
        rid = r["request_id"]
        status = (
            "running"
            if rid in running
            else "waiting"
            if rid in queue
            else "finished"
            if rid in finished
            else "not arrived"
        )
        row = {"request_id": rid, "status": status, "prompt": r["num_prompt_tokens"], "kv": kv.get(rid, 0)}
        rows.append({**row, "outputs": outs[rid], "max_tokens": r["max_tokens"]})
    return rows


def released_blocks(view: TraceView, step: int) -> dict[str, list[int]]:
    """request_id -> blocks its finish releases at the end of ``step``: its blocks that no request still running
    after the step holds (a block shared through the prefix cache stays in use while someone references it)."""
    st = view.steps[step]
    tables = view.block_tables(step)
    done = [f["request_id"] for f in st["finished"]]
    kept = {b for rid, blocks in tables.items() if rid not in done for b in blocks}
    return {rid: [b for b in tables.get(rid, []) if b not in kept] for rid in done}


def used_blocks_after(view: TraceView, step: int) -> int:
    """KV blocks in use at the end of ``step``, once finished requests have released theirs."""
    released = {b for blocks in released_blocks(view, step).values() for b in blocks}
    return view.steps[step]["kv"]["num_used_blocks"] - len(released)


def prefix_hits(view: TraceView, step: int) -> dict[str, int] | None:
    """request_id -> known tokens (prompt, plus outputs for a resumed request) found in the prefix cache, for the
    requests admitted in ``step``; ``None`` if the trace does not record prefix-cache hits at all (then the quiz
    never asks about them)."""
    st: dict = dict(view.steps[step])  # the field's name is a variable: read it as a plain dict
    for name in PREFIX_HIT_FIELDS:
        if isinstance(st.get(name), dict):
            return {r: int(st[name].get(r, 0)) for r in st["admitted"]}
    return None


def has_prefix_hits(view: TraceView) -> bool:
    return any(prefix_hits(view, k) is not None for k in range(view.num_steps))


def was_preempted_before(view: TraceView, step: int, request_id: str) -> bool:
    return any(request_id in st["preempted"] for st in view.steps[:step])


def head_limit(view: TraceView, step: int) -> str | None:
    """Why nobody was admitted in ``step`` although the queue was not empty: the limit the scheduler recorded for
    the head (``batchscope.steplog.reasons``; inferred from the log for traces without records). ``None`` if someone was
    admitted or nobody was waiting."""
    if view.steps[step]["admitted"] or not queue_at_start(view, step):
        return None
    return decisions(view, step).get("head", {}).get("limit")


def free_blocks(view: TraceView, step: int) -> int:
    """Free blocks of the pool during ``step``'s forward pass (after its allocations)."""
    kv = view.steps[step]["kv"]
    return kv["num_blocks"] - kv["num_used_blocks"]


def limit_is_false(view: TraceView, step: int, limit: str) -> bool:
    """True when the log proves ``limit`` did not stop the head in ``step``: the scheduler checks its limits in order
    (``batchscope.steplog.reasons.checks``) and stops at the first that fails, so every check before the recorded one
    passed. A limit after it was never checked and might also have held the head back: it is never offered as wrong."""
    head = decisions(view, step).get("head")
    order = checks(view.header)
    if head is None or head["limit"] not in order or limit not in order:
        return False
    return order.index(limit) < order.index(head["limit"])
