"""Shared case e11 (../shared/cases/README.md): a crashed server's trace.

A traced server killed after its 6th step leaves a header and 6 complete step lines, no summary (``e11-crash.jsonl``),
or the same lines in a gzip stream without its end-of-stream trailer (``e11-crash.jsonl.gz``). Both open with their
6 steps and the summary they would have had (``truncated_at_step`` 6, the two requests still running with
``finish_reason`` null), marked ``cut_short``, and every reader says so in one line; never as complete. The whole
kind: a trace cut at any byte of its last two lines, plain or gzipped, opens with its complete steps (or, cut in its
header, is refused in one line); a trace that is bad in the middle is still refused.
"""

from __future__ import annotations

import json
import zlib

import pytest
from clikit import cli
from conftest import CASES, step_records
from fakes import make_request, run_fake

from batchscope.steplog import trace
from batchscope.steplog.metrics import request_metrics
from batchscope.steplog.view import TraceView

RID = "chatcmpl-5f0c3a9e2b7d4c18a6e9f0b1c2d3e4f{}"
R0, R1, R2 = RID.format("0-5f0c3a9e"), RID.format("1-f0c3a9e2"), RID.format("2-0c3a9e2b")


@pytest.mark.parametrize("name", ["e11-crash.jsonl", "e11-crash.jsonl.gz"])
def test_the_crashed_servers_trace_opens_with_its_six_steps_marked_cut_short(name):
    records = trace.read(CASES / name)
    assert [r["type"] for r in records] == ["header"] + ["step"] * 6 + ["summary"]
    summary = records[-1]
    assert summary["cut_short"] == "no_summary" and summary["truncated_at_step"] == 6
    by_id = {r["request_id"]: r for r in summary["requests"]}
    assert list(by_id) == [R2, R0, R1]  # arrival order, as the step 0 record declares them
    assert by_id[R2]["output_token_ids"] == [1913, 1920, 1927, 1934, 1941, 1948]
    assert by_id[R0]["output_token_ids"] == [1918, 1925, 1932, 1939, 1946, 1953]
    assert by_id[R1]["output_token_ids"] == [1916, 1923, 1930]
    assert (by_id[R1]["finish_reason"], by_id[R1]["finish_time"]) == ("abort", 0.08719410399999106)  # step 3's t_end
    assert [by_id[r]["finish_reason"] for r in (R2, R0)] == [None, None]
    assert by_id[R2]["first_scheduled_time"] == 0.0003640790000645211  # step 0's t_start
    assert by_id[R2]["first_token_time"] == 0.021476957000231778  # step 0's t_end
    view = TraceView(records)
    assert view.cut_short == (
        "cut short at step 6: the trace has no summary line, the server did not shut down (the complete steps are "
        "shown; 2 request(s) still running have no finish)"
    )
    assert not view.partial


def test_requests_still_running_have_no_e2e_or_tpot():
    """R2 and R0 sampled at steps 0-5 and were running when the server died; R1 sampled at steps 0-2 and was aborted
    while step 3 ran (scheduled in it, listed in its finished): E2E runs to the abort, the end of step 3 (vLLM 0.33
    reports an aborted request's E2E when it ends), TPOT between its first and last token."""
    by_id = {m["request_id"]: m for m in request_metrics(trace.read(CASES / "e11-crash.jsonl"))}
    for rid in (R2, R0):
        m = by_id[rid]
        assert (m["finish_step"], m["e2e_steps"], m["tpot_steps"], m["e2e_s"], m["tpot_s"]) == (None,) * 5
        assert (m["ttft_steps"], m["itl_steps"]) == (1, [1, 1, 1, 1, 1])  # arrived before step 0, a token a step
    assert (by_id[R1]["e2e_steps"], by_id[R1]["tpot_steps"]) == (4, 1.0)  # steps 0-3; (2 - 0) / (3 tokens - 1)


def test_both_files_give_the_same_records():
    assert trace.read(CASES / "e11-crash.jsonl") == trace.read(CASES / "e11-crash.jsonl.gz")


@pytest.mark.parametrize("name", ["e11-crash.jsonl", "e11-crash.jsonl.gz"])
def test_metrics_and_html_say_cut_short_in_one_line_then_work(name, tmp_path):
    code, out, err = cli("metrics", str(CASES / name))
    assert code == 0, err
    first = out.splitlines()[0]
    assert "6 step records, 3 requests, cut short at step 6" in first and "the server did not shut down" in first
    assert "complete" not in first.replace("complete steps", "")
    assert "total_output_tokens             value  tokens         15" in out  # 6 + 6 + 3
    code, out, err = cli("html", str(CASES / name), "--out", str(tmp_path / "e11.html"))
    assert code == 0, err
    said = [line for line in err.splitlines() if "cut short" in line]
    assert said == [f"{name}: " + TraceView(trace.read(CASES / name)).cut_short]
    assert (tmp_path / "e11.html").stat().st_size > 0


def small_trace(version: int) -> list[dict]:
    """Two requests on a model-free runner (3 steps, short lines). Version 2: the header lists no requests and
    step 0 declares them (``arrived``), as a server's trace does."""
    _, _, records = run_fake(
        [make_request("A", 3, 2), make_request("B", 2, 3)],
        max_num_seqs=2,
        num_kv_blocks=8,
        block_size=4,
        max_num_batched_tokens=16,
    )
    if version == 2:
        from batchscope.steplog.blocks import to_v2

        records = to_v2(records)
        records[1]["arrived"] = records[0]["requests"]
        records[0] = {**records[0], "requests": []}
    return trace.loads(trace.dumps(records))


def expect(records: list[dict], kept_steps: int) -> None:
    """``records`` hold the first ``kept_steps`` steps of the original and a summary made from them: each request's
    tokens are those steps' samples, and a request those steps did not finish has no finish."""
    summary = records[-1]
    assert summary["cut_short"] == "no_summary"
    steps = step_records(records)
    assert len(steps) == kept_steps and summary["truncated_at_step"] == steps[-1]["step"] + 1
    for r in summary["requests"]:
        assert r["output_token_ids"] == [
            s["token_id"] for st in steps for s in st["sampled"] if s["request_id"] == r["request_id"]
        ]
        done = [f["reason"] for st in steps for f in st["finished"] if f["request_id"] == r["request_id"]]
        assert r["finish_reason"] == (done[0] if done else None)


REFUSED_IN_HEADER = (
    "trace is empty: expected a header line, step lines and a summary line",
    "line 1: the trace was cut short inside its header line: nothing to read",
)


def outcome(data: str | bytes) -> list[dict] | str:
    try:
        return trace.loads(data)
    except trace.TraceError as exc:
        assert "\n" not in str(exc)
        return str(exc)


@pytest.mark.parametrize("version", [1, 2])
def test_a_trace_cut_at_any_byte_of_its_last_two_lines_opens_with_its_complete_steps(version):
    records = small_trace(version)
    text = trace.dumps(records)
    lines = text.splitlines(keepends=True)
    ends = [sum(len(x) for x in lines[: i + 1]) for i in range(len(lines))]  # offset after each line's "\n"
    num_steps = len(records) - 2
    for cut in range(ends[-3], len(text) + 1):
        got = outcome(text[:cut])
        whole = sum(e - 1 <= cut for e in ends)  # lines present up to (at least) their last character
        if whole == len(lines):
            assert got == records, cut  # the summary is whole: the trace is complete
        else:
            assert isinstance(got, list), (cut, got)
            expect(got, whole - 1)
            assert step_records(got) == records[1:whole], cut
    assert num_steps == 3  # A: 3 prompt tokens, 2 out; B: 2 prompt tokens, 3 out; both prefill in step 0


@pytest.mark.parametrize("version", [1, 2])
def test_a_trace_cut_in_its_header_or_first_step_is_refused_in_one_line(version):
    text = trace.dumps(small_trace(version))
    first, second = text.index("\n"), text.index("\n", text.index("\n") + 1)
    for cut in range(0, first):
        assert outcome(text[:cut]) in REFUSED_IN_HEADER
    for cut in range(first + 1, second - 1):
        assert outcome(text[:cut]) == "line 2: the trace was cut short before its first complete step: nothing to draw"


def flushed_gzip(text: str) -> tuple[bytes, list[int]]:
    """``text`` as one gzip stream flushed after every line, as a server's writer flushes (``Z_SYNC_FLUSH``), and
    the offset in it after each line's flush: a file cut there decodes to exactly those lines."""
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    data, ends = b"", []
    for line in text.splitlines(keepends=True):
        data += z.compress(line.encode()) + z.flush(zlib.Z_SYNC_FLUSH)
        ends.append(len(data))
    return data + z.flush(zlib.Z_FINISH), ends


@pytest.mark.parametrize("version", [1, 2])
def test_a_gzip_trace_cut_at_any_byte_of_its_last_two_lines_opens_with_its_complete_steps(version):
    records = small_trace(version)
    data, ends = flushed_gzip(trace.dumps(records))
    for cut in range(ends[-3], len(data) + 1):
        got = outcome(data[:cut])
        assert isinstance(got, list), (cut, got)
        flushed = sum(e <= cut for e in ends)  # lines surely decoded; the next one may be too (before its flush)
        if got[-1].get("cut_short"):
            kept = len(got) - 2
            assert kept + 1 in (flushed, flushed + 1) and flushed < len(ends), cut
            expect(got, kept)
            assert step_records(got) == records[1 : kept + 1]
        else:
            assert got == records and cut >= ends[-1] - 8, cut  # the summary line decoded whole
    for cut in range(0, 10):  # inside the gzip header: nothing decoded (one byte is not even gzip's magic number)
        assert outcome(data[:cut]) in REFUSED_IN_HEADER


def test_a_trace_bad_in_the_middle_is_still_refused():
    text = trace.dumps(small_trace(1))
    lines = text.splitlines(keepends=True)
    assert outcome("".join([*lines[:2], lines[2][:40] + "\n", *lines[3:]])).startswith("line 3: ")
    assert outcome("".join([*lines[:2], *lines[3:]])).startswith("line 3 (step ")  # a step missing
    assert outcome("".join([*lines[:-1], lines[-1][:30] + "\n"])).startswith("line 5: ")  # cut, but a line end
    gz = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    good = gz.compress(text.encode()) + gz.flush()
    assert outcome(good) == trace.loads(text)
    bad = bytearray(good)
    bad[-5] ^= 0x01  # the trailer is the CRC-32, then the length: a wrong CRC-32 is refused, never read as a cut
    assert (
        outcome(bytes(bad)) == "trace is not valid gzip data (Error -3 while decompressing data: incorrect data check)"
    )
    bad = bytearray(good)
    bad[len(good) // 2] ^= 0xFF  # a corrupt byte in the middle of the deflate stream
    assert isinstance(outcome(bytes(bad)), str)


def test_an_exported_cut_short_trace_stays_cut_short(tmp_path):
    records = trace.read(CASES / "e11-crash.jsonl")
    trace.write(records, tmp_path / "again.jsonl")
    again = trace.read(tmp_path / "again.jsonl")
    assert again == records and TraceView(again).cut_short == TraceView(records).cut_short
    assert json.loads((tmp_path / "again.jsonl").read_text().splitlines()[-1])["cut_short"] == "no_summary"


@pytest.mark.app
def test_the_trace_page_warns_that_the_trace_was_cut_short():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_string("from batchscope.app import page_trace\npage_trace.page()", default_timeout=120)
    at.session_state["playground:live-runs"] = {"server": trace.read(CASES / "e11-crash.jsonl.gz")}
    at.query_params["live"] = "server"
    at.run()
    assert not at.exception, at.exception
    (warning,) = at.warning  # named as the picker names the run
    assert warning.value == "server: " + TraceView(trace.read(CASES / "e11-crash.jsonl")).cut_short
    assert "cut short at step 6" in " ".join(c.value for c in at.caption)  # the badge says it too
