"""Speculative decoding's sentences, from a step's scheduled entries (``draft_token_ids``, ``num_accepted_tokens``)
and its sampled tokens; the words are ``batchscope.steplog.reasons``'.

"B decodes with 3 draft tokens: 2 accepted, 1 rejected, so it gains 3 tokens this step." A placeholder-only entry
(vLLM's padding of a one-token admission) says it has no drafts to verify.
"""

from __future__ import annotations

from batchscope.explain.words import plural
from batchscope.steplog.reasons import PLACEHOLDER_DRAFTS
from batchscope.steplog.records import ScheduledRecord
from batchscope.steplog.spec_decode import num_drafts
from batchscope.steplog.view import TraceView

PLACEHOLDER = -1


def draft_phrase(view: TraceView, step: int, s: ScheduledRecord) -> str:
    """What ``s`` (an entry with ``draft_token_ids``) verified and what it yielded in ``step``."""
    rid, ids, n = s["request_id"], s.get("draft_token_ids") or [], num_drafts(s)
    label = view.label(rid)
    if ids and all(d == PLACEHOLDER for d in ids):
        return f"{label} computes 1 token padded with {plural(n, 'placeholder draft')} ({PLACEHOLDER_DRAFTS})"
    yielded = sum(1 for x in view.steps[step]["sampled"] if x["request_id"] == rid)
    accepted = s.get("num_accepted_tokens")
    if accepted is None:  # a trace that recorded the drafts but not the verification
        return f"{label} decodes with {plural(n, 'draft token')} and gains {plural(yielded, 'token')}"
    if s.get("drafts_inferred"):  # a trace without draft ids: the reader inferred them (batchscope.steplog.spec_decode)
        what = f"{plural(n, 'draft token')} (inferred: the trace does not record drafts)"
        if any(f["request_id"] == rid for f in view.steps[step]["finished"]):  # it may have stopped among them
            return f"{label} decodes with {what} and gains {plural(yielded, 'token')} (the request ends there)"
        label_what = f"{label} decodes with {what}"
    else:
        label_what = f"{label} decodes with {plural(n, 'draft token')}"
    rejected = n - accepted
    verdict = "all accepted" if rejected == 0 else f"{accepted} accepted, {rejected} rejected"
    gains = plural(yielded, "token") + (" (the request ends there)" if yielded < accepted + 1 else "")
    return f"{label_what}: {verdict}, so it gains {gains}"
