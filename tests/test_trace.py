"""Trace files: every shipped trace validates; bad files give an error naming the line and the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steplog import trace

TRACES = sorted((Path(__file__).resolve().parents[1] / "assets" / "traces").glob("*.jsonl"))


def test_all_four_recorded_traces_are_shipped():
    assert {p.stem for p in TRACES} >= {f"{s}-{p}" for s in ("seed-abcd", "sixteen") for p in ("static", "continuous")}


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_recorded_traces_validate_and_were_recorded_on_the_real_model(path):
    records = trace.read(path)
    assert records[0]["model"] == "SmolLM2-135M-Instruct"
    assert records[0]["policy"] in path.stem


@pytest.mark.parametrize("path", [p for p in TRACES if p.stem.startswith("sixteen")], ids=lambda p: p.stem)
def test_policies_give_identical_tokens(path):
    other = Path(str(path).replace("static", "X").replace("continuous", "static").replace("X", "continuous"))
    a, b = trace.read(path)[-1]["requests"], trace.read(other)[-1]["requests"]
    assert [r["output_token_ids"] for r in a] == [r["output_token_ids"] for r in b]


def good_text():
    return TRACES[0].read_text()


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda t: "", "empty"),
        (lambda t: "\n".join(t.splitlines()[:-1]), "summary"),  # truncated
        (lambda t: t.replace('"schema_version":1', '"schema_version":99', 1), "schema_version"),
        (lambda t: t.replace('{"type":"step"', '{"type":"step"', 1).replace("\n", "\nnot json\n", 1), "line 2"),
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
