"""Speculative decoding's figures, read from a trace's scheduled entries (``draft_token_ids``, ``num_accepted_tokens``;
``docs/trace-format.md``), with vLLM's definitions (``vllm/v1/spec_decode/metrics.py``, the counters
``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens``):

- drafts: the speculative steps (a decode scheduled with at least one draft token);
- draft tokens: the draft tokens scheduled (placeholders included, as vLLM counts them; they are never accepted);
- accepted tokens: the drafts verification kept;
- acceptance rate = accepted tokens / draft tokens (0..1); mean acceptance length = 1 + accepted tokens / drafts,
  the tokens a speculative step yields on average (1: speculation gained nothing).

A trace without speculation has zero drafts and ``None`` rates (never a division by zero).

A trace that schedules drafts without recording them (a vLLM server traced before drafts were recorded, or by
another tracer) is read by ``infer_drafts``: a decode whose scheduled range runs past the request's known tokens
(prompt + tokens sampled before the step) by d tokens verified d drafts, and yielding j tokens it kept j - 1 of
them. Such entries carry ``num_draft_tokens`` and ``drafts_inferred`` instead of ids; ``num_drafts`` reads both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def num_drafts(s: Mapping[str, Any]) -> int:
    """Draft tokens among a scheduled entry's ``num_tokens``: its recorded ``draft_token_ids``, or the count
    ``infer_drafts`` found for a trace that does not record them; 0 for an entry without drafts."""
    ids = s.get("draft_token_ids")
    return len(ids) if ids else int(s.get("num_draft_tokens") or 0)


def infer_drafts(steps: list[dict], requests: Iterable[Mapping[str, Any]]) -> int:
    """For a trace whose entries record no ``draft_token_ids`` although it scheduled drafts: mark each decode whose
    range ``[num_computed_tokens, num_computed_tokens + num_tokens)`` runs past the request's known tokens (its
    prompt + the tokens sampled for it in earlier steps) by d > 0 tokens with ``num_draft_tokens`` d,
    ``num_accepted_tokens`` j - 1 for the j tokens it sampled in the step (vLLM yields the accepted drafts plus one;
    a request that stops among them yields fewer, so there it is a lower bound), ``kind`` decode (a tracer that
    did not know the drafts may have called it a prefill) and ``drafts_inferred``. ``requests``: every request of
    the trace (``num_prompt_tokens``). A trace that records any draft ids is left alone. Returns the entries
    marked; the steps are changed in place."""
    if any(s.get("draft_token_ids") for st in steps for s in st["scheduled"]):
        return 0  # a trace that records drafts records them all; without drafts no range runs past its tokens
    known = {r["request_id"]: int(r["num_prompt_tokens"]) for r in requests}
    marked = 0
    for st in steps:
        yielded: dict[str, int] = {}
        for x in st["sampled"]:
            yielded[x["request_id"]] = yielded.get(x["request_id"], 0) + 1
        for s in st["scheduled"]:
            rid, before = s["request_id"], s["num_computed_tokens"]
            have = known.get(rid)
            if have is None or before != have - 1 or s["num_tokens"] < 2 or not yielded.get(rid):
                continue  # not a decode that runs past its known tokens
            s.update(kind="decode", num_draft_tokens=s["num_tokens"] - 1, drafts_inferred=True)
            s["num_accepted_tokens"] = yielded[rid] - 1
            marked += 1
        for rid, n in yielded.items():
            if rid in known:
                known[rid] += n
    return marked


def draft_counts(steps: Iterable[dict]) -> dict[str, dict[str, int]]:
    """request_id -> ``{"num_drafts", "num_draft_tokens", "num_accepted_tokens"}`` for requests that had drafts."""
    out: dict[str, dict[str, int]] = {}
    for st in steps:
        for s in st["scheduled"]:
            drafts = num_drafts(s)
            if not drafts:
                continue
            c = out.setdefault(s["request_id"], {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0})
            c["num_drafts"] += 1
            c["num_draft_tokens"] += drafts
            c["num_accepted_tokens"] += int(s.get("num_accepted_tokens") or 0)
    return out


def rates(num_drafts: int, num_draft_tokens: int, num_accepted_tokens: int) -> dict[str, float | None]:
    """``acceptance_rate`` and ``mean_acceptance_length`` (see the module docstring); ``None`` without drafts."""
    return {
        "acceptance_rate": num_accepted_tokens / num_draft_tokens if num_draft_tokens else None,
        "mean_acceptance_length": 1 + num_accepted_tokens / num_drafts if num_drafts else None,
    }


def request_figures(counts: dict[str, int] | None) -> dict[str, int | float | None]:
    """One request's counters (``draft_counts``' entry; None: it had no drafts) and their ``rates``."""
    c = counts or {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0}
    return {**c, **rates(c["num_drafts"], c["num_draft_tokens"], c["num_accepted_tokens"])}


def spec_decode_stats(steps: list[dict]) -> dict[str, int | float | None]:
    """The run's totals: ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens`` and their ``rates``."""
    per = draft_counts(steps).values()
    totals = {name: sum(c[name] for c in per) for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}
    return {**totals, **rates(totals["num_drafts"], totals["num_draft_tokens"], totals["num_accepted_tokens"])}


def step_starts(token_steps: list[int]) -> list[int]:
    """Indices of the first token of each step in ``token_steps`` (a request's tokens' steps, in order): ITL is one
    gap per step that produced tokens, as vLLM measures it, not zero-length gaps inside a speculative step."""
    return [i for i, k in enumerate(token_steps) if i == 0 or k != token_steps[i - 1]]
