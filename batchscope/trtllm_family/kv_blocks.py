"""A paged KV cache with real block ids and prefix reuse, after TensorRT-LLM's ``KVCacheManager`` / ``BlockManager``
(``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``), for one attention window and beam width 1.

The pool has ``num_blocks`` blocks of ``tokens_per_block`` tokens. Every block is in exactly one of three states::

    free    never stored (or stored and since evicted): handed out first, lowest id first
    cached  stored for reuse and held by nobody: still allocatable, evicted least recently used first
    used    held by one or more requests (a reused block is shared; ``_refs`` counts its holders)

Reuse. When a prompt has been computed its full blocks *before the last prompt token* are stored, keyed by the whole
token prefix they end (so a block matches only behind the same prefix): ``(prompt_len - 1) // tokens_per_block``
blocks. The block holding the last prompt token is never reused, because the last token must be computed again to
produce the first output. A new request reuses the leading run of stored blocks of its prompt.

Release. A finished (or paused) request drops its hold; stored blocks become *cached*, the others *free*. The tail
of a sequence is released first, so its prefix blocks stay cached longer (a shared prefix outlives its tails).

Units: blocks and tokens; block ids are 0 .. num_blocks - 1.
"""

from __future__ import annotations

from collections import OrderedDict, deque

BlockKey = tuple[int, ...]  # the token prefix a stored block ends


class KVBlockManager:
    """Block tables of the requests that hold KV, the free and cached blocks, and the reuse index."""

    def __init__(self, num_blocks: int, tokens_per_block: int, enable_reuse: bool) -> None:
        if num_blocks < 1 or tokens_per_block < 1:
            raise ValueError(f"num_blocks ({num_blocks}) and tokens_per_block ({tokens_per_block}) must be >= 1")
        self.num_blocks = num_blocks
        self.tokens_per_block = tokens_per_block
        self.enable_reuse = enable_reuse
        self.tables: dict[str, list[int]] = {}
        self.num_reused_blocks = 0  # blocks handed out by reuse, over the manager's life
        self._free: deque[int] = deque(range(num_blocks))
        self._cached: OrderedDict[int, None] = OrderedDict()  # least recently used first
        self._refs: dict[int, int] = {}
        self._key_of: dict[int, BlockKey] = {}
        self._block_of: dict[BlockKey, int] = {}

    # -- counts -------------------------------------------------------------------------------------------------
    def num_free_blocks(self) -> int:
        """Blocks an allocation can take: free ones and cached ones (a cached block is evicted when taken)."""
        return len(self._free) + len(self._cached)

    def counts(self) -> dict[str, int]:
        return {"free_blocks": len(self._free), "cached_blocks": len(self._cached), "used_blocks": len(self._refs)}

    def ref_count(self, block: int) -> int:
        return self._refs.get(block, 0)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.tokens_per_block)

    # -- reuse index ----------------------------------------------------------------------------------------------
    def _reusable_keys(self, tokens: list[int]) -> list[BlockKey]:
        tpb = self.tokens_per_block
        return [tuple(tokens[: (i + 1) * tpb]) for i in range((len(tokens) - 1) // tpb)]

    def match(self, tokens: list[int]) -> list[int]:
        """The leading run of stored blocks of a prompt (empty without reuse)."""
        if not self.enable_reuse:
            return []
        run = []
        for key in self._reusable_keys(tokens):
            block = self._block_of.get(key)
            if block is None:
                break
            run.append(block)
        return run

    def first_new_block(self, tokens: list[int]) -> BlockKey | None:
        """The key of the first reusable-size block of the prompt that is not stored: the block a request would
        write first and could share with a duplicate. ``None`` when every such block is stored (or reuse is off)."""
        if not self.enable_reuse:
            return None
        for key in self._reusable_keys(tokens):
            if key not in self._block_of:
                return key
        return None

    def store(self, request_id: str, tokens: list[int]) -> int:
        """Store the request's full prompt blocks for reuse (``tokens`` is its prompt). Returns how many were new."""
        if not self.enable_reuse:
            return 0
        table, stored = self.tables[request_id], 0
        for key, block in zip(self._reusable_keys(tokens), table):
            if key in self._block_of or block in self._key_of:
                continue  # another copy is already stored, or this block already carries a key
            self._block_of[key] = block
            self._key_of[block] = key
            stored += 1
        return stored

    # -- allocation -----------------------------------------------------------------------------------------------
    def _take_block(self) -> int:
        if self._free:
            return self._free.popleft()
        if not self._cached:
            raise RuntimeError(f"KV pool exhausted ({self.num_blocks} blocks all in use)")
        block, _ = self._cached.popitem(last=False)  # evict the least recently used cached block
        del self._block_of[self._key_of.pop(block)]
        return block

    def _hold(self, block: int) -> None:
        if self._refs.get(block, 0) == 0:
            self._cached.pop(block, None)  # a cached block comes back into use
        self._refs[block] = self._refs.get(block, 0) + 1

    def pin_reused(self, request_id: str, blocks: list[int]) -> None:
        """Start the request's block table with the stored blocks it reuses (shared, not copied)."""
        if request_id in self.tables:
            raise ValueError(f"request {request_id!r} already holds KV")
        for block in blocks:
            self._hold(block)
        self.tables[request_id] = list(blocks)
        self.num_reused_blocks += len(blocks)

    def grow(self, request_id: str, num_tokens: int) -> list[int]:
        """Give the request blocks until it covers ``num_tokens`` tokens; returns the new block ids."""
        table = self.tables.setdefault(request_id, [])
        new = []
        while len(table) * self.tokens_per_block < num_tokens:
            block = self._take_block()
            self._hold(block)
            table.append(block)
            new.append(block)
        return new

    def release(self, request_id: str) -> int:
        """Drop the request's hold on its blocks, tail first. Returns the blocks that left the *used* state."""
        released = 0
        for block in reversed(self.tables.pop(request_id, [])):
            self._refs[block] -= 1
            if self._refs[block]:
                continue
            del self._refs[block]
            released += 1
            if block in self._key_of:
                self._cached[block] = None
            else:
                self._free.append(block)
        return released

    def check(self) -> None:
        """The three states partition the pool, and the holders match the reference counts."""
        used, free, cached = set(self._refs), set(self._free), set(self._cached)
        assert len(free) == len(self._free), "a block is twice in the free queue"
        assert not (used & free or used & cached or free & cached), "a block is in two states"
        assert used | free | cached == set(range(self.num_blocks)), "a block is lost"
        holders: dict[int, int] = {}
        for table in self.tables.values():
            for block in table:
                holders[block] = holders.get(block, 0) + 1
        assert holders == self._refs, "reference counts differ from the block tables"
