"""No run spins: every batching mode ends every valid workload within a bound computed from the workload, at every
knob's edge (a budget of 1 token, one block, one row, drafts larger than the budget, prefix caching on prompts
that share tokens, aborts, arrivals), or refuses it before any step with a one-line error naming the knob.

The seed-5 example of issue 33 (vLLM's differential drew it: ``max_num_batched_tokens`` 1 with one draft token
and prefix caching) ran over 4,000 steps until the machine killed it. vLLM 0.33's own scheduler loops on it too
(``tests_vllm/test_vllm_spec_decode.py::test_seed_5_stalls_vllms_own_scheduler``), so Batchscope refuses the
config; ``EngineStalled`` names any other run that stops making progress instead of looping.
"""

from __future__ import annotations

import pytest
from conftest import examples
from fakes import EOS
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.engine.engine import EngineStalled, LLMEngine, stall_message
from batchscope.engine.request import Request, SamplingParams
from batchscope.engine.validation import RequestError


class ScriptRunner:
    """Samples each request's scripted outputs in order; drafts are kept while they equal the next scripted tokens
    (greedy verification), then one more token. Stops a run past ``max_steps`` (the test's bound)."""

    def __init__(self, outputs: dict[str, list[int]], max_steps: int):
        self.outputs, self.max_steps, self.steps = outputs, max_steps, 0

    def execute(self, out, block_tables):
        self.steps += 1
        if self.steps > self.max_steps:
            raise AssertionError(f"no end after {self.max_steps} steps, the workload's bound: the engine spins")
        sampled = {}
        for s in out.scheduled:
            if s.samples:
                req = s.request
                todo = self.outputs[req.request_id][len(req.output_token_ids) :]
                kept = 0
                while kept < len(s.draft_token_ids) and kept < len(todo) and todo[kept] == s.draft_token_ids[kept]:
                    kept += 1
                sampled[req.request_id] = todo[: kept + 1]
        return sampled

    def release(self, request_id):
        pass


def step_bound(requests: list[Request]) -> int:
    """Steps a run may take: the last arrival or abort, plus every request's whole work (prompt + output) once per
    request that could preempt or retract it and once more. A schedule that computes at least one token of the
    running list's head per step (vLLM's rule, SGLang's prefill-first and retraction, static batches) needs far
    fewer; a spinning engine exceeds any bound."""
    work = sum(r.num_prompt_tokens + r.sampling.max_tokens for r in requests)
    last = max([r.arrival_step or 0 for r in requests] + [r.abort_step or 0 for r in requests])
    return last + 1 + work * (len(requests) + 1)


@st.composite
def edge_workloads(draw):
    """Configs at their edges in every batching mode, and prompts over a 3-token vocabulary (so prefixes are shared
    and n-gram drafts are found), some requests aborted, some arriving later."""
    batching = draw(st.sampled_from(["continuous", "static", "sglang"]))
    sglang = batching == "sglang"
    k = draw(st.sampled_from([0, 0, 1, 2, 4, 8])) if batching == "continuous" else 0
    config = {
        "batching": batching,
        "max_num_seqs": draw(st.sampled_from([1, 1, 2, 3, 8])),
        "block_size": 1 if sglang else draw(st.sampled_from([1, 1, 2, 4, 16])),
        "enable_chunked_prefill": True if sglang else draw(st.booleans()),
        "enable_prefix_caching": draw(st.booleans()),
        "reserve_full_prompt": draw(st.booleans()),
        "scheduling_policy": draw(st.sampled_from(["fcfs", "lpm"] if sglang else ["fcfs", "priority"])),
        "enable_mixed_chunk": sglang and draw(st.booleans()),
        "num_speculative_tokens": k,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": draw(st.integers(1, 3)),
    }
    requests, outputs = [], {}
    for i in range(draw(st.integers(1, 5))):
        rid = f"R{i}"
        max_tokens = draw(st.integers(1, 6))
        out = draw(st.lists(st.integers(3, 5), min_size=max_tokens, max_size=max_tokens))
        ignore_eos = draw(st.booleans())
        eos_at = None if ignore_eos else draw(st.none() | st.integers(1, max_tokens))
        outputs[rid] = out if eos_at is None else [*out[: eos_at - 1], EOS]
        requests.append(
            Request(
                rid,
                draw(st.lists(st.integers(3, 5), min_size=1, max_size=12)),
                SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos),
                arrival_step=draw(st.sampled_from([0, 0, 1, 3])),
                priority=draw(st.integers(-1, 1)) if config["scheduling_policy"] == "priority" else 0,
                abort_step=draw(st.none() | st.none() | st.integers(0, 8)),
            )
        )
    # the edges: a budget of 1 token or just the longest prompt, a pool of 1 block or just the largest request
    longest = max(r.num_prompt_tokens for r in requests)
    largest = max(-(-(r.max_kv_tokens + k + 3) // config["block_size"]) for r in requests)  # + SGLang's margin
    config["max_num_batched_tokens"] = draw(st.sampled_from([1, 2, 1 + k, longest, longest + 1, 64]))
    config["num_kv_blocks"] = draw(st.sampled_from([1, largest - 1, largest, largest, largest + 1, largest + 8]))
    return config, requests, outputs


@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=edge_workloads())
def test_every_mode_ends_or_refuses_up_front(case):
    """1,500 edge workloads over the three batching modes (drafts under continuous): each run ends within
    ``step_bound``, with every request finished or aborted, or is refused before any step."""
    config, requests, outputs = case
    runner = ScriptRunner(outputs, step_bound(requests))
    try:
        engine = LLMEngine(runner, EngineConfig(**config), eos_token_ids={EOS}, max_model_len=64)
        records = engine.run(requests)
    except (ConfigError, RequestError) as exc:
        event(f"refused: {type(exc).__name__}")
        assert runner.steps == 0, "refused after a step ran"
        assert "\n" not in str(exc) and exc.field in str(exc)
        return
    event(f"ran: {config['batching']}")
    summary = records[-1]["requests"]
    assert all(r["finish_reason"] in ("stop", "length", "abort") for r in summary), summary


def seed_5() -> tuple[dict, list[Request], dict[str, list[int]]]:
    """Issue 33's shrunk example: budget 1, one draft token, prefix caching, four one- and two-token prompts."""
    config = {
        "max_num_seqs": 1,
        "max_num_batched_tokens": 1,
        "block_size": 1,
        "num_kv_blocks": 5,
        "enable_prefix_caching": True,
        "reserve_full_prompt": False,
        "num_speculative_tokens": 1,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 1,
    }
    sizes = {"R0": ([3], 3), "R1": ([3], 1), "R2": ([3], 1), "R3": ([3, 3], 1)}
    requests = [Request(rid, p, SamplingParams(max_tokens=m), arrival_step=0) for rid, (p, m) in sizes.items()]
    return config, requests, {"R0": [3, 3, 3], "R1": [3], "R2": [3], "R3": [3]}


def test_seed_5_is_refused_before_any_step():
    """The config vLLM's own scheduler loops on is refused in one line naming the budget and the smallest that
    works (1 + num_speculative_tokens = 2); with a budget of 2 the same workload ends, R3 admitted with its
    cached token and one placeholder draft."""
    config, requests, outputs = seed_5()
    with pytest.raises(ConfigError) as err:
        LLMEngine(ScriptRunner(outputs, 100), EngineConfig(**config), eos_token_ids={EOS}, max_model_len=4)
    assert err.value.field == "max_num_batched_tokens" and "at least 1 + num_speculative_tokens = 2" in str(err.value)
    records = LLMEngine(
        ScriptRunner(outputs, 100), EngineConfig(**{**config, "max_num_batched_tokens": 2}), {EOS}, max_model_len=4
    ).run(requests)
    r3 = next(s for st in records[1:-1] for s in st["scheduled"] if s["request_id"] == "R3")
    assert (r3["num_tokens"], r3["num_computed_tokens"]) == (2, 1)  # 1 token + 1 placeholder draft after a 1-hit
    assert [r["finish_reason"] for r in records[-1]["requests"]] == ["length"] * 4


def test_a_run_that_stops_progressing_is_named_not_looped(monkeypatch):
    """With the up-front refusal bypassed, the seed-5 run stalls at step 5 (R3 held by the token budget: 2 tokens
    needed, 1 left) and the engine raises ``EngineStalled`` there in one line, instead of logging steps forever."""
    config, requests, outputs = seed_5()
    cfg = EngineConfig(**{**config, "max_num_batched_tokens": 2})
    engine = LLMEngine(ScriptRunner(outputs, 100), cfg, eos_token_ids={EOS}, max_model_len=4)
    engine.scheduler.config.max_num_batched_tokens = 1  # as if validation had let it through
    with pytest.raises(EngineStalled) as err:
        engine.run(requests)
    message = str(err.value)
    assert "\n" not in message and "step 5 scheduled nothing" in message
    assert "R3 waits at the head of the queue, held by the limit token budget (needs 2 tokens, 1 left)" in message


def test_a_pending_arrival_or_abort_is_not_a_stall():
    """An empty step is a stall only if nothing can change the next one: the message is built from the record, and
    the engine does not raise while a later abort can still free the head (``_stalled``)."""
    record = {
        "step": 7,
        "scheduled": [],
        "finished": [],
        "preempted": [],
        "waiting": ["B"],
        "decisions": {"head": {"request_id": "B", "limit": "kv_blocks", "need": 3, "left": 1}},
    }
    assert "B waits at the head of the queue, held by the limit KV blocks (needs 3 blocks, 1 free)" in stall_message(
        record
    )
    config, _, outputs = seed_5()
    engine = LLMEngine(ScriptRunner(outputs, 100), EngineConfig(**{**config, "max_num_batched_tokens": 2}), {EOS})
    later_abort = [Request("X", [3], SamplingParams(max_tokens=1), arrival_step=0, abort_step=9)]
    assert not engine._stalled(record, [], later_abort, 7)
    assert not engine._stalled(record, later_abort, [], 7)  # still to arrive
    assert engine._stalled(record, [], [], 7)
