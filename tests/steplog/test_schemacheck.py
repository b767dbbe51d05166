"""``batchscope.steplog.schemacheck`` (the fast, standard-library check the reader runs on every record) gives
``jsonschema``'s answer on valid records of both schema versions and on hundreds of random corruptions of them."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from conftest import RECORDED, ROOT, examples, step_records
from hypothesis import given, settings
from hypothesis import strategies as st

from batchscope.steplog import trace
from batchscope.steplog.blocks import to_v2
from batchscope.steplog.schemacheck import compile_schema, explain

SCHEMA = json.loads(trace.schema_text())
KINDS = ("header", "step_v1", "step_v2", "summary")
CHECKS = {k: compile_schema(SCHEMA, k) for k in KINDS}
VALIDATORS = {k: jsonschema.Draft202012Validator({**SCHEMA["$defs"][k], "$defs": SCHEMA["$defs"]}) for k in KINDS}


def samples() -> list[tuple[str, dict]]:
    v1 = trace.read(RECORDED / "preemption-continuous.jsonl")
    out = [("header", v1[0]), ("summary", v1[-1])] + [("step_v1", s) for s in v1[1:30]]
    vllm = trace.read(ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl")
    out += [("header", vllm[0]), ("summary", vllm[-1])] + [("step_v2", s) for s in step_records(vllm)]
    out += [("step_v2", s) for s in to_v2(v1)[1:30]]
    return out


SAMPLES = samples()
JUNK = [None, True, 0, -1, 1.5, 2.0, "", "x", [], {}, [""], [-1], {"a": -1}, "decode", float("1e300")]


def agree(kind: str, record: dict) -> None:
    want = VALIDATORS[kind].is_valid(record)
    got = CHECKS[kind](record)
    # the compiled check may refuse an integer-valued float jsonschema accepts; the reader then asks jsonschema
    assert got == want or (want and not got), (kind, record)
    assert (explain(SCHEMA, kind, record) is None) == want, (kind, explain(SCHEMA, kind, record))


@pytest.mark.parametrize("i", range(len(SAMPLES)))
def test_valid_records_pass(i):
    kind, record = SAMPLES[i]
    assert CHECKS[kind](record) and explain(SCHEMA, kind, record) is None


def _paths(x, prefix=()):
    yield prefix
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(x, list):
        for i, v in enumerate(x[:3]):
            yield from _paths(v, (*prefix, i))


@settings(max_examples=examples(400), deadline=None)
@given(st.data())
def test_corruptions_get_jsonschemas_answer(data):
    kind, record = data.draw(st.sampled_from(SAMPLES))
    record = copy.deepcopy(record)
    path = data.draw(st.sampled_from([p for p in _paths(record) if p]))
    parent = record
    for key in path[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(st.sampled_from(JUNK))
    agree(kind, record)


def test_versions_keep_their_step_shapes():
    v1_step = SAMPLES[2][1]
    assert CHECKS["step_v1"](v1_step) and not CHECKS["step_v2"](v1_step)
    v2_step = next(r for k, r in SAMPLES if k == "step_v2")
    assert CHECKS["step_v2"](v2_step) and not CHECKS["step_v1"](v2_step)
    header = {**SAMPLES[0][1], "schema_version": 2}
    assert not CHECKS["header"](header) and "source" in explain(SCHEMA, "header", header)


def test_an_unknown_keyword_is_refused_at_compile_time():
    with pytest.raises(ValueError, match="does not implement"):
        compile_schema({"$defs": {"x": {"type": "string", "format": "email"}}}, "x")
