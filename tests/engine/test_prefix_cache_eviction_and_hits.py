"""Property tests (hypothesis) of the fault kinds behind shared cases e01 and e02 (../shared/cases/README.md), the
rules and not the instances (tests/shared_cases/test_case_e01.py, tests/shared_cases/test_case_e02.py).

The eviction property keeps its own model of the pool's *contents* from the step records alone, written from the
rules and not from the code: which token prefix each block holds once the scheduled tokens have written all its
positions (a block handed out again loses it). Against that model, at every step of random continuous-batching
runs with shared prompt stems and small pools (evictions are frequent):

- e01, lookups: every admission's hit is exactly the longest run of its leading blocks whose prefixes some block
  still holds (a lookup stops at the first miss), within the limit below; each hit block holds that prefix;
- e01, eviction: the blocks a step evicts are exactly the blocks it hands out that held a complete prefix; the
  free blocks holding a prefix are exactly the complete, unheld ones; and in eviction order the head of every chain
  outlives its tail (blocks are returned tail first): a free block holding an m-block prefix (m >= 2) has its
  (m-1)-block prefix in a held block or in a free block evicted after it;
- e02, full-prompt rule: a head held back by ``kv_blocks_full_prompt`` needed, net of its hit, more blocks than
  were free: the blocks its known tokens take minus the hit blocks, plus the hit blocks that are free.

And the e02 limit itself: a hit covers whole blocks and never the last known token, so an identical cached prompt
of L tokens hits ((L - 1) // block_size) blocks and computes 1 to block_size tokens, a prefill that samples.
"""

from __future__ import annotations

import pytest
from conftest import examples, step_records
from fakes import EOS, FakeRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams

OUTPUT_TOKEN = 7  # what FakeRunner samples (never EOS)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class PoolContents:
    """Which token prefix each block holds, from the step records (``prefix`` is complete once ``written`` holds
    every offset of the block)."""

    def __init__(self, num_blocks: int, block_size: int):
        self.bs = block_size
        self.written: list[set[int]] = [set() for _ in range(num_blocks)]
        self.prefix: list[tuple[int, ...] | None] = [None] * num_blocks

    def complete(self, b: int) -> bool:
        return len(self.written[b]) == self.bs

    def holders(self, prefix: tuple[int, ...]) -> list[int]:
        return [b for b in range(len(self.prefix)) if self.complete(b) and self.prefix[b] == prefix]

    def longest_chain(self, known: list[int]) -> int:
        """Leading blocks of ``known`` found, stopping at the first miss, never covering its last token."""
        j = 0
        while j < (len(known) - 1) // self.bs and self.holders(tuple(known[: (j + 1) * self.bs])):
            j += 1
        return j

    def hand_out(self, b: int) -> bool:
        """``b`` is allocated for new tokens; returns whether that evicts a complete prefix."""
        evicts = self.complete(b)
        self.written[b], self.prefix[b] = set(), None
        return evicts

    def write(self, b: int, position: int, known: list[int]) -> None:
        self.written[b].add(position % self.bs)
        self.prefix[b] = tuple(known[: (position // self.bs + 1) * self.bs])


def check_run(records: list[dict], config: EngineConfig) -> dict[str, int]:
    """Replay ``records`` against ``PoolContents``; returns counts (hit tokens, evictions, waits) for vacuity."""
    bs, n = config.block_size, config.num_kv_blocks
    pool = PoolContents(n, bs)
    prompts = {r["request_id"]: list(r["prompt_token_ids"]) for r in records[0]["requests"]}
    outputs: dict[str, list[int]] = {rid: [] for rid in prompts}
    seen = {"hit_tokens": 0, "evicted": 0, "full_prompt_waits": 0}
    for step in step_records(records):
        kv = step["kv"]
        tables = kv["block_tables"]
        expected_evicted = []
        for s in step["scheduled"]:  # running requests first, then admissions, as the scheduler takes them
            rid = s["request_id"]
            known, table = prompts[rid] + outputs[rid], tables[rid]
            if rid in step["admitted"]:
                hit = step["num_prefix_hit_tokens"][rid]
                j = pool.longest_chain(known)
                assert hit == j * bs, f"step {step['step']}: {rid} hit {hit}, longest cached chain {j} blocks"
                assert s["num_computed_tokens"] == hit and hit <= len(known) - 1
                for i in range(j):
                    assert pool.prefix[table[i]] == tuple(known[: (i + 1) * bs]) and pool.complete(table[i])
                seen["hit_tokens"] += hit
            expected_evicted += [b for b in kv["allocated"].get(rid, []) if pool.hand_out(b)]
            for p in range(s["num_computed_tokens"], s["num_computed_tokens"] + s["num_tokens"]):
                pool.write(table[p // bs], p, known)
        assert kv["evicted"] == expected_evicted, f"step {step['step']}"
        seen["evicted"] += len(expected_evicted)
        held = {b for t in tables.values() for b in t}
        free_cached = kv["cached_free_blocks"]
        assert set(free_cached) == {b for b in range(n) if pool.complete(b) and b not in held}
        for k, b in enumerate(free_cached):  # the head of each cached chain is evicted after its tail, or is held
            prefix = pool.prefix[b]
            if len(prefix) >= 2 * bs:
                keepers = set(pool.holders(prefix[:-bs]))
                assert keepers & (held | set(free_cached[k + 1 :])), f"step {step['step']}: block {b}'s head gone"
        head = step["decisions"].get("head")
        if head and head["limit"] == "kv_blocks_full_prompt":
            rid = head["request_id"]
            known = prompts[rid] + outputs[rid]
            j = pool.longest_chain(known)
            hit_holders = [pool.holders(tuple(known[: (i + 1) * bs])) for i in range(j)]
            # the hit block the lookup takes may be any holder (the oldest): bound its being free either way
            lo = sum(all(b not in held for b in hs) for hs in hit_holders)
            hi = sum(any(b not in held for b in hs) for hs in hit_holders)
            assert ceil_div(len(known), bs) - j + lo <= head["need"] <= ceil_div(len(known), bs) - j + hi
            assert head["left"] == n - kv["num_used_blocks"] < head["need"]
            seen["full_prompt_waits"] += 1
        for sampled in step["sampled"]:
            outputs[sampled["request_id"]].append(sampled["token_id"])
    return seen


@st.composite
def workloads(draw):
    """Random prompts cut from 1-3 shared stems (tokens 3-6, so prefixes often coincide), in pools just above the
    largest request: prefixes are cached, hit, and evicted."""
    bs = draw(st.sampled_from([1, 2, 3, 4]))
    stems = draw(st.lists(st.lists(st.integers(3, 6), min_size=1, max_size=20), min_size=1, max_size=3))
    reqs = []
    for i in range(draw(st.integers(1, 7))):
        stem = draw(st.sampled_from(stems))
        cut = draw(st.just(len(stem)) | st.integers(0, len(stem)))
        prompt = stem[:cut] + draw(st.lists(st.integers(3, 6), min_size=0 if cut else 1, max_size=6))
        reqs.append((f"r{i}", prompt, draw(st.integers(1, 4)), draw(st.integers(0, 4))))
    need = max(ceil_div(len(p) + m - 1, bs) for _, p, m, _ in reqs)
    chunked = draw(st.booleans())
    budget = draw(st.integers(1, 32))
    config = EngineConfig(
        max_num_seqs=draw(st.integers(1, 4)),
        max_num_batched_tokens=budget if chunked else max(budget, max(len(p) for _, p, _, _ in reqs)),
        block_size=bs,
        num_kv_blocks=need + draw(st.integers(0, 1) | st.integers(0, 6)),
        enable_chunked_prefill=chunked,
        reserve_full_prompt=draw(st.sampled_from([True, True, False])),
        enable_prefix_caching=True,
    )
    return reqs, config


SEEN: list[dict[str, int]] = []


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads())
def test_lookups_take_the_longest_cached_chain_and_eviction_keeps_chain_heads(w):
    reqs, config = w
    requests = [Request(rid, p, SamplingParams(max_tokens=m, ignore_eos=True), arrival_step=a) for rid, p, m, a in reqs]
    steps = []  # a bound, so that an admission rule that never admits fails instead of running forever
    limit = 100 + 10 * sum(len(p) + m for _, p, m, _ in reqs)
    engine = LLMEngine(FakeRunner(), config, eos_token_ids={EOS})
    records = engine.run(requests, on_step=steps.append, should_stop=lambda: len(steps) > limit)
    assert not records[-1].get("partial"), f"not finished in {limit} steps"
    SEEN.append(check_run(records, config))


def test_the_random_runs_hit_evict_and_wait():
    """Run after the property: it saw hits, evictions and full-prompt waits (it is not vacuous)."""
    if len(SEEN) >= 100:
        for what in ("hit_tokens", "evicted", "full_prompt_waits"):
            assert sum(1 for s in SEEN if s[what]) > len(SEEN) // 20, what


def test_the_eviction_check_catches_head_first_eviction(monkeypatch):
    """The property fails on the e01 fault: a pool that returns a request's blocks head first (and so evicts a
    chain's head while keeping its tail) breaks the chain-head check on the case's own workload."""
    from batchscope.scheduling.block_pool import BlockPool

    original = BlockPool.free_blocks
    monkeypatch.setattr(BlockPool, "free_blocks", lambda self, ordered: original(self, reversed(list(ordered))))
    e01 = [  # B, A, X, A2 of shared case e01 with stand-in tokens: A2 = A + 4 tokens, X shares nothing
        ("B", [3] * 8),
        ("A", [4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 5, 6]),
        ("X", [6] * 13),
        ("A2", [4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 5, 6, 3, 3, 3, 3]),
    ]
    config = EngineConfig(max_num_seqs=1, num_kv_blocks=6, block_size=4, max_num_batched_tokens=64)
    requests = [Request(rid, p, SamplingParams(max_tokens=1, ignore_eos=True)) for rid, p in e01]
    records = LLMEngine(FakeRunner(), config, eos_token_ids={EOS}).run(requests)
    assert records[4]["num_prefix_hit_tokens"] == {"A2": 0}  # the case text: "had eviction been head first, 0"
    with pytest.raises(AssertionError, match="head gone"):
        check_run(records, config)


# The dynamo#13312 review's table, 4-token pages: prompt length -> hit tokens of an identical cached prompt
REVIEW = {12: 8, 13: 12, 17: 16}


def full_prompt_hit(length: int, block_size: int) -> int:
    """By hand: whole blocks, and at least the last token left to compute."""
    return (length - 1) // block_size * block_size


def test_the_hand_formula_is_the_reviews_table():
    assert {n: full_prompt_hit(n, 4) for n in REVIEW} == REVIEW


def second_of_two_identical(length: int, block_size: int, arrives: int, max_tokens: int = 2) -> tuple[dict, dict]:
    """Two requests with the same ``length``-token prompt, the second arriving at step ``arrives`` (1: while the
    first decodes and holds the blocks; later: after it finished and its blocks are cached and free). Returns
    the second's admission step record and its first scheduled entry."""
    prompt = [3 + i % 4 for i in range(length)]
    requests = [
        Request("first", prompt, SamplingParams(max_tokens=max_tokens, ignore_eos=True), arrival_step=0),
        Request("second", list(prompt), SamplingParams(max_tokens=1, ignore_eos=True), arrival_step=arrives),
    ]
    config = EngineConfig(max_num_seqs=2, block_size=block_size, num_kv_blocks=64, max_num_batched_tokens=64)
    records = LLMEngine(FakeRunner(), config, eos_token_ids={EOS}).run(requests)
    step = next(st for st in step_records(records) if "second" in st["admitted"])
    return step, next(s for s in step["scheduled"] if s["request_id"] == "second")


@pytest.mark.parametrize("arrives", [1, 3], ids=["shared", "cached-free"])
@pytest.mark.parametrize("length", range(1, 21))
def test_a_full_prompt_hit_leaves_one_to_four_tokens_to_compute(length, arrives):
    step, first = second_of_two_identical(length, 4, arrives)
    hit = full_prompt_hit(length, 4)
    assert step["num_prefix_hit_tokens"] == {"second": hit}
    assert (first["kind"], first["num_computed_tokens"], first["num_tokens"]) == ("prefill", hit, length - hit)
    assert 1 <= length - hit <= 4
    assert any(s["request_id"] == "second" for s in step["sampled"])  # no dead end: it samples at once


@settings(max_examples=examples(200), deadline=None)
@given(length=st.integers(1, 40), block_size=st.integers(1, 8), arrives=st.sampled_from([1, 5]))
def test_a_full_prompt_hit_is_whole_blocks_short_of_the_last_token(length, block_size, arrives):
    step, first = second_of_two_identical(length, block_size, arrives)
    hit = full_prompt_hit(length, block_size)
    assert step["num_prefix_hit_tokens"] == {"second": hit}
    assert (first["num_computed_tokens"], first["num_tokens"]) == (hit, length - hit)
    assert any(s["request_id"] == "second" for s in step["sampled"])
