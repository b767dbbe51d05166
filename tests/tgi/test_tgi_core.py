"""``TgiCore``'s interface beyond the reference cases: early stops, aborts, refused requests, misuse, and the one
place the core departs from TGI (an idle server that TGI would leave stuck)."""

from __future__ import annotations

import pytest

from batchscope.tgi_family.core import TgiCore, min_batch_size


def make(**overrides) -> TgiCore:
    settings = {
        "max_batch_prefill_tokens": 32,
        "max_batch_total_tokens": 64,
        "max_batch_size": None,
        "block_size": 4,
        "waiting_served_ratio": 0.3,
        "max_waiting_tokens": 20,
        "prefix_caching": True,
        "prefill_chunking": True,
    }
    return TgiCore(**{**settings, **overrides})


def step(core: TgiCore, stopped: frozenset[str] = frozenset()) -> list[str]:
    plan = core.schedule()
    return core.update(plan, {w.request_id: 1 for w in plan.work if w.samples}, stopped)


def test_an_early_stop_finishes_the_request_and_caches_its_prompt():
    core = make()
    core.add_request("a", list(range(8)), 10)
    assert step(core) == []
    assert step(core, frozenset({"a"})) == ["a"]
    assert core.last_freed == [{"request_id": "a", "num_blocks": 5, "inserted_into_cache": 2}]
    assert not core.has_work() and core.pool() == {
        "free_blocks": 13,
        "cached_blocks": 2,
        "used_blocks": 0,
        "trie_blocks": 2,
    }


def test_abort_reports_where_the_request_was_and_releases_its_blocks():
    core = make(prefix_caching=False)
    core.add_request("a", list(range(8)), 10)
    core.add_request("b", list(range(8)), 10)
    core.add_request("c", list(range(8)), 30)  # 10 blocks: waits behind a and b
    step(core)
    assert (core.running, core.waiting) == (["a", "b"], ["c"])
    assert core.abort("c") == "waiting"
    assert core.abort("a") == "running"
    assert core.abort("a") is None and core.abort("zzz") is None
    assert core.running == ["b"] and list(core.block_tables) == ["b"]
    assert core.pool() == {"free_blocks": 10, "cached_blocks": 0, "used_blocks": 5}


def test_requests_that_can_never_run_are_refused():
    core = make(prefill_chunking=False)
    with pytest.raises(ValueError, match="need 16 blocks; the pool has 15"):
        core.add_request("big", list(range(8)), 57)
    with pytest.raises(ValueError, match="exceeds max_batch_prefill_tokens=32"):
        core.add_request("long", list(range(33)), 1)
    with pytest.raises(ValueError, match="non-empty"):
        core.add_request("empty", [], 3)
    core.add_request("a", [1], 1)
    with pytest.raises(ValueError, match="already queued"):
        core.add_request("a", [1], 1)


def test_schedule_and_update_must_alternate():
    core = make()
    with pytest.raises(RuntimeError, match="nothing running or waiting"):
        core.schedule()
    core.add_request("a", list(range(8)), 3)
    plan = core.schedule()
    with pytest.raises(RuntimeError, match="twice"):
        core.schedule()
    with pytest.raises(RuntimeError, match="between steps"):
        core.abort("a")
    with pytest.raises(KeyError, match="no sampled token for a"):
        core.update(plan, {})


def test_min_batch_size_is_computed_in_32_bit_floats():
    assert min_batch_size(4, 0.5) == 2
    assert min_batch_size(100, 0.29) == 29  # 64-bit floats give 28.999999999999996, so 28
    assert min_batch_size(7, 0.0) == 0


def test_an_idle_server_stuck_on_its_own_prefix_match_drops_the_cache():
    """TGI leaves this server idle forever: b's lookup matches 1 token of a's cached 2-token prompt, which pins the
    whole node (2 blocks), so b's 4 blocks never fit a 4-block pool. The core drops the cache and admits b."""
    core = make(block_size=1, max_batch_total_tokens=5)
    core.add_request("a", [0, 0], 1)
    core.add_request("b", [0, 1, 0, 0], 1)
    assert step(core) == ["a"]
    assert core.pool() == {"free_blocks": 2, "cached_blocks": 2, "used_blocks": 0, "trie_blocks": 2}
    plan = core.schedule()
    assert plan.decision is not None
    assert plan.decision["cache_cleared"]["after"] == {"request_id": "b", "reason": "kv_blocks"}
    assert plan.decision["cache_cleared"]["num_blocks"] == 2
    assert [a.request_id for a in plan.admitted] == ["b"] and plan.admitted[0].cache_len == 0
