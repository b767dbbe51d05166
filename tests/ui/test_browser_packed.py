"""The app's frames carry the trace packed (gzip, base64: ``batchscope.player.export.render(packed=...)``) and only the
visit's own fields in plain JSON; the player inflates it in the browser (``BS.readPayload``). Checked against the
payload Python built, in a real browser, from a file with no network."""

from __future__ import annotations

import json

import pytest
from test_browser_player import open_file, recorded_pair

from batchscope.compare.lockstep import lockstep_counters
from batchscope.player.export import packed_payload, payload_json, render
from batchscope.player.playback import player_payload

pytestmark = pytest.mark.app


def test_a_packed_page_plays_the_payload_python_built(browser, tmp_path):
    views = recorded_pair("sixteen")
    payload = player_payload(views, "sixteen", window=8, counters=lockstep_counters(*views))
    visit = {"title": "sixteen, packed", "initial_step": 37, "speed": 12, "present": False}
    packed = packed_payload(payload)
    assert len(packed) < len(payload_json(payload)) / 4  # the point of packing: a fraction of the bytes to send
    html = render(visit, packed=packed)
    path = tmp_path / "packed.html"
    path.write_text(html, encoding="utf-8")
    page = open_file(browser, path)
    assert page.outside == []
    got = page.evaluate(
        "() => { const p = bsPlayer.P.p; return {T: p.T, n: p.num_steps, events: p.events, speed: bsPlayer.state.speed,"
        " title: document.getElementById('bs-title').textContent, step: +document.getElementById('bs-step')"
        ".dataset.bsStep, sides: p.views.length}; }"
    )
    want = json.loads(json.dumps(payload))
    assert got["T"] == want["T"] and got["n"] == want["num_steps"] and got["events"] == want["events"]
    assert (got["title"], got["step"], got["speed"], got["sides"]) == ("sixteen, packed", 37, 12, 2)
    page.close()
