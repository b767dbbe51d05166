"""Schema version 2 and compressed traces: the vLLM tracer's fixture validates (with jsonschema here, in the main
venv); block tables rebuilt from deltas equal version 1's at every step, from any checkpoint spacing; gzip files
read and write transparently and the size limit is about the uncompressed text."""

from __future__ import annotations

import gzip
import json
import random

import pytest
from conftest import RECORDED_TRACES, ROOT, step_records

from batchscope.steplog import trace
from batchscope.steplog.blocks import BlockTables, to_v1, to_v2
from batchscope.steplog.view import TraceView

FIXTURE = ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl"


def test_vllm_tracer_fixture_validates_with_jsonschema():
    records = trace.read(FIXTURE)
    assert records[0]["source"] == "vllm" and records[0]["schema_version"] == 2
    for i, rec in enumerate(step_records(records), start=2):
        errors = list(trace._validators()["step_v2"].iter_errors(rec))
        assert errors == [], f"line {i}: {errors[0].message}"
    view = TraceView(records)
    assert view.request_ids == ["B", "C", "A", "D"]  # declared by the steps' "arrived"
    assert view.provenance().startswith("vLLM 0.33.0 server, model-free")


@pytest.mark.parametrize("path", RECORDED_TRACES, ids=lambda p: p.stem)
@pytest.mark.parametrize("every", [1, 3, 64])
def test_deltas_rebuild_every_steps_tables(path, every):
    v1 = trace.read(path)
    v2 = to_v2(v1)
    trace.validate_records(v2)
    tables = BlockTables(step_records(v2), 2, every=every)
    for k, st in enumerate(step_records(v1)):
        assert {r: list(t) for r, t in tables(k).items()} == st["kv"]["block_tables"], f"step {k}"
        kv2 = v2[k + 1]["kv"]
        hits = kv2.get("cache_hits", {})
        written = {r: [b for b in bs if b not in hits.get(r, ())] for r, bs in kv2["allocated"].items()}
        assert st["kv"].get("allocated", {}) == {r: bs for r, bs in written.items() if bs}  # newly written blocks
    assert [s["kv"]["block_tables"] for s in step_records(to_v1(v2))] == [
        s["kv"]["block_tables"] for s in step_records(v1)
    ]


# Not SGLang's traces: after a prefill SGLang points a request's slots at the radix cache's copy of tokens it computed
# twice, which block-table deltas cannot tell from a prefix hit (only the engine writes SGLang traces, in version 1).
@pytest.mark.parametrize("path", [p for p in RECORDED_TRACES if "-sglang" not in p.stem], ids=lambda p: p.stem)
def test_visual_facts_are_the_same_from_either_version(path):
    from batchscope.explain.narration import narrate
    from batchscope.facts.blocks import freed_blocks
    from batchscope.figures.pool import block_map_cells

    v1 = TraceView(trace.read(path))
    v2 = TraceView(to_v2(v1.records))
    for k in range(v1.num_steps):
        assert block_map_cells(v1, k) == block_map_cells(v2, k)
        assert freed_blocks(v1, k) == freed_blocks(v2, k)
        assert narrate(v1, k) == narrate(v2, k)
    assert v1.block_counts == v2.block_counts


def test_gzip_round_trip_and_transparent_read(tmp_path):
    records = trace.read(RECORDED_TRACES[0])
    trace.write(records, tmp_path / "t.jsonl.gz")
    assert (tmp_path / "t.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert trace.read(tmp_path / "t.jsonl.gz") == records
    assert trace.loads(gzip.compress(RECORDED_TRACES[0].read_bytes())) == records


def test_size_limit_is_on_the_uncompressed_text(monkeypatch):
    text = RECORDED_TRACES[0].read_bytes()
    monkeypatch.setattr(trace, "MAX_TRACE_BYTES", len(text) - 1)
    bomb = gzip.compress(text)
    assert len(bomb) < trace.MAX_TRACE_BYTES
    with pytest.raises(trace.TraceError, match="uncompressed"):
        trace.loads(bomb)
    with pytest.raises(trace.TraceError, match="limit"):
        trace.loads(text)


def test_other_versions_and_broken_gzip_are_refused_clearly():
    lines = RECORDED_TRACES[0].read_text().splitlines()
    header = json.loads(lines[0])
    with pytest.raises(trace.TraceError, match="reads versions 1 and 2"):
        trace.loads("\n".join([json.dumps({**header, "schema_version": 3}), *lines[1:]]))
    with pytest.raises(trace.TraceError, match="kv"):  # a version 2 header over version 1 steps
        trace.loads("\n".join([json.dumps({**header, "schema_version": 2, "source": "batchscope"}), *lines[1:]]))
    with pytest.raises(trace.TraceError, match="gzip"):
        trace.loads(b"\x1f\x8b not really gzip")


def test_long_ids_get_short_unique_labels():
    rng = random.Random(0)
    ids = [f"chatcmpl-{rng.getrandbits(128):032x}-{rng.getrandbits(32):08x}" for _ in range(300)]
    view = TraceView([{"type": "header", "requests": [{"request_id": r} for r in ids]}, {}])
    labels = [view.label(r) for r in ids]
    assert len(set(labels)) == len(ids) and all(len(x) <= 17 and not x.startswith("chatcmpl") for x in labels)
    short = TraceView([{"type": "header", "requests": [{"request_id": r} for r in "ABC"]}, {}])
    assert [short.label(r) for r in "ABC"] == ["A", "B", "C"]
    serial = [f"req-{i:040d}" for i in range(50)]  # heads alike: the tails tell them apart
    view = TraceView([{"type": "header", "requests": [{"request_id": r} for r in serial]}, {}])
    assert len({view.label(r) for r in serial}) == 50 and view.label(serial[7]).endswith("00000007")
