"""The block map of a large pool (a vLLM server's tens of thousands of blocks): one cell per group of consecutive
blocks, so the figure stays a few hundred markers whatever the pool size.

A cell takes the colour of the request holding most of its blocks (grey when several requests share it about
evenly, light grey when all its blocks are free), its opacity grows with the share of its blocks in use, a thick
outline says one of its blocks was allocated in this step, and ``✕`` / ``⟲`` say one was released at the end of
the step or freed by a preemption. Hover lists the owners and counts. Built from ``kv.block_map_cells``, so a
group counts exactly the blocks the full map would draw.
"""

from __future__ import annotations

from collections import Counter

import plotly.graph_objects as go

from steplog.view import FREE_COLOR, TraceView

MAX_CELLS = 512
COLUMNS = 32
MIXED_COLOR = "#6E6E6E"


def group_size(num_blocks: int) -> int:
    """Blocks per cell: the smallest group that keeps the map within ``MAX_CELLS`` cells."""
    return max(1, -(-num_blocks // MAX_CELLS))


def block_groups(cells: list[dict]) -> list[dict]:
    """One dict per group of ``kv.block_map_cells``: ``first``, ``last`` (block ids), ``used``, ``owners``
    (Counter), ``new``, ``releasing``, ``preempted``."""
    size = group_size(len(cells))
    groups = []
    for start in range(0, len(cells), size):
        part = cells[start : start + size]
        owners = Counter(c["owner"] for c in part if c["owner"])
        groups.append(
            {
                "first": start,
                "last": start + len(part) - 1,
                "used": sum(owners.values()),
                "owners": owners,
                "new": any(c["new"] for c in part),
                "releasing": any(c["releasing"] for c in part),
                "preempted": any(c["preempted_from"] for c in part),
            }
        )
    return groups


def _color(view: TraceView, owners: Counter) -> str:
    if not owners:
        return FREE_COLOR
    (top, n), total = owners.most_common(1)[0], sum(owners.values())
    return view.colors[top] if n * 2 >= total else MIXED_COLOR


def grouped_block_map(view: TraceView, step: int, cells: list[dict]) -> go.Figure:
    """The pool at ``step`` (``cells``: ``kv.block_map_cells(view, step)``) in groups of ``group_size`` blocks."""
    groups = block_groups(cells)
    size = group_size(view.steps[step]["kv"]["num_blocks"])
    hovers, texts = [], []
    for g in groups:
        who = ", ".join(f"{view.label(r)} {n}" for r, n in g["owners"].most_common(5))
        more = len(g["owners"]) - 5
        hovers.append(
            f"blocks {g['first']}–{g['last']}: {g['used']} used"
            + (f" ({who}{f', +{more} more' if more > 0 else ''})" if who else "")
            + (", some released at the end of this step" if g["releasing"] else "")
            + (", some freed by a preemption" if g["preempted"] else "")
        )
        texts.append(("✕" if g["releasing"] else "") + ("⟲" if g["preempted"] else ""))
    fig = go.Figure()
    fig.add_scatter(
        x=[i % COLUMNS for i in range(len(groups))],
        y=[i // COLUMNS for i in range(len(groups))],
        mode="markers+text",
        text=texts,
        hovertext=hovers,
        hoverinfo="text",
        textfont=dict(size=9, color="#111"),
        marker=dict(
            symbol="square",
            size=16,
            color=[_color(view, g["owners"]) for g in groups],
            opacity=[0.35 + 0.65 * g["used"] / (g["last"] - g["first"] + 1) if g["used"] else 1.0 for g in groups],
            line=dict(
                width=[3 if g["new"] else 0.5 for g in groups],
                color=["#D55E00" if g["new"] else "#888" for g in groups],
            ),
        ),
    )
    kv = view.steps[step]["kv"]
    rows = -(-len(groups) // COLUMNS)
    fig.update_layout(
        title=f"{view.policy}: KV blocks at step {step}: {kv['num_used_blocks']}/{kv['num_blocks']} used "
        f"(one cell = {size} blocks; darker = fuller)",
        height=90 + 22 * rows,
        margin=dict(l=10, r=10, t=40, b=10),
        showlegend=False,
        xaxis=dict(visible=False, range=[-0.6, COLUMNS - 0.4]),
        yaxis=dict(visible=False, autorange="reversed", range=[rows - 0.4, -0.6]),
    )
    return fig
