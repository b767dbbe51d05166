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

Sorting touches the cache's access times, which decide what eviction drops (``batchscope.sglang_family.radix_cache``):
LPM matches every waiting request's known tokens; FCFS with the prefix cache on refreshes, on the first sort with a
waiting request and every 32nd after (``WAITING_PREFIX_REFRESH_INTERVAL``), the cached prefixes of the first 128 waiting
requests, the head last, so that eviction drops them in reverse queue order (``_touch_waiting_prefixes``, on by
default: ``SGLANG_ENABLE_WAITING_PREFIX_REFRESH``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchscope.sglang_family.radix_cache import RadixCache

if TYPE_CHECKING:
    from batchscope.sglang_family.state import Memory, SglRequest

POLICIES = ("fcfs", "lpm")
CHECK_THRESHOLD = 32  # tokens
DEPRIORITIZE_THRESHOLD = 32  # tokens
PREFIX_MATCH_MAX = 128  # waiting requests


REFRESH_INTERVAL = 32  # sorts between two refreshes of the waiting prefixes


class WaitingOrder:
    """One scheduler's waiting-queue order: its policy and how many sorts could refresh the waiting prefixes."""

    def __init__(self, policy: str):
        self.policy = policy
        self.refresh_calls = 0  # SchedulePolicy._waiting_prefix_refresh_calls

    def sort(self, waiting: list[SglRequest], memory: Memory) -> None:
        """Reorder ``waiting`` in place (see the module docstring); called before each prefill attempt."""
        if self.policy == "lpm" and memory.cache.enabled and len(waiting) <= PREFIX_MATCH_MAX:
            _sort_lpm(waiting, memory)
        elif waiting and memory.cache.enabled:
            refresh = self.refresh_calls % REFRESH_INTERVAL == 0
            self.refresh_calls += 1
            if refresh:
                for r in reversed(waiting[:PREFIX_MATCH_MAX]):
                    memory.cache.match(r.all_token_ids, r.num_tokens)


def _sort_lpm(waiting: list[SglRequest], memory: Memory) -> None:
    """LPM: longest cached prefix first, in-batch prefix sharers last (the module docstring)."""
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
