"""Speculative decoding's sentences, from a step's scheduled entries (``draft_token_ids``, ``num_accepted_tokens``)
and its sampled tokens; the words are ``steplog.reasons``'.

"B decodes with 3 draft tokens: 2 accepted, 1 rejected, so it gains 3 tokens this step." A placeholder-only entry
(vLLM's padding of a one-token admission) says it has no drafts to verify.
"""

from __future__ import annotations

from steplog.reasons import PLACEHOLDER_DRAFTS
from steplog.records import ScheduledRecord
from steplog.view import TraceView

PLACEHOLDER = -1


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def draft_phrase(view: TraceView, step: int, s: ScheduledRecord) -> str:
    """What ``s`` (an entry with ``draft_token_ids``) verified and what it yielded in ``step``."""
    rid, drafts = s["request_id"], s.get("draft_token_ids") or []
    label = view.label(rid)
    if all(d == PLACEHOLDER for d in drafts):
        return (
            f"{label} computes 1 token padded with {_plural(len(drafts), 'placeholder draft')} ({PLACEHOLDER_DRAFTS})"
        )
    yielded = sum(1 for x in view.steps[step]["sampled"] if x["request_id"] == rid)
    accepted = s.get("num_accepted_tokens")
    if accepted is None:  # a trace that recorded the drafts but not the verification
        return f"{label} decodes with {_plural(len(drafts), 'draft token')} and gains {_plural(yielded, 'token')}"
    rejected = len(drafts) - accepted
    verdict = "all accepted" if rejected == 0 else f"{accepted} accepted, {rejected} rejected"
    gains = _plural(yielded, "token") + (" (the request ends there)" if yielded < accepted + 1 else "")
    return f"{label} decodes with {_plural(len(drafts), 'draft token')}: {verdict}, so it gains {gains}"
