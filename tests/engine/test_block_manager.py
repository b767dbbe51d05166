"""The block manager and pool on hand-computed examples: allocation, vLLM's free-queue order, prefix-cache hits,
reference counts and eviction (expected values worked out from vllm/v1/core/block_pool.py's rules, not from ours)."""

import pytest

from batchscope.engine.request import Request
from batchscope.scheduling.block_manager import BlockManager, blocks_needed


def req(rid: str, tokens: list[int]) -> Request:
    return Request(rid, tokens)


def test_blocks_needed_is_ceiling():
    assert [blocks_needed(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_allocate_grows_table_and_slot_mapping_follows_it():
    bm = BlockManager(num_blocks=6, block_size=4)
    a, b = req("a", list(range(10, 19))), req("b", [1, 2, 3])
    assert bm.allocate(a, 5) == [0, 1]
    assert bm.allocate(b, 3) == [2]
    assert bm.allocate(a, 9) == [3]  # a's third block is 3: tables need not be contiguous
    assert bm.block_tables == {"a": [0, 1, 3], "b": [2]}
    assert [bm.slot("a", p) for p in (0, 3, 4, 8)] == [0, 3, 4, 12]
    assert bm.num_used_blocks == 4 and bm.num_free_blocks == 2
    bm.check_invariants()


def test_freed_blocks_are_reused_tail_first():
    """Without caching a freed table goes back to the *front* of the free queue, tail block first (vLLM: LIFO)."""
    bm = BlockManager(num_blocks=6, block_size=4)
    a = req("a", list(range(10, 22)))
    bm.allocate(a, 12)  # [0, 1, 2]
    bm.allocate(req("b", [1]), 1)  # [3]
    assert bm.free("a") == [0, 1, 2]
    assert bm.pool.free_queue() == [2, 1, 0, 4, 5]
    assert bm.allocate(req("c", list(range(8))), 8) == [2, 1]
    bm.check_invariants()


def test_free_returns_blocks_and_refuses_overallocation():
    bm = BlockManager(num_blocks=3, block_size=2)
    bm.allocate(req("a", list(range(6))), 6)
    assert not bm.can_allocate("b", 1)
    with pytest.raises(RuntimeError, match="exhausted"):
        bm.allocate(req("b", [1]), 1)
    assert bm.free("a") == [0, 1, 2]
    assert bm.num_free_blocks == 3 and "a" not in bm.block_tables
    bm.check_invariants()


def test_prefix_hit_sharing_refcounts_and_lru_eviction():
    bm = BlockManager(num_blocks=6, block_size=4, enable_caching=True)
    a = req("a", list(range(100, 110)))  # 10 tokens: 2 full blocks + 2
    assert bm.allocate(a, 10) == [0, 1, 2]  # blocks 0 and 1 are full once computed: cached at once
    b = req("b", [*range(100, 108), 7, 7])  # same first 8 tokens
    assert bm.find_cached_prefix(b) == [0, 1]
    assert bm.num_blocks_to_allocate("b", 10, [0, 1]) == 1  # the hits are held by a: only the tail is new
    assert bm.allocate(b, 10, [0, 1]) == [3]
    assert bm.block_tables["b"] == [0, 1, 3] and bm.ref_counts() == {0: 2, 1: 2}
    bm.check_invariants()
    bm.free("a")  # [2, 1, 0] reversed: 2 (no hash) to the front; 1 and 0 still held by b
    assert bm.pool.free_queue() == [2, 4, 5] and bm.ref_counts() == {}
    bm.free("b")  # 3 (no hash) to the front; 1 then 0 (hashed) to the back, tail first
    assert bm.pool.free_queue() == [3, 2, 4, 5, 1, 0]
    assert bm.pool.cached_free_blocks() == [1, 0] and bm.num_used_blocks == 0
    c = req("c", list(range(100, 109)))  # 9 tokens: the hit may cover at most 8
    assert bm.find_cached_prefix(c) == [0, 1]
    assert bm.num_blocks_to_allocate("c", 9, [0, 1]) == 3  # 1 new + 2 hits leaving the free queue
    bm.allocate(c, 9, [0, 1])
    assert bm.block_tables["c"] == [0, 1, 3] and bm.pool.free_queue() == [2, 4, 5]
    bm.free("c")
    assert bm.pool.free_queue() == [3, 2, 4, 5, 1, 0]
    d = req("d", list(range(200, 224)))  # 6 blocks: takes every block, evicting the cached 1 and 0 last
    assert bm.allocate(d, 24) == [3, 2, 4, 5, 1, 0]
    assert bm.pool.take_evicted() == [1, 0] and bm.find_cached_prefix(c) == []
    bm.check_invariants()


def test_a_hit_never_covers_the_last_known_token():
    bm = BlockManager(num_blocks=8, block_size=4, enable_caching=True)
    a = req("a", list(range(8)))
    bm.allocate(a, 8)
    assert bm.find_cached_prefix(req("same", list(range(8)))) == [0]  # 8 tokens known: at most 7 hit -> 1 block
    assert bm.find_cached_prefix(req("longer", list(range(9)))) == [0, 1]
    assert BlockManager(8, 4).find_cached_prefix(a) == []  # caching off: never a hit
