"""The Metrics page's step-cost chart: each step's time against the tokens it computed (decode-only steps apart from
steps with a prompt chunk), the fitted fixed cost per step, and the cost per token as the decode batch grows.

The weight-streaming floor (``visuals.weight_floor``: weight bytes / read bandwidth, as ``python -m engine bench``
measured them) is drawn where the trace ran on the model, dtype and device the benchmark measured.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from steplog.step_cost import StepCost, decode_by_batch, fit, step_costs
from steplog.view import TraceView
from visuals.metrics import run_color
from visuals.packing import figure_json
from visuals.weight_floor import floor_ms_text, floor_of


def step_cost_figure(views: dict[str, TraceView]) -> go.Figure:
    """Left: step time (ms) against tokens computed, per run, decode-only steps as dots and steps with a prompt
    chunk as crosses, with each run's fitted line and the floor where known. Right: the median decode-only step's
    time per token (ms) against the requests decoding in it."""
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        subplot_titles=("step time against tokens computed", "decode: time per token as the batch grows"),
    )
    for i, (label, view) in enumerate(views.items()):
        _add_run(fig, label, view, run_color(label, i))
    _floor(fig, next(iter(views.values())))
    fig.update_layout(height=420, barmode="group", margin={"t": 40, "b": 40}, legend={"orientation": "h", "y": -0.2})
    fig.update_xaxes(title_text="tokens computed in the step", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="requests decoding (decode-only steps)", type="category", row=1, col=2)
    fig.update_yaxes(title_text="ms per token (median step)", rangemode="tozero", row=1, col=2)
    return fig


def _add_run(fig: go.Figure, label: str, view: TraceView, color: str) -> None:
    """One run's steps (decode-only dots, prompt-chunk crosses), its fitted line and its per-token bars."""
    costs = step_costs(view)
    _add_points(fig, label, view, color, costs)
    by_batch = decode_by_batch(costs)
    fig.add_trace(
        go.Bar(
            x=[str(r) for r in by_batch],
            y=[g["per_token_s"] * 1e3 for g in by_batch.values()],
            marker_color=color,
            name=f"{label}: ms per token",
            hovertemplate="%{x} decoding: %{y:.1f} ms per token<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=2,
    )


def _add_points(fig: go.Figure, label: str, view: TraceView, color: str, costs: list[StepCost]) -> None:
    """The steps as points (ms against tokens computed: decode-only dots, prompt-chunk crosses) and the fitted line,
    in the figure's first panel."""
    prefix = f"{label}: " if label else ""
    for decode, symbol, name in ((True, "circle", "decode only"), (False, "x", "with a prompt chunk")):
        pts = [c for c in costs if c["decode_only"] == decode]
        fig.add_trace(
            go.Scatter(
                x=[c["tokens"] for c in pts],
                y=[c["seconds"] * 1e3 for c in pts],
                mode="markers",
                marker={"color": color, "symbol": symbol, "size": 6, "opacity": 0.6},
                name=f"{prefix}{name}",
                hovertemplate="step %{customdata}: %{x} tokens, %{y:.1f} ms<extra></extra>",
                customdata=[view.step_number(c["step"]) for c in pts],
            ),
            row=1,
            col=1,
        )
    line = fit(costs)
    if line:
        top = max(c["tokens"] for c in costs)
        fig.add_trace(
            go.Scatter(
                x=[0, top],
                y=[line["fixed_s"] * 1e3, (line["fixed_s"] + line["per_token_s"] * top) * 1e3],
                mode="lines",
                line={"color": color, "dash": "dot"},
                name=f"{prefix}{line['fixed_s'] * 1e3:.0f} ms + {line['per_token_s'] * 1e3:.2f} ms/token",
            ),
            row=1,
            col=1,
        )


def _floor(fig: go.Figure, view: TraceView) -> None:
    floor = floor_of(view.header)
    if floor is None:
        return
    fig.add_hline(
        y=floor["seconds"] * 1e3,
        line={"color": "#555", "dash": "dash", "width": 1},
        row=1,
        col=1,
        annotation_text=f"weight-streaming floor {floor_ms_text(floor['seconds'])}: {floor['source'].replace('`', '')}",
        annotation_position="top left",
        annotation_font_size=11,
    )


def step_cost_sentence(views: dict[str, TraceView]) -> str:
    """One sentence per run from the measured figures: one decode row against the most rows, per token."""
    parts = []
    for label, view in views.items():
        by_batch = decode_by_batch(step_costs(view))
        if len(by_batch) < 2:
            continue
        few, many = min(by_batch), max(by_batch)
        a, b = by_batch[few], by_batch[many]
        parts.append(
            f"{label}: a decode step of {few} request{'s' * (few > 1)} took {a['median_s'] * 1e3:.0f} ms (median of "
            f"{a['steps']}), one of {many} {b['median_s'] * 1e3:.0f} ms: a token cost "
            f"{a['per_token_s'] * 1e3:.0f} ms then and {b['per_token_s'] * 1e3:.0f} ms with {many} in the batch"
        )
    return "; ".join(parts) + "." if parts else ""


PLAYER_TITLE = "What a step costs: its time against the tokens it computed (ring: this step)"


def step_cost_player(view: TraceView, color: str = "#0072B2") -> dict | None:
    """The step-cost chart for the browser player: ``{figure, points, title}``, the figure drawn once (the steps as
    points, the fitted line ms = fixed + per-token x tokens, the weight-streaming floor where known) and ``points[k]``
    step k's ``[tokens, ms]`` (None for a step that computed nothing or has no duration), where the player puts its
    ring. None when no step has a cost (a trace without durations)."""
    costs = step_costs(view)
    if not costs:
        return None
    fig = make_subplots(rows=1, cols=1)
    _add_points(fig, "", view, color, costs)
    _floor(fig, view)
    fig.update_layout(height=300, margin={"t": 10, "b": 40, "l": 50, "r": 10}, legend={"orientation": "h", "y": -0.3})
    fig.update_xaxes(title_text="tokens computed in the step", rangemode="tozero")
    fig.update_yaxes(title_text="ms", rangemode="tozero")
    points: list[list[float] | None] = [None] * view.num_steps
    for c in costs:
        points[c["step"]] = [c["tokens"], round(c["seconds"] * 1e3, 3)]
    return {"figure": figure_json(fig), "points": points, "title": PLAYER_TITLE}
