"""TGI's block allocator without prefix caching: one free list of KV block ids, handed out from its tail.

TGI v3 (``backends/v3/src/block_allocator.rs``, ``SimpleAllocator``) sizes the pool as
``num_blocks = max_batch_total_tokens // block_size`` and keeps block 0 for the shard's health check, so the free
list starts as ``[1, 2, ..., num_blocks - 1]``. An allocation of ``tokens`` takes ``ceil(tokens / block_size)`` ids
from the **end** of the list (in list order), and a release appends the ids back to the end, so the list behaves
like a stack of runs::

    free list  [1 2 3 4 5 6 | 7 8]      allocate 20 tokens (block 16): takes the last 2 -> [7, 8]
    free list  [1 2 | 3 4 5 6]          allocate 50 tokens: takes the last 4 -> [3, 4, 5, 6]

An allocation either gets every block it asks for or nothing (the caller then waits). Units: tokens and blocks.

The prefix-caching allocator (``radix.py``) has the same two verbs and the same ``Allocation`` result, so the
batch builder (``request_queue.py``) talks to either through ``Allocator``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Allocation:
    """Blocks given to one request for its whole lifetime. ``prefix_len``: prompt tokens found in the prefix cache
    (whole blocks, before TGI's "at least one token is computed" rule); ``blocks`` start with those cached blocks.
    ``allocation_id`` and ``prefix_node`` are the radix allocator's handle (0 for the simple allocator)."""

    blocks: list[int]
    prefix_len: int = 0
    allocation_id: int = 0
    prefix_node: int = 0
    prompt: list[int] = field(default_factory=list)
    written: int | None = None  # prompt tokens whose K/V were computed (None: all, as TGI assumes when it caches)


class Allocator(Protocol):
    """What the batch builder needs from a block allocator."""

    block_size: int
    free_blocks: list[int]
    reclaimed: list[int]  # cached blocks the last ``allocate`` reclaimed (prefix caching only)

    def allocate(self, tokens: int, prompt: list[int]) -> Allocation | None: ...

    def free(self, allocation: Allocation) -> list[int]: ...

    def shortage(self, tokens: int) -> dict: ...

    def cached_blocks(self) -> int: ...


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks that hold ``tokens`` tokens (the last one may be partly filled)."""
    return -(-tokens // block_size)


class SimpleAllocator:
    """A stack-like free list of block ids (``SimpleAllocator`` in TGI); no prefix cache."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.free_blocks: list[int] = list(range(1, num_blocks))  # block 0 is reserved
        self.reclaimed: list[int] = []

    def allocate(self, tokens: int, prompt: list[int]) -> Allocation | None:
        """``ceil(tokens / block_size)`` blocks from the tail of the free list, or ``None`` if there are fewer."""
        need = blocks_for(tokens, self.block_size)
        if need > len(self.free_blocks):
            return None
        cut = len(self.free_blocks) - need
        blocks, self.free_blocks = self.free_blocks[cut:], self.free_blocks[:cut]
        return Allocation(blocks=blocks)

    def free(self, allocation: Allocation) -> list[int]:
        """Give the blocks back (appended to the tail). Nothing is cached: returns ``[]``."""
        self.free_blocks.extend(allocation.blocks)
        return []

    def shortage(self, tokens: int) -> dict:
        """Why ``tokens`` did not fit, in blocks (the numbers of the reference's ``kv_blocks`` head)."""
        return {"need_blocks": blocks_for(tokens, self.block_size), "free_blocks": len(self.free_blocks)}

    def cached_blocks(self) -> int:
        return 0
