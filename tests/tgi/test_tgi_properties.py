"""Properties of ``TgiCore`` on random workloads (shared prompt prefixes, arrivals, early stops, aborts, both chunking
modes, prefix caching on and off), checked every step by an independent model of what TGI promises:

- nobody is preempted: a running request keeps its place, its blocks and its computed tokens until it ends;
- the blocks always partition the pool (free list, prefix cache, live requests), and the pool's counts add up;
- a request holds exactly its lifetime's blocks, ``ceil((prompt + max_new_tokens - 1) / block_size)``, from admission;
- admission is first-come first-served, within the budgets the scheduling call states; the budgets are the ones
  TGI derives from the running batch; a forward's tokens stay within TGI's bounds (see
  ``test_a_forward_can_exceed_the_rounded_prefill_budget`` for why the bound is not the rounded budget alone);
- a new batch joins at most every other step inside the loop (a prefill call is followed by an unscheduled decode);
- every request ends within a bounded number of steps, having sampled exactly ``max_new_tokens`` unless stopped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from conftest import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from batchscope.scheduling.forward_plan import ForwardPlan
from batchscope.tgi_family.block_allocator import blocks_for
from batchscope.tgi_family.core import TgiCore


def _round_up(tokens: int, block_size: int) -> int:
    return blocks_for(tokens, block_size) * block_size


@st.composite
def scenarios(draw) -> tuple[dict, list[dict], int]:
    block_size = draw(st.sampled_from([1, 2, 4, 16]))
    config = {
        "max_batch_prefill_tokens": draw(st.integers(1, 40)),
        "max_batch_total_tokens": block_size * draw(st.integers(3, 48)),
        "max_batch_size": draw(st.none() | st.integers(1, 5)),
        "block_size": block_size,
        "waiting_served_ratio": draw(st.sampled_from([0.0, 0.3, 0.5, 1.2])),
        "max_waiting_tokens": draw(st.integers(0, 8)),
        "prefix_caching": draw(st.booleans()),
        "prefill_chunking": draw(st.booleans()),
    }
    prefixes = [draw(st.lists(st.integers(0, 3), max_size=24)) for _ in range(2)]
    requests = []
    for i in range(draw(st.integers(1, 12))):
        prefix = draw(st.sampled_from([[], *prefixes]))
        prompt = (prefix + draw(st.lists(st.integers(0, 3), max_size=12))) or [1]
        requests.append(
            {
                "request_id": f"r{i}",
                "prompt": prompt,
                "max_new_tokens": draw(st.integers(1, 16)),
                "arrival_step": draw(st.integers(0, 15)),
            }
        )
    return config, requests, draw(st.integers(0, 2**32 - 1))


@dataclass
class Request:
    prompt: list[int]
    max_new_tokens: int
    status: str = "waiting"  # waiting, running, finished, aborted
    computed: int = 0
    sampled: int = 0
    stopped: bool = False
    table: list[int] = field(default_factory=list)


class Checker:
    """An independent model of the promises above, fed the core's plans and results."""

    def __init__(self, config: dict, core: TgiCore) -> None:
        self.c, self.core = config, core
        self.bs = config["block_size"]
        self.requests: dict[str, Request] = {}
        self.last_was_loop_prefill = False

    def valid(self, prompt: list[int], max_new: int) -> bool:
        fits_pool = blocks_for(len(prompt) + max_new - 1, self.bs) <= self.core.usable_blocks
        return fits_pool and (self.c["prefill_chunking"] or len(prompt) <= self.c["max_batch_prefill_tokens"])

    def add(self, rid: str, prompt: list[int], max_new: int) -> None:
        try:
            self.core.add_request(rid, prompt, max_new)
        except ValueError:
            assert not self.valid(prompt, max_new), f"{rid} was refused although it fits"
            return
        assert self.valid(prompt, max_new), f"{rid} was accepted although it can never run"
        self.requests[rid] = Request(prompt, max_new)

    def abort(self, rid: str) -> None:
        expected = {"waiting": "waiting", "running": "running"}.get(self.requests[rid].status)
        assert self.core.abort(rid) == expected
        if expected:
            self.requests[rid].status = "aborted"
        self.check_state()

    def check_state(self) -> None:
        running = [r for r, q in self.requests.items() if q.status == "running"]
        waiting = [r for r, q in self.requests.items() if q.status == "waiting"]
        assert sorted(self.core.running) == sorted(running) and sorted(self.core.waiting) == sorted(waiting)
        assert {r: self.requests[r].table for r in running} == self.core.block_tables, "a block table changed"
        self.check_pool()

    def check_pool(self) -> None:
        free, cache = self.core.free_block_ids(), set(self.core.cache_block_ids())
        live = [b for table in self.core.block_tables.values() for b in table]
        assert len(free) == len(set(free)), "a block is twice on the free list"
        assert not set(free) & (cache | set(live)), "a free block is also cached or in use"
        assert set(free) | cache | set(live) == set(range(1, self.core.usable_blocks + 1)), "blocks went missing"
        shared = {b for b in live if live.count(b) > 1}
        assert shared <= cache, "two requests share a block that is not a cached prefix block"
        pool = self.core.pool()
        assert pool["free_blocks"] == len(free)
        assert pool["free_blocks"] + pool["cached_blocks"] + pool["used_blocks"] == self.core.usable_blocks
        assert len(cache | set(live)) - len(cache) <= pool["used_blocks"] <= len(cache | set(live))
        if not self.c["prefix_caching"]:
            assert pool["cached_blocks"] == 0 and pool["used_blocks"] == len(live) == len(set(live))

    def check_plan(self, plan: ForwardPlan, before: list[str], waiting: list[str]) -> None:
        assert plan.work, "a step that computes nothing"
        new = [a.request_id for a in plan.admitted]
        assert new == waiting[: len(new)], "admission is not first-come first-served"
        assert self.core.running == before + new, "the running batch lost or reordered a request (preemption)"
        for a in plan.admitted:
            q = self.requests[a.request_id]
            q.status, q.table, q.computed = "running", list(a.blocks), a.cache_len
            assert a.num_blocks == len(a.blocks) == blocks_for(len(q.prompt) + q.max_new_tokens - 1, self.bs)
            assert 0 <= a.cache_len < len(q.prompt)
        self.check_work(plan)
        if plan.decision is not None:
            self.check_budgets(plan, before)
        else:
            assert self.last_was_loop_prefill and not plan.admitted, "an unscheduled forward out of turn"
        self.check_forward_shape(plan, before, new)
        self.last_was_loop_prefill = bool(plan.admitted) and bool(before)
        self.check_state()

    def check_work(self, plan: ForwardPlan) -> None:
        phases = set()
        for w in plan.work:
            q = self.requests[w.request_id]
            assert w.num_computed_tokens == q.computed, f"{w.request_id} lost computed tokens"
            if q.computed < len(q.prompt):
                phases.add("prefill")
                assert 1 <= w.num_tokens <= len(q.prompt) - q.computed
                assert w.samples == (q.computed + w.num_tokens == len(q.prompt))
            else:
                phases.add("decode")
                assert w.num_tokens == 1 and w.samples
        assert plan.kind == (phases.pop() if len(phases) == 1 else "mixed")

    def check_budgets(self, plan: ForwardPlan, before: list[str]) -> None:
        """The call's budgets follow from the running batch: its blocks, and the tokens its next forward computes
        (the running requests' share of this forward; all decodes when they stall)."""
        d, c = plan.decision, self.c
        assert d is not None
        held = sum(len(self.requests[r].table) for r in before) * self.bs
        assert d["token_budget"] == max(0, c["max_batch_total_tokens"] - held)
        if before:
            stalled = bool(plan.stalled)
            current = len(before) if stalled else sum(w.num_tokens for w in plan.work[: len(before)])
            assert d["batch"] == {"size": len(before), "max_tokens": held, "current_tokens": current}
        if before and c["prefill_chunking"]:
            assert d["prefill_token_budget"] == max(0, c["max_batch_prefill_tokens"] - current)
        else:
            assert d["prefill_token_budget"] == c["max_batch_prefill_tokens"]
        first_chunks = sum(w.num_tokens for w in plan.work if w.request_id in {a.request_id for a in plan.admitted})
        assert first_chunks <= _round_up(d["prefill_token_budget"], self.bs)
        if plan.admitted and d["min_size"] is not None:
            assert len(plan.admitted) >= d["min_size"]
        if d["max_size"] is not None:
            assert len(plan.admitted) <= d["max_size"]

    def check_forward_shape(self, plan: ForwardPlan, before: list[str], new: list[str]) -> None:
        c, ids = self.c, [w.request_id for w in plan.work]
        tokens = sum(w.num_tokens for w in plan.work)
        if c["prefill_chunking"] or not before:
            assert ids == before + new and not plan.stalled
            cap = c["max_batch_prefill_tokens"] + (self.bs - 1 if new else 0)
            assert tokens <= max(cap, len(ids)), f"{tokens} tokens in one forward"
        elif new:
            assert ids == new and plan.stalled == before, "without chunking a new batch is prefilled alone"
            assert tokens <= _round_up(c["max_batch_prefill_tokens"], self.bs)
        else:
            assert ids == before and tokens == len(ids)

    def check_update(self, plan: ForwardPlan, finished: list[str], stopped: set[str]) -> None:
        for w in plan.work:
            q = self.requests[w.request_id]
            q.computed += w.num_tokens
            q.sampled += w.samples
            q.stopped = w.request_id in stopped
        assert finished == [w.request_id for w in plan.work if w.request_id in finished], "not in batch order"
        for w in plan.work:
            q = self.requests[w.request_id]
            ends = q.sampled == q.max_new_tokens or q.stopped
            assert (w.request_id in finished) == ends, f"{w.request_id}: sampled {q.sampled} of {q.max_new_tokens}"
            if ends:
                q.status = "finished"
        self.check_state()

    def check_end(self) -> None:
        for rid, q in self.requests.items():
            assert q.status in ("finished", "aborted"), f"{rid} never ended ({q.status})"
            if q.status == "finished":
                assert q.sampled == q.max_new_tokens or (q.stopped and 1 <= q.sampled <= q.max_new_tokens)
        pool = self.core.pool()
        assert pool["used_blocks"] == 0 and pool["free_blocks"] + pool["cached_blocks"] == self.core.usable_blocks


def drive(config: dict, requests: list[dict], seed: int, stop_rate: float, abort_rate: float) -> None:
    rng, core = random.Random(seed), TgiCore(**config)
    checker = Checker(config, core)
    pending = sorted(requests, key=lambda r: r["arrival_step"])
    bound = max(r["arrival_step"] for r in requests) + sum(len(r["prompt"]) + r["max_new_tokens"] for r in requests)
    step = 0
    while pending or core.has_work():
        assert step <= bound, f"still running after {bound} steps"
        if not core.has_work():
            step = max(step, pending[0]["arrival_step"])
        while pending and pending[0]["arrival_step"] <= step:
            r = pending.pop(0)
            checker.add(r["request_id"], r["prompt"], r["max_new_tokens"])
        if checker.requests and rng.random() < abort_rate:
            rid = rng.choice(sorted(checker.requests))
            event(f"abort: {checker.requests[rid].status}")
            checker.abort(rid)
        if not core.has_work():
            continue
        before, waiting = core.running, core.waiting
        plan = core.schedule()
        checker.check_plan(plan, before, waiting)
        _note(plan)
        sampled = {w.request_id: rng.randrange(100) for w in plan.work if w.samples}
        stopped = {r for r in sampled if rng.random() < stop_rate}
        if stopped:
            event("early stop")
        checker.check_update(plan, core.update(plan, sampled, stopped), stopped)
        step += 1
    checker.check_end()


def _note(plan: ForwardPlan) -> None:
    """Tell hypothesis's statistics which behaviours the examples reached (``--hypothesis-show-statistics``)."""
    d = plan.decision or {}
    if (d.get("head") or {}).get("reason"):
        event(f"head: {d['head']['reason']}")
    if any(a.cache_len for a in plan.admitted):
        event("prefix cache hit")
    if any(a.chunk_len for a in plan.admitted):
        event("chunked admission")
    if plan.stalled:
        event("stalled by a prefill")
    if "cache_cleared" in d:
        event("idle deadlock broken")


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from([0.0, 0.1]), st.sampled_from([0.0, 0.05]))
def test_random_workloads_keep_tgis_promises(scenario, stop_rate, abort_rate):
    config, requests, seed = scenario
    drive(config, requests, seed, stop_rate, abort_rate)


def test_a_forward_can_exceed_the_rounded_prefill_budget():
    """TGI's bound on a forward is not ``max_batch_prefill_tokens`` rounded up to a block: a prompt left with one
    token counts 1 in ``current_tokens``, the rest of the budget (31) is rounded up to 32, so the forward computes
    1 + 32 = 33 prompt tokens with a budget of 32 (block 16). The bound is budget + block_size - 1."""
    core = TgiCore(
        max_batch_prefill_tokens=32,
        max_batch_total_tokens=16 * 20,
        max_batch_size=None,
        block_size=16,
        waiting_served_ratio=0.3,
        max_waiting_tokens=20,
        prefix_caching=False,
        prefill_chunking=True,
    )
    core.add_request("X", list(range(33)), 2)
    first = core.schedule()
    assert [(w.num_tokens, w.samples) for w in first.work] == [(32, False)]
    core.update(first, {})
    core.add_request("Y", list(range(100, 140)), 2)
    plan = core.schedule()
    assert plan.decision is not None and plan.decision["prefill_token_budget"] == 31
    assert [(w.request_id, w.num_tokens) for w in plan.work] == [("X", 1), ("Y", 32)]


def test_the_checker_can_fail():
    """The model above rejects a core that drops a request's blocks early (one corrupted step)."""
    config = {
        "max_batch_prefill_tokens": 16,
        "max_batch_total_tokens": 64,
        "max_batch_size": None,
        "block_size": 4,
        "waiting_served_ratio": 0.3,
        "max_waiting_tokens": 20,
        "prefix_caching": False,
        "prefill_chunking": True,
    }
    core = TgiCore(**config)
    checker = Checker(config, core)
    checker.add("a", [1, 2, 3, 4, 5], 4)
    plan = core.schedule()
    checker.check_plan(plan, [], ["a"])
    core._running[0].allocation.blocks.pop()  # a block vanishes from the request
    with pytest.raises(AssertionError):
        checker.check_state()
