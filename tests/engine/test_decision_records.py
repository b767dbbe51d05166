"""Decision records: what the scheduler records where it decides equals what ``batchscope.steplog.inference`` derives
from the log alone, on the shipped workloads and on random ones; and a preemption's cost, hand-computed, is told
honestly.

The two sides are independent: the records come from the engine's own state (``batchscope.scheduling.scheduler``), the
inference from the trace's queues, block tables and token counts, with the scheduling rules written again from
README.md.
"""

from __future__ import annotations

import copy
import json
import warnings

import pytest
from conftest import RECORDED_TRACES, ROOT, examples, step_records
from fakes import FakeRunner, make_request, rerun, run_fake
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.steplog import trace
from batchscope.steplog.decisions import decisions, preemption_cost
from batchscope.steplog.inference import infer_all
from batchscope.steplog.metrics import summarize
from batchscope.steplog.view import TraceView

# batchscope.steplog.inference rebuilds the vLLM-style schedulers' decisions (static, continuous); the other families'
# traces record theirs, which their own references check (tests_sglang: SGLang's scheduler; tests/tgi, tests/trtllm
# and the engine's replays of TGI's and NVIDIA's schedules).
VLLM_STYLE = [p for p in RECORDED_TRACES if trace.read(p)[0]["policy"] in ("static", "continuous")]

VARIANTS = {
    "as recorded": {},
    "caching off": {"enable_prefix_caching": False},
    "first-chunk rule": {"reserve_full_prompt": False},
    "chunking off": {"enable_chunked_prefill": False, "max_num_batched_tokens": 512},
}


def assert_inference_reproduces(records: list[dict]) -> None:
    """Strip the recorded decisions; the inference alone must give them back, step by step."""
    stripped = copy.deepcopy(records)
    for st_ in step_records(stripped):
        del st_["decisions"]
    view = TraceView(stripped)
    inferred = [d for d, st in zip(infer_all(view), view.steps, strict=True) if not st.get("idle")]  # idle: none
    assert len(inferred) == len(records) - 2
    for k, (step, got) in enumerate(zip(step_records(records), inferred)):
        assert got.pop("inferred") is True
        assert got == step["decisions"], f"step {k}: inferred {got} != recorded {step['decisions']}"


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("path", VLLM_STYLE, ids=[p.stem for p in VLLM_STYLE])
def test_inference_reproduces_the_recorded_decisions_of_every_shipped_workload(path, variant):
    assert_inference_reproduces(rerun(path, **VARIANTS[variant]))


@st.composite
def workloads(draw):
    """Random small workloads: shared prefixes (a 2-letter alphabet and a common start), priorities, tiny pools."""
    block_size = draw(st.integers(1, 4))
    chunked = draw(st.booleans())
    common = draw(st.lists(st.integers(10, 11), max_size=8))
    specs = []
    for i in range(draw(st.integers(1, 6))):
        prompt = common + draw(st.lists(st.integers(10, 11), min_size=1, max_size=10))
        specs.append((f"r{i}", prompt, draw(st.integers(1, 12)), draw(st.integers(0, 3)), draw(st.integers(0, 2))))
    need = max(-(-(len(p) + m - 1) // block_size) for _, p, m, _, _ in specs)
    budget = draw(st.integers(1, 16))
    if not chunked:
        budget = max(budget, max(len(p) for _, p, _, _, _ in specs))
    config = EngineConfig(
        batching=draw(st.sampled_from(("continuous", "static"))),
        max_num_seqs=draw(st.integers(1, 4)),
        max_num_batched_tokens=budget,
        block_size=block_size,
        num_kv_blocks=need + draw(st.integers(0, 1) | st.integers(0, 6)),  # tight pools: preemptions
        enable_chunked_prefill=chunked,
        scheduling_policy=draw(st.sampled_from(("fcfs", "priority"))),
        enable_prefix_caching=draw(st.booleans()),
        reserve_full_prompt=draw(st.booleans()),
    )
    natural = {rid: draw(st.integers(1, 14)) for rid, *_ in specs}
    return specs, config, natural


# found by hypothesis: under priority the victim (r4) had already been given a block in this step; freeing it
# must give that block back too (5 blocks for 4 tokens of K/V), or the replay runs out of room one block early
PRIORITY_VICTIM_SCHEDULED_FIRST = (
    [
        ("r0", [10] * 3, 2, 1, 0),
        ("r1", [10] * 7, 1, 1, 0),
        ("r2", [10] * 2, 1, 0, 0),
        ("r3", [10] * 2, 10, 0, 0),
        ("r4", [10] * 4, 2, 0, 1),
    ],
    EngineConfig(
        batching="continuous",
        max_num_seqs=3,
        max_num_batched_tokens=7,
        block_size=1,
        num_kv_blocks=11,
        scheduling_policy="priority",
        enable_prefix_caching=False,
    ),
    {"r0": 2, "r1": 1, "r2": 1, "r3": 1, "r4": 2},
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
@example(PRIORITY_VICTIM_SCHEDULED_FIRST)
def test_inference_reproduces_the_recorded_decisions_of_random_workloads(workload):
    specs, config, natural = workload
    requests = [
        Request(rid, prompt, SamplingParams(max_tokens=m), arrival_step=arrival, priority=prio)
        for rid, prompt, m, arrival, prio in specs
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = LLMEngine(FakeRunner(natural), config, eos_token_ids={2}).run(requests)
    for k, step in enumerate(step_records(records)):  # the records are consistent with the step they explain
        d = step["decisions"]
        assert [p["request_id"] for p in d["preemptions"]] == step["preempted"]
        assert [a["request_id"] for a in d["admissions"]] == step["admitted"]
        assert ("head" in d) == bool(step["waiting"]), k
        if "head" in d:
            assert d["head"]["request_id"] == step["waiting"][0]
    assert_inference_reproduces(records)


def test_a_preempted_request_finds_part_of_its_kv_in_the_cache_hand_computed():
    """Block size 4, a pool of 4 blocks. Y (1 prompt token, 5 outputs) and X (11 prompt tokens) are admitted at step
    0. Step 1: X decodes its first output (12 tokens of K/V, 3 full blocks, all cached). Step 2: X needs a 4th block
    for position 12 and none is free; X is the newest running request, so X preempts itself, dropping 12 tokens
    of K/V in 3 blocks (freed last block first, so that one is evicted first). Step 3: X's whole known sequence
    (13 tokens) needs 4 blocks, 3 free: it waits. Step 4: Y needs a block and takes X's evicted third block; Y
    finishes. Step 5: X is admitted again: 8 tokens from the cache (its first two blocks), 4 recomputed (8-11),
    1 computed for the first time (position 12, its last sampled token, never fed back before)."""
    requests = [make_request("Y", 1, 5, ignore_eos=True), make_request("X", 11, 4, ignore_eos=True)]
    config = {"max_num_seqs": 2, "max_num_batched_tokens": 16, "block_size": 4, "num_kv_blocks": 4}
    steps, summary, records = run_fake(requests, **config)
    assert steps[2]["decisions"]["preemptions"] == [
        {
            "request_id": "X",
            "rule": "newest",
            "num_dropped_tokens": 12,
            "num_dropped_blocks": 3,
            "requester": "X",
            "need": 1,
            "free": 0,
        }
    ]
    assert steps[3]["decisions"]["head"] == {
        "request_id": "X",
        "limit": "kv_blocks_full_prompt",
        "need": 4,
        "left": 3,
        "order": "arrival",
    }
    assert steps[5]["decisions"]["admissions"] == [
        {"request_id": "X", "resumed": True, "num_prefix_hit_tokens": 8, "num_recompute_tokens": 4, "num_new_tokens": 1}
    ]
    assert [(s["num_computed_tokens"], s["num_tokens"], s["recompute"]) for s in steps[5]["scheduled"]] == [
        (8, 5, True)
    ]
    assert (summary["X"]["num_dropped_tokens"], summary["X"]["num_recomputed_tokens"]) == (12, 4)
    view = TraceView(records)
    assert preemption_cost(view) == {
        "X": {"num_dropped_tokens": 12, "num_cache_hit_tokens": 8, "num_recomputed_tokens": 4, "num_new_tokens": 1}
    }
    assert summarize(records)["num_recomputed_tokens"] == 4
    assert_inference_reproduces(records)


def test_recorded_decisions_are_read_as_recorded_and_inferred_ones_say_so():
    records = rerun(RECORDED_TRACES[0])
    view = TraceView(records)
    assert "inferred" not in decisions(view, 0)
    old = copy.deepcopy(records)
    for st_ in step_records(old):
        del st_["decisions"]
    assert decisions(TraceView(old), 0)["inferred"] is True


@pytest.mark.parametrize("path", VLLM_STYLE, ids=[p.stem for p in VLLM_STYLE])
def test_every_shipped_trace_records_its_decisions_and_the_inference_gives_them_back(path):
    records = trace.read(path)
    assert all("decisions" in st for st in step_records(records)), f"{path.name}: re-record with `make traces`"
    assert_inference_reproduces(records)


def test_the_schema_allows_exactly_the_words_of_steplog_reasons():
    """The limit and rule names are defined once (batchscope/steplog/reasons.py); the schema's enums must list the
    same."""
    from batchscope.steplog.reasons import LIMIT_NAMES, LIMIT_SHORT, LIMIT_UNITS, LIMIT_WHY, QUEUE_ORDERS, VICTIM_RULES

    schema = json.loads((ROOT / "batchscope" / "steplog" / "trace.schema.json").read_text())
    d = schema["$defs"]["decisions"]["properties"]
    limits = set(d["head"]["properties"]["limit"]["enum"])
    assert limits == set(LIMIT_UNITS) == set(LIMIT_NAMES) == set(LIMIT_WHY) == set(LIMIT_SHORT)
    assert set(d["head"]["properties"]["order"]["enum"]) == set(QUEUE_ORDERS)
    assert set(d["preemptions"]["items"]["properties"]["rule"]["enum"]) == set(VICTIM_RULES)
