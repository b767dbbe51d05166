"""A server's metrics over the steps of a trace (``batchscope.steplog.gauges`` computes them; this only draws), under
the names the trace's engine family exports them with (``batchscope.steplog.metric_names``: vLLM's, SGLang's, TGI's
or TensorRT-LLM's).

Panels on one step axis, per family (``DRAWN_BY``). vLLM and SGLang: requests running and waiting; KV-cache (token
slot) usage and the prefix-cache hit rate (percent); the tokens of each step (``vllm:iteration_tokens_total``'s
observation, the increase of ``sglang:realtime_tokens_total``); the preemption (retraction) counter. TGI: its batch
and queue gauges with each new batch's size; the running batch's KV tokens under the pool's; its prefill calls and
concatenations. TensorRT-LLM: its active list, queue and scheduled batch; KV-block utilization; the context tokens and
the pauses of each iteration. The last shape is a dotted vertical line at the current step, which the browser player
turns into its cursor (``views.js``).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from batchscope.figures.safe import esc
from batchscope.figures.timeline import plot_left
from batchscope.steplog import gauges as g
from batchscope.steplog.metric_names import CADENCE, FAMILIES, TITLES, family
from batchscope.steplog.view import TraceView

# (metric key, what the legend adds to its name, panel row, colour, scale)
DRAWN = (
    (g.RUNNING, "", 1, "#0072B2", 1),
    (g.WAITING, "", 1, "#E69F00", 1),
    (g.KV_USAGE, " × 100", 2, "#009E73", 100),
    (g.HIT_RATE, " × 100", 2, "#CC79A7", 100),
    (g.ITERATION_TOKENS, " (this step)", 3, "#56B4E9", 1),
    (g.PREEMPTIONS, " (cumulative)", 4, "#D55E00", 1),
)
PANELS = ("requests", "percent", "tokens", "preemptions")
DRAWN_BY = {
    "vllm": DRAWN,
    "sglang": DRAWN,
    "tgi": (
        (g.RUNNING, "", 1, "#0072B2", 1),
        (g.WAITING, "", 1, "#E69F00", 1),
        ("next_batch_size", " (this step)", 1, "#56B4E9", 1),
        ("batch_max_tokens", "", 2, "#009E73", 1),
        ("max_total_tokens", "", 2, "#999999", 1),
        ("prefill_calls", " (cumulative)", 3, "#CC79A7", 1),
        ("concat", " (cumulative)", 3, "#D55E00", 1),
    ),
    "trtllm": (
        (g.RUNNING, "", 1, "#0072B2", 1),
        (g.WAITING, "", 1, "#E69F00", 1),
        ("scheduled", "", 1, "#CC79A7", 1),
        (g.KV_USAGE, " × 100", 2, "#009E73", 100),
        ("context_tokens", " (this step)", 3, "#56B4E9", 1),
        ("paused", " (this step)", 4, "#D55E00", 1),
    ),
}
# Each family's panel titles (the last of vLLM's and SGLang's: their table's word for the counter), and the series
# drawn as bars (one observation of the step) rather than as lines
AXES = {"tgi": ("requests", "tokens", "calls"), "trtllm": ("requests", "%", "tokens", "pauses")}
BARS = {g.ITERATION_TOKENS, "next_batch_size", "context_tokens", "paused"}
FONT = 12  # px: legible at 1280x720


def series(view: TraceView) -> list[tuple[str, str, int, str, int]]:
    """(metric key, legend label, panel row, colour, scale) of each drawn metric: the label is the name the trace's
    engine family exports it with (``batchscope.steplog.metric_names``), so it can be found on a dashboard."""
    kin = family(view.header)
    table = FAMILIES[kin]
    return [(key, table[key][0] + more, row, color, scale) for key, more, row, color, scale in DRAWN_BY[kin]]


def _axes(kin: str) -> tuple[str, ...]:
    """The family's panel titles, top to bottom."""
    return AXES.get(kin) or ("requests", "%", "tokens", FAMILIES[kin][g.PREEMPTIONS][2])


def _add_series(fig: go.Figure, view: TraceView, values: dict[str, list]) -> None:
    """One trace per metric, on its panel: bars for the per-step tokens, steps for counts, lines for fractions."""
    steps = [view.step_number(k) for k in range(view.num_steps)]
    for name, label, row, color, scale in series(view):
        ys = [None if y is None else round(y * scale, 4) for y in values[name]]
        common = dict(x=list(range(view.num_steps)), y=ys, name=esc(label), customdata=steps, marker_color=color)
        hover = f"step %{{customdata}}: %{{y}}<extra>{esc(label)}</extra>"
        if name in BARS:
            fig.add_bar(**common, hovertemplate=hover, row=row, col=1)
            continue
        shape = "linear" if name in (g.KV_USAGE, g.HIT_RATE) else "hv"
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
    kin = family(view.header)
    axes = _axes(kin)
    fig = make_subplots(rows=len(axes), cols=1, shared_xaxes=True, vertical_spacing=0.05)
    _add_series(fig, view, values)
    unknown = g.unknown_note(view)
    notes = [f"not known: {unknown}" if unknown else "", CADENCE[kin] or ""]
    note = "; ".join(esc(x) for x in notes if x)
    title = f"{esc(view.policy)}: {TITLES[kin]}"
    fig.update_layout(
        height=520 if note else 500,
        margin=dict(l=plot_left(view), r=10, t=125 if note else 105, b=30),
        title=dict(
            text=title + (f"<br><sub>{note}</sub>" if note else ""),
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
    drawn = series(view)
    for row, axis_title in enumerate(axes, start=1):
        font = dict(size=FONT)
        fig.update_yaxes(title_text=axis_title, title_font=font, tickfont=font, rangemode="tozero", row=row, col=1)
        fig.update_yaxes(automargin=False, row=row, col=1)  # the timeline's left margin: aligned step axes
        if axis_title == "%":
            fig.update_yaxes(range=[0, 100], row=row, col=1)
        elif axis_title != "tokens":  # whole-number ticks for a panel of counts
            fig.update_yaxes(**_count_ticks([values[key] for key, _, r, *_ in drawn if r == row]), row=row, col=1)
    fig.update_xaxes(range=[-0.5, n - 0.5], tickfont=dict(size=FONT), **view.step_ticks(0, n - 1))
    fig.update_xaxes(title_text="step", title_font=dict(size=FONT), row=len(axes), col=1)
    if step is not None:
        cursor = dict(color="#D00", width=2, dash="dot")
        fig.add_shape(type="line", x0=step, x1=step, xref="x", yref="paper", y0=0, y1=1, line=cursor)
    return fig
