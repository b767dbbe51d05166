"""Key moments and tours (issue 20, part 3): each shipped scenario's tour resolves against its recorded traces, at the
steps the scenario's own story gives (read from the raw records here, not from the moments module); a teacher's tour
file is checked field by field; ``html --tour`` puts it in the exported file.
"""

from __future__ import annotations

import json

import pytest
from clikit import assert_clear_error, cli
from conftest import RECORDED, recorded_pair

from batchscope.explain.moments import check_tour, tour_for, tour_of
from batchscope.inputs.workload import list_scenarios, scenario_tour
from batchscope.player.export import player_html
from batchscope.player.playback import player_payload
from batchscope.steplog import trace
from batchscope.steplog.reasons import policy_heading, run_name
from batchscope.steplog.view import TraceView


def raw_steps(name: str) -> list[dict]:
    lines = (RECORDED / f"{name}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if '"type":"step"' in line.replace(" ", "")]


@pytest.mark.parametrize("scenario", sorted(list_scenarios()))
def test_every_entry_of_a_shipped_tour_finds_its_moment_in_the_recorded_runs(scenario):
    """Each entry names a run (``policy``: a run's name, as its file ``SCENARIO-RUN.jsonl``) and finds its moment
    in that run's trace; with the pair the app compares, the notes say whose they are, one stop per step."""
    spec = scenario_tour(scenario)
    assert spec, f"{scenario} ships no tour"
    for entry in spec:
        view = TraceView(trace.read(RECORDED / f"{scenario}-{entry['policy']}.jsonl"))
        assert tour_of([view], [entry]), (scenario, entry)
    tour = tour_for(recorded_pair(scenario), spec)
    assert [m["step"] for m in tour] == sorted({m["step"] for m in tour})
    names = [run_name(v.header) for v in recorded_pair(scenario)]
    heads = tuple(f"{policy_heading(name, names)}: " for name in names)
    assert all(m["note"].startswith(heads) for m in tour)


def test_the_seed_tour_is_the_seed_story():
    """seed-abcd (scenario text): B (5 tokens) and C (3) leave 32 - 8 = 24 of the budget for A's 71-token prompt at
    step 0; C stops after 3 tokens, so it finishes at step 2 and D takes its row at step 3 (continuous); static keeps
    C's row as padding from step 3; the last steps are the traces' last."""
    static, cont = raw_steps("seed-abcd-static"), raw_steps("seed-abcd-continuous")
    d_row = next(s["slot"] for s in cont[3]["scheduled"] if s["request_id"] == "D")
    c_row = next(s["slot"] for s in cont[2]["scheduled"] if s["request_id"] == "C")
    assert (
        d_row == c_row and "D" in cont[3]["admitted"] and {"request_id": "C", "reason": "length"} in cont[2]["finished"]
    )
    tour = {m["step"]: m["note"] for m in tour_for(recorded_pair("seed-abcd"), scenario_tour("seed-abcd"))}
    assert "its first chunk computes 24" in tour[0] and "(71 tokens)" in tour[0]
    assert tour[2].startswith("continuous: C finishes; at the very next step D takes its batch row")
    assert tour[3].startswith("static: C is done, yet its row stays in the batch as padding")
    assert f"at step {len(cont) - 1}" in tour[len(cont) - 1] and f"at step {len(static) - 1}" in tour[len(static) - 1]


def test_the_preemption_tour_is_at_the_preemption_and_the_recompute():
    cont = raw_steps("preemption-continuous")
    first = next(k for k, st in enumerate(cont) if st["preempted"])
    victim = cont[first]["preempted"][0]
    back = next(k for k, st in enumerate(cont) if k > first and victim in st["admitted"])
    tour = {m["step"]: m["note"] for m in tour_for(recorded_pair("preemption"), scenario_tour("preemption"))}
    assert tour[first].startswith(f"continuous: {victim} is preempted")
    assert tour[back].startswith(f"continuous: {victim} is admitted again and computes")


def test_the_default_tour_has_a_moment_of_each_kind_the_run_shows():
    view = recorded_pair("priority")[1]
    payload = player_payload([view], "t")
    steps = [m["step"] for m in payload["tour"]]
    first_preemption = next(k for k, st in enumerate(view.steps) if st["preempted"])
    assert first_preemption in steps and view.num_steps - 1 in steps
    assert player_payload([view], "t", span=(0, 5))["tour"] == [m for m in payload["tour"] if m["step"] <= 5]


@pytest.mark.parametrize(
    "items,message",
    [
        ({"step": 1}, "a tour is a JSON list"),
        ([{"step": 40, "note": "x"}], "entry 0, field 'step': must be an integer in [0, 21], got 40"),
        ([{"step": -1, "note": "x"}], "entry 0, field 'step': must be an integer in [0, 21], got -1"),
        ([{"step": True, "note": "x"}], "field 'step': must be an integer in [0, 21], got True"),
        ([{"step": 1.0, "note": "x"}], "field 'step': must be an integer in [0, 21], got 1.0"),
        ([{"step": 1, "note": ""}], "entry 0, field 'note': must be a text of 1 to 300 characters"),
        ([{"step": 1, "note": "n" * 301}], "field 'note': must be a text of 1 to 300 characters"),
        ([{"step": 1, "note": 3}], "field 'note'"),
        ([{"step": 1, "note": "x"}] * 51, "at most 50"),
    ],
)
def test_a_teachers_tour_is_checked_field_by_field(items, message):
    with pytest.raises(ValueError) as e:
        check_tour(items, 22, "t.json")
    assert message in str(e.value) and str(e.value).startswith("t.json")


def test_html_takes_a_tour_file_and_refuses_a_bad_one_in_one_line(tmp_path):
    good, bad = tmp_path / "tour.json", tmp_path / "bad.json"
    good.write_text(json.dumps([{"step": 7, "note": "Look at the budget bar"}, {"step": 2, "note": "C leaves"}]))
    bad.write_text(json.dumps([{"step": 99, "note": "x"}]))
    trace = str(RECORDED / "seed-abcd-continuous.jsonl")
    out = tmp_path / "p.html"
    code, _, err = cli("html", trace, "--out", str(out), "--tour", str(good))
    assert code == 0, err
    text = out.read_text()
    payload = json.loads(text[text.index('id="bs-payload">') + 16 : text.index("</script>", text.index("bs-payload"))])
    assert payload["tour"] == [{"step": 2, "note": "C leaves"}, {"step": 7, "note": "Look at the budget bar"}]
    code, _, err = cli("html", trace, "--out", str(tmp_path / "q.html"), "--tour", str(bad))
    assert_clear_error(code, err, f"--tour {bad}: entry 0, field 'step': must be an integer in [0, 13], got 99")
    assert not (tmp_path / "q.html").exists()


def test_the_export_carries_the_scenario_tour_and_the_player_reads_it():
    views = recorded_pair("seed-abcd")
    html = player_html(views, "t", tour=tour_for(views, scenario_tour("seed-abcd")))
    assert "bs-moment" in html and "BS.readTour" in html and "C finishes; at the very next step" in html
