"""The glossary's memory and serving terms: each "see it" lands on a step of a shipped trace that really shows the
term, checked here on the trace's raw records (``serving_visible``, also used by ``test_glossary``), and each
figure it quotes is recomputed by hand (SmolLM2-135M-Instruct's config.json: 30 layers, 9 query heads, 3 KV heads
of 64; float32)."""

from __future__ import annotations

import math
import statistics

import pytest
from conftest import RECORDED, step_records

from batchscope.glossary.entries import see_it
from batchscope.glossary.terms import TERMS
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

SCENARIOS = ("seed-abcd", "preemption", "sixteen", "shared-prefix", "priority")
KEYS = [(sc, p) for sc in SCENARIOS for p in ("continuous", "static")]
PER_TOKEN, PER_TOKEN_MHA = 2 * 30 * 3 * 64 * 4, 2 * 30 * 9 * 64 * 4  # bytes: K and V × layers × heads × dim × 4
SERVING = ("kv_bytes", "fragmentation", "memory_bound", "gqa", "head_of_line", "vllm_metrics")


def _decode_times(steps: list[dict]) -> dict[int, list[float]]:
    """Decode-only steps' wall times by the number of requests decoding."""
    out: dict[int, list[float]] = {}
    for st in steps:
        if st["scheduled"] and all(s["kind"] == "decode" for s in st["scheduled"]):
            out.setdefault(len(st["scheduled"]), []).append(st["t_end"] - st["t_start"])
    return out


def _memory_bound(steps: list[dict], k: int) -> bool:
    times = _decode_times(steps)
    few, many = min(times), max(times)
    st = steps[k]
    decode_only = all(s["kind"] == "decode" for s in st["scheduled"]) and len(st["scheduled"]) == many
    growth = statistics.median(times[many]) / statistics.median(times[few])
    return (
        decode_only
        and many >= 2 * few
        and growth < many / few / 2
        and (st["t_end"] - st["t_start"] <= statistics.median(times[many]))
    )


def _known(header: dict, steps: list[dict], k: int, rid: str) -> int:
    prompt = next(r["num_prompt_tokens"] for r in header["requests"] if r["request_id"] == rid)
    return prompt + sum(s["request_id"] == rid for st in steps[:k] for s in st["sampled"])


def _head_of_line(header: dict, steps: list[dict], k: int) -> bool:
    """FCFS, nobody admitted or preempted, a row and budget tokens free, the head's whole known sequence needs more
    blocks than are free, and a request behind it needs no more than are free."""
    st, cfg = steps[k], header["config"]
    free = st["kv"]["num_blocks"] - st["kv"]["num_used_blocks"]
    need = [math.ceil(_known(header, steps, k, r) / cfg["block_size"]) for r in st["waiting"]]
    room = len(st["running"]) < cfg["max_num_seqs"] and st["num_batched_tokens"] < cfg["max_num_batched_tokens"]
    quiet = cfg["scheduling_policy"] == "fcfs" and not st["admitted"] and not st["preempted"]
    return room and quiet and len(need) >= 2 and need[0] > free and min(need[1:]) <= free


def serving_visible(term: str, records: list[dict], k: int) -> bool:
    """Whether ``term`` can be seen in step ``k`` of ``records``: a reading of the raw records."""
    header, steps = records[0], step_records(records)
    kv = steps[k]["kv"]
    bs = kv["block_size"]
    unused = [len(t) * bs - kv["num_cached_tokens"][r] for r, t in kv["block_tables"].items()]
    checks = {
        "kv_bytes": lambda: kv["num_used_blocks"] > 0,
        "fragmentation": lambda: any(0 < u < bs for u in unused),
        "memory_bound": lambda: _memory_bound(steps, k),
        "gqa": lambda: kv["num_used_blocks"] == max(st["kv"]["num_used_blocks"] for st in steps),
        "head_of_line": lambda: _head_of_line(header, steps, k),
        "vllm_metrics": lambda: bool(steps[k]["preempted"]) and bool(steps[k]["waiting"]),
    }
    return header["model"] == "SmolLM2-135M-Instruct" and checks[term]()


@pytest.fixture(scope="module")
def places() -> dict:
    views = {key: TraceView(trace.read(RECORDED / f"{key[0]}-{key[1]}.jsonl")) for key in KEYS}
    return {t.key: see_it(t, views) for t in TERMS if t.key in SERVING}


def _records(where) -> list[dict]:
    return trace.read(RECORDED / f"{where.scenario}-{where.policy}.jsonl")


def test_each_term_lands_on_the_first_step_that_shows_it(places):
    assert set(places) == set(SERVING)
    for key, where in places.items():
        assert where is not None, key
        records = _records(where)
        assert serving_visible(key, records, where.step), (key, where)
        assert not any(serving_visible(key, records, k) for k in range(where.step)), key
    assert (places["memory_bound"].scenario, places["head_of_line"].scenario) == ("sixteen", "preemption")


def test_the_figures_each_term_quotes_are_the_hand_computed_ones(places):
    def raw(key):
        where = places[key]
        return where, _records(where)[where.step + 1]

    where, st = raw("kv_bytes")
    n, bs = st["kv"]["num_used_blocks"], st["kv"]["block_size"]
    assert f"= {n * bs * PER_TOKEN:,} bytes" in where.what and "46,080 bytes per token" in where.what
    where, st = raw("gqa")
    slots = st["kv"]["num_used_blocks"] * st["kv"]["block_size"]
    for per_token in (PER_TOKEN, PER_TOKEN_MHA):  # with GQA's 3 KV heads, and with 9
        assert f"{slots * per_token / 2**20:.2f} MiB" in where.what
    where, st = raw("fragmentation")
    kv = st["kv"]
    total = sum(len(t) * kv["block_size"] - kv["num_cached_tokens"][r] for r, t in kv["block_tables"].items())
    assert where.what.endswith(f"{total} slots")
    where, st = raw("vllm_metrics")
    done = {f["request_id"] for f in st["finished"]}
    held = {b for r, t in st["kv"]["block_tables"].items() if r not in done for b in t}
    n = st["kv"]["num_blocks"]
    running, waiting = [r for r in st["running"] if r not in done], [r for r in st["waiting"] if r not in done]
    assert f"vllm:num_requests_running = {len(running)}, vllm:num_requests_waiting = {len(waiting)} " in where.what
    assert f"vllm:kv_cache_usage_perc = {len(held) / n:.2f} ({len(held)} of {n} blocks)" in where.what
    victim = st["preempted"][0]  # vLLM's frontend counts the preemption with the victim's next output
    steps = step_records(_records(where))
    nxt = next(k for k in range(where.step, len(steps)) if any(s["request_id"] == victim for s in steps[k]["sampled"]))
    assert where.what.startswith(f"{victim} is preempted") and where.what.endswith(
        f"at step {nxt}, {victim}'s next token"
    )


def test_the_metric_entry_names_vllms_own_metrics():
    """Each name is one vLLM 0.33 defines (vllm/v1/metrics/loggers.py, copied here by hand)."""
    term = next(t for t in TERMS if t.key == "vllm_metrics")
    names = [line.split(":")[0] + ":" + line.split(":")[1] for line in term.formula.splitlines()]
    assert names == [
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:request_time_per_output_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
    ]


def test_a_trace_of_an_unknown_model_has_no_kv_figures(places):
    records = trace.read(RECORDED / "seed-abcd-continuous.jsonl")
    other = TraceView([{**records[0], "model": "some-other-model"}, *records[1:]])
    for key in ("kv_bytes", "gqa"):
        term = next(t for t in TERMS if t.key == key)
        assert term.find(other) is None
