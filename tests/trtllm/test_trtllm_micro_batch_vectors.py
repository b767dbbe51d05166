"""Every micro-batch-scheduler test vector of NVIDIA's ``microBatchSchedulerTest.cpp`` (tests/reference/trtllm):
the 11 multi-iteration tests through the README's loop (micro-batch slots round robin, checks after each iteration),
and the 6 single calls of reusable-token accounting (three of them after real capacity passes)."""

from __future__ import annotations

import pytest
from trtllm_vectors import emit, load, run_micro_batch, seq_from

from batchscope.trtllm_family.capacity import MAX_UTILIZATION, schedule_capacity
from batchscope.trtllm_family.kv_blocks import KVBlockManager
from batchscope.trtllm_family.kv_budget import BlockBudget
from batchscope.trtllm_family.micro_batch import MicroBatchConfig, schedule_micro_batch

DATA = load("micro_batch_scheduler.json")
SINGLE = {t["test"]: t for t in DATA["single_calls"]}


def expected_ids(spec, it: int) -> list[int] | int:
    """The scheduled ids a vector expects at ``it`` (a list), or only their count (an int)."""
    if isinstance(spec, list):
        return spec
    if spec.endswith("request") or spec.endswith("requests"):
        return int(spec.split()[0])
    assert spec == "even it: [0, 1]; odd it: [2, 3]", spec
    return [0, 1] if it % 2 == 0 else [2, 3]


def mismatches(records: list[dict], test: dict) -> list[str]:
    out = []
    for entry in test["expected_after_iteration"]:
        for it in range(entry["from_it"], entry["to_it"] + 1):
            got, want = records[it]["scheduled_ids"], expected_ids(entry["scheduled_ids"], it)
            if (len(got) if isinstance(want, int) else got) != want:
                out.append(f"it {it}: scheduled {got} != {want}")
            for field, per_id in entry.get("after", {}).items():
                for rid, formula in per_id.items():
                    ids = got if rid == "scheduled" else [int(rid)]
                    for i in ids:
                        value = eval(formula, {}, {"it": it}) if isinstance(formula, str) else formula
                        have = records[it]["after"].get(i, {}).get(field)
                        if have != value:
                            out.append(f"it {it}: request {i} {field} {have} != {value}")
    return out


@pytest.mark.parametrize("test", DATA["tests"], ids=lambda t: t["test"].split(".")[1])
def test_micro_batch_vector(test):
    assert mismatches(run_micro_batch(test), test) == []


def test_every_micro_batch_vector_is_run():
    assert len(DATA["tests"]) == 11
    assert len(SINGLE) == 6


def _config(setup: dict) -> MicroBatchConfig:
    chunking = setup.get("chunking")
    return MicroBatchConfig(
        max_batch_size=setup["max_batch_size"],
        max_num_tokens=setup["max_num_tokens"],
        chunking=(chunking["policy"], chunking["chunk_unit_size"]) if chunking else None,
    )


@pytest.mark.parametrize(
    "name",
    [
        "MicroBatchSchedulerTest.ReusableTokensReduceComputeBudget",
        "MicroBatchSchedulerTest.ReusableTokensWithChunkedContextFCFS",
        "MicroBatchSchedulerTest.ReusableTokensZeroHasNoEffect",
    ],
)
def test_reusable_tokens_single_calls(name):
    test = SINGLE[name]
    for call in test["calls"]:
        batch = schedule_micro_batch([seq_from(r) for r in call["requests"]], _config(test["setup"]))
        exp = call["expected"]
        assert len(batch.contexts) == exp["context"]
        if "generation" in exp:
            assert len(batch.generations) == exp["generation"]
        for rid, size in exp.get("chunk_size", {}).items():
            assert batch.chunk_sizes[rid] == size


def _combined_first_calls(test: dict):
    """The combined tests' capacity calls: call 1, then request 0 runs its whole prompt (stored), gets one token and
    one more KV slot, then call 2. Returns the manager, the requests and call 2's result."""
    setup = test["setup"]
    manager = KVBlockManager(
        setup["kv_cache_max_num_tokens"] // setup["tokens_per_block"],
        setup["tokens_per_block"],
        setup["enable_block_reuse"],
    )
    budget = BlockBudget(manager, window=setup["max_num_tokens_per_seq"])
    seqs = [seq_from(r) for r in test["requests"]]
    first = schedule_capacity(seqs, setup["capacity_policy"], setup["max_num_requests"], budget)
    return manager, budget, seqs, first


def test_capacity_sets_reusable_tokens_for_micro_batch():
    test = SINGLE["CombinedSchedulerTest.CapacitySchedulerSetsReusableTokensForMicroBatch"]
    manager, budget, (r0, r1), first = _combined_first_calls(test)
    assert [s.request_id for s in first.scheduled] == ["0"]  # request 1 waits to reuse request 0's blocks
    manager.grow("0", r0.prompt_len)
    r0.has_kv, r0.context_position = True, r0.prompt_len
    manager.store("0", r0.prompt)
    emit(r0)
    manager.grow("0", r0.num_tokens)
    second = schedule_capacity([r0, r1], MAX_UTILIZATION, 4, budget)
    assert [s.request_id for s in second.scheduled] == ["0", "1"]
    assert r1.estimated_reusable_tokens == 20
    micro = _config(test["setup"]["micro"] | {"max_batch_size": 4})
    batch = schedule_micro_batch(second.scheduled, micro)
    assert [s.request_id for s in batch.contexts] == ["1"] and [s.request_id for s in batch.generations] == ["0"]
    copy = seq_from(test["requests"][1])  # the same prompt without reusable tokens: 30 + 1 > 15
    batch = schedule_micro_batch([r0, copy], micro)
    assert batch.contexts == [] and [s.request_id for s in batch.generations] == ["0"]


def test_capacity_reusable_tokens_with_chunked_micro_batch():
    test = SINGLE["CombinedSchedulerTest.CapacitySchedulerReusableTokensWithChunkedMicroBatch"]
    manager, budget, (r0, r1), _ = _combined_first_calls(test)
    manager.grow("0", r0.prompt_len)
    r0.has_kv, r0.context_position = True, r0.prompt_len
    manager.store("0", r0.prompt)
    emit(r0)
    manager.grow("0", r0.num_tokens)
    second = schedule_capacity([r0, r1], MAX_UTILIZATION, 4, budget)
    assert r1.estimated_reusable_tokens == 20
    micro = _config(test["setup"]["micro"] | {"max_batch_size": 4})
    batch = schedule_micro_batch(second.scheduled, micro)
    assert batch.chunk_sizes["1"] == 30  # computes 10 < 15: the whole prompt, unchunked
    batch = schedule_micro_batch([seq_from(test["requests"][1])], micro)
    assert batch.chunk_sizes["1"] == 15  # no reuse, alone: the budget, aligned to the unit 5


def test_no_reuse_micro_batch_unchanged():
    test = SINGLE["CombinedSchedulerTest.NoReuseMicroBatchUnchanged"]
    _, _, seqs, first = _combined_first_calls(test)
    assert [s.request_id for s in first.scheduled] == ["0", "1"]
    assert [s.estimated_reusable_tokens for s in seqs] == [0, 0]
    batch = schedule_micro_batch(first.scheduled, _config(test["setup"]["micro"] | {"max_batch_size": 4}))
    assert (len(batch.contexts), len(batch.generations)) == (1, 0)
