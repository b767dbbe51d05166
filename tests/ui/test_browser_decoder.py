"""The player's JS decoder (batchscope/player/web/payload.js and the slot-grid slicing of views.js), run in Chromium on
the exported file of every shipped pair, at the steps where tests/visuals/test_player_payload.py checks its Python copy
(``payloadkit.sample_steps``). Each decoded piece is compared with what the Python visuals compute at that step:
the slot grid's cells, window and title, the budget bar's traces, the block map's looks, the narration, the
queues, each request's status and its text so far (the JS slices UTF-16 code units, as the Python copy does by
encoding). So a JS decoder that drifts from its Python copy fails here, not only in a reader's eyes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conftest import RECORDED, recorded_pair, step_records
from payloadkit import WINDOW, sample_steps
from test_browser_player import open_file

from batchscope.compare.lockstep import lockstep_counters
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import queues, request_status, text_so_far
from batchscope.figures.budget import budget_bar
from batchscope.figures.kv import block_map
from batchscope.figures.packing import figure_json
from batchscope.figures.slots import slot_grid
from batchscope.player.export import player_html
from batchscope.player.playback import player_payload
from batchscope.steplog.view import TraceView

pytestmark = pytest.mark.app

SCENARIOS = sorted({p.name.rsplit("-", 1)[0] for p in RECORDED.glob("*.jsonl")})

# What the player decodes at step k, per side, with the player's own objects (bsPlayer.P is its BS.Payload).
DECODE = """(ks) => { const P = bsPlayer.P, T = P.T, ids = (v, idx) => idx.map((i) => v.request_ids[i]);
  return P.views.map((v) => ks.map((k) => {
    const s = P.shown(v, k), win = T[v.slots.windows[s]], cols = v.steps;
    return {s,
      slots: v.slots.data.map((tr) => BS.sliceTrace(tr, win.lo, win.hi)).filter((tr) => tr),
      slot_xaxis: Object.assign({}, v.slots.layout.xaxis, win.xaxis, {title: v.slots.layout.xaxis.title}),
      slot_title: T[v.slots.titles[s]],
      budget: P.budgetTraces(v, s), budget_title: T[v.budget.titles[s]],
      looks: P.blockLooks(v, s), block_title: T[v.blocks.titles[s]],
      narration: T[cols.narration[s]],
      queues: {waiting: ids(v, T[cols.waiting[s]]), running: ids(v, T[cols.running[s]]),
               preempted: ids(v, T[cols.preempted[s]]), finished: ids(v, P.finishedBy(v, s))},
      status: P.statuses(v, s), texts: v.request_ids.map((_, i) => P.textAt(v, i, s))};
  })); }"""


@pytest.fixture(scope="module", params=SCENARIOS)
def decoded(request, browser, tmp_path_factory):
    """(views, sampled steps, what the JS decoded at each of them) for one shipped pair."""
    views = recorded_pair(request.param)
    counters = lockstep_counters(*views)
    p = player_payload(views, request.param, window=WINDOW, counters=counters)
    path = Path(tmp_path_factory.mktemp("decoder")) / f"{request.param}.html"
    path.write_text(player_html(views, request.param, window=WINDOW, counters=counters), encoding="utf-8")
    page = open_file(browser, path)
    ks = sample_steps(p["num_steps"], p["events"])
    assert page.evaluate("bsPlayer.P.p.num_steps") == p["num_steps"]
    got = page.evaluate(DECODE, ks)
    page.close()
    return views, ks, got


def test_the_js_decodes_the_python_figures_at_the_sampled_steps(decoded):
    views, ks, got = decoded
    for view, side in zip(views, got):
        for k, js in zip(ks, side):
            s = min(k, view.num_steps - 1)
            assert js["s"] == s
            slots = figure_json(slot_grid(view, s, WINDOW))
            assert js["slots"] == slots["data"], (view.policy, s)
            assert js["slot_xaxis"] == slots["layout"]["xaxis"], (view.policy, s)
            assert js["slot_title"] == slots["layout"]["title"]["text"]
            budget = figure_json(budget_bar(view, s))
            assert js["budget"] == budget["data"] and js["budget_title"] == budget["layout"]["title"]["text"]
            blocks = figure_json(block_map(view, s))
            (cells,) = blocks["data"]
            assert js["looks"] == {
                "color": cells["marker"]["color"],
                "text": cells["text"],
                "hover": cells["hovertext"],
                "width": cells["marker"]["line"]["width"],
                "line": cells["marker"]["line"]["color"],
            }, (view.policy, s)
            assert js["block_title"] == blocks["layout"]["title"]["text"]


def test_the_js_decodes_the_python_texts_at_the_sampled_steps(decoded):
    views, ks, got = decoded
    for view, side in zip(views, got):
        for k, js in zip(ks, side):
            s = min(k, view.num_steps - 1)
            assert js["narration"] == narrate(view, s)
            q = queues(view, s)
            assert js["queues"] == {n: q[n] for n in ("waiting", "running", "preempted", "finished")}, (view.policy, s)
            assert js["status"] == list(request_status(view, s).values()), (view.policy, s)
            assert js["texts"] == list(text_so_far(view, s).values()), (view.policy, s)


def test_the_js_text_so_far_is_exact_with_accents_emoji_and_empty_tokens(browser, tmp_path):
    """The texts of tests/visuals/test_player_payload.py's emoji case, at every step: an emoji is two UTF-16 code
    units, so a decoder counting code points (or bytes) cuts it or runs past it."""
    records = copy.deepcopy(recorded_pair("seed-abcd")[1].records)
    extra = ["é", "😀", "", " ⏎\n", "中文"]
    for i, st in enumerate(step_records(records)):
        for j, s in enumerate(st["sampled"]):
            s["text"] = extra[(i + j) % len(extra)] + s["text"]
            s["text_delta"] = extra[(i + j) % len(extra)] + s.get("text_delta", "")  # what text_so_far adds up
    view = TraceView(records)
    assert "😀" in "".join(text_so_far(view, view.num_steps - 1).values())
    path = tmp_path / "text.html"
    path.write_text(player_html([view], "text"), encoding="utf-8")
    page = open_file(browser, path)
    got = page.evaluate(
        "(n) => { const P = bsPlayer.P, v = P.views[0];"
        " return [...Array(n).keys()].map((s) => v.request_ids.map((_, i) => P.textAt(v, i, s))); }",
        view.num_steps,
    )
    page.close()
    assert got == [list(text_so_far(view, s).values()) for s in range(view.num_steps)]
