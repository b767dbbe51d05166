"""Speculative decoding with n-gram drafts: Batchscope's proposer and scheduler against vLLM 0.33.0's own.

- The proposer (``batchscope.engine.ngram_proposer.propose_ngram``) against vLLM's
  ``_find_longest_matched_ngram_and_propose_tokens`` (vllm/v1/spec_decode/ngram_proposer.py) on random token lists
  over small vocabularies (so n-grams repeat).
- The scheduler: 300 random workloads with ``num_speculative_tokens`` 1-4 run through ``LLMEngine(ReplayRunner)`` and
  through vLLM's ``Scheduler`` with a ``SpeculativeConfig(method="ngram")``, the driver proposing each step's drafts
  with vLLM's own function and verifying them as a greedy model would (a draft is kept while it equals the next
  recorded token); every step must agree: scheduled tokens (drafts included, so the budget cut and the rollback of
  rejected drafts show), the draft token ids, admissions (with vLLM's placeholder padding of a one-token admission),
  preemptions, finishes, blocks and the prefix cache (blocks filled by accepted drafts are cached after the step).
  ``max_model_len`` is the longest request's prompt + ``max_tokens``, so vLLM's cap of a decode's drafts at the
  context (positions below ``max_model_len - 1``) binds at every request's end.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay import run_batchscope, run_both
from vllm.v1.spec_decode import ngram_proposer

from batchscope.engine.ngram_proposer import propose_ngram
from batchscope_vllm.compare import first_difference

EOS = 2


def vllm_drafts(tokens: list[int], min_n: int, max_n: int, k: int, max_model_len: int) -> list[int]:
    arr = ngram_proposer.np.asarray(tokens, dtype=ngram_proposer.np.int32)
    found = ngram_proposer._find_longest_matched_ngram_and_propose_tokens(arr, min_n, max_n, max_model_len, k)
    return [int(t) for t in found]


@settings(max_examples=1500, deadline=None)
@given(
    tokens=st.lists(st.integers(3, 6), min_size=0, max_size=40),
    min_n=st.integers(1, 4),
    extra=st.integers(0, 3),
    k=st.integers(1, 6),
    room=st.integers(0, 10),
)
def test_ngram_drafts_equal_vllms(tokens, min_n, extra, k, room):
    """1,500 token lists over 4 ids: the same drafts as vLLM's proposer (longest match, earliest place, capped by
    the tokens' end and by ``max_model_len``)."""
    max_len = len(tokens) + room
    assert propose_ngram(tokens, min_n, min_n + extra, k, max_len) == vllm_drafts(
        tokens, min_n, min_n + extra, k, max_len
    )


def test_ngram_drafts_by_hand():
    """'the cat sat on the mat . the cat' -> 'sat on' (n = 2 at the first 'the cat'); no repeat -> none."""
    the, cat, sat, on, mat, dot = 10, 11, 12, 13, 14, 15
    tokens = [the, cat, sat, on, the, mat, dot, the, cat]
    assert propose_ngram(tokens, 1, 3, 2) == [sat, on] == vllm_drafts(tokens, 1, 3, 2, 100)
    assert propose_ngram([1, 2, 3, 4], 1, 3, 2) == [] == vllm_drafts([1, 2, 3, 4], 1, 3, 2, 100)


@st.composite
def spec_cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """Config, requests (with output tokens over a 3-id vocabulary: drafts are often right, often wrong), and the
    tight ``max_model_len``."""
    max_num_seqs = draw(st.integers(1, 3))
    block_size = draw(st.sampled_from((1, 2, 4, 8)))
    requests = []
    for i in range(draw(st.integers(1, 4))):
        prompt = draw(st.lists(st.integers(3, 5), min_size=1, max_size=24))
        max_tokens = draw(st.integers(1, 24))
        outputs = draw(st.lists(st.integers(3, 5), min_size=max_tokens, max_size=max_tokens))
        eos_at = draw(st.none() | st.integers(1, max_tokens))
        if eos_at is not None:
            outputs = [*outputs[: eos_at - 1], EOS]
        requests.append(
            {
                "request_id": f"R{i}",
                "prompt_token_ids": prompt,
                "max_tokens": max_tokens,
                "ignore_eos": False,
                "arrival_step": draw(st.integers(0, 6)),
                "priority": draw(st.integers(-1, 1)),
                "output_token_ids": outputs,
            }
        )
    k = draw(st.integers(1, 4))
    min_n = draw(st.integers(1, 3))
    needs = [-(-(len(r["prompt_token_ids"]) + r["max_tokens"] + k) // block_size) for r in requests]
    config = {
        "batching": "continuous",
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": draw(st.integers(max_num_seqs, 40)),
        "block_size": block_size,
        "num_kv_blocks": draw(st.integers(max(needs), max(max(needs), sum(needs)))),
        "enable_chunked_prefill": True,
        "reserve_full_prompt": draw(st.booleans()),
        "enable_prefix_caching": draw(st.booleans()),
        "scheduling_policy": draw(st.sampled_from(["fcfs", "priority"])),
        "num_speculative_tokens": k,
        "prompt_lookup_min": min_n,
        "prompt_lookup_max": min_n + draw(st.integers(0, 2)),
    }
    if config["enable_prefix_caching"]:  # a smaller budget is refused (test_seed_5_stalls_vllms_own_scheduler)
        config["max_num_batched_tokens"] = max(config["max_num_batched_tokens"], 1 + k)
    max_model_len = max(len(r["prompt_token_ids"]) + r["max_tokens"] for r in requests)
    return config, requests, max_model_len


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=spec_cases())
def test_spec_decode_differential(case):
    """300 random workloads with n-gram speculation: every step agrees with vLLM's scheduler."""
    config, requests, max_model_len = case
    records, steps = run_both(requests, config, [EOS], max_model_len)
    verdict = first_difference(records, steps)
    assert verdict.startswith("agrees"), f"{verdict}\nconfig {config}\nrequests {requests}\nmax_len {max_model_len}"


def test_seed_5_stalls_vllms_own_scheduler():
    """Issue 33's example (``--hypothesis-seed=5`` drew it): budget 1, one draft token, prefix caching. vLLM 0.33
    pads R3's admission (one token left after its 1-token cache hit) to 1 + 1 tokens and prefers not to schedule it
    over scheduling it unpadded, so its own scheduler schedules nothing from step 5 on, forever. Batchscope
    refuses the config before any step (the smallest budget that works is 2), and with a budget of 2 both agree."""
    import pytest

    from batchscope.engine.config import ConfigError

    requests = [
        {
            "request_id": rid,
            "prompt_token_ids": prompt,
            "max_tokens": m,
            "ignore_eos": False,
            "arrival_step": 0,
            "output_token_ids": [3] * m,
        }
        for rid, prompt, m in (("R0", [3], 3), ("R1", [3], 1), ("R2", [3], 1), ("R3", [3, 3], 1))
    ]
    config = {
        "batching": "continuous",
        "max_num_seqs": 1,
        "max_num_batched_tokens": 1,
        "block_size": 1,
        "num_kv_blocks": 5,
        "enable_chunked_prefill": True,
        "reserve_full_prompt": False,
        "enable_prefix_caching": True,
        "scheduling_policy": "fcfs",
        "num_speculative_tokens": 1,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 1,
    }
    with pytest.raises(ConfigError, match="max_num_batched_tokens=1 is out of range: at least 1 \\+ num_spec"):
        run_batchscope(requests, config, [EOS], 4)
    records = run_batchscope(requests, {**config, "max_num_batched_tokens": 2}, [EOS], 4)
    from batchscope_vllm.compare import workload_from_trace
    from batchscope_vllm.driver import run_vllm

    workload = workload_from_trace(records)
    assert first_difference(records, run_vllm(workload)).startswith("agrees")
    workload["config"]["max_num_batched_tokens"] = 1
    with pytest.raises(RuntimeError, match="vLLM's scheduler made no progress at step 5"):
        run_vllm(workload)


def test_the_differential_sees_drafts():
    """Not vacuous: a repeating output makes drafts that are accepted, and a changed output rejects some; vLLM's
    scheduler, told the same, agrees; a run without speculation then differs from vLLM's with it."""
    pattern = [3, 4, 5] * 6
    requests = [
        {
            "request_id": "A",
            "prompt_token_ids": [3, 4, 5, 3],
            "max_tokens": 18,
            "ignore_eos": True,
            "arrival_step": 0,
            "output_token_ids": [*pattern[1:], 9],
        }
    ]
    config = {
        "batching": "continuous",
        "max_num_seqs": 1,
        "max_num_batched_tokens": 16,
        "block_size": 4,
        "num_kv_blocks": 8,
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
    }
    records, steps = run_both(requests, config, [EOS], 22)
    assert first_difference(records, steps).startswith("agrees")
    decodes = [s for st in records[1:-1] for s in st["scheduled"] if s.get("draft_token_ids")]
    assert decodes and all(s["num_tokens"] == 1 + len(s["draft_token_ids"]) for s in decodes)
    assert sum(s["num_accepted_tokens"] for s in decodes) >= 10
    assert len(records) - 2 < 18  # fewer steps than one token per step
    off = dict(config, num_speculative_tokens=0)
    from replay import run_batchscope

    from batchscope_vllm.compare import workload_from_trace
    from batchscope_vllm.driver import run_vllm

    plain = run_batchscope(requests, off, [EOS], 22)
    assert not first_difference(plain, run_vllm(workload_from_trace(records))).startswith("agrees")


def test_the_tracer_records_drafts_and_acceptances(tmp_path, monkeypatch):
    """The tracing scheduler inside vLLM, driven with n-gram speculation: its trace validates and records the same
    draft token ids and accepted counts, step by step, as Batchscope's engine does for the same workload; the
    header carries the speculative config."""
    from test_tracer import scheduling_differences, schema_problems, traced

    from batchscope_vllm.compare import workload_from_trace

    requests = [
        {
            "request_id": "A",
            "prompt_token_ids": [3, 4, 5, 3, 4],
            "max_tokens": 14,
            "ignore_eos": True,
            "arrival_step": 0,
            "output_token_ids": [5, 3, 4, 5, 3, 9, 5, 3, 4, 5, 3, 4, 5, 9],
        },
        {
            "request_id": "B",
            "prompt_token_ids": [6, 6, 6],
            "max_tokens": 6,
            "ignore_eos": True,
            "arrival_step": 1,
            "output_token_ids": [6, 6, 6, 8, 6, 6],
        },
    ]
    config = {
        "batching": "continuous",
        "max_num_seqs": 2,
        "max_num_batched_tokens": 8,
        "block_size": 4,
        "num_kv_blocks": 12,
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 2,
    }
    records = run_batchscope(requests, config, [EOS], 19)
    _, trace = traced(workload_from_trace(records), tmp_path / "spec.jsonl", monkeypatch)
    assert schema_problems(trace) == []
    assert scheduling_differences(records, trace) == []

    def drafts(recs):
        return [
            [(s["request_id"], s.get("draft_token_ids"), s.get("num_accepted_tokens")) for s in st["scheduled"]]
            for st in recs[1:-1]
        ]

    assert drafts(trace) == drafts(records)
    assert any(s.get("num_accepted_tokens") for st in trace[1:-1] for s in st["scheduled"])
    assert trace[0]["config"]["speculative_config"]["num_speculative_tokens"] == 3
