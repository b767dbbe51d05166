"""Every integer field of the input is range-checked before it reaches a tokenizer, a tensor or a JavaScript number
(issue 21, part 1), and the tests enumerate the fields, so that a field added later without a range fails here:

- a workload: every integer field of ``batchscope.inputs.spec.FIELDS`` (and each id of ``prompt_token_ids``) has a range
in
  ``batchscope.engine.request.INT_RANGES``; hypothesis draws values outside it (huge, negative, floats, booleans,
strings, 25
  digits) and each is refused in one line naming the line, the field and the range, and values inside it are kept;
  a request built in Python is held to the same ranges by ``validate_request`` and ``render_prompt``;
- a trace: every integer of the schema has a minimum and a maximum (at most 2**53 - 1, what a JavaScript number
  holds exactly, but the 64-bit seed and priority, which the player never receives), and every integer found in the
  traces Batchscope writes (a fresh run with preemption, prefix hits, priorities, idle steps and seeds; the shipped
  traces; the vLLM tracer's fixture) is refused, naming its line and field, when it is set out of range.
"""

from __future__ import annotations

import json
import time

import pytest
from clikit import assert_clear_error, run_workload
from conftest import RECORDED, ROOT
from fakes import EOS, FakeRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import INT_RANGES, Request, SamplingParams, is_int, range_text
from batchscope.engine.validation import RequestError, validate_request
from batchscope.inputs.spec import FIELDS, INT_FIELDS
from batchscope.inputs.workload import WorkloadError, parse_workload_text, render_prompt
from batchscope.steplog import trace

JS_MAX = 2**53 - 1
BASE = {"request_id": "A", "prompt_token_ids": [1, 2], "max_tokens": 2}

# -- workloads ------------------------------------------------------------------------------------------------


def test_every_integer_field_of_a_workload_has_a_range_and_says_it():
    integer_fields = {name for name, (kind, _) in FIELDS.items() if "integer" in kind}
    assert set(INT_FIELDS) == integer_fields
    assert set(INT_RANGES) == integer_fields | {"prompt_token_ids"}  # a new integer field needs its range
    for name, (lo, hi) in INT_RANGES.items():
        assert range_text(lo, hi) in FIELDS[name][1], name  # the message states the range
        assert hi <= 2**63 - 1 and lo >= -(2**63)


def outside(name: str):
    """Values of any JSON type that are not an integer in the field's range."""
    lo, hi = INT_RANGES[name]
    return st.one_of(
        st.integers(max_value=lo - 1),
        st.integers(min_value=hi + 1),
        st.sampled_from([2**31, 2**32, 2**53, 2**63, -(2**63) - 1, 10**19 - 1, -(10**19 - 1), 10**24, -(10**30)]),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([0.0, 1.0, 2.0**63, 1e20]),
        st.booleans(),
        st.none(),
        st.text(max_size=6),
        st.sampled_from(["1", "0x10", "1e3", "-0"]),
        st.lists(st.integers(0, 9), max_size=2),
    ).filter(lambda v: not (is_int(v) and lo <= v <= hi))


def line_with(name: str, value) -> dict:
    return {**BASE, "prompt_token_ids": [1, value]} if name == "prompt_token_ids" else {**BASE, name: value}


@pytest.mark.parametrize("name", sorted(INT_RANGES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_integer_field_out_of_range_is_refused_naming_the_field_and_the_range(name, data):
    value = data.draw(outside(name))
    if value is None and name == "seed":
        return  # null is a seed ("draw one")
    with pytest.raises(WorkloadError) as err:
        parse_workload_text(json.dumps(line_with(name, value)), "w.jsonl")
    message = str(err.value)
    assert "\n" not in message and message.startswith("w.jsonl line 1, field ")
    assert f"'{name}'" in message and range_text(*INT_RANGES[name]) in message, message


@pytest.mark.parametrize("name", sorted(INT_RANGES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_an_integer_field_in_range_is_kept(name, data):
    lo, hi = INT_RANGES[name]
    value = data.draw(st.sampled_from([lo, hi]) | st.integers(lo, hi))
    (spec,) = parse_workload_text(json.dumps(line_with(name, value)), "w.jsonl")
    assert (spec["prompt_token_ids"][1] if name == "prompt_token_ids" else spec[name]) == value


@pytest.mark.parametrize("token", [2**32, 2**63, 10**25])
def test_a_token_id_past_the_tokenizers_integer_type_is_refused_before_the_model_loads(tmp_path, token):
    """Before: an id of 2**32 or 2**63 crashed inside the tokenizer (``OverflowError``, a traceback, exit 1)."""
    t = time.monotonic()
    code, _, err = run_workload(tmp_path, {"prompt_token_ids": [1, token], "max_tokens": 2})
    assert_clear_error(code, err, "line 1", "'prompt_token_ids'", "[0, 2**31 - 1]", str(token))
    assert time.monotonic() - t < 20  # no model load


def test_a_request_built_in_python_is_held_to_the_same_ranges():
    config = EngineConfig()

    def refused(req: Request, field: str) -> None:
        with pytest.raises(RequestError) as err:
            validate_request(req, config, max_model_len=4096, vocab_size=None)
        assert err.value.field == field and "out of range" in str(err.value), str(err.value)

    ok = SamplingParams(max_tokens=2)
    refused(Request("A", [1, 2**40], ok), "prompt_token_ids")
    refused(Request("A", [1, 2], ok, arrival_step=2**62), "arrival_step")
    refused(Request("A", [1, 2], ok, priority=2**63), "priority")
    refused(Request("A", [1, 2], ok, priority=True), "priority")
    for field, value in (("max_tokens", 2**31), ("top_k", 2**40), ("seed", 2**63), ("seed", -1), ("max_tokens", 1.5)):
        refused(Request("A", [1, 2], SamplingParams(**{"max_tokens": 2, field: value})), field)
    with pytest.raises(WorkloadError, match=r"prompt_token_ids\[1\] = 4294967296"):
        render_prompt({"prompt_token_ids": [1, 2**32], "max_tokens": 2}, tokenizer=None)


@pytest.mark.real_model
def test_the_largest_allowed_token_id_reaches_the_real_tokenizer_and_the_vocabulary_check():
    """2**31 - 1 decodes (SmolLM2's tokenizer takes a u32) and is then refused against the vocabulary."""
    from transformers import AutoTokenizer

    from batchscope.inputs.workload import to_requests
    from batchscope.model.models import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    (req,) = to_requests([{"prompt_token_ids": [1, INT_RANGES["prompt_token_ids"][1]], "max_tokens": 2}], tokenizer)
    with pytest.raises(RequestError, match=r"\[0, 49151\]"):
        validate_request(req, EngineConfig(), max_model_len=8192, vocab_size=len(tokenizer))


# -- traces ---------------------------------------------------------------------------------------------------

SCHEMA = json.loads(trace.schema_text())
INT64_DEFS = {"$defs/int64", "$defs/request/properties/priority"}  # 64-bit by definition; never sent to the player


def schema_integers(node, path=""):
    """(path, schema) of every schema in the trace schema whose type allows an integer."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "integer" or (isinstance(kind, list) and "integer" in kind):
            yield path, node
        for k, v in node.items():
            yield from schema_integers(v, f"{path}/{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from schema_integers(v, f"{path}/{i}")


def test_every_integer_of_the_trace_schema_has_both_bounds():
    found = list(schema_integers(SCHEMA))
    assert len(found) >= 20
    for path, node in found:
        assert "minimum" in node and "maximum" in node, f"{path} has no range"
        if path not in INT64_DEFS and "enum" not in node:
            assert node["minimum"] >= -JS_MAX and node["maximum"] <= JS_MAX, f"{path}: beyond a JavaScript number"


def fresh_records() -> list[dict]:
    """A run of today's engine that writes every kind of record: priorities at both ends of the 64-bit range, a
    preemption, prefix-cache hits, an idle gap before a step-clock arrival, seeds."""
    shared = list(range(100, 112))  # 3 blocks of 4 tokens
    sampled = SamplingParams(max_tokens=3, temperature=1.0, seed=2**63 - 1)
    reqs = [
        Request("A", [*shared, 200, 201], SamplingParams(max_tokens=12), arrival_step=0, priority=1),
        Request("B", [*shared, 300], SamplingParams(max_tokens=12, temperature=0.5, top_k=5), priority=-(2**63)),
        Request("C", [*shared, 400], sampled, arrival_step=60, priority=2**63 - 1),
    ]
    config = EngineConfig(max_num_seqs=2, block_size=4, num_kv_blocks=9, scheduling_policy="priority")
    return LLMEngine(FakeRunner(), config, eos_token_ids={EOS}).run(reqs, seed=2**31 - 1)


MAPS = {"block_tables", "allocated", "num_cached_tokens", "num_prefix_hit_tokens", "ref_counts", "cache_hits"}


def number_fields(node) -> set[str]:
    """Names of the schema's properties typed "number" (seconds, temperature): an integer there is a float's value."""
    out: set[str] = set()
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            prop = SCHEMA["$defs"][prop["$ref"].rsplit("/", 1)[1]] if "$ref" in prop else prop
            kinds = prop.get("type") if isinstance(prop.get("type"), list) else [prop.get("type")]
            if "number" in kinds:
                out.add(name)
        for v in node.values():
            out |= number_fields(v)
    elif isinstance(node, list):
        for v in node:
            out |= number_fields(v)
    return out


NUMBER_FIELDS = number_fields(SCHEMA)
SHIPPED = (
    "seed-abcd-continuous",
    "seed-abcd-static",
    "priority-continuous",
    "shared-prefix-continuous",
    "preemption-continuous",
)
FILES = [*(RECORDED / f"{s}.jsonl" for s in SHIPPED), ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl"]


def int_leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from int_leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from int_leaves(v, (*path, i))
    elif is_int(value):
        yield path


def shape(kind: str, path: tuple) -> str:
    """The field a path is an instance of: list indices and map keys (request ids, block ids) as ``*``."""
    parts = [kind] + ["*" if isinstance(p, int) or (i and path[i - 1] in MAPS) else p for i, p in enumerate(path)]
    return "/".join(map(str, parts))


def integer_fields() -> dict[str, tuple[list[dict], int, tuple]]:
    """Each integer field found in the traces: (records, line index, path) of its first occurrence."""
    found: dict[str, tuple[list[dict], int, tuple]] = {}
    for records in [fresh_records(), *(trace.read(f) for f in FILES)]:
        for line, rec in enumerate(records):
            for path in int_leaves(rec):
                if path[-1] not in NUMBER_FIELDS:
                    found.setdefault(shape(rec["type"], path), (records, line, path))
    return found


FIELDS_FOUND = integer_fields()


def test_the_traces_hold_every_kind_of_integer_field():
    kinds = (
        "step/idle_steps_before",
        "step/decisions/preemptions/*/need",
        "step/kv/ref_counts/*",
        "header/requests/*/priority",
        "header/seed",
        "step/arrived/*/max_tokens",
        "step/kv/evicted/*",
    )
    assert set(kinds) <= set(FIELDS_FOUND)


@pytest.mark.parametrize("field", sorted(FIELDS_FOUND))
def test_an_integer_of_a_trace_out_of_range_is_refused_naming_its_line_and_field(field):
    records, line, path = FIELDS_FOUND[field]
    int64 = path[-1] in ("seed", "priority")
    values = [2**63, -(2**63) - 1] if int64 else [JS_MAX + 1, 2**63, 10**19 - 1, -(2**53)]
    for value in [*values, 1.5, True, "1"]:
        changed = json.loads(json.dumps(records))
        parent = changed[line]
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
        text = "".join(json.dumps(r) + "\n" for r in changed)
        with pytest.raises(trace.TraceError) as err:
            trace.loads(text)
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"line {line + 1}"), (value, message)
        assert "/".join(map(str, path)) in message, (value, message)


def test_the_player_never_receives_an_integer_a_javascript_number_cannot_hold():
    from batchscope.player.playback import player_payload
    from batchscope.steplog.view import TraceView

    records = fresh_records()
    assert trace.loads(trace.dumps(records))[0]["requests"][1]["priority"] == -(2**63)  # 64-bit values round-trip
    payload = player_payload([TraceView(records)], "fresh")
    ints = [v for v in int_leaves_values(payload) if is_int(v)]
    assert ints and max(abs(v) for v in ints) <= JS_MAX


def int_leaves_values(value):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            yield from int_leaves_values(v)
    else:
        yield value
