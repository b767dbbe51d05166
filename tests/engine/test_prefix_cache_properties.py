"""Property tests (hypothesis) of prefix caching and reference counts, on random workloads with shared prefixes.

The checking runner keeps its own model of the pool's *contents*, written from the rules (not from the code): which
token prefix each block holds, position by position, as the steps write K/V into it. Against that model, at every
step of every run:

- a block's reference count equals the number of block tables holding it, and a block is free iff its count is 0;
- a block handed out for new tokens was held by nobody (cached blocks are never handed out while referenced): its
  only other holders are requests admitted later in the same step whose prefix-cache hit covers it;
- no K/V position is written twice between two allocations of its block (a hit block is never recomputed);
- a prefix-cache hit covers whole blocks, never the last known token, and every hit block holds, fully written,
  exactly the request's own tokens up to its end (same-step hits included: every write of a step lands before
  any row reads);
- at the end every count is 0 and ``num_used_blocks`` is 0.
"""

from __future__ import annotations

import pytest
from conftest import examples
from fakes import EOS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams


class ContentRunner:
    """Samples token 7 (or EOS at a scripted output length) and checks the pool against a model of its contents."""

    def __init__(self, natural: dict[str, int]):
        self.natural = natural
        self.engine: LLMEngine | None = None
        self.prefix: dict[int, tuple[int, ...]] = {}  # block -> the token prefix up to its last written position
        self.written: dict[int, set[int]] = {}  # block -> offsets written since it was last handed out
        self.num_hits = 0

    def execute(self, out, block_tables) -> dict[str, list[int]]:
        bm = self.engine.scheduler.block_manager
        bs = bm.block_size
        holders = [0] * bm.num_blocks
        for table in block_tables.values():
            for b in table:
                holders[b] += 1
        assert holders == bm.pool.ref_counts, "a count differs from the tables holding the block"
        assert set(bm.pool.free_queue()) == {b for b, n in enumerate(holders) if n == 0}, "free iff count 0"
        hit_blocks = {rid: block_tables.get(rid, [])[: n // bs] for rid, n in out.prefix_hit_tokens.items()}
        for rid, new in out.allocated_blocks.items():
            for b in new:  # its only other holders: requests admitted after it in this step that hit it
                others = [r for r, t in block_tables.items() if b in t and r != rid]
                assert all(b in hit_blocks.get(r, ()) for r in others), f"block {b} handed to {rid} while held"
                self.prefix[b], self.written[b] = (), set()
        for s in out.scheduled:  # the forward pass writes every scheduled token's K/V ...
            tokens, table = s.request.all_token_ids, block_tables[s.request.request_id]
            for p in range(s.num_computed_tokens, s.num_computed_tokens + s.num_tokens):
                b = table[p // bs]
                assert p % bs not in self.written[b], f"position {p} of {s.request.request_id} written twice"
                self.written[b].add(p % bs)
                self.prefix[b] = tuple(tokens[: p + 1])
        for rid, hit in out.prefix_hit_tokens.items():  # ... before any row reads the blocks it hit
            req = next(r for r in self.engine.scheduler.running if r.request_id == rid)
            assert hit % bs == 0 and hit <= req.num_tokens - 1
            for i in range(hit // bs):
                b = block_tables[rid][i]
                assert self.prefix.get(b) == tuple(req.all_token_ids[: (i + 1) * bs]), f"{rid} hit a wrong block"
                assert len(self.written[b]) == bs
            self.num_hits += hit > 0
        sampled = {}
        for s in out.scheduled:
            if s.samples:
                req = s.request
                n = self.natural.get(req.request_id)
                sampled[req.request_id] = [EOS if n is not None and len(req.output_token_ids) + 1 == n else 7]
        return sampled

    def release(self, request_id: str) -> None:
        pass


@st.composite
def workloads(draw):
    block_size = draw(st.sampled_from([1, 2, 3, 4, 8]))
    stems = draw(st.lists(st.lists(st.integers(3, 6), min_size=1, max_size=24), min_size=1, max_size=3))
    reqs, natural = [], {}
    for i in range(draw(st.integers(1, 6))):
        stem = draw(st.sampled_from(stems))
        cut = draw(st.just(len(stem)) | st.integers(0, len(stem)))
        prompt = stem[:cut] + draw(st.lists(st.integers(3, 6), min_size=0 if cut else 1, max_size=8))
        max_tokens = draw(st.integers(1, 10))
        if draw(st.booleans()):
            natural[f"r{i}"] = draw(st.integers(1, max_tokens))
        reqs.append((f"r{i}", prompt, max_tokens, draw(st.integers(0, 4)), draw(st.integers(-1, 1))))
    need = max(-(-(len(p) + m - 1) // block_size) for _, p, m, _, _ in reqs)
    chunked = draw(st.booleans())
    budget = draw(st.integers(1, 24))
    config = EngineConfig(
        batching=draw(st.sampled_from(["continuous", "static"])),
        max_num_seqs=draw(st.integers(1, 4)),
        max_num_batched_tokens=budget if chunked else max(budget, max(len(p) for _, p, _, _, _ in reqs)),
        block_size=block_size,
        num_kv_blocks=need + draw(st.integers(0, 2) | st.integers(0, 16)),
        enable_chunked_prefill=chunked,
        reserve_full_prompt=draw(st.booleans()),
        scheduling_policy=draw(st.sampled_from(["fcfs", "priority"])),
    )
    return reqs, natural, config


HITS = []


@pytest.mark.filterwarnings("ignore::batchscope.engine.validation.PriorityIgnoredWarning")
@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads())
def test_refcounts_hits_and_contents_on_random_workloads(w):
    reqs, natural, config = w
    runner = ContentRunner(natural)
    engine = LLMEngine(runner, config, eos_token_ids={EOS})
    runner.engine = engine
    requests = [Request(rid, p, SamplingParams(max_tokens=m), arrival_step=a, priority=pr) for rid, p, m, a, pr in reqs]
    records = engine.run(requests)
    bm = engine.scheduler.block_manager
    assert bm.num_used_blocks == 0 and not any(bm.pool.ref_counts) and not bm.block_tables
    assert all(r["finish_reason"] for r in records[-1]["requests"])
    HITS.append(runner.num_hits)


def test_the_random_workloads_do_hit():
    """Run after the property: a good share of the random runs found cached prefixes (it is not vacuous)."""
    if len(HITS) >= 100:
        assert sum(1 for h in HITS if h) > len(HITS) // 10
