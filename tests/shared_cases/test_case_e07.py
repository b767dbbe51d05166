"""Shared case e07 (../shared/cases/README.md): the metrics of a server trace.

A vLLM server's trace (version 2) lists no request in its header: each is declared in the step it arrived before
(``arrived``). Every reader of requests takes the one merged list (``batchscope.steplog.view.declared_requests``, which
``TraceView`` uses), so ``tests/data/vllm-seed-abcd.jsonl`` (the tracer on the seed-abcd workload: B 5, C 3, A 71 and
D 7 prompt tokens) measures like Batchscope's own run of it, pairs with that run on the Compare page, and pairs with
itself; a "not one workload" message never shows a Python ``None``.
"""

from __future__ import annotations

import copy
import re

import pytest
from clikit import cli
from conftest import RECORDED, ROOT

from batchscope.compare.runs import REQUEST_FIELDS, metrics_strip, same_workload
from batchscope.player.playback import player_payload
from batchscope.steplog import trace
from batchscope.steplog.metrics import request_metrics, summarize
from batchscope.steplog.view import TraceView

SERVER = ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl"
OURS = RECORDED / "seed-abcd-continuous.jsonl"
PROMPTS = {"B": 5, "C": 3, "A": 71, "D": 7}  # the seed-abcd scenario's prompt lengths


def test_metrics_prints_four_requests_and_the_prefix_cache_figures():
    code, out, err = cli("metrics", str(SERVER))
    assert code == 0 and "Traceback" not in err, err
    assert out.splitlines()[0].endswith(": valid trace, continuous, 14 step records, 4 requests, complete")
    rows = {" ".join(line.split()[:2]): line.split()[-1] for line in out.splitlines()[2:] if line.strip()}
    assert rows["prefix_cache_queries value"] == "86"  # 5 + 3 + 71 + 7: each prompt queried once, at admission
    assert rows["prefix_cache_hits value"] == "0"  # no two prompts share a block


def test_request_metrics_read_the_prompts_the_steps_declare():
    records = trace.read(SERVER)
    assert records[0]["requests"] == []
    by_id = {m["request_id"]: m for m in request_metrics(records)}
    assert {rid: m["num_prompt_tokens"] for rid, m in by_id.items()} == PROMPTS
    assert {rid: m["arrival_step"] for rid, m in by_id.items()} == dict.fromkeys("BCAD", 0)
    assert summarize(records)["total_prompt_tokens"] == 86


def test_a_server_trace_pairs_with_our_run_of_the_same_requests_and_with_itself():
    server, ours = TraceView(trace.read(SERVER)), TraceView(trace.read(OURS))
    said = "same workload: 4 requests with the same prompts, max_tokens, sampling and arrivals"
    assert same_workload(server, ours) == (True, said) == same_workload(ours, server)
    assert same_workload(server, TraceView(trace.read(SERVER))) == (True, said)  # two uploads of one file
    strip = {r["metric"]: (r["a"], r["b"]) for r in metrics_strip(server, ours)}
    assert strip["steps"] == (14, 14) and strip["evictions (preempt / retract / pause)"] == (
        0,
        0,
    )  # the same schedule: vLLM's and ours
    payload = player_payload([server, ours], "run A vs run B", labels=["A · continuous", "B · continuous"])
    assert payload["title"] == "run A vs run B"


@pytest.mark.parametrize("field", REQUEST_FIELDS)
@pytest.mark.parametrize("change", ["other value", "not recorded"])
def test_a_not_one_workload_message_never_shows_none(field, change):
    server, ours = trace.read(SERVER), copy.deepcopy(trace.read(OURS))
    request = ours[0]["requests"][2]  # A
    if change == "not recorded":
        request.pop(field, None)
        assert same_workload(TraceView(server), TraceView(ours))[0]  # what one trace does not record is not compared
        return
    other = {"prompt": "Hello", "num_prompt_tokens": 70, "max_tokens": 11, "temperature": 0.5, "top_p": 0.9}
    request[field] = {**other, "top_k": 5, "ignore_eos": False}[field]
    ok, why = same_workload(TraceView(server), TraceView(ours))
    if field == "prompt":  # the server recorded no text: only the token count says which prompt it was
        assert ok
        return
    assert not ok and re.match(rf"request A: {field} \S+ in A, \S+ in B$", why), why
    assert "None" not in why


def test_no_reader_takes_requests_from_the_header_record_alone():
    """``records[0]["requests"]`` is empty in a server's trace: readers go through ``declared_requests``."""
    readers = ("steplog", "figures", "explain", "quiz", "glossary", "player", "compare", "app", "cli")
    sources = sorted(p for d in readers for p in (ROOT / "batchscope" / d).glob("*.py"))
    assert [p.name for p in sources if 'records[0]["requests"]' in p.read_text()] == []


def test_a_server_trace_stopped_by_the_size_cap_is_measured_over_its_steps_and_says_so(tmp_path):
    """The tracer's size cap keeps the summary whole but stops the step records (``truncated_at_step``): here steps
    0-5 of the seed-abcd trace. In them B samples at steps 0-3 and finishes, C at 0-2 and finishes, A at 2-5 and D
    at 3-5, both still running; the metrics cover those steps."""
    records = trace.read(SERVER)
    capped = tmp_path / "capped.jsonl"
    trace.write([*records[:7], {**records[-1], "truncated_at_step": 6}], capped)
    by_id = {m["request_id"]: m for m in request_metrics(trace.read(capped))}
    assert {r: m["num_output_tokens"] for r, m in by_id.items()} == {"B": 4, "C": 3, "A": 4, "D": 3}
    assert {r: m["e2e_steps"] for r, m in by_id.items()} == {"B": 4, "C": 3, "A": None, "D": None}
    assert {r: m["ttft_steps"] for r, m in by_id.items()} == {"B": 1, "C": 1, "A": 3, "D": 4}
    assert by_id["A"]["finish_time_s"] is None and by_id["A"]["finish_reason"] == "length"  # after the cap
    code, out, err = cli("metrics", str(capped))
    assert code == 0, err
    assert out.splitlines()[0].endswith(
        ": valid trace, continuous, 6 step records, 4 requests, truncated at step 6: the tracer's size cap stopped "
        "the step records there (the steps before are shown and measured; the summary holds the rest)"
    )
    assert "total_output_tokens             value  tokens         14" in out
