"""Slot occupancy: slots (rows) x steps (columns); each run of cells coloured by its request.

Second encoding for colour-blind readers and print: prefill runs are hatched (``/``), recomputation after a
preemption is cross-hatched (``+``), decode runs are solid, padding rows of a static batch are grey with ``x``
hatching; empty slots stay blank.
"""

from __future__ import annotations

import plotly.graph_objects as go

from batchscope.figures.safe import esc
from batchscope.steplog.view import PADDING_COLOR, Cell, TraceView

PATTERN = {"prefill": "/", "recompute": "+", "decode": "", "speculative": ".", "padding": "x"}
MAX_GRID_CELLS = 1200  # slots x steps drawn by slot_grid with a window


def hatch(kind: str) -> dict:
    """Plotly bar pattern for a cell kind, drawn over the request's colour (colour = who, hatch = what)."""
    return dict(shape=PATTERN.get(kind, ""), fillmode="overlay", fgcolor="rgba(0,0,0,0.45)", size=7)


def _runs(cells: list[Cell]) -> list[list[Cell]]:
    """Group consecutive steps of the same (slot, request, kind) into runs (one bar each)."""
    runs: list[list[Cell]] = []
    last: dict[int, list[Cell]] = {}
    for c in sorted(cells, key=lambda c: (c.slot, c.step)):
        run = last.get(c.slot)
        if run and run[-1].step == c.step - 1 and (run[-1].request_id, run[-1].kind) == (c.request_id, c.kind):
            run.append(c)
        else:
            run = [c]
            runs.append(run)
            last[c.slot] = run
    return runs


def slot_occupancy(view: TraceView, step: int | None = None, num_steps: int | None = None) -> go.Figure:
    """Horizontal bars: y = slot, x = step. ``step`` draws a cursor; ``num_steps`` fixes the x range (lockstep)."""
    fig = go.Figure()
    groups: dict[tuple[str, str], list[list[Cell]]] = {}
    for run in _runs(view.cells):
        groups.setdefault((run[0].request_id, run[0].kind), []).append(run)
    for rid in view.request_ids:
        if any(k[0] == rid for k in groups):  # legend entry: a plain swatch of the request's colour
            fig.add_scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=esc(view.label(rid)),
                legendgroup=rid,
                marker=dict(color=view.colors[rid], symbol="square", size=12),
            )
        for kind in PATTERN:
            runs = groups.get((rid, kind))
            if not runs:
                continue
            color = PADDING_COLOR if kind == "padding" else view.colors[rid]
            fig.add_bar(
                orientation="h",
                y=[f"slot {r[0].slot}" for r in runs],
                x=[len(r) for r in runs],
                base=[r[0].step - 0.5 for r in runs],
                marker=dict(color=color, pattern=hatch(kind), line=dict(width=0.5, color="white")),
                name=esc(view.label(rid)),
                legendgroup=rid,
                showlegend=False,
                customdata=[[esc(rid), kind, r[0].step, r[-1].step, sum(c.num_tokens for c in r)] for r in runs],
                hovertemplate="%{customdata[0]} · %{customdata[1]}<br>steps %{customdata[2]}–%{customdata[3]}"
                "<br>%{customdata[4]} tokens<extra></extra>",
            )
    slots = [f"slot {i}" for i in range(view.header["config"]["max_num_seqs"])]
    last = (num_steps or view.num_steps) - 0.5
    fig.update_layout(
        barmode="overlay",
        bargap=0.15,
        height=150 + 34 * len(slots),
        margin=dict(l=10, r=10, t=40, b=30),
        title=f"{esc(view.policy)}: slot occupancy (/ = prefill, + = recompute, solid = decode, grey x = padding)",
        xaxis=dict(title="step", range=[-0.5, last], **view.step_ticks(0, int(last))),
        yaxis=dict(type="category", categoryorder="array", categoryarray=slots[::-1], range=[-0.5, len(slots) - 0.5]),
        legend=dict(orientation="h", y=-0.35, font=dict(size=10)),
    )
    if step is not None:
        fig.add_vline(x=step, line=dict(color="#D00", width=2, dash="dot"))
    return fig


def _token_label(c: Cell) -> str:
    """The sampled token's text for a hover label; a token that is only part of a character says so."""
    return esc(repr(c.token_text)[1:-1]) + (
        " (part of a character: its bytes join the next token's)" if c.partial else ""
    )


def grid_range(view: TraceView, step: int, window: int | None) -> tuple[int, int]:
    """First and last step shown by ``slot_grid`` at ``step``: the whole trace when ``window`` is None, otherwise
    ``2 * window + 1`` steps that turn like pages, ``window`` steps at a time, so the cells stay put while the
    cursor moves (easier to follow than a grid sliding under the eye every step, and cheaper to redraw). The cursor
    keeps at least ``window // 2`` steps of history on its left once past the start::

        window 8:  steps 0..11 -> 0..16,  12..19 -> 8..24,  20..27 -> 16..32, ...
    """
    if window is None:
        return 0, view.num_steps - 1
    # many slots: a narrower window keeps the grid within MAX_GRID_CELLS cells
    window = max(2, min(window, MAX_GRID_CELLS // (2 * view.header["config"]["max_num_seqs"])))
    lo = max(0, (step - window // 2) // window * window)
    return lo, lo + 2 * window


def grid_xaxis(lo: int, hi: int) -> dict:
    """The slot grid's x axis for steps ``lo..hi``."""
    return dict(title="step", range=[lo - 0.5, hi + 0.5], dtick=1 if hi - lo <= 16 else 5, tickangle=0)


def grid_title(view: TraceView, step: int) -> str:
    """The slot grid's title with its legend of patterns (dots, drafts verified, only for a speculative trace)."""
    drafts = ", · drafts" if view.header["config"].get("speculative_config") else ""
    legend = f"/ prefill, + recompute, solid decode{drafts}, x padding"
    return f"{esc(view.policy)}: slots at step {view.step_number(step)} ({legend})"


def grid_cells(view: TraceView, lo: int, hi: int) -> list[Cell]:
    """The cells of steps ``lo..hi`` (positions), in step order."""
    return [c for k in range(lo, min(hi, view.num_steps - 1) + 1) for c in view.cells_at(k)]


def row_height(view: TraceView) -> int:
    """A slot row's height in px: 34, thinner past 16 slots (a server's ``max_num_seqs``)."""
    n = view.header["config"]["max_num_seqs"]
    return 34 if n <= 16 else max(6, 544 // n)


def grid_bars(view: TraceView, cells: list[Cell], row: int) -> list[dict]:
    """The slot grid's bars as plotly bar dicts (one per cell kind present), for ``cells``; ``row``: the row
    height in px (below 20 the cells lose their text). ``slot_grid`` draws them; the player's payload sends them."""
    out: list[dict] = []
    for kind in PATTERN:
        group = [c for c in cells if c.kind == kind]
        if not group:
            continue
        out.append(
            dict(
                type="bar",
                x=[1] * len(group),
                base=[c.step - 0.5 for c in group],
                y=[f"slot {c.slot}" for c in group],
                orientation="h",
                name=kind,
                text=[esc(view.label(c.request_id)) for c in group],
                textposition="inside" if row >= 20 else "none",
                insidetextanchor="middle",
                textfont=dict(size=10),
                textangle=0,
                marker=dict(
                    color=[PADDING_COLOR if kind == "padding" else view.colors[c.request_id] for c in group],
                    pattern=hatch(kind),
                    line=dict(width=1, color="white"),
                ),
                customdata=[
                    [esc(c.request_id), view.step_number(c.step), c.num_tokens, _token_label(c)] for c in group
                ],
                hovertemplate="step %{customdata[1]} · %{customdata[0]} "
                + kind
                + (" (padding row)" if kind == "padding" else ", %{customdata[2]} tokens")
                + "<br>sampled: %{customdata[3]}<extra></extra>",
            )
        )
    return out


def slot_grid(
    view: TraceView, step: int, window: int | None = None, span: tuple[int, int] | None = None, bars: bool = True
) -> go.Figure:
    """Cell-level slot grid around ``step``: one cell per (slot, step), labelled with its request; hovering a cell
    shows what it computed and the token sampled there. The column of ``step`` is highlighted.

    ``window``: show ``2 * window + 1`` steps around ``step`` (see ``grid_range``; None: all steps); ``span``: the
    cells of steps ``lo..hi`` instead (the player's loaded steps). With many slots (a vLLM server's ``max_num_seqs``)
    rows get thinner and cells lose their text (hover keeps it). ``bars=False``: the layout only (the player's payload
    takes the cells from ``grid_bars``, plain dicts, without plotly's validation).
    """
    slots = [f"slot {i}" for i in range(view.header["config"]["max_num_seqs"])]
    lo, hi = span if span is not None else grid_range(view, step, window)
    cells, row = grid_cells(view, lo, hi) if bars else [], row_height(view)
    fig = go.Figure([go.Bar(t) for t in grid_bars(view, cells, row)] if bars else [])
    fig.add_vrect(x0=step - 0.5, x1=step + 0.5, fillcolor="rgba(213,94,0,0.15)", line=dict(color="#D55E00", width=2))
    fig.update_layout(
        barmode="overlay",
        bargap=0.1,
        height=110 + row * len(slots),
        margin=dict(l=10, r=10, t=40, b=30),
        title=grid_title(view, step),
        xaxis={**grid_xaxis(lo, hi), **view.step_ticks(lo, hi)},
        yaxis=dict(
            type="category",
            categoryorder="array",
            categoryarray=slots[::-1],
            range=[-0.5, len(slots) - 0.5],
            showticklabels=row >= 12,
        ),
        showlegend=False,
    )
    return fig
