"""Figures are pure functions of (trace, step): check their data against the trace, not just that they exist."""

from __future__ import annotations

import re

import pytest
from conftest import RECORDED

from batchscope.figures.kv import block_map, kv_usage
from batchscope.figures.pool import block_map_cells
from batchscope.figures.slots import slot_occupancy
from batchscope.figures.timeline import request_phases, timeline
from batchscope.steplog import trace
from batchscope.steplog.view import PADDING_COLOR, TraceView


@pytest.fixture(
    scope="module", params=[f"{s}-{p}" for s in ("seed-abcd", "preemption") for p in ("continuous", "static")]
)
def seed(request):
    return TraceView(trace.read(RECORDED / f"{request.param}.jsonl"))


def test_slot_bars_cover_exactly_the_scheduled_and_padding_cells(seed):
    fig = slot_occupancy(seed, step=3)
    covered = set()
    for bar in fig.data:
        if bar.type != "bar":
            continue
        for y, x, base, cd in zip(bar.y, bar.x, bar.base, bar.customdata):
            slot = int(y.split()[1])
            for k in range(x):
                covered.add((int(base + 0.5) + k, slot, cd[0], cd[1]))
    expected = {
        (st["step"], s["slot"], s["request_id"], "recompute" if s.get("recompute") else s["kind"])
        for st in seed.steps
        for s in st["scheduled"]
    }
    expected |= {(st["step"], p["slot"], p["request_id"], "padding") for st in seed.steps for p in st["padding_slots"]}
    assert covered == expected
    padding_bars = [b for b in fig.data if b.marker.color == PADDING_COLOR]
    assert bool(padding_bars) == any(st["padding_slots"] for st in seed.steps)


def test_kv_usage_stacks_block_table_lengths(seed):
    fig = kv_usage(seed)
    for tr in fig.data:
        assert list(tr.y) == [len(st["kv"]["block_tables"].get(tr.name, ())) for st in seed.steps]


def test_block_map_shows_owner_and_fill(seed):
    step = 2
    st = seed.steps[step]
    cells = block_map_cells(seed, step)
    owned = {c["block"]: c["owner"] for c in cells if c["owner"]}
    assert owned == {b: rid for rid, t in st["kv"]["block_tables"].items() for b in t}
    bs = st["kv"]["block_size"]
    for rid, n in st["kv"]["num_cached_tokens"].items():  # fills of a request's blocks add up to its tokens
        assert sum(c["fill"] for c in cells if c["owner"] == rid) == n
        last = st["kv"]["block_tables"][rid][-1]
        assert cells[last]["fill"] == n - (len(st["kv"]["block_tables"][rid]) - 1) * bs
    fig = block_map(seed, step)
    assert len(fig.data[0].x) == st["kv"]["num_blocks"]
    # a held block names itself: its id on the cell's first line (there is room at the pages' size), then its owner
    # from the log's block tables; a free block only at the start of a row (16 to a row); every block on hover
    for b, (text, hover) in enumerate(zip(fig.data[0].text, fig.data[0].hovertext)):
        assert hover.startswith(f"block {b}:")
        if b in owned:
            assert re.match(rf"<span[^>]*>{b}</span><br>", text) and text.split("<br>")[1].startswith(
                seed.label(owned[b])
            )
        elif not text.count("<br>"):  # free (not cached, reserved or preempted)
            assert text == (f"<span style='font-size:7px;color:#444'>{b}</span>" if b % 16 == 0 else "")


def test_timeline_phases_follow_the_log(seed):
    phases = request_phases(seed)
    for st in seed.steps:
        for s in st["scheduled"]:
            assert phases[s["request_id"]][st["step"]] == ("recompute" if s["recompute"] else s["kind"])
        for rid in st["waiting"]:
            assert phases[rid][st["step"]] == "waiting"
    fig = timeline(seed, step=1)
    finished = fig.data[-1]
    assert dict(zip(finished.y, finished.customdata)) == {r: seed.finish_step(r) for r in seed.request_ids}


def test_preemption_is_visible_as_recompute_cells_and_freed_blocks():
    view = TraceView(trace.read(RECORDED / "preemption-continuous.jsonl"))
    step = next(st["step"] for st in view.steps if st["preempted"])
    victim = view.steps[step]["preempted"][0]
    lost = view.steps[step - 1]["kv"]["block_tables"][victim]
    cells = block_map_cells(view, step)
    assert all(cells[b]["preempted_from"] == victim or cells[b]["owner"] for b in lost)
    recompute = [c for c in view.cells if c.kind == "recompute"]
    assert recompute and {c.request_id for c in recompute} == {victim}
    recomputed = next(r["num_recomputed_tokens"] for r in view.summary["requests"] if r["request_id"] == victim)
    # the re-admission prefill redoes every token whose K/V was dropped, plus the one sampled token not yet fed
    assert sum(c.num_tokens for c in recompute) == recomputed + 1


def test_recompute_wording_matches_the_metrics():
    """preemption-continuous: C is preempted holding 31 tokens of K/V and, with nothing of it left in the prefix
    cache, comes back computing 32: the 31 recomputed plus its last sampled token, which never had K/V. The
    narration, the summary and the decision records say the same numbers."""
    from batchscope.explain.narration import narrate

    view = TraceView(trace.read(RECORDED / "preemption-continuous.jsonl"))
    victim_step = next(k for k, st in enumerate(view.steps) if st["preempted"])
    victim = view.steps[victim_step]["preempted"][0]
    text = narrate(view, victim_step)
    assert "31 tokens of K/V" in text and "the most recently admitted running request" in text
    assert "all 31 are recomputed" in text
    resume = next(k for k in range(victim_step + 1, view.num_steps) if victim in view.steps[k]["admitted"])
    text = narrate(view, resume)
    assert "recomputes 31 tokens whose K/V the preemption dropped, plus 1 that never had K/V" in text
    computed = next(s["num_tokens"] for s in view.steps[resume]["scheduled"] if s["request_id"] == victim)
    assert computed == 32


def test_prefix_cache_hits_shared_and_cached_blocks_are_drawn_from_the_log():
    """sixteen and shared-prefix record prefix-cache hits: the narration names each hit (the step's
    num_prefix_hit_tokens), the block map marks every block whose reference count is N > 1 with ×N, and every
    cached free block (kv.cached_free_blocks) as cached."""
    from batchscope.explain.narration import narrate
    from batchscope.figures.kv import block_marks, cell_body

    for name in ("sixteen-continuous", "shared-prefix-continuous"):
        view = TraceView(trace.read(RECORDED / f"{name}.jsonl"))
        seen_hit = seen_shared = seen_cached = False
        for k, st in enumerate(view.steps):
            text = narrate(view, k)
            for rid, hit in st.get("num_prefix_hit_tokens", {}).items():
                if hit:
                    seen_hit = True
                    assert f"{rid} is admitted: it found {hit} of its" in text
            m = block_marks(view, k)
            for b, n in st["kv"].get("ref_counts", {}).items():
                seen_shared = True
                assert f"×{n}" in m["text"][int(b)]
            for b in st["kv"].get("cached_free_blocks", []):
                seen_cached = True
                assert cell_body(m["text"][b]) == "cached"
        assert seen_hit and seen_shared, name
    assert seen_cached  # shared-prefix evicts under a small pool


def test_static_padding_rows_show_at_the_budget_and_reserved_blocks_differ_from_free():
    """From the log: a step with padding rows names them in the budget bar's title; the block map draws exactly
    num_reserved_blocks - num_used_blocks free blocks as reserved ("res"), the rest of the free ones as free."""
    from batchscope.figures.budget import budget_title
    from batchscope.figures.kv import block_marks, cell_body

    view = TraceView(trace.read(RECORDED / "seed-abcd-static.jsonl"))
    seen_pad = seen_res = False
    for k, st in enumerate(view.steps):
        pads = len(st["padding_slots"])
        title = budget_title(view, k)
        assert (f"+ {pads} padding row" in title) == (pads > 0)
        seen_pad |= pads > 0
        kv = st["kv"]
        spare = max(0, kv.get("num_reserved_blocks", 0) - kv["num_used_blocks"])
        assert [cell_body(x) for x in block_marks(view, k)["text"]].count("res") == spare
        seen_res |= spare > 0
    assert seen_pad and seen_res
