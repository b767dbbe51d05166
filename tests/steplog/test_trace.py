"""Trace files: every shipped trace validates; bad files give an error naming the line and the problem."""

from __future__ import annotations

import json
import re

import pytest
from conftest import RECORDED_TRACES

from batchscope.steplog import trace
from batchscope.steplog.reasons import run_name


def test_all_four_recorded_traces_are_shipped():
    assert {p.stem for p in RECORDED_TRACES} >= {
        f"{s}-{p}" for s in ("seed-abcd", "sixteen") for p in ("static", "continuous")
    }


@pytest.mark.parametrize("path", RECORDED_TRACES, ids=lambda p: p.stem)
def test_recorded_traces_validate_and_were_recorded_on_the_real_model(path):
    records = trace.read(path)
    assert records[0]["model"] == "SmolLM2-135M-Instruct"
    assert path.stem.endswith("-" + run_name(records[0]))  # the run's name: spec-decode-speculative is continuous


@pytest.mark.parametrize("path", [p for p in RECORDED_TRACES if p.stem.startswith("sixteen")], ids=lambda p: p.stem)
def test_policies_give_identical_tokens(path):
    swap = {"static": "continuous", "continuous": "static"}
    other = path.with_name(re.sub(r"static|continuous", lambda m: swap[m.group(0)], path.name))
    a, b = trace.read(path)[-1]["requests"], trace.read(other)[-1]["requests"]
    assert [r["output_token_ids"] for r in a] == [r["output_token_ids"] for r in b]


def test_speculative_decoding_gives_the_tokens_of_plain_decoding():
    """spec-decode (its description says so): the run with n-gram drafts writes every request's tokens exactly as
    the runs without drafts, in fewer steps."""
    runs = {p: trace.read(RECORDED_TRACES[0].with_name(f"spec-decode-{p}.jsonl")) for p in ("continuous", "static")}
    runs["speculative"] = trace.read(RECORDED_TRACES[0].with_name("spec-decode-speculative.jsonl"))
    tokens = {p: [r["output_token_ids"] for r in records[-1]["requests"]] for p, records in runs.items()}
    assert tokens["speculative"] == tokens["continuous"] == tokens["static"]
    steps = {p: sum(1 for r in records if r.get("type") == "step") for p, records in runs.items()}
    assert steps["speculative"] < steps["continuous"]


def good_text():
    return RECORDED_TRACES[0].read_text()


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda t: "", "empty"),
        # cut short (no summary: it opens) but a step is missing in the middle: refused
        (lambda t: "\n".join(t.splitlines()[:2] + t.splitlines()[3:-1]), "line 3 .step 2., field step"),
        (lambda t: t.replace('"schema_version":1', '"schema_version":99', 1), "schema_version"),
        (lambda t: t.replace("\n", "\nnot json\n", 1), "line 2"),  # a line that is not JSON after the header
        (lambda t: t.replace('"kind":"prefill"', '"kind":"warmup"', 1), "kind"),
    ],
)
def test_bad_traces_are_rejected_clearly(mutate, needle):
    with pytest.raises(trace.TraceError, match=needle):
        trace.loads(mutate(good_text()))


def test_oversized_trace_is_rejected():
    with pytest.raises(trace.TraceError, match="limit"):
        trace.loads("x" * (trace.MAX_TRACE_BYTES + 1))


def test_round_trip():
    records = trace.loads(good_text())
    assert trace.loads(trace.dumps(records)) == records
    assert json.loads(good_text().splitlines()[0])["type"] == "header"


def _c07_like_records():
    """A fake-runner run where two identical prompts share 2 blocks (block size 4, 10 tokens)."""
    from fakes import EOS, FakeRunner

    from batchscope.engine.config import EngineConfig
    from batchscope.engine.engine import LLMEngine
    from batchscope.engine.request import Request, SamplingParams

    reqs = [Request(r, list(range(100, 110)), SamplingParams(max_tokens=3)) for r in ("X", "Y")]
    config = EngineConfig(max_num_seqs=2, max_num_batched_tokens=64, block_size=4, num_kv_blocks=8)
    return LLMEngine(FakeRunner(), config, eos_token_ids={EOS}).run(reqs)


def test_a_trace_with_shared_blocks_validates():
    records = _c07_like_records()
    trace.validate_records(records)
    kv = records[1]["kv"]
    assert kv["block_tables"]["X"][:2] == kv["block_tables"]["Y"][:2] and kv["ref_counts"] == {"0": 2, "1": 2}
    assert kv["num_used_blocks"] == 4 and records[1]["num_prefix_hit_tokens"] == {"X": 0, "Y": 8}


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda kv: kv["ref_counts"].pop("1"), r"kv/ref_counts/1: block 1 is in 2 block table\(s\) \(X, Y\)"),
        (lambda kv: kv["ref_counts"].update({"3": 2}), "kv/ref_counts/3: block 3 is in 1 block table"),
        (lambda kv: kv["ref_counts"].update({"7": 2}), "block 7 has a count but is in no block table"),
        (lambda kv: kv["cached_free_blocks"].append(2), "kv/cached_free_blocks: block 2 is marked cached and free"),
        (lambda kv: kv.update(num_used_blocks=5), "kv/num_used_blocks: 5, but the block tables hold 4"),
        (lambda kv: kv["ref_counts"].update({"1": 1}), "kv/ref_counts/1"),  # the schema: a listed count is >= 2
    ],
)
def test_reference_counts_and_cache_flags_that_contradict_the_tables_are_refused(mutate, needle):
    records = _c07_like_records()
    mutate(records[1]["kv"])
    with pytest.raises(trace.TraceError, match=needle) as err:
        trace.validate_records(records)
    assert str(err.value).startswith("line 2 (step), field kv")
