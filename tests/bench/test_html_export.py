"""``python -m batchscope html``: one self-contained file from one to four traces; two workloads and bad values
refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import RECORDED, ROOT

from batchscope.cli.main import main

# runs the command line or the tools in child processes: `make test`, not the fast tier
pytestmark = pytest.mark.cli


def test_html_writes_one_self_contained_player_for_a_pair(tmp_path, capsys):
    out = tmp_path / "pair.html"
    pair = [str(RECORDED / "seed-abcd-static.jsonl"), str(RECORDED / "seed-abcd-continuous.jsonl")]
    assert main(["html", *pair, "--out", str(out), "--step", "3"]) == 0
    html = out.read_text(encoding="utf-8")
    assert 'id="bs-payload"' in html and '"initial_step": 3' in html.replace('"initial_step":3', '"initial_step": 3')
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="https?:', html)  # nothing fetched from the network
    assert main(["html", *pair, "--out", str(out)]) == 2  # an existing file is kept without --force
    assert "exists" in capsys.readouterr().err


def test_html_refuses_two_workloads_and_out_of_range_values(tmp_path, capsys):
    out = str(tmp_path / "x.html")
    two = [str(RECORDED / "seed-abcd-static.jsonl"), str(RECORDED / "sixteen-continuous.jsonl")]
    assert main(["html", *two, "--out", out]) == 2
    assert "not of one workload" in capsys.readouterr().err
    one = str(RECORDED / "seed-abcd-static.jsonl")
    assert main(["html", one, "--out", out, "--speed", "500"]) == 2
    assert "--speed=500" in capsys.readouterr().err
    assert main(["html", one, "--out", out, "--step", "9999"]) == 2
    assert not Path(out).exists()


def test_html_of_a_busy_servers_long_trace_holds_the_span_of_its_step(tmp_path, capsys):
    """The sixteen pair (1222 steps, 4 slots) is written whole; a 1500-step trace of a 64-slot server, at --step
    1100, as steps 1000-1499, and the command says so."""
    import json
    import subprocess
    import sys

    def payload(path: Path) -> dict:
        body = re.search(r'id="bs-payload">(.*?)</script>', path.read_text(encoding="utf-8"), re.DOTALL).group(1)
        return json.loads(body)

    pair = [str(RECORDED / "sixteen-static.jsonl"), str(RECORDED / "sixteen-continuous.jsonl")]
    assert main(["html", *pair, "--out", str(tmp_path / "pair.html"), "--step", "1100"]) == 0
    assert payload(tmp_path / "pair.html")["span"] == [0, 1221]
    server = tmp_path / "server.jsonl"
    args = ["--out", str(server), "--requests", "200", "--steps", "1500", "--max-num-seqs", "64"]
    subprocess.run([sys.executable, str(ROOT / "scripts" / "synth_vllm_trace.py"), *args], check=True)
    capsys.readouterr()
    assert main(["html", str(server), "--out", str(tmp_path / "server.html"), "--step", "1100"]) == 0
    p = payload(tmp_path / "server.html")
    assert p["span"] == [1000, 1499] and p["initial_step"] == 1100
    assert "steps 1000-1499" in capsys.readouterr().err


def test_html_plays_three_or_four_traces_of_one_workload_and_refuses_five(tmp_path, capsys):
    """Sides A, B, C (D) in the order given, on the longest run's clock, with each run's counters; a trace of another
    workload is refused naming its side."""
    from batchscope.player.export import read_payload

    runs = [str(RECORDED / f"seed-abcd-{p}.jsonl") for p in ("continuous", "static", "sglang")]
    out = tmp_path / "three.html"
    assert main(["html", *runs, "--out", str(out)]) == 0
    p = read_payload(out.read_text(encoding="utf-8"))
    assert [v["label"] for v in p["views"]] == ["A · vLLM (continuous)", "B · static", "C · SGLang"]
    static_steps = len((RECORDED / "seed-abcd-static.jsonl").read_text().splitlines()) - 2  # no idle step here
    assert p["num_steps"] == max(v["num_steps"] for v in p["views"]) == static_steps  # the longest run: static
    assert p["counters"][0]["label"] == "steps each run needs (A · B · C)"
    assert main(["html", *runs, runs[0], "--out", str(tmp_path / "four.html")]) == 0
    assert main(["html", *runs, *runs[:2], "--out", str(tmp_path / "five.html")]) == 2
    assert "1 to 4 traces, got 5" in capsys.readouterr().err
    other = [*runs[:2], str(RECORDED / "sixteen-static.jsonl")]
    assert main(["html", *other, "--out", str(tmp_path / "x.html")]) == 2
    assert "the 3 traces are not of one workload: different requests: only in A:" in capsys.readouterr().err
    assert not (tmp_path / "five.html").exists() and not (tmp_path / "x.html").exists()
