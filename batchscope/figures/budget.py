"""The token budget of one step: decode tokens, prefill-chunk tokens and speculative draft tokens per request, against
``max_num_batched_tokens``, with the unused part visible."""

from __future__ import annotations

import plotly.graph_objects as go

from batchscope.figures.safe import esc
from batchscope.figures.slots import hatch
from batchscope.steplog.spec_decode import num_drafts
from batchscope.steplog.view import FREE_COLOR, TraceView


def budget_segments(view: TraceView, step: int) -> list[dict]:
    """Segments of the budget bar in batch order, then ``unused``: ``{label, request_id, kind, num_tokens}``."""
    st = view.steps[step]
    segs: list[dict] = []
    for s in st["scheduled"]:
        rid, drafts = s["request_id"], num_drafts(s)
        kind = "recompute" if s.get("recompute") else s["kind"]
        segs.append(
            {
                "label": f"{esc(view.label(rid))} {s['kind']}",
                "request_id": rid,
                "kind": kind,
                "num_tokens": s["num_tokens"] - drafts,
            }
        )
        if drafts:  # speculative decoding: the drafts it verifies are budget tokens too
            kept = s.get("num_accepted_tokens")
            label = f"{esc(view.label(rid))} drafts" + ("" if kept is None else f" ({kept} of {drafts} accepted)")
            segs.append({"label": label, "request_id": rid, "kind": "speculative", "num_tokens": drafts})
    unused = view.header["config"]["max_num_batched_tokens"] - st["num_batched_tokens"]
    segs.append({"label": "unused", "request_id": None, "kind": "unused", "num_tokens": unused})
    return segs


def budget_traces(view: TraceView, step: int) -> list[dict]:
    """The bars of ``budget_bar`` at ``step`` as plain dicts (plotly bar properties), one per segment; the browser
    player draws the same dicts."""
    out: list[dict] = []
    for seg in budget_segments(view, step):
        rid = seg["request_id"]
        out.append(
            dict(
                type="bar",
                orientation="h",
                y=["tokens"],
                x=[seg["num_tokens"]],
                name=seg["label"],
                marker=dict(
                    color=view.colors[rid] if rid else FREE_COLOR,
                    pattern=hatch(seg["kind"]),
                    line=dict(color="white", width=1),
                ),
                text=[f"{esc(rid or '')} {seg['num_tokens']}".strip() if seg["num_tokens"] else ""],
                textposition="inside",
                insidetextanchor="middle",
                textangle=0,  # a short bar shrinks its label instead of turning it on its side
                hovertemplate=f"{seg['label']}: {seg['num_tokens']} tokens<extra></extra>",
            )
        )
    return out


def budget_title(view: TraceView, step: int) -> str:
    """The budget bar's title; a static batch's padding rows are named in it: they are not budget tokens, but each
    still runs a row of the forward pass (the weights are read for it), so their cost shows where the budget is."""
    st = view.steps[step]
    used, budget = st["num_batched_tokens"], view.header["config"]["max_num_batched_tokens"]
    pads = len(st["padding_slots"])
    padding = (
        f" + {pads} padding row{'s' if pads != 1 else ''} (finished members, still in the forward)" if pads else ""
    )
    return f"{view.policy}: token budget at step {step}: {used}/{budget} tokens{padding}"


def budget_bar(view: TraceView, step: int) -> go.Figure:
    """One horizontal stacked bar: hatched = prefill chunk, solid = decode token(s), grey = unused budget."""
    fig = go.Figure(data=budget_traces(view, step))
    fig.update_layout(
        barmode="stack",
        height=130,
        margin=dict(l=10, r=10, t=36, b=24),
        showlegend=False,
        title=budget_title(view, step),
        xaxis=dict(range=[0, view.header["config"]["max_num_batched_tokens"]], title="tokens"),
        yaxis=dict(visible=False),
    )
    return fig
