"""Fuzzing the two readers of outside data, the trace reader and the workload reader, with hypothesis.

Whatever the input (random JSON values, a valid file with one value replaced or one key dropped, truncated text,
huge numbers, deep nesting, long strings, wrong types), the reader either accepts it, and then every view of the app
can measure and draw it, or refuses it with a one-line ``TraceError`` / ``WorkloadError``: never another exception,
never a hang (a deadline per example), never unbounded memory (lines and nesting are capped before parsing).
"""

from __future__ import annotations

import json

import pytest
from conftest import CASES, RECORDED, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchscope.engine.config import EngineConfig
from batchscope.engine.validation import RequestError, validate_request
from batchscope.explain.beats import story_beats
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import event_steps, queues, text_so_far
from batchscope.facts.blocks import freed_blocks
from batchscope.figures.budget import budget_bar
from batchscope.figures.kv import block_map, kv_usage
from batchscope.figures.slots import slot_grid, slot_occupancy
from batchscope.figures.timeline import timeline
from batchscope.inputs.workload import WorkloadError, load_scenario, parse_workload_text, to_requests
from batchscope.steplog import trace
from batchscope.steplog.frames import requests_frame
from batchscope.steplog.metrics import summarize
from batchscope.steplog.view import TraceView

BASE_TRACES = [trace.read(RECORDED / f"seed-abcd-{p}.jsonl") for p in ("continuous", "static")]
FUZZ = settings(max_examples=examples(300), deadline=5000, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 70)
    | st.integers()
    | st.sampled_from([10**18, -(10**18), 2**63, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["A", "B", "C", "D", "", "<img src=x>", "x" * 70, "prefill", "decode", "stop", "static"])
)
json_values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12
)


def draw(records: list[dict], position: int) -> None:
    """Everything the app computes from a trace, at one step (the step chosen by hypothesis)."""
    view = TraceView(records)
    step = position % view.num_steps
    summarize(records)
    requests_frame(records)
    for fig in (slot_grid(view, step, 8), block_map(view, step), budget_bar(view, step), timeline(view, step)):
        fig.to_dict()
    slot_occupancy(view, step)
    kv_usage(view, step)
    narrate(view, step)
    story_beats(view)
    event_steps(view)
    queues(view, step)
    text_so_far(view, step)
    freed_blocks(view, step)


def load_or_refuse(text: str) -> list[dict] | None:
    try:
        records = trace.loads(text)
    except trace.TraceError as exc:
        assert "\n" not in str(exc) and str(exc)
        return None
    return records


def _paths(value, prefix=()):
    """Every path (tuple of keys / indices) inside a JSON value."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated_traces(draw_):
    """A shipped trace with one value replaced (or one key dropped) somewhere in one line."""
    records = json.loads(json.dumps(draw_(st.sampled_from(BASE_TRACES))))
    line = draw_(st.integers(0, len(records) - 1))
    path = draw_(st.sampled_from(list(_paths(records[line]))[1:]))
    parent = records[line]
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw_(st.booleans()) and draw_(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw_(json_values)
    return records


@FUZZ
@given(records=mutated_traces(), position=st.integers(0, 100))
def test_a_trace_with_one_value_changed_is_refused_or_drawable(records, position):
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    loaded = load_or_refuse(text)
    if loaded is not None:
        draw(loaded, position)


@FUZZ
@given(lines=st.lists(json_values, max_size=5))
def test_random_json_lines_are_refused_as_a_trace(lines):
    assert load_or_refuse("\n".join(json.dumps(v) for v in lines)) is None


@settings(max_examples=examples(150), deadline=5000)
@given(cut=st.integers(0, 10**9), which=st.sampled_from([0, 1]))
def test_a_truncated_trace_is_refused_or_drawable(cut, which):
    text = trace.dumps(BASE_TRACES[which])
    loaded = load_or_refuse(text[: cut % (len(text) + 1)])
    if loaded is not None:
        draw(loaded, cut)


@settings(max_examples=examples(100), deadline=5000)
@given(
    junk=st.sampled_from(
        [
            "[" * 5000,
            '{"a":' * 3000 + "1" + "}" * 3000,
            '{"type": "header", "schema_version": ' + "7" * 3000 + "}",
            '{"type": "header", "x": 1e999}',
            "NaN",
            '"' + "x" * 100_000 + '"',
            "\x00\x01\x02",
            "\ufeff{}",
        ]
    ),
    at=st.integers(0, 20),
)
def test_huge_numbers_deep_nesting_and_long_strings_are_refused(junk, at):
    lines = trace.dumps(BASE_TRACES[0]).splitlines()
    lines.insert(at % (len(lines) + 1), junk)
    assert load_or_refuse("\n".join(lines)) is None


# -- workloads ----------------------------------------------------------------------------------------------------

BASE_SPECS = [
    json.loads(line)
    for f in sorted(CASES.glob("*.jsonl"))
    if not f.name.startswith("d09")
    for line in f.read_text().splitlines()
    if line.strip()
]
BASE_SPECS += load_scenario("seed-abcd")["requests"]


class CharTokenizer:
    """One token per character (ids = code points mod 1000), with a trivial chat template."""

    chat_template = "x"

    def __call__(self, text, add_special_tokens=False):
        return type("Enc", (), {"input_ids": [ord(c) % 1000 for c in text]})()

    def decode(self, ids):
        return "".join(chr(i) for i in ids)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


def accept_or_refuse_workload(text: str) -> None:
    try:
        specs = parse_workload_text(text, "w.jsonl")
    except WorkloadError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(("w.jsonl", "workload"))
        return
    config = EngineConfig(num_kv_blocks=100_000)
    for req in to_requests(specs, CharTokenizer()):  # accepted: it becomes requests, which run or are refused
        try:
            validate_request(req, config, max_model_len=4096, vocab_size=1000)
        except RequestError as exc:
            assert "\n" not in str(exc)


@st.composite
def mutated_workloads(draw_):
    specs = [dict(s) for s in draw_(st.lists(st.sampled_from(BASE_SPECS), min_size=1, max_size=3))]
    k = draw_(st.integers(0, len(specs) - 1))
    key = draw_(st.sampled_from([*specs[k], "request_id", "seed", "ignore_eos", "arrival_step", "top_k", "zzz"]))
    if key in specs[k] and draw_(st.booleans()):
        del specs[k][key]
    else:
        specs[k][key] = draw_(json_values)
    return "\n".join(json.dumps(s, ensure_ascii=False) for s in specs)


@FUZZ
@given(text=mutated_workloads())
def test_a_workload_with_one_field_changed_is_refused_in_one_line_or_runs(text):
    accept_or_refuse_workload(text)


@FUZZ
@given(lines=st.lists(json_values, max_size=4), cut=st.integers(0, 10**6))
def test_random_or_truncated_workload_lines(lines, cut):
    text = "\n".join(json.dumps(v) for v in lines)
    accept_or_refuse_workload(text)
    accept_or_refuse_workload(text[: cut % (len(text) + 1)])


@pytest.mark.parametrize("junk", ["[" * 100_000, '{"max_tokens": ' + "9" * 10_000 + "}", '{"prompt": NaN}', "x" * 100])
def test_workload_junk_is_refused(junk):
    with pytest.raises(WorkloadError, match=r"w\.jsonl line 1"):
        parse_workload_text(junk, "w.jsonl")
