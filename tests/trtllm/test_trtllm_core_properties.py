"""Property tests of ``TrtllmCore`` on random workloads: prompts with shared prefixes, random lengths and arrivals,
early stops and aborts, every capacity policy, chunking and block reuse on and off. The checks read the plans and
the pool independently of the core's own bookkeeping (an engine's view: what it was told to run, what it sampled)."""

from __future__ import annotations

from dataclasses import dataclass, field

from conftest import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from batchscope.scheduling.forward_plan import ForwardPlan
from batchscope.trtllm_family.core import TrtllmCore


@dataclass
class Spec:
    request_id: str
    prompt: list[int]
    max_new_tokens: int
    arrival: int
    stop_after: int | None = None  # sampled an end-of-sequence token after this many tokens
    abort_at: int | None = None  # the engine aborts it at this step


@dataclass
class Workload:
    config: dict
    specs: list[Spec]


@st.composite
def workloads(draw) -> Workload:
    tpb = draw(st.integers(1, 6))
    chunked = draw(st.booleans())
    unit = draw(st.integers(1, 8))
    prefixes = [draw(st.lists(st.integers(0, 5), min_size=0, max_size=14)) for _ in range(2)]
    specs = []
    for i in range(draw(st.integers(1, 7))):
        prefix = prefixes[draw(st.integers(0, 1))][: draw(st.integers(0, 14))]
        prompt = prefix + draw(st.lists(st.integers(0, 5), min_size=1 if not prefix else 0, max_size=10))
        spec = Spec(f"r{i}", prompt, draw(st.integers(1, 12)), draw(st.integers(0, 12)))
        if draw(st.integers(0, 4)) == 0:
            spec.stop_after = draw(st.integers(1, spec.max_new_tokens))
        if draw(st.integers(0, 6)) == 0:
            spec.abort_at = spec.arrival + draw(st.integers(0, 10))
        specs.append(spec)
    longest = max(len(s.prompt) + s.max_new_tokens for s in specs)
    peak_blocks = -(-longest // tpb)
    min_tokens = unit if chunked else longest  # without chunking a (folded) prompt must fit the budget whole
    config = {
        "max_batch_size": draw(st.integers(1, 5)),
        "max_num_tokens": draw(st.integers(min_tokens, min_tokens + 24)),
        "tokens_per_block": tpb,
        "num_blocks": peak_blocks + draw(st.sampled_from([0, 0, 1, 2, 4, 8, 20])),  # mostly tight
        "capacity_policy": draw(st.sampled_from(["guaranteed_no_evict", "max_utilization", "static_batch"])),
        "enable_chunked_context": chunked,
        "context_chunking": draw(st.sampled_from(["fcfs", "equal_progress"])),
        "chunk_unit_size": unit,
        "enable_block_reuse": draw(st.booleans()),
    }
    return Workload(config, specs)


@dataclass
class Engine:
    """The engine's side: who generates, the tokens each request got, what finished."""

    core: TrtllmCore
    got: dict[str, int] = field(default_factory=dict)  # tokens sampled per request, across pauses
    generating: set[str] = field(default_factory=set)  # sampled at least once since it last (re)started
    finished: dict[str, int] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)


def check_pool(core: TrtllmCore) -> None:
    pool = core.pool()
    num_blocks = core.manager.num_blocks
    assert pool["free_blocks"] + pool["cached_blocks"] + pool["used_blocks"] == num_blocks
    held = {b for table in core.block_tables.values() for b in table}
    assert len(held) == pool["used_blocks"], "the used blocks are exactly those the requests hold"
    assert held <= set(range(num_blocks))
    assert set(core.block_tables) == set(core.running)
    core.manager.check()


def check_plan(engine: Engine, plan: ForwardPlan, running_before: list[str], config: dict) -> None:
    core, policy = engine.core, config["capacity_policy"]
    assert len(plan.work) <= config["max_batch_size"]
    assert sum(w.num_tokens for w in plan.work) <= config["max_num_tokens"]
    assert len({w.request_id for w in plan.work}) == len(plan.work)
    assert plan.stalled == []
    assert not plan.decision["stuck"] and plan.decision["never_fits"] == []
    tpb = config["tokens_per_block"]
    for work in plan.work:
        assert len(core.block_tables[work.request_id]) * tpb >= work.num_computed_tokens + work.num_tokens
    if policy != "max_utilization":
        assert plan.paused == []
    else:  # an independent reading: the victims are the last started requests of the list, from its end
        victims = [p.request_id for p in plan.paused]
        assert victims == list(reversed(running_before))[: len(victims)]
    if policy == "static_batch" and plan.admitted:
        assert not (engine.generating & set(running_before)), "a new batch started while one generates"
    for pause in plan.paused:
        engine.generating.discard(pause.request_id)
        event("a request was paused")
    if any(a.cache_len for a in plan.admitted):
        event("a context reused cached blocks")
    if any(a.chunk_len is not None for a in plan.admitted):
        event("a prompt was chunked")
    if plan.decision["skipped_for_reuse"]:
        event("a context waited to reuse a block being written")


def step(engine: Engine, specs: dict[str, Spec], config: dict) -> None:
    core = engine.core
    running_before = core.running
    plan = core.schedule()
    check_pool(core)
    check_plan(engine, plan, running_before, config)
    sampled = {w.request_id: engine.got.get(w.request_id, 0) % 7 for w in plan.work if w.samples}
    stopped = set()
    for rid in sampled:
        engine.got[rid] = engine.got.get(rid, 0) + 1
        engine.generating.add(rid)
        if engine.got[rid] == specs[rid].stop_after:
            stopped.add(rid)
    finished = core.update(plan, sampled, stopped)
    assert finished == [w.request_id for w in plan.work if w.request_id in set(finished)], "batch order"
    for rid in finished:
        engine.finished[rid] = engine.got[rid]
        engine.generating.discard(rid)
        engine.stopped |= stopped & {rid}
    check_pool(core)


def run(workload: Workload) -> Engine:
    config, specs = workload.config, {s.request_id: s for s in workload.specs}
    engine = Engine(TrtllmCore(**config))
    pending = sorted(workload.specs, key=lambda s: s.arrival)
    bound = 50 + max(s.arrival for s in pending) + sum(len(s.prompt) + s.max_new_tokens for s in pending) * len(pending)
    clock = aborted = 0
    while pending or engine.core.has_work():
        if not engine.core.has_work() and pending[0].arrival > clock:
            clock = pending[0].arrival  # nothing active: the engine jumps its clock
        while pending and pending[0].arrival <= clock:
            spec = pending.pop(0)
            engine.core.add_request(spec.request_id, spec.prompt, spec.max_new_tokens)
        for spec in workload.specs:
            if spec.abort_at == clock and engine.core.abort(spec.request_id) is not None:
                aborted += 1
                engine.generating.discard(spec.request_id)
        if engine.core.has_work():
            step(engine, specs, config)
        clock += 1
        assert clock <= bound, f"no progress within {bound} steps"
    assert len(engine.finished) + aborted == len(workload.specs)
    return engine


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_core_runs_every_workload_to_completion(workload):
    engine = run(workload)
    specs = {s.request_id: s for s in workload.specs}
    for rid, tokens in engine.finished.items():
        if rid in engine.stopped:
            assert tokens == specs[rid].stop_after
        else:
            assert tokens == specs[rid].max_new_tokens, f"{rid} got {tokens} of {specs[rid].max_new_tokens}"
    pool = engine.core.pool()
    assert pool["used_blocks"] == 0 and pool["reserved_blocks"] >= 0
