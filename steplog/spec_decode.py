"""Speculative decoding's figures, read from a trace's scheduled entries (``draft_token_ids``,
``num_accepted_tokens``; ``docs/trace-format.md``), with vLLM's definitions (``vllm/v1/spec_decode/metrics.py``,
the counters ``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens``):

- drafts: the speculative steps (a decode scheduled with at least one draft token);
- draft tokens: the draft tokens scheduled (placeholders included, as vLLM counts them; they are never accepted);
- accepted tokens: the drafts verification kept;
- acceptance rate = accepted tokens / draft tokens (0..1); mean acceptance length = 1 + accepted tokens / drafts,
  the tokens a speculative step yields on average (1: speculation gained nothing).

A trace without speculation has zero drafts and ``None`` rates (never a division by zero).
"""

from __future__ import annotations

from collections.abc import Iterable


def draft_counts(steps: Iterable[dict]) -> dict[str, dict[str, int]]:
    """request_id -> ``{"num_drafts", "num_draft_tokens", "num_accepted_tokens"}`` for requests that had drafts."""
    out: dict[str, dict[str, int]] = {}
    for st in steps:
        for s in st["scheduled"]:
            drafts = s.get("draft_token_ids")
            if not drafts:
                continue
            c = out.setdefault(s["request_id"], {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0})
            c["num_drafts"] += 1
            c["num_draft_tokens"] += len(drafts)
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
