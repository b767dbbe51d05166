"""The pool of KV blocks: reference counts, the free queue in eviction order, and the prefix cache's hash map.

This is vLLM V1's design (``vllm/v1/core/block_pool.py``, ``FreeKVCacheBlockQueue`` in ``kv_cache_utils.py``), block
for block, so that Batchscope hands out the same block ids as vLLM at every step:

- Every block has a **reference count**: the number of block tables that hold it. A block shared by three requests
  (a common prompt prefix) has count 3. A block is *free* exactly when its count is 0.
- Free blocks wait in one **free queue**; allocation takes from the front. At the start the queue is ``0, 1, ...,
  num_blocks - 1``. A finished or preempted request gives its blocks back *tail first*, and

      free queue:  | freed blocks without a hash | ... older free blocks ... | freed blocks with a hash |
                     ^ reused first (LIFO)                                      ^ reused last (LRU order)

  a block without a hash (a partial last block, or any block when caching is off) is reused first; a *cached*
  block goes to the back, so it stays findable for as long as possible.
- A **full** block of a request's tokens gets a hash, chained over the block's token ids and its parent block's
  hash (so equal hashes mean equal *prefixes*, not just equal blocks). ``cached`` maps each hash to the blocks
  holding that prefix. A cached block keeps its hash after it is freed: a later request with the same prefix can
  still *hit* it and take it back out of the free queue (``touch``). Only when the queue hands the block out for
  new tokens is its hash dropped: it is **evicted**.

Block ids are ``0 .. num_blocks-1`` (vLLM's ids minus 1: vLLM keeps its block 0 as a null block).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class BlockPool:
    """Reference counts, the free queue and the hash -> block map. Knows nothing of requests."""

    def __init__(self, num_blocks: int, enable_caching: bool):
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.ref_counts = [0] * num_blocks
        self.block_hashes: list[bytes | None] = [None] * num_blocks
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))  # front = reused first
        self._cached: dict[bytes, dict[int, None]] = {}  # hash -> blocks holding it, oldest first
        self._unwritten: set[int] = set()  # cached blocks whose tokens were never computed (see ``mark_unwritten``)
        self.evicted: list[int] = []  # cached blocks handed out again since the last ``take_evicted``

    @property
    def num_free_blocks(self) -> int:
        """Blocks with count 0, cached ones included (they can be evicted at any time)."""
        return len(self._free)

    def free_queue(self) -> list[int]:
        """The free blocks, front (reused first) to back."""
        return list(self._free)

    def cached_free_blocks(self) -> list[int]:
        """Free blocks that still hold a cached prefix (evictable), in eviction order."""
        return [b for b in self._free if self.block_hashes[b] is not None]

    def get_cached_block(self, block_hash: bytes) -> int | None:
        """The oldest block holding ``block_hash`` (vLLM's ``get_one_block``), or None."""
        blocks = self._cached.get(block_hash)
        if not blocks:
            return None
        first = next(iter(blocks))
        return None if first in self._unwritten else first

    def get_new_blocks(self, n: int) -> list[int]:
        """Take ``n`` blocks from the front of the free queue, evicting any cached prefix they held."""
        if n > len(self._free):
            raise RuntimeError(f"KV pool exhausted: {n} blocks needed, {len(self._free)} free")
        out = [self._free.popitem(last=False)[0] for _ in range(n)]
        for b in out:
            if self.block_hashes[b] is not None:
                self._evict(b)
            self.ref_counts[b] = 1
        return out

    def touch(self, blocks: Iterable[int]) -> None:
        """A prefix-cache hit: one more reference; a free (count 0) block leaves the free queue."""
        for b in blocks:
            if self.ref_counts[b] == 0:
                del self._free[b]
            self.ref_counts[b] += 1

    def free_blocks(self, ordered: Iterable[int]) -> None:
        """Drop one reference to each block, given in eviction order (a request's table reversed).

        Blocks whose count reaches 0 rejoin the free queue: without a hash at the front (reused first), with a
        hash at the back (kept as long as possible, least recently used first).
        """
        front: list[int] = []
        back: list[int] = []
        for b in ordered:
            self.ref_counts[b] -= 1
            if self.ref_counts[b] == 0:
                (back if self.enable_caching and self.block_hashes[b] is not None else front).append(b)
        for b in reversed(front):
            self._free[b] = None
            self._free.move_to_end(b, last=False)
        for b in back:
            self._free[b] = None

    def cache_block(self, block: int, block_hash: bytes) -> None:
        """Register a full block under its prefix hash (a block is hashed once, while its owner holds it)."""
        if self.block_hashes[block] is not None:
            return
        self.block_hashes[block] = block_hash
        self._cached.setdefault(block_hash, {})[block] = None

    def mark_unwritten(self, block: int) -> None:
        """``block`` was cached when its tokens were scheduled, but the step that would compute them was cancelled
        (a victim un-scheduled by priority preemption): keep its place and hash, but never let a request hit it."""
        if self.block_hashes[block] is not None:
            self._unwritten.add(block)

    def _evict(self, block: int) -> None:
        h = self.block_hashes[block]
        assert h is not None
        blocks = self._cached[h]
        del blocks[block]
        if not blocks:
            del self._cached[h]
        self.block_hashes[block] = None
        self._unwritten.discard(block)
        self.evicted.append(block)

    def take_evicted(self) -> list[int]:
        """Blocks evicted since the last call (for the step log)."""
        out, self.evicted = self.evicted, []
        return out

    def check_invariants(self) -> None:
        """A block is free iff its count is 0; the hash map and the blocks' hashes agree."""
        assert all(c >= 0 for c in self.ref_counts), "negative reference count"
        assert {b for b, c in enumerate(self.ref_counts) if c == 0} == set(self._free), "free iff count 0"
        mapped = {b: h for h, blocks in self._cached.items() for b in blocks}
        assert mapped == {b: h for b, h in enumerate(self.block_hashes) if h is not None}, "hash map out of sync"
