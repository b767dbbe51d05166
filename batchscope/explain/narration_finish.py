"""The sentences of the requests that end around a step: finishes and aborts, with the blocks each gives back.

A block that several ending requests share is released once, by the last of them
(``batchscope.explain.stepinfo.releases``), so the numbers add up to what goes back to the pool: "B hit max_tokens and
finished, releasing the 74 token slots it alone held. A hit max_tokens and finished, releasing 76 token slots and the 31
it shared with B."

``batchscope.explain.narration`` asks ``ending_sentences(view, step)`` for them, in ``finished`` order.
"""

from __future__ import annotations

from batchscope.explain.words import join, plural
from batchscope.facts import facts
from batchscope.facts.blocks import Release, releases
from batchscope.steplog.decisions import comeback
from batchscope.steplog.finishes import aborted_before
from batchscope.steplog.reasons import ABORT_STATES, abort_cause, pool_unit
from batchscope.steplog.records import FinishedRecord
from batchscope.steplog.view import TraceView

REASONS = {
    "stop": "emitted EOS",
    "length": "hit max_tokens",
    "abort": "was aborted",  # a trace of one without its record; ``_abort`` says who, as far as the trace knows
    "error": "failed with an error",
    "repetition": "was stopped for repetition",
}


def ending_sentences(view: TraceView, step: int) -> list[str]:
    """One sentence per request that finished in ``step`` or was aborted before or during it."""
    shares = releases(view, step)
    unit = pool_unit(view.header)
    out = []
    for f in view.steps[step]["finished"]:
        r = shares.get(f["request_id"], Release(0, 0, (), 0, (), 0))
        if f["reason"] == "abort" and "aborted" in f:
            out.append(_abort(view, step, f, r))
            continue
        head = f"{f['request_id']} {REASONS.get(f['reason'], f['reason'])} and finished"
        if r.alone + r.shared == 0 and r.later:
            gave = f"; it shares its {plural(r.later, unit)} with {join(r.later_with)}, which releases them"
        else:
            gave = f", releasing {given_back(r, unit)}"
        out.append(f"{head}{gave}{_kept(r, ' more')}.")
    return out


def given_back(r: Release, unit: str) -> str:
    """``76 token slots and the 31 it shared with B``: what ``r``'s request releases, each block once; ``the 74
    token slots it alone held`` when a later ender releases the ones it shares."""
    alone = plural(r.alone, unit)
    if r.later:
        alone = f"the {alone} it alone held"
    if not r.shared:
        return alone
    shared = f"the {plural(r.shared, unit) if not r.alone else r.shared} it shared with {join(r.shared_with)}"
    return f"{alone} and {shared}" if r.alone else shared


def _kept(r: Release, more: str) -> str:
    return f" ({r.kept}{more} stay in use: other requests share them)" if r.kept else ""


def _abort(view: TraceView, step: int, f: FinishedRecord, r: Release) -> str:
    """One abort: who did it as far as the trace knows (``batchscope.steplog.reasons.abort_cause``), when, the request's
    state, its tokens and the blocks it gave back (``batchscope.steplog.records.AbortRecord``; a block it shares with
    another ending request is counted once, ``given_back``)."""
    rid, record = f["request_id"], f["aborted"]
    if record.get("to_finish"):
        return _marked_to_finish(view, step, f, r)
    cause = abort_cause(view.header, view.request_info.get(rid, {}), view.step_number(step))
    when = "before this step was scheduled" if aborted_before(f) else "while this step ran (its work is discarded)"
    n = record["num_freed_blocks"]
    unit = pool_unit(view.header)
    if n == 0:
        gave = f"it held no {unit}s"
    elif r.alone + r.shared == 0 and r.later:
        gave = f"it shares its {plural(r.later, unit)} with {join(r.later_with)}, which gives them back"
    elif r.shared or r.later:
        gave = f"{given_back(r, unit)} went back to the pool"
    else:
        gave = f"{f'{n - r.kept} of ' if r.kept else ''}its {plural(n, unit)} went back to the pool"
    gave += _kept(r, "")
    k, state = record["num_output_tokens"], record["state"]
    tokens = f", after {plural(k, 'output token')}" if k else ", before its first token" if state != "waiting" else ""
    return f"{rid} {cause}, {when}, {ABORT_STATES[state]}{tokens}; {gave}."


def _marked_to_finish(view: TraceView, step: int, f: FinishedRecord, r: Release) -> str:
    """An SGLang abort that ends after the step (``AbortRecord.to_finish``): a running request SGLang only marked to
    finish when the abort came, or a prompt its request handling refused (``error``), whose one-token stand-in ran
    this step. It keeps the token it sampled and gives back its slots as a finished request does."""
    rid, record = f["request_id"], f["aborted"]
    k, unit = record["num_output_tokens"], pool_unit(view.header)
    gave = f"releasing {given_back(r, unit)}{_kept(r, ' more')}"
    if "error" in record:
        return f"{rid} ends with SGLang's abort of its refused prompt after its one-token prefill; {gave}."
    info: dict = dict(view.request_info.get(rid, {}))
    asked = info.get("abort_step")
    cause = abort_cause(view.header, info, asked if asked is not None else view.step_number(step))
    cache_on = view.header["config"].get("enable_prefix_caching", True)
    cached = " (its K/V enters the radix cache, as a finished request's)" if cache_on else ""
    return (
        f"{rid} {cause}, before this step was scheduled, while running; SGLang only marks a running request to "
        f"finish, so {rid} ran this step with its batch and ended after it with {plural(k, 'output token')}, "
        f"{gave}{cached}."
    )


def handed_on_sentence(view: TraceView, step: int, victim: str) -> str:
    """ " A took 1 of them at once (block 26)." for the blocks (token slots) ``victim`` gave back in ``step`` that
    another request holds in the same step (``batchscope.facts.PoolFacts.handed_on``); "" if none was taken. The
    block map marks those blocks ⟲ under their new owner."""
    unit = pool_unit(view.header)
    return "".join(
        f" {taker} took {len(blocks)} of them at once ({unit if len(blocks) == 1 else unit + 's'} "
        f"{join(tuple(str(b) for b in blocks))})."
        for taker, blocks in facts(view).pool(step).handed_on.get(victim, {}).items()
    )


def comeback_clause(view: TraceView, step: int, request_id: str, dropped: int, cache: str) -> str:
    """What an eviction's comeback costs, as a clause: "when it is admitted again at step 66, 43 of those tokens are
    found in the radix cache and 49 are recomputed" (or "all 92 are recomputed"); "" if it never comes back or held
    nothing. ``cache``: the engine's name for its prefix cache. One wording for every engine's eviction."""
    back = comeback(view, step, request_id)
    if back is None or not dropped:
        return ""
    k, a = back
    hit = min(a["num_prefix_hit_tokens"], dropped)
    at = f"when it is admitted again at step {view.step_number(k)}"
    if hit:
        return f"{at}, {hit} of those tokens are found in the {cache} and {a['num_recompute_tokens']} are recomputed"
    return f"{at}, all {dropped} are recomputed"
