"""Where the K/V of the SGLang-style scheduler lives in the engine's paged pool: one token slot per KV block.

``batchscope.sglang_family.state.Memory`` keeps SGLang's bookkeeping as token counts; the model runner needs the slot of
every token. ``SlotMemory`` is that same ``Memory`` (its rules unchanged, called through ``super()``) plus the slots:
SGLang's ``page_size`` 1 maps onto the paged pool (``batchscope.model.paged_attention.KVCachePool``) as ``block_size``
1, so a "block table" is the list of a request's token slots, position by position. Units: tokens = slots.

- Each radix-cache node (a span of tokens, ``batchscope.sglang_family.radix_cache``) owns the slots their K/V was
computed into
  (its ``value``; a split splits them with the tokens).
- A request's table is the slots of the cache path it locks (its prefix hit, or its earlier chunks and prompt)
  followed by its *own* slots: tokens it computed since its last checkpoint.
- Allocation (``extend``) takes slots from the free queue after any eviction the rules make (an evicted node's
  slots go back first, ``RadixCache.on_evict``). A checkpoint or a finish hands the own slots to the new cache
  nodes and frees the copies of tokens someone else cached first (SGLang's ``cache_unfinished_req`` /
  ``cache_finished_req``); a retraction, or the abort of the chunked request, frees the own slots; the cache keeps
  the rest.
"""

from __future__ import annotations

from batchscope.scheduling.block_pool import BlockPool
from batchscope.sglang_family.radix_cache import Node
from batchscope.sglang_family.state import Memory, SglRequest


class SlotMemory(Memory):
    """``Memory`` with the slot of every token: ``table(req)`` is the block table (``block_size`` 1) of ``req``."""

    def __init__(self, pool_tokens: int, prefix_cache: bool):
        super().__init__(pool_tokens, prefix_cache)
        self.slots = BlockPool(pool_tokens, False)  # the free-slot queue (no caching of its own)
        self.own: dict[SglRequest, list[int]] = {}  # a request -> slots of its tokens not yet in the cache
        self.evicted: list[int] = []  # slots of evicted cache nodes, since the last ``take_evicted``
        self.cache.on_evict = self._evicted

    def _evicted(self, node: Node) -> None:
        self.slots.free_blocks(node.value)
        self.evicted.extend(node.value)

    def take_evicted(self) -> list[int]:
        out, self.evicted = self.evicted, []
        return out

    def cached_slots(self, node: Node | None) -> list[int]:
        """Slots of the cache path ending at ``node``, in token order."""
        return [slot for n in node.path() for slot in n.value] if node is not None else []

    def table(self, req: SglRequest) -> list[int]:
        return self.cached_slots(req.node if req.cached_len else None) + self.own.get(req, [])

    def evictable_slots(self) -> list[int]:
        """Slots of cached tokens no running request locks (free for admission, ``RadixCache.evictable``)."""
        return sorted(slot for n in self.cache.nodes() if n.lock == 0 for slot in n.value)

    def extend(self, req: SglRequest, n: int) -> None:
        super().extend(req, n)
        self.own.setdefault(req, []).extend(self.slots.get_new_blocks(n))

    def _values(self, req: SglRequest) -> list[int]:
        own = self.own.get(req, [])
        assert len(own) == req.kv_len - req.cached_len, "own slots out of step with the K/V"
        return self.table(req)

    def _insert(self, req: SglRequest) -> int:
        """Own slots become the new cache nodes' slots; those of tokens already cached are freed."""
        start = req.cached_len
        existing = super()._insert(req)
        if self.cache.enabled:
            own = self.own.pop(req, [])
            self.slots.free_blocks(own[: max(0, existing - start)])
        return existing

    def release(self, req: SglRequest) -> None:
        if not self.cache.enabled:
            self.slots.free_blocks(self.own.pop(req, []))
        super().release(req)

    def discard(self, req: SglRequest) -> None:
        self.slots.free_blocks(self.own.pop(req, []))
        super().discard(req)

    def retract(self, req: SglRequest, evict_tokens: int) -> None:
        self.slots.free_blocks(self.own.pop(req, []))
        super().retract(req, evict_tokens)

    def check_slots(self) -> None:
        """Every slot is exactly one of free, a cached token's, or a request's own; the counts agree with SGLang's
        bookkeeping (``free`` here counts what ``Memory`` counts as free)."""
        cached = [slot for n in self.cache.nodes() for slot in n.value]
        held = cached + [s for slots in self.own.values() for s in slots]
        assert len(held) == len(set(held)), "a slot is held twice"
        assert len(held) + self.slots.num_free_blocks == self.pool_tokens, "a slot is lost"
        assert self.slots.num_free_blocks == self.free, "free slots disagree with the free count"
        assert len(cached) == self.cache.size, "cached tokens without a slot"
