"""The real runner on a tiny random Llama (float64): greedy outputs equal transformers ``generate``."""

from __future__ import annotations

import pytest
import torch
from conftest import hf_greedy, step_records

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.model.runner import ModelRunner

PROMPT_LENGTHS = (5, 13, 3, 22, 9)
MAX_TOKENS = (10, 6, 14, 8, 12)


def prompts():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(2, 128, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]


def run(model, config: EngineConfig, runner_cls=ModelRunner, **runner_kw):
    reqs = [
        Request(f"r{i}", p, SamplingParams(max_tokens=m, ignore_eos=True))
        for i, (p, m) in enumerate(zip(prompts(), MAX_TOKENS))
    ]
    records = LLMEngine(runner_cls(model, config, **runner_kw), config).run(reqs)
    return step_records(records), {r["request_id"]: r for r in records[-1]["requests"]}


CONFIGS = {
    "continuous-tiny-budget": EngineConfig(max_num_seqs=4, max_num_batched_tokens=4, block_size=4, num_kv_blocks=64),
    "static": EngineConfig(
        batching="static", max_num_seqs=3, max_num_batched_tokens=64, block_size=4, num_kv_blocks=64
    ),
    "preemption": EngineConfig(max_num_seqs=5, max_num_batched_tokens=32, block_size=2, num_kv_blocks=18),
    "one-at-a-time": EngineConfig(max_num_seqs=1, max_num_batched_tokens=256, block_size=16, num_kv_blocks=8),
}


@pytest.fixture(scope="module")
def references(tiny_model):
    return [hf_greedy(tiny_model, p, m) for p, m in zip(prompts(), MAX_TOKENS)]


@pytest.mark.parametrize("name", CONFIGS)
def test_greedy_matches_generate(tiny_model, references, name):
    steps, summary = run(tiny_model, CONFIGS[name])
    assert [summary[f"r{i}"]["output_token_ids"] for i in range(len(references))] == references
    if name == "continuous-tiny-budget":
        assert any(
            s["kind"] == "prefill" and s["num_tokens"] < n
            for st in steps
            for s in st["scheduled"]
            for n in [PROMPT_LENGTHS[int(s["request_id"][1:])]]
        )  # chunked
        assert any({s["kind"] for s in st["scheduled"]} == {"prefill", "decode"} for st in steps)  # mixed steps
    if name == "preemption":
        assert sum(r["num_preemptions"] for r in summary.values()) > 0
    if name == "static":
        assert any(st["padding_slots"] for st in steps)


class CorruptingRunner(ModelRunner):
    """After step ``at_step``, overwrite every KV block of ``victim`` in the pool with noise."""

    def __init__(self, model, config, victim: str, at_step: int):
        super().__init__(model, config)
        self.victim, self.at_step, self.step = victim, at_step, 0

    def execute(self, out, block_tables):
        sampled = super().execute(out, block_tables)
        if self.step == self.at_step:
            for pool in (self.pool.k, self.pool.v):
                view = self.pool.block_view(pool)
                for b in block_tables[self.victim]:
                    view[:, b] = torch.randn_like(view[:, b]) * 10
        self.step += 1
        return sampled


def test_pool_is_the_only_kv_storage(tiny_model, references):
    """Corrupting r1's blocks mid-run changes r1's later tokens and nobody else's."""
    config = EngineConfig(max_num_seqs=5, max_num_batched_tokens=64, block_size=4, num_kv_blocks=64)
    _, summary = run(tiny_model, config, CorruptingRunner, victim="r1", at_step=2)
    outputs = [summary[f"r{i}"]["output_token_ids"] for i in range(len(references))]
    assert outputs[1][:3] == references[1][:3]  # tokens sampled up to step 2 are untouched
    assert outputs[1] != references[1]
    assert [o for i, o in enumerate(outputs) if i != 1] == [r for i, r in enumerate(references) if i != 1]


def test_paged_attention_refuses_to_run_without_metadata(tiny_model):
    from batchscope.model.paged_attention import ATTN_IMPL

    tiny_model.config._attn_implementation = ATTN_IMPL
    try:
        with pytest.raises(ValueError, match="paged_batch"):
            tiny_model(torch.tensor([[3, 4]]))
    finally:
        tiny_model.config._attn_implementation = "sdpa"


# -- prefix caching: shared blocks are read, never recomputed, and the outputs do not change ---------------------


def shared_prompts() -> list[list[int]]:
    """A 22-token stem (5 full blocks of 4) before each prompt, and the stem alone twice (identical prompts)."""
    stem = prompts()[3]
    return [stem + p for p in prompts()] + [list(stem), list(stem)]


SHARED_CONFIGS = {
    "same-step-hits": EngineConfig(max_num_seqs=7, max_num_batched_tokens=256, block_size=4, num_kv_blocks=96),
    "chunked-tiny-budget": EngineConfig(max_num_seqs=4, max_num_batched_tokens=5, block_size=4, num_kv_blocks=96),
    "preemption-priority": EngineConfig(
        max_num_seqs=5, max_num_batched_tokens=32, block_size=2, num_kv_blocks=40, scheduling_policy="priority"
    ),
    "first-chunk-rule": EngineConfig(
        max_num_seqs=5, max_num_batched_tokens=32, block_size=2, num_kv_blocks=40, reserve_full_prompt=False
    ),
    "static": EngineConfig(
        batching="static", max_num_seqs=3, max_num_batched_tokens=64, block_size=4, num_kv_blocks=96
    ),
}


@pytest.mark.parametrize("name", SHARED_CONFIGS)
def test_greedy_matches_generate_with_prefix_caching(tiny_model, name):
    config = SHARED_CONFIGS[name]
    lengths = (6, 9, 4, 7, 5, 8, 8)
    by_priority = config.scheduling_policy == "priority"
    reqs = [
        Request(f"r{i}", p, SamplingParams(max_tokens=m, ignore_eos=True), arrival_step=i % 3)
        for i, (p, m) in enumerate(zip(shared_prompts(), lengths))
    ]
    for i, r in enumerate(reqs):
        r.priority = (-i) % 3 if by_priority else 0
    records = LLMEngine(ModelRunner(tiny_model, config), config).run(reqs)
    summary = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    expected = [hf_greedy(tiny_model, p, m) for p, m in zip(shared_prompts(), lengths)]
    assert [summary[f"r{i}"] for i in range(len(expected))] == expected
    hits = [n for st in step_records(records) for n in st["num_prefix_hit_tokens"].values()]
    assert sum(hits) >= 5 * 4 * 3, hits  # most requests found the stem's blocks in the cache
    if name == "same-step-hits":
        assert records[1]["num_prefix_hit_tokens"]["r3"] == 20  # admitted after r0 in step 0: r0's blocks
    if name == "preemption-priority":
        assert any(st["preempted"] for st in step_records(records))


# -- oneDNN's packed linears (CPU, float32) ----------------------------------------------------------------------


def test_packed_linears_compute_each_linear_and_leave_the_model_as_it_was(tiny_model):
    """Inside ``installed()`` every linear of a float32 copy of the tiny model runs its packed forward and the
    logits equal the model's own up to rounding; afterwards the model's own forward is back, bit for bit."""
    import copy

    from batchscope.model.runner import PackedLinears, onednn_packing_available

    model = copy.deepcopy(tiny_model).float()
    assert onednn_packing_available(torch.device("cpu"), torch.float32)
    assert not onednn_packing_available(torch.device("cpu"), torch.float64)  # the float64 tests run the default
    ids = torch.tensor([prompts()[3]])
    with torch.inference_mode():
        plain = model(ids).logits
        packed = PackedLinears(model)
        calls = []
        with packed.installed():
            assert all("forward" in m.__dict__ for m, _ in packed.linears)
            for m, _ in packed.linears:  # count the packed forwards the model calls
                inner = m.__dict__["forward"]
                m.forward = lambda x, f=inner: calls.append(1) or f(x)
            fast = model(ids).logits
        after = model(ids).logits
    assert len(packed.linears) == 2 * 7 + 1 and len(calls) == len(packed.linears)  # q k v o gate up down, lm_head
    assert all("forward" not in m.__dict__ for m, _ in packed.linears)
    assert torch.equal(after, plain)
    torch.testing.assert_close(fast, plain, rtol=1e-4, atol=1e-4)
