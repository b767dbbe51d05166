"""The app's pages under Streamlit's AppTest: controls move the one step, figures follow, playback survives seeks
(shared case c14), the lockstep page hands both traces to the browser player, knobs validate before running.
Figures' data is checked. (The browser player itself is tested in a real browser: test_browser_player.py.)"""

from __future__ import annotations

import re
import time

import pytest
from appkit import click, frame_figures, page, player_payload, wait_for_live_run
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from batchscope.app.common import TRACE_DIR
from batchscope.steplog import trace

pytestmark = pytest.mark.app


def test_whole_app_opens_on_the_walkthrough():
    at = AppTest.from_file(str(ROOT / "batchscope" / "app" / "main.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert at.title[0].value.startswith("Walkthrough")


def test_walkthrough_plays_in_the_browser_player_from_the_urls_step():
    """The Walkthrough embeds the browser player (its controls, ticks and seeks: tests/ui/test_browser_player.py,
    case c14) for the seed-abcd trace, starting at ``?step=``."""
    at = page("page_walkthrough", step="2")
    p = player_payload(at)
    (view,) = p["views"]
    assert (p["initial_step"], view["policy"], view["num_steps"]) == (2, "continuous", 14)
    assert at.get("download_button")[0].label.startswith("Download this player")


def test_walkthrough_narration_tells_the_seed_story():
    p = player_payload(page("page_walkthrough"))
    steps, T = p["views"][0]["steps"], p["T"]
    text = {k: T[steps["narration"][k]] for k in (2, 3, 4)}
    assert "B and C decode 1 token each" in text[2] and "A prefills a 17-token chunk" in text[2]
    assert "C hit max_tokens and finished" in text[2]
    assert any("very next step a waiting request takes its slot" in T[i] for i in T[steps["beats"][2]])
    assert "D is admitted and prefills 7 tokens" in text[3]
    assert text[4].startswith("Step 4: A and D decode 1 token each")
    assert T[steps["checklist"][1]].startswith("Why D (head of the queue) waits")  # the head-of-queue checklist


def test_lockstep_page_plays_both_traces_in_the_browser_player():
    at = page("page_lockstep", scenario="seed-abcd", step="20")
    p = player_payload(at)
    assert [v["policy"] for v in p["views"]] == ["static", "continuous"]
    assert (p["initial_step"], p["num_steps"], [v["num_steps"] for v in p["views"]]) == (20, 22, [22, 14])
    assert p["views"][1]["finished_note"] == "continuous finished at step 13; holding its final state."
    counters = {c["label"]: p["T"][c["values"][20]] for c in p["counters"]}
    assert counters["static steps"] == "22" and counters["continuous steps"] == "14"
    assert counters["steps saved by continuous"] == "8 (36% fewer)"
    assert at.get("download_button")[0].label.startswith("Download this player")


def test_lockstep_url_carries_scenario_step_and_speed():
    at = page("page_lockstep", scenario="sixteen", step="120", speed="30")
    p = player_payload(at)
    assert (p["initial_step"], p["speed"], p["present"]) == (120, 30, False)
    assert at.query_params["scenario"] == ["sixteen"] or at.query_params["scenario"] == "sixteen"
    assert player_payload(page("page_lockstep", scenario="sixteen", present="1"))["present"] is True


def test_trace_page_shows_header_steps_and_export():
    at = page("page_trace")
    assert at.selectbox(key="trace:choice").value == "recorded: seed-abcd / continuous"
    assert not at.dataframe  # folded: not built
    at.session_state["trace:all-steps"] = True
    at.run()
    (table,) = [d.value for d in at.dataframe]
    # the seed's story (README): a 32-token budget; B (5 prompt tokens) and C (3) prefill whole at step 0, A gets the
    # 24 tokens left as its first chunk and D waits; at step 1 B and C decode and A's next chunk is 30 tokens
    assert len(table) == 14 and list(table["step"]) == list(range(14))
    first, second = table.iloc[0], table.iloc[1]
    assert (first["scheduled"], first["admitted"], first["waiting"], first["batched tokens"]) == (
        "B:p5, C:p3, A:p24",
        "B, C, A",
        1,
        32,
    )
    assert (second["scheduled"], second["admitted"], second["batched tokens"]) == ("B:d1, C:d1, A:p30", "", 32)
    assert not at.exception


def test_trace_page_opens_a_gpu_trace_by_its_link():
    """?device=gpu opens the trace recorded on the H200: its badge names the GPU and its table is the file's."""
    at = page("page_trace", scenario="seed-abcd", policy="static", device="gpu")
    assert at.selectbox(key="trace:choice").value == "recorded on a GPU: seed-abcd / static"
    at.session_state["trace:all-steps"] = True
    at.run()
    records = trace.read(TRACE_DIR / "gpu" / "seed-abcd-static.jsonl")
    (table,) = [d.value for d in at.dataframe]
    assert list(table["t_end (s)"]) == [round(r["t_end"], 4) for r in records if r["type"] == "step"]
    assert any("cuda (NVIDIA H200) · float32" in c.value for c in at.caption)  # the provenance badge
    assert at.query_params["device"] in ("gpu", ["gpu"])


def test_trace_page_builds_the_header_and_a_raw_record_when_opened():
    """Folded, the Header and "Raw record of a step" boxes hold no JSON viewer (each cost the browser ~0.1 s on
    every visit); opened, they show the trace file's own header line and the step's own record."""
    import json

    at = page("page_trace")
    assert not at.json
    at.session_state["trace:header"] = True
    at.run()
    first_line = (TRACE_DIR / "seed-abcd-continuous.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (header,) = at.json
    assert json.loads(header.value) == json.loads(first_line)
    at.session_state["trace:raw-open"] = True
    at.query_params["step"] = "3"
    at.run()
    raw = json.loads(at.json[1].value)
    assert raw == json.loads((TRACE_DIR / "seed-abcd-continuous.jsonl").read_text(encoding="utf-8").splitlines()[4])
    assert not at.exception


@pytest.mark.real_model
def test_playground_rejects_a_pool_too_small_next_to_the_knob_and_keeps_values():
    at = page("page_playground")
    at.number_input(key="pg:blocks").set_value(2).run()
    assert not at.exception
    assert any("num_kv_blocks=2" in e.value for e in at.error)
    assert at.button(key="pg:run").disabled
    assert at.number_input(key="pg:blocks").value == 2  # the user's value is kept


@pytest.mark.real_model
def test_playground_live_run_draws_both_policies():
    at = page("page_playground")
    at.slider(key="pg:n").set_value(3).run()
    at.slider(key="pg:maxtok").set_value(6).run()
    click(at, "pg:run")
    wait_for_live_run(at)
    p = player_payload(at)
    assert [v["policy"] for v in p["views"]] == ["static", "continuous"] and p["initial_step"] == 0


@pytest.mark.real_model
def test_playground_cancel_keeps_the_partial_trace_and_the_trace_page_says_partial():
    at = page("page_playground")
    at.slider(key="pg:n").set_value(8).run()
    at.selectbox(key="pg:lengths").set_value("forced, equal").run()
    at.slider(key="pg:maxtok").set_value(300).run()  # minutes of work: it must be cancelled, not finished
    assert not at.button(key="pg:run").disabled, [e.value for e in at.error]
    click(at, "pg:run")
    job = at.session_state["playground:live-job"]
    deadline = time.monotonic() + 120
    step_of_run_1 = re.compile(r"run 1 of \d+ .*step (\d+),")  # cancel during the first (static) run
    while not (job.status == "running" and int((step_of_run_1.search(job.text) or [0, 0])[1]) >= 3):
        assert time.monotonic() < deadline and not job.finished, (job.status, job.text, job.error)
        time.sleep(0.2)
    at.run()
    at.button(key="live:cancel").click().run()
    assert job.cancelled.is_set()
    job.join(timeout=60)
    assert job.status == "cancelled"
    wait_for_live_run(at)
    assert any("Cancelled" in w.value for w in at.warning)
    (records,) = at.session_state["playground:live-runs"].values()  # static ran first; continuous never started
    assert records[-1]["partial"] is True and 4 <= len(records) - 2 < 100
    assert any(r["finish_reason"] is None for r in records[-1]["requests"])
    trace.validate_records(records)
    tr = AppTest.from_string("from batchscope.app import page_trace\npage_trace.page()", default_timeout=120)
    tr.session_state["playground:live-runs"] = at.session_state["playground:live-runs"]
    tr.run()
    tr.selectbox(key="trace:choice").set_value("live run: static").run()
    assert not tr.exception, tr.exception
    assert any("partial" in c.value for c in tr.caption)


def test_metrics_page_shows_both_policies_from_the_traces():
    from batchscope.steplog.metrics import summarize

    at = page("page_metrics", scenario="seed-abcd")
    values = [(m.label, m.value) for m in at.metric]
    runs = {p: trace.read(TRACE_DIR / f"seed-abcd-{p}.jsonl") for p in ("static", "continuous")}
    pads = [v for label, v in values if label == "padding"]
    # the unit's hyphen does not break (U+2011): "3123 slot-" over "steps" in presenter mode's cards
    assert pads == [f"{summarize(runs[p])['padding_slot_steps']} slot\u2011steps" for p in ("static", "continuous")]
    at.selectbox(key="metrics:metric").set_value("e2e_steps").run()
    charts = frame_figures(at)  # the charts are drawn in frames of their own (batchscope.figures.figure_frame)
    assert [len(f) for f in charts] == [3, 2, 2]  # per request, CDF, KV use; step cost here and on a GPU; sweep
    gpu = {p: trace.read(TRACE_DIR / "gpu" / f"seed-abcd-{p}.jsonl") for p in ("static", "continuous")}
    for fig, recorded in zip(charts[1], (runs, gpu)):  # each chart's dots are its own device's step times
        dots = {d["name"]: d["y"] for d in fig["data"] if d.get("mode") == "markers"}
        for policy, records in recorded.items():
            want = sorted(1e3 * (r["t_end"] - r["t_start"]) for r in records if r["type"] == "step" and r["scheduled"])
            got = sorted(dots[f"{policy}: decode only"] + dots[f"{policy}: with a prompt chunk"])
            assert got == pytest.approx(want)
    assert charts[1][1]["layout"]["title"]["text"] == "The same steps on an NVIDIA H200"
    text = " ".join(m.value for m in at.markdown)
    assert "the same 14 steps with token-identical outputs" in text  # seed-abcd continuous: 14 steps on both
    bars = charts[0][0]["data"]
    assert [b["name"] for b in bars] == ["static", "continuous"]
    for bar, policy in zip(bars, ("static", "continuous")):  # E2E on the step clock, counted from the trace itself
        header, steps = runs[policy][0], [r for r in runs[policy] if r["type"] == "step"]
        last = {s["request_id"]: r["step"] for r in steps for s in r["sampled"]}
        want = {q["request_id"]: last[q["request_id"]] + 1 - q["arrival_step"] for q in header["requests"]}
        assert dict(zip(bar["x"], bar["y"])) == want


def test_compare_page_takes_any_two_runs_of_one_workload_and_refuses_two_workloads():
    at = page("page_lockstep", a="seed-abcd / continuous", b="seed-abcd / continuous")
    assert not at.error
    text = " ".join(m.value for m in at.markdown)
    assert "What differs (A → B):" in text  # the same run twice: nothing differs but the run itself
    assert len(player_payload(at)["views"]) == 2
    at = page("page_lockstep", a="seed-abcd / static", b="sixteen / continuous")
    assert at.error and "not of one workload" in at.error[0].value
    assert not at.get("iframe")  # nothing is drawn for two workloads


def test_one_pool_has_the_same_block_grid_on_every_page():
    """seed-abcd's continuous pool on the Walkthrough, the Compare runs page and the Trace page: the player places
    every block at the same grid cell (16 to a row, block b at column b % 16, row b // 16), as the Python map does."""
    from batchscope.figures.kv import block_map
    from batchscope.steplog.view import TraceView

    view = TraceView(trace.read(TRACE_DIR / "seed-abcd-continuous.jsonl"))
    n = view.steps[0]["kv"]["num_blocks"]
    want = ([b % 16 for b in range(n)], [b // 16 for b in range(n)])
    fig = block_map(view, 0)
    assert (list(fig.data[0].x), list(fig.data[0].y)) == want
    pages = {
        "walkthrough": page("page_walkthrough"),
        "compare": page("page_lockstep", a="seed-abcd / static", b="seed-abcd / continuous"),
        "trace": page("page_trace", scenario="seed-abcd", policy="continuous"),
    }
    for name, at in pages.items():
        (side,) = [v for v in player_payload(at)["views"] if v["policy"] == "continuous"]
        assert (side["blocks"]["x"], side["blocks"]["y"]) == want, name
        assert side["blocks"]["layout"]["xaxis"]["range"] == [-0.6, 15.6], name  # 16 columns


def test_trace_page_plays_a_long_trace_a_span_at_a_time(tmp_path):
    """A 1500-step trace of a 64-slot server (synthetic, vLLM tracer format, a 600-block pool drawn grouped): the
    Trace page packs steps 0-999 for the player, or the span holding the URL's ?step=, and starts at that step."""
    import subprocess
    import sys

    from batchscope.tools.app_server import ROOT

    out = tmp_path / "long.jsonl"
    args = ["--out", str(out), "--requests", "200", "--steps", "1500", "--max-num-seqs", "64", "--num-blocks", "600"]
    subprocess.run([sys.executable, str(ROOT / "scripts" / "synth_vllm_trace.py"), *args], check=True)
    records = trace.read(out)
    for step, span in ((None, [0, 999]), ("1200", [1000, 1499])):
        at = AppTest.from_string("from batchscope.app import page_trace\npage_trace.page()", default_timeout=120)
        at.session_state["playground:live-runs"] = {"server": records}
        at.query_params["live"] = "server"
        if step:
            at.query_params["step"] = step
        at.run()
        assert not at.exception, at.exception
        (picker,) = [s for s in at.selectbox if (s.key or "").startswith("trace:span")]
        assert list(picker.value) == span
        p = player_payload(at)
        assert p["span"] == span and p["initial_step"] == int(step or 0) and p["num_steps"] == 1500
        assert p["views"][0]["blocks"]["grouped"]


def test_compare_page_puts_run_a_on_the_left_whichever_batching_it_is():
    at = page("page_lockstep", a="seed-abcd / continuous", b="seed-abcd / static")
    p = player_payload(at)
    assert [v["policy"] for v in p["views"]] == ["continuous", "static"]  # A left, B right, as picked
    counters = {c["label"]: p["T"][c["values"][0]] for c in p["counters"]}  # still named by batching mode
    assert (counters["static steps"], counters["continuous steps"]) == ("22", "14")
    assert "Run A plays on the left, run B on the right" in " ".join(m.value for m in at.markdown)
    default = player_payload(page("page_lockstep", scenario="seed-abcd"))
    assert [v["policy"] for v in default["views"]] == ["static", "continuous"]


def test_upload_limit_is_one_figure_for_the_widget_the_label_and_the_server():
    """The widget's "Limit N MB per file" (its max_upload_size), the label's "at most N MB" and the server's
    server.maxUploadSize in .streamlit/config.toml all say batchscope.steplog.trace.MAX_TRACE_BYTES."""
    import tomllib

    from batchscope.tools.app_server import ROOT

    mb = trace.MAX_TRACE_BYTES // 2**20
    assert mb * 2**20 == trace.MAX_TRACE_BYTES  # Streamlit counts MB as 2**20 bytes
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == mb
    at = page("page_trace")
    at.selectbox(key="trace:choice").set_value("upload a file…").run()
    (uploader,) = at.get("file_uploader")
    assert uploader.proto.max_upload_size_mb == mb and f"at most {mb} MB" in uploader.proto.label


def test_metrics_intro_names_the_runs_of_an_a_vs_b_pair():
    """Two continuous runs of one workload (the Playground's A vs B) are not "static and continuous": the intro
    names run A and run B and what differs."""
    import copy

    a = trace.read(TRACE_DIR / "seed-abcd-continuous.jsonl")
    b = copy.deepcopy(a)
    b[0]["config"]["max_num_seqs"] = 2
    at = AppTest.from_string("from batchscope.app import page_metrics\npage_metrics.page()", default_timeout=120)
    at.session_state["playground:live-runs"] = {"run A": a, "run B": b}
    at.query_params["scenario"] = "last playground run"
    at.run()
    assert not at.exception, at.exception
    intro = at.markdown[0].value
    assert "static and continuous" not in intro and "both" not in intro
    assert "the same requests in run A and run B of the Playground (what differs: max_num_seqs: 3 → 2)" in intro
    assert [h.value for h in at.subheader][:2] == ["Run A", "Run B"]
    recorded = page("page_metrics", scenario="seed-abcd").markdown[0].value
    assert "the same requests under static and continuous batching" in recorded


@pytest.mark.real_model
def test_playground_cancels_one_request_and_the_run_goes_on_without_it():
    """During a live run the page offers the requests still unfinished; "Cancel this request" aborts the one picked
    before the next step (its trace lists the abort), the others finish, and the run is not cached as the
    settings' result (a rerun with the same settings runs again)."""
    from batchscope.app.playground_run import run_cache

    at = page("page_playground")
    at.slider(key="pg:n").set_value(3).run()
    at.selectbox(key="pg:lengths").set_value("forced, equal").run()
    at.slider(key="pg:maxtok").set_value(40).run()
    click(at, "pg:run")
    job = at.session_state["playground:live-job"]
    deadline = time.monotonic() + 120
    while not (job.status == "running" and job.engine is not None and len(job.unfinished) == 3):
        assert time.monotonic() < deadline and not job.finished, (job.status, job.text, job.error)
        time.sleep(0.1)
    at.run()
    # a button has no value to keep: none drawn now may be among the knobs kept for a later visit (restoring one
    # makes Streamlit refuse to draw it: "read-only and cannot be assigned through session state")
    from batchscope.app.page_playground import BUTTONS, KNOBS_PREFIX
    from batchscope.app.state import KNOBS_KEY

    buttons = {b.key for b in at.button}
    assert "live:cancel-one" in buttons
    assert {k for k in buttons if k.startswith(KNOBS_PREFIX)} <= set(BUTTONS), buttons
    assert not buttons & set(at.session_state[KNOBS_KEY]), buttons & set(at.session_state[KNOBS_KEY])
    victim = job.unfinished[-1]
    at.selectbox(key="live:cancel-one:pick").set_value(victim).run()
    at.button(key="live:cancel-one").click().run()
    assert job.cancelled_requests == [victim]
    job.join(timeout=120)
    wait_for_live_run(at)
    first = next(iter(at.session_state["playground:live-runs"].values()))
    reasons = {r["request_id"]: r["finish_reason"] for r in first[-1]["requests"]}
    assert reasons[victim] == "abort" and sorted(set(reasons.values())) == ["abort", "length"]
    assert job.settings_key not in run_cache()


def test_the_shared_recorded_traces_stay_as_their_files_after_every_page():
    """The shipped traces are one object per server shared by every session (``batchscope.app.common.recorded_records``,
    not a copy per visit): no page may change them. Every page runs on them, then each is compared with its file."""
    from batchscope.app.common import recorded_policies, recorded_records

    page("page_walkthrough")
    page("page_lockstep", scenario="sixteen")
    page("page_lockstep", scenario="preemption", pair="schedulers")
    page("page_trace", scenario="preemption", policy="static")
    page("page_metrics", scenario="sixteen")
    page("page_glossary")
    page("page_quiz")
    for path in sorted(TRACE_DIR.glob("*.jsonl")):
        scenario, policy = path.stem.rsplit("-", 1)
        assert policy in recorded_policies(scenario)
        assert recorded_records(scenario, policy) == trace.read(path), path.name
