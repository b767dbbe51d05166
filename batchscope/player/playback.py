"""The browser player's data: every per-step view of one trace, or of 2 to 4 on one step clock, packed once for the
client.

The player (``batchscope/player/web/player.js``) draws step k of a trace from this payload alone, with no server round
trip. Nothing here re-derives a scheduling rule: each per-step view is computed by the Python visual that draws it on
the pages (``slots.slot_grid``, ``budget.budget_traces``, ``kv.block_marks``, ``narration.narrate``,
``stepinfo.queues``...), then packed so that what changes per step is small:

- every string and every repeated JSON value (a budget bar segment, a block's look, a queue) is stored once in a
  table ``T`` and referred to by its index;
- per-step columns are lists indexed by step (``narration[k]`` is the index of step k's sentence in ``T``); queues
  hold request indices (positions in ``request_ids``), and who has finished by step k and each request's state
  come from each request's first and finishing steps (``request_steps``), not from per-step lists;
- the block map is a first row of block looks plus, per step, only the blocks whose look changed
  (``[block, look, block, look, ...]``); a pool of more than ``blockgroups.AGGREGATE_ABOVE`` blocks is drawn a
  group of blocks per cell, built incrementally (``blockgroups.grouped_marks_all``);
- the slot grid is the figure of ``slot_grid`` over every window the steps show (cells in step order), which the
  client slices to the window around the cursor, as ``slot_grid(view, k, window)`` does;
- each request's text so far is its final text plus the steps where it grew and its length then;
- a long trace of a busy server is packed one span of steps at a time (``span``, ``packing.span_of``): the
  columns are computed for the span only (other positions repeat its first or last step), and the client's clock
  stays in the span.

Payload layout (JSON): ``{version, title, num_steps, span, initial_step, speed, present, window, events, T,
template, counters, tour, views: [view...]}``; see ``view_payload`` for one view. A view's ``gauges`` (only when
asked for: the Trace page) is the figure of vLLM's metrics over every step (``batchscope.figures.gauges``), drawn once
with a cursor, like its ``timeline``. A page that embeds the player may add ``host_corner``: px its controls leave
free at the right (the app's presenter toggle sits over the frame's corner).
"""

from __future__ import annotations

import plotly.io as pio

from batchscope.explain.beats import BEAT_NAME, BEAT_TEXT, story_beats
from batchscope.explain.checklist import checklist_text
from batchscope.explain.headline import headline
from batchscope.explain.moments import default_tour
from batchscope.explain.narration import narrate
from batchscope.explain.stepinfo import event_steps, queues, text_so_far
from batchscope.facts import eviction, facts
from batchscope.figures.blockgroups import AGGREGATE_ABOVE, grouped_marks_all, grouped_title
from batchscope.figures.budget import budget_bar, budget_title, budget_traces
from batchscope.figures.gauges import gauge_figure
from batchscope.figures.kv import block_map, block_map_title, block_marks, legend_text, present_keys
from batchscope.figures.packing import Interner, delta_rows, figure_json, fill, loaded, utf16_len
from batchscope.figures.slots import grid_bars, grid_cells, grid_range, grid_title, grid_xaxis, row_height, slot_grid
from batchscope.figures.step_cost import step_cost_player
from batchscope.figures.steps_table import steps_table_payload
from batchscope.figures.timeline import timeline
from batchscope.steplog.reasons import policy_heading, pool_words, run_name
from batchscope.steplog.view import TraceView, text_color

PAYLOAD_VERSION = 2
MARK_KEYS = ("color", "text", "hover", "width", "line")
PRESENT_WINDOW = 4  # presenter mode's slot grid: 2 * 4 + 1 = 9 steps, cells large enough for 20 px names


def player_template() -> dict:
    """plotly's ``plotly_white`` layout (sent once per payload) with numeric axes' tick labels allowed past the
    figure's edge: plotly.js's default there ("hide past div") measures every tick label of every draw, about 20 ms
    of a first frame (2026-12-04), where automargin has made room for them all (none was hidden)."""
    layout = pio.templates["plotly_white"].to_plotly_json()["layout"]
    return {**layout, **{a: {**layout[a], "ticklabeloverflow": "allow"} for a in ("xaxis", "yaxis")}}


def slot_section(view: TraceView, intern: Interner, window: int, ks: range) -> dict:
    """The slot grid's cells over every window the steps ``ks`` show (its traces hold those cells, in step order;
    the client keeps the cells of the current window), each step's window ``{lo, hi, xaxis}`` and title, and the
    highlight of the current column (the figure's one shape, drawn by the client over the plot so that moving it
    needs no redraw). ``present_windows``: the same with ``PRESENT_WINDOW`` (presenter mode: fewer, larger cells)."""
    wins = (window, min(window, PRESENT_WINDOW))
    span = (
        min(grid_range(view, ks[0], w)[0] for w in wins),
        max(grid_range(view, ks[-1], w)[1] for w in wins),
    )
    fig = figure_json(slot_grid(view, 0, None, span=span, bars=False))  # the layout; bars as plain dicts
    fig["data"] = grid_bars(view, grid_cells(view, *span), row_height(view))
    highlight = fig["layout"].pop("shapes")[0]

    def win(k: int, w: int) -> int:
        lo, hi = grid_range(view, k, w)
        return intern({"lo": lo, "hi": hi, "xaxis": {**grid_xaxis(lo, hi), **view.step_ticks(lo, hi)}})

    return {
        "data": fig["data"],
        "layout": fig["layout"],
        "highlight": highlight,
        "windows": fill(view, ks, lambda k: win(k, wins[0])),
        "present_windows": fill(view, ks, lambda k: win(k, wins[1])),
        "titles": fill(view, ks, lambda k: intern(grid_title(view, k))),
    }


def budget_section(view: TraceView, intern: Interner, ks: range) -> dict:
    """Each step's bar segments (indices of plotly bar dicts in ``T``) and title; the layout of step 0."""
    return {
        "layout": figure_json(budget_bar(view, 0))["layout"],
        "bars": fill(view, ks, lambda k: intern([intern(t) for t in budget_traces(view, k)])),
        "titles": fill(view, ks, lambda k: intern(budget_title(view, k))),
    }


def block_section(view: TraceView, intern: Interner, columns: int, ks: range) -> dict:
    """The block map: fixed positions, each block's look per step (delta rows of indices into ``T``), titles.

    A pool larger than ``AGGREGATE_ABOVE`` blocks is drawn one cell per group of blocks (``blockgroups``)."""
    num_blocks = view.steps[0]["kv"]["num_blocks"] if view.steps else view.header["config"]["num_kv_blocks"]
    grouped = num_blocks > AGGREGATE_ABOVE
    fig = figure_json(block_map(view, 0, columns)) if view.steps else {"data": [{}], "layout": {}}
    rows, titles, first = [], [], None
    drawn: set[tuple[str, str]] = set()  # (colour, text) of every cell drawn: the key's states (kv.present_keys)
    if grouped:  # every step at once, incrementally; a group's unchanged mark keeps its index
        seen: dict[int, int] = {}
        for k, marks in grouped_marks_all(view, (ks[0], ks[-1])).items():
            first = first or {"x": [m[0] for m in marks], "y": [m[1] for m in marks]}
            idx = {id(m): seen[id(m)] if id(m) in seen else intern(list(m[2:])) for m in marks}
            drawn.update((m[2], m[3]) for m in marks if id(m) not in seen)
            rows.append([idx[id(m)] for m in marks])
            seen = idx
            titles.append(intern(grouped_title(view, k)))
    for k in ks if not grouped else ():
        m = block_marks(view, k, columns)
        first = first or m
        rows.append([intern.flat(look) for look in zip(*(m[key] for key in MARK_KEYS))])
        drawn.update(zip(m["color"], m["text"]))
        titles.append(intern(block_map_title(view, k)))
    rows, titles = fill(view, ks, lambda k: rows[k - ks[0]]), fill(view, ks, lambda k: titles[k - ks[0]])
    trace = {k: v for k, v in fig["data"][0].items() if k not in ("x", "y", "text", "hovertext")}
    trace["marker"] = {k: v for k, v in trace.get("marker", {}).items() if k not in ("color", "line")}
    layout = fig["layout"]
    if grouped and first:
        cols, nrows = max(first["x"]) + 1, max(first["y"]) + 1
        layout.update(height=90 + 40 * nrows)
        layout["xaxis"]["range"], layout["yaxis"]["range"] = [-0.6, cols - 0.4], [nrows - 0.4, -0.6]
    return {
        "x": first["x"] if first else [],
        "y": first["y"] if first else [],
        "trace": trace,
        "layout": layout,
        "looks": delta_rows(rows),
        "titles": titles,
        "grouped": grouped,
        "keys": present_keys(view, sorted(drawn)),
    }


def text_section(view: TraceView) -> dict:
    """Each request's final text, and the steps (positions) where its text grew with its length (UTF-16 units)
    after them. The growth follows ``text_so_far``: each token's ``text_delta`` where the trace records it (whole
    characters only), else its text alone."""
    final = text_so_far(view, view.num_steps - 1) if view.steps else {r: "" for r in view.request_ids}
    grew: dict[str, list[list[int]]] = {rid: [] for rid in view.request_ids}
    length = dict.fromkeys(view.request_ids, 0)
    for k, st in enumerate(view.steps):
        for s in st["sampled"]:
            length[s["request_id"]] += utf16_len(s.get("text_delta", s.get("text", "")))
        for s in st["sampled"]:
            rid = s["request_id"]
            if not grew[rid] or grew[rid][-1][0] != k:
                grew[rid].append([k, length[rid]])
    return {"final": [final[r] for r in view.request_ids], "grew": [grew[r] for r in view.request_ids]}


QUEUES = ("waiting", "running", "preempted")


def step_columns(view: TraceView, intern: Interner, ks: range) -> dict[str, list[int]]:
    """Per-step columns of ``T`` indices: narration, its headline (presenter mode's short form,
    ``batchscope.explain.headline``) and the headline's events alone (``short=True``: a crowded screen's), teaching
    beats and their names, the checklist, and the waiting, running and preempted queues as lists of request indices
    (positions in ``request_ids``). Who has finished by a step, and each request's state, the client derives from
    ``request_steps`` (a busy server's trace would otherwise carry thousands of ids per step)."""
    beats = story_beats(view)
    index = {r: i for i, r in enumerate(view.request_ids)}
    cols: dict[str, list[int]] = {
        "narration": fill(view, ks, lambda k: intern(narrate(view, k))),
        "headline": fill(view, ks, lambda k: intern(headline(view, k))),
        "headline_short": fill(view, ks, lambda k: intern(headline(view, k, short=True))),
        "beats": fill(view, ks, lambda k: intern([intern(BEAT_TEXT[b]) for b in beats.get(k, [])])),
        "beat_names": fill(view, ks, lambda k: intern([intern(BEAT_NAME[b]) for b in beats.get(k, [])])),
        "checklist": fill(view, ks, lambda k: intern(checklist_text(view, k))),
    }
    qs = {k: queues(view, k) for k in ks}
    for name in QUEUES:
        cols[name] = fill(view, ks, lambda k, name=name: intern([index[r] for r in qs[k][name]]))
    return cols


def request_steps(view: TraceView) -> dict[str, list]:
    """Per request (in ``request_ids`` order) the first step it is in a queue, the step it ends in (null: never)
    and how it ended (``end_word``: finished or aborted, ``batchscope.facts.Facts.end_word``), and the requests in
    ending order: with the step's queues, enough for the client to list who has finished or was aborted by step k
    (``stepinfo.queues``) and each request's state (``stepinfo.request_status``)."""
    index = {r: i for i, r in enumerate(view.request_ids)}
    f = facts(view)
    return {
        "first_seen": [view.first_seen.get(r) for r in view.request_ids],
        "finish_step": [view.finish_step(r) for r in view.request_ids],
        "end_word": [f.end_word(r) for r in view.request_ids],
        "finish_order": [index[r] for r in view.finished_by(view.num_steps - 1)] if view.steps else [],
    }


def view_payload(
    view: TraceView,
    num_steps: int,
    intern: Interner,
    window: int = 12,
    columns: int = 16,
    label: str = "",
    span: tuple[int, int] | None = None,
    gauges: bool = False,
    cost: bool = False,
) -> dict:
    """One trace's part of the payload; ``num_steps`` is the shared clock's length (lockstep pages), ``window``
    the slot grid's (``slots.grid_range``), ``columns`` the block map's; ``label`` heads its side (default: the
    policy); ``span``: the clock's positions the player may show (default all; ``loaded``); ``gauges``: add the
    figure of vLLM's metrics (``batchscope.figures.gauges``; else ``gauges`` is null); ``cost``: the step-cost chart
    (``batchscope.figures.step_cost.step_cost_player``; else ``cost`` is null)."""
    ks = loaded(view, span or (0, num_steps - 1))
    c = view.header["config"]
    last = view.num_steps - 1
    label = label or policy_heading(run_name(view.header))
    return {
        "policy": view.policy,
        "label": label,
        "num_steps": view.num_steps,
        "request_ids": view.request_ids,
        "colors": [view.colors[r] for r in view.request_ids],
        "chip_text": [text_color(view.colors[r]) for r in view.request_ids],
        "caption": f"{run_name(view.header)} · {view.provenance()} · {c['max_num_seqs']} slots, token budget "
        f"{c['max_num_batched_tokens']}, {pool_words(view.header)}",
        "finished_note": f"{label} finished at step {last}; holding its final state.",
        "events": event_steps(view),
        "words": {"evicted": eviction(view.header).past, "evicted_now": eviction(view.header).now},
        "slots": slot_section(view, intern, window, ks),
        "budget": budget_section(view, intern, ks),
        "blocks": block_section(view, intern, columns, ks),
        "legend": legend_text(view),
        "timeline": figure_json(timeline(view, 0, num_steps)) if view.steps else None,
        "gauges": figure_json(gauge_figure(view, 0, num_steps)) if gauges and view.steps else None,
        "cost": step_cost_player(view) if cost else None,
        "text": text_section(view),
        "steps": step_columns(view, intern, ks),
        "requests": request_steps(view),
    }


MAX_SIDES = 4  # sides A, B, C, D (batchscope.compare.runs.SIDES)


def side_labels(views: list[TraceView]) -> list[str]:
    """Each side's heading: its policy, or "A · policy", "B · policy", ... (sides A to D) when two runs share a
    policy or there are more than two."""
    policies = [run_name(v.header) for v in views]
    lettered = len(set(policies)) < len(policies) or len(views) > 2
    heads = [policy_heading(p, policies) for p in policies]
    return [f"{side} · {h}" if lettered else h for side, h in zip("ABCD", heads)]


def player_payload(
    views: list[TraceView],
    title: str,
    initial_step: int = 0,
    speed: float = 8,
    present: bool = False,
    window: int = 12,
    counters: list[dict] | None = None,
    labels: list[str] | None = None,
    span: tuple[int, int] | None = None,
    tour: list[dict] | None = None,
    gauges: bool = False,
    table: bool = False,
    cost: bool = False,
) -> dict:
    """The whole payload for one trace, or 2 to ``MAX_SIDES`` on one step clock, the longest run's (a run that has
    ended holds its last step: its ``finished_note``); see the module docstring. ``span``: the first and last
    positions of the clock the player may show (default: all). A trace of thousands of steps is packed a span at a
    time (``packing.span_of``): what the client needs stays small and quick to build, while every view at a step of
    the span is exactly the one the whole trace gives.

    ``counters``: optional cards above the views, ``{"label", "values": [one string per step], "help"}``.
    ``labels``: the heading of each side (default ``side_labels``). ``gauges``: with vLLM's metrics (``view_payload``).
    ``cost``: with each trace's step-cost chart (``view_payload``). ``table``: with the steps table of the first
    trace (``steps_table_payload``), which follows the step. ``tour``: the key moments, ``[{"step", "note"}]``
    (``batchscope.explain.moments``: a scenario's ``tour_of``, a teacher's ``read_tour``); default the moments found in
    the traces (``default_tour``). Moments outside ``span`` are left out.
    """
    if not 1 <= len(views) <= MAX_SIDES or any(v.num_steps == 0 for v in views):
        raise ValueError(f"the player shows 1 to {MAX_SIDES} traces, each with at least one step")
    intern = Interner()
    num_steps = max(v.num_steps for v in views)
    lo, hi = span or (0, num_steps - 1)
    if not 0 <= lo <= hi < num_steps:
        raise ValueError(f"span {lo}..{hi} is outside the steps 0..{num_steps - 1}")
    packed = [
        view_payload(v, num_steps, intern, window, label=lab, span=(lo, hi), gauges=gauges, cost=cost)
        for v, lab in zip(views, labels or side_labels(views))
    ]
    cards = [
        {"label": c["label"], "help": c.get("help", ""), "values": [intern(x) for x in c["values"]]}
        for c in counters or []
    ]
    return {
        "version": PAYLOAD_VERSION,
        "title": title,
        "num_steps": num_steps,
        "initial_step": min(max(int(initial_step), lo), hi),
        "span": [lo, hi],
        "speed": min(max(float(speed), 1), 120),
        "present": bool(present),
        "window": window,
        "events": sorted({e for p in packed for e in p["events"] if lo <= e <= hi}),
        "template": player_template(),
        "counters": cards,
        "tour": [m for m in (default_tour(views) if tour is None else tour) if lo <= m["step"] <= hi],
        "views": packed,
        "table": steps_table_payload(views[0], lo, hi, intern) if table else None,
        "T": intern.table,
    }
