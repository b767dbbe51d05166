import pytest

from engine.block_manager import BlockManager, blocks_needed


def test_blocks_needed_is_ceiling():
    assert [blocks_needed(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_allocate_grows_table_and_slot_mapping_follows_it():
    bm = BlockManager(num_blocks=6, block_size=4)
    assert bm.allocate("a", 5) == [0, 1]
    assert bm.allocate("b", 3) == [2]
    assert bm.allocate("a", 9) == [3]  # a's third block is 3: tables need not be contiguous
    assert bm.block_tables == {"a": [0, 1, 3], "b": [2]}
    assert [bm.slot("a", p) for p in (0, 3, 4, 8)] == [0, 3, 4, 12]
    assert bm.num_used_blocks == 4 and bm.num_free_blocks == 2
    bm.check_invariants()


def test_free_returns_blocks_and_refuses_overallocation():
    bm = BlockManager(num_blocks=3, block_size=2)
    bm.allocate("a", 6)
    assert not bm.can_allocate("b", 1)
    with pytest.raises(RuntimeError, match="exhausted"):
        bm.allocate("b", 1)
    assert bm.free("a") == [0, 1, 2]
    assert bm.num_free_blocks == 3 and "a" not in bm.block_tables
    bm.check_invariants()
