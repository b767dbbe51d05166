"""SmolLM2-135M-Instruct (the default model, float32 CPU) on the shared reference cases.

Token ids in the cases come from transformers ``generate`` on the GGUF model (greedy, CPU, float32); where a case
gives none, we compute the reference with ``generate`` here. Schedules are the cases' hand-derived values, which
assume no prefix caching (every chat prompt here starts with the same system prompt, so with caching on later
requests skip its blocks and the schedules change: tests_vllm checks those against vLLM's own scheduler).
"""

from __future__ import annotations

import random

import pytest
from conftest import case_workload, hf_greedy, step_records

from batchscope.engine.config import EngineConfig
from batchscope.engine.llm import generate_trace
from batchscope.inputs.workload import render_prompt
from batchscope.steplog import trace

pytestmark = pytest.mark.real_model

MOON = [33, 30, 378, 8872, 314, 253, 18146, 1248, 338, 21837, 2591, 30]
COMPILER = [49, 25316, 314, 253, 3197, 1763, 338, 18419, 1205, 2909, 618, 3746, 2909, 30, 657, 506]
CAT = [49, 2644, 30, 2]
HAIKU = [504, 6147, 282, 260, 3426, 28, 253, 13879, 6122, 28, 198, 49, 9154, 303, 5082, 282]


def run(smollm, specs, **config):
    config.setdefault("enable_prefix_caching", False)  # the case texts' schedules (see the module docstring)
    records = generate_trace(smollm, specs, EngineConfig(**config))
    trace.validate_records(records)
    return step_records(records), {r["request_id"]: r for r in records[-1]["requests"]}


def outputs(summary):
    return {rid: r["output_token_ids"] for rid, r in summary.items()}


def finish_step(steps, rid):
    return next(st["step"] for st in steps if any(f["request_id"] == rid for f in st["finished"]))


C01 = dict(batching="continuous", block_size=4, num_kv_blocks=14, max_num_batched_tokens=16, max_num_seqs=2)


def test_c01_full_prompt_admission_waits(smollm):
    """vLLM's admission rule (the default): B waits until A finishes; 20 steps, 0 preemptions, B first at step 10."""
    steps, summary = run(smollm, case_workload("c01"), **C01)
    assert outputs(summary) == {"A": MOON[:8], "B": COMPILER[:8]}
    assert len(steps) == 20 and not any(st["preempted"] for st in steps)
    assert next(st["step"] for st in steps if st["scheduled"][-1]["request_id"] == "B") == 10


def test_c01_preemption_thrash_is_bounded_and_exact(smollm):
    """The first-chunk rule (``--no-reserve-full-prompt``): B is admitted with an 11-token chunk and thrashes."""
    steps, summary = run(smollm, case_workload("c01"), **C01, reserve_full_prompt=False)
    assert outputs(summary) == {"A": MOON[:8], "B": COMPILER[:8]}
    assert len(steps) == 20
    assert [st["step"] for st in steps if st["preempted"]] == [3, 5]
    assert (summary["B"]["num_preemptions"], summary["B"]["num_recomputed_tokens"]) == (2, 26)
    assert summary["A"]["num_preemptions"] == 0


def test_c02_control_prompt_fits_budget_exactly(smollm):
    steps, summary = run(
        smollm,
        case_workload("c02"),
        batching="continuous",
        max_num_batched_tokens=37,
        enable_chunked_prefill=False,
        block_size=4,
        num_kv_blocks=32,
        max_num_seqs=2,
    )
    assert steps[0]["scheduled"][0] == {
        "request_id": "A",
        "kind": "prefill",
        "num_tokens": 37,
        "num_computed_tokens": 0,
        "slot": 0,
        "recompute": False,
    }
    assert summary["A"]["output_token_ids"] == MOON[:8]
    assert summary["B"]["output_token_ids"] == [282, 260, 970, 260, 1205, 3323, 41993, 357]


@pytest.mark.parametrize("batching", ["continuous", "static"])
def test_c07_identical_prompts_get_identical_outputs_and_own_blocks(smollm, batching):
    specs = [dict(s, arrival_time=0.0, arrival_step=i) for i, s in enumerate(case_workload("c07"))]  # Z: later
    steps, summary = run(
        smollm, specs, batching=batching, block_size=4, num_kv_blocks=32, max_num_batched_tokens=128, max_num_seqs=3
    )
    assert outputs(summary) == {"X": HAIKU, "Y": HAIKU, "Z": HAIKU}
    for st in steps:
        owned = [b for t in st["kv"]["block_tables"].values() for b in t]
        assert len(owned) == len(set(owned)), f"step {st['step']}: a block in two block tables"
    assert all(r["finish_reason"] == "length" for r in summary.values())


def test_c07_prefix_caching_shares_blocks_and_outputs_stay_exact(smollm):
    """Caching on: Y, admitted after X in step 0, reads X's 9 full blocks (written in the same forward, before any
    row attends) and computes 2 tokens; Z at step 1 too. Outputs exact; at the end every count is 0 and no block is
    used (cached free blocks count as free)."""
    from batchscope.engine.llm import build_engine
    from batchscope.inputs.workload import to_requests

    specs = [dict(s, arrival_time=0.0, arrival_step=1 if i == 2 else 0) for i, s in enumerate(case_workload("c07"))]
    config = EngineConfig(block_size=4, num_kv_blocks=32, max_num_batched_tokens=128, max_num_seqs=3)
    engine = build_engine(smollm, config)
    records = engine.run(to_requests(specs, smollm.tokenizer))
    trace.validate_records(records)
    steps, summary = step_records(records), {r["request_id"]: r for r in records[-1]["requests"]}
    assert outputs(summary) == {"X": HAIKU, "Y": HAIKU, "Z": HAIKU}
    assert steps[0]["num_prefix_hit_tokens"] == {"X": 0, "Y": 36}
    assert [s["num_tokens"] for s in steps[0]["scheduled"]] == [38, 2]
    assert steps[1]["num_prefix_hit_tokens"] == {"Z": 36}
    assert steps[1]["kv"]["ref_counts"] == {str(b): 3 for b in steps[1]["kv"]["block_tables"]["X"][:9]}
    bm = engine.scheduler.block_manager
    assert bm.num_used_blocks == 0 and not any(bm.pool.ref_counts) and bm.pool.cached_free_blocks()


def test_sixteen_first_requests_with_prefix_caching_equal_generate(smollm):
    """The sixteen scenario's first five chat requests (shared system-prompt block), caching on: S02 finds 16 of its
    35 prompt tokens in the cache at step 0 and prefills 19; every output equals ``generate`` alone."""
    from batchscope.inputs.workload import load_scenario

    sc = load_scenario("sixteen")
    specs = [dict(s, max_tokens=24) for s in sc["requests"][:5]]
    steps, summary = run(smollm, specs, **sc["config"], enable_prefix_caching=True)
    s02 = next(s for s in steps[0]["scheduled"] if s["request_id"] == "S02")
    assert (steps[0]["num_prefix_hit_tokens"]["S02"], s02["num_computed_tokens"], s02["num_tokens"]) == (16, 16, 19)
    for spec in specs:
        _, ids = render_prompt(spec, smollm.tokenizer)
        ref = hf_greedy(smollm.model, ids, 24, eos_token_id=2)
        assert summary[spec["request_id"]]["output_token_ids"] == ref, spec["request_id"]


C08_RUNS = {
    "a-one-seq": dict(max_num_seqs=1, max_num_batched_tokens=512),
    "b-four-seqs": dict(max_num_seqs=4, max_num_batched_tokens=512),
    "c-chunked-8": dict(max_num_seqs=4, max_num_batched_tokens=8),
    "d-static": dict(batching="static", max_num_seqs=4, max_num_batched_tokens=512),
}


@pytest.fixture(scope="module")
def c08_reference(smollm):
    """transformers generate, each request alone (independent reference)."""
    ref = {}
    for spec in case_workload("c08"):
        _, ids = render_prompt(spec, smollm.tokenizer)
        ref[spec["request_id"]] = hf_greedy(smollm.model, ids, spec["max_tokens"], eos_token_id=2)
    return ref


@pytest.mark.parametrize("name", C08_RUNS)
def test_c08_greedy_output_independent_of_batching_and_chunking(smollm, c08_reference, name):
    steps, summary = run(smollm, case_workload("c08"), block_size=4, num_kv_blocks=64, **C08_RUNS[name])
    assert outputs(summary) == c08_reference
    assert c08_reference["cat"] == CAT and c08_reference["moon"][:12] == MOON
    assert c08_reference["compiler"][:16] == COMPILER and len(c08_reference["rain"]) == 15
    assert {r: summary[r]["finish_reason"] for r in summary} == {
        "moon": "length",
        "compiler": "length",
        "cat": "stop",
        "rain": "stop",
    }
    if name == "c-chunked-8":
        assert all(s["num_tokens"] <= 8 for st in steps for s in st["scheduled"])


def test_c09_prefill_next_to_decode_in_one_forward(smollm):
    specs = case_workload("c09")
    specs[1] = dict(specs[1], arrival_step=6)
    steps, summary = run(
        smollm, specs, batching="continuous", max_num_batched_tokens=16, block_size=4, num_kv_blocks=32, max_num_seqs=2
    )
    mixed = [[(s["request_id"], s["kind"], s["num_tokens"]) for s in st["scheduled"]] for st in steps[6:9]]
    assert mixed == [[("A", "decode", 1), ("B", "prefill", n)] for n in (15, 15, 7)]
    assert finish_step(steps, "B") == 19 and finish_step(steps, "A") == 25
    assert summary["B"]["output_token_ids"] == MOON
    assert summary["A"]["output_token_ids"][:16] == COMPILER and len(summary["A"]["output_token_ids"]) == 24


def test_c10_fcfs_long_request_is_not_overtaken(smollm):
    steps, summary = run(
        smollm,
        case_workload("c10"),
        batching="continuous",
        block_size=4,
        num_kv_blocks=16,
        max_num_batched_tokens=64,
        max_num_seqs=4,
    )
    assert steps[4]["admitted"] == ["L", "S1", "S2", "S3"]
    assert summary["R0"]["output_token_ids"] == CAT and summary["L"]["output_token_ids"] == MOON
    assert summary["L"]["num_preemptions"] == 0
    assert [finish_step(steps, r) for r in ("R0", "L", "S1", "S2", "S3")] == [3, 15, 11, 15, 20]
    first = {r: summary[r]["first_scheduled_time"] for r in summary}
    assert all(first["L"] <= first[s] for s in ("S1", "S2", "S3"))


def test_c12_per_request_sampling_in_one_batch(smollm):
    cfg = dict(batching="continuous", max_num_seqs=5, max_num_batched_tokens=256, block_size=4, num_kv_blocks=64)
    specs = case_workload("c12")
    _, summary = run(smollm, specs, **cfg)
    out = outputs(summary)
    for rid in ("g_top_p", "p_zero", "k_one", "greedy"):
        assert out[rid] == COMPILER, rid
    assert out["sampled"] != COMPILER
    _, alone = run(smollm, [s for s in specs if s["request_id"] == "sampled"], **cfg)
    assert alone["sampled"]["output_token_ids"] == out["sampled"]
    shuffled = specs[:]
    random.Random(3).shuffle(shuffled)
    _, again = run(smollm, shuffled, **cfg)
    assert outputs(again) == out


def test_c13_one_token_request_and_token_times(smollm):
    steps, summary = run(
        smollm,
        case_workload("c13"),
        batching="continuous",
        max_num_seqs=2,
        max_num_batched_tokens=128,
        block_size=4,
        num_kv_blocks=32,
    )
    one, cat = summary["one"], summary["cat"]
    assert len(one["output_token_ids"]) == 1 and finish_step(steps, "one") == 0
    assert one["first_token_time"] == one["finish_time"] == steps[0]["t_end"]
    assert cat["output_token_ids"] == CAT and cat["output_text"] == "A cat."
    assert finish_step(steps, "cat") == 3 and cat["first_token_time"] == steps[0]["t_end"]


def test_seed_abcd_story_on_the_real_model(smollm):
    from batchscope.inputs.workload import load_scenario

    sc = load_scenario("seed-abcd")
    steps, _ = run(smollm, sc["requests"], **sc["config"])
    x = finish_step(steps, "C")
    assert {s["request_id"]: s["kind"] for s in steps[x]["scheduled"]} == {"A": "prefill", "B": "decode", "C": "decode"}
    assert steps[x + 1]["admitted"] == ["D"]
    assert {s["request_id"] for s in steps[x + 2]["scheduled"]} == {"A", "D"}
