"""vLLM's Prometheus metrics over the steps of a trace (``steplog.gauges`` computes them; this only draws).

Four panels on one step axis: requests running and waiting; KV-cache usage and the prefix-cache hit rate (percent);
the tokens of each step as ``vllm:iteration_tokens_total`` observes them; the preemption counter. The last shape is
a dotted vertical line at the current step, which the browser player turns into its cursor (``views.js``).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from steplog import gauges as g
from steplog.view import TraceView
from visuals.safe import esc

# (metric, legend label, panel row, colour, scale): the label keeps vLLM's name, so it can be found on a dashboard
SERIES = (
    (g.RUNNING, "vllm:num_requests_running", 1, "#0072B2", 1),
    (g.WAITING, "vllm:num_requests_waiting", 1, "#E69F00", 1),
    (g.KV_USAGE, "vllm:kv_cache_usage_perc × 100", 2, "#009E73", 100),
    (g.HIT_RATE, "prefix-cache hit rate (vLLM's log line)", 2, "#CC79A7", 100),
    (g.ITERATION_TOKENS, "vllm:iteration_tokens_total (this step)", 3, "#56B4E9", 1),
    (g.PREEMPTIONS, "vllm:num_preemptions (cumulative)", 4, "#D55E00", 1),
)
PANELS = ("requests", "percent", "tokens", "preemptions")
FONT = 12  # px: legible at 1280x720


def _add_series(fig: go.Figure, view: TraceView, values: dict[str, list]) -> None:
    """One trace per metric, on its panel: bars for the per-step tokens, steps for counts, lines for fractions."""
    steps = [view.step_number(k) for k in range(view.num_steps)]
    for name, label, row, color, scale in SERIES:
        ys = [None if y is None else round(y * scale, 4) for y in values[name]]
        common = dict(x=list(range(view.num_steps)), y=ys, name=esc(label), customdata=steps, marker_color=color)
        hover = f"step %{{customdata}}: %{{y}}<extra>{esc(label)}</extra>"
        if name == g.ITERATION_TOKENS:
            fig.add_bar(**common, hovertemplate=hover, row=row, col=1)
            continue
        shape = "hv" if name in (g.PREEMPTIONS, g.RUNNING, g.WAITING) else "linear"
        line = dict(color=color, width=2, shape=shape)
        fig.add_scatter(**common, mode="lines", line=line, hovertemplate=hover, row=row, col=1)


def _count_ticks(values: list[list]) -> dict:
    """Whole-number ticks (at most about 4) for a panel of counts."""
    top = max([v for vs in values for v in vs if v is not None], default=0)
    return {"dtick": max(1, -(-top // 4)), "tick0": 0}


def gauge_figure(view: TraceView, step: int | None = None, num_steps: int | None = None) -> go.Figure:
    """The gauges of ``view`` at every step position (x: positions, labelled with step numbers), a cursor at
    ``step``. ``num_steps``: the length of the shared step axis (default the trace's)."""
    values = g.gauges(view)
    n = num_steps or view.num_steps
    fig = make_subplots(rows=len(PANELS), cols=1, shared_xaxes=True, vertical_spacing=0.05)
    _add_series(fig, view, values)
    note = g.unknown_note(view)
    title = f"{esc(view.policy)}: vLLM's metrics as the server would export them after each step"
    fig.update_layout(
        height=520 if note else 500,
        margin=dict(l=10, r=10, t=125 if note else 105, b=30),
        title=dict(
            text=title + (f"<br><sub>not known: {esc(note)}</sub>" if note else ""),
            font=dict(size=14),
            y=1,
            yref="container",
            yanchor="top",
            pad=dict(t=8),
        ),
        font=dict(size=FONT),
        bargap=0.1,
        legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0, xanchor="left", font=dict(size=FONT)),
    )
    ticks = {
        1: _count_ticks([values[g.RUNNING], values[g.WAITING]]),
        2: {"range": [0, 100]},
        4: _count_ticks([values[g.PREEMPTIONS]]),
    }
    for row, axis_title in enumerate(("requests", "%", "tokens", "preempted"), start=1):
        font = dict(size=FONT)
        fig.update_yaxes(title_text=axis_title, title_font=font, tickfont=font, rangemode="tozero", row=row, col=1)
        fig.update_yaxes(**ticks.get(row, {}), row=row, col=1)
    fig.update_xaxes(range=[-0.5, n - 0.5], tickfont=dict(size=FONT), **view.step_ticks(0, n - 1))
    fig.update_xaxes(title_text="step", title_font=dict(size=FONT), row=len(PANELS), col=1)
    if step is not None:
        cursor = dict(color="#D00", width=2, dash="dot")
        fig.add_shape(type="line", x0=step, x1=step, xref="x", yref="paper", y0=0, y1=1, line=cursor)
    return fig
