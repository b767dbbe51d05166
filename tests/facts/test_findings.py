"""Issue 32's findings, one test each: places where two parts of the app disagreed. Each compares what a view prints
with a value counted here from the raw JSON lines (or from a workload whose schedule is known by hand), so that it
fails on the finding as shipped before the fact model (see each docstring)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import RECORDED, RECORDED_TRACES, parts, recorded_pair

from batchscope.app.panels import queue_rows
from batchscope.compare.lockstep import family_counters, lockstep_counters
from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.explain.beats import story_beats
from batchscope.explain.checklist import head_checklist
from batchscope.explain.moments import found_moments
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import queues, request_status
from batchscope.figures.kv import block_marks
from batchscope.figures.steps_table import columns, step_row
from batchscope.figures.timeline import timeline
from batchscope.player.playback import player_payload
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

PAIRS = ("shared-prefix", "vllm-vs-sglang", "seed-abcd", "preemption", "priority")


def raw(path) -> tuple[dict, list[dict], dict]:
    return parts([json.loads(line) for line in path.read_text().splitlines()])


def view_of(name: str) -> TraceView:
    return TraceView(trace.read(RECORDED / f"{name}.jsonl"))


@pytest.mark.parametrize("scenario", PAIRS)
def test_both_sides_of_compare_runs_stand_on_one_step_clock(scenario):
    """Finding: on `shared-prefix` the sides drifted after the idle steps one side skips (at the player's step 30
    one side narrated "Step 32", the other "Step 31"). Position k of the shared clock is step k on both sides, an
    idle step narrated as idle."""
    views = recorded_pair(scenario)
    for v in views:
        numbers = {st["step"] for st in raw(RECORDED / f"{scenario}-{v.policy}.jsonl")[1]}
        for k in range(v.num_steps):
            text = narrate(v, k)
            assert text.startswith(f"Step {k}:"), (v.policy, k, text[:40])
            assert (k not in numbers) == text.startswith(f"Step {k}: idle."), (v.policy, k)
    payload = player_payload(views, scenario)
    assert payload["num_steps"] == max(raw(RECORDED / f"{scenario}-{v.policy}.jsonl")[1][-1]["step"] + 1 for v in views)


@pytest.mark.parametrize("path", RECORDED_TRACES, ids=[p.stem for p in RECORDED_TRACES])
def test_a_key_moment_names_the_step_it_stands_at(path):
    """Finding: a key moment said "finishes at step 55" while its note stood at step 53. Every "at step N" in a
    moment's note is the moment's own step, and that step's record has number N."""
    view = TraceView(trace.read(path))
    numbers = [st["step"] for st in raw(path)[1]]
    for m in found_moments(view):
        for n in re.findall(r"finishes its last request at step (\d+)", m["note"]):
            assert int(n) == m["step"] == numbers[-1]


@pytest.mark.parametrize("scenario", ["shared-prefix", "seed-abcd", "sixteen"])
def test_compare_step_counters_equal_the_steps_table_and_metrics(scenario):
    """Finding: counters read 54/67 while the steps table, Metrics and the README said 56/68 (idle steps)."""
    static, continuous = (view_of(f"{scenario}-{p}") for p in ("static", "continuous"))
    cards = {c["label"]: c["values"] for c in lockstep_counters(static, continuous)}
    for label, v in (("static steps", static), ("continuous steps", continuous)):
        last = raw(RECORDED / f"{scenario}-{v.policy}.jsonl")[1][-1]["step"]
        assert cards[label][0] == str(last + 1) == str(step_row(v, v.num_steps - 1)["step"] + 1)


def test_the_head_wait_counter_counts_every_step_the_head_waits():
    """Finding: "the head waited for its output estimate" read 2 while D waited 60 steps."""
    sgl = raw(RECORDED / "vllm-vs-sglang-sglang.jsonl")[1]
    cards = {c["label"]: c["values"] for c in family_counters(*recorded_pair("vllm-vs-sglang"))}
    waits = sum(1 for st in sgl if st["waiting"])
    assert sum(1 for st in sgl if "D" in st["waiting"]) == 60
    assert cards["steps the head waits (SGLang) · for its output estimate"][-1].startswith(f"{waits} · ")


def test_the_prefix_hit_counter_counts_as_metrics_does():
    """Finding: the counter ended at 104 · 106 while `engine metrics` and the README gave 56 / 63 (re-admissions
    counted in). First admissions only, from the raw hit counts; re-admissions apart."""
    totals = []
    for policy in ("continuous", "sglang"):
        evicted: set[str] = set()
        first = 0
        for st in raw(RECORDED / f"vllm-vs-sglang-{policy}.jsonl")[1]:
            first += sum(n for r, n in st["num_prefix_hit_tokens"].items() if r not in evicted)
            evicted |= set(st["preempted"])
        totals.append(first)
    cards = {c["label"]: c["values"] for c in family_counters(*recorded_pair("vllm-vs-sglang"))}
    assert cards["prefix-cache hit tokens (vLLM · SGLang)"][-1].startswith(f"{totals[0]} · {totals[1]} (")


@pytest.mark.parametrize("path", [p for p in RECORDED_TRACES if p.stem.endswith("-sglang")], ids=lambda p: p.stem)
def test_sglang_runs_are_told_in_sglang_words(path):
    """Finding: SGLang's retraction was narrated "after its preemption" and listed under "Preempted now"."""
    view = TraceView(trace.read(path))
    for k in range(view.num_steps):
        shown = [narrate(view, k), *(name for name, _, _ in queue_rows(view, queues(view, k)))]
        shown += [*request_status(view, k).values(), *columns(view)]
        assert not any("preempt" in s.lower() for s in shown), (k, [s for s in shown if "preempt" in s.lower()])
    assert any("retracted" in request_status(view, k).values() for k in range(view.num_steps)) or not any(
        st["preempted"] for st in raw(path)[1]
    )


@pytest.mark.parametrize(("name", "step"), [("vllm-vs-sglang-continuous", 30), ("priority-continuous", 30)])
def test_the_block_map_marks_every_block_the_text_says_was_given_back(name, step):
    """Finding: the map showed one ⟲ fewer than "N KV blocks given back" (6 vs 7, 8 vs 9): the requester took a
    freed block at once and nothing said so. The ⟲ marks count the record's dropped blocks, and the narration
    names the block taken at once."""
    view = view_of(name)
    rec = raw(RECORDED / f"{name}.jsonl")[1][step]
    (victim,) = rec["preempted"]
    before = set(raw(RECORDED / f"{name}.jsonl")[1][step - 1]["kv"]["block_tables"][victim])
    taken = {r: sorted(set(t) & before) for r, t in rec["kv"]["block_tables"].items() if set(t) & before}
    marks = sum(t.count("⟲") for t in block_marks(view, step)["text"])
    assert marks == len(before) == rec["decisions"]["preemptions"][0]["num_dropped_blocks"]
    assert len(taken) == 1
    ((taker, blocks),) = taken.items()
    assert f"{taker} took {len(blocks)} of them at once (KV block {blocks[0]})." in narrate(view, step)


def test_the_retraction_marks_what_sglang_frees():
    """The same for SGLang's retraction: ⟲ on the token slots it frees, not those its radix tree keeps."""
    view = view_of("vllm-vs-sglang-sglang")
    (p,) = raw(RECORDED / "vllm-vs-sglang-sglang.jsonl")[1][53]["decisions"]["preemptions"]
    assert sum(t.count("⟲") for t in block_marks(view, 53)["text"]) == p["num_freed_tokens"] == 49


class Sevens:
    """A fake model: every sampling request gets token 7."""

    def execute(self, out, block_tables) -> dict[str, list[int]]:
        return {s.request.request_id: [7] for s in out.scheduled if s.samples}

    def release(self, request_id: str) -> None:
        pass


def aborted_run() -> TraceView:
    """A (10 tokens, 5 to make) is aborted before step 3; B (4 tokens, 2 to make) finishes at the end of step 1."""
    cfg = EngineConfig(max_num_seqs=2, max_num_batched_tokens=16, block_size=4, num_kv_blocks=8)
    reqs = [
        Request("A", list(range(10, 20)), SamplingParams(max_tokens=5, ignore_eos=True), arrival_step=0, abort_step=3),
        Request("B", list(range(30, 34)), SamplingParams(max_tokens=2, ignore_eos=True), arrival_step=0),
    ]
    return TraceView(LLMEngine(Sevens(), cfg).run(reqs))


def test_an_aborted_request_reads_aborted_in_every_view():
    """Finding: a cancelled (aborted) request read "finished" in the queues, the text panel, the steps table, the
    timeline and the progress line."""
    view = aborted_run()
    k = view.num_steps - 1
    assert [f["reason"] for st in view.steps for f in st["finished"] if f["request_id"] == "A"] == ["abort"]
    q = queues(view, k)
    assert (q["finished"], q["aborted"]) == (["B"], ["A"])
    assert request_status(view, k) == {"A": "aborted", "B": "finished"}
    abort_step = next(i for i, st in enumerate(view.steps) if any(f["request_id"] == "A" for f in st["finished"]))
    row = step_row(view, abort_step)
    assert row["aborted"] == "A" and "A" not in row["finished"]
    marks = {t.name: list(t.y) for t in timeline(view).data if t.type == "scatter"}
    assert marks == {"finished": ["B"], "aborted": ["A"]}
    payload = player_payload([view], "aborts")["views"][0]
    assert payload["requests"]["end_word"] == ["aborted", "finished"]
    from batchscope.figures.metrics import latency_cdf, request_latency

    bars = request_latency({"run": view.records}, "e2e_steps").data[0]
    assert list(bars.x) == ["A (aborted)", "B"] and bars.y[0] is None and bars.y[1] is not None
    assert len(latency_cdf({"run": view.records}, "e2e_steps").data[0].x) == 1  # B alone, as the summary counts


def test_the_checklist_counts_the_members_the_narration_shows():
    """Finding: the checklist said "1 members still running" while B and A both ran."""
    view = view_of("seed-abcd-static")
    steps = raw(RECORDED / "seed-abcd-static.jsonl")[1]
    seen = 0
    for k, st in enumerate(steps):
        items = {i["limit"]: i["numbers"] for i in head_checklist(view, k)}
        if "static_batch_running" in items and items["static_batch_running"] != "the last batch has ended":
            n = len(st["running"])
            assert items["static_batch_running"] == f"{n} member{'s' if n != 1 else ''} still running", k
            seen += 1
    assert seen


@pytest.mark.parametrize("path", RECORDED_TRACES, ids=[p.stem for p in RECORDED_TRACES])
def test_the_batch_shrinks_only_where_a_batch_runs(path):
    """Finding: the "batch shrinks" beat stood on an empty last step (and would on idle steps)."""
    view = TraceView(trace.read(path))
    for k, beats in story_beats(view).items():
        if "drain" in beats:
            assert view.steps[k]["scheduled"], k


def long_ids(name: str) -> TraceView:
    """A shipped trace with each id replaced by a server-style 45-character id (``chatcmpl-`` + 36 hex)."""
    text = (RECORDED / f"{name}.jsonl").read_text()
    header = json.loads(text.splitlines()[0])
    for i, r in enumerate(header["requests"]):
        text = text.replace(f'"{r["request_id"]}"', f'"chatcmpl-{i:x}{"0123456789abcdef" * 2}abc{i:x}"')
    return TraceView([json.loads(x) for x in text.splitlines()])


@pytest.mark.parametrize("name", ["seed-abcd-continuous", "vllm-vs-sglang-sglang"])
def test_long_ids_are_shown_by_one_label_in_every_view(name):
    """Finding: long ids were shortened in some views and whole (45-50 characters) in others. Every name a figure
    or the narration shows is the view's label; the whole id stays on hover only."""
    view = long_ids(name)
    labels = {view.label(r) for r in view.request_ids}
    assert all(len(x) <= 12 for x in labels) and not labels & set(view.request_ids)
    for k in range(0, view.num_steps, 5):
        text = narrate(view, k) + " " + " ".join(str(v) for v in step_row(view, k).values())
        assert not any(r in text for r in view.request_ids), k
    fig = timeline(view)
    assert set(fig.layout.yaxis.categoryarray) == labels
    assert {y for t in fig.data for y in t.y} <= labels


def test_a_speculative_decode_without_drafts_is_narrated_with_its_tokens():
    """Finding: a server's speculative decode of 4 scheduled tokens, without draft ids, was narrated "decodes 1
    token"."""
    records = trace.read(RECORDED / "seed-abcd-continuous.jsonl")
    k, entry = next((k, s) for k, st in enumerate(records[1:-1]) for s in st["scheduled"] if s["kind"] == "decode")
    entry["num_tokens"] = 4
    text = narrate(TraceView(records), k)
    assert f"{entry['request_id']} decodes 4 tokens" in text and f"{entry['request_id']} decodes 1 token" not in text


def test_the_glossary_says_what_the_shipped_runs_measure_of_ttft():
    """Finding: the glossary said SGLang's prefill-first lets new prompts "start sooner" while every shipped scenario
    measured vLLM's TTFT lower. Mean TTFT of each shipped vLLM / SGLang pair, counted from the raw lines (first
    token's step + 1 - first step seen)."""
    from batchscope.glossary.sglang import SGLANG_TERMS

    def mean_ttft(path) -> float:
        seen, first = {}, {}
        for st in raw(path)[1]:
            for r in [s["request_id"] for s in st["scheduled"]] + st["waiting"]:
                seen.setdefault(r, st["step"])
            for s in st["sampled"]:
                first.setdefault(s["request_id"], st["step"] + 1)
        return sum(first[r] - seen[r] for r in first) / len(first)

    scenarios = sorted({p.stem.rsplit("-", 1)[0] for p in RECORDED_TRACES if p.stem.endswith("-sglang")})
    for sc in scenarios:
        assert mean_ttft(RECORDED / f"{sc}-continuous.jsonl") < mean_ttft(RECORDED / f"{sc}-sglang.jsonl"), sc
    text = next(t for t in SGLANG_TERMS if t.key == "prefill_first").text
    assert "sooner" not in text.replace("no sooner", "") and "vLLM's mean TTFT is the lower" in text


def test_the_static_batch_prefix_sentence_only_where_members_share_a_prefix():
    """Finding: `seed-abcd`'s static narration explained why a static batch's members never find each other's
    prefix, where nothing is shared. Said only where two members admitted together start with the same full block
    of prompt tokens (counted here from the raw header)."""
    for path in [p for p in RECORDED_TRACES if p.stem.endswith("-static")]:
        header, steps, _ = raw(path)
        bs, prompts = (
            header["config"]["block_size"],
            {r["request_id"]: r["prompt_token_ids"] for r in header["requests"]},
        )
        view = TraceView(trace.read(path))
        for st in steps:
            firsts = [tuple(prompts[r][:bs]) for r in st["admitted"] if len(prompts[r]) >= bs]
            shared = len(set(firsts)) < len(firsts)
            said = "static batch is formed before any member computes" in narrate(view, st["step"])
            assert said == (shared and bool(header["config"].get("enable_prefix_caching"))), (path.stem, st["step"])


@pytest.mark.parametrize("name", ["preemption-continuous", "vllm-vs-sglang-sglang"])
def test_the_gauges_stand_on_the_timelines_step_axis(name):
    """Finding: on the Trace page the gauges were drawn ~20 px off the request timeline's x axis (each figure's left
    margin grew with its own y labels). Both figures: one left and right margin, no automargin, one x range, so at
    one width a step is at one pixel in both."""
    from batchscope.figures.gauges import gauge_figure

    view = view_of(name)
    a, b = timeline(view, 0, view.num_steps).layout, gauge_figure(view, 0, view.num_steps).layout
    assert (a.margin.l, a.margin.r) == (b.margin.l, b.margin.r)
    assert a.yaxis.automargin is False and all(b[ax].automargin is False for ax in b if ax.startswith("yaxis"))
    ranges = {tuple(b[ax].range) for ax in b if ax.startswith("xaxis")}
    assert ranges == {tuple(a.xaxis.range)}
    assert tuple(b.xaxis.domain or (0, 1)) == tuple(a.xaxis.domain or (0, 1))


def test_one_slow_step_does_not_stand_for_a_batch_size():
    """Finding: the Metrics step-cost chart read 438 ms a token at batch 2 on `seed-abcd`'s static run, from its one
    decode step of two requests, which waited 876 ms (about 8 x the others): the README says such a step tilts
    nothing. From the raw lines: the decode-only steps' times by batch size."""
    from batchscope.figures.step_cost import step_cost_figure

    steps = raw(RECORDED / "seed-abcd-static.jsonl")[1]
    decodes = [(len(s["scheduled"]), s["t_end"] - s["t_start"]) for s in steps if s["scheduled"]]
    decodes = [
        (n, t)
        for (n, t), s in zip(decodes, [s for s in steps if s["scheduled"]])
        if all(x["kind"] == "decode" for x in s["scheduled"])
    ]
    ones = sorted(t for n, t in decodes if n == 1)
    (two,) = [t for n, t in decodes if n == 2]
    assert two > 3 * ones[len(ones) // 2]  # the one step of two decodes is far off the rest
    fig = step_cost_figure({"static": view_of("seed-abcd-static")})
    bars = [t for t in fig.data if t.type == "bar"]
    assert [list(b.x) for b in bars] == [["1"]]


def test_the_docs_date_the_shipped_traces_as_their_badges_do():
    """Finding: the provenance badges read 2026-12-04 where the README said the SGLang traces were recorded on
    2026-12-02. The dates of docs/engines-compared.md (the README's until issue 36) against each shipped trace's
    header (``created``, what the badge prints)."""
    from conftest import ROOT

    text = " ".join((ROOT / "docs" / "engines-compared.md").read_text().split())
    said = re.search(
        r"the SGLang traces were recorded on (\S+) and the other two of `vllm-vs-sglang` on (\S+), .*?the others on "
        r"(\S+) on a quieter machine",
        text,
    )
    assert said, "the docs' sentence on when the shipped traces were recorded"
    sglang, pair, others = (d.rstrip(",") for d in said.groups())
    four = re.search(r"the `four-engines` traces were recorded on (\S+?)[,.;]", text)
    assert four, "the docs' sentence on when the four-engines traces were recorded"
    spec = re.search(r"the `spec-decode` traces on (\S+?)[,.;)]", text)
    assert spec, "the docs' sentence on when the spec-decode traces were recorded"
    for path in RECORDED_TRACES:
        created = raw(path)[0]["created"][:10]
        want = sglang if path.stem.endswith("-sglang") else pair if path.stem.startswith("vllm-vs-sglang") else others
        want = four.group(1) if path.stem.startswith("four-engines") else want
        want = spec.group(1) if path.stem.startswith("spec-decode") else want
        assert created == want, path.stem


def test_the_progress_line_counts_aborts_apart():
    """Finding: the progress line counted a cancelled request among the finished ones."""
    from batchscope.cli.progress import Ends

    ends = Ends()
    for st in aborted_run().recorded_steps:
        ends.add(st)
    assert (ends.finished, ends.aborted, ends.done) == (1, 1, 2)
    assert ends.note(2) == "1/2 requests finished, 1 aborted"


def test_a_cut_short_trace_leaves_its_requests_in_flight_cut_short():
    """A request still in flight when a cut-short trace stops ends "cut short", not finished (the raw lines: no
    summary, and the request in no step's finished list)."""
    from conftest import ROOT

    from batchscope.facts import facts

    path = ROOT / "tests" / "cases" / "e11-crash.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    ended = {f["request_id"]: f["reason"] for x in lines if x["type"] == "step" for f in x["finished"]}
    ids = [r["request_id"] for x in lines for r in x.get("requests" if x["type"] == "header" else "arrived", [])]
    assert lines[-1]["type"] == "step" and set(ids) - set(ended)  # no summary; someone still in flight
    f = facts(TraceView(trace.read(path)))
    want = {r: "cut short" if r not in ended else "aborted" if ended[r] == "abort" else "finished" for r in ids}
    assert {r: f.end_word(r) for r in ids} == want


def test_a_requests_facts_carry_its_drafts_as_recorded():
    """The facts of a speculative decode: drafts verified and accepted as the step's record gives them."""
    from batchscope.facts import facts

    records = trace.read(RECORDED / "seed-abcd-continuous.jsonl")
    k, entry = next((k, s) for k, st in enumerate(records[1:-1]) for s in st["scheduled"] if s["kind"] == "decode")
    entry.update(num_tokens=4, draft_token_ids=[5, 6, 7], num_accepted_tokens=2)
    got = facts(TraceView(records)).requests(k)[entry["request_id"]]
    assert (got.work, got.num_tokens, got.num_drafts, got.num_accepted, got.drafts_inferred) == (
        "speculative",
        4,
        3,
        2,
        False,
    )


def test_a_finish_whose_record_frees_its_table_releases_its_blocks():
    """Finding (an uploaded server trace): "releasing 0 KV blocks" where the record frees the finished request's
    table and hands its block on. A vLLM tracer trace edited so: C finishes at step 2 in the record that frees its
    table and gives one of its blocks to A; C held the blocks the raw lines allocated it before."""
    from conftest import ROOT

    lines = [json.loads(x) for x in (ROOT / "tests" / "data" / "vllm-seed-abcd.jsonl").read_text().splitlines()]
    steps = [x for x in lines if x["type"] == "step"]
    assert [f["request_id"] for f in steps[2]["finished"]] == ["C"] and steps[3]["kv"]["freed"] == ["C"]
    held: list[int] = []
    for st in steps[:2]:
        held += st["kv"]["allocated"].get("C", [])
    steps[2]["kv"]["freed"], steps[3]["kv"]["freed"] = ["C"], []
    steps[2]["kv"]["allocated"]["A"] = [*steps[2]["kv"]["allocated"]["A"], held[0]]
    steps[2]["kv"]["num_used_blocks"] += 1 - len(held)
    view = TraceView(lines)
    n = len(held)
    assert f"C hit max_tokens and finished, releasing {n} KV block{'s' if n != 1 else ''}" in narrate(view, 2)
