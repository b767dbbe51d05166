"""KV block bookkeeping: which blocks of the pool each request holds (its block table), and prefix caching.

The pool (``batchscope.model.paged_attention.KVCachePool``) holds ``num_blocks`` blocks of ``block_size`` token slots
per layer. A request holding ``n`` tokens of K/V holds ``ceil(n / block_size)`` blocks, listed in its block table in
token order; token position ``p`` of the request lives in slot ``block_table[p // block_size] * block_size +
p % block_size`` (the slot mapping the runner hands to attention).

    block table of A: [5, 2, 9]      block_size = 4
    positions:        0-3  4-7  8-10 (last block 3/4 full)

**Automatic prefix caching** (vLLM V1, on by default): every *full* block of a request's known tokens has a hash
chained over the token ids of the block and of every block before it. When a request is admitted, the longest run
of its leading blocks whose hashes are in the cache is a **hit**: those blocks go straight into its table (shared,
reference count + 1) and its ``num_computed_tokens`` starts at the hit length instead of 0:

    prompt:  | block 0 | block 1 | block 2 | 3 tokens |      block 2 not cached
    table:   [   7     ,   12    ,  new    ,  new    ]      hit = 2 blocks = 2 * block_size tokens, not recomputed

A hit never covers the last known token (a request must compute at least one token to sample its next one), and
only whole blocks are hit. A hit block is only ever read: the request writes its new tokens into blocks of its own.
A block is cached (its hash registered) as soon as the step that fills it is scheduled: a request admitted later in
the same step may already hit it. That is safe here because every layer writes all new K/V of a step before any
row attends (``batchscope.model.paged_attention``). The pool, the free queue and eviction live in
``batchscope.scheduling.block_pool``.
"""

from __future__ import annotations

import hashlib

from batchscope.engine.request import Request
from batchscope.scheduling.block_pool import BlockPool


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """Blocks that hold ``num_tokens`` tokens: ceil(num_tokens / block_size)."""
    return -(-num_tokens // block_size)


def block_hash(parent: bytes, token_ids: list[int]) -> bytes:
    """The hash of one full block: sha256 over its parent block's hash and its token ids."""
    return hashlib.sha256(parent + b"|" + ",".join(map(str, token_ids)).encode()).digest()


class BlockManager:
    """Every request's block table on top of a ``BlockPool``; the prefix-cache lookup and allocation rules."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = False):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.pool = BlockPool(num_blocks, enable_caching)
        self.block_tables: dict[str, list[int]] = {}
        self._num_cached: dict[str, int] = {}  # leading blocks of each table already registered in the cache
        self._hashes: dict[str, list[bytes]] = {}  # request_id -> hashes of its full blocks of known tokens
        self._cached_this_step: dict[str, list[int]] = {}  # blocks registered while scheduling this step

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free_blocks

    @property
    def num_used_blocks(self) -> int:
        """Blocks held by at least one request (a shared block counts once; cached free blocks are free)."""
        return self.num_blocks - self.pool.num_free_blocks

    def block_hashes(self, req: Request) -> list[bytes]:
        """Hashes of ``req``'s full blocks of known tokens (prompt and outputs), computed once each."""
        hashes = self._hashes.setdefault(req.request_id, [])
        bs, tokens = self.block_size, req.all_token_ids
        while (len(hashes) + 1) * bs <= len(tokens):
            i = len(hashes)
            hashes.append(block_hash(hashes[-1] if hashes else b"", tokens[i * bs : (i + 1) * bs]))
        return hashes

    def find_cached_prefix(self, req: Request) -> list[int]:
        """The prefix-cache hit of a request about to be admitted: its longest run of leading blocks found in the
        cache, never reaching its last known token (so at most ``(num_tokens - 1) // block_size`` blocks)."""
        if not self.enable_caching:
            return []
        hits: list[int] = []
        for h in self.block_hashes(req)[: (req.num_tokens - 1) // self.block_size]:
            b = self.pool.get_cached_block(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def num_blocks_to_allocate(self, request_id: str, num_tokens: int, hits: list[int] | tuple = ()) -> int:
        """Free blocks that holding ``num_tokens`` tokens would take: the blocks still missing, plus the hit blocks
        that are now free (a hit takes them out of the free queue). vLLM's ``get_num_blocks_to_allocate``."""
        have = len(self.block_tables.get(request_id, ())) + len(hits)
        missing = max(0, blocks_needed(num_tokens, self.block_size) - have)
        return missing + sum(1 for b in hits if self.pool.ref_counts[b] == 0)

    def can_allocate(self, request_id: str, num_tokens: int, hits: list[int] | tuple = ()) -> bool:
        return self.num_blocks_to_allocate(request_id, num_tokens, hits) <= self.pool.num_free_blocks

    def allocate(self, req: Request, num_tokens: int, hits: list[int] | tuple = ()) -> list[int]:
        """Grow ``req``'s table to hold ``num_tokens`` tokens (after adopting the hit blocks ``hits``, for a request
        being admitted); returns the newly allocated block ids. Then registers in the cache every block that is full
        of known tokens once those tokens are computed.

        Raises:
            RuntimeError: not enough free blocks (callers check ``can_allocate`` first).
        """
        rid = req.request_id
        table = self.block_tables.setdefault(rid, [])
        if hits:
            assert not table, "only a request without blocks adopts a prefix-cache hit"
            self.pool.touch(hits)
            table.extend(hits)
            self._num_cached[rid] = len(hits)
        new = self.pool.get_new_blocks(max(0, blocks_needed(num_tokens, self.block_size) - len(table)))
        table.extend(new)
        if self.enable_caching:
            self._cache_full_blocks(req, min(num_tokens, req.num_tokens))
        return new

    def _cache_full_blocks(self, req: Request, num_tokens: int) -> None:
        rid = req.request_id
        start, end = self._num_cached.get(rid, 0), num_tokens // self.block_size
        hashes, table = self.block_hashes(req), self.block_tables[rid]
        for i in range(start, end):
            self.pool.cache_block(table[i], hashes[i])
            self._cached_this_step.setdefault(rid, []).append(table[i])
        self._num_cached[rid] = max(start, end)

    def cache_computed(self, req: Request) -> None:
        """Register in the cache every full block of ``req``'s known tokens that has K/V (after a speculative step
        the accepted tokens fill blocks allocated for drafts; vLLM's ``cache_blocks`` after ``update_from_output``)."""
        if self.enable_caching and req.request_id in self.block_tables:
            self._cache_full_blocks(req, min(req.num_computed_tokens, req.num_tokens))

    def new_step(self) -> None:
        """Called before each step is scheduled."""
        self._cached_this_step.clear()

    def free(self, request_id: str) -> list[int]:
        """Drop ``request_id``'s table (its blocks go back tail first, see ``batchscope.scheduling.block_pool``);
        returns it."""
        table = self.block_tables.pop(request_id, [])
        self._num_cached.pop(request_id, None)
        self.pool.free_blocks(reversed(table))
        return table

    def cancel_step(self, request_id: str) -> None:
        """``request_id``'s work of this step is cancelled (priority preemption of a request already scheduled):
        the blocks it registered in the cache this step will never be written, so they must never be hit."""
        for b in self._cached_this_step.pop(request_id, []):
            self.pool.mark_unwritten(b)

    def forget(self, request_id: str) -> None:
        """A finished request: drop its hashes too."""
        self._hashes.pop(request_id, None)

    def slot(self, request_id: str, position: int) -> int:
        """Pool slot of token ``position`` of ``request_id`` (see the module docstring)."""
        table = self.block_tables[request_id]
        return table[position // self.block_size] * self.block_size + position % self.block_size

    def ref_counts(self) -> dict[int, int]:
        """Blocks held by more than one request -> their reference count."""
        return {b: n for b, n in enumerate(self.pool.ref_counts) if n > 1}

    def check_invariants(self) -> None:
        """Every block's count equals the tables that hold it; a block is free iff its count is 0; no table holds a
        block twice (run by the scheduler at the end of every schedule)."""
        holders = [0] * self.num_blocks
        for table in self.block_tables.values():
            assert len(table) == len(set(table)), "a table holds a block twice"
            for b in table:
                holders[b] += 1
        assert holders == self.pool.ref_counts, "reference counts disagree with the block tables"
        self.pool.check_invariants()
