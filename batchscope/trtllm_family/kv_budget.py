"""What the capacity stage asks of the KV cache, after TensorRT-LLM's ``getRemainingBlocksToCompletion`` and
``getNeededBlocksOneStep`` (``kvCacheManager.cpp``) and the scheduling copy of the pool that ``startScheduling`` /
``schedulingRemoveSequence`` keep while one capacity pass runs (``capacityScheduler.cpp``).

Two questions, in blocks:

- *to completion* (``GUARANTEED_NO_EVICT``, ``STATIC_BATCH``): blocks for prompt + ``max_new_tokens`` (capped by the
  attention window), minus the blocks the request holds;
- *one step* (``MAX_UTILIZATION``): blocks for the K/V the request holds after its next step (a context's whole
  prompt on its first chunk; a generating request's tokens), plus draft tokens, minus the blocks it holds.

A context on its first chunk reuses the leading run of stored blocks of its prompt. A reused block that someone holds
costs nothing; a reused block that is only *cached* is taken out of the allocatable pool, so it is counted. The pass
keeps its own reference counts: a request taken in the pass holds its reused blocks, and a request paused in the
pass lets go of its blocks (those nobody else holds become allocatable again).

``KvBudget`` is the interface; ``BlockBudget`` answers from a ``KVBlockManager``. The Python-port tests answer from a
mock with fixed counts (tests/trtllm).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from batchscope.trtllm_family.kv_blocks import KVBlockManager
from batchscope.trtllm_family.request import SeqState


class KvBudget(Protocol):
    """The KV questions of one capacity pass. ``start`` begins a pass; ``take`` and ``pause`` update its copy."""

    reuse_enabled: bool

    def start(self) -> None: ...
    def free_blocks(self) -> int: ...
    def blocks_to_completion(self, seq: SeqState) -> int: ...
    def blocks_one_step(self, seq: SeqState) -> int: ...
    def first_new_block(self, seq: SeqState) -> Hashable | None: ...
    def reusable_tokens(self, seq: SeqState) -> int: ...
    def take(self, seq: SeqState) -> None: ...
    def pause(self, seq: SeqState) -> int: ...


class BlockBudget:
    """``KvBudget`` over a real block manager. ``window``: the attention window in tokens (``None``: unbounded)."""

    def __init__(self, manager: KVBlockManager, window: int | None = None) -> None:
        self.manager = manager
        self.window = window
        self.reuse_enabled = manager.enable_reuse
        self._ref_delta: dict[int, int] = {}
        self._freed = 0

    def start(self) -> None:
        self._ref_delta = {}
        self._freed = 0

    def _ref(self, block: int) -> int:
        return self.manager.ref_count(block) + self._ref_delta.get(block, 0)

    def free_blocks(self) -> int:
        return self.manager.num_free_blocks() + self._freed

    def reused_blocks(self, seq: SeqState) -> list[int]:
        """The stored blocks a first-chunk context would reuse (none for anything else)."""
        if not seq.is_first_chunk and not seq.disagg_init:
            return []
        return self.manager.match(seq.prompt)

    def _net_of_reuse(self, seq: SeqState, num_blocks: int) -> int:
        if seq.has_kv:
            return max(0, num_blocks - len(self.manager.tables.get(seq.request_id, [])))
        reused = self.reused_blocks(seq)
        return num_blocks - sum(1 for block in reused if self._ref(block) > 0)

    def blocks_to_completion(self, seq: SeqState) -> int:
        num_tokens = seq.prompt_len + seq.max_new_tokens
        if self.window is not None:
            num_tokens = min(num_tokens, self.window)
        return self._net_of_reuse(seq, self.manager.blocks_for(num_tokens))

    def blocks_one_step(self, seq: SeqState) -> int:
        return self._net_of_reuse(seq, self.manager.blocks_for(seq.kv_tokens_after_step()))

    def first_new_block(self, seq: SeqState) -> Hashable | None:
        return self.manager.first_new_block(seq.prompt)

    def reusable_tokens(self, seq: SeqState) -> int:
        """Prompt tokens a first-chunk context finds in the cache (what ``setEstimatedReusableTokens`` records)."""
        return len(self.reused_blocks(seq)) * self.manager.tokens_per_block

    def take(self, seq: SeqState) -> None:
        for block in self.reused_blocks(seq):
            self._ref_delta[block] = self._ref_delta.get(block, 0) + 1

    def pause(self, seq: SeqState) -> int:
        freed = 0
        for block in self.manager.tables.get(seq.request_id, []):
            self._ref_delta[block] = self._ref_delta.get(block, 0) - 1
            freed += self._ref(block) == 0
        self._freed += freed
        return freed
