"""Random differential: Batchscope's scheduler (with a replay runner) and vLLM 0.33.0's real scheduler, same
workload and same sampled tokens, must agree on every step.

``differential(config_overrides)`` is the harness: hypothesis draws a workload (1-6 requests; prompts of 1-60
tokens built from one of a few *shared stems* plus a tail of their own, over a 7-token vocabulary, so that prefixes
are shared and prefix caching matters; 1-30 output tokens; arrival steps 0-10; EOS at a random output position or
never; ``ignore_eos`` on or off; priorities -2..2) and a config (``max_num_seqs`` 1-4, a token budget from
``max_num_seqs`` to 64, ``block_size`` in {1, 2, 4, 8, 16}, a pool from "the largest request just fits alone" to
"everything fits at once", chunked prefill on, both admission rules, prefix caching on and off, FCFS and priority),
runs it through ``LLMEngine(ReplayRunner)`` and through ``run_vllm`` with the same tokens, and compares every step
(``batchscope_vllm.compare``: scheduled tokens, batch order, admissions, preemptions, finishes, prefix-cache hits,
block ids, reference counts, cached free blocks, evictions). vLLM refuses a budget below ``max_num_seqs``
(``SchedulerConfig.verify_max_model_len``), so the budget starts there. Chunked prefill stays on: with it off, vLLM
never resumes a preempted request whose recompute exceeds the budget (Batchscope splits it; see README, Fidelity).

``config_overrides`` pin config fields (e.g. ``{"enable_prefix_caching": False}``) instead of drawing them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from replay import run_both

from batchscope_vllm.compare import first_difference

BLOCK_SIZES = (1, 2, 4, 8, 16)
EOS = 2
OTHER = 7  # the token sampled when not EOS


@dataclasses.dataclass
class Case:
    """One drawn workload: Batchscope ``EngineConfig`` fields and requests (with their output tokens)."""

    config: dict[str, Any]
    requests: list[dict[str, Any]]  # request_id, prompt_token_ids, max_tokens, ignore_eos, arrival_step, priority,
    #                                 output_token_ids


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


@st.composite
def cases(draw: st.DrawFn, overrides: dict[str, Any], aborts: bool = False) -> Case:
    """A workload and config (see the module docstring); ``aborts``: each request may also get an ``abort_step``
    (0-25: before, during or after its life, so it is aborted waiting, running, preempted, or not at all)."""
    max_num_seqs = draw(st.integers(1, 4))
    budget = draw(st.integers(max_num_seqs, 64))
    block_size = draw(st.sampled_from(BLOCK_SIZES))
    stems = draw(st.lists(st.lists(st.integers(3, 9), max_size=48), min_size=1, max_size=3))
    requests = []
    for i in range(draw(st.integers(1, 6))):
        stem = draw(st.sampled_from(stems))
        shared = stem[: draw(st.just(len(stem)) | st.integers(0, len(stem)))]  # often the whole stem
        prompt = (shared + draw(st.lists(st.integers(3, 9), min_size=1, max_size=30)))[:60]
        max_tokens = draw(st.integers(1, 30))
        eos_at = draw(st.none() | st.integers(1, max_tokens))
        ignore_eos = draw(st.booleans())
        length = max_tokens if eos_at is None or ignore_eos else eos_at
        requests.append(
            {
                "request_id": f"R{i}",
                "prompt_token_ids": prompt,
                "max_tokens": max_tokens,
                "ignore_eos": ignore_eos,
                "arrival_step": draw(st.integers(0, 10)),
                "priority": draw(st.integers(-2, 2)),
                "output_token_ids": [EOS if k + 1 == eos_at else OTHER for k in range(length)],
            }
        )
        if aborts and draw(st.booleans()):
            requests[-1]["abort_step"] = draw(st.integers(0, 25))
    needs = [blocks_for(len(r["prompt_token_ids"]) + r["max_tokens"] - 1, block_size) for r in requests]
    config = {
        "batching": "continuous",
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": budget,
        "block_size": block_size,
        "num_kv_blocks": draw(st.integers(max(needs), max(max(needs), sum(needs)))),
        "enable_chunked_prefill": True,
        "reserve_full_prompt": draw(st.booleans()),
        "enable_prefix_caching": draw(st.booleans()),
        "scheduling_policy": draw(st.sampled_from(["fcfs", "priority"])),
        **overrides,
    }
    return Case(config, requests)


def differential(
    config_overrides: dict[str, Any], max_examples: int = 500, collect: bool = False, aborts: bool = False
) -> tuple[int, list[tuple[Case, str]]]:
    """Run ``max_examples`` random cases with ``config_overrides`` (see the module docstring); ``aborts``: with
    abort steps (``cases``).

    ``collect=False``: fail (hypothesis shrinks to a minimal case) on the first disagreement.
    ``collect=True``: never fail; return (examples run, every disagreeing case with its first difference).
    """
    differing: list[tuple[Case, str]] = []
    ran = [0]

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        database=None if collect else settings.default.database,
    )
    @given(case=cases(config_overrides, aborts))
    def check(case: Case) -> None:
        ran[0] += 1
        records, steps = run_both(case.requests, case.config, [EOS])
        verdict = first_difference(records, steps)
        if verdict.startswith("agrees"):
            return
        if collect:
            differing.append((case, verdict))
        else:
            raise AssertionError(f"{verdict}\nconfig {case.config}\nrequests {case.requests}")

    check()
    return ran[0], differing


def test_differential_every_rule_and_policy():
    """1000 random workloads, configs drawn over both admission rules, prefix caching on and off, FCFS and
    priority: every step agrees."""
    ran, _ = differential({}, max_examples=1000)
    assert ran >= 1000


def test_differential_with_aborts():
    """500 random workloads whose requests may be aborted before any step (``abort_step``: the engine's
    ``Scheduler.abort``, vLLM's ``Scheduler.finish_requests(id, FINISHED_ABORTED)`` before the same
    ``schedule()``), waiting, running or preempted: every step agrees, the abort's step and the blocks it
    gives back included (later block ids depend on the order blocks went back)."""
    ran, _ = differential({}, max_examples=500, aborts=True)
    assert ran >= 500


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=cases({}), data=st.data())
def test_differential_aborts_while_preempted(case: Case, data: st.DataObject):
    """A random workload that preempts, rerun with one preempted request aborted before a step at which it is
    still waiting without its K/V (drawn from the first run's steps): both schedulers agree on every step, and
    Batchscope records the abort as ``preempted``."""
    records = run_both(case.requests, case.config, [EOS])[0]
    windows = [(rid, st["step"] + 1) for st in records[1:-1] for rid in st["waiting"] if rid in st["preempted"]]
    assume(windows)
    rid, at = data.draw(st.sampled_from(windows))
    requests = [dict(r, abort_step=at) if r["request_id"] == rid else r for r in case.requests]
    records, steps = run_both(requests, case.config, [EOS])
    verdict = first_difference(records, steps)
    assert verdict.startswith("agrees"), f"{verdict}\nconfig {case.config}\nrequests {requests}"
    states = [f["aborted"]["state"] for st in records[1:-1] for f in st["finished"] if f["request_id"] == rid]
    assert states == ["preempted"]


def test_an_abort_in_every_state_agrees_step_by_step():
    """Hand-made: W aborted while waiting (step 3), B while preempted (step 7), A while running (step 9), with
    prefix caching on (A's freed blocks stay cached): both schedulers agree on all 12 steps."""
    config = {
        "batching": "continuous",
        "max_num_seqs": 2,
        "max_num_batched_tokens": 16,
        "block_size": 4,
        "num_kv_blocks": 6,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
    }
    requests = [
        {
            "request_id": rid,
            "prompt_token_ids": list(range(base, base + n)),
            "max_tokens": m,
            "ignore_eos": True,
            "arrival_step": 0,
            "abort_step": at,
            "output_token_ids": [OTHER] * m,
        }
        for rid, base, n, m, at in (("A", 10, 8, 12, 9), ("B", 20, 8, 12, 7), ("W", 30, 4, 2, 3))
    ]
    records, steps = run_both(requests, config, [EOS])
    assert first_difference(records, steps) == "agrees on all 10 steps"
    aborted = {f["request_id"]: (st["step"], f["aborted"]["state"]) for st in records[1:-1] for f in st["finished"]}
    assert aborted == {"W": (3, "waiting"), "B": (7, "preempted"), "A": (9, "running")}


def test_differential_counts_examples_and_reports_disagreements():
    """The harness is not vacuous: a Batchscope run compared with vLLM under another admission rule disagrees."""
    case = Case(
        {
            "batching": "continuous",
            "max_num_seqs": 2,
            "max_num_batched_tokens": 16,
            "block_size": 4,
            "num_kv_blocks": 14,
            "enable_chunked_prefill": True,
            "reserve_full_prompt": False,
            "enable_prefix_caching": False,
        },
        [
            {
                "request_id": "A",
                "prompt_token_ids": list(range(100, 137)),
                "max_tokens": 8,
                "ignore_eos": True,
                "arrival_step": 0,
                "output_token_ids": [OTHER] * 8,
            },
            {
                "request_id": "B",
                "prompt_token_ids": list(range(200, 236)),
                "max_tokens": 8,
                "ignore_eos": True,
                "arrival_step": 0,
                "output_token_ids": [OTHER] * 8,
            },
        ],
    )
    records, steps = run_both(case.requests, case.config, [EOS])
    assert first_difference(records, steps) == "agrees on all 20 steps"
    from batchscope_vllm.compare import workload_from_trace
    from batchscope_vllm.driver import run_vllm

    workload = workload_from_trace(records)
    workload["config"]["reserve_full_prompt"] = True  # vLLM's default rule against Batchscope's first-chunk run
    assert first_difference(records, run_vllm(workload)).startswith("step 2: scheduled differs")


def test_two_aborts_at_one_step_go_in_arrival_order_whatever_the_file_order():
    """Found by hypothesis: R0 (listed first, arrives last) and R2 aborted before step 3, sharing nothing but the
    order their blocks go back. Both schedulers abort in arrival order (R2, then R0): the free queue holds R2's
    blocks tail first, then R0's, [2, 1, 0] (vLLM's own finish_requests iterates a set, so the driver calls it once
    per request)."""
    config = {
        "batching": "continuous",
        "max_num_seqs": 2,
        "max_num_batched_tokens": 2,
        "block_size": 1,
        "num_kv_blocks": 3,
        "enable_chunked_prefill": True,
        "reserve_full_prompt": False,
        "enable_prefix_caching": True,
        "scheduling_policy": "fcfs",
    }
    requests = [
        {
            "request_id": rid,
            "prompt_token_ids": [3],
            "max_tokens": m,
            "ignore_eos": False,
            "arrival_step": arrive,
            "output_token_ids": [OTHER] * m,
            **({"abort_step": 3} if rid != "R1" else {}),
        }
        for rid, m, arrive in (("R0", 2, 2), ("R1", 1, 0), ("R2", 3, 1))
    ]
    records, steps = run_both(requests, config, [EOS])
    assert first_difference(records, steps).startswith("agrees")
    step3 = records[4]
    assert [f["request_id"] for f in step3["finished"]] == ["R2", "R0"]
    assert step3["kv"]["cached_free_blocks"] == [2, 1, 0]
