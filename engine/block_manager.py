"""KV block bookkeeping: which blocks of the pool each request owns (its block table).

The pool (``engine.kv_cache.KVCachePool``) holds ``num_blocks`` blocks of ``block_size`` token slots per layer.
A request holding ``n`` tokens of K/V owns ``ceil(n / block_size)`` blocks, listed in its block table in token
order; token position ``p`` of the request lives in slot ``block_table[p // block_size] * block_size +
p % block_size`` (the slot mapping the runner hands to attention).

    block table of A: [5, 2, 9]      block_size = 4
    positions:        0-3  4-7  8-10 (last block 3/4 full)

Blocks are taken from a free list when tokens are scheduled (``allocate``) and returned when a request finishes
or is preempted (``free``). Each block has exactly one owner; used + free == num_blocks always.
"""

from __future__ import annotations


def blocks_needed(num_tokens: int, block_size: int) -> int:
    """Blocks that hold ``num_tokens`` tokens: ceil(num_tokens / block_size)."""
    return -(-num_tokens // block_size)


class BlockManager:
    """Owns the free list and every request's block table. Block ids are ``0 .. num_blocks-1``."""

    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_block_ids: list[int] = list(range(num_blocks))
        self.block_tables: dict[str, list[int]] = {}

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self.free_block_ids)

    def num_missing_blocks(self, request_id: str, num_tokens: int) -> int:
        """Blocks ``request_id`` still lacks to hold ``num_tokens`` tokens (0 if it has enough)."""
        have = len(self.block_tables.get(request_id, ()))
        return max(0, blocks_needed(num_tokens, self.block_size) - have)

    def can_allocate(self, request_id: str, num_tokens: int) -> bool:
        return self.num_missing_blocks(request_id, num_tokens) <= len(self.free_block_ids)

    def allocate(self, request_id: str, num_tokens: int) -> list[int]:
        """Grow ``request_id``'s block table to hold ``num_tokens`` tokens; returns the new block ids.

        Raises:
            RuntimeError: not enough free blocks (callers check ``can_allocate`` first).
        """
        missing = self.num_missing_blocks(request_id, num_tokens)
        if missing > len(self.free_block_ids):
            raise RuntimeError(f"KV pool exhausted: {request_id} needs {missing} blocks, {self.num_free_blocks} free")
        new = [self.free_block_ids.pop(0) for _ in range(missing)]  # lowest ids first: a stable, readable map
        self.block_tables.setdefault(request_id, []).extend(new)
        return new

    def free(self, request_id: str) -> list[int]:
        """Return all of ``request_id``'s blocks to the free list; returns them."""
        freed = self.block_tables.pop(request_id, [])
        self.free_block_ids.extend(freed)
        self.free_block_ids.sort()
        return freed

    def slot(self, request_id: str, position: int) -> int:
        """Pool slot of token ``position`` of ``request_id`` (see the module docstring)."""
        table = self.block_tables[request_id]
        return table[position // self.block_size] * self.block_size + position % self.block_size

    def check_invariants(self) -> None:
        """Assert conservation and single ownership (used by tests and at the end of every step)."""
        owned = [b for table in self.block_tables.values() for b in table]
        assert len(owned) == len(set(owned)), "a block has two owners"
        assert not set(owned) & set(self.free_block_ids), "a block is both owned and free"
        assert len(owned) + len(self.free_block_ids) == self.num_blocks, "blocks leaked"
