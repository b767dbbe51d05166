"""``python -m batchscope html``: one self-contained file from one or two traces; two workloads and bad values
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
