"""Latency metrics (engine.metrics) against values computed by hand, on a trace written by hand.

The synthetic trace (continuous, max_num_seqs=2, budget 4 tokens, 3 blocks of 4 slots):

    step  t_start t_end  scheduled                                   sampled      notes
    0     0.0     1.0    one prefill 2, long prefill 2 (chunk)       one          one finishes (1 token)
    1     1.0     1.5    long prefill 4 (rest of its prompt)         long         long's first token: chunked prefill
    2     1.5     2.0    long decode, pre prefill 2                  long, pre    pre arrived at 1.25 s
    3     2.0     2.5    long decode, pre decode                     long, pre
    4     2.5     3.0    long decode (needs a 3rd block)             long         pre preempted (3 tokens dropped)
    5     3.0     4.0    pre prefill 4 (recompute)                   pre          pre finishes

Per request (seconds | steps, on the step clock where step k runs from k to k + 1):
    one:  queue 0 | 0, TTFT 1.0 | 1, E2E 1.0 | 1, TPOT None, ITL []
    long: queue 0 | 0, TTFT 1.5 | 2, E2E 3.0 | 5, TPOT 0.5 | 1, ITL [0.5, 0.5, 0.5] | [1, 1, 1]
    pre:  queue 0.25 | 0, TTFT 0.75 | 1, E2E 2.75 | 4, TPOT 1.0 | 1.5, ITL [0.5, 1.5] | [1, 2]
"""

from __future__ import annotations

import itertools
import math

import pytest
from conftest import case_workload, step_records
from fakes import make_request, run_fake

from batchscope.inputs.workload import poisson_arrivals
from batchscope.steplog import frames, metrics, trace

CONFIG = {
    "max_num_seqs": 2,
    "max_num_batched_tokens": 4,
    "block_size": 4,
    "num_kv_blocks": 3,
    "enable_chunked_prefill": True,
}


def _req(rid, n_prompt, max_tokens, arrival):
    return {
        "request_id": rid,
        "prompt": rid,
        "num_prompt_tokens": n_prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "seed": None,
        "ignore_eos": False,
        "arrival_time": arrival,
        "arrival_step": None,
    }


def _step(k, t0, t1, scheduled, sampled, tables, *, admitted=(), finished=(), preempted=(), waiting=(), allocated=None):
    sched = [
        {"request_id": rid, "kind": kind, "num_tokens": n, "num_computed_tokens": c, "slot": slot, "recompute": rec}
        for rid, kind, n, c, slot, rec in scheduled
    ]
    return {
        "type": "step",
        "step": k,
        "t_start": t0,
        "t_end": t1,
        "scheduled": sched,
        "num_batched_tokens": sum(s["num_tokens"] for s in sched),
        "sampled": [{"request_id": rid, "token_id": tok, "text": str(tok)} for rid, tok in sampled],
        "admitted": list(admitted),
        "finished": [{"request_id": r, "reason": why} for r, why in finished],
        "preempted": list(preempted),
        "waiting": list(waiting),
        "running": [s["request_id"] for s in sched],
        "padding_slots": [],
        "kv": {
            "num_blocks": 3,
            "block_size": 4,
            "num_used_blocks": sum(len(t) for t in tables.values()),
            "block_tables": tables,
            "num_cached_tokens": {s["request_id"]: s["num_computed_tokens"] + s["num_tokens"] for s in sched},
            "allocated": allocated or {},
        },
    }


def _summary(rid, tokens, reason, arrival, sched, first, finish, preemptions=0, recomputed=0):
    return {
        "request_id": rid,
        "output_text": "",
        "output_token_ids": tokens,
        "finish_reason": reason,
        "num_preemptions": preemptions,
        "num_recomputed_tokens": recomputed,
        "arrival_time": arrival,
        "first_scheduled_time": sched,
        "first_token_time": first,
        "finish_time": finish,
    }


@pytest.fixture
def hand_trace():
    header = {
        "type": "header",
        "schema_version": 1,
        "model": "hand",
        "device": "cpu",
        "dtype": "float32",
        "policy": "continuous",
        "created": "2026-11-29T00:00:00+00:00",
        "scenario": None,
        "config": CONFIG,
        "requests": [_req("one", 2, 1, 0.0), _req("long", 6, 4, 0.0), _req("pre", 2, 3, 1.25)],
    }
    steps = [
        _step(
            0,
            0.0,
            1.0,
            [("one", "prefill", 2, 0, 0, False), ("long", "prefill", 2, 0, 1, False)],
            [("one", 11)],
            {"one": [0], "long": [1]},
            admitted=["one", "long"],
            finished=[("one", "length")],
            allocated={"one": [0], "long": [1]},
        ),
        _step(
            1,
            1.0,
            1.5,
            [("long", "prefill", 4, 2, 1, False)],
            [("long", 21)],
            {"long": [1, 2]},
            allocated={"long": [2]},
        ),
        _step(
            2,
            1.5,
            2.0,
            [("long", "decode", 1, 6, 1, False), ("pre", "prefill", 2, 0, 0, False)],
            [("long", 22), ("pre", 31)],
            {"long": [1, 2], "pre": [0]},
            admitted=["pre"],
            allocated={"pre": [0]},
        ),
        _step(
            3,
            2.0,
            2.5,
            [("long", "decode", 1, 7, 1, False), ("pre", "decode", 1, 2, 0, False)],
            [("long", 23), ("pre", 32)],
            {"long": [1, 2], "pre": [0]},
        ),
        _step(
            4,
            2.5,
            3.0,
            [("long", "decode", 1, 8, 1, False)],
            [("long", 24)],
            {"long": [1, 2, 0]},
            finished=[("long", "length")],
            preempted=["pre"],
            waiting=["pre"],
            allocated={"long": [0]},
        ),
        _step(
            5,
            3.0,
            4.0,
            [("pre", "prefill", 4, 0, 0, True)],
            [("pre", 33)],
            {"pre": [1]},
            admitted=["pre"],
            finished=[("pre", "length")],
            allocated={"pre": [1]},
        ),
    ]
    summary = {
        "type": "summary",
        "requests": [
            _summary("one", [11], "length", 0.0, 0.0, 1.0, 1.0),
            _summary("long", [21, 22, 23, 24], "length", 0.0, 0.0, 1.5, 3.0),
            _summary("pre", [31, 32, 33], "length", 1.25, 1.5, 2.0, 4.0, preemptions=1, recomputed=3),
        ],
    }
    records = [header, *steps, summary]
    trace.validate_records(records)  # the hand-written trace is a valid trace
    return records


def test_per_request_seconds(hand_trace):
    m = {r["request_id"]: r for r in metrics.request_metrics(hand_trace)}
    one, long, pre = m["one"], m["long"], m["pre"]
    assert (one["queue_time_s"], one["ttft_s"], one["e2e_s"], one["tpot_s"], one["itl_s"]) == (0.0, 1.0, 1.0, None, [])
    assert (long["queue_time_s"], long["ttft_s"], long["e2e_s"]) == (0.0, 1.5, 3.0)  # first token: chunked prefill
    assert long["tpot_s"] == pytest.approx(0.5) and long["itl_s"] == pytest.approx([0.5, 0.5, 0.5])
    assert (pre["queue_time_s"], pre["ttft_s"], pre["e2e_s"]) == pytest.approx((0.25, 0.75, 2.75))
    assert pre["itl_s"] == pytest.approx([0.5, 1.5])  # the preemption stall is one long gap
    assert pre["tpot_s"] == pytest.approx(1.0)
    assert pre["token_times_s"] == [2.0, 2.5, 4.0] and pre["num_output_tokens"] == 3  # nothing emitted twice
    assert (pre["num_preemptions"], pre["num_recomputed_tokens"]) == (1, 3)


def test_per_request_steps(hand_trace):
    m = {r["request_id"]: r for r in metrics.request_metrics(hand_trace)}
    got = {
        rid: (
            r["arrival_step"],
            r["queue_time_steps"],
            r["ttft_steps"],
            r["e2e_steps"],
            r["tpot_steps"],
            r["itl_steps"],
        )
        for rid, r in m.items()
    }
    assert got == {
        "one": (0, 0, 1, 1, None, []),
        "long": (0, 0, 2, 5, 1.0, [1, 1, 1]),
        "pre": (2, 0, 1, 4, 1.5, [1, 2]),
    }


def test_tpot_is_mean_of_itl_for_every_request(hand_trace):
    for r in metrics.request_metrics(hand_trace):
        if r["num_output_tokens"] >= 2:
            assert r["tpot_s"] == pytest.approx(sum(r["itl_s"]) / len(r["itl_s"]))
            assert r["tpot_steps"] == pytest.approx(sum(r["itl_steps"]) / len(r["itl_steps"]))


def test_aggregates(hand_trace):
    s = metrics.summarize(hand_trace)
    # TTFT 1.0, 1.5, 0.75: p90 by linear interpolation on the sorted values 0.75, 1.0, 1.5 is 1.0 + 0.8 * 0.5
    assert s["ttft_s"] == pytest.approx({"count": 3, "mean": 3.25 / 3, "p50": 1.0, "p90": 1.4, "p99": 1.49})
    # ITL pools 5 gaps summing to 3.5 s: mean 0.7 (dividing by the 8 output tokens would give 0.4375)
    assert s["itl_s"]["count"] == 5 and s["itl_s"]["mean"] == pytest.approx(0.7)
    assert s["itl_s"]["p50"] == pytest.approx(0.5)
    # TPOT over the two requests with >= 2 tokens only (one's None is not a 0)
    assert s["tpot_s"]["count"] == 2 and s["tpot_s"]["mean"] == pytest.approx(0.75)
    assert s["e2e_s"]["mean"] == pytest.approx(2.25) and s["e2e_s"]["p50"] == pytest.approx(2.75)
    assert s["queue_time_s"]["mean"] == pytest.approx(0.25 / 3)
    assert s["ttft_steps"]["mean"] == pytest.approx(4 / 3) and s["itl_steps"]["mean"] == pytest.approx(1.2)
    assert s["tpot_steps"]["mean"] == pytest.approx(1.25) and s["e2e_steps"]["mean"] == pytest.approx(10 / 3)


def test_throughput_and_utilisation(hand_trace):
    s = metrics.summarize(hand_trace)
    assert (s["num_steps"], s["duration_s"], s["total_output_tokens"]) == (6, 4.0, 8)
    assert s["output_throughput_tok_s"] == pytest.approx(2.0)
    assert s["request_throughput_req_s"] == pytest.approx(0.75)
    assert s["output_throughput_tok_step"] == pytest.approx(8 / 6)
    assert s["request_throughput_req_step"] == pytest.approx(0.5)
    assert s["slot_utilisation"] == pytest.approx(9 / 12)  # rows 2, 1, 2, 2, 1, 1 of 2 slots
    assert s["kv_utilisation_mean"] == pytest.approx(14 / 18) and s["kv_utilisation_max"] == 1.0
    assert (s["num_preemptions"], s["num_recomputed_tokens"], s["padding_slot_steps"]) == (1, 3, 0)


def test_frames(hand_trace):
    df = frames.requests_frame(hand_trace)
    assert list(df.index) == ["one", "long", "pre"]
    assert math.isnan(df.loc["one", "tpot_s"]) and df.loc["long", "ttft_s"] == 1.5
    steps = metrics.steps_frame(hand_trace)
    assert list(steps["kv_used_blocks"]) == [2, 2, 3, 3, 3, 1]
    assert list(steps["num_prefill"]) == [2, 1, 1, 0, 0, 1] and list(steps["num_preempted"]) == [0] * 4 + [1, 0]
    side = frames.summary_frame({"a": hand_trace, "b": hand_trace})
    row = side[(side.metric == "itl_s") & (side.stat == "mean")].iloc[0]
    assert (row["unit"], row["a"], row["b"]) == ("s", pytest.approx(0.7), pytest.approx(0.7))
    assert set(side["unit"]) >= {"s", "steps", "tokens/s", "fraction"}


def test_inconsistent_trace_is_refused(hand_trace):
    hand_trace[-1]["requests"][1]["output_token_ids"].append(99)  # summary holds a token no step sampled
    with pytest.raises(metrics.MetricsError, match="'long'"):
        metrics.request_metrics(hand_trace)


def test_padding_slot_steps_on_a_static_run():
    # static, 2 slots: A ends with its first token in step 0; B decodes in steps 1-3 while A's row pads
    _, _, records = run_fake(
        [make_request("A", 3, 1), make_request("B", 3, 4)],
        batching="static",
        max_num_seqs=2,
        max_num_batched_tokens=16,
        block_size=4,
        num_kv_blocks=8,
    )
    s = metrics.summarize(records)
    assert (s["num_steps"], s["padding_slot_steps"]) == (4, 3)
    assert s["slot_utilisation"] == pytest.approx(5 / 8)
    assert s["ttft_steps"]["mean"] == 1 and s["e2e_steps"]["p50"] == pytest.approx(2.5)


def test_step_clock_arrivals_come_back_from_the_trace():
    reqs = [make_request("A", 3, 2, arrival_step=0), make_request("B", 3, 2, arrival_step=3)]
    _, _, records = run_fake(reqs, max_num_seqs=2, max_num_batched_tokens=16, block_size=4, num_kv_blocks=8)
    m = {r["request_id"]: r for r in metrics.request_metrics(records)}
    assert (m["B"]["arrival_step"], m["B"]["ttft_steps"], m["B"]["e2e_steps"]) == (3, 1, 2)


@pytest.mark.real_model
def test_c13_one_token_request_on_the_real_model(smollm):
    from batchscope.engine.config import EngineConfig
    from batchscope.engine.llm import generate_trace

    records = generate_trace(
        smollm,
        case_workload("c13"),
        EngineConfig(batching="continuous", max_num_seqs=2, max_num_batched_tokens=128, block_size=4, num_kv_blocks=32),
    )
    t_end = [st["t_end"] for st in step_records(records)]
    m = {r["request_id"]: r for r in metrics.request_metrics(records)}
    one, cat = m["one"], m["cat"]
    assert one["num_output_tokens"] == 1
    assert one["ttft_s"] == one["e2e_s"] == t_end[0] and one["tpot_s"] is None and one["itl_s"] == []
    assert cat["num_output_tokens"] == 4  # EOS counts
    assert cat["ttft_s"] == t_end[0]
    assert cat["itl_s"] == [t_end[k] - t_end[k - 1] for k in (1, 2, 3)]
    assert cat["tpot_s"] == pytest.approx((cat["e2e_s"] - cat["ttft_s"]) / 3)
    assert cat["tpot_s"] == pytest.approx(sum(cat["itl_s"]) / 3)
    s = metrics.summarize(records)
    assert s["itl_s"]["count"] == 3 and s["itl_s"]["mean"] == pytest.approx((t_end[3] - t_end[0]) / 3)
    assert s["tpot_s"]["count"] == 1 and s["tpot_s"]["mean"] == pytest.approx(cat["tpot_s"])
    assert all(r["queue_time_s"] >= 0 for r in m.values())


def test_poisson_arrivals_seconds_and_steps():
    specs = [{"request_id": f"r{i}", "prompt": "x", "max_tokens": 1, "arrival_step": 7} for i in range(4000)]
    a = poisson_arrivals(specs, rate=2.0, seed=1)
    assert a == poisson_arrivals(specs, rate=2.0, seed=1)  # seeded
    assert a != poisson_arrivals(specs, rate=2.0, seed=2)
    times = [s["arrival_time"] for s in a]
    assert times[0] == 0.0 and all(b >= t for t, b in itertools.pairwise(times))
    assert "arrival_step" not in a[0]
    assert times[-1] / (len(times) - 1) == pytest.approx(0.5, rel=0.05)  # mean gap 1 / rate
    steps = [s["arrival_step"] for s in poisson_arrivals(specs, rate=0.25, seed=1, clock="steps")]
    assert all(isinstance(k, int) for k in steps) and steps == sorted(steps)
    assert steps[-1] / (len(steps) - 1) == pytest.approx(4.0, rel=0.05)
    assert {s["arrival_time"] for s in poisson_arrivals(specs[:5], rate=math.inf)} == {0.0}
    with pytest.raises(ValueError, match="rate"):
        poisson_arrivals(specs, rate=0)
    with pytest.raises(ValueError, match="clock"):
        poisson_arrivals(specs, rate=1.0, clock="minutes")


def test_figures_for_the_app(hand_trace):
    from batchscope.figures import metrics as vm

    runs = {"static": hand_trace, "continuous": hand_trace}
    fig = vm.request_latency(runs, "ttft_s")
    assert [t.name for t in fig.data] == ["static", "continuous"]
    assert list(fig.data[0].x) == ["one", "long", "pre"] and list(fig.data[0].y) == [1.0, 1.5, 0.75]
    assert "(s)" in fig.layout.yaxis.title.text
    tpot = vm.request_latency(runs, "tpot_steps")
    assert list(tpot.data[1].y) == [None, 1.0, 1.5] and "(steps)" in tpot.layout.yaxis.title.text
    cdf = vm.latency_cdf({"run": hand_trace}, "itl_s")
    assert list(cdf.data[0].x) == pytest.approx([0.5, 0.5, 0.5, 0.5, 1.5]) and cdf.data[0].y[-1] == 1.0
    kv = vm.kv_utilisation({"run": hand_trace})
    assert list(kv.data[0].y) == pytest.approx([2 / 3, 2 / 3, 1, 1, 1, 1 / 3])
    assert list(vm.kv_utilisation({"run": hand_trace}, clock="s").data[0].x) == [1.0, 1.5, 2.0, 2.5, 3.0, 4.0]
    with pytest.raises(ValueError, match="metric"):
        vm.request_latency(runs, "itl_s")
    with pytest.raises(ValueError, match="clock"):
        vm.kv_utilisation(runs, clock="minutes")


def test_prefix_cache_hit_rate_is_vllms_hits_over_queried_tokens():
    """By hand: X and Y share a 10-token prompt (2 full blocks of 4), Z has its own 6 tokens; block size 4. X and Z
    find nothing, Y finds X's 8 tokens (registered when X was scheduled, in the same step): queries 10 + 10 + 6 = 26
    tokens, hits 8, rate 8/26. A trace without hit counts has no rate."""
    from fakes import EOS, FakeRunner

    from batchscope.engine.config import EngineConfig
    from batchscope.engine.engine import LLMEngine
    from batchscope.engine.request import Request, SamplingParams
    from batchscope.steplog.metrics import summarize

    shared = list(range(100, 110))
    reqs = [
        Request("X", shared, SamplingParams(max_tokens=2)),
        Request("Y", list(shared), SamplingParams(max_tokens=2)),
        Request("Z", list(range(200, 206)), SamplingParams(max_tokens=2)),
    ]
    config = EngineConfig(max_num_seqs=3, max_num_batched_tokens=64, block_size=4, num_kv_blocks=16)
    records = LLMEngine(FakeRunner(), config, eos_token_ids={EOS}).run(reqs)
    s = summarize(records)
    assert (s["prefix_cache_queries"], s["prefix_cache_hits"]) == (26, 8)
    assert s["prefix_cache_hit_rate"] == pytest.approx(8 / 26)
    assert (s["preempted_prefix_cache_queries"], s["preempted_prefix_cache_hits"]) == (0, 0)
    for st in step_records(records):
        st.pop("decisions")  # the hits are still in num_prefix_hit_tokens (an older trace)
    assert summarize(records)["prefix_cache_hit_rate"] == pytest.approx(8 / 26)
    for st in step_records(records):
        st.pop("num_prefix_hit_tokens")  # now nothing records a hit count
    assert summarize(records)["prefix_cache_hit_rate"] is None
