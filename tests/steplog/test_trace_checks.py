"""Reading refuses what cannot be measured or drawn (shared case d09 and its whole kind): non-finite numbers, time
that runs backwards, unknown ids, slots and blocks that do not exist, summaries that contradict the steps. Writing
never emits NaN; metrics are never NaN or negative. Each refusal names the line and the field."""

from __future__ import annotations

import copy
import json
import math

import pytest
from conftest import CASES, RECORDED, step_records

from batchscope.steplog import trace
from batchscope.steplog.metrics import LATENCY_METRICS, request_metrics, summarize
from batchscope.steplog.strict_json import MAX_DEPTH, MAX_LINE_CHARS, JSONLineError, parse_line

SEED = RECORDED / "seed-abcd-continuous.jsonl"
STATIC = SEED.with_name("seed-abcd-static.jsonl")


def records():
    return trace.read(SEED)


def as_text(recs) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)  # allow_nan: like a careless writer


def refused(recs_or_text, *needles):
    text = recs_or_text if isinstance(recs_or_text, str) else as_text(recs_or_text)
    with pytest.raises(trace.TraceError) as info:
        trace.loads(text)
    message = str(info.value)
    assert "\n" not in message
    for n in needles:
        assert n in message, message
    return message


def test_d09_nan_in_a_step_time_is_refused_naming_line_and_field():
    refused((CASES / "d09-nan.jsonl").read_text(), "line 2", "t_end", "NaN")
    with pytest.raises(trace.TraceError, match="line 2"):
        trace.read(CASES / "d09-nan.jsonl")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
@pytest.mark.parametrize(
    "line,field",
    [(0, "arrival_time"), (2, "t_start"), (3, "t_end"), (-1, "first_token_time"), (-1, "finish_time")],
)
def test_non_finite_numbers_are_refused_in_every_time_field(token, line, field):
    lines = SEED.read_text().splitlines()
    i = line % len(lines)
    head, sep, rest = lines[i].partition(f'"{field}":')
    value_end = min(k for k in (rest.find(","), rest.find("}")) if k >= 0)
    lines[i] = head + sep + token + rest[value_end:]
    refused("\n".join(lines), f"line {i + 1}", field)


def test_non_finite_numbers_anywhere_are_refused_when_made_in_python():
    recs = records()
    recs[2]["kv"]["num_cached_tokens"]["B"] = math.inf
    refused(recs, "line 3")  # the schema (not an integer) or the finiteness check: either names line 3
    recs = records()
    recs[0]["requests"][1]["temperature"] = math.nan
    with pytest.raises(trace.TraceError, match=r"line 1.*requests/1/temperature"):
        trace.dumps(recs)  # the writer refuses too: nothing exported holds NaN


def test_huge_integers_deep_nesting_and_endless_lines_are_refused_before_parsing():
    with pytest.raises(JSONLineError, match="digits"):
        parse_line('{"seed": ' + "9" * 5000 + "}", "line 1")
    with pytest.raises(JSONLineError, match="nested deeper"):
        parse_line("[" * 100_000 + "]" * 100_000, "line 7")
    with pytest.raises(JSONLineError, match="characters"):
        parse_line(" " * (MAX_LINE_CHARS + 1), "line 1")
    assert parse_line("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None
    assert parse_line(json.dumps({"a": "[" * 40 + "{" * 40}), "x") == {"a": "[" * 40 + "{" * 40}  # inside strings


def mutate(fn, src=SEED):
    recs = trace.read(src)
    fn(recs)
    return recs


@pytest.mark.parametrize(
    "fn,needles",
    [
        (lambda r: r[3].update(t_end=r[3]["t_start"] - 0.01), ("line 4", "t_end", "before t_start")),
        (lambda r: r[4].update(t_start=r[3]["t_end"] - 0.001), ("line 5", "t_start", "previous step")),
        (lambda r: r[4].update(step=7), ("line 5", "field step")),
        (
            lambda r: r[-1]["requests"][0].update(finish_time=r[-1]["requests"][0]["first_token_time"] - 0.1),
            ("finish_time", "before"),
        ),
        (lambda r: r[-1]["requests"][0].update(finish_time=r[-2]["t_end"] + 1), ("finish_time", "after the last")),
        (lambda r: r[-1]["requests"][0].update(first_scheduled_time=-1.0), ("first_scheduled_time",)),
        (lambda r: r[-1]["requests"][0].update(arrival_time=5.0), ("before arrival_time",)),
    ],
)
def test_time_never_runs_backwards(fn, needles):
    refused(mutate(fn), *needles)


def _unfinish_last(recs) -> None:
    """The request that finishes in the last step does not finish (as in a cancelled run), but no partial mark."""
    (f,) = recs[-2]["finished"]
    recs[-2]["finished"] = []
    next(r for r in recs[-1]["requests"] if r["request_id"] == f["request_id"]).update(
        finish_reason=None, finish_time=None
    )


@pytest.mark.parametrize(
    "fn,needles",
    [
        (lambda r: r[0]["requests"][0].update(request_id=""), ("line 1", "request_id")),
        (lambda r: r[0]["requests"][0].update(request_id="x" * 257), ("line 1", "request_id", "1-256")),
        (lambda r: r[0]["requests"][0].update(request_id="a\u0007b"), ("line 1", "request_id")),
        (lambda r: r[0]["requests"][0].update(request_id="a\u200bb"), ("line 1", "printable")),
        (lambda r: r[0]["requests"][1].update(request_id=r[0]["requests"][0]["request_id"]), ("twice",)),
        (lambda r: r[2]["scheduled"][0].update(request_id="ZZ"), ("line 3", "scheduled", "'ZZ'")),
        (lambda r: r[2]["kv"]["block_tables"].update(ZZ=[0]), ("line 3", "ZZ")),
        (lambda r: r[2]["scheduled"][0].update(slot=3), ("line 3", "slot", "[0, 2]")),
        (lambda r: r[2]["kv"]["block_tables"]["B"].append(32), ("line 3", "block")),
        (lambda r: r[2].update(num_batched_tokens=33), ("line 3", "max_num_batched_tokens")),
        (lambda r: r[-1]["requests"][0]["output_token_ids"].append(5), ("output_token_ids", "sampled")),
        (lambda r: _unfinish_last(r), ("never finished", "not marked partial")),
        (lambda r: r[-1]["requests"].pop(), ("missing",)),
        (lambda r: r[0]["config"].update(num_kv_blocks=10**12), ("line 1", "num_kv_blocks")),
        (lambda r: r[0]["config"].update(num_kv_blocks=200_000), ("line 1", "num_kv_blocks", "[1, 100000]")),
        (lambda r: r.__delitem__(slice(1, -1)), ("no step records",)),
    ],
)
def test_records_that_contradict_each_other_are_refused(fn, needles):
    refused(mutate(fn), *needles)


def test_a_partial_trace_with_unfinished_requests_is_accepted_and_measured():
    recs = records()
    cut = [*recs[:6], copy.deepcopy(recs[-1])]  # steps 0-4 only, as a cancelled run leaves them
    summary = cut[-1]
    summary["partial"] = True
    sampled: dict[str, list[int]] = {}
    finished = {f["request_id"]: f["reason"] for st in step_records(cut) for f in st["finished"]}
    for st in step_records(cut):
        for s in st["sampled"]:
            sampled.setdefault(s["request_id"], []).append(s["token_id"])
    for r in summary["requests"]:
        r["output_token_ids"] = sampled.get(r["request_id"], [])
        if r["request_id"] not in finished:
            r.update(finish_reason=None, finish_time=None)
        if not r["output_token_ids"]:
            r["first_token_time"] = None
    assert trace.loads(as_text(cut)) == cut
    s = summarize(cut)
    assert s["num_steps"] == 5


def finite_nonneg(x) -> bool:
    return x is None or (math.isfinite(x) and x >= 0)


@pytest.mark.parametrize("path", [SEED, STATIC], ids=["continuous", "static"])
def test_metrics_are_never_nan_or_negative_even_on_unchecked_records(path):
    recs = trace.read(path)
    recs[3]["t_end"] = math.nan  # records made in Python are not read through the checks
    recs[-1]["requests"][0]["first_token_time"] = -5.0
    for m in request_metrics(recs):
        for key in LATENCY_METRICS:
            if not key.startswith("itl"):
                assert finite_nonneg(m[key]), (key, m[key])
        assert all(finite_nonneg(g) for g in m["itl_s"] + m["itl_steps"])
    s = summarize(recs)
    for key, value in s.items():
        if isinstance(value, dict):
            assert all(finite_nonneg(v) for v in value.values()), (key, value)
        elif isinstance(value, float):
            assert finite_nonneg(value), (key, value)


def test_writing_is_atomic_and_never_emits_nan(tmp_path):
    out = tmp_path / "t.jsonl"
    out.write_text("old")
    recs = records()
    recs[2]["t_end"] = math.nan
    with pytest.raises(trace.TraceError):
        trace.write(recs, out)
    assert out.read_text() == "old" and list(tmp_path.iterdir()) == [out]  # untouched, no temp file left
    trace.write(records(), out)
    assert "NaN" not in out.read_text() and trace.read(out) == records()


def test_version_1_limits_are_the_engine_limits_and_the_schema_allows_them():
    from batchscope.engine.config import LIMITS
    from batchscope.steplog.checks import V1_LIMITS

    assert LIMITS is V1_LIMITS  # the engine imports the table, it does not copy it
    schema = json.loads(trace.schema_text())
    config = schema["$defs"]["header"]["properties"]["config"]["properties"]
    assert all(config[name]["maximum"] >= hi for name, (_, hi) in LIMITS.items())
    refused(mutate(lambda r: r[0]["config"].update(max_num_seqs=300)), "line 1", "config/max_num_seqs", "[1, 256]")
