"""Property tests (hypothesis): the scheduler's rules hold on random workloads and configs, and the real runner's
greedy outputs equal transformers ``generate`` on random ones.

The scheduler property replays every run against an independent model of the rules in
``batchscope/scheduling/scheduler.py`` and ``README.md`` (a waiting queue, a running list, per-request progress),
written here from the rules and not from the code, and checks the trace and the scheduler's own free list step by step.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
from conftest import examples, hf_greedy, step_records
from fakes import EOS, FakeRunner, make_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine, RequestError
from batchscope.engine.request import Request, SamplingParams
from batchscope.steplog.checks import check_records

BATCHING_MODES = ("continuous", "static")


@dataclass(frozen=True)
class Spec:
    """One random request: ``natural`` is the output length at which the fake model emits EOS (None: never)."""

    rid: str
    prompt: int
    max_tokens: int
    arrival: int
    natural: int | None
    ignore_eos: bool

    @property
    def expected_len(self) -> int:
        stops = self.natural is not None and not self.ignore_eos and self.natural <= self.max_tokens
        return self.natural if stops else self.max_tokens

    @property
    def expected_reason(self) -> str:
        stops = self.natural is not None and not self.ignore_eos and self.natural <= self.max_tokens
        return "stop" if stops else "length"


@dataclass(frozen=True)
class Workload:
    specs: tuple[Spec, ...]
    config: EngineConfig

    def fcfs(self) -> list[str]:
        """Arrival order: by arrival step, then list order (the engine's stable sort)."""
        return [s.rid for s in sorted(self.specs, key=lambda s: (s.arrival, self.specs.index(s)))]


def fits_alone(prompt: int, max_tokens: int, block_size: int, num_kv_blocks: int) -> bool:
    """A request keeps at most prompt + max_tokens - 1 tokens of K/V (the last sampled token is never fed back)."""
    return math.ceil((prompt + max_tokens - 1) / block_size) <= num_kv_blocks


@st.composite
def workloads(draw) -> Workload:
    """Small valid workloads: every request could finish alone in the pool; without chunking, prompts fit the budget.

    Pools are drawn just above the largest single request so that preemption is frequent.
    """
    block_size = draw(st.integers(1, 8))
    chunked = draw(st.booleans())
    specs = []
    for i in range(draw(st.sampled_from(range(1, 7)))):  # uniform: crowded workloads are where preemption happens
        max_tokens = draw(st.integers(1, 10))
        specs.append(
            Spec(
                rid=f"r{i}",
                prompt=draw(st.integers(1, 20)),
                max_tokens=max_tokens,
                arrival=draw(st.just(0) | st.integers(0, 5)),
                natural=draw(st.none() | st.integers(1, max_tokens + 2)),
                ignore_eos=draw(st.booleans()),
            )
        )
    need = max(math.ceil((s.prompt + s.max_tokens - 1) / block_size) for s in specs)
    budget = draw(st.integers(1, 24))
    if not chunked:
        budget = max(budget, max(s.prompt for s in specs))
    config = EngineConfig(
        batching=draw(st.sampled_from(BATCHING_MODES)),
        max_num_seqs=draw(st.sampled_from(range(1, 6))),
        max_num_batched_tokens=budget,
        block_size=block_size,
        num_kv_blocks=need + draw(st.integers(0, 1) | st.integers(0, 12)),
        enable_chunked_prefill=chunked,
        reserve_full_prompt=draw(st.booleans()),
        enable_prefix_caching=False,  # prefix caching has its own properties (test_prefix_cache_properties.py)
    )
    return Workload(tuple(specs), config)


def finish_bounds(w: Workload) -> dict[str, int]:
    """Last step by which each request must have finished.

    Why this bound holds (no starvation, no livelock): call the first request of the running list the *head*.
    (1) Every step from a request r's arrival until r finishes has a head that computes at least one token: the
    head is scheduled first, so it gets the whole budget (>= 1 token; without chunking a fresh prompt fits the
    budget by validation), and if it lacks a block the scheduler preempts the others from the back of the list
    until it fits, which it does alone because a request that could not finish alone is rejected up front. When
    nobody runs, the head of the waiting queue is admitted onto an empty pool and a full budget.
    (2) The head is never preempted and stays head until it finishes, and while it is head it computes at most
    prompt + max_tokens - 1 tokens (its K/V, recomputation included), so it is head for at most that many steps.
    (3) While r is unfinished, the head is r or a request ahead of r in arrival order: admissions are FCFS and a
    preempted request goes back to the front of the queue, behind nobody who arrived after it.
    Hence r finishes by step arrival(r) + sum over requests j up to r in FCFS order of (prompt_j + max_tokens_j
    - 1) - 1. Static batching keeps (1)-(3): it reserves worst-case blocks, so its head never lacks one.
    """
    order = w.fcfs()
    by_id = {s.rid: s for s in w.specs}
    bounds, work = {}, 0
    for rid in order:
        s = by_id[rid]
        work += s.prompt + s.max_tokens - 1
        bounds[rid] = s.arrival + work - 1
    return bounds


class CheckingRunner(FakeRunner):
    """The fake runner, plus: records the scheduler's free list at every step, and stops a run that goes past the
    step bound (a livelocked or deadlocked scheduler would otherwise hang the test instead of failing it)."""

    def __init__(self, natural_lengths: dict[str, int], max_steps: int):
        super().__init__(natural_lengths)
        self.max_steps = max_steps
        self.engine: LLMEngine | None = None
        self.free_lists: list[list[int]] = []

    def execute(self, out, block_tables):
        if len(self.steps) >= self.max_steps:
            raise AssertionError(f"no progress: still running after {self.max_steps} steps (livelock or starvation)")
        self.free_lists.append(self.engine.scheduler.block_manager.pool.free_queue())
        return super().execute(out, block_tables)


def run_workload(w: Workload):
    """Run ``w`` on the checking fake runner; returns (step records, summary by id, runner)."""
    bound = max(finish_bounds(w).values()) + 1
    runner = CheckingRunner({s.rid: s.natural for s in w.specs if s.natural is not None}, max_steps=bound)
    requests = [
        make_request(s.rid, s.prompt, s.max_tokens, arrival_step=s.arrival, ignore_eos=s.ignore_eos) for s in w.specs
    ]
    engine = LLMEngine(runner, w.config, eos_token_ids={EOS})
    runner.engine = engine
    records = engine.run(requests)
    check_records(records)  # the trace checks (times, ids, slots, blocks, tokens) hold for every run the engine makes
    return step_records(records), {r["request_id"]: r for r in records[-1]["requests"]}, runner


def check_run(w: Workload, steps: list[dict], summary: dict[str, dict], free_lists: list[list[int]]) -> None:
    """Replay the trace against a model of the scheduling rules; assert every invariant at every step."""
    cfg = w.config
    spec = {s.rid: s for s in w.specs}
    order = w.fcfs()
    bs, nb, budget, max_seqs = cfg.block_size, cfg.num_kv_blocks, cfg.max_num_batched_tokens, cfg.max_num_seqs
    static = cfg.batching == "static"

    computed = {rid: 0 for rid in order}  # tokens with K/V (model of num_computed_tokens)
    n_out = {rid: 0 for rid in order}  # tokens sampled so far
    preemptions = {rid: 0 for rid in order}
    high = {rid: 0 for rid in order}  # most tokens it ever held K/V for: below it, a chunk recomputes
    dropped = {rid: 0 for rid in order}
    recomputed = {rid: 0 for rid in order}
    queue: list[str] = []  # waiting queue, front first
    running: list[str] = []  # admission order
    batch: list[str] = []  # static: members of the current batch, finished ones included
    finished_at: dict[str, int] = {}
    first_admitted: list[str] = []
    first_scheduled: dict[str, int] = {}
    admitted_at: dict[str, list[int]] = {rid: [] for rid in order}
    preempted_at: dict[str, list[int]] = {rid: [] for rid in order}
    prev_tables: dict[str, list[int]] = {}

    prev_step = -1
    for rec, free in zip(steps, free_lists):
        s = rec["step"]
        idle = rec.get("idle_steps_before", 0)
        assert s == prev_step + 1 + idle
        if idle:  # the clock jumped over empty steps: only when nobody was left, and straight to the next arrival
            assert not queue and not running and s in {spec[rid].arrival for rid in order}
            assert not any(prev_step < spec[rid].arrival < s for rid in order)
        prev_step = s
        queue += [rid for rid in order if spec[rid].arrival == s]  # arrivals come before the step is scheduled

        # -- budget, max_num_seqs, slots --------------------------------------------------------------------
        sched = rec["scheduled"]
        assert all(x["num_tokens"] >= 1 for x in sched)
        assert rec["num_batched_tokens"] == sum(x["num_tokens"] for x in sched) <= budget
        assert len(rec["running"]) <= max_seqs
        rows = [x["slot"] for x in sched] + [p["slot"] for p in rec["padding_slots"]]
        assert len(rows) == len(set(rows)) and all(0 <= r < max_seqs for r in rows), "two rows share a slot"
        assert len({x["request_id"] for x in sched}) == len(sched), "a request scheduled twice in one step"

        # -- queue discipline: preemption victims, FCFS admissions -----------------------------------------
        pre, adm = rec["preempted"], rec["admitted"]
        if static:
            assert not pre, "static batching reserves worst-case blocks and must never preempt"
            assert not (adm and running), "a static batch forms only when the previous one has completely finished"
            if not running:  # the previous batch has ended (its padding rows go with it)
                batch = []
        else:
            assert not (pre and adm), "no admissions in a step that preempted"
        # victims are the most recently admitted running requests, newest first
        assert pre == list(reversed(running))[: len(pre)], (pre, running)
        for rid in pre:
            running.remove(rid)
            high[rid] = max(high[rid], computed[rid])
            dropped[rid] += computed[rid]
            computed[rid] = 0
            preemptions[rid] += 1
            preempted_at[rid].append(s)
            prev_tables.pop(rid, None)
        # admissions take a prefix of the queue: nobody overtakes the head (strict FCFS)
        assert adm == queue[: len(adm)], f"step {s}: admitted {adm} but the queue was {queue}"
        queue = list(reversed(pre)) + queue[len(adm) :]  # preempted requests go back to the front
        assert rec["waiting"] == queue, (s, rec["waiting"], queue)
        for rid in adm:
            if not admitted_at[rid]:
                first_admitted.append(rid)
            admitted_at[rid].append(s)
        running += adm
        batch += adm if static else []
        assert len(running) <= max_seqs
        assert rec["running"] == running, (s, rec["running"], running)
        if queue and not running:
            raise AssertionError(f"step {s}: requests wait while nothing runs (deadlock)")

        # -- work of each scheduled request ------------------------------------------------------------------
        ids = [x["request_id"] for x in sched]
        assert set(ids) <= set(running)
        if not static:
            assert ids[len(ids) - len(adm) :] == adm, "admitted requests are scheduled at once, after the running ones"
        if running:
            assert ids and ids[0] == running[0], "the head of the running list computes every step"
        used = 0
        expect_sampled = set()
        for x in sched:
            rid, n, sp = x["request_id"], x["num_tokens"], spec[x["request_id"]]
            first_scheduled.setdefault(rid, s)
            known = sp.prompt + n_out[rid]
            new = known - computed[rid]
            assert x["num_computed_tokens"] == computed[rid], (s, rid, x, computed[rid])
            fresh = computed[rid] == 0 and preemptions[rid] == 0
            if fresh and not cfg.enable_chunked_prefill:
                assert n == sp.prompt, "chunked prefill off: a fresh prompt runs whole"
            else:
                assert n == min(new, budget - used), (s, rid, n, new, budget - used)  # all it lacks, or a chunk
            used += n
            samples = computed[rid] + n == known
            kind = "decode" if n == 1 and n_out[rid] > 0 and samples else "prefill"
            redo = max(0, min(computed[rid] + n, high[rid]) - computed[rid])  # tokens of the chunk that had K/V
            recomputed[rid] += redo
            assert x["kind"] == kind and x["recompute"] == (kind == "prefill" and redo > 0)
            computed[rid] += n
            if samples:
                expect_sampled.add(rid)
        assert {x["request_id"] for x in rec["sampled"]} == expect_sampled

        # -- KV blocks: conserved, singly owned, ceil(tokens / block_size) each, tables only grow -------------
        kv = rec["kv"]
        tables = kv["block_tables"]
        owned = [b for t in tables.values() for b in t]
        assert len(owned) == len(set(owned)), "a block has two owners"
        assert all(0 <= b < nb for b in owned)
        assert kv["num_used_blocks"] == len(owned)
        assert len(owned) + len(free) == nb, "blocks leaked (used + free != total)"
        assert set(owned).isdisjoint(free) and set(owned) | set(free) == set(range(nb))
        assert set(tables) <= set(running), "a request that is not running holds blocks"
        for rid in running:
            table = tables.get(rid, [])
            assert len(table) == math.ceil(computed[rid] / bs), (s, rid, table, computed[rid])
            before = prev_tables.get(rid, [])
            assert table[: len(before)] == before, "a running request's blocks moved"
            assert kv["allocated"].get(rid, []) == table[len(before) :]
        prev_tables = {rid: list(t) for rid, t in tables.items()}
        if not static:
            check_admission_memory(w, rec, queue, running, n_out, preemptions, len(free), used)

        # -- sampling, finishing, padding ------------------------------------------------------------------
        if static:
            expected_padding = {rid for rid in batch if rid in finished_at}
            assert {p["request_id"] for p in rec["padding_slots"]} == expected_padding
        else:
            assert not rec["padding_slots"]
        finished_now = []
        for x in rec["sampled"]:
            rid, sp = x["request_id"], spec[x["request_id"]]
            n_out[rid] += 1
            eos = sp.natural is not None and n_out[rid] == sp.natural
            assert x["token_id"] == (EOS if eos else 7)
            if eos and not sp.ignore_eos:
                finished_now.append((rid, "stop"))
            elif n_out[rid] == sp.max_tokens:
                finished_now.append((rid, "length"))
        assert [(f["request_id"], f["reason"]) for f in rec["finished"]] == finished_now
        for rid, _ in finished_now:
            finished_at[rid] = s
            running.remove(rid)
            prev_tables.pop(rid, None)

    # -- the end: everyone finished, with the right outputs, within the bound ---------------------------------
    assert not queue and not running
    assert set(finished_at) == set(order), f"never finished: {set(order) - set(finished_at)}"
    assert steps[-1]["step"] == max(finished_at.values()), "the engine ran steps after everyone finished"
    bounds = finish_bounds(w)
    for rid in order:
        sp, out = spec[rid], summary[rid]
        assert finished_at[rid] <= bounds[rid], f"{rid} finished at step {finished_at[rid]} > bound {bounds[rid]}"
        assert len(out["output_token_ids"]) == sp.expected_len == n_out[rid]
        assert out["finish_reason"] == sp.expected_reason
        assert out["num_preemptions"] == preemptions[rid] == len(preempted_at[rid])
        assert (out["num_dropped_tokens"], out["num_recomputed_tokens"]) == (dropped[rid], recomputed[rid])
        # every preemption is followed by a re-admission (and the request finishes, checked above)
        for p_step in preempted_at[rid]:
            assert any(a > p_step for a in admitted_at[rid]), f"{rid} preempted at {p_step} never came back"
    # first admissions follow arrival order exactly (FCFS, ties by list order)
    assert first_admitted == order
    # first scheduled steps respect arrival order; the one documented exception is a static batch without
    # chunking, where a member whose whole prompt does not fit the budget left waits while later members of the
    # same (already admitted) batch prefill
    for a, b in itertools.pairwise(order):
        if first_scheduled[a] > first_scheduled[b]:
            assert static and not cfg.enable_chunked_prefill and admitted_at[a][0] == admitted_at[b][0], (a, b)


def check_admission_memory(w, rec, queue, running, n_out, preemptions, num_free: int, used: int) -> None:
    """Continuous batching, caching off: each admitted request fit when admitted, by the configured rule (its whole
    known sequence with ``reserve_full_prompt``, else its first chunk); and a head left waiting in a step that
    preempted nobody, with a row and budget left, did not fit."""
    cfg, spec = w.config, {s.rid: s for s in w.specs}
    bs, budget = cfg.block_size, cfg.max_num_batched_tokens
    tables, adm = rec["kv"]["block_tables"], rec["admitted"]
    free = num_free + sum(len(tables[r]) for r in adm)  # free blocks before the first admission of the step
    for rid in adm:
        n = next(x["num_tokens"] for x in rec["scheduled"] if x["request_id"] == rid)
        need = spec[rid].prompt + n_out[rid] if cfg.reserve_full_prompt else n
        assert math.ceil(need / bs) <= free, (rec["step"], rid, need, free)
        free -= len(tables[rid])
    if not queue or rec["preempted"] or len(running) >= cfg.max_num_seqs or used >= budget:
        return
    head = queue[0]
    known = spec[head].prompt + n_out[head]
    left = budget - used
    # chunking off: a prompt, or a comeback's recompute, runs whole (vLLM), unless the comeback exceeds the whole budget
    split = cfg.enable_chunked_prefill or (preemptions[head] and known > budget)
    n = known if known <= left else (left if split else 0)
    if n:
        need = known if cfg.reserve_full_prompt else n
        assert math.ceil(need / bs) > free, f"step {rec['step']}: head {head} fit ({need} tokens, {free} free)"


@settings(max_examples=examples(2000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads())
def test_scheduler_invariants_on_random_workloads(w: Workload):
    """Budget, max_num_seqs, block conservation and ownership, ceil(tokens / block_size) blocks per request, FCFS
    admissions, preemption victims and returns, output lengths and the finish bound, at every step of random runs
    under both batching modes."""
    steps, summary, runner = run_workload(w)
    assert len(runner.steps) == len(steps)
    check_run(w, steps, summary, runner.free_lists)


# -- validation ----------------------------------------------------------------------------------------------------


@settings(max_examples=examples(500), deadline=None)
@given(
    prompt=st.integers(0, 30),
    max_tokens=st.integers(1, 12),
    block_size=st.integers(1, 8),
    num_kv_blocks=st.integers(1, 12),
    budget=st.integers(1, 30),
    chunked=st.booleans(),
    batching=st.sampled_from(BATCHING_MODES),
)
def test_request_error_iff_request_could_never_run(
    prompt, max_tokens, block_size, num_kv_blocks, budget, chunked, batching
):
    """A request is rejected up front exactly when it could never run: empty prompt, K/V that would not fit the
    whole pool even alone, or (chunked prefill off) a prompt over the budget; a valid one runs to max_tokens."""
    config = EngineConfig(
        batching=batching,
        max_num_seqs=2,
        max_num_batched_tokens=budget,
        block_size=block_size,
        num_kv_blocks=num_kv_blocks,
        enable_chunked_prefill=chunked,
    )
    valid = prompt >= 1 and fits_alone(prompt, max_tokens, block_size, num_kv_blocks) and (chunked or prompt <= budget)
    runner = FakeRunner()
    engine = LLMEngine(runner, config, eos_token_ids={EOS})
    if valid:
        records = engine.run([make_request("x", prompt, max_tokens)])
        assert len(records[-1]["requests"][0]["output_token_ids"]) == max_tokens
    else:
        with pytest.raises(RequestError, match="'x'"):
            engine.run([make_request("x", prompt, max_tokens)])
        assert runner.steps == []


@settings(max_examples=examples(200), deadline=None)
@given(w=workloads(), data=st.data())
def test_one_bad_request_rejects_the_whole_run_before_any_step(w: Workload, data):
    """An invalid request anywhere in a workload raises RequestError naming it, and no step runs at all."""
    cfg = w.config
    kind = data.draw(st.sampled_from(["empty", "pool"] + ([] if cfg.enable_chunked_prefill else ["budget"])))
    if kind == "empty":
        bad = make_request("bad", 0, 1)
    elif kind == "pool":  # one token more than the whole pool holds
        bad = make_request("bad", cfg.num_kv_blocks * cfg.block_size, 2)
    else:
        bad = make_request("bad", cfg.max_num_batched_tokens + 1, 1)
    requests = [make_request(s.rid, s.prompt, s.max_tokens, arrival_step=s.arrival) for s in w.specs]
    requests.insert(data.draw(st.integers(0, len(requests))), bad)
    runner = FakeRunner()
    with pytest.raises(RequestError, match="'bad'"):
        LLMEngine(runner, cfg, eos_token_ids={EOS}).run(requests)
    assert runner.steps == []


# -- hand-computed examples: the checker itself, and a regression -----------------------------------------------


def test_checker_rejects_a_wrong_trace():
    """The replay model is not vacuous: a trace with one admission swapped out of FCFS order fails it."""
    w = Workload(
        (Spec("a", 4, 2, 0, None, False), Spec("b", 4, 2, 0, None, False)),
        EngineConfig(max_num_seqs=1, max_num_batched_tokens=8, block_size=4, num_kv_blocks=4),
    )
    steps, summary, runner = run_workload(w)
    check_run(w, steps, summary, runner.free_lists)
    # by hand: one slot, so a prefills (step 0) and decodes (step 1), then b does the same
    assert [st["admitted"] for st in steps] == [["a"], [], ["b"], []]
    broken = [dict(st) for st in steps]
    broken[0]["admitted"], broken[2]["admitted"] = ["b"], ["a"]
    with pytest.raises(AssertionError):
        check_run(w, broken, summary, runner.free_lists)


class FakeClock:
    """Stands in for ``time`` in ``batchscope.engine.engine``: ``sleep`` advances the clock at once (no real
    waiting)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def process_time(self) -> float:  # the engine's CPU-share measure: the fake clock spends no CPU
        return 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_step_clock_arrival_does_not_wait_behind_a_later_wall_clock_one(monkeypatch):
    """Regression: B (arrival_step 0) and A (arrival_time 5 s) in one workload. B is due before step 0 and must
    run then; the engine used to look only at the head of its arrival list (A, not yet due), so B waited 5 s
    and was admitted together with A. By hand: B prefills at step 0 and finishes at step 1 (2 tokens), the
    engine idles until 5 s, and A runs in steps 2 and 3."""
    import batchscope.engine.engine as engine_module

    clock = FakeClock()
    monkeypatch.setattr(engine_module, "time", clock)
    a = make_request("A", 3, 2, arrival_step=None)
    a.arrival_time = 5.0
    b = make_request("B", 3, 2, arrival_step=0)
    records = LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8), eos_token_ids={EOS}).run([a, b])
    steps, summary = step_records(records), {r["request_id"]: r for r in records[-1]["requests"]}
    assert [(st["step"], st["t_start"], st["admitted"]) for st in steps] == [
        (0, 0.0, ["B"]),
        (1, 0.0, []),
        (2, 5.0, ["A"]),
        (3, 5.0, []),
    ]
    assert (summary["B"]["arrival_time"], summary["B"]["finish_time"]) == (0.0, 0.0)
    assert summary["A"]["first_scheduled_time"] == 5.0


# -- real runner on the tiny random model -------------------------------------------------------------------------

_REFERENCES: dict[tuple[tuple[int, ...], int], list[int]] = {}
TINY_EOS = 1  # the tiny model's eos_token_id


@st.composite
def tiny_workloads(draw):
    """Random token prompts (ids 2..127, so neither pad nor EOS), lengths, arrivals and configs for the tiny model."""
    block_size = draw(st.integers(1, 8))
    chunked = draw(st.booleans())
    reqs = []
    stem = draw(st.lists(st.integers(2, 127), max_size=16))  # a shared prefix: prefix caching reuses its blocks
    for i in range(draw(st.sampled_from(range(2, 5)))):  # one request alone is covered by test_runner_tiny
        own = draw(st.lists(st.integers(2, 127), min_size=1, max_size=24))
        prompt = (stem[: draw(st.integers(0, len(stem)))] + own)[:24]
        reqs.append((f"r{i}", prompt, draw(st.integers(1, 8)), draw(st.just(0) | st.integers(0, 3))))
    need = max(math.ceil((len(p) + m - 1) / block_size) for _, p, m, _ in reqs)
    budget = draw(st.integers(1, 8) | st.integers(16, 64))  # small: chunked prefills next to decodes
    if not chunked:
        budget = max(budget, max(len(p) for _, p, _, _ in reqs))
    config = EngineConfig(
        batching=draw(st.sampled_from(BATCHING_MODES)),
        max_num_seqs=draw(st.sampled_from(range(1, 5))),
        max_num_batched_tokens=budget,
        block_size=block_size,
        num_kv_blocks=need + draw(st.integers(0, 1) | st.integers(4, 24)),  # tight: preemption
        enable_chunked_prefill=chunked,
        enable_prefix_caching=draw(st.booleans()),
        reserve_full_prompt=draw(st.booleans()),
    )
    return reqs, config


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=tiny_workloads())
def test_real_runner_greedy_equals_generate(tiny_model, w):
    """Whatever the batching (mode, budget, chunks, block size, pool size, preemption, prefix caching on shared
    prefixes, admission rule), each request's greedy output equals transformers ``generate`` on that request alone,
    EOS stop included."""
    from batchscope.model.runner import ModelRunner

    reqs, config = w
    requests = [Request(rid, list(p), SamplingParams(max_tokens=m), arrival_step=a) for rid, p, m, a in reqs]
    records = LLMEngine(ModelRunner(tiny_model, config), config, eos_token_ids={TINY_EOS}).run(requests)
    summary = {r["request_id"]: r for r in records[-1]["requests"]}
    for rid, prompt, max_tokens, _ in reqs:
        key = (tuple(prompt), max_tokens)
        if key not in _REFERENCES:
            _REFERENCES[key] = hf_greedy(tiny_model, prompt, max_tokens, eos_token_id=TINY_EOS)
        assert summary[rid]["output_token_ids"] == _REFERENCES[key], (rid, config)
