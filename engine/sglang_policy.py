"""The waiting-queue orders of the SGLang-style scheduler: ``fcfs`` and ``lpm`` (longest prefix match).

SGLang 0.5.23, ``SchedulePolicy.calc_priority`` (sglang/srt/managers/schedule_policy.py). The queue is sorted in
place before each prefill, so an order persists between steps; retracted requests join at the back.

- ``fcfs``: arrival order, untouched.
- ``lpm``: by the longest cached prefix first (capped at the request's known tokens minus one), a stable sort. Two
  waiting requests that share a long prefix nobody has cached yet would both compute it: a request whose cached
  prefix is at most 32 tokens (``IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD``) and that shares at least 32 tokens
  (``..._DEPRIORITIZE_THRESHOLD``) with a waiting request considered before it goes to the back, so that it can
  hit the first one's prefix in a later step (``_compute_prefix_matches``). Over 128 waiting requests
  (``WAITING_QUEUE_PREFIX_MATCH_MAX``) LPM falls back to FCFS, and without a prefix cache LPM is FCFS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.radix_cache import RadixCache

if TYPE_CHECKING:
    from engine.sglang_state import Memory, SglRequest

POLICIES = ("fcfs", "lpm")
CHECK_THRESHOLD = 32  # tokens
DEPRIORITIZE_THRESHOLD = 32  # tokens
PREFIX_MATCH_MAX = 128  # waiting requests


def sort_waiting(waiting: list[SglRequest], policy: str, memory: Memory) -> None:
    """Reorder ``waiting`` in place for ``policy`` (see the module docstring)."""
    if policy == "fcfs" or not memory.cache.enabled or len(waiting) > PREFIX_MATCH_MAX:
        return
    seen = RadixCache()  # the prefixes of the waiting requests considered so far
    late: set[str] = set()
    matched: dict[str, int] = {}
    for r in waiting:
        tokens = r.all_token_ids
        hit, _ = memory.cache.match(tokens, len(tokens))
        matched[r.request_id] = min(hit, len(tokens) - 1)
        if hit <= CHECK_THRESHOLD:
            shared, _ = seen.match(tokens, len(tokens))
            if shared >= DEPRIORITIZE_THRESHOLD:
                late.add(r.request_id)
            else:
                seen.insert(tokens)
    waiting.sort(key=lambda r: float("inf") if r.request_id in late else -matched[r.request_id])
