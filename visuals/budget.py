"""The token budget of one step: decode tokens and prefill-chunk tokens per request, against
``max_num_batched_tokens``, with the unused part visible."""

from __future__ import annotations

import plotly.graph_objects as go

from steplog.view import FREE_COLOR, TraceView
from visuals.safe import esc
from visuals.slots import hatch


def budget_segments(view: TraceView, step: int) -> list[dict]:
    """Segments of the budget bar in batch order, then ``unused``: ``{label, request_id, kind, num_tokens}``."""
    st = view.steps[step]
    segs: list[dict] = [
        {
            "label": f"{esc(s['request_id'])} {s['kind']}",
            "request_id": s["request_id"],
            "kind": "recompute" if s.get("recompute") else s["kind"],
            "num_tokens": s["num_tokens"],
        }
        for s in st["scheduled"]
    ]
    unused = view.header["config"]["max_num_batched_tokens"] - st["num_batched_tokens"]
    segs.append({"label": "unused", "request_id": None, "kind": "unused", "num_tokens": unused})
    return segs


def budget_bar(view: TraceView, step: int) -> go.Figure:
    """One horizontal stacked bar: hatched = prefill chunk, solid = decode token(s), grey = unused budget."""
    fig = go.Figure()
    budget = view.header["config"]["max_num_batched_tokens"]
    for seg in budget_segments(view, step):
        rid = seg["request_id"]
        color = view.colors[rid] if rid else FREE_COLOR
        fig.add_bar(
            orientation="h",
            y=["tokens"],
            x=[seg["num_tokens"]],
            name=seg["label"],
            marker=dict(color=color, pattern=hatch(seg["kind"]), line=dict(color="white", width=1)),
            text=[f"{esc(rid or '')} {seg['num_tokens']}".strip() if seg["num_tokens"] else ""],
            textposition="inside",
            insidetextanchor="middle",
            hovertemplate=f"{seg['label']}: {seg['num_tokens']} tokens<extra></extra>",
        )
    used = view.steps[step]["num_batched_tokens"]
    fig.update_layout(
        barmode="stack",
        height=130,
        margin=dict(l=10, r=10, t=36, b=24),
        showlegend=False,
        title=f"{esc(view.policy)}: token budget at step {view.step_number(step)}: {used}/{budget} tokens",
        xaxis=dict(range=[0, budget], title="tokens"),
        yaxis=dict(visible=False),
    )
    return fig
