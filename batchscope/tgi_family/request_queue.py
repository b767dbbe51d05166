"""TGI's request queue and its batch builder: which waiting requests join the next prefill, and with which blocks.

Follows ``State::next_batch`` in ``backends/v3/src/queue.rs`` (TGI v3). Units: tokens and KV blocks.

The builder walks the queue first-come first-served and stops at the first request that cannot go; that request
stays at the head even if a later one would fit (head-of-line blocking). For each request it:

1. **allocates its whole lifetime** up front: ``prompt + max_new_tokens - 1`` tokens' worth of blocks (the last
   sampled token is never fed back), minus the blocks of its cached prefix. It never allocates again, so it is
   never preempted. No blocks: it waits (``kv_blocks``);
2. **costs** ``prompt - cache_len`` prompt tokens (a fully cached prompt still computes its last token). The
   prefill budget is first rounded *up* to a whole number of blocks. Over budget: with chunking the request is
   admitted with the budget's remainder as its first chunk and the batch closes; without chunking it goes back
   (``prefill_budget``) and its allocation is released;
3. stops at ``max_size`` requests; and if ``min_size`` is set and fewer were collected, **all of them go back**
   and their allocations are released (``min_size_after_allocation``).

A released allocation is a real release: with prefix caching it inserts the prompt into the cache although
nothing was computed (TGI's defect, which reference case t13 pins down).

Each call returns a ``NextBatch``: the admitted requests, the ``head`` (the first request still waiting and why,
with the numbers that decided it) and, for the step log, every call the allocator received.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from batchscope.tgi_family.block_allocator import Allocation, Allocator


@dataclass
class Entry:
    """A waiting request."""

    request_id: str
    prompt: list[int]
    max_new_tokens: int

    @property
    def lifetime_tokens(self) -> int:
        """Tokens whose K/V the request will ever hold: its prompt and every sampled token but the last."""
        return len(self.prompt) + self.max_new_tokens - 1


@dataclass
class Admitted:
    """A request that joins the batch: ``cache_len`` prompt tokens come from the prefix cache; ``chunk_len`` is its
    first chunk when the prompt was cut (``None``: the whole rest of the prompt)."""

    entry: Entry
    allocation: Allocation
    cache_len: int
    chunk_len: int | None


@dataclass
class NextBatch:
    admitted: list[Admitted] = field(default_factory=list)
    head: dict | None = None
    allocator_calls: list[dict] = field(default_factory=list)


class RequestQueue:
    """Waiting requests in arrival order, and the batch builder over them."""

    def __init__(self, allocator: Allocator, *, block_size: int, chunking: bool, cache_written_only: bool = False):
        self.allocator = allocator
        self.block_size = block_size
        self.chunking = chunking
        self.cache_written_only = cache_written_only  # see ``TgiCore``: never cache K/V that was not computed
        self.entries: deque[Entry] = deque()

    def append(self, entry: Entry) -> None:
        self.entries.append(entry)

    def remove(self, request_id: str) -> bool:
        """Drop a waiting request (it holds no blocks). False if it is not waiting."""
        for entry in self.entries:
            if entry.request_id == request_id:
                self.entries.remove(entry)
                return True
        return False

    def ids(self) -> list[str]:
        return [e.request_id for e in self.entries]

    def next_batch(
        self, min_size: int | None, max_size: int | None, prefill_budget: int, token_budget: int
    ) -> NextBatch:
        """One scheduling call (``Queue::next_batch`` and ``State::next_batch``)."""
        out = NextBatch()
        first = self.entries[0].request_id if self.entries else None
        skip = self._refusal(min_size, max_size, prefill_budget, token_budget)
        if skip is not None or first is None:
            out.head = {"request_id": first, "reason": skip} if first is not None and skip else None
            return out
        budget = -(-prefill_budget // self.block_size) * self.block_size
        out.head = self._walk(out, max_size, budget)
        if min_size is not None and 0 < len(out.admitted) < min_size:
            out.head = {
                "request_id": out.admitted[0].entry.request_id,
                "reason": "min_size_after_allocation",
                "batch_len": len(out.admitted),
                "min_size": min_size,
                "batch_stopped_by": out.head,
            }
            for admitted in reversed(out.admitted):  # back to the front in their order, released last first
                self.entries.appendleft(admitted.entry)
                self._release(admitted.allocation, out)
            out.admitted = []
        return out

    def _refusal(
        self, min_size: int | None, max_size: int | None, prefill_budget: int, token_budget: int
    ) -> str | None:
        """Why the queue is not walked at all, checked in TGI's order (``None``: walk it)."""
        if prefill_budget == 0:
            return "prefill_token_budget_zero"
        if token_budget == 0:
            return "token_budget_zero"
        if min_size is not None and len(self.entries) < min_size:
            return "min_size"
        if max_size == 0:
            return "max_size"
        return None

    def _walk(self, out: NextBatch, max_size: int | None, budget: int) -> dict | None:
        """Pop entries into ``out.admitted`` until one stops the walk; returns the head it leaves."""
        prefill_tokens = 0
        while self.entries:
            entry = self.entries.popleft()
            allocation = self._allocate(entry, out)
            if allocation is None:
                self.entries.appendleft(entry)
                shortage = self.allocator.shortage(entry.lifetime_tokens)
                return {"request_id": entry.request_id, "reason": "kv_blocks", **shortage}
            cache_len = min(allocation.prefix_len, len(entry.prompt) - 1)  # at least one token is computed
            cost = len(entry.prompt) - cache_len
            if prefill_tokens + cost > budget:
                left = budget - prefill_tokens
                if self.chunking and left > 0:
                    out.admitted.append(Admitted(entry, allocation, cache_len, left))
                    return self._head("batch_closed_after_chunk")
                self.entries.appendleft(entry)
                self._release(allocation, out)
                return {
                    "request_id": entry.request_id,
                    "reason": "prefill_budget",
                    "need_tokens": cost,
                    "left_tokens": left,
                }
            prefill_tokens += cost
            out.admitted.append(Admitted(entry, allocation, cache_len, None))
            if len(out.admitted) == max_size:
                return self._head("max_size")
        return None

    def _head(self, reason: str) -> dict | None:
        return {"request_id": self.entries[0].request_id, "reason": reason} if self.entries else None

    def _allocate(self, entry: Entry, out: NextBatch) -> Allocation | None:
        tokens, free_before = entry.lifetime_tokens, len(self.allocator.free_blocks)
        allocation = self.allocator.allocate(tokens, entry.prompt)
        call: dict = {
            "call": "allocate",
            "request_id": entry.request_id,
            "tokens": tokens,
            "ok": allocation is not None,
        }
        if allocation is not None:
            call["matched_prefix_tokens"] = allocation.prefix_len
        call.update(free_before=free_before, free_after=len(self.allocator.free_blocks))
        call["reclaimed_cached_blocks"] = sorted(self.allocator.reclaimed)  # as a set: the reference lists them sorted
        out.allocator_calls.append(call)
        return allocation

    def _release(self, allocation: Allocation, out: NextBatch) -> None:
        if self.cache_written_only:  # given back before computing anything: nothing new to cache
            allocation.written = 0
        free_before = len(self.allocator.free_blocks)
        inserted = self.allocator.free(allocation)
        out.allocator_calls.append(
            {
                "call": "free",
                "allocation_id": allocation.allocation_id,
                "num_blocks": len(allocation.blocks),
                "inserted_into_cache": inserted,
                "free_before": free_before,
                "free_after": len(self.allocator.free_blocks),
            }
        )
