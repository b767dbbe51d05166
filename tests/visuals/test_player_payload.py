"""The browser player's payload shows, at every sampled step of every shipped scenario, exactly what the Python
visuals compute for that step; the exported HTML file is self-contained and within its size budget.

The payload is decoded here the way ``batchscope/player/web/*.js`` decodes it (slice the whole-trace slot grid to the
step's window, look blocks up through delta rows, take a prefix of the final text...), and each decoded figure is
compared, whole, with the figure the Python visual draws at that step. The JS decoder itself is checked at the same
steps in Chromium: tests/ui/test_browser_decoder.py.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from html.parser import HTMLParser

import pytest
from conftest import RECORDED, step_records
from payloadkit import WINDOW, sample_steps

from batchscope.compare.lockstep import lockstep_counters
from batchscope.explain.beats import BEAT_TEXT, story_beats
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import event_steps, queues, request_status, text_so_far
from batchscope.figures.blockgroups import MAX_CELLS, group_size
from batchscope.figures.budget import budget_bar
from batchscope.figures.kv import block_map
from batchscope.figures.packing import figure_json
from batchscope.figures.slots import grid_range, slot_grid
from batchscope.figures.timeline import timeline
from batchscope.player.export import player_html
from batchscope.player.playback import player_payload
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

SCENARIOS = sorted({p.name.rsplit("-", 1)[0] for p in RECORDED.glob("*.jsonl")})


def pair(scenario: str) -> list[TraceView]:
    return [TraceView(trace.read(RECORDED / f"{scenario}-{p}.jsonl")) for p in ("static", "continuous")]


@pytest.fixture(scope="module", params=SCENARIOS)
def packed(request):
    views = pair(request.param)
    return views, player_payload(views, request.param, window=WINDOW, counters=lockstep_counters(*views))


# --- the decoder: what batchscope/player/web/*.js does with the payload
# --------------------------------------------------


def slice_trace(tr: dict, lo: int, hi: int) -> dict | None:
    keep = [i for i, b in enumerate(tr["base"]) if lo - 0.5 <= b < hi + 0.5]
    if not keep:
        return None
    a, b = keep[0], keep[-1] + 1
    assert keep == list(range(a, b)), "cells of a kind must be in step order"
    out = dict(tr, marker=dict(tr["marker"]))
    for key in ("x", "base", "y", "text", "customdata"):
        out[key] = tr[key][a:b]
    out["marker"]["color"] = tr["marker"]["color"][a:b]
    return out


def decode_slots(v: dict, T: list, s: int) -> dict:
    win, layout = T[v["slots"]["windows"][s]], copy.deepcopy(v["slots"]["layout"])
    layout["title"]["text"] = T[v["slots"]["titles"][s]]
    layout["xaxis"] = {**layout["xaxis"], **win["xaxis"], "title": layout["xaxis"]["title"]}
    layout["shapes"] = [dict(v["slots"]["highlight"], x0=s - 0.5, x1=s + 0.5)]
    data = [t for t in (slice_trace(tr, win["lo"], win["hi"]) for tr in v["slots"]["data"]) if t]
    return {"data": data, "layout": layout}


def block_looks(v: dict, s: int) -> list[int]:
    row = list(v["blocks"]["looks"]["first"])
    for k in range(1, s + 1):
        ch = v["blocks"]["looks"]["changes"][k]
        for i in range(0, len(ch), 2):
            row[ch[i]] = ch[i + 1]
    return row


def decode_blocks(v: dict, T: list, s: int) -> dict:
    looks = [T[i] for i in block_looks(v, s)]
    b = v["blocks"]
    trace_ = dict(
        b["trace"],
        x=b["x"],
        y=b["y"],
        text=[lk[1] for lk in looks],
        hovertext=[lk[2] for lk in looks],
        marker=dict(
            b["trace"]["marker"],
            color=[lk[0] for lk in looks],
            line={"width": [lk[3] for lk in looks], "color": [lk[4] for lk in looks]},
        ),
    )
    layout = copy.deepcopy(b["layout"])
    layout["title"]["text"] = T[b["titles"][s]]
    return {"data": [trace_], "layout": layout}


def decode_budget(v: dict, T: list, s: int) -> dict:
    layout = copy.deepcopy(v["budget"]["layout"])
    layout["title"]["text"] = T[v["budget"]["titles"][s]]
    return {"data": [T[i] for i in T[v["budget"]["bars"][s]]], "layout": layout}


def decode_text(v: dict, i: int, s: int) -> str:
    grew = [g for g in v["text"]["grew"][i] if g[0] <= s]
    units = grew[-1][1] if grew else 0
    return v["text"]["final"][i].encode("utf-16-le")[: 2 * units].decode("utf-16-le")


def decode_queues(v: dict, T: list, s: int) -> dict[str, list[str]]:
    """payload.js: queues are request indices; who has finished or was aborted by s comes from the ending order,
    steps and end words."""
    ids, r = v["request_ids"], v["requests"]
    out = {n: [ids[i] for i in T[v["steps"][n][s]]] for n in ("waiting", "running", "preempted")}
    for word in ("finished", "aborted"):
        out[word] = [ids[i] for i in r["finish_order"] if r["finish_step"][i] <= s and r["end_word"][i] == word]
    return out


def decode_status(v: dict, T: list, s: int) -> list[str]:
    """payload.js ``statuses``: ended (its end word), else evicted now (the view's word), else running, else
    waiting, else not arrived, else ""."""
    r, running, waiting = v["requests"], set(T[v["steps"]["running"][s]]), set(T[v["steps"]["waiting"][s]])
    evicted = set(T[v["steps"]["preempted"][s]])
    out = []
    for i in range(len(v["request_ids"])):
        fin, seen = r["finish_step"][i], r["first_seen"][i]
        out.append(
            r["end_word"][i]
            if fin is not None and fin <= s
            else v["words"]["evicted"]
            if i in evicted
            else "running"
            if i in running
            else "waiting"
            if i in waiting
            else "not arrived"
            if seen is None or seen > s
            else ""
        )
    return out


# --- the checks --------------------------------------------------------------------------------------------------


def test_figures_at_sampled_steps_equal_the_python_figures(packed):
    views, p = packed
    T = p["T"]
    for k in sample_steps(p["num_steps"], p["events"]):
        for view, v in zip(views, p["views"]):
            s = min(k, view.num_steps - 1)
            assert decode_slots(v, T, s) == figure_json(slot_grid(view, s, WINDOW)), (view.policy, s)
            assert decode_budget(v, T, s) == figure_json(budget_bar(view, s)), (view.policy, s)
            assert decode_blocks(v, T, s) == figure_json(block_map(view, s)), (view.policy, s)


def test_text_views_at_sampled_steps_equal_the_python_ones(packed):
    views, p = packed
    T = p["T"]
    for k in sample_steps(p["num_steps"], p["events"]):
        for view, v in zip(views, p["views"]):
            s, cols = min(k, view.num_steps - 1), v["steps"]
            assert T[cols["narration"][s]] == narrate(view, s)
            assert [T[i] for i in T[cols["beats"][s]]] == [BEAT_TEXT[b] for b in story_beats(view).get(s, [])]
            q = queues(view, s)
            names = ("waiting", "running", "preempted", "finished", "aborted")
            assert decode_queues(v, T, s) == {n: q[n] for n in names}
            assert decode_status(v, T, s) == list(request_status(view, s).values())
            texts = text_so_far(view, s)
            assert [decode_text(v, i, s) for i in range(len(view.request_ids))] == list(texts.values())


def test_clock_events_timeline_and_counters(packed):
    views, p = packed
    assert p["num_steps"] == max(v.num_steps for v in views)
    assert p["events"] == sorted(set(event_steps(views[0])) | set(event_steps(views[1])))
    for view, v in zip(views, p["views"]):
        assert v["events"] == event_steps(view)
        assert v["timeline"] == figure_json(timeline(view, 0, p["num_steps"]))
    pads = [len(st["padding_slots"]) for st in views[0].steps]
    last = p["num_steps"] - 1
    wasted = next(c for c in p["counters"] if c["label"].startswith("padding"))
    assert p["T"][wasted["values"][last]] == f"{sum(pads)} / {sum(pads)}"
    assert p["T"][wasted["values"][0]] == f"{pads[0]} / {sum(pads)}"


def test_slot_grid_windows_turn_like_pages():
    class Steps:
        num_steps = 500
        header = {"config": {"max_num_seqs": 4}}  # few slots: the window is not narrowed

    for window in (3, 8, 12, 40):
        ranges = [grid_range(Steps, k, window) for k in range(Steps.num_steps)]
        for k, (lo, hi) in enumerate(ranges):
            assert lo <= k <= hi and hi - lo == 2 * window
            assert lo == 0 or k - lo >= window // 2  # some history stays on the left of the cursor
        turns = [k for k in range(1, len(ranges)) if ranges[k] != ranges[k - 1]]
        assert all(b - a == window for a, b in itertools.pairwise(turns))


def test_a_large_pool_is_drawn_one_cell_per_group_with_exact_counts():
    views = pair("sixteen")
    records = copy.deepcopy(views[1].records)
    for st in step_records(records):
        st["kv"]["num_blocks"] = 1000  # the same tables in a pool of 1000 blocks
    view = TraceView(records)
    p = player_payload([view], "big pool")
    v, T = p["views"][0], p["T"]
    size = group_size(1000)
    assert v["blocks"]["grouped"] and len(v["blocks"]["x"]) == -(-1000 // size) <= MAX_CELLS
    for s in (0, 100, view.num_steps - 1):
        tables = view.steps[s]["kv"]["block_tables"]
        owner = {b: rid for rid, t in tables.items() for b in t}
        texts = [T[i][1] for i in block_looks(v, s)]
        for g, text in enumerate(texts):
            used = sum(1 for b in range(g * size, min(1000, (g + 1) * size)) if b in owner)
            assert text.split(" ")[0] == f"{used}/{min(size, 1000 - g * size)}"
        assert sum(int(t.split("/")[0]) for t in texts) == len(owner)


class Tags(HTMLParser):
    """Every tag and attribute of a page (script and style contents are text, not tags)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def sixteen_html() -> str:
    views = pair("sixteen")
    return player_html(views, "sixteen", window=WINDOW, counters=lockstep_counters(*views))


def test_export_loads_nothing_from_the_network_and_fits_in_8_mb(sixteen_html):
    parser = Tags()
    parser.feed(sixteen_html)
    refs = [(t, a.get("src") or a.get("href")) for t, a in parser.tags if a.get("src") or a.get("href")]
    assert not [r for r in refs if re.match(r"\s*(https?:)?//", r[1], re.IGNORECASE)], refs
    assert not re.search(
        r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*["']?\s*https?:""", sixteen_html, re.IGNORECASE
    )
    assert [t for t, _ in parser.tags].count("script") == 4  # payload, its reader, plotly.js, player: all inline
    assert len(sixteen_html.encode("utf-8")) <= 8 * 1024 * 1024


def test_exported_payload_is_the_payload_even_when_a_text_could_close_the_script():
    views = pair("seed-abcd")
    records = copy.deepcopy(views[1].records)
    records[1]["sampled"][0]["text"] = "</script><script>alert(1)</script><!--"
    view = TraceView(records)
    html = player_html([view], "tricky <title>")
    parser = Tags()
    parser.feed(html)
    assert [t for t, _ in parser.tags].count("script") == 4
    body = re.search(r'<script type="application/json" id="bs-payload">(.*?)</script>', html, re.DOTALL).group(1)
    assert json.loads(body) == json.loads(json.dumps(player_payload([view], "tricky <title>")))


def test_text_so_far_is_exact_with_accents_emoji_and_empty_tokens():
    views = pair("seed-abcd")
    records = copy.deepcopy(views[1].records)
    extra = ["é", "😀", "", " ⏎\n", "中文"]
    for i, st in enumerate(step_records(records)):
        for j, s in enumerate(st["sampled"]):
            s["text"] = extra[(i + j) % len(extra)] + s["text"]
            s["text_delta"] = extra[(i + j) % len(extra)] + s.get("text_delta", "")  # what text_so_far adds up
    view = TraceView(records)
    assert "😀" in "".join(text_so_far(view, view.num_steps - 1).values())
    v = player_payload([view], "text")["views"][0]
    for s in range(view.num_steps):
        assert [decode_text(v, i, s) for i in range(len(view.request_ids))] == list(text_so_far(view, s).values())


@pytest.mark.parametrize(
    "name",
    [
        "sixteen-continuous",
        "shared-prefix-continuous",
        "preemption-continuous",
        "seed-abcd-static",
        "priority-continuous",
    ],
)
def test_the_incremental_grouped_map_equals_the_map_drawn_step_by_step(name):
    """The player's grouped block map is built incrementally (``grouped_marks_all``); at every step it must equal
    ``grouped_marks``, which draws the step from scratch. The traces cover prefix-cache sharing and eviction,
    preemption, static releases and priority victims; each pool is enlarged to be drawn grouped."""
    from batchscope.figures.blockgroups import AGGREGATE_ABOVE, MARK_FIELDS, grouped_marks, grouped_marks_all

    records = copy.deepcopy(trace.read(RECORDED / f"{name}.jsonl"))
    for st in step_records(records):
        st["kv"]["num_blocks"] = AGGREGATE_ABOVE + 1 + 7 * len(name)  # groups of 4 blocks, the last one shorter
    view = TraceView(records)
    fast = grouped_marks_all(view)
    assert sorted(fast) == list(range(view.num_steps))
    for k in range(view.num_steps):
        want = grouped_marks(view, k)
        assert {f: [m[j] for m in fast[k]] for j, f in enumerate(MARK_FIELDS)} == want, (name, k)
    lo, hi = view.num_steps // 3, view.num_steps // 2  # a span in the middle: the same marks, those steps only
    part = grouped_marks_all(view, (lo, hi))
    assert sorted(part) == list(range(lo, hi + 1)) and all(part[k] == fast[k] for k in part)


def test_a_span_of_a_long_trace_gives_the_same_views_at_its_steps():
    """Payloads packed for steps 300..420 and 600..650 of the sixteen pair decode, at those steps, to exactly the
    Python figures and texts (in the second span the continuous side, finished at step 530, holds its final
    state); the clock's first step and the events stay in the span, and a span off the clock is refused."""
    from batchscope.figures.packing import span_size, spans

    assert spans(2500, 1000) == [(0, 999), (1000, 1999), (2000, 2499)] and spans(7, 1000) == [(0, 6)]
    assert (span_size(4), span_size(64), span_size(256)) == (16000, 1000, 1000)  # sixteen fits whole
    views = pair("sixteen")
    for lo, hi in ((300, 420), (600, 650)):
        p = player_payload(views, "span", window=WINDOW, initial_step=0, span=(lo, hi))
        T = p["T"]
        assert p["span"] == [lo, hi] and p["initial_step"] == lo and all(lo <= e <= hi for e in p["events"])
        for k in (lo, lo + 1, (lo + hi) // 2, hi):
            for view, v in zip(views, p["views"]):
                s = min(k, view.num_steps - 1)
                assert decode_slots(v, T, s) == figure_json(slot_grid(view, s, WINDOW)), (view.policy, s)
                assert decode_budget(v, T, s) == figure_json(budget_bar(view, s)), (view.policy, s)
                assert decode_blocks(v, T, s) == figure_json(block_map(view, s)), (view.policy, s)
                assert T[v["steps"]["narration"][s]] == narrate(view, s)
                q = queues(view, s)
                assert decode_queues(v, T, s) == {
                    n: q[n] for n in ("waiting", "running", "preempted", "finished", "aborted")
                }
                assert decode_status(v, T, s) == list(request_status(view, s).values())
    with pytest.raises(ValueError, match="outside the steps"):
        player_payload(views, "bad", span=(5, 5000))
