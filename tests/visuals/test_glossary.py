"""The glossary: every term's "see it" link lands on a step where the term is visible, checked on the raw records
of the linked trace; the worked latency example does its arithmetic on a real request."""

from __future__ import annotations

import copy
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import RECORDED, recorded, step_records
from test_glossary_serving import SERVING, serving_visible

from batchscope.glossary.entries import entries, see_it, worked_example
from batchscope.glossary.terms import TERMS
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

KEYS = [(sc, p) for sc in ("seed-abcd", "preemption", "sixteen", "shared-prefix") for p in ("continuous", "static")]
KEYS.append(("vllm-vs-sglang", "sglang"))  # SGLang's scheduler's terms
KEYS += [("four-engines", p) for p in ("tgi", "tgi_no_chunking", "trtllm", "trtllm_max_utilization")]  # TGI's, TRT's
SGLANG = ("radix_cache", "prefill_first", "reserved_output", "retraction", "new_token_ratio", "sglang_metrics")
RESERVING = (
    "lifetime_reservation",
    "in_flight_batching",
    "capacity_policy",
    "pause",
    "waiting_served_ratio",
    "max_waiting_tokens",
    "max_num_tokens",
)


@pytest.fixture(scope="module")
def views() -> dict:
    return {k: TraceView(trace.read(RECORDED / f"{k[0]}-{k[1]}.jsonl")) for k in KEYS}


def _first_and_last_tokens(steps: list[dict]) -> tuple[dict, dict, dict]:
    first, last, count = {}, {}, {}
    for st in steps:
        for s in st["sampled"]:
            first.setdefault(s["request_id"], st["step"])
            last[s["request_id"]] = st["step"]
            count[s["request_id"]] = count.get(s["request_id"], 0) + 1
    return first, last, count


def visible(term: str, records: list[dict], k: int, other: list[dict] | None = None) -> bool:
    """Whether ``term`` can be seen in step ``k`` of ``records``: an independent reading of the trace format."""
    if term in SERVING:  # the memory and serving terms: read apart (test_glossary_serving)
        return serving_visible(term, records, k)
    header, steps = records[0], step_records(records)
    st, cfg = steps[k], header["config"]
    plen = {r["request_id"]: r["num_prompt_tokens"] for r in header["requests"]}
    sched = st["scheduled"]
    first, last, count = _first_and_last_tokens(steps)
    tables = st["kv"]["block_tables"]
    if term in SGLANG:
        return sglang_visible(term, records, k)
    if term in RESERVING:
        return reserving_visible(term, records, k)
    checks = {
        "request": lambda: bool(st["admitted"]),
        "prefill": lambda: any(s["kind"] == "prefill" for s in sched),
        "decode": lambda: any(s["kind"] == "decode" for s in sched),
        "chunked_prefill": lambda: any(
            s["kind"] == "prefill" and s["num_computed_tokens"] + s["num_tokens"] < plen[s["request_id"]] for s in sched
        ),
        "token_budget": lambda: st["num_batched_tokens"] == cfg["max_num_batched_tokens"],
        "max_num_seqs": lambda: len(st["running"]) == cfg["max_num_seqs"] and bool(st["waiting"]),
        "kv_block": lambda: any(s["kind"] == "decode" and st["kv"]["allocated"].get(s["request_id"]) for s in sched),
        "block_table": lambda: any(t != list(range(t[0], t[0] + len(t))) for t in tables.values() if t),
        "slot_mapping": lambda: any(
            s["kind"] == "decode"
            and tables[s["request_id"]][s["num_computed_tokens"] // cfg["block_size"]]
            != tables[s["request_id"]][0] + s["num_computed_tokens"] // cfg["block_size"]
            for s in sched
        ),
        "batching": lambda: bool(st["admitted"]) and bool(other[k]["waiting"]) and not other[k]["admitted"],
        "padding": lambda: bool(st["padding_slots"]),
        "preemption": lambda: bool(st["preempted"]),
        "prefix_caching": lambda: any(v > 0 for v in st.get("num_prefix_hit_tokens", {}).values()),
        "ttft": lambda: k in first.values(),
        "itl": lambda: any(s["request_id"] in first and first[s["request_id"]] < k for s in st["sampled"]),
        "tpot": lambda: any(last[r] == k and count[r] >= 2 for r in last),
        "e2e": lambda: k in last.values(),
        "throughput": lambda: k == len(steps) - 1,
        "goodput": lambda: k in last.values(),
    }
    return checks[term]()


def reserving_visible(term: str, records: list[dict], k: int) -> bool:
    """TGI's and TensorRT-LLM's terms in step ``k``, read from the lines: an admission whose table holds more blocks
    than its prompt needs (TGI's lifetime), a prompt admitted while others decode in the same forward, the head held
    while free blocks would hold its prompt (blocks to completion), a request sent back to the queue."""
    header, steps = records[0], step_records(records)
    st, cfg = steps[k], header["config"]
    bs = cfg["block_size"]
    plen = {r["request_id"]: r["num_prompt_tokens"] for r in header["requests"]}
    tables = st["kv"]["block_tables"]
    checks = {
        "lifetime_reservation": lambda: (
            header["policy"] == "tgi" and any(len(tables[r]) > -(-plen[r] // bs) for r in st["admitted"])
        ),
        "in_flight_batching": lambda: (
            header["policy"] == "trtllm"
            and bool(st["admitted"])
            and any(s["kind"] == "decode" for s in st["scheduled"])
        ),
        "capacity_policy": lambda: (
            header["policy"] == "trtllm"
            and bool(st["waiting"])
            and st["kv"]["num_blocks"] - st["kv"]["num_used_blocks"] >= -(-plen[st["waiting"][0]] // bs)
        ),
        "pause": lambda: header["policy"] == "trtllm" and bool(st["preempted"]),
        # TGI without chunking, a request waits while others run: the router's min_size is ⌊running × ratio⌋ (in
        # 32-bit floats, as TGI computes it; 0.3 × n is exact enough for the small n of a shipped trace)
        "waiting_served_ratio": lambda: (
            header["policy"] == "tgi"
            and not cfg["enable_chunked_prefill"]
            and bool(st["waiting"])
            and bool(st["running"])
            and st["decisions"]["scheduling_call"].get("min_size")
            == int(len(set(st["running"]) - set(st["admitted"])) * cfg["waiting_served_ratio"])
        ),
        # a prompt runs while running requests do not, after at least max_waiting_tokens steps without a prefill
        "max_waiting_tokens": lambda: (
            header["policy"] == "tgi"
            and any(s["kind"] == "prefill" for s in st["scheduled"])
            and bool(set(st["running"]) - {s["request_id"] for s in st["scheduled"]})
            and k - max((j for j in range(k) if any(s["kind"] == "prefill" for s in steps[j]["scheduled"])), default=0)
            > cfg["max_waiting_tokens"]
        ),
        # a request waits while this forward's tokens leave less than one chunk unit of max_num_tokens
        "max_num_tokens": lambda: (
            header["policy"] == "trtllm"
            and bool(st["waiting"])
            and st["num_batched_tokens"] + cfg["chunk_unit_size"] > cfg["max_num_batched_tokens"]
        ),
    }
    return checks[term]()


def sglang_visible(term: str, records: list[dict], k: int) -> bool:
    """SGLang's terms in step ``k`` of an sglang trace, read from its lines: a prefix hit, a step that runs only
    prompts while running requests wait, the head held by its output estimate, a retraction, the ratio going up
    (the decisions and the ratio are SGLang's own: tests_sglang checks these traces against SGLang's scheduler)."""
    steps = step_records(records)
    st = steps[k]
    if records[0]["policy"] != "sglang":
        return False
    ran = {s["request_id"] for s in st["scheduled"]}
    ratio = [s["decisions"]["batch"]["new_token_ratio"] for s in steps]
    checks = {
        "radix_cache": lambda: any(v > 0 for v in st["num_prefix_hit_tokens"].values()),
        "prefill_first": lambda: (
            all(s["kind"] == "prefill" for s in st["scheduled"]) and bool(set(st["running"]) - ran)
        ),
        "reserved_output": lambda: (
            bool(st["waiting"]) and not st["admitted"] and st["decisions"]["head"]["limit"] == "sglang_reserved_output"
        ),
        "retraction": lambda: bool(st["preempted"]),
        "sglang_metrics": lambda: bool(st["preempted"]) and set(st["preempted"]) <= set(st["waiting"]),
        "new_token_ratio": lambda: k > 0 and ratio[k] > ratio[k - 1],
    }
    return checks[term]()


def test_every_see_it_link_lands_on_a_step_where_the_term_is_visible(views):
    found = dict(entries(views))
    assert len(found) == len(TERMS) == 19 + len(SERVING) + len(SGLANG) + len(RESERVING)
    for term, where in found.items():
        assert where is not None, term.key
        url = urlparse(where.target.url)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert int(query["step"]) == where.step, term.key
        records = trace.read(RECORDED / f"{where.scenario}-{where.policy}.jsonl")
        other = None
        if term.key == "batching":
            assert url.path == "/compare" and query["scenario"] == where.scenario
            other = recorded(where.scenario, "static").steps
        elif where.scenario in ("seed-abcd", "vllm-vs-sglang", "four-engines"):  # the Walkthrough's stories
            assert url.path == "/walkthrough" and query["policy"] == where.policy
        else:
            assert url.path == "/trace" and (query["scenario"], query["policy"]) == (where.scenario, where.policy)
        assert visible(term.key, records, where.step, other), (term.key, where)


def test_links_go_to_the_home_scenarios_and_are_the_first_occurrence(views):
    found = {t.key: w for t, w in entries(views)}
    assert (found["preemption"].scenario, found["preemption"].policy) == ("preemption", "continuous")
    assert (found["padding"].scenario, found["padding"].policy) == ("sixteen", "static")
    assert found["chunked_prefill"].scenario == "seed-abcd"
    assert (found["prefix_caching"].scenario, found["prefix_caching"].policy) == ("shared-prefix", "continuous")
    for key in ("prefill", "chunked_prefill", "preemption", "padding", "prefix_caching"):
        w = found[key]
        records = trace.read(RECORDED / f"{w.scenario}-{w.policy}.jsonl")
        assert not any(visible(key, records, k) for k in range(w.step)), key


def test_prefix_caching_links_to_a_trace_that_records_hits(views):
    found = see_it(next(t for t in TERMS if t.key == "prefix_caching"), views)
    assert found is not None and (found.scenario, found.policy) == ("shared-prefix", "continuous")
    records = trace.read(RECORDED / "shared-prefix-continuous.jsonl")
    hit = next((rid, n) for rid, n in records[found.step + 1]["num_prefix_hit_tokens"].items() if n > 0)
    assert visible("prefix_caching", records, found.step) and f"{hit[0]} finds {hit[1]} " in found.what
    assert not any(visible("prefix_caching", records, k) for k in range(found.step))
    records = copy.deepcopy(views[("seed-abcd", "continuous")].records)
    records[4]["num_prefix_hit_tokens"] = {"D": 0}
    records[1]["num_prefix_hit_tokens"] = {"B": 0, "C": 0, "A": 16}
    term = next(t for t in TERMS if t.key == "prefix_caching")
    where = see_it(term, {**views, ("shared-prefix", "continuous"): TraceView(records)})
    assert where is not None and (where.scenario, where.step) == ("shared-prefix", 0)
    assert visible("prefix_caching", records, where.step) and "A finds 16" in where.what


def test_worked_example_shows_the_arithmetic_of_one_real_request(views):
    ex = worked_example(views[("seed-abcd", "continuous")])
    assert (ex["request_id"], ex["arrival_step"], ex["first_token_step"], ex["finish_step"]) == ("D", 0, 3, 10)
    text = " ".join(ex["lines"])
    assert "= 4 − 0 = 4 steps" in text and "= 11 − 0 = 11 steps" in text and "(11 − 4) / (8 − 1) = 1" in text
    pre = worked_example(views[("preemption", "continuous")], "C")
    assert "(53 − 1) / (40 − 1) = 1.33" in pre["lines"][2]
    assert "1 × 26, 14, 1 × 12" in pre["lines"][3]  # its preemption shows as one long gap
    assert worked_example(views[("seed-abcd", "continuous")], "nobody") is None
