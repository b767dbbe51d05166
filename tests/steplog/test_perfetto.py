"""``python -m batchscope perfetto``: a trace as Chrome trace-event JSON (issue 18, part 6).

Every trace the app opens (the shipped traces, version 2 server traces, a long-id server trace, cut-short ones,
plain and ``.gz``) is converted, and the file is checked against the trace's raw JSON lines, read here with
``json`` alone (not through ``steplog``): one slice per scheduled entry (and per padding row) with the entry's
request, kind, tokens and positions; every slice on a declared track; no two slices overlapping on a track;
counters equal to the step's values; an instant for every admission, preemption, finish and abort; and the file
is valid trace-event JSON (the keys each ``ph`` requires).

Perfetto's own trace processor (PyPI ``perfetto``) is not used: its Python package downloads a
``trace_processor_shell`` binary at run time, which fails without a network (see the README).
"""

from __future__ import annotations

import copy
import gzip
import itertools
import json
import os
import stat
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from conftest import RECORDED, ROOT, step_records

from batchscope.cli.main import main
from batchscope.steplog import perfetto, trace
from batchscope.steplog.view import TraceView

TRACES = [
    *sorted(RECORDED.glob("*.jsonl")),
    ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl",
    ROOT / "tests" / "cases" / "e10-longid.jsonl",
    ROOT / "tests" / "cases" / "e11-crash.jsonl",
    ROOT / "tests" / "cases" / "e11-crash.jsonl.gz",
]
IDS = [p.name for p in TRACES]


def raw_steps(path: Path) -> list[dict]:
    """The step lines of a trace file, parsed with ``json`` only; a last line cut mid-record (a crashed writer)
    and a ``.gz`` cut before its trailer give what they hold."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        import zlib

        data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
    lines = data.decode("utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            assert i == len(lines) - 1, f"{path.name} line {i + 1} is not JSON"
            continue
        if rec.get("type") == "step":
            out.append(rec)
    return out


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, dict]:
    """Each trace through the CLI: ``{file name: the JSON it wrote}``."""
    folder = tmp_path_factory.mktemp("perfetto")
    out = {}
    for path in TRACES:
        target = folder / f"{path.name}.json"
        assert main(["perfetto", str(path), "--out", str(target)]) == 0
        out[path.name] = json.loads(target.read_text(encoding="utf-8"))
    return out


def of(doc: dict, ph: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


def ns(us: float) -> int:
    return round(us * 1000)


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_a_slice_per_scheduled_entry_and_padding_row(converted, path):
    doc, steps = converted[path.name], raw_steps(path)
    want, got = Counter(), Counter()
    for st in steps:
        for s in st["scheduled"]:
            kind = "recompute" if s.get("recompute") else s["kind"]
            kind = "speculative" if kind == "decode" and s.get("draft_token_ids") else kind
            c0, n = s["num_computed_tokens"], s["num_tokens"]
            want[(st["step"], s["slot"], s["request_id"], kind, n, c0, c0 + n)] += 1
        for p in st["padding_slots"]:
            want[(st["step"], p["slot"], p["request_id"], "padding", None, None, None)] += 1
    for e in of(doc, "X"):
        a = e["args"]
        got[
            (
                a["step"],
                a["slot"],
                e["name"],
                e["cat"],
                a.get("num_tokens"),
                a.get("start_position"),
                a.get("end_position"),
            )
        ] += 1
    assert got == want
    assert sum(want.values()) == sum(len(st["scheduled"]) + len(st["padding_slots"]) for st in steps) > 0
    assert {e["cat"] for e in of(doc, "X")} <= set(perfetto.CATEGORIES)


def test_a_speculative_decode_is_its_own_slice_with_its_drafts():
    """A run with n-gram drafts (a scripted model): each decode that verified drafts is a ``speculative`` slice whose
    args carry the drafts and the accepted count of its line; the others keep their kinds."""
    from fakes import ScriptedModel

    from batchscope.engine.config import EngineConfig
    from batchscope.engine.engine import LLMEngine
    from batchscope.engine.request import Request, SamplingParams

    script = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8]
    cfg = EngineConfig(num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=3, block_size=4)
    records = LLMEngine(ScriptedModel(script), cfg).run([Request("A", script[:6], SamplingParams(max_tokens=6))])
    events = of(perfetto.trace_events(TraceView(trace.loads("\n".join(map(json.dumps, records))))), "X")
    got = [(e["cat"], e["args"].get("draft_token_ids"), e["args"].get("num_accepted_tokens")) for e in events]
    assert got == [("prefill", None, None), ("speculative", [4, 1, 2], 3), ("speculative", [4, 1, 2], 1)]


def test_the_kinds_the_views_draw_all_occur():
    """Across the shipped traces: prefill, decode, recompute (preemption) and padding (static batching)."""
    cats = set()
    for path in TRACES[:10]:
        cats |= {e["cat"] for e in of(perfetto.trace_events(TraceView(trace.read(path))), "X")}
    assert cats == {"prefill", "decode", "recompute", "padding"}


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_every_slice_is_on_a_declared_track_named_by_its_slot(converted, path):
    doc = converted[path.name]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in of(doc, "M") if e["name"] == "thread_name"}
    processes = {e["pid"] for e in of(doc, "M") if e["name"] == "process_name"}
    assert len(set(names.values())) == len(names)  # one track per row, one per event kind
    assert len({tid for _, tid in names}) == len(names)  # tids unique across processes, as Perfetto wants them
    for e in of(doc, "X"):
        assert names[(e["pid"], e["tid"])] == f"slot {e['args']['slot']}"
    for e in of(doc, "i"):
        assert (e["pid"], e["tid"]) in names
    for e in doc["traceEvents"]:
        assert e["pid"] in processes


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_no_two_slices_overlap_on_a_track(converted, path):
    tracks = defaultdict(list)
    for e in of(converted[path.name], "X"):
        tracks[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    for spans in tracks.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start
        assert all(b > a for a, b in spans)  # every slice lasts


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_counters_equal_the_steps_values(converted, path):
    doc, steps = converted[path.name], raw_steps(path)
    series = defaultdict(list)
    for e in of(doc, "C"):
        ((key, value),) = e["args"].items()
        series[f"{e['name']} {key}"].append((e["ts"], value))  # Perfetto names a counter track: name + argument key
    assert [v for _, v in series["KV blocks used"]] == [st["kv"]["num_used_blocks"] for st in steps]
    assert [v for _, v in series["waiting requests"]] == [len(st["waiting"]) for st in steps]
    assert [v for _, v in series["running requests"]] == [len(st["running"]) for st in steps]
    assert [v for _, v in series["tokens scheduled"]] == [sum(s["num_tokens"] for s in st["scheduled"]) for st in steps]
    assert len(series) == 4
    starts = [ts for ts, _ in series["KV blocks used"]]
    assert starts == sorted(starts) and all(ts == t for name in series for (ts, _), t in zip(series[name], starts))


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_an_instant_for_every_admission_preemption_finish_and_abort(converted, path):
    doc, steps = converted[path.name], raw_steps(path)
    track = {e["tid"]: e["args"]["name"] for e in of(doc, "M") if e["name"] == "thread_name"}
    got = Counter((track[e["tid"]], e["args"]["step"], e["args"]["request_id"]) for e in of(doc, "i"))
    want = Counter()
    for st in steps:
        want.update(("admissions", st["step"], rid) for rid in st["admitted"])
        want.update(("preemptions", st["step"], rid) for rid in st["preempted"])
        for f in st["finished"]:
            want[("aborts" if f["reason"] == "abort" else "finishes", st["step"], f["request_id"])] += 1
    assert got == want
    reasons = {(e["args"]["step"], e["args"]["request_id"]): e["args"].get("finish_reason") for e in of(doc, "i")}
    for st in steps:
        for f in st["finished"]:
            assert reasons[(st["step"], f["request_id"])] == f["reason"]


def test_the_cases_hold_aborts_preemptions_and_finishes(converted):
    """What the instants above are checked on: aborts (e10, e11), preemptions (preemption, priority), finishes."""
    kinds = Counter(e["name"].split()[0] for doc in converted.values() for e in of(doc, "i"))
    assert kinds["abort"] >= 2 and kinds["preempt"] >= 2 and kinds["finish"] >= 50 and kinds["admit"] >= 50


def test_a_preemption_carries_its_decision_record(converted):
    steps = raw_steps(RECORDED / "preemption-continuous.jsonl")
    recorded = {(st["step"], p["request_id"]): p for st in steps for p in st["decisions"].get("preemptions", [])}
    instants = [e for e in of(converted["preemption-continuous.jsonl"], "i") if e["name"].startswith("preempt ")]
    assert instants and len(instants) == len(recorded)
    for e in instants:
        p, a = recorded[(e["args"]["step"], e["args"]["request_id"])], e["args"]
        assert (a["rule"], a["num_dropped_tokens"], a["requester"], a["decision"]) == (
            p["rule"],
            p["num_dropped_tokens"],
            p["requester"],
            "recorded",
        )
        assert "most recently admitted" in a["reason"]


def test_a_trace_without_decision_records_says_they_are_inferred(converted):
    """A server trace that records no decisions (e10): the admissions' token split is inferred, and said so."""
    admits = [e for e in of(converted["e10-longid.jsonl"], "i") if e["name"].startswith("admit ")]
    assert admits and {e["args"]["decision"] for e in admits} == {"inferred from the log"}


REQUIRED = {
    "X": {"name": str, "cat": str, "ts": (int, float), "dur": (int, float), "pid": int, "tid": int, "args": dict},
    "C": {"name": str, "ts": (int, float), "pid": int, "args": dict},
    "i": {"name": str, "ts": (int, float), "pid": int, "tid": int, "s": str, "args": dict},
    "M": {"name": str, "pid": int, "args": dict},
}
METADATA = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_the_file_is_valid_trace_event_json(converted, path):
    doc = converted[path.name]
    assert isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] in ("ms", "ns")
    assert doc["otherData"]["time_axis"] in ("recorded", "step_clock") and doc["otherData"]["time_axis_note"]
    for e in doc["traceEvents"]:
        for key, kind in REQUIRED[e["ph"]].items():
            assert isinstance(e.get(key), kind) and not isinstance(e.get(key), bool), (key, e)
        if "ts" in e:
            assert e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] > 0
        if e["ph"] == "C":  # every counter argument is a number (Perfetto makes a track of each)
            assert e["args"] and all(isinstance(v, int) and not isinstance(v, bool) for v in e["args"].values())
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
        if e["ph"] == "M":
            assert METADATA[e["name"]] in e["args"]
            assert ("tid" in e) == e["name"].startswith("thread_")
        assert e["pid"] > 0 and e.get("tid", 1) > 0  # pid / tid 0 are the idle process and thread to Perfetto


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_recorded_step_times_are_the_time_axis(converted, path):
    doc, steps = converted[path.name], raw_steps(path)
    assert doc["otherData"]["time_axis"] == "recorded"
    assert "recorded step times" in doc["otherData"]["time_axis_note"]
    by_step = {st["step"]: st for st in steps}
    for e in of(doc, "X"):
        st = by_step[e["args"]["step"]]
        assert abs(e["ts"] - st["t_start"] * 1e6) < 1e-3
        assert abs(e["ts"] + e["dur"] - st["t_end"] * 1e6) < 2e-3


def test_the_cut_short_trace_says_so(converted):
    for name in ("e11-crash.jsonl", "e11-crash.jsonl.gz"):
        other = converted[name]["otherData"]
        assert other["trace_state"].startswith("cut short at step 6") and other["num_steps"] == 6
    assert converted["seed-abcd-continuous.jsonl"]["otherData"]["trace_state"] == "complete"


def _retimed(path: Path, times) -> TraceView:
    """A copy of a trace with its step times replaced by ``times(position) -> (t_start, t_end)``: not a file the
    reader would accept, a view to convert."""
    records = copy.deepcopy(trace.read(path))
    for k, st in enumerate(step_records(records)):
        st["t_start"], st["t_end"] = times(k)
    return TraceView(records)


def test_steps_without_durations_fall_back_to_the_step_clock():
    """All steps at one instant: 1 ms per step on the step clock, whose idle stretches (``idle_steps_before``)
    stay gaps, as on the metrics' step clock."""
    path = RECORDED / "shared-prefix-continuous.jsonl"
    view = _retimed(path, lambda k: (0.0, 0.0))
    assert view.has_idle_gaps
    doc = perfetto.trace_events(view)
    assert doc["otherData"]["time_axis"] == "step_clock"
    assert doc["otherData"]["time_axis_note"] == "step clock, 1 ms per step: the trace records no step durations"
    for e in of(doc, "X"):
        assert (e["ts"], e["dur"]) == (e["args"]["step"] * 1000, 1000)
    starts = sorted({e["ts"] for e in of(doc, "C")})
    recorded = view.recorded_steps
    assert starts == [st["step"] * 1000 for st in recorded] and starts[-1] > (len(starts) - 1) * 1000


def test_overlapping_steps_fall_back_to_the_step_clock():
    """Asynchronous scheduling (two steps in flight) overlaps steps in time, which would overlap a row's slices."""
    view = _retimed(ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl", lambda k: (0.01 * k, 0.01 * k + 0.015))
    doc = perfetto.trace_events(view)
    assert doc["otherData"]["time_axis"] == "step_clock"
    assert "overlap" in doc["otherData"]["time_axis_note"]
    tracks = defaultdict(list)
    for e in of(doc, "X"):
        tracks[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    assert all(a[1] <= b[0] for spans in tracks.values() for a, b in zip(sorted(spans), sorted(spans)[1:]))


def test_the_abort_record_goes_with_the_abort():
    """A finish with reason abort and its ``aborted`` record (state, tokens, blocks): on the aborts track with the
    record; before the step was scheduled (no ``during_step``) it stands at the step's start."""
    records = copy.deepcopy(trace.read(ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl"))
    st = records[3]
    st["finished"].append(
        {
            "request_id": "D",
            "reason": "abort",
            "aborted": {"state": "waiting", "num_output_tokens": 0, "num_freed_blocks": 0},
        }
    )
    doc = perfetto.trace_events(TraceView(records))
    (e,) = [e for e in of(doc, "i") if e["name"] == "abort D"]
    assert e["args"]["state"] == "waiting" and e["args"]["finish_reason"] == "abort"
    assert e["ts"] == pytest.approx(st["t_start"] * 1e6, abs=1e-3)
    assert "cannot tell" in e["args"]["note"]


# ---- the command line ----------------------------------------------------------------------------------------


def test_the_cli_says_what_it_wrote_in_one_line(tmp_path, capsys):
    out = tmp_path / "seed.json"
    assert main(["perfetto", str(TRACES[0].parent / "seed-abcd-continuous.jsonl"), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"wrote {out}: 14 steps, 4 requests, 3 batch rows, 29 slices, 56 counter values")
    assert "time axis: recorded step times" in lines[0]
    crashed = ROOT / "tests" / "cases" / "e11-crash.jsonl.gz"
    assert main(["perfetto", str(crashed), "--out", str(tmp_path / "c.json")]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert "cut short at step 6: the trace has no summary line, the server did not shut down" in line


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_an_existing_out_is_kept_without_force(tmp_path, capsys):
    src, out = str(TRACES[0]), tmp_path / "t.json"
    out.write_text("keep me")
    assert main(["perfetto", src, "--out", str(out)]) == 2
    assert "already exists; pass --force to overwrite it" in _one_error_line(capsys)
    assert out.read_text() == "keep me"
    assert main(["perfetto", src, "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["traceEvents"]


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"not json\n", "line 1: not valid JSON"),
        (b'{"type": "header", "schema_version": 9}\n', "schema_version=9"),
        (gzip.compress(b"garbage"), "line 1"),
        (None, "does not exist"),
    ],
    ids=["not-json", "other-version", "gzip-garbage", "missing"],
)
def test_an_unreadable_trace_is_one_line_and_writes_nothing(tmp_path, capsys, content, needle):
    src, out = tmp_path / "bad.jsonl", tmp_path / "out.json"
    if content is not None:
        src.write_bytes(content)
    assert main(["perfetto", str(src), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert needle in line
    assert not out.exists()


def test_the_input_is_never_the_output(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    src.write_bytes(TRACES[0].read_bytes())
    assert main(["perfetto", str(src), "--out", str(src), "--force"]) == 2
    assert "is also an input of this command" in _one_error_line(capsys)
    assert src.read_bytes() == TRACES[0].read_bytes()


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o077, 0o600)], ids=oct)
def test_the_file_gets_the_umasks_mode(tmp_path, mask, mode):
    out = tmp_path / "t.json"
    old = os.umask(mask)
    try:
        assert main(["perfetto", str(TRACES[0]), "--out", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["perfetto", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "example:\n  python -m batchscope perfetto " in out and "--force" in out


def test_the_command_itself_exits_2_with_one_line(tmp_path):
    """As a user runs it (a process of its own): the unreadable trace's one line on stderr, nothing on stdout."""
    import subprocess
    import sys

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "header"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "batchscope", "perfetto", str(bad), "--out", str(tmp_path / "o.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"error: {bad}: line 1")
