"""The msgspec reader (batchscope.steplog.fastread) against the strict reader it stands in for.

Reference: the strict reader (``batchscope.steplog.strict_json`` + the schema through ``schemacheck`` / ``jsonschema``),
called on the same text with the fast path off. Every trace both read gives the same records; every trace the strict
reader refuses is refused with its message; the fast path really reads the shipped and the synthetic traces (it does not
silently hand everything to the strict reader).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import RECORDED, ROOT

from batchscope.steplog import fastread, trace

TRACES = [*sorted(RECORDED.glob("*.jsonl*")), ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl"]


def strict(data: bytes | str) -> list[dict] | str:
    """The strict reader's answer: the records, or its error message."""
    saved = trace.fast_parse
    trace.fast_parse = lambda *_: None  # type: ignore[assignment]
    try:
        return trace.loads(data)
    except trace.TraceError as exc:
        return str(exc)
    finally:
        trace.fast_parse = saved  # type: ignore[assignment]


def answer(data: bytes | str) -> list[dict] | str:
    try:
        return trace.loads(data)
    except trace.TraceError as exc:
        return str(exc)


def test_the_shipped_schema_translates():
    decs = fastread.decoders(trace.schema_text())
    assert decs is not None and set(decs) == set(fastread.KINDS)
    rules = {k: [p for p, _ in v[2]] for k, v in decs.items()}
    assert rules["header"] == [()] and ("finished", "*") in rules["step_v2"]  # the two if/then rules, kept in Python


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_shipped_traces_read_fast_and_equal(path):
    data = path.read_bytes()
    text = trace.decompress(data) if data[:2] == trace.GZIP_MAGIC else data
    fast = fastread.parse(text, trace.schema_text())
    assert fast is not None, "the fast path deferred a shipped trace"
    got = answer(data)
    assert got == strict(data)
    assert json.dumps(got) == json.dumps(strict(data))  # same key order, ints stay ints, floats stay floats


def test_a_synthetic_busy_server_trace_reads_fast_and_equal(tmp_path):
    out = tmp_path / "busy.jsonl"
    script = ROOT / "scripts" / "synth_vllm_trace.py"
    subprocess.run([sys.executable, str(script), "--out", str(out), "--requests", "60", "--steps", "200"], check=True)
    data = out.read_bytes()
    assert fastread.parse(data, trace.schema_text()) is not None
    assert json.dumps(answer(data)) == json.dumps(strict(data))


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


SEED = (ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl").read_bytes()


def _with_step(extra: str, line: int = 2) -> bytes:
    lines = _lines(SEED)
    lines[line - 1] = lines[line - 1][:-1] + b"," + extra.encode() + b"}"
    return b"\n".join(lines)


@pytest.mark.parametrize(
    "extra",
    [
        '"x": 12345678901234567890',  # 20 digits in a field the schema does not name
        '"x": 1234567890123456789',  # 19: allowed
        '"x": ' + "[" * 31 + "]" * 31,  # 32 deep with the record: allowed
        '"x": ' + "[" * 32 + "]" * 32,  # 33 deep: refused
        '"x": {"y": [1e999]}',
        '"x": NaN',
        '"step": 0.0',  # an integer-valued float: the schema's integer, accepted by the strict reader
        '"t_end": 1e400',
        '"kv": {"num_blocks": 1}',  # a v2 step without allocated / freed
        '"finished": [{"request_id": "a", "reason": "stop", "aborted": '
        '{"state": "running", "num_output_tokens": 1, "num_freed_blocks": 0}}]',  # aborted, but not reason abort
    ],
)
def test_odd_fields_get_the_strict_readers_answer(extra):
    data = _with_step(extra)
    assert answer(data) == strict(data)
    assert answer(data.decode("utf-8")) == strict(data.decode("utf-8"))


@pytest.mark.parametrize(
    "text",
    ["chatcmpl-\u0085x", "a\u2028b", "a\\u0007b", "a\x7fb", "é" * 3, "x" * 257, ""],
)
def test_ids_and_separators_get_the_strict_readers_answer(text):
    data = SEED.replace(b"seed-abcd", json.dumps(text)[1:-1].encode("utf-8"))
    assert answer(data) == strict(data)


def test_cut_short_at_every_byte_of_the_last_lines():
    lines = _lines(SEED)
    start = len(b"\n".join(lines[:-3]))
    for cut in range(start, len(SEED) + 1):
        assert answer(SEED[:cut]) == strict(SEED[:cut]), cut


def test_version_2_header_needs_its_source():
    header = json.loads(_lines(SEED)[0])
    del header["source"]
    data = b"\n".join([json.dumps(header).encode(), *_lines(SEED)[1:]])
    assert answer(data) == strict(data)
    assert "source" in str(answer(data))
