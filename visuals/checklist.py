"""Why the head of the waiting queue did or did not get in: each admission limit with its numbers, from the log.

For the request at the head of the waiting queue after step ``k`` was scheduled, ``head_checklist`` lists every
limit the scheduler checks before admitting it, in the order the scheduler checks them, with the numbers of that
step, and marks the first one that stops it (the *binding* limit):

1. a static batch takes new requests only when the whole batch has finished (static batching only);
2. no admissions in a step that preempted (memory is known to be tight);
3. a free batch row: running requests < ``max_num_seqs``;
4. token budget left after the running requests (``max_num_batched_tokens`` minus the step's scheduled tokens);
   with chunked prefill off the whole prompt must fit in it;
5. free KV blocks for what it would compute now (its first chunk), or for its whole known sequence when the
   full-prompt rule is on (vLLM's ``scheduler_reserve_full_isl``);
6. first come, first served: everyone behind the head waits while the head waits.

Everything is read from the trace (``steplog.records``): the step's queues, scheduled tokens and KV block counts,
and the header's config. Units: tokens, blocks, rows.
"""

from __future__ import annotations

from steplog.view import TraceView


def _known_tokens(view: TraceView, step: int, rid: str) -> int:
    """Prompt tokens plus output tokens sampled before ``step``: what the request must (re)compute."""
    return view.request_info[rid]["num_prompt_tokens"] + view.num_sampled_before(rid, step)


def head_checklist(view: TraceView, step: int) -> list[dict]:
    """The limits for the head of the waiting queue at ``step``: ``[{"limit", "numbers", "ok", "binds", "why"}]``.

    Empty when nobody waits. Exactly one item has ``binds`` True: the first limit, in the scheduler's order, that
    keeps the head out (``why`` says it in words, as the narration does).
    """
    st = view.steps[step]
    if not st["waiting"]:
        return []
    cfg = view.header["config"]
    head = st["waiting"][0]
    left = cfg["max_num_batched_tokens"] - st["num_batched_tokens"]
    tokens = _known_tokens(view, step, head)
    chunked = cfg["enable_chunked_prefill"]
    full = bool(cfg.get("reserve_full_prompt", False))
    now = tokens if full or not chunked or left <= 0 else min(tokens, left)
    need = -(-now // cfg["block_size"])
    free = st["kv"]["num_blocks"] - st["kv"]["num_used_blocks"]
    rows = len(st["running"])
    items = []
    if view.policy == "static":
        # a waiting request under static batching always waits for the whole batch to end
        items.append(_item("static batch", f"{rows} members still running", False, _static_why(view, step)))
    items += [
        _item(
            "no preemption this step",
            f"{len(st['preempted'])} preempted",
            not st["preempted"],
            "no admissions in a step that preempted",
        ),
        _item(
            "max_num_seqs",
            f"{rows} / {cfg['max_num_seqs']} rows used",
            rows < cfg["max_num_seqs"],
            f"all {cfg['max_num_seqs']} slots are busy",
        ),
        _item(
            "token budget",
            f"{max(left, 0)} of {cfg['max_num_batched_tokens']} tokens left after the running",
            left > 0 and (chunked or tokens <= left),
            _budget_why(left, tokens, chunked),
        ),
        _item(
            "KV blocks" + (" (whole prompt must fit)" if full else ""),
            f"needs {need} for {now} tokens, {free} free",
            need <= free,
            f"{head} needs {need} KV blocks for {_what(now, tokens)} and {free} are free",
        ),
        _item(
            "first come, first served",
            f"{head} is first of {len(st['waiting'])} waiting",
            True,
            "nobody behind the head may overtake it",
        ),
    ]
    binding = next((i for i in items if not i["ok"]), items[-1])
    binding["binds"] = True
    return items


def _item(limit: str, numbers: str, ok: bool, why: str) -> dict:
    return {"limit": limit, "numbers": numbers, "ok": ok, "binds": False, "why": why}


def _what(now: int, tokens: int) -> str:
    return f"a {now}-token chunk" if now < tokens else f"its {tokens} tokens"


def _budget_why(left: int, tokens: int, chunked: bool) -> str:
    if left <= 0:
        return "the token budget is used up"
    return f"its {tokens} tokens do not fit the {left} budget tokens left (chunked prefill is off)"


def _static_why(view: TraceView, step: int) -> str:
    st, cfg = view.steps[step], view.header["config"]
    kv = st["kv"]
    if st["admitted"] and len(st["running"]) < cfg["max_num_seqs"] and "num_reserved_blocks" in kv:
        return (
            f"the new static batch took {len(st['running'])} of {cfg['max_num_seqs']} slots: each member "
            f"reserves its worst-case KV blocks, {kv['num_reserved_blocks']} of {kv['num_blocks']} reserved"
        )
    return "a static batch takes new requests only when the whole batch has finished"


def checklist_text(view: TraceView, step: int) -> str:
    """The checklist in one line for the player: ``Why D waits: max_num_seqs 3 / 3 rows used ✗ binds · ...``."""
    items = head_checklist(view, step)
    if not items:
        return ""
    head = view.steps[step]["waiting"][0]
    marks = [f"{i['limit']}: {i['numbers']} {'✗ binds' if i['binds'] else '✓' if i['ok'] else '✗'}" for i in items]
    return f"Why {view.label(head)} (head of the queue) waits: " + " · ".join(marks)


def binding_reason(view: TraceView, step: int) -> str:
    """Why the head waits at ``step``, in words (the narration's "Waiting: ..." clause)."""
    items = head_checklist(view, step)
    st = view.steps[step]
    why = next(i["why"] for i in items if i["binds"])
    if view.policy == "static":
        return why
    behind = "; the others wait behind it, first come first served" if len(st["waiting"]) > 1 else ""
    return why + behind
