"""Speculative decoding with n-gram drafts (``batchscope.engine.spec_decode``): a hand-computed schedule on a scripted
model, greedy outputs equal to transformers ``generate`` with drafts on (tiny model and SmolLM2), the settings refused
in one line. The scheduling against vLLM's own scheduler is ``tests_vllm/test_vllm_spec_decode.py``."""

from __future__ import annotations

import pytest
import torch
from conftest import hf_greedy, step_records
from fakes import ScriptedModel

from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.ngram_proposer import propose_ngram
from batchscope.engine.request import Request, SamplingParams
from batchscope.engine.spec_decode import verify
from batchscope.model.runner import ModelRunner


def test_a_schedule_computed_by_hand():
    """Prompt 1 2 3 4 1 2, script continuing 3 4 1 2 3 4 5 6 1 2 3 ...; k = 3, n-grams of 2-3 tokens.

    step 0: prefill 6 -> samples 3; drafts for "...1 2 3": the 3-gram "1 2 3" at 0 -> 4 1 2.
    step 1: decode 1 + 3 drafts [4 1 2]: all right -> 4 1 2 + bonus 3 (4 tokens); drafts after "4 1 2 3": 4 1 2.
    step 2: [4 1 2] against 4 5 ...: 4 kept, 1 rejected -> 4 5 (2 tokens); 2 rejected positions rolled back.
    step 3: "...3 4 5": no earlier "4 5" or "3 4 5"... no 2-gram "4 5" before -> no drafts, 1 token (6)."""
    script = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 9, 9, 9, 9, 9, 9, 9]
    cfg = EngineConfig(num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=3, block_size=4)
    records = LLMEngine(ScriptedModel(script), cfg).run([Request("A", script[:6], SamplingParams(max_tokens=12))])
    steps = step_records(records)
    sched = [
        (s["num_tokens"], s["num_computed_tokens"], s.get("draft_token_ids"), s.get("num_accepted_tokens"))
        for st in steps
        for s in st["scheduled"]
    ]
    assert sched[:4] == [(6, 0, None, None), (4, 6, [4, 1, 2], 3), (4, 10, [4, 1, 2], 1), (1, 12, None, None)]
    assert [[x["token_id"] for x in st["sampled"]] for st in steps[:4]] == [[3], [4, 1, 2, 3], [4, 5], [6]]
    assert [s["kind"] for st in steps[1:4] for s in st["scheduled"]] == ["decode"] * 3
    assert records[-1]["requests"][0]["output_token_ids"] == script[6:18]
    assert records[0]["config"]["speculative_config"] == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 3,
    }


def test_drafts_stop_at_the_budget_and_a_finish_drops_the_rest():
    """A budget of 2: one draft at most per step; max_tokens 5 ends a step's tokens early (the rest dropped). Prefix
    caching off: with it on, a budget below 1 + num_speculative_tokens is refused (``test_termination.py``)."""
    script = [5, 6, 5, 6, 5, 6, 5, 6, 5, 6, 5, 6]
    cfg = EngineConfig(
        num_speculative_tokens=3,
        prompt_lookup_min=1,
        prompt_lookup_max=2,
        max_num_batched_tokens=2,
        enable_prefix_caching=False,
    )
    records = LLMEngine(ScriptedModel(script), cfg).run([Request("A", [5, 6, 5], SamplingParams(max_tokens=5))])
    drafts = [s.get("draft_token_ids") for st in step_records(records) for s in st["scheduled"]]
    assert all(d is None or len(d) == 1 for d in drafts) and any(drafts)
    assert (
        sum(len(st["sampled"]) for st in step_records(records))
        == 5
        == len(records[-1]["requests"][0]["output_token_ids"])
    )


def test_verify_greedy_and_placeholders():
    """Greedy: drafts kept while they are the argmax, then the argmax; a placeholder (-1) is never kept."""
    logits = torch.full((4, 10), -5.0)
    for row, tok in enumerate((3, 4, 8, 1)):
        logits[row, tok] = 5.0
    greedy = SamplingParams()
    assert verify(logits, [3, 4, 5], greedy, None) == [3, 4, 8]
    assert verify(logits, [3, 4, 8], greedy, None) == [3, 4, 8, 1]
    assert verify(logits, [-1, -1, -1], greedy, None) == [3]


def test_propose_prefers_the_longest_then_the_earliest_match():
    assert propose_ngram([7, 8, 9, 1, 8, 9, 2, 7, 8, 9], 1, 3, 2) == [1, 8]  # "7 8 9" (n=3) at 0, not "8 9" at 4
    assert propose_ngram([4, 5, 1, 4, 5, 2, 4, 5], 2, 2, 1) == [1]  # "4 5" first at 0
    assert propose_ngram([4, 5, 1, 4, 5], 3, 3, 2) == []  # no 3-gram repeats
    assert propose_ngram([4, 5, 1, 4, 5], 2, 2, 4, max_model_len=6) == [1]  # one position of context left


@pytest.mark.parametrize(
    ("field", "value", "others"),
    [
        ("num_speculative_tokens", 17, {}),
        ("prompt_lookup_min", 0, {}),
        ("prompt_lookup_min", 4, {"prompt_lookup_max": 3}),
        ("num_speculative_tokens", 2, {"batching": "static"}),
    ],
)
def test_settings_refused_in_one_line(field, value, others):
    with pytest.raises(ConfigError) as err:
        EngineConfig(**{field: value, **others}).validate()
    assert err.value.field == field and "\n" not in str(err.value)


def _repetitive(seed: int) -> list[tuple[list[int], int]]:
    g = torch.Generator().manual_seed(seed)
    stems = [torch.randint(2, 128, (n,), generator=g).tolist() for n in (3, 5, 4)]
    return [
        (stem * 4 + [int(t)], m) for stem, t, m in zip(stems, torch.randint(2, 128, (3,), generator=g), (24, 30, 18))
    ]


@pytest.mark.parametrize("budget", [64, 5])
def test_greedy_outputs_equal_generate_with_drafts(tiny_model, budget):
    """Repetitive prompts make drafts; the tiny model keeps some and rejects others; every output equals
    ``generate``, with a roomy budget and one that cuts drafts (and chunks prompts)."""
    workload = _repetitive(3)
    cfg = EngineConfig(
        max_num_seqs=3,
        max_num_batched_tokens=budget,
        block_size=4,
        num_kv_blocks=64,
        num_speculative_tokens=3,
        prompt_lookup_min=1,
        prompt_lookup_max=3,
    )
    reqs = [Request(f"r{i}", p, SamplingParams(max_tokens=m, ignore_eos=True)) for i, (p, m) in enumerate(workload)]
    records = LLMEngine(ModelRunner(tiny_model, cfg), cfg, max_model_len=256).run(reqs)
    outputs = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    assert [outputs[f"r{i}"] for i in range(3)] == [hf_greedy(tiny_model, p, m) for p, m in workload]
    spec = [s for st in step_records(records) for s in st["scheduled"] if s.get("draft_token_ids")]
    assert spec, "no drafts were scheduled"
    accepted = [s["num_accepted_tokens"] for s in spec]
    assert any(a > 0 for a in accepted) and any(a < len(s["draft_token_ids"]) for a, s in zip(accepted, spec))


@pytest.mark.real_model
def test_smollm2_outputs_equal_generate_with_drafts(smollm):
    """SmolLM2 on prompts that invite repetition: outputs equal ``generate``, and some drafts are accepted."""
    tok, model = smollm.tokenizer, smollm.model
    texts = ["1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,", "The capital of France is Paris. The capital of France is"]
    workload = [(tok(t)["input_ids"], 16) for t in texts]
    cfg = EngineConfig(
        max_num_seqs=2,
        max_num_batched_tokens=32,
        num_kv_blocks=16,
        num_speculative_tokens=3,
        prompt_lookup_min=1,
        prompt_lookup_max=3,
    )
    reqs = [Request(f"r{i}", p, SamplingParams(max_tokens=m, ignore_eos=True)) for i, (p, m) in enumerate(workload)]
    records = LLMEngine(ModelRunner(model, cfg), cfg, max_model_len=8192).run(reqs)
    outputs = {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}
    assert [outputs["r0"], outputs["r1"]] == [hf_greedy(model, p, m) for p, m in workload]
    assert sum(s.get("num_accepted_tokens", 0) for st in step_records(records) for s in st["scheduled"]) >= 4


def test_sampled_verification_keeps_the_target_distribution():
    """Rejection sampling without draft probabilities (vLLM's rule for n-gram drafts): whatever the draft, the first
    token a step yields is distributed as the request's own sampling distribution. 40,000 draws at temperature 1
    over 4 tokens with probabilities 0.5, 0.3, 0.15, 0.05 and the draft 1: each frequency within 0.01."""
    from batchscope.model.sampler import make_generator

    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = torch.log(probs).repeat(2, 1)  # [1 draft + 1, vocab]
    params, g = SamplingParams(temperature=1.0, seed=0), make_generator(0)
    counts = torch.zeros(4)
    for _ in range(40_000):
        counts[verify(logits, [1], params, g)[0]] += 1
    assert torch.allclose(counts / counts.sum(), probs, atol=0.01), counts / counts.sum()
